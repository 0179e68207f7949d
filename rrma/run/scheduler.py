"""When the loop may start another trial, from which parent, under which id, and why it ends.

The :class:`Scheduler` owns the trial budget and the run's end reason. Its invariants:

* ``budget.max_trials`` is never exceeded: an agent takes a trial from the budget (:meth:`reserve`,
  under the ledger's lock) before it proposes, and gives it back (:meth:`give_back`) when it ends up
  proposing nothing; proposals already in the log count (a resumed run goes on from there).
* While a pause is in force no trial is reserved; a paused run still ends at ``max_wall_seconds``
  or on a stop.
* The first reason set is the run's reason (:attr:`reason`); the first unexpected exception is the
  run's error (:attr:`error`), and once either is set no new trial starts.
* Trial ids are never handed out twice, even before their ``trial.proposed`` is in the log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rrma.errors import error_line
from rrma.run.ledger import RunLedger
from rrma.task import TaskConfig
from rrma.trial import Proposal, Status

POLL_SECONDS = 0.2  # how often the agent phase folds the log (reviews, orders) and a paused agent looks again
BASELINE_PARENT = "base-0"


class RunFailed(Exception):
    """The run cannot go on (its baseline failed, its oracle cannot start)."""


class Scheduler:
    """The trial budget, stop reasons, parent choice and trial ids of one driver's session."""

    def __init__(self, ledger: RunLedger, task: TaskConfig, stop: threading.Event | None = None) -> None:
        self.ledger = ledger
        self.task = task
        self.stop = stop or threading.Event()
        self.started = time.monotonic()
        self.reason: str | None = None
        self.error: str | None = None  # first unexpected exception (one line): the run ends as "error"
        self.reserved = 0  # trials taken from the budget (set when the agent phase starts)
        self.issued: set[str] = set()  # trial ids handed out

    # ------------------------------------------------------------------ why the run ends

    def stopping(self) -> bool:
        """Ctrl-C or a stop order: no new trials, queued ones are not run."""
        return self.stop.is_set() or self.ledger.state.stop_request is not None

    def stop_reason(self) -> str | None:
        """The reason the run must end now, if any (checked before every reservation)."""
        state = self.ledger.state
        if self.stop.is_set():
            return "interrupted"
        if state.stop_request is not None:
            return "stopped"
        if time.monotonic() - self.started > self.task.budget.max_wall_seconds:
            return "max_wall_time"
        target = self.task.metric.target
        best = self.ledger.best_score()
        if target is not None and best is not None and self.task.better(best, target) >= 0:
            return "target"
        return None

    def end_reason(self) -> str:
        """Why the agent phase ended once every agent is done (the reason already set wins)."""
        with self.ledger.lock:
            if self.reason is None:
                proposed = len(self.ledger.state.agent_trials())
                self.reason = self.stop_reason() or ("max_trials" if proposed >= self.task.budget.max_trials
                                                     else "agents_exhausted")
            return self.reason

    def fail(self, exc: BaseException) -> None:
        """Record an unexpected exception (the first one's message is kept); no new trials start."""
        with self.ledger.lock:
            if self.error is None:
                self.error = error_line(exc)
            self.reason = "error"

    def guarded(self, target: Callable[..., Any]) -> Callable[..., None]:
        """``target`` for a worker thread: an exception there ends the run as "error" (not a stray traceback)."""
        def call(*args: Any) -> None:
            try:
                target(*args)
            except Exception as exc:
                self.fail(exc)
        return call

    # ------------------------------------------------------------------ the budget

    def start_agent_phase(self) -> None:
        """Proposals already in the log count against ``max_trials``."""
        self.reserved = len(self.ledger.state.agent_trials())

    def reserve(self) -> bool:
        """Take one trial from the budget (under the lock), or set the stop reason; waits while paused."""
        ledger = self.ledger
        while True:
            with ledger.lock:
                if self.reason is not None:
                    return False
                reason = self.stop_reason()  # a paused run still ends at max_wall_seconds or on a stop
                if reason is not None:
                    self.reason = reason
                    return False
                if not ledger.state.paused:
                    if self.reserved < self.task.budget.max_trials:
                        self.reserved += 1
                        return True
                    if len(ledger.state.agent_trials()) >= self.task.budget.max_trials:
                        return False
                    # the budget is held by proposals still in the works: one that fails gives its trial back

            time.sleep(POLL_SECONDS / 2)  # the agent phase's thread folds the log meanwhile

    def give_back(self) -> None:
        """Return a reserved trial to the budget (its agent proposed nothing)."""
        with self.ledger.lock:
            self.reserved -= 1

    def run_agents(self, workers: Sequence[tuple[str, Callable[[], None]]], each_round: Callable[[], None]) -> str:
        """The agent phase: one thread per ``(name, worker)``; every ``POLL_SECONDS`` the log is folded and
        ``each_round`` runs (orders, reviews) until every worker is done. Returns the run's reason."""
        self.start_agent_phase()
        threads = [threading.Thread(target=work, name=f"agent-{name}", daemon=True) for name, work in workers]
        for thread in threads:
            thread.start()
        while True:
            alive = [t for t in threads if t.is_alive()]
            if not alive:
                break
            alive[0].join(timeout=POLL_SECONDS)  # one wait per round: orders are seen within POLL_SECONDS
            self.ledger.sync()  # pick up reviews and orders written by other processes
            each_round()
        return self.end_reason()

    # ------------------------------------------------------------------ parents and ids

    def default_parent(self) -> str | None:
        """The parent of the next trial: the current best, or the baseline under ``independent``; none
        under ``per-theorem`` (a proof is the whole proposal: it builds on no trial's files)."""
        state = self.ledger.state
        if self.task.loop.policy == "per-theorem":
            return None
        if self.task.loop.policy == "independent" or state.best_id is None:
            return BASELINE_PARENT
        return state.best_id

    def parent_for(self, proposal: Proposal) -> str | None:
        """The parent a proposal builds on: under ``tree`` the one it names (a scored trial with files)."""
        with self.ledger.lock:
            parent = self.default_parent()
            if self.task.loop.policy == "tree" and proposal.parent:
                rec = self.ledger.state.trials.get(proposal.parent)
                if rec is not None and rec.status == Status.ok and rec.manifest_blob:
                    parent = proposal.parent
            return parent

    def next_id(self) -> str:
        """A fresh trial id; ids handed out but not yet in the log are remembered (no duplicates)."""
        with self.ledger.lock:
            state = self.ledger.state
            n = state.agent_trial_count + 1
            while f"t{n:04d}" in state.trials or f"t{n:04d}" in self.issued:
                n += 1
            trial_id = f"t{n:04d}"
            self.issued.add(trial_id)
            return trial_id
