"""The timeline's rows and its verify badge, apart from the screen (tui/screens/timeline.py).

:func:`entry_of` turns one log event into a row (time, actor, kind, one-line summary, the trial it
concerns) for the kinds the timeline lists (``KINDS``: the run's orders and decisions); every other kind
(agent turns, trial lifecycle, training steps) gives None. :func:`scan_entries` reads the rows of a log
up to a byte offset, a block at a time, through the reader's own line parser
(:func:`rrma.log.reader.parse_lines`, turns left unparsed), so a torn or invalid line is skipped as
every view skips it.

The verify badge says, in a few words, what the core's one integrity rule found
(:func:`rrma.log.chain.log_integrity`, which the runs list and the dashboard header show too): the end of
the log against its head record, cheap at any log length, and for a log small enough to read at open
(:data:`FULL_CHAIN_BYTES`) every hash recomputed. The view judges nothing itself and writes nothing;
``rrma-tui verify`` checks everything else (blobs, views, signatures).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rrma.log.chain import IntegrityVerdict, log_integrity
from rrma.log.codec import LogEvent
from rrma.log.head import HeadState, HeadVerdict
from rrma.log.layout import EVENTS
from rrma.log.reader import CHUNK, parse_lines
from rrma.log.tail import LineTail
from tui.widgets.trial_text import fmt_score

# kind -> the group `f` cycles through
KINDS: dict[str, str] = {
    "run.control": "orders", "agent.steer": "orders", "blackboard.post": "orders",
    "review": "reviews",
    "trial.promoted": "promotions", "trial.confirmed": "promotions",
    "audit.finding": "audit", "audit.dismissed": "audit",
    "train.started": "training", "train.checkpoint": "training", "train.finished": "training",
    "run.started": "run", "run.resumed": "run", "run.finished": "run", "note": "run",
}
GROUPS: list[str | None] = [None, "orders", "reviews", "promotions", "audit", "training", "run"]
FULL_CHAIN_BYTES = 4 << 20  # a log up to this size has its whole chain checked at open (a second or two)


@dataclass(slots=True)
class Entry:
    seq: int
    ts: str
    actor: str
    kind: str
    summary: str
    trial_id: str | None = None

    @property
    def group(self) -> str:
        return KINDS.get(self.kind, "run")

    def haystack(self) -> str:
        return f"{self.actor} {self.kind} {self.summary} {self.trial_id or ''}".lower()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _reason(text: str) -> str:
    return f": {_one_line(text)}" if text else ""


def entry_of(event: LogEvent) -> Entry | None:
    """The timeline's row for ``event``; None for a kind it does not list (and for a post by an agent)."""
    kind = event.kind
    if kind not in KINDS:
        return None
    d = event.data
    trial: str | None = getattr(d, "trial_id", None)
    if kind == "run.started":
        summary = f"run started: {d.task_name} (seed {d.seed})"
    elif kind == "run.resumed":
        n = len(d.interrupted_trials)
        summary = f"resumed ({d.reason})" + (f"; {n} interrupted trial(s) run again" if n else "")
    elif kind == "run.finished":
        best = (d.summary or {}).get("best")
        summary = f"finished: {d.reason}" + (f"; best {best}" if best else "")
    elif kind == "run.control":
        summary = f"{d.action}{_reason(d.reason)}"
    elif kind == "agent.steer":
        summary = f"→ {', '.join(d.to) or 'every agent'}: {_one_line(d.text)}"
    elif kind == "blackboard.post":
        if not event.actor.startswith("human:"):
            return None  # agents' posts are the blackboard's; people's are orders of a kind
        summary = f"post: {_one_line(d.text)}"
    elif kind == "review":
        summary = d.decision + _reason(d.note) + (f" (supersedes seq {d.supersedes})" if d.supersedes is not None else "")
    elif kind == "trial.promoted":
        summary = f"promoted at {fmt_score(d.score)}"
        if d.previous_best:
            summary += f" over {d.previous_best} {fmt_score(d.previous_score)}"
        if d.approved_by:
            summary += f", approved by {d.approved_by}"
        if d.confirmed_by:
            summary += f", confirmed by {len(d.confirmed_by)} repeats"
    elif kind == "trial.confirmed":
        scored = sum(s is not None for s in d.scores)
        mean = f"mean {fmt_score(d.mean)} of {scored}/{len(d.repeats)} repeats"
        summary = (f"confirmed: {mean}" + (", awaiting review" if d.awaiting_review else "") if d.confirmed
                   else f"not confirmed: {mean}{_reason(d.reason)}")
    elif kind == "audit.finding":
        summary = f"{d.severity} {d.kind}" + (" (held)" if d.held else "") + _reason(d.explanation)
    elif kind == "audit.dismissed":
        summary = f"dismissed finding seq {d.finding_seq}{_reason(d.note)}"
    elif kind == "train.started":
        summary = f"{d.method} training of {d.base_model}" + (
            f", resumed from step {d.resumed_from}" if d.resumed_from is not None else "")
    elif kind == "train.checkpoint":
        summary = f"step {d.step} {d.kind} {d.artifact[:12]}"
    elif kind == "train.finished":
        summary = f"{d.reason} after {d.steps} steps" + (f", final {d.artifact[:12]}" if d.artifact else "")
    else:  # note
        summary = f"note: {_one_line(d.text)}"
    return Entry(event.seq, event.ts, event.actor, kind, summary, trial)


_KIND_AT = b'","kind":"'  # the envelope's kind, after data and hash in a line as rrma writes it (sorted keys)
_WANTED = frozenset(kind.encode() for kind in KINDS)


def _wanted(line: bytes) -> bool:
    """Whether a line may be one of KINDS, by its envelope's kind alone (no parse); a line not written as rrma
    writes it is parsed, and the parser decides."""
    at = line.rfind(_KIND_AT)
    if at < 0:
        return True
    start = at + len(_KIND_AT)
    end = line.find(b'"', start)
    return end < 0 or line[start:end] in _WANTED


def scan_entries(run_dir: Path, limit: int, cancelled: Callable[[], bool] = lambda: False) -> Iterator[list[Entry]]:
    """The rows of the log's lines before byte ``limit``, a block (1 MiB) at a time, in log order. Only the lines
    of the kinds listed are parsed (by the reader's parser: an invalid one is skipped as every view skips it)."""
    tail = LineTail(Path(run_dir) / EVENTS, 0)
    for base, data in tail.blocks(block=CHUNK):
        if cancelled() or base >= limit:
            return
        rows: list[Entry] = []
        offset = base
        for line in data.split(b"\n")[:-1]:  # whole lines, each ending with a newline
            here, offset = offset, offset + len(line) + 1
            if here >= limit or not _wanted(line):
                continue
            for item in parse_lines(line + b"\n", here, stub_turns=True).items:
                if isinstance(item, LogEvent) and (entry := entry_of(item)) is not None:
                    rows.append(entry)
        yield rows


# ----------------------------------------------------------------------------- the verify badge

Verdict = Literal["ok", "cut", "changed", "none", "error"]
BADGE: dict[HeadState, tuple[Verdict, str]] = {  # the core's verdict -> the badge's, and its words
    "ok": ("ok", "head ok"), "cut": ("cut", "tail cut"), "changed": ("changed", "tail changed"),
    "none": ("none", "no head record"), "unreadable": ("error", "head record unreadable")}


INTEGRITY_BADGE: dict[IntegrityVerdict, Verdict] = {  # the core's log verdict -> the badge's mark and colour
    "ok": "ok", "torn": "none", "old": "none", "cut": "cut", "changed": "changed", "broken": "changed",
    "missing": "error", "unreadable": "error"}


@dataclass(frozen=True)
class Badge:
    verdict: Verdict | Literal["running"]
    text: str  # a few words for the header
    detail: str = ""  # the whole finding (the notification, the docs' wording)
    seq: int | None = None  # the head record's seq, when it checked out


def head_badge(head: HeadVerdict) -> Badge:
    """The badge of the core's head check (rrma/log/head.py): its verdict in a few words."""
    verdict, text = BADGE[head.state]
    if head.state == "ok" and head.record is not None:
        return Badge(verdict, f"{text} (seq {head.record.seq})", head.detail, head.record.seq)
    return Badge(verdict, text, head.detail)


def check_log(run_dir: Path, *, full: bool) -> Badge:
    """The core's integrity verdict of the log (:func:`rrma.log.chain.log_integrity`, the rule the runs list and the
    dashboard show too): the head record against the log's end, and with ``full`` (a log under FULL_CHAIN_BYTES)
    the whole chain with it; in the badge's words."""
    found = log_integrity(run_dir, chain_bytes=FULL_CHAIN_BYTES if full else -1)
    verdict = INTEGRITY_BADGE[found.verdict]
    if found.verdict == "ok" and found.seq is not None:
        return Badge(verdict, f"{found.words} (seq {found.seq})", found.finding, found.seq)
    return Badge(verdict, found.words, found.finding)
