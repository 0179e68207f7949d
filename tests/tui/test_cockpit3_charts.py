"""Charts a reader can trust (issue 35, items 2, 3 and the chart parts of 11), read off the rendered plots.

Before: the dashboard's chart labelled its rows with plotext's own values snapped to them (``6.84`` on a row
that stands for 6.555, the baseline 7.4196 on the row labelled 10.2, uneven ticks, ``-0.0``); the solved chart
of a proof run had ``1.00 0.67 0.00 -0.33 -1.00`` and ``3.5`` for a count, and ignored the table's filter (title
``(8 of 8)`` while the bar said ``6 of 24``); a 4e9 score got a 12-cell label (``4290000000.0``); at 200 columns
the chart stayed 44 columns wide beside a mostly empty table.

Every check here reads the plot as drawn: the canvas rows, the label on each, and plotext's own y limits (its
monitor), so a row's value comes from the mapping plotext drew with, not from the chart's code.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from make_run import fake_clock
from scored_run import write_scored_run
from test_analysis_view import analysis_run, app_for, open_analysis
from test_theorems_view import open_theorems, write_theorem_run
from test_tui_screens import open_dashboard
from textual_plotext import PlotextPlot
from tui_helpers import fixed_clock, settle, wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.widgets.line_table import LineTable
from tui.widgets.metric_chart import MetricChart
from tui.widgets.score_chart import ScoreChart
from tui.widgets.solved_chart import SolvedChart

SIZES = [(80, 24), (100, 30), (200, 50)]
AXIS = "┤├│┼"
# a braille cell's dots (bit -> its sub-row, 0 at the top of the cell): dots 1 2 3 7 left, 4 5 6 8 right
BRAILLE_SUBROW = {0: 0, 1: 1, 2: 2, 6: 3, 3: 0, 4: 1, 5: 2, 7: 3}


@dataclass
class Drawn:
    """A plot as rendered: its canvas lines (top first), the label on each row (0 at the bottom), the y limits
    plotext drew with (log10 of the values on a log axis)."""

    canvas: list[str]
    labels: dict[int, str]
    axis_col: int
    lo: float
    hi: float
    log: bool

    @property
    def rows(self) -> int:
        return len(self.canvas)

    @property
    def row_span(self) -> float:
        return (self.hi - self.lo) / (self.rows - 1)

    def axis_value(self, row: float) -> float:
        """What row ``row`` (a fraction: between rows) stands for, in axis units."""
        return self.lo + row * self.row_span

    def data(self, row: int) -> str:
        return self.canvas[self.rows - 1 - row][self.axis_col + 1:]


def drawn(plot: PlotextPlot, *, log: bool = False) -> Drawn:
    lines = str(plot.render()).rstrip("\n").splitlines()
    canvas = lines[1:-2]  # the top frame, then the canvas, the x axis and its labels
    lower, upper = plot.plt.monitor.ylim[0]
    labels: dict[int, str] = {}
    axis_col = -1
    for i, line in enumerate(canvas):
        match = re.match(rf"^([^{AXIS}]*)[{AXIS}]", line)
        assert match, line
        axis_col = len(match.group(1))
        if match.group(1).strip():
            labels[len(canvas) - 1 - i] = match.group(1).strip()
    return Drawn(canvas, labels, axis_col, float(lower), float(upper), log)


def is_round(value: float) -> bool:
    """A multiple of 1, 2, 2.5 or 5 x 10^k with few digits (what a reader can take in)."""
    digits = "".join(map(str, Decimal(repr(value)).normalize().as_tuple().digits)).rstrip("0")
    return len(digits) <= 4


def check_labels(plot: Drawn, *, whole: bool = False) -> None:
    """Each label is a round value, drawn on the row that stands for exactly that value, and reads short."""
    assert len(plot.labels) >= 2, plot.canvas
    for row, label in plot.labels.items():
        assert not re.match(r"^-0(\.0*)?$", label), label
        value = float(label)
        axis = math.log10(value) if plot.log else value
        # the brief's rule (within half a row) and the stronger one kept here: exactly the row's value
        assert abs(plot.axis_value(row) - axis) <= plot.row_span / 2, (label, row, plot.axis_value(row))
        assert abs(plot.axis_value(row) - axis) <= plot.row_span * 1e-6, (label, row, plot.axis_value(row))
        assert is_round(value), label
        assert len(label.lstrip("-")) <= 7, label
        if whole:
            assert value == int(value) and value >= 0, label
    steps = sorted(plot.labels)
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    assert len(gaps) == 1, plot.labels  # evenly spaced


def hline_row(plot: Drawn) -> int:
    """The row the baseline's horizontal line is on (the row that is mostly ``─``)."""
    rows = [r for r in range(plot.rows) if plot.data(r).count("─") > len(plot.data(r)) // 2]
    assert len(rows) == 1, plot.canvas
    return rows[0]


def braille_extreme(plot: Drawn, lowest: bool) -> float:
    """The lowest (or highest) braille dot drawn, as a row position (0 = the bottom row's centre): a braille cell
    is four dots tall, its top dot 3/8 of a row above the cell's centre."""
    positions = []
    for r in range(plot.rows):
        for ch in plot.data(r):
            code = ord(ch) - 0x2800
            if 0 < code < 256:
                positions += [r + (1.5 - BRAILLE_SUBROW[bit]) / 4 for bit in range(8) if code >> bit & 1]
    assert positions, plot.canvas
    return min(positions) if lowest else max(positions)


def loss_scores() -> list[float]:
    """30 losses from around the baseline 7.4196 down to a best of 4.4803 (the issue's run)."""
    rng = random.Random(35)
    scores = [round(7.4 - 0.09 * i + rng.uniform(-0.6, 0.6), 4) for i in range(30)]
    scores[24] = 4.4803
    return [max(s, 4.52) if i != 24 else s for i, s in enumerate(scores)]


def dash_app(runs: Path, run_dir: Path) -> RRMAApp:
    return RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_score_chart_labels_sit_on_their_rows_and_the_baseline_and_best_on_theirs(
        tmp_path: Path, size: tuple[int, int]) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "losses", loss_scores(), baseline=(7.4196, 7.4201, 7.4191), direction="minimize")
    app = dash_app(runs, runs / "losses")
    async with app.run_test(size=size) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        await wait_until(pilot, lambda: bool(chart.series[0]))
        await pilot.pause(0.1)
        plot = drawn(chart.plot)
        check_labels(plot)
        baseline = dash.state.baseline_mean
        assert baseline is not None
        # the baseline's line is on the row that stands for it (within half a row)
        assert abs(plot.axis_value(hline_row(plot)) - baseline) <= plot.row_span / 2
        # the best so far (the line's lowest dots: a minimise run) is drawn where its value is
        best = chart.series[3][-1]
        assert best == pytest.approx(4.4803)
        assert abs(plot.axis_value(braille_extreme(plot, lowest=True)) - best) <= plot.row_span / 2
        await pilot.press("L")  # log scale: the same, in decades
        await wait_until(pilot, lambda: chart.log_active)
        await pilot.pause(0.1)
        plot = drawn(chart.plot, log=True)
        check_labels(plot)
        assert abs(plot.axis_value(hline_row(plot)) - math.log10(baseline)) <= plot.row_span / 2
        assert abs(plot.axis_value(braille_extreme(plot, lowest=True)) - math.log10(best)) <= plot.row_span / 2
        assert drawn(chart.plot, log=True).canvas == plot.canvas  # drawn again (a repaint): the same picture


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_a_4e9_score_gets_short_labels(tmp_path: Path, size: tuple[int, int]) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "big", [4.2e9 + 1.1e7 * i for i in range(10)], baseline=(4.1e9, 4.11e9, 4.09e9))
    app = dash_app(runs, runs / "big")
    async with app.run_test(size=size) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        await wait_until(pilot, lambda: bool(chart.series[0]))
        await pilot.pause(0.1)
        plot = drawn(chart.plot)
        check_labels(plot)
        assert plot.axis_col <= 6, plot.canvas  # `4.25e9┤`, not `4290000000.0┤`
        assert all("e9" in label for label in plot.labels.values()), plot.labels


def write_proof_bench(runs: Path) -> Path:
    """A proof run of 24 trials over 8 theorems by three agents (8 trials each): alice proves 3 theorems, bob 5
    (all 8 are solved), carol none."""
    run_dir = runs / "bench"
    store = RunStore(run_dir, create=True)
    task = {"name": "bench-coq", "oracle": {"kind": "coq", "params": {}},
            "metric": {"name": "solved", "direction": "maximize", "source": "oracle", "target": None},
            "budget": {"max_trials": 24}, "loop": {"policy": "per-theorem"},
            "agents": [{"name": name, "backend": "x"} for name in ("alice", "bob", "carol")]}
    alice_solves, bob_solves = {0, 2, 5}, {1, 3, 4, 6, 7}
    with fake_clock():
        store.append("run.started", "harness", {"run_id": "bench", "task_name": "bench-coq", "task": task})
        for n in range(24):
            agent = ("alice", "bob", "carol")[n % 3]
            theorem = f"thm_{n // 3}"
            k = n // 3
            ok = (agent == "alice" and k in alice_solves) or (agent == "bob" and k in bob_solves)
            tid = f"t{n + 1:04d}"
            proposal = {"hypothesis": f"a proof of {theorem}", "proof": "auto.", "theorem": theorem, "meta": {}}
            store.append_many([
                ("trial.proposed", f"agent:{agent}", {"trial_id": tid, "parent": None, "agent": agent,
                                                      "hypothesis": f"a proof of {theorem}", "theorem": theorem,
                                                      "proposal_blob": store.put_json_blob(proposal)}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {"trial_id": tid, "status": "ok" if ok else "rejected",
                                              "score": 1.0 if ok else None, "seconds": 0.3}),
            ])
        store.append("run.finished", "harness", {"reason": "completed", "summary": {}})
    store.close()
    return run_dir


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_solved_chart_has_whole_ticks_on_their_rows(tmp_path: Path, size: tuple[int, int]) -> None:
    runs = tmp_path / "runs"
    write_proof_bench(runs)
    app = dash_app(runs, runs / "bench")
    async with app.run_test(size=size) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        await wait_until(pilot, lambda: "theorems solved" in chart.title_text)
        await pilot.pause(0.1)
        assert chart.title_text.startswith("theorems solved by trial (8 of 8)"), chart.title_text
        plot = drawn(chart.plot)
        check_labels(plot, whole=True)
        # the line ends at 8 solved: its highest dots are where 8 is
        assert abs(plot.axis_value(braille_extreme(plot, lowest=False)) - 8) <= plot.row_span / 2


@pytest.mark.asyncio
async def test_solved_chart_follows_the_tables_filter(tmp_path: Path) -> None:
    """The issue's `(8 of 8)` while the bar said `6 of 24`: the chart counts what the table shows."""
    runs = tmp_path / "runs"
    write_proof_bench(runs)
    app = dash_app(runs, runs / "bench")
    async with app.run_test(size=(100, 30)) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        table = dash.query_one("#trials", LineTable)
        await wait_until(pilot, lambda: "theorems solved" in chart.title_text)
        await pilot.press("a")  # the agent filter: alice's 8 trials of 24
        await wait_until(pilot, lambda: len(table.rows) == 8)
        await pilot.pause(0.1)
        assert dash.agent_filter == "alice"
        assert chart.title_text == "solved 3 of 8 by trial · filtered: 8 of 24", chart.title_text
        _, _, bx, by = chart.series
        assert by[-1] == 3 and bx[0] == 1 and bx[-1] == 22  # alice's trials: 1, 4, ..., 22
        plot = drawn(chart.plot)
        assert abs(plot.axis_value(braille_extreme(plot, lowest=False)) - 3) <= plot.row_span / 2
        await pilot.press("a")  # bob
        await wait_until(pilot, lambda: dash.agent_filter == "bob" and "solved 5 of 8" in chart.title_text)
        await pilot.press("a")  # carol: attempts, nothing solved
        await wait_until(pilot, lambda: dash.agent_filter == "carol" and "solved 0 of 8" in chart.title_text)
        await pilot.pause(0.1)
        check_labels(drawn(chart.plot), whole=True)
        await pilot.press("c")  # filters cleared: every trial again
        await wait_until(pilot, lambda: chart.title_text.startswith("theorems solved by trial (8 of 8)"))


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_the_theorems_view_chart_counts_in_whole_ticks_on_their_rows(tmp_path: Path,
                                                                          size: tuple[int, int]) -> None:
    runs = tmp_path / "runs"
    write_theorem_run(runs)
    app = dash_app(runs, runs / "theorems")
    async with app.run_test(size=size) as pilot:
        screen = await open_theorems(pilot, app)
        chart = screen.query_one("#th-chart", SolvedChart)
        if not chart.display:  # under 76 columns the view leaves the chart out
            return
        await pilot.pause(0.1)
        check_labels(drawn(chart.query_one(PlotextPlot)), whole=True)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_the_analysis_chart_labels_sit_on_their_rows(tmp_path: Path, size: tuple[int, int]) -> None:
    runs = tmp_path / "runs"
    run_dir = analysis_run(runs)
    async with app_for(runs, run_dir).run_test(size=size) as pilot:
        screen = await open_analysis(pilot)
        chart = screen.query_one(MetricChart)
        await pilot.pause(0.1)
        check_labels(drawn(chart.plot))
        await pilot.press("L")  # log y
        await pilot.pause(0.2)
        if chart.log_active:
            check_labels(drawn(chart.plot, log=True))


@pytest.mark.asyncio
async def test_the_chart_takes_spare_width_past_140_columns(tmp_path: Path) -> None:
    """At 200 columns the chart stayed 44 wide beside a table that had every column whole at 96."""
    runs = tmp_path / "runs"
    write_scored_run(runs, "losses", loss_scores(), baseline=(7.4196, 7.4201, 7.4191), direction="minimize")
    app = dash_app(runs, runs / "losses")
    async with app.run_test(size=(200, 50)) as pilot:
        dash = await open_dashboard(pilot, app)
        chart = dash.query_one("#chart", ScoreChart)
        table = dash.query_one("#trials", LineTable)
        widths: dict[int, tuple[int, int]] = {}
        for width in (200, 170, 140, 120, 200):
            await pilot.resize_terminal(width, 50)
            await wait_until(pilot, lambda width=width: dash.size.width == width)  # type: ignore[misc]
            await pilot.pause(0.1)
            widths[width] = (chart.size.width, table.size.width)
        assert widths[200][0] >= 80 and widths[200][1] >= 100, widths  # the chart about twice as wide
        assert widths[170][0] > widths[140][0], widths  # it grows with the terminal past 140 columns
        assert widths[140][0] == widths[120][0] == 44, widths  # up to 140 as before
        assert widths[140][1] >= 90, widths  # the table keeps its columns whole
        await pilot.press("Z")  # the chart zoomed over the body still takes it all
        await pilot.pause(0.1)
        assert chart.size.width == 200
        plot = drawn(chart.plot)
        check_labels(plot)


def test_snapshot_proof_dashboard_filtered_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A proof run's dashboard at 80x24, filtered to alice's trials: the solved chart's whole ticks and its title."""
    runs = tmp_path / "runs"
    write_proof_bench(runs)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_dashboard(pilot, pilot.app)
        await pilot.press("a")
        await wait_until(pilot, lambda: pilot.app.screen.agent_filter == "alice")
        await settle(pilot)

    assert snap_compare(dash_app(runs, runs / "bench"), terminal_size=(80, 24), run_before=run_before)
