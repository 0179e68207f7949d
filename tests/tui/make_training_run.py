"""Write a training run's log through RunStore, as ``rrma-tui train`` does: ``run.started`` (a task snapshot, as
make_run writes it), then a ``train.started`` by the trainer, and per step the step's rollouts as ordinary
trials (proposed by the policy agent, scored by the oracle) and a ``train.step`` naming them, with a
``train.checkpoint`` every few steps. Seeded, under make_run's fake clock: the same arguments give the same
bytes (snapshots). :func:`append_steps` adds steps to a run already written (a trainer still going)."""

from __future__ import annotations

import hashlib
import math
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from make_run import START, fake_clock, task_snapshot

from rrma.log.store import RunStore

GROUP = 4  # rollouts per step
SETTINGS = {"method": "grpo", "steps": 30, "lr": 1e-5, "group": GROUP, "prompts": 1, "beta": 0.04, "lora": True,
            "lora_r": 8}  # as rrma-tui train records them (agents/training/common.py Settings)


def step_figures(step: int, rng: random.Random) -> dict[str, Any]:
    """A GRPO step's figures: the reward climbs, the entropy falls, the KL grows (with noise)."""
    rewards = [round(max(0.0, min(1.0, 0.15 + 0.04 * step + rng.gauss(0, 0.12))), 4) for _ in range(GROUP)]
    if step % 5 == 2:
        rewards = [rewards[0]] * GROUP  # a zero-variance group
    mean = sum(rewards) / GROUP
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / GROUP)
    return {
        "method": "grpo", "step": step, "loss": round(0.05 / (1 + step) + rng.gauss(0, 0.002), 5),
        "reward_mean": round(mean, 5), "reward_std": round(std, 5), "kl": round(0.002 * step + abs(rng.gauss(0, 5e-4)), 6),
        "entropy": round(2.2 - 0.05 * step + rng.gauss(0, 0.02), 4), "grad_norm": round(abs(rng.gauss(0.8, 0.2)), 4),
        "zero_variance_frac": 1.0 if step % 5 == 2 else 0.0, "novelty_rate": round(rng.choice([0.25, 0.5, 0.75]), 2),
        "tokens": 4 * 96 + step, "seconds": round(3 + rng.random(), 2), "lr": 1e-5, "rewards": rewards,
    }


def _write_step(store: RunStore, step: int, rng: random.Random, checkpoint_every: int, prefix: str = "t") -> None:
    figures = step_figures(step, rng)
    trials = []
    for k in range(GROUP):
        tid = f"{prefix}{(step - 1) * GROUP + k + 1:04d}"  # a resumed session's rollouts are new trials
        trials.append(tid)
        score = round(2.4 - 0.01 * figures["rewards"][k], 5)
        store.append_many([
            ("trial.proposed", "agent:policy", {
                "trial_id": tid, "parent": "base-0", "agent": "policy", "hypothesis": f"rollout {k} of step {step}",
                "proposal_blob": store.put_json_blob({"hypothesis": f"rollout {k} of step {step}", "edits": []}),
                "seed": step * GROUP + k}),
            ("trial.started", "harness", {"trial_id": tid}),
            ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score,
                                          "feedback": f"val_loss: {score}", "seconds": 2.0}),
        ])
    store.append("train.step", "trainer", dict(figures, trials=trials))
    if step % checkpoint_every == 0:
        digest = hashlib.sha256(f"adapter-{step}".encode()).hexdigest()
        store.append("train.checkpoint", "trainer", {"step": step, "kind": "adapter", "artifact": digest,
                                                     "path": f"artifacts/{digest}"})


def make_training_run(runs_dir: Path, run_id: str = "train-run", *, steps: int = 6, checkpoint_every: int = 3,
                      seed: int = 0) -> Path:
    """A GRPO training run of ``steps`` steps, still going (no train.finished, no run.finished)."""
    store = RunStore(runs_dir / run_id, create=True)
    with fake_clock():
        store.append("run.started", "harness", {
            "run_id": run_id, "task_name": "tiny-train",
            "task": task_snapshot("tiny-train", hitl=False, max_trials=1000, agents=["policy"]),
            "seed": seed, "versions": {"python": "3.11.7", "rrma": "0.1.0"},
        })
        store.append("train.started", "trainer", {
            "method": "grpo", "base_model": "runs/sft-run/artifacts/3fa2c1d9/model",
            "config": {"settings": SETTINGS, "model": "runs/sft-run/artifacts/3fa2c1d9/model"}, "resumed_from": None,
        })
        rng = random.Random(seed)
        for step in range(1, steps + 1):
            _write_step(store, step, rng, checkpoint_every)
    store.close()
    return runs_dir / run_id


def append_steps(run_dir: Path, first: int, last: int, *, checkpoint_every: int = 3, seed: int = 1,
                 finish: bool = False, resumed_from: int | None = None, prefix: str = "t") -> None:
    """Steps ``first``..``last`` (and the session's end with ``finish``), appended as a live trainer does;
    with ``resumed_from``, a new session that resumed from that step's checkpoint begins first. ``prefix``:
    of the rollouts' trial ids (a step logged again has rollouts of its own)."""
    store = RunStore(run_dir)
    with fake_clock(START + timedelta(hours=1)):
        rng = random.Random(seed)
        if resumed_from is not None:
            store.append("train.started", "trainer", {
                "method": "grpo", "base_model": "runs/sft-run/artifacts/3fa2c1d9/model",
                "config": {"settings": SETTINGS, "model": "runs/sft-run/artifacts/3fa2c1d9/model"}, "resumed_from": resumed_from,
            })
        for step in range(first, last + 1):
            _write_step(store, step, rng, checkpoint_every, prefix)
        if finish:
            digest = hashlib.sha256(f"final-{last}".encode()).hexdigest()
            store.append("train.finished", "trainer", {"reason": "done", "steps": last, "artifact": digest,
                                                       "path": f"artifacts/{digest}"})
    store.close()
