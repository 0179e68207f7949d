"""The TUI's reader of a run log: a fast fold for opening, byte-offset tailing for live updates.

Why it exists: validating every line through pydantic (``RunStore.scan``) costs ~50 µs an
event, so a 100,000-event run would take seconds to open. Here each line is parsed as plain
JSON (orjson when installed) and folded through the same :meth:`rrma.state.RunState.apply` the
rest of RRMA uses, via a thin attribute view of the payload, so the TUI and the headless tools
agree on the state. ``agent.turn`` lines (most of a long run) are not even parsed at open time:
they are recognised by the envelope's ``kind`` (canonical JSON sorts keys, so ``kind`` follows
``data`` and ``hash`` and is found with one ``rfind``), counted per agent from the ``actor``
prefix and indexed by byte offset; :meth:`RunModel.index_turns` fills in their role, trial and
tokens afterwards (in a worker), and the trace view reads a turn's line with ``pread`` only
when it is shown (STYLE point 4: toolong).

Invariants: the reader consumes only complete lines; a line that is not a valid event (a torn
fragment, a newer schema version, an unknown kind) is recorded in ``torn`` and never hides the
lines after it; the model's ``offset`` is the byte just past the last line it consumed, so a
tail resumes exactly there.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

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
CHUNK = 8 * 1024 * 1024  # bytes read at a time


class _Edit(dict[str, Any]):
    """An edit record as RunState expects it (it calls ``model_dump``)."""

    def model_dump(self) -> dict[str, Any]:
        return dict(self)


_FIELDS: dict[str, frozenset[str]] = {kind: frozenset(model.model_fields) for kind, model in DATA_TYPES.items()}


def _payload(kind: str, d: dict[str, Any]) -> SimpleNamespace:
    """Attribute view of an event's ``data``; absent fields take the payload model's default."""
    ns = SimpleNamespace(**d)
    fields = _FIELDS[kind]
    if not fields <= d.keys():
        for name in fields - d.keys():
            setattr(ns, name, _default(kind, name))
    if kind == "trial.proposed":
        ns.edits = [_Edit(e) for e in (d.get("edits") or []) if isinstance(e, dict)]
    return ns


_DEFAULTS: dict[tuple[str, str], Callable[[], Any]] = {}


def _default(kind: str, name: str) -> Any:
    """The payload model's default for an absent field (factories called anew each time)."""
    make = _DEFAULTS.get((kind, name))
    if make is None:
        info = DATA_TYPES[kind].model_fields.get(name)
        if info is None:
            raise AttributeError(name)
        if info.default_factory is not None:
            make = info.default_factory  # type: ignore[assignment]
        else:
            constant = info.get_default()
            make = lambda: constant  # noqa: E731
        _DEFAULTS[(kind, name)] = make
    return make()


class RawEvent:
    """One parsed log line with the attributes RunState.apply reads (seq, ts, kind, actor, data)."""

    __slots__ = ("actor", "data", "kind", "offset", "raw", "seq", "ts")

    def __init__(self, raw: dict[str, Any], offset: int) -> None:
        self.raw = raw
        self.offset = offset
        self.seq: int = raw["seq"]
        self.ts: str = raw["ts"]
        self.kind: str = raw["kind"]
        self.actor: str = raw.get("actor", "")
        self.data = _payload(self.kind, raw.get("data") or {})


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


def parse_lines(data: bytes, base: int, *, stub_turns: bool) -> ParsedChunk:
    """Parse the complete lines of ``data`` (which starts at byte ``base`` of the log)."""
    out = ParsedChunk(end_offset=base)
    end = data.rfind(b"\n")
    if end < 0:
        return out
    items = out.items
    pos = base
    for line in data[:end].split(b"\n"):
        offset = pos
        pos += len(line) + 1
        if not line or line.isspace():
            continue
        if stub_turns and line.startswith(_ACTOR_PREFIX) and line.rfind(_TURN_KIND) > 0:
            quote = line.find(b'"', len(_ACTOR_PREFIX))
            items.append(TurnRef(offset, len(line), line[len(_ACTOR_PREFIX):quote].decode("utf-8", "replace")))
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


class RunModel:
    """A run's folded state plus the index of its trace; owned by one thread at a time."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.state = RunState()
        self.turns: list[TurnRef] = []
        self.torn: list[Torn] = []
        self.offset = 0
        self.turns_indexed = False
        self._last_turn: dict[str, TurnRef] = {}  # agent -> its latest stub turn
        self._store: RunStore | None = None
        self._line_cache: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._cache_lock = threading.Lock()

    # ------------------------------------------------------------------ folding

    def apply(self, chunk: ParsedChunk) -> list[RawEvent]:
        """Fold a parsed chunk; returns the events folded (turn stubs are counted, not returned)."""
        state = self.state
        folded: list[RawEvent] = []
        for item in chunk.items:
            if isinstance(item, TurnRef):
                self.turns.append(item)
                if item.role is None:  # a stub: count it now, details come from index_turns
                    rec = state._agent(item.agent)
                    rec.turns += 1
                    state.events += 1
                    self._last_turn[item.agent] = item
            else:
                state.apply(item)
                folded.append(item)
                if item.kind == "agent.turn":
                    self._last_turn.pop(str(item.data.agent), None)
                elif item.kind == "trial.proposed":
                    self._last_turn.pop(str(item.data.agent), None)
        self.torn.extend(chunk.torn)
        self.offset = max(self.offset, chunk.end_offset)
        return folded

    def settle_stub_activity(self) -> None:
        """Give agents whose latest event was a stub turn the activity line RunState would have."""
        for agent, ref in list(self._last_turn.items()):
            raw = self.read_line(ref)
            if raw is None:
                continue
            ref.fill(raw)
            d = raw.get("data") or {}
            rec = self.state._agent(agent)
            what = d.get("tool") or d.get("role") or ""
            body = (d.get("text") or d.get("result") or "").strip()
            rec.last_activity = f"{what}: {body.splitlines()[0][:80] if body else ''}"
            rec.last_ts = raw.get("ts", "")
        self._last_turn.clear()
        if self.turns and self.turns[-1].seq >= 0:
            self.state.last_seq = max(self.state.last_seq, self.turns[-1].seq)

    def index_turns(self, cancelled: Callable[[], bool] = lambda: False) -> dict[str, tuple[int, int, float]]:
        """Parse every stub turn (role, tool, trial, step); returns per-agent token/cost totals.

        Safe to run in a worker while the UI reads: it only sets fields of existing TurnRefs
        from None to their value. The caller applies the returned totals on the UI thread.
        """
        totals: dict[str, tuple[int, int, float]] = {}
        stubs = [t for t in list(self.turns) if t.role is None]
        if not stubs:
            self.turns_indexed = True
            return totals
        with open(self.run_dir / EVENTS, "rb") as fh:
            fd = fh.fileno()
            for i, ref in enumerate(stubs):
                if i % 2048 == 0 and cancelled():
                    return totals
                try:
                    raw = _loads(os.pread(fd, ref.length, ref.offset))
                except ValueError:
                    ref.role = "error"
                    continue
                d = raw.get("data") or {}
                tin, tout, cost = totals.get(ref.agent, (0, 0, 0.0))
                totals[ref.agent] = (tin + int(d.get("tokens_in") or 0), tout + int(d.get("tokens_out") or 0),
                                     cost + float(d.get("cost_usd") or 0.0))
                ref.fill(raw)
        self.turns_indexed = True
        return totals

    def add_totals(self, totals: dict[str, tuple[int, int, float]]) -> None:
        for agent, (tin, tout, cost) in totals.items():
            rec = self.state._agent(agent)
            rec.tokens_in += tin
            rec.tokens_out += tout
            rec.cost_usd += cost

    # ------------------------------------------------------------------ lazy reads

    def read_line(self, ref: TurnRef) -> dict[str, Any] | None:
        """The parsed log line of one turn (LRU-cached; read with pread)."""
        with self._cache_lock:
            hit = self._line_cache.get(ref.offset)
            if hit is not None:
                self._line_cache.move_to_end(ref.offset)
                return hit
        try:
            with open(self.run_dir / EVENTS, "rb") as fh:
                raw = _loads(os.pread(fh.fileno(), ref.length, ref.offset))
        except (OSError, ValueError):
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
    error: str = ""
    size: int = -1  # bytes of the log when summarised

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
        sigma=s.sigma, direction=s.direction, started_ts=s.started_ts, last_ts=s.last_ts,
    )


def find_runs(runs_dir: Path) -> list[Path]:
    """Run directories under ``runs_dir`` (those with an events.jsonl), newest first."""
    if not runs_dir.is_dir():
        return []
    found = [p for p in runs_dir.iterdir() if (p / EVENTS).is_file()]
    return sorted(found, key=lambda p: (p / EVENTS).stat().st_mtime, reverse=True)


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
