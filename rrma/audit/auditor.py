"""The auditor: layer 1, between the agents and the reviewer.

:class:`Auditor` reads a run's events as they are folded (:meth:`Auditor.observe`) and, for a finished
trial, runs the rules (rrma/audit/rules.py) and, when one is given, a judge (rrma/audit/judge.py). Its
findings are ``audit.finding`` events: it never approves and never changes a score. The live loop
calls :meth:`Auditor.check` as each trial's outcome comes back, before the promotion is decided
(rrma/run/runner.py: a ``high`` finding holds it until a person reviews the trial); ``rrma-tui audit
RUN`` calls :func:`audit_run`, which folds the log, checks every finished trial and writes the findings
not in the log yet (the same finding has the same ``finding_id``, so a second audit adds nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rrma.audit.finding import Finding
from rrma.audit.index import AuditIndex
from rrma.audit.rules import OutcomeView, TrialCase, changed_lines, proof_of, run_rules
from rrma.audit.scope import AuditScope
from rrma.log.state import AUDITOR, RunState, TrialRecord
from rrma.log.store import RunNotFound, RunStore, RunUnreadable

AUDIT_ACTOR = AUDITOR


class Judge(Protocol):
    """A judge model over a trial's case (rrma/audit/judge.py): findings with ``source`` ``judge:<model>``."""

    def judge(self, case: TrialCase) -> list[Finding]: ...


class AuditError(ValueError):
    """The run cannot be audited (no log, no such trial): one line for the CLI."""


class Auditor:
    """Findings for a run's trials, from the events it has observed."""

    def __init__(self, store: RunStore, *, files_of: Callable[[str], dict[str, str]] | None = None,
                 judge: Judge | None = None) -> None:
        self.store = store
        self.index = AuditIndex()
        self.judge = judge
        self._files_of = files_of
        self._changes: dict[str, frozenset[str]] = {}
        self._proposals: dict[str, dict[str, Any] | None] = {}

    def observe(self, event: Any) -> None:
        self.index.observe(event)

    # ------------------------------------------------------------------ inputs

    def files_of(self, state: RunState, trial_id: str | None) -> dict[str, str] | None:
        if trial_id is None:
            return None
        rec = state.trials.get(trial_id)
        if rec is None or rec.manifest_blob is None:
            return None
        if self._files_of is not None:
            try:
                return self._files_of(trial_id)
            except (KeyError, OSError):
                return None
        try:
            manifest = self.store.get_json_blob(rec.manifest_blob)
            return {path: self.store.blob_text(digest) for path, digest in manifest.items()}
        except (OSError, ValueError, KeyError):
            return None

    def proposal(self, state: RunState, trial_id: str) -> dict[str, Any] | None:
        """The proposal as the agent sent it (its blob), edits included even when the harness refused them."""
        if trial_id not in self._proposals:
            rec = state.trials.get(trial_id)
            proposal = None
            if rec is not None and rec.proposal_blob:
                try:
                    proposal = self.store.get_json_blob(rec.proposal_blob)
                except (OSError, ValueError):
                    proposal = None
            self._proposals[trial_id] = proposal if isinstance(proposal, dict) else None
        return self._proposals[trial_id]

    def proof(self, state: RunState, trial_id: str) -> str | None:
        return proof_of(self.proposal(state, trial_id))

    def changes(self, state: RunState, trial_id: str) -> frozenset[str]:
        if trial_id not in self._changes:
            rec = state.trials.get(trial_id)
            if rec is None or rec.manifest_blob is None:
                self._changes[trial_id] = frozenset()
            else:
                before = self.files_of(state, rec.parent) or {}
                after = self.files_of(state, trial_id) or {}
                self._changes[trial_id] = frozenset(line for _, line in changed_lines(before, after))
        return self._changes[trial_id]

    def case(self, state: RunState, trial_id: str, outcome: OutcomeView | None = None) -> TrialCase:
        rec = state.trials[trial_id]
        earlier = [r for r in state.agent_trials() if r.proposed_seq < rec.proposed_seq and r.trial_id != trial_id]
        files = self.files_of(state, trial_id)
        parent_files = self.files_of(state, rec.parent) if files is not None else None
        if files is not None and rec.parent is None:
            parent_files = {}
        return TrialCase(
            rec=rec, outcome=outcome or OutcomeView.of(rec), state=state, scope=AuditScope.of(state, self.store.dir),
            turns=self.index.turns_of(trial_id), posts=self.index.posts_of(trial_id),
            proposed_seq=self.index.proposed_seq.get(trial_id, rec.proposed_seq), files=files,
            parent_files=parent_files, proof=self.proof(state, trial_id), earlier=earlier,
            changes_of=lambda other: self.changes(state, other), proof_of=lambda other: self.proof(state, other),
            proposal=self.proposal(state, trial_id), files_of=lambda other: self.files_of(state, other),
        )

    # ------------------------------------------------------------------ checking

    def check(self, state: RunState, trial_id: str, outcome: OutcomeView | None = None) -> list[Finding]:
        """The rules' (and the judge's) findings for one trial; ``outcome``: the live outcome before it is folded."""
        case = self.case(state, trial_id, outcome)
        findings = run_rules(case)
        if self.judge is not None:
            findings += self.judge.judge(case)
        return findings


def auditable(rec: TrialRecord) -> bool:
    """Agent trials with an outcome (baseline and confirmation repeats are the harness's own)."""
    return rec.finished and not rec.baseline and rec.confirms is None


@dataclass
class AuditReport:
    run_dir: Path
    findings: list[dict[str, Any]] = field(default_factory=list)  # folded findings of the audited trials
    written: int = 0  # new audit.finding events this audit appended
    trials: int = 0  # trials audited


def audit_run(run_dir: Path, *, trials: Sequence[str] | None = None, judge: Judge | None = None,
              write: bool = True) -> AuditReport:
    """Audit a run's finished agent trials (or only ``trials``); append the findings not in its log yet."""
    try:
        store = RunStore(run_dir)
    except (RunNotFound, RunUnreadable) as exc:
        raise AuditError(str(exc)) from exc
    scan = store.scan()
    state = RunState.fold(scan.events)
    if not state.started_ts:
        raise AuditError(f"{run_dir}: the log has no run.started event; nothing to audit")
    unknown = [t for t in trials or () if t not in state.trials]
    if unknown:
        known = ", ".join(state.order[:8]) + (" ..." if len(state.order) > 8 else "")
        raise AuditError(f"{run_dir}: no trial {unknown[0]!r} in this run (trials: {known or 'none'})")
    auditor = Auditor(store, judge=judge)
    for event in scan.events:
        auditor.observe(event)
    chosen = [state.trials[t] for t in trials] if trials else [state.trials[t] for t in state.order]
    chosen = [r for r in chosen if auditable(r)]
    have = {f["finding_id"] for f in state.findings}
    new: list[Finding] = []
    for rec in chosen:
        for finding in auditor.check(state, rec.trial_id):
            if finding.finding_id not in have:
                have.add(finding.finding_id)
                new.append(finding)
    if write and new:
        store.append_many([("audit.finding", AUDIT_ACTOR, f.data()) for f in new])
        state = RunState.fold(store.scan().events)
    ids = {r.trial_id for r in chosen}
    report = AuditReport(run_dir, [f for f in state.findings if f["trial_id"] in ids], len(new) if write else 0,
                         len(chosen))
    if not write:
        report.findings += [{**f.data(), "seq": None, "dismissed": None} for f in new]
    return report


def dismiss_finding(store: RunStore, state: RunState, finding_seq: int, *, reviewer: str, note: str) -> Any:
    """Write a reviewer's dismissal of one finding (``audit.dismissed``, actor ``human:<reviewer>``), with a note.

    The finding stays in the log; a dismissed finding no longer counts as unresolved. A dismissal never
    promotes: a held trial is promoted by a person's approval (``review``), as under ``loop.hitl``.
    """
    found = next((f for f in state.findings if f["seq"] == finding_seq), None)
    if found is None:
        raise AuditError(f"seq {finding_seq} is not an audit finding of {state.run_id or store.dir}")
    if found["dismissed"] is not None:
        by = found["dismissed"]["by"]
        raise AuditError(f"finding seq {finding_seq} was dismissed already by {by} (seq {found['dismissed']['seq']})")
    if not note.strip():
        raise AuditError("a dismissal needs a note saying why the finding is wrong or does not matter")
    return store.append("audit.dismissed", f"human:{reviewer}", {
        "finding_seq": finding_seq, "trial_id": found["trial_id"], "by": f"human:{reviewer}", "note": note})
