"""A running trial, third pass (issue 35, items 7 and 10): its live output in a pane pinned under the body (the
newest line always on screen at 80x24, whatever the body is scrolled to; End does not take it away), its age
against its budget ticking in the title, the outcome and the pane (it said ``seconds 0.0``), a sparkline of its
progress samples, and ``F`` following whichever trial is running.

The run's events are appended through RunStore as the driver writes them (timestamps from make_run's fake clock);
the live file is written by a real LiveWriter at the path the executor uses; the TUI's clock is a mutable one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from make_run import START, fake_clock, make_run
from screen_text import flat, screen_lines
from textual.widgets import Static
from tui_helpers import plain
from tui_helpers import wait_until as _wait_until

from rrma.contain.live import LiveWriter
from rrma.log.driver_lock import DriverLock
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable
from tui.widgets.trial_text import progress_series, sparkline

STARTED = START + timedelta(hours=2)


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def start(store: RunStore, trial_id: str, when: datetime) -> None:
    blob = store.put_blob("LEARNING_RATE = 0.2\n")
    with fake_clock(when):
        store.append_many([
            ("trial.proposed", "agent:alice", {
                "trial_id": trial_id, "parent": "base-0", "agent": "alice", "hypothesis": "a slower warmup",
                "proposal_blob": store.put_json_blob({"hypothesis": "a slower warmup", "edits": []}),
                "edits": [{"path": "train.py", "blob": blob}], "manifest_blob": store.put_json_blob({"train.py": blob}),
            }),
            ("trial.started", "harness", {"trial_id": trial_id}),
        ])


def running_run(runs: Path) -> Path:
    """Four finished trials, then t0005 started at STARTED with eight progress samples (a falling loss)."""
    run_dir = make_run(runs, "live-run", trials=4, finished=False)
    store = RunStore(run_dir)
    start(store, "t0005", STARTED)
    with fake_clock(STARTED + timedelta(seconds=5)):
        for i in range(8):
            store.append("trial.progress", "harness", {"trial_id": "t0005",
                                                       "sample": {"step": i * 100, "loss": round(3 - i * 0.1, 3)}})
    store.close()
    return run_dir


def started_at(run_dir: Path, trial_id: str) -> datetime:
    """When the log says ``trial_id`` started (its trial.started event's ts, read from events.jsonl)."""
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "trial.started" and event["data"]["trial_id"] == trial_id:
            return datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))
    raise AssertionError(f"{trial_id} never started")


async def open_trial(pilot: Any, app: RRMAApp, trial_id: str) -> TrialScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    dash = app.screen
    assert isinstance(dash, DashboardScreen)
    await pilot.pause()
    dash.query_one("#trials", LineTable).move_to(trial_id)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen) and app.screen.is_mounted)
    screen = app.screen
    assert isinstance(screen, TrialScreen)
    return screen


@pytest.mark.asyncio
async def test_the_newest_live_line_stays_on_screen_at_80x24_and_end_keeps_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    store = RunStore(run_dir)
    live = store.live_output_path("t0005")
    live.parent.mkdir(parents=True)
    writer = LiveWriter(live, 10**6)
    try:
        for i in range(60):
            writer.write(f"step {i} loss {3 - i / 100:.3f}\n".encode())
        clock = Clock(STARTED + timedelta(seconds=62))
        app = RRMAApp(runs, run_dir, reviewer="carol", clock=clock, poll_interval=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_trial(pilot, app, "t0005")
            await wait_until(pilot, lambda: "step 59 loss 2.410" in flat(screen_lines(app)))
            lines = screen_lines(app)
            assert lines[-2].strip() == "step 59 loss 2.410"  # the pane's last row, right above the footer
            # the body scrolls on its own: End goes to its end, the pane still shows the newest line
            app.screen.query_one("#trial-body").focus()
            await pilot.press("end")
            await pilot.pause()
            assert "review" in flat(screen_lines(app)) and screen_lines(app)[-2].strip() == "step 59 loss 2.410"
            writer.write(b"step 60 loss 2.400\n")  # a new line: still the last row, no key pressed
            await wait_until(pilot, lambda: screen_lines(app)[-2].strip() == "step 60 loss 2.400")
            assert all(len(line) <= 80 for line in screen_lines(app))
    finally:
        writer.close()
        store.close()


@pytest.mark.asyncio
async def test_a_running_trial_shows_its_age_against_its_budget_ticking(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    clock = Clock(started_at(run_dir, "t0005") + timedelta(seconds=62))
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=clock, poll_interval=0.05)
    # this test process drives the run, as a headless driver would (a run no driver holds stops its clocks)
    with DriverLock(run_dir):
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_trial(pilot, app, "t0005")
            title = screen.query_one("#trial-title", Static)
            content = plain(screen.query_one("#trial-content", Static).content, width=118)
            assert "seconds 0.0" not in content and "running 1m02s of 1m00s" in content  # make_run's budget: 60 s
            assert "1m02s of 1m00s" in plain(title.content, width=200)
            head = screen.query_one("#live-head", Static)
            assert "1m02s of 1m00s" in plain(head.content, width=118)
            clock.now += timedelta(seconds=5)  # no key pressed, no event: the clock alone moves it
            await wait_until(pilot, lambda: "1m07s of 1m00s" in plain(title.content, width=200))
            await wait_until(pilot, lambda: "1m07s of 1m00s" in plain(head.content, width=118))
            # the progress samples' loss as a sparkline, its latest value beside it
            assert f"loss {sparkline([3 - i * 0.1 for i in range(8)], 24)} 2.3" in plain(head.content, width=118)


@pytest.mark.asyncio
async def test_f_follows_whichever_trial_is_running(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    clock = Clock(STARTED + timedelta(seconds=30))
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trial(pilot, app, "t0002")
        await pilot.press("F")
        await wait_until(pilot, lambda: screen.trial_id == "t0005")
        assert "following the running trial" in plain(screen.query_one("#trial-title", Static).content, width=200)
        store = RunStore(run_dir)
        with fake_clock(STARTED + timedelta(seconds=40)):
            store.append("trial.finished", "oracle", {"trial_id": "t0005", "status": "ok", "score": 2.31,
                                                      "feedback": "val_loss: 2.31", "seconds": 40.0})
        start(store, "t0006", STARTED + timedelta(seconds=41))
        store.close()
        await wait_until(pilot, lambda: screen.trial_id == "t0006")
        assert screen.query_one("#live-pane").has_class("-running")
        await pilot.press("F")  # again: stop following
        assert not screen.follow


def test_progress_series_prefers_the_score_estimate_then_the_loss() -> None:
    samples = [{"step": 1, "loss": 2.0, "score_est": 0.5}, {"step": 2, "loss": 1.5}, {"step": 3, "score_est": 0.7}]
    assert progress_series(samples) == ("score_est", [0.5, 0.7])
    assert progress_series([{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}]) == ("loss", [2.0, 1.0])
    assert progress_series([{"step": 1, "acc": 0.1, "flag": True}]) == ("acc", [0.1])  # the first other number
    assert progress_series([{"step": 1, "elapsed": 3.0}]) is None  # where it is, not how it does: nothing to draw
    assert sparkline([1.0, 2.0, 3.0], 10) == "▁▅█" and sparkline([2.0, 2.0], 5) == "▄▄" and sparkline([], 5) == ""
    assert sparkline([float(i) for i in range(30)], 4) == "▁▃▆█"  # the last four


def test_snapshot_running_trial_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    live = RunStore(run_dir).live_output_path("t0005")
    live.parent.mkdir(parents=True)
    live.write_text("".join(f"step {i} loss {3 - i / 100:.3f}\n" for i in range(30)))  # a leftover: not live

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_trial(pilot, pilot.app, "t0005")
        await pilot.pause(0.5)

    app = RRMAApp(runs, run_dir, reviewer="carol", clock=Clock(STARTED + timedelta(seconds=62)), poll_interval=0.05)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.mark.asyncio
async def test_the_palette_follows_the_running_trial_from_the_dashboard(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=Clock(STARTED), poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Follow the running trial")
        command.callback()
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen) and app.screen.is_mounted)
        assert app.screen.trial_id == "t0005" and app.screen.follow  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_f_on_the_dashboard_follows_the_running_trial(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=Clock(STARTED), poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        await pilot.press("F")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen) and app.screen.is_mounted)
        assert app.screen.trial_id == "t0005" and app.screen.follow  # type: ignore[attr-defined]
