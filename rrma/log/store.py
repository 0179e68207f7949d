"""RunStore: the run directory, its append-only event log, blobs and derived views.

The log (``events.jsonl``) is the only source of truth. Invariants this module keeps:

* **One writer at a time, any number of threads and processes.** An append takes a thread
  lock and an exclusive ``flock`` on ``.events.lock``, reads the chain head (seq, hash) from
  the end of the file (cached while the file size is unchanged), and writes the whole line with
  one ``write`` on an ``O_APPEND`` descriptor. Lines never interleave and ``seq`` is gap-free.
* **A torn final line never hides earlier events.** A crash mid-write leaves a fragment with
  no newline. Readers skip it (and report its offset); the next append first seals it with a
  newline, so the fragment stays as a dead line and the chain continues from the last valid
  event. Nothing is ever rewritten or truncated.
* **Readers tail by byte offset** through one line reader, :mod:`rrma.log.tail` (``tail()`` and
  :meth:`RunStore.scan` are its validated form): each read takes only what was appended since
  the last one, and only complete lines.
* Blobs are content-addressed (``blobs/<sha256>``), written atomically, never changed.
* **The chain head also lives outside the log.** After every successful append (inside the
  lock) ``head.json`` = {seq, hash, offset, ts, check} is rewritten in place with one
  fixed-size ``pwrite``: the last event written and the byte size of the log after it.
  ``verify`` compares the end of the log with it, so a cut tail or a replaced last line is an
  error, not an unnoticed shorter run.
* **A line that is not UTF-8 is corruption, not a tear.** rrma writes UTF-8 and a crash only
  cuts a line short, so bytes that do not decode before a line's end were changed afterwards:
  :meth:`RunStore.scan` skips such a line like a torn one but marks it ``corrupt`` (with its line
  number), :func:`verify_chain` reports it as an error, and :func:`check_readable` (the CLI's gate
  before it reads, exports or extends a run) refuses the run with :class:`RunUnreadable`, as it
  does a run whose ``events.jsonl``, ``run.json`` or ``head.json`` is not a regular file.
* **One driver per run** (:class:`DriverLock`): the process that runs the loop holds an
  exclusive ``flock`` on ``.driver.lock`` for its whole life and names itself in
  ``driver.json``; a second driver fails at once with :class:`RunLocked`. The kernel drops the
  lock when the holder dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rrma.log.codec import InvalidEvent, LogEvent, decode, decode_line
from rrma.log.events import GENESIS, build_line, compute_hash
from rrma.log.tail import LineTail, LogTail, TornLine, unreadable_line, utf8_damage

EVENTS = "events.jsonl"
LOCK = ".events.lock"
RUN_JSON = "run.json"
HEAD = "head.json"
HEAD_SIZE = 256  # bytes of the head record (fixed, so rewriting it in place never changes its size)
DRIVER_LOCK = ".driver.lock"
DRIVER_JSON = "driver.json"
TRIALS = "trials"  # RUN/trials/<id>/: a trial's workspace (work/), its oracle's directory, its live output
LIVE_OUTPUT = "live.log"


def live_output_path(trials_dir: Path | str, trial_id: str) -> Path:
    """Where a running trial's program output is appended while it runs: ``TRIALS/<id>/live.log``.

    The one rule the local executor (which passes it to spawn, rrma.contain.live) and the views (which
    follow it: ``rrma-tui``'s trial view) share. Beside the trial's workspace, never in it: inside the
    run directory, which the sandbox hides from every trial program. Not the record (the log blob is);
    the executor removes it when the trial's evaluation ends.
    """
    return Path(trials_dir) / trial_id / LIVE_OUTPUT


class RunNotFound(FileNotFoundError):
    """The path is not a run directory (it has no events.jsonl)."""


class LogDamaged(Exception):
    """The log does not end where its head record says: appending would hide that, so it is refused."""


class RunLocked(Exception):
    """Another live process is driving this run (it holds the run's driver lock)."""


class RunUnreadable(Exception):
    """The run cannot be read as one: a file of it is not a regular file, or its log holds bytes that are not UTF-8."""


@dataclass
class HeadRecord:
    """``head.json``: the last event an append wrote, and the log's size just after it."""

    seq: int
    hash: str
    offset: int
    ts: str


def _head_check(seq: int, digest: str, offset: int, ts: str) -> str:
    return hashlib.sha256(f"{seq}|{digest}|{offset}|{ts}".encode()).hexdigest()[:16]


def encode_head(seq: int, digest: str, offset: int, ts: str) -> bytes:
    """The head record's bytes: one JSON line padded with spaces to exactly :data:`HEAD_SIZE` bytes."""
    check = _head_check(seq, digest, offset, ts)  # digest and ts are hex and ISO 8601: nothing to escape
    body = f'{{"seq": {seq}, "hash": "{digest}", "offset": {offset}, "ts": "{ts}", "check": "{check}"}}'.encode()
    return body.ljust(HEAD_SIZE - 1) + b"\n"


def read_head(run_dir: Path | str) -> HeadRecord | None:
    """The run's head record; None when there is none. Raises ValueError when it is unreadable.

    The record is rewritten in place (one ``pwrite`` of a fixed size), so a read that races a
    write can see a mix of two records; its ``check`` field catches that and the read is retried.
    """
    path = Path(run_dir) / HEAD
    problem = ""
    for attempt in range(5):
        if attempt:
            time.sleep(0.002 * attempt)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:  # a directory, unreadable: a damaged record, for verify to report
            raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        try:
            obj = json.loads(raw)
            record = HeadRecord(seq=int(obj["seq"]), hash=str(obj["hash"]), offset=int(obj["offset"]),
                                ts=str(obj["ts"]))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            problem = f"not a head record ({exc})"
            continue
        if obj.get("check") == _head_check(record.seq, record.hash, record.offset, record.ts):
            return record
        problem = "its check field does not match its content"
    raise ValueError(f"{path}: {problem}")


@dataclass
class ScanResult:
    events: list[Any] = field(default_factory=list)
    torn: list[TornLine] = field(default_factory=list)
    end_offset: int = 0  # offset just past the last complete line

    @property
    def corrupt(self) -> list[TornLine]:
        """The skipped lines that are not UTF-8 (changed after they were written; see :func:`utf8_damage`)."""
        return [t for t in self.torn if t.corrupt]


def _lock_file(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    return fd


class RunStore:
    """Access to one run directory. Safe to share between threads; one per process is enough."""

    def __init__(self, run_dir: Path | str, *, create: bool = False) -> None:
        self.dir = Path(run_dir)
        self.events_path = self.dir / EVENTS
        self.blob_dir = self.dir / "blobs"
        self.trials_dir = self.dir / TRIALS
        if create:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.blob_dir.mkdir(exist_ok=True)
            self.trials_dir.mkdir(exist_ok=True)
            self.events_path.touch(exist_ok=True)
        elif not self.events_path.exists():
            raise RunNotFound(f"{self.dir}: not a run directory (no {EVENTS})")
        elif not self.events_path.is_file():
            raise RunUnreadable(f"{self.events_path}: {_not_a_file(self.events_path)}: the run directory is damaged")
        self._tlock = threading.Lock()
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._head_fd: int | None = None  # head.json, rewritten in place after every append
        self._head: tuple[int, int, str] | None = None  # (file size, last seq, last hash)
        self.sealed_offsets: list[int] = []  # torn lines this process sealed

    @property
    def run_id(self) -> str:
        return self.dir.name

    # -------------------------------------------------------------- appends

    def _open(self) -> tuple[int, int]:
        if self._fd is None:
            self._fd = os.open(self.events_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            self._lock_fd = _lock_file(self.dir / LOCK)
        assert self._lock_fd is not None
        return self._fd, self._lock_fd

    def close(self) -> None:
        with self._tlock:
            for fd in (self._fd, self._lock_fd, self._head_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fd = self._lock_fd = self._head_fd = None

    def _chain_head(self, fd: int) -> tuple[int, str, bool]:
        """(last seq, last hash, needs_seal) of the file as it is now; caller holds the lock."""
        size = os.fstat(fd).st_size
        if self._head is not None and self._head[0] == size:
            return self._head[1], self._head[2], False
        if size == 0:
            return -1, GENESIS, False
        start = self._head[0] if self._head is not None and self._head[0] < size else None
        if start is not None:
            # read forward from the cached offset: only what other writers appended since
            data = os.pread(fd, size - start, start)
            seq, digest = self._head[1], self._head[2]  # type: ignore[index]
            lines = data.split(b"\n")
            tail = lines.pop()  # b"" when the file ends with a newline
            for line in lines:
                found = _head_of(line)
                if found is not None:
                    seq, digest = found
            return seq, digest, bool(tail)
        # no cache: walk backwards to the last complete valid line
        needs_seal = os.pread(fd, 1, size - 1) != b"\n"
        backwards = _lines_backwards(fd, size)
        if needs_seal:
            next(backwards)  # the unterminated fragment
        for line in backwards:
            found = _head_of(line)
            if found is not None:
                return found[0], found[1], needs_seal
        return -1, GENESIS, needs_seal

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last valid event, read from the end of the file (-1, GENESIS if none)."""
        fd = os.open(self.events_path, os.O_RDONLY)
        try:
            saved, self._head = self._head, None
            seq, digest, _ = self._chain_head(fd)
            self._head = saved
            return seq, digest
        finally:
            os.close(fd)

    def append(self, kind: str, actor: str, data: BaseModel | dict[str, Any]) -> LogEvent:
        """Append one event and return it (decoded, as every reader reads it)."""
        return self.append_many([(kind, actor, data)])[0]

    def append_many(self, items: list[tuple[str, str, BaseModel | dict[str, Any]]]) -> list[LogEvent]:
        """Append several events atomically (one lock, one write, consecutive seqs)."""
        with self._tlock:
            fd, lock_fd = self._open()
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                first = self._head is None
                seq, prev, needs_seal = self._chain_head(fd)
                if first:
                    self._check_head(seq, prev)
                chunks = []
                out = []
                if needs_seal:
                    self.sealed_offsets.append(_torn_start(fd))
                    chunks.append("\n")
                for kind, actor, data in items:
                    seq += 1
                    line, prev = build_line(seq, prev, kind, actor, data, self.put_blob)
                    chunks.append(line + "\n")
                    out.append(line)
                payload = "".join(chunks).encode("utf-8")
                written = os.write(fd, payload)
                if written != len(payload):  # disk full: the fragment is torn, sealed next time
                    raise OSError(f"short write to {self.events_path}: {written} of {len(payload)} bytes")
                size = os.fstat(fd).st_size
                self._head = (size, seq, prev)
                with contextlib.suppress(OSError):  # the events are in the log; verify reports a lagging head
                    self._write_head(seq, prev, size)
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
        return [decode_line(line) for line in out]

    def _check_head(self, seq: int, digest: str) -> None:
        """Refuse to extend a log whose end is not the head record's event (it was cut off or replaced).

        Without this, any later append would rewrite the head record to match the shorter log and
        erase the evidence. Checked on this store's first append; a log that goes past the head
        record (a writer killed between its two writes) is fine. An unreadable record is left to
        ``verify``.
        """
        try:
            record = read_head(self.dir)
        except ValueError:
            return
        if record is None or record.seq < seq or (record.seq == seq and record.hash == digest):
            return
        if record.seq > seq:
            found = f"the log ends at seq {seq}"
        else:
            found = f"event seq {seq} has hash {digest[:16]}"
        raise LogDamaged(f"{self.dir}: refusing to append: {found}, but head.json records seq {record.seq} "
                         f"(hash {record.hash[:16]}): the end of the log was cut off or replaced "
                         "(`rrma-tui verify` reports it)")

    def _write_head(self, seq: int, digest: str, size: int) -> None:
        """Rewrite ``head.json`` in place; the caller holds the append lock.

        One ``pwrite`` of :data:`HEAD_SIZE` bytes at offset 0 of a file that never changes size:
        a killed process leaves the old record or the new one. (A temp file renamed over the
        record costs 100-400 us on ext4, which flushes a file renamed or truncated over another:
        several times the append itself.)
        """
        fd = self._head_fd
        if fd is None or os.fstat(fd).st_nlink == 0:  # first append, or head.json was deleted meanwhile
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._head_fd = fd = os.open(self.dir / HEAD, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        ts = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        os.pwrite(fd, encode_head(seq, digest, size, ts), 0)

    def fsync(self) -> None:
        with self._tlock:
            if self._fd is not None:
                os.fsync(self._fd)

    # -------------------------------------------------------------- reads

    def scan(self, start: int = 0) -> ScanResult:
        """Parse every complete line from byte ``start`` (a :class:`~rrma.log.tail.LogTail` read to the end);
        torn lines are reported, not raised, and so is an unterminated final line."""
        tail = LogTail(self.events_path, start, count_lines=start == 0)  # line numbers only when reading from the start
        result = ScanResult(events=tail.poll(None), torn=tail.torn, end_offset=tail.offset)
        fragment = tail.line_tail.unterminated()
        if fragment:
            result.torn.append(unreadable_line(fragment, tail.offset, tail.number, False, "unterminated final line"))
        return result

    def events(self) -> list[Any]:
        return self.scan().events

    def tail(self, offset: int = 0) -> LogTail:
        return LogTail(self.events_path, offset)

    # -------------------------------------------------------------- blobs

    def put_blob(self, content: bytes | str) -> str:
        data = content.encode("utf-8") if isinstance(content, str) else content
        digest = hashlib.sha256(data).hexdigest()
        path = self.blob_dir / digest
        if not path.exists():
            self.blob_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.blob_dir, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        return digest

    def get_blob(self, digest: str) -> bytes:
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a blob id: {digest!r}")
        return (self.blob_dir / digest).read_bytes()

    def blob_text(self, digest: str) -> str:
        return self.get_blob(digest).decode("utf-8", errors="replace")

    def put_json_blob(self, obj: Any) -> str:
        return self.put_blob(json.dumps(obj, sort_keys=True, ensure_ascii=False))

    def get_json_blob(self, digest: str) -> Any:
        return json.loads(self.get_blob(digest))

    def manifest_files(self, manifest_blob: str) -> dict[str, str]:
        """A workspace snapshot's files (path -> text) from its manifest blob (path -> blob digest).

        The one reconstruction of a trial's files from the blob store: the driver's ledger and the dataset
        export (rrma/train/dataset.py) both read through it. OSError / ValueError for a missing or bad blob."""
        manifest = self.get_json_blob(manifest_blob)
        if not isinstance(manifest, dict):
            raise ValueError(f"blob {manifest_blob[:12]} is not a manifest (path -> blob)")
        return {path: self.blob_text(digest) for path, digest in manifest.items()}

    # -------------------------------------------------------------- run.json and views

    def write_run_json(self, info: dict[str, Any]) -> str:
        """Write ``run.json``; returns the sha256 of its bytes, for the log to record (``run_json_sha256``)."""
        text = json.dumps(info, indent=2, sort_keys=True, default=str) + "\n"
        write_atomic(self.dir / RUN_JSON, text)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def trial_dir(self, trial_id: str) -> Path:
        return self.trials_dir / trial_id

    def live_output_path(self, trial_id: str) -> Path:
        """The trial's live-output file (:func:`live_output_path`)."""
        return live_output_path(self.trials_dir, trial_id)


class DriverLock:
    """The run's driver lock: held by the one process that runs the loop on this run directory.

    An exclusive, non-blocking ``flock`` on ``RUN/.driver.lock`` (the descriptor is close-on-exec,
    so trial programs do not inherit it) plus ``RUN/driver.json`` = {pid, host, started} naming
    the holder. The kernel releases the lock when the holder exits or is killed, so a stale
    ``driver.json`` never blocks anyone: the lock is the truth, the file only says who.
    """

    def __init__(self, run_dir: Path | str) -> None:
        self.dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> DriverLock:
        fd = os.open(self.dir / DRIVER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            for attempt in range(5):  # rrma.log.control.live_driver probes with a shared lock for microseconds
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == 4:
                        raise
                    time.sleep(0.02)
        except BlockingIOError:
            os.close(fd)
            raise RunLocked(f"{self.dir}: another process is driving this run ({self.holder()}); "
                            "wait for it to finish or stop it first") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")}
        write_atomic(self.dir / DRIVER_JSON, json.dumps(info) + "\n")
        return self

    def holder(self) -> str:
        """Who holds the lock, as driver.json says ("pid N on HOST since T")."""
        try:
            info = json.loads((self.dir / DRIVER_JSON).read_text())
            return f"pid {info['pid']} on {info['host']} since {info['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown: driver.json is missing or unreadable"

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            (self.dir / DRIVER_JSON).unlink()  # while still locked: no new holder has written it yet
        with contextlib.suppress(OSError):
            os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> DriverLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc: object) -> None:
        self.release()


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (readers see the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _head_of(line: bytes) -> tuple[int, str] | None:
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("seq"), int) and isinstance(obj.get("hash"), str):
        return obj["seq"], obj["hash"]
    return None


def _lines_backwards(fd: int, end: int, block: int = 65536) -> Iterator[bytes]:
    """The lines of the file's first ``end`` bytes, last first (without their newlines; the piece after the
    last newline first of all, b"" when the file ends with one).

    Each byte is read once and each line joined once from the blocks it spans, so the walk is linear in
    what it reads however long a line is (a 50 MB line costs one pass, not one re-split per block).
    """
    pos = end
    pieces: list[bytes] = []  # the current line's parts, last part first
    while pos > 0:
        step = min(block, pos)
        pos -= step
        data = os.pread(fd, step, pos)
        stop = len(data)
        while (cut := data.rfind(b"\n", 0, stop)) >= 0:
            pieces.append(data[cut + 1 : stop])
            yield b"".join(reversed(pieces))
            pieces = []
            stop = cut
        pieces.append(data[:stop])
    yield b"".join(reversed(pieces))


def _torn_start(fd: int) -> int:
    size = os.fstat(fd).st_size
    pos = size
    while pos > 0:
        step = min(65536, pos)
        chunk = os.pread(fd, step, pos - step)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return pos - step + idx + 1
        pos -= step
    return 0


# ----------------------------------------------------------------------------- verify


@dataclass
class VerifyReport:
    ok: bool
    events: int
    errors: list[str]
    warnings: list[str]
    head_seq: int = -1  # the log's last valid event (-1 and GENESIS when there is none)
    head_hash: str = GENESIS
    checked: list[str] = field(default_factory=list)  # what was checked and held (for the "ok" line)
    mark: ChainMark | None = None  # where the check ended: a later one may start there (``since``)


@dataclass(frozen=True)
class ChainMark:
    """Where a chain check stopped: just past the last newline-terminated line, and the chain state there."""

    offset: int  # bytes of the log checked (a line boundary)
    prev: str  # the hash the next line's ``prev`` must be
    seq: int  # the next line's ``seq`` must be this plus one
    events: int  # valid events up to ``offset``
    head_record: bool  # run.started says the run keeps a head record


def verify_chain(store: RunStore, since: ChainMark | None = None) -> VerifyReport:
    """Recompute every hash and check the chain and seq, and the end of the log against ``head.json``.

    Errors: a line whose hash does not match its content, a ``prev`` that is not the previous
    valid line's hash, a ``seq`` that is not the previous plus one, an invalid event; a log whose
    last valid event is not the one the head record names (its end was cut off or replaced), or a
    missing head record where ``run.started`` says the run keeps one. Warnings: torn lines (a
    crash mid-write hides nothing), valid events after the head record (the writer died between
    the two writes), no head record in a run written before there was one.

    ``since``: the ``mark`` of an earlier check of this log; only the lines after it are checked (the
    caller vouches that the bytes before it are unchanged: :class:`rrma.log.chain.ChainCheck`).
    """
    errors: list[str] = []
    warnings: list[str] = []
    try:
        record = read_head(store.dir)  # before the scan: a live writer only moves it forward
    except ValueError as exc:
        errors.append(f"{exc}: the head record was damaged")
        record = None
        unreadable = True
    else:
        unreadable = False
    prev = GENESIS if since is None else since.prev
    expected_seq = 0 if since is None else since.seq + 1
    count = 0 if since is None else since.events
    last_seq, last_end = (-1, 0) if since is None else (since.seq, since.offset)
    marker = False if since is None else since.head_record  # run.started says the run keeps a head record
    at_head: tuple[str, int] | None = None  # (hash, end offset) of the event with the head record's seq
    if since is not None and record is not None and record.seq == since.seq:
        at_head = (since.prev, since.offset)
    offset = 0 if since is None else since.offset
    number = 0  # line numbers: counted from the start of what is read
    mark = ChainMark(offset, prev, expected_seq - 1, count, marker)
    with open(store.events_path, "rb") as fh:
        fh.seek(offset)
        for raw in fh:
            line = raw.rstrip(b"\n")
            terminated = raw.endswith(b"\n")
            here = offset
            offset += len(raw)
            number += 1
            if not line.strip():
                continue
            damage = utf8_damage(line)
            if damage is not None:  # not a tear: these bytes were changed after rrma wrote the line
                errors.append(f"line {number} (byte {here + damage[0]}): {damage[1]}: the log is corrupt (the line "
                              "was changed after it was written); it is skipped and the check goes on")
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
            except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
                where = "final line" if not terminated else "line"
                warnings.append(
                    f"torn {where} at byte {here} ({len(line)} bytes, crash mid-write): skipped; "
                    + ("the chain continues after it" if terminated else "`rrma-tui resume` seals it")
                )
                continue
            try:
                decode(obj)
            except InvalidEvent as exc:
                errors.append(f"seq {obj.get('seq')} (byte {here}): {exc}")
            if obj.get("seq") != expected_seq:
                errors.append(f"byte {here}: seq {obj.get('seq')} where {expected_seq} was expected (gap or reorder)")
            if obj.get("prev") != prev:
                errors.append(f"seq {obj.get('seq')}: prev does not match the previous event's hash (chain broken)")
            try:
                digest = compute_hash(obj) if "prev" in obj else None
            except ValueError:  # NaN or Infinity in the line: not canonical JSON, so never a line rrma wrote
                digest = None
            if digest != obj.get("hash"):
                errors.append(f"seq {obj.get('seq')}: hash mismatch (the line was modified)")
            if obj.get("kind") == "run.started" and isinstance(obj.get("data"), dict):
                marker = marker or obj["data"].get("head_record") is True
            prev = obj.get("hash", prev)
            seq = obj.get("seq")
            expected_seq = (seq if isinstance(seq, int) else expected_seq) + 1
            if isinstance(seq, int):
                last_seq = seq
            last_end = offset
            if record is not None and seq == record.seq:
                at_head = (str(obj.get("hash")), offset)
            count += 1
            if terminated:
                mark = ChainMark(offset, prev, expected_seq - 1, count, marker)
    size = offset
    report = VerifyReport(ok=False, events=count, errors=errors, warnings=warnings, head_seq=last_seq,
                          head_hash=prev if count else GENESIS, mark=mark)
    report.checked += ["chain intact", "seq gap-free"]
    if record is not None:
        said = f"seq {record.seq} (hash {record.hash[:16]}, log size {record.offset} bytes)"
        if at_head is None:
            errors.append(
                f"the head record says the log ends at {said}, but its last valid event is seq {last_seq} "
                f"(ending at byte {last_end}; the file is {size} bytes): the end of the log was cut off or replaced")
        elif at_head[0] != record.hash:
            errors.append(f"event seq {record.seq} has hash {at_head[0][:16]}, but the head record says {said}: "
                          "the end of the log was replaced")
        elif at_head[1] != record.offset:
            errors.append(f"event seq {record.seq} ends at byte {at_head[1]}, but the head record says {said}: "
                          "the log was rewritten")
        elif last_seq > record.seq:
            try:
                now = read_head(store.dir)
            except ValueError:
                now = None
            if now is None or now.seq < last_seq or (now.seq == last_seq and now.hash != prev):
                warnings.append(
                    f"the log has {last_seq - record.seq} valid event(s) after the head record's {said}: the "
                    "writer died between writing them and updating head.json (the next append updates it), "
                    "or something other than rrma appended them")
            else:
                report.checked.append(f"head record matches (seq {last_seq})")
        else:
            report.checked.append(f"head record matches (seq {record.seq})")
    elif marker and not unreadable:
        errors.append(f"head.json is missing, but run.started says this run keeps a head record: it was deleted, "
                      f"so a cut-off end of the log cannot be ruled out (the log ends at seq {last_seq})")
    elif count and not unreadable:
        warnings.append("no head record (head.json): the run was written by an older rrma, so a cut-off end of "
                        "the log cannot be detected")
    report.ok = not errors
    return report


def _not_a_file(path: Path) -> str:
    return "a directory, not a file" if path.is_dir() else "not a regular file"


FIRST_LINE_MAX = 16 << 20  # bytes read for the first line (run.started holds the task snapshot: kilobytes)


def check_first_event(run_dir: Path | str) -> None:
    """Raise :class:`RunUnreadable` when the run has no readable first event, though it should have one: the log
    is empty but ``head.json`` records events (the log was cut or replaced), or its first line, complete, is not
    a valid ``run.started`` event (bytes that are not UTF-8, not an event, another kind). An empty log without a
    head record (a run being created) and an unterminated first line without one (being written) pass.

    Reads the head record and the log's first line only: cheap enough for every scan of the runs list, where a
    run that fails it is listed as unreadable with this reason rather than as an empty run that never loads.
    """
    run_dir = Path(run_dir)
    path = run_dir / EVENTS
    try:
        head = read_head(run_dir)
    except ValueError:
        head = None  # a damaged head record: verify reports it; the first line still says whether the run reads
    try:
        with open(path, "rb") as fh:
            first = fh.readline(FIRST_LINE_MAX)
    except OSError as exc:
        raise RunUnreadable(f"{path}: cannot read the log ({exc.strerror or exc})") from None
    if not first:
        if head is not None:
            raise RunUnreadable(f"{path}: empty, but head.json records {head.seq + 1} event(s) ({head.offset} bytes): "
                                "the log was cut or replaced, and the run has no first event to read")
        return
    if not first.endswith(b"\n") and head is None:
        return  # the first append, still being written
    damage = utf8_damage(first)
    if damage is not None:
        raise RunUnreadable(f"{path}: line 1 (byte {damage[0]}): {damage[1]}: the run's first event cannot be read")
    try:
        event = decode_line(first.rstrip(b"\n"))
    except InvalidEvent as exc:
        raise RunUnreadable(f"{path}: line 1 is not a valid event ({exc}): the run's first event cannot be read") \
            from None
    if event.kind != "run.started":
        raise RunUnreadable(f"{path}: line 1 is a {event.kind} event, not run.started: the run's first event is "
                            "missing")


def check_readable(run_dir: Path | str, *, log: bool = True) -> None:
    """Raise :class:`RunUnreadable` unless the run can be read as one: ``events.jsonl`` a regular file,
    ``run.json`` and ``head.json`` regular files where they exist, and (with ``log``) every line of the
    log UTF-8 (the first corrupt line is named by line number and byte offset; ``verify_chain`` reports
    every one as an error, so ``rrma-tui verify`` checks with ``log=False``) and a first event to read
    (:func:`check_first_event`).

    Costs one read of the log at memory speed (1 MiB blocks decoded whole; a block that fails is
    looked at line by line), not a parse.
    """
    run_dir = Path(run_dir)
    for name in (EVENTS, RUN_JSON, HEAD):
        path = run_dir / name
        if (path.exists() or name == EVENTS) and not path.is_file():
            what = _not_a_file(path) if path.exists() else "missing"
            raise RunUnreadable(f"{path}: {what}: the run directory is damaged")
    path = run_dir / EVENTS
    if not log:
        return
    try:
        with open(path, "rb") as fh:
            offset, number = 0, 1
            while block := fh.read(1 << 20):
                if not block.endswith(b"\n"):
                    block += fh.readline()  # whole lines only (or the file's unterminated end)
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError:
                    at = offset
                    for i, line in enumerate(block.split(b"\n")):
                        damage = utf8_damage(line)
                        if damage is not None:
                            raise RunUnreadable(
                                f"{path}: line {number + i} (byte {at + damage[0]}): {damage[1]}: the log is corrupt "
                                "(changed after it was written); `rrma-tui verify` lists every problem") from None
                        at += len(line) + 1
                offset += len(block)
                number += block.count(b"\n")
    except OSError as exc:
        raise RunUnreadable(f"{path}: cannot read the log ({exc.strerror or exc})") from None
    check_first_event(run_dir)


def iter_event_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset, raw line without newline) for every complete line: for fast bulk readers."""
    return LineTail(path).lines()
