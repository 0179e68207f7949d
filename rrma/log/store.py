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
  lock) the head record (``head.json``, rrma/log/head.py) is rewritten in place with one
  fixed-size ``pwrite``: the last event written and the byte size of the log after it.
  ``verify`` and the views check the end of the log against it (:func:`rrma.log.head.check_head`),
  so a cut tail or a replaced last line is an error, not an unnoticed shorter run; and the
  first append of a store refuses to extend a log that fails that check (:class:`LogDamaged`).
* **A line that is not UTF-8 is corruption, not a tear.** rrma writes UTF-8 and a crash only
  cuts a line short, so bytes that do not decode before a line's end were changed afterwards:
  :meth:`RunStore.scan` skips such a line like a torn one but marks it ``corrupt`` (with its line
  number), :func:`rrma.log.chain.verify_chain` reports it as an error, and :func:`check_readable` (the CLI's gate
  before it reads, exports or extends a run) refuses the run with :class:`RunUnreadable`, as it
  does a run whose ``events.jsonl``, ``run.json`` or ``head.json`` is not a regular file.

Every line is decoded by the log's one decoder (:mod:`rrma.log.codec`); the run directory's file
names are :mod:`rrma.log.layout`'s; the driver's lock is :mod:`rrma.log.driver_lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rrma.log.codec import InvalidEvent, LogEvent, decode_line
from rrma.log.events import GENESIS, build_line
from rrma.log.head import chain_link, check_head, encode_head, read_head
from rrma.log.layout import BLOBS, EVENTS, HEAD, LOCK, RUN_JSON, TRIALS, live_output_path
from rrma.log.tail import LineTail, LogTail, TornLine, lines_backwards, unreadable_line, utf8_damage


class RunNotFound(FileNotFoundError):
    """The path is not a run directory (it has no events.jsonl)."""


class LogDamaged(Exception):
    """The log does not end where its head record says: appending would hide that, so it is refused."""


class RunUnreadable(Exception):
    """The run cannot be read as one: a file of it is not a regular file, or its log holds bytes that are not UTF-8."""


@dataclass
class ScanResult:
    events: list[LogEvent] = field(default_factory=list)
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
        self.blob_dir = self.dir / BLOBS
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
                found = chain_link(line)
                if found is not None:
                    seq, digest = found
            return seq, digest, bool(tail)
        # no cache: walk backwards to the last complete valid line
        needs_seal = os.pread(fd, 1, size - 1) != b"\n"
        backwards = lines_backwards(fd, size)
        if needs_seal:
            next(backwards)  # the unterminated fragment
        for line in backwards:
            found = chain_link(line)
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
                if self._head is None:
                    self._check_head()
                seq, prev, needs_seal = self._chain_head(fd)
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

    def _check_head(self) -> None:
        """Refuse to extend a log whose end is not the head record's event (it was cut off or replaced).

        Without this, any later append would rewrite the head record to match the shorter log and
        erase the evidence. Checked on this store's first append (:func:`rrma.log.head.check_head`); a
        log that goes past the head record (a writer killed between its two writes) is fine, and so is
        a record line edited in place (the chain check names it; the record still says where the log
        ended). An unreadable record is left to ``verify``.
        """
        verdict = check_head(self.dir)
        if verdict.state in ("cut", "changed") and not verdict.modified:
            raise LogDamaged(f"{self.dir}: refusing to append: {verdict.detail} (`rrma-tui verify` reports it)")

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


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (readers see the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


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
