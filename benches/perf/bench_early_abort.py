"""Early abort replayed on recorded real loss curves: compute saved, false aborts, throughput.

    python benches/perf/bench_early_abort.py [--orders 400] [--seed 0] [--sprt-trials 2000]

The curves are real CPU runs of benches/autoresearch/workspace/train.py (see
tests/fixtures/loss_curves/README.md): good and bad hyperparameters, each with its progress
lines (training seconds and the wall-clock second each line appeared), its final val_bpb and
the wall-clock seconds of the whole process.

Each *order* simulates one research run, as the loop does it live: the baseline repeats set the
first best (their mean val_bpb) and the train/val gap; the other runs arrive as trials in a random
order; each trial's progress lines are fed, as the autoresearch oracle sends them (``frac`` and
``score_est``: the training loss on the val_bpb scale), to the loop's own monitor
(:class:`rrma.run.abort.TrialMonitor`) against the best so far; a trial that is not stopped finishes
and may become the best.

A trial is *good* when its real final val_bpb beats the best at its turn, *bad* otherwise.
Printed figures, each against the no-abort baseline of the same replay, for three rules:

* ``loop``: ``loop.early_abort`` of benches/autoresearch/task.yaml (what ships: looks at 10-80%
  of the budget, misfit allowance 0.72 bits = 0.5 nats);
* ``before``: the rule the autoresearch oracle used before (looks at 30-80%, misfit 1.0 nats);
* ``naive``: abort when the *current* loss is above the threshold at a look (no extrapolation).

Figures: bad trials aborted (the paper: 38%) and the share of their compute saved; false-abort
rate on good trials (should stay at or under alpha); experiments per hour = total cost without
early abort / total cost with it (the paper: 1.35x). An aborted trial costs the wall-clock seconds
up to the progress line of the aborting look; a finished one its whole process.

Both power-law settings were chosen on these same 16 curves, so the false-abort rates are
in-sample; the alpha guarantee holds only as far as the misfit allowance bounds how far a real
curve ends below its forecast.

Second part, the SPRT rule on item streams (``items``/``hits`` samples, e.g. the gsm8k-prompt
oracle). No stream is recorded, so it is *simulated*: trials with a true accuracy drawn around the
best, answering 500 questions in random order; reported are the bad trials stopped, the questions
saved and the false aborts (trials whose final score would have beaten the best).
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

from oracle.autoresearch import LN2, GapTracker, final_train_loss  # noqa: E402
from rrma.powerlaw import EarlyAbortRule  # noqa: E402
from rrma.run.abort import TrialMonitor  # noqa: E402
from rrma.task import EarlyAbortConfig, load_task  # noqa: E402

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


def naive_abort(looks: tuple[float, ...], curve: Curve, threshold: float) -> float | None:
    """The look at which the current (last-window) loss is above the threshold, else None."""
    for at in looks:
        seen = curve.loss[curve.t <= at]
        if seen.size and float(seen[-3:].mean()) > threshold:
            return at
    return None


def monitor_abort(config: EarlyAbortConfig, curve: Curve, best_bpb: float, gap: float) -> float | None:
    """Feed the curve's progress lines to the loop's monitor, as the oracle sends them; the look it stops at."""
    monitor = TrialMonitor(config, direction="minimize", best=best_bpb)
    for t, loss in zip(curve.t, curve.loss, strict=True):
        decision = monitor.observe({"frac": float(t), "score_est": float(loss) / LN2 + gap})
        if decision is not None:
            return float(decision["at"])
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


def replay(baseline: list[Curve], others: list[Curve], rules: dict[str, EarlyAbortConfig | None], orders: int,
           seed: int) -> dict[str, Tally]:
    """Each rule (None: the naive one) over the same random orders."""
    rng = random.Random(seed)
    tallies = {name: Tally() for name in rules}
    naive_looks = tuple(next(c for c in rules.values() if c is not None).looks)
    for _ in range(orders):
        order = others[:]
        rng.shuffle(order)
        for name, config in rules.items():
            tally = tallies[name]
            gaps = GapTracker()
            for b in baseline:
                gaps.add(b.val_bpb, b.final_loss)
            best = statistics.fmean(b.val_bpb for b in baseline)
            for curve in order:
                if config is None:
                    aborted_at = naive_abort(naive_looks, curve, gaps.loss_threshold(best))
                else:
                    aborted_at = monitor_abort(config, curve, best, gaps.gap())
                good = curve.val_bpb < best
                tally.add(good, aborted_at, curve)
                if aborted_at is None:
                    gaps.add(curve.val_bpb, curve.final_loss)
                    best = min(best, curve.val_bpb)
    return tallies


def sprt_replay(config: EarlyAbortConfig, trials: int, items: int, seed: int) -> dict[str, float]:
    """Simulated gsm8k-style trials: accuracy p ~ U(best - 0.15, best + 0.05), items in random order."""
    rng = random.Random(seed)
    best = 0.6
    every = max(1, items // 50)  # the gsm8k-prompt oracle sends about 50 samples a trial
    good = bad = good_aborted = bad_aborted = 0
    answered_bad = full_bad = answered = 0
    for _ in range(trials):
        p = rng.uniform(best - 0.15, best + 0.05)
        outcomes = [rng.random() < p for _ in range(items)]
        final = sum(outcomes) / items
        monitor = TrialMonitor(config, direction="maximize", best=best)
        stopped_at = items
        hits = 0
        for n, ok in enumerate(outcomes, start=1):
            hits += ok
            if n % every == 0 and monitor.observe({"items": n, "hits": hits, "of": items}) is not None:
                stopped_at = n
                break
        aborted = stopped_at < items
        answered += stopped_at
        if final > best:
            good += 1
            good_aborted += aborted
        else:
            bad += 1
            bad_aborted += aborted
            answered_bad += stopped_at
            full_bad += items
    return {"good": good, "bad": bad, "false_aborts": good_aborted / max(good, 1), "bad_aborted": bad_aborted / max(bad, 1),
            "saved_on_bad": 1 - answered_bad / max(full_bad, 1), "speedup": trials * items / max(answered, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=400, help="random research orders replayed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    parser.add_argument("--sprt-trials", type=int, default=2000, help="simulated item-stream trials (0: skip)")
    args = parser.parse_args(argv)
    baseline, others = load_curves(args.fixtures)
    if len(baseline) < 2 or len(others) < 3:
        print(f"need >= 2 baseline and >= 3 other recorded curves in {args.fixtures}; found {len(baseline)} and {len(others)}")
        return 2
    shipped = load_task(ROOT / "benches" / "autoresearch" / "task.yaml").loop.early_abort
    before_rule = EarlyAbortRule(looks=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8), alpha=0.05, misfit=1.0)
    before = EarlyAbortConfig(rule="power-law", looks=list(before_rule.looks), alpha=before_rule.alpha,
                              misfit=before_rule.misfit / LN2)  # 1.0 nats on the bits scale
    tallies = replay(baseline, others, {"loop": shipped, "before": before, "naive": None}, args.orders, args.seed)
    base_mean = statistics.fmean(b.val_bpb for b in baseline)
    print(f"recorded curves: {len(baseline)} baseline repeats (val_bpb {base_mean:.4f} ± "
          f"{statistics.stdev(b.val_bpb for b in baseline):.4f}), {len(others)} trials; {args.orders} random orders")
    for name, cfg in (("loop", shipped), ("before", before)):
        print(f"{name:7} rule: power-law, looks at {', '.join(f'{x:.0%}' for x in cfg.looks)}, alpha {cfg.alpha:g} "
              f"(z = {EarlyAbortRule(looks=tuple(cfg.looks), alpha=cfg.alpha).z:.2f} per look), misfit "
              f"{cfg.misfit:.3g} bits x (1 - t)^2")
    print(f"{'':36}{'no abort':>10}{'loop':>10}{'before':>10}{'naive':>10}")

    def pct(num: float, den: float) -> str:
        return "-" if den == 0 else f"{100 * num / den:.1f}%"

    t = tallies
    rows = [
        ("bad trials aborted (paper: 38%)", "0.0%", *(pct(t[k].bad_aborted, t[k].bad) for k in ("loop", "before", "naive"))),
        ("compute saved on bad trials", "0.0%",
         *(pct(t[k].bad_cost_saved, t[k].bad_cost_full) for k in ("loop", "before", "naive"))),
        ("false aborts on good (target <= 5%)", "0.0%",
         *(pct(t[k].good_aborted, t[k].good) for k in ("loop", "before", "naive"))),
        ("experiments per hour (paper: 1.35x)", "1.00x",
         *(f"{t[k].cost_full / t[k].cost_with:.2f}x" for k in ("loop", "before", "naive"))),
    ]
    for label, *cells in rows:
        print(f"{label:36}" + "".join(f"{c:>10}" for c in cells))
    print(f"trials replayed: {t['loop'].good} good, {t['loop'].bad} bad (loop arm); loop vs before: "
          f"{(t['loop'].cost_full / t['loop'].cost_with) / (t['before'].cost_full / t['before'].cost_with):.2f}x "
          "experiments per hour")
    if args.sprt_trials > 0:
        sprt = EarlyAbortConfig(rule="sprt", alpha=0.05, sprt_delta=0.05, sprt_beta=0.2)
        r = sprt_replay(sprt, args.sprt_trials, 500, args.seed)
        print(f"SPRT (simulated: {args.sprt_trials} trials of 500 questions, accuracy ~ U(0.45, 0.65) against a best of "
              f"0.60; alpha 0.05, delta 0.05, beta 0.2): bad trials aborted {100 * r['bad_aborted']:.1f}%, questions "
              f"saved on bad trials {100 * r['saved_on_bad']:.1f}%, false aborts on good {100 * r['false_aborts']:.1f}% "
              f"({int(r['good'])} good, {int(r['bad'])} bad), experiments per hour {r['speedup']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
