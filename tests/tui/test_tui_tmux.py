"""Drive the real app in a real terminal (tmux): open a finished run, step through a trace,
approve a trial, quit; the review event must be in the log afterwards."""

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
from make_run import make_run
from tmux_session import Tmux

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
]


def test_open_trace_approve_quit_in_tmux(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "demo-run", trials=12, hitl=True, pending_claims=1)
    session = f"rrma-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "exit-code"
    # the shell outlives the app (sleep), so a crash leaves its traceback on the screen to capture
    command = (f"cd {REPO} && {sys.executable} -m tui.app --runs {runs} demo-run --reviewer carol; "
               f"echo $? > {done}; sleep 60")
    tmux = Tmux(session, done)
    tmux.run("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
    try:
        screen = tmux.wait_for("tiny-train")
        assert "finished (max_trials)" in screen
        tmux.wait_for("t0012")
        tmux.send("t")  # the trace, from its first step
        tmux.wait_for("step 1/48")
        tmux.send("Down", "Down")
        screen = tmux.wait_for("step 3/48")
        assert "call read_file" in screen and "result · " in screen and "LEARNING_RATE" in screen  # a call and its result
        tmux.send("Escape", "v")  # back to the dashboard, then the review queue
        screen = tmux.wait_for("review queue")
        assert "☆ claim" in screen
        tmux.send("y")  # approve (`a` only ever filters)
        tmux.wait_for("note (Enter to confirm")
        tmux.send("looks right", "Enter")
        tmux.wait_for("recorded")
        tmux.quit_cleanly()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    reviews = [e for e in events if e["kind"] == "review"]
    assert len(reviews) == 1
    assert reviews[0]["actor"] == "human:carol"
    assert reviews[0]["data"] == {"trial_id": "t0012", "decision": "approve", "reviewer": "carol", "note": "looks right"}
    promoted = [e["data"] for e in events if e["kind"] == "trial.promoted"]
    assert promoted[-1]["trial_id"] == "t0012" and promoted[-1]["approved_by"] == "carol"


def test_pause_continue_stop_a_headless_run_from_the_tui_then_resume_it(tmp_path: Path) -> None:
    """A headless run in another process, driven from the dashboard in a real terminal (w, w, h), then resumed
    from the dashboard (R), which starts a headless driver of the TUI's own."""
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text().replace("import math\n", "import math\nimport time\ntime.sleep(0.5)\n"))
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    headless = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "--headless", "run", str(task_dir / "task.yaml"), "--runs", str(runs),
         "--set", "budget.max_trials=12", "--set", "budget.max_concurrent=1", "--quiet"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    session = f"rrma-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "exit-code"
    tmux = Tmux(session, done)
    try:
        deadline = time.monotonic() + 60
        while not list(runs.glob("*/events.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        [log] = list(runs.glob("*/events.jsonl"))
        run_dir = log.parent
        command = (f"cd {REPO} && {sys.executable} -m tui.app --runs {runs} {run_dir.name} --reviewer carol; "
                   f"echo $? > {done}; sleep 60")
        tmux.run("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
        tmux.wait_for("demo")
        tmux.wait_for("t0002", timeout=60)  # the run is going
        tmux.send("w")
        tmux.wait_for("Pause run")
        tmux.send("Enter")
        tmux.wait_for("⏸ paused by human:carol")
        tmux.send("w")
        tmux.wait_for("Continue run")
        tmux.send("Enter")
        deadline = time.monotonic() + 10
        while "⏸ paused" in tmux.capture() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "⏸ paused" not in tmux.capture()
        tmux.send("h")
        tmux.wait_for("Stop run")
        tmux.send("Enter")
        tmux.wait_for("finished (stopped)", timeout=30)
        assert headless.wait(30) == 0, headless.stderr.read() if headless.stderr else ""
        tmux.send("R")  # resume it from the TUI: a headless driver of the TUI's own takes the run on
        tmux.wait_for("Resume run")
        tmux.send("Enter")
        tmux.wait_for("finished (max_trials)", timeout=60)  # the open dashboard followed the resumed run
        tmux.quit_cleanly()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True)
        if headless.poll() is None:
            headless.kill()
            headless.wait(10)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    orders = [(e["actor"], e["data"]["action"]) for e in events if e["kind"] == "run.control"]
    assert orders == [("human:carol", "pause"), ("human:carol", "continue"), ("human:carol", "stop")]
    reasons = [e["data"]["reason"] for e in events if e["kind"] == "run.finished"]
    assert reasons == ["stopped", "max_trials"]
