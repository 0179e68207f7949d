"""The cockpit under Pilot: 80x24 stays usable, reviews can be superseded and withdrawn, the command
palette carries the app's own commands, the theme persists, and `R` resumes only a run nobody drives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from test_tui_screens import events_of, make_app, open_dashboard
from textual.widgets import Static
from tui_helpers import plain, wait_until

from rrma.log.driver_lock import DriverLock
from tui.app import RRMAApp
from tui.dialogs import ExportScreen, NoteScreen, TrialPickScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.trial import TrialScreen
from tui.settings import load_settings
from tui.widgets.line_table import Column, LineTable, column_layout

pytestmark = pytest.mark.asyncio


def rendered(table: LineTable, row: int) -> str:
    return "".join(segment.text for segment in table.render_line(row))


@pytest.mark.parametrize(("width", "shown"), [
    (120, ["id", "parent", "agent", "st", "score", "Δσ", "sec", "review", "hypothesis"]),
    (60, ["id", "agent", "st", "score", "Δσ", "review", "hypothesis"]),
    (36, ["id", "st", "score", "Δσ"]),  # the dashboard's table at 80 columns
    (20, ["id", "st", "score"]),  # only what must stay; the last one narrowed (and marked …) if need be
])
async def test_narrow_tables_leave_whole_columns_out(width: int, shown: list[str]) -> None:
    from tui.screens.dashboard import TRIAL_COLUMNS

    layout = column_layout(TRIAL_COLUMNS, width)
    assert [TRIAL_COLUMNS[i].label for i, _ in layout] == shown
    assert sum(w + 1 for _, w in layout) <= width


async def test_a_table_that_cannot_fit_narrows_its_last_column() -> None:
    columns = [Column("a", "a", 8), Column("b", "b", 8)]
    assert column_layout(columns, 12) == [(0, 8), (1, 2)]


async def test_80x24_dashboard_shows_every_number_whole_and_the_footer_keeps_q_and_help(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.pause(0.3)
        header = plain(dash.query_one("#run-header").content, width=80).splitlines()
        assert len([line for line in header if line.strip()]) == 3
        assert all(len(line.rstrip()) <= 78 for line in header)  # one row each: nothing wraps
        assert header[2].startswith("trials 12 of 12:") and "to review" in header[2]  # the counts stay
        assert "unreviewed claim" in header[1]
        table = dash.query_one("#trials", LineTable)
        assert table.shown_columns == ["id", "status", "score", "delta"]
        state = dash.state
        for y, key in enumerate(table.rows[: table.size.height - 1], start=1):
            rec = state.trials[key]
            line = rendered(table, y)
            if rec.score is not None:  # the score as the table formats it, whole
                from tui.widgets.trial_text import fmt_score

                assert fmt_score(rec.score) in line, (key, line)
        footer = "".join(str(w.render()) for w in app.screen.query("FooterKey"))
        assert footer.startswith("q") or "Quit" in footer
        keys = [w.key for w in app.screen.query("FooterKey")]  # type: ignore[attr-defined]
        assert keys[:2] == ["q", "question_mark"]


async def test_withdraw_and_supersede_from_the_trial_view(runs_dir: Path, run_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        dash.query_one("#trials", LineTable).move_to("t0004")
        await pilot.press("enter")
        trial = app.screen
        assert isinstance(trial, TrialScreen)
        await pilot.press("u")  # nothing to withdraw yet: a notice, no modal, no event
        assert app.screen is trial
        await pilot.press("y")
        assert isinstance(app.screen, NoteScreen)
        await pilot.press(*"fine", "enter")
        await wait_until(pilot, lambda: dash.state.trials["t0004"].review_status == "approved")
        await pilot.press("x")
        note = app.screen
        assert isinstance(note, NoteScreen)
        assert "replaces carol's approve" in plain(note.query_one("#note-detail", Static).content)
        await pilot.press(*"on second thought", "enter")
        await wait_until(pilot, lambda: dash.state.trials["t0004"].review_status == "rejected")
        await pilot.press("u", "enter")
        await wait_until(pilot, lambda: dash.state.trials["t0004"].review_status == "unreviewed")
        body = plain(trial.query_one("#trial-content").content)
        assert "✔ approved by carol" in body and "✘ rejected by carol" in body and "↶ withdrawn" in body
        assert body.count("superseded") == 2
    reviews = [e for e in events_of(run_dir) if e["kind"] == "review"]
    assert [r["data"]["decision"] for r in reviews] == ["approve", "reject", "withdraw"]
    assert reviews[1]["data"]["supersedes"] == reviews[0]["seq"]
    assert reviews[2]["data"]["supersedes"] == reviews[1]["seq"]


async def test_review_queue_lists_flagged_trials_again(runs_dir: Path, run_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.press("v")
        queue = app.screen.query_one("#queue", LineTable)
        first = queue.cursor_key
        assert first is not None
        await pilot.press("exclamation_mark", *"look again", "enter")
        await wait_until(pilot, lambda: dash.state.trials[first].review_status == "flagged")
        assert first not in queue.rows  # out of the "to review" list...
        await pilot.press("f")
        assert queue.rows == [first]  # ...and listed under "flagged"
        await pilot.press("f")
        assert first in queue.rows  # every reviewed trial
        await pilot.press("f")
        assert first not in queue.rows


async def commands(app: RRMAApp) -> dict[str, Any]:
    return {c.title: c for c in app.get_system_commands(app.screen)}


async def test_the_command_palette_has_the_apps_own_commands(runs_dir: Path, run_dir: Path, tmp_path: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        found = await commands(app)
        for title in ("Go to trial", "Compare with the best", "Compare trials", "Stop the run",
                      "Pause or continue the run", "Resume the run here", "Post to the blackboard", "Steer agents",
                      "Export the run", "New run", "Open run demo-run", "Theme"):
            assert title in found, title
        found["Go to trial"].callback()
        await pilot.pause()
        assert isinstance(app.screen, TrialPickScreen)
        await pilot.press(*"no-such", "enter")
        assert "no trial 'no-such'" in plain(app.screen.query_one("#trial-error").content)
        app.screen.query_one("#trial-input").value = "12"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        assert app.screen.trial_id == "t0012"  # type: ignore[attr-defined]
        await pilot.press("escape")
        (await commands(app))["Export the run"].callback()
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        out = tmp_path / "exported.db"
        app.screen.query_one("#export-input").value = str(out)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(pilot, lambda: out.exists() and any("exported demo-run" in str(n.message)
                                                             for n in app._notifications))
        import sqlite3

        assert sqlite3.connect(out).execute("SELECT count(*) FROM trials").fetchone()[0] >= 12
        assert app.screen is dash


async def test_the_palette_opens_with_ctrl_p_and_runs_a_command(runs_dir: Path) -> None:
    from textual.command import CommandPalette

    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"go to trial")
        await pilot.pause(0.5)
        await pilot.press("down", "enter")  # the first hit
        await wait_until(pilot, lambda: isinstance(app.screen, TrialPickScreen))


async def test_the_theme_chosen_is_the_next_sessions_theme(runs_dir: Path, private_settings: Path) -> None:
    app = make_app(runs_dir, None)
    async with app.run_test(size=(80, 24)) as pilot:
        app.theme = "textual-light"
        await pilot.pause()
    assert load_settings() == {"theme": "textual-light"}
    assert json.loads((private_settings / "tui.json").read_text())["theme"] == "textual-light"
    again = make_app(runs_dir, None)
    async with again.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert again.theme == "textual-light"
    (private_settings / "tui.json").write_text("{not json")
    broken = make_app(runs_dir, None)
    async with broken.run_test(size=(80, 24)) as pilot:  # a malformed file: defaults, no crash
        await pilot.pause()
        assert broken.theme != "textual-light" and broken.is_running


async def test_resume_key_refuses_a_live_run_and_a_finished_one(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    live = make_run(runs, "live-run", trials=3, finished=False)
    make_run(runs, "done-run", trials=3)
    with DriverLock(live):
        app = make_app(runs, "live-run")
        async with app.run_test(size=(120, 40)) as pilot:
            await open_dashboard(pilot, app)
            await pilot.press("R")
            await wait_until(pilot, lambda: any("the run is live" in str(n.message) for n in app._notifications))
            assert isinstance(app.screen, DashboardScreen) and not app.drivers
    app = make_app(runs, "done-run")
    async with app.run_test(size=(120, 40)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("R")
        await wait_until(pilot, lambda: any("nothing to resume" in str(n.message) for n in app._notifications))
        assert not app.drivers


async def test_a_run_whose_driver_is_gone_is_stopped_in_the_header(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "crashed", trials=3, finished=False)  # no run.finished and no process holds it
    app = make_app(runs, "crashed")
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        header = plain(dash.query_one("#run-header").content)
        assert "stopped (no driver: R resumes)" in header and "running" not in header
