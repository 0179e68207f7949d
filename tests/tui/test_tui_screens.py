"""Pilot tests for every screen: they assert on what is shown and on the messages posted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from make_run import make_run
from textual.css.query import NoMatches
from tui_helpers import MessageLog, fixed_clock, plain, wait_until

from rrma.log.driver_lock import DriverLock
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.dialogs import NewRunScreen, NoteScreen
from tui.messages import ReviewDecided
from tui.screens.dashboard import DashboardScreen
from tui.screens.lineage import LineageScreen
from tui.screens.review import ReviewScreen
from tui.screens.runs import RunsScreen
from tui.screens.trace import TraceScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable

pytestmark = pytest.mark.asyncio


def make_app(runs_dir: Path, run: str | None = "demo-run", **kw: object) -> RRMAApp:
    return RRMAApp(runs_dir, runs_dir / run if run else None, reviewer="carol", clock=fixed_clock,
                   poll_interval=0.05, **kw)  # type: ignore[arg-type]


async def open_dashboard(pilot, app: RRMAApp) -> DashboardScreen:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    return screen


def events_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


async def test_runs_list_shows_each_run_and_enter_opens_it(runs_dir: Path) -> None:
    make_run(runs_dir, "second-run", trials=3, finished=False)
    make_run(runs_dir, "crashed-run", trials=2, finished=False)  # no run.finished, and nobody drives it
    driver = DriverLock(runs_dir / "second-run").acquire()  # a live driver holds the second run
    log = MessageLog()
    app = make_app(runs_dir, None)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await wait_until(pilot, lambda: len(log.of(RunsScreen.Summarized)) >= 3)
        table = screen.query_one("#runs", LineTable)

        def cells_now() -> dict[str, list[str]]:
            return {key: [c if isinstance(c, str) else c.plain for c in table.render_row(key)] for key in table.rows}

        # the summaries arrive as messages; the table shows them on its next refresh
        await wait_until(pilot, lambda: all(row[2] != "reading…" for row in cells_now().values()))
        assert sorted(table.rows) == ["crashed-run", "demo-run", "second-run"]
        cells = cells_now()
        assert cells["demo-run"][1:5] == ["tiny-train", "finished", "✔ chain", "12"]  # the log column: verify's check
        assert cells["second-run"][2:5:2] == ["running", "3"]
        assert cells["crashed-run"][2:5:2] == ["stopped", "2"]  # its log says running, but its driver is gone
        driver.release()  # the second run's driver dies: the next scan says so though its log did not change
        screen.rescan()
        await wait_until(pilot, lambda: cells_now()["second-run"][2] == "stopped")
        assert " vs " in cells["demo-run"][7] and cells["demo-run"][6].endswith("σ")  # the Δσ has a column of its own
        table.move_to("demo-run")
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(log.of(DashboardScreen.Loaded)))
        assert isinstance(app.screen, DashboardScreen)
        assert app.screen.session.run_dir == runs_dir / "demo-run"


async def test_dashboard_header_table_filters_and_sort(runs_dir: Path) -> None:
    log = MessageLog()
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        dash = await open_dashboard(pilot, app)
        header = plain(dash.query_one("#run-header").content)
        assert "tiny-train" in header and "finished (max_trials)" in header
        assert "☆ unreviewed claim" in header  # the best (t0003) has no approval yet
        assert "☆ 1 awaiting review (hitl)" in header  # t0012 is held by the hitl gate (a claim, as the best is)
        table = dash.query_one("#trials", LineTable)
        assert len(table.rows) == 15 and table.rows[0] == "t0012"  # newest first; 3 baselines + 12
        await pilot.press("a")  # agent filter: alice (sorted: alice, baseline, bob)
        assert dash.agent_filter == "alice"
        assert {dash.state.trials[t].agent for t in table.rows} == {"alice"}
        await pilot.press("c", "f")  # clear, then status filter: ok
        assert {dash.state.trials[t].status for t in table.rows} == {"ok"}
        await pilot.press("c", "slash")
        await pilot.press(*"warmup", "enter")
        assert table.rows and all("warmup" in dash.state.trials[t].hypothesis for t in table.rows)
        await pilot.press("c", "s")  # sort by score: best (lowest val_loss) first
        scores = [dash.state.trials[t].score for t in table.rows if dash.state.trials[t].score is not None]
        assert scores == sorted(scores)
        bar = plain(dash.query_one("#filter-bar").content)
        assert "sort score" in bar
        agents = plain(dash.query_one("#agents").content)
        assert "alice" in agents and "bob" in agents
        assert "helped" in plain(dash.query_one("#blackboard-text").content)


async def test_dashboard_follows_appended_events(runs_dir: Path, run_dir: Path) -> None:
    log = MessageLog()
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        dash = await open_dashboard(pilot, app)
        store = RunStore(run_dir)
        blob = store.put_json_blob({"hypothesis": "live one", "edits": []})
        store.append_many([
            ("agent.turn", "agent:alice", {"agent": "alice", "role": "assistant", "text": "trying a live change"}),
            ("trial.proposed", "agent:alice", {"trial_id": "t9999", "parent": "t0003", "agent": "alice",
                                               "hypothesis": "live one", "proposal_blob": blob}),
            ("trial.finished", "oracle", {"trial_id": "t9999", "status": "ok", "score": 2.5, "seconds": 1.0}),
            ("blackboard.post", "agent:alice", {"agent": "alice", "text": "a live post"}),
        ])
        store.close()
        await wait_until(pilot, lambda: "t9999" in dash.query_one("#trials", LineTable).rows)
        assert log.of(DashboardScreen.Appended)
        assert dash.state.trials["t9999"].status == "ok"
        assert "a live post" in plain(dash.query_one("#blackboard-text").content)
        assert dash.session.model is not None and dash.session.model.turns[-1].role == "assistant"


async def test_trial_view_diff_outcome_lineage_and_navigation(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        dash.query_one("#trials", LineTable).move_to("t0012")
        await pilot.press("enter")
        trial = app.screen
        assert isinstance(trial, TrialScreen) and trial.trial_id == "t0012"
        body = plain(trial.query_one("#trial-content").content)
        assert "--- a/train.py" in body and "-BATCH_SIZE" in body and "+BATCH_SIZE" in body
        assert "val_loss: 2." in body  # feedback and the log tail
        assert "t0012 2.3547 ← t0003 2.3776 ← base-0" in body  # lineage back to the baseline
        assert "awaiting review" in body
        await pilot.press("p")
        assert trial.trial_id == "t0003"
        await pilot.press("left_square_bracket")  # previous in the table's order (newest first): t0004
        assert trial.trial_id == "t0004"
        await pilot.press("right_square_bracket")
        assert trial.trial_id == "t0003"
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_trace_steps_show_tool_results_filters_jump_and_search(runs_dir: Path) -> None:
    log = MessageLog()
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        dash = await open_dashboard(pilot, app)
        await wait_until(pilot, lambda: dash.session.model is not None and dash.session.model.turns_indexed)
        await pilot.press("t")
        trace = app.screen
        assert isinstance(trace, TraceScreen)
        table = trace.query_one("#turns", LineTable)
        assert len(table.rows) == 48  # 12 trials x (assistant, call, result, assistant)
        roles = []
        for _ in range(3):
            roles.append(plain(trace.query_one("#turn-text").content))
            await pilot.press("down")
        assert "assistant" in roles[0] and "The best so far" in roles[0]
        assert "tool_call" in roles[1] and '"path": "train.py"' in roles[1]
        assert "call read_file" in roles[2] and "result · " in roles[2] and "LEARNING_RATE" in roles[2]  # the tool's result is shown
        await wait_until(pilot, lambda: bool(log.of(TraceScreen.StepShown)))
        await pilot.press("a")
        assert trace.agent_filter == "alice" and len(table.rows) == 24
        await pilot.press("a", "a")  # bob, then all again
        assert trace.agent_filter is None
        table.move_to("0")
        await pilot.press("t")  # filter to this step's trial
        assert trace.trial_filter == "t0001" and len(table.rows) == 4
        await pilot.press("g")
        assert isinstance(app.screen, TrialScreen) and app.screen.trial_id == "t0001"
        await pilot.press("escape")
        assert app.screen is trace  # and back
        await pilot.press("t")  # clear the trial filter
        await pilot.press("slash", *"proposing t0005", "enter")
        await wait_until(pilot, lambda: bool(log.of(TraceScreen.SearchDone)))
        found = log.of(TraceScreen.SearchDone)[-1]
        assert found.index is not None  # type: ignore[attr-defined]
        assert "Proposing t0005" in plain(trace.query_one("#turn-text").content)


async def test_run_change_before_a_pushed_screen_mounts_does_not_crash(runs_dir: Path) -> None:
    """The turn index can land between push_screen and the new screen's compose (seen in tmux as
    a crash on `t`): the screen is current but has no widgets yet; on_mount must draw instead."""
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        await wait_until(pilot, lambda: dash.session.model is not None and dash.session.model.turns_indexed)
        for screen_type in (TraceScreen, ReviewScreen, LineageScreen):
            screen = screen_type(dash.session)
            app.push_screen(screen)
            assert app.screen is screen and not screen.is_mounted
            dash._broadcast([])  # what a TurnsIndexed or a tailed chunk does at this moment
            await pilot.pause()
            assert app.screen is screen and screen.is_mounted
            assert app.return_code is None  # the app did not die of an exception
            await pilot.press("escape")
            assert app.screen is dash
        await pilot.press("t")
        trace = app.screen
        assert isinstance(trace, TraceScreen)
        assert len(trace.query_one("#turns", LineTable).rows) == 48


async def test_run_change_while_a_screen_is_pruned_does_not_crash(runs_dir: Path) -> None:
    """The app shutting down prunes the top screen first (its widgets go) while the dashboard's redraw
    timer is still due: that redraw reached a trial view with no widgets (seen in CI as NoMatches on
    #trial-title after a review). A screen being pruned, or any screen once the app stops, draws nothing."""
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        dash.query_one("#trials", LineTable).move_to("t0012")
        await pilot.press("enter")
        trial = app.screen
        assert isinstance(trial, TrialScreen)
        await trial.query("*").remove()  # what pruning does to its widgets, the screen still on the stack
        trial._pruning = True
        dash._broadcast([])
        await pilot.pause()
        assert app.return_code is None  # the app did not die of NoMatches
        trial._pruning = False
        with pytest.raises(NoMatches):  # the same call on a screen not being pruned does reach the view
            trial.run_changed([])


async def test_review_approve_appends_event_and_promotes_claim(runs_dir: Path, run_dir: Path) -> None:
    log = MessageLog()
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.press("v")
        review = app.screen
        assert isinstance(review, ReviewScreen)
        queue = review.query_one("#queue", LineTable)
        assert queue.rows[0] == "t0012"  # the held claim first, then the promoted best
        assert queue.rows[1] == "t0003"
        await pilot.press("a")  # `a` filters elsewhere; it never writes a review
        assert app.screen is review
        await pilot.press("y")
        assert isinstance(app.screen, NoteScreen)
        await pilot.press(*"checked the diff", "enter")
        await wait_until(pilot, lambda: bool(log.of(RRMAApp.ReviewRecorded)))
        decided = log.of(ReviewDecided)[-1]
        assert (decided.trial_id, decided.decision, decided.note) == ("t0012", "approve", "checked the diff")  # type: ignore[attr-defined]
        events = events_of(run_dir)
        review_ev = [e for e in events if e["kind"] == "review"][-1]
        assert review_ev["actor"] == "human:carol"
        assert review_ev["data"] == {"trial_id": "t0012", "decision": "approve", "reviewer": "carol", "note": "checked the diff"}
        promoted = [e for e in events if e["kind"] == "trial.promoted"][-1]
        assert promoted["data"]["trial_id"] == "t0012" and promoted["data"]["approved_by"] == "carol"
        await wait_until(pilot, lambda: dash.state.best_id == "t0012")
        assert "t0012" not in queue.rows
        await pilot.press("escape")
        assert "★ approved by carol" in plain(dash.query_one("#run-header").content)


async def test_review_reject_and_flag_from_the_trial_view(runs_dir: Path, run_dir: Path) -> None:
    log = MessageLog()
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        dash = await open_dashboard(pilot, app)
        dash.query_one("#trials", LineTable).move_to("t0011")
        await pilot.press("enter", "x", *"overfits", "enter")
        await wait_until(pilot, lambda: len(log.of(RRMAApp.ReviewRecorded)) == 1)
        await pilot.press("p", "exclamation_mark", "escape")  # flag on the parent: Esc cancels the note
        await pilot.press("f", "a")  # filter keys elsewhere: nothing here
        assert isinstance(app.screen, TrialScreen)
        await pilot.press("exclamation_mark", "enter")
        await wait_until(pilot, lambda: len(log.of(RRMAApp.ReviewRecorded)) == 2)
        reviews = [e["data"] for e in events_of(run_dir) if e["kind"] == "review"]
        assert [(r["trial_id"], r["decision"], r["note"]) for r in reviews] == [("t0011", "reject", "overfits"), ("t0003", "flag", "")]
        await wait_until(pilot, lambda: dash.state.trials["t0003"].review_status == "flagged")
        assert "⚑ flagged by carol" in plain(app.screen.query_one("#trial-content").content)


async def test_lineage_tree_collapsed_with_best_path(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("l")
        lineage = app.screen
        assert isinstance(lineage, LineageScreen)
        nodes = lineage.nodes
        assert set(nodes) >= {"base-0", "t0003", "t0012"}
        assert not nodes["base-0"].is_expanded and not nodes["t0003"].is_expanded  # collapsed by default
        assert "on #1f3b1f" in str(nodes["t0003"].label.spans) and "on #1f3b1f" not in str(nodes["t0004"].label.spans)
        await pilot.press("b")
        await pilot.pause()
        assert nodes["base-0"].is_expanded
        assert lineage.query_one("Tree").cursor_node is nodes["t0003"]
        await pilot.press("enter")  # Enter opens the trial under the cursor (space folds)
        assert isinstance(app.screen, TrialScreen) and app.screen.trial_id == "t0003"


async def test_ctrl_n_refuses_bad_input_in_the_prompt(runs_dir: Path, tmp_path: Path) -> None:
    app = make_app(runs_dir, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+n")
        assert isinstance(app.screen, NewRunScreen)
        for typed, expected in [
            ("/no/such.yaml", "no task file or bench named '/no/such.yaml'"),
            (str(tmp_path), "is a directory"),
            ("demo --trials many", "invalid int value"),
            ("demo --runs elsewhere", "leave out --runs"),
            ("nosuchbench", "benches: "),
        ]:
            app.screen.query_one("#task-input").value = typed  # type: ignore[attr-defined]
            await pilot.press("enter")
            assert isinstance(app.screen, NewRunScreen), typed  # refused in the prompt: no process started
            assert expected in plain(app.screen.query_one("#task-error").content), typed
        assert not app.drivers


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl+n bench", "rrma-tui run TASK.yaml"])
async def test_a_run_started_here_is_a_headless_driver_and_the_dashboard_follows_it(tmp_path: Path, how: str) -> None:
    task = Path(__file__).resolve().parents[2] / "benches" / "demo" / "task.yaml"
    runs = tmp_path / "runs"
    start = None if how.startswith("ctrl") else ["run", str(task), "--set", "budget.max_trials=6", "--headless",
                                                 "--quiet", "--runs", str(runs)]
    log = MessageLog()
    app = RRMAApp(runs, None, reviewer="carol", start_args=start, poll_interval=0.05)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        if start is None:
            await pilot.press("ctrl+n")
            await pilot.press(*"demo --trials 6", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), timeout=60)
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        [proc] = app.drivers
        assert proc.run_dir == dash.session.run_dir and proc.process.pid != os.getpid()
        await wait_until(pilot, lambda: dash.state.finish_reason is not None, timeout=120)
        assert proc.process.wait(30) == 0
        assert dash.state.finish_reason == "max_trials" and len(dash.state.agent_trials()) == 6
        # redraws are coalesced (at most every 0.2 s): the table catches up on the next one
        await wait_until(pilot, lambda: len(dash.query_one("#trials", LineTable).rows) == len(dash.state.order))
        assert not app.live_drivers()
        await pilot.press("q")  # nothing runs any more: quits without asking
        await wait_until(pilot, lambda: app.exiting)
