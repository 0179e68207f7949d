"""Early abort replayed on recorded real loss curves: compute saved, false aborts, throughput.

    python benches/perf/bench_early_abort.py [--orders 400] [--alpha 0.05] [--seed 0]

The curves are real CPU runs of benches/autoresearch/workspace/train.py (see
tests/fixtures/loss_curves/README.md): good and bad hyperparameters, each with its progress
lines (training seconds and the wall-clock second each line appeared), its final val_bpb and
the wall-clock seconds of the whole process.

Each *order* simulates one research run, as :mod:`oracle.autoresearch` does it live: the
baseline repeats set the first best (their mean val_bpb) and the train/val gap; the other runs
arrive as trials in a random order; each trial is tested at the looks of
:class:`rrma.powerlaw.EarlyAbortRule` against the best so far (mapped to the training-loss
scale by :class:`oracle.autoresearch.GapTracker`); a trial that is not aborted finishes and
may become the best.

A trial is *good* when its real final val_bpb beats the best at its turn, *bad* otherwise.
Printed figures, each against the no-abort baseline of the same replay:

* bad trials aborted (the paper: 38%), and the share of bad-trial compute saved;
* false-abort rate on good trials (should stay at or under alpha);
* experiments per hour: total cost without early abort / total cost with it (paper: 1.35x).
  An aborted trial costs the wall-clock seconds up to the progress line of the aborting
  look; a finished one its whole process (start-up, training, export, evaluation).

For contrast the same replay runs a naive rule that aborts when the *current* loss is above
the threshold at a look (no extrapolation).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from oracle.autoresearch import GapTracker, final_train_loss  # noqa: E402
from rrma.powerlaw import EarlyAbortRule  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "loss_curves"
EVAL_PROCESS_S = 5.0  # the oracle's scoring process (not in the recorded wall time): start-up + load + eval


@dataclass
class Curve:
    name: str
    val_bpb: float
    budget: float  # training seconds
    t: np.ndarray  # budget fractions
    loss: np.ndarray  # mean training loss per progress line (nats/token)
    wall: np.ndarray  # wall-clock seconds since the process started, per progress line
    wall_total: float  # the whole training process
    final_loss: float

    @property
    def full_cost(self) -> float:
        return self.wall_total + EVAL_PROCESS_S

    def cost_until(self, at: float) -> float:
        """Wall seconds until the first progress line at or past budget fraction ``at``."""
        idx = int(np.searchsorted(self.t, at, side="left"))
        return float(self.wall[min(idx, len(self.wall) - 1)])


def load_curves(folder: Path) -> tuple[list[Curve], list[Curve]]:
    """(baseline repeats, other runs) among the recorded curves that trained to the end."""
    baseline: list[Curve] = []
    others: list[Curve] = []
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text())
        if rec["returncode"] != 0 or "val_bpb" not in rec["metrics"]:
            continue
        points = np.array(rec["curve"], dtype=float)
        budget = float(rec["time_budget"])
        curve = Curve(
            name=rec["name"],
            val_bpb=float(rec["metrics"]["val_bpb"]),
            budget=budget,
            t=points[:, 2] / budget,
            loss=points[:, 1],
            wall=points[:, 3],
            wall_total=float(rec["wall_seconds"]),
            final_loss=float(final_train_loss([(int(p[0]), p[1], p[2]) for p in rec["curve"]]) or points[-1, 1]),
        )
        (baseline if rec["name"].startswith("baseline") else others).append(curve)
    return baseline, others


def naive_abort(rule: EarlyAbortRule, curve: Curve, threshold: float) -> float | None:
    """The look at which the current (last-window) loss is above the threshold, else None."""
    for at in rule.looks:
        seen = curve.loss[curve.t <= at]
        if seen.size and float(seen[-3:].mean()) > threshold:
            return at
    return None


@dataclass
class Tally:
    good: int = 0
    bad: int = 0
    good_aborted: int = 0
    bad_aborted: int = 0
    bad_cost_full: float = 0.0
    bad_cost_saved: float = 0.0
    cost_full: float = 0.0
    cost_with: float = 0.0

    def add(self, good: bool, aborted_at: float | None, curve: Curve) -> None:
        cost = curve.full_cost if aborted_at is None else curve.cost_until(aborted_at)
        self.cost_full += curve.full_cost
        self.cost_with += cost
        if good:
            self.good += 1
            self.good_aborted += aborted_at is not None
        else:
            self.bad += 1
            self.bad_aborted += aborted_at is not None
            self.bad_cost_full += curve.full_cost
            self.bad_cost_saved += curve.full_cost - cost


def replay(baseline: list[Curve], others: list[Curve], rule: EarlyAbortRule, orders: int, seed: int) -> tuple[Tally, Tally]:
    rng = random.Random(seed)
    fitted, naive = Tally(), Tally()
    for _ in range(orders):
        order = others[:]
        rng.shuffle(order)
        for arm, tally in (("fit", fitted), ("naive", naive)):
            gaps = GapTracker()
            for b in baseline:
                gaps.add(b.val_bpb, b.final_loss)
            best = statistics.fmean(b.val_bpb for b in baseline)
            for curve in order:
                threshold = gaps.loss_threshold(best)
                if arm == "fit":
                    decision = rule.replay(curve.t, curve.loss, threshold)
                    aborted_at = decision.at if decision is not None else None
                else:
                    aborted_at = naive_abort(rule, curve, threshold)
                good = curve.val_bpb < best
                tally.add(good, aborted_at, curve)
                if aborted_at is None:
                    gaps.add(curve.val_bpb, curve.final_loss)
                    best = min(best, curve.val_bpb)
    return fitted, naive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=400, help="random research orders replayed")
    parser.add_argument("--alpha", type=float, default=0.05, help="false-abort rate of the test")
    parser.add_argument("--misfit", type=float, default=EarlyAbortRule.misfit, help="misfit allowance (nats)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    args = parser.parse_args(argv)
    baseline, others = load_curves(args.fixtures)
    if len(baseline) < 2 or len(others) < 3:
        print(f"need >= 2 baseline and >= 3 other recorded curves in {args.fixtures}; found {len(baseline)} and {len(others)}")
        return 2
    rule = EarlyAbortRule(alpha=args.alpha, misfit=args.misfit)
    fitted, naive = replay(baseline, others, rule, args.orders, args.seed)
    base_mean = statistics.fmean(b.val_bpb for b in baseline)
    print(f"recorded curves: {len(baseline)} baseline repeats (val_bpb {base_mean:.4f} ± "
          f"{statistics.stdev(b.val_bpb for b in baseline):.4f}), {len(others)} trials; {args.orders} random orders")
    print(f"rule: power-law fit, looks at {', '.join(f'{x:.0%}' for x in rule.looks)} of the budget, alpha {args.alpha:g} "
          f"(z = {rule.z:.2f} per look), misfit allowance {rule.misfit:g} x (1 - t)^2 nats")
    header = f"{'':34}{'no abort':>10}{'power-law':>12}{'naive':>10}"
    print(header)

    def pct(num: float, den: float) -> str:
        return "-" if den == 0 else f"{100 * num / den:.1f}%"

    rows = [
        ("bad trials aborted (paper: 38%)", "0.0%", pct(fitted.bad_aborted, fitted.bad), pct(naive.bad_aborted, naive.bad)),
        ("compute saved on bad trials", "0.0%", pct(fitted.bad_cost_saved, fitted.bad_cost_full),
         pct(naive.bad_cost_saved, naive.bad_cost_full)),
        (f"false aborts on good (target <= {args.alpha:.0%})", "0.0%", pct(fitted.good_aborted, fitted.good),
         pct(naive.good_aborted, naive.good)),
        ("experiments per hour (paper: 1.35x)", "1.00x", f"{fitted.cost_full / fitted.cost_with:.2f}x",
         f"{naive.cost_full / naive.cost_with:.2f}x"),
    ]
    for label, a, b, c in rows:
        print(f"{label:34}{a:>10}{b:>12}{c:>10}")
    print(f"trials replayed: {fitted.good} good, {fitted.bad} bad (power-law arm)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
