"""Trust in a run directory: the head record, strict verify, run.json in the chain, one driver per run.

Real runs, real files and real processes: a demo run is made once with the CLI and copied per
test; each attack edits the copy the way a person with a shell would (``head -n -6``, a replaced
last line, a forged ``run.json``), and the CLI's exit code and message are checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rrma.log.chain import verify_chain
from rrma.log.driver_lock import DriverLock, RunLocked
from rrma.log.head import HEAD_SIZE, read_head
from rrma.log.state import RunState
from rrma.log.store import LogDamaged, RunStore
from rrma.log.verify import verify_run

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
FIXTURE = REPO / "tests" / "fixtures" / "logs" / "v1_demo"


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=ENV, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def lines_of(run: Path) -> list[bytes]:
    return (run / "events.jsonl").read_bytes().splitlines(keepends=True)


# ----------------------------------------------------------------------------- the head record


def test_head_record_follows_every_append(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    assert read_head(store.dir) is None
    for i in range(3):
        event = store.append("note", "harness", {"text": str(i)})
        head = read_head(store.dir)
        assert head is not None and (head.seq, head.hash) == (event.seq, event.hash)
        assert head.offset == store.events_path.stat().st_size
    events = store.append_many([("note", "harness", {"text": "a"}), ("note", "harness", {"text": "b"})])
    head = read_head(store.dir)
    assert head is not None and (head.seq, head.hash) == (events[-1].seq, events[-1].hash) == store.head()
    assert (store.dir / "head.json").stat().st_size == HEAD_SIZE  # rewritten in place, never resized
    other = RunStore(store.dir)  # a second writer (another process, in effect) keeps it current too
    event = other.append("note", "harness", {"text": "c"})
    head = read_head(store.dir)
    assert head is not None and (head.seq, head.hash) == (event.seq, event.hash)
    report = verify_chain(RunStore(store.dir))
    assert report.ok and not report.warnings and (report.head_seq, report.head_hash) == (event.seq, event.hash)


def test_a_fresh_run_verifies_and_records_its_head(run: Path) -> None:
    proc = cli("verify", str(run))
    assert proc.returncode == 0, proc.stdout
    head = read_head(run)
    assert head is not None
    assert "head record matches" in proc.stdout and "run.json matches the log" in proc.stdout
    assert f"head: seq {head.seq} {head.hash}" in proc.stdout
    started = RunStore(run).scan().events[0]
    assert started.kind == "run.started" and started.data.head_record is True
    assert started.data.run_json_sha256 == hashlib.sha256((run / "run.json").read_bytes()).hexdigest()


def test_cut_tail_is_an_error(run: Path) -> None:
    head = read_head(run)
    assert head is not None
    (run / "events.jsonl").write_bytes(b"".join(lines_of(run)[:-6]))  # head -n -6
    proc = cli("verify", str(run))
    assert proc.returncode == 1, proc.stdout
    assert f"head record says the log ends at seq {head.seq}" in proc.stdout
    assert f"last valid event is seq {head.seq - 6}" in proc.stdout and "cut off" in proc.stdout


def test_garbage_last_line_is_an_error(run: Path) -> None:
    lines = lines_of(run)
    (run / "events.jsonl").write_bytes(b"".join(lines[:-1]) + b"garbage garbage garbage\n")
    proc = cli("verify", str(run))
    assert proc.returncode == 1, proc.stdout
    assert "head record says the log ends at seq" in proc.stdout


def test_a_same_length_replaced_last_line_is_an_error(run: Path) -> None:
    """The last line, bob's rejection of t0001, becomes an approval of the same byte length, validly
    re-chained (its prev is the previous event's hash, its hash recomputed): the chain, the seqs and
    the file size all hold, so only the head record's hash can tell."""
    from rrma.log.events import canonical, compute_hash
    from rrma.log.head import encode_head
    from rrma.log.review import record_review

    reject = record_review(RunStore(run), "t0001", "reject", "bob", "overfits!")
    assert verify_run(run).ok  # the precondition, in-process; the CLI's verdicts below are the test
    lines = lines_of(run)
    obj = json.loads(lines[-1])
    assert obj["seq"] == reject.seq and obj["data"]["decision"] == "reject"
    obj["data"].update(decision="approve", note="overfits")  # one letter more, one less
    obj["hash"] = compute_hash(obj)
    forged = canonical(obj).encode() + b"\n"
    assert len(forged) == len(lines[-1]) and forged != lines[-1]
    (run / "events.jsonl").write_bytes(b"".join(lines[:-1]) + forged)
    assert RunState.fold(RunStore(run).scan().events).trials["t0001"].review_status == "approved"
    head = read_head(run)
    assert head is not None and head.offset == (run / "events.jsonl").stat().st_size  # the size still matches

    proc = cli("verify", str(run))
    assert proc.returncode == 1, proc.stdout
    assert f"event seq {reject.seq} has hash {obj['hash'][:16]}, but the head record says seq {reject.seq}" in proc.stdout
    assert "the end of the log was replaced" in proc.stdout
    assert len([line for line in proc.stdout.splitlines() if line.startswith("error")]) == 1  # nothing else sees it
    with pytest.raises(LogDamaged, match="replaced"):  # and nothing may be appended over it
        RunStore(run).append("note", "harness", {"text": "this would rewrite the head record"})
    # the control: the head record rewritten for the forged line (as the attacker would have to) and verify
    # passes: what found the forgery was the head record, not the chain
    (run / "head.json").write_bytes(encode_head(reject.seq, obj["hash"], head.offset, head.ts))
    proc = cli("verify", str(run))
    assert proc.returncode == 0, proc.stdout


def test_a_torn_fragment_after_the_head_is_only_a_warning(run: Path) -> None:
    with open(run / "events.jsonl", "ab") as fh:
        fh.write(b'{"v":1,"seq":99,"ts":"2026')  # a crash in the middle of the next write
    proc = cli("verify", str(run))
    assert proc.returncode == 0, proc.stdout
    assert "warning" in proc.stdout and "torn final line" in proc.stdout


def test_events_past_the_head_record_are_a_warning(run: Path) -> None:
    head_file = (run / "head.json").read_bytes()
    store = RunStore(run)
    store.append("note", "harness", {"text": "written, then the writer died before updating head.json"})
    (run / "head.json").write_bytes(head_file)
    report = verify_run(run)
    assert report.ok, report.errors
    assert any("1 valid event(s) after the head record" in w for w in report.warnings)


def test_missing_head_record(run: Path, tmp_path: Path) -> None:
    (run / "head.json").unlink()
    proc = cli("verify", str(run))
    assert proc.returncode == 1 and "head.json is missing" in proc.stdout
    old = tmp_path / "old"  # a run written before head records: a warning, not an error
    shutil.copytree(FIXTURE, old)
    proc = cli("verify", str(old))
    assert proc.returncode == 0, proc.stdout
    assert "no head record" in proc.stdout and "older rrma" in proc.stdout


def test_forged_run_json_fails_verify(run: Path) -> None:
    info = json.loads((run / "run.json").read_text())
    info["versions"]["fs_guard"] = "on"  # claim the trials ran sandboxed
    (run / "run.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    proc = cli("verify", str(run))
    assert proc.returncode == 1, proc.stdout
    assert "run.json was replaced or edited after the run started" in proc.stdout
    (run / "run.json").unlink()
    proc = cli("verify", str(run))
    assert proc.returncode == 1 and "run.json is missing" in proc.stdout


def test_expect_head(run: Path) -> None:
    head = read_head(run)
    assert head is not None
    assert cli("verify", str(run), "--expect-head", head.hash).returncode == 0
    proc = cli("verify", str(run), "--expect-head", head.hash[:8].upper())
    assert proc.returncode == 0 and "head is the expected" in proc.stdout
    wrong = ("0" if head.hash[0] != "0" else "1") + head.hash[1:12]
    proc = cli("verify", str(run), "--expect-head", wrong)
    assert proc.returncode == 1 and f"not the expected {wrong}" in proc.stdout
    proc = cli("verify", str(run), "--expect-head", head.hash[:6])
    assert proc.returncode == 2 and "at least 8 hex digits" in proc.stderr


def test_ok_line_says_only_what_was_checked(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "r", create=True)
    store.append("run.started", "harness", {"run_id": "r", "task_name": "t", "task": {}, "head_record": True})
    proc = cli("verify", str(store.dir))
    assert proc.returncode == 0, proc.stdout
    assert "results.tsv is missing" in proc.stdout  # a warning: the run has not finished
    assert "derived views match" not in proc.stdout


def test_appending_to_a_cut_log_is_refused(run: Path) -> None:
    (run / "events.jsonl").write_bytes(b"".join(lines_of(run)[:-6]))
    with pytest.raises(LogDamaged, match="refusing to append"):
        RunStore(run).append("note", "harness", {"text": "this would rewrite the head record and hide the cut"})
    proc = cli("review", str(run), "t0001", "approve", "--reviewer", "mallory")
    assert proc.returncode == 1 and "refusing to append" in proc.stderr
    assert not verify_run(run).ok  # still detected (the CLI's exit 1 for a cut log: test_cut_tail_is_an_error)


# ----------------------------------------------------------------------------- show and export


def test_show_and_export_carry_the_head(run: Path, tmp_path: Path) -> None:
    head = read_head(run)
    assert head is not None
    proc = cli("show", str(run))
    assert proc.returncode == 0, proc.stderr
    assert f"seq {head.seq} {head.hash[:16]}" in proc.stdout  # the summary table row
    assert f"head: seq {head.seq} {head.hash}" in proc.stdout  # the full hash, on one line
    db = tmp_path / "out.db"
    assert cli("export", str(run), "--sqlite", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT last_seq, last_hash FROM runs WHERE run_id = ?", [run.name]).fetchone()
    assert tuple(row) == (head.seq, head.hash)


def test_tui_header_shows_the_head(run: Path) -> None:
    from tui.durations import utcnow
    from tui.screens.dashboard import header_text
    from tui.session import RunSession

    head = read_head(run)
    assert head is not None
    assert f"head {head.seq} {head.hash[:16]}" in header_text(RunSession(run, reviewer="r", clock=utcnow)).plain


def test_show_after_a_post_run_approval_shows_the_new_best(tmp_path: Path) -> None:
    from rrma.run.loop import start_run
    from rrma.task import load_task

    # the run itself in-process (what `rrma-tui run --trials 4 --set loop.hitl=true` runs); the review
    # and show after it go through the CLI, as a person would do them
    runs = tmp_path / "runs"
    result = start_run(load_task(REPO / "benches" / "demo" / "task.yaml",
                                 {"budget.max_trials": 4, "loop.hitl": True}), runs)
    assert result.ok, result.reason
    [run] = list(runs.iterdir())
    state = RunState.fold(RunStore(run).scan().events)
    assert state.best_id == "base-0"  # the gate held every improvement
    waiting = [t for t in state.agent_trials() if t.metrics.get("awaiting_review")]
    assert waiting, "the demo found no improvement to hold"
    claim = waiting[0]
    assert cli("review", str(run), claim.trial_id, "approve", "--reviewer", "carol").returncode == 0
    proc = cli("show", str(run))
    assert proc.returncode == 0, proc.stderr
    best_row = next(line for line in proc.stdout.splitlines() if "│ best " in line)
    assert f"({claim.trial_id})" in best_row and "base-0" not in best_row
    assert f"{claim.score:.6g}" in best_row
    head = read_head(run)
    assert head is not None and f"head: seq {head.seq} {head.hash}" in proc.stdout
    report = verify_run(run)
    assert report.ok, report.errors


# ----------------------------------------------------------------------------- one driver per run


def test_driver_lock_is_exclusive_and_not_inherited(tmp_path: Path) -> None:
    run = tmp_path / "r"
    RunStore(run, create=True)
    lock = DriverLock(run).acquire()
    info = json.loads((run / "driver.json").read_text())
    assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
    with pytest.raises(RunLocked, match=f"pid {os.getpid()} on {socket.gethostname()}"):
        DriverLock(run).acquire()  # another open file description: flock refuses it even in-process
    # a child started while the lock is held must not keep it (close-on-exec, even with close_fds=False)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
    try:
        lock.release()
        assert not (run / "driver.json").exists()
        probe = ("import sys; from rrma.log.driver_lock import DriverLock, RunLocked\n"
                 f"try:\n    DriverLock({str(run)!r}).acquire()\nexcept RunLocked:\n    sys.exit(3)\n")
        proc = subprocess.run([sys.executable, "-c", probe], env=ENV, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    finally:
        child.kill()
        child.wait()


def _wait_for(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_concurrent_resumes(tmp_path: Path) -> None:
    """The attack: two `rrma-tui resume R` at once gave 35 trials for max_trials 20 and two run.finished.

    8 trials of at least 0.4 s each, one at a time: the first run is killed after the baseline and
    a trial, so the holder has several seconds of trials left while the second resume is refused."""
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text().replace("import math\n", "import math\nimport time\ntime.sleep(0.4)\n"))
    runs = tmp_path / "runs"
    first = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "--headless", "run", str(task_dir / "task.yaml"), "--runs", str(runs),
         "--set", "budget.max_trials=8", "--set", "budget.max_concurrent=1", "--quiet"],
        env=ENV, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def log() -> Path | None:
            found = list(runs.glob("*/events.jsonl")) if runs.exists() else []
            return found[0] if found else None

        _wait_for(lambda: (p := log()) is not None and p.read_text().count('"kind":"trial.finished"') >= 4, 90,
                  "the first run to finish a trial")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    events = log()
    assert events is not None
    run = events.parent
    resume = [sys.executable, "-m", "cli.main", "resume", str(run), "--quiet"]
    holder = subprocess.Popen(resume, env=ENV, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # run.resumed is written once the resume drives the run (under the lock, where there is one)
        _wait_for(lambda: '"kind":"run.resumed"' in events.read_text(), 60, "the first resume to get going")
        second = cli("resume", str(run), "--quiet")
        assert second.returncode == 2, second.stdout + second.stderr
        assert holder.poll() is None, "the first resume ended before the second one was tried"
        assert json.loads((run / "driver.json").read_text())["pid"] == holder.pid
        message = second.stderr.strip()
        assert len(message.splitlines()) == 1
        assert f"pid {holder.pid} on {socket.gethostname()}" in message and "driving this run" in message
    finally:
        holder.send_signal(signal.SIGKILL)  # the kernel drops its flock; driver.json stays behind, stale
        holder.wait(10)
    assert json.loads((run / "driver.json").read_text())["pid"] == holder.pid
    third = cli("resume", str(run), "--quiet", timeout=180)
    assert third.returncode == 0, third.stdout + third.stderr
    events_after = RunStore(run).scan().events
    state = RunState.fold(events_after)
    assert len(state.agent_trials()) == 8 and state.finish_reason == "max_trials"
    assert sum(1 for e in events_after if e.kind == "run.finished") == 1
    assert not (run / "driver.json").exists()
    report = verify_run(run)
    assert report.ok, report.errors
