"""A running trial's output, followed live (issue 24): spawn's live-output file, end to end.

spawn appends the program's output to a fresh file only the harness writes (rrma/contain/live.py):
as it arrives, capped, never through a planted link or into an existing file, and it reads as live
only while a writer holds it (a dead harness's leftover does not). Then the whole path: a real run
of the demo's command task whose trial prints, waits and prints again; while it runs the file at
``RUN/trials/<id>/live.log`` grows (and the trial's program, sandboxed, can neither read nor write
it); when the trial ends the log blob is the record and the file is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "run"))  # test_loop: the scripted agent

from test_loop import ScriptedAgent

from rrma.contain import sandbox
from rrma.contain.live import LiveWriter, read_live_output
from rrma.contain.spawn import ProcessResult, spawn
from rrma.exec.local import TrialJob, evaluate_job
from rrma.log.layout import live_output_path
from rrma.log.store import RunStore
from rrma.plugins import make_task_oracle
from rrma.run.loop import start_run
from rrma.task import load_task
from rrma.trial import Budget, FileEdit, Proposal, Status
from rrma.workspace import read_tree

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
WORKSPACE = REPO / "benches" / "demo" / "workspace"

# prints a line, waits for the test's go-file, prints another
TWO_LINES = """
import os, sys, time
print("line 1", flush=True)
deadline = time.monotonic() + 20
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
print("line 2", flush=True)
"""


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def run_in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def text_of(path: Path) -> str:
    return path.read_text() if path.exists() else ""


# ---------------------------------------------------------------------------- spawn


def test_spawn_appends_the_output_as_it_arrives_and_it_reads_live_only_while_the_program_runs(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "harness").mkdir()
    live = tmp_path / "harness" / "live.log"
    go = tmp_path / "go"
    thread, out = run_in_thread(lambda: spawn([sys.executable, "-c", TWO_LINES, str(go)], cwd=tmp_path / "work",
                                              budget=Budget(seconds=30), live_output=live))
    wait_for(lambda: "line 1" in text_of(live))
    assert text_of(live) == "line 1\n"  # line 2 is not printed yet: the file is written as output arrives
    seen = read_live_output(live)
    assert seen is not None and seen.live and seen.size == len("line 1\n")
    go.touch()
    thread.join(timeout=30)
    result: ProcessResult = out[0]
    assert result.status == Status.ok and result.live_note is None
    assert live.read_text() == result.output == "line 1\nline 2\n"
    after = read_live_output(live)
    assert after is not None and not after.live  # spawn returned: the writer's lock is gone


@pytest.mark.parametrize("plant", ["link", "dangling link", "file", "directory"])
def test_a_planted_link_or_an_existing_file_is_refused_and_the_program_still_runs(tmp_path: Path, plant: str) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "harness").mkdir()
    live = tmp_path / "harness" / "live.log"
    target = tmp_path / "outside" / "events.jsonl"  # what an attacker wants the harness to write into
    target.parent.mkdir()
    if plant != "dangling link":
        target.write_text("precious\n")
    if plant in ("link", "dangling link"):
        live.symlink_to(target)
    elif plant == "file":
        live.write_text("stale output\n")
    else:
        live.mkdir()
    result = spawn([sys.executable, "-c", "print('hello')"], cwd=tmp_path / "work", budget=Budget(seconds=30),
                   live_output=live)
    assert result.status == Status.ok and result.output == "hello\n"  # the trial ran; its output is captured
    assert result.live_note is not None
    expected = {"link": "is a symbolic link", "dangling link": "is a symbolic link", "file": "exists already (a file)",
                "directory": "exists already (a directory)"}[plant]
    assert expected in result.live_note and str(live) in result.live_note
    if plant == "dangling link":
        assert not target.exists()  # not created through the link
    else:
        assert target.read_text() == "precious\n"
    if plant == "file":
        assert live.read_text() == "stale output\n"
    if plant in ("link", "dangling link"):
        assert live.is_symlink()
        # the control: a plain open (no O_EXCL, no O_NOFOLLOW), as the harness would otherwise do, writes through
        fd = os.open(live, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, b"through the link\n")
        os.close(fd)
        assert "through the link" in target.read_text()


def test_a_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "trial").symlink_to(elsewhere)
    result = spawn([sys.executable, "-c", "print('hi')"], cwd=tmp_path / "work", budget=Budget(seconds=30),
                   live_output=tmp_path / "trial" / "live.log")
    assert result.status == Status.ok and result.output == "hi\n"
    assert result.live_note is not None and "symbolic link" in result.live_note
    assert list(elsewhere.iterdir()) == []


def test_the_live_file_is_capped(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    live = tmp_path / "live.log"
    flood = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 999 + '\\n'); sys.stdout.flush()\n"
    result = spawn([sys.executable, "-c", flood], cwd=tmp_path / "work",
                   budget=Budget(seconds=30, max_output_bytes=5000), live_output=live)
    assert result.status == Status.crash and "output flood" in result.reason
    assert live.stat().st_size == 5000  # never more than the cap, however much the program wrote
    assert result.live_note == "live output stopped at its cap of 5000 bytes"
    seen = read_live_output(live)
    assert seen is not None and not seen.live


WRITER = """
import sys, time
from rrma.contain.live import LiveWriter
w = LiveWriter(sys.argv[1], 10**6)
w.write(b"epoch 1\\n")
print("ready", flush=True)
time.sleep(60)
"""


def test_the_leftover_of_a_killed_harness_never_reads_as_live(tmp_path: Path) -> None:
    """The writer's flock is the liveness: the kernel drops it when the writing process dies, even by SIGKILL."""
    live = tmp_path / "live.log"
    harness = subprocess.Popen([sys.executable, "-c", WRITER, str(live)], stdout=subprocess.PIPE, text=True,
                               cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert harness.stdout is not None and harness.stdout.readline() == "ready\n"
        seen = read_live_output(live)
        assert seen is not None and seen.live and seen.text == "epoch 1\n"
    finally:
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait()
    stale = read_live_output(live)
    assert stale is not None and not stale.live and stale.text == "epoch 1\n"
    # and a fresh writer refuses the leftover: the executor removes it before a trial runs again
    assert LiveWriter(live, 100).refused is not None


def test_a_reader_never_follows_a_link_and_reads_only_the_tail(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("key\n")
    (tmp_path / "link.log").symlink_to(secret)
    assert read_live_output(tmp_path / "link.log") is None
    assert read_live_output(tmp_path / "missing.log") is None
    big = tmp_path / "big.log"
    big.write_text("".join(f"line {i}\n" for i in range(10000)))
    seen = read_live_output(big, tail_bytes=100)
    assert seen is not None and seen.size == big.stat().st_size
    assert seen.text.startswith("line ") and seen.text.endswith("line 9999\n") and len(seen.text) <= 100


# ---------------------------------------------------------------------------- the executor and the loop


def test_the_executor_removes_a_leftover_or_a_planted_link_and_then_the_file(tmp_path: Path) -> None:
    """Before the oracle runs, whatever sits at the trial's live path goes (unlink never follows); after it,
    the file goes too: the log blob is the record."""
    task = load_task(DEMO)
    oracle = make_task_oracle(task)
    run = tmp_path / "run"
    oracle.prepare(run, task.workspace_dir())
    live = live_output_path(run / "trials", "t1")
    live.parent.mkdir(parents=True)
    target = tmp_path / "precious"
    target.write_text("precious\n")
    live.symlink_to(target)
    job = TrialJob(trial_id="t1", files=read_tree(WORKSPACE), proposal=Proposal(hypothesis="h"),
                   budget=Budget(seconds=20, memory_mb=512))
    outcome = evaluate_job(oracle, job, run / "trials" / "t1" / "work", lambda _: None, threading.Event(),
                           protect=(run,), live_output=live)
    assert outcome.status == Status.ok, outcome.feedback
    assert "loss: " in outcome.log  # the record
    assert not live.exists() and not live.is_symlink()
    assert target.read_text() == "precious\n"


# the trial's program: prints, waits; tries its own live file (it knows where the run is), waits; prints again.
# It waits for files the test puts in its workspace (the only host directory the sandboxed program sees).
SLOW = """
import time as _time
def _wait(path):
    _deadline = _time.monotonic() + 15
    while not os.path.exists(path) and _time.monotonic() < _deadline:
        _time.sleep(0.02)
_live = os.path.join({run!r}, "trials", os.environ["RRMA_TRIAL_ID"], "live.log")
print("live line 1", flush=True)
_wait("go1")
for _mode in ("r", "a"):
    try:
        with open(_live, _mode) as _fh:
            if _mode == "a":
                _fh.write("FORGED by the trial\\n")
        print(f"open {{_mode}}: possible", flush=True)
    except OSError as _exc:
        print(f"open {{_mode}}: refused ({{type(_exc).__name__}})", flush=True)
_wait("go2")
print("live line 2", flush=True)
"""


def test_a_running_trials_output_is_followed_live_and_the_log_blob_is_the_record(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = runs / "live-run"
    program = SLOW.format(run=str(run))
    edit = FileEdit(path="objective.py", replacements=[('print(f"step: {DEPTH}")', program + 'print(f"step: {DEPTH}")')])
    task = load_task(DEMO, {"noise.baseline_repeats": 1, "budget.max_concurrent": 1, "budget.max_trials": 1})
    thread, out = run_in_thread(lambda: start_run(task, runs, agents=[ScriptedAgent([Proposal(hypothesis="slow",
                                                                                             edits=[edit])])],
                                                  run_id="live-run"))
    live = live_output_path(run / "trials", "t0001")
    # the view follows output as it arrives, so a line's text and its newline may land apart: wait for both
    wait_for(lambda: "live line 1\n" in text_of(live), timeout=60)
    assert live == RunStore(run).live_output_path("t0001")  # one rule for the executor and the views
    first = read_live_output(live)
    assert first is not None and first.live and first.text == "live line 1\n"
    (live.parent / "work" / "go1").touch()
    wait_for(lambda: "open a:" in text_of(live))
    later = read_live_output(live)  # it grew while the program ran
    assert later is not None and later.live and later.size > first.size and "live line 2" not in later.text
    (live.parent / "work" / "go2").touch()
    thread.join(timeout=60)
    result = out[0]
    rec = result.state.trials["t0001"]
    assert rec.status == "ok"
    assert not live.exists()  # the trial ended: the file is gone, the log blob is the record
    assert not list((run / "trials").glob("*/live.log"))  # the baseline's too
    log = RunStore(run).blob_text(rec.log_blob)
    assert "live line 1" in log and "live line 2" in log
    assert "FORGED" not in later.text
    if sandbox.unavailable_reason() is None:  # sandboxed: the run directory is not there for the trial at all
        assert "open r: refused" in later.text and "open a: refused" in later.text
