"""The checkpoint: a reader's fold of a run log saved at a line boundary, so an open folds only the lines after it.

A million events open in under a second rather than five or ten: the reader's folded state
(:class:`rrma.log.reader.LiveFold`) and the trace's turn index (rrma/log/turns.py) at a line
boundary of the log, saved to ``RUN/.checkpoint`` (or,
where the run directory cannot be written, ``$XDG_CACHE_HOME/rrma/checkpoints/<hash of the run's
path>``), so that an open restores them and folds only the lines appended since. The driver that
writes a run keeps one current as it goes and at ``run.finished`` (rrma/log/checkpointer.py: the
same :class:`~rrma.log.reader.RunReader` path as a view's), so even the first open of a big run is
fast; a view writes one after a fold at open when none was usable or the log grew past it. A
checkpoint is a cache, never a source of truth: the log stays the only truth, and a checkpoint
is used only when all of these hold, else it is ignored (the reason is kept in
``LiveFold.checkpoint.ignored``) and the log is folded from byte 0:

* its format version and the fingerprint of the folding code (``CHECKPOINT_VERSION``, the event
  schema version, the source of the modules that decode and fold: ``FOLDING_CODE``) are this
  process's, so an edit of the fold never meets a state folded by the old one;
* the log still holds the bytes it was taken at: the log is at least ``offset`` bytes long, the
  first and the last 64 KiB before ``offset`` hash as they did, and the last line before
  ``offset`` still has the ``seq`` and chain ``hash`` it had (a truncated, replaced or rewritten
  log fails this; the log is append-only, so the bytes before ``offset`` never legitimately change);
* each section's CRC-32 matches and the records have exactly the fields of this code's records.

It covers only complete lines the fold had consumed (``offset`` is always a line boundary, so a
line a writer is still appending is left to the tail) and counts the unreadable lines
before ``offset`` (``LiveFold.torn`` is the same as after a full fold). The turn index is kept as
``array`` columns (offsets, lengths, seqs, steps, and indexes into string tables) and turned back
into :class:`TurnRef` objects in the index worker, after the first paint.

The format is one we control: a magic line, a JSON header and sections (JSON from orjson, and
raw ``array`` bytes), so loading a planted file can at worst show a wrong state, never run code
(no pickle or marshal). The file is also used only when it is a regular file owned by this user
and not writable by others. It is written in a thread, off the UI thread: the state is
serialized under the fold's lock right after the fold (the UI thread folds new lines under the
same lock, so the snapshot is exactly the state at ``offset``), and the file is written with the
turn index once the index worker has it, to a temporary file then ``os.replace``. It is written
when none was usable or the log grew ``CHECKPOINT_REFRESH_BYTES`` past it, and only for logs of
at least ``CHECKPOINT_MIN_BYTES`` (a small log folds faster than a checkpoint loads); a view
does not checkpoint a live run again while it is open (its driver does, or the next open). A
failure to write is recorded in ``LiveFold.checkpoint.error`` and never fails the open.

This module is the format and its rules (:func:`restore_checkpoint`, :class:`CheckpointPlan`); it
knows the reader's fold only as a :class:`FoldedAt` (what is saved and given back), so the reader
imports it and not the other way round.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from rrma.log.codec import Torn
from rrma.log.events import SCHEMA_VERSION
from rrma.log.layout import EVENTS
from rrma.log.state import AgentRecord, RunState, TrialRecord
from rrma.log.summary import summary_fields
from rrma.log.turns import TurnIndex, TurnRef

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


FOLDING_CODE = ("state", "events", "codec", "tail", "turns", "reader", "checkpoint")  # rrma/log/<name>.py


def _code_fingerprint() -> str:
    """What a usable checkpoint was written by: this layout, this event schema, this decoding and folding code."""
    digest = hashlib.sha256(f"{CHECKPOINT_VERSION} {SCHEMA_VERSION} {sys.byteorder}".encode())
    for name in FOLDING_CODE:
        try:
            digest.update(Path(__file__).with_name(f"{name}.py").read_bytes())
        except OSError:  # the code cannot be read back: match no checkpoint, ever
            digest.update(os.urandom(16))
    return digest.hexdigest()


_FINGERPRINT = _code_fingerprint()  # at import: the code that runs is the code that was hashed


@dataclass
class CheckpointStatus:
    """What an open did with checkpoints (the fold's ``checkpoint``; for tests, the bench, the curious)."""

    loaded: Path | None = None  # the checkpoint the fold started from; None: the log was folded from byte 0
    offset: int = 0  # the log bytes that checkpoint covered
    ignored: list[str] = field(default_factory=list)  # each checkpoint found but not used, and why
    due: bool = False  # a new one is planned: written once the turns are indexed
    written: Path | None = None
    error: str = ""  # why a due checkpoint was not written
    done: threading.Event = field(default_factory=threading.Event)  # the write finished (or was given up)

    def wait(self, timeout: float | None = None) -> Path | None:
        """The checkpoint this open wrote, once written (None: none was due, or it could not be written).

        The write starts when the turns are indexed (:meth:`rrma.log.reader.LiveFold.index_turns`); until then this
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
class FoldedAt:
    """A reader's fold at a line boundary of the log: what a checkpoint keeps, and gives back on a restore."""

    state: RunState
    torn: list[Torn]  # the unreadable lines before ``offset``
    activity_seq: dict[str, int]  # agent -> seq of the event behind its last activity line
    last_event_offset: int  # where the last line the fold decoded itself starts (-1: none)
    turns: list[TurnRef]  # turn lines the fold decoded itself (a tail's; the stubbed ones are the turn index)
    offset: int  # the log bytes it covers


@dataclass
class Restored:
    """A checkpoint put back: the fold it held, and its turn index (read by the reader's index worker)."""

    folded: FoldedAt
    turns: RestoredTurns


@dataclass
class _Checkpoint:
    """A checkpoint file whose header passed every check; its state section is read, the rest is not."""

    path: Path
    offset: int
    state: bytes
    turns: RestoredTurns

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
            turns = RestoredTurns(os.dup(fh.fileno()), sections)
        finally:
            fh.close()
        return cls(path, header["log"]["offset"], state, turns)

    def restore(self) -> Restored:
        """The checkpoint's fold (its turn index waits in ``turns`` for the reader's index worker)."""
        with _no_cyclic_gc():
            doc = orjson.loads(self.state)
            state = _state_from(doc)
        info = doc["model"]
        torn = [Torn(int(offset), str(error)) for offset, error in info["torn"]]
        activity = {str(agent): int(seq) for agent, seq in info["activity_seq"].items()}
        last_event = int(info["last_event_offset"])
        turns = [TurnRef(*row) for row in info["turns"]]  # turn lines the fold parsed itself (not stubbed)
        return Restored(FoldedAt(state, torn, activity, last_event, turns, self.offset), self.turns)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic GC while a checkpoint is turned back into objects (a million new containers:
    it would otherwise scan the growing heap again and again, 3-5x the time); nothing restored is garbage.

    On the way out the new objects go straight to the oldest generation (``gc.freeze`` then
    ``gc.unfreeze``: a list splice), so the next young collections do not walk a million objects that
    will live as long as the fold (0.2 s of an open at a million events). Other objects young at that
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


class RestoredTurns:
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


class CheckpointPlan:
    """A checkpoint on its way to disk.

    :meth:`begin` (at the end of a load, on the loading thread) takes the fold's lock and starts a
    thread that serializes the fold (``folded()``) and releases the lock: the UI thread folds new
    lines under the same lock, so the snapshot is the fold at ``offset`` exactly. :meth:`start_writer`
    (from the index worker, with the turn index of the same ``offset``) writes the file in another thread.
    """

    def __init__(self, run_dir: Path, marks: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.marks = marks
        self.state_json: bytes | None = None
        self.header: dict[str, Any] = {}
        self.error = ""
        self.snapshot_done = threading.Event()

    @classmethod
    def begin(cls, run_dir: Path, offset: int, lock: threading.Lock, folded: Callable[[], FoldedAt],
              status: CheckpointStatus) -> CheckpointPlan | None:
        """Start the snapshot of the fold at ``offset`` (None: no checkpoint, ``status.error`` says why)."""
        try:
            with open(run_dir / EVENTS, "rb") as fh:
                plan = cls(run_dir, _log_marks(fh.fileno(), offset))
        except (OSError, ValueError) as exc:  # the log went away or changed under the load: no checkpoint
            status.error = str(exc)
            return None
        status.due = True
        lock.acquire()  # released by the snapshot thread: nothing is folded until it has the state
        try:
            threading.Thread(target=plan._snapshot, args=(lock, folded), name="rrma-checkpoint-snapshot",
                             daemon=True).start()
        except RuntimeError as exc:  # no thread to be had: no checkpoint
            lock.release()
            status.error = str(exc)
            status.done.set()
            return None
        return plan

    def _snapshot(self, lock: threading.Lock, folded: Callable[[], FoldedAt]) -> None:
        try:
            at = folded()
            state = at.state
            parts = [b'{"fields":', orjson.dumps({name: getattr(state, name) for name in _STATE_FIELDS}),
                     b',"agents":', orjson.dumps({name: vars(rec) for name, rec in state.agents.items()}),
                     b',"model":', orjson.dumps({"torn": [[t.offset, t.error] for t in at.torn],
                                                 "activity_seq": at.activity_seq,
                                                 "last_event_offset": at.last_event_offset,
                                                 "turns": [dataclasses.astuple(t) for t in at.turns]}),
                     b',"trials":{']
            trials = list(state.trials.items())
            for start in range(0, len(trials), _TRIAL_CHUNK):
                chunk = orjson.dumps({tid: vars(rec) for tid, rec in trials[start: start + _TRIAL_CHUNK]})
                parts.append((b"," if start else b"") + chunk[1:-1])
                time.sleep(0)  # let the UI thread paint (it cannot fold meanwhile: the lock)
            parts.append(b"}}")
            self.state_json = b"".join(parts)
            self.header = {"version": CHECKPOINT_VERSION, "fingerprint": _FINGERPRINT, "log": self.marks,
                           "run_id": state.run_id, "summary": summary_fields(state, len(at.torn))}
        except (TypeError, ValueError) as exc:  # a value orjson cannot write (orjson.JSONEncodeError is a TypeError)
            self.error = f"the state cannot be saved: {exc}"
        finally:
            lock.release()
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


def restore_checkpoint(run_dir: Path, status: CheckpointStatus) -> Restored | None:
    """The run's newest valid checkpoint, put back (None: none is usable).

    Every checkpoint found but not used is listed with the reason in ``status.ignored``; the one used
    is ``status.loaded`` (and the bytes it covers ``status.offset``).
    """
    found: list[_Checkpoint] = []
    try:
        log = open(run_dir / EVENTS, "rb")
    except OSError:
        return None
    with log:
        size = os.fstat(log.fileno()).st_size
        for path in checkpoint_paths(run_dir):
            try:
                found.append(_Checkpoint.read(path, log.fileno(), size))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError) as exc:
                status.ignored.append(f"{path}: {why_ignored(exc)}")
    for checkpoint in sorted(found, key=lambda c: c.offset, reverse=True):
        try:
            restored = checkpoint.restore()
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a record not as this code writes it
            status.ignored.append(f"{checkpoint.path}: {why_ignored(exc)}")
            continue
        status.loaded, status.offset = checkpoint.path, checkpoint.offset
        return restored
    return None


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


def why_ignored(exc: BaseException) -> str:
    """Why a checkpoint was not used, in one line (its own words for a mismatch or an OSError)."""
    return str(exc) if isinstance(exc, (CheckpointMismatch, OSError)) else f"{type(exc).__name__}: {exc}"
