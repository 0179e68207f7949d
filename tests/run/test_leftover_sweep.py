"""A run killed with ``kill -9`` and never resumed left its trial's capped workspace mounted; the next run that
starts (or resumes) in the same runs directory detaches it (rrma/run/leftovers.py), and leaves alone what a
live driver still uses and what rrma did not mount."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rrma.contain import disk
from rrma.log.driver_lock import DriverLock
from rrma.run import leftovers
from rrma.run.loop import start_run
from rrma.task import load_task

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
CAP = disk.unavailable_reason()
pytestmark = pytest.mark.skipif(CAP is not None, reason=f"capped workspaces unavailable here: {CAP}")

# a driver that takes its run's lock, mounts a trial's workspace as the executor does, then dies or waits
DRIVER = """
import os, sys, time
from pathlib import Path
from rrma.contain import disk
from rrma.log.driver_lock import DriverLock
run, how = Path(sys.argv[1]), sys.argv[2]
lock = DriverLock(run).acquire()
work = run / "trials" / "t0001" / "work"
disk.mount(work, 16 << 20)
(work / "left.txt").write_text("from the driver")
print("mounted", flush=True)
if how == "die":
    os.kill(os.getpid(), 9)
sys.stdin.read()  # a live driver: holds its lock and its mount until told to go
"""


def drive(run: Path, how: str) -> subprocess.Popen[str]:
    run.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(run), how], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline() == "mounted\n"
    if how == "die":
        assert proc.wait(timeout=60) == -9
    return proc


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Path]:
    runs = tmp_path / "runs"
    runs.mkdir()
    yield runs
    for point in disk.leftovers_under(tmp_path):  # whatever a failed test left
        ctypes.CDLL(None, use_errno=True).umount2(str(point).encode(), 2)
    assert disk.leftovers_under(tmp_path) == []


@pytest.mark.parametrize("defence", [True, False], ids=["swept", "control"])
def test_a_new_run_detaches_what_a_killed_run_left_mounted(runs: Path, monkeypatch: pytest.MonkeyPatch,
                                                           defence: bool) -> None:
    dead = runs / "killed-run"
    drive(dead, "die")
    work = dead / "trials" / "t0001" / "work"
    assert os.path.ismount(work) and disk.leftovers_under(runs) == [work.resolve()]
    live = drive(runs / "live-run", "wait")
    elsewhere = runs / "other-run" / "trials" / "t0001" / "work"  # a file system rrma did not make
    elsewhere.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "someone-elses", str(elsewhere)], check=True)
    try:
        if not defence:
            monkeypatch.setattr(leftovers, "sweep", lambda runs_dir, skip=None: [])
        result = start_run(load_task(DEMO, {"budget.max_trials": 1, "noise.baseline_repeats": 1}), runs,
                           run_id="next-run")
        assert result.state.trials  # the new run ran
        assert os.path.ismount(work) is not defence  # the killed run's workspace: detached by the new run
        assert os.path.ismount(runs / "live-run" / "trials" / "t0001" / "work")  # a live driver's: kept
        assert os.path.ismount(elsewhere)  # not rrma's: kept
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait(timeout=60)
        ctypes.CDLL(None, use_errno=True).umount2(str(elsewhere).encode(), 0)


def test_a_run_someone_is_resuming_is_left_to_that_resume(runs: Path) -> None:
    dead = runs / "killed-run"
    drive(dead, "die")
    with DriverLock(dead):  # someone resumes it right now: its leftovers are that resume's
        assert leftovers.sweep(runs) == []
    assert leftovers.sweep(runs) == [(dead / "trials" / "t0001" / "work").resolve()]
    assert leftovers.sweep(runs) == []
