"""The theorems view's chart: theorems solved so far (cumulative), by trial or by wall time.

A step line drawn with plotext (as tui/widgets/score_chart.py draws the dashboard's): it starts at 0
on the first trial (or the run's start) and rises by one at each theorem's first proof
(rrma/proofs_summary.py ``solved_curve``), carried on to the latest trial (or to now, in wall time:
the run's clock, stopped where the run's clock stops). ``series`` is what is plotted now.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.theme import Theme
from textual.widgets import Static
from textual_plotext import PlotextPlot

from rrma.proofs_summary import SolvedPoint
from tui.widgets.chart_axis import Scale, canvas_rows, integer_ticks, value_scale
from tui.widgets.score_chart import rich_color, theme_palette, time_unit


def step_line(points: list[tuple[float, int]], start: float, end: float) -> tuple[list[float], list[float]]:
    """The corners of the cumulative count's step line: 0 from ``start``, up by one at each x of ``points``
    ((x, solved so far), x ascending), carried on to ``end``."""
    xs: list[float] = [start]
    ys: list[float] = [0.0]
    for x, solved in points:
        xs += [x, x]
        ys += [ys[-1], float(solved)]
    xs.append(max(end, xs[-1]))
    ys.append(ys[-1])
    return xs, ys


class SolvedChart(Vertical):
    """Theorems solved so far against the trial number, or (``wall_time``) the seconds since the run began."""

    DEFAULT_CSS = """
    SolvedChart { background: $surface; }
    SolvedChart > .solved-chart--title { height: 1; color: $text; text-style: bold; content-align: center middle; }
    SolvedChart > .solved-chart--legend { height: 1; color: $text-muted; content-align: center middle; }
    SolvedChart > PlotextPlot { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.wall_time = False
        self.points: list[SolvedPoint] = []
        self.trials = 0  # the run's agent trials so far (the trial axis' end)
        self.elapsed = 0.0  # seconds since the run began (the wall-time axis' end)
        self.total = 0  # theorems counted (the run's, or those the table's filter shows)
        self.filtered: tuple[int, int] | None = None  # (shown, in the run) under a filter
        self.series: tuple[list[float], list[float]] = ([], [])  # the step line's corners plotted now
        self.unit = "s"
        self.scale: Scale | None = None  # the y axis drawn now: whole ticks from 0, each on its row

    def compose(self) -> ComposeResult:
        yield Static("", classes="solved-chart--title")
        yield PlotextPlot()
        yield Static("", classes="solved-chart--legend")

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        self.draw()

    def on_resize(self) -> None:
        self.draw()

    @property
    def title_text(self) -> str:
        content = self.query_one(".solved-chart--title", Static).content
        return content.plain if isinstance(content, Text) else str(content)

    def update_from(self, points: list[SolvedPoint], *, trials: int, elapsed: float, total: int,
                    filtered: tuple[int, int] | None = None) -> None:
        """``filtered``: (theorems shown, theorems in the run) when the table's filter narrows what is counted."""
        self.points, self.trials, self.elapsed, self.total = points, trials, elapsed, total
        self.filtered = filtered
        self.draw()

    def curve(self) -> list[tuple[float, int]]:
        """(x, solved so far) of each first proof, x ascending: by trial, or by wall time (then counted again in
        time order, as agents in parallel may finish out of order)."""
        if not self.wall_time:
            return [(float(p.trial), p.solved) for p in self.points]
        ordered = sorted(p.seconds for p in self.points)
        return [(s, i) for i, s in enumerate(ordered, start=1)]

    def draw(self) -> None:
        if not self.is_mounted:
            return
        solved = len(self.points)
        if self.wall_time:
            span = max(self.elapsed, *(p.seconds for p in self.points)) if self.points else self.elapsed
            per, unit = time_unit(span)
            self.unit = unit
            curve = [(x / per, n) for x, n in self.curve()]
            xs, ys = step_line(curve, 0.0, span / per) if self.trials else ([], [])
            title = Text(f"solved by time ({unit}): {solved} of {self.total}")
        else:
            xs, ys = step_line(self.curve(), 1.0, float(self.trials)) if self.trials else ([], [])
            title = Text(f"solved by trial: {solved} of {self.total}")
        if self.filtered is not None:
            title.append(f" · filtered: {self.filtered[0]} of {self.filtered[1]}")
        title.no_wrap, title.overflow = True, "ellipsis"
        self.series = (xs, ys)
        self.query_one(".solved-chart--title", Static).update(title)
        palette = theme_palette(self.app.theme_variables)
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        self.scale = None
        legend = Text(no_wrap=True, overflow="ellipsis")
        if xs:
            plt.plot(xs, ys, marker="braille", color=palette["best"])
            self.scale = value_scale(0, max(1, self.total, solved), canvas_rows(plot.size.height), whole=True)
            plt.ylim(*self.scale.limits)
            plt.yticks(list(self.scale.ticks), list(self.scale.labels))
            lo, hi = xs[0], xs[-1]
            if self.wall_time:
                ticks = integer_ticks(0, max(1, math.ceil(hi)), max(2, min(6, (plot.size.width - 6) // 5)))
            else:
                ticks = integer_ticks(int(lo), max(int(lo), int(hi)),
                                      max(2, min(8, (plot.size.width - 6) // (len(str(int(hi))) + 4))))
            plt.xticks([float(t) for t in ticks], [str(t) for t in ticks])
            plt.xlim(lo, max(hi, ticks[-1], lo + 1))
            legend.append("━ ", rich_color(palette["best"]))
            legend.append("theorems solved so far")
        else:
            legend.append("no trial yet")
        self.query_one(".solved-chart--legend", Static).update(legend)
        plot.refresh()
