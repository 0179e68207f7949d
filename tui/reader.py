"""The TUI's reader of a run log: a fast fold for opening, byte-offset tailing for live updates.

Why it exists: validating every line through pydantic (``RunStore.scan``) costs ~50 µs an
event, so a 100,000-event run would take seconds to open. Here each line is parsed as plain
JSON (orjson when installed), the JSON types of its payload checked against its pydantic model
(~2 µs; pydantic itself runs only on a line that differs, and the chain's hashes are left to
``rrma-tui verify``) and folded through the same :meth:`rrma.state.RunState.apply` the rest of
RRMA uses, so the TUI and the headless tools agree on the state. ``agent.turn`` lines (most
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
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import NoneType, SimpleNamespace, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from rrma.events import DATA_TYPES, SCHEMA_VERSION
from rrma.state import RunState, TrialRecord
from rrma.store import EVENTS, RunStore

try:  # orjson parses the log about twice as fast; plain json is the fallback
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

_TURN_KIND = b'","kind":"agent.turn","prev":"'
_ACTOR_PREFIX = b'{"actor":"agent:'
CHUNK = 1024 * 1024  # bytes read (and parsed) at a time; the reading thread yields the GIL between chunks


class InvalidEvent(ValueError):
    """A parsed line is not a valid event of its kind (a field of the wrong type, a missing field)."""


def check_envelope(raw: dict[str, Any]) -> None:
    """Raise InvalidEvent unless the envelope fields the fold reads have their JSON types."""
    if type(raw.get("seq")) is not int:
        raise InvalidEvent(f"invalid {raw.get('kind')} event (seq: not an integer)")
    for name in ("ts", "actor", "hash"):
        value = raw.get(name)
        if type(value) is not str and (value is not None or name == "ts"):
            raise InvalidEvent(f"invalid {raw.get('kind')} event ({name}: not a string)")


def validated_payload(kind: str, data: Any) -> BaseModel:
    """An event's ``data`` validated by its kind's model, as the core reads it, or InvalidEvent saying why not."""
    try:
        return DATA_TYPES[kind].model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in ("data", *first["loc"]))
        raise InvalidEvent(f"invalid {kind} event ({loc}: {first['msg']})") from None


# ----------------------------------------------------------------------------- type checks
# The fold and the widgets trust the types of what they read (``score`` a number, ``parent`` a
# string), so a line with a field of the wrong type must be refused like a torn line, not fail
# later in a widget. Pydantic would take ~6 µs a payload (+50% on the time to open a long run),
# so each payload's JSON types are compared with its model's annotations (~1-2 µs); one that
# differs is handed to pydantic, which coerces it as the core would or says what is wrong.

_Check = Callable[[Any], bool]
_JSON_TYPES: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,),
                                            NoneType: (NoneType,)}
_ABSENT = object()


def _simple_types(annotation: Any) -> tuple[type, ...] | None:
    """The JSON types a field may hold when its type alone decides (``float | None``, ``dict[str, Any]``)."""
    if annotation in _JSON_TYPES:
        return _JSON_TYPES[annotation]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Union or origin is UnionType:
        parts = [_simple_types(a) for a in args]
        return None if any(p is None for p in parts) else tuple(t for p in parts if p for t in p)
    if (origin is dict and (len(args) < 2 or args[1] is Any)) or (origin is list and (not args or args[0] is Any)):
        return (origin,)
    return None


def _check(annotation: Any) -> _Check | None:
    """A check that a parsed JSON value fits ``annotation``; None: anything does (``Any``)."""
    simple = _simple_types(annotation)
    if simple is not None:
        return lambda v: type(v) in simple
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        allowed = frozenset(args)
        return lambda v: type(v) is str and v in allowed
    if origin is Union or origin is UnionType:
        options = [_check(a) for a in args]
        if any(o is None for o in options):
            return None
        checks = [o for o in options if o is not None]
        return lambda v: any(c(v) for c in checks)
    if origin is list and args:
        item = _check(args[0])
        return (lambda v: type(v) is list) if item is None else (lambda v: type(v) is list and all(map(item, v)))
    if origin is dict and len(args) == 2:
        value = _check(args[1])
        return (lambda v: type(v) is dict) if value is None else (
            lambda v: type(v) is dict and all(map(value, v.values())))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fits = _fits(annotation)
        return lambda v: type(v) is dict and fits(v)
    return None


def _fits(model: type[BaseModel]) -> Callable[[dict[str, Any]], bool]:
    """Whether a payload has every required field of ``model`` and each field it has is of its JSON type."""
    required = tuple(name for name, info in model.model_fields.items() if info.is_required())
    simple: list[tuple[str, tuple[type, ...]]] = []
    nested: list[tuple[str, _Check]] = []
    for name, info in model.model_fields.items():
        types = _simple_types(info.annotation)
        if types is not None:
            simple.append((name, types))
        elif (check := _check(info.annotation)) is not None:
            nested.append((name, check))

    def fits(d: dict[str, Any]) -> bool:
        for name in required:
            if name not in d:
                return False
        for name, types in simple:
            v = d.get(name, _ABSENT)
            if v is not _ABSENT and type(v) not in types:
                return False
        for name, check in nested:
            v = d.get(name, _ABSENT)
            if v is not _ABSENT and not check(v):
                return False
        return True

    return fits


_PAYLOAD_FITS: dict[str, Callable[[dict[str, Any]], bool]] = {kind: _fits(model) for kind, model in DATA_TYPES.items()}
_FIELDS: dict[str, frozenset[str]] = {kind: frozenset(model.model_fields) for kind, model in DATA_TYPES.items()}


class _Edit(dict[str, Any]):
    """An edit record as RunState expects it (it calls ``model_dump``)."""

    def model_dump(self) -> dict[str, Any]:
        return dict(self)


def _payload(kind: str, d: Any) -> Any:
    """Attribute view of an event's checked ``data``; absent fields take the payload model's default."""
    if type(d) is not dict or not _PAYLOAD_FITS[kind](d):
        return validated_payload(kind, d)  # coerced as the core would, or InvalidEvent
    ns = SimpleNamespace(**d)
    fields = _FIELDS[kind]
    if not fields <= d.keys():
        for name in fields - d.keys():
            setattr(ns, name, _default(kind, name))
    if kind == "trial.proposed":
        ns.edits = [_Edit(e) for e in d.get("edits") or []]
    return ns


_DEFAULTS: dict[tuple[str, str], Callable[[], Any]] = {}


def _default(kind: str, name: str) -> Any:
    """The payload model's default for an absent field (factories called anew each time)."""
    found: Callable[[], Any] | None = _DEFAULTS.get((kind, name))
    if found is None:
        info = DATA_TYPES[kind].model_fields[name]  # only optional fields are absent from a checked payload
        factory = info.default_factory
        make: Callable[[], Any]
        if factory is not None:
            make = factory  # type: ignore[assignment]
        else:
            constant = info.get_default()
            make = lambda: constant  # noqa: E731
        _DEFAULTS[(kind, name)] = found = make
    return found()


def checked_turn(raw: Any) -> dict[str, Any]:
    """A parsed ``agent.turn`` line whose fields have the types the trace reads, or InvalidEvent.

    For the turns indexed after an open and read for display: the same check as any payload,
    then pydantic only for a line that fails it.
    """
    if type(raw) is not dict:
        raise InvalidEvent("not a JSON object")
    version = raw.get("v")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise InvalidEvent(f"event schema version {version} is newer than this reader ({SCHEMA_VERSION})")
    if type(raw.get("seq")) is not int or type(raw.get("ts")) is not str:  # what a turn's envelope gives the trace
        check_envelope(raw)
    data = raw.get("data")
    if type(data) is not dict or not _TURN_FITS(data):
        raw["data"] = validated_payload("agent.turn", data).model_dump()
    return raw


_TURN_FITS = _PAYLOAD_FITS["agent.turn"]


class RawEvent:
    """One parsed log line with the attributes RunState.apply reads (seq, ts, kind, actor, data)."""

    __slots__ = ("actor", "data", "hash", "kind", "offset", "raw", "seq", "ts")

    def __init__(self, raw: dict[str, Any], offset: int) -> None:
        self.raw = raw
        self.offset = offset
        self.seq: int = raw["seq"]
        self.ts: str = raw["ts"]
        self.kind: str = raw["kind"]
        self.actor: str = raw.get("actor") or ""
        self.hash: str = raw.get("hash") or ""  # a signed review binds its trial's trial.finished hash
        check_envelope(raw)
        self.data: Any = _payload(self.kind, raw.get("data"))


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

    def fill(self, raw: dict[str, Any]) -> None:
        d = raw.get("data") or {}
        self.seq = raw.get("seq", -1)
        self.ts = raw.get("ts", "")
        self.tool = d.get("tool")
        self.trial_id = d.get("trial_id")
        self.step = d.get("step", 0) or 0
        self.role = d.get("role", "assistant")


@dataclass
class Torn:
    offset: int
    error: str


@dataclass
class ParsedChunk:
    """What a read of new bytes produced: events to fold and turn references, in log order."""

    items: list[RawEvent | TurnRef] = field(default_factory=list)
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
            raw = _loads(line)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            version = raw.get("v")
            if isinstance(version, int) and version > SCHEMA_VERSION:
                raise ValueError(f"event schema version {version} is newer than this reader ({SCHEMA_VERSION})")
            if raw.get("kind") not in DATA_TYPES:
                raise ValueError(f"unknown event kind {raw.get('kind')!r}")
            event = RawEvent(raw, offset)
        except (ValueError, KeyError, TypeError) as exc:  # orjson.JSONDecodeError is a ValueError
            out.torn.append(Torn(offset, str(exc) or type(exc).__name__))
            continue
        if event.kind == "agent.turn":
            ref = TurnRef(offset, len(line), str((raw.get("data") or {}).get("agent", "")))
            ref.fill(raw)
            items.append(event)
            items.append(ref)
        else:
            items.append(event)
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

    # ------------------------------------------------------------------ folding

    def apply(self, chunk: ParsedChunk) -> list[RawEvent]:
        """Fold a parsed chunk; returns the events folded (unparsed turns are only counted)."""
        state = self.state
        folded: list[RawEvent] = []
        for item in chunk.items:
            if isinstance(item, TurnRef):
                self.turns.append(item)
                continue
            state.apply(item)
            folded.append(item)
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
        if offset > self._last_event_offset:
            raw = self._read_raw(offset, length)
            if raw is not None:
                self.state.last_seq, self.state.last_ts = raw.get("seq", -1), raw.get("ts", "")
        seen: set[str] = set()
        for offset, length in reversed(self.unindexed[-window:]):
            if seen and seen >= set(self.state.agents):
                break
            raw = self._read_raw(offset, length)
            if raw is None:
                continue
            agent = str((raw.get("data") or {}).get("agent", ""))
            if agent not in seen:
                seen.add(agent)
                self._turn_activity(raw)

    def index_turns(self, cancelled: Callable[[], bool] = lambda: False) -> TurnIndex | None:
        """Parse the turns folded unparsed (role, tool, trial, step, tokens): for a worker.

        Reads only the file and ``self.unindexed`` as it was at the call; the UI thread
        attaches the result with :meth:`attach_index`. None if cancelled.
        """
        spans = list(self.unindexed)
        index = TurnIndex(count=len(spans))
        if not spans:
            return index
        with open(self.run_dir / EVENTS, "rb") as fh:
            fd = fh.fileno()
            for i, (offset, length) in enumerate(spans):
                if i % 512 == 0:
                    if cancelled():
                        return None
                    time.sleep(0)  # yield the GIL to the UI thread
                try:
                    raw = checked_turn(_loads(os.pread(fd, length, offset)))
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
        return index

    def attach_index(self, index: TurnIndex | None) -> None:
        """Put indexed turns before those the tail added since; add their per-agent totals."""
        if index is None:
            return
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
        self.turns_indexed = not self.unindexed

    def _read_raw(self, offset: int, length: int) -> dict[str, Any] | None:
        """The turn line at ``offset``, checked (None if it cannot be read or is not a valid turn)."""
        try:
            with open(self.run_dir / EVENTS, "rb") as fh:
                return checked_turn(_loads(os.pread(fh.fileno(), length, offset)))
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
    """Reads a run log from a byte offset: ``load`` builds a model, ``poll`` returns new lines."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / EVENTS
        self.offset = 0

    def _read_from(self, offset: int, *, stub_turns: bool, into: RunModel | None = None) -> list[ParsedChunk]:
        chunks: list[ParsedChunk] = []
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return chunks
        with fh:
            size = os.fstat(fh.fileno()).st_size
            pos = offset
            carry = b""
            while pos < size:
                data = os.pread(fh.fileno(), min(CHUNK, size - pos), pos)
                if not data:
                    break
                buf = carry + data
                parsed = parse_lines(buf, pos - len(carry), stub_turns=stub_turns)
                consumed = parsed.end_offset - (pos - len(carry))
                carry = buf[consumed:]
                pos += len(data)
                if into is not None:
                    into.apply(parsed)
                else:
                    chunks.append(parsed)
                time.sleep(0)  # let the UI thread take the GIL (keeps the app responsive while reading)
                self.offset = parsed.end_offset if parsed.end_offset > self.offset else self.offset
        return chunks

    def load(self) -> RunModel:
        """Fold the whole log as it is now (turns stubbed); the model's offset is where to tail from."""
        model = RunModel(self.run_dir)
        self._read_from(0, stub_turns=True, into=model)
        model.settle_stub_activity()
        self.offset = model.offset
        return model

    def poll(self) -> ParsedChunk | None:
        """Parse lines appended since the last load/poll (fully, turns included); None if none."""
        chunks = self._read_from(self.offset, stub_turns=False)
        if not chunks:
            return None
        merged = ParsedChunk(end_offset=self.offset)
        for c in chunks:
            merged.items.extend(c.items)
            merged.torn.extend(c.torn)
        return merged if (merged.items or merged.torn) else None


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

    @property
    def best_vs_baseline(self) -> str:
        if self.best is None:
            return "-"
        text = f"{self.best:.4g}"
        if self.baseline is not None:
            text += f" vs {self.baseline:.4g}"
            if self.sigma:
                sign = 1 if self.direction == "maximize" else -1
                text += f" ({sign * (self.best - self.baseline) / self.sigma:+.1f}σ)"
        return text


def summarize_run(run_dir: Path) -> RunSummary:
    model = RunReader(run_dir).load()
    s = model.state
    best = s.best
    return RunSummary(
        run_dir=Path(run_dir), name=Path(run_dir).name, task=s.task_name, status=s.status,
        trials=len(s.agent_trials()), best=best.score if best else None, baseline=s.baseline_mean,
        sigma=s.sigma, direction=s.direction, started_ts=s.started_ts, last_ts=s.last_ts, torn=len(model.torn),
    )


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


def iter_filtered(turns: Iterable[TurnRef], agent: str | None, trial_id: str | None) -> list[int]:
    """Indices into ``turns`` matching an agent and/or trial filter."""
    return [i for i, t in enumerate(turns)
            if (agent is None or t.agent == agent) and (trial_id is None or t.trial_id == trial_id)]
