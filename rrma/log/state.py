"""Fold a run's events into its current state, and render the derived views from it.

:class:`RunState` is a pure function of the event sequence: ``RunState.fold(events)`` gives the
same state whether the events come from a full scan, a live tail, or a resumed run. The TUI,
the loop, ``verify`` and the export all read state through here, so they agree.

``blackboard.md`` and ``results.tsv`` are *derived views* (rrma/log/view_files.py): :func:`render_blackboard` and
:func:`render_results` regenerate them from state; they are never read back as a source.

The fold does not count every event it is given. It refuses (``RunState.refused``, and ``verify``
reports each as an error) what no run of rrma writes: a ``trial.finished`` for a trial never
proposed or already finished (and not started again), by an actor other than the oracle or the
harness, with a status that is not a trial status or a score that is not finite
(:func:`refused_outcome`); a ``trial.started`` of a finished trial (only a stopped, ``aborted``
trial is run again); a ``trial.promoted`` that is not one rrma writes: by an actor other than the harness or
a person, of a trial without a counted scored outcome, at a score other than the one the counted events
give it, past the review gate, or not beating the best it names (:func:`refused_promotion`); a
``baseline.measured`` or ``trial.confirmed`` whose figures are not those of the counted repeats it names
(:func:`refused_baseline`, :func:`refused_confirmation`: they give the scores a promotion may claim). A ``review`` stays
in the history (``RunState.reviews``, with ``ignored`` saying why) but is not part of its trial's
decision in force when its ``supersedes`` names no earlier counted review of that trial, or when it
repeats an earlier signed review (the same signed bytes, or the same signature: a replay)
(:func:`ignored_review`). So what is decided from the fold (the best, what awaits review, the
decision in force, a promotion) rests only on events that verify accepts.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from rrma.trial import Status

AUDITOR = "auditor"  # the actor of every audit.finding (rrma/audit)
SEVERITY_RANK = {"info": 0, "warn": 1, "high": 2}  # audit.finding severities, in order
REVIEW_STATUS = {  # review decision -> the review state it puts a trial in (the latest decision wins)
    "approve": "approved", "reject": "rejected", "flag": "flagged", "withdraw": "unreviewed"}


@dataclass
class TrialRecord:
    trial_id: str
    parent: str | None
    agent: str
    hypothesis: str = ""
    expected_effect: str = ""
    baseline: bool = False
    theorem: str | None = None
    status: str = "proposed"  # proposed | running | <Status>
    score: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    feedback: str = ""
    seconds: float = 0.0
    cached: bool = False
    cached_from: str | None = None
    delta: float | None = None
    delta_sigma: float | None = None
    promoted: bool = False
    proposal_blob: str | None = None
    manifest_blob: str | None = None
    log_blob: str | None = None
    finished_hash: str | None = None  # hash of its latest trial.finished event (what a signed review binds to)
    edits: list[dict[str, Any]] = field(default_factory=list)
    proposed_seq: int = 0
    proposed_ts: str = ""
    started_ts: str = ""  # its latest counted trial.started (a running trial's age runs from it; "" before)
    finished_ts: str = ""
    progress: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0
    cache_key: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    floor: float | None = None  # the improvement its promotion needed (trial.finished)
    floor_source: str | None = None  # baseline | oracle SE | paired
    early_abort: dict[str, Any] | None = None  # the loop's decision that stopped it (trial.finished)
    confirms: str | None = None  # this is a confirmation repeat of that trial (loop.confirm)
    confirmation: dict[str, Any] | None = None  # the trial.confirmed verdict on this trial
    repeats: list[str] = field(default_factory=list)  # its confirmation repeats, in order
    findings: list[dict[str, Any]] = field(default_factory=list)  # its audit.finding events (RunState.findings' dicts)
    # its number among the run's agent trials, from 1, in proposal order: the one numbering of every view (the
    # dashboard's chart, the analysis view, the theorems' chart); None for a baseline or confirmation repeat
    number: int | None = None

    @property
    def finished(self) -> bool:
        return self.status not in ("proposed", "running")

    @property
    def review_status(self) -> str:
        """approved | rejected | flagged | unreviewed (the latest decision wins; a withdrawal leaves it unreviewed)."""
        if not self.reviews:
            return "unreviewed"
        return REVIEW_STATUS[self.reviews[-1]["decision"]]

    @property
    def confirmed_score(self) -> float | None:
        """The mean of its confirmation repeats when they confirmed it (the score it is promoted with)."""
        c = self.confirmation
        return c["mean"] if c is not None and c["confirmed"] else None

    @property
    def awaiting_confirmation(self) -> bool:
        """A would-be new best whose confirmation repeats have not given their verdict yet."""
        return bool(self.metrics.get("awaiting_confirmation")) and self.confirmation is None

    @property
    def open_findings(self) -> list[dict[str, Any]]:
        """Its audit findings not dismissed by a reviewer, most severe first."""
        live = [f for f in self.findings if f["dismissed"] is None]
        return sorted(live, key=lambda f: -SEVERITY_RANK[f["severity"]])

    @property
    def open_finding_counts(self) -> list[tuple[str, int]]:
        """How many findings not dismissed it has of each severity, most severe first (``[("high", 1), ("warn", 2)]``;
        severities it has none of are left out). The one count every view shows (the review queue's audit column)."""
        counts: dict[str, int] = {}
        for f in self.findings:
            if f["dismissed"] is None:
                counts[f["severity"]] = counts.get(f["severity"], 0) + 1
        return sorted(counts.items(), key=lambda item: -SEVERITY_RANK[item[0]])

    @property
    def audit_level(self) -> str | None:
        """The severity of its most severe finding not dismissed (None: none)."""
        live = self.open_findings
        return live[0]["severity"] if live else None

    @property
    def held(self) -> bool:
        """A ``high`` audit finding held its promotion and no person has reviewed it yet ("held for review").

        Dismissing the finding does not lift the hold: only a review does (an approval promotes it)."""
        return not self.promoted and self.review_status == "unreviewed" and any(f["held"] for f in self.findings)

    @property
    def review_signed(self) -> bool | None:
        """Whether the latest review carries a signature (None: no review). Present, not verified: see rrma.log.signing."""
        return bool(self.reviews[-1]["signed"]) if self.reviews else None


@dataclass
class AgentRecord:
    name: str
    turns: int = 0
    trials: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    last_activity: str = ""  # one line: what it did last
    last_ts: str = ""


def delta_sigma(score: float | None, baseline_mean: float | None, sigma: float | None, direction: str) -> float | None:
    """Δσ, the one meaning every view gives it (the TUI, ``show``, the headless progress lines): ``score``
    against the baseline's mean, in units of the baseline's σ, signed so that > 0 is better. None before the
    baseline is measured, or with a σ of 0. (A trial.finished's own ``delta_sigma`` is against the best at the
    time: what promotion compared; views call that "vs the best at the time", never Δσ.)"""
    if score is None or baseline_mean is None or not sigma:
        return None
    delta = (baseline_mean - score) if direction == "minimize" else (score - baseline_mean)
    return delta / sigma


@dataclass
class RunState:
    run_id: str = ""
    task: dict[str, Any] = field(default_factory=dict)
    task_name: str = ""
    seed: int = 0
    started_ts: str = ""
    finished_ts: str = ""
    finish_reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    resumes: int = 0
    trials: dict[str, TrialRecord] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # trial ids in proposal order
    agent_trial_count: int = 0  # len(agent_trials()), kept as trials are proposed (the loop asks it per trial)
    best_id: str | None = None
    best_history: list[tuple[str, float]] = field(default_factory=list)  # (trial id, score) at each promotion
    baseline_mean: float | None = None
    sigma: float | None = None
    floor: float | None = None
    baseline_ids: list[str] = field(default_factory=list)
    blackboard: list[dict[str, Any]] = field(default_factory=list)
    agents: dict[str, AgentRecord] = field(default_factory=dict)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # every review event, counted or ignored
    refused: list[dict[str, Any]] = field(default_factory=list)  # events the fold did not count: {seq, kind, why}
    notes: list[str] = field(default_factory=list)
    # the per-theorem policy's marks (harness notes with a `theorem` field, rrma/run/theorems.py):
    # {seq, ts, name, mark: started | done | out_of_ideas, agent, reason}
    theorem_marks: list[dict[str, Any]] = field(default_factory=list)
    # run.started: a proof run's theorems in the oracle's order, [{name, difficulty}] (None: not recorded)
    theorems: list[dict[str, str]] | None = None
    # run control (run.control): what the current driver must obey; both reset by run.started/run.resumed
    driver_seq: int = -1  # seq of the run.started / run.resumed that began the current driver's session
    driver_ts: str = ""  # and its ts: budget.max_wall_seconds counts from there (each driver's clock starts anew)
    paused_by: dict[str, Any] | None = None  # the pause in force: {seq, ts, by, reason}; None when not paused
    stop_request: dict[str, Any] | None = None  # the stop asked of the current driver: {seq, ts, by, reason}
    controls: list[dict[str, Any]] = field(default_factory=list)  # every run.control: {seq, ts, action, by, reason}
    steers: list[dict[str, Any]] = field(default_factory=list)  # every agent.steer: {seq, ts, by, to, text}
    # every audit.finding: {seq, ts, finding_id, trial_id, kind, severity, source, rule, explanation, evidence, held,
    # model, prompt_version, dismissed: None | {seq, ts, by, note}}; one per finding_id (a repeat is not counted)
    findings: list[dict[str, Any]] = field(default_factory=list)
    held_out: list[str] | None = None  # run.started: the oracle's held-out paths (None: not recorded, an older log)
    experiment: dict[str, Any] | None = None  # {id, arm, seed} when the run is a cell of an experiment
    agents_info: list[dict[str, Any]] = field(default_factory=list)  # resolved agents (backend, model, endpoint)
    # training (train.* events, written by actor `trainer`): each session {seq, ts, method, base_model, config, dataset,
    # resumed_from, finished: None | {seq, ts, reason, steps, artifact, path, summary}}; each step's figures
    # {seq, ts, session, method, step, loss, reward_mean, ...}; each checkpoint {seq, ts, step, kind, artifact, path}
    train_sessions: list[dict[str, Any]] = field(default_factory=list)
    train_steps: list[dict[str, Any]] = field(default_factory=list)
    train_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0
    last_seq: int = -1
    last_ts: str = ""

    # ------------------------------------------------------------------ folding

    @classmethod
    def fold(cls, events: Any) -> RunState:
        state = cls()
        for event in events:
            state.apply(event)
        return state

    @property
    def direction(self) -> str:
        return str(self.task.get("metric", {}).get("direction", "minimize"))

    @property
    def status(self) -> str:
        return "finished" if self.finish_reason else ("running" if self.started_ts else "empty")

    @property
    def paused(self) -> bool:
        """A pause is in force for the current driver (new proposals wait for ``continue``)."""
        return self.paused_by is not None

    def steers_for(self, agent: str) -> list[dict[str, Any]]:
        """The steer notes addressed to ``agent`` (by name, or to every agent), oldest first."""
        return [s for s in self.steers if not s["to"] or agent in s["to"]]

    def better(self, a: float, b: float) -> float:
        return (b - a) if self.direction == "minimize" else (a - b)

    def _agent(self, name: str) -> AgentRecord:
        rec = self.agents.get(name)
        if rec is None:
            rec = self.agents[name] = AgentRecord(name)
        return rec

    def apply(self, ev: Any) -> None:
        self.events += 1
        self.last_seq = ev.seq
        self.last_ts = ev.ts
        d = ev.data
        kind = ev.kind
        rec: TrialRecord | None
        if kind == "run.started":
            self.run_id, self.task, self.task_name, self.seed = d.run_id, d.task, d.task_name, d.seed
            self.started_ts = ev.ts
            self.experiment = d.experiment
            self.agents_info = list(d.agents)
            self.held_out = None if d.held_out is None else list(d.held_out)
            self.theorems = None if d.theorems is None else [dict(t) for t in d.theorems]
            self.paused_by = self.stop_request = None
            self.driver_seq, self.driver_ts = ev.seq, ev.ts
        elif kind == "run.resumed":
            self.resumes += 1
            self.finish_reason = None
            self.finished_ts = ""
            self.paused_by = self.stop_request = None  # a new driver starts unpaused: resuming is itself an order
            self.driver_seq, self.driver_ts = ev.seq, ev.ts
            for tid in d.interrupted_trials:
                if tid in self.trials and not self.trials[tid].finished:
                    self.trials[tid].status = "proposed"
        elif kind == "run.finished":
            self.finish_reason, self.summary, self.finished_ts = d.reason, d.summary, ev.ts
        elif kind == "agent.turn":
            who = self._agent(d.agent)
            who.turns += 1
            who.tokens_in += d.tokens_in
            who.tokens_out += d.tokens_out
            who.cost_usd += d.cost_usd
            what = d.tool or d.role
            said = (d.text or d.result or "").strip()
            who.last_activity = f"{what}: {said.splitlines()[0][:80] if said else ''}"
            who.last_ts = ev.ts
        elif kind == "trial.proposed":
            rec = TrialRecord(
                trial_id=d.trial_id,
                parent=d.parent,
                agent=d.agent,
                hypothesis=d.hypothesis,
                expected_effect=d.expected_effect,
                baseline=d.baseline,
                theorem=d.theorem,
                proposal_blob=d.proposal_blob,
                manifest_blob=d.manifest_blob,
                edits=[e.model_dump() for e in d.edits],
                proposed_seq=ev.seq,
                proposed_ts=ev.ts,
                seed=d.seed,
                cache_key=d.cache_key,
                meta=dict(d.meta),
                confirms=d.confirms,
            )
            known = self.trials.get(d.trial_id)
            if known is None:
                self.order.append(d.trial_id)
                self.agent_trial_count += not d.baseline and d.confirms is None
                rec.number = self.agent_trial_count if not d.baseline and d.confirms is None else None
            else:  # proposed again: it keeps its place in the order, and so its number
                rec.number = known.number
            self.trials[d.trial_id] = rec
            if rec.confirms is not None:
                original = self.trials.get(rec.confirms)
                if original is not None and d.trial_id not in original.repeats:
                    original.repeats.append(d.trial_id)
            elif not d.baseline:
                agent = self._agent(d.agent)
                agent.trials += 1
                agent.last_activity = f"proposed {d.trial_id}: {d.hypothesis[:70]}"
                agent.last_ts = ev.ts
        elif kind == "trial.started":
            rec = self.trials.get(d.trial_id)
            if rec is not None and rec.finished and rec.status != "aborted":
                # only a stopped confirmation repeat is run again (rrma/run/loop.py _confirm, on resume)
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id,
                                     "why": f"starts {d.trial_id} again, which already finished ({rec.status})"})
            elif rec is not None:
                rec.status, rec.started_ts = "running", ev.ts
        elif kind == "trial.progress":
            if d.trial_id in self.trials:
                self.trials[d.trial_id].progress.append(d.sample)
        elif kind == "trial.finished":
            why = refused_outcome(self, ev)
            rec = self.trials.get(d.trial_id)
            if why is not None or rec is None:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id,
                                     "why": why or f"names trial {d.trial_id!r}, which was never proposed"})
                return
            rec.status, rec.score, rec.metrics, rec.feedback = d.status, d.score, d.metrics, d.feedback
            rec.seconds, rec.cached, rec.cached_from, rec.log_blob = d.seconds, d.cached, d.cached_from, d.log_blob
            rec.delta, rec.delta_sigma = d.delta, d.delta_sigma
            rec.floor, rec.floor_source, rec.early_abort = d.floor, d.floor_source, d.early_abort
            rec.finished_ts = ev.ts
            rec.finished_hash = ev.hash
        elif kind == "trial.promoted":
            why = refused_promotion(self, ev)
            if why is not None:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id, "why": why})
                return
            self.trials[d.trial_id].promoted = True
            self.best_id = d.trial_id
            self.best_history.append((d.trial_id, d.score))
        elif kind == "trial.confirmed":
            why = refused_confirmation(self, ev)
            if why is not None:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id, "why": why})
                return
            rec = self.trials.get(d.trial_id)
            if rec is not None:
                rec.confirmation = {"seq": ev.seq, "repeats": list(d.repeats), "scores": list(d.scores), "mean": d.mean,
                                    "best_trial": d.best_trial, "best_score": d.best_score, "delta": d.delta,
                                    "floor": d.floor, "floor_source": d.floor_source, "confirmed": d.confirmed,
                                    "awaiting_review": d.awaiting_review, "reason": d.reason}
                if d.awaiting_review:  # confirmed under the hitl gate: it now waits for a person (rrma/log/review.py)
                    rec.metrics = {**rec.metrics, "awaiting_review": True}
        elif kind == "baseline.measured":
            why = refused_baseline(self, ev)
            if why is not None:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": None, "why": why})
                return
            self.baseline_mean, self.sigma, self.floor = d.mean, d.sigma, d.floor
            self.baseline_ids = list(d.trial_ids)
        elif kind == "blackboard.post":
            self.blackboard.append({"seq": ev.seq, "ts": ev.ts, "agent": d.agent, "text": d.text, "trial_id": d.trial_id, "tags": d.tags})
        elif kind == "review":
            review = {"seq": ev.seq, "ts": ev.ts, "trial_id": d.trial_id, "decision": d.decision, "reviewer": d.reviewer,
                      "note": d.note, "supersedes": d.supersedes}
            # signed reviews: trial_finished is the log's own (not the event's claim), as the signature must bind it
            target = self.trials.get(d.trial_id)
            review.update(signed=d.signature is not None, signature=d.signature, key_fingerprint=d.key_fingerprint,
                          trial_finished=target.finished_hash if target is not None else None)
            review["ignored"] = ignored_review(self, review)
            self.reviews.append(review)
            if review["ignored"] is not None:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id, "why": review["ignored"]})
            elif target is not None:
                target.reviews.append(review)
        elif kind == "note":
            self.notes.append(d.text)
            mark = (d.model_extra or {}).get("theorem")  # the per-theorem policy's mark: a field of its own
            if isinstance(mark, dict) and ev.actor == "harness" and isinstance(mark.get("name"), str):
                self.theorem_marks.append({"seq": ev.seq, "ts": ev.ts, "name": mark["name"], "mark": mark.get("mark"),
                                           "agent": mark.get("agent"), "reason": mark.get("reason")})
        elif kind == "run.control":
            order = {"seq": ev.seq, "ts": ev.ts, "action": d.action, "by": d.by, "reason": d.reason}
            self.controls.append(order)
            if d.action == "stop":
                self.stop_request = self.stop_request or order  # the first stop is the one obeyed
            elif d.action == "pause":
                self.paused_by = self.paused_by or order
            elif d.action == "continue":
                self.paused_by = None
        elif kind == "agent.steer":
            self.steers.append({"seq": ev.seq, "ts": ev.ts, "by": d.by, "to": list(d.to), "text": d.text})
        elif kind == "audit.finding":
            self._finding(ev)
        elif kind.startswith("train."):
            self._train(ev)
        elif kind == "audit.dismissed":
            found = next((f for f in self.findings if f["seq"] == d.finding_seq), None)
            if not ev.actor.startswith("human:") or ev.actor != d.by:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id,
                                     "why": f"a dismissal written by {ev.actor!r} for {d.by!r}: only a person dismisses"})
            elif found is None:
                self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": d.trial_id,
                                     "why": f"dismisses seq {d.finding_seq}, which is not an audit finding"})
            elif found["dismissed"] is None:
                dismissal = {"seq": ev.seq, "ts": ev.ts, "by": d.by, "note": d.note}
                found["dismissed"] = dismissal
                rec = self.trials.get(found["trial_id"])  # the same dict, unless restored from a checkpoint
                for mine in rec.findings if rec is not None else []:
                    if mine["seq"] == d.finding_seq:
                        mine["dismissed"] = dismissal

    def _train(self, ev: Any) -> None:
        """A train.* event: counted only when the trainer wrote it (the driver of a training run)."""
        kind, d = ev.kind, ev.data
        if ev.actor != "trainer":
            self.refused.append({"seq": ev.seq, "kind": kind, "trial_id": None,
                                 "why": f"a {kind} written by {ev.actor!r}: only the trainer records training"})
            return
        fields = d.model_dump(mode="json")
        if kind == "train.started":
            self.train_sessions.append({"seq": ev.seq, "ts": ev.ts, **fields, "finished": None})
            return
        session = self.train_sessions[-1]["seq"] if self.train_sessions else None
        if kind == "train.step":
            self.train_steps.append({"seq": ev.seq, "ts": ev.ts, "session": session, **fields})
        elif kind == "train.checkpoint":
            self.train_checkpoints.append({"seq": ev.seq, "ts": ev.ts, "session": session, **fields})
        elif kind == "train.finished" and self.train_sessions:
            self.train_sessions[-1]["finished"] = {"seq": ev.seq, "ts": ev.ts, **fields}

    def _finding(self, ev: Any) -> None:
        d = ev.data
        if ev.actor != AUDITOR:
            self.refused.append({"seq": ev.seq, "kind": ev.kind, "trial_id": d.trial_id,
                                 "why": f"an audit finding written by {ev.actor!r}, not by the auditor"})
            return
        if any(f["finding_id"] == d.finding_id for f in self.findings):
            return  # the same finding written twice (two audits at once): counted once
        evidence = [{"seq": e.seq, "quote": e.quote} for e in d.evidence]
        finding = {"seq": ev.seq, "ts": ev.ts, "finding_id": d.finding_id, "trial_id": d.trial_id, "kind": d.kind,
                   "severity": d.severity, "source": d.source, "rule": d.rule, "explanation": d.explanation,
                   "evidence": evidence, "held": bool(d.held), "model": d.model,
                   "prompt_version": d.prompt_version, "dismissed": None}
        self.findings.append(finding)
        rec = self.trials.get(d.trial_id)
        if rec is not None:
            rec.findings.append(finding)

    # ------------------------------------------------------------------ queries

    @property
    def best(self) -> TrialRecord | None:
        return self.trials.get(self.best_id) if self.best_id else None

    def newest_running(self) -> str | None:
        """The trial started last of those running now (None: none runs): the one a view follows."""
        for tid in reversed(self.order):
            if self.trials[tid].status == "running":
                return tid
        return None

    def agent_trials(self) -> list[TrialRecord]:
        """The trials agents proposed (not baseline repeats, not confirmation repeats)."""
        return [rec for rec in (self.trials[t] for t in self.order) if not rec.baseline and rec.confirms is None]

    def confirmation_trials(self) -> list[TrialRecord]:
        """The confirmation repeats (loop.confirm), in proposal order."""
        return [rec for rec in (self.trials[t] for t in self.order) if rec.confirms is not None]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for rec in self.agent_trials():
            out[rec.status] = out.get(rec.status, 0) + 1
        return out

    def cache_hits(self) -> int:
        return sum(1 for rec in self.trials.values() if rec.cached)

    def lineage(self, trial_id: str) -> list[TrialRecord]:
        """The path from ``trial_id`` back to the root, child first."""
        path = []
        seen = set()
        cur: str | None = trial_id
        while cur and cur in self.trials and cur not in seen:
            seen.add(cur)
            path.append(self.trials[cur])
            cur = self.trials[cur].parent
        return path

    def nothing_to_resume(self) -> str | None:
        """Why ``rrma-tui resume`` would do nothing for this run (it reached its budget or its goal), or None
        when it would drive it on: a run not finished (its driver died), stopped, interrupted, or ended
        otherwise with trials left or interrupted trials to run again. The one rule resume follows
        (rrma/run/loop.py) and every view that suggests resuming checks."""
        reason = self.finish_reason
        if reason is None or reason in ("interrupted", "stopped"):
            return None
        if any(not rec.finished for rec in self.trials.values()):
            return None  # interrupted trials: a resume runs them again
        if reason in ("target", "baseline_failed", "completed"):
            return f"it ended as {reason}"
        max_trials = (self.task.get("budget") or {}).get("max_trials")
        if isinstance(max_trials, int) and len(self.agent_trials()) >= max_trials:
            return f"it used all {max_trials} of its trials"
        return None

    def delta_sigma_of(self, score: float | None) -> float | None:
        """Δσ of ``score`` in this run (:func:`delta_sigma`)."""
        return delta_sigma(score, self.baseline_mean, self.sigma, self.direction)

    def unresolved_high(self) -> int:
        """``high`` audit findings not dismissed whose trial no person has reviewed yet."""
        return sum(1 for f in self.findings if f["severity"] == "high" and f["dismissed"] is None
                   and (rec := self.trials.get(f["trial_id"])) is not None and rec.review_status == "unreviewed")

    def held_trials(self) -> list[TrialRecord]:
        """Trials whose promotion a ``high`` audit finding holds until a person reviews them."""
        return [t for t in self.agent_trials() if t.held]

    def pending_review(self) -> list[TrialRecord]:
        """Agent trials not yet reviewed, scored or with an open warn/high audit finding: the most severe
        finding first, then would-be and actual bests, then by score."""
        items = [t for t in self.agent_trials() if t.finished and t.review_status == "unreviewed"
                 and (t.status == "ok" or SEVERITY_RANK.get(t.audit_level or "info", 0) >= 1)]
        sign = 1 if self.direction == "minimize" else -1

        def key(t: TrialRecord) -> tuple[int, int, float]:
            level = -SEVERITY_RANK[t.audit_level] if t.audit_level is not None else 1
            first = 0 if (t.promoted or t.metrics.get("awaiting_review")) else 1
            score = t.score if t.score is not None else float("inf") * sign
            return (level, first, sign * score)

        return sorted(items, key=key)


OUTCOME_ACTORS = ("oracle", "harness")  # who writes trial.finished (rrma/run/loop.py: the oracle, or the harness for
# a refused edit or a cached outcome); anything else wrote a score the oracle did not give
TRIAL_STATUSES = frozenset(s.value for s in Status)


def refused_outcome(state: RunState, ev: Any) -> str | None:
    """Why the fold does not count this ``trial.finished`` (verify reports it as an error); None: it counts.

    Each reason is something no run of rrma writes, so a log that has one was written by something else.
    """
    d = ev.data
    rec = state.trials.get(d.trial_id)
    if rec is None:
        return f"names trial {d.trial_id!r}, which was never proposed"
    if rec.finished:  # the loop evaluates a finished trial again only after a new trial.started
        return f"a second outcome for {d.trial_id}, which already finished ({rec.status}) and was not started again"
    if ev.actor not in OUTCOME_ACTORS:
        return f"the outcome of {d.trial_id} is written by {ev.actor!r}, not by the oracle or the harness"
    if d.status not in TRIAL_STATUSES:
        return f"the outcome of {d.trial_id} has status {d.status!r}, which is not a trial status"
    if isinstance(d.score, float) and not math.isfinite(d.score):
        return f"the outcome of {d.trial_id} has score {d.score}, which is not a finite number"
    return None


PERSON = "human:"  # the actor prefix of a person (rrma/log/review.py); the rest is the person's name


def _same(claimed: Any, computed: float | None) -> bool:
    """A figure an event claims against the one the fold computes from counted events: both absent, or equal
    to a relative 1e-9 (a figure computed in another order may differ in its last bits)."""
    if claimed is None or computed is None:
        return claimed is None and computed is None
    if isinstance(claimed, bool) or not isinstance(claimed, int | float):
        return False
    return math.isclose(float(claimed), computed, rel_tol=1e-9, abs_tol=1e-12)


def _claims(claimed: Any, computed: float | None) -> bool:
    """An optional figure of an event: absent (None: it claims nothing, as older writers left some out) or the
    fold's (:func:`_same`)."""
    return claimed is None or _same(claimed, computed)


def _g(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def refused_promotion(state: RunState, ev: Any) -> str | None:
    """Why the fold does not count this ``trial.promoted`` (verify reports it as an error, naming its writer);
    None: it counts.

    A promotion counts only as rrma writes one (rrma/run/promotion.py, the one writer): by the harness or by
    a person (``human:<name>``); of a trial with a counted, scored ``trial.finished``; at the score the
    counted events give it (the mean of its confirmation repeats for a trial that was to be confirmed, else
    its own score, or for a baseline repeat the baseline's measured mean); a trial that awaits a person's
    review only by the person whose approval of it is in force; and against the best as the fold has it
    then: it names that best, beats it, and the figures it gives (the best's score, ``delta``,
    ``delta_sigma``; each may be left out) are the fold's. So a promotion an agent (or anything else)
    appends can neither make a trial the best at a score the oracle did not give nor promote past the
    review gate. The noise floor is the loop's judgement (rrma/run/promotion.py ``decide``), not re-done here.
    """
    why = _promotion_fault(state, ev)
    return None if why is None else f"{why} (written by {ev.actor!r})"


def _promotion_fault(state: RunState, ev: Any) -> str | None:
    d = ev.data
    tid, actor = d.trial_id, ev.actor
    rec = state.trials.get(tid)
    if rec is None or not rec.finished:
        return f"promotes {tid}, which has no counted trial.finished"
    person = actor[len(PERSON):] if actor.startswith(PERSON) else None
    if actor != "harness" and not person:
        return f"promotes {tid}, but only the harness or a person (human:<name>) promotes"
    if rec.status != Status.ok.value or rec.score is None:
        return f"promotes {tid}, which did not score (its outcome is {rec.status})"
    score = d.score
    if rec.baseline and score != rec.score:  # the harness promotes the baseline at its measured mean
        allowed, what = ((state.baseline_mean, "the baseline's measured mean") if tid in state.baseline_ids
                         else (rec.score, "its counted score (and the baseline is not measured)"))
    elif rec.confirmation is not None or rec.metrics.get("awaiting_confirmation"):
        allowed, what = rec.confirmed_score, "the mean of its confirmation repeats"
        if allowed is None:
            why = "did not confirm it" if rec.confirmation is not None else "have given no verdict"
            return f"promotes {tid}, whose confirmation repeats {why}"
    else:
        allowed, what = rec.score, "its counted score"
    if allowed is None or score != allowed:  # a copy of that figure, so equal to the last bit
        return f"promotes {tid} at {_g(score)}, but {what} is {_g(allowed)}"
    approved_by = d.approved_by
    if person is not None:
        review = rec.reviews[-1] if rec.reviews else None
        if review is None or review["decision"] != "approve" or review["reviewer"] != person:
            now = f"{review['reviewer']}'s {review['decision']}" if review is not None else "none"
            return f"a person's promotion of {tid}, which {person} has not approved (the review in force: {now})"
        if approved_by != person:
            return f"a promotion of {tid} by {person} that says it was approved by {approved_by!r}"
    elif rec.metrics.get("awaiting_review"):
        return f"promotes {tid}, which awaits a person's review: only that person's approval promotes it"
    elif approved_by is not None:
        return f"promotes {tid} as approved by {approved_by!r}, but no person wrote it"
    best_score = state.best_history[-1][1] if state.best_history else None
    delta = state.better(score, best_score) if best_score is not None else None
    previous, previous_score = d.previous_best, d.previous_score
    if previous != state.best_id or not _claims(previous_score, best_score):
        return (f"promotes {tid} over {previous} at {_g(previous_score)}, but the best then was "
                f"{state.best_id} at {_g(best_score)}")
    if delta is not None and not delta > 0:
        return f"promotes {tid} at {_g(score)}, which does not beat the best {state.best_id} ({_g(best_score)})"
    sigmas = delta / state.sigma if delta is not None and state.sigma else None
    claimed_delta, claimed_sigmas = d.delta, d.delta_sigma
    if not _claims(claimed_delta, delta) or not _claims(claimed_sigmas, sigmas):
        return (f"promotes {tid} claiming delta {_g(claimed_delta)} ({_g(claimed_sigmas)}σ), but against the "
                f"best then it is {_g(delta)} ({_g(sigmas)}σ)")
    return None


def refused_baseline(state: RunState, ev: Any) -> str | None:
    """Why the fold does not count this ``baseline.measured`` (verify reports it); None: it counts.

    The baseline is measured once, by the harness, from counted scored baseline repeats: its ``scores`` are
    their counted scores, its ``mean`` and ``sigma`` their mean and sample standard deviation. The mean is the
    score the baseline is promoted at and the sigma Δσ's unit, so neither may be claimed freely. (One repeat
    estimates no σ: rrma writes 0 and the fold does not check it. The ``floor`` follows from the task's noise
    settings and is the loop's.)
    """
    d = ev.data
    if ev.actor != "harness":
        return f"a baseline measurement written by {ev.actor!r}, not by the harness"
    if state.baseline_mean is not None:
        return f"a second baseline measurement (the first gave {_g(state.baseline_mean)})"
    ids, scores = list(d.trial_ids), list(d.scores)
    if not ids or len(ids) != len(scores):
        return f"a baseline measurement of {len(ids)} repeat(s) with {len(scores)} score(s)"
    for tid, claimed in zip(ids, scores, strict=True):
        rec = state.trials.get(tid)
        if rec is None or not rec.baseline or rec.status != Status.ok.value or rec.score is None:
            return f"the baseline measurement names {tid}, which is not a scored baseline repeat"
        if not _same(claimed, rec.score):
            return f"the baseline measurement gives {tid} {_g(claimed)}, but its counted score is {_g(rec.score)}"
    mean = statistics.fmean(scores)
    sigma = statistics.stdev(scores) if len(scores) > 1 else d.sigma  # one repeat estimates no σ: not checked
    if not _same(d.mean, mean) or not _same(d.sigma, sigma):
        return (f"the baseline measurement claims mean {_g(d.mean)} ± {_g(d.sigma)}, but its repeats' scores give "
                f"{_g(mean)} ± {_g(sigma)}")
    return None


def refused_confirmation(state: RunState, ev: Any) -> str | None:
    """Why the fold does not count this ``trial.confirmed`` (verify reports it); None: it counts.

    A verdict is written once per trial, by the harness (rrma/run/confirm.py), over counted repeats of that
    trial: its ``scores`` are theirs (None for one that did not score), its ``mean`` the mean of those that
    scored, and ``confirmed`` only when all of them scored. The mean is the score a confirmed trial is
    promoted at. (Whether it clears the floor is the loop's judgement.)
    """
    d = ev.data
    tid = d.trial_id
    rec = state.trials.get(tid)
    if ev.actor != "harness":
        return f"a confirmation verdict on {tid} written by {ev.actor!r}, not by the harness"
    if rec is None or not rec.finished:
        return f"a confirmation verdict on {tid}, which has no counted trial.finished"
    if rec.confirmation is not None:
        return f"a second confirmation verdict on {tid} (the first is seq {rec.confirmation['seq']})"
    repeats, scores = list(d.repeats), list(d.scores)
    if not repeats or len(repeats) != len(scores):
        return f"a confirmation verdict on {tid} with {len(repeats)} repeat(s) and {len(scores)} score(s)"
    for rid, claimed in zip(repeats, scores, strict=True):
        repeat = state.trials.get(rid)
        if repeat is None or repeat.confirms != tid or not repeat.finished:
            return f"the confirmation verdict on {tid} names {rid}, which is not a finished repeat of it"
        counted = repeat.score if repeat.status == Status.ok.value else None
        if not _same(claimed, counted):
            return f"the confirmation verdict on {tid} gives {rid} {_g(claimed)}, but its counted score is {_g(counted)}"
    scored = [float(x) for x in scores if x is not None]
    mean = statistics.fmean(scored) if scored else None
    if not _same(d.mean, mean):
        return f"the confirmation verdict on {tid} claims mean {_g(d.mean)}, but its repeats' scores give {_g(mean)}"
    if d.confirmed and len(scored) != len(scores):
        return f"the confirmation verdict confirms {tid} though some of its repeats did not score"
    return None


def ignored_review(state: RunState, review: dict[str, Any]) -> str | None:
    """Why a folded review is not part of its trial's decision in force (verify reports it); None: it counts.

    ``supersedes`` must name an earlier counted review of the same trial. A signed review must not repeat an
    earlier one: the same signature, or the same signed bytes (rrma.log.signing.review_message: run, trial,
    decision, reviewer, note, trial.finished and supersedes), which a real second review never has (it
    names the review it supersedes). Comparing the signed bytes, not only the signature's text, also catches
    a replay whose signature was re-armored or re-made (ECDSA signatures can be altered and still verify).
    """
    trial_id, supersedes = review["trial_id"], review["supersedes"]
    rec = state.trials.get(trial_id)
    if supersedes is not None and (rec is None or not any(r["seq"] == supersedes for r in rec.reviews)):
        return f"review seq {review['seq']} supersedes seq {supersedes}, which is not an earlier review of {trial_id}"
    if review["signed"]:
        signed = ("trial_id", "decision", "reviewer", "note", "trial_finished", "supersedes")
        for earlier in state.reviews:
            if not earlier["signed"]:
                continue
            if earlier["signature"] == review["signature"] or all(earlier[k] == review[k] for k in signed):
                return (f"review seq {review['seq']} repeats the signed review seq {earlier['seq']} ({earlier['decision']} "
                        f"{earlier['trial_id']} by {earlier['reviewer']}): a replayed signature")
    return None
