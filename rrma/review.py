"""Human review: approve, reject or flag a trial; the hitl gate's promotion rule.

A review is an event like any other (``review``, actor ``human:<name>``), so it is in the chain,
the export and every reader. With the task's ``loop.hitl`` gate on, the loop marks a would-be
new best ``awaiting_review`` instead of promoting it; :func:`record_review` promotes it when a
person approves and it still beats the current best by the noise floor. Both the TUI and the
loop call through here, so the rule lives in one place.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from typing import Any

from rrma.state import RunState
from rrma.store import RunStore
from rrma.task import TaskConfig

DECISIONS = ("approve", "reject", "flag")


class ReviewError(ValueError):
    """The review names an unknown trial or decision."""


def default_reviewer() -> str:
    """The reviewer's name: $RRMA_REVIEWER, else $USER, else the login name."""
    name = os.environ.get("RRMA_REVIEWER") or os.environ.get("USER")
    if not name:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "reviewer"
    return name


def promote_if_approved(store: RunStore, state: RunState, task: TaskConfig | None, trial_id: str,
                        emit: Callable[[str, str, dict[str, Any]], Any] | None = None) -> bool:
    """Promote an approved trial that awaits review if it still beats the best; True if promoted."""
    rec = state.trials.get(trial_id)
    if rec is None or rec.promoted or not rec.metrics.get("awaiting_review") or rec.score is None:
        return False
    if rec.review_status != "approved":
        return False
    best_score = state.best_history[-1][1] if state.best_history else None
    if best_score is not None:
        delta = state.better(rec.score, best_score)
        if delta <= 0 or delta < (state.floor or 0.0):
            return False
    else:
        delta = None
    sigma = state.sigma or 0.0
    approver = rec.reviews[-1]["reviewer"]
    data = {"trial_id": trial_id, "score": rec.score, "previous_best": state.best_id, "previous_score": best_score,
            "delta": delta, "delta_sigma": (delta / sigma) if (delta is not None and sigma > 0) else None,
            "approved_by": approver}
    if emit is not None:
        emit("trial.promoted", f"human:{approver}", data)
    else:
        store.append("trial.promoted", f"human:{approver}", data)
    return True


def record_review(store: RunStore, trial_id: str, decision: str, reviewer: str | None = None, note: str = "") -> Any:
    """Append a review event (and, for an approved trial awaiting review, its promotion)."""
    if decision not in DECISIONS:
        raise ReviewError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    state = RunState.fold(store.scan().events)
    if trial_id not in state.trials:
        raise ReviewError(f"{store.dir}: no trial {trial_id!r} in this run")
    reviewer = reviewer or default_reviewer()
    event = store.append("review", f"human:{reviewer}",
                         {"trial_id": trial_id, "decision": decision, "reviewer": reviewer, "note": note})
    state.apply(event)
    if decision == "approve" and state.finish_reason is not None:
        # the loop is gone: promote here (a live loop does it itself on its next sync)
        promote_if_approved(store, state, None, trial_id)
    return event
