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

import math
import time

from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color, ColorParseError
from textual.containers import Vertical
from textual.theme import Theme
from textual.widgets import Static
from textual_plotext import PlotextPlot

from rrma.log.state import RunState
from tui.widgets.trial_text import is_proof_run

RGB = tuple[int, int, int]
PlotColor = str | RGB  # what plotext accepts: a colour name or an RGB triple

# role -> (theme variable, plotext colour name used when the theme has no RGB value, e.g. ANSI themes)
PALETTE_SOURCES: dict[str, tuple[str, str]] = {
    "trial": ("text-primary", "cyan"),
    "best": ("text-success", "green"),
    "baseline": ("text-error", "red"),
}


def chart_series(state: RunState, max_points: int = 400) -> tuple[list[float], list[float], list[float], list[float]]:
    """(xs, ys) of scored agent trials and (bx, by) of the best-so-far step line, x = trial number.

    (bx, by) are the corners of a step function: each improvement at trial x adds (x, old best)
    and (x, new best), so joining the corners with straight lines draws only horizontal and
    vertical segments, and it only ever moves towards better (a promotion that a trial proposed earlier
    but finished later beat draws no step). The line starts at trial 1 (at the promoted baseline, else the baseline
    mean) or, in a run without a baseline, at the first promotion, and ends at the last trial.
    One pass over the trials; more than ``max_points`` points are reduced (scatter: each x
    range's min and max; steps: the last improvement of each x range, so the line stays a step).
    """
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
    if len(xs) > max_points:
        xs, ys = _reduce(xs, ys, max_points // 2)
    if len(steps) > max_points // 2:
        steps = _reduce_steps(steps, max(2, max_points // 2 - 1))
    bx, by = _step_corners(steps, last)
    return xs, ys, bx, by


def solved_series(state: RunState) -> tuple[list[float], list[float], int]:
    """A proof run's chart: the corners of the step line of theorems solved so far by trial number (x), from
    0 at trial 1; and how many theorems were attempted. Its scores (1 per proof) say nothing a line at 1.0
    could show."""
    solved: set[str] = set()
    attempted: set[str] = set()
    steps: list[tuple[float, float]] = []
    last = 0
    for n, rec in enumerate(state.agent_trials(), start=1):
        last = n
        if n == 1:
            steps.append((1, 0))
        if rec.theorem:
            attempted.add(rec.theorem)
            if rec.status == "ok" and rec.theorem not in solved:
                solved.add(rec.theorem)
                steps.append((n, len(solved)))
    if len(steps) > 400:
        steps = _reduce_steps(steps, 199)
    bx, by = _step_corners(steps, last)
    return bx, by, len(attempted)


def _step_corners(steps: list[tuple[float, float]], last: float) -> tuple[list[float], list[float]]:
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
    """Keep the minimum and maximum of each of ``buckets`` equal x ranges."""
    lo, hi = xs[0], xs[-1]
    span = (hi - lo) or 1.0
    keep: dict[int, tuple[int, int]] = {}
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        b = int((x - lo) / span * (buckets - 1))
        if b not in keep:
            keep[b] = (i, i)
        else:
            a, z = keep[b]
            keep[b] = (i if y < ys[a] else a, i if y > ys[z] else z)
    idx = sorted({i for pair in keep.values() for i in pair})
    return [xs[i] for i in idx], [ys[i] for i in idx]


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


def _nice_step(raw: float) -> int:
    """The smallest whole 1, 2 or 5 x 10^k that is at least ``raw``."""
    magnitude = 1
    while True:
        for mult in (1, 2, 5):
            if mult * magnitude >= raw:
                return mult * magnitude
        magnitude *= 10


def integer_ticks(lo: int, hi: int, max_ticks: int) -> list[int]:
    """At most ``max_ticks`` (about) evenly spaced whole numbers in [lo, hi]: multiples of 1, 2 or 5 x 10^k.

    ``lo`` itself is added in front when the first multiple is at least half a step away, so the
    axis says where it starts (trial 1); with fewer than two multiples in range, the ends.
    """
    if hi <= lo:
        return [lo]
    step = _nice_step((hi - lo) / max(1, max_ticks - 1))
    first = -(-lo // step) * step  # ceil(lo / step) * step
    ticks = list(range(first, hi + 1, step))
    if ticks and ticks[0] - lo >= step / 2 and len(ticks) < max_ticks:
        ticks.insert(0, lo)
    return ticks if len(ticks) >= 2 else [lo, hi]  # one multiple in range says little: the two ends


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


class ScoreChart(Vertical):
    """Plot of a RunState, with its title above and its legend below; call :meth:`update_from` as often as you like."""

    DEFAULT_CSS = """
    ScoreChart { height: 1fr; background: $surface; }
    ScoreChart > .score-chart--title { height: 1; color: $text; text-style: bold; content-align: center middle; }
    ScoreChart > .score-chart--legend { height: 1; color: $text-muted; content-align: center middle; }
    ScoreChart > PlotextPlot { height: 1fr; }
    """

    def __init__(self, *, min_interval: float = 1.0, log_scale: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.min_interval = min_interval
        self.log_scale = log_scale  # what the user asked for (see log_active for what is drawn)
        self.log_active = False  # the y axis is drawn in log scale (False when a score is <= 0)
        self._state: RunState | None = None
        self._dirty = False
        self._drawn_at = 0.0

    def compose(self) -> ComposeResult:
        yield Static("", classes="score-chart--title")
        yield PlotextPlot()
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
        self.set_interval(self.min_interval / 2, self._maybe_draw)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        if self._state is not None:
            self._draw()

    def update_from(self, state: RunState, *, now: bool = False) -> None:
        self._state = state
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

    def _draw(self) -> None:
        state = self._state
        self._dirty = False
        self._drawn_at = time.monotonic()
        if state is None or not self.is_mounted:
            return
        palette = theme_palette(self.app.theme_variables)
        proofs = state.baseline_mean is None and is_proof_run(state)
        attempted = 0
        xs: list[float]
        ys: list[float]
        if proofs:  # no baseline, no score to improve: the theorems solved so far, by trial
            xs, ys = [], []
            bx, by, attempted = solved_series(state)
        else:
            xs, ys, bx, by = chart_series(state)
        baseline = state.baseline_mean if (xs or bx) else None
        values = [v for v in (*ys, *by, *([baseline] if baseline is not None else [])) if math.isfinite(v)]
        self.log_active = self.log_scale and bool(values) and min(values) > 0
        metric = str(state.task.get("metric", {}).get("name", "score"))
        title = Text(f"{metric} by trial ({state.direction})" if not proofs else
                     f"theorems solved by trial ({int(by[-1]) if by else 0} of {attempted})",
                     no_wrap=True, overflow="ellipsis")
        if self.log_active:
            title.append(" · log scale")
        elif self.log_scale:
            title.append(" · linear: log needs scores > 0" if values else " · log scale")
        self.query_one(".score-chart--title", Static).update(title)

        plot = self.plot
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        if xs:
            plt.scatter(xs, ys, marker="dot", color=palette["trial"])
        if bx:
            plt.plot(bx, by, marker="braille", color=palette["best"])
        if baseline is not None:
            plt.hline(baseline, palette["baseline"])
        if self.log_active:
            plt.yscale("log")
        if xs or bx:
            lo = int(min(xs[:1] + bx[:1]))
            hi = int(max(xs[-1:] + bx[-1:]))
            label_width = len(str(hi)) + 4
            ticks = integer_ticks(lo, hi, max(2, min(10, (plot.size.width - 8) // label_width)))
            plt.xticks([float(t) for t in ticks], [str(t) for t in ticks])
            if lo == hi:
                plt.xlim(lo - 0.5, hi + 0.5)
            else:
                plt.xlim(lo, hi)
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
