"""A promotion counts only as rrma writes one (rrma/log/state.py refused_promotion; the one writer:
rrma/run/promotion.py promote).

The attack (issue 31, item 4): a ``trial.promoted`` appended by actor ``agent:a``, claiming 99.0 for a trial
the oracle scored 0.1 (maximize, baseline 0.5), became the run's best and ``rrma-tui verify`` exited 0. Every
forged event here is appended through the real RunStore, so the hash chain is valid and only the fold's rule
stands between it and the best. Each case shows the attack working with its defence switched off
(monkeypatched to count everything, the behaviour before it) and refused with it on: a ``verify`` error
naming the event's seq, its writer and why, and the best unchanged in every view (``show``, ``ls``, the
export, the views' reader). The controls: rrma's own promotions (the harness's, a confirmed trial's, a
person's approval, a real loop's, the v1 fixture log's) still count. The last tests hold the one-writer rule:
only rrma/run/promotion.py appends ``trial.promoted``.
"""

from __future__ import annotations

import ast
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from rrma.contracts import Agent, Context
from rrma.log import state as state_module
from rrma.log.export import export_runs
from rrma.log.reader import read_state
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.log.view_files import write_views
from rrma.run.loop import start_run
from rrma.run.promotion import promote, promotion, review_trial
from rrma.task import AgentConfig, load_task, task_from_dict
from rrma.trial import FileEdit, Proposal

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "logs" / "v1_demo"
SIGMA = 0.014142135623730963  # the sample standard deviation of the baseline's 0.49 and 0.51


def fold(store: RunStore) -> RunState:
    return RunState.fold(store.scan().events)


def forgery_run(root: Path, *, measured: bool = True) -> RunStore:
    """A finished run (maximize, baseline 0.49 and 0.51: mean 0.5, promoted; not when ``measured`` is False)
    with trials to forge over: t0001 scored 0.1; t0002 0.8, held for a person's review; t0003 0.7, not
    promoted; t0004 proposed and never finished; t0005 0.9, whose confirmation repeats (0.55, 0.65) confirmed
    it at their mean 0.6; t0006 rejected by the oracle with a score of 0.95; t0007 0.9, whose repeats (0.6,
    and one that crashed) have no verdict yet."""
    store = RunStore(root / "run", create=True)
    task = {"name": "forgery", "metric": {"name": "score", "direction": "maximize"}}
    store.append("run.started", "harness", {"run_id": "run", "task_name": "forgery", "task": task,
                                            "head_record": True})
    blob = store.put_json_blob({"hypothesis": "x"})

    def trial(tid: str, score: float | None, *, baseline: bool = False, confirms: str | None = None,
              metrics: dict[str, Any] | None = None, status: str = "ok") -> None:
        store.append("trial.proposed", "harness" if baseline or confirms else "agent:a", {
            "trial_id": tid, "parent": None if baseline else "base-0", "agent": "baseline" if baseline else "a",
            "proposal_blob": blob, "baseline": baseline, "confirms": confirms})
        if score is not None or status != "ok":
            store.append("trial.finished", "oracle", {"trial_id": tid, "status": status, "score": score,
                                                      "metrics": metrics or {}})

    trial("base-0", 0.49, baseline=True)
    trial("base-1", 0.51, baseline=True)
    if measured:
        store.append("baseline.measured", "harness", {"trial_ids": ["base-0", "base-1"], "scores": [0.49, 0.51],
                                                      "mean": 0.5, "sigma": SIGMA, "floor": 0.028})
        promote(lambda kind, actor, data: store.append(kind, actor, data), fold(store), "base-0", 0.5)
    trial("t0001", 0.1)
    trial("t0002", 0.8, metrics={"awaiting_review": True})
    trial("t0003", 0.7)
    trial("t0004", None)
    trial("t0005", 0.9, metrics={"awaiting_confirmation": True})
    trial("t0005-r1", 0.55, confirms="t0005")
    trial("t0005-r2", 0.65, confirms="t0005")
    store.append("trial.confirmed", "harness", {
        "trial_id": "t0005", "repeats": ["t0005-r1", "t0005-r2"], "scores": [0.55, 0.65], "mean": 0.6,
        "best_trial": "base-0", "best_score": 0.5, "delta": 0.1, "floor": 0.028, "confirmed": True})
    trial("t0006", 0.95, status="rejected")
    trial("t0007", 0.9, metrics={"awaiting_confirmation": True})
    trial("t0007-r1", 0.6, confirms="t0007")
    trial("t0007-r2", None, confirms="t0007", status="crash")
    store.append("run.finished", "harness", {"reason": "max_trials", "summary": {"trials": 7}})
    return store


def settle(store: RunStore) -> RunState:
    """The derived views written from the fold (as the loop leaves them): verify then reports only the events."""
    state = fold(store)
    write_views(store.dir, state)
    return state


def promoted_as(store: RunStore, actor: str, trial_id: str, score: float, **change: Any) -> None:
    """Append a promotion with the figures rrma's writer would give it (against the fold's best), then ``change``."""
    _, data = promotion(fold(store), trial_id, score)
    data.update(change)
    store.append("trial.promoted", actor, data)


# ----------------------------------------------------------------------------- the forgeries


def by_an_agent(store: RunStore) -> None:  # the issue's attack
    promoted_as(store, "agent:a", "t0001", 99.0)


def harness_at_another_score(store: RunStore) -> None:
    promoted_as(store, "harness", "t0003", 0.95)


def no_counted_outcome(store: RunStore) -> None:
    promoted_as(store, "harness", "t0004", 0.9)


def past_the_review_gate(store: RunStore) -> None:
    promoted_as(store, "harness", "t0002", 0.8)


def a_person_who_did_not_approve(store: RunStore) -> None:
    promoted_as(store, "human:mallory", "t0002", 0.8, approved_by="mallory")


def not_better_than_the_best(store: RunStore) -> None:
    promoted_as(store, "harness", "t0001", 0.1)


def over_another_best(store: RunStore) -> None:
    promoted_as(store, "harness", "t0003", 0.7, previous_best="t0001", previous_score=0.1, delta=0.6,
                delta_sigma=0.6 / SIGMA)


def a_forged_delta_sigma(store: RunStore) -> None:
    promoted_as(store, "harness", "t0003", 0.7, delta_sigma=1e6)


def an_agent_at_the_counted_score(store: RunStore) -> None:
    promoted_as(store, "agent:a", "t0003", 0.7)


def an_outcome_that_did_not_score(store: RunStore) -> None:
    promoted_as(store, "harness", "t0006", 0.95)


def approved_by_someone_else(store: RunStore) -> None:
    store.append("review", "human:alice", {"trial_id": "t0002", "decision": "approve", "reviewer": "alice"})
    promoted_as(store, "human:alice", "t0002", 0.8, approved_by="bob")


def the_harness_saying_a_person_approved(store: RunStore) -> None:
    promoted_as(store, "harness", "t0003", 0.7, approved_by="alice")


def before_the_confirmation_verdict(store: RunStore) -> None:
    promoted_as(store, "harness", "t0007", 0.9)


def at_the_selected_score_not_the_repeats_mean(store: RunStore) -> None:
    promoted_as(store, "harness", "t0005", 0.9)  # the winner's curse: the mean of its repeats is 0.6


def a_second_baseline(store: RunStore) -> None:
    store.append("baseline.measured", "harness", {"trial_ids": ["base-0", "base-1"], "scores": [99.0, 99.0],
                                                  "mean": 99.0, "sigma": 0.0, "floor": 0.0})
    promoted_as(store, "harness", "base-0", 99.0)


def a_forged_verdict(store: RunStore) -> None:
    store.append("trial.confirmed", "harness", {
        "trial_id": "t0003", "repeats": ["t0001"], "scores": [99.0], "mean": 99.0, "best_trial": "base-0",
        "best_score": 0.5, "delta": 98.5, "floor": 0.0, "confirmed": True})
    promoted_as(store, "harness", "t0003", 99.0)


# (how the forgery is written, the trial it makes the best with its defence off, the defence, the kind of the
# event verify names, how its error begins after "seq N (kind): ")
FORGERIES = [
    pytest.param(by_an_agent, "t0001", "refused_promotion", "trial.promoted",
                 "promotes t0001, but only the harness or a person (human:<name>) promotes (written by 'agent:a')",
                 id="by_an_agent_at_99"),
    pytest.param(harness_at_another_score, "t0003", "refused_promotion", "trial.promoted",
                 "promotes t0003 at 0.95, but its counted score is 0.7 (written by 'harness')",
                 id="harness_at_another_score"),
    pytest.param(no_counted_outcome, "t0004", "refused_promotion", "trial.promoted",
                 "promotes t0004, which has no counted trial.finished (written by 'harness')", id="no_outcome"),
    pytest.param(past_the_review_gate, "t0002", "refused_promotion", "trial.promoted",
                 "promotes t0002, which awaits a person's review", id="past_the_review_gate"),
    pytest.param(a_person_who_did_not_approve, "t0002", "refused_promotion", "trial.promoted",
                 "a person's promotion of t0002, which mallory has not approved (the review in force: none) "
                 "(written by 'human:mallory')", id="unapproved_person"),
    pytest.param(not_better_than_the_best, "t0001", "refused_promotion", "trial.promoted",
                 "promotes t0001 at 0.1, which does not beat the best base-0 (0.5)", id="not_better"),
    pytest.param(over_another_best, "t0003", "refused_promotion", "trial.promoted",
                 "promotes t0003 over t0001 at 0.1, but the best then was base-0 at 0.5", id="over_another_best"),
    pytest.param(a_forged_delta_sigma, "t0003", "refused_promotion", "trial.promoted",
                 "promotes t0003 claiming delta 0.2 (1e+06σ), but against the best then it is 0.2 (14.1421σ)",
                 id="forged_delta_sigma"),
    pytest.param(an_agent_at_the_counted_score, "t0003", "refused_promotion", "trial.promoted",
                 "promotes t0003, but only the harness or a person (human:<name>) promotes (written by 'agent:a')",
                 id="by_an_agent_at_the_counted_score"),
    pytest.param(an_outcome_that_did_not_score, "t0006", "refused_promotion", "trial.promoted",
                 "promotes t0006, which did not score (its outcome is rejected)", id="did_not_score"),
    pytest.param(approved_by_someone_else, "t0002", "refused_promotion", "trial.promoted",
                 "a promotion of t0002 by alice that says it was approved by 'bob'", id="approved_by_another"),
    pytest.param(the_harness_saying_a_person_approved, "t0003", "refused_promotion", "trial.promoted",
                 "promotes t0003 as approved by 'alice', but no person wrote it", id="harness_claims_approval"),
    pytest.param(before_the_confirmation_verdict, "t0007", "refused_promotion", "trial.promoted",
                 "promotes t0007, whose confirmation repeats have given no verdict", id="before_the_verdict"),
    pytest.param(at_the_selected_score_not_the_repeats_mean, "t0005", "refused_promotion", "trial.promoted",
                 "promotes t0005 at 0.9, but the mean of its confirmation repeats is 0.6", id="not_the_repeats_mean"),
    pytest.param(a_second_baseline, "base-0", "refused_baseline", "baseline.measured",
                 "a second baseline measurement (the first gave 0.5)", id="second_baseline"),
    pytest.param(a_forged_verdict, "t0003", "refused_confirmation", "trial.confirmed",
                 "the confirmation verdict on t0003 names t0001, which is not a finished repeat of it",
                 id="forged_verdict"),
]


@pytest.mark.parametrize(("forge", "target", "defence", "kind", "said"), FORGERIES)
def test_a_forged_promotion_is_a_verify_error_and_never_the_best(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 forge: Callable[[RunStore], None], target: str,
                                                                 defence: str, kind: str, said: str) -> None:
    with monkeypatch.context() as off:  # the defence off: the forgery is the best and verify passes
        off.setattr(state_module, defence, lambda state, ev: None)
        store = forgery_run(tmp_path / "off")
        forge(store)
        state = settle(store)
        assert state.best_id == target and state.best_history[-1][0] == target
        report = verify_run(store.dir)
        assert report.ok, report.errors

    store = forgery_run(tmp_path / "on")
    forge(store)
    state = settle(store)
    assert (state.best_id, state.best_history) == ("base-0", [("base-0", 0.5)])
    first = next(r for r in state.refused if r["kind"] == kind)
    report = verify_run(store.dir)
    assert not report.ok
    assert any(e.startswith(f"seq {first['seq']} ({kind}): {said}") for e in report.errors), report.errors


BASELINE = {"trial_ids": ["base-0", "base-1"], "scores": [0.49, 0.51], "mean": 0.5, "sigma": SIGMA, "floor": 0.0}

# (the baseline.measured written, by whom, how verify's error begins): each differs from rrma's in one way
BASELINES = [
    pytest.param(BASELINE, "agent:a", "a baseline measurement written by 'agent:a', not by the harness",
                 id="by_an_agent"),
    pytest.param({**BASELINE, "scores": [0.49, 0.6], "mean": 0.545, "sigma": 0.07778174593052023}, "harness",
                 "the baseline measurement gives base-1 0.6, but its counted score is 0.51", id="a_score"),
    pytest.param({**BASELINE, "trial_ids": ["base-0", "t0003"], "scores": [0.49, 0.7], "mean": 0.595,
                  "sigma": 0.14849242404917495}, "harness",
                 "the baseline measurement names t0003, which is not a scored baseline repeat", id="not_a_repeat"),
    pytest.param({**BASELINE, "trial_ids": ["base-0"]}, "harness",
                 "a baseline measurement of 1 repeat(s) with 2 score(s)", id="counts"),
    pytest.param({**BASELINE, "mean": 0.7}, "harness", "the baseline measurement claims mean 0.7 ± 0.0141421",
                 id="the_mean"),
    pytest.param({**BASELINE, "sigma": 0.0001}, "harness", "the baseline measurement claims mean 0.5 ± 0.0001",
                 id="the_sigma"),
]


@pytest.mark.parametrize(("data", "actor", "said"), BASELINES)
def test_a_baseline_measurement_counts_only_with_its_repeats_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   data: dict[str, Any], actor: str, said: str) -> None:
    """The baseline's mean is the score its promotion may claim and its σ the unit of Δσ."""
    with monkeypatch.context() as off:
        off.setattr(state_module, "refused_baseline", lambda state, ev: None)
        store = forgery_run(tmp_path / "off", measured=False)
        store.append("baseline.measured", actor, data)
        state = fold(store)
        assert (state.baseline_mean, state.sigma) == (data["mean"], data["sigma"])
    store = forgery_run(tmp_path / "on", measured=False)
    event = store.append("baseline.measured", actor, data)
    state = settle(store)
    assert state.baseline_mean is None and state.sigma is None
    assert any(e.startswith(f"seq {event.seq} (baseline.measured): {said}") for e in verify_run(store.dir).errors)


VERDICT = {"trial_id": "t0007", "repeats": ["t0007-r1", "t0007-r2"], "scores": [0.6, None], "mean": 0.6,
           "best_trial": "base-0", "best_score": 0.5, "delta": 0.1, "floor": 0.028, "confirmed": False}

# (the trial.confirmed written, by whom, how verify's error begins): each differs from rrma's in one way
VERDICTS = [
    pytest.param(VERDICT, "agent:a", "a confirmation verdict on t0007 written by 'agent:a', not by the harness",
                 id="by_an_agent"),
    pytest.param({**VERDICT, "trial_id": "t0004", "repeats": [], "scores": []}, "harness",
                 "a confirmation verdict on t0004, which has no counted trial.finished", id="unfinished"),
    pytest.param({**VERDICT, "trial_id": "t0005", "repeats": ["t0005-r1", "t0005-r2"], "scores": [0.55, 0.65]},
                 "harness", "a second confirmation verdict on t0005", id="a_second_verdict"),
    pytest.param({**VERDICT, "repeats": ["t0007-r1"]}, "harness",
                 "a confirmation verdict on t0007 with 1 repeat(s) and 2 score(s)", id="counts"),
    pytest.param({**VERDICT, "repeats": ["t0007-r1", "t0005-r1"]}, "harness",
                 "the confirmation verdict on t0007 names t0005-r1, which is not a finished repeat of it",
                 id="not_its_repeat"),
    pytest.param({**VERDICT, "scores": [0.6, 0.9], "mean": 0.75}, "harness",
                 "the confirmation verdict on t0007 gives t0007-r2 0.9, but its counted score is none", id="a_score"),
    pytest.param({**VERDICT, "mean": 0.9}, "harness",
                 "the confirmation verdict on t0007 claims mean 0.9, but its repeats' scores give 0.6", id="the_mean"),
    pytest.param({**VERDICT, "confirmed": True}, "harness",
                 "the confirmation verdict confirms t0007 though some of its repeats did not score", id="confirmed"),
]


@pytest.mark.parametrize(("data", "actor", "said"), VERDICTS)
def test_a_confirmation_verdict_counts_only_with_its_repeats_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    data: dict[str, Any], actor: str,
                                                                    said: str) -> None:
    """A confirmed trial's mean is the score its promotion may claim."""
    tid = data["trial_id"]
    with monkeypatch.context() as off:
        off.setattr(state_module, "refused_confirmation", lambda state, ev: None)
        store = forgery_run(tmp_path / "off")
        event = store.append("trial.confirmed", actor, data)
        assert fold(store).trials[tid].confirmation["seq"] == event.seq  # type: ignore[index]
    store = forgery_run(tmp_path / "on")
    event = store.append("trial.confirmed", actor, data)
    state = settle(store)
    verdict = state.trials[tid].confirmation
    assert verdict is None or verdict["seq"] != event.seq
    assert any(e.startswith(f"seq {event.seq} (trial.confirmed): {said}") for e in verify_run(store.dir).errors)


def test_the_issues_forgery_fails_rrma_tui_verify_and_no_view_shows_it(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """agent:a promotes t0001 (scored 0.1) at 99.0: the real ``rrma-tui verify`` fails naming it; ``show``,
    ``ls``, the SQLite export and the views' reader keep base-0 (0.5) as the best."""
    store = forgery_run(tmp_path / "runs")
    by_an_agent(store)
    settle(store)
    forged = store.scan().events[-1]
    assert forged.kind == "trial.promoted" and forged.actor == "agent:a" and forged.data.score == 99.0
    proc = subprocess.run([sys.executable, "-m", "cli.main", "verify", str(store.dir)], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode != 0, proc.stdout
    assert f"seq {forged.seq} (trial.promoted): promotes t0001" in proc.stdout and "'agent:a'" in proc.stdout

    assert main(["show", str(store.dir)]) == 0
    shown = capsys.readouterr().out
    [best_row] = [line for line in shown.splitlines() if line.strip("│ ").startswith("best ")]
    assert "(base-0)" in best_row and "99" not in best_row, best_row
    assert "t0001 ★" not in shown and "t0001 ☆" not in shown
    assert main(["ls", "--runs", str(tmp_path / "runs")]) == 0
    listed = capsys.readouterr().out
    assert "0.5" in listed and "99" not in listed, listed
    export_runs([store.dir], tmp_path / "out.db")
    with sqlite3.connect(tmp_path / "out.db") as db:
        assert db.execute("select best_trial, best_score from runs").fetchall() == [("base-0", 0.5)]
    state = read_state(store.dir, turns=False)
    assert state.best_id == "base-0" and not state.trials["t0001"].promoted


# ----------------------------------------------------------------------------- what still counts


def test_rrmas_own_promotions_count(tmp_path: Path) -> None:
    """The harness's promotion of a new best, a confirmed trial's at its repeats' mean and a person's approval
    (through review_trial, as the CLI and the TUI write it) all count, and the run verifies."""
    store = forgery_run(tmp_path)
    emit: Callable[..., Any] = lambda kind, actor, data: store.append(kind, actor, data)  # noqa: E731
    promote(emit, fold(store), "t0005", 0.6, confirmed_by=["t0005-r1", "t0005-r2"])
    promote(emit, fold(store), "t0003", 0.7)
    review_trial(store, "t0002", "approve", "alice", "checked")
    state = settle(store)
    assert not state.refused
    assert state.best_history == [("base-0", 0.5), ("t0005", 0.6), ("t0003", 0.7), ("t0002", 0.8)]
    promoted = store.scan().events[-1]
    assert promoted.kind == "trial.promoted" and promoted.actor == "human:alice"
    assert promoted.data.previous_best == "t0003" and promoted.data.delta == pytest.approx(0.1)
    assert promoted.data.delta_sigma == pytest.approx(0.1 / SIGMA)
    report = verify_run(store.dir)
    assert report.ok and "every event counts" in report.checked, report.errors


def test_a_finished_runs_approval_does_not_promote_while_the_run_is_driven(tmp_path: Path) -> None:
    """review_trial promotes a finished run's approved trial only under the driver lock: while a driver holds
    it (a resumed run), the review is written and the promotion is left to that driver."""
    from rrma.log.driver_lock import DriverLock

    store = forgery_run(tmp_path)
    with DriverLock(store.dir):
        review_trial(store, "t0002", "approve", "alice")
    assert fold(store).best_id == "base-0"
    review_trial(store, "t0002", "approve", "alice", "again, with no driver")
    assert fold(store).best_id == "t0002"


def test_an_approval_from_a_stale_view_promotes_against_the_best_as_it_is_now(tmp_path: Path) -> None:
    """bob's TUI read the run before alice's approval promoted t0002; his approval of a better trial then
    promotes it over t0002 (the fold brought up to date under the driver lock), not over the stale base-0
    (which the fold would refuse)."""
    store = forgery_run(tmp_path)
    blob = store.put_json_blob({"hypothesis": "y"})
    store.append("trial.proposed", "agent:a", {"trial_id": "t0008", "parent": "base-0", "agent": "a",
                                               "proposal_blob": blob})
    store.append("trial.finished", "oracle", {"trial_id": "t0008", "status": "ok", "score": 0.95,
                                              "metrics": {"awaiting_review": True}})
    bobs = read_state(store.dir, turns=False)
    review_trial(store, "t0002", "approve", "alice")
    review_trial(store, "t0008", "approve", "bob", state=bobs)
    state = fold(store)
    assert state.best_history[-2:] == [("t0002", 0.8), ("t0008", 0.95)] and not state.refused
    assert store.scan().events[-1].data.previous_best == "t0002"


def test_the_progress_lines_hear_only_counted_events(tmp_path: Path) -> None:
    """The loop's on_event hook (the headless "new best" lines) is not called for a forged promotion."""
    from rrma.run.ledger import RunLedger

    store = forgery_run(tmp_path)
    heard: list[str] = []
    ledger = RunLedger(RunStore(store.dir), lambda event: heard.append(event.kind))
    ledger.sync()
    heard.clear()
    by_an_agent(store)
    store.append("note", "harness", {"text": "counted"})
    ledger.sync()
    assert heard == ["note"] and ledger.state.best_id == "base-0"


def test_an_experiments_curve_leaves_out_a_forged_promotion(tmp_path: Path) -> None:
    from rrma.run.experiment import Cell, Experiment, cell_report

    cell = Cell("arm", 0)
    exp = Experiment(dir=tmp_path / "exp", id="exp", spec=None, task_path=tmp_path, cells=[cell])  # type: ignore[arg-type]
    store = forgery_run(tmp_path / "made")
    by_an_agent(store)
    shutil.copytree(store.dir, exp.run_dir(cell))
    report = cell_report(exp, cell)
    assert report.curve.best and max(report.curve.best) == 0.5 and report.final_best == 0.5


class OneBetterEdit(Agent):
    """Proposes one real improvement of the demo objective, then nothing."""

    def __init__(self) -> None:
        super().__init__(AgentConfig(name="scripted", backend="scripted"), task_from_dict({"name": "x"}))
        self.queue = [Proposal(hypothesis="X=1.7", edits=[FileEdit(path="objective.py",
                                                                    replacements=[("X = 0.0 ", "X = 1.7 ")])])]

    def propose(self, ctx: Context) -> Proposal | None:
        return self.queue.pop(0) if self.queue else None


@pytest.mark.parametrize("loop", [{"loop.confirm": 1}, {"loop.hitl": True}], ids=["confirmed", "approved"])
def test_a_real_runs_promotions_all_count(tmp_path: Path, loop: dict[str, Any]) -> None:
    """The demo through the loop: the baseline's promotion and the new best's (confirmed by a repeat, or held
    for review and then approved through review_trial) are all written by the one writer and all count."""
    task = load_task(REPO / "benches" / "demo" / "task.yaml", {"budget.max_trials": 2, "noise.baseline_repeats": 2,
                                                               **loop})
    result = start_run(task, tmp_path / "runs", agents=[OneBetterEdit()])
    if "loop.hitl" in loop:
        review_trial(RunStore(result.run_dir), "t0001", "approve", "alice")
    state = fold(RunStore(result.run_dir))
    assert [tid for tid, _ in state.best_history] == ["base-0", "t0001"] and not state.refused
    assert verify_run(result.run_dir).ok


def test_the_fixture_log_of_schema_1_still_verifies(tmp_path: Path) -> None:
    """The v1 fixture (a real demo run): its three promotions (the baseline at its measured mean, two new
    bests) satisfy the rule, so verify exits 0 as before."""
    run = tmp_path / "v1_demo"
    shutil.copytree(FIXTURE, run)
    state = fold(RunStore(run))
    assert [tid for tid, _ in state.best_history] == ["base-0", "t0001", "t0002"] and not state.refused
    assert main(["verify", str(run)]) == 0


# ----------------------------------------------------------------------------- one writer

PACKAGES = ("rrma", "oracle", "agents", "benches", "cli", "tui")
WRITER = "rrma/run/promotion.py"


def promotion_writers(root: Path) -> list[str]:
    """Each place in the packages under ``root`` that writes ``"trial.promoted"``: the string as the first
    argument of a call (``emit(...)``, ``append(...)``) or the first item of a tuple (``append_many``'s items)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                firsts = (node.args[:1] if isinstance(node, ast.Call) else
                          node.elts[:1] if isinstance(node, ast.Tuple) else [])
                if any(isinstance(f, ast.Constant) and f.value == "trial.promoted" for f in firsts):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_exactly_one_module_writes_trial_promoted() -> None:
    writers = promotion_writers(REPO)
    assert len(writers) == 1 and writers[0].startswith(WRITER + ":"), writers


def test_the_writer_check_finds_a_second_writer(tmp_path: Path) -> None:
    (tmp_path / "rrma" / "run").mkdir(parents=True)
    (tmp_path / "rrma" / "run" / "promotion.py").write_text('def promote(emit):\n    emit("trial.promoted", "harness", {})\n')
    (tmp_path / "rrma" / "log").mkdir()
    (tmp_path / "rrma" / "log" / "review.py").write_text(
        'KIND = "trial.promoted"\n'  # naming the kind is not writing it
        'def ok(e):\n    return e.kind == "trial.promoted"\n'
        'def forge(store):\n    store.append_many([("trial.promoted", "human:x", {})])\n')
    assert promotion_writers(tmp_path) == ["rrma/log/review.py:5", "rrma/run/promotion.py:2"]
