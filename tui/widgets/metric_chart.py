"""The analysis chart: one point per trial of any metric against trial order, wall time or a parameter.

The analysis screen (tui/screens/analysis.py) builds a :class:`ChartData` (the points, sorted by x, the
axis names, which point is selected) and hands it to :meth:`MetricChart.show`, which draws it at once;
the screen decides how often (plotext rebuilds the whole figure on every draw).

Every tick label is ours, not plotext's: plotext prints ticks with a fixed number of decimals, which
cuts a small value's digits (``0.000000250``) or pads a big one (``123458.00``); here a tick is a round
number (1, 2, 2.5 or 5 x 10^k apart, powers of ten on a log axis) written with as few digits as it has, and
a y tick sits exactly on the row that stands for it (tui/widgets/chart_axis.py). The
selected point is drawn again as a ``◆`` on a vertical line in the theme's warning colour, so it can be
found among many. The title is a line of its own above the plot, so it never covers data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.color import Color, ColorParseError
from textual.containers import Vertical
from textual.message import Message
from textual.theme import Theme
from textual.widgets import Static
from textual_plotext import PlotextPlot

from tui.widgets.chart_axis import (
    Scale,
    canvas_rows,
    integer_ticks,
    linear_ticks,
    log_ticks,
    tick_label,
    value_scale,
)
from tui.widgets.score_chart import PlotColor
from tui.widgets.trial_text import Part, fit_line

SOURCES: dict[str, tuple[str, str]] = {  # role -> (theme variable, plotext colour for ANSI themes)
    "point": ("text-primary", "cyan"),
    "selected": ("text-warning", "yellow"),
}
SELECTED_MARKER = "◆"
MAX_DRAWN = 1200  # points drawn at most (one per cell first; past this, each column's lowest and highest)


@dataclass
class ChartData:
    """What the chart draws: points (trial id, x, y) sorted by x, and how to label them."""

    ids: list[str] = field(default_factory=list)
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    title: str = ""
    x_kind: str = "order"  # order (whole numbers) | number | choice (x_labels name the positions)
    x_unit: str = ""  # appended to each x tick label (wall time: s, m or h)
    x_labels: list[str] = field(default_factory=list)  # choice: the label of position 0, 1, ...
    x_log: bool = False  # draw x in log scale (a log-uniform parameter; every x > 0)
    selected: int | None = None  # index into ids


def palette(variables: dict[str, str]) -> dict[str, PlotColor]:
    """Role -> colour from the theme's text colours (a plotext colour name where the theme has no RGB)."""
    out: dict[str, PlotColor] = {}
    for role, (variable, fallback) in SOURCES.items():
        try:
            color = Color.parse(variables.get(variable, ""))
        except ColorParseError:
            out[role] = fallback
            continue
        out[role] = fallback if color.ansi is not None or color.a < 1 else color.rgb
    return out


def padded(lo: float, hi: float, log: bool) -> tuple[float, float]:
    """Axis limits around [lo, hi] with a little room, so no point sits on the frame. On a log axis plotext
    takes its limits as powers of ten (log10 of the data's), so that is what they are."""
    if log:
        a, b = math.log10(lo), math.log10(hi)
        pad = (b - a) * 0.04 or 0.1
        return a - pad, b + pad
    pad = (hi - lo) * 0.04 or (abs(lo) * 0.1 or 1.0)
    return lo - pad, hi + pad


@dataclass
class Frame:
    """Where the last draw put its data: the plot's size in cells, the y labels' width (the left frame's
    column), and the axes' limits as plotext took them (log10 of the data on a log axis)."""

    width: int
    height: int
    label_width: int
    x_lim: tuple[float, float]
    y_lim: tuple[float, float]
    x_log: bool
    y_log: bool

    def cell(self, x: float, y: float) -> tuple[float, float]:
        """(column, row) in the plot widget where the point (x, y) is drawn, as plotext maps it: the data area
        is inside the frame (the y labels and ``┤`` on the left, the frame on the right, one frame row on top,
        the frame and the x labels under it)."""
        left, right = self.label_width + 1, self.width - 2
        top, bottom = 1, self.height - 3
        fx = (math.log10(x) if self.x_log else x) if (x > 0 or not self.x_log) else self.x_lim[0]
        fy = (math.log10(y) if self.y_log else y) if (y > 0 or not self.y_log) else self.y_lim[0]
        col = left + (fx - self.x_lim[0]) / ((self.x_lim[1] - self.x_lim[0]) or 1.0) * (right - left)
        row = bottom - (fy - self.y_lim[0]) / ((self.y_lim[1] - self.y_lim[0]) or 1.0) * (bottom - top)
        return col, row


def thin(xs: list[float], ys: list[float], frame: Frame, limit: int) -> tuple[list[float], list[float], bool]:
    """The points to draw: one per cell (what the plot shows of several in a cell is one mark), and past
    ``limit`` of those, each column's lowest and highest (every outlier stays visible); and whether it came
    to that. A plot's cost grows with its marks; a run of thousands of trials stays quick to redraw."""
    cells: dict[tuple[int, int], int] = {}
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        c, r = frame.cell(x, y)
        cells.setdefault((round(c), round(r)), i)
    if len(cells) <= limit:
        keep = sorted(cells.values())
        return [xs[i] for i in keep], [ys[i] for i in keep], False
    extremes: dict[int, tuple[int, int]] = {}  # column -> (index of the lowest, of the highest)
    for (c, _), i in cells.items():
        lo, hi = extremes.get(c, (i, i))
        extremes[c] = (i if ys[i] < ys[lo] else lo, i if ys[i] > ys[hi] else hi)
    keep = sorted({i for pair in extremes.values() for i in pair})
    return [xs[i] for i in keep], [ys[i] for i in keep], True


class MetricChart(Vertical):
    """A title line and a plot; :meth:`show` draws a :class:`ChartData`. ``log_y``: the y axis in log scale
    when every value is > 0 (``log_active`` says whether it is; the title says why not). A click on the plot
    posts :class:`PointClicked` with the point drawn nearest the click (within a few cells)."""

    @dataclass
    class PointClicked(Message):
        chart: MetricChart
        index: int  # into ChartData.ids

    DEFAULT_CSS = """
    MetricChart { height: 1fr; background: $surface; }
    MetricChart > .metric-chart--title { height: 1; color: $text; text-style: bold; content-align: center middle; }
    MetricChart > PlotextPlot { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = ChartData()
        self.log_y = False
        self.log_active = False
        self.y_ticks: list[float] = []
        self.scale: Scale | None = None  # the y axis drawn now (chart_axis)
        self.x_ticks: list[float] = []
        self.frame: Frame | None = None
        self.drawn = 0  # points drawn (see thin)
        self.reduced = False

    def compose(self) -> ComposeResult:
        yield Static("", classes="metric-chart--title")
        yield PlotextPlot()

    @property
    def plot(self) -> PlotextPlot:
        return self.query_one(PlotextPlot)

    @property
    def title_text(self) -> str:
        content = self.query_one(".metric-chart--title", Static).content
        return content.plain if isinstance(content, Text) else str(content)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        self._draw()

    def on_resize(self) -> None:
        self._draw()  # the number of ticks follows the width

    def show(self, data: ChartData, *, log_y: bool = False) -> None:
        self.data = data
        self.log_y = log_y
        self._draw()

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        data = self.data
        keep = [i for i, (x, y) in enumerate(zip(data.xs, data.ys, strict=True))
                if math.isfinite(x) and math.isfinite(y)]  # the screen leaves non-finite values out; so does this
        xs = [data.xs[i] for i in keep]
        ys = [data.ys[i] for i in keep]
        self.log_active = self.log_y and bool(ys) and min(ys) > 0
        x_log = data.x_log and bool(xs) and min(xs) > 0
        parts: list[Part] = [(Text(data.title), 0)]
        if self.log_active:
            parts.append((Text(" · log y"), 1))
        elif self.log_y:
            parts.append((Text(" · linear: log needs values > 0" if ys else " · log y"), 1))
        width_now = self.size.width or self.app.size.width
        self.query_one(".metric-chart--title", Static).update(fit_line(parts, width_now))

        colors = palette(self.app.theme_variables)
        plot = self.plot
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        self.x_ticks, self.y_ticks = [], []
        self.frame, self.scale = None, None
        if not xs:
            plot.refresh()
            return
        width = max(20, plot.size.width or 60)
        height = max(5, plot.size.height or 15)
        # y: round ticks, each on the row that stands for it
        y_lo, y_hi = min(ys), max(ys)
        self.scale = scale = value_scale(y_lo, y_hi, canvas_rows(height), log=self.log_active)
        self.y_ticks = list(scale.ticks)
        y_labels = list(scale.labels) or [""]
        # x: whole trial numbers, round numbers, or the choices' names
        x_lo, x_hi = min(xs), max(xs)
        label_room = max(len(s) for s in y_labels) + 2
        if data.x_kind == "choice":
            self.x_ticks = sorted({float(x) for x in xs})
            x_labels = [data.x_labels[int(t)] if 0 <= int(t) < len(data.x_labels) else tick_label(t)
                        for t in self.x_ticks]
        else:
            widest = len(tick_label(x_hi, data.x_unit)) + 3
            x_count = max(2, min(10, (width - label_room) // widest))
            if data.x_kind == "order":
                self.x_ticks = [float(t) for t in integer_ticks(int(x_lo), int(x_hi), x_count)]
            elif x_log:
                self.x_ticks = log_ticks(x_lo, x_hi, x_count)
            else:
                self.x_ticks = linear_ticks(x_lo, x_hi, x_count, outer=True)
            x_labels = [tick_label(t, data.x_unit) for t in self.x_ticks]
        y_lim = scale.limits
        if data.x_kind in ("order", "choice"):
            x_lim = (min(x_lo, *self.x_ticks) - 0.5, max(x_hi, *self.x_ticks) + 0.5)
        else:
            x_lim = padded(min(x_lo, *self.x_ticks), max(x_hi, *self.x_ticks), x_log)
        self.frame = Frame(width, height, max(len(s) for s in y_labels), x_lim, y_lim, x_log, self.log_active)

        dx, dy, self.reduced = thin(xs, ys, self.frame, MAX_DRAWN)
        self.drawn = len(dx)

        # a log axis is drawn as a linear one of log10 values: plotext's own log scale takes the log of its data
        # in place on every build, so a plot rendered twice (a repaint) drew log(log(y))
        def fx(x: float) -> float:
            return math.log10(x) if x_log else x

        def fy(y: float) -> float:
            return math.log10(y) if self.log_active else y

        plt.scatter([fx(x) for x in dx], [fy(y) for y in dy], marker="dot", color=colors["point"])
        sel = data.selected
        if sel is not None and 0 <= sel < len(data.ids) and sel in keep:
            sx, sy = data.xs[sel], data.ys[sel]
            plt.vline(fx(sx), colors["selected"])
            plt.scatter([fx(sx)], [fy(sy)], marker=SELECTED_MARKER, color=colors["selected"])
        plt.yticks([fy(t) for t in self.y_ticks], list(scale.labels))
        plt.xticks([fx(t) for t in self.x_ticks], x_labels)
        plt.ylim(*y_lim)
        plt.xlim(*x_lim)
        if self.reduced:
            parts.append((Text(f" · {len(xs):,} points: each column's extremes drawn"), 2))
            self.query_one(".metric-chart--title", Static).update(fit_line(parts, width_now))
        plot.refresh()

    def point_at(self, col: int, row: int, reach: float = 3.0) -> int | None:
        """The index of the point drawn nearest the plot's cell (col, row), if one is within ``reach`` cells
        (a row counts as two columns: cells are twice as tall as wide)."""
        frame, data = self.frame, self.data
        if frame is None:
            return None
        size = self.plot.size  # what plotext drew at (the last render), which a resize may have changed
        frame = replace(frame, width=size.width or frame.width, height=size.height or frame.height)
        best: tuple[float, int] | None = None
        for i, (x, y) in enumerate(zip(data.xs, data.ys, strict=True)):
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            c, r = frame.cell(x, y)
            distance = math.hypot(c - col, 2 * (r - row))
            if distance <= reach and (best is None or distance < best[0]):
                best = (distance, i)
        return None if best is None else best[1]

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self.plot)
        if offset is None:
            return
        index = self.point_at(offset.x, offset.y)
        if index is not None:
            event.stop()
            self.post_message(self.PointClicked(self, index))
