"""Early abort in the loop: stop a running trial whose progress says it cannot beat the best.

Why it exists: any oracle that reports progress (a training curve, questions answered so far)
gives the loop enough to tell, at a controlled error rate, that a trial will lose; stopping it
frees its slot for the next proposal. The rules live here, once, for every oracle (before, only
the autoresearch oracle could abort its own trials).

Progress samples (``ctx.progress(sample)``, recorded as ``trial.progress``) carry what a rule needs:

* **power-law** (curves): ``frac`` (the fraction of the trial's budget used, 0..1) and
  ``score_est`` (the score the trial would get if it ended now, in the task's metric units; the
  autoresearch oracle maps its training loss to val_bpb with the train/val gap it measured).
  At each look of ``loop.early_abort.looks`` the curve is fitted with ``a t^-b + c`` and the
  trial is stopped when the one-sided bound of its forecast at ``t = 1``, less a misfit
  allowance ``misfit (1 - t)^2``, is still worse than the best (:class:`rrma.powerlaw.EarlyAbortRule`:
  a Bonferroni bound over the looks keeps the false-abort rate at ``alpha``).
* **sprt** (item streams): ``items`` (evaluated so far), ``hits`` (of them, counted in the score:
  correct answers) and optionally ``of`` (items in all). Wald's SPRT tests H0 "the hit rate is
  at least the best's" against H1 "it is ``sprt_delta`` worse" (:func:`rrma.stats.sprt_bernoulli`)
  and stops the trial when it accepts H1 (false-abort rate about ``alpha``); accepting H0 ends the
  test for that trial. With ``of`` known, a trial that could not beat the best even if every
  remaining item went its way is stopped at once (no error).

Invariant: a monitor is a pure function of the samples it was given and the best score it was
created with; the loop records the decision with the trial (``trial.finished.early_abort``), so
the log says why a trial stopped. Baseline and confirmation repeats are never stopped.
"""

from __future__ import annotations

import math
from typing import Any

from rrma.powerlaw import EarlyAbortRule
from rrma.stats import sprt_bernoulli
from rrma.task import EarlyAbortConfig

RULES = ("power-law", "sprt")


class TrialMonitor:
    """Watches one trial's progress samples against the best score it must beat."""

    def __init__(self, config: EarlyAbortConfig, *, direction: str, best: float) -> None:
        if config.rule == "off":
            raise ValueError("no monitor for early_abort.rule off")
        self.config = config
        self.sign = 1.0 if direction == "minimize" else -1.0  # the power-law rule reads lower as better
        self.best = float(best)
        self.rule = EarlyAbortRule(looks=tuple(config.looks), alpha=config.alpha, misfit=config.misfit,
                                   min_fraction=config.min_fraction)
        self.t: list[float] = []
        self.y: list[float] = []
        self.next_look = 0
        self.done = False  # a decision was made (abort, or the SPRT accepted H0)
        self.last: dict[str, Any] | None = None  # the latest look's decision, abort or not

    def observe(self, sample: dict[str, Any]) -> dict[str, Any] | None:
        """Feed one progress sample; the abort decision (a dict for the log) when it says stop, else None."""
        if self.done:
            return None
        rule = self.config.rule
        if rule in ("power-law", "auto") and _number(sample.get("frac")) and _number(sample.get("score_est")):
            return self._curve(float(sample["frac"]), float(sample["score_est"]))
        if rule in ("sprt", "auto") and _count(sample.get("items")) and _count(sample.get("hits")):
            return self._items(int(sample["items"]), int(sample["hits"]), sample.get("of"))
        return None

    # ------------------------------------------------------------------ power law

    def _curve(self, frac: float, value: float) -> dict[str, Any] | None:
        if not (0 < frac <= 1 and math.isfinite(value)):
            return None
        self.t.append(frac)
        self.y.append(self.sign * value)
        looks = self.rule.looks
        if self.next_look >= len(looks) or frac < looks[self.next_look]:
            return None
        while self.next_look < len(looks) and frac >= looks[self.next_look]:
            self.next_look += 1
        decision = self.rule.decide(self.next_look, self.t, self.y, self.sign * self.best)
        if decision is None:
            return None
        s = self.sign
        lower, upper = sorted((s * decision.lower, s * decision.upper))
        self.last = {
            "rule": "power-law", "look": decision.look, "at": decision.at, "fraction": round(frac, 4),
            "predicted": round(s * decision.predicted, 6), "interval": [round(lower, 6), round(upper, 6)],
            "best": self.best, "alpha": self.config.alpha, "misfit": self.config.misfit, "abort": decision.abort,
        }
        if not decision.abort:
            return None
        self.done = True
        self.last["text"] = (f"look {decision.look} at {decision.at:.0%} of the budget: the power-law forecast of the "
                             f"final score is {s * decision.predicted:.5g} (bound {s * decision.lower:.5g} with the "
                             f"misfit allowance) and cannot beat the best {self.best:.5g}; false-abort rate "
                             f"{self.config.alpha:g}")
        return self.last

    # ------------------------------------------------------------------ SPRT

    def _items(self, items: int, hits: int, of: Any) -> dict[str, Any] | None:
        if not 0 <= hits <= items or items == 0:
            return None
        maximize = self.sign < 0
        total = int(of) if _count(of) and int(of) >= items else None
        if total is not None:  # certain: even every remaining item going its way cannot beat the best
            reach = (hits + (total - items)) / total if maximize else hits / total
            if (reach < self.best) if maximize else (reach > self.best):
                self.done = True
                self.last = {"rule": "sprt", "certain": True, "items": items, "hits": hits, "of": total,
                             "best": self.best, "abort": True,
                             "text": f"after {items} of {total} items ({hits} hits) the final score can be at most "
                                     f"{reach:.4g}, short of the best {self.best:.4g}"}
                return self.last
        if items < self.config.min_items or not 0 <= self.best <= 1:
            return None  # SPRT needs a rate: the best must be a share of items
        delta = self.config.sprt_delta
        p0 = self.best
        p1 = p0 - delta if maximize else p0 + delta
        if not 0 < p1 < 1:
            return None  # no room below (above) the best for the alternative
        state = sprt_bernoulli(hits, items, p0, p1, alpha=self.config.alpha, beta=self.config.sprt_beta)
        decision = state.decision
        self.last = {"rule": "sprt", "items": items, "hits": hits, "of": total, "p0": round(p0, 6),
                     "p1": round(p1, 6), "llr": round(state.llr, 4), "upper": round(state.upper, 4),
                     "lower": round(state.lower, 4), "best": self.best, "alpha": self.config.alpha,
                     "beta": self.config.sprt_beta, "abort": decision == "h1"}
        if decision == "h0":
            self.done = True  # the data say it is not worse by delta: let it finish
            return None
        if decision != "h1":
            return None
        self.done = True
        self.last["text"] = (f"SPRT after {items} items ({hits} hits, rate {hits / items:.3f}): the hit rate is "
                             f"{delta:g} {'below' if maximize else 'above'} the best {p0:.4g} rather than at it "
                             f"(log-likelihood ratio {state.llr:.2f} >= {state.upper:.2f}); false-abort rate "
                             f"{self.config.alpha:g}")
        return self.last


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def make_monitor(config: EarlyAbortConfig, *, direction: str, best: float | None) -> TrialMonitor | None:
    """A monitor for one trial, or None when early abort is off or there is no best to beat yet."""
    if config.rule == "off" or best is None or not math.isfinite(best):
        return None
    return TrialMonitor(config, direction=direction, best=best)


__all__ = ["RULES", "TrialMonitor", "make_monitor"]
