"""The chain check kept between approvals (rrma/log/chain.py): it re-verifies only what was appended since,
and still sees every change a whole-log ``verify_chain`` sees.

Each attack edits the log after a clean check: a line already verified edited in place (its hash no longer
matches), the end cut off, the last line replaced. With the prefix hash switched off (``_prefix_intact``
monkeypatched to say yes: trusting what was verified before) the edit in place goes unseen; with it on, the
check finds what a full ``verify_chain`` finds. The loop's approvals use it: an approval after such an edit
promotes nothing and says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rrma.log import chain as chain_module
from rrma.log.chain import ChainCheck, verify_chain
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.run.promotion import promote_if_approved


def noted_run(root: Path, notes: int = 50) -> RunStore:
    store = RunStore(root / "run", create=True)
    store.append("run.started", "harness", {"run_id": "run", "task_name": "t", "task": {}, "head_record": True})
    store.append_many([("note", "harness", {"text": f"note {i}"}) for i in range(notes)])
    return store


def edit_in_place(store: RunStore, index: int) -> None:
    """Change a note's text in line ``index`` (prev and hash left as they were): what a hand edit does."""
    lines = store.events_path.read_bytes().splitlines(keepends=True)
    obj = json.loads(lines[index])
    obj["data"]["text"] = "edited"
    lines[index] = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    store.events_path.write_bytes(b"".join(lines))


def test_a_kept_check_reads_only_what_was_appended(tmp_path: Path) -> None:
    store = noted_run(tmp_path)
    check = ChainCheck(store)
    assert check.errors() == [] and check.full_checks == 1 and check.mark is not None
    first = check.mark
    store.append_many([("note", "harness", {"text": f"later {i}"}) for i in range(10)])
    assert check.errors() == [] and check.full_checks == 1
    assert check.mark.events == first.events + 10 and check.mark.offset == store.events_path.stat().st_size


@pytest.mark.parametrize("trusting", [True, False], ids=["prefix_trusted", "prefix_hashed"])
def test_an_edit_of_a_verified_line_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusting: bool) -> None:
    store = noted_run(tmp_path)
    check = ChainCheck(store)
    assert check.errors() == []
    edit_in_place(store, 10)
    store.append("note", "harness", {"text": "after the edit"})
    if trusting:  # the defence off: what was verified once is not looked at again
        monkeypatch.setattr(chain_module.ChainCheck, "_prefix_intact", lambda self: True)
        assert check.errors() == []
        return
    errors = check.errors()
    assert errors == verify_chain(store).errors and any("seq 10: hash mismatch" in e for e in errors), errors
    assert check.full_checks == 2 and check.mark is None


def test_a_cut_or_replaced_end_is_seen(tmp_path: Path) -> None:
    store = noted_run(tmp_path)
    check = ChainCheck(store)
    assert check.errors() == []
    data = store.events_path.read_bytes()
    store.events_path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])  # the last event cut off
    assert any("cut off or replaced" in e for e in check.errors())
    store.events_path.write_bytes(data)
    assert check.errors() == []


def test_a_torn_line_is_left_behind_the_mark(tmp_path: Path) -> None:
    """A crash mid-write leaves a fragment with no newline: the mark stays before it; the next append seals it
    and the kept check goes on from the mark, through the sealed fragment (a warning), without a full check."""
    store = noted_run(tmp_path)
    check = ChainCheck(store)
    assert check.errors() == []
    size = store.events_path.stat().st_size
    with open(store.events_path, "ab") as fh:
        fh.write(b'{"v":1,"seq":51,"kind":"no')
    assert check.errors() == [] and check.mark is not None and check.mark.offset == size
    event = store.append("note", "harness", {"text": "after the crash"})
    assert check.errors() == [] and check.mark.seq == event.seq and check.full_checks == 1


def test_an_approval_after_an_edit_in_place_promotes_nothing(tmp_path: Path) -> None:
    """A kept check (the loop's) saw the log clean; a verified line is then edited; the next approval refuses."""
    store = RunStore(tmp_path / "run", create=True)
    task = {"name": "t", "metric": {"name": "score", "direction": "maximize"}}
    store.append("run.started", "harness", {"run_id": "run", "task_name": "t", "task": task, "head_record": True})
    blob = store.put_json_blob({"hypothesis": "x"})
    for tid, score, metrics in (("base-0", 0.5, {}), ("t0001", 0.7, {"awaiting_review": True}),
                                ("t0002", 0.8, {"awaiting_review": True})):
        store.append("trial.proposed", "harness", {"trial_id": tid, "parent": None, "agent": "a",
                                                   "proposal_blob": blob, "baseline": tid == "base-0"})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "metrics": metrics})
    store.append("review", "human:alice", {"trial_id": "t0001", "decision": "approve", "reviewer": "alice"})
    store.append("note", "harness", {"text": "a line to edit later"})
    state = RunState.fold(store.scan().events)
    check = ChainCheck(store)

    def emit(kind: str, actor: str, data: dict[str, object]) -> object:
        event = store.append(kind, actor, data)
        state.apply(event)
        return event

    assert promote_if_approved(store, state, None, "t0001", emit, check) and state.best_id == "t0001"
    edit_in_place(store, len(store.scan().events) - 2)  # the note, verified by the first approval's check
    emit("review", "human:alice", {"trial_id": "t0002", "decision": "approve", "reviewer": "alice"})
    assert not promote_if_approved(store, state, None, "t0002", emit, check)
    assert state.best_id == "t0001" and "fails verify" in state.notes[-1] and "hash mismatch" in state.notes[-1]


def test_the_loops_approvals_share_one_check(tmp_path: Path) -> None:
    """Orders.check_reviews (the live loop, under its ledger's lock) keeps one check for all approvals: the
    whole log is read once, later approvals read what was appended since (docs/perf.md: bench_promotion)."""
    from rrma.run.ledger import RunLedger
    from rrma.run.orders import Orders
    from rrma.task import task_from_dict

    store = RunStore(tmp_path / "run", create=True)
    task = {"name": "t", "metric": {"name": "score", "direction": "maximize"}, "loop": {"hitl": True}}
    store.append("run.started", "harness", {"run_id": "run", "task_name": "t", "task": task, "head_record": True})
    blob = store.put_json_blob({"hypothesis": "x"})
    for tid, score, metrics in (("base-0", 0.5, {}), ("t0001", 0.7, {"awaiting_review": True}),
                                ("t0002", 0.8, {"awaiting_review": True})):
        store.append("trial.proposed", "harness", {"trial_id": tid, "parent": None, "agent": "a",
                                                   "proposal_blob": blob, "baseline": tid == "base-0"})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "metrics": metrics})
    ledger = RunLedger(store)
    ledger.sync()
    orders = Orders(ledger, None, task_from_dict(task))  # type: ignore[arg-type]  # check_reviews needs no scheduler
    for tid in ("t0001", "t0002"):
        store.append_many([("note", "harness", {"text": f"the run goes on {i}"}) for i in range(20)])
        store.append("review", "human:alice", {"trial_id": tid, "decision": "approve", "reviewer": "alice"})
        ledger.sync()
        orders.check_reviews()
        assert ledger.state.best_id == tid
    assert orders.chain.full_checks == 1 and orders.chain.mark is not None
    assert orders.chain.mark.seq < ledger.state.last_seq  # the last promotion came after the check
