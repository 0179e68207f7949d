"""The experiment screen: the arms' curves side by side (textual-plotext), the arms' CIs, every cell; Enter opens a run."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import fixed_clock, wait_until

from rrma.run.experiment import new_experiment, open_experiment, run_experiment, spec_from_dict
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.experiment import ExperimentScreen


@pytest.mark.asyncio
async def test_experiment_screen_plots_arms_and_opens_a_cell(tmp_path: Path) -> None:
    spec, task_path = spec_from_dict({
        "name": "tui", "bench": "demo", "seeds": 2,
        "set": {"budget.max_trials": 3, "noise.baseline_repeats": 1, "budget.max_concurrent": 1},
        "arms": {"history": {}, "control": {"loop.history": False, "loop.policy": "independent"}}})
    exp = open_experiment(new_experiment(spec, task_path, tmp_path, exp_id="tui"))
    run_experiment(exp, concurrency=2)
    app = RRMAApp(exp.runs_dir, None, reviewer="carol", clock=fixed_clock, poll_interval=0.05, experiment=exp.dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ExperimentScreen) and app.screen.report is not None)
        screen = app.screen
        assert isinstance(screen, ExperimentScreen) and screen.report is not None
        assert [a.name for a in screen.report.arms] == ["history", "control"]
        assert [name for name, *_ in screen._series("trials")] == ["history", "control"]
        arms = str(screen.query_one("#exp-arms").render())
        assert "history" in arms and "control" in arms
        await pilot.press("S")  # one line per cell
        assert len(screen._series("trials")) == 4
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert app.screen.session.run_dir.name == "history-s0"  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_confirmation_repeats_are_rows_of_the_dashboard(tmp_path: Path) -> None:
    """loop.confirm: the would-be best's repeats are trials the dashboard lists, next to the trial they confirm."""
    from rrma.run.loop import start_run
    from rrma.task import load_task
    from tui.widgets.line_table import LineTable

    demo = Path(__file__).resolve().parents[2] / "benches" / "demo" / "task.yaml"
    task = load_task(demo, {"budget.max_trials": 4, "noise.baseline_repeats": 2, "loop.confirm": 2,
                            "budget.max_concurrent": 1})
    result = start_run(task, tmp_path / "runs", run_id="confirm")
    repeats = [t.trial_id for t in result.state.confirmation_trials()]
    assert repeats and all("-r" in r for r in repeats)
    app = RRMAApp(tmp_path / "runs", result.run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        await pilot.pause()
        rows = app.screen.query_one("#trials", LineTable).rows
        assert set(repeats) <= set(rows)
