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
* **Live readers tail by byte offset** (:class:`LogTail`): each poll reads only what was
  appended since the last one, and only complete lines.
* Blobs are content-addressed (``blobs/<sha256>``), written atomically, never changed.
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
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rrma.events import EVENT_TYPES, GENESIS, LogFormatError, build_line, compute_hash, parse_line

EVENTS = "events.jsonl"
LOCK = ".events.lock"
RUN_JSON = "run.json"


class RunNotFound(FileNotFoundError):
    """The path is not a run directory (it has no events.jsonl)."""


@dataclass
class TornLine:
    """A line that is not a valid event: a fragment left by a crash mid-write."""

    offset: int  # byte offset of the line's start
    length: int  # bytes, without the newline
    sealed: bool  # True when a newline follows (a later append sealed it)
    error: str


@dataclass
class ScanResult:
    events: list[Any] = field(default_factory=list)
    torn: list[TornLine] = field(default_factory=list)
    end_offset: int = 0  # offset just past the last complete line


def _lock_file(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    return fd


class RunStore:
    """Access to one run directory. Safe to share between threads; one per process is enough."""

    def __init__(self, run_dir: Path | str, *, create: bool = False) -> None:
        self.dir = Path(run_dir)
        self.events_path = self.dir / EVENTS
        self.blob_dir = self.dir / "blobs"
        self.trials_dir = self.dir / "trials"
        if create:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.blob_dir.mkdir(exist_ok=True)
            self.trials_dir.mkdir(exist_ok=True)
            self.events_path.touch(exist_ok=True)
        elif not self.events_path.exists():
            raise RunNotFound(f"{self.dir}: not a run directory (no {EVENTS})")
        self._tlock = threading.Lock()
        self._fd: int | None = None
        self._lock_fd: int | None = None
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
            for fd in (self._fd, self._lock_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fd = self._lock_fd = None

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
        # no cache: walk backwards block by block to the last complete valid line
        needs_seal = os.pread(fd, 1, size - 1) != b"\n"
        pos = size
        buf = b""
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            buf = os.pread(fd, step, pos) + buf
            lines = buf.split(b"\n")
            if needs_seal:
                lines = lines[:-1]  # the unterminated fragment
            elif lines and lines[-1] == b"":
                lines = lines[:-1]
            complete = lines if pos == 0 else lines[1:]  # the first piece may be cut off
            for line in reversed(complete):
                found = _head_of(line)
                if found is not None:
                    return found[0], found[1], needs_seal
            if pos > 0:
                buf = lines[0] if lines else b""
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

    def append(self, kind: str, actor: str, data: BaseModel | dict[str, Any]) -> Any:
        """Append one event and return it (as its Event model)."""
        return self.append_many([(kind, actor, data)])[0]

    def append_many(self, items: list[tuple[str, str, BaseModel | dict[str, Any]]]) -> list[Any]:
        """Append several events atomically (one lock, one write, consecutive seqs)."""
        with self._tlock:
            fd, lock_fd = self._open()
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                seq, prev, needs_seal = self._chain_head(fd)
                chunks = []
                out = []
                if needs_seal:
                    self.sealed_offsets.append(_torn_start(fd))
                    chunks.append("\n")
                for kind, actor, data in items:
                    seq += 1
                    line, prev = build_line(seq, prev, kind, actor, data)
                    chunks.append(line + "\n")
                    out.append(line)
                payload = "".join(chunks).encode("utf-8")
                written = os.write(fd, payload)
                if written != len(payload):  # disk full: the fragment is torn, sealed next time
                    raise OSError(f"short write to {self.events_path}: {written} of {len(payload)} bytes")
                self._head = (os.fstat(fd).st_size, seq, prev)
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
        return [EVENT_TYPES[json.loads(line)["kind"]].model_validate_json(line) for line in out]

    def fsync(self) -> None:
        with self._tlock:
            if self._fd is not None:
                os.fsync(self._fd)

    # -------------------------------------------------------------- reads

    def scan(self, start: int = 0) -> ScanResult:
        """Parse every complete line from byte ``start``; torn lines are reported, not raised."""
        result = ScanResult(end_offset=start)
        if not self.events_path.exists():
            return result
        with open(self.events_path, "rb") as fh:
            fh.seek(start)
            offset = start
            for raw in fh:
                if not raw.endswith(b"\n"):
                    result.torn.append(TornLine(offset, len(raw), False, "unterminated final line"))
                    break
                line = raw[:-1]
                if line.strip():
                    try:
                        result.events.append(parse_line(line))
                    except LogFormatError as exc:
                        result.torn.append(TornLine(offset, len(line), True, str(exc)))
                offset += len(raw)
                result.end_offset = offset
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

    # -------------------------------------------------------------- run.json and views

    def read_run_json(self) -> dict[str, Any]:
        path = self.dir / RUN_JSON
        return json.loads(path.read_text()) if path.exists() else {}

    def write_run_json(self, info: dict[str, Any]) -> None:
        write_atomic(self.dir / RUN_JSON, json.dumps(info, indent=2, sort_keys=True, default=str) + "\n")

    def trial_dir(self, trial_id: str) -> Path:
        return self.trials_dir / trial_id


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


class LogTail:
    """Incremental reader: each :meth:`poll` returns events appended since the previous poll.

    Keeps a byte offset; reads only new bytes; a partial last line stays unread until complete.
    """

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.torn: list[TornLine] = []

    def poll(self, max_bytes: int = 64 * 1024 * 1024) -> list[Any]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size <= self.offset:
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(min(size - self.offset, max_bytes))
        end = data.rfind(b"\n")
        if end < 0:
            return []
        events = []
        pos = self.offset
        for line in data[: end + 1].split(b"\n")[:-1]:
            if line.strip():
                try:
                    events.append(parse_line(line))
                except LogFormatError as exc:
                    self.torn.append(TornLine(pos, len(line), True, str(exc)))
            pos += len(line) + 1
        self.offset += end + 1
        return events


# ----------------------------------------------------------------------------- verify


@dataclass
class VerifyReport:
    ok: bool
    events: int
    errors: list[str]
    warnings: list[str]


def verify_chain(store: RunStore) -> VerifyReport:
    """Recompute every hash and check the chain and seq; torn lines are warnings.

    Errors: a line whose hash does not match its content, a ``prev`` that is not the previous
    valid line's hash, a ``seq`` that is not the previous plus one, an invalid event.
    """
    errors: list[str] = []
    warnings: list[str] = []
    prev = GENESIS
    expected_seq = 0
    count = 0
    with open(store.events_path, "rb") as fh:
        offset = 0
        for raw in fh:
            line = raw.rstrip(b"\n")
            terminated = raw.endswith(b"\n")
            here = offset
            offset += len(raw)
            if not line.strip():
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
                parse_line(line)
            except LogFormatError as exc:
                errors.append(f"seq {obj.get('seq')} (byte {here}): {exc}")
            if obj.get("seq") != expected_seq:
                errors.append(f"byte {here}: seq {obj.get('seq')} where {expected_seq} was expected (gap or reorder)")
            if obj.get("prev") != prev:
                errors.append(f"seq {obj.get('seq')}: prev does not match the previous event's hash (chain broken)")
            digest = compute_hash(obj) if "prev" in obj else None
            if digest != obj.get("hash"):
                errors.append(f"seq {obj.get('seq')}: hash mismatch (the line was modified)")
            prev = obj.get("hash", prev)
            seq = obj.get("seq")
            expected_seq = (seq if isinstance(seq, int) else expected_seq) + 1
            count += 1
    return VerifyReport(ok=not errors, events=count, errors=errors, warnings=warnings)


def iter_event_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset, raw line without newline) for every complete line: for fast bulk readers."""
    with open(path, "rb") as fh:
        offset = 0
        for raw in fh:
            if not raw.endswith(b"\n"):
                return
            yield offset, raw[:-1]
            offset += len(raw)
