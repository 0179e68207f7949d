"""The trace's turn index: where each ``agent.turn`` line of a run log is, and what it says once indexed.

Why it exists: agent turns are most of a long run's lines, and the fold needs only their number per
agent at open. So the views' reader (rrma/log/reader.py) does not parse them at open: it recognises a
turn line by its envelope alone (:func:`is_turn_line`: canonical JSON sorts keys, so ``kind`` follows
``data`` and ``hash`` and is found with one ``rfind``) and keeps its byte span; :func:`index_turn_lines`
then decodes them in a worker, after the first paint, into :class:`TurnRef` rows (role, tool, trial,
step) and per-agent totals (turns, tokens, cost), and the trace view reads one turn's line with
``pread`` (:func:`read_turn`) only when it is shown (STYLE point 4: toolong).

Invariants: every turn line is decoded by the log's one decoder (:func:`rrma.log.codec.checked`, the
dict form the trace reads); a line that is not a valid ``agent.turn`` event is recorded in the
index's ``torn`` and never indexed; refs are in log order; the spans an index covers are exactly
those it was given (``count``), so the reader can drop them from its list of unindexed spans.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.log.codec import InvalidEvent, LogEvent, Torn, checked, loads
from rrma.log.tail import LineTail

TURN_KIND = b'","kind":"agent.turn","prev":"'  # a turn's kind in its envelope as rrma writes it (sorted keys)
ACTOR_PREFIX = b'{"actor":"agent:'
_DATA_AGENT = b'","data":{"agent":"'  # what follows the actor in a turn line as rrma writes it


def is_turn_line(line: bytes) -> bool:
    """Whether a line is an ``agent.turn`` event as rrma writes one, by its envelope alone (no parse)."""
    return line.startswith(ACTOR_PREFIX) and line.rfind(TURN_KIND) > 0


def stub_agent(line: bytes) -> str | None:
    """The ``data.agent`` of a turn line as rrma writes it, read without parsing the line (None: parse it)."""
    actor_end = line.find(b'"', len(ACTOR_PREFIX))  # the end of the actor's value (the first quote after it)
    if (not line.startswith(ACTOR_PREFIX) or actor_end < 0 or not line.startswith(_DATA_AGENT, actor_end)
            or b"\\" in line[len(ACTOR_PREFIX):actor_end]):
        return None
    start = actor_end + len(_DATA_AGENT)
    end = line.find(b'"', start)
    if end < 0 or b"\\" in line[start:end]:
        return None
    try:
        return line[start:end].decode()
    except UnicodeDecodeError:
        return None


@dataclass(slots=True)
class TurnRef:
    """Where one ``agent.turn`` line lives; role/tool/trial are filled once the line is parsed."""

    offset: int
    length: int
    agent: str
    seq: int = -1
    role: str | None = None
    tool: str | None = None
    trial_id: str | None = None
    step: int = 0
    ts: str = ""

    @property
    def indexed(self) -> bool:
        return self.role is not None

    @classmethod
    def of(cls, event: LogEvent, length: int) -> TurnRef:
        """The reference of a turn line decoded whole (one a tail read, not one stubbed at open)."""
        d = event.data
        return cls(event.offset, length, d.agent, event.seq, d.role, d.tool, d.trial_id, d.step, event.ts)

    def fill(self, raw: dict[str, Any]) -> None:
        """Fill in what a turn line says (``raw``: the line decoded in its dict form, :func:`read_turn`)."""
        d = raw.get("data") or {}
        self.seq = raw.get("seq", -1)
        self.ts = raw.get("ts", "")
        self.tool = d.get("tool")
        self.trial_id = d.get("trial_id")
        self.step = d.get("step", 0) or 0
        self.role = d.get("role", "assistant")


@dataclass
class TurnIndex:
    """What an indexing of turn lines found: refs in log order and per-agent totals."""

    count: int = 0  # spans covered (the first ``count`` of the reader's unindexed spans)
    refs: list[TurnRef] = field(default_factory=list)
    totals: dict[str, tuple[int, int, int, float]] = field(default_factory=dict)  # turns, in, out, cost
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> its last turn line
    torn: list[Torn] = field(default_factory=list)  # turn lines that are not valid events (not in ``refs``)
    restored: bool = False  # ``refs`` start with the turns a checkpoint held (before the reader's unindexed)


def decode_turn(line: bytes) -> dict[str, Any]:
    """A turn line in the dict form the trace reads, or :class:`~rrma.log.codec.InvalidEvent` saying why not."""
    raw = checked(loads(line))
    if raw.get("kind") != "agent.turn":  # a line that looked like a turn and is not one: not written by rrma
        raise InvalidEvent(f"a {raw.get('kind')} event where an agent.turn was read")
    return raw


def read_turn(path: Path, offset: int, length: int) -> dict[str, Any] | None:
    """The turn line at ``offset`` of the log at ``path``, decoded (None if it cannot be read or is no valid turn)."""
    try:
        with open(path, "rb") as fh:
            return decode_turn(os.pread(fh.fileno(), length, offset))
    except (OSError, InvalidEvent):
        return None


def index_turn_lines(path: Path, spans: list[tuple[int, int]], index: TurnIndex,
                     cancelled: Callable[[], bool]) -> bool:
    """Decode the turn lines at ``spans`` (offset, length) of the log at ``path`` into ``index``; False if
    cancelled (the thread yields the GIL every 512 lines, so a UI thread stays responsive)."""
    with open(path, "rb") as fh:
        fd = fh.fileno()
        for i, (offset, length) in enumerate(spans):
            if i % 512 == 0:
                if cancelled():
                    return False
                time.sleep(0)  # yield the GIL to the UI thread
            try:
                raw = decode_turn(os.pread(fd, length, offset))
            except InvalidEvent as exc:
                index.torn.append(Torn(offset, str(exc)))
                continue
            d = raw["data"]
            agent = d["agent"]
            ref = TurnRef(offset, length, agent)
            ref.fill(raw)
            index.refs.append(ref)
            turns, tin, tout, cost = index.totals.get(agent, (0, 0, 0, 0.0))
            index.totals[agent] = (turns + 1, tin + d.get("tokens_in", 0), tout + d.get("tokens_out", 0),
                                   cost + d.get("cost_usd", 0.0))
            index.last[agent] = raw
    return True


def turn_spans_before(path: Path, end: int, cancelled: Callable[[], bool]) -> list[tuple[int, int]] | None:
    """(offset, length) of the turn lines (:func:`is_turn_line`) in the first ``end`` bytes of the log at
    ``path`` (a line boundary); None if cancelled."""
    spans: list[tuple[int, int]] = []
    for base, data in LineTail(path).blocks():
        if cancelled():
            return None
        offset = base
        for line in data.split(b"\n")[:-1]:
            if offset >= end:
                return spans
            if is_turn_line(line):
                spans.append((offset, len(line)))
            offset += len(line) + 1
        time.sleep(0)
    return spans
