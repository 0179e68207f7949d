"""The driver keeps the run's checkpoint current: a view's first open of a run the loop wrote restores it.

Each test runs the real loop (the demo bench: a real oracle in real subprocesses) with the
checkpoint's size threshold lowered (a run this short is far below the few MiB where a checkpoint
starts to pay), then opens the run as a view does and compares with a fold of the whole log.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

import rrma.log.checkpoint
from rrma.log.reader import CHECKPOINT_NAME, RunModel, RunReader, checkpoint_offset, read_state
from rrma.run.loop import start_run
from rrma.task import load_task

DEMO = Path(__file__).resolve().parent.parent / "benches" / "demo" / "task.yaml"


@pytest.fixture(autouse=True)
def any_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints for logs of any size, and none in the user's cache."""
    monkeypatch.setattr(rrma.log.checkpoint, "CHECKPOINT_MIN_BYTES", 0)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def picture(model: RunModel) -> dict[str, Any]:
    """Everything a screen reads from an indexed model."""
    state = model.state
    out: dict[str, Any] = {name: value for name, value in vars(state).items() if name not in ("trials", "agents")}
    out["trials"] = {tid: vars(rec) for tid, rec in state.trials.items()}
    out["agents"] = {name: vars(rec) for name, rec in state.agents.items()}
    out["torn"] = [(t.offset, t.error) for t in model.torn]
    out["turns"] = [dataclasses.astuple(t) for t in model.turns]
    out["offset"], out["turns_indexed"] = model.offset, model.turns_indexed
    return out


def opened(run_dir: Path, **kwargs: Any) -> RunModel:
    model = RunReader(run_dir, write_checkpoint=False, **kwargs).load()
    model.attach_index(model.index_turns())
    return model


def test_a_run_the_loop_wrote_opens_from_the_drivers_checkpoint(tmp_path: Path) -> None:
    result = start_run(load_task(DEMO, {"budget.max_trials": 6}), tmp_path)
    run_dir, log = result.run_dir, result.run_dir / "events.jsonl"
    assert result.reason == "max_trials"
    assert (run_dir / CHECKPOINT_NAME).is_file()  # written at run.finished, by the driver (no view opened it)
    model = RunReader(run_dir, write_checkpoint=False).load()
    assert model.checkpoint.loaded == run_dir / CHECKPOINT_NAME and not model.checkpoint.ignored
    assert model.checkpoint.offset == model.offset == log.stat().st_size  # nothing left to fold after it
    model.attach_index(model.index_turns())
    cold = opened(run_dir, use_checkpoint=False)
    assert cold.checkpoint.loaded is None
    assert picture(model) == picture(cold)
    # and it is the state the loop itself folded (pydantic events, the driver's own tail)
    for name in ("run_id", "best_id", "best_history", "baseline_mean", "sigma", "order", "blackboard", "notes",
                 "finish_reason", "summary", "events", "last_seq"):
        assert getattr(model.state, name) == getattr(result.state, name), name
    assert {t: vars(r) for t, r in model.state.trials.items()} == {t: vars(r) for t, r in result.state.trials.items()}
    # `rrma-tui show`/`ls` and reviews read through the same API (read_state): the same state
    for turns in (True, False):
        state = read_state(run_dir, turns=turns)
        assert {t: vars(r) for t, r in state.trials.items()} == {t: vars(r) for t, r in result.state.trials.items()}
        assert (state.summary, state.reviews, state.best_history) == (
            result.state.summary, result.state.reviews, result.state.best_history)
    assert vars(read_state(run_dir)) == vars(model.state)


def test_the_driver_writes_checkpoints_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a small step the driver's checkpointer writes as the log grows (in the background), before
    ``run.finished``; a copy taken mid-run, put back after the run went on, opens as checkpoint + tail."""
    monkeypatch.setattr(rrma.log.checkpoint, "STEP_BYTES", 2048)
    monkeypatch.setattr(rrma.log.checkpoint, "GROWTH", 0.0)
    seen: dict[str, Any] = {}

    def hook(event: Any) -> None:
        if event.kind == "run.started":
            seen["dir"] = tmp_path / event.data.run_id
        elif event.kind == "baseline.measured" or event.kind == "run.finished":
            seen[event.kind] = checkpoint_offset(seen["dir"])  # what the background writes covered by now
            if event.kind == "baseline.measured" and seen[event.kind]:
                shutil.copy2(seen["dir"] / CHECKPOINT_NAME, tmp_path / "mid-run")

    result = start_run(load_task(DEMO, {"budget.max_trials": 4}), tmp_path, on_event=hook)
    run_dir, size = result.run_dir, (result.run_dir / "events.jsonl").stat().st_size
    assert 0 < seen["baseline.measured"] < seen["run.finished"] <= size  # written as the run went, then ...
    assert checkpoint_offset(run_dir) == size  # ... brought up to the end at run.finished
    shutil.copy2(tmp_path / "mid-run", run_dir / CHECKPOINT_NAME)
    model = RunReader(run_dir, write_checkpoint=False).load()
    assert model.checkpoint.loaded == run_dir / CHECKPOINT_NAME and not model.checkpoint.ignored
    assert model.checkpoint.offset <= seen["baseline.measured"] and model.offset == size  # the tail: from the log
    model.attach_index(model.index_turns())
    assert picture(model) == picture(opened(run_dir, use_checkpoint=False))
    assert model.state.finish_reason == "max_trials" and len(model.state.agent_trials()) == 4
