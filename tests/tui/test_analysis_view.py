"""Analysis (`A` on the dashboard): any metric the trials record against trial order, wall time or a parameter;
a selected point opens its trial; the dashboard's filter carries over; 80x24.

The run is written by hand through RunStore (fixed clock): a baseline whose train.py sets LR, OPT and BS; a
random-search agent (alice) whose proposals record the constants they change in ``meta["changes"]``; an editing
agent (bob) who rewrites train.py (its value read from the edit) and records ``meta["turns"]``; metrics
``peak_rss_mb`` and ``steps`` beside the score; a crash that still reports its memory; a trial left running.
What the chart must hold is computed from what the fixture wrote (TRUTH) and from events.jsonl, never from
the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from make_run import START, fake_clock, task_snapshot
from screen_text import screen_lines as _screen_lines
from test_tui_keys import bindings, documented
from textual.widgets import Static
from tui_helpers import fixed_clock, settle
from tui_helpers import wait_until as _wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.analysis import AnalysisScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.trial import TrialScreen
from tui.widgets.metric_chart import Frame, MetricChart, linear_ticks, log_ticks, thin, tick_label

TRAIN = 'LR = {lr}\nOPT = "{opt}"\nBS = {bs}\n\nprint("val_loss: 2.0")\n'
SPACE = {"train.py:LR": {"kind": "log_uniform", "low": 1e-4, "high": 1.0},
         "train.py:OPT": {"kind": "choice", "choices": ["adam", "sgd"]},
         "train.py:BS": {"kind": "int", "low": 8, "high": 128}}
# trial id -> (agent, parent, the constants it changes, status, score, metrics); None score: no score
PLAN: list[tuple[str, str, str, dict[str, Any], str, float | None, dict[str, Any]]] = [
    ("t0001", "alice", "base-0", {"LR": 0.03}, "ok", 2.31, {"peak_rss_mb": 812.5, "steps": 1000}),
    ("t0002", "bob", "base-0", {"BS": 64}, "ok", 2.45, {"peak_rss_mb": 1530.0, "steps": 900}),
    ("t0003", "alice", "t0001", {"OPT": "sgd"}, "ok", 2.28, {"peak_rss_mb": 790.25, "steps": 1000}),
    ("t0004", "bob", "t0003", {"LR": 0.0004}, "crash", None, {"peak_rss_mb": 2048.0}),
    ("t0005", "alice", "t0003", {"LR": 0.3, "BS": 16}, "ok", 2.5, {"peak_rss_mb": 400.0, "steps": 1200}),
    ("t0006", "bob", "t0003", {"BS": 128}, "ok", 2.27, {"peak_rss_mb": 3100.0, "steps": 800,
                                                         "awaiting_review": False}),
]
BASE = {"LR": 0.01, "OPT": "adam", "BS": 32}


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)


def screen_lines(app: Any) -> list[str]:
    return _screen_lines(app)


def truth() -> dict[str, dict[str, Any]]:
    """Each trial's whole parameter set (parent's, then its changes) and what it recorded."""
    params = {"base-0": dict(BASE)}
    out: dict[str, dict[str, Any]] = {}
    for tid, agent, parent, changes, status, score, metrics in PLAN:
        params[tid] = {**params[parent], **changes}
        out[tid] = {"agent": agent, "params": params[tid], "status": status, "score": score, "metrics": metrics}
    return out


TRUTH = truth()


def analysis_run(runs: Path, run_id: str = "an-run") -> Path:
    run_dir = runs / run_id
    store = RunStore(run_dir, create=True)
    task = task_snapshot("analysis", hitl=False, max_trials=8, agents=["alice", "bob"])
    task["search_space"] = SPACE
    with fake_clock(START, step_s=7.0):
        store.append("run.started", "harness", {"run_id": run_id, "task_name": "analysis", "task": task})
        base_file = store.put_blob(TRAIN.format(lr=BASE["LR"], opt=BASE["OPT"], bs=BASE["BS"]))
        store.append_many([
            ("trial.proposed", "harness", {"trial_id": "base-0", "parent": None, "agent": "baseline",
                                           "hypothesis": "baseline", "baseline": True,
                                           "proposal_blob": store.put_json_blob({"edits": []}),
                                           "manifest_blob": store.put_json_blob({"train.py": base_file})}),
            ("trial.started", "harness", {"trial_id": "base-0"}),
            ("trial.finished", "oracle", {"trial_id": "base-0", "status": "ok", "score": 2.4, "seconds": 30.0,
                                          "metrics": {"peak_rss_mb": 1000.0, "steps": 1000}}),
        ])
        store.append("baseline.measured", "harness", {"trial_ids": ["base-0"], "scores": [2.4], "mean": 2.4,
                                                      "sigma": 0.01, "floor": 0.02})
        for n, (tid, agent, parent, changes, status, score, metrics) in enumerate(PLAN):
            p = TRUTH[tid]["params"]
            text = TRAIN.format(lr=p["LR"], opt=p["OPT"], bs=p["BS"])
            blob = store.put_blob(text)
            if agent == "alice":  # random search: the changed constants' literals
                meta: dict[str, Any] = {"changes": {f"train.py:{k}": (repr(v) if k == "OPT" else str(v))
                                                    for k, v in changes.items()}}
            else:
                meta = {"turns": 3 + n}
            store.append_many([
                ("trial.proposed", f"agent:{agent}", {
                    "trial_id": tid, "parent": parent, "agent": agent, "hypothesis": f"change {sorted(changes)}",
                    "proposal_blob": store.put_json_blob({"edits": []}), "meta": meta,
                    "edits": [{"path": "train.py", "blob": blob}],
                    "manifest_blob": store.put_json_blob({"train.py": blob})}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {"trial_id": tid, "status": status, "score": score, "metrics": metrics,
                                              "seconds": 20.0 + n}),
            ])
        store.append_many([  # a trial still running: no point yet
            ("trial.proposed", "agent:alice", {"trial_id": "t0007", "parent": "t0006", "agent": "alice",
                                               "proposal_blob": store.put_json_blob({"edits": []}),
                                               "meta": {"changes": {"train.py:LR": "0.05"}}}),
            ("trial.started", "harness", {"trial_id": "t0007"}),
        ])
    store.close()
    return run_dir


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def finish(run_dir: Path, tid: str, agent: str, score: float, peak: float) -> None:
    """Append one more finished trial of ``agent`` (the run goes on)."""
    store = RunStore(run_dir)
    store.append_many([
        ("trial.proposed", f"agent:{agent}", {"trial_id": tid, "parent": "t0006", "agent": agent,
                                              "proposal_blob": store.put_json_blob({"edits": []})}),
        ("trial.started", "harness", {"trial_id": tid}),
        ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "seconds": 5.0,
                                      "metrics": {"peak_rss_mb": peak}}),
    ])
    store.close()


def app_for(runs: Path, run_dir: Path) -> RRMAApp:
    return RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


async def open_analysis(pilot: Any, *keys: str) -> AnalysisScreen:
    """The dashboard, ``keys`` pressed there (filters), then ``A``."""
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    await pilot.pause()
    for key in keys:
        await pilot.press(key)
    await pilot.press("A")
    await wait_until(pilot, lambda: isinstance(app.screen, AnalysisScreen))
    await pilot.pause()
    return app.screen  # type: ignore[no-any-return]


def chart(screen: AnalysisScreen) -> MetricChart:
    return screen.query_one("#an-chart", MetricChart)


def text_of(screen: AnalysisScreen, selector: str) -> str:
    content = screen.query_one(selector, Static).content
    return content.plain if hasattr(content, "plain") else str(content)


def points(screen: AnalysisScreen) -> dict[str, tuple[float, float]]:
    data = chart(screen).data
    return {tid: (x, y) for tid, x, y in zip(data.ids, data.xs, data.ys, strict=True)}


async def check_80x24(pilot: Any, screen: AnalysisScreen) -> None:
    """At 80x24: a click selects and opens a point; in every mode nothing is cut, every y tick and the selected
    point's y are whole on screen."""
    app = pilot.app
    await pilot.resize_terminal(80, 24)
    await pilot.pause(0.1)
    # the mouse: a click on a drawn point selects it (the ◆ is drawn where the click was); a second opens it
    lines = screen_lines(app)
    row = next(r for r, line in enumerate(lines) if "•" in line)
    col = lines[row].index("•")
    before = screen.selected_id
    await pilot.click(offset=(col, row))
    await pilot.pause()
    assert screen.selected_id != before and screen_lines(app)[row][col] == "◆"
    clicked = screen.selected_id
    await pilot.click(offset=(col, row))
    await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
    assert app.screen.trial_id == clicked
    await pilot.press("escape")
    await wait_until(pilot, lambda: app.screen is screen)
    for keys in [(), ("M", "M"), ("W",), ("V",), ("V",), ("V",), ("L",)]:
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.05)
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert len(lines) == 24 and "…" not in text, text
        assert chart(screen).title_text in text  # the chart's title whole on its line
        for tick in chart(screen).y_ticks:  # every y tick whole on screen
            assert f"{tick_label(tick)}┤" in text, (tick, text)
        sel = chart(screen).data.selected
        assert sel is not None and text.count("◆") == 2, text  # the selected point drawn, and named under it
        assert f"{screen.metric} {chart(screen).data.ys[sel]:.5g}" in text  # the selected y, whole


@pytest.mark.asyncio
async def test_analysis_metrics_wall_time_parameters_and_opening_a_point(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = analysis_run(runs)
    log = events(run_dir)
    order = [e["data"]["trial_id"] for e in log if e["kind"] == "trial.proposed"]
    app = app_for(runs, run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_analysis(pilot)
        assert screen.trial_ids is None and "all 8 trials" in text_of(screen, "#an-title")
        # y = score, x = the trial's number as the dashboard's chart has it (the agent trials from 1, in proposal
        # order; the baseline at 0): every finished trial with a score (the crash and the running one are not)
        scored = {tid: v["score"] for tid, v in TRUTH.items() if v["score"] is not None}
        agent_order = [t for t in order if t != "base-0"]
        assert points(screen) == {"base-0": (0.0, 2.4)} | {t: (float(agent_order.index(t) + 1), s)
                                                           for t, s in scored.items()}
        assert chart(screen).data.ids == ["base-0", *scored]  # sorted by x
        assert "1 without score" in text_of(screen, "#an-counts")  # the crash
        assert chart(screen).title_text.startswith("score (val_loss, minimize) by trial")

        # M cycles y through score, seconds and every numeric metric (a boolean is no metric)
        assert screen.metrics() == ["score", "seconds", "peak_rss_mb", "steps"]
        await pilot.press("M")
        assert screen.metric == "seconds"
        seconds = {e["data"]["trial_id"]: e["data"]["seconds"] for e in log if e["kind"] == "trial.finished"}
        assert {t: y for t, (_, y) in points(screen).items()} == seconds
        await pilot.press("M")
        peaks = {t: v["metrics"]["peak_rss_mb"] for t, v in TRUTH.items()} | {"base-0": 1000.0}
        assert {t: y for t, (_, y) in points(screen).items()} == peaks  # the crash reported its memory: a point
        assert "peak_rss_mb by trial" in chart(screen).title_text

        # W: x is the wall time from run.started to each trial.finished (in minutes: the run spans over 2 min)
        await pilot.press("W")
        start = ts(log[0]["ts"])
        finished = {e["data"]["trial_id"]: (ts(e["ts"]) - start).total_seconds() for e in log
                    if e["kind"] == "trial.finished"}
        assert max(finished.values()) > 120
        assert {t: x for t, (x, _) in points(screen).items()} == pytest.approx({t: s / 60 for t, s in finished.items()})
        assert chart(screen).data.x_unit == "m" and "peak_rss_mb by wall time" in chart(screen).title_text
        assert chart(screen).data.ids == sorted(finished, key=finished.__getitem__)

        # the cursor: End selects the last point (latest finished), ← moves back one; Enter opens that trial
        await pilot.press("end", "left")
        latest_first = sorted(finished, key=finished.__getitem__)
        assert screen.selected_id == latest_first[-2]
        point_line = text_of(screen, "#an-point")
        assert latest_first[-2] in point_line and f"peak_rss_mb {peaks[latest_first[-2]]:.5g}" in point_line
        assert f"wall time {finished[latest_first[-2]] / 60:.5g}m" in point_line
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        assert app.screen.trial_id == latest_first[-2]  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        await pilot.press("W")  # back to trial order
        assert screen.x_axis == "order"

        # V: parameter against the metric; values from meta changes, from an edit, inherited, from the baseline
        await pilot.press("M", "M")  # steps, then round to score
        assert screen.metric == "score"
        assert screen.param_names() == ["train.py:BS", "train.py:LR", "train.py:OPT", "meta.turns"]  # in name order
        await pilot.press("V")
        bs = {t: float(v["params"]["BS"]) for t, v in TRUTH.items() if v["score"] is not None} | {"base-0": 32.0}
        assert {t: x for t, (x, _) in points(screen).items()} == bs
        assert not chart(screen).data.x_log and "score (val_loss, minimize) by train.py:BS" in chart(screen).title_text
        await pilot.press("V")
        lr = {t: v["params"]["LR"] for t, v in TRUTH.items() if v["score"] is not None} | {"base-0": BASE["LR"]}
        assert {t: x for t, (x, _) in points(screen).items()} == lr
        assert chart(screen).data.x_log  # a log-uniform dimension
        await pilot.press("V")
        data = chart(screen).data
        assert data.x_kind == "choice" and data.x_labels == ["adam", "sgd"]
        opt = {t: v["params"]["OPT"] for t, v in TRUTH.items() if v["score"] is not None} | {"base-0": "adam"}
        assert {t: data.x_labels[int(x)] for t, (x, _) in points(screen).items()} == opt
        await pilot.press("V")
        turns = {e["data"]["trial_id"]: float(e["data"]["meta"]["turns"]) for e in log
                 if e["kind"] == "trial.proposed" and "turns" in e["data"].get("meta", {})}
        assert {t: x for t, (x, _) in points(screen).items()} == {t: x for t, x in turns.items() if t in scored}
        assert "without meta.turns" in text_of(screen, "#an-counts")
        await pilot.press("V")
        assert screen.x_axis == "order"

        # L: log scale of y (every score > 0)
        await pilot.press("L")
        assert chart(screen).log_active and "log y" in chart(screen).title_text

        # live: a trial finishing now becomes a point (unfiltered)
        finish(run_dir, "t0008", "alice", 2.2, 500.0)
        await wait_until(pilot, lambda: "t0008" in points(screen))
        assert points(screen)["t0008"] == (8.0, 2.2) and "all 9 trials" in text_of(screen, "#an-title")

        # a value the log cannot hold (allow_nan=False) but a state could: left out and counted
        screen.state.trials["t0001"].score = float("nan")
        screen.redraw()
        assert "t0001" not in points(screen) and "1 non-finite left out" in text_of(screen, "#an-counts")

        await check_80x24(pilot, screen)


@pytest.mark.asyncio
async def test_analysis_keeps_to_the_dashboards_filter(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = analysis_run(runs)
    app = app_for(runs, run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        dashboard = app.screen
        assert isinstance(dashboard, DashboardScreen)
        while dashboard.agent_filter != "bob":  # `a` cycles the agents
            await pilot.press("a")
        shown = dashboard.visible_ids()
        screen = await open_analysis(pilot)
        bobs = [t for t, v in TRUTH.items() if v["agent"] == "bob"]
        assert sorted(screen.trial_ids or []) == sorted(shown) == sorted(bobs)
        assert sorted(points(screen)) == sorted(t for t in bobs if TRUTH[t]["score"] is not None)
        assert "filtered: agent bob, 3 of 8 trials" in text_of(screen, "#an-title")
        await pilot.press("M", "M")
        assert sorted(points(screen)) == sorted(bobs)  # peak_rss_mb: the crash too
        # a trial that arrives later is not added (the rule: the ids the table showed), the total moves on
        finish(run_dir, "t0008", "bob", 2.2, 500.0)
        await wait_until(pilot, lambda: "3 of 9 trials" in text_of(screen, "#an-title"))
        assert "t0008" not in points(screen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is dashboard)

        # a status filter: only the crash
        await pilot.press("c")
        while dashboard.status_filter != "crash":
            await pilot.press("f")
        screen = await open_analysis(pilot)
        assert screen.trial_ids == ["t0004"] and "status crash, 1 of 9 trials" in text_of(screen, "#an-title")
        # the command palette opens the same view, with the same filter; no "Theorems" in a run with no theorem
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is dashboard)
        commands = {c.title: c for c in app.get_system_commands(dashboard)}
        assert "Theorems" not in commands
        commands["Analysis"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, AnalysisScreen))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen) and screen.trial_ids == ["t0004"]
        assert points(screen) == {}
        assert "no finished trial has a finite score" in text_of(screen, "#an-point")
        await pilot.press("M", "M")
        assert points(screen) == {"t0004": (4.0, 2048.0)}


def test_analysis_keys_mean_one_thing_and_are_documented() -> None:
    keys = [key for key, _ in bindings(AnalysisScreen)]
    assert len(keys) == len(set(keys))
    assert documented("Analysis") == set(keys)
    dashboard = dict(bindings(DashboardScreen))
    assert dashboard["A"] == "analysis" and dashboard["L"] == "log_scale"
    for key, action in bindings(AnalysisScreen):  # the same meaning as on the dashboard
        if key in dashboard and key not in ("Enter", "Esc"):
            assert dashboard[key] == action, key


def test_ticks_are_round_and_whole() -> None:
    assert linear_ticks(2.27, 2.5, 6) == [2.3, 2.35, 2.4, 2.45, 2.5]  # 0.05 apart, no float noise
    assert linear_ticks(2.27, 2.5, 5) == [2.3, 2.4, 2.5]  # 0.0575 apart would not be round: 0.1
    assert linear_ticks(0, 1000, 3) == [0.0, 500.0, 1000.0]
    assert log_ticks(1e-4, 1.0, 5) == [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    assert log_ticks(2.27, 2.5, 5) == linear_ticks(2.27, 2.5, 5)  # within a decade: round linear values
    assert [tick_label(v) for v in (2.5e-7, 150000.0, 0.0, 0.35, -12.0)] == ["2.5e-7", "150000", "0", "0.35", "-12"]
    assert tick_label(30.0, "s") == "30s"
    assert linear_ticks(18.4, 61.6, 5, outer=True) == [20.0, 40.0, 60.0]  # 1.6 past 20 and 60: no more
    assert linear_ticks(20.3, 59.9, 5, outer=True) == [20.0, 30.0, 40.0, 50.0, 60.0]  # 9.7 below 30: 20 too


def test_thousands_of_points_are_thinned_to_what_the_plot_can_show() -> None:
    """One point per cell; past the limit, each column's lowest and highest: every outlier is still drawn."""
    frame = Frame(80, 20, 4, (0.0, 1000.0), (0.0, 1.0), False, False)
    xs = [float(i) for i in range(1000)]
    ys = [((i * 7919) % 1000) / 1000 for i in range(1000)]
    ys[500] = 1.0  # an outlier
    dx, dy, reduced = thin(xs, ys, frame, 10_000)
    cells = {(round(c), round(r)) for c, r in (frame.cell(x, y) for x, y in zip(xs, ys, strict=True))}
    assert not reduced and len(dx) == len(cells) < len(xs)
    dx, dy, reduced = thin(xs, ys, frame, 100)
    assert reduced and len(dx) <= 2 * 80 and 1.0 in dy and min(ys) in dy


def test_snapshot_analysis_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    run_dir = analysis_run(runs)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_analysis(pilot)
        await pilot.press("M", "M", "left")
        await settle(pilot)

    assert snap_compare(app_for(runs, run_dir), terminal_size=(80, 24), run_before=run_before)
