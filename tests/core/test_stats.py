"""rrma/stats.py: pass@1 ± SE, unbiased pass@k, paired bootstrap, McNemar, taxonomy counts."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from rrma.stats import (
    mcnemar,
    mean_pass_at_k,
    mean_se,
    paired_bootstrap,
    pass_at_1,
    pass_at_k,
    taxonomy_counts,
)


def test_pass_at_1_mean_and_standard_error() -> None:
    est = pass_at_1([True, False, True, True])
    assert est.mean == 0.75
    assert est.se == pytest.approx(math.sqrt(0.75 * 0.25 / 3))  # sqrt(p(1-p)/(n-1))
    assert est.n == 4
    assert pass_at_1([1]).se == 0.0  # one question: no spread to estimate


def test_mean_se_matches_the_textbook_formula() -> None:
    xs = [0.2, 0.4, 0.9, 0.5, 0.0]
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    est = mean_se(xs)
    assert est.mean == pytest.approx(mean)
    assert est.se == pytest.approx(sd / math.sqrt(len(xs)))


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (c correct) that hold at least one correct sample."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [
        (1, 0, 1),  # one wrong sample
        (1, 1, 1),  # one right sample
        (5, 2, 1),  # k=1 is c/n
        (5, 2, 2),  # small case, both branches of the product
        (8, 3, 4),  # n - c >= k
        (6, 4, 3),  # n - c < k: every subset holds a correct sample
        (10, 0, 5),  # nothing correct
        (10, 10, 3),  # everything correct
    ],
)
def test_pass_at_k_equals_brute_force(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(n, c, k))


def test_pass_at_k_is_stable_for_large_n() -> None:
    # the product form never overflows: n = 2000 samples, 1 correct, k = 100 -> k / n
    assert pass_at_k(2000, 1, 100) == pytest.approx(100 / 2000)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (5, 6, 1, "0 <= c <= n"),  # more correct than samples
        (5, -1, 1, "0 <= c <= n"),  # negative count
        (5, 2, 6, "1 <= k <= n"),  # k larger than n
        (5, 2, 0, "1 <= k <= n"),  # k = 0
    ],
)
def test_pass_at_k_rejects_bad_counts(n: int, c: int, k: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)


def test_mean_pass_at_k_over_questions() -> None:
    est = mean_pass_at_k([(4, 0), (4, 4), (4, 2)], 2)
    assert est.mean == pytest.approx((0 + 1 + _brute_pass_at_k(4, 2, 2)) / 3)
    with pytest.raises(ValueError, match="at least one question"):
        mean_pass_at_k([], 1)


def test_paired_bootstrap_no_difference() -> None:
    a = [True, False, True, False, True] * 20
    result = paired_bootstrap(a, a, resamples=500)
    assert (result.delta, result.ci_low, result.ci_high, result.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_paired_bootstrap_detects_a_real_improvement_and_is_deterministic() -> None:
    rng = random.Random(1)
    a = [rng.random() < 0.5 for _ in range(400)]
    b = [x or rng.random() < 0.3 for x in a]  # b fixes ~30% of a's misses, never breaks a's hits
    first = paired_bootstrap(a, b, resamples=2000, seed=7)
    again = paired_bootstrap(a, b, resamples=2000, seed=7)
    assert first == again
    assert first.delta == pytest.approx(sum(b) / 400 - sum(a) / 400)
    assert 0 < first.ci_low < first.delta < first.ci_high
    assert first.significant()
    # the percentile CI agrees with the normal approximation of the paired differences
    diffs = [float(y) - float(x) for x, y in zip(a, b, strict=True)]
    se = mean_se(diffs).se
    assert first.ci_high - first.ci_low == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_paired_bootstrap_rejects_unpaired_runs() -> None:
    with pytest.raises(ValueError, match="same questions: 3 vs 2"):
        paired_bootstrap([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="at least 100"):
        paired_bootstrap([1, 0], [0, 1], resamples=10)


@pytest.mark.parametrize(
    ("only_a", "only_b", "p_value"),
    [
        (1, 9, 22 / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10
        (5, 5, 1.0),  # balanced discordance: no evidence
        (0, 6, 2 / 64),  # 2 * C(6,0) / 2^6
        (0, 0, 1.0),  # no discordant pairs at all
    ],
)
def test_mcnemar_exact_p_values(only_a: int, only_b: int, p_value: float) -> None:
    a = [True] * only_a + [False] * only_b + [True] * 7 + [False] * 3
    b = [False] * only_a + [True] * only_b + [True] * 7 + [False] * 3
    result = mcnemar(a, b)
    assert (result.only_a, result.only_b, result.both, result.neither) == (only_a, only_b, 7, 3)
    assert result.p_value == pytest.approx(p_value)
    assert result.delta == pytest.approx((only_b - only_a) / len(a))


def test_mcnemar_agrees_with_scipy_binomtest(in_ci: bool) -> None:
    if in_ci:  # the dev extra brings scipy: under CI a missing one is a broken install, not a skip
        import scipy.stats as stats
    else:
        stats = pytest.importorskip("scipy.stats", reason="scipy (dev extra) is not installed; rrma's exact test is "
                                                          "stdlib, scipy only cross-checks it")
    for only_a, only_b in [(3, 17), (40, 61), (120, 80)]:
        a = [True] * only_a + [False] * only_b
        b = [False] * only_a + [True] * only_b
        expected = stats.binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue
        assert mcnemar(a, b).p_value == pytest.approx(expected, rel=1e-9)


def test_mcnemar_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="same questions"):
        mcnemar([True], [True, False])
    with pytest.raises(ValueError, match="bool or 0/1"):
        mcnemar([2], [1])


def test_taxonomy_counts_line_up_across_runs() -> None:
    counts = taxonomy_counts([None, "wrong_value", None, "no_answer", "api_error"],
                             ("no_answer", "format_only", "wrong_value", "multiple_answers"))
    assert list(counts.items()) == [
        ("correct", 2), ("no_answer", 1), ("format_only", 0), ("wrong_value", 1), ("multiple_answers", 0),
        ("api_error", 1),
    ]
