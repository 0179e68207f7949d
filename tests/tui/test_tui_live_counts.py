"""What keeps a live redraw cheap at a million events: the model's trial tally and the runs list's summary.

The tally must always equal a count over every trial (what the header did on each redraw before),
whatever the fold changes: new trials, finishes, reviews, a resume that puts trials back to proposed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from make_run import make_run

from rrma.log.reader import LiveFold, RunReader, TrialTally, read_summary
from rrma.log.state import RunState
from rrma.log.store import RunStore
from tui.widgets.trial_text import is_claim


def counted(state: RunState) -> TrialTally:
    """The tally the slow way: one pass over every agent trial; "to review" is what the review queue lists."""
    out = TrialTally()
    for rec in state.agent_trials():
        out.counts[rec.status] = out.counts.get(rec.status, 0) + 1
    queue = state.pending_review()
    out.to_review = len(queue)
    out.claims = sum(1 for rec in queue if is_claim(rec))
    return out


def fold_new_lines(reader: RunReader, model: LiveFold) -> None:
    chunk = reader.poll()
    assert chunk is not None
    model.apply(chunk)


def test_tally_follows_the_fold(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "r", trials=20, finished=False, hitl=True, pending_claims=2)
    reader = RunReader(run_dir)
    model = reader.load()
    first = model.trial_tally(is_claim)
    assert first == counted(model.state) and first.claims == 2 and first.to_review > 2
    store = RunStore(run_dir)
    blob = store.put_json_blob({"hypothesis": "late", "edits": []})
    claim = next(t for t in model.state.order if is_claim(model.state.trials[t]))
    ok = next(t for t in model.state.order if model.state.trials[t].status == "ok" and not model.state.trials[t].baseline
              and t != claim)
    steps = [
        [("review", "human:ann", {"trial_id": claim, "decision": "approve", "reviewer": "ann"}),
         ("review", "human:ann", {"trial_id": ok, "decision": "reject", "reviewer": "ann"})],  # two leave "to review"
        [("trial.proposed", "agent:bob", {"trial_id": "n1", "parent": ok, "agent": "bob", "hypothesis": "late",
                                          "proposal_blob": blob}),
         ("trial.proposed", "agent:bob", {"trial_id": "n2", "parent": ok, "agent": "bob", "hypothesis": "late",
                                          "proposal_blob": blob}),
         ("trial.started", "harness", {"trial_id": "n1"}), ("trial.started", "harness", {"trial_id": "n2"})],
        [("run.resumed", "harness", {"interrupted_trials": ["n1", "n2"]})],  # back to proposed, no trial_id field
        [("trial.finished", "oracle", {"trial_id": "n1", "status": "ok", "score": 2.2}),
         ("trial.finished", "oracle", {"trial_id": "n2", "status": "crash"}),
         ("review", "human:ann", {"trial_id": ok, "decision": "withdraw", "reviewer": "ann"})],  # ok to review again
    ]
    for events in steps:
        store.append_many(events)
        fold_new_lines(reader, model)
        assert model.trial_tally(is_claim) == counted(model.state), events[0][0]
    assert ok in [t.trial_id for t in model.state.pending_review()]  # the withdrawn review's trial is to review

    store.close()


def test_runs_list_summarizes_a_run_open_here_from_its_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = make_run(tmp_path, "r", trials=6, finished=False)
    folded = read_summary(run_dir)
    reader = RunReader(run_dir)  # as a dashboard's
    model = reader.load()
    store = RunStore(run_dir)
    blob = store.put_json_blob({})
    store.append("trial.proposed", "agent:bob", {"trial_id": "n1", "parent": None, "agent": "bob",
                                                 "hypothesis": "late", "proposal_blob": blob})
    fold_new_lines(reader, model)
    with monkeypatch.context() as patched:
        patched.setattr(RunReader, "load", lambda self: pytest.fail("summarized by folding the log again"))
        assert read_summary(run_dir).trials == folded.trials + 1
    store.append("trial.proposed", "agent:bob", {"trial_id": "n2", "parent": None, "agent": "bob",
                                                 "hypothesis": "later", "proposal_blob": blob})
    store.close()
    reader.touched -= 60  # a reader that stopped polling (its dashboard closed): its model is not used
    assert read_summary(run_dir).trials == folded.trials + 2
