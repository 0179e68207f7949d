"""The score chart: every scored trial as a point, the best-so-far as a step line, the baseline.

Plotext rebuilds the whole figure on every render, so the chart is redrawn at most once per
``min_interval`` seconds however fast the run appends (a dirty flag and a timer coalesce
updates), and more points than the plot has columns are reduced to each column's minimum and
maximum, which keeps every outlier visible.
"""

from __future__ import annotations

import time

from textual_plotext import PlotextPlot

from rrma.state import RunState


def chart_series(state: RunState, max_points: int = 400) -> tuple[list[float], list[float], list[float], list[float]]:
    """(xs, ys) of scored agent trials and (bx, by) of the best-so-far line, x = trial number."""
    xs: list[float] = []
    ys: list[float] = []
    bx: list[float] = []
    by: list[float] = []
    promoted = {tid for tid, _ in state.best_history}
    best: float | None = None
    for base_id in state.baseline_ids:
        rec = state.trials.get(base_id)
        if rec is not None and rec.promoted and rec.score is not None:
            best = rec.score
    if best is None and state.baseline_mean is not None:
        best = state.baseline_mean
    for n, rec in enumerate(state.agent_trials(), start=1):
        if rec.score is not None and rec.status == "ok":
            xs.append(n)
            ys.append(rec.score)
        if rec.trial_id in promoted and rec.score is not None:
            best = rec.score
        if best is not None:
            bx.append(n)
            by.append(best)
    if len(xs) > max_points:
        xs, ys = _reduce(xs, ys, max_points // 2)
    if len(bx) > max_points:
        bx, by = _reduce(bx, by, max_points // 2)
    return xs, ys, bx, by


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


class ScoreChart(PlotextPlot):
    """Plot of a RunState; call :meth:`update_from` as often as you like."""

    def __init__(self, *, min_interval: float = 1.0, id: str | None = None) -> None:
        super().__init__(id=id)
        self.min_interval = min_interval
        self._state: RunState | None = None
        self._dirty = False
        self._drawn_at = 0.0

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(self.min_interval / 2, self._maybe_draw)

    def update_from(self, state: RunState, *, now: bool = False) -> None:
        self._state = state
        self._dirty = True
        if now or time.monotonic() - self._drawn_at >= self.min_interval:
            self._draw()

    def _maybe_draw(self) -> None:
        if self._dirty and time.monotonic() - self._drawn_at >= self.min_interval:
            self._draw()

    def _draw(self) -> None:
        state = self._state
        self._dirty = False
        self._drawn_at = time.monotonic()
        if state is None:
            return
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        metric = str(state.task.get("metric", {}).get("name", "score"))
        plt.title(f"{metric} by trial ({state.direction})")
        xs, ys, bx, by = chart_series(state)
        if xs:
            plt.scatter(xs, ys, marker="dot", color="cyan", label="trial")
        if bx:
            plt.plot(bx, by, marker="braille", color="green", label="best so far")
        if state.baseline_mean is not None and (xs or bx):
            plt.hline(state.baseline_mean, "red")
        plt.xlabel("trial")
        self.refresh()
