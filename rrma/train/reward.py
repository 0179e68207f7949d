"""The training reward: one function from a trial's outcome to a number (docs/training.md).

Used by the dataset export (``rrma-tui export RUN --dataset``: each row's ``reward``) and by the
online trainers (``rrma-tui train grpo|sdpo``: each rollout's reward, computed from the outcome the
normal loop recorded). Settings come from the task's ``reward`` section (:class:`rrma.task.RewardConfig`).

The reward of a scored trial is its improvement over a reference, in the task's direction, scaled and
clipped::

    improvement = better(score, reference)          # > 0: better than the reference
    scaled      = improvement / unit                 # unit: sigma (or the floor), or |reference|
    reward      = clip(scaled, -clip, clip)
                  - efficiency * seconds / budget.trial_seconds
                  - memory * peak_rss_mb / budget.trial_memory_mb
                  + novelty * (1 - similarity to the most similar earlier diff)

The reference is the trial's parent (what the agent built on; the autoresearch systems' -Δbpb) or the
run's baseline mean. A trial that did not score gets a fixed value: ``crash`` (crash, timeout, oom,
disk, aborted) or ``invalid`` (an edit the harness refused, a proof or edit the oracle rejected); a
cached repeat of an earlier trial gets ``duplicate`` (unless that is null). Nothing here reads a file or
the clock: the same outcome and settings always give the same reward.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rrma.log.state import RunState, TrialRecord
from rrma.task import RewardConfig, TaskConfig

CRASHED = frozenset({"crash", "timeout", "oom", "disk", "aborted"})
REFUSED = frozenset({"invalid", "rejected"})
NOVELTY_WINDOW = 200  # earlier diffs a novelty bonus compares with (the most recent ones)


@dataclass(frozen=True)
class RewardInputs:
    """What the reward of one trial depends on (plain values: from the folded log or a live outcome)."""

    status: str
    score: float | None
    parent_score: float | None  # the parent's score (None for a parent that never scored)
    baseline: float | None  # the run's baseline mean
    sigma: float | None  # the baseline's noise (standard deviation)
    floor: float | None = None  # the improvement a promotion needs (the unit when sigma is 0)
    cached: bool = False  # the outcome is a repeat of an earlier trial's
    seconds: float = 0.0
    peak_rss_mb: float | None = None
    diff: str = ""  # the trial's change (for the novelty bonus)


@dataclass(frozen=True)
class Reward:
    value: float
    why: str  # one line: which rule gave it (shown in the dataset and the trainer's trace)
    novelty: float | None = None  # 1 - max similarity to the earlier diffs (None when not computed)


def better(direction: str, a: float, b: float) -> float:
    """Signed improvement of ``a`` over ``b`` (> 0 means ``a`` is better)."""
    return (b - a) if direction == "minimize" else (a - b)


def novelty(diff: str, earlier: Sequence[str]) -> float:
    """1 - the similarity (difflib ratio) of ``diff`` to the most similar of ``earlier`` (1.0 when none)."""
    if not earlier:
        return 1.0
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(diff)
    best = 0.0
    for other in earlier[-NOVELTY_WINDOW:]:
        matcher.set_seq1(other)
        if matcher.real_quick_ratio() <= best or matcher.quick_ratio() <= best:
            continue
        best = max(best, matcher.ratio())
        if best >= 1.0:
            break
    return 1.0 - best


def reward(inputs: RewardInputs, config: RewardConfig, *, direction: str, trial_seconds: float = 0.0,
           trial_memory_mb: float = 0.0, earlier_diffs: Sequence[str] | None = None) -> Reward:
    """The reward of one trial (the module docstring gives the formula)."""
    if inputs.status in REFUSED:
        return Reward(config.invalid, f"{inputs.status}: reward.invalid")
    if inputs.status in CRASHED or inputs.status != "ok":
        return Reward(config.crash, f"{inputs.status}: reward.crash")
    if inputs.cached and config.duplicate is not None:
        return Reward(config.duplicate, "a repeat of an earlier trial: reward.duplicate")
    if inputs.score is None or not math.isfinite(inputs.score):
        return Reward(config.crash, "no finite score: reward.crash")
    reference = inputs.parent_score if config.reference == "parent" else inputs.baseline
    if reference is None:  # a parent that never scored: the baseline is the next best reference
        reference = inputs.baseline
    if reference is None:
        return Reward(0.0, "no reference score (no baseline): 0")
    improvement = better(direction, inputs.score, reference)
    if config.scale == "sigma":
        unit = inputs.sigma if inputs.sigma else inputs.floor
        what = "sigma" if inputs.sigma else "floor"
    else:
        unit, what = abs(reference), "|reference|"
    if not unit:
        unit, what = 1.0, "1 (no noise estimate)"
    scaled = max(-config.clip, min(config.clip, improvement / unit))
    value = scaled
    parts = [f"{improvement:+.4g} over the {config.reference} / {what} = {improvement / unit:+.3g}"
             + (f", clipped to {scaled:+.3g}" if scaled != improvement / unit else "")]
    if config.efficiency and trial_seconds > 0:
        cost = config.efficiency * inputs.seconds / trial_seconds
        value -= cost
        parts.append(f"-{cost:.3g} time")
    if config.memory and trial_memory_mb > 0 and inputs.peak_rss_mb is not None:
        cost = config.memory * inputs.peak_rss_mb / trial_memory_mb
        value -= cost
        parts.append(f"-{cost:.3g} memory")
    fresh: float | None = None
    if config.novelty:
        fresh = novelty(inputs.diff, list(earlier_diffs or ()))
        value += config.novelty * fresh
        parts.append(f"+{config.novelty * fresh:.3g} novelty")
    return Reward(value, "; ".join(parts), fresh)


def trial_reward(rec: TrialRecord, state: RunState, task: TaskConfig, *, parent_score: float | None, diff: str,
                 earlier_diffs: Sequence[str]) -> Reward:
    """The reward of a recorded trial: its outcome in the folded log, the run's baseline, σ and floor, the task's
    ``reward`` settings and budget (the dataset export's rows and the online trainers' rollouts alike)."""
    peak = rec.metrics.get("peak_rss_mb")
    if isinstance(peak, bool) or not isinstance(peak, int | float) or not math.isfinite(peak):
        peak = None
    inputs = RewardInputs(status=rec.status, score=rec.score, parent_score=parent_score, baseline=state.baseline_mean,
                          sigma=state.sigma, floor=state.floor, cached=rec.cached, seconds=rec.seconds,
                          peak_rss_mb=None if peak is None else float(peak), diff=diff)
    return reward(inputs, task.reward, direction=task.metric.direction, trial_seconds=task.budget.trial_seconds,
                  trial_memory_mb=task.budget.trial_memory_mb, earlier_diffs=earlier_diffs)


def diff_text(before: dict[str, str], after: dict[str, str], paths: Iterable[str]) -> str:
    """A trial's change as unified diff text over ``paths`` (what the novelty bonus compares)."""
    out: list[str] = []
    for path in sorted(set(paths)):
        old, new = before.get(path, ""), after.get(path, "")
        if old != new:
            out.extend(difflib.unified_diff(old.splitlines(), new.splitlines(), path, path, n=0, lineterm=""))
    return "\n".join(out)
