"""The run log: hash chain, concurrent appends, torn lines, live tailing, schema versions."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from rrma.log.chain import verify_chain
from rrma.log.events import GENESIS, SCHEMA_VERSION, LogFormatError, compute_hash, parse_line
from rrma.log.store import RunStore

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"


def _writer(run_dir: str, worker: int, count: int) -> None:
    store = RunStore(run_dir)
    for i in range(count):
        store.append("note", f"agent:w{worker}", {"text": f"worker {worker} event {i}"})
    store.close()


def test_chain_and_seq(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    for i in range(5):
        store.append("note", "harness", {"text": str(i)})
    lines = store.events_path.read_text().splitlines()
    prev = GENESIS
    for i, line in enumerate(lines):
        obj = json.loads(line)
        assert obj["seq"] == i
        assert obj["prev"] == prev
        assert compute_hash(obj) == obj["hash"]
        prev = obj["hash"]
    assert verify_chain(store).ok


def test_eight_processes_2000_events_each(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    RunStore(run_dir, create=True)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(run_dir), w, 2000)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = RunStore(run_dir)
    lines = store.events_path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == 16_000
    seqs = [json.loads(line)["seq"] for line in lines[:-1]]
    assert seqs == list(range(16_000))
    report = verify_chain(store)
    assert report.ok, report.errors[:5]
    per_worker = {}
    for event in store.scan().events:
        per_worker.setdefault(event.actor, []).append(int(event.data.text.rsplit(" ", 1)[1]))
    assert all(v == list(range(2000)) for v in per_worker.values())  # each writer's order is kept


def test_threads_share_one_store(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    threads = [threading.Thread(target=lambda n=n: [store.append("note", "harness", {"text": f"{n}-{i}"})
                                                   for i in range(300)]) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report = verify_chain(store)
    assert report.ok and report.events == 1200


def test_torn_final_line_is_reported_and_sealed(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    for i in range(3):
        store.append("note", "harness", {"text": str(i)})
    with open(store.events_path, "ab") as fh:
        fh.write(b'{"v":1,"seq":3,"ts":"2026')  # crash mid-write
    fresh = RunStore(store.dir)
    scan = fresh.scan()
    assert [e.data.text for e in scan.events] == ["0", "1", "2"]  # nothing earlier is hidden
    assert len(scan.torn) == 1 and not scan.torn[0].sealed
    report = verify_chain(fresh)
    assert report.ok
    assert any("torn final line" in w for w in report.warnings)
    event = fresh.append("note", "harness", {"text": "after"})
    assert event.seq == 3  # the chain continues after the last valid event
    assert fresh.sealed_offsets == [scan.torn[0].offset]
    report = verify_chain(fresh)
    assert report.ok and report.events == 4
    assert any("torn line" in w and "continues" in w for w in report.warnings)


def test_tampered_line_breaks_the_chain(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    for i in range(3):
        store.append("note", "harness", {"text": str(i)})
    lines = store.events_path.read_text().splitlines()
    lines[1] = lines[1].replace('"text":"1"', '"text":"X"')
    store.events_path.write_text("\n".join(lines) + "\n")
    report = verify_chain(RunStore(store.dir))
    assert not report.ok
    assert any("hash mismatch" in e for e in report.errors)


def test_deleted_line_is_a_gap(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    for i in range(4):
        store.append("note", "harness", {"text": str(i)})
    lines = store.events_path.read_text().splitlines()
    del lines[2]
    store.events_path.write_text("\n".join(lines) + "\n")
    report = verify_chain(RunStore(store.dir))
    assert any("seq 3 where 2 was expected" in e for e in report.errors)
    assert any("chain broken" in e for e in report.errors)


def test_tail_reads_only_new_complete_lines(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    tail = store.tail()
    assert tail.poll() == []
    store.append("note", "harness", {"text": "a"})
    store.append("note", "harness", {"text": "b"})
    assert [e.data.text for e in tail.poll()] == ["a", "b"]
    offset = tail.offset
    assert offset == store.events_path.stat().st_size
    with open(store.events_path, "ab") as fh:  # half a line: not yet visible
        fh.write(b'{"v":1')
    assert tail.poll() == [] and tail.offset == offset
    assert store.head()[0] == 1


def test_append_rejects_bad_payloads(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    with pytest.raises(LogFormatError, match="unknown event kind"):
        store.append("nonsense", "harness", {})
    with pytest.raises(LogFormatError, match=r"invalid data for trial\.finished"):
        store.append("trial.finished", "harness", {"status": "ok"})  # no trial_id
    assert store.events_path.read_text() == ""  # nothing half-written


def test_fixture_log_of_version_1_still_loads() -> None:
    store = RunStore(FIXTURES / "v1_demo")
    events = store.scan().events
    assert events and all(e.v == 1 for e in events)
    assert verify_chain(store).ok
    assert {e.kind for e in events} >= {"run.started", "trial.proposed", "trial.finished", "run.finished"}


def test_future_version_fails_clearly() -> None:
    line = (FIXTURES / "future_v99.jsonl").read_text().splitlines()[0]
    with pytest.raises(LogFormatError, match=r"version 99 is newer than this rrma understands \(1\)"):
        parse_line(line)
    assert SCHEMA_VERSION == 1


def test_blobs_are_content_addressed(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    digest = store.put_blob("hello")
    assert store.put_blob(b"hello") == digest
    assert store.blob_text(digest) == "hello"
    with pytest.raises(ValueError, match="not a blob id"):
        store.get_blob("../../etc/passwd")
    assert not any(p.name.startswith(".tmp") for p in store.blob_dir.iterdir())
    assert os.stat(store.blob_dir / digest).st_size == 5
