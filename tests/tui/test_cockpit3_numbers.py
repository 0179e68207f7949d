"""Numbers a researcher can trust, and integrity on every screen (issue 35, items 1, 4, 5, 7, 8).

1. A proof run's header counted only the theorems started so far (``6 of 6`` while the theorems view and the
   summary said 9 of 30); now the header, the runs list and the theorems view give one count against all of
   the run's theorems, as ``run.started`` records them (``1/10 solved · 1 open · 7 queued · 1 given up``), the
   theorem worked on now marked ``▶``.
4. The runs list cut the Δσ at 80 columns (``-0.0004556 vs -9.16e-05 (+2…``); now it has a column of its own,
   never left out.
5. The live by-difficulty table counted the theorems not started as ``unknown``; now their difficulty is read
   from ``run.started``.
7. The analysis view numbered trials with the baselines (t0016 was ``#19``) while the dashboard's chart did
   not; now both take ``TrialRecord.number``.
8. A cut, changed or torn log showed as a plain ``stopped`` in the runs list and the dashboard offered ``R
   resumes`` on it; now the runs list's log column and the dashboard's header say what verify finds, and ``R``
   asks first, quoting the finding.

The logs are written through RunStore as the loop writes them; what the screens must say is read back from
events.jsonl itself where it can be.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from make_run import fake_clock, make_run
from scored_run import write_scored_run
from screen_text import screen_lines
from test_tui_screens import open_dashboard
from tui_helpers import fixed_clock, wait_until

from rrma.log.state import RunState, delta_sigma
from rrma.log.store import RunStore
from rrma.proofs_summary import proof_figures
from tui.app import RRMAApp
from tui.dialogs import OrderScreen, UnverifiedResumeScreen
from tui.screens.analysis import AnalysisScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.runs import RunsScreen
from tui.screens.theorems import TheoremsScreen
from tui.widgets.line_table import LineTable
from tui.widgets.score_chart import chart_series

# ----------------------------------------------------------------------------- a proof run of ten theorems

THEOREMS = [("pair_eq", "easy"), ("add_zero_r", "medium"), ("mul_one", "easy"), ("hard_one", "hard"),
            ("t5", "easy"), ("t6", "medium"), ("t7", "hard"), ("t8", "easy"), ("t9", "medium"), ("t10", "easy")]
# (agent, theorem, status) and marks, as the per-theorem policy writes them: two theorems done, the third current
SCRIPT: list[tuple[str, ...]] = [
    ("started", "pair_eq"), ("prover-1", "pair_eq", "rejected"), ("prover-1", "pair_eq", "ok"),
    ("done", "pair_eq", "solved"),
    ("started", "add_zero_r"), ("prover-1", "add_zero_r", "rejected"), ("prover-1", "add_zero_r", "rejected"),
    ("prover-1", "add_zero_r", "rejected"), ("done", "add_zero_r", "attempts"),
    ("started", "mul_one"), ("prover-1", "mul_one", "rejected"),
]


def write_proof_run(runs: Path, run_id: str = "proofs") -> Path:
    """A per-theorem run left by a driver that is gone (not finished): ``run.started`` names its ten theorems."""
    run_dir = runs / run_id
    store = RunStore(run_dir, create=True)
    task = {"name": "bench-coq", "oracle": {"kind": "coq", "params": {}},
            "metric": {"name": "solved", "direction": "maximize", "source": "oracle", "target": None},
            "budget": {"max_trials": 100},
            "loop": {"policy": "per-theorem", "attempts_per_theorem": 3, "theorem_seconds": 600.0},
            "agents": [{"name": "prover-1", "backend": "tactic-portfolio"}]}
    n = 0
    with fake_clock():
        store.append("run.started", "harness", {
            "run_id": run_id, "task_name": "bench-coq", "task": task, "head_record": True,
            "theorems": [{"name": name, "difficulty": level} for name, level in THEOREMS]})
        for step in SCRIPT:
            if step[0] in ("started", "done"):
                store.append("note", "harness", {"text": f"theorem {step[1]}: {step[0]}", "theorem": {
                    "name": step[1], "mark": step[0], "agent": None, "reason": step[2] if len(step) > 2 else None}})
                continue
            agent, theorem, status = step
            n += 1
            tid = f"t{n:04d}"
            proposal = {"hypothesis": f"a proof of {theorem}", "proof": "auto.", "theorem": theorem, "meta": {}}
            store.append_many([
                ("trial.proposed", f"agent:{agent}", {"trial_id": tid, "parent": None, "agent": agent,
                                                      "hypothesis": f"a proof of {theorem}", "theorem": theorem,
                                                      "proposal_blob": store.put_json_blob(proposal)}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {"trial_id": tid, "status": status,
                                              "score": 1.0 if status == "ok" else None, "seconds": 0.5,
                                              "feedback": "REJECTED: no" if status != "ok" else "ACCEPTED"}),
            ])
    store.close()
    return run_dir


def expected_progress(run_dir: Path) -> dict[str, Any]:
    """The counts, from events.jsonl itself: every theorem run.started names; solved (an ok trial), given up (a
    done mark that is not solved), open (started, not done), queued (the rest); the current: started, not done."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    names = [t["name"] for t in events[0]["data"]["theorems"]]
    proposed = {e["data"]["trial_id"]: e["data"]["theorem"] for e in events if e["kind"] == "trial.proposed"}
    solved = {proposed[e["data"]["trial_id"]] for e in events
              if e["kind"] == "trial.finished" and e["data"]["status"] == "ok"}
    marks = [e["data"]["theorem"] for e in events if e["kind"] == "note" and "theorem" in e["data"]]
    started = {m["name"] for m in marks if m["mark"] == "started"}
    done = {m["name"] for m in marks if m["mark"] == "done"}
    given_up = done - solved
    open_ = started - done - solved
    return {"total": len(names), "solved": len(solved), "given_up": len(given_up), "open": len(open_),
            "queued": len(names) - len(solved) - len(given_up) - len(open_), "current": sorted(open_)[0]}


@pytest.mark.asyncio
async def test_a_proof_run_counts_all_of_its_theorems_everywhere(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = write_proof_run(runs)
    want = expected_progress(run_dir)
    assert want == {"total": 10, "solved": 1, "given_up": 1, "open": 1, "queued": 7, "current": "mul_one"}
    words = (f"{want['solved']}/{want['total']} solved · {want['open']} open · {want['queued']} queued · "
             f"{want['given_up']} given up")
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(170, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        header = "\n".join(screen_lines(app)[:3])
        assert f"proofs: {words}" in header, header  # before: "proofs: 1 of 3 theorems solved"
        assert "▶ mul_one: 1 of 3 attempts" in header, header
        # the theorems view counts the same, and marks the theorem worked on now
        await pilot.press("O")
        await wait_until(pilot, lambda: isinstance(app.screen, TheoremsScreen))
        screen = app.screen
        assert isinstance(screen, TheoremsScreen)
        await wait_until(pilot, lambda: bool(screen.query_one("#th-rows", LineTable).rows))
        await pilot.pause(0.1)
        lines = screen_lines(app)
        assert "theorems 1 of 10 solved" in lines[0], lines[0]
        assert screen.figures is not None and screen.figures.progress.as_dict() == want
        [row] = [line for line in lines if line.startswith("│mul_one ")]
        assert "▶ open" in row, row
        # the runs list: the same words in the run's row
        await pilot.press("escape", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, RunsScreen))
        runs_screen = app.screen
        assert isinstance(runs_screen, RunsScreen)
        await wait_until(pilot, lambda: runs_screen.summaries.get("proofs") is not None
                         and runs_screen.summaries["proofs"].proofs is not None)
        await pilot.pause(0.1)
        [row] = [line for line in screen_lines(app) if "proofs " in line and "bench-coq" in line]
        assert f"{words} ▶ mul_one" in row, row
        assert dash.state.theorems is not None


@pytest.mark.asyncio
async def test_the_difficulty_table_reads_the_difficulties_recorded_at_the_start(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = write_proof_run(runs)
    levels: dict[str, int] = {}
    for item in json.loads((run_dir / "events.jsonl").read_text().splitlines()[0])["data"]["theorems"]:
        levels[item["difficulty"]] = levels.get(item["difficulty"], 0) + 1
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("O")
        await wait_until(pilot, lambda: isinstance(app.screen, TheoremsScreen))
        screen = app.screen
        assert isinstance(screen, TheoremsScreen)
        await wait_until(pilot, lambda: bool(screen.query_one("#th-difficulty", LineTable).rows))
        totals = {row.difficulty: row.total for row in screen.figures.difficulty} if screen.figures else {}
        assert "unknown" not in totals, totals  # before: unknown 7 (every theorem not started yet)
        assert {k: v for k, v in totals.items() if k != "all"} == levels and totals["all"] == 10, totals
        lines = screen_lines(app)
        assert any(re.search(r"│\s*hard\s+0\s+2\s+0%", line) for line in lines), "\n".join(lines)


# ----------------------------------------------------------------------------- item 4: Δσ at 80 columns


@pytest.mark.asyncio
async def test_the_runs_list_keeps_the_delta_sigma_at_80_columns(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    baseline = (-9.16e-05, -9.18e-05, -9.14e-05)
    write_scored_run(runs, "tiny", [-0.0002, -0.0004556], baseline=baseline, direction="minimize")
    mean = sum(baseline) / 3
    sigma = (sum((b - mean) ** 2 for b in baseline) / 2) ** 0.5
    sigmas = delta_sigma(-0.0004556, mean, sigma, "minimize")
    assert sigmas is not None and sigmas > 1000
    app = RRMAApp(runs, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await wait_until(pilot, lambda: any(line.startswith("tiny ") and "finished" in line
                                            for line in screen_lines(app)))
        [row] = [line for line in screen_lines(app) if line.startswith("tiny ")]
        assert f"+{sigmas:.0f}σ" in row, row  # before: "-0.0004556 vs -9.16e-05 (+2…"
        assert "-0.0004556" in row, row


# ----------------------------------------------------------------------------- item 7: one numbering


@pytest.mark.asyncio
async def test_the_analysis_view_numbers_trials_as_the_dashboard_chart(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=20)
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        state = dash.state
        scored = [t for t in state.order if not state.trials[t].baseline and state.trials[t].status == "ok"]
        assert len(state.baseline_ids) == 3 and len(scored) >= 5
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, AnalysisScreen))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        await wait_until(pilot, lambda: bool(screen.plotted.data.ids))
        data = screen.plotted.data
        for tid in scored:
            xs, _, _, _ = chart_series(state, only=[tid])  # the dashboard chart's x for this trial
            at = data.ids.index(tid)
            assert data.xs[at] == xs[0] == int(tid[1:]), (tid, data.xs[at], xs)  # before: t0016 at 19
        # a baseline repeat sits before trial 1, and says it is the baseline
        base = data.ids.index("base-0")
        assert data.xs[base] == 0
        while screen.selected_id != "base-0":
            await pilot.press("left")
        await pilot.pause(0.1)
        assert "trial baseline" in str(screen.query_one("#an-point").render()), screen.query_one("#an-point").render()


# ----------------------------------------------------------------------------- item 8: integrity on every screen


def damaged_copies(runs: Path) -> dict[str, Path]:
    """A stopped run (no run.finished, no driver) and three copies of it: its end cut off, a line edited in the
    middle, a torn last line (a crash mid-write)."""
    make_run(runs, "intact", trials=6, finished=False)
    original = runs / "intact"
    data = (original / "events.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    out = {"intact": original}
    for name, damaged in (("cut", b"".join(lines[:-2])),
                          ("edited", data.replace(b'"hypothesis":"baseline"', b'"hypothesis":"baseliNe"', 1)),
                          ("torn", data + b'{"seq": 999, "kind": "trial.pro')):
        shutil.copytree(original, runs / name)
        (runs / name / "events.jsonl").write_bytes(damaged)
        (runs / name / ".checkpoint").unlink(missing_ok=True)
        out[name] = runs / name
    return out


@pytest.mark.asyncio
@pytest.mark.parametrize("inline", [True, False], ids=["checked-with-its-row", "checked-after-every-row"])
async def test_the_runs_list_says_which_logs_fail_verification(tmp_path: Path, inline: bool,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A small log's chain is checked before its row is filled; a longer one's (here: every log, the inline size
    set to 0) has its head record checked then, and its chain once every row is filled: the edit is seen too."""
    if not inline:
        import tui.screens.runs as runs_screen
        monkeypatch.setattr(runs_screen, "INLINE_CHAIN_BYTES", 0)
    runs = tmp_path / "runs"
    damaged_copies(runs)
    app = RRMAApp(runs, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        def shown() -> dict[str, str]:
            return {m.group(1): line for line in screen_lines(app) if (m := re.match(r"^(intact|cut|edited|torn) ", line))}

        await wait_until(pilot, lambda: len(shown()) == 4 and all("stopped" in row for row in shown().values()))
        # inline: at once; else each log's head first (✔ head), its whole chain once every row is filled
        await wait_until(pilot, lambda: "✘ broken" in shown()["edited"] and "✔ chain" in shown()["intact"])
        lines = screen_lines(app)
        rows = shown()
        assert "baseliNe" in (runs / "edited" / "events.jsonl").read_text()
        assert "✔ chain" in rows["intact"], rows
        assert "✘ cut" in rows["cut"], rows  # before: a plain "stopped"
        assert "✘ broken" in rows["edited"], rows
        assert "⚠ torn" in rows["torn"], rows
        assert "✘ 2 failing verify" in lines[0], lines[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("guarded", [True, False], ids=["asks-first", "guard-off"])
async def test_r_on_a_cut_log_asks_first_quoting_the_finding(tmp_path: Path, guarded: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard's test: with the check switched off (the dashboard told every log is intact) ``R`` goes straight
    to the resume's confirmation on the cut log, as it did before; with it on, a dialog quotes the finding first."""
    runs = tmp_path / "runs"
    copies = damaged_copies(runs)
    if not guarded:
        import tui.screens.dashboard as dashboard
        from rrma.log.chain import LogIntegrity
        monkeypatch.setattr(dashboard, "log_integrity", lambda *a, **k: LogIntegrity("ok", "chain ok"), raising=False)
    app = RRMAApp(runs, copies["cut"], reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("R")  # at once: before the header's first check is in, R checks the head record itself
        await wait_until(pilot, lambda: isinstance(app.screen, UnverifiedResumeScreen | OrderScreen))
        if not guarded:
            assert isinstance(app.screen, OrderScreen), app.screen  # the attack: resume offered on a cut log
            # the modal's first frames can still be the screen below the dashboard's: wait for the dashboard's header
            await wait_until(pilot, lambda: "R resumes" in "\n".join(screen_lines(app)[:3]))
            return
        dialog = app.screen
        assert isinstance(dialog, UnverifiedResumeScreen)
        text = " ".join(" ".join(line.split()) for line in screen_lines(app))
        assert "fails verification: tail cut" in text
        assert "the end of the log was cut off or replaced" in text, text  # the finding, quoted
        await pilot.press("enter")  # the easy answer is the safe one
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await wait_until(pilot, lambda: "✘ log: tail cut" in "\n".join(screen_lines(app)[:3]))
        header = "\n".join(screen_lines(app)[:3])
        assert "R resumes" not in header, header
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, UnverifiedResumeScreen))
        await pilot.press("y")  # resume anyway: on to the resume's own confirmation
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))


@pytest.mark.asyncio
async def test_r_on_an_intact_log_asks_only_the_resume(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    copies = damaged_copies(runs)
    app = RRMAApp(runs, copies["intact"], reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        dash = await open_dashboard(pilot, app)
        await wait_until(pilot, lambda: getattr(dash, "integrity", None) is not None)
        assert dash.integrity.verdict == "ok"
        header = "\n".join(screen_lines(app)[:3])
        assert "R resumes" in header and "✘" not in header, header
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))


@pytest.mark.asyncio
async def test_a_log_cut_while_open_shows_in_the_header(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    copies = damaged_copies(runs)
    run_dir = copies["intact"]
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_dashboard(pilot, app)
        data = (run_dir / "events.jsonl").read_bytes()
        (run_dir / "events.jsonl").write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])  # the last event cut
        await wait_until(pilot, lambda: "✘ log: tail cut" in "\n".join(screen_lines(app)[:3]), 15)


# ----------------------------------------------------------------------------- one rule, read back


def test_the_header_count_is_the_theorems_views(tmp_path: Path) -> None:
    run_dir = write_proof_run(tmp_path / "runs")
    state = RunState.fold(RunStore(run_dir).scan().events)
    figures = proof_figures(state, 0.0)
    assert figures is not None
    assert [row.state for row in figures.theorems].count("queued") == figures.progress.queued == 7
