"""Driving a run from outside: stop, pause and continue orders, blackboard posts and steer notes.

The order tests run a real headless run in a subprocess (trials sleep 0.5 s so it lasts) and send
orders with `rrma-tui` from another process, as a person in a second terminal would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live_events import run_events

from rrma.contracts import Agent, Context
from rrma.log.control import (
    ControlError,
    RunNotLive,
    live_driver,
    post_to_blackboard,
    send_control,
    send_steer,
)
from rrma.log.driver_lock import DriverLock
from rrma.log.events import parse_line
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.task import AgentConfig, load_task, task_from_dict
from rrma.trial import FileEdit, Proposal

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "RRMA_REVIEWER": "alice"}


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=ENV, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


events = run_events  # whole lines only: the run writes the log while the test reads it


def wait_for(predicate: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout}s")


@pytest.fixture
def slow_task(tmp_path: Path) -> Path:
    """The demo bench with trials of about half a second."""
    task_dir = tmp_path / "task"
    shutil.copytree(DEMO, task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text().replace("import math\n", "import math\nimport time\ntime.sleep(0.5)\n"))
    return task_dir / "task.yaml"


@pytest.fixture
def headless(slow_task: Path, tmp_path: Path) -> Iterator[Callable[[int], tuple[subprocess.Popen[str], Path]]]:
    """Start `rrma-tui --headless run` of the slow task; returns (process, run dir) once 2 trials finished."""
    procs: list[subprocess.Popen[str]] = []

    def start(max_trials: int, *extra: str) -> tuple[subprocess.Popen[str], Path]:
        runs = tmp_path / "runs"
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "--headless", "run", str(slow_task), "--runs", str(runs),
             "--set", f"budget.max_trials={max_trials}", "--set", "budget.max_concurrent=1", "--quiet", *extra],
            env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)

        def two_finished() -> Path | None:
            logs = list(runs.glob("*/events.jsonl")) if runs.exists() else []
            if logs and sum(e["kind"] == "trial.finished" and not e["data"]["trial_id"].startswith("base")
                            for e in events(logs[0].parent)) >= 2:
                return logs[0].parent
            return None

        return proc, wait_for(two_finished, timeout=180, what="the run's first two trials")

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def kinds_after(run_dir: Path, seq: int, kind: str) -> list[dict[str, Any]]:
    return [e for e in events(run_dir) if e["seq"] > seq and e["kind"] == kind]


def test_stop_from_another_process_ends_the_headless_run_and_resume_continues_it(headless: Any) -> None:
    proc, run_dir = headless(9)  # 7 trials of 0.5 s or more left when the stop is sent: it comes first
    sent = cli("stop", str(run_dir), "--reason", "enough for now")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip().startswith("stop sent (seq ") and len(sent.stdout.strip().splitlines()) == 1
    stopped_at = time.monotonic()
    proc.wait(timeout=15)  # a running trial (0.5 s) finishes, then the driver ends the run
    assert time.monotonic() - stopped_at < 8
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    log = events(run_dir)
    order = next(e for e in log if e["kind"] == "run.control")
    assert order["actor"] == "human:alice" and order["data"] == {"action": "stop", "by": "human:alice",
                                                                  "reason": "enough for now"}
    finished = log[-1]
    assert finished["kind"] == "run.finished" and finished["data"]["reason"] == "stopped"
    assert finished["data"]["summary"]["stopped_by"] == "human:alice"
    assert finished["data"]["summary"]["stop_seq"] == order["seq"]
    notes = [e["data"]["text"] for e in log if e["kind"] == "note"]
    assert any(n.startswith(f"stop by human:alice (seq {order['seq']})") for n in notes)
    # no trial was proposed after the stop was acknowledged, and every trial finished
    state = RunState.fold(RunStore(run_dir).scan().events)
    assert all(t.finished for t in state.trials.values())
    trials_before = len(state.agent_trials())
    assert trials_before < 9
    assert live_driver(run_dir) is None
    late = cli("pause", str(run_dir))  # nobody drives it now: exit 2, one line, the way back named
    assert late.returncode == 2 and late.stdout == "" and len(late.stderr.strip().splitlines()) == 1
    assert "not live: it finished (stopped); `rrma-tui resume" in late.stderr
    assert events(run_dir)[-1]["kind"] == "run.finished"
    verify = cli("verify", str(run_dir))
    assert verify.returncode == 0 and "chain intact" in verify.stdout, verify.stdout + verify.stderr

    resumed = cli("resume", str(run_dir), "--quiet", timeout=120)  # the old stop binds the old driver only
    assert resumed.returncode == 0, resumed.stderr
    after = RunState.fold(RunStore(run_dir).scan().events)
    assert after.finish_reason == "max_trials" and len(after.agent_trials()) == 9
    assert after.stop_request is None and after.resumes == 1
    assert verify_run(run_dir).ok


def test_pause_holds_proposals_until_continue(headless: Any) -> None:
    proc, run_dir = headless(200)
    sent = cli("pause", str(run_dir), "--reason", "reading the claims")
    assert sent.returncode == 0, sent.stderr
    found = re.match(r"pause sent \(seq (\d+)\)", sent.stdout)
    assert found, sent.stdout
    pause_seq = int(found.group(1))
    ack = wait_for(lambda: next((e for e in events(run_dir) if e["kind"] == "note"
                                 and e["data"]["text"].startswith("pause by human:alice")), None),
                   timeout=3, what="the pause's acknowledgement")  # honoured within 1-2 s
    assert ack["seq"] > pause_seq
    again = cli("pause", str(run_dir))
    assert again.returncode == 0 and again.stdout.startswith("already paused")
    time.sleep(2.5)
    assert kinds_after(run_dir, ack["seq"], "trial.proposed") == []
    state = RunState.fold(RunStore(run_dir).scan().events)
    assert state.paused and all(t.finished for t in state.trials.values())  # the running trial finished
    # a person's post while paused: on the blackboard now and in blackboard.md after the run
    posted = cli("post", str(run_dir), "the lr axis looks flat")
    assert posted.returncode == 0 and posted.stdout.startswith("posted to the blackboard")

    cont = cli("continue", str(run_dir))
    assert cont.returncode == 0 and cont.stdout.startswith("continue sent"), cont.stderr
    continue_seq = wait_for(lambda: next((e["seq"] for e in events(run_dir) if e["kind"] == "run.control"
                                          and e["data"]["action"] == "continue"), None))
    wait_for(lambda: kinds_after(run_dir, continue_seq, "trial.proposed"), timeout=5, what="a proposal after continue")
    assert cli("stop", str(run_dir)).returncode == 0
    proc.wait(timeout=15)
    assert proc.returncode == 0
    assert events(run_dir)[-1]["data"]["reason"] == "stopped"
    assert "**human:alice** (" in (run_dir / "blackboard.md").read_text()
    assert "the lr axis looks flat" in (run_dir / "blackboard.md").read_text()
    assert verify_run(run_dir).ok


@pytest.mark.ray
def test_stop_reaches_a_driver_whose_trials_run_on_ray(headless: Any) -> None:
    """The order is read by the driver's loop, not the executor: the same within seconds on Ray."""
    pytest.importorskip("ray", reason="ray is not installed (the optional 'ray' extra)")
    proc, run_dir = headless(200, "--executor", "ray")
    assert events(run_dir)[0]["kind"] == "run.started"
    assert cli("stop", str(run_dir)).returncode == 0
    stopped_at = time.monotonic()
    proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()[-2000:] if proc.stderr else ""
    assert time.monotonic() - stopped_at < 20  # a running trial finishes; then Ray's local instance shuts down
    finished = events(run_dir)[-1]
    assert finished["kind"] == "run.finished" and finished["data"]["reason"] == "stopped"
    started = [e for e in events(run_dir) if e["kind"] == "trial.started"]
    assert started and all(e["data"]["executor"] == "ray" for e in started)
    assert verify_run(run_dir).ok


class RecordingAgent(Agent):
    """Proposes X = 1, 2, 3... and keeps every context it was given."""

    backend = "recording"

    def __init__(self, name: str, count: int) -> None:
        super().__init__(AgentConfig(name=name, backend="recording"), task_from_dict({"name": "x"}))
        self.left = count
        self.contexts: list[Context] = []

    def propose(self, ctx: Context) -> Proposal | None:
        self.contexts.append(ctx)
        if self.left == 0:
            return None
        self.left -= 1
        value = len(self.contexts) + (0.5 if self.name == "y" else 0.0)
        return Proposal(hypothesis=f"{self.name} X={value}",
                        edits=[FileEdit(path="objective.py", replacements=[("X = 0.0 ", f"X = {value} ")])])


def test_a_steer_note_reaches_the_agent_it_names_and_no_other(tmp_path: Path) -> None:
    x, y = RecordingAgent("x", 3), RecordingAgent("y", 3)
    sent: list[int] = []
    x_trials: set[str] = set()

    def on_event(event: Any) -> None:
        if event.kind == "trial.proposed" and event.data.agent == "x":
            x_trials.add(event.data.trial_id)
        if event.kind == "trial.finished" and event.data.trial_id in x_trials and not sent:
            run_dir = next(tmp_path.glob("*/events.jsonl")).parent
            sent.append(send_steer(run_dir, "try X near 1.7", by="bob", to=["x"]).event.seq)

    task = load_task(DEMO / "task.yaml", {"budget.max_trials": 6, "budget.max_concurrent": 1})
    result = start_run(task, tmp_path, agents=[x, y], on_event=on_event)
    assert sent, "the steer note was never sent"
    note = "human:bob: try X near 1.7"
    assert note not in x.contexts[0].steer  # before the note
    assert x.contexts[-1].steer == [note]  # x's next context on carries it
    seen_at = next(i for i, ctx in enumerate(x.contexts) if ctx.steer)
    assert seen_at == 1  # the context right after the trial whose end sent it
    assert all(ctx.steer == [] for ctx in y.contexts)
    turns = [e for e in RunStore(result.run_dir).scan().events if e.kind == "agent.turn"
             and (e.data.args or {}).get("steer_seq") == sent[0]]
    assert [(t.data.agent, t.data.role, t.data.text) for t in turns] == [("x", "user", "[steer from human:bob] try X near 1.7")]
    assert turns[0].seq > sent[0]
    steer = next(e for e in RunStore(result.run_dir).scan().events if e.kind == "agent.steer")
    assert steer.actor == "human:bob" and steer.data.to == ["x"]
    assert result.state.steers_for("y") == [] and len(result.state.steers_for("x")) == 1


def test_a_note_to_every_agent_reaches_all_and_the_llm_prompt_shows_it(tmp_path: Path) -> None:
    from agents.llm.prompts import context_text

    x, y = RecordingAgent("x", 2), RecordingAgent("y", 2)
    sent: list[int] = []

    def on_event(event: Any) -> None:
        if event.kind == "run.started":
            run_dir = next(tmp_path.glob("*/events.jsonl")).parent
            sent.append(send_steer(run_dir, "stay below X=3", by="bob").event.seq)

    task = load_task(DEMO / "task.yaml", {"budget.max_trials": 4, "budget.max_concurrent": 1})
    start_run(task, tmp_path, agents=[x, y], on_event=on_event)
    assert sent
    for agent in (x, y):
        assert all(ctx.steer == ["human:bob: stay below X=3"] for ctx in agent.contexts)
    text = context_text(x.contexts[0], [])
    assert "Notes from the people running this run" in text and "human:bob: stay below X=3" in text


@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    agent = RecordingAgent("x", 1)
    result = start_run(load_task(DEMO / "task.yaml", {"budget.max_trials": 1}), tmp_path / "runs", agents=[agent])
    return result.run_dir


@pytest.mark.parametrize("action", ["stop", "pause", "continue"])
def test_an_order_to_a_run_nobody_drives_exits_2_and_writes_nothing(finished_run: Path, action: str) -> None:
    before = (finished_run / "events.jsonl").read_bytes()
    out = cli(action, str(finished_run))
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "the run is not live: it finished (max_trials)" in lines[0]
    assert (finished_run / "events.jsonl").read_bytes() == before
    with pytest.raises(RunNotLive):
        send_control(finished_run, action, "alice")


def test_a_crashed_run_with_a_stale_driver_json_is_not_live(finished_run: Path) -> None:
    # a driver killed by SIGKILL leaves driver.json behind; the lock (released by the kernel) is the truth
    (finished_run / "driver.json").write_text('{"pid": 999999, "host": "gone", "started": "2026-01-01T00:00:00Z"}\n')
    assert live_driver(finished_run) is None
    with DriverLock(finished_run):  # a live driver (here: this process) holds the run
        holder = live_driver(finished_run)
        assert holder is not None and f"pid {os.getpid()}" in holder
        with pytest.raises(RunNotLive, match="has finished"):  # driven, but its log says finished
            send_control(finished_run, "stop", "alice")
    assert live_driver(finished_run) is None


def test_post_and_steer_at_rest_keep_the_views_and_refuse_bad_input(finished_run: Path) -> None:
    post = cli("post", str(finished_run), "revisit DEPTH", "--by", "carol")
    assert post.returncode == 0 and post.stdout.startswith("posted to the blackboard (seq ")
    assert "**human:carol** (" in (finished_run / "blackboard.md").read_text()
    assert verify_run(finished_run).ok  # the derived views were rewritten for a run at rest
    steer = cli("steer", str(finished_run), "look at Y", "--agent", "x")
    assert steer.returncode == 0 and "no live driver" in steer.stdout
    bad = cli("steer", str(finished_run), "hi", "--agent", "nobody")
    assert bad.returncode == 2 and "no agent 'nobody'" in bad.stderr and bad.stdout == ""
    with pytest.raises(ControlError):
        post_to_blackboard(finished_run, "   ", "carol")
    with pytest.raises(ControlError):
        send_control(finished_run, "halt", "carol")
    assert verify_run(finished_run).ok


# (events, paused, stop requested): how the log folds into what the driver must obey
FOLD_CASES = [
    (["pause"], True, False),  # a pause is in force
    (["pause", "pause"], True, False),  # a second pause changes nothing
    (["pause", "continue"], False, False),  # continue lifts it
    (["continue"], False, False),  # continue without a pause: nothing
    (["stop"], False, True),  # a stop binds the driver
    (["pause", "stop"], True, True),  # stop wins (the loop checks it first); still paused
    (["pause", "stop", "resumed"], False, False),  # a new driver (run.resumed) starts unpaused and unstopped
    (["stop", "resumed", "pause"], True, False),  # orders after the resume bind the new driver
]


@pytest.mark.parametrize(("orders", "paused", "stopped"), FOLD_CASES)
def test_orders_fold_into_the_state(tmp_path: Path, orders: list[str], paused: bool, stopped: bool) -> None:
    store = RunStore(tmp_path / "run", create=True)
    store.append("run.started", "harness", {"run_id": "r", "task_name": "t", "task": {}})
    for order in orders:
        if order == "resumed":
            store.append("run.resumed", "harness", {})
        else:
            store.append("run.control", "human:alice", {"action": order, "by": "human:alice"})
    state = RunState.fold(store.scan().events)
    assert state.paused is paused and (state.stop_request is not None) is stopped
    assert len(state.controls) == len([o for o in orders if o != "resumed"])


def test_control_and_steer_events_are_versioned_models() -> None:
    from rrma.log.events import build_line

    line, _ = build_line(0, "0" * 64, "run.control", "human:a", {"action": "pause", "by": "human:a"})
    assert parse_line(line).data.reason == ""
    line, _ = build_line(0, "0" * 64, "agent.steer", "human:a", {"text": "hi", "by": "human:a"})
    assert parse_line(line).data.to == []
    with pytest.raises(ValueError, match=r"invalid data for run\.control"):
        build_line(0, "0" * 64, "run.control", "human:a", {"action": "explode", "by": "human:a"})
