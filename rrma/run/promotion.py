"""The promotion rule: when does a trial beat the best by enough to be promoted?

Why it exists: with one baseline repeat the noise floor is 0 and any gain promoted (0.52 -> 0.62
on 50 GSM8K questions, McNemar p = 0.06). An oracle that scores a sample of items knows its own
uncertainty, so the rule takes it into account. The loop (``_record_outcome``, confirmations) and
the review gate (:func:`rrma.log.review.promote_if_approved`) both call :func:`decide`, so the rule
lives in one place.

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

``noise.oracle_se: false`` leaves only the baseline floor. Invariant: a pure function of the two
trials' metrics, the improvement and the task's noise settings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from rrma.stats import mcnemar

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


__all__ = [
    "ITEMS_KEY",
    "ITEM_SCORES",
    "SCORE_SE",
    "Decision",
    "combine",
    "decide",
    "item_scores",
    "paired_se",
    "two_sided_alpha",
]
