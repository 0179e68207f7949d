"""Ctrl-C on a headless run or experiment: once stops cleanly (the log verifies) and `rrma-tui resume` finishes
the run; twice quits at once (exit 130)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import processes_with

ROOT = Path(__file__).resolve().parents[2]


class Harness:
    """``rrma-tui`` in a child process, its stdout and stderr in files (a pipe nobody drains could block it)."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.out_path, self.err_path = cwd / "harness.out", cwd / "harness.err"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=cwd, env=env, text=True,
                                         stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def output(self) -> tuple[str, str]:
        return self.out_path.read_text(errors="replace"), self.err_path.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        """Wait until stdout holds ``needle``; fail with everything printed so far otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.output()[0]:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        out, err = self.output()
        pytest.fail(f"never printed {needle!r} (exit {self.proc.returncode});\nstdout:\n{out}\nstderr:\n{err}")

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self) -> tuple[int, str, str]:
        self.proc.wait(timeout=120)
        return (self.proc.returncode, *self.output())


def _log_tail(runs: Path) -> str:
    logs = sorted(runs.glob("*/events.jsonl"))
    if not logs:
        return "(no run log yet)"
    return "\n".join(line[:200] for line in logs[-1].read_text().splitlines()[-8:])


def test_one_ctrl_c_stops_the_run_and_its_log_verifies(tmp_path: Path) -> None:
    harness = Harness(["--headless", "bench", "demo", "--trials", "400", "--runs", str(tmp_path / "runs")], tmp_path)
    harness.wait_for("t0002")
    harness.send(signal.SIGINT)
    code, _out, err = harness.finish()
    assert "stopping: no new trials" in err
    assert code in (0, 3), err  # a stopped run is a finished command, not a crash
    run = next((tmp_path / "runs").iterdir())
    check = subprocess.run([sys.executable, "-m", "cli.main", "verify", str(run)], capture_output=True, text=True,
                           timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    finished = sum(1 for line in (run / "events.jsonl").read_text().splitlines() if '"trial.finished"' in line)
    assert 3 <= finished < 400  # the baselines and a few trials, not the whole budget


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def _agent_trials_finished(events: list[dict]) -> list[str]:
    return [e["data"]["trial_id"] for e in events
            if e["kind"] == "trial.finished" and not e["data"]["trial_id"].startswith("base-")]


def test_resume_after_one_ctrl_c_finishes_the_run_and_its_log_verifies(tmp_path: Path) -> None:
    budget = 40  # the demo's trials take tens of milliseconds: enough left after the press, a short resume
    runs = tmp_path / "runs"
    harness = Harness(["--headless", "bench", "demo", "--trials", str(budget), "--runs", str(runs)], tmp_path)
    harness.wait_for("t0002")
    harness.send(signal.SIGINT)
    code, _out, err = harness.finish()
    assert code == 0 and "stopping: no new trials" in err, err
    run = next(runs.iterdir())
    before = _events(run)
    assert before[-1]["kind"] == "run.finished" and before[-1]["data"]["reason"] == "interrupted", before[-1]
    done = _agent_trials_finished(before)
    assert 2 <= len(done) < budget, done

    resumed = subprocess.run([sys.executable, "-m", "cli.main", "resume", str(run), "--quiet"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=180, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = _events(run)
    assert after[:len(before)] == before  # append-only: the resume rewrote nothing
    new = after[len(before):]
    assert new and new[0]["kind"] == "run.resumed", resumed.stdout + resumed.stderr
    later = _agent_trials_finished(new)
    assert later and not set(later) & set(done)  # trials after the resume, none a repeat of a finished one
    assert sorted(done + later) == [f"t{i:04d}" for i in range(1, budget + 1)]  # the whole budget, once each
    assert new[-1]["kind"] == "run.finished" and new[-1]["data"]["reason"] == "max_trials", new[-1]
    check = subprocess.run([sys.executable, "-m", "cli.main", "verify", str(run)], capture_output=True, text=True,
                           timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_one_ctrl_c_stops_an_experiment_and_says_how_to_resume(tmp_path: Path) -> None:
    spec = ROOT / "benches" / "demo" / "experiment.yaml"
    harness = Harness(["--headless", "experiment", "run", str(spec), "--dir", str(tmp_path / "exp")], tmp_path)
    harness.wait_for("started")
    harness.send(signal.SIGINT)
    code, _out, err = harness.finish()
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
metric: {name: loss, direction: minimize, source: self-reported}
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
    harness = Harness(["--headless", "run", str(tmp_path / "task.yaml"), "--runs", str(runs)], tmp_path)
    harness.wait_for("run ")
    deadline = time.monotonic() + 90  # generous: CI shares two cores with whatever else is running
    while not processes_with(marker) and time.monotonic() < deadline and harness.proc.poll() is None:
        time.sleep(0.1)  # the baseline trial (it sleeps for 120 s)
    if not processes_with(marker):
        harness.proc.kill()
        code, out, err = harness.finish()
        pytest.fail(f"the trial never started (harness exit {code}).\nstdout:\n{out}\nstderr:\n{err}\n"
                    f"log tail:\n{_log_tail(runs)}")
    harness.send(signal.SIGINT)
    time.sleep(0.5)
    harness.send(signal.SIGINT)
    code, _out, err = harness.finish()
    assert code == 130, err
    assert "stopping: no new trials" in err and "quitting now: killed 1 running trial(s)" in err, err
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with(marker), f"trial processes left running: {processes_with(marker)}"
    # the killed trial's capped workspace (where mounting works) is detached, not left mounted in the run
    assert _mounts_under(runs) == [], "a workspace of the quit run is still mounted"


def _mounts_under(root: Path) -> list[str]:
    """The mount points under ``root`` (this process's mount namespace is the harness's)."""
    inside = str(root.resolve()) + "/"
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p.startswith(inside)]
