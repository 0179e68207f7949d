"""A run with no readable first event is listed as unreadable with the reason (issue 24, wrong today #7).

Before, a log of random bytes was listed `empty ⚠` and an empty log with a leftover head.json `empty`; opening
either showed a dashboard headed "(loading)" forever, and the first one's "unreadable lines" notification
stayed on screen over the next run opened. Now the runs list and the dashboard check the first event
(rrma.log.store.check_first_event: the head record and the first line only) and say why the run cannot be
read; opening another run clears what was said about the previous one. An empty log with no head record (a
run being created) is still just empty.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest
from scored_run import write_scored_run
from test_tui_screens import open_dashboard
from textual.widgets import Static
from tui_helpers import fixed_clock, plain, wait_until

from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.runs import RunsScreen
from tui.widgets.line_table import LineTable

pytestmark = pytest.mark.asyncio


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    good = write_scored_run(runs, "good", [1.5, 2.5])
    for name in ("random", "garbage", "cut", "starting"):
        (runs / name).mkdir()
    (runs / "random" / "events.jsonl").write_bytes(random.Random(7).randbytes(3000))  # not UTF-8 from byte 1 on
    (runs / "garbage" / "events.jsonl").write_text('{"seq": "zero", "kind": 7}\n{"v": 1}\n')  # UTF-8, not events
    (runs / "cut" / "events.jsonl").write_bytes(b"")  # cut to nothing; its head record says it held events
    shutil.copy(good / "head.json", runs / "cut" / "head.json")
    (runs / "starting" / "events.jsonl").write_bytes(b"")  # being created: no first append yet, no head record
    return runs


def notices(app: RRMAApp) -> list[tuple[str, str]]:
    """(title, message) of the notifications on screen now."""
    return [(n.title, n.message) for n in app._notifications]


def rows(screen: RunsScreen) -> dict[str, dict[str, str]]:
    table = screen.query_one("#runs", LineTable)
    return {key: {col.key: c if isinstance(c, str) else c.plain for col, c in zip(table.columns, table.render_row(key),
                                                                                   strict=True)}
            for key in table.rows}


async def test_runs_list_says_why_a_run_cannot_be_read(runs: Path) -> None:
    app = RRMAApp(runs, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(160, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await wait_until(pilot, lambda: len(rows(screen)) == 5 and all(r["status"] != "reading…" for r in rows(screen).values()))
        shown = rows(screen)
    assert shown["good"]["status"] == "finished"
    for name in ("random", "garbage", "cut"):
        assert shown[name]["status"] == "unreadable", (name, shown[name])  # was `empty ⚠` / `empty`
        assert shown[name]["trials"] == "-", (name, shown[name])
    assert re.match(r"line 1 \(byte \d+\): byte 0x\w\w is not UTF-8", shown["random"]["best"]), shown["random"]
    assert shown["garbage"]["best"].startswith("line 1 is not a valid event"), shown["garbage"]
    assert shown["cut"]["best"].startswith("empty, but head.json records"), shown["cut"]
    assert shown["starting"]["status"] == "empty" and not shown["starting"]["best"].strip("-"), shown["starting"]


def header(dash: DashboardScreen) -> str:
    return plain(dash.query_one("#run-header", Static).content)


async def open_run(pilot, app: RRMAApp, runs_screen: RunsScreen, name: str) -> DashboardScreen:  # type: ignore[no-untyped-def]
    runs_screen.query_one("#runs", LineTable).move_to(name)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
    assert isinstance(app.screen, DashboardScreen)
    return app.screen


async def test_dashboard_of_a_run_without_a_first_event_says_why(runs: Path) -> None:
    app = RRMAApp(runs, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        runs_screen = app.screen
        assert isinstance(runs_screen, RunsScreen)
        await wait_until(pilot, lambda: "random" in rows(runs_screen))
        for name, why in (("random", "is not UTF-8"), ("cut", "empty, but head.json records")):
            dash = await open_run(pilot, app, runs_screen, name)
            try:  # never "(loading)" for ever
                await wait_until(pilot, lambda d=dash, n=name: f"{n}  unreadable" in header(d), timeout=3)
            except AssertionError:
                raise AssertionError(f"the header does not say the run is unreadable:\n{header(dash)}") from None
            assert why in header(dash) and "(loading)" not in header(dash), header(dash)
            assert any(title == "run unreadable" and name in message for title, message in notices(app))
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is runs_screen)


async def test_the_next_run_opened_does_not_inherit_the_previous_runs_notice(runs: Path) -> None:
    app = RRMAApp(runs, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        runs_screen = app.screen
        assert isinstance(runs_screen, RunsScreen)
        await wait_until(pilot, lambda: "random" in rows(runs_screen))
        await open_run(pilot, app, runs_screen, "random")
        await wait_until(pilot, lambda: bool(notices(app)), timeout=3)  # an error about the random bytes
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is runs_screen)
        await open_run(pilot, app, runs_screen, "good")
        await open_dashboard(pilot, app)
        await pilot.pause(0.3)
        shown = notices(app)
    assert not shown, shown  # it stayed up to 15 s over the next run
