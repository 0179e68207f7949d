"""The shuffled-reward control (rrma/train/control.py): each step's permutation, its record, and the check that
recomputes it from the log (a record changed in any of its parts is caught; an honest one passes)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rrma.train.control import SHUFFLED_REWARD, check_steps, record, shuffle_order, shuffled

REWARDS = [-1.0, -0.25, 0.5, 0.125, -1.0, 0.75, 0.0, 0.25]


def session(steps: int = 3, seed: int = 7) -> list[dict[str, Any]]:
    """The train.step data of a shuffled-reward session, as the trainer writes them."""
    out = []
    for step in range(1, steps + 1):
        rewards = [r + step / 10 for r in REWARDS]
        entry, _ = record(rewards, seed, step)
        out.append({"method": "grpo", "step": step, "rewards": rewards, "control": entry})
    return out


def test_the_order_is_a_permutation_drawn_from_the_seed_and_the_step() -> None:
    for n in (1, 2, 8, 64):
        assert sorted(shuffle_order(n, 0, 1)) == list(range(n))
    assert shuffle_order(8, 3, 5) == shuffle_order(8, 3, 5)  # the same numbers, the same order
    orders = {tuple(shuffle_order(8, seed, step)) for seed in range(3) for step in range(1, 4)}
    assert len(orders) == 9  # another seed or step, another order (8! of them)
    assert tuple(range(8)) not in orders


def test_the_trainer_is_given_the_steps_rewards_in_that_order() -> None:
    order, given = shuffled(REWARDS, 0, 1)
    assert given == [REWARDS[j] for j in order]
    assert sorted(given) == sorted(REWARDS)  # the same rewards: the same mean and spread for the step
    assert given != REWARDS  # in another order
    entry, trained = record(REWARDS, 0, 1)
    assert trained == given and entry == {"kind": SHUFFLED_REWARD, "seed": 0, "step": 1, "order": order,
                                          "rewards_trained": given}


def test_an_honest_record_passes() -> None:
    assert check_steps(session(), SHUFFLED_REWARD, 7) == []
    plain = [{k: v for k, v in s.items() if k != "control"} for s in session()]
    assert check_steps(plain, None, 7) == []
    # a step without rewards (sft, or a trainer's log line with no rollouts) has nothing to check
    assert check_steps([{"step": 1, "rewards": []}], SHUFFLED_REWARD, 7) == []


def swap_trained(s: dict[str, Any]) -> None:
    t = s["control"]["rewards_trained"]
    t[0], t[1] = t[1], t[0]


def swap_order(s: dict[str, Any]) -> None:
    o = s["control"]["order"]
    o[0], o[1] = o[1], o[0]
    s["control"]["rewards_trained"] = [s["rewards"][j] for j in o]  # consistent with the changed order


CHANGES = [
    # the trainer was given other rewards than the recorded order says
    ("trained rewards swapped", swap_trained, "not the oracle's rewards in the recorded order"),
    # an order that is a permutation, with matching trained rewards, but not the one the seed draws
    ("another permutation", swap_order, "not the one seed 7 draws"),
    # the identity: no shuffle at all, recorded as one
    ("identity order", lambda s: s["control"].update(order=list(range(8)), rewards_trained=list(s["rewards"])),
     "not the one seed 7 draws"),
    # an order that repeats a rollout (not a permutation)
    ("repeated index", lambda s: s["control"].update(order=[0] * 8), "not a permutation"),
    # the oracle's rewards edited after the fact
    ("oracle reward edited", lambda s: s["rewards"].__setitem__(2, 9.0), "not the oracle's rewards"),
    # the record dropped from one step
    ("record missing", lambda s: s.pop("control"), "no shuffled-reward record"),
    # a record claiming another step's draw
    ("step renumbered", lambda s: s["control"].update(step=99), "not the one seed 7 draws"),
]


@pytest.mark.parametrize(("name", "change", "words"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_changed_record_is_caught(name: str, change: Any, words: str) -> None:
    steps = copy.deepcopy(session())
    change(steps[1])
    errors = check_steps(steps, SHUFFLED_REWARD, 7)
    assert len(errors) == 1 and errors[0].startswith("step 2: ") and words in errors[0], errors


def test_a_session_and_its_records_must_agree() -> None:
    assert check_steps(session(), SHUFFLED_REWARD, 8)[0].startswith("step 1: the recorded order is not the one seed 8")
    assert check_steps(session(), None, 7) == [f"step {n}: a control entry in a session without a control"
                                               for n in (1, 2, 3)]
    assert check_steps(session(), "reversed-reward", 7) == ["unknown control 'reversed-reward' (known: shuffled-reward)"]
