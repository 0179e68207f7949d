"""The proof benches through the research loop (benches/proofs.py + the per-theorem policy): budgets,
events, blackboard, red team, isolation, cache, summary, exit codes; with a scripted checker (pure
logic, through :class:`benches.proofs.CheckerOracle`) and with real Coq: a killed bench resumes, a
live one obeys `rrma-tui pause/stop`, and it runs on Ray."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from needs import needs_coq

from benches.proofs import RED_TEAM, run_proof_bench
from oracle.coq import ProofRejected, screen_proof
from oracle.proof_common import Prover, TheoremTask, Verdict
from rrma.contracts import Agent, Context
from rrma.log.chain import verify_chain
from rrma.log.control import live_driver
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.view_files import render_blackboard, render_results
from rrma.trial import Proposal

REPO = Path(__file__).resolve().parents[2]


class ScriptedChecker:
    """Accepts exactly the listed proofs per theorem; cheats are judged by the Coq oracle's real
    lexical screen (pure Python, no Coq); records calls."""

    prover: Prover = "coq"

    def __init__(self, accepted: dict[str, set[str]]) -> None:
        self.accepted = accepted
        self.calls: list[tuple[str, str]] = []
        self.closed = False

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        self.calls.append((task.name, proof))
        try:
            screen_proof(proof)
        except ProofRejected as exc:
            return Verdict(False, exc.reason, cheat=exc.cheat)
        if proof in self.accepted.get(task.name, set()):
            return Verdict(True, "accepted", seconds=0.001)
        return Verdict(False, "incomplete proof: 1 goal(s) remain", goals=["|- False"], seconds=0.001)

    def close(self) -> None:
        self.closed = True


class SpyAgent(Agent):
    """Says in its trace what its context showed it, posts once per theorem, and proposes the proofs of
    ``params.proofs`` in turn (then nothing more for that theorem)."""

    backend = "spy"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: dict[str, int] = {}

    def propose(self, ctx: Context) -> Proposal | None:
        if ctx.theorem is None:
            return None
        name = str(ctx.theorem["name"])
        ctx.record_turn(role="tool_call", tool="spy", text=json.dumps({
            "theorem": ctx.theorem, "blackboard": ctx.blackboard, "recent": [t.agent for t in ctx.recent],
            "own": [t.agent for t in ctx.own], "tried": sorted(ctx.tried), "hidden": [str(p) for p in ctx.hidden]}))
        proofs = list(self.config.params.get("proofs", []))
        n = self.given.get(name, 0)
        if n >= len(proofs):
            return None
        self.given[name] = n + 1
        ctx.post(f"{self.name} tried {name}")
        return Proposal(hypothesis=f"spy {n}", proof=proofs[n], theorem=name)


SPY = f"{__name__}:SpyAgent"


def _task(name: str, statement: str, difficulty: str = "easy") -> TheoremTask:
    return TheoremTask(name=name, statement=statement, context="", original_proof="(hidden) auto.",
                       difficulty=difficulty, prover="coq", source_file="mem.v")


def _args(runs: Path, **extra: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"runs": runs, "agents": 2, "backend": None, "model": None, "seed": 0, "quiet": True}
    base.update(extra)
    return argparse.Namespace(**base)


def _bench(args: argparse.Namespace, checker: Any, tasks: list[TheoremTask]) -> int:
    return run_proof_bench(args, tasks, "unit", oracle_kind="coq", oracle_params={}, checker=checker)


def _only_run(runs: Path) -> Path:
    dirs = [d for d in runs.iterdir() if d.is_dir()]
    assert len(dirs) == 1
    return dirs[0]


def _state(run_dir: Path) -> RunState:
    return RunState.fold(RunStore(run_dir).scan().events)


def _spied(run_dir: Path) -> list[dict[str, Any]]:
    return [{"agent": e.data.agent, **json.loads(e.data.text)} for e in RunStore(run_dir).scan().events
            if e.kind == "agent.turn" and e.data.tool == "spy"]


# ----------------------------------------------------------------------------- scripted checker


def test_driver_records_a_verifiable_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [
        _task("t_easy", "Theorem t_easy : forall n : nat, n = n."),
        _task("t_med", "Theorem t_med : forall n : nat, n + 0 = n.", "medium"),
        _task("t_open", "Theorem t_open : forall n : nat, n = S n.", "hard"),
    ]
    checker = ScriptedChecker({"t_easy": {"reflexivity."}, "t_med": {"induction n; simpl; auto."}})
    code = _bench(_args(tmp_path, attempts=12, red_team=True), checker, tasks)
    assert code == 0
    out = capsys.readouterr().out
    assert "solved: 2/3" in out and "cheating_attempts_rejected: 3" in out

    run_dir = _only_run(tmp_path)
    store = RunStore(run_dir)
    assert verify_chain(store).ok
    events = store.events()
    kinds = [e.kind for e in events]
    assert kinds[0] == "run.started" and kinds[-1] == "run.finished"
    state = RunState.fold(events)
    assert state.finish_reason == "completed" and state.baseline_mean is None and not state.best_history
    # derived views written at the end match a fresh fold (what `rrma-tui verify` checks)
    assert (run_dir / "results.tsv").read_text() == render_results(state)
    assert (run_dir / "blackboard.md").read_text() == render_blackboard(state)
    proposed = [e for e in events if e.kind == "trial.proposed"]
    for ev in proposed:
        proposal = Proposal.model_validate(store.get_json_blob(ev.data.proposal_blob))
        assert proposal.theorem == ev.data.theorem and proposal.proof and ev.data.parent is None
    # the attempt budget holds for the unsolved theorem (the red-team trial is not an attempt)
    agent_trials = [e for e in proposed if e.data.theorem == "t_open" and e.data.agent != "red-team"]
    assert len(agent_trials) == 12
    # both agents worked (they take turns) and the red team was rejected as cheating, once per theorem
    assert {e.data.agent for e in proposed} == {"tactic-portfolio-1", "tactic-portfolio-2", "red-team"}
    red = [state.trials[e.data.trial_id] for e in proposed if e.data.agent == "red-team"]
    assert len(red) == 3 and all(t.status == "rejected" and t.metrics["cheat"] for t in red)
    # solving agents posted what closed each theorem, on the shared blackboard (the last one at finish)
    texts = [p["text"] for p in state.blackboard]
    assert any("closed theorem t_easy" in t for t in texts) and any("closed theorem t_med" in t for t in texts)
    summary = state.summary
    assert summary["solved"] == 2 and summary["by_difficulty"]["hard"] == {"total": 1, "solved": 0, "attempts": 0,
                                                                           "seconds": 0.0}
    assert [(m["name"], m["reason"]) for m in state.theorem_marks if m["mark"] == "done"] == [
        ("t_easy", "solved"), ("t_med", "solved"), ("t_open", "attempts")]
    report = json.loads((run_dir / "bench_report.json").read_text())
    assert report["originals"]["t_easy"] == "(hidden) auto." and report["proofs"]["t_med"] == "induction n; simpl; auto."
    # the hidden proof never reached an agent: no proposal or turn mentions it
    assert "(hidden)" not in (run_dir / "events.jsonl").read_text()


def test_red_team_counts_a_cheat_only_when_the_verdict_names_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A checker that rejects every cheat as a cheat but for the wrong reason (here: a timeout-like
    message) catches nothing the red team tests: the bench says so instead of counting it."""
    class Vague(ScriptedChecker):
        def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
            if any(proof == c.proof for c in RED_TEAM["coq"]):
                return Verdict(False, "rejected: something went wrong", cheat=True)
            return super().check(task, proof, timeout_s=timeout_s)

    tasks = [_task("t1", "Theorem t1 : True."), _task("t2", "Theorem t2 : True.")]
    assert _bench(_args(tmp_path, attempts=1, red_team=True), Vague({}), tasks) == 0
    out = capsys.readouterr().out
    assert "cheating_attempts_rejected: 0" in out
    assert out.count("red_team_rejected_for_another_reason: ") == 2
    assert "t1: 'admit.' -> rejected: something went wrong" in out
    report = json.loads((_only_run(tmp_path) / "bench_report.json").read_text())
    assert report["cheats_rejected"] == 0 and len(report["red_team_misjudged"]) == 2


def test_time_budget_stops_a_theorem(tmp_path: Path) -> None:
    checker = ScriptedChecker({})
    _bench(_args(tmp_path, attempts=1000, theorem_seconds=0.0), checker,
           [_task("t", "Theorem t : forall n : nat, n = n.")])
    assert len(checker.calls) <= 1  # the time budget is checked before every attempt


def test_trials_budget_holds_over_all_theorems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--trials N is the run's budget.max_trials: red team and agents together, whatever is left per theorem."""
    checker = ScriptedChecker({})
    tasks = [_task(f"t{i}", f"Theorem t{i} : False.") for i in range(4)]
    assert _bench(_args(tmp_path, attempts=40, trials=3, red_team=True), checker, tasks) == 0
    assert "ended: max_trials" in capsys.readouterr().out
    state = _state(_only_run(tmp_path))
    assert len(state.agent_trials()) == 3 and len(checker.calls) == 3 and state.finish_reason == "max_trials"


def test_bad_input_exit_code(tmp_path: Path) -> None:
    checker = ScriptedChecker({})
    tasks = [_task("t", "Theorem t : True.")]
    assert _bench(_args(tmp_path, only=["missing"]), checker, tasks) == 2
    assert _bench(_args(tmp_path), checker, []) == 2
    assert _bench(_args(tmp_path, difficulty="hard"), checker, tasks) == 2
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # nothing was made


def test_a_name_two_files_share_runs_named_apart(tmp_path: Path) -> None:
    """Issue 33: a theorem name in two files (or two Modules of one file) no longer refuses the
    files whole: each theorem is known as ``name (file.v:line)``."""
    tasks = [_task("t", "Theorem t : True.")]
    twice = [tasks[0], TheoremTask(**{**tasks[0].__dict__, "source_file": "other.v"})]
    assert _bench(_args(tmp_path), ScriptedChecker({}), twice) == 0
    state = _state(_only_run(tmp_path))
    assert {t.theorem for t in state.agent_trials()} == {f"t ({Path(twice[0].source_file).name}:0)", "t (other.v:0)"}


def test_a_checker_crash_is_a_crash_outcome_and_the_bench_goes_on(tmp_path: Path) -> None:
    """The loop's executor labels an oracle that raises as a ``crash`` outcome with its error (it was exit 1
    and the end of the bench before the bench ran through the loop); every theorem still gets its turns."""
    class Broken(ScriptedChecker):
        def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
            raise RuntimeError("checker exploded")

    tasks = [_task("t", "Theorem t : True."), _task("u", "Theorem u : True.")]
    assert _bench(_args(tmp_path, attempts=2), Broken({}), tasks) == 0
    state = _state(_only_run(tmp_path))
    assert state.finish_reason == "completed"
    assert {t.status for t in state.agent_trials()} == {"crash"} and len(state.agent_trials()) == 4
    assert all("checker exploded" in t.feedback for t in state.agent_trials())


@pytest.mark.parametrize("isolated", [False, True])
def test_isolated_agents_see_no_blackboard_and_no_other_trials(tmp_path: Path, isolated: bool) -> None:
    tasks = [_task("t1", "Theorem t1 : False."), _task("t2", "Theorem t2 : False.")]
    args = _args(tmp_path, backend=SPY, agent_params={"proofs": ["idtac.", "auto."]}, isolated=isolated or None)
    assert _bench(args, ScriptedChecker({}), tasks) == 0
    seen = _spied(_only_run(tmp_path))
    later = [s for s in seen if s["theorem"]["name"] == "t2"]
    assert later and all(s["theorem"] == {"name": "t2", "statement": "Theorem t2 : False.", "context": "",
                                          "difficulty": "easy", "prover": "coq", "line": 0, "noinit": False,
                                          "module": ""}  # the logical name its context runs as (round eight)
                         for s in later)
    others = [s for s in seen if any(a != s["agent"] for a in s["recent"])]
    if isolated:
        assert all(s["blackboard"] == [] and s["tried"] == [] for s in seen)
        assert others == []  # only its own trials
    else:
        assert any(len(s["blackboard"]) >= 2 for s in later) and others
        assert any(s["tried"] for s in seen)
    run_dir = _only_run(tmp_path).resolve()
    assert all(str(run_dir) in s["hidden"] and str(run_dir.parent) in s["hidden"] for s in seen)


def test_an_identical_proof_comes_from_the_cache(tmp_path: Path) -> None:
    checker = ScriptedChecker({})
    args = _args(tmp_path, backend=SPY, agents=1, agent_params={"proofs": ["idtac.", "idtac.", "auto."]})
    assert _bench(args, checker, [_task("t", "Theorem t : False.")]) == 0
    state = _state(_only_run(tmp_path))
    assert [(t.status, t.cached) for t in state.agent_trials()] == [("rejected", False), ("rejected", True),
                                                                    ("rejected", False)]
    assert checker.calls == [("t", "idtac."), ("t", "auto.")]  # the repeat cost no check


# ----------------------------------------------------------------------------- real Coq

# two theorems the portfolio proves, then a false one (each theorem's context is the file before it,
# original proofs included: a false theorem before a true one would break the true one's context)
FILE = """Require Import Arith.
Theorem z : forall n : nat, n + 0 = n.
Proof. auto. Qed.
Theorem o : forall n : nat, 0 + n = n.
Proof. reflexivity. Qed.
Theorem f1 : 1 = 2.
Proof. auto. Qed.
"""


def _cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", *argv]


def _events(run_dir: Path) -> list[Any]:
    return RunStore(run_dir).scan().events if (run_dir / "events.jsonl").exists() else []


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _one_dir(runs: Path) -> Path | None:
    dirs = [d for d in runs.iterdir() if d.is_dir()] if runs.is_dir() else []
    return dirs[0] if len(dirs) == 1 else None


@needs_coq
def test_coq_oracle_takes_sources_a_selection_and_a_preload(tmp_path: Path) -> None:
    """What `rrma-tui resume` and a Ray worker rebuild the bench's oracle from: params alone."""
    from oracle.coq import CoqOracle
    from rrma.contracts import EvalContext, OracleError
    from rrma.trial import Budget, Status

    folder = tmp_path / "d"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.v").write_text("Theorem x : True.\nProof. exact I. Qed.\nTheorem y : True.\nProof. exact I. Qed.\n")
    (folder / "sub" / "b.v").write_text("Theorem x : 1 = 1.\nProof. reflexivity. Qed.\n")
    oracle = CoqOracle({"sources": [str(folder)], "preload": "Require Import Arith."})
    oracle.prepare(tmp_path, tmp_path)
    try:
        views = oracle.theorems()
        assert [v["name"] for v in views] == ["x (a.v:1)", "y", "x (b.v:1)"]  # a shared name told apart
        assert [v["file"] for v in views] == ["a.v", "a.v", "b.v"] and str(folder) not in json.dumps(views)
        # the preload runs after the file's own sentences, right before the statement
        assert all(v["context"].endswith("Require Import Arith.\n") and "original_proof" not in v for v in views)
        assert views[1]["context"] == "Theorem x : True.\nAdmitted.\nRequire Import Arith.\n"
        assert set(oracle.held_out()) >= {(folder / "a.v").resolve(), (folder / "sub" / "b.v").resolve()}

        def evaluate(theorem: str, proof: str) -> Any:
            return oracle.evaluate(EvalContext(trial_id="t", trial_dir=tmp_path, budget=Budget(seconds=30),
                                               proposal=Proposal(theorem=theorem, proof=proof)))

        assert evaluate("x (b.v:1)", "reflexivity.").status == Status.ok
        assert evaluate("y", " ").status == Status.invalid
    finally:
        oracle.close()
    picked = CoqOracle({"sources": [str(folder / "a.v")], "theorems": ["y"], "warm": False})
    picked.prepare(tmp_path, tmp_path)
    assert [v["name"] for v in picked.theorems()] == ["y"]
    assert "unknown theorem" in picked.evaluate(EvalContext(trial_id="t", trial_dir=tmp_path, budget=Budget(seconds=30),
                                                            proposal=Proposal(theorem="x", proof="exact I."))).feedback
    for params, said in (({"sources": [str(folder / "a.v")], "theorems": ["z"]}, "not in the files"),
                         ({"sources": [str(tmp_path / "none.v")]}, "does not exist"), ({}, "params.sources")):
        with pytest.raises(OracleError, match=said):
            CoqOracle(params).prepare(tmp_path, tmp_path)


@needs_coq
def test_real_coq_bench_on_a_few_theorems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benches.coq.bench import main

    argv = ["--runs", str(tmp_path), "--quiet", "--attempts", "30", "--agent", "portfolio"]
    for name in ("add_zero_right", "le_trans'", "and_comm'", "app_nil_right'"):
        argv += ["--only", name]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "solved: 4/4" in out and "cheating_attempts_rejected: 4" in out
    run_dir = _only_run(tmp_path)
    from cli.main import main as cli_main

    assert cli_main(["verify", str(run_dir)]) == 0


@needs_coq
def test_red_team_rejects_every_known_cheat_for_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benches.coq.bench import main

    cheats = RED_TEAM["coq"]
    src = tmp_path / "t.v"
    src.write_text("".join(f"Theorem t{i} : True.\nProof. exact I. Qed.\n" for i in range(len(cheats))))
    assert main(["--source", str(src), "--runs", str(tmp_path / "runs"), "--quiet", "--attempts", "1"]) == 0
    out = capsys.readouterr().out
    assert f"cheating_attempts_rejected: {len(cheats)}" in out, out
    assert "red_team_rejected_for_another_reason" not in out and "cheating_attempts_accepted" not in out
    state = _state(_only_run(tmp_path / "runs"))
    red = [t for t in state.agent_trials() if t.agent == "red-team"]
    assert sorted(t.meta["red_team"]["proof"] for t in red) == sorted(c.proof for c in cheats)  # each one, once


@needs_coq
def test_a_killed_bench_resumes_without_redoing_solved_theorems(tmp_path: Path) -> None:
    """kill -9 of a live `bench coq`; `rrma-tui resume RUN` finishes it: solved theorems are not tried
    again, attempts already used count, every theorem gets its one red-team trial."""
    src = tmp_path / "k.v"
    src.write_text(FILE)
    runs = tmp_path / "runs"
    proc = subprocess.Popen(_cli("--headless", "bench", "coq", "--source", str(src), "--runs", str(runs),
                                 "--attempts", "40", "--theorem-seconds", "120", "--quiet", "--agent", "portfolio"),
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def midway() -> bool:
            run_dir = _one_dir(runs)
            state = RunState.fold(_events(run_dir)) if run_dir else RunState()
            return sum(t.theorem == "f1" and t.agent != "red-team" for t in state.agent_trials()) >= 3
        _wait(midway, 60, "z and o solved and three attempts at f1")
        assert live_driver(_one_dir(runs)) is not None  # the TUI's runs list sees a live driver
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = _one_dir(runs)
    assert run_dir is not None and live_driver(run_dir) is None
    before = _state(run_dir)
    assert before.finish_reason is None
    used = sum(t.theorem == "f1" and t.agent != "red-team" for t in before.agent_trials())
    resumed = subprocess.run(_cli("resume", str(run_dir), "--quiet"), cwd=REPO, capture_output=True, text=True,
                             timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    state = _state(run_dir)
    assert state.finish_reason == "completed" and state.resumes == 1
    resumed_at = state.driver_seq
    trials = state.agent_trials()
    assert before.summary == {} and {t.theorem for t in before.agent_trials() if t.status == "ok"} == {"z", "o"}
    assert not [t for t in trials if t.theorem in ("z", "o") and t.proposed_seq > resumed_at]  # solved: not again
    assert sum(t.theorem == "f1" and t.agent != "red-team" for t in trials) == 40 > used  # the budget, across both
    assert sorted(t.theorem for t in trials if t.agent == "red-team") == ["f1", "o", "z"]
    assert {n for n, row in state.summary["theorems"].items() if row["solved"]} == {"z", "o"}
    assert subprocess.run(_cli("verify", str(run_dir)), cwd=REPO, capture_output=True).returncode == 0


@needs_coq
def test_a_live_bench_obeys_pause_and_stop(tmp_path: Path) -> None:
    src = tmp_path / "s.v"
    src.write_text("".join(f"Theorem f{i} : {i} = {i + 1}.\nProof. auto. Qed.\n" for i in range(40)))  # unprovable: long enough to outlast the orders
    runs = tmp_path / "runs"
    proc = subprocess.Popen(_cli("--headless", "bench", "coq", "--source", str(src), "--runs", str(runs),
                                 "--attempts", "2000", "--theorem-seconds", "300", "--quiet", "--agent", "portfolio"),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait(lambda: (d := _one_dir(runs)) is not None and len(RunState.fold(_events(d)).agent_trials()) >= 3,
              60, "three trials")
        run_dir = _one_dir(runs)
        assert run_dir is not None

        def order(action: str) -> None:
            done = subprocess.run(_cli(action, str(run_dir), "--by", "tester"), cwd=REPO, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, (action, done.stdout, done.stderr)  # not "not live"

        order("pause")
        _wait(lambda: any("paused" in n for n in RunState.fold(_events(run_dir)).notes), 20, "the pause's note")
        paused = RunState.fold(_events(run_dir))
        time.sleep(1.5)
        still = RunState.fold(_events(run_dir))
        assert len(still.agent_trials()) == len(paused.agent_trials())  # no proposal while paused
        order("continue")
        _wait(lambda: len(RunState.fold(_events(run_dir)).agent_trials()) > len(still.agent_trials()), 20,
              "a trial after continue")
        order("stop")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "ended: stopped" in out
    state = _state(run_dir)
    assert state.finish_reason == "stopped" and state.summary["solved"] == 0


@pytest.mark.ray
@needs_coq
def test_bench_coq_runs_on_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (the optional 'ray' extra)")
    from benches.coq.bench import main

    src = tmp_path / "r.v"
    src.write_text(FILE.split("Theorem f1")[0])
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        code = main(["--source", str(src), "--runs", str(tmp_path / "runs"), "--quiet", "--executor", "ray",
                     "--agent", "portfolio"])
    finally:
        ray.shutdown()
    assert code == 0
    assert "solved: 2/2" in capsys.readouterr().out
    state = _state(_only_run(tmp_path / "runs"))
    started = [e for e in _events(_only_run(tmp_path / "runs")) if e.kind == "trial.started"]
    assert started and {e.data.executor for e in started} == {"ray"}
    assert state.finish_reason == "completed"


@needs_coq
@pytest.mark.slow  # two of the suite's four files through the whole bench (41 of 75 theorems)
def test_bench_coq_solves_a_clear_majority(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bench end to end on two suite files (logic.v, arith.v: 41 theorems, every difficulty),
    the portfolio agents and the red team: a clear majority solved, every cheat rejected,
    the setting and the comparison with the originals reported."""
    from benches.coq.bench import SUITE, main

    files = [str(Path(__file__).resolve().parents[2] / "benches" / "coq" / name) for name in SUITE
             if name in ("logic.v", "arith.v")]
    assert main(["--runs", str(tmp_path), "--quiet", "--agent", "portfolio", "--source", *files]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("solved: "))
    solved, total = (int(x) for x in line.removeprefix("solved: ").split("/"))
    assert total >= 40 and solved / total > 0.6
    assert "cheating_attempts_accepted" not in out
    assert f"cheating_attempts_rejected: {total}" in out
    assert "setting: rediscover" in out and "vs original: " in out


@needs_coq
def test_bench_coq_indexes_the_sources_library_before_the_first_theorem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh machine has no library index, so the search would learn nothing from the library that
    a machine where it was built by hand learns from. `bench coq` builds what the sources load, once:
    the dependency's entry appears, the source's own proofs are never indexed, a second run builds
    nothing; --no-library-index (and the suite's default, RRMA_LIBRARY_INDEX_BUILD=0) builds nothing."""
    from benches.coq.bench import main

    index = tmp_path / "index"
    monkeypatch.setenv("RRMA_TACTIC_INDEX", str(index))
    src = tmp_path / "T.v"
    src.write_text("Require Import Coq.Logic.Decidable.\nTheorem t : True.\nProof. exact I. Qed.\n")
    base = ["--source", str(src), "--attempts", "1", "--no-hammer"]
    assert main([*base, "--runs", str(tmp_path / "r0")]) == 0  # the suite's default: off
    assert not index.exists()
    assert main([*base, "--runs", str(tmp_path / "r1"), "--library-index", "--no-library-index"]) == 0
    assert not index.exists()
    capsys.readouterr()
    assert main([*base, "--runs", str(tmp_path / "r2"), "--library-index"]) == 0
    err = capsys.readouterr().err
    entry = json.loads((index / "Coq.Logic.Decidable.json").read_text())
    assert entry["proofs"] and all(p["theorem"] != "t" for p in entry["proofs"])
    built = sorted(p.name for p in index.glob("*.json"))
    assert "Coq.Init.Logic.json" in built and not any("T" == p.split(".")[-2] for p in built)
    assert f"library index: {len(built)} modules the sources load, {len(built)} indexed now" in err, err
    assert main([*base, "--runs", str(tmp_path / "r3"), "--library-index"]) == 0
    assert f"{len(built)} modules the sources load, 0 indexed now" in capsys.readouterr().err
