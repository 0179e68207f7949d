"""Statistics for comparing trials: pass@1 with its standard error, unbiased pass@k, paired
bootstrap and McNemar's test for two runs on the same questions, failure-taxonomy counts, Wald's
SPRT on Bernoulli item streams (early abort), and for experiments (arms x seeds) a bootstrap
interval of a mean and the exact paired sign-flip test.

Why it exists: a research loop promotes a trial only when the improvement is real, so every
score it reports comes with its uncertainty, and two runs on the *same* questions are compared
pairwise (the per-question differences), which is far more sensitive than comparing two
independent means.

Invariants: pure functions of their inputs (the bootstrap takes an explicit seed, so results
are reproducible); only the standard library plus numpy (imported lazily by the bootstrap, so
importing this module stays cheap for command-line tools); bad input (empty samples, runs of
different lengths, ``c > n``) raises ValueError with the offending numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean with its standard error over ``n`` items (``se`` is 0.0 when n < 2)."""

    mean: float
    se: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.4f} ± {self.se:.4f} (n={self.n})"


def _as_bools(values: Iterable[bool | int]) -> list[bool]:
    out = []
    for v in values:
        if v not in (0, 1, True, False):
            raise ValueError(f"expected correct/incorrect values (bool or 0/1), got {v!r}")
        out.append(bool(v))
    return out


def mean_se(values: Sequence[float]) -> Estimate:
    """Sample mean and its standard error ``s / sqrt(n)`` with the unbiased sample variance."""
    n = len(values)
    if n == 0:
        raise ValueError("cannot estimate a mean from zero values")
    xs = [float(v) for v in values]
    mean = math.fsum(xs) / n
    if n < 2:
        return Estimate(mean, 0.0, n)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return Estimate(mean, math.sqrt(var / n), n)


def pass_at_1(correct: Sequence[bool | int]) -> Estimate:
    """pass@1 of one greedy sample per question: the accuracy, with SE = sqrt(p(1-p)/(n-1))."""
    return mean_se([float(c) for c in _as_bools(correct)])


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one question from ``n`` samples of which ``c`` are correct.

    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021), computed as a product so it stays exact
    for large ``n``. Needs ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and n >= 1 (got n={n}, c={c})")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n (got k={k}, n={n})")
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    miss = Fraction(1)
    for i in range(n - c + 1, n + 1):
        miss *= Fraction(i - k, i)
    return float(1 - miss)


def mean_pass_at_k(samples: Sequence[tuple[int, int]], k: int) -> Estimate:
    """pass@k averaged over questions, each given as ``(n, c)``, with its standard error."""
    if not samples:
        raise ValueError("mean_pass_at_k needs at least one question")
    return mean_se([pass_at_k(n, c, k) for n, c in samples])


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Run B minus run A on the same questions (``delta`` > 0: B is better)."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float  # two-sided
    n: int
    method: str

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha


def _paired(a: Sequence[float | bool], b: Sequence[float | bool]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired comparison needs runs on the same questions: {len(a)} vs {len(b)} results")
    if len(a) == 0:
        raise ValueError("paired comparison needs at least one question")
    return np.asarray(a, dtype=float), np.asarray(b, dtype=float)


def paired_bootstrap(
    a: Sequence[float | bool],
    b: Sequence[float | bool],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedComparison:
    """Paired bootstrap of mean(b) - mean(a): questions are resampled with replacement.

    The CI is the percentile interval of the resampled deltas. The two-sided p-value is the
    share of resampled deltas on the far side of zero, doubled (null: delta = 0), with a
    floor of ``1 / resamples``. Deterministic for a given ``seed``.
    """
    import numpy as np

    xa, xb = _paired(a, b)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 100:
        raise ValueError(f"use at least 100 bootstrap resamples (got {resamples})")
    diff = xb - xa
    n = len(diff)
    delta = float(diff.mean())
    rng = np.random.default_rng(seed)
    deltas = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(n, 1))  # bound memory: chunk x n indices at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        deltas[start:stop] = diff[idx].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(deltas, [alpha / 2, 1 - alpha / 2])
    if np.all(diff == 0):
        p = 1.0
    else:
        far = float(np.mean(deltas <= 0) if delta > 0 else np.mean(deltas >= 0))
        p = min(1.0, max(2 * far, 1 / resamples))
    return PairedComparison(delta, float(low), float(high), p, n, f"paired bootstrap ({resamples} resamples)")


@dataclass(frozen=True, slots=True)
class McNemar:
    """McNemar's test on paired correct/incorrect outcomes of runs A and B."""

    only_a: int  # questions A got right and B got wrong
    only_b: int  # questions B got right and A got wrong
    both: int
    neither: int
    statistic: float  # chi-square with continuity correction (reported; the p-value is exact)
    p_value: float  # exact two-sided binomial p-value on the discordant pairs

    @property
    def delta(self) -> float:
        """Accuracy of B minus accuracy of A."""
        n = self.only_a + self.only_b + self.both + self.neither
        return (self.only_b - self.only_a) / n if n else 0.0


def mcnemar(a: Sequence[bool | int], b: Sequence[bool | int]) -> McNemar:
    """Exact McNemar test: under the null, each discordant question favours A or B with p=1/2."""
    if len(a) != len(b):
        raise ValueError(f"McNemar needs runs on the same questions: {len(a)} vs {len(b)} results")
    xa, xb = _as_bools(a), _as_bools(b)
    only_a = sum(1 for x, y in zip(xa, xb, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(xa, xb, strict=True) if y and not x)
    both = sum(1 for x, y in zip(xa, xb, strict=True) if x and y)
    neither = len(xa) - only_a - only_b - both
    m = only_a + only_b
    if m == 0:
        return McNemar(only_a, only_b, both, neither, 0.0, 1.0)
    statistic = (abs(only_a - only_b) - 1) ** 2 / m
    k = min(only_a, only_b)
    tail = Fraction(sum(math.comb(m, i) for i in range(k + 1)), 2**m)  # exact, any m
    p = float(min(Fraction(1), 2 * tail))
    return McNemar(only_a, only_b, both, neither, float(statistic), p)


@dataclass(frozen=True, slots=True)
class SprtState:
    """Wald's sequential probability ratio test after ``n`` Bernoulli items with ``hits`` successes."""

    llr: float  # log likelihood ratio of H1 against H0
    lower: float  # log(beta / (1 - alpha)): accept H0 at or below
    upper: float  # log((1 - beta) / alpha): accept H1 (reject H0) at or above
    n: int
    hits: int

    @property
    def decision(self) -> str:
        """``h1`` (reject H0), ``h0`` (accept H0) or ``continue``."""
        if self.llr >= self.upper:
            return "h1"
        if self.llr <= self.lower:
            return "h0"
        return "continue"


def sprt_bernoulli(hits: int, n: int, p0: float, p1: float, *, alpha: float = 0.05, beta: float = 0.2) -> SprtState:
    """Wald's SPRT of H0: p = p0 against H1: p = p1 on ``n`` Bernoulli items with ``hits`` successes.

    Stopping when the log likelihood ratio leaves ``(log(beta/(1-alpha)), log((1-beta)/alpha))``
    rejects H0 wrongly with probability at most about ``alpha`` and misses H1 with about ``beta``
    (Wald's bounds; the test is one-sided in the direction of ``p1``). ``p0`` and ``p1`` are clipped
    into (0, 1) so that a best of 100% still gives a finite ratio.
    """
    if not 0 <= hits <= n:
        raise ValueError(f"sprt needs 0 <= hits <= n (got hits={hits}, n={n})")
    if not (0 < alpha < 1 and 0 < beta < 1):
        raise ValueError(f"sprt needs alpha and beta in (0, 1), got {alpha} and {beta}")
    eps = 1e-6
    q0, q1 = min(max(p0, eps), 1 - eps), min(max(p1, eps), 1 - eps)
    if q0 == q1:
        raise ValueError(f"sprt needs p0 != p1 (got {p0} and {p1})")
    llr = hits * math.log(q1 / q0) + (n - hits) * math.log((1 - q1) / (1 - q0))
    return SprtState(llr, math.log(beta / (1 - alpha)), math.log((1 - beta) / alpha), n, hits)


def bootstrap_mean_ci(values: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000,
                      seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the percentile bootstrap interval of the mean; deterministic per seed.

    With one value the interval is that value (no spread to resample).
    """
    import numpy as np

    xs = np.asarray([float(v) for v in values], dtype=float)
    if xs.size == 0:
        raise ValueError("bootstrap_mean_ci needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mean = float(xs.mean())
    if xs.size == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, xs.size, size=(resamples, xs.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return mean, float(low), float(high)


def bootstrap_gain_ci(first: Sequence[float], last: Sequence[float], *, confidence: float = 0.95,
                      resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """(gain, low, high): mean(last) - mean(first) and its percentile bootstrap interval, each sample resampled
    on its own (two independent samples, e.g. the rewards of a training run's first and last steps)."""
    import numpy as np

    a = np.asarray([float(v) for v in first], dtype=float)
    b = np.asarray([float(v) for v in last], dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("bootstrap_gain_ci needs at least one value in each sample")
    gain = float(b.mean() - a.mean())
    rng = np.random.default_rng(seed)
    gains = (b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
             - a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1))
    low, high = np.quantile(gains, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return gain, float(low), float(high)


def sign_flip_test(diffs: Sequence[float], *, resamples: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired permutation (sign-flip) test that the mean difference is 0.

    Under the null each paired difference is as likely positive as negative. Exact (every sign
    pattern) up to 12 pairs, else Monte Carlo with ``resamples`` patterns (plus the observed one).
    With 5 seeds the smallest possible p-value is 2/32 = 0.0625: say so rather than claim more.
    """
    xs = [float(d) for d in diffs]
    n = len(xs)
    if n == 0:
        raise ValueError("sign_flip_test needs at least one difference")
    observed = abs(math.fsum(xs))
    if observed == 0:
        return 1.0
    tol = 1e-12 * max(1.0, observed)
    if n <= 12:
        extreme = 0
        for mask in range(2**n):
            total = math.fsum(x if (mask >> i) & 1 else -x for i, x in enumerate(xs))
            extreme += abs(total) >= observed - tol
        return extreme / 2**n
    import numpy as np

    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(resamples, n))
    totals = np.abs(signs @ np.asarray(xs))
    return float((np.sum(totals >= observed - tol) + 1) / (resamples + 1))


def taxonomy_counts(failures: Iterable[str | None], categories: Sequence[str] = ()) -> dict[str, int]:
    """Count failure labels; ``None`` counts as ``correct``. Every name in ``categories`` is
    present (with 0) so tables from different runs line up; order: correct, categories, rest."""
    counts = Counter("correct" if f is None else f for f in failures)
    out: dict[str, int] = {"correct": counts.pop("correct", 0)}
    for name in categories:
        out[name] = counts.pop(name, 0)
    for name in sorted(counts):
        out[name] = counts[name]
    return out


__all__ = [
    "Estimate",
    "McNemar",
    "PairedComparison",
    "SprtState",
    "bootstrap_mean_ci",
    "mcnemar",
    "mean_pass_at_k",
    "mean_se",
    "paired_bootstrap",
    "pass_at_1",
    "pass_at_k",
    "sign_flip_test",
    "sprt_bernoulli",
    "taxonomy_counts",
]
