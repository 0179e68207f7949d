"""Comparing two runs (issue 24, "compare two runs from the runs list"): space marks a run in the runs list, `=`
on another opens RunCompareScreen; its summary table, best-so-far chart (by trial and by wall time), the paired
figure, the different-task warning, following a live run, Enter to a run's dashboard; the runs list's refusals
(nothing marked, the same run twice, an unreadable run); 80x24.

The runs are written through RunStore (scored_run.py, make_run.py); what the screen must say is read back from
events.jsonl itself (json), not from the code under test.
"""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from make_run import START, fake_clock, make_run
from rich.text import Text
from scored_run import write_scored_run
from screen_text import flat, screen_lines
from textual.widgets import Static
from tui_helpers import fixed_clock, settle, wait_until

from rrma.log.state import delta_sigma
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.run_compare import DIFFERENT_TASKS, RunCompareScreen
from tui.screens.runs import RunsScreen
from tui.widgets.line_table import LineTable
from tui.widgets.trial_text import fmt_score, fmt_sigma

A_SCORES = [1.2, 0.9, None, 0.95, 0.7, 0.8]  # minimize: t0002 then t0005 promoted; t0003 crashes
B_SCORES = [0.98, 0.85, 0.99, None, None]  # minimize: t0001, t0002 promoted; two crashes; still running


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def logged(run_dir: Path) -> dict[str, Any]:
    """What the log itself says: promoted scores in order, the best, counts of agent trial outcomes, baseline."""
    evs = events(run_dir)
    promoted = [(e["data"]["trial_id"], e["data"]["score"]) for e in evs if e["kind"] == "trial.promoted"]
    baseline = next(e["data"] for e in evs if e["kind"] == "baseline.measured")
    counts: dict[str, int] = {}
    for e in evs:
        if e["kind"] == "trial.finished" and not e["data"]["trial_id"].startswith("base-"):
            counts[e["data"]["status"]] = counts.get(e["data"]["status"], 0) + 1
    return {"promoted": promoted, "best": promoted[-1], "counts": counts, "mean": baseline["mean"],
            "sigma": baseline["sigma"]}


def app_for(runs: Path) -> Any:  # Any: its pilot and screens go to helpers typed for App[object]
    return RRMAApp(runs, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


async def runs_listed(pilot: Any, names: list[str]) -> RunsScreen:
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, RunsScreen) and all(
        app.screen.summaries.get(n) is not None and app.screen.summaries[n].status != "reading…" for n in names))
    return app.screen  # type: ignore[no-any-return]


async def press_on(pilot: Any, screen: RunsScreen, name: str, key: str) -> None:
    assert screen.query_one("#runs", LineTable).move_to(name)
    await pilot.press(key)
    await pilot.pause()


async def compare(pilot: Any, marked: str, other: str) -> RunCompareScreen:
    app = pilot.app
    screen = await runs_listed(pilot, [marked, other])
    if screen.marked != marked:
        await press_on(pilot, screen, marked, "space")
    await press_on(pilot, screen, other, "equals_sign")
    await wait_until(pilot, lambda: isinstance(app.screen, RunCompareScreen) and app.screen.loaded)
    await pilot.pause(0.1)
    return app.screen  # type: ignore[no-any-return]


def notified(app: Any, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


def two_runs(runs: Path) -> tuple[Path, Path]:
    a = write_scored_run(runs, "a-min", A_SCORES, direction="minimize")
    b = write_scored_run(runs, "b-min", B_SCORES, direction="minimize", baseline=(1.0, 1.002, 0.998), finished=False)
    return a, b


@pytest.mark.asyncio
async def test_mark_compare_chart_follow_and_open(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    a_dir, b_dir = two_runs(runs)
    app = app_for(runs)
    async with app.run_test(size=(120, 40)) as pilot:
        listed = await runs_listed(pilot, ["a-min", "b-min"])
        await press_on(pilot, listed, "a-min", "space")
        assert listed.marked == "a-min"
        assert "● a-min marked" in str(listed.query_one("#runs-title", Static).content)
        assert str(listed._row("a-min")[0]) == "● a-min" and str(listed._row("b-min")[0]) == "b-min"
        screen = await compare(pilot, "a-min", "b-min")
        a, b = screen.sides
        assert (a.run_dir, b.run_dir) == (a_dir, b_dir)  # the marked run is A, the highlighted one B

        text = flat(screen_lines(app))
        for run_dir, facts, scores in ((a_dir, a, A_SCORES), (b_dir, b, B_SCORES)):
            log = logged(run_dir)
            best_id, best = log["best"]
            assert (facts.best_id, facts.best) == (best_id, best)
            assert f"{best_id} {fmt_score(best)}" in text  # in the table and the legend
            assert facts.counts == log["counts"]
            assert ", ".join(f"{s} {n}" for s, n in sorted(log["counts"].items(), key=lambda kv: kv[0] != "ok")) in text
            assert f"{len(scores)} of {len(scores)}" in text  # trials of max_trials
            assert fmt_sigma(delta_sigma(best, log["mean"], log["sigma"], "minimize")) in text
            # the chart's line for this run: the promoted scores, in order, never rising (minimize)
            for series in (facts.by_trial, facts.by_time):
                ys = series[1]
                assert all(later <= earlier for earlier, later in itertools.pairwise(ys)), ys
                assert list(dict.fromkeys(ys)) == [score for _, score in log["promoted"]]
        assert "stopped (no driver)" in text and "finished: max_trials" in text
        assert DIFFERENT_TASKS not in text
        drawn = screen.series()
        assert [i for i, _ in drawn] == [0, 1] and drawn[1][1] == b.by_trial
        assert b.by_trial[0][-1] == len(B_SCORES)  # x = trial number, to the last trial

        # the paired figure: B's best against A's, in each baseline's σ
        gain = a.best - b.best  # type: ignore[operator]
        assert f"B {fmt_score(abs(gain))} {'better' if gain > 0 else 'worse'}" in text
        assert f"= {fmt_sigma(delta_sigma(b.best, a.best, a.sigma, 'minimize'))} (A's σ)" in text

        await pilot.press("W")  # x = wall time: the same lines, by seconds since each run started
        await pilot.pause()
        assert screen.by_time and screen.series()[0][1] == a.by_time
        assert "wall time" in flat(screen_lines(app))
        assert a.by_time[0][-1] == pytest.approx((len(events(a_dir)) - 1) * 3.0)  # fake clock: 3 s per event

        # B is live: an appended better trial shows up without a key
        store = RunStore(b_dir)
        with fake_clock(START + timedelta(hours=1)):
            store.append_many([
                ("trial.proposed", "agent:ann", {"trial_id": "t0006", "parent": "t0002", "agent": "ann",
                                                 "hypothesis": "one more",
                                                 "proposal_blob": store.put_json_blob({"hypothesis": "one more"})}),
                ("trial.started", "harness", {"trial_id": "t0006"}),
                ("trial.finished", "oracle", {"trial_id": "t0006", "status": "ok", "score": 0.5, "seconds": 2.0}),
            ])
            store.append("trial.promoted", "harness", {"trial_id": "t0006", "score": 0.5, "previous_best": "t0002",
                                                       "previous_score": 0.85})
        store.close()
        await wait_until(pilot, lambda: screen.sides[1].best_id == "t0006")
        await pilot.pause(0.1)
        assert "t0006 0.5" in flat(screen_lines(app)) and screen.sides[1].by_time[1][-1] == 0.5

        await pilot.press("o")  # swap: B's run on the left
        await pilot.pause()
        assert screen.sides[0].run_dir == b_dir

        await pilot.press("down", "enter")  # the second row is now a-min: its dashboard opens
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        assert app.screen.session.run_dir == a_dir


@pytest.mark.asyncio
async def test_refusals_unreadable_different_tasks_and_80x24(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    a_dir, _ = two_runs(runs)
    make_run(runs, "tiny", trials=6, agents=("alice", "bob"))  # another task (tiny-train), minimize too
    broken = runs / "broken"
    broken.mkdir()
    (broken / "events.jsonl").write_bytes(b"\x93\x00 not an event at all\n")
    app = app_for(runs)
    async with app.run_test(size=(80, 24)) as pilot:
        listed = await runs_listed(pilot, ["a-min", "b-min", "tiny", "broken"])
        assert listed.summaries["broken"].status == "unreadable"
        await press_on(pilot, listed, "a-min", "equals_sign")  # nothing marked
        assert notified(app, "no run marked") and app.screen is listed
        await press_on(pilot, listed, "a-min", "space")
        await press_on(pilot, listed, "a-min", "equals_sign")  # the same run twice
        assert notified(app, "a-min is the marked run") and app.screen is listed
        await press_on(pilot, listed, "broken", "equals_sign")  # an unreadable run
        assert notified(app, "broken cannot be read") and app.screen is listed
        await press_on(pilot, listed, "a-min", "space")  # space on the marked run clears the mark
        assert listed.marked is None

        # a run unreadable by the time the screen reads it says why in its column; the other is shown
        screen_b = RunCompareScreen(a_dir, broken)
        await app.push_screen(screen_b)
        await wait_until(pilot, lambda: screen_b.loaded)
        await pilot.pause(0.1)
        text = flat(screen_lines(app))
        assert "unreadable:" in text and screen_b.sides[1].error and screen_b.sides[0].best_id == "t0005"
        await pilot.press("down", "enter")
        assert notified(app, "broken cannot be read") and app.screen is screen_b
        await pilot.press("escape")

        screen = await compare(pilot, "a-min", "tiny")
        lines = screen_lines(app)
        text = flat(lines)
        assert f"{DIFFERENT_TASKS} (A: scored, B: tiny-train)" in text
        warn = screen.query_one("#rc-warn", Static)
        assert warn.display and isinstance(warn.content, Text) and warn.content.style == "bold red"
        assert "B vs A" not in text  # no paired figure across tasks
        tiny = logged(runs / "tiny")
        assert f"{tiny['best'][0]} {fmt_score(tiny['best'][1])}" in text and "t0005 0.7" in text
        assert "alice, bob" in text
        # 80x24: nothing cut, the chart has room, q and ? in the footer
        assert not any("…" in line for line in lines), "\n".join(lines)
        assert screen.query_one("#rc-plot").size.height >= 5
        assert lines[-1].lstrip().startswith("q") and "?" in lines[-1]


def test_snapshot_run_compare_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    two_runs(runs)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await compare(pilot, "a-min", "b-min")
        await settle(pilot)

    assert snap_compare(app_for(runs), terminal_size=(80, 24), run_before=run_before)
