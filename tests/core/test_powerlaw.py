"""Power-law fits and the sequential early-abort test (pure logic, plus the recorded curves)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rrma.powerlaw import MIN_POINTS, EarlyAbortRule, fit_power_law

CURVES = Path(__file__).resolve().parent.parent / "fixtures" / "loss_curves"


def synthetic(a: float, b: float, c: float, noise: float, n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.linspace(0.05, 1.0, n)
    return t, a * t ** (-b) + c + rng.normal(0, noise, n)


@pytest.mark.parametrize(
    ("a", "b", "c"),
    [
        (0.5, 0.5, 2.0),  # a typical loss curve: moderate decay to an asymptote of 2 nats
        (1.5, 0.2, 1.0),  # slow decay, far from the asymptote at the end of the budget
        (0.1, 1.5, 3.0),  # fast decay, nearly flat at the end
    ],
)
def test_fit_recovers_noise_free_parameters(a: float, b: float, c: float) -> None:
    t, y = synthetic(a, b, c, noise=0.0)
    fit = fit_power_law(t, y)
    assert fit is not None
    assert fit.b == pytest.approx(b, rel=1e-3)
    assert fit.a == pytest.approx(a, rel=1e-3)
    assert fit.c == pytest.approx(c, abs=1e-3)
    assert float(fit.predict(1.0)) == pytest.approx(a + c, abs=1e-6)


def test_fit_needs_enough_finite_points() -> None:
    # too few points: no fit; NaN samples are dropped before counting
    assert fit_power_law([0.1, 0.2, 0.3], [3.0, 2.9, 2.8]) is None
    t = np.linspace(0.1, 0.5, MIN_POINTS)
    y = np.full(MIN_POINTS, np.nan)
    assert fit_power_law(t, y) is None


def test_prediction_interval_covers_truth_at_nominal_rate() -> None:
    # fitting 60% of a noisy curve and extrapolating to t=1: the 95% one-sided bound misses
    # the true final value in about 5% of repeats (delta method + misfit floor: at most that)
    misses = 0
    trials = 150
    for seed in range(trials):
        t, y = synthetic(0.6, 0.6, 2.0, noise=0.05, seed=seed)
        seen = t <= 0.6
        fit = fit_power_law(t[seen], y[seen])
        assert fit is not None
        truth = 0.6 + 2.0
        lower = float(fit.predict(1.0)) - 1.645 * fit.predict_se(1.0)
        misses += lower > truth
    assert misses / trials <= 0.08


@pytest.mark.parametrize(
    ("offset", "expect_abort"),
    [
        (0.5, True),  # final loss 0.5 nats above the threshold: clearly hopeless, stopped early
        (-0.05, False),  # the trial ends 0.05 below the threshold: it would win, never stopped
        (0.0, False),  # a tie is H0 (may still beat): the test must not reject it
    ],
)
def test_rule_aborts_only_hopeless_trials(offset: float, expect_abort: bool) -> None:
    rule = EarlyAbortRule(alpha=0.05)
    t, y = synthetic(0.8, 0.5, 2.0, noise=0.03, seed=3)
    final = 0.8 + 2.0
    decision = rule.replay(t, y, threshold=final - offset)
    assert (decision is not None) == expect_abort
    if decision is not None:
        assert decision.lower > decision.threshold
        assert decision.at <= 0.8
        assert "cannot beat" in decision.describe()


def test_false_abort_rate_under_the_null_is_controlled() -> None:
    # curves whose true final equals the threshold exactly (H0 holds): at most alpha aborted
    rule = EarlyAbortRule(alpha=0.05)
    aborted = 0
    n = 100
    for seed in range(n):
        t, y = synthetic(0.8, 0.5, 2.0, noise=0.05, seed=seed)
        aborted += rule.replay(t, y, threshold=2.8) is not None
    assert aborted / n <= 0.05


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"looks": ()}, "looks"),  # no looks at all
        ({"looks": (0.5, 0.3)}, "increasing"),  # looks out of order
        ({"looks": (0.5, 1.0)}, "looks"),  # a look at the very end saves nothing
        ({"alpha": 0.0}, "alpha"),  # a zero error rate can never abort
    ],
)
def test_rule_rejects_bad_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EarlyAbortRule(**kwargs)  # type: ignore[arg-type]


def test_bonferroni_critical_value() -> None:
    rule = EarlyAbortRule(looks=(0.25, 0.5, 0.75, 0.8, 0.85), alpha=0.05)
    assert rule.z == pytest.approx(2.326, abs=1e-3)  # Phi^-1(1 - 0.01)


def _fixtures() -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(CURVES.glob("*.json"))]


@pytest.mark.skipif(not list(CURVES.glob("*.json")), reason="no recorded loss curves in tests/fixtures/loss_curves")
def test_recorded_curves_against_the_baseline() -> None:
    # real CPU curves, threshold = the baseline repeats' mean mapped to training loss with their
    # own train/val gap: no run that ended better than the baseline is aborted, and the runs
    # that ended far worse (> 0.5 bits per byte) are all aborted before the end
    recs = [r for r in _fixtures() if r["returncode"] == 0 and "val_bpb" in r["metrics"]]  # type: ignore[operator]
    base = [r for r in recs if str(r["name"]).startswith("baseline")]
    assert len(base) >= 2
    ln2 = math.log(2)

    def final_loss(rec: dict[str, object]) -> float:
        return float(np.mean([p[1] for p in rec["curve"][-4:]]))  # type: ignore[index]

    best = float(np.mean([r["metrics"]["val_bpb"] for r in base]))  # type: ignore[index]
    gap = float(np.median([r["metrics"]["val_bpb"] - final_loss(r) / ln2 for r in base]))  # type: ignore[index, operator]
    threshold = (best - gap) * ln2
    rule = EarlyAbortRule()
    better = worse = 0
    for rec in recs:
        if rec in base:
            continue
        curve = np.array(rec["curve"], dtype=float)
        t = curve[:, 2] / float(rec["time_budget"])  # type: ignore[arg-type]
        decision = rule.replay(t, curve[:, 1], threshold)
        val = float(rec["metrics"]["val_bpb"])  # type: ignore[index]
        if val < best:
            better += 1
            assert decision is None, f"{rec['name']} (val_bpb {val:.3f} < {best:.3f}) was aborted: {decision}"
        elif val > best + 0.5:
            worse += 1
            assert decision is not None, f"{rec['name']} (val_bpb {val:.3f}) was not aborted"
            assert decision.at < 0.8
    assert better >= 2 and worse >= 1
