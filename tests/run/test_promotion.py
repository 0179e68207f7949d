"""The promotion rule (rrma/run/promotion.py) and confirmed promotions (loop.confirm) through the real loop.

The loop runs real subprocesses (the command oracle) in real run directories; what is asserted is
what the log, `rrma-tui show`, `verify` and the export say.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from rrma.contracts import Agent, Context
from rrma.log.export import export_runs
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import resume_run, start_run
from rrma.run.promotion import combine, decide, item_scores, paired_se, two_sided_alpha
from rrma.task import AgentConfig, NoiseConfig, TaskConfig, task_from_dict
from rrma.trial import FileEdit, Proposal

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- the rule


def test_item_scores_are_read_from_strings_and_lists() -> None:
    assert item_scores({"item_scores": "0110"}) == [0.0, 1.0, 1.0, 0.0]
    assert item_scores({"item_scores": [0.5, 1]}) == [0.5, 1.0]
    assert item_scores({"item_scores": "01x"}) is None  # not a 0/1 string
    assert item_scores({"item_scores": [True, False]}) is None  # booleans are not scores
    assert item_scores({}) is None


# (candidate items, best items, delta) -> promote, source: McNemar on 0/1 items at 2 sigmas (alpha 0.0455)
MCNEMAR = [
    # 5 gained, none lost: the normal approximation (z = 2.3) would promote; the exact p is 0.0625
    pytest.param("1" * 31 + "0" * 19, "1" * 26 + "0" * 24, 0.10, False, "McNemar", id="five_to_none"),
    # 14 gained, none lost: p = 2/2^14
    pytest.param("1" * 40 + "0" * 10, "1" * 26 + "0" * 24, 0.28, True, "McNemar", id="fourteen_to_none"),
    # the same items right: no evidence either way
    pytest.param("1" * 26 + "0" * 24, "1" * 26 + "0" * 24, 0.0, False, "McNemar", id="identical"),
]


@pytest.mark.parametrize(("cand", "best", "delta", "promote", "source"), MCNEMAR)
def test_binary_items_are_judged_by_mcnemar(cand: str, best: str, delta: float, promote: bool, source: str) -> None:
    verdict = decide(delta, {"item_scores": cand, "items_key": "k"}, {"item_scores": best, "items_key": "k"}, 0.0,
                    NoiseConfig(baseline_repeats=1))
    assert (verdict.promote, verdict.source) == (promote, source)
    assert verdict.p_value is not None and verdict.label.startswith("McNemar p=")


def test_other_items_use_a_paired_z_and_unpaired_ones_the_oracle_se() -> None:
    noise = NoiseConfig(baseline_repeats=1, min_sigmas=2.0)
    a, b = [0.5, 0.25, 0.75, 0.5], [0.75, 0.5, 1.0, 0.75]  # every item up by 0.25: no spread, se 0
    v = decide(0.25, {"item_scores": b, "items_key": "k"}, {"item_scores": a, "items_key": "k"}, 0.0, noise)
    assert v.promote and v.source == "baseline" and paired_se(a, b) == 0.0
    noisy = [1.0, 0.0, 1.0, 1.0]  # the same mean gain, much spread: the paired floor wins
    v = decide(0.25, {"item_scores": noisy, "items_key": "k"}, {"item_scores": a, "items_key": "k"}, 0.0, noise)
    assert not v.promote and v.source == "paired" and v.floor == pytest.approx(2 * paired_se(a, noisy))
    # different items (items_key) cannot be paired: the two standard errors add up
    v = decide(0.1, {"score_se": 0.07, "items_key": "x"}, {"score_se": 0.07, "items_key": "y"}, 0.0, noise)
    assert not v.promote and v.source == "oracle SE" and v.floor == pytest.approx(2 * 0.07 * 2**0.5)
    # the baseline floor still counts when it is the larger one, and oracle_se: false ignores the oracle
    v = decide(0.1, {"score_se": 0.001}, {"score_se": 0.001}, 0.5, noise)
    assert not v.promote and v.source == "baseline" and v.floor == 0.5
    off = NoiseConfig(baseline_repeats=1, oracle_se=False)
    assert decide(0.1, {"score_se": 0.07}, {"score_se": 0.07}, 0.0, off).promote
    assert two_sided_alpha(2.0) == pytest.approx(0.0455, abs=1e-4)


def test_combine_averages_items_and_shrinks_the_se() -> None:
    out = combine([{"item_scores": "10", "items_key": "k", "score_se": 0.3},
                   {"item_scores": "11", "items_key": "k", "score_se": 0.4}])
    assert out == {"item_scores": [1.0, 0.5], "items_key": "k", "score_se": pytest.approx(0.25)}
    assert combine([{"item_scores": "10", "items_key": "k"}, {"item_scores": "10", "items_key": "other"}]) == {}


# ----------------------------------------------------------------------------- confirmation in the loop

OBJECTIVE = '''import os
import random

X = 0.0  # a real improvement: lower loss, every time
LUCKY = 0  # a lucky draw: low loss the first time only (what the winner's curse selects)
trial = os.environ["RRMA_TRIAL_ID"]
rng = random.Random(int(os.environ["RRMA_SEED"]))
loss = 5.0 - X + rng.gauss(0.0, 0.02)
if LUCKY and "-r" not in trial:
    loss -= 3.0
print(f"loss: {loss:.6f}")
'''


def confirm_task(tmp_path: Path, confirm: int = 2, hitl: bool = False) -> TaskConfig:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "objective.py").write_text(OBJECTIVE)
    return task_from_dict({
        "name": "confirm", "oracle": {"kind": "command", "params": {"command": ["{python}", "objective.py"]}},
        "workspace": {"source": "ws", "editable": ["objective.py"]}, "metric": {"name": "loss"},
        "budget": {"max_trials": 2, "trial_seconds": 30, "max_concurrent": 2},
        # a gain must be 0.5 (the noise is 0.02): the winner's curse is the only way to look better
        "noise": {"baseline_repeats": 2, "min_sigmas": 2.0, "min_delta": 0.5}, "loop": {"confirm": confirm, "hitl": hitl},
    }, base_dir=tmp_path)


class Edits(Agent):
    def __init__(self, task: TaskConfig, edits: list[tuple[str, str]]) -> None:
        super().__init__(AgentConfig(name="scripted"), task)
        self.queue = list(edits)

    def propose(self, ctx: Context) -> Proposal | None:
        if not self.queue:
            return None
        old, new = self.queue.pop(0)
        return Proposal(hypothesis=new, edits=[FileEdit(path="objective.py", replacements=[(old, new)])])


def test_a_lucky_trial_is_not_confirmed_and_a_real_gain_is(tmp_path: Path) -> None:
    task = confirm_task(tmp_path)
    agent = Edits(task, [("LUCKY = 0", "LUCKY = 1"), ("X = 0.0", "X = 2.0")])
    result = start_run(task, tmp_path / "runs", agents=[agent], run_id="confirm")
    state = result.state
    lucky, real = state.trials["t0001"], state.trials["t0002"]
    # the lucky trial beat the best by 3.0 once; its two fresh repeats scored like the baseline
    assert lucky.score is not None and lucky.score < 2.1 and lucky.metrics["awaiting_confirmation"]
    assert lucky.repeats == ["t0001-r1", "t0001-r2"] and not lucky.promoted
    assert lucky.confirmation is not None and lucky.confirmation["confirmed"] is False
    assert "not enough" in lucky.confirmation["reason"]
    assert all(4.9 < s < 5.1 for s in lucky.confirmation["scores"])
    # the real gain held up: promoted with the mean of its repeats (not its own, selected score)
    assert real.promoted and real.confirmation is not None and real.confirmation["confirmed"]
    assert state.best_id == "t0002" and state.best_history[-1][1] == pytest.approx(real.confirmation["mean"])
    promoted = [e for e in RunStore(result.run_dir).scan().events if e.kind == "trial.promoted"][-1]
    assert promoted.data.confirmed_by == ["t0002-r1", "t0002-r2"]
    # repeats are trials of their own, not agent trials: the budget counts 2, the log holds 4 more
    assert [t.trial_id for t in state.agent_trials()] == ["t0001", "t0002"]
    assert [t.trial_id for t in state.confirmation_trials()] == ["t0001-r1", "t0001-r2", "t0002-r1", "t0002-r2"]
    assert all(t.confirms in ("t0001", "t0002") and not t.cached for t in state.confirmation_trials())
    assert len({t.seed for t in state.trials.values()}) == len(state.trials)  # every evaluation its own seed
    summary = state.summary
    assert (summary["trials"], summary["confirmation_repeats"], summary["confirmed"], summary["not_confirmed"]) == (
        2, 4, 1, 1)
    assert verify_run(result.run_dir).ok
    # show lists the repeats and the verdicts; the export carries them
    shown = subprocess.run([sys.executable, "-m", "cli.main", "show", str(result.run_dir)], capture_output=True,
                           text=True, cwd=REPO, check=True).stdout
    assert "t0001-r1" in shown and "not confirmed" in shown and "confirmed by t0002-r1, t0002-r2" in shown
    db = tmp_path / "out.db"
    export_runs([result.run_dir], db)
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT trial_id, confirmed FROM trials WHERE confirmed IS NOT NULL").fetchall())
        repeats = conn.execute("SELECT count(*) FROM trials WHERE confirms = 't0001'").fetchone()[0]
    assert rows == {"t0001": 0, "t0002": 1} and repeats == 2


def test_confirmation_then_the_hitl_gate(tmp_path: Path) -> None:
    """Confirmed first, then a person's approval promotes it, with the repeats' mean."""
    from rrma.run.promotion import review_trial

    task = confirm_task(tmp_path, confirm=1, hitl=True)
    result = start_run(task, tmp_path / "runs", agents=[Edits(task, [("X = 0.0", "X = 2.0")])], run_id="gate")
    rec = result.state.trials["t0001"]
    assert not rec.promoted and rec.confirmation is not None and rec.confirmation["awaiting_review"]
    assert rec.metrics["awaiting_review"] and result.state.summary["awaiting_review"] == 1
    review_trial(RunStore(result.run_dir), "t0001", "approve", "alice", "")
    state = RunState.fold(RunStore(result.run_dir).scan().events)
    assert state.best_id == "t0001" and state.best_history[-1][1] == pytest.approx(rec.confirmation["mean"])


def test_a_stopped_confirmation_is_finished_by_resume(tmp_path: Path) -> None:
    task = confirm_task(tmp_path, confirm=2)
    stop = threading.Event()

    def on_event(event: Any) -> None:
        if event.kind == "trial.finished" and event.data.trial_id == "t0001":
            stop.set()  # Ctrl-C just as the would-be best finished: its repeats are not run

    first = start_run(task, tmp_path / "runs", agents=[Edits(task, [("X = 0.0", "X = 2.0")])], run_id="stopped",
                      stop=stop, on_event=on_event)
    rec = first.state.trials["t0001"]
    assert first.reason == "interrupted" and rec.awaiting_confirmation and not rec.promoted
    assert {first.state.trials[r].status for r in rec.repeats} == {"aborted"}
    (tmp_path / "ws" / "objective.py").write_text("")  # resume reads the files from the log, never the workspace
    again = resume_run(first.run_dir)
    rec = again.state.trials["t0001"]
    assert rec.confirmation is not None and rec.confirmation["confirmed"] and rec.promoted
    assert [again.state.trials[r].status for r in rec.repeats] == ["ok", "ok"]
    assert verify_run(first.run_dir).ok


def test_a_zero_sigma_run_uses_the_oracle_se(tmp_path: Path) -> None:
    """Issue 14: with baseline_repeats 1 (sigma 0) a 0.52 -> 0.62 gain on 50 questions used to promote;
    the oracle's own standard error (score_se) now sets the floor, and trial.finished says so."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "objective.py").write_text("ACC = 0.52\nprint(f'accuracy: {ACC}')\n"
                                 "print(f'score_se: {(ACC * (1 - ACC) / 49) ** 0.5:.4f}')\n")
    task = task_from_dict({
        "name": "se", "oracle": {"kind": "command", "params": {"command": ["{python}", "objective.py"]}},
        "workspace": {"source": str(ws), "editable": ["objective.py"]},
        "metric": {"name": "accuracy", "direction": "maximize"},
        "budget": {"max_trials": 2, "max_concurrent": 1}, "noise": {"baseline_repeats": 1},
        "agents": [{"name": "e", "backend": "random-search"}]}, base_dir=tmp_path)
    agent = Edits(task, [("ACC = 0.52", "ACC = 0.62"), ("ACC = 0.52", "ACC = 0.9")])
    state = start_run(task, tmp_path / "runs", agents=[agent], run_id="se").state
    small, large = state.trials["t0001"], state.trials["t0002"]
    assert state.sigma == 0 and small.score == pytest.approx(0.62) and not small.promoted
    finished = {e.data.trial_id: e.data for e in RunStore(state_dir(tmp_path)).scan().events if e.kind == "trial.finished"}
    assert finished["t0001"].floor_source == "oracle SE"
    assert finished["t0001"].floor == pytest.approx(2 * (0.0714 ** 2 + 0.0693 ** 2) ** 0.5, abs=1e-3)
    assert large.promoted and state.best_id == "t0002"


def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "se"
