"""The dashboard's header ticks every second with no event arriving (issue 24, wrong today #4).

Before, the header was drawn only when events were folded: a paused run kept `last event 0s ago`,
a finished run its age at open, and a run nobody drives would have counted elapsed time up forever.
Now `last event N ago` grows while nothing comes; elapsed stops at run.finished for a finished
run, ticks for a live (driven) one, and stops at the last event for a run no driver holds, whose
header says so. The clock is the app's own (RRMAApp's ``clock``): a fixed instant a few seconds
after the log's last event, moving with real time, so ages read ``Ns`` and change within a second or two.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from make_run import fake_clock, make_run
from test_tui_screens import open_dashboard
from textual.widgets import Static
from tui_helpers import plain, wait_until

from rrma.log.driver_lock import DriverLock
from rrma.log.events import parse_ts
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.durations import human_duration
from tui.screens.dashboard import DashboardScreen

pytestmark = pytest.mark.asyncio

TICK_WAIT = 2.5  # seconds with no event by which the age shown must have moved on (it ticks every second)


def log_times(run_dir: Path) -> tuple[datetime, datetime]:
    """The first and the last event's timestamps."""
    lines = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    first, last = parse_ts(lines[0]["ts"]), parse_ts(lines[-1]["ts"])
    assert first is not None and last is not None
    return first, last


def moving_clock(start: datetime) -> Callable[[], datetime]:
    """``start``, then moving with real time (monotonic)."""
    origin = time.monotonic()
    return lambda: start + timedelta(seconds=time.monotonic() - origin)


def header_of(dash: DashboardScreen) -> str:
    return plain(dash.query_one("#run-header", Static).content, width=200)


def part(header: str, pattern: str) -> str:
    found = re.search(pattern, header)
    assert found is not None, f"{pattern!r} not in the header:\n{header}"
    return found.group(1)


async def after_a_tick(pilot, dash: DashboardScreen, before: str) -> str:  # type: ignore[no-untyped-def]
    """The header once its ``last event`` age moved on (no event arrives meanwhile); fails after TICK_WAIT."""
    age = part(before, r"last event (\S+) ago")
    try:
        await wait_until(pilot, lambda: part(header_of(dash), r"last event (\S+) ago") != age, timeout=TICK_WAIT)
    except AssertionError:
        raise AssertionError(f"the header froze: `last event {age} ago` for {TICK_WAIT} s") from None
    return header_of(dash)


def app_for(runs: Path, run: str, clock: Callable[[], datetime]) -> RRMAApp:
    return RRMAApp(runs, runs / run, reviewer="carol", clock=clock, poll_interval=0.05)


async def test_finished_run_age_grows_and_elapsed_stays_at_finish(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "done-run", trials=4)
    started, finished = log_times(run_dir)  # the last event is run.finished
    app = app_for(runs, "done-run", moving_clock(finished + timedelta(seconds=10)))
    async with app.run_test(size=(180, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        before = header_of(dash)
        after = await after_a_tick(pilot, dash, before)
    assert "finished (max_trials)" in after
    age_before, age_after = part(before, r"last event (\S+) ago"), part(after, r"last event (\S+) ago")
    assert int(age_after.rstrip("s")) > int(age_before.rstrip("s")) >= 10
    total = human_duration((finished - started).total_seconds())
    assert part(before, r"elapsed (\S+)") == part(after, r"elapsed (\S+)") == total  # stops at run.finished


async def test_paused_live_run_age_and_elapsed_keep_ticking(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "live-run", trials=4, finished=False)
    with DriverLock(run_dir):  # this test process drives the run, as a headless driver would
        _, last = log_times(run_dir)
        store = RunStore(run_dir)
        with fake_clock(last + timedelta(seconds=3)):
            store.append("run.control", "human:carol", {"action": "pause", "by": "human:carol", "reason": ""})
        store.close()
        started, paused = log_times(run_dir)
        assert (paused - started).total_seconds() < 3000  # elapsed reads `NmSSs`: it shows each second
        app = app_for(runs, "live-run", moving_clock(paused + timedelta(seconds=5)))
        async with app.run_test(size=(180, 40)) as pilot:
            dash = await open_dashboard(pilot, app)
            before = header_of(dash)
            after = await after_a_tick(pilot, dash, before)
    assert "⏸ paused by human:carol" in after and "no driver" not in after
    age_before, age_after = part(before, r"last event (\S+) ago"), part(after, r"last event (\S+) ago")
    assert int(age_after.rstrip("s")) > int(age_before.rstrip("s")) >= 5
    assert part(before, r"elapsed (\S+)") != part(after, r"elapsed (\S+)")  # a live run's wall clock runs on


async def test_run_nobody_drives_stops_elapsed_at_its_last_event(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "orphan-run", trials=4, finished=False)  # no run.finished, and no driver lock held
    started, last = log_times(run_dir)
    app = app_for(runs, "orphan-run", moving_clock(last + timedelta(seconds=20)))
    total = human_duration((last - started).total_seconds())
    async with app.run_test(size=(180, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        before = header_of(dash)
        assert "no driver" in before
        assert part(before, r"elapsed (\S+)") == total  # up to its last event, not up to now
        after = await after_a_tick(pilot, dash, before)
    age_before, age_after = part(before, r"last event (\S+) ago"), part(after, r"last event (\S+) ago")
    assert int(age_after.rstrip("s")) > int(age_before.rstrip("s")) >= 20
    assert part(after, r"elapsed (\S+)") == total  # not counting up forever
