"""One huge line in a run log: the writer never makes one, and every reader stays linear on one it finds.

The writer (rrma/log/events.py ``build_line``, called by ``RunStore.append_many``) fits an event over
``MAX_EVENT_BYTES``: long strings keep their head and tail, then the largest list or mapping fields
are emptied, each cut value whole in a blob named by ``data.clipped``. The tests switch the cap off
(a cap no line reaches) to show the line it prevents. The readers' speed on a legacy log that has such
a line is measured in benches/perf/bench_long_line.py; here, that they read it right whatever the
block size (a line spanning many blocks of the backward walk and of the forward tail).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rrma.log import events
from rrma.log.events import MAX_EVENT_BYTES, EventTooLarge, canonical, compute_hash
from rrma.log.head import encode_head
from rrma.log.reader import read_state
from rrma.log.store import RunStore
from rrma.log.tail import LineTail, lines_backwards
from rrma.log.verify import verify_run

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "logs" / "v1_demo"
BIG = 3 * MAX_EVENT_BYTES  # characters of the text an agent hands the log


def run_copy(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    return run_dir


def last_line(run_dir: Path) -> bytes:
    return (run_dir / "events.jsonl").read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]


@pytest.mark.parametrize("cap", [True, False], ids=["cap-on", "cap-off"])
def test_a_huge_turn_text_goes_to_a_blob_and_its_line_stays_under_the_cap(tmp_path: Path, cap: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if not cap:
        monkeypatch.setattr(events, "MAX_EVENT_BYTES", 1 << 40)
    run_dir = run_copy(tmp_path)
    store = RunStore(run_dir)
    text = "head " + "x" * BIG + " tail"
    event = store.append("agent.turn", "agent:a", {"agent": "a", "role": "tool_result", "result": text,
                                                   "text": "short", "trial_id": "t0001"})
    line = last_line(run_dir)
    if not cap:  # the attack: the whole text is one line every reader of the log must parse
        assert len(line) > BIG and event.data.result == text
        return
    assert len(line) <= MAX_EVENT_BYTES
    result = event.data.result
    assert result.startswith("head x") and result.endswith("x tail") and "characters cut ..." in result
    assert len(result) <= events.CLIP_KEEP_CHARS
    assert event.data.text == "short"  # short strings are never cut
    [(path, cut)] = event.data.model_extra["clipped"].items()
    assert path == "result" and cut["bytes"] == len(text)
    assert store.blob_text(cut["blob"]) == text  # nothing lost
    assert verify_run(run_dir).ok


def test_nested_strings_then_the_largest_containers_are_cut(tmp_path: Path) -> None:
    run_dir = run_copy(tmp_path)
    store = RunStore(run_dir)
    numbers = list(range(400_000))  # ~2.7 MB of JSON with no long string in it
    args = {"file": "a.py", "content": "y" * BIG, "ids": numbers}
    blobs = set(store.blob_dir.iterdir())
    event = store.append("agent.turn", "agent:a", {"agent": "a", "role": "tool_call", "tool": "write", "args": args})
    assert len(last_line(run_dir)) <= MAX_EVENT_BYTES
    clipped = event.data.model_extra["clipped"]
    assert list(clipped) == ["args"]  # the string inside went with the whole value: one blob holds it uncut
    assert [p.name for p in set(store.blob_dir.iterdir()) - blobs] == [clipped["args"]["blob"]]  # and no other
    assert event.data.args == {}  # still a mapping, as the field's type says
    assert json.loads(store.blob_text(clipped["args"]["blob"])) == args
    assert verify_run(run_dir).ok


@pytest.mark.parametrize(("kind", "actor", "data"), [
    ("blackboard.post", "agent:a", {"agent": "a", "text": "p" * BIG}),
    ("note", "harness", {"text": "n" * BIG}),
    ("agent.steer", "human:c", {"text": "s" * BIG, "by": "human:c"}),
    ("trial.finished", "oracle", {"trial_id": "t0001", "status": "crash", "feedback": "f" * BIG}),
])
def test_every_kind_of_free_text_is_fitted(tmp_path: Path, kind: str, actor: str, data: dict[str, Any]) -> None:
    run_dir = run_copy(tmp_path)
    event = RunStore(run_dir).append(kind, actor, data)
    assert len(last_line(run_dir)) <= MAX_EVENT_BYTES
    assert event.data.model_extra["clipped"]


@pytest.mark.parametrize(("kind", "data"), [
    ("review", {"trial_id": "t0001", "decision": "approve", "reviewer": "c", "note": "r" * BIG}),  # signed text
    ("run.started", {"run_id": "r", "task_name": "t", "task": {"description": "d" * BIG}}),  # the task's record
])
def test_what_must_stay_whole_is_refused_not_cut(tmp_path: Path, kind: str, data: dict[str, Any]) -> None:
    run_dir = run_copy(tmp_path)
    before = (run_dir / "events.jsonl").read_bytes()
    with pytest.raises(EventTooLarge, match=rf"{kind} event of \d+ bytes is over the {MAX_EVENT_BYTES} byte limit"):
        RunStore(run_dir).append(kind, "human:c", data)
    assert (run_dir / "events.jsonl").read_bytes() == before  # nothing written


def test_verify_reports_a_missing_clipped_blob(tmp_path: Path) -> None:
    run_dir = run_copy(tmp_path)
    store = RunStore(run_dir)
    event = store.append("note", "harness", {"text": "n" * BIG})
    (store.blob_dir / event.data.model_extra["clipped"]["text"]["blob"]).unlink()
    report = verify_run(run_dir)
    assert not report.ok and any("named by the log is missing" in e for e in report.errors)


# ----------------------------------------------------------------------------- readers of a legacy log


def append_raw(run_dir: Path, kind: str, actor: str, data: dict[str, Any], *, terminated: bool = True) -> int:
    """Append an event as an rrma without the cap wrote it (the head record kept); returns its seq."""
    store = RunStore(run_dir)
    seq, prev = store.head()
    ts = "2026-11-28T00:00:00.000000Z"
    fields: dict[str, Any] = {"v": 1, "seq": seq + 1, "ts": ts, "kind": kind, "actor": actor,
              "data": data, "prev": prev}
    digest = fields["hash"] = compute_hash(fields)
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(canonical(fields).encode() + (b"\n" if terminated else b""))
        size = fh.tell()
    if terminated:
        (run_dir / "head.json").write_bytes(encode_head(seq + 1, digest, size, ts))
    return seq + 1


@pytest.mark.parametrize("block", [1, 7, 4096, 65536])
def test_the_backward_walk_gives_every_line_whole(tmp_path: Path, block: int) -> None:
    lines = [b"", b"a", b"x" * 70_000, b"", b"bc", b"y" * 5000, b"z"]
    path = tmp_path / "log"
    for ending in (b"\n", b""):  # a log that ends with a newline; one whose last line is cut short
        data = b"\n".join(lines) + ending
        path.write_bytes(data)
        with open(path, "rb") as fh:
            got = list(lines_backwards(fh.fileno(), len(data), block))
        assert got == list(reversed(data.split(b"\n")))


@pytest.mark.parametrize("block", [1, 5, 1024, 1 << 20])
def test_the_tail_hands_out_long_lines_whole(tmp_path: Path, block: int) -> None:
    lines = [b"a", b"x" * 50_000, b"", b"b" * 1023, b"c" * 1024, b"d"]
    path = tmp_path / "log"
    path.write_bytes(b"\n".join(lines) + b"\n" + b"torn" * 300)  # the fragment after the last newline is left
    tail = LineTail(path)
    got = [line for _, line in tail.lines()] if block == 1 << 20 else [
        line for base, data in tail.blocks(block=block) for line in data.split(b"\n")[:-1]]
    assert got == lines
    assert tail.offset == sum(len(line) + 1 for line in lines)


@pytest.mark.parametrize("terminated", [True, False], ids=["last-line", "torn-after-it"])
def test_a_legacy_huge_last_line_is_read_right_by_head_show_and_export(tmp_path: Path, terminated: bool) -> None:
    run_dir = run_copy(tmp_path)
    seq = append_raw(run_dir, "agent.turn", "agent:a", {"agent": "a", "role": "assistant", "text": "w" * BIG,
                                                        "trial_id": "t0001"})
    if not terminated:
        with open(run_dir / "events.jsonl", "ab") as fh:
            fh.write(b'{"actor":"agent:a","data":{"text":"' + b"q" * BIG)  # a writer killed mid-line
    store = RunStore(run_dir)
    assert store.head()[0] == seq
    state = read_state(run_dir)
    assert state.last_seq == seq and state.agents["a"].last_activity == "assistant: " + "w" * 80
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    show = subprocess.run([sys.executable, "-m", "cli.main", "show", str(run_dir)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert show.returncode == 0, show.stderr
    assert f"head: seq {seq} " in show.stdout
    db = tmp_path / "out.db"
    export = subprocess.run([sys.executable, "-m", "cli.main", "export", str(run_dir), "--sqlite", str(db)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert export.returncode == 0, export.stderr
    with sqlite3.connect(db) as conn:
        [(length,)] = conn.execute("SELECT length(text) FROM turns WHERE seq = ?", [seq]).fetchall()
    assert length == BIG  # a legacy line is exported as it is: the export is the log's content
    if not terminated:
        store.append("note", "harness", {"text": "after"})  # seals the fragment; the chain goes on from the turn
        assert store.head()[0] == seq + 1 and verify_run(run_dir).errors == []
