"""Confirmation repeats (``loop.confirm: k``): a would-be new best is measured again before it is promoted.

A trial that beats the best by the floor is recorded ``awaiting_confirmation`` (runner.py); it is then
re-evaluated k times with fresh seeds (trials of their own, ``t0007-r1``..., ``confirms`` set) and
promoted, with the mean of those repeats as its score, only if that mean still clears the floor.
The original's own score was selected for being high (the winner's curse), so it is never part of
the mean. ``trial.confirmed`` records the verdict either way. Invariants: a repeat already finished
(not aborted) is never run again, so a resumed run finishes a confirmation without re-measuring;
a confirmation whose repeats were stopped because the run is ending gets no verdict (the resume
gives it one). :func:`confirmation_verdict` is the decision alone, a pure function of the state.
"""

from __future__ import annotations

import statistics
import threading
from typing import Any

from rrma.log.state import RunState
from rrma.run import seeds
from rrma.run.ledger import RunLedger
from rrma.run.promotion import combine, promote
from rrma.run.runner import TrialRunner, decide_against_best
from rrma.run.scheduler import Scheduler
from rrma.task import TaskConfig
from rrma.trial import Proposal, Status


def confirmation_verdict(state: RunState, task: TaskConfig, trial_id: str,
                         repeats: list[Any]) -> tuple[dict[str, Any], float | None]:
    """The ``trial.confirmed`` data for ``trial_id`` given its finished ``repeats`` (trial records), and the
    score to promote it at now (the repeats' mean: confirmed, and no person's approval is awaited), else None."""
    scores = [float(r.score) if r.status == Status.ok.value and r.score is not None else None for r in repeats]
    scored = [x for x in scores if x is not None]
    best_id = state.best_id
    best_score = state.best_history[-1][1] if state.best_history else None
    mean = statistics.fmean(scored) if scored else None
    delta = task.better(mean, best_score) if mean is not None and best_score is not None else None
    # the repeats' own items (averaged) face the best: never the original's, selected for being high
    verdict = decide_against_best(state, task, delta if delta is not None else 0.0, combine([r.metrics for r in repeats]))
    floor, source = verdict.floor, verdict.label
    failed = [r.trial_id for r, x in zip(repeats, scores, strict=True) if x is None]
    if failed:
        confirmed, reason = False, f"repeat(s) {', '.join(failed)} did not score"
    elif delta is None or mean is None:
        confirmed, reason = False, "nothing to compare with"
    elif verdict.promote:
        confirmed, reason = True, ""
    else:
        confirmed = False
        reason = (f"the mean of {len(scored)} repeats ({mean:.6g}) beats the best {best_id} ({best_score:.6g}) "
                  f"by {delta:.3g}: not enough (floor {floor:.3g}, {source})")
    hitl = confirmed and task.loop.hitl
    confirmed_data = {
        "trial_id": trial_id, "repeats": [r.trial_id for r in repeats], "scores": scores, "mean": mean,
        "best_trial": best_id, "best_score": best_score, "delta": delta, "floor": floor, "floor_source": source,
        "confirmed": confirmed, "awaiting_review": hitl, "reason": reason,
    }
    return confirmed_data, (mean if confirmed and not hitl else None)


class Confirmation:
    """Runs the confirmation repeats of a would-be best and records the verdict."""

    def __init__(self, ledger: RunLedger, scheduler: Scheduler, runner: TrialRunner, task: TaskConfig, *,
                 seed: int) -> None:
        self.ledger = ledger
        self.scheduler = scheduler
        self.runner = runner
        self.task = task
        self.seed = seed

    def confirm(self, trial_id: str) -> None:
        """Re-evaluate a would-be new best ``loop.confirm`` times with fresh seeds, then decide.

        The repeats are trials of their own (``t0007-r1``...; ``confirms`` names the original), run
        from the same files with new seeds and never from the outcome cache. A repeat stopped because
        the run is stopping leaves the verdict to the resume.
        """
        ledger = self.ledger
        k = self.task.loop.confirm
        with ledger.lock:
            rec = ledger.state.trials[trial_id]
            ids = [f"{trial_id}-r{i + 1}" for i in range(k)]
            proposal_blob = rec.proposal_blob
        proposal = (Proposal.model_validate(ledger.store.get_json_blob(proposal_blob)) if proposal_blob
                    else Proposal(hypothesis=rec.hypothesis))
        files = ledger.files_of(trial_id)
        threads = []
        for i, rid in enumerate(ids):
            with ledger.lock:
                existing = ledger.state.trials.get(rid)
                if existing is not None and existing.finished and existing.status != Status.aborted.value:
                    continue
                # fresh and reproducible: from the original's place in the run, never a seed it already had
                seed = seeds.confirmation_seed(self.seed, ledger.state.order.index(trial_id), i)
                if existing is None:
                    ledger.emit("trial.proposed", "harness", {
                        "trial_id": rid, "parent": rec.parent, "agent": rec.agent,
                        "hypothesis": f"confirm {trial_id} (repeat {i + 1}/{k}, fresh seed): {rec.hypothesis}"[:2000],
                        "proposal_blob": proposal_blob or ledger.store.put_json_blob(proposal.model_dump(mode="json")),
                        "manifest_blob": rec.manifest_blob, "edits": [], "theorem": rec.theorem, "seed": seed,
                        "repeat": i + 1, "confirms": trial_id,
                    })
                else:
                    seed = existing.seed
                ledger.remember_files(rid, files)
            thread = threading.Thread(target=self.scheduler.guarded(self.runner.evaluate), name=f"confirm-{rid}",
                                      args=(rid, proposal, files, seed))
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
        with ledger.lock:
            repeats = [ledger.state.trials[rid] for rid in ids]
            if self.scheduler.error is not None or (self.scheduler.stopping()
                                                    and any(r.status == Status.aborted.value for r in repeats)):
                return  # the run is ending: `rrma-tui resume` finishes the confirmation
            self.decide(trial_id, repeats)

    def decide(self, trial_id: str, repeats: list[Any]) -> None:
        """Record the verdict on ``trial_id`` from its finished repeats (and promote it when confirmed)."""
        with self.ledger.lock:
            confirmed, score = confirmation_verdict(self.ledger.state, self.task, trial_id, repeats)
            self.ledger.emit("trial.confirmed", "harness", confirmed)
            if score is not None:
                promote(self.ledger.emit, self.ledger.state, trial_id, score, confirmed_by=confirmed["repeats"])

    def resume(self) -> None:
        """Finish the confirmations a stopped or crashed run left without a verdict."""
        ledger = self.ledger
        for trial_id in list(ledger.state.order):
            if self.scheduler.reason is not None or self.scheduler.stopping():
                return
            if ledger.state.trials[trial_id].awaiting_confirmation:
                self.confirm(trial_id)
