"""Follow mode (LineTable's live end) on the trials table and the trace, and trace colours from the theme.

Pure tables for where the cursor goes; Pilot tests on a bare LineTable with each live end; then a
live run: events appended to the log while the dashboard or the trace is open.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from make_run import make_run
from rich.style import Style
from rich.text import Text
from test_tui_screens import make_app, open_dashboard
from textual import events
from textual.app import App, ComposeResult
from textual.color import Color
from tui_helpers import MessageLog, plain, wait_until

from rrma.log.store import RunStore
from tui.screens.trace import TraceScreen
from tui.widgets.line_table import Column, LineTable, LiveEnd, live_index, placed_cursor

# ---------------------------------------------------------------------------- pure logic


@pytest.mark.parametrize(("live_end", "count", "expected"), [
    ("top", 5, 0),  # newest first: new rows appear at row 0
    ("bottom", 5, 4),  # log order: at the last row
    ("bottom", 1, 0),  # one row is both ends
    ("top", 0, None),  # no rows: nowhere to be
    (None, 5, None),  # sorted by score: no live end
])
def test_live_index(live_end: LiveEnd | None, count: int, expected: int | None) -> None:
    assert live_index(live_end, count) == expected


@pytest.mark.parametrize(("count", "old", "kept", "following", "live_end", "expected"), [
    (6, 0, 1, True, "top", 0),  # following newest-first: a row inserted at the top takes the cursor
    (6, 4, 4, True, "bottom", 5),  # following log order: the appended row takes it
    (6, 0, 1, False, "top", 1),  # not following: the same key, pushed down by the inserted row
    (6, 2, 2, False, "bottom", 2),  # not following, rows appended below: nothing moves
    (6, 3, 3, True, None, 3),  # no live end (another sort): following means nothing, the key stays
    (3, 5, None, False, "bottom", 2),  # the key is gone (filtered out): the nearest row that exists
    (0, 5, None, True, "top", 0),  # no rows at all
])
def test_placed_cursor(count: int, old: int, kept: int | None, following: bool, live_end: LiveEnd | None,
                       expected: int) -> None:
    assert placed_cursor(count, old, kept, following=following, live_end=live_end) == expected


# ---------------------------------------------------------------------------- a bare table


class TableApp(App[None]):
    def __init__(self, live_end: LiveEnd) -> None:
        super().__init__()
        self.live_end = live_end

    def compose(self) -> ComposeResult:
        yield LineTable([Column("key", "key", 10)], lambda key: [key], live_end=self.live_end)


def keys(n: int, live_end: LiveEnd) -> list[str]:
    """Rows r0..r{n-1} (r{n-1} the newest) in the table's order for that live end."""
    rows = [f"r{i}" for i in range(n)]
    return rows[::-1] if live_end == "top" else rows


@pytest.mark.asyncio
@pytest.mark.parametrize(("live_end", "away", "back"), [("top", "down", "home"), ("bottom", "up", "end")])
async def test_table_follows_until_the_user_moves_and_resumes_at_the_live_end(
        live_end: LiveEnd, away: str, back: str) -> None:
    log = MessageLog()
    app = TableApp(live_end)
    async with app.run_test(size=(30, 12), message_hook=log) as pilot:  # 12 lines: a header and 9 rows
        table = app.query_one(LineTable)
        table.focus()
        table.set_rows(keys(40, live_end))
        await pilot.pause()
        assert table.following and table.cursor_key == "r39"
        table.set_rows(keys(41, live_end))  # a new row arrives: it is selected and on screen
        await pilot.pause()
        assert table.following and table.cursor_key == "r40"
        assert table.scroll_y == (0 if live_end == "top" else table.max_scroll_y)

        await pilot.press(away, away)  # the user moves: following stops, the message says so
        await pilot.pause()
        assert not table.following
        changed = log.of(LineTable.FollowChanged)
        assert changed and not changed[-1].following  # type: ignore[attr-defined]
        selected, line = table.cursor_key, table.cursor - int(table.scroll_y)
        for n in (42, 43, 60):  # rows arrive: the same row stays selected on the same screen line
            table.set_rows(keys(n, live_end))
            await pilot.pause()
            assert table.cursor_key == selected and table.cursor - int(table.scroll_y) == line
        assert not table.following

        await pilot.press(back)  # back to the live end: following again
        await pilot.pause()
        assert table.following and table.cursor_key == "r59"
        assert log.of(LineTable.FollowChanged)[-1].following  # type: ignore[attr-defined]
        table.set_rows(keys(61, live_end))
        await pilot.pause()
        assert table.cursor_key == "r60"


@pytest.mark.asyncio
@pytest.mark.parametrize(("live_end", "wheel"), [("top", events.MouseScrollDown), ("bottom", events.MouseScrollUp)])
async def test_scrolling_the_view_away_stops_following_and_keeps_the_view(
        live_end: LiveEnd, wheel: type[events.MouseScrollDown | events.MouseScrollUp]) -> None:
    app = TableApp(live_end)
    async with app.run_test(size=(30, 12)) as pilot:
        table = app.query_one(LineTable)
        table.set_rows(keys(40, live_end))
        await pilot.pause()
        assert table.following
        for _ in range(3):  # the mouse wheel, away from the live end
            table.post_message(wheel(table, 2, 5, 0, 1 if wheel is events.MouseScrollDown else -1, 0, False, False, False))
        await pilot.pause()
        assert not table.following and table.cursor_key == "r39"  # the cursor did not move; the view did
        top = int(table.scroll_y)
        first_shown = table.rows[top]
        table.set_rows(keys(45, live_end))
        await pilot.pause()
        assert table.rows[int(table.scroll_y)] == first_shown  # the rows on screen stay on screen
        assert table.cursor_key == "r39"


@pytest.mark.asyncio
async def test_no_live_end_never_follows_and_the_setter_moves_to_the_end() -> None:
    app = TableApp("bottom")
    async with app.run_test(size=(30, 12)) as pilot:
        table = app.query_one(LineTable)
        table.set_rows(keys(20, "bottom"))
        table.live_end = None  # e.g. sorted by score
        assert not table.following
        table.set_rows(keys(21, "bottom"))
        assert table.cursor_key == "r19"  # the selected row stays
        table.live_end = "bottom"
        assert not table.following  # a live end again does not move the cursor by itself
        table.following = True
        await pilot.pause()
        assert table.cursor_key == "r20" and table.following


# ---------------------------------------------------------------------------- a live run


def add_trial(run_dir: Path, trial_id: str, *, agent: str = "alice", turns: int = 1) -> None:
    """Append what an agent's next trial writes: its turns and the proposal."""
    store = RunStore(run_dir)
    blob = store.put_json_blob({"hypothesis": f"live {trial_id}", "edits": []})
    store.append_many([
        *[("agent.turn", f"agent:{agent}", {"agent": agent, "role": "assistant", "text": f"thinking about {trial_id} ({k})"})
          for k in range(turns)],
        ("trial.proposed", f"agent:{agent}", {"trial_id": trial_id, "parent": "base-0", "agent": agent,
                                              "hypothesis": f"live {trial_id}", "proposal_blob": blob}),
    ])
    store.close()


@pytest.fixture
def live_runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    make_run(runs, "live-run", trials=6, finished=False)
    return runs


@pytest.mark.asyncio
async def test_dashboard_follows_new_trials_until_the_user_moves(live_runs: Path) -> None:
    run_dir = live_runs / "live-run"
    app = make_app(live_runs, "live-run")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        table = dash.query_one("#trials", LineTable)
        assert table.live_end == "top" and table.following and table.cursor_key == "t0006"
        await wait_until(pilot, lambda: table.border_title == "trials · following")

        add_trial(run_dir, "t0007")  # following: the new trial is selected
        await wait_until(pilot, lambda: "t0007" in table.rows)
        assert table.cursor_key == "t0007" and table.rows[0] == "t0007"

        await pilot.press("j")  # the user moves: the selection stays put from now on
        assert table.cursor_key == "t0006" and not table.following
        await wait_until(pilot, lambda: table.border_title == "trials")
        add_trial(run_dir, "t0008")
        await wait_until(pilot, lambda: "t0008" in table.rows)
        assert table.cursor_key == "t0006" and table.cursor == 2

        await pilot.press("home")  # newest first: the live end is the top
        assert table.following and table.cursor_key == "t0008"
        await wait_until(pilot, lambda: table.border_title == "trials · following")

        await pilot.press("r")  # oldest first: the live end moves to the bottom, the newest stays selected
        assert table.live_end == "bottom" and table.following and table.cursor_key == "t0008"
        await pilot.press("up")
        assert not table.following
        await pilot.press("end")  # End resumes following here
        assert table.following
        add_trial(run_dir, "t0009")
        await wait_until(pilot, lambda: "t0009" in table.rows)
        assert table.cursor_key == "t0009" and table.rows[-1] == "t0009"

        await pilot.press("s")  # sorted by score: nothing to follow; the cursor goes to the best, the first row
        best = table.rows[0]
        assert table.live_end is None and not table.following and table.cursor_key == best
        await wait_until(pilot, lambda: table.border_title == "trials")
        add_trial(run_dir, "t0010")
        await wait_until(pilot, lambda: "t0010" in table.rows)
        assert table.cursor_key == best  # a new row does not move it


async def open_trace(pilot, app) -> TraceScreen:  # type: ignore[no-untyped-def]
    dash = await open_dashboard(pilot, app)
    await wait_until(pilot, lambda: dash.session.model is not None and dash.session.model.turns_indexed)
    await pilot.press("t")
    trace = app.screen
    assert isinstance(trace, TraceScreen)
    await pilot.pause()
    return trace


@pytest.mark.asyncio
async def test_trace_follows_live_turns_and_shows_the_newest_step(live_runs: Path) -> None:
    run_dir = live_runs / "live-run"
    app = make_app(live_runs, "live-run")
    async with app.run_test(size=(120, 40)) as pilot:
        trace = await open_trace(pilot, app)
        table = trace.query_one("#turns", LineTable)
        n = len(table.rows)
        assert table.live_end == "bottom" and table.following and table.cursor == n - 1  # a live run opens at its end
        await wait_until(pilot, lambda: table.border_title == "turns · following")

        add_trial(run_dir, "t0007", turns=2)
        await wait_until(pilot, lambda: len(table.rows) == n + 2)
        assert table.cursor == n + 1 and table.scroll_y == table.max_scroll_y
        await wait_until(pilot, lambda: "thinking about t0007 (1)" in plain(trace.query_one("#turn-text").content))

        await pilot.press("k")  # the user steps back: the step on screen stays
        selected = table.cursor_key
        assert not table.following and "thinking about t0007 (0)" in plain(trace.query_one("#turn-text").content)
        await wait_until(pilot, lambda: table.border_title == "turns")
        add_trial(run_dir, "t0008")
        await wait_until(pilot, lambda: len(table.rows) == n + 3)
        assert table.cursor_key == selected
        assert "thinking about t0007 (0)" in plain(trace.query_one("#turn-text").content)

        await pilot.press("end")  # and End follows again
        assert table.following
        add_trial(run_dir, "t0009")
        await wait_until(pilot, lambda: len(table.rows) == n + 4)
        assert table.cursor == n + 3
        await wait_until(pilot, lambda: "thinking about t0009 (0)" in plain(trace.query_one("#turn-text").content))


@pytest.mark.asyncio
async def test_trace_of_a_finished_run_opens_at_its_first_step(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        trace = await open_trace(pilot, app)
        table = trace.query_one("#turns", LineTable)
        assert table.cursor == 0 and not table.following and table.border_title == "turns"


# ---------------------------------------------------------------------------- colours from the theme


def contrast(a: Color, b: Color) -> float:
    """WCAG contrast ratio of two colours (1 to 21; 3 is the floor for large or bold text)."""
    def luminance(c: Color) -> float:
        def channel(v: int) -> float:
            s = v / 255
            return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b)
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def role_styles(trace: TraceScreen) -> dict[str, Style]:
    """role -> the style of its cell in the turns list (first row of each role)."""
    out: dict[str, Style] = {}
    for key in trace.query_one("#turns", LineTable).rows:
        cell = trace._row(key)[2]
        assert isinstance(cell, Text) and isinstance(cell.style, Style)
        out.setdefault(cell.plain, cell.style)
    return out


@pytest.mark.asyncio
async def test_trace_colours_follow_the_theme(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "textual-dark"
        trace = await open_trace(pilot, app)
        await pilot.press("down")  # a tool call: its arguments are JSON (Syntax)
        table, detail = trace.query_one("#turns", LineTable), trace.query_one("#turn-text")
        dark = role_styles(trace)
        dark_detail = detail.content

        app.theme = "textual-light"
        await pilot.pause()
        light = role_styles(trace)
        assert set(light) == set(dark) == {"assistant", "tool_call", "tool_result"}
        assert all(light[role] != dark[role] for role in light)
        assert detail.content is not dark_detail  # the detail was drawn again ...
        assert '"path": "train.py"' in plain(detail.content)  # ... the same step
        for y in range(table.size.height):  # the rows draw with the new theme
            table.render_line(y)

        background = Color.parse(app.get_css_variables()["background"])
        for role, style in light.items():  # each role reads on the light background (fixed "yellow" did not)
            assert style.color is not None and style.color.triplet is not None, role
            assert contrast(Color(*style.color.triplet), background) >= 3.0, role
        assert app.return_code is None


@pytest.mark.asyncio
async def test_the_focused_cursor_row_is_drawn_in_the_cursor_colours() -> None:
    class ColouredApp(App[None]):
        def compose(self) -> ComposeResult:
            yield LineTable([Column("key", "key", 10)], lambda key: [Text(key, "red")])

    app = ColouredApp()
    async with app.run_test(size=(30, 6)) as pilot:
        table = app.query_one(LineTable)
        table.set_rows(["a", "b"])
        table.focus()
        await pilot.pause()
        cursor_style = table.get_component_rich_style("line-table--cursor")
        colours = {seg.style.color for seg in table.render_line(1) if seg.text.strip() and seg.style}
        assert colours == {cursor_style.color}  # not red on the accent background
        assert Style.parse("red").color in {seg.style.color for seg in table.render_line(2) if seg.style}
