"""A promotion reads only outcomes that verify.

The attack: a ``trial.finished`` that ``rrma-tui verify`` rejects (or should) still counted in the fold,
so a person's approval promoted it: a log blob that is missing or swapped, a second outcome for a
finished trial, an outcome written by an agent, a status that is no status, an infinite score, a line
edited in place. Each run here is built with the real RunStore (every line validly chained unless the
case edits one in place), then approved through :func:`rrma.run.promotion.review_trial` as the CLI and the TUI
do; one case goes through the live loop. Each case shows the approval promoting with the defence off
(:func:`rrma.log.state.refused_outcome`, :func:`rrma.log.state.refused_promotion` and
:func:`rrma.log.review.unverified_outcome` monkeypatched away: the behaviour before them) and refused with it on.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rrma.contracts import Agent, Context
from rrma.log import state as state_module
from rrma.log.events import TrialFinishedData
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run import promotion as promotion_module
from rrma.run.loop import start_run
from rrma.run.promotion import review_trial
from rrma.task import AgentConfig, load_task, task_from_dict
from rrma.trial import FileEdit, Proposal

REPO = Path(__file__).resolve().parents[2]
HONEST = {"trial_id": "t0001", "status": "ok", "score": 0.51, "metrics": {}, "feedback": "score: 0.51"}
FORGED = {"trial_id": "t0001", "status": "ok", "score": 0.99, "metrics": {"awaiting_review": True},
          "feedback": "score: 0.99"}  # a would-be best held for review (loop.hitl)


def defence_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "refused_outcome", lambda state, ev: None)
    monkeypatch.setattr(state_module, "refused_promotion", lambda state, ev: None)  # a promotion of an unscored trial
    monkeypatch.setattr(promotion_module, "unverified_outcome", lambda store, rec, chain=None: None)


def _finish(store: RunStore, data: dict[str, Any], actor: str = "oracle") -> None:
    store.append("trial.finished", actor, {**data, "log_blob": store.put_blob(f"oracle log: {data['score']}")})


def _missing_blob(store: RunStore) -> None:
    store.append("trial.finished", "oracle", {**FORGED, "log_blob": "ab" * 32})


def _swapped_blob(store: RunStore) -> None:
    _finish(store, FORGED)
    digest = store.put_blob("oracle log: 0.99")
    (store.blob_dir / digest).write_text("oracle log: crash, no score")


def _second_outcome(store: RunStore) -> None:
    _finish(store, HONEST)
    _finish(store, FORGED)


def _by_an_agent(store: RunStore) -> None:
    _finish(store, FORGED, actor="agent:a")


def _not_a_status(store: RunStore) -> None:
    _finish(store, {**FORGED, "status": "approved"})


def _infinite_score(store: RunStore) -> None:
    # the string "inf" is what pydantic reads as float('inf'); RunStore chains it like any other line
    forged = TrialFinishedData(**FORGED).model_copy(update={"score": "inf"})
    with warnings.catch_warnings():  # pydantic says the string is not the float the field expects: the point
        warnings.simplefilter("ignore", UserWarning)
        store.append("trial.finished", "oracle", forged)


def _edited_in_place(store: RunStore) -> None:
    _finish(store, HONEST)
    log = store.events_path
    lines = log.read_bytes().splitlines(keepends=True)
    obj = json.loads(lines[-1])
    obj["data"].update(score=0.99, metrics={"awaiting_review": True})  # prev and hash left as they were
    log.write_bytes(b"".join(lines[:-1]) + json.dumps(obj, separators=(",", ":")).encode() + b"\n")


# (how the outcome of t0001 is written, what verify says about it)
FORGERIES = [
    pytest.param(_missing_blob, "named by the log is missing", id="missing_log_blob"),
    pytest.param(_swapped_blob, "does not match its content hash", id="swapped_log_blob"),
    pytest.param(_second_outcome, "a second outcome for t0001", id="second_outcome"),
    pytest.param(_by_an_agent, "written by 'agent:a', not by the oracle or the harness", id="by_an_agent"),
    pytest.param(_not_a_status, "status 'approved', which is not a trial status", id="not_a_status"),
    pytest.param(_infinite_score, "score inf, which is not a finite number", id="infinite_score"),
    pytest.param(_edited_in_place, "hash mismatch", id="edited_in_place"),
]


def gated_run(root: Path, write_outcome: Callable[[RunStore], None]) -> RunStore:
    """A finished hitl run (maximize, baseline 0.5 promoted) whose trial t0001 has the given outcome."""
    store = RunStore(root / "run-forged", create=True)
    task = {"name": "forged", "metric": {"name": "score", "direction": "maximize"}, "loop": {"hitl": True}}
    store.append("run.started", "harness", {"run_id": "run-forged", "task_name": "forged", "task": task,
                                            "head_record": True})
    proposal = store.put_json_blob({"hypothesis": "x"})
    store.append("trial.proposed", "harness", {"trial_id": "base-0", "parent": None, "agent": "baseline",
                                               "proposal_blob": proposal, "baseline": True})
    _finish(store, {"trial_id": "base-0", "status": "ok", "score": 0.5})
    store.append("baseline.measured", "harness", {"trial_ids": ["base-0"], "scores": [0.5], "mean": 0.5,
                                                  "sigma": 0.0, "floor": 0.0})
    store.append("trial.promoted", "harness", {"trial_id": "base-0", "score": 0.5, "previous_best": None,
                                               "previous_score": None})
    store.append("trial.proposed", "agent:a", {"trial_id": "t0001", "parent": "base-0", "agent": "a",
                                               "proposal_blob": proposal})
    store.append("run.finished", "harness", {"reason": "max_trials"})  # first: an edit in place is mid-log
    write_outcome(store)
    return store


@pytest.mark.parametrize(("write_outcome", "said"), FORGERIES)
def test_an_approval_promotes_only_an_outcome_that_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            write_outcome: Callable[[RunStore], None],
                                                            said: str) -> None:
    with monkeypatch.context() as off:
        defence_off(off)
        store = gated_run(tmp_path / "off", write_outcome)
        assert RunState.fold(store.scan().events).trials["t0001"].metrics.get("awaiting_review")
        if write_outcome is _infinite_score:  # the judge says promote; writing an infinite best then fails
            with pytest.raises(ValueError, match="Out of range float"):
                review_trial(store, "t0001", "approve", "alice")
        else:
            review_trial(store, "t0001", "approve", "alice")
            state = RunState.fold(store.scan().events)
            assert state.best_id == "t0001" and state.best_history[-1] == ("t0001", 0.99)

    store = gated_run(tmp_path / "on", write_outcome)
    report = verify_run(store.dir)
    assert not report.ok and any(said in e for e in report.errors), report.errors
    approval = review_trial(store, "t0001", "approve", "alice")
    events = store.scan().events
    state = RunState.fold(events)
    assert state.best_id == "base-0" and not state.trials["t0001"].promoted
    assert not any(e.kind == "trial.promoted" and e.data.trial_id == "t0001" for e in events)
    if state.trials["t0001"].metrics.get("awaiting_review"):  # the fold counted it: the approval said why not
        [note] = [n for n in state.notes if n.startswith(f"review seq {approval.seq}:")]
        assert "does not promote it" in note and ("blob" in note or "fails verify" in note), note
    else:  # the fold refused the outcome: nothing awaits review
        assert any(r["kind"] == "trial.finished" and r["trial_id"] == "t0001" for r in state.refused)


def test_the_honest_outcome_still_promotes(tmp_path: Path) -> None:
    """The control: the same run with the oracle's one outcome of 0.99 verifies and the approval promotes it."""
    store = gated_run(tmp_path, lambda s: _finish(s, FORGED))
    assert not [e for e in verify_run(store.dir).errors if "results.tsv" not in e and "blackboard.md" not in e]
    review_trial(store, "t0001", "approve", "alice")
    state = RunState.fold(store.scan().events)
    assert state.best_id == "t0001" and state.trials["t0001"].promoted and not state.refused


def test_a_json_infinity_in_a_line_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    """JSON's ``Infinity`` parses (json and pydantic both take it) but has no canonical form to hash:
    verify_chain used to raise ValueError on it; now it is a hash mismatch, and the fold refuses the score."""
    store = gated_run(tmp_path, lambda s: _finish(s, HONEST))
    log = store.events_path
    text = log.read_text()
    assert text.count('"score":0.51') == 1
    log.write_text(text.replace('"score":0.51', '"score":Infinity'))
    report = verify_run(store.dir)
    assert any("hash mismatch" in e for e in report.errors), report.errors
    assert any("score inf, which is not a finite number" in e for e in report.errors), report.errors


# ----------------------------------------------------------------------------- the live loop


class ScriptedAgent(Agent):
    """Proposes the given proposals, then calls ``then`` once and stops."""

    backend = "scripted"

    def __init__(self, proposals: list[Proposal], then: Callable[[], None]) -> None:
        super().__init__(AgentConfig(name="scripted", backend="scripted"), task_from_dict({"name": "x"}))
        self.queue = list(proposals)
        self.then: Callable[[], None] | None = then

    def propose(self, ctx: Context) -> Proposal | None:
        if self.queue:
            return self.queue.pop(0)
        if self.then is not None:
            then, self.then = self.then, None
            then()
        return None


@pytest.mark.parametrize("defended", [False, True], ids=["defence_off", "defence_on"])
def test_the_live_loop_does_not_promote_an_outcome_whose_log_was_swapped(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         defended: bool) -> None:
    """While the run goes on, t0001 (a real improvement, held for review) has its oracle log replaced in
    blobs/; then alice approves. The loop's own sync decides (rrma/run/loop.py _check_reviews)."""
    if not defended:
        defence_off(monkeypatch)
    seen: dict[str, Any] = {}

    def swap_then_approve() -> None:
        [run_dir] = [p for p in (tmp_path / "runs").iterdir() if (p / "events.jsonl").exists()]
        store = RunStore(run_dir)
        rec = RunState.fold(store.scan().events).trials["t0001"]
        assert rec.metrics.get("awaiting_review") and rec.log_blob
        (store.blob_dir / rec.log_blob).write_text("loss: 0.0\n")
        seen["approval"] = review_trial(store, "t0001", "approve", "alice").seq
        marker = f"review seq {seen['approval']}:"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            state = RunState.fold(store.scan().events)
            if state.trials["t0001"].promoted or any(n.startswith(marker) for n in state.notes):
                return
            time.sleep(0.1)

    task = load_task(REPO / "benches" / "demo" / "task.yaml", {"loop.hitl": True, "budget.max_trials": 2,
                                                               "noise.baseline_repeats": 1})
    better = Proposal(hypothesis="X=1.7", edits=[FileEdit(path="objective.py", replacements=[("X = 0.0 ", "X = 1.7 ")])])
    result = start_run(task, tmp_path / "runs", agents=[ScriptedAgent([better], swap_then_approve)],
                       stop=threading.Event())
    state = RunState.fold(RunStore(result.run_dir).scan().events)
    assert "approval" in seen
    if not defended:
        assert state.best_id == "t0001" and state.trials["t0001"].promoted
        return
    assert state.best_id == "base-0" and not state.trials["t0001"].promoted
    [note] = [n for n in state.notes if n.startswith(f"review seq {seen['approval']}:")]
    assert "does not match its content hash" in note
