"""The shuffled-reward control: the same training session with the oracle's rewards permuted within each step.

Why it exists: a rise in reward over a training session could come from something other than the oracle's
verdicts (the warm start still settling, the sampler drifting towards replies that happen to score well, the
step-to-step noise of a small batch). Handing the trainer each step's rewards in a random order keeps what
the step's rewards are (their mean, their spread: updates of the same size) and cuts the link between a
reply and its score. A gain that a session shows and its shuffled control does not was learnt from the
oracle (``rrma-tui --headless bench rl --control shuffled-reward``, docs/training.md).

Invariant: in step ``s`` of a session with seed ``seed``, rollout ``i`` is trained on ``rewards[order[i]]``,
where ``rewards`` are the oracle's rewards of the step's rollouts in order and ``order`` is the permutation
:func:`shuffle_order` draws from ``(seed, s)`` alone. Each ``train.step`` records the oracle's rewards
(``rewards``: what the reward line and the curves read) and, under ``control``, the order and the rewards
the trainer was given, so :func:`check_steps` can draw the order again and compare, from the log alone.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

SHUFFLED_REWARD = "shuffled-reward"
CONTROLS = (SHUFFLED_REWARD,)


def shuffle_order(n: int, seed: int, step: int) -> list[int]:
    """The permutation of ``range(n)`` that step ``step`` of a session seeded ``seed`` trains on (the same
    for the same three numbers, on any machine: ``random.Random`` seeded with a string hashes it with SHA-512)."""
    order = list(range(n))
    random.Random(f"rrma-shuffled-reward:{seed}:{step}").shuffle(order)
    return order


def shuffled(rewards: Sequence[float], seed: int, step: int) -> tuple[list[int], list[float]]:
    """(order, the rewards the trainer is given): rollout ``i`` gets ``rewards[order[i]]``."""
    order = shuffle_order(len(rewards), seed, step)
    return order, [float(rewards[j]) for j in order]


def record(rewards: Sequence[float], seed: int, step: int) -> tuple[dict[str, Any], list[float]]:
    """The ``control`` entry of a train.step and the rewards the trainer is given."""
    order, given = shuffled(rewards, seed, step)
    return {"kind": SHUFFLED_REWARD, "seed": seed, "step": step, "order": order, "rewards_trained": given}, given


def check_steps(steps: Sequence[dict[str, Any]], control: str | None, seed: int) -> list[str]:
    """What is wrong with a session's control, from its train.step events (empty: every step is as recorded).

    ``control`` and ``seed`` are the session's (its train.started settings). A session without a control
    must have no ``control`` entry in any step; a shuffled-reward session must have one in every step with
    rewards, whose order is the one :func:`shuffle_order` draws for that step and whose trained rewards are
    the step's oracle rewards in that order."""
    errors: list[str] = []
    for data in steps:
        if not data.get("rewards"):
            continue
        step, entry = data.get("step"), data.get("control")
        if control is None:
            if entry is not None:
                errors.append(f"step {step}: a control entry in a session without a control")
            continue
        if control != SHUFFLED_REWARD:
            errors.append(f"unknown control {control!r} (known: {', '.join(CONTROLS)})")
            break
        if not isinstance(entry, dict) or entry.get("kind") != SHUFFLED_REWARD:
            errors.append(f"step {step}: no shuffled-reward record")
            continue
        rewards = [float(r) for r in data["rewards"]]
        order = entry.get("order")
        if not isinstance(order, list) or sorted(order) != list(range(len(rewards))):
            errors.append(f"step {step}: the recorded order is not a permutation of its {len(rewards)} rollouts")
            continue
        if (entry.get("seed") != seed or entry.get("step") != step or not isinstance(step, int)
                or order != shuffle_order(len(rewards), seed, step)):
            errors.append(f"step {step}: the recorded order is not the one seed {seed} draws for this step")
            continue
        trained = entry.get("rewards_trained")
        expected = [rewards[j] for j in order]
        if not isinstance(trained, list) or len(trained) != len(expected) or any(
                abs(float(a) - b) > 1e-6 for a, b in zip(trained, expected, strict=True)):
            errors.append(f"step {step}: the rewards trained on are not the oracle's rewards in the recorded order")
    return errors
