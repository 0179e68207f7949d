"""The dashboard's layout and its chart (issue 24): the chart keeps up with the table and holds every point it
plots; it follows the table's filter; Z and 1 2 3 zoom and hide panes; the compare screen's side-by-side diff.

The chart is read where plotext keeps what it plots (its monitor: the signals' data and, once drawn, the y
limits), so the tests of "wrong before" read the same thing from the old code.
"""

from __future__ import annotations

import io
import random
import time
from pathlib import Path

import pytest
from make_run import make_run
from rich.cells import cell_len
from rich.console import Console
from screen_text import screen_lines
from textual.widget import Widget
from tui_helpers import fixed_clock, wait_until

from rrma.diff import unified_lines
from rrma.log.state import RunState, TrialRecord
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.compare import CompareScreen
from tui.screens.dashboard import DashboardScreen
from tui.widgets.dashboard_panes import pane_layout
from tui.widgets.diff_view import DiffView
from tui.widgets.line_table import LineTable
from tui.widgets.score_chart import LiveSeries, ScoreChart, chart_series
from tui.widgets.side_diff import (
    ADD,
    BLANK,
    CTX,
    DEL,
    FILE,
    NOTE,
    SEPARATOR,
    WRAP_MARK,
    SideRow,
    column_widths,
    number_cells,
    row_lines,
    rows_from_opcodes,
    rows_from_unified,
    side_by_side,
)


def make_app(runs_dir: Path, run: str = "live-run") -> RRMAApp:
    return RRMAApp(runs_dir, runs_dir / run, reviewer="carol", clock=fixed_clock, poll_interval=0.02)


async def open_dashboard(pilot, app: RRMAApp) -> DashboardScreen:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    return screen


def plotted(chart: ScoreChart) -> tuple[list[float], list[float]]:
    """The scatter's (xs, ys) as plotext holds them (the trials' points: its first signal)."""
    monitor = chart.plot.plt.monitor
    if not monitor.x:
        return [], []
    return list(monitor.x[0]), list(monitor.y[0])


def y_limits(chart: ScoreChart) -> tuple[float, float] | None:
    """The y axis' limits of the chart last drawn on screen (plotext sets them when it builds the canvas)."""
    lower, upper = chart.plot.plt.monitor.ylim[0]
    return None if lower is None or upper is None else (lower, upper)


def add_trial(store: RunStore, tid: str, score: float, blob: str) -> None:
    store.append_many([
        ("trial.proposed", "agent:alice", {"trial_id": tid, "parent": "base-0", "agent": "alice",
                                           "hypothesis": "live", "proposal_blob": blob}),
        ("trial.started", "harness", {"trial_id": tid}),
        ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "seconds": 1.0}),
    ])


# ----------------------------------------------------------------------------- the chart keeps up


@pytest.mark.asyncio
async def test_chart_shows_a_new_trial_with_the_table_and_its_y_range_holds_it(tmp_path: Path) -> None:
    """Wrong before: the chart was drawn at most every 2 s, so for up to 2 s after the table showed a trial the
    chart did not plot it, and a score beyond the y range drawn was off the axis meanwhile."""
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "live-run", trials=10, finished=False)
    app = make_app(runs)
    async with app.run_test(size=(160, 48)) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        table = dash.query_one("#trials", LineTable)
        await pilot.pause(0.1)
        top = max(plotted(chart)[1])
        store = RunStore(run_dir)
        blob = store.put_json_blob({"hypothesis": "live", "edits": []})
        try:
            for n, score in enumerate((top - 0.001, top + 1.5, top + 3.0)):  # the last two far above the y range
                tid = f"live{n}"
                add_trial(store, tid, score, blob)
                await wait_until(pilot, lambda tid=tid: tid in table.rows)  # type: ignore[misc]
                # the same redraw that put the row in the table put the point in the chart
                assert score in plotted(chart)[1], f"{tid} is in the table, not in the chart"
                started = time.monotonic()  # and the next paint draws it inside the y axis' limits
                while (limits := y_limits(chart)) is None or not limits[0] <= score <= limits[1]:
                    assert time.monotonic() - started < 0.5, f"{score} outside the y range {limits}"
                    await pilot.pause(0.02)
                assert chart.y_range is not None and chart.y_range[0] <= min(plotted(chart)[1])
                if n:  # the latest is the highest: the plotted range ends at it, the axis drawn holds it
                    assert chart.y_range[1] == score and chart.scale is not None
                    assert y_limits(chart) == chart.scale.limits and chart.scale.row_of(score) < chart.scale.rows
        finally:
            store.close()


def random_state(rng: random.Random, n: int) -> RunState:
    state = RunState(run_id="r", task={"metric": {"name": "loss", "direction": "minimize"}})
    base = TrialRecord("base-0", None, "baseline", baseline=True, status="ok", score=2.0, promoted=True)
    state.trials["base-0"], state.baseline_ids = base, ["base-0"]
    state.order.append("base-0")
    state.baseline_mean, state.sigma = 2.0, 0.01
    state.best_history.append(("base-0", 2.0))
    for i in range(n):
        tid = f"t{i:04d}"
        state.trials[tid] = TrialRecord(tid, "base-0", rng.choice(["alice", "bob"]), status="proposed")
        state.order.append(tid)
    return state


def test_live_series_is_chart_series_after_any_updates() -> None:
    """The chart's incremental series (a live redraw touches only the trials that changed) equals the series
    built from every trial, whatever the updates: new trials, finishes out of order, promotions, a trial put back
    to proposed (a resume), thousands of points (reduced)."""
    rng = random.Random(7)
    for n, max_points in ((30, 400), (3000, 60)):
        state = random_state(rng, 0)
        live = LiveSeries(max_points)
        assert live.series(state, None) == chart_series(state, max_points)
        best = 2.0
        added = 0
        while added < n:
            touched: set[str] = set()
            for _ in range(rng.randint(1, 20)):
                tid = f"t{added:04d}"
                state.trials[tid] = TrialRecord(tid, "base-0", "alice", status="proposed")
                state.order.append(tid)
                added += 1
            for _ in range(rng.randint(0, 20)):
                rec = state.trials[rng.choice(state.order[1:])]
                touched.add(rec.trial_id)
                if rec.status == "ok" and rng.random() < 0.2:
                    rec.status = "proposed"  # interrupted and run again
                    continue
                rec.status = rng.choice(["ok", "ok", "ok", "crash"])
                rec.score = round(rng.uniform(1.0, 3.0), 3) if rec.status == "ok" else None
                if rec.score is not None and rec.score < best:
                    best, rec.promoted = rec.score, True
                    state.best_history.append((rec.trial_id, rec.score))
            assert live.series(state, touched) == chart_series(state, max_points), added


# ----------------------------------------------------------------------------- the chart follows the filter


@pytest.mark.asyncio
async def test_chart_follows_the_tables_filter(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "live-run", trials=16, finished=False)
    app = make_app(runs)
    async with app.run_test(size=(160, 48)) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        table = dash.query_one("#trials", LineTable)
        state = dash.state
        every = chart_series(state)
        assert chart.series == every and "filtered" not in chart.title_text
        total = len(state.order)
        assert str(dash.query_one("#filter-bar").render()).startswith(f"all {total} ")

        await pilot.press("a")  # the first agent
        agent = dash.agent_filter
        assert agent is not None
        await pilot.pause()
        numbers = {rec.trial_id: n for n, rec in enumerate(state.agent_trials(), start=1)}
        theirs = [state.trials[t] for t in state.order if state.trials[t].agent == agent]
        scored = [rec for rec in theirs if rec.status == "ok" and rec.score is not None and not rec.baseline]
        xs, ys, bx, by = chart.series
        assert xs == [numbers[rec.trial_id] for rec in scored] and ys == [rec.score for rec in scored]
        running = [min(ys[: i + 1]) for i in range(len(ys))]  # minimise: the best so far over their scores
        assert by[-1] == min(ys) and set(by) == set(running) and by == sorted(by, reverse=True)
        assert bx[-1] == max(numbers[rec.trial_id] for rec in theirs if rec.trial_id in numbers)
        assert plotted(chart) == (xs, ys)  # what plotext draws
        assert f"filtered: {len(table.rows)} of {total}" in chart.title_text
        assert f"{len(table.rows)} of {total}" in str(dash.query_one("#filter-bar").render())

        await pilot.press("f")  # and status ok: the same points, the count of the table
        await pilot.pause()
        assert chart.series[:2] == (xs, ys) and f"filtered: {len(table.rows)} of {total}" in chart.title_text
        await pilot.press("c")
        await pilot.pause()
        assert chart.series == every and "filtered" not in chart.title_text


# ----------------------------------------------------------------------------- zoom and panes


def shown(widget: Widget) -> bool:
    return all(node.display for node in widget.ancestors_with_self if isinstance(node, Widget)) \
        and widget.region.width > 0 and widget.region.height > 0


@pytest.mark.asyncio
async def test_zoom_and_pane_toggles_at_80_and_160_columns_survive_screen_switches(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "live-run", trials=8, finished=False)
    app = make_app(runs)
    async with app.run_test(size=(80, 24)) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)

        def panes(screen: DashboardScreen = dash) -> dict[str, bool]:
            return {name: shown(screen.query_one(f"#{name}")) for name in ("trials", "chart", "agents", "blackboard")}

        async def press(key: str) -> None:
            await pilot.press(key)
            await pilot.pause()

        for width, height in ((80, 24), (160, 48)):
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            assert panes() == {"trials": True, "chart": True, "agents": True, "blackboard": True}
            await press("Z")  # the chart over the whole body
            assert panes() == {"trials": False, "chart": True, "agents": False, "blackboard": False}
            assert chart.region.width == width and chart.region.height >= height - 6
            assert chart.series == chart_series(dash.state) and chart.plot.size.width == width
            await press("Z")  # the table alone, as wide as the screen
            assert panes() == {"trials": True, "chart": False, "agents": False, "blackboard": False}
            assert dash.query_one("#trials").region.width == width
            await press("Z")  # back
            assert panes() == {"trials": True, "chart": True, "agents": True, "blackboard": True}
            if width > 80:
                break  # the toggles one by one: once
            await press("1")
            assert panes() == {"trials": True, "chart": False, "agents": True, "blackboard": True}
            await press("3")
            assert panes() == {"trials": True, "chart": False, "agents": True, "blackboard": False}
            beside = dash.query_one("#trials").region.width
            await press("2")  # no pane left: the table takes the width
            assert panes() == {"trials": True, "chart": False, "agents": False, "blackboard": False}
            assert dash.query_one("#trials").region.width == width > beside
            for key in "123":
                await press(key)
            assert panes() == {"trials": True, "chart": True, "agents": True, "blackboard": True}

        await press("2")
        await press("t")  # another screen and back
        await press("escape")
        assert app.screen is dash
        assert panes() == {"trials": True, "chart": True, "agents": False, "blackboard": True}
        await press("escape")  # the runs list, then the run again: a new dashboard, the same layout
        assert not isinstance(app.screen, DashboardScreen)
        await pilot.press("enter")
        again = await open_dashboard(pilot, app)
        assert again is not dash
        assert panes(again) == {"trials": True, "chart": True, "agents": False, "blackboard": True}
        assert pane_layout(app).zoom == "normal" and not pane_layout(app).agents


# ----------------------------------------------------------------------------- side by side diff


def test_side_rows_from_the_unified_diff_are_those_from_the_opcodes() -> None:
    """The compare screen splits the unified diff it has; the same rows as from the texts' own opcodes."""
    rng = random.Random(3)
    words = ["alpha", "beta = 1", "gamma(x)", "delta", "return x", "", "# note"]
    for _ in range(200):
        a = [rng.choice(words) for _ in range(rng.randint(0, 30))]
        b = list(a)
        for _ in range(rng.randint(0, 6)):
            op = rng.random()
            at = rng.randint(0, len(b))
            if op < 0.4:
                b.insert(at, rng.choice(words) + rng.choice(["", " # new"]))
            elif b and op < 0.7:
                del b[min(at, len(b) - 1)]
            elif b:
                b[min(at, len(b) - 1)] += " edited"
        unified = list(unified_lines(a, b, "l/f", "r/f"))
        assert rows_from_unified(unified) == rows_from_opcodes(a, b, label_a="l/f", label_b="r/f")
        rows = rows_from_opcodes(a, b)
        # every line of each side is there once, in order, under its own number
        for side, text in (("left", a), ("right", b)):
            numbered = [getattr(r, side) for r in rows if getattr(r, side) is not None and getattr(r, side).number]
            assert [s.number for s in numbered] == sorted({s.number for s in numbered})
            assert all(text[s.number - 1] == s.text for s in numbered)


def test_side_rows_align_an_edited_line_with_its_edit() -> None:
    a = ["import os", "x = 1", "print('done')", "z = 3"]
    b = ["import os", "x = 10", "w = 5", "print('done!')", "z = 3"]
    rows = rows_from_opcodes(a, b)
    pairs = [((r.left.kind, r.left.text), (r.right.kind, r.right.text)) for r in rows if r.span is None and r.left
             and r.right]
    assert pairs == [((FILE, "left"), (FILE, "right")), ((CTX, "import os"), (CTX, "import os")),
                     ((DEL, "x = 1"), (ADD, "x = 10")), ((BLANK, ""), (ADD, "w = 5")),
                     ((DEL, "print('done')"), (ADD, "print('done!')")), ((CTX, "z = 3"), (CTX, "z = 3"))]
    assert rows_from_opcodes(a, a) == []
    # in a line facing its edit, the characters that differ stand out (DEFAULT_STYLES' word styles)
    edited = next(r for r in rows if r.left is not None and r.left.text == "print('done')")
    segments = [seg for line in row_lines(edited, 80, 1) for seg in line]
    assert [seg.text for seg in segments if seg.style is not None and seg.style.bold] == ["!"]


@pytest.mark.parametrize("width", [78, 158, 21])
def test_side_by_side_layout_wraps_long_lines_never_cuts(width: int) -> None:
    long = "x = " + "+".join(f"term{i}" for i in range(40))  # 300 cells
    wide = "wide: " + "数据" * 12
    renderable = side_by_side(f"a = 1\n{long}\n{wide}\n", f"a = 2\n{long} + 1\n", "t1/f.py", "t2/f.py")
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    lines = console.export_text().splitlines()
    left, right = column_widths(width)
    assert left + 1 + right == width and (width != 78 or (left, right) == (38, 39))
    assert all(cell_len(line) == width for line in lines)  # every line fills the width: no cell lost or added
    gutter = number_cells(renderable.rows)
    for row in renderable.rows:
        laid = row_lines(row, width, gutter)
        for n, side in enumerate((row.left, row.right)):
            if side is None or side.number is None:
                continue
            pieces = []
            for i, line in enumerate(laid):
                at = next(k for k, seg in enumerate(line) if seg.text == SEPARATOR)
                mine = line[:at] if n == 0 else line[at + 1:]
                mark, text = mine[0].text, "".join(seg.text for seg in mine[1:])  # the gutter, then the text
                assert mark.strip() == (str(side.number) if i == 0 else (WRAP_MARK if text.strip() else ""))
                pieces.append(text.rstrip())
            assert "".join(pieces) == side.text  # wrapped, whole: nothing cut, each continuation marked
    assert any(WRAP_MARK in line for line in lines) and any("数据" in line for line in lines)


def test_side_by_side_never_hides_a_long_label() -> None:
    rows = [SideRow(span=(NOTE, "n" * 100))]
    lines = row_lines(rows[0], 40, 1)
    assert len(lines) == 3 and "".join(seg.text for line in lines for seg in line).rstrip() == "n" * 100


async def compare_screen(pilot, app: RRMAApp, left: str, right: str) -> CompareScreen:  # type: ignore[no-untyped-def]
    dash = await open_dashboard(pilot, app)
    screen = CompareScreen(dash.session, left, right)
    app.push_screen(screen)
    await wait_until(pilot, lambda: screen.comparison is not None)
    await pilot.pause()
    return screen


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_compare_side_by_side_at_80_and_160_columns(tmp_path: Path, size: tuple[int, int]) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "live-run", trials=4, finished=False)
    long = "LEARNING_RATE = " + " * ".join(["0.5"] * 30)
    old = "import math\nLEARNING_RATE = 0.01\nBATCH = 32\n" + "x = 1\n" * 3
    new = ("import math\nLEARNING_RATE = 0.02\nBATCH = 32\nWARMUP = 10\n" + "x = 1\n" * 3 + long + "\n"
           + "evil = '\x1b]2;pwned\x07 \u202eesrever'\n")
    store = RunStore(run_dir)
    events = []
    for tid, text in (("s1", old), ("s2", new)):
        manifest = {"train.py": store.put_blob(text)}
        events += [("trial.proposed", "agent:alice", {"trial_id": tid, "parent": "base-0", "agent": "alice",
                                                      "hypothesis": tid, "proposal_blob": store.put_json_blob({}),
                                                      "manifest_blob": store.put_json_blob(manifest)}),
                   ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": 2.5, "seconds": 1.0})]
    store.append_many(events)
    store.close()
    app = make_app(runs)
    width = size[0]
    async with app.run_test(size=size) as pilot:
        screen = await compare_screen(pilot, app, "s1", "s2")
        view = screen.query_one(DiffView)
        unified = [line.rstrip() for line in screen_lines(app)]
        assert any("+WARMUP = 10" in line for line in unified), "\n".join(unified)
        await pilot.press("B")
        await pilot.pause()
        assert view.side_rows is not None
        lines = screen_lines(app)
        top = view.region.y + 1  # inside the border
        body = [line[view.region.x + 1: view.region.x + 1 + view.scrollable_content_region.width]
                for line in lines[top: top + view.scrollable_content_region.height]]
        left, _ = column_widths(view.scrollable_content_region.width)
        assert width != 80 or left >= 37  # 80 columns less the border and the scroll bar: 37 + 1 + 38
        text = "\n".join(body)
        assert "s1/train.py" in body[0][:left] and "s2/train.py" in body[0][left + 1:]
        row = next(line for line in body if "LEARNING_RATE = 0.01" in line)
        assert row.index("LEARNING_RATE = 0.01") < left < row.index("LEARNING_RATE = 0.02")  # old | new, one row
        warm = next(line for line in body if "WARMUP = 10" in line)
        assert warm[:left].strip() == "" and warm.index("WARMUP") > left  # an added line faces a blank
        await pilot.press("end")
        await pilot.pause()
        lines = screen_lines(app)
        body = [line[view.region.x + 1: view.region.x + 1 + view.scrollable_content_region.width]
                for line in lines[top: top + view.scrollable_content_region.height]]
        text = "\n".join(body)
        right_side = "".join(line[left + 1:].split(" ", 1)[1] if " " in line[left + 1:] else ""
                             for line in body).replace(" ", "")
        assert long.replace(" ", "") in right_side  # wrapped, whole
        assert WRAP_MARK in text
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "]2;pwned" in text
        assert all(len(line) <= width for line in lines)
        # the diff title says how it is shown; B again: unified
        title = str(screen.query_one("#compare-diff-title").render())
        assert "side by side" in title
        await pilot.press("B")
        await pilot.pause()
        assert view.side_rows is None and view.lines == screen.comparison.lines  # type: ignore[union-attr]


def test_the_charts_canvas_decodes_as_rich_decodes_it() -> None:
    """The chart decodes plotext's canvas itself (ansi_text: its paint was the live dashboard's dearest); the
    same Text as Rich's own decoder, colours, theme background and all."""
    from rich.text import Text
    from textual_plotext.plot import Plot

    from tui.widgets.score_chart import ansi_text

    rng = random.Random(1)
    plot = Plot()
    for width, height in ((36, 18), (80, 20)):
        plot.clear_data()
        plot.clear_figure()
        plot.plotsize(width, height)
        xs = list(range(1, 301))
        plot.scatter(xs, [2.4 + rng.random() * 0.05 for _ in xs], marker="dot", color=(10, 200, 200))
        plot.plot([1, 100, 100, 300], [2.45, 2.45, 2.41, 2.41], marker="braille", color="green")
        plot.hline(2.43, (200, 10, 10))
        built = plot.build()
        ours, rich = ansi_text(built), Text.from_ansi(built)
        assert ours.plain == rich.plain and ours.end == rich.end

        console = Console(width=width + 2, file=io.StringIO(), color_system="truecolor", force_terminal=True)
        assert list(console.render(ours)) == list(console.render(rich))
