"""The views' reader (rrma/log/reader.py) folds to exactly the state RunState.fold gives, and tails correctly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from make_run import make_run

from rrma.log.reader import RunReader, read_summary
from rrma.log.state import RunState
from rrma.log.store import RunStore


def reference(run_dir: Path) -> RunState:
    return RunState.fold(RunStore(run_dir).scan().events)


def same_state(fast: RunState, ref: RunState) -> None:
    for name in ("run_id", "task_name", "best_id", "best_history", "baseline_mean", "sigma", "floor", "events",
                 "last_seq", "last_ts", "finish_reason", "order", "blackboard", "reviews", "notes", "resumes"):
        assert getattr(fast, name) == getattr(ref, name), name
    assert {k: vars(v) for k, v in fast.trials.items()} == {k: vars(v) for k, v in ref.trials.items()}


@pytest.mark.parametrize("kwargs", [
    {"trials": 12},  # a plain finished run
    {"trials": 30, "hitl": True, "pending_claims": 2, "tool_turns": 3},  # claims held by the gate, longer traces
    {"trials": 5, "finished": False, "agents": ("solo",)},  # still running, one agent
])
def test_fast_fold_equals_run_state_fold(tmp_path: Path, kwargs: dict) -> None:
    run_dir = make_run(tmp_path, "r", **kwargs)
    model = RunReader(run_dir).load()
    ref = reference(run_dir)
    same_state(model.state, ref)
    # turns were only counted at open; indexing them gives the same agents as the full fold
    assert {a: (r.last_activity, r.last_ts) for a, r in model.state.agents.items()} == {
        a: (r.last_activity, r.last_ts) for a, r in ref.agents.items() if a in model.state.agents}
    model.attach_index(model.index_turns())
    assert model.turns_indexed and not model.unindexed
    assert {k: vars(v) for k, v in model.state.agents.items()} == {k: vars(v) for k, v in ref.agents.items()}
    roles = [json.loads(line)["data"]["role"] for line in (run_dir / "events.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "agent.turn"]
    assert [t.role for t in model.turns] == roles


@pytest.mark.parametrize("bad, why", [
    (b'{"actor":"agent:x","data":{"agent":"x"', "unterminated"),  # torn mid-write; sealed by a later append
    (b'{"v": 99, "seq": 5, "ts": "", "kind": "note", "actor": "h", "data": {}}', "newer"),  # a future schema
    (b'{"v": 1, "seq": 5, "ts": "", "kind": "mystery", "actor": "h", "data": {}}', "unknown event kind"),
    (b"[1, 2]", "not a JSON object"),
])
def test_unreadable_lines_are_reported_and_never_hide_later_events(tmp_path: Path, bad: bytes, why: str) -> None:
    run_dir = make_run(tmp_path, "r", trials=2, finished=False)
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(bad + (b"\n" if why != "unterminated" else b""))
    store = RunStore(run_dir)
    store.append("note", "harness", {"text": "after the bad line"})  # seals an unterminated fragment
    store.close()
    model = RunReader(run_dir).load()
    assert model.state.notes == ["after the bad line"]
    assert len(model.torn) == 1
    if why != "unterminated":
        assert why in model.torn[0].error


def test_poll_reads_only_complete_appended_lines(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "r", trials=2, finished=False)
    reader = RunReader(run_dir)
    model = reader.load()
    assert reader.poll() is None
    store = RunStore(run_dir)
    store.append("blackboard.post", "agent:alice", {"agent": "alice", "text": "one"})
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(b'{"actor":"agent:alice"')  # a writer caught mid-line
    chunk = reader.poll()
    assert chunk is not None and [e.kind for e in chunk.items] == ["blackboard.post"]  # type: ignore[union-attr]
    model.apply(chunk)
    assert reader.poll() is None  # the partial line waits
    store.append("agent.turn", "agent:alice", {"agent": "alice", "role": "tool_result", "tool": "run", "result": "ok"})
    store.close()
    chunk = reader.poll()
    assert chunk is not None and chunk.torn  # the sealed fragment is reported, the turn is read
    model.apply(chunk)
    assert model.turns[-1].role == "tool_result" and model.turn_data(model.turns[-1])["result"] == "ok"
    assert [p["text"] for p in model.state.blackboard][-1] == "one"


def test_summary_of_a_run(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "r", trials=12)
    summary = read_summary(run_dir)
    ref = reference(run_dir)
    assert (summary.task, summary.status, summary.trials) == ("tiny-train", "finished", 12)
    assert ref.best is not None and summary.best == ref.best.score and summary.baseline == ref.baseline_mean
    assert " vs " in summary.best_vs_baseline and summary.delta_sigma is not None  # the Δσ apart (the runs list's column)


def test_open_takes_each_agents_activity_from_its_newest_turn(tmp_path: Path) -> None:
    """Turns are only counted at open; when the newest lines are turns of several agents, each agent's
    activity line still comes from its own newest turn (read back for the header), as a full fold gives."""
    run_dir = make_run(tmp_path, "r", trials=4, finished=False)
    store = RunStore(run_dir)
    for agent, text in (("bob", "b1: the warmup"), ("alice", "a1: the batch"), ("alice", "a2: the decay")):
        store.append("agent.turn", f"agent:{agent}", {"agent": agent, "role": "assistant", "text": text})
    store.close()
    model = RunReader(run_dir).load()
    assert len(model.unindexed) > 3  # the turns were stubbed, not parsed
    ref = reference(run_dir)
    assert {a: (r.last_activity, r.last_ts) for a, r in model.state.agents.items()} == {
        a: (r.last_activity, r.last_ts) for a, r in ref.agents.items()}
    assert model.state.agents["bob"].last_activity == "assistant: b1: the warmup"
