"""Pilot tests of the dashboard's keys that drive a run: stop (h), pause/continue (w), post (m), steer (i).

A run is live when a process holds its driver lock; here the test process holds it, as the TUI's
own loop worker or a headless driver would.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_events import run_events
from make_run import make_run
from test_tui_screens import make_app, open_dashboard
from tui_helpers import plain, wait_until

from rrma.log.driver_lock import DriverLock
from tui.app import RRMAApp
from tui.dialogs import OrderScreen, QuitRunScreen
from tui.screens.dashboard import DashboardScreen

pytestmark = pytest.mark.asyncio


events_of = run_events  # whole lines only: the run writes the log while the test reads it


@pytest.fixture
def live_run(tmp_path: Path) -> Iterator[Path]:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "live-run", trials=4, finished=False)
    with DriverLock(run_dir):
        yield runs


async def test_stop_key_on_a_live_run_asks_then_appends_the_order(live_run: Path) -> None:
    run_dir = live_run / "live-run"
    app = make_app(live_run, "live-run")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        before = len(events_of(run_dir))
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        assert len(events_of(run_dir)) == before  # nothing is written before the confirmation
        await pilot.press(*"done", "enter")
        await wait_until(pilot, lambda: events_of(run_dir)[-1]["kind"] == "run.control")
        order = events_of(run_dir)[-1]
        assert order["actor"] == "human:carol"
        assert order["data"] == {"action": "stop", "by": "human:carol", "reason": "done"}
        assert app.screen is dash
        await wait_until(pilot, lambda: "⏹ stopping (human:carol)" in plain(dash.query_one("#run-header").content))


async def test_pause_key_toggles_and_escape_cancels(live_run: Path) -> None:
    run_dir = live_run / "live-run"
    app = make_app(live_run, "live-run")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        before = len(events_of(run_dir))
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        await pilot.press("escape")  # cancelled: no order
        assert app.screen is dash and len(events_of(run_dir)) == before
        await pilot.press("w", "enter")
        await wait_until(pilot, lambda: dash.state.paused)
        assert events_of(run_dir)[-1]["data"]["action"] == "pause"
        assert "⏸ paused by human:carol" in plain(dash.query_one("#run-header").content)
        await pilot.press("w")  # paused: the same key continues
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        assert "Continue run" in plain(app.screen.query_one("#order-title").content)
        await pilot.press("enter")
        await wait_until(pilot, lambda: not dash.state.paused)
        assert events_of(run_dir)[-1]["data"]["action"] == "continue"


async def test_post_and_steer_keys_append_the_note(live_run: Path) -> None:
    run_dir = live_run / "live-run"
    app = make_app(live_run, "live-run")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.press("m", "enter")  # an empty post is refused in the modal
        assert isinstance(app.screen, OrderScreen)
        await pilot.press(*"try deeper", "enter")
        await wait_until(pilot, lambda: events_of(run_dir)[-1]["kind"] == "blackboard.post")
        post = events_of(run_dir)[-1]
        assert post["actor"] == "human:carol" and post["data"]["agent"] == "human:carol"
        assert post["data"]["text"] == "try deeper"
        await pilot.press("a")  # the agent filter (alice) becomes the steer note's default addressee
        assert dash.agent_filter == "alice"
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        await pilot.press("tab")  # the "to" field comes first (prefilled: alice); Tab to the note
        await pilot.press(*"smaller lr", "enter")
        await wait_until(pilot, lambda: events_of(run_dir)[-1]["kind"] == "agent.steer")
        steer = events_of(run_dir)[-1]
        assert steer["data"] == {"text": "smaller lr", "by": "human:carol", "to": ["alice"]}
        await wait_until(pilot, lambda: "→ alice smaller lr" in plain(dash.query_one("#blackboard-text").content))


async def test_stop_key_on_a_run_nobody_drives_writes_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "dead-run", trials=3, finished=False)  # its driver is gone: no lock held
    app = make_app(runs, "dead-run")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        before = (run_dir / "events.jsonl").read_bytes()
        await pilot.press("h")
        await pilot.pause(0.2)
        assert app.screen is dash  # no modal: it says why instead
        assert any("no process is driving this run" in str(n.message) for n in app._notifications)
        assert (run_dir / "events.jsonl").read_bytes() == before
        assert isinstance(dash, DashboardScreen)


async def test_a_driver_that_ends_before_the_confirmation_is_a_notification(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "live-run", trials=3, finished=False)
    lock = DriverLock(run_dir).acquire()
    app = make_app(runs, "live-run")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        lock.release()  # the driver exits while the person reads the question
        before = (run_dir / "events.jsonl").read_bytes()
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("the run is not live" in str(n.message) for n in app._notifications))
        assert app.is_running and app.screen is dash
        assert (run_dir / "events.jsonl").read_bytes() == before


def slow_demo(tmp_path: Path) -> Path:
    """The demo bench with trials slowed to 0.3 s each, so a run is still going when the test acts."""
    task_dir = tmp_path / "task"
    shutil.copytree(Path(__file__).resolve().parents[2] / "benches" / "demo", task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text().replace("import math\n", "import math\nimport time\ntime.sleep(0.3)\n"))
    return task_dir / "task.yaml"


def start_args(task: Path, runs: Path) -> list[str]:
    return ["run", str(task), "--headless", "--quiet", "--runs", str(runs)]


async def test_q_with_a_run_started_here_asks_and_h_stops_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    app = RRMAApp(runs, None, reviewer="carol", start_args=start_args(slow_demo(tmp_path), runs), poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded,
                         timeout=60)
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        [driver] = app.drivers
        await wait_until(pilot, lambda: len(dash.state.agent_trials()) >= 1, timeout=60)
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, QuitRunScreen))
        await pilot.press("escape")  # cancel: still watching, the run goes on
        assert app.screen is dash and app.live_drivers() == [driver]
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, QuitRunScreen))
        await pilot.press("h")
        await wait_until(pilot, lambda: app.exiting, timeout=30)
    assert app.stopped_on_quit == [driver]
    assert driver.process.wait(60) == 0  # the driver finished its running trials and ended the run itself
    run_dir = dash.session.run_dir
    log = events_of(run_dir)
    assert log[-1]["kind"] == "run.finished" and log[-1]["data"]["reason"] == "stopped"
    assert log[-1]["data"]["summary"]["stopped_by"] == "human:carol"
    assert len([e for e in log if e["kind"] == "trial.proposed" and not e["data"]["baseline"]]) < 24


async def test_q_then_d_detaches_and_the_run_goes_on_without_the_tui(tmp_path: Path) -> None:
    from rrma.log.control import live_driver, send_control

    runs = tmp_path / "runs"
    app = RRMAApp(runs, None, reviewer="carol", start_args=start_args(slow_demo(tmp_path), runs), poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded,
                         timeout=60)
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, QuitRunScreen))
        await pilot.press("d")
        await wait_until(pilot, lambda: app.exiting, timeout=30)
    [driver] = app.detached
    run_dir = dash.session.run_dir
    try:
        assert driver.alive() and live_driver(run_dir) is not None  # the TUI is gone; the run is not
        seen = len([e for e in events_of(run_dir) if e["kind"] == "trial.finished"])
        deadline = time.monotonic() + 30
        while len([e for e in events_of(run_dir) if e["kind"] == "trial.finished"]) <= seen:
            assert time.monotonic() < deadline, "the detached run made no progress"
            time.sleep(0.1)
        send_control(run_dir, "stop", "carol", "test over")  # from "another terminal", as the docs say
        assert driver.process.wait(60) == 0
    finally:
        if driver.alive():
            driver.process.kill()
    assert events_of(run_dir)[-1]["data"]["reason"] == "stopped"
