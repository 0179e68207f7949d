"""Discoverability, third pass (issue 35, item 11, the parts that are not charts): `?` lists the screen's own keys
before the generic table keys, the 80-column footer keeps `B` on the compare screen, the trace's detail pane
scrolls from the list (J/K, said under it), a tool-only assistant message reads as its calls, the agents pane's
headers are whole at 80 columns, token counts read the same everywhere, and a hint line under the tables.

The run is make_run's plus turns appended through RunStore as an agent writes them; the token totals expected are
summed from events.jsonl (json).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from screen_text import flat, screen_lines
from test_tui_snapshots import SMALL, after, app_for
from textual.containers import VerticalScroll
from textual.widgets import Static
from tui_helpers import fixed_clock, plain
from tui_helpers import wait_until as _wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.counts import token_count
from tui.dialogs import HelpScreen
from tui.screens.compare import CompareScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.trace import TraceScreen
from tui.widgets.line_table import LineTable


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)


def busy_run(runs: Path) -> Path:
    """make_run's run plus, by alice, a tool-only assistant message with a long prompt (1.78M tokens in)."""
    run_dir = make_run(runs, "demo-run", trials=6)
    store = RunStore(run_dir)
    store.append("agent.turn", "agent:alice", {
        "agent": "alice", "step": 98, "model": "claude-sonnet-4", "role": "assistant",
        "text": "\n\n".join(f"Point {i}: a long plan, one paragraph per point." for i in range(60))})
    store.append("agent.turn", "agent:alice", {
        "agent": "alice", "step": 99, "model": "claude-sonnet-4", "role": "assistant", "text": "",
        "tokens_in": 1_780_000, "tokens_out": 900, "args": {"stop_reason": None, "tool_calls": ["read_file", "run_command"]}})
    store.close()
    return run_dir


def alice_tokens(run_dir: Path) -> int:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    return sum(int(e["data"].get("tokens_in") or 0) + int(e["data"].get("tokens_out") or 0) for e in events
               if e["kind"] == "agent.turn" and e["data"]["agent"] == "alice")


def sum_out(run_dir: Path) -> int:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    return sum(int(e["data"].get("tokens_out") or 0) for e in events
               if e["kind"] == "agent.turn" and e["data"]["agent"] == "alice")


async def dashboard(pilot: Any, app: RRMAApp) -> DashboardScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                     and app.screen.session.model is not None and app.screen.session.model.turns_indexed)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    return screen


@pytest.mark.asyncio
async def test_help_lists_the_screens_own_keys_first(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=6)
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await dashboard(pilot, app)
        own = {b.description for b in DashboardScreen.BINDINGS}
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        rows = [desc for _, desc in app.screen.rows]  # type: ignore[attr-defined]
        first_generic = rows.index("Up")  # the trials table's cursor keys
        late = [d for d in own if d in rows and rows.index(d) > first_generic]
        assert not late, (late, rows)
        assert rows.index("Quit") > first_generic  # the app's keys last
        assert dash is app.screen_stack[-2]


def test_the_compare_footer_keeps_b_at_80_columns(tmp_path: Path) -> None:
    import asyncio

    async def run() -> str:
        app = app_for(tmp_path)
        async with app.run_test(size=SMALL) as pilot:
            await after("down", "down", "d")(pilot)
            await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen))
            await pilot.pause()
            return screen_lines(app)[-1]

    footer = asyncio.run(run())
    assert "B Diff" in footer and "q Quit" in footer and "? Help" in footer, footer


@pytest.mark.asyncio
async def test_the_trace_detail_scrolls_from_the_list_and_a_tool_only_message_reads_as_its_calls(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = busy_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await dashboard(pilot, app)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
        trace = app.screen
        assert isinstance(trace, TraceScreen)
        table = trace.query_one("#turns", LineTable)
        await pilot.press("end")
        await pilot.pause()
        row = " ".join(c.plain if hasattr(c, "plain") else str(c) for c in trace._row(table.cursor_key or ""))
        assert "→ read_file, run_command" in row and "stop_reason" not in row
        # the hint under the detail pane, and J/K scroll it while the list keeps the focus
        detail = trace.query_one("#turn-detail", VerticalScroll)
        assert "J/K scroll" in str(detail.border_subtitle)
        assert table.border_subtitle
        await pilot.press("up")  # the long plan before it
        await pilot.press("e")  # every step whole
        await pilot.pause()
        if detail.max_scroll_y == 0:
            pytest.fail("the detail pane is too short to scroll: the test run needs a longer step")
        await pilot.press("J")
        await wait_until(pilot, lambda: detail.scroll_y > 0)
        assert table.has_focus
        down = detail.scroll_y
        await pilot.press("K")
        await wait_until(pilot, lambda: detail.scroll_y < down)
        # the agent's total tokens: the same rule as the dashboard's agents pane
        await pilot.press("down")
        await pilot.pause()
        assert token_count(alice_tokens(run_dir) - sum_out(run_dir)) in plain(
            trace.query_one("#turn-text", Static).content, width=118)


@pytest.mark.asyncio
async def test_the_agents_pane_keeps_its_headers_at_80_columns_and_counts_tokens_as_the_trace(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = busy_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=SMALL) as pilot:
        await dashboard(pilot, app)
        text = flat(screen_lines(app))
        assert "turns" in text and "trials" in text and "tokens" in text, text
        assert "tur…" not in text and "tria…" not in text and "tok…" not in text
        assert token_count(alice_tokens(run_dir)) == "1.79M"
        assert "1.79M" in text  # not 1788.9k


@pytest.mark.parametrize(("n", "shown"), [
    (0, "0"), (950, "950"), (1785, "1.8k"), (13_300, "13.3k"), (178_000, "178k"),  # the agents pane's range
    (999_600, "1.00M"), (1_620_000, "1.62M"), (1_785_700, "1.79M"), (17_900_000, "17.9M"),  # the trace's
    (1.79e9, "1.79G"),  # never more than five cells
])
def test_one_token_count_rule(n: float, shown: str) -> None:
    assert token_count(n) == shown and len(shown) <= 5
