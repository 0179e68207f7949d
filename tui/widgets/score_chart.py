"""The score chart: every scored trial as a point, the best-so-far as a step line, the baseline.

Plotext rebuilds the whole figure on every render, so the chart is redrawn at most once per
``min_interval`` seconds however fast the run appends (a dirty flag and a timer coalesce
updates), and more points than the plot has room for are reduced to each x range's minimum and
maximum, which keeps every outlier visible.

The title and the legend are lines of their own above and below the plot, so no label ever
covers data. Colours come from the Textual theme's text colours (``$text-primary``,
``$text-success``, ``$text-error``), which the theme makes readable on its own background, so the
chart reads in light themes as well as dark ones; the plot's canvas follows the theme too
(textual-plotext's ``auto`` theme).
"""

from __future__ import annotations

import bisect
import math
import re
import time
from collections.abc import Collection

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.color import Color, ColorParseError
from textual.containers import Vertical
from textual.theme import Theme
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

from rrma.log.state import RunState
from tui.widgets.chart_axis import Scale, canvas_rows, integer_ticks, value_scale
from tui.widgets.trial_text import is_proof_run

RGB = tuple[int, int, int]
PlotColor = str | RGB  # what plotext accepts: a colour name or an RGB triple

# role -> (theme variable, plotext colour name used when the theme has no RGB value, e.g. ANSI themes)
PALETTE_SOURCES: dict[str, tuple[str, str]] = {
    "trial": ("text-primary", "cyan"),
    "best": ("text-success", "green"),
    "baseline": ("text-error", "red"),
}


Series = tuple[list[float], list[float], list[float], list[float]]  # (xs, ys) of the points, (bx, by) of the line


def chart_series(state: RunState, max_points: int = 400, only: Collection[str] | None = None) -> Series:
    """(xs, ys) of scored agent trials and (bx, by) of the best-so-far step line, x = trial number.

    ``only``: the trials to plot (the dashboard table's filter); x stays the trial's number in the run, and the
    line is the best so far over those trials alone (their own ok scores, from the first of them scored).

    (bx, by) are the corners of a step function: each improvement at trial x adds (x, old best)
    and (x, new best), so joining the corners with straight lines draws only horizontal and
    vertical segments, and it only ever moves towards better (a promotion that a trial proposed earlier
    but finished later beat draws no step). The line starts at trial 1 (at the promoted baseline, else the baseline
    mean) or, in a run without a baseline, at the first promotion, and ends at the last trial.
    One pass over the trials; more than ``max_points`` points are reduced (scatter: each x
    range's min and max; steps: the last improvement of each x range, so the line stays a step).
    """
    if only is not None:
        return _filtered_series(state, max_points, only)
    xs: list[float] = []
    ys: list[float] = []
    promoted = {tid for tid, _ in state.best_history}
    best: float | None = None
    for base_id in state.baseline_ids:
        rec = state.trials.get(base_id)
        if rec is not None and rec.promoted and rec.score is not None:
            best = rec.score
    if best is None and state.baseline_mean is not None:
        best = state.baseline_mean
    steps: list[tuple[float, float]] = []  # (x, the best from trial x on); the first is where the line starts
    last = 0
    for n, rec in enumerate(state.agent_trials(), start=1):
        last = n
        if n == 1 and best is not None:
            steps.append((1, best))
        if rec.score is not None and rec.status == "ok":
            xs.append(n)
            ys.append(rec.score)
        # promotions come in finishing order, x is proposal order: a trial promoted before a better one
        # proposed earlier finished is no step up (the line only ever improves: monotone in the direction)
        if rec.trial_id in promoted and rec.score is not None and (best is None or state.better(rec.score, best) > 0):
            steps.append((n, rec.score))
            best = rec.score
    return _finish(xs, ys, steps, last, max_points)


def _finish(xs: list[float], ys: list[float], steps: list[tuple[float, float]], last: int,
            max_points: int) -> Series:
    """The points and the best-so-far line's corners, each thinned to what the chart can show."""
    if len(xs) > max_points:
        xs, ys = _reduce(xs, ys, max_points // 2)
    if len(steps) > max_points // 2:
        steps = _reduce_steps(steps, max(2, max_points // 2 - 1))
    bx, by = step_corners(steps, last)
    return xs, ys, bx, by


def _filtered_series(state: RunState, max_points: int, only: Collection[str]) -> Series:
    keep = only if isinstance(only, (set, frozenset, dict)) else set(only)
    xs: list[float] = []
    ys: list[float] = []
    steps: list[tuple[float, float]] = []
    best: float | None = None
    last = 0
    for n, rec in enumerate(state.agent_trials(), start=1):
        if rec.trial_id not in keep:
            continue
        last = n
        if rec.score is not None and rec.status == "ok":
            xs.append(n)
            ys.append(rec.score)
            if best is None or state.better(rec.score, best) > 0:
                steps.append((n, rec.score))
                best = rec.score
    return _finish(xs, ys, steps, last, max_points)


class LiveSeries:
    """:func:`chart_series` (no filter) kept current from the trials each update touched.

    A live redraw costs the trials that changed, not the run: new entries of ``state.order`` are
    numbered, the touched trials' points are put in, taken out or moved (kept sorted by x), and
    the step line is rebuilt from the promotions (a few). ``touched=None`` (or another state)
    starts again from every trial. Gives what :func:`chart_series` gives (tests/tui/test_tui_layout.py).
    """

    def __init__(self, max_points: int = 400) -> None:
        self.max_points = max_points
        self._reset(None)

    def _reset(self, state: RunState | None) -> None:
        self._state = state
        self._seen = 0  # entries of state.order numbered
        self._n = 0  # agent trials numbered
        self._x: dict[str, int] = {}  # agent trial -> its number (x)
        self._score: dict[str, float] = {}  # trial -> its plotted score
        self._xs: list[int] = []  # the points, sorted by x
        self._ys: list[float] = []

    def series(self, state: RunState, touched: Collection[str] | None = None) -> Series:
        if state is not self._state or touched is None or len(state.order) < self._seen:
            self._reset(state)
            touched = ()
        order, trials = state.order, state.trials
        first_new = self._seen
        for tid in order[first_new:]:
            rec = trials[tid]
            if not rec.baseline and rec.confirms is None:
                self._n += 1
                self._x[tid] = self._n
        self._seen = len(order)
        for tid in (*order[first_new:], *touched):
            self._place(state, tid)
        xs: list[float] = list(self._xs)
        ys = list(self._ys)
        if len(xs) > self.max_points:
            xs, ys = _reduce(xs, ys, self.max_points // 2)
        best: float | None = None
        for base_id in state.baseline_ids:
            base = trials.get(base_id)
            if base is not None and base.promoted and base.score is not None:
                best = base.score
        if best is None and state.baseline_mean is not None:
            best = state.baseline_mean
        steps: list[tuple[float, float]] = [(1, best)] if best is not None and self._n else []
        for x, tid in sorted({(self._x[tid], tid) for tid, _ in state.best_history if tid in self._x}):
            score = trials[tid].score
            if score is not None and (best is None or state.better(score, best) > 0):
                steps.append((x, score))
                best = score
        if len(steps) > self.max_points // 2:
            steps = _reduce_steps(steps, max(2, self.max_points // 2 - 1))
        bx, by = step_corners(steps, self._n)
        return xs, ys, bx, by

    def _place(self, state: RunState, tid: str) -> None:
        x = self._x.get(tid)
        if x is None:
            return
        rec = state.trials[tid]
        score = rec.score if rec.status == "ok" else None
        old = self._score.get(tid)
        if score == old and (score is None) == (old is None):
            return
        if old is not None:  # taken out (or moved)
            i = bisect.bisect_left(self._xs, x)
            del self._xs[i], self._ys[i]
            del self._score[tid]
        if score is not None:
            i = bisect.bisect_left(self._xs, x)
            self._xs.insert(i, x)
            self._ys.insert(i, score)
            self._score[tid] = score


def solved_series(state: RunState, only: Collection[str] | None = None) -> tuple[list[float], list[float], int]:
    """A proof run's chart: the corners of the step line of theorems solved so far by trial number (x), from
    0 at the first trial; and how many theorems were attempted. Its scores (1 per proof) say nothing a line at
    1.0 could show. ``only``: the trials counted (the dashboard table's filter); x stays the trial's number."""
    keep = None if only is None else only if isinstance(only, (set, frozenset, dict)) else set(only)
    solved: set[str] = set()
    attempted: set[str] = set()
    steps: list[tuple[float, float]] = []
    last = 0
    for n, rec in enumerate(state.agent_trials(), start=1):
        if keep is not None and rec.trial_id not in keep:
            continue
        if not steps:
            steps.append((n, 0))
        last = n
        if rec.theorem:
            attempted.add(rec.theorem)
            if rec.status == "ok" and rec.theorem not in solved:
                solved.add(rec.theorem)
                steps.append((n, len(solved)))
    if len(steps) > 400:
        steps = _reduce_steps(steps, 199)
    bx, by = step_corners(steps, last)
    return bx, by, len(attempted)


def _log10s(values: list[float]) -> list[float]:
    return [math.log10(v) for v in values]


def time_unit(span: float) -> tuple[float, str]:
    """(seconds per unit, unit) of a wall-time axis ``span`` seconds long: s below two minutes, m below two
    hours, else h (at least two whole units where it can)."""
    if span >= 2 * 3600:
        return 3600.0, "h"
    if span >= 120:
        return 60.0, "m"
    return 1.0, "s"


def step_corners(steps: list[tuple[float, float]], last: float) -> tuple[list[float], list[float]]:
    """Corners of the step line through ``steps`` (x, level), carried on to x = ``last``."""
    bx: list[float] = []
    by: list[float] = []

    def add(x: float, y: float) -> None:
        if not bx or bx[-1] != x or by[-1] != y:
            bx.append(x)
            by.append(y)

    for i, (x, level) in enumerate(steps):
        if i:
            add(x, steps[i - 1][1])  # along at the old level, then up or down at x
        add(x, level)
    if steps:
        add(max(last, steps[-1][0]), steps[-1][1])
    return bx, by


def _reduce(xs: list[float], ys: list[float], buckets: int) -> tuple[list[float], list[float]]:
    """Keep the minimum and maximum of each of ``buckets`` equal x ranges (``xs`` sorted; the first of equal
    extremes). Vectorised: a live redraw of a run of 10,000 scored trials reduces them in about a millisecond."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    lo, hi = xs[0], xs[-1]
    span = (hi - lo) or 1.0
    b = ((x - lo) / span * (buckets - 1)).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])  # xs sorted: each bucket is one run of indices
    seg = np.cumsum(np.r_[False, b[1:] != b[:-1]])  # each point's bucket, counted from 0

    def firsts(hits: np.ndarray) -> np.ndarray:  # the first index of each bucket among ``hits`` (sorted indices)
        return hits[np.r_[True, seg[hits][1:] != seg[hits][:-1]]]

    keep = np.union1d(firsts(np.flatnonzero(y == np.minimum.reduceat(y, starts)[seg])),
                      firsts(np.flatnonzero(y == np.maximum.reduceat(y, starts)[seg])))
    return [xs[i] for i in keep.tolist()], [ys[i] for i in keep.tolist()]


def _reduce_steps(steps: list[tuple[float, float]], buckets: int) -> list[tuple[float, float]]:
    """Keep the start and the last step of each of ``buckets`` equal x ranges.

    A step line only moves one way between kept steps within a range it collapses to a single
    vertical move, which is what a plot column shows of it anyway.
    """
    lo, hi = steps[0][0], steps[-1][0]
    span = (hi - lo) or 1.0
    last_in: dict[int, int] = {}
    for i, (x, _) in enumerate(steps[1:], start=1):
        last_in[int((x - lo) / span * (buckets - 1))] = i
    return [steps[0], *(steps[i] for i in sorted(last_in.values()))]


def theme_palette(variables: dict[str, str]) -> dict[str, PlotColor]:
    """Role (trial, best, baseline) -> colour, from a Textual app's ``theme_variables``.

    RGB from the theme's text colours where it has them; the plotext colour name (drawn with the
    terminal's own palette) for ANSI themes and values that are not a colour.
    """
    palette: dict[str, PlotColor] = {}
    for role, (variable, fallback) in PALETTE_SOURCES.items():
        try:
            color = Color.parse(variables.get(variable, ""))
        except ColorParseError:
            palette[role] = fallback
            continue
        palette[role] = fallback if color.ansi is not None or color.a < 1 else color.rgb
    return palette


def rich_color(color: PlotColor) -> str:
    """A plotext colour as a Rich colour (for the legend)."""
    if isinstance(color, tuple):
        r, g, b = color
        return f"#{r:02x}{g:02x}{b:02x}"
    return color


_SGR_RUN = re.compile(r"((?:\x1b\[[0-9;]*m)*)([^\x1b]*)")
_SGR_STYLES: dict[str, Style] = {}  # the escape codes before a run of text -> its style (a few distinct ones)


def ansi_text(built: str) -> Text:
    """Plotext's canvas (every run of text preceded by its whole SGR codes, then a reset) as a Rich Text: what
    ``Text.from_ansi`` gives, about ten times faster (it decodes every code afresh; here each distinct code
    string is decoded once). The chart's paint is the dashboard's most expensive, so this keeps a live redraw
    cheap (tests/tui/test_tui_layout.py checks the two agree)."""
    text = Text()
    for n, line in enumerate(built.split("\n")):
        if n:
            text.append("\n")
        for codes, run in _SGR_RUN.findall(line):
            if not run:
                continue
            style = _SGR_STYLES.get(codes)
            if style is None:
                decoded = Text.from_ansi(codes + "x")
                style = _SGR_STYLES[codes] = decoded.spans[0].style if decoded.spans else Style()  # type: ignore[assignment]
            text.append(run, style or None)
    return text


class FastPlot(PlotextPlot):
    """textual-plotext's widget, its canvas decoded by :func:`ansi_text` (PlotextPlot.render, otherwise as is)."""

    def render(self) -> RenderResult:
        self._plot.plotsize(self.size.width, self.size.height)
        self._plot._set_size(self.size.width, self.size.height)  # as PlotextPlot.render does (its issue #5)
        self._plot.theme(self._get_plotext_theme_name(self.app.theme))
        return ansi_text(self._plot.build())


class ScoreChart(Vertical):
    """Plot of a RunState, with its title above and its legend below; call :meth:`update_from` as often as you like."""

    DEFAULT_CSS = """
    ScoreChart { height: 1fr; background: $surface; }
    ScoreChart > .score-chart--title { height: 1; color: $text; text-style: bold; content-align: center middle; }
    ScoreChart > .score-chart--legend { height: 1; color: $text-muted; content-align: center middle; }
    ScoreChart > PlotextPlot { height: 1fr; }
    """

    def __init__(self, *, min_interval: float = 0.0, log_scale: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.min_interval = min_interval  # 0: drawn on every update (the dashboard's redraws are coalesced already)
        self.log_scale = log_scale  # what the user asked for (see log_active for what is drawn)
        self.log_active = False  # the y axis is drawn in log scale (False when a score is <= 0)
        self._state: RunState | None = None
        self._dirty = False
        self._drawn_at = 0.0
        self._live = LiveSeries()
        self._series: Series = ([], [], [], [])  # what the next draw plots (chart_series for the trials shown)
        self._only: Collection[str] | None = None  # the trials plotted (the table's filter), None: every trial
        self._of = 0  # the filter's "of M"
        self.series: Series = ([], [], [], [])  # what is plotted now: (xs, ys) points, (bx, by) the step line
        self.y_range: tuple[float, float] | None = None  # the lowest and highest value plotted now
        self.scale: Scale | None = None  # the y axis drawn now (chart_axis): it holds y_range, its ticks on rows
        self._picture: tuple[object, ...] | None = None  # what the canvas shows (the same again: not built again)

    def compose(self) -> ComposeResult:
        yield Static("", classes="score-chart--title")
        yield FastPlot()
        yield Static("", classes="score-chart--legend")

    @property
    def plot(self) -> PlotextPlot:
        return self.query_one(PlotextPlot)

    @property
    def title_text(self) -> str:
        """The title as plain text (what it says about the scale included)."""
        content = self.query_one(".score-chart--title", Static).content
        return content.plain if isinstance(content, Text) else str(content)

    def on_mount(self) -> None:
        if self.min_interval > 0:
            self.set_interval(self.min_interval / 2, self._maybe_draw)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def on_resize(self) -> None:
        """Shown again (an update came while hidden: zoomed out, a narrow screen) or resized (the x ticks fit
        the width): drawn now."""
        if self._state is not None:
            self._draw()

    def _theme_changed(self, theme: Theme) -> None:
        if self._state is not None:
            self._draw()

    def update_from(self, state: RunState, *, now: bool = False, touched: Collection[str] | None = None,
                    only: Collection[str] | None = None, of: int = 0) -> None:
        """Plot ``state``: ``touched`` names the trials changed since the last update (None: any may have; the
        series is then built again from every trial); ``only`` the trials to plot (the table's filter), ``of``
        how many the filter chose from (the title says "filtered: N of M")."""
        if only is not None:
            self._series = chart_series(state, only=only)
        elif state is self._state and self._only is None and touched is not None:
            self._series = self._live.series(state, touched)
        else:
            self._series = self._live.series(state, None)
        self._state, self._only, self._of = state, only, of
        self._dirty = True
        if now or time.monotonic() - self._drawn_at >= self.min_interval:
            self._draw()

    def toggle_log(self) -> bool:
        """Switch the y axis between linear and log scale (redrawn at once); returns the new setting.

        With a score (or the baseline) <= 0 the axis stays linear and the title says why.
        """
        self.log_scale = not self.log_scale
        if self._state is not None:
            self._draw()
        return self.log_scale

    def _maybe_draw(self) -> None:
        if self._dirty and time.monotonic() - self._drawn_at >= self.min_interval:
            self._draw()

    def _shown(self) -> bool:
        return self.is_mounted and all(node.display for node in self.ancestors_with_self if isinstance(node, Widget))

    def _draw(self) -> None:
        state = self._state
        if state is None or not self._shown():  # hidden: drawn when shown again (on_resize)
            return
        self._dirty = False
        self._drawn_at = time.monotonic()
        palette = theme_palette(self.app.theme_variables)
        proofs = state.baseline_mean is None and is_proof_run(state)
        attempted = 0
        xs: list[float]
        ys: list[float]
        if proofs:  # no baseline, no score to improve: the theorems solved so far, by trial
            xs, ys = [], []
            bx, by, attempted = solved_series(state, self._only)
        else:
            xs, ys, bx, by = self._series
        self.series = (xs, ys, bx, by)
        baseline = state.baseline_mean if (xs or bx) else None
        values = [v for v in (*ys, *by, *([baseline] if baseline is not None else [])) if math.isfinite(v)]
        self.y_range = (min(values), max(values)) if values else None
        self.log_active = self.log_scale and bool(values) and min(values) > 0 and not proofs
        metric = str(state.task.get("metric", {}).get("name", "score"))
        solved = int(by[-1]) if by else 0
        if proofs and self._only is not None:  # the counts first: at 80 columns the title has 44 cells
            title = Text(f"solved {solved} of {attempted} by trial · filtered: {len(self._only)} of {self._of}")
        elif proofs:
            title = Text(f"theorems solved by trial ({solved} of {attempted})")
        elif self._only is not None:  # the table's filter: what it keeps comes first, the metric after
            title = Text(f"filtered: {len(self._only)} of {self._of} · {metric} ({state.direction})")
        else:
            title = Text(f"{metric} by trial ({state.direction})")
        title.no_wrap, title.overflow = True, "ellipsis"
        if self.log_active:
            title.append(" · log scale")
        elif self.log_scale:
            title.append(" · linear: log needs scores > 0" if values and not proofs else " · log scale")
        plot = self.plot
        rows = canvas_rows(plot.size.height)
        self.scale = None
        if self.y_range is not None:  # counts: whole ticks from 0; scores: round ticks, each on its row
            lo, hi = (0.0, max(1.0, self.y_range[1])) if proofs else self.y_range
            self.scale = value_scale(lo, hi, rows, whole=proofs, log=self.log_active)
        picture = (xs, ys, bx, by, baseline, title.plain, self.log_active, palette, plot.size)
        if picture == self._picture:
            return  # nothing drawn would change (the events were turns, posts, a trial still running)
        self._picture = picture
        self.query_one(".score-chart--title", Static).update(title)

        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        # a log axis is drawn as a linear one of log10 values: plotext's own log scale takes the log of its data
        # in place on every build, so a plot rendered twice (a repaint) drew log(log(score))
        fy = _log10s if self.log_active else list
        if xs:
            plt.scatter(xs, fy(ys), marker="dot", color=palette["trial"])
        if bx:
            plt.plot(bx, fy(by), marker="braille", color=palette["best"])
        if baseline is not None:
            plt.hline(fy([baseline])[0], palette["baseline"])
        if self.scale is not None:  # the axis holds every value plotted, the latest included
            plt.ylim(*self.scale.limits)
            plt.yticks(fy(list(self.scale.ticks)), list(self.scale.labels))
        if xs or bx:
            lo_x = int(min(xs[:1] + bx[:1]))
            hi_x = int(max(xs[-1:] + bx[-1:]))
            label_width = len(str(hi_x)) + 4
            ticks = integer_ticks(lo_x, hi_x, max(2, min(10, (plot.size.width - 8) // label_width)))
            plt.xticks([float(t) for t in ticks], [str(t) for t in ticks])
            if lo_x == hi_x:
                plt.xlim(lo_x - 0.5, hi_x + 0.5)
            else:
                plt.xlim(lo_x, hi_x)
        legend = Text(no_wrap=True, overflow="ellipsis")  # the series drawn, and only those
        if xs:
            legend.append("• ", rich_color(palette["trial"]))
            legend.append("trial  ")
        if bx:
            legend.append("━ ", rich_color(palette["best"]))
            legend.append("theorems solved so far  " if proofs else "best so far  ")
        if baseline is not None:
            legend.append("─ ", rich_color(palette["baseline"]))
            legend.append("baseline" + (f" {baseline:.5g}" if math.isfinite(baseline) else ""))
        if not legend.plain:
            legend.append("nothing scored yet")
        self.query_one(".score-chart--legend", Static).update(legend)
        plot.refresh()
