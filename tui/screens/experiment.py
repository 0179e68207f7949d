"""The experiment screen: the arms' best-so-far curves side by side, their final bests and comparisons.

Opened by ``rrma-tui experiment show EXP`` (without ``--headless``). The report is folded from the
cells' run logs by :func:`rrma.run.experiment.report` in a worker (never on the UI thread) every few
seconds while the screen is shown, so a running experiment fills in as its cells go. Two plots:
best so far against trials and against wall time, one line per arm (the mean over its seeds), or
one line per cell with ``S``. The table lists every cell; Enter opens its run's dashboard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Static
from textual_plotext import PlotextPlot

from rrma.run.experiment import CellReport, Experiment, ExperimentReport, report
from tui.messages import OpenRun
from tui.screens.base import WorkerScreen, shown
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable

CELL_COLUMNS = [
    Column("cell", "cell", 24), Column("status", "status", 14), Column("final", "final best", 12, "right"),
    Column("gain", "gain", 10, "right", drop=2), Column("trials", "trials", 6, "right", drop=1),
    Column("cost", "tokens / USD", 18, "right", drop=3), Column("wall", "wall s", 8, "right", drop=4),
]
ARM_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red", "white", "orange")  # plotext colour names


def ci_text(value: tuple[float, float, float] | None) -> str:
    if value is None:
        return "-"
    mean, low, high = value
    return f"{mean:.5g} [{low:.5g}, {high:.5g}]"


class ExperimentScreen(WorkerScreen):
    BINDINGS = [
        Binding("enter", "open_cell", "Open run"),
        Binding("S", "seeds", "Curves: seeds / means"),
        Binding("L", "log_scale", "Chart: log scale on/off", show=False),
        Binding("ctrl+r", "rescan", "Refresh", show=False),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    ExperimentScreen #exp-title { height: auto; padding: 0 1; }
    ExperimentScreen #exp-plots { height: 1fr; min-height: 8; }
    ExperimentScreen #exp-plots PlotextPlot { width: 1fr; }
    ExperimentScreen #exp-arms { height: auto; max-height: 8; padding: 0 1; }
    ExperimentScreen #exp-cells { height: 1fr; min-height: 4; }
    """

    @dataclass
    class Reported(Message):
        """A fresh report of the experiment (folded in a worker)."""

        report: ExperimentReport

    def __init__(self, experiment: Experiment, *, interval: float = 3.0) -> None:
        super().__init__()
        self.experiment = experiment
        self.interval = interval
        self.report: ExperimentReport | None = None
        self.per_seed = False  # S: one line per cell instead of the arm's mean
        self.log_scale = False
        self._cells: dict[str, CellReport] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text(f"experiment {self.experiment.id} · reading…"), id="exp-title")
        with Horizontal(id="exp-plots"):
            yield PlotextPlot(id="plot-trials")
            yield PlotextPlot(id="plot-time")
        yield Static("", id="exp-arms")
        yield LineTable(CELL_COLUMNS, self._row, id="exp-cells", select_label="Open run")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#exp-cells").focus()
        self.action_rescan()
        self.set_interval(self.interval, self._rescan_if_shown)

    def _rescan_if_shown(self) -> None:
        if shown(self):
            self.action_rescan()

    def action_rescan(self) -> None:
        self._fold()

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _fold(self) -> None:
        self.post_message(self.Reported(report(self.experiment)))

    @on(Reported)
    def _reported(self, message: Reported) -> None:
        self.report = message.report
        self._cells = {c.cell.run_id: c for arm in message.report.arms for c in arm.cells}
        table = self.query_one("#exp-cells", LineTable)
        table.set_rows([c.run_id for c in self.experiment.cells], keep=table.cursor_key)
        self._draw()

    # ------------------------------------------------------------------ drawing

    def _row(self, key: str) -> list[str | Text]:
        c = self._cells.get(key)
        if c is None:
            return [key, "", "", "", "", "", ""]
        style = {"running": "yellow", "not started": "dim", "error": "bold red", "interrupted": "red",
                 "stopped": "red"}.get(c.status, "green")
        return [key, Text(c.status, style), "-" if c.final_best is None else f"{c.final_best:.5g}",
                "-" if c.improvement is None else f"{c.improvement:+.4g}", str(c.trials),
                f"{c.tokens} / {c.cost_usd:.3f}", f"{c.wall_seconds:.0f}"]

    def _draw(self) -> None:
        rep = self.report
        if rep is None:
            return
        arrow = "lower is better" if rep.direction == "minimize" else "higher is better"
        done = sum(1 for a in rep.arms for c in a.cells if c.status not in ("not started", "running"))
        title = Text(f"experiment {rep.experiment.id} · {rep.metric} ({arrow}) · {len(rep.arms)} arms x "
                     f"{len(rep.experiment.spec.seed_list())} seeds · {done}/{len(rep.experiment.cells)} cells ended",
                     no_wrap=True, overflow="ellipsis")
        self.query_one("#exp-title", Static).update(title)
        arms = Text(no_wrap=True, overflow="ellipsis")
        for i, arm in enumerate(rep.arms):
            arms.append("━ ", ARM_COLORS[i % len(ARM_COLORS)])
            arms.append(f"{arm.name}: final best {ci_text(arm.final)}, {arm.trials} trials, {arm.tokens} tokens, "
                        f"${arm.cost_usd:.3f}, {arm.compute_seconds:.0f} compute s\n")
        for c in rep.comparisons:
            if c.delta is not None:
                p = "" if c.p_value is None else f", sign-flip p {c.p_value:.3g}"
                ci = "" if c.ci_low is None else f" [{c.ci_low:+.4g}, {c.ci_high:+.4g}]"
                arms.append(f"{c.b} vs {c.a}: {c.delta:+.4g}{ci} on {len(c.seeds)} seeds (> 0: {c.b} better){p}; "
                            f"{c.wins} better, {c.losses} worse\n", "dim")
        self.query_one("#exp-arms", Static).update(arms)
        self._plot("#plot-trials", "trials")
        self._plot("#plot-time", "seconds")

    def _series(self, x: str) -> list[tuple[str, int, list[float], list[float]]]:
        """(label, colour index, xs, ys) of each line: an arm's mean, or each cell (S)."""
        rep = self.report
        assert rep is not None
        out: list[tuple[str, int, list[float], list[float]]] = []
        for i, arm in enumerate(rep.arms):
            if self.per_seed:
                for c in arm.cells:
                    xs = [float(v) for v in (c.curve.trials if x == "trials" else c.curve.seconds)]
                    if xs:
                        out.append((c.cell.run_id, i, xs, list(c.curve.best)))
            else:
                points = arm.mean_curve if x == "trials" else arm.mean_time_curve
                if points:
                    out.append((arm.name, i, [float(p[0]) for p in points], [p[1] for p in points]))
        return out

    def _plot(self, selector: str, x: str) -> None:
        plot = self.query_one(selector, PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        series = self._series(x)
        values = [v for _, _, _, ys in series for v in ys if math.isfinite(v)]
        log = self.log_scale and bool(values) and min(values) > 0
        what = "each seed" if self.per_seed else "mean over seeds"
        plt.title(f"best so far vs {'trials' if x == 'trials' else 'wall seconds'} ({what})"
                  + (" · log" if log else (" · linear: log needs > 0" if self.log_scale else "")))
        for _, color, xs, ys in series:
            plt.plot(xs, ys, marker="braille", color=ARM_COLORS[color % len(ARM_COLORS)])
        if log:
            plt.yscale("log")
        plot.refresh()

    # ------------------------------------------------------------------ keys

    def action_seeds(self) -> None:
        self.per_seed = not self.per_seed
        self._draw()

    def action_log_scale(self) -> None:
        self.log_scale = not self.log_scale
        self._draw()

    def action_open_cell(self) -> None:
        key = self.query_one("#exp-cells", LineTable).cursor_key
        if key is not None:
            self._open(key)

    @on(LineTable.Selected, "#exp-cells")
    def _selected(self, message: LineTable.Selected) -> None:
        self._open(message.key)

    def _open(self, key: str) -> None:
        run_dir: Path = self.experiment.runs_dir / key
        if not (run_dir / "events.jsonl").exists():
            self.notify(f"{key} has not started yet", severity="warning")
            return
        self.post_message(OpenRun(run_dir))

    def action_back(self) -> None:
        self.app.pop_screen()
