"""The views' reader of a run log: a fast fold for opening, byte-offset tailing for live updates.

Who reads through it: the TUI (the dashboard, the runs list), ``rrma-tui show`` and ``ls``
(:func:`read_state`), reviews (rrma/log/review.py) and the driver's checkpoint writer
(rrma/log/checkpointer.py). The lines come from the log's one line reader
(:class:`rrma.log.tail.LineTail`) and are decoded by its one decoder (:mod:`rrma.log.codec`), the
same as the research loop's tail; what differs is what is read when.

Why it exists: a run of a million events must open as fast as one of ten (STYLE point 4). So each
line is decoded by the codec's fast path and folded through the same
:meth:`rrma.log.state.RunState.apply` the rest of RRMA uses, so the TUI, the CLI and the loop agree
on the state (the chain's hashes are left to ``rrma-tui verify``). ``agent.turn`` lines (most of a
long run) are not even parsed at open time: they are recognised by their envelope
(:func:`rrma.log.turns.is_turn_line`), counted, and indexed by byte offset; :meth:`LiveFold.index_turns`
decodes them afterwards (in a worker), and the trace view reads a turn's line with ``pread`` only when
it is shown (the turn index: rrma/log/turns.py).

Invariants: the reader consumes only complete lines; a line that is not a valid event (a torn
fragment, a newer schema version, an unknown kind, a field of the wrong type) is recorded in
``torn``, is never folded and never hides the lines after it; the fold's ``offset`` is the
byte just past the last line it consumed, so a tail resumes exactly there.

An open starts from the run's checkpoint when one is usable (rrma/log/checkpoint.py: the fold and
the turn index saved at a line boundary, trusted only while the log still holds the bytes it was
taken from) and folds only the lines after it; when a new one is due, it is written in threads,
after the turn index (:class:`~rrma.log.checkpoint.CheckpointPlan`).

**Live redraws stay cheap at any length**: :meth:`LiveFold.trial_tally` keeps the header's trial
counts up to date by recounting only the trials each fold changed, and :func:`read_summary`
(the runs list, rescanned every few seconds) reads a run this process is tailing from its
fold instead of folding its log again.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.log.checkpoint import (
    CHECKPOINT_MIN_BYTES,
    CHECKPOINT_REFRESH_BYTES,
    CheckpointPlan,
    CheckpointStatus,
    FoldedAt,
    RestoredTurns,
    checkpoint_summary,
    restore_checkpoint,
    why_ignored,
)
from rrma.log.codec import InvalidEvent, LogEvent, Torn, decode_line
from rrma.log.layout import EVENTS
from rrma.log.state import SEVERITY_RANK, RunState, TrialRecord
from rrma.log.store import RunStore
from rrma.log.summary import ListedRun, summary_fields
from rrma.log.tail import LineTail
from rrma.log.turns import (
    ACTOR_PREFIX,
    TURN_KIND,
    TurnIndex,
    TurnRef,
    decode_turn,
    index_turn_lines,
    read_turn,
    stub_agent,
    turn_spans_before,
)

CHUNK = 1024 * 1024  # bytes read (and parsed) at a time; the reading thread yields the GIL between chunks


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
    actor_prefix, turn_kind = ACTOR_PREFIX, TURN_KIND  # is_turn_line, inlined: this loop runs once a line
    for line in data[:end].split(b"\n"):
        offset = pos
        pos += len(line) + 1
        if not line or line.isspace():
            continue
        if stub_turns and line.startswith(actor_prefix) and line.rfind(turn_kind) > 0:
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


def trials_touched(event: LogEvent) -> Iterable[str]:
    """The trials an event changes as the fold sees them: the one it names, and those a ``run.resumed``
    interrupted (what a view redraws, and what the header's tally recounts)."""
    tid = getattr(event.data, "trial_id", None)
    if tid is not None:
        return (tid,)
    return event.data.interrupted_trials if event.kind == "run.resumed" else ()


class LiveFold:
    """A run's fold as a view keeps it: its state, the index of its trace, its unreadable lines, and where the
    next read resumes (``offset``). Owned by one thread at a time; a :class:`RunReader` builds and feeds it."""

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
        self._restored: RestoredTurns | None = None  # a checkpoint's turn index, not yet turned into refs
        self._plan: CheckpointPlan | None = None  # a checkpoint to write once the turns are indexed
        self._tally: _Tally | None = None  # the header's trial counts, once asked for
        self._touched: set[str] = set()  # trials the fold changed since the tally was last brought up to date

    # ------------------------------------------------------------------ checkpoints

    def restore(self) -> int:
        """Start this (empty) fold from the run's newest usable checkpoint; the log bytes it covers, or -1."""
        restored = restore_checkpoint(self.run_dir, self.checkpoint)
        if restored is None:
            return -1
        at = restored.folded
        self.state, self.torn, self._activity_seq, self._last_event_offset = (
            at.state, at.torn, at.activity_seq, at.last_event_offset)
        self.turns, self.offset, self._restored = at.turns, at.offset, restored.turns
        return at.offset

    def plan_checkpoint(self) -> None:
        """Snapshot the fold as it is now for a checkpoint, written once the turns are indexed (threads)."""
        self._plan = CheckpointPlan.begin(self.run_dir, self.offset, self._lock, self._folded, self.checkpoint)

    def _folded(self) -> FoldedAt:
        return FoldedAt(self.state, self.torn, self._activity_seq, self._last_event_offset, self.turns, self.offset)

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
            last = read_turn(self.run_dir / EVENTS, offset, length)
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
                    if stub_agent(line) in seen:  # a later turn of this agent was seen: no need to parse this one
                        continue
                    try:
                        raw = decode_turn(line)
                    except InvalidEvent:  # torn, or a field of the wrong type: the index reports it
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
                self.checkpoint.ignored.append(f"{self.checkpoint.loaded} (its turn index): {why_ignored(exc)}")
                prefix = turn_spans_before(self.run_dir / EVENTS, self.checkpoint.offset, cancelled)  # from the log
                if prefix is None:
                    return None
                spans = prefix + spans
            index.restored = True
        if spans and not index_turn_lines(self.run_dir / EVENTS, spans, index, cancelled):
            return None
        plan, self._plan = self._plan, None
        if plan is not None:
            plan.start_writer(index, self.checkpoint)
        return index

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

    # ------------------------------------------------------------------ lazy reads

    def read_line(self, ref: TurnRef) -> dict[str, Any] | None:
        """The parsed log line of one turn (LRU-cached; read with pread)."""
        with self._cache_lock:
            hit = self._line_cache.get(ref.offset)
            if hit is not None:
                self._line_cache.move_to_end(ref.offset)
                return hit
        raw = read_turn(self.run_dir / EVENTS, ref.offset, ref.length)
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
    plan one (written by :meth:`LiveFold.index_turns`) when it is due: the log is at least
    ``checkpoint_min_bytes`` long and none was usable or the log grew ``refresh_bytes`` past it.
    See the module docstring.
    """

    def __init__(self, run_dir: Path, *, use_checkpoint: bool = True, write_checkpoint: bool = True,
                 checkpoint_min_bytes: int | None = None, refresh_bytes: int | None = None,
                 shared: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.shared = shared  # offer the loaded model to read_summary while this reader tails it (_TAILED)
        self.model: LiveFold | None = None  # the model the last load built
        self.touched = 0.0  # time.monotonic() of the last load or poll
        self.loading = threading.Event()  # set when no load is under way
        self.loading.set()
        self.path = self.run_dir / EVENTS
        self.offset = 0
        self.use_checkpoint = use_checkpoint
        self.write_checkpoint = write_checkpoint
        self.checkpoint_min_bytes = CHECKPOINT_MIN_BYTES if checkpoint_min_bytes is None else checkpoint_min_bytes
        self.refresh_bytes = CHECKPOINT_REFRESH_BYTES if refresh_bytes is None else refresh_bytes

    def _read_from(self, offset: int, *, stub_turns: bool, into: LiveFold | None = None) -> list[ParsedChunk]:
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

    def load(self) -> LiveFold:
        """Fold the whole log as it is now (turns stubbed); the model's offset is where to tail from.

        Starts from the run's checkpoint when it is valid (then only the lines after it are read);
        when a new one is due, snapshots the state in a thread (see :class:`~rrma.log.checkpoint.CheckpointPlan`).
        """
        self.loading.clear()
        if self.shared:
            _TAILED[os.path.realpath(self.run_dir)] = self
        try:
            model = LiveFold(self.run_dir)
            restored_at = model.restore() if self.use_checkpoint else -1
            self._read_from(model.offset, stub_turns=True, into=model)
            model.settle_stub_activity()
            self.offset = model.offset
            self.model, self.touched = model, time.monotonic()
        finally:
            self.loading.set()
        if self.write_checkpoint and model.state.events and model.offset >= self.checkpoint_min_bytes and (
                restored_at < 0 or model.offset - restored_at >= self.refresh_bytes):
            model.plan_checkpoint()
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
    and for reviews; the TUI keeps a :class:`LiveFold` instead.
    """
    model = RunReader(Path(run_dir), write_checkpoint=False, shared=False).load()
    if turns:
        model.attach_index(model.index_turns())
    return model.state


# Readers of this process by the real path of their run (a dashboard's): while one tails its run
# (it polled within TAIL_FRESH seconds), the runs list summarizes the run from its model instead of
# folding the log again (a second or more at a million events, every few seconds on a live run).
_TAILED: weakref.WeakValueDictionary[str, RunReader] = weakref.WeakValueDictionary()
TAIL_FRESH = 2.0


def read_summary(run_dir: Path) -> ListedRun:
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
    return ListedRun(run_dir=Path(run_dir), name=Path(run_dir).name, **fields)


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


