"""The head record (``head.json``) and the one check of a log's end against it.

Why it exists: a log is a hash chain, so a line changed in the middle breaks the chain; but a log
whose last lines were cut off (or replaced by other, validly chained ones) is still a valid chain,
only shorter. So after every append the store rewrites ``head.json`` = {seq, hash, offset, ts,
check}: the last event it wrote and the log's byte size just after it (one fixed-size ``pwrite``
of :data:`HEAD_SIZE` bytes; ``check`` catches a read that races a rewrite). A log that does not end
where its head record says was cut or changed after it was written.

:func:`check_head` is the one judgement of that, a :class:`HeadVerdict`, used by every reader that
cares: ``verify`` (rrma/log/chain.py, with the whole chain), the store before its first append (it
refuses to extend a damaged log: the append would rewrite the record and erase the evidence) and
every view (the timeline's badge). It reads the record, the log's size and the one line that ends
where the record says, so it costs the same at any log length:

* ``ok``: that line is the record's event (its seq and hash), and its hash matches its content;
* ``cut``: the log is shorter than the record says (its end was cut off);
* ``changed``: the line ending there is not the record's event (the end was replaced or rewritten),
  or it is but no longer hashes to its hash (it was edited in place: ``modified``);
* ``none``: there is no head record (a run written before there were any, or one deleted);
* ``unreadable``: the record (or the log) cannot be read.

Events after the record's are not a fault here: a writer killed between its two writes leaves them
(``verify`` warns), and a live writer appends them while this reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rrma.log.events import compute_hash
from rrma.log.layout import EVENTS, HEAD
from rrma.log.tail import lines_backwards

HEAD_SIZE = 256  # bytes of the head record (fixed, so rewriting it in place never changes its size)


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


HeadState = Literal["ok", "cut", "changed", "none", "unreadable"]


@dataclass(frozen=True)
class HeadVerdict:
    """What :func:`check_head` found (see the module docstring for each ``state``)."""

    state: HeadState
    detail: str  # one sentence: what was found, for a person
    record: HeadRecord | None = None
    modified: bool = False  # changed only in that the record's line no longer hashes to its hash (edited in place)


def chain_link(line: bytes) -> tuple[int, str] | None:
    """(seq, hash) of a line that is a JSON object with both (the chain's place after it); None otherwise."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and type(obj.get("seq")) is int and isinstance(obj.get("hash"), str):
        return obj["seq"], obj["hash"]
    return None


def check_head(run_dir: Path | str) -> HeadVerdict:
    """The log's end against its head record (see the module docstring). Reads the record and one line."""
    run_dir = Path(run_dir)
    try:
        record = read_head(run_dir)
    except ValueError as exc:
        return HeadVerdict("unreadable", f"{exc}: the head record was damaged")
    if record is None:
        return HeadVerdict("none", "no head record (head.json): a cut-off end of the log cannot be seen")
    path = run_dir / EVENTS
    said = f"seq {record.seq} (hash {record.hash[:16]}, log size {record.offset} bytes)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return HeadVerdict("unreadable", f"{path}: cannot read the log ({exc.strerror or exc})", record)
    try:
        size = os.fstat(fd).st_size
        if size < record.offset:
            return HeadVerdict("cut", f"the head record says the log ends at {said}, but {_last_event(fd, size)}: "
                                      "the end of the log was cut off or replaced", record)
        line = _line_ending_at(fd, record.offset)
        try:
            obj = json.loads(line) if line is not None else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            obj = None
        if not isinstance(obj, dict) or obj.get("seq") != record.seq:
            what = ("no line" if line is None else f"seq {obj.get('seq')}" if isinstance(obj, dict)
                    else "not an event")
            return HeadVerdict("changed", f"the head record says the log ends at {said}, but the line ending at "
                                          f"byte {record.offset} is {what} and {_last_event(fd, size)}: the end of the "
                                          "log was replaced or rewritten", record)
    finally:
        os.close(fd)
    if obj.get("hash") != record.hash:
        return HeadVerdict("changed", f"event seq {record.seq} has hash {str(obj.get('hash'))[:16]}, but the head "
                                      f"record says {said}: the end of the log was replaced", record)
    try:
        intact = compute_hash(obj) == record.hash
    except (KeyError, TypeError, ValueError):  # no prev, or NaN: not a line rrma wrote
        intact = False
    if not intact:
        return HeadVerdict("changed", f"seq {record.seq}: its hash does not match its content (the line was "
                                      "modified)", record, modified=True)
    return HeadVerdict("ok", f"head.json matches the log's event seq {record.seq}", record)


def _last_event(fd: int, size: int) -> str:
    """Where the log's last event is, in words (for a verdict that the record's is not where it says)."""
    lines = lines_backwards(fd, size)
    pos = size - len(next(lines))  # an unterminated end is no event (b"" when the log ends with a newline)
    for line in lines:
        link = chain_link(line)
        if link is not None:
            return f"its last valid event is seq {link[0]} (ending at byte {pos}; the file is {size} bytes)"
        pos -= len(line) + 1
    return f"it holds no valid event (the file is {size} bytes)"


def _line_ending_at(fd: int, end: int) -> bytes | None:
    """The line whose newline is the byte before ``end`` (without it); None when that byte is no newline."""
    if end <= 0 or os.pread(fd, 1, end - 1) != b"\n":
        return None
    start, size = end - 1, 4096
    while True:
        lo = max(0, start - size)
        data = os.pread(fd, start - lo, lo)
        cut = data.rfind(b"\n")
        if cut >= 0:
            return data[cut + 1:]
        if lo == 0:
            return data
        size *= 4


def log_stamp(run_dir: Path | str) -> tuple[int, int, int]:
    """(log size, log mtime, head record mtime) in bytes and ns, -1 where missing: what changes when the log
    grows or is cut, or its head record is rewritten (a view checks again only when this changes)."""
    out = []
    for name, part in ((EVENTS, "size"), (EVENTS, "mtime"), (HEAD, "mtime")):
        try:
            st = os.stat(Path(run_dir) / name)
        except OSError:
            out.append(-1)
            continue
        out.append(st.st_size if part == "size" else st.st_mtime_ns)
    return out[0], out[1], out[2]
