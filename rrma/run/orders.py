"""People's orders to a live run: stop, pause, continue, steer notes, and approvals (``loop.hitl``, audit holds).

Orders arrive through the log like reviews (rrma/log/control.py): the agent phase folds the log every
``POLL_SECONDS`` and :meth:`Orders.acknowledge` writes a ``note`` for each order once it is in force.

The invariant this module keeps: **no ``trial.proposed`` follows a pause's acknowledging note in the
log until a ``continue``.** It holds by lock order, not by timing: :meth:`Orders.emit_proposed` folds
the log, checks the pause and appends the proposal while holding the ledger's lock, and the note is
appended under the same lock only after a fold that saw the pause. So either the proposal's append
comes first (it was in hand before the pause was in force, and the note follows it), or the check
sees the pause and the proposal waits for the ``continue``. Releasing the lock anywhere between the
fold and the append breaks this (tests/run/test_run_units.py shows how).
"""

from __future__ import annotations

import time
from typing import Any

from rrma.log.chain import ChainCheck
from rrma.run.ledger import RunLedger
from rrma.run.promotion import promote_if_approved
from rrma.run.scheduler import POLL_SECONDS, Scheduler
from rrma.task import TaskConfig


class Orders:
    """Acknowledges orders, holds proposals while paused, delivers steer notes, promotes approved trials."""

    def __init__(self, ledger: RunLedger, scheduler: Scheduler, task: TaskConfig) -> None:
        self.ledger = ledger
        self.scheduler = scheduler
        self.task = task
        self.acked = ledger.state.driver_seq  # orders up to here were for an earlier driver
        self.steered: dict[str, int] = {}  # agent -> seq of the last steer note delivered to it
        # the approvals' chain check, kept: each re-verifies only the lines since the last (under the lock)
        self.chain = ChainCheck(ledger.store)

    def acknowledge(self) -> None:
        """A ``note`` for each order of the current driver's session once it is in force."""
        ledger = self.ledger
        with ledger.lock:
            state = ledger.state
            for order in [o for o in state.controls if o["seq"] > self.acked]:
                self.acked = order["seq"]
                said = f"{order['action']} by {order['by']} (seq {order['seq']})"
                if order["action"] == "stop":
                    text = f"{said}: no new trials; running trials finish, then the run ends as stopped"
                elif order["action"] == "pause":
                    text = f"{said}: paused, no new proposals until continue; running trials finish"
                else:
                    text = f"{said}: proposals go on" if not state.paused else f"{said}: still paused"
                if order["reason"]:
                    text += f" (reason: {order['reason']})"
                ledger.emit("note", "harness", {"text": text})

    def emit_proposed(self, actor: str, data: dict[str, Any]) -> None:
        """Record ``trial.proposed``, never while a pause is in force (a proposal in hand waits for continue).

        The fold, the check and the append happen under one hold of the lock; a pause's note is
        written under the same lock, so no proposal follows that note in the log until the pause is lifted.
        """
        ledger = self.ledger
        while True:
            with ledger.lock:
                ledger.sync()
                if not ledger.state.paused or self.scheduler.stopping() or self.scheduler.reason is not None:
                    ledger.emit("trial.proposed", actor, data)
                    return
            time.sleep(POLL_SECONDS / 2)

    def steers_for(self, agent_name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(every steer note for the agent, those not delivered to it yet); the fresh ones count as delivered."""
        with self.ledger.lock:
            notes = self.ledger.state.steers_for(agent_name)
            fresh = [n for n in notes if n["seq"] > self.steered.get(agent_name, -1)]
            if notes:
                self.steered[agent_name] = notes[-1]["seq"]
            return notes, fresh

    def check_reviews(self) -> None:
        """Promote each trial awaiting review (``loop.hitl``, or held by a ``high`` audit finding) that a person approved."""
        ledger = self.ledger
        with ledger.lock:
            state = ledger.state
            if not self.task.loop.hitl and not any(f["held"] for f in state.findings):
                return
            for trial_id in list(state.order):
                rec = state.trials[trial_id]
                if rec.metrics.get("awaiting_review") and not rec.promoted and rec.review_status == "approved":
                    promote_if_approved(ledger.store, state, self.task, trial_id, ledger.emit, self.chain)
