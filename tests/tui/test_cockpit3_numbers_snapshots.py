"""80x24 snapshots of the screens issue 35's numbers and integrity change: the runs list (the log and Δσ columns, a
proof run's progress, logs that fail verification), a proof run's dashboard header, the header of a cut log and
R's question on it. Update with --snapshot-update only after looking at the diff in snapshot_report.html."""

from __future__ import annotations

from pathlib import Path

from screen_text import screen_lines
from test_cockpit3_numbers import damaged_copies, write_proof_run
from tui_helpers import fixed_clock, settle, wait_until

from tui.app import RRMAApp
from tui.dialogs import UnverifiedResumeScreen
from tui.screens.dashboard import DashboardScreen

SMALL = (80, 24)


def test_snapshot_runs_integrity_and_proofs_80x24(snap_compare, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    damaged_copies(runs)
    write_proof_run(runs)
    monkeypatch.chdir(tmp_path)  # the title shows the runs directory as given
    app = RRMAApp(Path("runs"), None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until(pilot, lambda: sum("stopped" in line for line in screen_lines(app)) == 5)
        await settle(pilot)

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_snapshot_proof_run_dashboard_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    run_dir = write_proof_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                         and app.screen.session.model.turns_indexed and app.screen.integrity is not None)
        await settle(pilot)

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_snapshot_resume_on_a_cut_log_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    copies = damaged_copies(runs)
    app = RRMAApp(runs, copies["cut"], reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                         and app.screen.session.model.turns_indexed and app.screen.integrity is not None)
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, UnverifiedResumeScreen))
        await settle(pilot)

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)
