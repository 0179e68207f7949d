"""Analysis (in the spirit of W&B's charts): any number the run's trials record, against trial order, wall
time or a parameter; a point opens its trial.

``A`` on the dashboard. **y** is any number the trials record: ``score``, ``seconds`` and every numeric key of
the oracle's ``metrics`` (``peak_rss_mb``, ``steps``, ``val_bpb``...), found in the trials themselves;
``M`` cycles them. **x** is the trial's number, as the dashboard's chart numbers it (rrma/log/state.py
``TrialRecord.number``: the agent trials from 1, in proposal order; the baseline repeats at 0, a confirmation
repeat at the number of the trial it repeats), or with ``W`` the wall time from the run's start (``run.started``) to the trial's
``trial.finished``, or with ``V`` a parameter (cycling through them, then back to trial order):

- a key of the task's ``search_space`` (``train.py:LR``; in name order): the trial's value of that constant. A
  random-search trial records the constants it changed in its proposal's ``meta["changes"]``; a trial
  that edited the file otherwise is read from its edit; a trial that did not touch the file has its
  parent's value; a root (a baseline) is read from its workspace manifest. A ``choice`` dimension is
  drawn as categories, a ``log_uniform`` one on a log axis.
- a numeric top-level key of the proposals' ``meta`` (``meta.turns``), as recorded.

Only finished trials are points. A value that is there but not finite (NaN, inf) is left out and
counted (``2 non-finite left out``); so are finished trials without the value (``3 without
peak_rss_mb``).

**The filter rule.** Opened from a filtered table (agent, status or text), the screen shows the trials
the table showed at that moment, and only those (``filtered: status ok, 8 of 15 trials``; M counts the
run's trials now): trials that arrive later are not added, as the table's rule is not re-applied here,
but the given trials' values follow the run (a running trial becomes a point when it finishes).
Unfiltered, every trial is there and new ones appear as they finish.

``←`` / ``→`` move the selection from point to point along x (``Home`` / ``End``: the first, the last);
the line under the chart names the selected trial, its x and y; ``Enter`` opens it (a mouse click selects
the point drawn nearest it, a click on the selected point opens it) (``[`` / ``]`` in the
trial view then step through the chart's points in x order). ``L``: y in log scale (when every value is
> 0). Live: redrawn at most every ``min_interval`` seconds as the dashboard's tail folds events; keys
redraw at once. Nothing here writes.
"""

from __future__ import annotations

import ast
import math
import time
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from rrma.log.codec import LogEvent
from rrma.log.events import parse_ts
from rrma.log.reader import LiveFold
from rrma.log.state import RunState, TrialRecord
from rrma.workspace import read_constant
from tui.messages import OpenTrial
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.terminal import without_controls
from tui.widgets.footer import KeysFooter
from tui.widgets.metric_chart import ChartData, MetricChart
from tui.widgets.score_chart import time_unit
from tui.widgets.trial_text import Part, fit_line, fmt_score

FIXED_METRICS = ["score", "seconds"]


def trial_x(state: RunState, rec: TrialRecord) -> int:
    """A trial's x in trial order: its number (``TrialRecord.number``, the dashboard chart's x), 0 for a baseline
    repeat (before trial 1), the repeated trial's number for a confirmation repeat."""
    if rec.number is not None:
        return rec.number
    original = state.trials.get(rec.confirms) if rec.confirms is not None else None
    return (original.number or 0) if original is not None else 0


def _number(value: Any) -> float | None:
    """A recorded value as a float (None for what is not a number; booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def metric_names(state: RunState, ids: list[str]) -> list[str]:
    """``score``, ``seconds``, then every key of the trials' metrics that holds a number, sorted."""
    keys: set[str] = set()
    for tid in ids:
        rec = state.trials.get(tid)
        if rec is not None and rec.metrics:
            keys.update(k for k, v in rec.metrics.items() if _number(v) is not None)
    return FIXED_METRICS + sorted(keys - set(FIXED_METRICS))


def metric_value(rec: TrialRecord, name: str) -> float | None:
    if name == "score":
        return rec.score
    if name == "seconds":
        return rec.seconds
    return _number(rec.metrics.get(name))


def _literal(text: str | None) -> Any:
    """A constant's literal as a value: a number, else what Python reads it as, else the text."""
    if text is None:
        return None
    try:
        return float(text.replace("_", ""))
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class Params:
    """The parameters a trial had: the task's search_space constants (resolved along the lineage, cached:
    a trial's proposal never changes) and numeric top-level keys of its proposal's meta."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], Any] = {}  # (trial id, key) -> value
        self._manifests: dict[tuple[str, str], Any] = {}  # (manifest blob, key) -> value

    @staticmethod
    def space(state: RunState) -> dict[str, dict[str, Any]]:
        space = state.task.get("search_space") if isinstance(state.task, dict) else None
        return {str(k): (v if isinstance(v, dict) else {}) for k, v in (space or {}).items() if ":" in str(k)}

    def names(self, state: RunState, ids: list[str]) -> list[str]:
        meta: set[str] = set()
        for tid in ids:
            rec = state.trials.get(tid)
            if rec is not None and rec.meta:
                meta.update(f"meta.{k}" for k, v in rec.meta.items() if _number(v) is not None and ":" not in k)
        return sorted(self.space(state)) + sorted(meta)

    def value(self, state: RunState, model: LiveFold | None, tid: str, key: str) -> Any:
        if ":" not in key:  # meta.<key> (a search_space key always names its file: 'file.py:NAME')
            rec = state.trials.get(tid)
            return None if rec is None else _number(rec.meta.get(key[5:]))
        path, name = key.split(":", 1)
        chain: list[str] = []  # trials that have their parent's value, newest first
        cur: str | None = tid
        value: Any = None
        while cur is not None:
            if (cur, key) in self._values:
                value = self._values[(cur, key)]
                break
            rec = state.trials.get(cur)
            if rec is None:
                break
            found, value = self._own(state, model, rec, path, name, key)
            if found:
                self._values[(cur, key)] = value
                break
            chain.append(cur)
            cur = rec.parent
        for t in chain:
            self._values[(t, key)] = value
        return value

    def _own(self, state: RunState, model: LiveFold | None, rec: TrialRecord, path: str, name: str,
             key: str) -> tuple[bool, Any]:
        """(whether the trial itself says its value, the value)."""
        changes = rec.meta.get("changes")
        if isinstance(changes, dict) and key in changes:
            return True, _literal(str(changes[key]))
        if rec.parent is None or rec.parent not in state.trials:  # a root: its workspace says
            return True, self._from_manifest(model, rec.manifest_blob, path, name, key)
        edit = next((e for e in rec.edits if e.get("path") == path), None)
        if edit is None or isinstance(changes, dict):  # untouched, or a random-search edit of other constants
            return False, None
        if edit.get("delete"):
            return True, None
        return True, _literal(read_constant(model.blob_text(edit.get("blob")) or "", name) if model else None)

    def _from_manifest(self, model: LiveFold | None, manifest: str | None, path: str, name: str, key: str) -> Any:
        if model is None or not manifest:
            return None
        if (manifest, key) not in self._manifests:
            try:
                files = model.store.get_json_blob(manifest)
            except (OSError, ValueError):
                files = {}
            text = model.blob_text(files.get(path)) if isinstance(files, dict) else None
            self._manifests[(manifest, key)] = _literal(read_constant(text or "", name))
        return self._manifests[(manifest, key)]


@dataclass
class Plotted:
    """What the chart shows and what it left out."""

    data: ChartData
    non_finite: int = 0
    missing_y: int = 0
    missing_x: int = 0
    finished: int = 0


class AnalysisScreen(RunScreen):
    BINDINGS = [
        Binding("left", "point(-1)", "Prev point", show=False),  # the point line says "(i of n)"; ? lists them
        Binding("right", "point(1)", "Next point", show=False),
        Binding("home", "point_edge(0)", "First point", show=False),
        Binding("end", "point_edge(1)", "Last point", show=False),
        Binding("enter", "open_trial", "Trial"),
        Binding("M", "metric", "Metric"),
        Binding("W", "wall_time", "Wall time"),
        Binding("V", "parameter", "Parameter"),
        Binding("L", "log_scale", "Chart: log scale on/off", show=False),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    AnalysisScreen #an-title { height: 1; padding: 0 1; background: $boost; }
    AnalysisScreen #an-chart { height: 1fr; }
    AnalysisScreen #an-point { height: 1; padding: 0 1; }
    AnalysisScreen #an-counts { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, session: RunSession, trial_ids: list[str] | None = None, label: str = "", *,
                 min_interval: float = 0.25) -> None:
        super().__init__(session)
        self.trial_ids = list(trial_ids) if trial_ids is not None else None
        self.label = label
        self.min_interval = min_interval
        self.metric = "score"
        self.x_axis = "order"  # order | time | param:<key>
        self.log_y = False
        self.selected_id: str | None = None
        self.plotted = Plotted(ChartData())
        self.params = Params()
        self._dirty = False
        self._drawn_at = 0.0

    def compose(self) -> ComposeResult:
        yield Static("", id="an-title")
        yield MetricChart(id="an-chart")
        yield Static("", id="an-point")
        yield Static("", id="an-counts")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.set_interval(self.min_interval / 2, self._maybe_draw)
        self.redraw()

    def on_resize(self) -> None:
        if self.is_mounted:
            self.call_after_refresh(self._draw_lines)

    # ------------------------------------------------------------------ data

    def ids(self) -> list[str]:
        """The trials this view is about, in the run's proposal order (see the filter rule above)."""
        state = self.state
        if self.trial_ids is None:
            return list(state.order)
        given = set(self.trial_ids)
        return [tid for tid in state.order if tid in given]

    def metrics(self) -> list[str]:
        return metric_names(self.state, self.ids())

    def param_names(self) -> list[str]:
        return self.params.names(self.state, self.ids())

    @property
    def x_name(self) -> str:
        if self.x_axis == "order":
            return "trial"
        if self.x_axis == "time":
            return "wall time"
        return self.x_axis.removeprefix("param:")

    def series(self) -> Plotted:
        """The points (finished trials with a finite x and y), sorted by x, and what was left out."""
        state, model = self.state, self.model
        place = {tid: n for n, tid in enumerate(state.order, start=1)}  # ties on x: in proposal order
        start = parse_ts(state.started_ts)
        param = self.x_axis.removeprefix("param:") if self.x_axis.startswith("param:") else None
        dim = Params.space(state).get(param or "", {})
        choices: list[Any] = list(dim.get("choices") or []) if dim.get("kind") == "choice" else []
        categorical = bool(choices)
        out = Plotted(ChartData())
        rows: list[tuple[float, int, str, float]] = []
        for tid in self.ids():
            rec = state.trials[tid]
            if not rec.finished:
                continue
            out.finished += 1
            y = metric_value(rec, self.metric)
            x: float | None
            if self.x_axis == "order":
                x = float(trial_x(state, rec))
            elif self.x_axis == "time":
                at = parse_ts(rec.finished_ts)
                x = (at - start).total_seconds() if at is not None and start is not None else None
            else:
                raw = self.params.value(state, model, tid, param or "")
                if categorical or (raw is not None and _number(raw) is None):
                    categorical = True
                    if raw is None:
                        x = None
                    else:
                        if raw not in choices:
                            choices.append(raw)
                        x = float(choices.index(raw))
                else:
                    x = _number(raw)
            if y is None:
                out.missing_y += 1
            elif x is None:
                out.missing_x += 1
            elif not (math.isfinite(x) and math.isfinite(y)):
                out.non_finite += 1
            else:
                rows.append((x, place[tid], tid, y))
        rows.sort()
        data = out.data
        data.ids = [r[2] for r in rows]
        data.xs = [r[0] for r in rows]
        data.ys = [r[3] for r in rows]
        if self.x_axis == "time":
            span = max(data.xs, default=0.0)
            per, unit = time_unit(span)
            data.xs = [x / per for x in data.xs]
            data.x_unit, data.x_kind = unit, "number"
            x_title = "wall time"
        elif param is not None:
            data.x_kind = "choice" if categorical else "number"
            data.x_labels = [without_controls(str(c)) for c in choices]  # an agent's literal: drawn by plotext
            data.x_log = dim.get("kind") == "log_uniform"
            x_title = param
        else:
            x_title = "trial"
        data.title = without_controls(f"{self.y_title()} by {x_title}")
        if self.selected_id in data.ids:
            data.selected = data.ids.index(self.selected_id)
        elif data.ids:
            data.selected = len(data.ids) - 1
        self.selected_id = data.ids[data.selected] if data.selected is not None else None
        return out

    def y_title(self) -> str:
        if self.metric == "score":
            task_metric = self.state.task.get("metric", {}) if isinstance(self.state.task, dict) else {}
            name = str(task_metric.get("name") or "score") if isinstance(task_metric, dict) else "score"
            return f"score ({name}, {self.state.direction})" if name != "score" else f"score ({self.state.direction})"
        return self.metric

    # ------------------------------------------------------------------ drawing

    def refresh_view(self, events: list[LogEvent]) -> None:
        if events and time.monotonic() - self._drawn_at < self.min_interval:
            self._dirty = True
            return
        self.redraw()

    def _maybe_draw(self) -> None:
        if self._dirty and time.monotonic() - self._drawn_at >= self.min_interval:
            self.redraw()

    def redraw(self) -> None:
        self._dirty = False
        self._drawn_at = time.monotonic()
        if not self.query("#an-chart"):  # not composed yet (on_mount draws first, before is_mounted is set)
            return
        self.plotted = self.series()
        self.query_one("#an-chart", MetricChart).show(self.plotted.data, log_y=self.log_y)
        self._draw_lines()

    def _draw_lines(self) -> None:
        self._draw_title()
        self._draw_point()
        self._draw_counts()

    def _width(self, widget: Static) -> int:
        return widget.content_region.width or self.app.size.width - 2

    def _draw_title(self) -> None:
        state = self.state
        total = len(state.order)
        parts: list[Part] = [(Text("analysis", "bold"), 0),
                             (Text(f" {state.run_id or self.session.run_dir.name}", "dim"), 3)]
        if self.trial_ids is None:
            parts.append((Text(f" · all {total:,} trials"), 0))
        else:
            shown = len(self.ids())
            parts.append((Text(" · filtered: ", "yellow"), 0))
            if self.label:
                parts.append((Text(f"{self.label}, ", "yellow"), 1))
            parts.append((Text(f"{shown:,} of {total:,} trials", "yellow"), 0))
        parts.append((Text(f" · y {self.metric}"), 2))
        parts.append((Text(f" · x {self.x_name}"), 2))
        title = self.query_one("#an-title", Static)
        title.update(fit_line(parts, self._width(title)))

    def x_text(self, x: float) -> str:
        data = self.plotted.data
        if data.x_kind == "choice":
            i = int(x)
            return data.x_labels[i] if 0 <= i < len(data.x_labels) else fmt_score(x)
        if self.x_axis == "order":
            return f"#{int(x)}"
        return fmt_score(x) + data.x_unit

    def _draw_point(self) -> None:
        data = self.plotted.data
        line = self.query_one("#an-point", Static)
        if data.selected is None:
            if not self.ids():
                why = "the filter left no trial" if self.trial_ids is not None else "no trial yet"
            elif not self.plotted.finished:
                why = "no trial has finished yet"
            else:
                why = f"no finished trial has a finite {self.metric} and {self.x_name}"
            text = Text(f"no point to show: {why}", "dim")
            line.update(fit_line([(text, 0)], self._width(line)))
            return
        i = data.selected
        rec = self.state.trials.get(data.ids[i])
        parts: list[Part] = [(Text(f"◆ {data.ids[i]}", "bold"), 0)]
        if rec is not None:
            parts.append((Text(f" {rec.agent}", "magenta"), 3))
            parts.append((Text(f" {rec.status}"), 2))
        x_text = self.x_text(data.xs[i])
        if self.x_axis == "order" and rec is not None and (rec.baseline or rec.confirms is not None):
            x_text = "baseline" if rec.baseline else f"{x_text} (a repeat of {rec.confirms})"
        parts.append((Text(f"  {self.x_name} {x_text}"), 0))
        parts.append((Text(f"  {self.metric} {fmt_score(data.ys[i])}", "bold"), 0))
        parts.append((Text(f"  ({i + 1} of {len(data.ids)})", "dim"), 1))
        if rec is not None and rec.hypothesis:
            parts.append((Text(f"  {rec.hypothesis}", "dim"), 4))
        line.update(fit_line(parts, self._width(line)))

    def _draw_counts(self) -> None:
        p = self.plotted
        parts: list[Part] = [(Text(f"{len(p.data.ids):,} points"), 0)]
        if p.non_finite:
            parts.append((Text(f" · {p.non_finite} non-finite left out", "yellow"), 0))
        if p.missing_y:
            parts.append((Text(f" · {p.missing_y} without {self.metric}"), 1))
        if p.missing_x:
            parts.append((Text(f" · {p.missing_x} without {self.x_name}"), 1))
        metrics = self.metrics()
        if self.metric in metrics:
            parts.append((Text(f" · y {metrics.index(self.metric) + 1} of {len(metrics)} (M)", "dim"), 2))
        params = self.param_names()
        if params:
            parts.append((Text(f" · {len(params)} parameter{'s' if len(params) != 1 else ''} (V)", "dim"), 3))
        line = self.query_one("#an-counts", Static)
        line.update(fit_line(parts, self._width(line)))

    # ------------------------------------------------------------------ keys

    def action_point(self, step: int) -> None:
        data = self.plotted.data
        if data.selected is None:
            return
        self._select(max(0, min(len(data.ids) - 1, data.selected + step)))

    def action_point_edge(self, end: int) -> None:
        data = self.plotted.data
        if data.ids:
            self._select(len(data.ids) - 1 if end else 0)

    def _select(self, index: int) -> None:
        data = self.plotted.data
        if index == data.selected:
            return
        data.selected = index
        self.selected_id = data.ids[index]
        self.query_one("#an-chart", MetricChart).show(data, log_y=self.log_y)
        self._draw_point()

    @on(MetricChart.PointClicked)
    def _clicked(self, message: MetricChart.PointClicked) -> None:
        """A click selects the point nearest it; a click on the selected point opens its trial."""
        if message.index == self.plotted.data.selected:
            self.action_open_trial()
        else:
            self._select(message.index)

    def action_open_trial(self) -> None:
        data = self.plotted.data
        if data.selected is None:
            self.notify("no point selected", severity="warning")
            return
        self.post_message(OpenTrial(self.session, data.ids[data.selected], list(data.ids)))

    def action_metric(self) -> None:
        metrics = self.metrics()
        i = metrics.index(self.metric) if self.metric in metrics else -1
        self.metric = metrics[(i + 1) % len(metrics)]
        self.redraw()

    def action_wall_time(self) -> None:
        self.x_axis = "order" if self.x_axis == "time" else "time"
        self.redraw()

    def action_parameter(self) -> None:
        params = self.param_names()
        if not params:
            self.notify("no parameters: the task has no search_space and no proposal records a numeric meta key",
                        severity="warning")
            return
        keys = [f"param:{p}" for p in params]
        if self.x_axis in keys:
            i = keys.index(self.x_axis) + 1
            self.x_axis = keys[i] if i < len(keys) else "order"
        else:
            self.x_axis = keys[0]
        self.redraw()

    def action_log_scale(self) -> None:
        self.log_y = not self.log_y
        self.redraw()

    def action_back(self) -> None:
        self.app.pop_screen()
