"""The shared proof-bench driver: budgets, events, blackboard, red team, summary, exit codes;
with a scripted checker (pure logic) and with the real warm Coq checker."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benches.proofs import RED_TEAM, run_proof_bench
from oracle.coq import ProofRejected, screen_proof
from oracle.proof_common import Prover, TheoremTask, Verdict
from rrma.log.state import RunState, render_blackboard, render_results
from rrma.log.store import RunStore, verify_chain
from rrma.trial import Proposal

REPO = Path(__file__).resolve().parent.parent
needs_coq = pytest.mark.skipif(shutil.which("coqtop") is None or shutil.which("coqc") is None,
                               reason="coqc/coqtop not on PATH (Debian: apt-get install coq)")


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


def _task(name: str, statement: str, difficulty: str = "easy") -> TheoremTask:
    return TheoremTask(name=name, statement=statement, context="", original_proof="(hidden) auto.",
                       difficulty=difficulty, prover="coq", source_file="mem.v")


def _args(runs: Path, **extra: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"runs": runs, "agents": 2, "backend": None, "model": None, "seed": 0, "quiet": True}
    base.update(extra)
    return argparse.Namespace(**base)


def _only_run(runs: Path) -> Path:
    dirs = [d for d in runs.iterdir() if d.is_dir()]
    assert len(dirs) == 1
    return dirs[0]


def test_driver_records_a_verifiable_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [
        _task("t_easy", "Theorem t_easy : forall n : nat, n = n."),
        _task("t_med", "Theorem t_med : forall n : nat, n + 0 = n.", "medium"),
        _task("t_open", "Theorem t_open : forall n : nat, n = S n.", "hard"),
    ]
    checker = ScriptedChecker({"t_easy": {"reflexivity."}, "t_med": {"induction n; simpl; auto."}})
    code = run_proof_bench(_args(tmp_path, attempts=12, red_team=True), checker, tasks, "unit")
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
    # derived views written at the end match a fresh fold (what `rrma-tui verify` checks)
    assert (run_dir / "results.tsv").read_text() == render_results(state)
    assert (run_dir / "blackboard.md").read_text() == render_blackboard(state)
    proposed = [e for e in events if e.kind == "trial.proposed"]
    for ev in proposed:
        proposal = Proposal.model_validate(store.get_json_blob(ev.data.proposal_blob))
        assert proposal.theorem == ev.data.theorem and proposal.proof
    # the attempt budget holds for the unsolved theorem (the red-team trial is not an attempt)
    agent_trials = [e for e in proposed if e.data.theorem == "t_open" and e.data.agent != "red-team"]
    assert len(agent_trials) == 12
    # both agents worked (they alternate) and the red team was rejected as cheating
    assert {e.data.agent for e in proposed} == {"tactic-portfolio-1", "tactic-portfolio-2", "red-team"}
    red = [state.trials[e.data.trial_id] for e in proposed if e.data.agent == "red-team"]
    assert all(t.status == "rejected" and t.metrics["cheat"] for t in red)
    # solving agents posted what closed each theorem, on the shared blackboard
    texts = [p["text"] for p in state.blackboard]
    assert any("closed theorem t_easy" in t for t in texts) and any("closed theorem t_med" in t for t in texts)
    summary = state.summary
    assert summary["solved"] == 2 and summary["by_difficulty"]["hard"] == {"total": 1, "solved": 0, "attempts": 0, "seconds": 0.0}
    report = json.loads((run_dir / "bench_report.json").read_text())
    assert report["originals"]["t_easy"] == "(hidden) auto."
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
    assert run_proof_bench(_args(tmp_path, attempts=1, red_team=True), Vague({}), tasks, "unit") == 0
    out = capsys.readouterr().out
    assert "cheating_attempts_rejected: 0" in out
    assert out.count("red_team_rejected_for_another_reason: ") == 2
    assert "t1: 'admit.' -> rejected: something went wrong" in out
    report = json.loads((_only_run(tmp_path) / "bench_report.json").read_text())
    assert report["cheats_rejected"] == 0 and len(report["red_team_misjudged"]) == 2


def test_time_budget_stops_a_theorem(tmp_path: Path) -> None:
    checker = ScriptedChecker({})
    run_proof_bench(_args(tmp_path, attempts=1000, theorem_seconds=0.0), checker,
                    [_task("t", "Theorem t : forall n : nat, n = n.")], "unit")
    assert len(checker.calls) <= 1  # the time budget is checked before every attempt


def test_bad_input_exit_code(tmp_path: Path) -> None:
    checker = ScriptedChecker({})
    tasks = [_task("t", "Theorem t : True.")]
    assert run_proof_bench(_args(tmp_path, only=["missing"]), checker, tasks, "unit") == 2
    assert run_proof_bench(_args(tmp_path), checker, [], "unit") == 2
    assert run_proof_bench(_args(tmp_path, difficulty="hard"), checker, tasks, "unit") == 2


def test_checker_crash_is_recorded_and_exit_1(tmp_path: Path) -> None:
    class Broken(ScriptedChecker):
        def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
            raise RuntimeError("checker exploded")

    code = run_proof_bench(_args(tmp_path), Broken({}), [_task("t", "Theorem t : True.")], "unit")
    assert code == 1
    state = RunState.fold(RunStore(_only_run(tmp_path)).events())
    assert state.finish_reason == "error"


@needs_coq
def test_real_coq_bench_on_a_few_theorems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benches.coq.bench import load_tasks
    from oracle.coq import WarmCoqPool

    tasks = [t for t in load_tasks(None) if t.name in {"add_zero_right", "le_trans'", "and_comm'", "app_nil_right'"}]
    pool = WarmCoqPool()
    try:
        code = run_proof_bench(_args(tmp_path, attempts=30, red_team=True), pool, tasks, "coq")
    finally:
        pool.close()
    assert code == 0
    out = capsys.readouterr().out
    assert "solved: 4/4" in out and "cheating_attempts_rejected: 4" in out
    run_dir = _only_run(tmp_path)
    from cli.main import main as cli_main

    assert cli_main(["verify", str(run_dir)]) == 0


@needs_coq
@pytest.mark.slow  # the whole Coq suite: about a minute on 2 cores
def test_bench_coq_solves_a_clear_majority(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benches.coq.bench import main

    assert main(["--runs", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("solved: "))
    solved, total = (int(x) for x in line.removeprefix("solved: ").split("/"))
    assert total >= 60 and solved / total > 0.6
    assert "cheating_attempts_accepted" not in out
