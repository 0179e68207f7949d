"""Ctrl-C on a headless run or experiment: once stops cleanly (the log verifies), twice quits at once (exit 130)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "tui.cli", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(proc: subprocess.Popen[str], needle: str, timeout: float = 60.0) -> str:
    """Read stdout until a line holds ``needle``."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            seen += line
            if needle in line:
                return seen
    proc.kill()
    pytest.fail(f"never printed {needle!r}; output so far:\n{seen}")


def _running(marker: str) -> list[int]:
    """Live (non-zombie) pids whose command line holds ``marker``, read from /proc (no pgrep needed)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and b") Z" not in stat and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def _log_tail(runs: Path) -> str:
    logs = sorted(runs.glob("*/events.jsonl"))
    if not logs:
        return "(no run log yet)"
    return "\n".join(line[:200] for line in logs[-1].read_text().splitlines()[-8:])


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_one_ctrl_c_stops_the_run_and_its_log_verifies(tmp_path: Path) -> None:
    proc = _start(["--headless", "bench", "demo", "--trials", "400", "--runs", str(tmp_path / "runs")], tmp_path)
    _wait_for(proc, "t0002")
    proc.send_signal(signal.SIGINT)
    code, _out, err = _finish(proc)
    assert "stopping: no new trials" in err
    assert code in (0, 3), err  # a stopped run is a finished command, not a crash
    run = next((tmp_path / "runs").iterdir())
    check = subprocess.run([sys.executable, "-m", "tui.cli", "verify", str(run)], capture_output=True, text=True,
                           timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    finished = sum(1 for line in (run / "events.jsonl").read_text().splitlines() if '"trial.finished"' in line)
    assert 3 <= finished < 400  # the baselines and a few trials, not the whole budget


def test_one_ctrl_c_stops_an_experiment_and_says_how_to_resume(tmp_path: Path) -> None:
    spec = ROOT / "benches" / "demo" / "experiment.yaml"
    proc = _start(["--headless", "experiment", "run", str(spec), "--dir", str(tmp_path / "exp")], tmp_path)
    _wait_for(proc, "started")
    proc.send_signal(signal.SIGINT)
    code, _out, err = _finish(proc)
    assert "stopping every cell" in err and "experiment resume" in err, err
    assert code != 130  # one press is a clean stop, not the quit-now path


SLEEPY_TASK = """name: sleepy
oracle:
  kind: command
  params:
    command: ["{python}", "objective.py", "MARKER"]
workspace:
  source: workspace
  editable: ["objective.py"]
metric: {name: loss, direction: minimize}
budget: {trial_seconds: 120, max_trials: 4, max_concurrent: 1}
noise: {baseline_repeats: 1}
agents: [{name: rs, backend: random-search}]
search_space:
  "objective.py:X": {kind: uniform, low: -3.0, high: 3.0}
"""


def test_two_ctrl_c_quit_at_once_with_130_and_kill_the_running_trial(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    marker = "rrma-sleepy-" + tmp_path.name
    (tmp_path / "workspace" / "objective.py").write_text(
        "import time\nX = 1.0\ntime.sleep(120)\nprint('loss:', X * X)\n")
    (tmp_path / "task.yaml").write_text(SLEEPY_TASK.replace("MARKER", marker))  # on the trial's command line
    runs = tmp_path / "runs"
    proc = _start(["--headless", "run", str(tmp_path / "task.yaml"), "--runs", str(runs)], tmp_path)
    _wait_for(proc, "run ")
    deadline = time.monotonic() + 90  # generous: CI shares two cores with whatever else is running
    while not _running(marker) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)  # the baseline trial (it sleeps for 120 s)
    if not _running(marker):
        proc.kill()
        _code, out, err = _finish(proc)
        pytest.fail(f"the trial never started (harness exit {proc.returncode}).\nstdout:\n{out}\nstderr:\n{err}\n"
                    f"log tail:\n{_log_tail(runs)}")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    code, _out, err = _finish(proc)
    assert code == 130, err
    assert "stopping: no new trials" in err and "quitting now: killed 1 running trial(s)" in err, err
    deadline = time.monotonic() + 10
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(marker), f"trial processes left running: {_running(marker)}"
