"""The core's rules behind issue 35's numbers: a proof run's theorems and progress (rrma/log/theorems.py), one trial
numbering (TrialRecord.number), and what every view shows of a log's integrity (rrma/log/chain.py log_integrity).
Logs are written through RunStore; the damage is done to the files as an attacker or a crash would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from rrma.log.chain import ChainCheck, log_integrity
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.theorems import GIVEN_UP, OPEN, QUEUED, SOLVED, listed_theorems, proof_progress, theorem_states

TASK = {"name": "bench", "oracle": {"kind": "coq", "params": {"theorems": ["a", "b"]}},
        "loop": {"policy": "per-theorem", "attempts_per_theorem": 2, "theorem_seconds": 600.0},
        "agents": [{"name": "p", "backend": "x"}]}


def write(run_dir: Path, steps: list[tuple[str, ...]], theorems: list[dict[str, str]] | None) -> Path:
    store = RunStore(run_dir, create=True)
    data: dict[str, Any] = {"run_id": run_dir.name, "task_name": "bench", "task": TASK, "head_record": True}
    if theorems is not None:
        data["theorems"] = theorems
    store.append("run.started", "harness", data)
    n = 0
    for step in steps:
        if step[0] in ("started", "done"):
            store.append("note", "harness", {"text": "", "theorem": {"name": step[1], "mark": step[0], "agent": None,
                                                                     "reason": step[2] if len(step) > 2 else None}})
            continue
        n += 1
        tid = f"t{n:04d}"
        store.append_many([
            ("trial.proposed", "agent:p", {"trial_id": tid, "parent": None, "agent": "p", "hypothesis": "h",
                                           "theorem": step[0], "proposal_blob": store.put_json_blob({})}),
            ("trial.finished", "oracle", {"trial_id": tid, "status": step[1], "score": None, "seconds": 0.1,
                                          "metrics": {"difficulty": "metric-says"}}),
        ])
    store.close()
    return run_dir


def fold(run_dir: Path) -> RunState:
    return RunState.fold(RunStore(run_dir).scan().events)


RECORDED = [{"name": "a", "difficulty": "easy"}, {"name": "b", "difficulty": "hard"}, {"name": "c", "difficulty": "easy"},
            {"name": "d", "difficulty": "medium"}]


def test_the_theorems_run_started_records_are_the_runs_from_the_start(tmp_path: Path) -> None:
    state = fold(write(tmp_path / "r", [("started", "a"), ("a", "rejected")], RECORDED))
    # all four, in the oracle's order, with the recorded difficulty (not the metric's, not "unknown")
    assert listed_theorems(state) == [("a", "easy"), ("b", "hard"), ("c", "easy"), ("d", "medium")]


def test_an_older_log_names_its_theorems_as_before(tmp_path: Path) -> None:
    state = fold(write(tmp_path / "r", [("started", "a"), ("a", "rejected")], None))
    assert listed_theorems(state) == [("a", "metric-says"), ("b", "unknown")]  # the task's list, the trial's metric


@pytest.mark.parametrize(("steps", "words"), [
    ([], [QUEUED] * 4),  # nothing started
    ([("started", "a")], [OPEN, QUEUED, QUEUED, QUEUED]),  # started: open
    ([("started", "a"), ("a", "ok"), ("done", "a", "solved")], [SOLVED, QUEUED, QUEUED, QUEUED]),
    # attempts used (2 of 2): given up, whether or not its done mark is written yet
    ([("started", "a"), ("a", "rejected"), ("a", "rejected")], [GIVEN_UP, QUEUED, QUEUED, QUEUED]),
    ([("started", "a"), ("a", "rejected"), ("done", "a", "out_of_ideas"), ("started", "b")],
     [GIVEN_UP, OPEN, QUEUED, QUEUED]),
])
def test_each_theorem_is_in_one_state(tmp_path: Path, steps: list[tuple[str, ...]], words: list[str]) -> None:
    state = fold(write(tmp_path / "r", steps, RECORDED))
    assert [st.state for st in theorem_states(state, 0.0)] == words
    progress = proof_progress(state, 0.0)
    assert progress is not None and progress.total == 4
    assert (progress.solved, progress.open, progress.queued, progress.given_up) == tuple(
        words.count(w) for w in (SOLVED, OPEN, QUEUED, GIVEN_UP))


def test_the_current_theorem_is_the_one_started_and_not_done(tmp_path: Path) -> None:
    state = fold(write(tmp_path / "r", [("started", "a"), ("done", "a", "solved"), ("started", "b")], RECORDED))
    progress = proof_progress(state, 0.0)
    assert progress is not None and progress.current == "b"


def test_agent_trials_are_numbered_from_one_baselines_not(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "n", create=True)
    store.append("run.started", "harness", {"run_id": "n", "task_name": "x", "task": {}})
    for tid, baseline, confirms in (("base-0", True, None), ("base-1", True, None), ("t0001", False, None),
                                    ("t0002", False, None), ("c-1", False, "t0002"), ("t0003", False, None)):
        store.append("trial.proposed", "harness", {"trial_id": tid, "parent": None, "agent": "a", "hypothesis": "",
                                                   "baseline": baseline, "confirms": confirms,
                                                   "proposal_blob": store.put_json_blob({})})
    store.close()
    state = fold(tmp_path / "n")
    assert {t: r.number for t, r in state.trials.items()} == {"base-0": None, "base-1": None, "t0001": 1,
                                                              "t0002": 2, "c-1": None, "t0003": 3}
    assert [r.number for r in state.agent_trials()] == list(range(1, len(state.agent_trials()) + 1))


# ----------------------------------------------------------------------------- integrity


@pytest.fixture
def intact(tmp_path: Path) -> Path:
    return write(tmp_path / "intact", [("started", "a"), ("a", "rejected"), ("a", "ok"), ("done", "a", "solved")],
                 RECORDED)


def damaged(intact: Path, name: str, how: str) -> Path:
    run_dir = intact.parent / name
    shutil.copytree(intact, run_dir)
    log = run_dir / "events.jsonl"
    data = log.read_bytes()
    lines = data.splitlines(keepends=True)
    if how == "cut":
        log.write_bytes(b"".join(lines[:-1]))
    elif how == "replaced":  # the last line swapped for an earlier one padded to its length: the log is as long
        other = min(lines[:-1], key=len).rstrip(b"\n")
        assert len(other) < len(lines[-1])
        log.write_bytes(b"".join(lines[:-1]) + other.ljust(len(lines[-1]) - 1) + b"\n")
    elif how == "edited":
        log.write_bytes(data.replace(b'"hypothesis":"h"', b'"hypothesis":"H"', 1))
    elif how == "torn":
        log.write_bytes(data + b'{"seq": 99, "ki')
    elif how == "head deleted":
        os.remove(run_dir / "head.json")
    elif how == "head damaged":
        (run_dir / "head.json").write_bytes(b"not json")
    return run_dir


@pytest.mark.parametrize(("how", "verdict", "fails"), [
    ("none", "ok", False), ("cut", "cut", True), ("replaced", "changed", True), ("edited", "broken", True),
    ("torn", "torn", False), ("head deleted", "missing", True), ("head damaged", "unreadable", True),
])
@pytest.mark.parametrize("chain_bytes", [4 << 20, 0], ids=["whole-chain", "head-only"])
def test_what_every_view_shows_of_a_logs_integrity(intact: Path, how: str, verdict: str, fails: bool,
                                                   chain_bytes: int) -> None:
    run_dir = damaged(intact, how.replace(" ", "-"), how)
    found = log_integrity(run_dir, chain_bytes=chain_bytes)
    if how == "edited" and chain_bytes == 0:
        # the head record alone does not see a line changed in the middle: that is what the whole chain is for
        assert found.verdict == "ok" and found.words == "head ok" and not found.chain_checked
        return
    assert (found.verdict, found.fails) == (verdict, fails), found
    assert found.chain_checked == (chain_bytes > 0)
    assert found.finding  # a sentence to quote


def test_a_check_kept_between_calls_sees_a_line_edited_after_the_first(intact: Path) -> None:
    chain = ChainCheck(RunStore(intact))
    assert log_integrity(intact, chain=chain).verdict == "ok"
    log = intact / "events.jsonl"
    log.write_bytes(log.read_bytes().replace(b'"hypothesis":"h"', b'"hypothesis":"H"', 1))
    found = log_integrity(intact, chain=chain)
    assert found.verdict == "broken" and "hash mismatch" in found.finding, found
