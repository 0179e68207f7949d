"""A run as the runs list shows it: the few fields of its fold a row needs, and the one rule that takes them.

Why it is a module of its own: the fields are read three ways (from the fold of a run a view has
open, from a checkpoint's header, which keeps them so the runs list never folds a big run again, and
from a fold of the log), and the reader and the checkpoint both need the rule; it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rrma.log.state import RunState, delta_sigma
from rrma.log.theorems import epoch, proof_progress


@dataclass
class ListedRun:
    """One run as the runs list shows it (one row; :func:`rrma.log.reader.read_summary` reads it)."""

    run_dir: Path
    name: str
    task: str
    status: str
    trials: int
    best: float | None
    baseline: float | None
    sigma: float | None
    direction: str
    started_ts: str
    last_ts: str
    error: str = ""  # why the run cannot be read at all ("" when it can)
    size: int = -1  # bytes of the log when summarised
    torn: int = 0  # lines that are not valid events (turn lines are checked only when a dashboard indexes them)
    reason: str = ""  # run.finished's reason (max_trials, stopped, interrupted, error...); "" while not finished
    # a proof run's progress against all of its theorems (rrma.log.theorems.ProofProgress.as_dict) at its last
    # event; None for any other run
    proofs: dict[str, Any] | None = None

    @property
    def delta_sigma(self) -> float | None:
        """The best's Δσ, as every view means it: against the baseline, in units of its σ (None: no baseline)."""
        return delta_sigma(self.best, self.baseline, self.sigma, self.direction)

    @property
    def best_vs_baseline(self) -> str:
        """``-0.0004556 vs -9.16e-05``: the best and the baseline (the Δσ is :attr:`delta_sigma`, shown apart)."""
        if self.best is None:
            return "-"
        text = f"{self.best:.4g}"
        if self.baseline is not None:
            text += f" vs {self.baseline:.4g}"
        return text


def summary_fields(state: RunState, torn: int) -> dict[str, Any]:
    """The :class:`ListedRun` fields a folded state gives (also kept in a checkpoint's header)."""
    best = state.best
    return {"task": state.task_name, "status": state.status, "trials": len(state.agent_trials()),
            "best": best.score if best else None, "baseline": state.baseline_mean, "sigma": state.sigma,
            "direction": state.direction, "started_ts": state.started_ts, "last_ts": state.last_ts, "torn": torn,
            "reason": state.finish_reason or "", "proofs": proofs_at_last_event(state)}


def proofs_at_last_event(state: RunState) -> dict[str, Any] | None:
    """A proof run's progress (rrma/log/theorems.py) with the current theorem's clock stopped at the run's last
    event (a row is kept in a checkpoint's header: it must not depend on when it was made); None for any other
    run (one that names no theorem: a pass over its trials, which have none)."""
    progress = proof_progress(state, epoch(state.last_ts))
    return progress.as_dict() if progress is not None else None
