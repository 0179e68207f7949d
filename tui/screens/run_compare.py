"""Two runs side by side (space marks a run in the runs list, ``=`` compares the highlighted one with it).

Each run is read in a worker of its own, as the dashboard reads one (:class:`rrma.log.reader.RunReader` from
its checkpoint when valid, turns indexed so the agents' cost is complete), never writing: no checkpoint is
planned, no lock is taken. The worker then follows the log (new lines every ``follow_interval`` seconds, as
``tail -f``) and posts a fresh :class:`RunFacts` whenever something was appended; the UI thread only ever sees
those snapshots, never a model another thread folds. The title says when they were last read (``as of``);
``ctrl+r`` reads both runs again from the start.

Shown: a summary table (task, status, trials of ``budget.max_trials``, outcome counts, the baseline's mean and
σ, the best with its trial and its Δσ as every view means it (:func:`rrma.log.state.delta_sigma`: against the
run's own baseline, in units of its σ), wall time, the agents' cost, the agents); the runs' best-so-far lines on
one chart, x = trial order (as the dashboard's chart: :func:`tui.widgets.score_chart.chart_series`) or, with
``W``, wall time since each run's ``run.started``; and, when both runs are of the same task and direction, one
paired figure: how much better B's best is than A's, in units of each run's baseline σ. Runs of different tasks
are compared all the same, under a red warning. Enter opens the highlighted run's dashboard.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from rrma.log.control import live_driver
from rrma.log.events import parse_ts
from rrma.log.layout import EVENTS
from rrma.log.reader import LiveFold, RunReader
from rrma.log.state import RunState, delta_sigma
from rrma.log.store import check_first_event, check_readable
from tui.counts import token_count
from tui.durations import human_duration, utcnow
from tui.messages import OpenRun
from tui.screens.base import WorkerScreen, failure_line
from tui.widgets.chart_axis import canvas_rows, integer_ticks, value_scale
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.run_header import fmt_usd, max_trials
from tui.widgets.score_chart import chart_series, step_corners, time_unit
from tui.widgets.trial_text import SIGMA_LEGEND, STATUS_GLYPH, Part, fit_line, fmt_score, fmt_sigma

SIDES = ("A", "B")
SIDE_COLORS = ("cyan", "magenta")  # plotext colour names, also Rich's: the line, the legend and the table header
ENDED_EARLY = {"stopped": "stopped", "interrupted": "interrupted", "error": "error", "baseline_failed": "failed"}
DIFFERENT_TASKS = "different tasks: scores may not be comparable"
LEGEND_COLUMNS = [
    Column("line", "", 3), Column("best", "best", 22), Column("sigma", "Δσ", 8, "right"),
    Column("trials", "trials", 9, "right", drop=1), Column("run", "run", 0),
]

Series = tuple[list[float], list[float]]


@dataclass
class RunFacts:
    """What the screen shows of one run, as read at ``as_of`` (built in the reading worker; never changed after)."""

    run_dir: Path
    error: str = ""  # why the run cannot be read ("" when it can)
    task: str = ""
    metric: str = "score"
    direction: str = "minimize"
    status: str = "reading…"
    trials: int = 0
    max_trials: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    baseline: float | None = None
    sigma: float | None = None
    best_id: str | None = None
    best: float | None = None
    best_sigma: float | None = None  # Δσ of the best (rrma.log.state.delta_sigma)
    wall: float | None = None  # seconds from run.started to run.finished (a live run: to as_of)
    cost: float = 0.0
    tokens: int = 0
    agents: list[str] = field(default_factory=list)
    torn: int = 0  # lines that are not valid events
    by_trial: Series = ([], [])  # best-so-far corners, x = agent trial number
    by_time: Series = ([], [])  # best-so-far corners, x = seconds since run.started
    as_of: datetime | None = None
    loaded: bool = False

    @property
    def name(self) -> str:
        return self.run_dir.name


def run_status(state: RunState, run_dir: Path) -> str:
    """``running``; ``stopped`` (by an order, or no process drives it); ``interrupted``, ``error``, ``failed``;
    ``finished: <reason>`` for a run that reached its budget or goal; ``empty``."""
    reason = state.finish_reason
    if reason:
        return ENDED_EARLY.get(reason, f"finished: {reason}")
    if state.status == "running" and live_driver(run_dir) is None:
        return "stopped (no driver)"
    return state.status


def time_series(state: RunState) -> Series:
    """The best-so-far step line against wall time: x = seconds from ``run.started`` to when each promoted trial
    finished (a confirmed one: its last repeat), starting at the baseline (the promoted baseline's score, else the
    baseline's mean) when the baseline finished, and carried on to the run's last event. As the trial-order chart,
    it only ever moves towards better."""
    start = parse_ts(state.started_ts)
    if start is None:
        return [], []

    def seconds(ts: str) -> float | None:
        when = parse_ts(ts)
        return None if when is None else (when - start).total_seconds()

    best: float | None = None
    t0: float | None = None
    for tid in state.baseline_ids:
        rec = state.trials.get(tid)
        if rec is None:
            continue
        done = seconds(rec.finished_ts)
        if done is not None:
            t0 = done if t0 is None else max(t0, done)
        if rec.promoted and rec.score is not None:
            best = rec.score
    if best is None:
        best = state.baseline_mean
    steps: list[tuple[float, float]] = []
    if best is not None:
        steps.append((t0 or 0.0, best))
    promoted: list[tuple[float, int, float]] = []
    for rec in state.agent_trials():
        if not rec.promoted or rec.score is None:
            continue
        times = [s for s in (seconds(state.trials[r].finished_ts) for r in rec.repeats if r in state.trials)
                 if s is not None]
        when = seconds(rec.finished_ts)
        if when is None:
            continue
        promoted.append((max([when, *times]), rec.proposed_seq, rec.score))
    for when, _, score in sorted(promoted):
        if best is None or state.better(score, best) > 0:
            steps.append((when, score))
            best = score
    end = seconds(state.finished_ts or state.last_ts) or 0.0
    return step_corners(steps, end)


def facts_of(model: LiveFold, run_dir: Path, now: datetime) -> RunFacts:
    """A snapshot of the model's run (call it on the thread that folds the model)."""
    state = model.state
    best = state.best
    start = parse_ts(state.started_ts)
    end = parse_ts(state.finished_ts) if state.finished_ts else None
    status = run_status(state, run_dir)
    if end is None and status != "running":
        end = parse_ts(state.last_ts)  # its clock stopped with its driver
    wall = ((end or now) - start).total_seconds() if start is not None else None
    task_agents = state.task.get("agents") if isinstance(state.task, dict) else None
    agents = [str(a.get("name")) for a in task_agents if isinstance(a, dict) and a.get("name")] \
        if isinstance(task_agents, list) else []
    for name in state.agents:  # agents the log names that the snapshot does not (a resumed run's new ones)
        if name not in agents and name != "baseline":
            agents.append(name)
    _, _, bx, by = chart_series(state)
    return RunFacts(
        run_dir=run_dir, task=state.task_name, metric=str(state.task.get("metric", {}).get("name", "score")),
        direction=state.direction, status=status, trials=len(state.agent_trials()), max_trials=max_trials(state),
        counts=state.counts(), baseline=state.baseline_mean, sigma=state.sigma,
        best_id=best.trial_id if best is not None and best.score is not None else None,
        best=best.score if best is not None else None,
        best_sigma=state.delta_sigma_of(best.score) if best is not None else None,
        wall=wall, cost=sum(a.cost_usd for a in state.agents.values()),
        tokens=sum(a.tokens_in + a.tokens_out for a in state.agents.values()), agents=agents, torn=len(model.torn),
        by_trial=(bx, by), by_time=time_series(state), as_of=now, loaded=True)


def same_task(a: RunFacts, b: RunFacts) -> bool:
    return a.task == b.task and a.metric == b.metric and a.direction == b.direction


def warning(a: RunFacts, b: RunFacts) -> str:
    """The red line over the table: runs of different tasks (or metrics, or directions)."""
    if not (a.loaded and b.loaded) or same_task(a, b):
        return ""
    if a.task != b.task:
        return f"{DIFFERENT_TASKS} (A: {a.task or '?'}, B: {b.task or '?'})"
    if a.metric != b.metric:
        return f"different metrics: scores may not be comparable (A: {a.metric}, B: {b.metric})"
    return f"{DIFFERENT_TASKS}: A's {a.metric} is to {a.direction}, B's to {b.direction}"


def paired(a: RunFacts, b: RunFacts) -> Text:
    """B's best against A's, in each run's baseline σ (:func:`delta_sigma` with A's best as the reference)."""
    if not (a.loaded and b.loaded) or a.error or b.error or not same_task(a, b):
        return Text("")
    if a.best is None or b.best is None:
        return Text(f"B vs A: no paired figure until both have a best ({'A' if a.best is None else 'B'} has none)",
                    "dim")
    sign = 1.0 if a.direction == "maximize" else -1.0
    gain = sign * (b.best - a.best)
    word = "better" if gain > 0 else "worse" if gain < 0 else "the same"
    text = Text.assemble(("B vs A", "bold"), f": best {fmt_score(b.best)} vs {fmt_score(a.best)}, B ",
                         (f"{fmt_score(abs(gain))} {word}" if gain else word, "bold"))
    sigmas = []
    for side, facts in zip(SIDES, (a, b), strict=True):
        value = delta_sigma(b.best, a.best, facts.sigma, a.direction)
        if value is not None:
            sigmas.append(f"{fmt_sigma(value)} ({side}'s σ)")
    if sigmas:
        text.append(" = " + ", ".join(sigmas))
    return text


STATUS_ORDER = [*STATUS_GLYPH]


def outcome_text(counts: dict[str, int]) -> str:
    known = [s for s in STATUS_ORDER if counts.get(s)] + sorted(s for s in counts if s not in STATUS_GLYPH)
    return ", ".join(f"{s} {counts[s]}" for s in known) or "-"


def summary_rows(facts: RunFacts) -> list[tuple[str, Text]]:
    """(label, value) of one run's column of the summary table."""
    f = facts
    if f.error:
        return [("status", Text(f"unreadable: {f.error}", "bold red"))]
    if not f.loaded:
        return [("status", Text("reading…", "dim"))]
    style = {"running": "yellow", "stopped": "red", "interrupted": "red", "error": "bold red",
             "failed": "bold red"}.get(f.status.split(" ")[0], "green" if f.status.startswith("finished") else "dim")
    status = Text(f.status, style)
    if f.torn:
        status.append(f" ⚠ {f.torn} unreadable line(s)", "bold red")
    baseline = Text("-" if f.baseline is None else fmt_score(f.baseline))
    if f.sigma is not None:
        baseline.append(f", σ {fmt_score(f.sigma)}")
    best = Text("-") if f.best is None else Text.assemble(f"{f.best_id} ", (fmt_score(f.best), "bold"))
    if f.best_sigma is not None:
        best.append(f" {fmt_sigma(f.best_sigma)}")
    tokens = f" · {token_count(f.tokens)} tokens" if f.tokens else ""
    return [
        ("task", Text(f.task or "?")),
        ("status", status),
        ("trials", Text.assemble(f"{f.trials} of {f.max_trials}" if f.max_trials is not None else str(f.trials),
                                 (f" · {outcome_text(f.counts)}" if f.counts else "", "dim"))),
        ("baseline", baseline),
        ("best", best),
        ("wall", Text("-" if f.wall is None else human_duration(f.wall))),
        ("cost", Text(fmt_usd(f.cost) + tokens)),
        ("agents", Text(", ".join(f.agents) or "-")),
    ]


def summary_table(a: RunFacts, b: RunFacts) -> Table:
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, pad_edge=False)
    table.add_column("", style="dim", no_wrap=True)
    for side, facts, color in zip(SIDES, (a, b), SIDE_COLORS, strict=True):
        table.add_column(Text.assemble((f"{side} ", f"bold {color}"), (facts.name, "bold")), ratio=1,
                         overflow="fold")
    rows_a, rows_b = dict(summary_rows(a)), dict(summary_rows(b))
    labels = [label for label, _ in summary_rows(a if a.loaded and not a.error else b)]
    if "status" not in labels:
        labels.insert(0, "status")
    for label in labels:
        table.add_row(label, rows_a.get(label, Text("-", "dim")), rows_b.get(label, Text("-", "dim")))
    return table


class RunCompareScreen(WorkerScreen):
    """Two runs: their summaries side by side, their best-so-far lines on one chart."""

    BINDINGS = [
        Binding("enter", "open_run", "Open run"),
        Binding("W", "wall_time", "Wall time"),
        Binding("o", "swap", "Swap sides"),  # as in the trial compare: the other side
        Binding("ctrl+r", "rescan", "Read again", show=False),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    RunCompareScreen #rc-title { height: 1; padding: 0 1; background: $boost; }
    RunCompareScreen #rc-warn { height: auto; padding: 0 1; color: $text-error; text-style: bold; }
    RunCompareScreen #rc-warn.-empty { display: none; }
    RunCompareScreen #rc-summary { height: auto; padding: 0 1; }
    RunCompareScreen #rc-paired { height: auto; padding: 0 1; }
    RunCompareScreen #rc-paired.-empty { display: none; }
    RunCompareScreen #rc-chart-title { height: 1; padding: 0 1; text-style: bold; }
    RunCompareScreen #rc-plot { height: 1fr; min-height: 5; }
    RunCompareScreen #rc-runs { height: 3; }
    """

    @dataclass
    class Read(Message):
        """A fresh snapshot of the run in ``slot`` (0: the left run as given, 1: the right)."""

        slot: int
        generation: int
        facts: RunFacts

    def __init__(self, left: Path, right: Path, *, clock: Callable[[], datetime] | None = None,
                 follow_interval: float | None = None) -> None:
        super().__init__()
        self.dirs = (Path(left), Path(right))
        self.facts = [RunFacts(self.dirs[0]), RunFacts(self.dirs[1])]
        self.order = [0, 1]  # which slot is A and which B (o swaps them)
        self.by_time = False  # W: x = wall time since each run started
        self._clock = clock
        self._follow = follow_interval
        self._generation = 0

    # ------------------------------------------------------------------ reading

    @property
    def clock(self) -> Callable[[], datetime]:
        clock: Callable[[], datetime] = self._clock or getattr(self.app, "clock", None) or utcnow
        return clock

    @property
    def follow_interval(self) -> float:
        if self._follow is not None:
            return self._follow
        return max(0.25, 5 * float(getattr(self.app, "poll_interval", 0.1)))

    def compose(self) -> ComposeResult:
        yield Static("", id="rc-title")
        yield Static("", id="rc-warn", classes="-empty")
        yield Static("", id="rc-summary")
        yield Static("", id="rc-paired", classes="-empty")
        yield Static("", id="rc-chart-title")
        yield PlotextPlot(id="rc-plot")
        yield LineTable(LEGEND_COLUMNS, self._legend_row, id="rc-runs", select_label="Open run")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#rc-runs", LineTable)
        table.set_rows(["0", "1"])
        table.focus()
        self.action_rescan()

    def action_rescan(self) -> None:
        """Read both runs again from the start (the workers of the previous reading stop)."""
        self.workers.cancel_group(self, "run-compare")
        self._generation += 1
        self.facts = [RunFacts(self.dirs[0]), RunFacts(self.dirs[1])]
        for slot in (0, 1):
            self._read(slot, self._generation)
        self.redraw()

    @work(thread=True, group="run-compare", exit_on_error=False)
    def _read(self, slot: int, generation: int) -> None:
        """Read run ``slot``, then follow its log until cancelled, posting a snapshot after each change."""
        worker = get_current_worker()
        run_dir = self.dirs[slot]
        clock, interval = self.clock, self.follow_interval
        try:
            check_readable(run_dir, log=False)  # file types and the first event, as the runs list checks
            check_first_event(run_dir)
            reader = RunReader(run_dir, write_checkpoint=False, shared=False)  # writes nothing
            model = reader.load()
            model.attach_index(model.index_turns(lambda: worker.is_cancelled))
        except Exception as exc:  # an unreadable run says why in its column
            self.post_message(self.Read(slot, generation, RunFacts(
                run_dir, error=failure_line(exc).removeprefix(f"{run_dir / EVENTS}: "), status="unreadable")))
            return
        self.post_message(self.Read(slot, generation, facts_of(model, run_dir, clock())))
        while interval > 0:
            until = time.monotonic() + interval
            while time.monotonic() < until:
                if worker.is_cancelled:
                    return
                time.sleep(min(0.05, interval))
            try:
                chunk = reader.poll()
            except Exception as exc:  # the log went away or became unreadable while followed
                self.post_message(self.Read(slot, generation, RunFacts(run_dir, error=failure_line(exc),
                                                                       status="unreadable")))
                return
            if chunk is not None and not worker.is_cancelled:
                model.apply(chunk)
                self.post_message(self.Read(slot, generation, facts_of(model, run_dir, clock())))

    @on(Read)
    def _on_read(self, message: Read) -> None:
        if message.generation != self._generation:
            return  # a reading ctrl+r replaced
        self.facts[message.slot] = message.facts
        self.redraw()

    # ------------------------------------------------------------------ drawing

    @property
    def sides(self) -> tuple[RunFacts, RunFacts]:
        """(A, B) as shown now."""
        return self.facts[self.order[0]], self.facts[self.order[1]]

    @property
    def loaded(self) -> bool:
        """Both runs read (or found unreadable)."""
        return all(f.loaded or f.error for f in self.facts)

    def on_resize(self) -> None:
        if self.is_mounted:
            self.call_after_refresh(self.redraw)

    def redraw(self) -> None:
        if not self.is_mounted:
            return
        a, b = self.sides
        width = max(20, self.size.width - 2)
        metric = a.metric if a.loaded else b.metric
        direction = a.direction if a.loaded else b.direction
        as_of = [f.as_of for f in (a, b) if f.as_of is not None]
        parts: list[Part] = [
            (Text("compare runs", "bold"), 0),
            (Text(f"  {metric} ({'lower' if direction == 'minimize' else 'higher'} is better)"), 2),
            (Text(f"  as of {max(as_of):%H:%M:%S} UTC" if as_of else "  reading…", "dim"), 0),
            (Text(", following; ctrl+r reads again", "dim"), 4),
            (Text(f"  {SIGMA_LEGEND}", "dim"), 3),
        ]
        self.query_one("#rc-title", Static).update(fit_line(parts, width))
        warn = self.query_one("#rc-warn", Static)
        line = warning(a, b)
        warn.update(Text(line, "bold red"))
        warn.set_class(not line, "-empty")
        self.query_one("#rc-summary", Static).update(summary_table(a, b))
        figure = paired(a, b)
        pair = self.query_one("#rc-paired", Static)
        pair.update(figure)
        pair.set_class(not figure.plain, "-empty")
        self.query_one("#rc-runs", LineTable).refresh_rows()
        self._draw_chart()

    def series(self) -> list[tuple[int, Series]]:
        """(side index, corners) of each line drawn: x = trial number, or seconds since start (W)."""
        return [(i, f.by_time if self.by_time else f.by_trial) for i, f in enumerate(self.sides)
                if not f.error and (f.by_time if self.by_time else f.by_trial)[0]]

    def _draw_chart(self) -> None:
        lines = self.series()
        xs_all = [x for _, (xs, _) in lines for x in xs]
        ys_all = [y for _, (_, ys) in lines for y in ys if math.isfinite(y)]
        scale, unit = time_unit(max(xs_all, default=0.0)) if self.by_time else (1.0, "")
        title = Text(f"best so far by {'wall time since each run started' if self.by_time else 'trial'}",
                     "bold")
        if not lines:
            title.append("  (nothing to draw yet)", "dim")
        self.query_one("#rc-chart-title", Static).update(fit_line([(title, 0)], max(20, self.size.width - 2)))
        plot = self.query_one("#rc-plot", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        for i, (xs, ys) in lines:
            plt.plot([x / scale for x in xs], ys, marker="braille", color=SIDE_COLORS[i])
        if xs_all:
            lo, hi = min(xs_all) / scale, max(xs_all) / scale
            ilo, ihi = math.floor(lo), math.ceil(hi)
            label_width = len(str(ihi)) + len(unit) + 3
            ticks = integer_ticks(ilo, ihi, max(2, min(10, (plot.size.width - 8) // max(1, label_width))))
            plt.xticks([float(t) for t in ticks], [f"{t}{unit}" for t in ticks])
            plt.xlim(lo - 0.5, hi + 0.5) if ihi == ilo else plt.xlim(lo, hi)
        if ys_all:  # round ticks, each on the row that stands for it (chart_axis)
            axis = value_scale(min(ys_all), max(ys_all), canvas_rows(plot.size.height))
            plt.ylim(*axis.limits)
            plt.yticks(list(axis.ticks), list(axis.labels))
        plot.refresh()

    def _legend_row(self, key: str) -> list[str | Text]:
        index = int(key)
        f = self.sides[index]
        line = Text(f"━ {SIDES[index]}", f"bold {SIDE_COLORS[index]}")
        if f.error:
            return [line, Text("unreadable", "bold red"), "", "", f.name]
        best = "-" if f.best is None else f"{f.best_id} {fmt_score(f.best, 22 - len(str(f.best_id)) - 1)}"
        trials = f"{f.trials}/{f.max_trials}" if f.max_trials is not None else str(f.trials)
        return [line, best, fmt_sigma(f.best_sigma, 8), trials if f.loaded else "", f.name]

    # ------------------------------------------------------------------ keys

    def action_wall_time(self) -> None:
        self.by_time = not self.by_time
        self._draw_chart()

    def action_swap(self) -> None:
        self.order.reverse()
        self.redraw()

    @on(LineTable.Selected, "#rc-runs")
    def _selected(self, message: LineTable.Selected) -> None:
        self._open(int(message.key))

    def action_open_run(self) -> None:
        key = self.query_one("#rc-runs", LineTable).cursor_key
        if key is not None:
            self._open(int(key))

    def _open(self, index: int) -> None:
        facts = self.sides[index]
        if facts.error:
            self.notify(f"{facts.name} cannot be read: {facts.error}", severity="error")
            return
        if not (facts.run_dir / EVENTS).is_file():
            self.notify(f"{facts.run_dir}: not a run directory any more (no {EVENTS})", severity="error")
            return
        self.post_message(OpenRun(facts.run_dir))

    def action_back(self) -> None:
        self.app.pop_screen()

