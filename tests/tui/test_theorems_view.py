"""The theorems view (`O` on a proof run's dashboard, issue 24): solved/unsolved per theorem, the cumulative-solved
chart, the bench's difficulty table; and the dashboard's stop/pause orders on a real proof run.

The hand-written run is a per-theorem Coq run as the loop writes one (theorem marks, a red-team trial, the
oracle's difficulty metric and feedback), left unfinished by a driver that is gone. What the rows must say
is read back from events.jsonl itself (json), not from the code under test. The control test runs the
real Coq bench in a process of its own and drives it from the TUI.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from make_run import fake_clock
from screen_text import screen_lines
from test_tui_keys import bindings, documented
from test_tui_screens import open_dashboard
from tui_helpers import fixed_clock, settle, wait_until

from benches.proofs import BenchRun, print_summary
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.proofs_summary import difficulty_rows, proof_figures
from tui.app import RRMAApp
from tui.dialogs import OrderScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.theorems import TheoremsScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable
from tui.widgets.solved_chart import SolvedChart

REPO = Path(__file__).resolve().parents[2]
EVIL = "\x1b]2;pwned\x07"  # a checker message that tries to retitle the terminal
THEOREMS = ["pair_eq", "add_zero_r", "mul_one", "hard_one", "later"]
DIFFICULTY = {"pair_eq": "easy", "add_zero_r": "medium", "mul_one": "easy", "hard_one": "hard"}
# (agent, theorem, status, feedback); marks between them
SCRIPT: list[Any] = [
    ("started", "pair_eq"),
    ("red-team", "pair_eq", "rejected", "REJECTED: uses admit at line 1"),
    ("prover-1", "pair_eq", "rejected", "REJECTED: error at proof line 1: Unable to unify \"a\" with \"c\"."),
    ("prover-2", "pair_eq", "ok", "ACCEPTED: accepted"),
    ("done", "pair_eq", "solved"),
    ("started", "add_zero_r"),
    ("prover-1", "add_zero_r", "rejected", "REJECTED: incomplete proof: 1 goal(s) remain"),
    ("prover-2", "add_zero_r", "timeout", "TIMEOUT: the check took over 10 s"),
    ("prover-1", "add_zero_r", "rejected", f"REJECTED: {EVIL}Unable to unify \"n\" with \"n + 0\".\nline 1: more"),
    ("done", "add_zero_r", "attempts"),
    ("started", "mul_one"),
    ("prover-2", "mul_one", "ok", "ACCEPTED: accepted"),
    ("done", "mul_one", "solved"),
    ("started", "hard_one"),
    ("prover-1", "hard_one", "rejected", "REJECTED: error at proof line 1: Tactic failure: lia failed."),
]


def write_theorem_run(runs: Path) -> Path:
    run_dir = runs / "theorems"
    store = RunStore(run_dir, create=True)
    task = {"name": "bench-coq", "oracle": {"kind": "coq", "params": {"theorems": THEOREMS}},
            "metric": {"name": "solved", "direction": "maximize", "source": "oracle", "target": None},
            "budget": {"max_trials": 20},
            "loop": {"policy": "per-theorem", "attempts_per_theorem": 3, "theorem_seconds": 600.0},
            "agents": [{"name": "prover-1", "backend": "tactic-portfolio"},
                       {"name": "prover-2", "backend": "tactic-portfolio"}]}
    n = 0
    with fake_clock():
        store.append("run.started", "harness", {"run_id": "theorems", "task_name": "bench-coq", "task": task})
        for step in SCRIPT:
            if step[0] in ("started", "done"):
                store.append("note", "harness", {"text": f"theorem {step[1]}: {step[0]}", "theorem": {
                    "name": step[1], "mark": step[0], "agent": None, "reason": step[2] if len(step) > 2 else None}})
                continue
            agent, theorem, status, feedback = step
            n += 1
            tid = f"t{n:04d}"
            proposal = {"hypothesis": f"a proof of {theorem}", "proof": "auto.", "theorem": theorem, "meta": {}}
            store.append_many([
                ("trial.proposed", f"agent:{agent}", {"trial_id": tid, "parent": None, "agent": agent,
                                                      "hypothesis": f"a proof of {theorem}", "theorem": theorem,
                                                      "proposal_blob": store.put_json_blob(proposal)}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {
                    "trial_id": tid, "status": status, "score": 1.0 if status == "ok" else None, "seconds": 0.5,
                    "feedback": feedback, "metrics": {"difficulty": DIFFICULTY[theorem], "reason": "r"}}),
            ])
    store.close()
    return run_dir


def logged_trials(run_dir: Path) -> list[dict[str, Any]]:
    """(trial id, agent, theorem, status) of every trial, from the log file itself."""
    proposed: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "trial.proposed":
            proposed[event["data"]["trial_id"]] = {"id": event["data"]["trial_id"], "agent": event["data"]["agent"],
                                                   "theorem": event["data"]["theorem"], "status": None}
        elif event["kind"] == "trial.finished":
            proposed[event["data"]["trial_id"]]["status"] = event["data"]["status"]
    return list(proposed.values())


def mark_spans(run_dir: Path) -> dict[str, float]:
    """Seconds from each theorem's `started` mark to its `done` mark, from the log file itself."""
    started: dict[str, datetime] = {}
    spans: dict[str, float] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        mark = event["data"].get("theorem") if event["kind"] == "note" else None
        if isinstance(mark, dict):
            ts = datetime.fromisoformat(event["ts"])
            if mark["mark"] == "started":
                started[mark["name"]] = ts
            elif mark["mark"] == "done":
                spans[mark["name"]] = (ts - started[mark["name"]]).total_seconds()
    return spans


async def open_theorems(pilot: Any, app: RRMAApp) -> TheoremsScreen:
    await open_dashboard(pilot, app)
    await pilot.press("O")
    await wait_until(pilot, lambda: isinstance(app.screen, TheoremsScreen))
    screen = app.screen
    assert isinstance(screen, TheoremsScreen)
    await wait_until(pilot, lambda: bool(screen.query_one("#th-rows", LineTable).rows))
    await pilot.pause(0.1)
    return screen


def table_rows(lines: list[str]) -> dict[str, list[str]]:
    """The theorems table's rows on screen: name -> its cells (split on runs of spaces)."""
    out = {}
    for line in lines:
        m = re.match(r"^│(\w+)\s", line)
        if m and m.group(1) in THEOREMS:
            out[m.group(1)] = re.split(r"\s{2,}|\s(?=\d)", line.strip("│ ").split("│")[0])
    return out


@pytest.mark.asyncio
async def test_rows_chart_difficulty_and_enter(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run_dir = write_theorem_run(runs)
    trials = logged_trials(run_dir)
    agent_trials = [t for t in trials if t["agent"] != "red-team"]
    attempts = Counter(t["theorem"] for t in agent_trials)
    first_ok: dict[str, str] = {}
    for t in agent_trials:
        if t["status"] == "ok":
            first_ok.setdefault(t["theorem"], t["id"])
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_theorems(pilot, app)
        table = screen.query_one("#th-rows", LineTable)
        assert table.rows == THEOREMS  # the oracle's order, the queued one included
        rows = {name: screen._row(name) for name in THEOREMS}
        text = {name: [str(c) if isinstance(c, str) else c.plain for c in cells] for name, cells in rows.items()}
        for name in THEOREMS:
            assert text[name][3] == str(attempts.get(name, 0)), (name, text[name])  # red team's not counted
            assert text[name][5] == first_ok.get(name, "-"), (name, text[name])
        # hard_one is the theorem worked on now (its `started` mark has no `done`): marked
        assert [text[n][2] for n in THEOREMS] == ["✓ solved", "given up", "✓ solved", "▶ open", "queued"]
        assert text["add_zero_r"][7] == 'attempts: ]2;pwnedUnable to unify "n" with "n + 0".'  # why, the last error
        assert "\x1b" not in text["add_zero_r"][7] and "\x07" not in text["add_zero_r"][7]
        assert text["hard_one"][7] == "error at proof line 1: Tactic failure: lia failed."
        assert [text[n][1] for n in THEOREMS] == ["easy", "medium", "easy", "hard", "unknown"]

        # the chart: theorems solved so far, stepping up at each first proof's trial number (red team counted in x)
        chart = screen.query_one("#th-chart", SolvedChart)
        numbers = {t["id"]: i for i, t in enumerate(trials, start=1)}
        xs, ys = chart.series
        assert xs[0] == 1 and ys[0] == 0 and xs[-1] == len(trials) and ys[-1] == len(first_ok)
        for count, tid in enumerate(sorted(first_ok.values(), key=numbers.__getitem__), start=1):
            x = numbers[tid]
            assert [y for xx, y in zip(xs, ys, strict=True) if xx == x] == [count - 1, count], (x, xs, ys)
        assert all(b >= a for a, b in itertools.pairwise(ys))  # cumulative: never down
        await pilot.press("W")
        xs_w, ys_w = chart.series
        assert xs_w[0] == 0 and ys_w[-1] == len(first_ok) and chart.title_text.startswith("solved by time (s)")
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        finished = {e["data"]["trial_id"]: datetime.fromisoformat(e["ts"]) for e in events
                    if e["kind"] == "trial.finished"}
        start = datetime.fromisoformat(events[0]["ts"])  # run.started
        for count, tid in enumerate(sorted(first_ok.values(), key=numbers.__getitem__), start=1):
            x = (finished[tid] - start).total_seconds()  # seconds from run.started to the proof's trial.finished
            assert [y for xx, y in zip(xs_w, ys_w, strict=True) if xx == x] == [count - 1, count], (x, xs_w, ys_w)

        # the difficulty table: the shared function's rows, and what the bench prints for the same figures
        figures = proof_figures(RunState.fold(RunStore(run_dir).scan().events), fixed_clock().timestamp())
        assert figures is not None
        expected = [row.cells() for row in difficulty_rows(figures.summary)]
        drawn = screen.query_one("#th-difficulty", LineTable)
        shown = [[str(c) if isinstance(c, str) else c.plain for c in screen._difficulty_row(k)] for k in drawn.rows]
        assert shown == expected
        span = mark_spans(run_dir)  # pair_eq: 2 attempts, mul_one: 1; seconds from their marks
        assert expected[0] == ["easy", "2", "2", "100%", "1.5", f"{(span['pair_eq'] + span['mul_one']) / 2:.2f}"]
        assert expected[-1][:4] == ["all", "2", "5", "40%"]
        print_summary("coq", BenchRun(run_dir, "stopped", figures.summary, 1.0, []))
        printed = [re.split(r"\s*│\s*", line.strip("│ ")) for line in capfd.readouterr().out.splitlines()
                   if line.startswith("│")]
        assert printed == expected

        # Enter: the proving trial of a solved theorem, the last attempt of an unsolved one
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        assert app.screen.trial_id == first_ok["pair_eq"]  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        await pilot.press("slash", *"add_zero", "enter")
        await wait_until(pilot, lambda: table.rows == ["add_zero_r"])
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        assert app.screen.trial_id == [t["id"] for t in agent_trials if t["theorem"] == "add_zero_r"][-1]  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        await pilot.press("c", "f", "f")  # every state, then open, then solved
        assert table.rows == ["pair_eq", "mul_one"]
        # the chart follows the filter (issue 35, item 2): the two shown, both solved, of 2, said filtered
        await pilot.press("W")  # back to the trial axis
        assert chart.series[1][-1] == 2 and chart.title_text.endswith("2 of 2 · filtered: 2 of 5"), chart.title_text
        await pilot.press("slash", *"mul_one", "enter")
        await wait_until(pilot, lambda: table.rows == ["mul_one"])
        assert chart.series[1][-1] == 1 and chart.title_text.endswith("1 of 1 · filtered: 1 of 5"), chart.title_text
        xs, ys = chart.series
        proof_x = numbers[first_ok["mul_one"]]
        assert [y for xx, y in zip(xs, ys, strict=True) if xx == proof_x] == [0, 1]  # counted among the shown alone
        await pilot.press("c", "f")  # filters cleared, then open: none of the open ones is solved
        await wait_until(pilot, lambda: table.rows == ["hard_one"])
        assert chart.series[1][-1] == 0 and chart.title_text.endswith("0 of 1 · filtered: 1 of 5"), chart.title_text
        await pilot.press("c")
        assert chart.series[1][-1] == len(first_ok) and "filtered" not in chart.title_text
        await pilot.press("f", "f")
        await pilot.press("c", "s", "s")  # by state, then by attempts (most first)
        assert table.rows[0] == "add_zero_r"

        # live: a proof of hard_one appended by "the driver" reaches the row, the chart and the difficulty table
        store = RunStore(run_dir)
        store.append_many([
            ("trial.proposed", "agent:prover-2", {"trial_id": "t0009", "parent": None, "agent": "prover-2",
                                                  "hypothesis": "lia", "theorem": "hard_one",
                                                  "proposal_blob": store.put_json_blob({"proof": "lia."})}),
            ("trial.finished", "oracle", {"trial_id": "t0009", "status": "ok", "score": 1.0, "seconds": 0.5,
                                          "metrics": {"difficulty": "hard"}})])
        store.close()
        await wait_until(pilot, lambda: screen.rows["hard_one"].state == "solved")
        assert screen.rows["hard_one"].solved_by == "t0009" and screen.rows["hard_one"].attempts == 2
        assert chart.series[1][-1] == 3
        hard = [[str(c) if isinstance(c, str) else c.plain for c in screen._difficulty_row(k)]
                for k in drawn.rows if k == "hard"]
        assert hard and hard[0][:4] == ["hard", "1", "1", "100%"], hard


@pytest.mark.asyncio
async def test_80x24_nothing_cut(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = write_theorem_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_theorems(pilot, app)
        lines = screen_lines(app)
        assert len(lines) == 24
        title, chart_title = lines[0], screen.query_one("#th-chart", SolvedChart).title_text
        assert "…" not in title and "2 of 5 solved" in title, title
        assert chart_title == "solved by trial: 2 of 5" and chart_title in "\n".join(lines)
        assert screen.query_one("#th-rows", LineTable).shown_columns[:5] == ["theorem", "difficulty", "state",
                                                                           "attempts", "seconds"]
        shown = table_rows(lines)
        assert set(shown) == set(THEOREMS), lines
        for cells in shown.values():  # name, difficulty, state, attempts and seconds whole
            assert "…" not in " ".join(cells[:5]), cells
        for level in ("easy", "medium", "hard", "all"):  # every row of the difficulty table, every figure whole
            [line] = [ln for ln in lines if re.search(rf"│{level}\s+\d", ln)]
            assert "…" not in line.split("│")[-2], line
        assert "q Quit" in lines[-1] and "? Help" in lines[-1]
        # the command palette offers the view on a proof run's dashboard, and opens it
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TheoremsScreen))
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Theorems"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, TheoremsScreen))


def test_snapshot_theorems_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    run_dir = write_theorem_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_theorems(pilot, app)
        await settle(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_keys_are_documented() -> None:
    assert {key for key, _ in bindings(TheoremsScreen)} <= documented("Theorems")


# ----------------------------------------------------------------------------- live control of a proof run

SLOW_V = """Require Import Arith Lia.

(* difficulty: easy *)
Theorem add_zero_left : forall n : nat, 0 + n = n.
Proof. intros n. reflexivity. Qed.

(* difficulty: hard *)
Theorem slow : 2000 * 2000 = 1.
Proof. Admitted.
"""


def events_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def proposed(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in events_of(run_dir) if e["kind"] == "trial.proposed"]


@pytest.mark.asyncio
@pytest.mark.skipif(shutil.which("coqtop") is None, reason="Coq (coqtop) is not installed")
async def test_pause_continue_and_stop_a_running_coq_bench(tmp_path: Path) -> None:
    """The Coq bench (the one loop, per-theorem policy) in a process of its own, driven from the dashboard: `w`
    pauses it (no trial is proposed while paused), `w` again continues it, `h` stops it; the bench ends
    ``stopped`` and prints the difficulty table the theorems view shows."""
    source = tmp_path / "slow.v"
    source.write_text(SLOW_V)
    runs = tmp_path / "runs"
    bench = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "bench", "coq", "--source", str(source), "--runs", str(runs), "--quiet",
         "--agents", "1", "--agent", "portfolio", "--attempts", "200", "--theorem-seconds", "120", "--check-seconds", "1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (runs.is_dir() and [p for p in runs.iterdir() if (p / "driver.json").exists()]):
            assert bench.poll() is None and time.monotonic() < deadline, "the bench did not start"
            time.sleep(0.1)
        [run_dir] = [p for p in runs.iterdir() if (p / "driver.json").exists()]
        app = RRMAApp(runs, run_dir, reviewer="carol", poll_interval=0.05)
        async with app.run_test(size=(120, 40)) as pilot:
            dash = await open_dashboard(pilot, app)
            assert isinstance(dash, DashboardScreen)
            await wait_until(pilot, lambda: any(e["data"]["theorem"] == "slow" for e in proposed(run_dir)), 60)
            await pilot.press("w")
            await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
            await pilot.press("enter")
            await wait_until(pilot, lambda: dash.state.paused)
            paused_at = time.monotonic()
            await wait_until(pilot, lambda: time.monotonic() - paused_at > 1.5, 5)  # a running check ends (1 s)
            count = len(proposed(run_dir))
            await wait_until(pilot, lambda: time.monotonic() - paused_at > 3.0, 5)
            assert len(proposed(run_dir)) == count, "a trial was proposed while the run was paused"
            await pilot.press("w")
            await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(proposed(run_dir)) > count, 20)  # going again
            await pilot.press("h")
            await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
            await pilot.press(*"enough", "enter")
            deadline = time.monotonic() + 60
            while bench.poll() is None:  # the bench finishes its running check and ends the run itself
                assert time.monotonic() < deadline, "the bench did not stop"
                await pilot.pause(0.1)
            out = bench.stdout.read() if bench.stdout else ""
            assert bench.returncode == 0, out
            last = events_of(run_dir)[-1]
            assert last["kind"] == "run.finished" and last["data"]["reason"] == "stopped", last
            assert last["data"]["summary"]["stopped_by"] == "human:carol"
            assert "ended: stopped" in out
            await wait_until(pilot, lambda: dash.state.finish_reason == "stopped", 10)
            await pilot.press("O")
            await wait_until(pilot, lambda: isinstance(app.screen, TheoremsScreen))
            screen = app.screen
            assert isinstance(screen, TheoremsScreen)
            await wait_until(pilot, lambda: screen.figures is not None and screen.figures.recorded)
            printed = [re.split(r"\s*│\s*", line.strip("│ ")) for line in out.splitlines() if line.startswith("│")]
            drawn = screen.query_one("#th-difficulty", LineTable)
            shown = [[str(c) if isinstance(c, str) else c.plain for c in screen._difficulty_row(k)]
                     for k in drawn.rows]
            assert shown == printed and printed[0][:3] == ["easy", "1", "1"], (shown, printed)
            assert [screen.rows[n].state for n in ("add_zero_left", "slow")] == ["solved", "open"]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
