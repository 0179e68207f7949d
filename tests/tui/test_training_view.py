"""The training view (`T` on the dashboard of a training run): curves, latest step, session and checkpoints,
updated live as a trainer appends `train.*` events; the header's `train: step N, reward R`; keys; 80x24.

The runs are written through RunStore as `rrma-tui train` writes them (tests/tui/make_training_run.py): a
run.started like the other TUI tests' runs, then train.* events by the `trainer`, each step's rollouts as
ordinary trials. The expected figures are read back from the log's own lines (json), not from the fold.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from make_training_run import append_steps, make_training_run
from test_tui_keys import SCREENS, bindings, documented
from textual.screen import Screen
from textual.widgets import Static
from tui_helpers import fixed_clock, plain, settle
from tui_helpers import wait_until as _wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.training import TrainingScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable
from tui.widgets.training import TrainCharts, TrainPlot, num, train_series


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)  # the helper is typed for Pilot[object]; RRMAApp's pilot is Pilot[int]


def logged_steps(run_dir: Path) -> list[dict[str, Any]]:
    """Every train.step's data, in log order, straight from events.jsonl."""
    out = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "train.step":
            out.append(event["data"])
    return out


def panel(screen: Screen[Any], selector: str) -> str:
    return plain(screen.query_one(selector, Static).content)


async def open_training(pilot: Any) -> TrainingScreen:
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    await pilot.press("T")
    await wait_until(pilot, lambda: isinstance(app.screen, TrainingScreen) and app.screen.is_mounted)
    await pilot.pause()
    return app.screen  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_training_view_follows_the_trainer_live(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_training_run(runs, steps=4, checkpoint_every=3)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        dash = app.screen
        last = logged_steps(run_dir)[-1]
        header = panel(dash, "#run-header")
        assert f"train: step 4, reward {num(last['reward_mean'])}" in header

        screen = await open_training(pilot)
        table = screen.query_one("#train-steps", LineTable)
        assert table.rows == ["1", "2", "3", "4"]
        charts = screen.query_one("#train-charts", TrainCharts)
        plots = {p.curve: p for p in screen.query(TrainPlot)}
        steps = logged_steps(run_dir)
        assert plots["reward"].drawn["mean"] == ([1.0, 2.0, 3.0, 4.0], [s["reward_mean"] for s in steps])
        assert plots["reward"].drawn["high"][1] == [s["reward_mean"] + s["reward_std"] for s in steps]
        assert plots["entropy"].drawn["entropy"][1] == [s["entropy"] for s in steps]
        assert plots["kl"].drawn["kl"][1] == [s["kl"] for s in steps]
        assert plots["loss"].drawn["loss"][1] == [s["loss"] for s in steps]
        assert f"{num(last['entropy'], '.4g')}  step 4" in charts.labels()["entropy"]
        latest = panel(screen, "#train-latest")
        assert "step 4" in latest and f"{num(last['reward_mean'])} ± {num(last['reward_std'])}" in latest
        zero_mean = sum(s["zero_variance_frac"] for s in steps) / 4
        assert f"{num(last['zero_variance_frac'], '.0%')} (mean {num(zero_mean, '.0%')})" in latest
        assert f"novelty rate    {num(last['novelty_rate'], '.0%')}" in latest
        session = panel(screen, "#train-session")
        assert "grpo" in session and "base …/sft-run/artifacts/3fa2c1d9/model" in session
        assert "a fresh start" in session and "training…" in session
        assert "steps 30, lr 1e-05, group 4, prompts 1, beta 0.04, lora_r 8" in session
        ckpt3 = hashlib.sha256(b"adapter-3").hexdigest()[:12]
        assert f"step    3 adapter    {ckpt3}" in panel(screen, "#train-checkpoints")
        draws = charts.draws

        # the trainer goes on while the view is open: three more steps (a checkpoint at 6) and its end
        append_steps(run_dir, 5, 7, checkpoint_every=3, finish=True)
        await wait_until(pilot, lambda: table.rows == [str(n) for n in range(1, 8)])
        await wait_until(pilot, lambda: len(plots["reward"].drawn["mean"][0]) == 7)
        steps = logged_steps(run_dir)
        assert charts.draws > draws
        assert plots["reward"].drawn["mean"][1] == [s["reward_mean"] for s in steps]
        assert "step 7" in charts.labels()["reward"] and "step 7" in panel(screen, "#train-latest")
        assert table.cursor_key == "7"  # the table follows the newest step
        assert hashlib.sha256(b"adapter-6").hexdigest()[:12] in panel(screen, "#train-checkpoints")
        # train.finished is the trainer's last line: the tail may bring it a poll after the steps
        await wait_until(pilot, lambda: "finished: done after 7 steps" in panel(screen, "#train-session"))
        session = panel(screen, "#train-session")
        assert f"final {hashlib.sha256(b'final-7').hexdigest()[:12]}" in session

        # a session resumed from step 6's checkpoint: step 7 died with the first session, then is logged again
        append_steps(run_dir, 7, 6, resumed_from=6)  # train.started only
        await wait_until(pilot, lambda: table.rows == [str(n) for n in range(1, 7)])
        assert "resumed from step 6" in panel(screen, "#train-session")
        append_steps(run_dir, 7, 8, checkpoint_every=100, seed=5, prefix="r")
        await wait_until(pilot, lambda: table.rows[-1] == "8")
        assert table.rows == [str(n) for n in range(1, 9)]
        redone = [s for s in logged_steps(run_dir) if s["step"] == 7]
        assert len(redone) == 2
        await wait_until(pilot, lambda: len(plots["reward"].drawn["mean"][0]) == 8)
        assert plots["reward"].drawn["mean"][1][6] == redone[-1]["reward_mean"]
        session = panel(screen, "#train-session")
        assert "session 2 of 2" in session and "resumed from step 6" in session and "training…" in session

        # Enter: the highlighted step's rollouts in the trial view; ] steps through that step's rollouts only
        await wait_until(pilot, lambda: table.cursor_key == "8")
        await pilot.press("up")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        trial = app.screen
        assert isinstance(trial, TrialScreen)
        assert trial.trial_id == redone[-1]["trials"][0] and trial.order == redone[-1]["trials"]
        await pilot.press("right_square_bracket")
        assert trial.trial_id == redone[-1]["trials"][1]
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is dash)
        assert "train: step 8, reward" in panel(dash, "#run-header")


@pytest.mark.asyncio
async def test_t_opens_nothing_in_a_run_without_training_steps(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "demo-run", trials=4)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        dash = app.screen
        assert "train:" not in panel(dash, "#run-header")
        await pilot.press("T")
        await pilot.pause(0.1)
        assert app.screen is dash
        assert any("no training steps" in n.message for n in app._notifications)
        # a trainer that starts writing into the run: the header says so and T opens the view
        store = RunStore(run_dir)
        store.append("train.started", "trainer", {"method": "sft", "base_model": "tiny"})
        store.append("train.step", "trainer", {"method": "sft", "step": 1, "loss": 2.5})
        store.close()
        await wait_until(pilot, lambda: "train: step 1, loss 2.5" in panel(dash, "#run-header"))
        screen = await open_training(pilot)
        labels = screen.query_one("#train-charts", TrainCharts).labels()
        assert "2.5" in labels["loss"] and "not logged by sft" in labels["reward"]


@pytest.mark.asyncio
async def test_a_refused_train_event_is_not_shown(tmp_path: Path) -> None:
    """Only the trainer records training: a train.step by anyone else is refused by the fold, not drawn."""
    runs = tmp_path / "runs"
    run_dir = make_training_run(runs, steps=2)
    store = RunStore(run_dir)
    store.append("train.step", "agent:policy", {"method": "grpo", "step": 3, "loss": 0.1, "reward_mean": 1.0})
    store.close()
    from rrma.log.reader import read_state

    assert [s["step"] for s in train_series(read_state(run_dir)).steps] == [1, 2]


def test_training_keys_mean_one_thing_and_are_documented() -> None:
    """The view's keys, with every other screen's: each means one thing, and docs/tui.md lists them."""
    meaning: dict[str, set[str]] = {}
    for cls in [TrainingScreen, *(c for classes in SCREENS.values() for c in classes)]:
        for key, action in bindings(cls):
            meaning.setdefault(key, set()).add(action)
    clashes = {k: a for k, a in meaning.items() if len(a) > 1 and k not in ("Enter", "Esc", "space")}
    assert not clashes
    assert meaning["space"] <= {"toggle_node", "toggle_select"}, meaning["space"]  # test_tui_keys' rule for space
    assert documented("Training") == {key for key, _ in bindings(TrainingScreen)}
    assert ("T", "training") in bindings(DashboardScreen) and "T" in documented("Dashboard")


SMOLLM2_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "smollm2_grpo_control"


@pytest.mark.asyncio
async def test_training_view_opens_on_a_recorded_smollm2_run(tmp_path: Path) -> None:
    """A real run's log (tests/fixtures/logs/smollm2_grpo_control: `bench rl` of SmolLM2's sft adapter, three
    GRPO steps of four rollouts under the shuffled-reward control; its artifacts are left out): the view
    shows its steps, the rewards the oracle gave and the session's settings, the control among them."""
    runs = tmp_path / "runs"
    run_dir = runs / SMOLLM2_RUN.name
    shutil.copytree(SMOLLM2_RUN, run_dir)
    steps = logged_steps(run_dir)
    assert [s["step"] for s in steps] == [1, 2, 3] and all(s["control"]["kind"] == "shuffled-reward" for s in steps)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_training(pilot)
        table = screen.query_one("#train-steps", LineTable)
        await wait_until(pilot, lambda: table.rows == ["1", "2", "3"])
        plots = {p.curve: p for p in screen.query(TrainPlot)}
        await wait_until(pilot, lambda: len(plots["reward"].drawn.get("mean", ([], []))[0]) == 3)
        # the curve is the oracle's rewards of each step's rollouts (not the order they were trained in)
        assert plots["reward"].drawn["mean"] == ([1.0, 2.0, 3.0], [s["reward_mean"] for s in steps])
        assert [round(sum(s["rewards"]) / 4, 5) for s in steps] == [round(s["reward_mean"], 5) for s in steps]
        assert plots["entropy"].drawn["entropy"][1] == [s["entropy"] for s in steps]
        session = panel(screen, "#train-session")
        assert "grpo" in session and "finished: done after 3 steps" in session
        assert "steps 3, lr 0.001, group 4, prompts 1, beta 0.0, lora_r 16, control shuffled-reward" in session
        assert f"{num(steps[-1]['reward_mean'])} ± {num(steps[-1]['reward_std'])}" in panel(screen, "#train-latest")


def app_for(tmp_path: Path) -> RRMAApp:
    runs = tmp_path / "runs"
    run_dir = make_training_run(runs, steps=12)
    return RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


async def _open(pilot: Any) -> None:
    screen = await open_training(pilot)
    await wait_until(pilot, lambda: screen.query_one("#train-charts", TrainCharts).draws > 0)
    await settle(pilot)


def test_snapshot_training_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=(80, 24), run_before=_open)


def test_snapshot_training(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(tmp_path), terminal_size=(120, 40), run_before=_open)
