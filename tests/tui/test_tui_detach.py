"""``q`` then ``d`` (detach) in a real terminal: the TUI process exits at once and the run goes on alone.

Issue 24, wrong today #1: after detach the TUI's process stayed (a blank screen) until the run ended,
because the worker thread watching the driver blocked in ``Popen.wait()`` and the interpreter joins
its worker threads at exit; two Ctrl+C then printed a ``threading`` traceback. The run is started
the way a person starts one, with ``ctrl+n``; the driver is a process of its own (tui/driver.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from live_events import run_events
from tmux_session import Tmux

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
]


events_of = run_events  # whole lines only: the run writes the log while the test reads it


def finished_trials(run_dir: Path) -> int:
    return sum(1 for e in events_of(run_dir) if e["kind"] == "trial.finished")


def test_q_then_d_quits_within_2s_and_the_run_finishes_and_verifies(tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir)
    objective = task_dir / "workspace" / "objective.py"  # trials of 0.4 s at least: still running at detach
    objective.write_text(objective.read_text().replace("import math\n", "import math\nimport time\ntime.sleep(0.4)\n"))
    runs = tmp_path / "runs"
    runs.mkdir()
    done = tmp_path / "exit-code"
    session = f"rrma-{uuid.uuid4().hex[:8]}"
    tmux = Tmux(session, done)
    command = (f"cd {REPO} && {sys.executable} -m tui.main --runs {runs} --reviewer carol; "
               f"echo $? > {done}; sleep 120")
    driver_pid: int | None = None
    run_dir = runs / "none-yet"
    try:
        tmux.run("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
        tmux.wait_for("runs")
        tmux.send("C-n")
        tmux.wait_for("Start a run")
        tmux.run("send-keys", "-t", session, "-l",
                 f"{task_dir / 'task.yaml'} --set budget.max_trials=16 --set budget.max_concurrent=1")
        tmux.send("Enter")
        tmux.wait_for("t0001", timeout=60)  # the dashboard of the new run, its first agent trial under way
        [run_dir] = [p.parent for p in runs.glob("*/events.jsonl")]
        driver_pid = json.loads((run_dir / "driver.json").read_text())["pid"]
        tmux.send("q")
        tmux.wait_for("detach")
        tmux.run("send-keys", "-t", session, "d")
        pressed = time.monotonic()
        while not done.exists() and time.monotonic() - pressed < 30:
            time.sleep(0.05)
        took = time.monotonic() - pressed
        seen = finished_trials(run_dir)
        screen = tmux.capture()
        assert done.exists() and took < 2.0, \
            f"the TUI took {took:.1f}s to exit after detach (the limit is 2 s); the screen:\n{screen}"
        assert done.read_text().strip() == "0", tmux.post_mortem()
        assert "Traceback" not in screen and f"goes on in process {driver_pid}" in screen, screen
        assert events_of(run_dir)[-1]["kind"] != "run.finished", "the run ended before the TUI quit: no detach shown"
        os.kill(driver_pid, 0)  # the driver outlives the TUI (raises if it is gone)
        tmux.kill()  # closing the terminal too (SIGHUP to its session) must not reach the driver
        deadline = time.monotonic() + 60
        while events_of(run_dir)[-1]["kind"] != "run.finished":
            assert time.monotonic() < deadline, f"the detached run did not finish in 60 s: {events_of(run_dir)[-1]}"
            time.sleep(0.2)
    finally:
        tmux.kill()
        if driver_pid is not None and (run_dir / "events.jsonl").exists() \
                and events_of(run_dir)[-1]["kind"] != "run.finished":  # a failed test leaves no driver behind
            try:
                os.kill(driver_pid, 9)
            except ProcessLookupError:
                pass
    last = events_of(run_dir)[-1]
    assert last["data"]["reason"] == "max_trials"
    assert finished_trials(run_dir) > seen  # trials finished after the TUI was gone
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    verify = subprocess.run([sys.executable, "-m", "cli.main", "verify", str(run_dir)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
