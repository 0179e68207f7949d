"""Snapshot tests of every screen at 120x40, and the main ones at 80x24 (pytest-textual-snapshot; update with --snapshot-update
only after looking at the diff in snapshot_report.html)."""

from __future__ import annotations

from pathlib import Path

from make_run import make_run
from tui_helpers import fixed_clock, wait_until

from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen

SIZE = (120, 40)


def app_for(tmp_path: Path, run: bool = True) -> RRMAApp:
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12, hitl=True, pending_claims=1)
    return RRMAApp(runs, runs / "demo-run" if run else None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


def after(*keys: str):  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        app = pilot.app
        if app.initial_run is not None:
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                             and app.screen.session.model.turns_indexed)
        else:
            await wait_until(pilot, lambda: "finished" in str(app.screen.query_one("#runs").render_line(1)))
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.3)

    return run_before


def test_snapshot_runs(snap_compare, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # the title shows the runs directory as given: "runs"
    assert snap_compare(app_for(Path("."), run=False), terminal_size=SIZE, run_before=after())


def test_snapshot_dashboard(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=after())


def test_snapshot_trial(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=after("enter"))


def test_snapshot_trace(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=after("t", "down", "down"))


def test_snapshot_review(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=after("v"))


def test_snapshot_lineage(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=after("l", "b"))


def test_snapshot_help(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=after("question_mark"))


SMALL = (80, 24)  # the smallest terminal the TUI is made for: nothing cut silently, q and ? in the footer


def test_snapshot_dashboard_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SMALL, run_before=after())


def test_snapshot_trial_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=SMALL, run_before=after("enter"))


def test_snapshot_runs_80x24(snap_compare, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert snap_compare(app_for(Path("."), run=False), terminal_size=SMALL, run_before=after())
