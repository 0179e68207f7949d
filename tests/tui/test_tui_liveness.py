"""Liveness like btop's (issue 24): the header's budget used, and a running trial's age.

Before, the header said `trials 4:` and `elapsed 3m12s` with nothing to measure them against, and no cost at
all; a running trial's `sec` cell was empty until it finished. Now the header says `trials 4 of 10:` (agent
trials as the loop counts them against budget.max_trials: baseline repeats not counted), `elapsed 3m12s of
60m` (budget.max_wall_seconds; after a resume the driver's own clock, which is what the limit counts), and
`cost $0.42 of $5.00` (the agents' model cost of their summed budget_usd caps); a proof run shows its current
theorem's budget (attempts and seconds of loop.attempts_per_theorem and loop.theorem_seconds) instead of a
run-wide "of max". A running trial's `sec` shows how long it has run, and ticks once a second with no event.

The runs are written through RunStore with a fake clock (an event every 3 s from make_run.START); the app's
clock is a value the test moves, so every age shown is known exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from live_events import run_events
from make_run import fake_clock
from screen_text import screen_lines as _screen_lines
from test_tui_screens import open_dashboard
from textual.widgets import Static
from tui_helpers import plain
from tui_helpers import wait_until as _wait_until

from rrma.log.driver_lock import DriverLock
from rrma.log.events import parse_ts
from rrma.log.reader import RunReader
from rrma.log.state import RunState
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.durations import human_duration
from tui.session import RunSession
from tui.widgets.line_table import LineTable
from tui.widgets.run_header import header_text
from tui.widgets.trial_text import fmt_age

TICK_WAIT = 3.0  # the dashboard redraws the header and running rows every second: seconds to wait for one


async def wait_until(pilot: Any, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    await _wait_until(pilot, predicate, timeout)


def screen_lines(app: Any) -> list[str]:
    return _screen_lines(app)


class Clock:
    """The app's clock: a fixed instant the test moves on."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def task(**over: Any) -> dict[str, Any]:
    budget = {"max_trials": 10, "max_wall_seconds": 3600.0, **over.pop("budget", {})}
    agents = over.pop("agents", [{"name": "alice", "backend": "anthropic", "budget_usd": 2.0},
                                 {"name": "bob", "backend": "anthropic", "budget_usd": 3.0}])
    return {"name": "tiny", "metric": {"name": "loss", "direction": "minimize"}, "budget": budget,
            "loop": {"policy": "keep-revert", "agents_parallel": 1, **over.pop("loop", {})}, "agents": agents, **over}


def propose(store: RunStore, tid: str, agent: str, **extra: Any) -> tuple[str, str, dict[str, Any]]:
    blob = store.put_json_blob({"hypothesis": f"idea {tid}", "edits": []})
    actor = "harness" if extra.get("baseline") else f"agent:{agent}"
    return ("trial.proposed", actor, {"trial_id": tid, "parent": None, "agent": agent, "hypothesis": f"idea {tid}",
                                      "proposal_blob": blob, **extra})


def finish(tid: str, status: str = "ok", score: float | None = 1.0) -> tuple[str, str, dict[str, Any]]:
    return ("trial.finished", "oracle", {"trial_id": tid, "status": status, "score": score, "seconds": 12.5})


def turn(agent: str, cost: float) -> tuple[str, str, dict[str, Any]]:
    return ("agent.turn", f"agent:{agent}", {"agent": agent, "role": "assistant", "text": "thinking", "cost_usd": cost})


def write_run(runs: Path, name: str = "live", *, snapshot: dict[str, Any] | None = None) -> Path:
    """A live run: a baseline repeat, two finished agent trials, one running (t0003), one proposed (t0004), and
    model turns costing $0.42 in all. One event every 3 s from START."""
    store = RunStore(runs / name, create=True)
    with fake_clock():
        store.append("run.started", "harness", {"run_id": name, "task_name": "tiny", "task": snapshot or task()})
        store.append_many([propose(store, "base-0", "baseline", baseline=True), ("trial.started", "harness",
                           {"trial_id": "base-0"}), finish("base-0", score=2.0)])
        store.append_many([turn("alice", 0.25), propose(store, "t0001", "alice"),
                           ("trial.started", "harness", {"trial_id": "t0001"}), finish("t0001")])
        store.append_many([turn("bob", 0.17), propose(store, "t0002", "bob"),
                           ("trial.started", "harness", {"trial_id": "t0002"}), finish("t0002", "crash", None)])
        store.append_many([propose(store, "t0003", "alice"), ("trial.started", "harness", {"trial_id": "t0003"}),
                           propose(store, "t0004", "bob")])
    store.close()
    return runs / name


events = run_events  # whole lines only: the run writes the log while the test reads it


def ts_of(run_dir: Path, kind: str, trial_id: str | None = None, last: bool = False) -> datetime:
    found = [e["ts"] for e in events(run_dir) if e["kind"] == kind
             and (trial_id is None or e["data"].get("trial_id") == trial_id)]
    when = parse_ts(found[-1] if last else found[0])
    assert when is not None
    return when


def header_lines(app: RRMAApp) -> list[str]:
    return [line.strip() for line in plain(app.screen.query_one("#run-header", Static).content, width=200)
            .splitlines()]


def sec_cell(app: RRMAApp, trial_id: str) -> str:
    """The `sec` cell of a trial's row as drawn on screen (the column under the table's `sec` label)."""
    lines = screen_lines(app)
    head = next(line for line in lines if re.search(r"│id\s", line) and " sec " in line)
    end = head.index(" sec ") + len(" sec")  # the column is right-aligned under its label
    row = next(line for line in lines if re.match(rf"│.?{trial_id} ", line))
    return row[end - 5:end].strip()


# --------------------------------------------------------------------------- the dashboard (Pilot)


@pytest.mark.asyncio
async def test_header_budget_at_80x24_and_a_running_trials_age_ticks(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = write_run(runs)
    started, run_start = ts_of(run_dir, "trial.started", "t0003"), ts_of(run_dir, "run.started")
    clock = Clock(started + timedelta(seconds=187))
    with DriverLock(run_dir):  # this test process drives the run, as a headless driver would
        app = RRMAApp(runs, run_dir, reviewer="carol", clock=clock, poll_interval=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            dash = await open_dashboard(pilot, app)
            # the cost comes with the turn index (turns are folded unparsed at open, indexed after the first paint)
            await wait_until(pilot, lambda: "cost $0.42" in header_lines(app)[0])
            lines = header_lines(app)
            elapsed = human_duration((clock.at - run_start).total_seconds())
            assert f"elapsed {elapsed} of 60m" in lines[0]
            assert "cost $0.42 of $5.00" in lines[0]  # alice $0.25 + bob $0.17, caps $2 + $3
            assert lines[2].startswith("trials 4 of 10:")  # base-0 is a baseline repeat: not counted
            screen = screen_lines(app)
            assert all("…" not in line for line in screen[:3]), screen[:3]  # nothing cut in the header
            assert all(len(line) <= 80 for line in screen)
            # the wall clock moves on with no event: elapsed ticks, measured against the same limit
            clock.at += timedelta(seconds=61)
            later = human_duration((clock.at - run_start).total_seconds())
            await wait_until(pilot, lambda: f"elapsed {later} of 60m" in header_lines(app)[0], timeout=TICK_WAIT)
            # at 80 columns the table leaves its sec column out: the header names the oldest running trial's age
            assert "running 1 (4m08s)" in header_lines(app)[2], header_lines(app)

            # wide enough for the table's `sec` column: t0003 has run 187 s + 61 s; t0004 has not started
            await pilot.resize_terminal(160, 30)
            await wait_until(pilot, lambda: " sec " in "\n".join(screen_lines(app)))
            await wait_until(pilot, lambda: sec_cell(app, "t0003") == "4m08s", timeout=TICK_WAIT)
            assert sec_cell(app, "t0004") == ""  # proposed: nothing yet
            assert sec_cell(app, "t0001") == "12.5"  # finished: its seconds
            before = dash.session.generation  # no event is folded while the age moves on
            clock.at += timedelta(seconds=5)
            await wait_until(pilot, lambda: sec_cell(app, "t0003") == "4m13s", timeout=TICK_WAIT)
            assert dash.session.generation == before
            assert dash.query_one("#trials", LineTable).cursor_key == "t0004"  # the redraw moved nothing


@pytest.mark.asyncio
async def test_a_finished_run_stops_the_age_of_a_trial_it_left_running(tmp_path: Path) -> None:
    """An interrupted run's trial stays `running` in the log: its age stops at run.finished, as elapsed does."""
    runs = tmp_path / "runs"
    run_dir = write_run(runs)
    store = RunStore(run_dir)
    with fake_clock(ts_of(run_dir, "trial.proposed", "t0004") + timedelta(seconds=30)):
        store.append("run.finished", "harness", {"reason": "interrupted", "summary": {}})
    store.close()
    age = fmt_age((ts_of(run_dir, "run.finished") - ts_of(run_dir, "trial.started", "t0003")).total_seconds())
    clock = Clock(ts_of(run_dir, "run.finished") + timedelta(hours=5))
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=clock, poll_interval=0.05)
    async with app.run_test(size=(160, 30)) as pilot:
        await open_dashboard(pilot, app)
        await wait_until(pilot, lambda: " sec " in "\n".join(screen_lines(app)))
        assert sec_cell(app, "t0003") == age  # from its start to run.finished, not 5 hours more
        clock.at += timedelta(seconds=30)
        await pilot.pause(1.3)  # a tick
        assert sec_cell(app, "t0003") == age


# --------------------------------------------------------------------------- the header's parts (no app)


def session_of(run_dir: Path, clock: Callable[[], datetime]) -> RunSession:
    session = RunSession(run_dir, reviewer="carol", clock=clock)
    model = session.reader.load()
    model.attach_index(model.index_turns())  # the costs are in the turns
    session.model = model
    return session


def header(run_dir: Path, at: datetime, width: int | None = None) -> list[str]:
    return header_text(session_of(run_dir, Clock(at)), width).plain.splitlines()


def test_cost_without_caps_partial_caps_and_no_cost(tmp_path: Path) -> None:
    uncapped = [{"name": "alice", "backend": "anthropic"}, {"name": "bob", "backend": "anthropic"}]
    run_dir = write_run(tmp_path, "uncapped", snapshot=task(agents=uncapped))
    at = ts_of(run_dir, "trial.proposed", "t0004")
    line = header(run_dir, at)[0]
    assert "cost $0.42" in line and "cost $0.42 of" not in line and "caps" not in line
    partial = [{"name": "alice", "backend": "anthropic", "budget_usd": 2.0}, {"name": "bob", "backend": "anthropic"}]
    run_dir = write_run(tmp_path, "partial", snapshot=task(agents=partial))
    line = header(run_dir, at)[0]
    assert "cost $0.42 (caps $2.00 on 1 of 2 agents)" in line  # not "of $2.00": bob has no cap
    # two copies of each agent (loop.agents_parallel: 2, named alice-1, alice-2...) have a cap each
    run_dir = write_run(tmp_path, "copies", snapshot=task(loop={"agents_parallel": 2}))
    assert "cost $0.42 of $10.00" in header(run_dir, at)[0]
    # agents that call no model and have no cap: no cost part at all
    store = RunStore(tmp_path / "free", create=True)
    with fake_clock():
        store.append("run.started", "harness", {"run_id": "free", "task_name": "tiny",
                                                "task": task(agents=[{"name": "rs", "backend": "random-search"}])})
        store.append_many([propose(store, "t0001", "rs"), ("trial.started", "harness", {"trial_id": "t0001"})])
    store.close()
    lines = header(tmp_path / "free", at)
    assert "cost" not in lines[0] and lines[2].startswith("trials 1 of 10:")


def test_a_resumed_runs_wall_budget_counts_from_the_resume(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    store = RunStore(run_dir)
    resumed = ts_of(run_dir, "trial.proposed", "t0004") + timedelta(hours=2)
    with fake_clock(resumed):
        store.append("run.resumed", "harness", {"reason": "resume", "interrupted_trials": ["t0003", "t0004"]})
    store.close()
    at = resumed + timedelta(minutes=3, seconds=12)
    with DriverLock(run_dir):  # the resumed driver is live
        line = header(run_dir, at)[0]
    total = human_duration((at - ts_of(run_dir, "run.started")).total_seconds())
    assert f"elapsed {total}, 3m12s of 60m since resume" in line  # the driver's limit counts from its own start
    assert "cost $0.42 (cap $5.00 a session)" in line  # each driver's agents meter their cost anew


def test_the_header_keeps_its_budget_parts_whole_at_any_width(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    at = ts_of(run_dir, "trial.proposed", "t0004") + timedelta(seconds=100)
    for width in (120, 78, 60, 40):
        lines = header(run_dir, at, width)
        assert all(len(line) <= width and "…" not in line for line in lines), (width, lines)
        assert lines[2].startswith("trials 4 of 10:")
        # each part is there whole or not at all (a number never half shown)
        if "elapsed" in lines[0]:
            assert re.search(r"elapsed \S+ of 60m", lines[0])
        if "cost" in lines[0]:
            assert "cost $0.42 of $5.00" in lines[0]
        if width >= 78:  # at 80 columns (the header's 78 cells) every budget part stays
            assert "of 60m" in lines[0] and "cost $0.42 of $5.00" in lines[0]


def test_a_proof_run_shows_its_current_theorems_budget(tmp_path: Path) -> None:
    snapshot = task(loop={"policy": "per-theorem", "attempts_per_theorem": 5, "theorem_seconds": 30.0},
                    budget={"max_trials": 24, "max_wall_seconds": 1e9},
                    agents=[{"name": "prover", "backend": "proof-search"}])
    store = RunStore(tmp_path / "proofs", create=True)

    def mark(name: str, what: str, reason: str | None = None) -> tuple[str, str, dict[str, Any]]:
        return ("note", "harness", {"text": f"theorem {name}: {what}",
                                    "theorem": {"name": name, "mark": what, "agent": None, "reason": reason}})

    def attempt(tid: str, theorem: str, status: str) -> list[tuple[str, str, dict[str, Any]]]:
        return [propose(store, tid, "prover", theorem=theorem), ("trial.started", "harness", {"trial_id": tid}),
                finish(tid, status, 1.0 if status == "ok" else None)]

    with fake_clock():
        store.append("run.started", "harness", {"run_id": "proofs", "task_name": "bench-coq", "task": snapshot})
        store.append_many([mark("pair_eq", "started"), *attempt("t0001", "pair_eq", "ok"),
                           mark("pair_eq", "done", "solved"), mark("add_zero_r", "started"),
                           *attempt("t0002", "add_zero_r", "rejected"), *attempt("t0003", "add_zero_r", "rejected")])
    store.close()
    run_dir = tmp_path / "proofs"
    at = ts_of(run_dir, "trial.finished", "t0003") + timedelta(seconds=10)
    since = human_duration((at - ts_of(run_dir, "note", last=True)).total_seconds())  # from add_zero_r's start
    with DriverLock(run_dir):  # live: the theorem's seconds run to now
        lines = header(run_dir, at, 78)
    assert "add_zero_r: 2 of 5 attempts, " + f"{since} of 30s" in lines[1]
    assert lines[2].startswith("trials 3:")  # no run-wide "of 24": the bench derives it from the per-theorem budgets
    assert "elapsed" in lines[0] and " of " not in lines[0].split("elapsed")[1]  # its wall limit is the schema's max


# --------------------------------------------------------------------------- the fold: started_ts


def test_the_fold_records_when_a_trial_started(tmp_path: Path) -> None:
    """started_ts is the latest counted trial.started's ts, in the loop's fold and the TUI's fast reader alike;
    a refused start (of a trial that finished) leaves it; an aborted trial started again takes the new one."""
    run_dir = write_run(tmp_path)
    store = RunStore(run_dir)
    with fake_clock(ts_of(run_dir, "trial.proposed", "t0004") + timedelta(minutes=1)):
        store.append_many([("trial.started", "harness", {"trial_id": "t0001"}),  # refused: t0001 finished ok
                           finish("t0003", "aborted", None), ("trial.started", "harness", {"trial_id": "t0003"})])
    store.close()
    starts = [e for e in events(run_dir) if e["kind"] == "trial.started"]
    first_t0001 = next(e["ts"] for e in starts if e["data"]["trial_id"] == "t0001")
    second_t0003 = [e["ts"] for e in starts if e["data"]["trial_id"] == "t0003"][-1]
    for state in (RunState.fold(RunStore(run_dir).scan().events), RunReader(run_dir).load().state):
        assert state.trials["t0001"].started_ts == first_t0001
        assert state.trials["t0003"].started_ts == second_t0003 and state.trials["t0003"].status == "running"
        assert state.trials["t0004"].started_ts == ""
        assert state.driver_ts == state.started_ts == events(run_dir)[0]["ts"]
        assert any(r["kind"] == "trial.started" and r["trial_id"] == "t0001" for r in state.refused)
