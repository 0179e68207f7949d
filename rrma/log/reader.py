"""The views' reader of a run log: a fast fold for opening, byte-offset tailing for live updates.

Who reads through it: the TUI (the dashboard, the runs list), ``rrma-tui show`` and ``ls``
(:func:`read_state`), reviews (rrma/log/review.py) and the driver's checkpoint writer
(rrma/log/checkpoint.py). The lines come from the log's one line reader
(:class:`rrma.log.tail.LineTail`, the same as the research loop's validated tail); only the parse
differs.

Why it exists: validating every line through pydantic (``RunStore.scan``) costs ~50 µs an
event, so a 100,000-event run would take seconds to open. Here each line is parsed as plain
JSON (orjson when installed), the JSON types of its payload checked against its pydantic model
(~2 µs; pydantic itself runs only on a line that differs, and the chain's hashes are left to
``rrma-tui verify``) and folded through the same :meth:`rrma.log.state.RunState.apply` the rest of
RRMA uses, so the TUI, the CLI and the loop agree on the state. ``agent.turn`` lines (most
of a long run) are not even parsed at open time (they are checked when they are indexed):
they are recognised by the envelope's ``kind`` (canonical JSON sorts keys, so ``kind`` follows
``data`` and ``hash`` and is found with one ``rfind``), counted per agent from the ``actor``
prefix and indexed by byte offset; :meth:`RunModel.index_turns` fills in their role, trial and
tokens afterwards (in a worker), and the trace view reads a turn's line with ``pread`` only
when it is shown (STYLE point 4: toolong).

Invariants: the reader consumes only complete lines; a line that is not a valid event (a torn
fragment, a newer schema version, an unknown kind, a field of the wrong type) is recorded in
``torn``, is never folded and never hides the lines after it; the model's ``offset`` is the
byte just past the last line it consumed, so a tail resumes exactly there.

**Checkpoints** (a million events open in under a second rather than five or ten): the folded
state and the trace's turn index at a line boundary of the log, saved to ``RUN/.checkpoint`` (or,
where the run directory cannot be written, ``$XDG_CACHE_HOME/rrma/checkpoints/<hash of the run's
path>``), so that an open restores them and folds only the lines appended since. The driver that
writes a run keeps one current as it goes and at ``run.finished`` (rrma/log/checkpoint.py: the
same :class:`RunReader` path as here), so even the first open of a big run is fast; a view writes
one after a fold at open when none was usable or the log grew past it. A
checkpoint is a cache, never a source of truth: the log stays the only truth, and a checkpoint
is used only when all of these hold, else it is ignored (the reason is kept in
``RunModel.checkpoint.ignored``) and the log is folded from byte 0:

* its format version and the fingerprint of the folding code (``CHECKPOINT_VERSION``, the event
  schema version, the source of ``rrma/log/state.py``, ``rrma/log/events.py``, ``rrma/log/tail.py``
  and this module) are this process's, so an edit of the fold never meets a state folded by the old one;
* the log still holds the bytes it was taken at: the log is at least ``offset`` bytes long, the
  first and the last 64 KiB before ``offset`` hash as they did, and the last line before
  ``offset`` still has the ``seq`` and chain ``hash`` it had (a truncated, replaced or rewritten
  log fails this; the log is append-only, so the bytes before ``offset`` never legitimately change);
* each section's CRC-32 matches and the records have exactly the fields of this code's records.

It covers only complete lines the model had consumed (``offset`` is always a line boundary, so a
line a writer is still appending is left to the tail) and counts the unreadable lines
before ``offset`` (``RunModel.torn`` is the same as after a full fold). The turn index is kept as
``array`` columns (offsets, lengths, seqs, steps, and indexes into string tables) and turned back
into :class:`TurnRef` objects in the index worker, after the first paint.

The format is one we control: a magic line, a JSON header and sections (JSON from orjson, and
raw ``array`` bytes), so loading a planted file can at worst show a wrong state, never run code
(no pickle or marshal). The file is also used only when it is a regular file owned by this user
and not writable by others. It is written in a thread, off the UI thread: the state is
serialized under the model's lock right after the fold (the UI thread folds new lines under the
same lock, so the snapshot is exactly the state at ``offset``), and the file is written with the
turn index once the index worker has it, to a temporary file then ``os.replace``. It is written
when none was usable or the log grew ``CHECKPOINT_REFRESH_BYTES`` past it, and only for logs of
at least ``CHECKPOINT_MIN_BYTES`` (a small log folds faster than a checkpoint loads); a view
does not checkpoint a live run again while it is open (its driver does, or the next open). A
failure to write is recorded in ``RunModel.checkpoint.error`` and never fails the open.

**Live redraws stay cheap at any length**: :meth:`RunModel.trial_tally` keeps the header's trial
counts up to date by recounting only the trials each fold changed, and :func:`read_summary`
(the runs list, rescanned every few seconds) reads a run this process is tailing from its
model instead of folding its log again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import hashlib
import os
import stat
import sys
import tempfile
import threading
import time
import weakref
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from rrma.log.codec import InvalidEvent, LogEvent, checked, decode_line, loads
from rrma.log.events import SCHEMA_VERSION
from rrma.log.layout import EVENTS
from rrma.log.state import SEVERITY_RANK, AgentRecord, RunState, TrialRecord, delta_sigma
from rrma.log.store import RunStore
from rrma.log.tail import LineTail

_TURN_KIND = b'","kind":"agent.turn","prev":"'
_ACTOR_PREFIX = b'{"actor":"agent:'
CHUNK = 1024 * 1024  # bytes read (and parsed) at a time; the reading thread yields the GIL between chunks


_DATA_AGENT = b'","data":{"agent":"'  # what follows the actor in a turn line as rrma writes it (sorted keys)


def _stub_agent(line: bytes) -> str | None:
    """The ``data.agent`` of a turn line as rrma writes it, read without parsing the line (None: parse it)."""
    actor_end = line.find(b'"', len(_ACTOR_PREFIX))  # the end of the actor's value (the first quote after it)
    if (not line.startswith(_ACTOR_PREFIX) or actor_end < 0 or not line.startswith(_DATA_AGENT, actor_end)
            or b"\\" in line[len(_ACTOR_PREFIX):actor_end]):
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
        d = raw.get("data") or {}
        self.seq = raw.get("seq", -1)
        self.ts = raw.get("ts", "")
        self.tool = d.get("tool")
        self.trial_id = d.get("trial_id")
        self.step = d.get("step", 0) or 0
        self.role = d.get("role", "assistant")


@dataclass
class TrialTally:
    """The header's counts over a run's agent trials (baselines excluded)."""

    counts: dict[str, int] = field(default_factory=dict)  # status -> trials
    to_review: int = 0  # scored ok, no review yet
    claims: int = 0  # of those, the ones ``claim`` says are held back for review


class _Tally:
    """A :class:`TrialTally` and what each trial adds to it, so a changed trial is recounted alone."""

    def __init__(self, claim: Callable[[TrialRecord], bool]) -> None:
        self.claim = claim
        self.counts: dict[str, int] = {}
        self.to_review = 0
        self.claims = 0
        self.parts: dict[str, tuple[str, bool, bool]] = {}  # trial id -> (status, to review, claim)

    def recount(self, tid: str, rec: TrialRecord | None) -> None:
        old = self.parts.pop(tid, None)
        if old is not None:
            self.counts[old[0]] -= 1
            if not self.counts[old[0]]:
                del self.counts[old[0]]
            self.to_review -= old[1]
            self.claims -= old[2]
        if rec is None or rec.baseline or rec.confirms is not None:
            return
        # as RunState.pending_review: scored, or with an open warn/high audit finding (the queue lists those too),
        # and unreviewed: a withdrawn review leaves the trial to review again
        review = rec.finished and (rec.status == "ok" or SEVERITY_RANK.get(rec.audit_level or "info", 0) >= 1) \
            and rec.review_status == "unreviewed"
        part = self.parts[tid] = (rec.status, review, review and self.claim(rec))
        self.counts[part[0]] = self.counts.get(part[0], 0) + 1
        self.to_review += part[1]
        self.claims += part[2]


@dataclass
class Torn:
    offset: int
    error: str


@dataclass
class ParsedChunk:
    """What a read of new bytes produced: events to fold and turn references, in log order."""

    items: list[LogEvent | TurnRef] = field(default_factory=list)
    torn: list[Torn] = field(default_factory=list)
    end_offset: int = 0
    turn_spans: list[tuple[int, int]] = field(default_factory=list)  # (offset, length) of unparsed turns


def parse_lines(data: bytes, base: int, *, stub_turns: bool) -> ParsedChunk:
    """Parse the complete lines of ``data`` (which starts at byte ``base`` of the log)."""
    out = ParsedChunk(end_offset=base)
    end = data.rfind(b"\n")
    if end < 0:
        return out
    items = out.items
    spans = out.turn_spans
    pos = base
    for line in data[:end].split(b"\n"):
        offset = pos
        pos += len(line) + 1
        if not line or line.isspace():
            continue
        if stub_turns and line.startswith(_ACTOR_PREFIX) and line.rfind(_TURN_KIND) > 0:
            spans.append((offset, len(line)))  # parsed later, by index_turns
            continue
        try:
            event = decode_line(line, offset)
        except InvalidEvent as exc:
            out.torn.append(Torn(offset, str(exc)))
            continue
        items.append(event)
        if event.kind == "agent.turn":
            items.append(TurnRef.of(event, len(line)))
    out.end_offset = base + end + 1
    return out


@dataclass
class TurnIndex:
    """What :meth:`RunModel.index_turns` found: refs in log order and per-agent totals."""

    count: int = 0  # spans covered (the first ``count`` of ``RunModel.unindexed``)
    refs: list[TurnRef] = field(default_factory=list)
    totals: dict[str, tuple[int, int, int, float]] = field(default_factory=dict)  # turns, in, out, cost
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> its last turn line
    torn: list[Torn] = field(default_factory=list)  # turn lines that are not valid events (not in ``refs``)
    restored: bool = False  # ``refs`` start with the turns a checkpoint held (before ``RunModel.unindexed``)


def trials_touched(event: LogEvent) -> Iterable[str]:
    """The trials an event changes as the fold sees them: the one it names, and those a ``run.resumed``
    interrupted (what a view redraws, and what the header's tally recounts)."""
    tid = getattr(event.data, "trial_id", None)
    if tid is not None:
        return (tid,)
    return event.data.interrupted_trials if event.kind == "run.resumed" else ()


class RunModel:
    """A run's folded state plus the index of its trace; owned by one thread at a time."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.state = RunState()
        self.turns: list[TurnRef] = []  # indexed turns, in log order
        self.torn: list[Torn] = []
        self.offset = 0
        self.turns_indexed = False
        self.unindexed: list[tuple[int, int]] = []  # (offset, length) of turns folded unparsed
        self._activity_seq: dict[str, int] = {}  # agent -> seq of the event behind its last_activity
        self._last_event_offset = -1
        self._store: RunStore | None = None
        self._line_cache: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._cache_lock = threading.Lock()
        # held by whoever changes the state (apply, attach_index) and by a checkpoint's snapshot of it
        self._lock = threading.Lock()
        self.checkpoint = CheckpointStatus()
        self._restored: _RestoredTurns | None = None  # a checkpoint's turn index, not yet turned into refs
        self._plan: _CheckpointPlan | None = None  # a checkpoint to write once the turns are indexed
        self._tally: _Tally | None = None  # the header's trial counts, once asked for
        self._touched: set[str] = set()  # trials the fold changed since the tally was last brought up to date

    # ------------------------------------------------------------------ folding

    def apply(self, chunk: ParsedChunk) -> list[LogEvent]:
        """Fold a parsed chunk; returns the events folded (unparsed turns are only counted)."""
        with self._lock:
            return self._apply(chunk)

    def _apply(self, chunk: ParsedChunk) -> list[LogEvent]:
        state = self.state
        folded: list[LogEvent] = []
        for item in chunk.items:
            if isinstance(item, TurnRef):
                self.turns.append(item)
                continue
            state.apply(item)
            folded.append(item)
            if self._tally is not None:
                self._touched.update(trials_touched(item))
            self._last_event_offset = item.offset
            if item.kind in ("agent.turn", "trial.proposed"):
                agent = str(item.data.agent)
                if item.kind == "agent.turn" or not item.data.baseline:
                    self._activity_seq[agent] = item.seq
        if chunk.turn_spans:
            self.unindexed.extend(chunk.turn_spans)
            state.events += len(chunk.turn_spans)
        self.torn.extend(chunk.torn)
        self.offset = max(self.offset, chunk.end_offset)
        return folded

    def trial_tally(self, claim: Callable[[TrialRecord], bool]) -> TrialTally:
        """Counts over the agent trials (per status, to review, ``claim``-ed), for a redraw at any run length.

        The first call counts every trial; later ones only recount those the fold changed since
        (any event naming the trial, and the trials a ``run.resumed`` interrupted), so a live
        redraw of a run of 50,000 trials costs microseconds, not a pass over all of them. Call it
        on the thread that folds (the UI thread): it reads the state without the lock, which only
        keeps the state from changing under a checkpoint's snapshot (that may be reading it now).
        """
        tally = self._tally
        if tally is None or tally.claim is not claim:
            tally = self._tally = _Tally(claim)
            touched: Iterable[str] = self.state.trials
        else:
            touched = self._touched
        trials = self.state.trials
        for tid in touched:
            tally.recount(tid, trials.get(tid))
        self._touched = set()
        return TrialTally(dict(tally.counts), tally.to_review, tally.claims)

    def _turn_activity(self, raw: dict[str, Any]) -> None:
        """Set the agent's activity line from a turn, as RunState would, if the turn is newer."""
        d = raw.get("data") or {}
        agent = str(d.get("agent", ""))
        seq = int(raw.get("seq", -1))
        if seq <= self._activity_seq.get(agent, -1):
            return
        rec = self.state._agent(agent)
        what = d.get("tool") or d.get("role") or ""
        body = (d.get("text") or d.get("result") or "").strip()
        rec.last_activity = f"{what}: {body.splitlines()[0][:80] if body else ''}"
        rec.last_ts = raw.get("ts", "")
        self._activity_seq[agent] = seq

    def settle_stub_activity(self, window: int = 4096) -> None:
        """After an open: the last seq/ts and agents' activity where the newest lines were turns."""
        if not self.unindexed:
            return
        offset, length = self.unindexed[-1]
        last: dict[str, Any] | None = None  # the last turn, parsed once (it may be a huge line)
        if offset > self._last_event_offset:
            last = self._read_raw(offset, length)
            if last is not None:
                self.state.last_seq, self.state.last_ts = last.get("seq", -1), last.get("ts", "")
        seen: set[str] = set()
        try:
            log = open(self.run_dir / EVENTS, "rb")
        except OSError:
            return
        with log:
            for offset, length in reversed(self.unindexed[-window:]):
                if seen and self.state.agents.keys() <= seen:
                    break
                if last is not None and (offset, length) == self.unindexed[-1]:
                    raw = last
                else:
                    line = os.pread(log.fileno(), length, offset)
                    if _stub_agent(line) in seen:  # a later turn of this agent was seen: no need to parse this one
                        continue
                    try:
                        raw = checked(loads(line))
                    except ValueError:  # torn, or a field of the wrong type (InvalidEvent): the index reports it
                        continue
                agent = str(raw["data"].get("agent", ""))
                if agent not in seen:
                    seen.add(agent)
                    self._turn_activity(raw)

    def index_turns(self, cancelled: Callable[[], bool] = lambda: False) -> TurnIndex | None:
        """Parse the turns folded unparsed (role, tool, trial, step, tokens): for a worker.

        Reads only the file and ``self.unindexed`` as it was at the call (and the turn index of
        the checkpoint the model started from, if any); the UI thread attaches the result with
        :meth:`attach_index`. None if cancelled. Then writes the checkpoint :meth:`RunReader.load`
        planned, in a thread of its own.
        """
        spans = list(self.unindexed)
        index = TurnIndex(count=len(spans))
        restored = self._restored
        if restored is not None:
            try:
                if not restored.into(index, cancelled):
                    return None
            except (OSError, ValueError, KeyError, TypeError) as exc:  # damaged, though its CRCs matched
                self.checkpoint.ignored.append(f"{self.checkpoint.loaded} (its turn index): {_why(exc)}")
                prefix = self._turn_spans_before(self.checkpoint.offset, cancelled)  # index them from the log
                if prefix is None:
                    return None
                spans = prefix + spans
            index.restored = True
        if spans and not self._index_spans(spans, index, cancelled):
            return None
        plan, self._plan = self._plan, None
        if plan is not None:
            plan.start_writer(index, self.checkpoint)
        return index

    def _turn_spans_before(self, end: int, cancelled: Callable[[], bool]) -> list[tuple[int, int]] | None:
        """(offset, length) of the turn lines a load stubs in the log's first ``end`` bytes; None if cancelled."""
        spans: list[tuple[int, int]] = []
        for base, data in LineTail(self.run_dir / EVENTS).blocks(block=CHUNK):
            if cancelled():
                return None
            offset = base
            for line in data.split(b"\n")[:-1]:
                if offset >= end:  # a line boundary: the checkpoint's offset
                    return spans
                if line.startswith(_ACTOR_PREFIX) and line.rfind(_TURN_KIND) > 0:  # as parse_lines stubs them
                    spans.append((offset, len(line)))
                offset += len(line) + 1
            time.sleep(0)
        return spans

    def _index_spans(self, spans: list[tuple[int, int]], index: TurnIndex, cancelled: Callable[[], bool]) -> bool:
        """Parse the turn lines at ``spans`` into ``index``; False if cancelled."""
        with open(self.run_dir / EVENTS, "rb") as fh:
            fd = fh.fileno()
            for i, (offset, length) in enumerate(spans):
                if i % 512 == 0:
                    if cancelled():
                        return False
                    time.sleep(0)  # yield the GIL to the UI thread
                try:
                    raw = checked(loads(os.pread(fd, length, offset)))
                except ValueError as exc:  # torn, or a field of the wrong type (InvalidEvent)
                    index.torn.append(Torn(offset, str(exc) or type(exc).__name__))
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

    def attach_index(self, index: TurnIndex | None) -> None:
        """Put indexed turns before those the tail added since; add their per-agent totals."""
        if index is None:
            return
        with self._lock:
            self._attach_index(index)

    def _attach_index(self, index: TurnIndex) -> None:
        if index.restored:
            self._restored = None
        self.turns[:0] = index.refs
        del self.unindexed[: index.count]
        if index.torn:  # counted as events when they were stubbed at open
            self.state.events -= len(index.torn)
            self.torn = sorted([*self.torn, *index.torn], key=lambda t: t.offset)
        for agent, (turns, tin, tout, cost) in index.totals.items():
            rec = self.state._agent(agent)
            rec.turns += turns
            rec.tokens_in += tin
            rec.tokens_out += tout
            rec.cost_usd += cost
        for raw in index.last.values():
            self._turn_activity(raw)
        self.turns_indexed = not self.unindexed and self._restored is None

    def _read_raw(self, offset: int, length: int) -> dict[str, Any] | None:
        """The turn line at ``offset``, checked (None if it cannot be read or is not a valid turn)."""
        try:
            with open(self.run_dir / EVENTS, "rb") as fh:
                return checked(loads(os.pread(fh.fileno(), length, offset)))
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ lazy reads

    def read_line(self, ref: TurnRef) -> dict[str, Any] | None:
        """The parsed log line of one turn (LRU-cached; read with pread)."""
        with self._cache_lock:
            hit = self._line_cache.get(ref.offset)
            if hit is not None:
                self._line_cache.move_to_end(ref.offset)
                return hit
        raw = self._read_raw(ref.offset, ref.length)
        if raw is None:
            return None
        with self._cache_lock:
            self._line_cache[ref.offset] = raw
            if len(self._line_cache) > 2048:
                self._line_cache.popitem(last=False)
        return raw  # type: ignore[no-any-return]

    def turn_data(self, ref: TurnRef) -> dict[str, Any]:
        raw = self.read_line(ref)
        return dict((raw or {}).get("data") or {})

    @property
    def store(self) -> RunStore:
        if self._store is None:
            self._store = RunStore(self.run_dir)
        return self._store

    def blob_text(self, digest: str | None, limit: int = 200_000) -> str | None:
        if not digest:
            return None
        try:
            return self.store.blob_text(digest)[:limit]
        except (OSError, ValueError):
            return None

    def files_of(self, trial: TrialRecord) -> dict[str, str]:
        """The workspace files of a trial, from its manifest blob (path -> text)."""
        if not trial.manifest_blob:
            return {}
        try:
            manifest = self.store.get_json_blob(trial.manifest_blob)
        except (OSError, ValueError):
            return {}
        out: dict[str, str] = {}
        for path, digest in sorted(manifest.items()):
            text = self.blob_text(digest)
            if text is not None:
                out[path] = text
        return out


class RunReader:
    """Reads a run log from a byte offset: ``load`` builds a model, ``poll`` returns new lines.

    ``use_checkpoint``: start from the run's checkpoint when it is valid; ``write_checkpoint``:
    plan one (written by :meth:`RunModel.index_turns`) when it is due: the log is at least
    ``checkpoint_min_bytes`` long and none was usable or the log grew ``refresh_bytes`` past it.
    See the module docstring.
    """

    def __init__(self, run_dir: Path, *, use_checkpoint: bool = True, write_checkpoint: bool = True,
                 checkpoint_min_bytes: int | None = None, refresh_bytes: int | None = None,
                 shared: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.shared = shared  # offer the loaded model to read_summary while this reader tails it (_TAILED)
        self.model: RunModel | None = None  # the model the last load built
        self.touched = 0.0  # time.monotonic() of the last load or poll
        self.loading = threading.Event()  # set when no load is under way
        self.loading.set()
        self.path = self.run_dir / EVENTS
        self.offset = 0
        self.use_checkpoint = use_checkpoint
        self.write_checkpoint = write_checkpoint
        self.checkpoint_min_bytes = CHECKPOINT_MIN_BYTES if checkpoint_min_bytes is None else checkpoint_min_bytes
        self.refresh_bytes = CHECKPOINT_REFRESH_BYTES if refresh_bytes is None else refresh_bytes

    def _read_from(self, offset: int, *, stub_turns: bool, into: RunModel | None = None) -> list[ParsedChunk]:
        """Parse the complete lines from ``offset`` on (the log's one line reader, :class:`LineTail`)."""
        chunks: list[ParsedChunk] = []
        tail = LineTail(self.path, offset)
        for base, data in tail.blocks(block=CHUNK):
            parsed = parse_lines(data, base, stub_turns=stub_turns)
            if into is not None:
                into.apply(parsed)
            else:
                chunks.append(parsed)
            self.offset = max(self.offset, tail.offset)
            time.sleep(0)  # let the UI thread take the GIL (keeps the app responsive while reading)
        return chunks

    def load(self) -> RunModel:
        """Fold the whole log as it is now (turns stubbed); the model's offset is where to tail from.

        Starts from the run's checkpoint when it is valid (then only the lines after it are read);
        when a new one is due, snapshots the state in a thread (see :class:`_CheckpointPlan`).
        """
        self.loading.clear()
        if self.shared:
            _TAILED[os.path.realpath(self.run_dir)] = self
        try:
            model = RunModel(self.run_dir)
            restored_at = restore_checkpoint(model) if self.use_checkpoint else -1
            self._read_from(model.offset, stub_turns=True, into=model)
            model.settle_stub_activity()
            self.offset = model.offset
            self.model, self.touched = model, time.monotonic()
        finally:
            self.loading.set()
        if self.write_checkpoint and model.state.events and model.offset >= self.checkpoint_min_bytes and (
                restored_at < 0 or model.offset - restored_at >= self.refresh_bytes):
            _CheckpointPlan.begin(model)
        return model

    def poll(self) -> ParsedChunk | None:
        """Parse lines appended since the last load/poll (fully, turns included); None if none."""
        self.touched = time.monotonic()
        if self.shared:  # the reader that tails the run (another may have loaded it since, e.g. for a review)
            _TAILED[os.path.realpath(self.run_dir)] = self
        chunks = self._read_from(self.offset, stub_turns=False)
        if not chunks:
            return None
        merged = ParsedChunk(end_offset=self.offset)
        for c in chunks:
            merged.items.extend(c.items)
            merged.torn.extend(c.torn)
        return merged if (merged.items or merged.torn) else None


def read_state(run_dir: Path, *, turns: bool = True) -> RunState:
    """A run's folded state, read as every view reads it: its checkpoint when one is valid plus the lines
    after it (else a fold of the whole log).

    ``turns``: index the agents' turns, so their turn, token and cost totals are complete (without,
    quicker on a long log that has no checkpoint: those totals then leave out the turn lines only
    counted at open; everything else is the same). Writes nothing. For ``rrma-tui show`` and ``ls``
    and for reviews; the TUI keeps a :class:`RunModel` instead.
    """
    model = RunReader(Path(run_dir), write_checkpoint=False, shared=False).load()
    if turns:
        model.attach_index(model.index_turns())
    return model.state


# ----------------------------------------------------------------------------- runs list


@dataclass
class RunSummary:
    """One row of the runs list."""

    run_dir: Path
    name: str
    task: str
    status: str
    trials: int
    best: float | None
    baseline: float | None
    sigma: float | None
    direction: str
    started_ts: str
    last_ts: str
    error: str = ""  # why the run cannot be read at all ("" when it can)
    size: int = -1  # bytes of the log when summarised
    torn: int = 0  # lines that are not valid events (turn lines are checked only when a dashboard indexes them)
    reason: str = ""  # run.finished's reason (max_trials, stopped, interrupted, error...); "" while not finished

    @property
    def best_vs_baseline(self) -> str:
        if self.best is None:
            return "-"
        text = f"{self.best:.4g}"
        if self.baseline is not None:
            text += f" vs {self.baseline:.4g}"
            sigmas = delta_sigma(self.best, self.baseline, self.sigma, self.direction)  # Δσ, as every view means it
            if sigmas is not None:
                text += f" ({sigmas:+.1f}σ)"
        return text


def summary_fields(state: RunState, torn: int) -> dict[str, Any]:
    """The :class:`RunSummary` fields a folded state gives (also kept in a checkpoint's header)."""
    best = state.best
    return {"task": state.task_name, "status": state.status, "trials": len(state.agent_trials()),
            "best": best.score if best else None, "baseline": state.baseline_mean, "sigma": state.sigma,
            "direction": state.direction, "started_ts": state.started_ts, "last_ts": state.last_ts, "torn": torn,
            "reason": state.finish_reason or ""}


# Readers of this process by the real path of their run (a dashboard's): while one tails its run
# (it polled within TAIL_FRESH seconds), the runs list summarizes the run from its model instead of
# folding the log again (a second or more at a million events, every few seconds on a live run).
_TAILED: weakref.WeakValueDictionary[str, RunReader] = weakref.WeakValueDictionary()
TAIL_FRESH = 2.0


def read_summary(run_dir: Path) -> RunSummary:
    """One row of the runs list, the cheapest way there is.

    From the model of a run open in this process (read under its lock: the UI thread folds under
    it; one being loaded is waited for), else from a checkpoint's header that covers the whole
    log, else from a fold of the log.
    """
    tail = _TAILED.get(os.path.realpath(run_dir))
    if tail is not None:
        tail.loading.wait(600)  # a dashboard is folding this run now: wait for its model rather than fold again
    model = tail.model if tail is not None and time.monotonic() - tail.touched < TAIL_FRESH else None
    fields = None
    if model is not None and model.offset:
        with model._lock:
            fields = summary_fields(model.state, len(model.torn))
    if fields is None:
        fields = checkpoint_summary(run_dir)
    if fields is None:
        model = RunReader(run_dir, write_checkpoint=False, shared=False).load()
        fields = summary_fields(model.state, len(model.torn))
    return RunSummary(run_dir=Path(run_dir), name=Path(run_dir).name, **fields)


def find_runs(runs_dir: Path) -> list[Path]:
    """Run directories under ``runs_dir`` (those with an events.jsonl), newest first."""
    if not runs_dir.is_dir():
        return []
    found: list[tuple[float, Path]] = []
    for p in runs_dir.iterdir():
        try:
            st = (p / EVENTS).stat()
        except OSError:  # no log (not a run), or removed while listing
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((st.st_mtime, p))
    return [p for _, p in sorted(found, key=lambda item: item[0], reverse=True)]


def parse_ts(ts: str) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def age(ts: str, now: datetime) -> str:
    when = parse_ts(ts)
    return "-" if when is None else human_duration((now - when).total_seconds())


def utcnow() -> datetime:
    return datetime.now(UTC)


# ----------------------------------------------------------------------------- checkpoints
# See the module docstring: what a checkpoint holds, when it is trusted, when it is written.

CHECKPOINT_NAME = ".checkpoint"  # in the run directory (hidden: it is not part of the run)
CHECKPOINT_VERSION = 1  # the file layout; the code fingerprint below covers the fold itself
CHECKPOINT_MIN_BYTES = 4 * 1024 * 1024  # smaller logs (~7,000 events) fold faster than a checkpoint loads
CHECKPOINT_REFRESH_BYTES = 8 * 1024 * 1024  # write a new one once the log has grown this much past the one used
_MAGIC = b"RRMA-TUI-CHECKPOINT\n"  # then the header's length (8 bytes, little-endian), the header, the sections
_WINDOW = 64 * 1024  # bytes hashed at each end of the covered part of the log
_TRIAL_CHUNK = 2048  # trials serialized per orjson call (the snapshot thread yields the GIL between calls)
# the turn index's columns and their array typecodes (the last four index string tables)
_TURN_COLUMNS = {"offset": "q", "length": "q", "seq": "q", "step": "q", "agent": "i", "role": "i", "tool": "i",
                 "trial": "i"}
_TURN_TABLES = {"agent": "agents", "role": "roles", "tool": "tools", "trial": "trials"}  # column -> its strings
_STATE_FIELDS = frozenset(f.name for f in dataclasses.fields(RunState)) - {"trials", "agents"}
_TRIAL_FIELDS = frozenset(f.name for f in dataclasses.fields(TrialRecord))
_AGENT_FIELDS = frozenset(f.name for f in dataclasses.fields(AgentRecord))


class CheckpointMismatch(ValueError):
    """A checkpoint that is not of this code, not of the log as it is now, or damaged (it is ignored)."""


def _code_fingerprint() -> str:
    """What a usable checkpoint was written by: this layout, this event schema, this folding code."""
    digest = hashlib.sha256(f"{CHECKPOINT_VERSION} {SCHEMA_VERSION} {sys.byteorder}".encode())
    for module in ("rrma.log.state", "rrma.log.events", "rrma.log.codec", "rrma.log.tail", __name__):
        source = getattr(sys.modules.get(module), "__file__", None)
        try:
            digest.update(Path(source).read_bytes() if source else os.urandom(16))
        except OSError:  # the code cannot be read back: match no checkpoint, ever
            digest.update(os.urandom(16))
    return digest.hexdigest()


_FINGERPRINT = _code_fingerprint()  # at import: the code that runs is the code that was hashed


@dataclass
class CheckpointStatus:
    """What an open did with checkpoints (the model's ``checkpoint``; for tests, the bench, the curious)."""

    loaded: Path | None = None  # the checkpoint the model started from; None: the log was folded from byte 0
    offset: int = 0  # the log bytes that checkpoint covered
    ignored: list[str] = field(default_factory=list)  # each checkpoint found but not used, and why
    due: bool = False  # a new one is planned: written once the turns are indexed
    written: Path | None = None
    error: str = ""  # why a due checkpoint was not written
    done: threading.Event = field(default_factory=threading.Event)  # the write finished (or was given up)

    def wait(self, timeout: float | None = None) -> Path | None:
        """The checkpoint this open wrote, once written (None: none was due, or it could not be written).

        The write starts when the turns are indexed (:meth:`RunModel.index_turns`); until then this
        waits (for ``timeout`` seconds at most).
        """
        if self.due:
            self.done.wait(timeout)
        return self.written


def checkpoint_paths(run_dir: Path) -> list[Path]:
    """Where a run's checkpoint may be: in the run directory, then in this user's cache directory."""
    paths = [Path(run_dir) / CHECKPOINT_NAME]
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset or relative: the XDG default
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory: the run directory only
            return paths
    key = hashlib.sha256(os.fsencode(os.path.realpath(run_dir))).hexdigest()[:32]
    paths.append(Path(base) / "rrma" / "checkpoints" / key)
    return paths


def _log_marks(fd: int, offset: int) -> dict[str, Any]:
    """What must still be true of the log for a checkpoint covering its first ``offset`` bytes."""
    span = min(_WINDOW, offset)
    head = os.pread(fd, span, 0)
    tail = os.pread(fd, span, offset - span)
    if span <= 0 or len(head) != span or len(tail) != span or not tail.endswith(b"\n"):
        raise CheckpointMismatch(f"the log does not hold the {offset} bytes the checkpoint covers")
    seq = last_hash = None
    start = tail.rfind(b"\n", 0, span - 1) + 1
    if start > 0 or span == offset:  # the whole last line is in the window: its place in the chain
        try:
            raw = orjson.loads(tail[start:-1])
        except ValueError:  # an unreadable line (counted in ``torn``): the digests still cover it
            raw = None
        if isinstance(raw, dict):
            seq, last_hash = raw.get("seq"), raw.get("hash")
    return {"offset": offset, "head": hashlib.blake2b(head, digest_size=16).hexdigest(),
            "tail": hashlib.blake2b(tail, digest_size=16).hexdigest(), "last_seq": seq, "last_hash": last_hash}


def _open_checkpoint(path: Path) -> Any:
    """The checkpoint file opened for reading, if it is a regular file of this user that others cannot write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CheckpointMismatch("a symbolic link, not a checkpoint file") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        os.close(fd)
        raise CheckpointMismatch("not a regular file owned by this user and writable only by them")
    return os.fdopen(fd, "rb")


def _read_header(fh: Any, log_fd: int, log_size: int) -> dict[str, Any]:
    """A checkpoint's header, if it was written by this code for the log as it is now."""
    if fh.read(len(_MAGIC)) != _MAGIC:
        raise CheckpointMismatch("not a checkpoint file")
    length = int.from_bytes(fh.read(8), "little")
    header = orjson.loads(fh.read(length)) if 0 < length < 1 << 24 else None
    if not isinstance(header, dict):
        raise CheckpointMismatch("unreadable header")
    if header.get("version") != CHECKPOINT_VERSION or header.get("fingerprint") != _FINGERPRINT:
        raise CheckpointMismatch("written by another version of the reader or the fold")
    marks = header.get("log")
    offset = marks.get("offset") if isinstance(marks, dict) else None
    if type(offset) is not int or not 0 < offset <= log_size:
        raise CheckpointMismatch(f"covers {offset} bytes; the log has {log_size}")
    if _log_marks(log_fd, offset) != marks:
        raise CheckpointMismatch(f"the log's first {offset} bytes are not those the checkpoint was taken from")
    return header


@dataclass
class _Checkpoint:
    """A checkpoint file whose header passed every check; its state section is read, the rest is not."""

    path: Path
    offset: int
    state: bytes
    turns: _RestoredTurns

    @classmethod
    def read(cls, path: Path, log_fd: int, log_size: int) -> _Checkpoint:
        fh = _open_checkpoint(path)
        try:
            header = _read_header(fh, log_fd, log_size)
            base = fh.tell()
            sections: dict[str, tuple[int, int, int]] = {}  # name -> (file offset, length, crc32)
            for name, length, crc in header["sections"]:
                sections[str(name)] = (base, int(length), int(crc))
                base += int(length)
            if base != os.fstat(fh.fileno()).st_size or list(sections) != ["state", "turns", *_TURN_COLUMNS]:
                raise CheckpointMismatch("its sections are not those of a checkpoint")
            state = _section(fh.fileno(), "state", *sections["state"])
            turns = _RestoredTurns(os.dup(fh.fileno()), sections)
        finally:
            fh.close()
        return cls(path, header["log"]["offset"], state, turns)

    def restore(self, model: RunModel) -> None:
        """Put the checkpoint's state into ``model`` (its turns wait in ``model._restored`` for the index worker)."""
        with _no_cyclic_gc():
            doc = orjson.loads(self.state)
            state = _state_from(doc)
        info = doc["model"]
        torn = [Torn(int(offset), str(error)) for offset, error in info["torn"]]
        activity = {str(agent): int(seq) for agent, seq in info["activity_seq"].items()}
        last_event = int(info["last_event_offset"])
        turns = [TurnRef(*row) for row in info["turns"]]  # turn lines the fold parsed itself (not stubbed)
        # every part read: only now is the model changed
        model.state, model.torn, model._activity_seq, model._last_event_offset = state, torn, activity, last_event
        model.turns = turns
        model.offset, model._restored = self.offset, self.turns
        model.checkpoint.loaded, model.checkpoint.offset = self.path, self.offset


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic GC while a checkpoint is turned back into objects (a million new containers:
    it would otherwise scan the growing heap again and again, 3-5x the time); nothing restored is garbage.

    On the way out the new objects go straight to the oldest generation (``gc.freeze`` then
    ``gc.unfreeze``: a list splice), so the next young collections do not walk a million objects that
    will live as long as the model (0.2 s of an open at a million events). Other objects young at that
    moment move with them; a cycle among them is then collected by the next full collection instead.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()


def _section(fd: int, name: str, offset: int, length: int, crc: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length or zlib.crc32(data) != crc:
        raise CheckpointMismatch(f"its {name} section is damaged")
    return data


def _records(raw: Any, cls: type[Any], fields: frozenset[str]) -> dict[str, Any]:
    """``{key: record}`` from the checkpoint's ``{key: {field: value}}`` (each must have exactly ``fields``)."""
    out: dict[str, Any] = {}
    new = object.__new__
    for key, values in raw.items():
        if type(values) is not dict or values.keys() != fields:
            raise CheckpointMismatch(f"a {cls.__name__} of the checkpoint has other fields than this code's")
        rec = new(cls)
        rec.__dict__ = values  # the dataclass's fields, exactly (checked above): no __init__ to run again
        out[key] = rec
    return out


def _state_from(doc: dict[str, Any]) -> RunState:
    fields = doc["fields"]
    if type(fields) is not dict or fields.keys() != _STATE_FIELDS:
        raise CheckpointMismatch("the checkpoint's state has other fields than this code's RunState")
    state: RunState = object.__new__(RunState)
    state.__dict__.update(fields)
    state.trials = _records(doc["trials"], TrialRecord, _TRIAL_FIELDS)
    state.agents = _records(doc["agents"], AgentRecord, _AGENT_FIELDS)
    state.best_history = [(str(tid), score) for tid, score in state.best_history]  # tuples, as the fold makes
    by_seq = {review["seq"]: review for review in state.reviews}  # one review dict per review, as after a fold
    found = {finding["seq"]: finding for finding in state.findings}  # and one dict per audit finding
    for rec in state.trials.values():
        if rec.reviews:
            rec.reviews = [by_seq.get(review["seq"], review) for review in rec.reviews]
        if rec.findings:
            rec.findings = [found.get(finding["seq"], finding) for finding in rec.findings]
    return state


class _RestoredTurns:
    """A checkpoint's turn index, read (from the file as it was when opened) by the index worker.

    Holds a descriptor of the checkpoint file, so a checkpoint written meanwhile by another TUI
    (``os.replace``) does not change what is read; it is closed once read, or with this object.
    """

    def __init__(self, fd: int, sections: dict[str, tuple[int, int, int]]) -> None:
        self.fd = fd
        self.sections = sections  # name -> (file offset, length, crc32); "turns" and _TURN_COLUMNS
        self._close = weakref.finalize(self, os.close, fd)
        self._parsed: tuple[dict[str, Any], dict[str, array[int]]] | None = None

    def into(self, index: TurnIndex, cancelled: Callable[[], bool], step: int = 65536) -> bool:
        """Put the checkpoint's refs, totals, last turns and unreadable turn lines into the empty ``index``.

        False if cancelled; CheckpointMismatch (``index`` untouched) if the index does not hold together.
        """
        with _no_cyclic_gc():
            return self._into(index, cancelled, step)

    def _into(self, index: TurnIndex, cancelled: Callable[[], bool], step: int) -> bool:
        doc, cols = self._read()
        count = len(doc["ts"])
        for name, table in _TURN_TABLES.items():
            column = cols[name]
            if len(column) != count or (count and (min(column) < 0 or max(column) >= len(doc[table]))):
                raise CheckpointMismatch("its turn index does not hold together")
        if any(len(column) != count for column in cols.values()):
            raise CheckpointMismatch("its turn index does not hold together")
        totals = {str(agent): (int(turns), int(tin), int(tout), float(cost))
                  for agent, (turns, tin, tout, cost) in doc["totals"].items()}
        last = {str(agent): raw for agent, raw in doc["last"].items()}
        torn = [Torn(int(offset), str(error)) for offset, error in doc["torn"]]
        lookups = {name: doc[table].__getitem__ for name, table in _TURN_TABLES.items()}
        refs: list[TurnRef] = []
        for start in range(0, count, step):
            if cancelled():
                return False
            part = slice(start, start + step)
            refs.extend(map(
                TurnRef, cols["offset"][part], cols["length"][part], map(lookups["agent"], cols["agent"][part]),
                cols["seq"][part], map(lookups["role"], cols["role"][part]), map(lookups["tool"], cols["tool"][part]),
                map(lookups["trial"], cols["trial"][part]), cols["step"][part], doc["ts"][part]))
        index.refs, index.totals, index.last, index.torn = refs, totals, last, torn
        return True

    def _read(self) -> tuple[dict[str, Any], dict[str, array[int]]]:
        """The turn sections, parsed (read once: the descriptor is closed after)."""
        if self._parsed is None:
            try:
                doc = orjson.loads(_section(self.fd, "turns", *self.sections["turns"]))
                cols: dict[str, array[int]] = {}
                for name, typecode in _TURN_COLUMNS.items():
                    cols[name] = column = array(typecode)
                    column.frombytes(_section(self.fd, name, *self.sections[name]))
            finally:
                self._close()
            if not isinstance(doc, dict):
                raise CheckpointMismatch("its turn index is not a JSON object")
            self._parsed = doc, cols
        return self._parsed


def _turn_sections(index: TurnIndex) -> Iterator[tuple[str, bytes]]:
    """The turn index as a checkpoint keeps it: string tables and ts in JSON, the rest array("q") columns."""
    refs = index.refs
    tables: dict[str, dict[Any, int]] = {table: {} for table in _TURN_TABLES.values()}
    columns = {
        "offset": [r.offset for r in refs], "length": [r.length for r in refs], "seq": [r.seq for r in refs],
        "step": [r.step for r in refs],
    }
    for name, attr in (("agent", "agent"), ("role", "role"), ("tool", "tool"), ("trial", "trial_id")):
        table = tables[_TURN_TABLES[name]]
        columns[name] = [table.setdefault(getattr(r, attr), len(table)) for r in refs]
    doc = {table: list(values) for table, values in tables.items()}
    yield "turns", orjson.dumps({
        **doc, "ts": [r.ts for r in refs], "totals": index.totals, "last": index.last,
        "torn": [[t.offset, t.error] for t in index.torn]})
    for name, typecode in _TURN_COLUMNS.items():
        yield name, array(typecode, columns[name]).tobytes()


class _CheckpointPlan:
    """A checkpoint on its way to disk.

    :meth:`begin` (at the end of a load, on the loading thread) takes the model's lock and starts
    a thread that serializes the state and releases it: the UI thread folds new lines under the
    same lock, so the snapshot is the state at ``offset`` exactly. :meth:`start_writer` (from the
    index worker, with the turn index of the same ``offset``) writes the file in another thread.
    """

    def __init__(self, model: RunModel, marks: dict[str, Any]) -> None:
        self.run_dir = model.run_dir
        self.marks = marks
        self.state_json: bytes | None = None
        self.header: dict[str, Any] = {}
        self.error = ""
        self.snapshot_done = threading.Event()

    @classmethod
    def begin(cls, model: RunModel) -> None:
        status = model.checkpoint
        try:
            with open(model.run_dir / EVENTS, "rb") as fh:
                plan = cls(model, _log_marks(fh.fileno(), model.offset))
        except (OSError, ValueError) as exc:  # the log went away or changed under the load: no checkpoint
            status.error = str(exc)
            return
        status.due = True
        model._plan = plan
        model._lock.acquire()  # released by the snapshot thread: nothing is folded until it has the state
        try:
            threading.Thread(target=plan._snapshot, args=(model,), name="rrma-checkpoint-snapshot",
                             daemon=True).start()
        except RuntimeError as exc:  # no thread to be had: no checkpoint
            model._lock.release()
            model._plan = None
            status.error = str(exc)
            status.done.set()

    def _snapshot(self, model: RunModel) -> None:
        try:
            state = model.state
            parts = [b'{"fields":', orjson.dumps({name: getattr(state, name) for name in _STATE_FIELDS}),
                     b',"agents":', orjson.dumps({name: vars(rec) for name, rec in state.agents.items()}),
                     b',"model":', orjson.dumps({"torn": [[t.offset, t.error] for t in model.torn],
                                                 "activity_seq": model._activity_seq,
                                                 "last_event_offset": model._last_event_offset,
                                                 "turns": [dataclasses.astuple(t) for t in model.turns]}),
                     b',"trials":{']
            trials = list(state.trials.items())
            for start in range(0, len(trials), _TRIAL_CHUNK):
                chunk = orjson.dumps({tid: vars(rec) for tid, rec in trials[start: start + _TRIAL_CHUNK]})
                parts.append((b"," if start else b"") + chunk[1:-1])
                time.sleep(0)  # let the UI thread paint (it cannot fold meanwhile: the lock)
            parts.append(b"}}")
            self.state_json = b"".join(parts)
            self.header = {"version": CHECKPOINT_VERSION, "fingerprint": _FINGERPRINT, "log": self.marks,
                           "run_id": state.run_id, "summary": summary_fields(state, len(model.torn))}
        except (TypeError, ValueError) as exc:  # a value orjson cannot write (orjson.JSONEncodeError is a TypeError)
            self.error = f"the state cannot be saved: {exc}"
        finally:
            model._lock.release()
            self.snapshot_done.set()

    def start_writer(self, index: TurnIndex, status: CheckpointStatus) -> None:
        """Write the checkpoint with ``index`` (which nobody changes any more) in a thread of its own."""
        # not a daemon: a TUI quitting meanwhile waits for the file rather than leave a temporary one behind
        threading.Thread(target=self._write, args=(index, status), name="rrma-checkpoint-write").start()

    def _write(self, index: TurnIndex, status: CheckpointStatus) -> None:
        try:
            self.snapshot_done.wait()
            if self.state_json is None:
                status.error = self.error
                return
            sections = [("state", self.state_json), *_turn_sections(index)]
            status.written = _write_somewhere(self.run_dir, self.header, sections)
        except (OSError, ValueError, TypeError, OverflowError) as exc:  # nowhere to write; an index array cannot hold
            status.error = str(exc)
        finally:
            self.state_json = None
            status.done.set()


def _write_somewhere(run_dir: Path, header: dict[str, Any], sections: list[tuple[str, bytes]]) -> Path:
    """Write the checkpoint to the first place that takes it (the run directory, else the cache); where."""
    header = {**header, "sections": [[name, len(data), zlib.crc32(data)] for name, data in sections]}
    head = orjson.dumps(header)
    problems = []
    for target in checkpoint_paths(run_dir):
        try:
            if target.parent != Path(run_dir):
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_atomic(target, [_MAGIC, len(head).to_bytes(8, "little"), head, *(data for _, data in sections)])
            return target
        except OSError as exc:  # read-only run directory, full disk, ...: try the next place
            problems.append(f"{target}: {exc.strerror or exc}")
    raise OSError("checkpoint not written: " + "; ".join(problems))


def _write_atomic(target: Path, parts: list[bytes]) -> None:
    """Write ``target`` as a whole (a temporary file, then ``os.replace``): a reader sees the old file or the new."""
    _remove_stale_temporaries(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            for part in parts:
                fh.write(part)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _remove_stale_temporaries(target: Path, max_age: float = 3600.0) -> None:
    """Temporary files left by writers killed mid-write (a live writer's is younger than ``max_age`` seconds)."""
    now = time.time()
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(target.name + ".") and entry.name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and now - st.st_mtime > max_age:
                    os.unlink(entry.path)


def restore_checkpoint(model: RunModel) -> int:
    """Start an empty model from the run's newest valid checkpoint; the log offset it covers, or -1.

    Every checkpoint found but not used is listed with the reason in ``model.checkpoint.ignored``.
    """
    status = model.checkpoint
    found: list[_Checkpoint] = []
    try:
        log = open(model.run_dir / EVENTS, "rb")
    except OSError:
        return -1
    with log:
        size = os.fstat(log.fileno()).st_size
        for path in checkpoint_paths(model.run_dir):
            try:
                found.append(_Checkpoint.read(path, log.fileno(), size))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError) as exc:
                status.ignored.append(f"{path}: {_why(exc)}")
    for checkpoint in sorted(found, key=lambda c: c.offset, reverse=True):
        try:
            checkpoint.restore(model)
            return checkpoint.offset
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a record not as this code writes it
            status.ignored.append(f"{checkpoint.path}: {_why(exc)}")
    return -1


def _usable_headers(run_dir: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """(header, log size) of each checkpoint of the run written by this code for the log as it is now."""
    try:
        log = open(Path(run_dir) / EVENTS, "rb")
    except OSError:
        return
    with log:
        size = os.fstat(log.fileno()).st_size
        for path in checkpoint_paths(run_dir):
            try:
                with _open_checkpoint(path) as fh:
                    header = _read_header(fh, log.fileno(), size)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            yield header, size


def checkpoint_summary(run_dir: Path) -> dict[str, Any] | None:
    """The runs-list fields from a valid checkpoint that covers the whole log as it is now (else None)."""
    keys = summary_fields(RunState(), 0).keys()
    for header, size in _usable_headers(run_dir):
        summary = header.get("summary")
        if header["log"]["offset"] == size and isinstance(summary, dict) and summary.keys() == keys:
            return summary
    return None


def checkpoint_offset(run_dir: Path) -> int:
    """The log bytes the run's newest usable checkpoint covers (0: none). Reads headers only."""
    return max((int(header["log"]["offset"]) for header, _ in _usable_headers(run_dir)), default=0)


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, (CheckpointMismatch, OSError)) else f"{type(exc).__name__}: {exc}"
