"""Power-law loss-curve fits and the sequential early-abort test built on them.

Why: a training trial that is clearly going to lose should not burn its whole budget. While it
trains we fit ``L(t) = a * t**(-b) + c`` to its loss curve, extrapolate to the end of the
budget, and stop it once the data say, at a controlled error rate, that its final loss will be
worse than the current best (the self-evaluation idea of AutoResearch-RL).

The fit (:func:`fit_power_law`). For a fixed exponent ``b`` the model is linear in ``(a, c)``,
so we profile: least squares for ``(a, c)`` on a log grid of ``b``, then a golden-section
refinement around the best grid point. Time is measured as a fraction of the budget, so the
prediction is at ``t = 1``. The standard error of the predicted curve value comes from the
usual nonlinear-regression (delta-method) covariance ``s^2 (J^T J)^-1`` with ``s^2`` the
residual variance.

A power law is only an approximation of a real curve. Under a decaying learning rate the loss
drops late (annealing), so a fit made early over-predicts the final loss of exactly the runs
that win. The rule therefore also allows a *misfit* of ``misfit * (1 - t)**2`` nats (``t`` the
fraction seen): a bound on how much lower than the forecast a real curve may end, calibrated on
the recorded CPU curves in tests/fixtures/loss_curves (the largest over-forecast there, a
high-learning-rate run, is about 0.8-1.1 x (1 - t)**2 at 30-70% of the budget).

The test (:class:`EarlyAbortRule`). At ``K`` planned looks (fractions of the budget) we test
the null hypothesis H0: "the expected final loss is <= the threshold" (the trial can still
tie or beat the current best) against H1: "it is > the threshold". We reject H0, i.e. abort,
when the one-sided lower bound ``pred - z * se - misfit * (1 - t)**2`` lies above the
threshold, with ``z = Phi^-1(1 - alpha / K)``. By the union (Bonferroni) bound, the
probability of aborting a trial for which H0 holds at any of the K looks is at most ``alpha``
(given the misfit allowance holds): that is the *false-abort rate*, a trial that would have
won (or tied) being stopped. benches/perf/bench_early_abort.py measures it on recorded real
curves.

Invariant: everything here is pure numpy on plain floats; no I/O, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Samples = Sequence[float] | np.ndarray  # 1-D sample times or losses

B_GRID = np.exp(np.linspace(math.log(0.02), math.log(4.0), 64))  # candidate exponents b
MIN_POINTS = 8  # fewer samples than this: no fit, no decision


@dataclass(frozen=True)
class PowerLawFit:
    """``L(t) = a * t**(-b) + c`` fitted to ``n`` samples; ``t`` in fractions of the budget."""

    a: float
    b: float
    c: float
    sigma: float  # residual standard deviation (loss units)
    n: int
    t_max: float  # the latest sample time (fraction of the budget)
    cov: np.ndarray  # 3x3 covariance of (a, b, c)

    def predict(self, t: float | np.ndarray) -> float | np.ndarray:
        return self.a * np.power(t, -self.b) + self.c

    def predict_se(self, t: float) -> float:
        """Standard error of the fitted curve value at ``t`` (delta method)."""
        tb = t ** (-self.b)
        grad = np.array([tb, -self.a * math.log(t) * tb, 1.0])
        return math.sqrt(max(float(grad @ self.cov @ grad), 0.0))


def _solve_linear(tb: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least squares of y ~ a * tb + c in closed form; returns (a, c, sse)."""
    a, c, sse = _solve_many(tb[None, :], y)
    return float(a[0]), float(c[0]), float(sse[0])


def _solve_many(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of y ~ a * x[k] + c for every row k of ``x`` at once: (a, c, sse), one per row.

    The 2-parameter normal equations in closed form (centred, so they stay well conditioned):
    ``a = cov(x, y) / var(x)``, ``c = mean(y) - a mean(x)``; a constant row (var 0) gets a = 0.
    """
    xm = x.mean(axis=1, keepdims=True)
    ym = float(y.mean())
    xc = x - xm
    yc = y - ym
    sxx = np.einsum("ij,ij->i", xc, xc)
    sxy = xc @ yc
    safe = sxx > 1e-300
    a = np.where(safe, sxy / np.where(safe, sxx, 1.0), 0.0)
    c = ym - a * xm[:, 0]
    sse = np.maximum(float(yc @ yc) - a * sxy, 0.0)
    return a, c, sse


def fit_power_law(t: Samples, y: Samples) -> PowerLawFit | None:
    """Fit ``a * t**(-b) + c`` (``t`` > 0); None when there are too few points to say anything."""
    t_arr = np.asarray(t, dtype=float)
    y_arr = np.asarray(y, dtype=float)
    keep = (t_arr > 0) & np.isfinite(y_arr)
    t_arr, y_arr = t_arr[keep], y_arr[keep]
    n = int(t_arr.size)
    if n < MIN_POINTS:
        return None
    log_t = np.log(t_arr)
    sse = _solve_many(np.exp(-B_GRID[:, None] * log_t[None, :]), y_arr)[2]  # every grid exponent at once
    i = int(np.argmin(sse))
    lo, hi = B_GRID[max(i - 1, 0)], B_GRID[min(i + 1, len(B_GRID) - 1)]
    # golden-section refinement of b inside the bracketing grid cells
    g = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1 = _solve_linear(np.exp(-x1 * log_t), y_arr)[2]
    f2 = _solve_linear(np.exp(-x2 * log_t), y_arr)[2]
    for _ in range(30):
        if f1 < f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = _solve_linear(np.exp(-x1 * log_t), y_arr)[2]
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = _solve_linear(np.exp(-x2 * log_t), y_arr)[2]
    b = (lo + hi) / 2
    tb = np.exp(-b * log_t)
    a, c, sse_b = _solve_linear(tb, y_arr)
    dof = max(n - 3, 1)
    s2 = sse_b / dof
    jac = np.column_stack([tb, -a * log_t * tb, np.ones_like(tb)])
    try:
        cov = s2 * np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        cov = np.full((3, 3), np.inf)
    return PowerLawFit(a=a, b=float(b), c=c, sigma=math.sqrt(s2), n=n, t_max=float(t_arr.max()), cov=cov)


@dataclass(frozen=True)
class AbortDecision:
    """The outcome of one look: the prediction, its one-sided bound and whether to stop."""

    look: int  # 1-based index of the look
    at: float  # budget fraction of the look
    predicted: float  # predicted final loss
    se: float  # its standard error
    lower: float  # one-sided lower bound: level 1 - alpha/K, less the misfit allowance
    upper: float  # the matching upper bound (reported, not tested)
    threshold: float  # the loss the trial must beat
    abort: bool

    def describe(self) -> str:
        verdict = "cannot beat" if self.abort else "may still beat"
        return (
            f"look {self.look} at {self.at:.0%} of the budget: predicted final loss {self.predicted:.4f} "
            f"(interval {self.lower:.4f} .. {self.upper:.4f}) {verdict} the threshold {self.threshold:.4f}"
        )


@dataclass
class EarlyAbortRule:
    """The sequential test: ``looks`` are budget fractions; ``alpha`` the false-abort rate."""

    looks: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    alpha: float = 0.05
    misfit: float = 1.0  # allowance misfit * (1 - t)**2 (loss units) for a curve ending below its forecast
    min_fraction: float = 0.05  # samples before this budget fraction (warmup) are not fitted

    def __post_init__(self) -> None:
        if not self.looks or any(not 0 < x < 1 for x in self.looks) or list(self.looks) != sorted(self.looks):
            raise ValueError(f"looks must be increasing budget fractions in (0, 1), got {self.looks}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.misfit < 0:
            raise ValueError(f"misfit must be >= 0, got {self.misfit}")

    @property
    def z(self) -> float:
        return NormalDist().inv_cdf(1 - self.alpha / len(self.looks))

    def decide(self, look: int, t: Samples, y: Samples, threshold: float) -> AbortDecision | None:
        """Run look ``look`` (1-based) on samples ``(t, y)``; ``t`` in fractions of the budget."""
        t_arr = np.asarray(t, dtype=float)
        y_arr = np.asarray(y, dtype=float)
        sel = t_arr >= self.min_fraction
        fit = fit_power_law(t_arr[sel], y_arr[sel])
        if fit is None or not math.isfinite(fit.sigma):
            return None
        pred = float(fit.predict(1.0))
        se = fit.predict_se(1.0)
        if not (math.isfinite(pred) and math.isfinite(se)):
            return None
        z = self.z
        allowance = self.misfit * (1.0 - min(fit.t_max, 1.0)) ** 2
        lower, upper = pred - z * se - allowance, pred + z * se
        return AbortDecision(
            look=look,
            at=self.looks[look - 1],
            predicted=pred,
            se=se,
            lower=lower,
            upper=upper,
            threshold=threshold,
            abort=lower > threshold,
        )

    def replay(self, t: Samples, y: Samples, threshold: float) -> AbortDecision | None:
        """Apply every look to a complete recorded curve; the first aborting decision, else None."""
        t_arr = np.asarray(t, dtype=float)
        y_arr = np.asarray(y, dtype=float)
        for k, at in enumerate(self.looks, start=1):
            seen = t_arr <= at
            decision = self.decide(k, t_arr[seen], y_arr[seen], threshold)
            if decision is not None and decision.abort:
                return decision
        return None
