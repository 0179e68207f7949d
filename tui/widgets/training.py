"""A training run's figures: the step series behind its curves, the texts of its panels, and the charts.

A training run's log holds ``train.started`` / ``train.step`` / ``train.checkpoint`` / ``train.finished``
(actor ``trainer``), folded into ``RunState.train_sessions``, ``train_steps`` and ``train_checkpoints``.
A session that resumed from a checkpoint logs again the steps after it, so the curves keep the steps up to
that checkpoint and then the new session's (the earlier records after it died with the crashed process); a
run that holds sessions of more than one method shows the latest session's method.

:class:`TrainCharts` draws four small plots (reward mean with its ± std band, entropy, KL, loss) with
plotext, as the dashboard's score chart does: at most once per ``min_interval`` seconds however fast
steps arrive, more points than a plot has room for reduced to each x range's minimum and maximum, its
colours taken from the Textual theme's text colours.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.theme import Theme
from textual.widgets import Static
from textual_plotext import PlotextPlot

from rrma.log.state import RunState
from tui.durations import age
from tui.widgets.chart_axis import Scale, canvas_rows, integer_ticks, value_scale
from tui.widgets.score_chart import theme_palette
from tui.widgets.trial_text import Part

CURVES = ("reward", "entropy", "kl", "loss")  # the plots, in the grid's order
LABELS = {"reward": "reward mean ± std", "entropy": "entropy", "kl": "KL to the reference", "loss": "loss"}
# train.started's config["settings"] (agents/training: rrma-tui train) the session panel shows, by method
SETTINGS = {"sft": ("lr", "epochs", "batch", "lora_r"),
            "grpo": ("steps", "lr", "group", "prompts", "beta", "lora_r", "control"),
            "sdpo": ("steps", "lr", "group", "prompts", "beta", "lora_r", "teacher", "control")}
ROLE = {"reward": "best", "entropy": "trial", "kl": "baseline", "loss": "trial"}  # theme colour of each line


def num(value: Any, fmt: str = ".3g") -> str:
    """A figure as the panels write it: ``-`` for none (not logged, or not finite)."""
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return format(value, fmt)


def short_hash(digest: str | None, n: int = 12) -> str:
    return (digest or "-")[:n]


@dataclass
class TrainSeries:
    """The steps the curves show (one per step number, in step order) and their session."""

    method: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self.steps[-1] if self.steps else None

    def xy(self, key: str) -> tuple[list[float], list[float]]:
        """(steps, values) of one figure, leaving out steps where it is missing or not finite."""
        xs: list[float] = []
        ys: list[float] = []
        for s in self.steps:
            v = s.get(key)
            if isinstance(v, int | float) and math.isfinite(v):
                xs.append(float(s["step"]))
                ys.append(float(v))
        return xs, ys

    def band(self) -> tuple[list[float], list[float], list[float]]:
        """(steps, mean - std, mean + std) of the reward, where both were logged."""
        xs: list[float] = []
        lo: list[float] = []
        hi: list[float] = []
        for s in self.steps:
            m, sd = s.get("reward_mean"), s.get("reward_std")
            if isinstance(m, int | float) and isinstance(sd, int | float) and math.isfinite(m) and math.isfinite(sd):
                xs.append(float(s["step"]))
                lo.append(m - sd)
                hi.append(m + sd)
        return xs, lo, hi

    def mean_of(self, key: str) -> float | None:
        """The mean of one figure over the shown steps (None when no step logged it)."""
        _, ys = self.xy(key)
        return sum(ys) / len(ys) if ys else None


def train_series(state: RunState) -> TrainSeries:
    """The steps of the latest session's method, in step order: for each step number the record the current
    line of training logged. A session that resumed from step K's checkpoint drops the steps after K that
    earlier sessions logged (they died with the crashed process; it logs them again), and a fresh start of the
    same method drops every earlier step."""
    steps = state.train_steps
    if not steps:
        return TrainSeries()
    method = state.train_sessions[-1]["method"] if state.train_sessions else steps[-1].get("method")
    by_step: dict[int, dict[str, Any]] = {}
    sessions = iter(s for s in state.train_sessions if s["method"] == method)
    pending = next(sessions, None)
    for s in steps:
        while pending is not None and pending["seq"] < s["seq"]:  # a session that began before this step
            _restart(by_step, pending.get("resumed_from"))
            pending = next(sessions, None)
        if s.get("method") == method:
            by_step[int(s["step"])] = s
    while pending is not None:  # sessions with no step yet
        _restart(by_step, pending.get("resumed_from"))
        pending = next(sessions, None)
    return TrainSeries(method, [by_step[k] for k in sorted(by_step)])


def _restart(by_step: dict[int, dict[str, Any]], resumed_from: int | None) -> None:
    """A session begins: keep the steps up to the checkpoint it resumed from (none for a fresh start)."""
    for k in [k for k in by_step if resumed_from is None or k > resumed_from]:
        del by_step[k]


def train_parts(state: RunState) -> list[Part]:
    """The dashboard header's ``train: step N, reward R (T)`` (``loss L`` where no reward is logged, as in
    sft); nothing when the run has no training steps."""
    latest = train_series(state).latest
    if latest is None:
        return []
    reward = latest.get("reward_mean")
    what = f"reward {num(reward)}" if num(reward) != "-" else f"loss {num(latest.get('loss'))}"
    return [(Text.assemble((f"  train: step {latest['step']}, {what}", "bold cyan"), (" (T)", "dim")), 1)]


def session_text(state: RunState) -> Text:
    """The training session: method, base model, resumed from, settings, how it ended; earlier sessions."""
    text = Text()
    sessions = state.train_sessions
    if not sessions:
        text.append("no train.started yet", "dim")
        return text
    s = sessions[-1]
    text.append(f"{s['method']}", "bold")
    text.append(f"  session {len(sessions)}" + (f" of {len(sessions)}" if len(sessions) > 1 else ""), "dim")
    text.append("\nbase ")
    text.append(model_label(s.get("base_model"), 36))
    resumed = s.get("resumed_from")
    text.append("\nresumed from ")
    text.append("step " + str(resumed) if resumed is not None else "- (a fresh start)")
    config = s.get("config") or {}
    nested = config.get("settings")
    settings: dict[str, Any] = nested if isinstance(nested, dict) else config  # rrma-tui train nests them
    shown = [f"{k} {settings[k]}" for k in SETTINGS.get(s["method"], ())
             if isinstance(settings.get(k), int | float | str) and not isinstance(settings.get(k), bool)]
    if shown:
        text.append("\n" + ", ".join(shown), "dim")
    finished = s.get("finished")
    if finished is None:
        text.append("\ntraining…", "yellow")
    else:
        style = "green" if finished.get("reason") == "done" else "red"
        text.append(f"\nfinished: {finished.get('reason')} after {finished.get('steps')} steps", style)
        if finished.get("artifact"):
            text.append(f"\nfinal {short_hash(finished['artifact'])}", "bold")
    return text


def checkpoints_text(state: RunState, limit: int = 8) -> Text:
    """The checkpoints and adapters saved, newest first: step, kind, the artifact's short hash."""
    text = Text()
    items = state.train_checkpoints
    if not items:
        text.append("none yet", "dim")
        return text
    for c in reversed(items[-limit:]):
        if text:
            text.append("\n")
        text.append(f"step {c['step']:>4} ", "bold")
        text.append(f"{c['kind']:<10} ")
        text.append(short_hash(c.get("artifact")), "cyan")
    if len(items) > limit:
        text.append(f"\n… {len(items) - limit} earlier", "dim")
    return text


def short_path(path: str, width: int) -> str:
    """A path that fits ``width`` cells: its last components, behind ``…/``."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    while len(parts) > 1 and len("…/" + "/".join(parts)) > width:
        parts.pop(0)
    tail = "…/" + "/".join(parts)
    return tail if len(tail) <= width else "…" + path[-(width - 1):]


def model_label(path: Any, width: int) -> str:
    """A base model as the panels write it: an artifact's sha256 in a path shortened to 12 digits, the path's
    last components where it is still too long."""
    return short_path(re.sub(r"\b([0-9a-f]{12})[0-9a-f]{52}\b", r"\1", str(path or "-")), width)


def gist_text(state: RunState, limit: int = 3) -> Text:
    """The session and the checkpoints in a few short lines (a narrow terminal's one panel for both)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if state.train_sessions:
        s = state.train_sessions[-1]
        text.append(f"{s['method']}", "bold")
        text.append(f" · {model_label(s.get('base_model'), 30)}\n")
        resumed = s.get("resumed_from")
        text.append(f"resumed from step {resumed}" if resumed is not None else "a fresh start", "dim")
        finished = s.get("finished")
        if finished is None:
            text.append(" · training…", "yellow")
        else:
            text.append(f" · finished: {finished.get('reason')}", "green" if finished.get("reason") == "done" else "red")
    else:
        text.append("no train.started yet", "dim")
    ckpts = state.train_checkpoints
    for c in reversed(ckpts[-limit:]):
        text.append(f"\nstep {c['step']:>4} {c['kind']:<10} ")
        text.append(short_hash(c.get("artifact")), "cyan")
    if len(ckpts) > limit:
        text.append(f"\n… {len(ckpts) - limit} earlier checkpoints", "dim")
    elif not ckpts:
        text.append("\nno checkpoint yet", "dim")
    return text


def latest_text(series: TrainSeries, now: datetime | None = None, *, compact: bool = False) -> Text:
    """The latest step's figures, and the zero-variance and novelty rates (this step and their mean);
    ``compact``: in six lines (a narrow terminal)."""
    text = Text()
    s = series.latest
    if s is None:
        text.append("no step yet", "dim")
        return text
    text.append(f"step {s['step']}", "bold")
    if now is not None and s.get("ts"):
        text.append(f"  {age(s['ts'], now)} ago", "dim")
    if compact:
        zero, novel = s.get("zero_variance_frac"), s.get("novelty_rate")
        for line in (f"reward {num(s.get('reward_mean'))} ± {num(s.get('reward_std'))}",
                     f"loss {num(s.get('loss'))}  KL {num(s.get('kl'))}",
                     f"entropy {num(s.get('entropy'))}  grad {num(s.get('grad_norm'))}",
                     f"0-var groups {num(zero, '.0%')} (mean {num(series.mean_of('zero_variance_frac'), '.0%')})",
                     f"novelty {num(novel, '.0%')} (mean {num(series.mean_of('novelty_rate'), '.0%')})"):
            text.append("\n" + line)
        if s.get("nonfinite"):
            text.append(f"  not finite: {', '.join(s['nonfinite'])}", "bold red")
        return text
    rows = [
        ("reward", f"{num(s.get('reward_mean'))} ± {num(s.get('reward_std'))}"),
        ("loss", num(s.get("loss"))),
        ("KL", num(s.get("kl"))),
        ("entropy", num(s.get("entropy"))),
        ("grad norm", num(s.get("grad_norm"))),
        ("zero-var groups", f"{num(s.get('zero_variance_frac'), '.0%')} (mean {num(series.mean_of('zero_variance_frac'), '.0%')})"),
        ("novelty rate", f"{num(s.get('novelty_rate'), '.0%')} (mean {num(series.mean_of('novelty_rate'), '.0%')})"),
        ("tokens / s", f"{num(s.get('tokens'), ',')} / {num(s.get('seconds'), '.1f')}"),
        ("lr", num(s.get("lr"))),
    ]
    for label, value in rows:
        text.append(f"\n{label:<16}", "dim")
        text.append(value)
    if s.get("trials"):
        text.append(f"\n{'rollouts':<16}", "dim")
        text.append(f"{len(s['trials'])} (Enter opens them)")
    if s.get("nonfinite"):
        text.append(f"\nnot finite: {', '.join(s['nonfinite'])}", "bold red")
    return text


def reduce_points(xs: list[float], ys: list[float], buckets: int) -> tuple[list[float], list[float]]:
    """At most about 2 x ``buckets`` points: each equal x range's minimum and maximum (a spike stays visible)."""
    if len(xs) <= 2 * buckets:
        return xs, ys
    lo, hi = xs[0], xs[-1]
    span = (hi - lo) or 1.0
    keep: dict[int, tuple[int, int]] = {}
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        b = int((x - lo) / span * (buckets - 1))
        a, z = keep.get(b, (i, i))
        keep[b] = (i if y < ys[a] else a, i if y > ys[z] else z)
    idx = sorted({i for pair in keep.values() for i in pair})
    return [xs[i] for i in idx], [ys[i] for i in idx]


class TrainPlot(Vertical):
    """One curve: a label line (the figure and its latest value) above a plotext plot."""

    DEFAULT_CSS = """
    TrainPlot { height: 1fr; width: 1fr; }
    TrainPlot > .train-plot--label { height: 1; color: $text; text-style: bold; }
    TrainPlot > PlotextPlot { height: 1fr; }
    """

    def __init__(self, curve: str) -> None:
        super().__init__(id=f"plot-{curve}")
        self.curve = curve
        self.drawn: dict[str, tuple[list[float], list[float]]] = {}  # line -> the (xs, ys) last drawn
        self.scale: Scale | None = None  # the y axis drawn now (chart_axis: round ticks, each on its row)

    def compose(self) -> ComposeResult:
        yield Static(LABELS[self.curve], classes="train-plot--label")
        yield PlotextPlot()

    @property
    def label_text(self) -> str:
        content = self.query_one(".train-plot--label", Static).content
        return content.plain if isinstance(content, Text) else str(content)

    def draw(self, series: TrainSeries, palette: dict[str, Any], max_points: int) -> None:
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        key = "reward_mean" if self.curve == "reward" else self.curve
        xs, ys = series.xy(key)
        color = palette[ROLE[self.curve]]
        label = Text(no_wrap=True, overflow="ellipsis")
        label.append(LABELS[self.curve], "bold")
        if ys:
            latest = series.latest or {}
            label.append(f"  {num(latest.get(key), '.4g')}", "bold")
            if self.curve == "reward":
                label.append(f" ± {num(latest.get('reward_std'), '.3g')}")
            label.append(f"  step {int(xs[-1])}", "dim")
        else:
            label.append("  (not logged" + (f" by {series.method}" if series.method else "") + ")", "dim")
        self.query_one(".train-plot--label", Static).update(label)
        self.drawn = {}
        if self.curve == "reward":
            bx, lo, hi = series.band()
            for name, band in (("low", lo), ("high", hi)):
                if bx:
                    self.drawn[name] = reduce_points(bx, band, max_points)
                    plt.plot(*self.drawn[name], marker="dot", color=palette["trial"])
        if xs:
            self.drawn["mean" if self.curve == "reward" else self.curve] = reduce_points(xs, ys, max_points)
            plt.plot(*reduce_points(xs, ys, max_points), marker="braille", color=color)
            lo_x, hi_x = int(xs[0]), int(xs[-1])
            ticks = integer_ticks(lo_x, hi_x, max(2, min(6, (plot.size.width - 8) // (len(str(hi_x)) + 4))))
            plt.xticks([float(t) for t in ticks], [str(t) for t in ticks])
            if lo_x == hi_x:
                plt.xlim(lo_x - 0.5, hi_x + 0.5)
            else:
                plt.xlim(lo_x, hi_x)
        drawn = [y for _, line in self.drawn.values() for y in line if math.isfinite(y)]
        self.scale = value_scale(min(drawn), max(drawn), canvas_rows(plot.size.height)) if drawn else None
        if self.scale is not None:
            plt.ylim(*self.scale.limits)
            plt.yticks(list(self.scale.ticks), list(self.scale.labels))
        plot.refresh()


class TrainCharts(Grid):
    """Reward (mean, and mean ± std dotted), entropy, KL and loss by step: call :meth:`update_from` as often as
    you like; it redraws at most once per ``min_interval`` seconds (a dirty flag and a timer coalesce)."""

    DEFAULT_CSS = """
    TrainCharts { grid-size: 2 2; grid-gutter: 0 1; height: 1fr; background: $surface; }
    """

    def __init__(self, *, min_interval: float = 0.5, max_points: int = 200, id: str | None = None) -> None:
        super().__init__(id=id)
        self.min_interval = min_interval
        self.max_points = max_points
        self._series: TrainSeries | None = None
        self._dirty = False
        self._drawn_at = 0.0
        self.draws = 0  # how many times the plots were drawn (tests)

    def compose(self) -> ComposeResult:
        for curve in CURVES:
            yield TrainPlot(curve)

    def on_mount(self) -> None:
        self.set_interval(self.min_interval / 2, self._maybe_draw)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        if self._series is not None:
            self._draw()

    def on_resize(self) -> None:
        """Drawn again at the new size once the plots have it: each y axis is chosen for its plot's rows."""
        if self._series is not None:
            self.call_after_refresh(self._draw)

    def update_from(self, series: TrainSeries, *, now: bool = False) -> None:
        self._series = series
        self._dirty = True
        if now or time.monotonic() - self._drawn_at >= self.min_interval:
            self._draw()

    def _maybe_draw(self) -> None:
        if self._dirty and time.monotonic() - self._drawn_at >= self.min_interval:
            self._draw()

    def _draw(self) -> None:
        self._dirty = False
        self._drawn_at = time.monotonic()
        if self._series is None or not self.is_mounted:
            return
        palette = theme_palette(self.app.theme_variables)
        for plot in self.query(TrainPlot):
            plot.draw(self._series, palette, self.max_points // 2)
        self.draws += 1

    def labels(self) -> dict[str, str]:
        """Each plot's label line as plain text (what it says about the latest value)."""
        return {p.curve: p.label_text for p in self.query(TrainPlot)}


def step_cells(step: dict[str, Any]) -> Sequence[str | Text]:
    """A row of the steps table."""
    return [str(step["step"]), num(step.get("reward_mean"), ".4g"), num(step.get("reward_std"), ".3g"),
            num(step.get("kl"), ".3g"), num(step.get("entropy"), ".3g"), num(step.get("loss"), ".4g"),
            num(step.get("zero_variance_frac"), ".0%"), num(step.get("novelty_rate"), ".0%"),
            str(len(step.get("trials") or [])) or "-"]
