"""The strip-and-rediscover bench wiring shared by ``bench coq`` and ``bench lean``.

Why it exists: both proof benches are one thing with a different checker. A proof bench is a run of
the research loop under the per-theorem policy (rrma/run/theorems.py): this module turns the bench's
command line into that run's task and prints what the run did. The task names the oracle (``coq`` or
``lean``) with params that say everything a fresh process needs to rebuild it (the stripped files,
the selected theorems in order, warm or cold, the preload): so ``rrma-tui resume RUN`` continues a
killed bench, ``--executor ray`` prepares the oracle on each worker, ``rrma-tui stop|pause RUN``
reach its driver, and identical (theorem, proof) pairs come from the outcome cache.

Usage from a bench module (``benches/<prover>/bench.py``)::

    def add_arguments(parser):          # the CLI calls it when present
        add_proof_arguments(parser)

    def run(args) -> int:
        tasks = load_tasks(args.source)  # the stripped theorems (the bench's selection reads them)
        return run_proof_bench(args, tasks, "coq", oracle_kind="coq", oracle_params={"sources": [...]})

The run's settings: ``loop.policy: per-theorem``, ``loop.attempts_per_theorem`` (``--attempts``),
``loop.theorem_seconds`` (``--theorem-seconds``), ``loop.red_team`` (``--red-team``: the known cheats
of :data:`RED_TEAM`), ``loop.isolated`` (``--isolated``: agents see neither the blackboard nor each
other's trials, the control arm), ``budget.trial_seconds`` (``--check-seconds``), ``budget.max_trials``
(``--trials``: over all theorems; default no limit beyond the per-theorem budgets).

Output: a line per theorem as it is done (unless ``--quiet``), the summary table, the greppable
``solved: a/b``, ``file X: a/b``, ``cheating_attempts_rejected: N``, ``checks: ...``, ``run: DIR``
lines, and ``bench_report.json`` in the run (the summary plus the original proofs: written by the
harness after the run, never readable by an agent). The exit code is 0 when the bench ran (whatever
it solved), 1 when the run ended in an error, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from cli.options import make_executor_factory
from cli.output import CliError
from oracle.proof_common import ProofChecker, TheoremTask, Verdict, theorem_keys, theorem_views
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.proofs_summary import ALL, DIFFICULTY_COLUMNS, difficulty_rows
from rrma.run.theorems import Theorem, TheoremPolicy
from rrma.task import MAX_SECONDS, TaskConfig, task_from_dict
from rrma.text import SafeConsole, without_controls
from rrma.trial import Outcome, Status

console = SafeConsole(emoji=False)  # agent proofs and checker messages print literally and inert

DEFAULT_ATTEMPTS = 40
DEFAULT_THEOREM_SECONDS = 30.0
DEFAULT_CHECK_SECONDS = 10.0
DEFAULT_AGENTS = 2
# --agent NAME: the agent backend, and how many agents by default (one search agent: a second one
# would repeat the same deterministic search)
AGENT_BACKENDS: dict[str, tuple[str, int]] = {"portfolio": ("tactic-portfolio", DEFAULT_AGENTS),
                                              "search": ("proof-search", 1)}


@dataclass(frozen=True)
class KnownCheat:
    """A cheat the red team submits, and the words a verdict must say to have caught *this* cheat
    (a rejection for another reason, say a timeout, proves nothing about the defence)."""

    proof: str
    names: str  # a fragment of the expected Verdict.reason


# Known cheats per prover, used by --red-team: every one must be rejected with cheat=True, for its reason.
RED_TEAM: dict[str, list[KnownCheat]] = {
    "coq": [
        KnownCheat("admit.", "uses admit"),
        KnownCheat("Admitted.", "uses Admitted"),
        KnownCheat("exact I. Qed. Theorem other : True.", "ends the proof with Qed"),
        KnownCheat("Axiom cheat : forall P : Prop, P. apply cheat.", "declares an axiom (Axiom)"),
        KnownCheat("Unset Guard Checking. auto.", "kernel-skipping option (Unset Guard Checking)"),
        KnownCheat("Abort.", "aborts the proof (Abort)"),
        KnownCheat("Require Import Classical. auto.", "imports a library inside the proof (Require)"),
        KnownCheat("Declare ML Module \"evil_plugin\". auto.", "loads an ML plugin (Declare ML Module)"),
        KnownCheat("native_compute. reflexivity.", "uses native_compute"),
        KnownCheat("Lemma helper : False. Admitted.", "a new Lemma declaration"),
        KnownCheat("Proof with admit. idtac...", "uses admit"),  # the tactic of `Proof with` is screened too
        # these two pass the lexical screen: Coq's kernel refuses them at Qed
        KnownCheat("exact_no_check tt.", "the kernel refused the proof term at Qed"),
        KnownCheat("change_no_check unit. exact tt.", "the kernel refused the proof term at Qed"),
    ],
    "lean": [
        KnownCheat("sorry", "forbidden in proof (sorry)"),
        KnownCheat("by sorry", "forbidden in proof (sorry)"),
        KnownCheat("by\n  exact sorry", "forbidden in proof (sorry)"),
        KnownCheat("by native_decide", "forbidden in proof (native evaluation)"),
        KnownCheat("by\n  simp\n\naxiom cheat : False", "forbidden in proof (declaration keyword): `axiom`"),
        KnownCheat("by\n  set_option debug.skipKernelTC true in\n  decide", "forbidden in proof (set_option)"),
        KnownCheat('by\n  exact (include_str "Theorems/Logic.lean")', "forbidden in proof (reads a file)"),
    ],
}


def add_proof_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every proof bench takes (the CLI's common ones, --trials and --executor included, come from cli.main)."""
    parser.add_argument("--source", type=Path, action="extend", nargs="+", metavar="FILE_OR_DIR",
                        help="strip and run these files (a directory: every file in it, recursively) instead "
                             "of the bench's own suite (repeatable)")
    parser.add_argument("--agent", choices=sorted(AGENT_BACKENDS), action="append",
                        help="the offline prover: portfolio (closed tactic scripts) or search (best-first "
                             "proof-state search); repeat it to compare both on the same theorems (a run each)")
    parser.add_argument("--attempts", type=int, help=f"attempts per theorem (default {DEFAULT_ATTEMPTS})")
    parser.add_argument("--theorem-seconds", type=float,
                        help=f"wall-clock budget per theorem (default {DEFAULT_THEOREM_SECONDS:g})")
    parser.add_argument("--check-seconds", type=float,
                        help=f"timeout of one check (default {DEFAULT_CHECK_SECONDS:g})")
    parser.add_argument("--only", action="append", help="run only this theorem (repeatable)")
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard", "unknown"],
                        help="run only theorems of this difficulty")
    parser.add_argument("--red-team", action="store_true", default=None,
                        help="also submit one known cheating proof per theorem (must be rejected)")
    parser.add_argument("--limit", type=int, help="run only the first N theorems")
    parser.add_argument("--isolated", action="store_true", default=None,
                        help="control arm: agents do not see the blackboard (nor each other's trials)")


def standalone_main(prog: str, description: str | None, add_arguments: Any, run: Any,
                    argv: list[str] | None = None) -> int:
    """``python -m benches.<prover>.bench``: the bench without the rrma-tui CLI."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--agents", type=int)
    parser.add_argument("--backend")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--trials", type=int, help="max trials over all theorems (budget.max_trials)")
    parser.add_argument("--executor", choices=["local", "ray"], default="local")
    parser.add_argument("--ray-address")
    parser.add_argument("--quiet", action="store_true")
    return int(run(parser.parse_args(argv)))


def _opt(args: argparse.Namespace, name: str, default: Any) -> Any:
    value = getattr(args, name, None)
    return default if value is None else value


def feedback_of(verdict: Verdict, limit: int = 4000) -> str:
    """What an agent is told about a check (see :meth:`Verdict.feedback`)."""
    return verdict.feedback(limit)


class CheckerOracle(Oracle):
    """An oracle over any :class:`~oracle.proof_common.ProofChecker` and its stripped theorems: a bench
    or a test with a checker of its own (a scripted one, a recorded Lean REPL) runs through the loop.

    It is handed to the run as an object, so it runs on the local executor only: nothing can rebuild
    it from params (a Ray worker, ``rrma-tui resume``); the benches' own runs use the ``coq`` and
    ``lean`` oracles, which can be rebuilt.
    """

    kind = "proof-checker"

    def __init__(self, checker: ProofChecker, tasks: Sequence[TheoremTask] | dict[str, TheoremTask]) -> None:
        named = tasks if isinstance(tasks, dict) else dict(zip(theorem_keys(list(tasks)), tasks, strict=True))
        super().__init__({"theorems": list(named)}, metric="solved", direction="maximize")
        self.checker = checker
        self.tasks = dict(named)

    def theorems(self) -> list[dict[str, Any]]:
        return theorem_views(self.tasks)

    def evaluate(self, ctx: EvalContext) -> Outcome:
        task = self.tasks.get(ctx.proposal.theorem or "")
        if task is None:
            return Outcome(status=Status.invalid, feedback=f"unknown theorem {ctx.proposal.theorem!r}")
        proof = ctx.proposal.proof
        if proof is None or not proof.strip():
            verdict = Verdict(False, "the proposal has no proof")
            status = Status.invalid
        else:
            verdict = self.checker.check(task, proof, timeout_s=ctx.budget.seconds)
            status = Status(verdict.status)
        return Outcome(status=status, score=1.0 if verdict.accepted else None,
                       metrics={"accepted": verdict.accepted, "reason": verdict.reason, "cheat": verdict.cheat,
                                "difficulty": task.difficulty, "goals": len(verdict.goals)},
                       feedback=feedback_of(verdict),
                       log=json.dumps(verdict.to_json(), indent=1) if verdict.messages else "",
                       seconds=verdict.seconds)

    def close(self) -> None:
        return None  # the checker is its owner's to close (a bench may run it once per --agent)


# ----------------------------------------------------------------------------- the task


def select(args: argparse.Namespace, tasks: list[TheoremTask], bench_name: str) -> dict[str, TheoremTask] | None:
    """The theorems ``--only``, ``--difficulty`` and ``--limit`` keep, under the names the run knows
    them by (:func:`~oracle.proof_common.theorem_keys`: ``name (file.v:line)`` for a name that occurs
    twice, in two files or in two Modules of one file); None (said on the console) when none.
    ``--only`` takes either form; a repeated plain name picks every theorem of that name."""
    named = dict(zip(theorem_keys(tasks), tasks, strict=True))
    only = set(_opt(args, "only", []) or [])
    unknown = only - set(named) - {t.name for t in tasks}
    if unknown:
        console.print(Text(f"{bench_name}: unknown theorem(s): {', '.join(sorted(unknown))}", style="red"))
        return None
    difficulty = _opt(args, "difficulty", None)
    selected = {key: t for key, t in named.items()
                if (not only or key in only or t.name in only) and (not difficulty or t.difficulty == difficulty)}
    limit = _opt(args, "limit", None)
    if limit is not None:
        selected = dict(list(selected.items())[: int(limit)])
    if not selected:
        console.print(f"[red]{bench_name}: no theorems to run[/red] (after --only/--difficulty/--limit filters)")
        return None
    return selected


def agent_params(args: argparse.Namespace, backend: str) -> dict[str, Any]:
    """The params of the run's agents of ``backend``: ``args.agent_params`` (every backend's), then the settings
    a bench gives only to the backends that take them, ``args.backend_params[backend]`` (the coq bench's
    ``--hammer`` to proof-search: the portfolio's params model refuses keys it does not read)."""
    only = dict(_opt(args, "backend_params", {})).get(backend, {})
    return {**dict(_opt(args, "agent_params", {})), **only}


def bench_task(args: argparse.Namespace, selected: dict[str, TheoremTask], bench_name: str, *, oracle_kind: str,
               oracle_params: dict[str, Any], base_dir: Path | None = None) -> TaskConfig:
    """The run's task: everything ``rrma-tui resume`` needs to rebuild the oracle and the agents."""
    attempts = int(_opt(args, "attempts", DEFAULT_ATTEMPTS))
    n_agents = max(1, int(_opt(args, "agents", DEFAULT_AGENTS)))
    backend = _opt(args, "backend", "tactic-portfolio")
    red_team = bool(_opt(args, "red_team", False))
    prover = next(iter(selected.values())).prover
    cheats = [{"proof": c.proof, "reason": c.names} for c in RED_TEAM.get(prover, [])] if red_team else []
    trials = _opt(args, "trials", None)
    data = {
        "name": f"bench-{bench_name}",
        "description": (f"Strip-and-rediscover: prove each stripped {prover} theorem. Give only the proof "
                        "body; the statement is fixed by the oracle."),
        "oracle": {"kind": oracle_kind, "params": {**oracle_params, "theorems": list(selected)}},
        "workspace": {"source": "no-workspace"},  # a proof is the whole proposal: no files
        "metric": {"name": "solved", "direction": "maximize"},
        "budget": {"trial_seconds": float(_opt(args, "check_seconds", DEFAULT_CHECK_SECONDS)),
                   "max_trials": int(trials) if trials is not None else (attempts + int(bool(cheats))) * len(selected),
                   "max_wall_seconds": MAX_SECONDS},  # the per-theorem budgets bound the run
        "loop": {"policy": "per-theorem", "attempts_per_theorem": attempts,
                 "theorem_seconds": float(_opt(args, "theorem_seconds", DEFAULT_THEOREM_SECONDS)),
                 "red_team": cheats, "isolated": bool(_opt(args, "isolated", False))},
        "agents": [{"name": f"{backend}-{i + 1}", "backend": backend, "model": _opt(args, "model", None),
                    "params": agent_params(args, backend)} for i in range(n_agents)],
        "seed": int(_opt(args, "seed", 0)),
    }
    return task_from_dict(data, source=f"bench {bench_name}", base_dir=base_dir)


# ----------------------------------------------------------------------------- the run


class _Progress:
    """A line per theorem as the run marks it done (the proof is agent text: printed literally)."""

    def __init__(self, task: TaskConfig, theorems: dict[str, TheoremTask], runs: Path, run_id: str,
                 quiet: bool) -> None:
        self.quiet = quiet
        self.state = RunState()
        self.store: RunStore | None = None
        self.dir = runs / run_id
        self.total = len(theorems)
        self.policy = TheoremPolicy([Theorem(key, t.difficulty) for key, t in theorems.items()], task.loop,
                                    [a.name for a in task.agents])
        self.done = 0
        self.why: dict[str, dict[str, Any]] = {}
        self.originals = {key: t.original_proof for key, t in theorems.items()}  # theorem -> the last search summary an agent recorded

    def __call__(self, event: Any) -> None:
        self.state.apply(event)
        if event.kind == "agent.turn":
            args = getattr(event.data, "args", None)
            if isinstance(args, dict) and args.get("theorem") and "result" in args:
                self.why[str(args["theorem"])] = dict(args)
        mark = getattr(event.data, "theorem", None) if event.kind == "note" else None
        if self.quiet or not isinstance(mark, dict) or mark.get("mark") != "done" or event.actor != "harness":
            return
        self.done += 1
        st = self.policy.status(self.state, str(mark.get("name")))
        solved = st.solved_by is not None
        how = ""
        if solved and st.solved_by is not None:
            rec = self.state.trials[st.solved_by]
            self.store = self.store or RunStore(self.dir)
            proof = self.store.get_json_blob(rec.proposal_blob).get("proof") if rec.proposal_blob else None
            how = f" by {rec.agent}: {proof!r}"
            if isinstance(proof, str) and st.name in self.originals:
                cmp = compare_proofs(proof, self.originals[st.name])
                how += f" [vs original: {cmp['relation']}, length ratio {cmp['ratio']}]"
        if not solved:
            how = "; " + why_open(self.why.get(st.name), self.last_reason(st.name))
        difficulty = next((t.difficulty for t in self.policy.theorems if t.name == st.name), "unknown")
        console.print(Text.assemble(
            f"[{self.done}/{self.total}] {st.name} ({difficulty}): ",
            ("solved", "green") if solved else ("open", "red"),
            f" after {st.attempts} attempt(s), {st.seconds:.2f} s" + how), highlight=False)

    def last_reason(self, name: str) -> str:
        """The checker's reason for the theorem's last agent trial ("" when none ran)."""
        trials = [t for t in self.policy.trials_of(self.state, name) if t.agent != "red-team"]
        return str(trials[-1].metrics.get("reason", "")) if trials else ""


def why_open(search: dict[str, Any] | None, last_reason: str) -> str:
    """Why a theorem stayed open, in one line: where the search stopped (its result, states
    explored, tactic runs, which budget ran out, its last error) and the checker's last reason."""
    parts: list[str] = []
    if search:
        parts.append(f"search: {search.get('result')} after {search.get('checks', 0)} tactic runs, "
                     f"{search.get('expanded', 0)} states explored, {float(search.get('seconds', 0.0)):.1f} s")
        if search.get("deepest"):
            parts.append(f"deepest state {search['deepest']}")
        if search.get("last_error"):
            parts.append(f"last error: {' '.join(str(search['last_error']).split())[:160]}")
        if search.get("vetoed"):  # proofs the agent found and would not propose: name the first and why
            parts.append(f"{search['vetoed']} proof(s) found and vetoed by the agent, the first: "
                         f"{' '.join(str(search.get('first_veto', '')).split())[:160]}")
    if last_reason:
        parts.append(f"checker: {' '.join(last_reason.split())[:160]}")
    return "; ".join(parts) or "no agent proposed a proof and none said why"


def proof_script(text: str) -> list[str]:
    """A proof's tactic sentences, blanks and comments, bullets and braces, ``Proof.`` and ``Qed.`` aside
    (``Proof term.`` reads as ``exact (term).``): what :func:`compare_proofs` compares and counts, and the length
    ``benches.coq.pooled`` bands the originals by."""
    from oracle.strip_coq import CoqSyntaxError, split_sentences

    try:
        units = [u.code for u in split_sentences(text)]
    except CoqSyntaxError:
        units = [line.strip() for line in text.splitlines() if line.strip()]
    units = [" ".join(u.split()) for u in units if u not in ("{", "}") and u.strip("-+*")]
    if units and units[0].startswith("Proof") and (units[0] == "Proof." or units[0].startswith("Proof ")):
        first = units[0]
        units = units[1:] if first in ("Proof.",) or first.startswith(("Proof using", "Proof with")) \
            else [f"exact ({first.removeprefix('Proof').strip().rstrip('.')})."]
    if units and units[-1] in ("Qed.", "Defined."):
        units = units[:-1]
    return units


def compare_proofs(found: str, original: str) -> dict[str, Any]:
    """How a found proof relates to the original: ``same`` (the same tactic script, blanks and
    comments aside), ``same first tactic``, or ``different``, with both lengths in sentences and
    their ratio (found / original). The question strip-and-rediscover asks: is the path rediscovered?"""
    mine, theirs = proof_script(found), proof_script(original)
    if mine == theirs:
        relation = "same"
    elif mine and theirs and mine[0] == theirs[0]:
        relation = "same first tactic"
    else:
        relation = "different"
    ratio = round(len(mine) / len(theirs), 2) if theirs else None
    return {"relation": relation, "found_sentences": len(mine), "original_sentences": len(theirs), "ratio": ratio}


@dataclass
class BenchRun:
    """One finished run of a bench: its directory, summary (the per-theorem part of run.finished) and wall."""

    run_dir: Path
    reason: str
    summary: dict[str, Any]
    wall_seconds: float
    files: list[str]  # the files' basenames in the order of their theorems (the log keeps JSON keys sorted)
    setting: str = ""  # rediscover | library (the Coq bench); "" where the bench has no such choice
    comparison: dict[str, dict[str, Any]] | None = None  # found proof vs original, per solved theorem

    @property
    def solved(self) -> int:
        return int(self.summary.get("solved", 0))

    @property
    def total(self) -> int:
        return int(self.summary.get("total", 0))


def run_proof_bench(args: argparse.Namespace, tasks: list[TheoremTask], bench_name: str, *, oracle_kind: str,
                    oracle_params: dict[str, Any], checker: ProofChecker | None = None,
                    base_dir: Path | None = None) -> int:
    """Run the bench once per ``--agent`` (default: once with ``--backend``); compare them at the end.

    ``tasks``: the stripped theorems (the selection and the original proofs of ``bench_report.json``
    come from them); ``oracle_kind``/``oracle_params``: the oracle the run rebuilds (``theorems`` is
    added: the selection, in order); ``checker``: check with this one instead, through a
    :class:`CheckerOracle` over the selection (local executor, no resume; the caller closes it). With several ``--agent`` values every agent gets the same theorems,
    one run directory each, and a last table puts their solved counts side by side, per file.
    """
    selected = select(args, tasks, bench_name)
    if selected is None:
        return 2
    kinds = list(dict.fromkeys(_opt(args, "agent", []) or []))
    if not kinds:
        return _run_once(args, selected, bench_name, oracle_kind, oracle_params, checker, base_dir)[0]
    rows: list[tuple[str, BenchRun | None]] = []
    code = 0
    for kind in kinds:
        backend, default_agents = AGENT_BACKENDS[kind]
        one = argparse.Namespace(**vars(args))
        one.backend = backend
        if getattr(args, "agents", None) is None:
            one.agents = default_agents
        rc, done = _run_once(one, selected, bench_name, oracle_kind, oracle_params, checker, base_dir)
        rows.append((kind, done))
        code = max(code, rc)
    if len(rows) > 1:
        print_comparison(rows)
    return code


def _run_once(args: argparse.Namespace, selected: dict[str, TheoremTask], bench_name: str, oracle_kind: str,
              oracle_params: dict[str, Any], checker: ProofChecker | None,
              base_dir: Path | None) -> tuple[int, BenchRun | None]:
    from rrma.run.loop import start_run

    task = bench_task(args, selected, bench_name, oracle_kind=oracle_kind, oracle_params=oracle_params,
                      base_dir=base_dir)
    runs = Path(_opt(args, "runs", Path("runs")))
    runs.mkdir(parents=True, exist_ok=True)
    run_id = f"{bench_name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    progress = _Progress(task, selected, runs, run_id, bool(_opt(args, "quiet", False)))
    started = time.monotonic()
    interrupted = False
    try:
        result = start_run(task, runs, run_id=run_id, stop=threading.Event(), on_event=progress,
                           executor=make_executor_factory(args),
                           oracle=CheckerOracle(checker, selected) if checker is not None else None)
        reason, state = result.reason, result.state
    except (OracleError, CliError) as exc:  # one line; a run the error met is recorded as such by the loop
        console.print(Text(f"{bench_name}: {exc}", style="red"), highlight=False)
        return 2, None
    except KeyboardInterrupt:  # the loop recorded the run as interrupted; say what it did so far
        interrupted = True
        state = RunState.fold(RunStore(runs / run_id).scan().events)
        reason = state.finish_reason or "interrupted"
    wall = time.monotonic() - started
    files = list(dict.fromkeys(Path(t.source_file).name or "-" for t in selected.values()))
    done = BenchRun(runs / run_id, reason, dict(state.summary), wall, files,
                    setting=str(oracle_params.get("setting", "")))
    write_report(done, selected, state, progress.why)
    print_summary(bench_name, done)
    if reason == "error":
        console.print(Text(f"{bench_name}: the run stopped early: {state.summary.get('error', 'see its notes')}",
                           style="red"), highlight=False)
        return 1, done
    if interrupted:
        return 130, done
    return 0, done


def write_report(done: BenchRun, selected: dict[str, TheoremTask], state: RunState,
                 why: dict[str, dict[str, Any]] | None = None) -> None:
    """``bench_report.json``: the summary, the setting, the proofs found and the original proofs (the
    harness's record), each found proof compared with its original (:func:`compare_proofs`), and for
    each open theorem why (:func:`why_open`)."""
    store = RunStore(done.run_dir)
    proofs: dict[str, str | None] = {}
    for name, row in dict(done.summary.get("theorems") or {}).items():
        rec = state.trials.get(row.get("trial") or "")
        if rec is not None and rec.proposal_blob:
            proofs[name] = store.get_json_blob(rec.proposal_blob).get("proof")
    comparison = {name: compare_proofs(proof, selected[name].original_proof)
                  for name, proof in proofs.items() if proof and name in selected}
    done.comparison = comparison
    open_why: dict[str, str] = {}
    for name, row in dict(done.summary.get("theorems") or {}).items():
        if not row.get("solved") and row.get("trial") is None:
            open_why[name] = why_open((why or {}).get(name), "")
        elif not row.get("solved"):
            rec = state.trials.get(row.get("trial") or "")
            open_why[name] = why_open((why or {}).get(name), str(rec.metrics.get("reason", "")) if rec else "")
    report = {**done.summary, "setting": done.setting, "reason": done.reason,
              "wall_seconds": round(done.wall_seconds, 3),
              "originals": {key: t.original_proof for key, t in selected.items()}, "proofs": proofs,
              "comparison": comparison, "comparison_counts": relation_counts(comparison), "open": open_why,
              "search": {name: row for name, row in (why or {}).items() if name in selected}}
    (done.run_dir / "bench_report.json").write_text(json.dumps(report, indent=2) + "\n")


def relation_counts(comparison: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How many found proofs are the original script, start with its first tactic, or differ."""
    counts = {"same": 0, "same first tactic": 0, "different": 0}
    for row in comparison.values():
        counts[str(row["relation"])] = counts.get(str(row["relation"]), 0) + 1
    return counts


def print_comparison(rows: Sequence[tuple[str, BenchRun | None]]) -> None:
    """``--agent portfolio --agent search``: solved per file and in total, side by side."""
    files: list[str] = []
    for _, done in rows:
        for name in (done.files if done else []):
            if name not in files:
                files.append(name)
    setting = next((d.setting for _, d in rows if d is not None and d.setting), "")
    table = Table(title=f"agents compared ({setting} setting)" if setting else "agents compared")
    table.add_column("file")
    for kind, _ in rows:
        table.add_column(kind, justify="right")
    for name in [*files, "all"]:
        cells = []
        for _, done in rows:
            if done is None:
                cells.append("-")
                continue
            row = done.summary.get("by_file", {}).get(name) if name != "all" else {"solved": done.solved,
                                                                                   "total": done.total}
            cells.append(f"{row['solved']}/{row['total']}" if row else "-")
        table.add_row(name, *cells, style="bold" if name == "all" else None)
    console.print(table)
    for kind, done in rows:
        if done is not None:
            print(f"agent {kind}: solved {done.solved}/{done.total} in {done.wall_seconds:.1f} s wall", flush=True)


def print_summary(bench_name: str, done: BenchRun) -> None:
    """The rich table (per difficulty) plus greppable ``key: value`` lines."""
    data = done.summary
    total = int(data.get("total", 0))
    solved = int(data.get("solved", 0))
    setting = f" ({done.setting} setting)" if done.setting else ""
    table = Table(title=f"bench {bench_name}{setting}: {solved}/{total} solved")
    for col in DIFFICULTY_COLUMNS:
        table.add_column(col, justify="right" if col != "difficulty" else "left")
    for row in difficulty_rows(data):  # one per difficulty, then all (rrma/proofs_summary.py: the TUI's too)
        table.add_row(*row.cells(), style="bold" if row.difficulty == ALL else None)
    console.print(table)
    # greppable `key: value` lines, printed plainly (never wrapped)
    print(f"solved: {solved}/{total}")
    if done.setting:
        print(f"setting: {done.setting}")
    if done.comparison is not None:
        counts = relation_counts(done.comparison)
        ratios = [float(r["ratio"]) for r in done.comparison.values() if r.get("ratio") is not None]
        median = sorted(ratios)[len(ratios) // 2] if ratios else 0.0
        print(f"vs original: {counts['same']} same script, {counts['same first tactic']} same first tactic, "
              f"{counts['different']} different (median length ratio {median:g})")
    by_file = dict(data.get("by_file") or {})
    if len(by_file) > 1:
        for name in [*done.files, *sorted(set(by_file) - set(done.files))]:
            if name in by_file:
                print(f"file {name}: {by_file[name]['solved']}/{by_file[name]['total']}")
    print(f"cheating_attempts_rejected: {data.get('cheats_rejected', 0)}")
    if data.get("cheats_accepted"):
        print(f"cheating_attempts_accepted: {data['cheats_accepted']}")
    for line in data.get("red_team_misjudged", []):  # the proof and reason are agent-like text: printed plainly
        print(f"red_team_rejected_for_another_reason: {without_controls(line)}")
    if data.get("held_for_review"):  # a high audit finding holds their promotion (docs/audit.md)
        print(f"held for review: {data['held_for_review']}")
    if done.reason not in ("completed",):
        print(f"ended: {done.reason}")
    print(f"checks: {data.get('checks', 0)} ({float(data.get('check_seconds', 0.0)):.2f} s checking, "
          f"{done.wall_seconds:.1f} s wall)")
    print(f"run: {done.run_dir}", flush=True)
