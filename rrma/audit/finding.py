"""One audit finding: what the auditor says about a trial, and where in the log it looked.

The shape follows inspect_scout's findings (a value, an explanation, the message ids it cites): here
``kind`` and ``severity`` are the value, ``explanation`` says why in words, and ``evidence`` cites
event seqs of the run log with a short quote of each. A finding is written as an ``audit.finding``
event (rrma/log/events.py), so it is chained, verified and exported like every other event.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from rrma.log.events import AUDIT_KINDS, AUDIT_SEVERITIES

QUOTE_CHARS = 160  # a quote is a short excerpt, never a whole tool output


def quote(text: str, needle: str | None = None, limit: int = QUOTE_CHARS) -> str:
    """A short one-line excerpt of ``text``, centred on ``needle`` when it occurs."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    at = flat.lower().find(needle.lower()) if needle else -1
    start = max(0, min(at - limit // 3, len(flat) - limit)) if at >= 0 else 0
    cut = flat[start:start + limit]
    return ("…" if start > 0 else "") + cut + ("…" if start + limit < len(flat) else "")


@dataclass(frozen=True, slots=True)
class Evidence:
    seq: int  # the cited event's seq
    quote: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    trial_id: str
    kind: str  # one of AUDIT_KINDS
    severity: str  # info | warn | high
    explanation: str
    evidence: tuple[Evidence, ...] = ()
    rule: str = ""  # the check that fired (rules.py), or "judge:<kind>"
    source: str = "rule"  # rule | judge:<model>
    held: bool = False  # it held the trial's promotion
    model: str | None = None
    prompt_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in AUDIT_KINDS:
            raise ValueError(f"unknown audit kind {self.kind!r}; known: {', '.join(AUDIT_KINDS)}")
        if self.severity not in AUDIT_SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}; known: {', '.join(AUDIT_SEVERITIES)}")

    @property
    def finding_id(self) -> str:
        """The same check on the same trial citing the same events is the same finding (written once)."""
        cited = ",".join(str(e.seq) for e in sorted(self.evidence, key=lambda e: e.seq))
        key = f"{self.trial_id}|{self.kind}|{self.source}|{self.rule}|{cited}"
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]

    def holding(self) -> Finding:
        return replace(self, held=True)

    def data(self) -> dict[str, Any]:
        """The ``audit.finding`` event's data."""
        out: dict[str, Any] = {
            "finding_id": self.finding_id, "trial_id": self.trial_id, "kind": self.kind, "severity": self.severity,
            "source": self.source, "rule": self.rule, "explanation": self.explanation,
            "evidence": [{"seq": e.seq, "quote": e.quote} for e in self.evidence], "held": self.held,
        }
        if self.model is not None:
            out["model"] = self.model
        if self.prompt_version is not None:
            out["prompt_version"] = self.prompt_version
        return out


def finding_json(finding: dict[str, Any]) -> dict[str, Any]:
    """One finding as ``rrma-tui audit --json`` prints it (a folded finding: RunState.findings' dicts)."""
    return {
        "trial": finding["trial_id"], "kind": finding["kind"], "severity": finding["severity"],
        "source": finding["source"], "rule": finding.get("rule", ""), "explanation": finding["explanation"],
        "evidence": [{"seq": e["seq"], "quote": e.get("quote", "")} for e in finding["evidence"]],
        "seq": finding.get("seq"), "finding_id": finding["finding_id"], "held": bool(finding.get("held")),
        "dismissed": finding.get("dismissed"), "model": finding.get("model"),
        "prompt_version": finding.get("prompt_version"),
    }
