"""Keys typed in a burst (a paste, a fast typist) go where they are typed: the keys after `/` (or after any key
that opens an input) are held until that input has focus, then given to it in order; none reaches the screen
underneath (issue 35, item 9).

Pilot's ``press`` lets the app go idle between keys, which hides the race, so :func:`burst` hands the keys to
the driver back to back, as a terminal delivers a paste; the tmux test sends the burst as one ``send-keys``.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from textual import events
from textual.widgets import Input
from tmux_session import Tmux
from tui_helpers import fixed_clock
from tui_helpers import wait_until as _wait_until

from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.timeline import TimelineScreen
from tui.widgets.line_table import LineTable

REPO = Path(__file__).resolve().parents[2]


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)


def burst(app: RRMAApp, *keys: str) -> None:
    """Hand ``keys`` to the app's driver with no pause between them (what a terminal does with a paste)."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        char = key if len(key) == 1 else {"slash": "/", "enter": "\r", "space": " "}.get(key)
        event = events.Key(key, char)
        event.set_sender(app)
        driver.send_message(event)


async def open_dashboard(pilot: Any, app: RRMAApp) -> DashboardScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.model is not None)
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    await wait_until(pilot, lambda: len(screen.query_one("#trials", LineTable).rows) > 0)
    return screen


@pytest.mark.asyncio
async def test_a_burst_after_slash_filters_the_dashboard_and_opens_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12)
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        burst(app, "slash", "t", "0", "0", "0", "3", "enter")  # `t` alone opens the trace
        table = screen.query_one("#trials", LineTable)
        await wait_until(pilot, lambda: screen.text_filter == "t0003")
        await pilot.pause(0.2)
        assert app.screen is screen, f"the burst opened {type(app.screen).__name__}"
        assert "t0003" in table.rows and len(table.rows) < 12
        assert table.has_focus


@pytest.mark.asyncio
async def test_a_burst_after_slash_in_the_timeline_filters_and_opens_no_trial(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=8)
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.press("E")
        await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen))
        timeline = app.screen
        assert isinstance(timeline, TimelineScreen)
        table = timeline.query_one("#tl-rows", LineTable)
        await wait_until(pilot, lambda: len(table.rows) > 0)
        burst(app, "slash", *"alice", "enter")  # Enter on a row opens its trial; `a`, `l`, `c`, `e` are keys too
        await wait_until(pilot, lambda: timeline.text_filter == "alice")
        await pilot.pause(0.2)
        assert app.screen is timeline, f"the burst opened {type(app.screen).__name__}"
        assert dash.text_filter == ""


@pytest.mark.asyncio
async def test_a_burst_after_the_goto_key_lands_in_its_input(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12)
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        burst(app, "g", "t", "0", "0", "0", "4")
        await wait_until(pilot, lambda: isinstance(app.focused, Input) and app.focused.value == "t0004")
        assert app.screen_stack[-2] is dash  # the goto dialog over the dashboard, nothing else opened


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_a_pasted_filter_in_a_real_terminal_opens_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12)
    session = f"rrma-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "exit-code"
    command = (f"cd {REPO} && {sys.executable} -m tui.app --runs {runs} demo-run --reviewer carol; "
               f"echo $? > {done}; sleep 60")
    tmux = Tmux(session, done)
    tmux.run("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
    try:
        tmux.wait_for("t0012")
        tmux.run("send-keys", "-t", session, "/t0003")  # one write: the keys arrive together
        tmux.send("Enter")
        screen = tmux.wait_for("filtered: 5 of 15")
        assert "step 1/" not in screen  # the trace did not open
        tmux.quit_cleanly()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True)


@pytest.mark.asyncio
async def test_a_key_typed_after_the_hold_waits_for_the_burst_still_on_its_way(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The race CI met in a real terminal: under load the burst's last keys were still on their way back from the
    table when the hold ended, so the Enter typed after them reached the filter box first (``t00`` was applied and
    ``03`` fell to the table). A table slow with keys makes the race certain; Enter is typed the moment the hold
    ends."""
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12)
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock)

    async def slow_key(self: LineTable, event: events.Key) -> None:
        await asyncio.sleep(0.05)  # a busy table (a redraw, a loaded machine): keys bubble back late

    monkeypatch.setattr(LineTable, "_on_key", slow_key, raising=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        release = app.typeahead.release
        typed: list[bool] = []

        async def release_then_enter() -> None:
            await release()
            if not typed:
                typed.append(True)
                burst(app, "enter")  # typed by the person after the paste; it arrives now

        monkeypatch.setattr(app.typeahead, "release", release_then_enter)
        burst(app, "slash", "t", "0", "0", "0", "3")
        await wait_until(pilot, lambda: bool(typed) and screen.text_filter != "")
        await pilot.pause(0.5)
        assert screen.text_filter == "t0003"
        assert app.screen is screen, f"the burst opened {type(app.screen).__name__}"
