"""The strip-and-rediscover bench driver shared by ``bench coq`` and ``bench lean``.

Why it exists: both proof benches do the same thing with a different checker. Given a
:class:`~oracle.proof_common.ProofChecker` and the :class:`~oracle.proof_common.TheoremTask`
list of a stripped file, :func:`run_proof_bench` lets a team of agents (offline tactic
portfolio by default) rediscover every proof, theorem by theorem, with a per-theorem attempt
budget and time budget, all agents sharing one blackboard, and records everything as a normal
run directory, so ``rrma-tui verify RUN``, ``show`` and the TUI work on it.

Usage from a bench module (``benches/<prover>/bench.py``)::

    def add_arguments(parser):          # the CLI calls it when present
        add_proof_arguments(parser)

    def run(args) -> int:
        tasks = strip_file(args.source or DEFAULT_FILES)
        with make_checker() as checker:  # anything with .check(task, proof, timeout_s=) and .close()
            return run_proof_bench(args, checker, tasks, "coq")

Events written (payload models of :mod:`rrma.log.events`): ``run.started``; per attempt
``trial.proposed`` (``theorem``, ``proposal_blob`` = the Proposal as a JSON blob),
``trial.started``, ``trial.finished`` (status ok / rejected / timeout / invalid, score 1.0 when
accepted, metrics ``accepted, reason, cheat, difficulty, goals``); agents' ``agent.turn`` and
``blackboard.post``; ``run.finished`` with the summary. The derived views are written at the end.

``--isolated`` is the control arm: agents see neither the blackboard nor each other's trials
(compare attempts per solved theorem with and without sharing).

Invariants: an agent never sees a theorem's original proof nor the file that holds it (only
``TheoremTask.public()``), and its own processes never read the answers (``Context.hidden``: the
run, the runs around it, every stripped file and its compiled forms, :func:`agent_hidden`);
cheating attempts are counted from the checker's ``Verdict.cheat`` (with ``--red-team`` a
red-team pseudo-agent submits one known cheat per theorem, which must be rejected for the reason
that names it); the exit code is 0 when the bench ran (whatever it solved), 1 when a checker
failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from oracle.proof_common import ProofChecker, TheoremTask, Verdict
from rrma.contracts import Agent, Context, TrialSummary
from rrma.log.events import (
    AgentTurnData,
    BlackboardPostData,
    RunFinishedData,
    RunStartedData,
    TrialFinishedData,
    TrialProposedData,
    TrialStartedData,
)
from rrma.log.state import RunState, write_views
from rrma.log.store import RunStore
from rrma.plugins import make_agent
from rrma.task import AgentConfig, BudgetConfig, MetricConfig, OracleConfig, TaskConfig
from rrma.text import SafeConsole, without_controls
from rrma.trial import Proposal

console = SafeConsole(emoji=False)  # agent proofs and checker messages print literally and inert

DEFAULT_ATTEMPTS = 40
DEFAULT_THEOREM_SECONDS = 30.0
DEFAULT_CHECK_SECONDS = 10.0
DEFAULT_AGENTS = 2
# --agent NAME: the agent backend, and how many agents by default (one search agent: a second one
# would repeat the same deterministic search)
AGENT_BACKENDS: dict[str, tuple[str, int]] = {"portfolio": ("tactic-portfolio", DEFAULT_AGENTS),
                                              "search": ("proof-search", 1)}

# agents that post what they learnt when asked for a proposal with no theorem (the bench's last call)
FLUSHING_BACKENDS = frozenset({"tactic-portfolio", "proof-search"})


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
    """The options every proof bench takes (the CLI's common ones come from cli.main)."""
    parser.add_argument("--source", type=Path, action="extend", nargs="+", metavar="FILE_OR_DIR",
                        help="strip and run these files (a directory: every file in it, recursively) instead "
                             "of the bench's own suite (repeatable)")
    parser.add_argument("--agent", choices=sorted(AGENT_BACKENDS), action="append",
                        help="the offline prover: portfolio (closed tactic scripts) or search (best-first "
                             "proof-state search); repeat it to compare both on the same theorems in one run")
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
    parser.add_argument("--quiet", action="store_true")
    return int(run(parser.parse_args(argv)))


def _opt(args: argparse.Namespace, name: str, default: Any) -> Any:
    value = getattr(args, name, None)
    return default if value is None else value


@dataclass
class TheoremResult:
    name: str
    difficulty: str
    source: str = ""
    solved: bool = False
    attempts: int = 0
    seconds: float = 0.0
    proof: str | None = None
    solver: str | None = None
    last_reason: str = ""
    cheats_rejected: int = 0
    cheats_accepted: int = 0


@dataclass
class BenchSummary:
    bench: str
    run_dir: Path
    results: list[TheoremResult] = field(default_factory=list)
    cheats_rejected: int = 0
    cheats_accepted: int = 0
    red_team_misjudged: list[str] = field(default_factory=list)  # red-team cheats rejected for another reason
    checks: int = 0
    check_seconds: float = 0.0

    @property
    def solved(self) -> int:
        return sum(r.solved for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        by: dict[str, dict[str, Any]] = {}
        for r in self.results:
            row = by.setdefault(r.difficulty, {"total": 0, "solved": 0, "attempts": 0, "seconds": 0.0})
            row["total"] += 1
            if r.solved:
                row["solved"] += 1
                row["attempts"] += r.attempts
                row["seconds"] += r.seconds
        by_file: dict[str, dict[str, int]] = {}
        for r in self.results:
            row = by_file.setdefault(Path(r.source).name or "-", {"total": 0, "solved": 0})
            row["total"] += 1
            row["solved"] += int(r.solved)
        by_status: dict[str, int] = {}
        for r in self.results:
            key = "solved" if r.solved else "open"
            by_status[key] = by_status.get(key, 0) + 1
        return {
            # the keys `rrma-tui show` reads for any run
            "metric": "solved", "direction": "maximize", "best_score": self.solved, "trials": self.checks,
            "by_status": by_status, "cache_hits": 0,
            "bench": self.bench, "solved": self.solved, "total": len(self.results), "by_difficulty": by,
            "by_file": by_file,
            "cheats_rejected": self.cheats_rejected, "cheats_accepted": self.cheats_accepted,
            "red_team_misjudged": list(self.red_team_misjudged),
            "checks": self.checks, "check_seconds": round(self.check_seconds, 3),
            "theorems": {r.name: {"solved": r.solved, "attempts": r.attempts, "seconds": round(r.seconds, 3),
                                  "difficulty": r.difficulty, "solver": r.solver, "last_reason": r.last_reason[:200]}
                         for r in self.results},
        }


def feedback_of(verdict: Verdict, limit: int = 4000) -> str:
    """What an agent is told about a check (see :meth:`Verdict.feedback`)."""
    return verdict.feedback(limit)


class _Recorder:
    """Writes the bench's events; keeps the shared blackboard and the per-theorem trial lists."""

    def __init__(self, store: RunStore, hidden: tuple[Path, ...] = ()) -> None:
        self.store = store
        self.hidden = hidden  # what the agents' own processes never see (Context.hidden)
        self.counter = 0
        self.blackboard: list[str] = []
        self.steps: dict[str, int] = {}

    def next_trial_id(self) -> str:
        self.counter += 1
        return f"t{self.counter:05d}"

    def post(self, agent: str, text: str, trial_id: str | None = None, tags: Sequence[str] = ()) -> None:
        self.store.append("blackboard.post", f"agent:{agent}",
                          BlackboardPostData(agent=agent, text=text, trial_id=trial_id, tags=list(tags)))
        self.blackboard.append(f"{agent}: {text}")

    def turn(self, agent: str, **fields: Any) -> None:
        self.steps[agent] = self.steps.get(agent, 0) + 1
        fields.setdefault("step", self.steps[agent])
        self.store.append("agent.turn", f"agent:{agent}", AgentTurnData(agent=agent, **fields))


def _theorem_view(task: TheoremTask) -> dict[str, Any]:
    """What an agent is told about a theorem: its name, statement, context, difficulty, prover and
    line; never the original proof nor the file that holds it (a path in a prompt is an invitation)."""
    view = task.public()
    return {"name": view["name"], "statement": view["statement"], "context": view["context"],
            "difficulty": view["difficulty"], "prover": view["prover"], "line": view["line"]}


def run_proof_bench(args: argparse.Namespace, checker: ProofChecker, tasks: list[TheoremTask],
                    bench_name: str, held_out: Sequence[Path] = ()) -> int:
    """Run the bench once per ``--agent`` (default: once with ``--backend``); compare them at the end.

    With several ``--agent`` values every agent gets the same theorems and the same checker, one
    run directory each, and a last table puts their solved counts side by side, per file.
    ``held_out``: the answers no agent's own process may read (the prover's compiled forms of the
    stripped files); the stripped files themselves and the runs are always hidden (:func:`agent_hidden`).
    """
    kinds = list(dict.fromkeys(_opt(args, "agent", []) or []))
    if not kinds:
        return _run_proof_bench_once(args, checker, tasks, bench_name, held_out)[0]
    rows: list[tuple[str, BenchSummary | None, float]] = []
    code = 0
    for kind in kinds:
        backend, default_agents = AGENT_BACKENDS[kind]
        one = argparse.Namespace(**vars(args))
        one.backend = backend
        if getattr(args, "agents", None) is None:
            one.agents = default_agents
        started = time.monotonic()
        rc, summary = _run_proof_bench_once(one, checker, tasks, bench_name, held_out)
        rows.append((kind, summary, time.monotonic() - started))
        code = max(code, rc)
    if len(rows) > 1:
        print_comparison(rows)
    return code


def print_comparison(rows: Sequence[tuple[str, BenchSummary | None, float]]) -> None:
    """``--agent portfolio --agent search``: solved per file and in total, side by side."""
    files: list[str] = []
    for _, summary, _ in rows:
        for name in (summary.as_dict()["by_file"] if summary else {}):
            if name not in files:
                files.append(name)
    table = Table(title="agents compared")
    table.add_column("file")
    for kind, _, _ in rows:
        table.add_column(kind, justify="right")
    for name in [*files, "all"]:
        cells = []
        for _, summary, _ in rows:
            if summary is None:
                cells.append("-")
                continue
            data = summary.as_dict()
            row = data["by_file"].get(name) if name != "all" else {"solved": data["solved"], "total": data["total"]}
            cells.append(f"{row['solved']}/{row['total']}" if row else "-")
        table.add_row(name, *cells, style="bold" if name == "all" else None)
    console.print(table)
    for kind, summary, seconds in rows:
        if summary is not None:
            print(f"agent {kind}: solved {summary.solved}/{len(summary.results)} in {seconds:.1f} s wall", flush=True)


def agent_hidden(run_dir: Path, tasks: Sequence[TheoremTask], held_out: Sequence[Path] = ()) -> tuple[Path, ...]:
    """What no agent's own process (a coding agent's sandbox, a proof-search agent's prover) may read:
    this run's directory, the folder of runs around it (an earlier run's ``bench_report.json`` holds
    the originals too) unless the harness itself lives there, every stripped source file (each
    holds every original proof) and ``held_out`` (their compiled forms)."""
    from rrma.contain.sandbox import harness_paths

    run_dir = Path(run_dir).resolve()
    hidden: list[Path] = [run_dir]
    runs_root = run_dir.parent
    if not any(runs_root == h or runs_root in h.parents for h in harness_paths()) and runs_root != Path.home():
        hidden.append(runs_root)
    for path in [*(Path(t.source_file) for t in tasks if t.source_file), *held_out]:
        resolved = path.resolve()
        if resolved.exists() and resolved not in hidden:
            hidden.append(resolved)
    return tuple(hidden)


def _run_proof_bench_once(args: argparse.Namespace, checker: ProofChecker, tasks: list[TheoremTask],
                          bench_name: str, held_out: Sequence[Path] = ()) -> tuple[int, BenchSummary | None]:
    """Run every task with the agents of ``args`` against ``checker``; print the summary table.

    Reads from ``args`` (all optional except ``runs``): runs, agents, backend, model, seed,
    quiet, attempts, theorem_seconds, check_seconds, only, difficulty, limit, red_team,
    agent_params (a dict given to every agent as its params).
    Returns 0 when the bench ran, 1 when the checker failed, 2 for bad input (no theorems...).
    """
    runs = Path(_opt(args, "runs", Path("runs")))
    only = set(_opt(args, "only", []) or [])
    difficulty = _opt(args, "difficulty", None)
    selected = [t for t in tasks if (not only or t.name in only) and (not difficulty or t.difficulty == difficulty)]
    limit = _opt(args, "limit", None)
    if limit is not None:
        selected = selected[: int(limit)]
    if not selected:
        console.print(f"[red]{bench_name}: no theorems to run[/red] (after --only/--difficulty/--limit filters)")
        return 2, None
    unknown = only - {t.name for t in tasks}
    if unknown:
        console.print(Text(f"{bench_name}: unknown theorem(s): {', '.join(sorted(unknown))}", style="red"))
        return 2, None
    attempts = int(_opt(args, "attempts", DEFAULT_ATTEMPTS))
    theorem_seconds = float(_opt(args, "theorem_seconds", DEFAULT_THEOREM_SECONDS))
    check_seconds = float(_opt(args, "check_seconds", DEFAULT_CHECK_SECONDS))
    n_agents = max(1, int(_opt(args, "agents", DEFAULT_AGENTS)))
    backend = _opt(args, "backend", "tactic-portfolio")
    model = _opt(args, "model", None)
    seed = int(_opt(args, "seed", 0))
    quiet = bool(_opt(args, "quiet", False))
    red_team = bool(_opt(args, "red_team", False))
    isolated = bool(_opt(args, "isolated", False))
    prover = selected[0].prover

    task_cfg = TaskConfig(
        name=f"bench-{bench_name}",
        description=(f"Strip-and-rediscover: prove each stripped {prover} theorem. Give only the proof "
                     "body; the statement is fixed by the oracle."),
        oracle=OracleConfig(kind=prover, params={"sources": sorted({t.source_file for t in selected})}),
        metric=MetricConfig(name="solved", direction="maximize"),
        budget=BudgetConfig.model_validate({"trial_seconds": check_seconds,
                                            "max_trials": max(1, attempts * len(selected))}),
        agents=[AgentConfig.model_validate({"name": f"{backend}-{i + 1}", "backend": backend, "model": model,
                                            "params": dict(_opt(args, "agent_params", {}))})
                for i in range(n_agents)],
        seed=seed,
        bench={"attempts": attempts, "theorem_seconds": theorem_seconds, "theorems": len(selected),
               "red_team": red_team, "isolated": isolated},
    )
    run_id = f"{bench_name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    store = RunStore(runs / run_id, create=True)
    run_json_sha256 = store.write_run_json({"run_id": run_id, "task": task_cfg.model_dump(mode="json"), "seed": seed,
                                            "bench": bench_name, "theorems": [t.name for t in selected]})
    store.append("run.started", "harness", RunStartedData(
        run_id=run_id, task_name=task_cfg.name, task=task_cfg.model_dump(mode="json"), seed=seed,
        versions={"prover": prover}, run_json_sha256=run_json_sha256, head_record=True))
    agents: list[Agent] = [make_agent(cfg, task_cfg, seed + i) for i, cfg in enumerate(task_cfg.agents)]
    recorder = _Recorder(store, agent_hidden(store.dir, tasks, held_out))
    summary = BenchSummary(bench=bench_name, run_dir=store.dir)
    failed: str | None = None
    bench_started = time.monotonic()
    try:
        for index, task in enumerate(selected):
            result = _run_theorem(task, agents, checker, recorder, summary, task_cfg,
                                  attempts=attempts, theorem_seconds=theorem_seconds,
                                  check_seconds=check_seconds, red_team=red_team, seed=seed, isolated=isolated)
            summary.results.append(result)
            if not quiet:
                # the proof is agent text: literal, never markup (`[x y]`) or emoji codes (`:x:`)
                console.print(Text.assemble(
                    f"[{index + 1}/{len(selected)}] {task.name} ({task.difficulty}): ",
                    ("solved", "green") if result.solved else ("open", "red"),
                    f" after {result.attempts} attempt(s), {result.seconds:.2f} s"
                    + (f" by {result.solver}: {result.proof!r}" if result.solved else "")), highlight=False)
        for agent in agents:  # let the offline provers flush their last blackboard posts (an LLM or coding
            if agent.backend in FLUSHING_BACKENDS:  # agent would only call its model or program for nothing)
                agent.propose(_context(agent, task_cfg, None, [], recorder, 0))
    except Exception as exc:  # a checker or agent crash ends the bench: recorded, reported, exit 1
        failed = f"{type(exc).__name__}: {exc}"
    finally:
        for agent in agents:
            agent.close()
        data = summary.as_dict()
        data["wall_seconds"] = round(time.monotonic() - bench_started, 3)
        store.append("run.finished", "harness",
                     RunFinishedData(reason="error" if failed else "completed", summary=data))
        write_views(store.dir, RunState.fold(store.events()))
        (store.dir / "bench_report.json").write_text(json.dumps(
            {**data, "originals": {t.name: t.original_proof for t in selected},
             "proofs": {r.name: r.proof for r in summary.results if r.solved}}, indent=2) + "\n")
        store.close()
    print_summary(summary, wall_seconds=time.monotonic() - bench_started)
    if failed:
        console.print(Text(f"{bench_name}: the bench stopped early: {failed}", style="red"), highlight=False)
        return 1, summary
    return 0, summary


def _context(agent: Agent, task_cfg: TaskConfig, task: TheoremTask | None, trials: list[TrialSummary],
             recorder: _Recorder, trials_left: int, tried: set[str] | None = None, *,
             isolated: bool = False) -> Context:
    name = agent.name
    if isolated:  # control arm: an agent sees only its own trials, no blackboard
        trials = [t for t in trials if t.agent == name]
    return Context(
        task=task_cfg,
        agent_name=name,
        parent_id=None,
        files={},
        editable=[],
        own=[t for t in trials if t.agent == name][-5:],
        recent=trials[-8:],
        blackboard=[] if isolated else list(recorder.blackboard[-60:]),
        trials_left=trials_left,
        theorem=_theorem_view(task) if task is not None else None,
        tried=set(tried or ()),
        record_turn=lambda **kw: recorder.turn(name, **kw),
        post=lambda text, trial_id=None, tags=(): recorder.post(name, text, trial_id, tags),
        hidden=recorder.hidden,
    )


def _check(checker: ProofChecker, recorder: _Recorder, summary: BenchSummary, task: TheoremTask,
           agent: str, proposal: Proposal, check_seconds: float, seed: int) -> tuple[str, Verdict]:
    store = recorder.store
    trial_id = recorder.next_trial_id()
    blob = store.put_json_blob(proposal.model_dump(mode="json"))
    store.append("trial.proposed", f"agent:{agent}", TrialProposedData(
        trial_id=trial_id, parent=None, agent=agent, hypothesis=proposal.hypothesis,
        expected_effect=proposal.expected_effect, proposal_blob=blob, theorem=task.name, seed=seed,
        meta=dict(proposal.meta)))
    store.append("trial.started", "harness", TrialStartedData(trial_id=trial_id, executor="local"))
    if proposal.proof is None or not proposal.proof.strip():
        verdict = Verdict(False, "the proposal has no proof")
        status = "invalid"
    else:
        verdict = checker.check(task, proposal.proof, timeout_s=check_seconds)
        status = verdict.status
    summary.checks += 1
    summary.check_seconds += verdict.seconds
    log_blob = store.put_blob(json.dumps(verdict.to_json(), indent=1)) if verdict.messages else None
    store.append("trial.finished", "oracle", TrialFinishedData(
        trial_id=trial_id, status=status, score=1.0 if verdict.accepted else None,
        metrics={"accepted": verdict.accepted, "reason": verdict.reason, "cheat": verdict.cheat,
                 "difficulty": task.difficulty, "goals": len(verdict.goals)},
        feedback=feedback_of(verdict), log_blob=log_blob, seconds=verdict.seconds))
    return trial_id, verdict


def _run_theorem(task: TheoremTask, agents: list[Agent], checker: ProofChecker, recorder: _Recorder,
                 summary: BenchSummary, task_cfg: TaskConfig, *, attempts: int, theorem_seconds: float,
                 check_seconds: float, red_team: bool, seed: int, isolated: bool = False) -> TheoremResult:
    result = TheoremResult(task.name, task.difficulty, task.source_file)
    if red_team and RED_TEAM.get(task.prover):
        cheats = RED_TEAM[task.prover]
        cheat = cheats[len(summary.results) % len(cheats)]
        _, verdict = _check(checker, recorder, summary, task, "red-team",
                            Proposal(hypothesis=f"red team: a known cheat ({cheat.names})", proof=cheat.proof,
                                     theorem=task.name), check_seconds, seed)
        if verdict.accepted:
            result.cheats_accepted += 1
            summary.cheats_accepted += 1
        elif verdict.cheat and cheat.names in verdict.reason:
            result.cheats_rejected += 1
            summary.cheats_rejected += 1
        else:  # rejected, but not as this cheat: the defence it tests did not speak
            summary.red_team_misjudged.append(f"{task.name}: {cheat.proof!r} -> {verdict.reason}")
    trials: list[TrialSummary] = []
    tried: set[str] = set()
    exhausted: set[str] = set()
    started = time.monotonic()
    turn = 0
    while result.attempts < attempts and time.monotonic() - started < theorem_seconds:
        if len(exhausted) == len(agents):
            break
        agent = agents[turn % len(agents)]
        turn += 1
        if agent.name in exhausted:
            continue
        ctx = _context(agent, task_cfg, task, trials, recorder, attempts - result.attempts,
                       None if isolated else tried, isolated=isolated)
        proposal = agent.propose(ctx)
        if proposal is None:
            exhausted.add(agent.name)
            continue
        proposal = proposal.model_copy(update={"theorem": task.name})
        result.attempts += 1
        trial_id, verdict = _check(checker, recorder, summary, task, agent.name, proposal, check_seconds, seed)
        if proposal.proof:
            tried.add(proposal.proof)
        if verdict.cheat:
            summary.cheats_rejected += 1
            result.cheats_rejected += 1
        trial = TrialSummary(
            trial_id=trial_id, parent=None, agent=agent.name, status=verdict.status,
            score=1.0 if verdict.accepted else None, delta_sigma=None, hypothesis=proposal.hypothesis,
            feedback=feedback_of(verdict), theorem=task.name,
            metrics={"accepted": verdict.accepted, "reason": verdict.reason, "cheat": verdict.cheat},
            params=dict(proposal.meta),
        )
        trials.append(trial)
        agent.observe(trial)
        result.last_reason = verdict.reason
        if verdict.accepted:
            result.solved, result.proof, result.solver = True, proposal.proof, agent.name
            break
    result.seconds = time.monotonic() - started
    return result


def print_summary(summary: BenchSummary, *, wall_seconds: float) -> None:
    """The rich table (per difficulty) plus greppable ``key: value`` lines."""
    data = summary.as_dict()
    table = Table(title=f"bench {summary.bench}: {data['solved']}/{data['total']} solved")
    for col in ("difficulty", "solved", "total", "rate", "attempts/solved", "s/solved"):
        table.add_column(col, justify="right" if col != "difficulty" else "left")
    order = ["easy", "medium", "hard", "unknown"]
    rows = sorted(data["by_difficulty"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 9)
    total_attempts = sum(r.attempts for r in summary.results if r.solved)
    total_seconds = sum(r.seconds for r in summary.results if r.solved)
    for level, row in rows:
        solved = row["solved"]
        table.add_row(level, str(solved), str(row["total"]), f"{solved / row['total']:.0%}",
                      f"{row['attempts'] / solved:.1f}" if solved else "-",
                      f"{row['seconds'] / solved:.2f}" if solved else "-")
    solved = data["solved"]
    table.add_row("all", str(solved), str(data["total"]), f"{solved / max(1, data['total']):.0%}",
                  f"{total_attempts / solved:.1f}" if solved else "-",
                  f"{total_seconds / solved:.2f}" if solved else "-", style="bold")
    console.print(table)
    # greppable `key: value` lines, printed plainly (never wrapped)
    print(f"solved: {solved}/{data['total']}")
    if len(data["by_file"]) > 1:
        for name, row in data["by_file"].items():
            print(f"file {name}: {row['solved']}/{row['total']}")
    print(f"cheating_attempts_rejected: {summary.cheats_rejected}")
    if summary.cheats_accepted:
        print(f"cheating_attempts_accepted: {summary.cheats_accepted}")
    for line in summary.red_team_misjudged:  # the proof and reason are agent-like text: printed plainly
        print(f"red_team_rejected_for_another_reason: {without_controls(line)}")
    print(f"checks: {summary.checks} ({summary.check_seconds:.2f} s checking, {wall_seconds:.1f} s wall)")
    print(f"run: {summary.run_dir}", flush=True)
