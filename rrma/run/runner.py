"""Running and recording one trial: validate, snapshot, evaluate (or reuse a cached outcome), decide.

The :class:`TrialRunner` turns a proposal into ``trial.proposed`` -> ``trial.started`` ->
(``trial.progress``...) -> ``trial.finished`` [-> ``trial.promoted``], and measures the baseline the
same way. Its invariants:

* At most ``budget.max_concurrent`` trials evaluate at once (one slot each); a trial that gets its
  slot after a stop is recorded as ``aborted`` without running (the baseline always runs).
* Every outcome is recorded exactly once, with its delta over the best and the promotion floor; a
  would-be best waits for confirmation (``loop.confirm``) or a person's approval (``loop.hitl``)
  instead of being promoted here.
* Baseline and confirmation repeats are measurements: never stopped early, never served from or
  written to the outcome cache as an agent trial's result.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from typing import Any

from rrma.audit.auditor import AUDIT_ACTOR, Auditor
from rrma.audit.finding import Finding
from rrma.audit.rules import OutcomeView
from rrma.contain import disk
from rrma.contracts import TrialSummary
from rrma.exec.local import LEFTOVER_KEY, Executor, TrialJob, wait_outcome
from rrma.log.state import RunState
from rrma.run import seeds
from rrma.run.abort import make_monitor
from rrma.run.cache import OutcomeCache, cache_key
from rrma.run.context import clip_middle, summarize
from rrma.run.ledger import RunLedger
from rrma.run.orders import Orders
from rrma.run.promotion import Decision, decide, promote
from rrma.run.scheduler import BASELINE_PARENT, RunFailed, Scheduler
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Budget, Outcome, Proposal, Status
from rrma.workspace import EditRules, InvalidEdit, apply_edits, read_tree

BASELINE_AGENT = "baseline"
FEEDBACK_LOG_CHARS = 8000  # trial.finished keeps this much feedback: its head (the verdict) and its tail
EARLY_ABORT_KEY = "_rrma_early_abort"  # carries the loop's decision from evaluate() to trial.finished


def trial_budget(task: TaskConfig) -> Budget:
    """The limits every trial of the task runs under."""
    return Budget(
        seconds=task.budget.trial_seconds,
        memory_mb=task.budget.trial_memory_mb,
        max_processes=task.budget.trial_max_processes,
        max_output_bytes=task.budget.max_output_bytes,
        disk_mb=task.budget.trial_disk_mb,
        num_cpus=task.budget.num_cpus,
        num_gpus=task.budget.num_gpus,
    )


def decide_against_best(state: RunState, task: TaskConfig, delta: float, candidate: dict[str, Any]) -> Decision:
    """Whether ``delta`` over the current best is enough for a candidate with these metrics (rrma/run/promotion.py)."""
    best = state.trials.get(state.best_id or "")
    return decide(delta, candidate, best.metrics if best is not None else None, state.floor, task.noise)


def early_aborted(outcome: Outcome, decision: dict[str, Any]) -> Outcome:
    """The outcome of a trial the loop stopped early: the decision is the feedback (the oracle's log is kept)."""
    metrics = {**outcome.metrics, "failure": "early-abort", EARLY_ABORT_KEY: decision}
    feedback = ("Stopped early: " + decision["text"] + ". The progress so far said this trial cannot beat the "
                "current best, so its slot went to the next proposal.\n" + outcome.feedback)
    return outcome.model_copy(update={"metrics": metrics, "feedback": feedback})


class TrialRunner:
    """Records, evaluates and decides trials against one run's oracle, executor and cache."""

    def __init__(self, ledger: RunLedger, scheduler: Scheduler, orders: Orders, task: TaskConfig, *, seed: int,
                 oracle_identity: str, executor: Executor, cache: OutcomeCache, fs_guard: str,
                 trial_network: bool, auditor: Auditor | None = None,
                 setup_allowance: Callable[[], float] = lambda: 0.0) -> None:
        self.ledger = ledger
        # the oracle's own set-up beyond a trial's budget (Oracle.setup_allowance_s), asked at each trial: the wait
        # for an outcome covers it before an evaluation is abandoned
        self.setup_allowance = setup_allowance
        self.auditor = auditor  # loop.audit: findings as each trial finishes; a high one holds its promotion
        self.scheduler = scheduler
        self.orders = orders
        self.task = task
        self.seed = seed
        self.oracle_identity = oracle_identity
        self.executor = executor
        self.cache = cache
        self.fs_guard = fs_guard  # shipped with every job, so remote workers follow this run's choice
        self.trial_network = trial_network  # likewise (default off: a worker's own setting never widens it)
        self.disk_cap = disk.mode()  # likewise: RRMA_DISK_CAP, whether each workspace is its own capped file system
        self.budget = trial_budget(task)
        self.slots = threading.Semaphore(task.budget.max_concurrent)
        self.rules = EditRules(task.workspace.editable, task.workspace.readonly)

    # ------------------------------------------------------------------ the baseline

    def baseline(self) -> None:
        """Evaluate the unmodified workspace ``noise.baseline_repeats`` times; record mean, sigma and floor.

        Repeats a crashed run finished are kept. Raises :class:`RunFailed` when a repeat does not score.
        """
        ledger, store = self.ledger, self.ledger.store
        repeats = self.task.noise.baseline_repeats
        workspace = self.task.workspace_dir()
        files = read_tree(workspace) if workspace.is_dir() else {}
        manifest, manifest_blob = ledger.snapshot(files)
        key = cache_key(self.oracle_identity, manifest)
        proposal_blob = store.put_json_blob(Proposal(hypothesis="baseline").model_dump(mode="json"))
        threads = []
        for i in range(repeats):
            trial_id = f"base-{i}"
            rec = ledger.state.trials.get(trial_id)
            if rec is not None and rec.finished:
                continue
            seed = seeds.baseline_seed(self.seed, i)
            if rec is None:
                ledger.emit("trial.proposed", f"agent:{BASELINE_AGENT}", {
                    "trial_id": trial_id, "parent": None, "agent": BASELINE_AGENT,
                    "hypothesis": f"baseline (repeat {i + 1}/{repeats})", "proposal_blob": proposal_blob,
                    "manifest_blob": manifest_blob, "baseline": True, "repeat": i, "seed": seed, "cache_key": key,
                })
            ledger.remember_files(trial_id, files)
            thread = threading.Thread(target=self.scheduler.guarded(self.evaluate), name=f"baseline-{i}",
                                      args=(trial_id, Proposal(hypothesis="baseline"), files, seed, None, True))
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
        if self.scheduler.error is not None:
            return  # the loop records it
        ids = [f"base-{i}" for i in range(repeats)]
        recs = [ledger.state.trials[t] for t in ids]
        failed = [r for r in recs if r.status != Status.ok or r.score is None]
        if failed:
            first = failed[0]
            raise RunFailed(f"baseline {first.trial_id} ended {first.status}: {first.feedback[:2000]}")
        scores = [float(r.score) for r in recs if r.score is not None]
        mean = statistics.fmean(scores)
        sigma = statistics.stdev(scores) if len(scores) > 1 else 0.0
        floor = max(self.task.noise.min_sigmas * sigma, self.task.noise.min_delta)
        with ledger.lock:  # the promotion names the best of the state it is appended after
            ledger.emit("baseline.measured", "harness",
                        {"trial_ids": ids, "scores": scores, "mean": mean, "sigma": sigma, "floor": floor})
            promote(ledger.emit, ledger.state, BASELINE_PARENT, mean)
        self.cache.put(key, Outcome(status=Status.ok, score=mean, feedback=f"baseline: {mean:.6g} ± {sigma:.3g}"),
                       BASELINE_PARENT, store.run_id)

    def resume_interrupted(self) -> None:
        """Re-evaluate trials a crashed harness proposed but never finished (baseline repeats: baseline()).
        One recorded with no files was an edit the harness refused (killed before it wrote why): refused again."""
        ledger = self.ledger
        pending = [t for t in ledger.state.order if not ledger.state.trials[t].finished]
        for trial_id in pending:
            rec = ledger.state.trials[trial_id]
            if rec.baseline:
                continue  # baseline() re-runs missing repeats
            proposal = (Proposal.model_validate(ledger.store.get_json_blob(rec.proposal_blob)) if rec.proposal_blob
                        else Proposal())
            if rec.manifest_blob is None:
                config = next((a for a in self.task.agents if a.name == rec.agent), None)
                rules = self.rules
                if config is not None and config.editable:  # the agent's own editable, as when it proposed
                    rules = EditRules(config.editable, self.task.workspace.readonly)
                try:
                    apply_edits(ledger.files_of(rec.parent) if rec.parent else {}, proposal.edits, rules)
                    why = "the edit was refused when it was proposed"  # by rules the resumed run no longer has
                except InvalidEdit as exc:
                    why = str(exc)
                self.refuse(trial_id, why)
                continue
            self.evaluate(trial_id, proposal, ledger.files_of(trial_id), rec.seed)

    def refuse(self, trial_id: str, why: str) -> None:
        """Record a proposed trial's invalid edit (and audit it: an edit outside what the task allows)."""
        ledger = self.ledger
        with ledger.lock:
            ledger.emit("trial.finished", "harness", {"trial_id": trial_id, "status": Status.invalid.value,
                                                      "feedback": f"invalid edit: {why}"})
            if self.auditor is not None:  # an edit outside what the task allows (out_of_scope): nothing to hold
                for finding in self.auditor.check(ledger.state, trial_id):
                    ledger.emit("audit.finding", AUDIT_ACTOR, finding.data())

    # ------------------------------------------------------------------ one trial

    def run_trial(self, agent_name: str, proposal: Proposal, config: AgentConfig | None = None,
                  trial_id: str | None = None) -> str:
        """Validate, record, evaluate (or reuse a cached outcome) and decide one proposal; returns its trial id.

        The trial may end awaiting confirmation (the caller confirms it: confirm.py).
        """
        ledger = self.ledger
        actor = f"agent:{agent_name}"
        with ledger.lock:
            parent = self.scheduler.parent_for(proposal)
            trial_id = trial_id or self.scheduler.next_id()
            seed = seeds.trial_seed(self.seed, len(ledger.state.order))
            proposal_blob = ledger.store.put_json_blob(proposal.model_dump(mode="json"))
            base = {"trial_id": trial_id, "parent": parent, "agent": agent_name, "hypothesis": proposal.hypothesis,
                    "expected_effect": proposal.expected_effect, "proposal_blob": proposal_blob,
                    "theorem": proposal.theorem, "seed": seed, "meta": proposal.meta}
        rules = self.rules
        if config is not None and config.editable:
            rules = EditRules(config.editable, self.task.workspace.readonly)
        try:
            parent_files = ledger.files_of(parent) if parent is not None else {}
            if proposal.proof is not None and not proposal.edits:
                files = parent_files
            else:
                files = apply_edits(parent_files, proposal.edits, rules)
        except InvalidEdit as exc:
            edits = [{"path": str(e.path)[:300], "delete": e.delete} for e in proposal.edits]
            self.orders.emit_proposed(actor, {**base, "edits": edits})
            self.refuse(trial_id, str(exc))
            return trial_id
        manifest, manifest_blob = ledger.snapshot(files)
        key = cache_key(self.oracle_identity, manifest, proposal.proof, proposal.theorem)
        edits = [{"path": e.path, "blob": manifest.get(e.path), "delete": e.delete} for e in proposal.edits]
        self.orders.emit_proposed(actor, {**base, "edits": edits, "manifest_blob": manifest_blob, "cache_key": key})
        ledger.remember_files(trial_id, files)
        hit = self.cache.get(key)
        self.evaluate(trial_id, proposal, files, seed, hit)
        return trial_id

    def summary(self, trial_id: str) -> TrialSummary:
        """What the agent that proposed the trial is told about it."""
        with self.ledger.lock:
            return summarize(self.ledger.state, self.ledger.state.trials[trial_id])

    def evaluate(self, trial_id: str, proposal: Proposal, files: dict[str, str], seed: int,
                 hit: Any = None, baseline: bool = False) -> None:
        """Run a recorded trial on the executor (or take the cached outcome ``hit``) and record its outcome."""
        ledger = self.ledger
        run_id = ledger.store.run_id
        if hit is not None:
            outcome, source_trial, source_run = hit
            source = source_trial if source_run == run_id else f"{source_run}/{source_trial}"
            outcome = outcome.model_copy(update={
                "feedback": f"already tried: identical to {source} (no oracle time spent). Earlier result: "
                            f"{outcome.status.value}, score {outcome.score}. {outcome.feedback}",
                "seconds": 0.0,
            })
            self.record_outcome(trial_id, outcome, cached_from=source)
            return
        with self.slots:
            if self.scheduler.stopping() and not baseline:
                self.record_outcome(trial_id, Outcome(status=Status.aborted, feedback="not run: the run is stopping"))
                return
            with ledger.lock:
                state = ledger.state
                best = ledger.best_score()
                job = TrialJob(
                    trial_id=trial_id, files=files, proposal=proposal, budget=self.budget, seed=seed,
                    is_baseline=baseline, best_score=best, baseline_score=state.baseline_mean,
                    sigma=state.sigma, oracle_kind=self.task.oracle.kind, oracle_params=self.task.oracle.params,
                    metric=self.task.metric.name, direction=self.task.metric.direction, fs_guard=self.fs_guard,
                    network=self.trial_network, pass_env=tuple(self.task.oracle.pass_env),
                    keep_workspace=self.task.loop.keep_workspaces, disk_cap=self.disk_cap,
                )
                repeat = state.trials[trial_id].confirms is not None
            # baseline and confirmation repeats are never stopped early: they measure, they do not compete
            monitor = None if baseline or repeat else make_monitor(self.task.loop.early_abort,
                                                                   direction=self.task.metric.direction, best=best)
            decided: dict[str, Any] = {}
            ledger.emit("trial.started", "harness", {"trial_id": trial_id, "executor": self.executor.name})

            def progress(sample: dict[str, Any]) -> None:
                ledger.emit("trial.progress", "oracle", {"trial_id": trial_id, "sample": sample})
                decision = monitor.observe(sample) if monitor is not None and not decided else None
                if decision is not None:
                    decided.update(decision)
                    abort = getattr(self.executor, "abort", None)
                    if abort is None or not abort(trial_id, "early abort: " + decision["text"]):
                        decided["not_stopped"] = "the executor could not stop the trial"

            outcome = wait_outcome(self.executor.submit(job, progress), self.budget, self.setup_allowance())
            if decided and outcome.status == Status.aborted and not self.scheduler.stopping():
                outcome = early_aborted(outcome, decided)
        leftovers = outcome.metrics.pop(LEFTOVER_KEY, None) or []  # the executor's, never the outcome's (nor cached)
        self.record_outcome(trial_id, outcome)
        for leftover in leftovers:  # what the trial left on disk that the harness could not remove
            ledger.emit("note", "harness", {"text": f"trial {trial_id}: {clip_middle(str(leftover), 2000)}"})
        with ledger.lock:
            rec = ledger.state.trials.get(trial_id)
            key = rec.cache_key if rec is not None else None
        if key is not None and not baseline:
            self.cache.put(key, outcome, trial_id, run_id)

    def record_outcome(self, trial_id: str, outcome: Outcome, cached_from: str | None = None) -> None:
        """``trial.finished`` with the delta over the best and the floor; ``trial.promoted`` when it is the new best."""
        ledger = self.ledger
        log_blob = ledger.store.put_blob(outcome.log) if outcome.log else None
        with ledger.lock:
            state = ledger.state
            rec = state.trials[trial_id]
            best_score = ledger.best_score()
            delta = delta_sigma = floor = None
            floor_source: str | None = None
            promote_now = False
            metrics = dict(outcome.metrics)
            early = metrics.pop(EARLY_ABORT_KEY, None)
            if outcome.scored and best_score is not None and not rec.baseline and rec.confirms is None:
                delta = self.task.better(float(outcome.score), best_score)  # type: ignore[arg-type]
                sigma = state.sigma or 0.0
                delta_sigma = delta / sigma if sigma > 0 else None
                verdict = decide_against_best(state, self.task, delta, metrics)
                floor, floor_source, promote_now = verdict.floor, verdict.label, verdict.promote
                if promote_now and self.task.loop.confirm > 0:
                    metrics["awaiting_confirmation"] = True  # confirm.py re-evaluates it, then decides
                    promote_now = False
                elif promote_now and self.task.loop.hitl:
                    metrics["awaiting_review"] = True
                    promote_now = False
            findings = self._audit(rec, outcome, delta, floor, promote_now or bool(metrics.get("awaiting_confirmation")))
            if any(f.held for f in findings):
                metrics["awaiting_review"] = metrics["held_by_audit"] = True  # a person's approval promotes it
                metrics.pop("awaiting_confirmation", None)
                promote_now = False
            ledger.emit("trial.finished", "oracle" if cached_from is None else "harness", {
                "trial_id": trial_id, "status": outcome.status.value, "score": outcome.score, "metrics": metrics,
                "feedback": clip_middle(outcome.feedback, FEEDBACK_LOG_CHARS), "log_blob": log_blob,
                "seconds": round(outcome.seconds, 4), "cached": cached_from is not None, "cached_from": cached_from,
                "delta": delta, "delta_sigma": delta_sigma, "floor": floor, "floor_source": floor_source,
                "early_abort": early,
            })
            for finding in findings:
                ledger.emit("audit.finding", AUDIT_ACTOR, finding.data())
            if promote_now and outcome.score is not None:
                promote(ledger.emit, ledger.state, trial_id, outcome.score)

    def _audit(self, rec: Any, outcome: Outcome, delta: float | None, floor: float | None,
               would_promote: bool) -> list[Finding]:
        """The auditor's findings on an agent trial about to be recorded; under ``loop.audit: hold`` a ``high``
        finding on a would-be best holds it (``held``) until a person reviews it."""
        if self.auditor is None or rec.baseline or rec.confirms is not None:
            return []
        view = OutcomeView(outcome.status.value, outcome.score, delta, floor, would_promote)
        findings = self.auditor.check(self.ledger.state, rec.trial_id, view)
        if would_promote and self.task.loop.audit == "hold":
            findings = [f.holding() if f.severity == "high" else f for f in findings]
        return findings
