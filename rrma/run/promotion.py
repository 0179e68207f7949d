"""Promotion: when a trial beats the best by enough to be promoted, and the one writer of ``trial.promoted``.

Why it exists: with one baseline repeat the noise floor is 0 and any gain promoted (0.52 -> 0.62
on 50 GSM8K questions, McNemar p = 0.06). An oracle that scores a sample of items knows its own
uncertainty, so the rule takes it into account. The loop (the trial runner, confirmations) and the
review gate (:func:`promote_if_approved`) all call :func:`decide`, so the rule lives in one place.

A candidate is promoted when it beats the best (``delta > 0``) by at least the *floor*, and, where
the oracle's items allow a paired test, that test agrees. The floor is the largest of

* ``baseline``: ``max(noise.min_sigmas * sigma, noise.min_delta)`` with ``sigma`` from the baseline
  repeats (the run's ``baseline.measured`` floor);
* ``paired``: when both trials report ``item_scores`` for the same items (same ``items_key``) and
  the scores are not all 0/1, ``min_sigmas`` times the standard error of the mean per-item
  difference (a paired z-test);
* ``oracle SE``: otherwise, when both report ``score_se``, ``min_sigmas * sqrt(se_a^2 + se_b^2)``
  (two independent estimates).

For 0/1 item scores (correct or not) the paired test is McNemar's exact test on the items the two
trials disagree on: the candidate is promoted only if its two-sided p-value is below the normal
tail of ``min_sigmas`` (2 sigmas: 0.0455). The normal approximation is too lenient with a handful
of discordant items: 5 to 0 gives z = 2.3 but an exact p of 0.0625.

``noise.oracle_se: false`` leaves only the baseline floor. :func:`decide` is a pure function of the
two trials' metrics, the improvement and the task's noise settings.

**One writer.** :func:`promote` is the only code that appends ``trial.promoted``
(tests/run/test_promotion_rule.py greps the source for it): the baseline's promotion and a new best
(rrma/run/runner.py), a confirmed trial (rrma/run/confirm.py) and a person's approval
(:func:`promote_if_approved`) all go through it. It names the best the fold has now and computes the
delta and Δσ against it once; the fold counts a promotion only when those match what the counted
events give (:func:`rrma.log.state.refused_promotion`), so a promotion written any other way is a
``verify`` error and never the best. A person's approval of a finished run is promoted under the run's
driver lock (:func:`review_trial`), so two reviewers, or a reviewer and a resumed loop, never promote
against the same best at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from rrma.log.chain import ChainCheck
from rrma.log.driver_lock import DriverLock, RunLocked
from rrma.log.reader import read_state
from rrma.log.review import record_review, signed_approval_policy, unverified_approval, unverified_outcome
from rrma.log.state import PERSON, RunState
from rrma.log.store import RunStore
from rrma.stats import mcnemar
from rrma.task import TaskConfig

ITEM_SCORES = "item_scores"  # metrics key: per-item scores in a fixed item order, "0110..." or a list of numbers
ITEMS_KEY = "items_key"  # metrics key: names the items (same key: same items in the same order)
SCORE_SE = "score_se"  # metrics key: the standard error of the score as the oracle estimates it


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a candidate is promoted over the best, and what decided it."""

    promote: bool
    floor: float  # the improvement it needed
    source: str  # baseline | oracle SE | paired | McNemar
    p_value: float | None = None  # McNemar's exact two-sided p (0/1 items)

    @property
    def label(self) -> str:
        """``source`` with the p-value when there is one (what trial.finished records)."""
        return self.source if self.p_value is None else f"{self.source} p={self.p_value:.3g}"


def item_scores(metrics: Mapping[str, Any]) -> list[float] | None:
    """The per-item scores a trial's metrics carry (a 0/1 string or a list of numbers), else None."""
    raw = metrics.get(ITEM_SCORES)
    if isinstance(raw, str):
        if not raw or any(c not in "01" for c in raw):
            return None
        return [1.0 if c == "1" else 0.0 for c in raw]
    if isinstance(raw, list) and raw and all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw):
        return [float(v) for v in raw]
    return None


def paired_se(a: Sequence[float], b: Sequence[float]) -> float:
    """Standard error of the mean of ``b - a`` over paired items (unbiased variance)."""
    n = len(a)
    if n != len(b) or n < 2:
        raise ValueError(f"paired_se needs two equally long samples of at least 2 items, got {len(a)} and {len(b)}")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    mean = math.fsum(diffs) / n
    var = math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)
    return math.sqrt(var / n)


def two_sided_alpha(min_sigmas: float) -> float:
    """The two-sided normal tail beyond ``min_sigmas`` (2 -> 0.0455): the level of the paired tests."""
    return 2 * (1 - NormalDist().cdf(min_sigmas))


def combine(metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The metrics of the mean of several evaluations of one trial (confirmation repeats).

    Item scores are averaged item by item when every repeat has them for the same items; the SE of
    the mean is ``sqrt(sum se^2) / k``. What the repeats do not all report is left out.
    """
    out: dict[str, Any] = {}
    k = len(metrics)
    if k == 0:
        return out
    items = [item_scores(m) for m in metrics]
    keys = {m.get(ITEMS_KEY) for m in metrics}
    if all(x is not None for x in items) and len({len(x) for x in items if x is not None}) == 1 and len(keys) == 1:
        columns = zip(*[x for x in items if x is not None], strict=True)
        out[ITEM_SCORES] = [math.fsum(col) / k for col in columns]
        out[ITEMS_KEY] = keys.pop()
    ses = [m.get(SCORE_SE) for m in metrics]
    if all(isinstance(x, int | float) and math.isfinite(x) for x in ses):
        out[SCORE_SE] = math.sqrt(math.fsum(float(x) ** 2 for x in ses)) / k  # type: ignore[arg-type]
    return out


def decide(delta: float, candidate: Mapping[str, Any], best: Mapping[str, Any] | None, baseline_floor: float | None,
          noise: Mapping[str, Any] | Any) -> Decision:
    """Is an improvement ``delta`` (> 0: better) of ``candidate`` (its metrics) over ``best`` (its metrics) enough?

    ``noise`` is the task's NoiseConfig, or its snapshot as a dict (a run folded from its log).
    """
    min_sigmas = float(_get(noise, "min_sigmas", 2.0))
    floor, source, p_value = float(baseline_floor or 0.0), "baseline", None
    if best is not None and bool(_get(noise, "oracle_se", True)):
        a, b = item_scores(best), item_scores(candidate)
        if a is not None and b is not None and len(a) == len(b) >= 2 and best.get(ITEMS_KEY) == candidate.get(ITEMS_KEY):
            if all(x in (0.0, 1.0) for x in (*a, *b)):
                p_value = mcnemar([bool(x) for x in a], [bool(x) for x in b]).p_value
                source = "McNemar"
            else:
                paired = min_sigmas * paired_se(a, b)
                if paired > floor:
                    floor, source = paired, "paired"
        else:
            se_a, se_b = best.get(SCORE_SE), candidate.get(SCORE_SE)
            if isinstance(se_a, int | float) and isinstance(se_b, int | float) and _finite(se_a) and _finite(se_b):
                independent = min_sigmas * math.hypot(float(se_a), float(se_b))
                if independent > floor:
                    floor, source = independent, "oracle SE"
    promote = delta > 0 and delta >= floor
    if p_value is not None and p_value >= two_sided_alpha(min_sigmas):
        promote = False
    return Decision(promote, floor, source, p_value)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _get(noise: Mapping[str, Any] | Any, name: str, default: Any) -> Any:
    if isinstance(noise, Mapping):
        return noise.get(name, default)
    return getattr(noise, name, default)


# ----------------------------------------------------------------------------- the one writer

Emit = Callable[[str, str, dict[str, Any]], Any]  # (kind, actor, data) -> the appended event


def promotion(state: RunState, trial_id: str, score: float, *, approved_by: str | None = None,
              confirmed_by: Sequence[str] = ()) -> tuple[str, dict[str, Any]]:
    """The actor and data of the ``trial.promoted`` that makes ``trial_id`` the best at ``score``.

    Against the best ``state`` has now (its id and score); ``delta`` is the improvement over it (> 0:
    better) and ``delta_sigma`` that in units of the baseline's σ (None without a best, or with σ 0).
    The actor is the harness, or the approving person (``human:<approved_by>``).
    """
    best_score = state.best_history[-1][1] if state.best_history else None
    delta = state.better(score, best_score) if best_score is not None else None
    data: dict[str, Any] = {
        "trial_id": trial_id, "score": score, "previous_best": state.best_id, "previous_score": best_score,
        "delta": delta, "delta_sigma": delta / state.sigma if delta is not None and state.sigma else None,
        "approved_by": approved_by, "confirmed_by": list(confirmed_by),
    }
    return (f"{PERSON}{approved_by}" if approved_by else "harness"), data


def promote(emit: Emit, state: RunState, trial_id: str, score: float, *, approved_by: str | None = None,
            confirmed_by: Sequence[str] = ()) -> Any:
    """Append the ``trial.promoted`` of :func:`promotion` through ``emit``: the one place that writes one.

    ``state`` must be the fold of the log up to this append (the caller holds what keeps it so: the
    ledger's lock, or the run's driver lock)."""
    actor, data = promotion(state, trial_id, score, approved_by=approved_by, confirmed_by=confirmed_by)
    return emit("trial.promoted", actor, data)


# ----------------------------------------------------------------------------- a person's approval


def promote_if_approved(store: RunStore, state: RunState, task: TaskConfig | None, trial_id: str, emit: Emit,
                        chain: ChainCheck | None = None) -> bool:
    """Promote an approved trial that awaits review if it still beats the best; True if promoted.

    By the loop's rule (:func:`decide`), at the mean of its confirmation repeats when they confirmed it.
    An approval whose outcome or signature does not verify (rrma.log.review) promotes nothing and the run
    says why in a ``note`` (once per review). ``chain``: the caller's chain check, kept between approvals
    (the live loop's), so each checks only the lines appended since the last.
    """
    rec = state.trials.get(trial_id)
    if rec is None or rec.promoted or not rec.metrics.get("awaiting_review") or rec.score is None:
        return False
    if rec.review_status != "approved":
        return False
    # a trial confirmed by repeats (loop.confirm) is promoted with their mean, not its own selected score
    score = rec.confirmed_score if rec.confirmed_score is not None else rec.score
    best_score = state.best_history[-1][1] if state.best_history else None
    if best_score is not None:
        best = state.trials.get(state.best_id or "")
        noise = (task.noise if task is not None else state.task.get("noise")) or {}
        if not decide(state.better(score, best_score), rec.metrics, best.metrics if best is not None else None,
                      state.floor, noise).promote:
            return False  # the same rule as the loop's
    review = rec.reviews[-1]
    marker = f"review seq {review['seq']}:"
    if any(note.startswith(marker) for note in state.notes):
        return False  # this approval was refused already (and said so)
    required, allowed_signers = signed_approval_policy(state, task)
    why = unverified_outcome(store, rec, chain)
    if why is None and required:
        why = unverified_approval(state, review, allowed_signers)
        why = f"{why} (loop.require_signed_approval)" if why is not None else None
    if why is not None:
        emit("note", "harness", {"text": f"{marker} {review['reviewer']}'s approval of {trial_id} does not promote it: "
                                         f"{why}"})
        return False
    promote(emit, state, trial_id, score, approved_by=review["reviewer"])
    return True


def review_trial(store: RunStore, trial_id: str, decision: str, reviewer: str | None = None, note: str = "",
                 sign_key: Path | str | None = None, *, state: RunState | None = None,
                 chain: ChainCheck | None = None) -> Any:
    """A person's review (:func:`rrma.log.review.record_review`), and the promotion an approval earns when the
    run's loop is gone; the appended review event. What ``rrma-tui review`` and the TUI call.

    A live loop promotes an approved trial itself on its next sync (rrma/run/orders.py). For a finished run
    the promotion is decided here, under the run's driver lock (:class:`~rrma.log.store.DriverLock`): no
    loop and no other reviewer appends a promotion meanwhile, so the best it names is still the best. When
    the lock is held (a driver was started since, or another reviewer is promoting) nothing is promoted here:
    a driver promotes it on its sync. ``state`` (brought up to date with what is appended) and ``chain``
    (a chain check kept across reviews, as the TUI's bulk review keeps one) are the caller's, or made here.
    """
    run = state if state is not None else read_state(store.dir, turns=False)
    seen = run.last_seq
    event = record_review(store, trial_id, decision, reviewer, note, sign_key, state=run)
    if decision == "approve" and run.finish_reason is not None:
        _promote_finished(store, run, trial_id, chain, current=event.seq == seen + 1)
    return event


def _promote_finished(store: RunStore, state: RunState, trial_id: str, chain: ChainCheck | None, *,
                      current: bool) -> bool:
    """The approval's promotion in a run whose loop is gone, under the driver lock (see :func:`review_trial`).

    ``current``: ``state`` had every event before the review. When it had not, or something was appended
    after the review, ``state`` is read again (as the views read it: its turn totals then count only the
    turns a checkpoint indexed), so the promotion names the best as the log has it now."""
    try:
        lock = DriverLock(store.dir).acquire()
    except RunLocked:
        return False
    try:
        if not current or store.head()[0] != state.last_seq:
            state.__dict__.update(read_state(store.dir, turns=False).__dict__)
        if state.finish_reason is None:
            return False  # resumed meanwhile: its driver promotes it
        return promote_if_approved(store, state, None, trial_id,
                                   lambda kind, actor, data: state.apply(store.append(kind, actor, data)), chain)
    finally:
        lock.release()


__all__ = [
    "ITEMS_KEY",
    "ITEM_SCORES",
    "SCORE_SE",
    "Decision",
    "combine",
    "decide",
    "item_scores",
    "paired_se",
    "promote",
    "promote_if_approved",
    "promotion",
    "review_trial",
    "two_sided_alpha",
]
