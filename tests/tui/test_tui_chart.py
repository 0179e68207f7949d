"""The score chart: the best-so-far step series, integer ticks, the log toggle, light and dark themes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from tui_helpers import fixed_clock, wait_until

from rrma.log.state import RunState, TrialRecord
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.widgets.chart_axis import integer_ticks
from tui.widgets.score_chart import ScoreChart, chart_series, theme_palette

Score = float | None


def run_state(scores: list[Score], promoted: set[int], *, baseline: float | None = 2.0,
              baseline_promoted: bool = True) -> RunState:
    """A minimise run: a baseline (promoted unless told otherwise), then agent trials 1..n with
    ``scores`` (None: a crash); the trials numbered in ``promoted`` were promoted."""
    state = RunState(run_id="r", task={"metric": {"name": "loss", "direction": "minimize"}})
    if baseline is not None:
        base = TrialRecord("base-0", None, "baseline", baseline=True, status="ok", score=baseline,
                           promoted=baseline_promoted)
        state.trials["base-0"] = base
        state.order.append("base-0")
        state.baseline_ids = ["base-0"]
        state.baseline_mean, state.sigma = baseline, 0.01
        if baseline_promoted:
            state.best_history.append(("base-0", baseline))
            state.best_id = "base-0"
    for n, score in enumerate(scores, start=1):
        tid = f"t{n:04d}"
        rec = TrialRecord(tid, "base-0", "alice", status="ok" if score is not None else "crash", score=score,
                          promoted=n in promoted)
        state.trials[tid] = rec
        state.order.append(tid)
        if n in promoted and score is not None:
            state.best_history.append((tid, score))
            state.best_id = tid
    return state


STEP_CASES = [
    # no improvement: a flat line at the baseline from the first trial to the last
    ([2.1, 2.2, 2.3], set(), 2.0, [(1, 2.0), (3, 2.0)]),
    # one improvement at trial 2: along at 2.0, down at x=2, along at 1.5 to the last trial
    ([2.1, 1.5, 1.8], {2}, 2.0, [(1, 2.0), (2, 2.0), (2, 1.5), (3, 1.5)]),
    # the first trial improves: the line drops at x=1 (no diagonal from the baseline)
    ([1.5, 1.8], {1}, 2.0, [(1, 2.0), (1, 1.5), (2, 1.5)]),
    # two improvements, the last on the last trial: the line ends with its drop
    ([1.9, 2.5, 1.7], {1, 3}, 2.0, [(1, 2.0), (1, 1.9), (3, 1.9), (3, 1.7)]),
    # a crash still takes an x position (trial 2), and gets no point of its own
    ([2.1, None, 1.5], {3}, 2.0, [(1, 2.0), (3, 2.0), (3, 1.5)]),
    # no baseline: the line starts at the first promotion
    ([2.1, 1.5, 1.8], {2}, None, [(2, 1.5), (3, 1.5)]),
    # a promotion with the same score as the best is not a step
    ([2.0, 1.5], {1, 2}, 2.0, [(1, 2.0), (2, 2.0), (2, 1.5)]),
    # out of order (issue 24): trial 2 finished first and was promoted at 6.87, then trial 1 at 4.48;
    # by trial number the line drops to 4.48 and stays there (it drew 4.48, then 6.87 from x=2 on)
    ([4.48, 6.87, 7.0], {1, 2}, 7.4, [(1, 7.4), (1, 4.48), (3, 4.48)]),
]


@pytest.mark.parametrize(("scores", "promoted", "baseline", "corners"), STEP_CASES)
def test_best_so_far_is_a_step_line(scores: list[Score], promoted: set[int], baseline: float | None,
                                    corners: list[tuple[float, float]]) -> None:
    xs, ys, bx, by = chart_series(run_state(scores, promoted, baseline=baseline))
    assert list(zip(bx, by, strict=True)) == corners
    assert xs == [n for n, s in enumerate(scores, start=1) if s is not None]
    assert ys == [s for s in scores if s is not None]


def test_unpromoted_baseline_starts_the_line_at_the_baseline_mean() -> None:
    state = run_state([2.1, 1.5], {2}, baseline=2.0, baseline_promoted=False)
    state.baseline_mean = 2.05  # the mean of the repeats, not base-0's own score
    _, _, bx, by = chart_series(state)
    assert list(zip(bx, by, strict=True)) == [(1, 2.05), (2, 2.05), (2, 1.5)]


def is_step_line(bx: list[float], by: list[float]) -> bool:
    """Every segment is horizontal or vertical, and x never goes back."""
    return all((x0 == x1 or y0 == y1) and x1 >= x0 for x0, y0, x1, y1 in zip(bx, by, bx[1:], by[1:], strict=False))


def test_long_runs_are_reduced_and_stay_step_shaped() -> None:
    rng = random.Random(1)
    scores: list[Score] = []
    promoted: set[int] = set()
    best = 2.0
    for n in range(1, 20_001):
        score = best - rng.uniform(0, 0.001) if rng.random() < 0.2 else best + rng.uniform(0, 0.5)
        if score < best:
            promoted.add(n)
            best = score
        scores.append(score)
    xs, ys, bx, by = chart_series(run_state(scores, promoted), max_points=400)
    assert len(xs) <= 400 and len(bx) <= 401
    assert is_step_line(bx, by)
    assert (bx[0], by[0]) == (1, 2.0) and (bx[-1], by[-1]) == (20_000, best)  # from the start to the latest best
    assert min(ys) == min(s for s in scores if s is not None)  # the reduction keeps the extremes
    assert max(ys) == max(s for s in scores if s is not None)


TICK_CASES = [
    (1, 40, 5, [1, 10, 20, 30, 40]),  # the usual: multiples of 10, and trial 1 where the axis starts
    (1, 12, 5, [1, 5, 10]),  # step 5: 1 is half a step from 5, so it is kept
    (1, 3, 5, [1, 2, 3]),  # fewer trials than ticks: every trial, never 1.5
    (1, 1, 5, [1]),  # one trial
    (1, 2, 2, [1, 2]),  # the narrowest chart
    (5, 17, 4, [5, 10, 15]),  # a window that starts elsewhere
    (1, 100_000, 6, [1, 20_000, 40_000, 60_000, 80_000, 100_000]),  # a long run: big round steps
    (3, 9, 3, [3, 9]),  # step 5 has one multiple in range (5): the two ends say more
]


@pytest.mark.parametrize(("lo", "hi", "most", "ticks"), TICK_CASES)
def test_integer_ticks(lo: int, hi: int, most: int, ticks: list[int]) -> None:
    got = integer_ticks(lo, hi, most)
    assert got == ticks
    assert all(isinstance(t, int) and lo <= t <= hi for t in got)


# ----------------------------------------------------------------------------- the widget


class ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ScoreChart(id="chart", min_interval=0.05)


def tick_labels(chart: ScoreChart) -> list[str]:
    """The x tick labels: the plot's last line (no x label is drawn under them)."""
    rendered = chart.plot.render()
    return str(rendered).rstrip("\n").splitlines()[-1].split()


@pytest.mark.asyncio
async def test_chart_has_integer_ticks_and_a_legend_off_the_plot() -> None:
    app = ChartApp()
    async with app.run_test(size=(60, 24)) as pilot:
        chart = app.query_one(ScoreChart)
        chart.update_from(run_state([2.1 - 0.01 * n for n in range(37)], {5, 20}), now=True)
        await pilot.pause()
        labels = tick_labels(chart)
        assert labels and all(label.isdigit() for label in labels), labels
        assert int(labels[-1]) <= 37
        assert "loss by trial (minimize)" in chart.title_text
        legend = str(chart.query_one(".score-chart--legend").render())
        assert "trial" in legend and "best so far" in legend and "baseline 2" in legend
        assert "best so far" not in str(chart.plot.render())  # no legend drawn over the data


@pytest.mark.asyncio
async def test_log_toggle_and_its_fallback_for_non_positive_scores() -> None:
    app = ChartApp()
    async with app.run_test(size=(60, 24)) as pilot:
        chart = app.query_one(ScoreChart)
        chart.update_from(run_state([20.0, 3.0, 0.5], {2, 3}, baseline=50.0), now=True)
        await pilot.pause()
        assert not chart.log_active and "log" not in chart.title_text
        assert chart.toggle_log() is True
        await pilot.pause()
        assert chart.log_active and "log scale" in chart.title_text
        chart.update_from(run_state([20.0, -3.0, 0.0], {2}, baseline=50.0), now=True)  # a score <= 0
        await pilot.pause()
        assert chart.log_scale and not chart.log_active
        assert "linear: log needs scores > 0" in chart.title_text
        chart.plot.render()  # draws, linear
        assert chart.toggle_log() is False
        await pilot.pause()
        assert not chart.log_active and "log" not in chart.title_text


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG contrast ratio of two sRGB colours (1 to 21)."""
    def luminance(rgb: tuple[int, int, int]) -> float:
        def channel(c: int) -> float:
            v = c / 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        r, g, b = (channel(c) for c in rgb)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.asyncio
@pytest.mark.parametrize("theme", ["textual-light", "textual-dark", "solarized-light", "nord"])
async def test_chart_colours_read_on_the_theme(theme: str) -> None:
    app = ChartApp()
    async with app.run_test(size=(60, 24)) as pilot:
        app.theme = theme
        chart = app.query_one(ScoreChart)
        chart.update_from(run_state([2.1, 1.5, 1.8], {2}), now=True)
        await pilot.pause()
        canvas = Color.parse(app.theme_variables["surface"]).rgb  # the plot's canvas (textual-plotext "auto")
        palette = theme_palette(app.theme_variables)
        for role, colour in palette.items():
            assert isinstance(colour, tuple), role
            assert contrast(colour, canvas) >= 3.0, (theme, role, colour, canvas)
        chart.plot.render()


@pytest.mark.asyncio
async def test_theme_change_redraws_the_chart_in_the_new_colours() -> None:
    app = ChartApp()
    async with app.run_test(size=(60, 24)) as pilot:
        app.theme = "textual-dark"
        chart = app.query_one(ScoreChart)
        chart.update_from(run_state([2.1, 1.5, 1.8], {2}), now=True)
        await pilot.pause()
        dark_legend = chart.query_one(".score-chart--legend").render()
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        light_legend = chart.query_one(".score-chart--legend").render()
        assert str(dark_legend) == str(light_legend)  # the same words ...
        assert dark_legend.spans != light_legend.spans  # type: ignore[union-attr]  # ... in the light theme's colours


def test_palette_falls_back_to_colour_names_for_ansi_values() -> None:
    palette = theme_palette({"text-primary": "ansi_default", "text-success": "not a colour", "text-error": "#7A273C"})
    assert palette == {"trial": "cyan", "best": "green", "baseline": (0x7A, 0x27, 0x3C)}


@pytest.mark.asyncio
async def test_dashboard_chart_renders_under_a_light_theme(runs_dir: Path) -> None:
    app = RRMAApp(runs_dir, runs_dir / "demo-run", reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "textual-light"
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        await pilot.pause()
        chart = app.screen.query_one("#chart", ScoreChart)
        await wait_until(pilot, lambda: "val_loss by trial" in chart.title_text)
        rendered = str(chart.plot.render())
        assert "•" in rendered  # the trials' points
        assert all(label.isdigit() for label in tick_labels(chart))
        assert app.return_code is None
