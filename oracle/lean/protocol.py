"""What Lean answers, read: the REPL's JSON (command, tactic and pickling modes), ``lean --json``
lines, transcripts, ``#print axioms`` and the goals quoted by "unsolved goals".

Why apart: the transports, the sessions, the verdict and the proof-state backend all read Lean's
answers; parsing is pure (no process), so it is tested on real recorded transcripts. Invariant: an
answer that is not what Lean sends raises :class:`ReplProtocolError`, never passes as an empty one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LeanMessage:
    severity: str  # "error" | "warning" | "info" (lean --json's "information" is normalized)
    line: int  # 1-based, as Lean reports (0 for tactic-mode messages without a position)
    column: int  # 0-based, in code points
    end_line: int | None
    end_column: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "line": self.line, "column": self.column,
                "end_line": self.end_line, "end_column": self.end_column, "text": self.text}


@dataclass(frozen=True)
class LeanSorry:
    goal: str
    proof_state: int | None
    line: int | None
    column: int | None


@dataclass
class ReplResponse:
    """One parsed REPL answer (command, tactic or pickling modes)."""

    env: int | None = None
    messages: list[LeanMessage] = field(default_factory=list)
    sorries: list[LeanSorry] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)  # tactic mode: goals after the tactic
    proof_state: int | None = None
    proof_status: str | None = None
    error: str | None = None  # the REPL's own error ({"message": ...}): unknown env, bad tactic...
    traces: list[str] = field(default_factory=list)
    tactics: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]


class ReplProtocolError(ValueError):
    """An answer that is not what the Lean REPL sends (not an object, wrong field types)."""


def _severity(value: Any) -> str:
    s = str(value).lower()
    return "info" if s in ("information", "info") else s


def _pos(obj: Any) -> tuple[int | None, int | None]:
    if isinstance(obj, dict):
        return obj.get("line"), obj.get("column")
    return None, None


def parse_message(obj: dict[str, Any]) -> LeanMessage:
    """A message object from the REPL or from ``lean --json`` (same pos/endPos/severity/data)."""
    if not isinstance(obj, dict) or "data" not in obj or "severity" not in obj:
        raise ReplProtocolError(f"not a Lean message: {obj!r:.200}")
    line, column = _pos(obj.get("pos"))
    end_line, end_column = _pos(obj.get("endPos"))
    return LeanMessage(_severity(obj["severity"]), int(line or 0), int(column or 0), end_line, end_column,
                       str(obj["data"]))


def parse_repl_response(obj: Any) -> ReplResponse:
    if not isinstance(obj, dict):
        raise ReplProtocolError(f"REPL answer is not a JSON object: {obj!r:.200}")
    resp = ReplResponse(raw=obj)
    if "message" in obj and isinstance(obj["message"], str):
        resp.error = obj["message"]
    env = obj.get("env")
    resp.env = env if isinstance(env, int) else None
    resp.messages = [parse_message(m) for m in obj.get("messages") or []]
    for s in obj.get("sorries") or []:
        line, column = _pos(s.get("pos"))
        resp.sorries.append(LeanSorry(str(s.get("goal", "")), s.get("proofState"), line, column))
    goals = obj.get("goals")
    if isinstance(goals, list):
        resp.goals = [str(g) for g in goals]
    resp.proof_state = obj.get("proofState") if isinstance(obj.get("proofState"), int) else None
    resp.proof_status = obj.get("proofStatus")
    resp.traces = [str(t) for t in obj.get("traces") or []]
    resp.tactics = list(obj.get("tactics") or [])
    return resp


def split_repl_requests(text: str) -> list[dict[str, Any]]:
    """Requests as the REPL reads them: blocks separated by blank lines, a block's lines joined
    *without* newlines (so a raw line break inside a JSON string disappears, as in Lean's REPL)."""
    requests = []
    for block in re.split(r"\n[ \t]*\n", text):
        joined = "".join(block.splitlines())
        if joined.strip():
            requests.append(json.loads(joined))
    return requests


def split_repl_responses(text: str) -> list[dict[str, Any]]:
    """Consecutive pretty-printed JSON answers (separated by blank lines)."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = decoder.raw_decode(text, i)
        out.append(obj)


def read_transcript(in_path: Path, out_path: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pair the requests of ``NAME.in`` with the answers of ``NAME.expected.out``."""
    requests = split_repl_requests(in_path.read_text(encoding="utf-8"))
    responses = split_repl_responses(out_path.read_text(encoding="utf-8"))
    if len(requests) != len(responses):
        raise ReplProtocolError(f"{in_path.name}: {len(requests)} requests but {len(responses)} answers")
    return list(zip(requests, responses, strict=True))


def parse_cli_output(stdout: str) -> tuple[list[LeanMessage], list[str]]:
    """``lean --json`` output: one JSON message per line; other lines are returned separately."""
    messages, other = [], []
    for line in stdout.splitlines():
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError:
            other.append(line)
            continue
        if isinstance(obj, dict) and "severity" in obj and "data" in obj:
            messages.append(parse_message(obj))
        else:
            other.append(line)
    return messages, other


_AXIOMS_RE = re.compile(r"^'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]\s*$", re.S)
_NO_AXIOMS_RE = re.compile(r"^'(?P<name>.+)' does not depend on any axioms\s*$", re.S)
_SORRY_WARNING_RE = re.compile(r"declaration uses (?:`sorry`|'sorry')")


def parse_axioms(text: str) -> list[str] | None:
    """The axiom list of a ``#print axioms`` answer, or None if ``text`` is not one."""
    if _NO_AXIOMS_RE.match(text.strip()):
        return []
    m = _AXIOMS_RE.match(text.strip())
    if m is None:
        return None
    return [a.strip() for a in re.split(r"[,\s]+", m.group("axioms")) if a.strip()]


def is_sorry_warning(msg: LeanMessage) -> bool:
    return msg.severity == "warning" and bool(_SORRY_WARNING_RE.search(msg.text))


def goals_from_messages(messages: Iterable[LeanMessage]) -> list[str]:
    """Remaining goals quoted by "unsolved goals" errors (one goal per blank-line-separated block)."""
    goals: list[str] = []
    for m in messages:
        if m.severity == "error" and m.text.startswith("unsolved goals"):
            body = m.text.split("\n", 1)[1] if "\n" in m.text else ""
            goals.extend(g.strip("\n") for g in re.split(r"\n\n+", body) if g.strip())
    return goals
