"""Rules 2 and 3 of the Lean oracle: Lean's answers about one declaration and its audit, judged.

A proof is accepted only when Lean elaborated it without error or ``sorry``, and the audit (run as a
separate command on the resulting environment, so nothing in the proof can fake it) prints exactly the
original statement's ``#check`` and only :data:`ALLOWED_AXIOMS`. Invariant: a missing or unreadable
audit answer is a rejection (fails closed).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from oracle.lean.protocol import LeanMessage, LeanSorry, goals_from_messages, is_sorry_warning, parse_axioms
from oracle.proof_common import TheoremTask, Verdict

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})


@dataclass
class Audit:
    signature: str | None
    axioms: list[str] | None
    errors: list[LeanMessage]


def proof_origin(statement: str, declaration: str) -> tuple[int, int]:
    """(line, column) in ``declaration`` where the proof starts (1-based line, 0-based column)."""
    prefix_len = len(statement.rstrip()) + 1
    head = declaration[:prefix_len]
    line = head.count("\n") + 1
    column = prefix_len - (head.rfind("\n") + 1)
    return line, column


def _located(messages: Iterable[LeanMessage], origin: tuple[int, int], line_offset: int = 0) -> list[dict[str, Any]]:
    """Messages as JSON, each with its position inside the proof body when it lies there."""
    out = []
    for m in messages:
        d = m.to_json()
        line = m.line - line_offset
        d["line"] = line
        if m.end_line is not None:
            d["end_line"] = m.end_line - line_offset
        if line > origin[0] or (line == origin[0] and m.column >= origin[1]):
            d["proof_line"] = line - origin[0] + 1
            d["proof_column"] = m.column - origin[1] if line == origin[0] else m.column
        out.append(d)
    return out


def verdict_from_messages(task: TheoremTask, *, messages: list[LeanMessage], sorries: Sequence[LeanSorry] = (),
          audit: Audit | None, expected_signature: str | None, origin: tuple[int, int],
          allowed_axioms: frozenset[str] = ALLOWED_AXIOMS, line_offset: int = 0,
          started: float | None = None) -> Verdict:
    """Turn Lean's answers about one declaration (and its audit) into a verdict (rules 2 and 3)."""
    seconds = 0.0 if started is None else time.monotonic() - started
    located = _located(messages, origin, line_offset)
    errors = [m for m in messages if m.severity == "error"]
    goals = goals_from_messages(errors) + [s.goal for s in sorries]
    if errors:
        first = errors[0]
        text = first.text.splitlines()[0] if first.text else "error"
        return Verdict(False, f"does not check: {text}", located, goals, seconds)
    if sorries or any(is_sorry_warning(m) for m in messages):
        return Verdict(False, "uses sorry", located, goals, seconds, cheat=True)
    if audit is None:
        return Verdict(False, "not audited: no answer to #check / #print axioms", located, goals, seconds)
    if audit.errors:
        return Verdict(False, f"audit failed: {audit.errors[0].text.splitlines()[0]}", located, goals, seconds)
    if audit.signature is None or expected_signature is None:
        return Verdict(False, "not audited: #check printed nothing", located, goals, seconds)
    if audit.signature != expected_signature:
        return Verdict(False, f"statement changed: Lean sees `{audit.signature}`, expected `{expected_signature}`",
                       located, goals, seconds, cheat=True)
    if audit.axioms is None:
        return Verdict(False, "not audited: no #print axioms answer", located, goals, seconds)
    if "sorryAx" in audit.axioms:
        return Verdict(False, "uses sorry (sorryAx among its axioms)", located, goals, seconds, cheat=True,
                       axioms=audit.axioms)
    bad = [a for a in audit.axioms if a not in allowed_axioms]
    if bad:
        native = [a for a in bad if "_native" in a or a.endswith(("ofReduceBool", "ofReduceNat", "trustCompiler"))]
        kind = "native evaluation" if native else "axiom"
        return Verdict(False, f"{kind} not allowed: {', '.join(bad)}", located, goals, seconds, cheat=True,
                       axioms=audit.axioms)
    return Verdict(True, "accepted", located, [], seconds, axioms=audit.axioms)


def audit_from(messages: list[LeanMessage], check_line: int, axioms_line: int) -> Audit:
    signature = next((m.text for m in messages if m.severity == "info" and m.line == check_line), None)
    axiom_msg = next((m.text for m in messages if m.severity == "info" and m.line == axioms_line), None)
    return Audit(signature, None if axiom_msg is None else parse_axioms(axiom_msg),
                  [m for m in messages if m.severity == "error"])


def audit_commands(name: str) -> str:
    """The audit, run as its own command on the environment the proof produced (lines 1 and 2)."""
    return f"#check @{name}\n#print axioms {name}"
