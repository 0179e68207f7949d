"""The one way to read a run log's lines: from a byte offset, complete lines only, as they are appended.

Every reader of ``events.jsonl`` goes through :class:`LineTail`: the loop's :class:`LogTail` (each
line validated into its pydantic event, for the driver's :class:`~rrma.log.state.RunState`),
:meth:`RunStore.scan <rrma.log.store.RunStore.scan>` (the same from byte 0, for ``verify``, resume
and reviews), the views' :class:`~rrma.log.reader.RunReader` (each line parsed with orjson and its
types checked, for speed; the TUI, ``rrma-tui show``/``ls`` and the driver's checkpoint writer),
:func:`~rrma.log.store.iter_event_lines` (the live-driver check) and the export. They differ only in
how they parse a line; all of them fold through :meth:`RunState.apply <rrma.log.state.RunState.apply>`.

Invariants:

* **Only complete lines are read.** A line still being written (no newline yet) is left for the
  next read, and the tail's ``offset`` is always a line boundary: the byte just past the last
  line handed out. A reader resumes exactly there, so no line is read twice or skipped.
* **A torn or unreadable line never hides the lines after it.** The tail hands out bytes; a parser
  that cannot read a line records it (:class:`TornLine`: offset, why) and goes on with the next.
* **A line that is not UTF-8 is corruption, not a tear** (:func:`utf8_damage`): rrma writes UTF-8 and
  a crash only cuts a line short, so bytes that do not decode before a line's end were changed later.
* Reads are ``pread`` of at most :data:`BLOCK` bytes at a time, up to the file's size when the read
  began, so a reader never waits on a writer and a huge log is never read into memory at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rrma.log.codec import InvalidEvent, decode_line

BLOCK = 1024 * 1024  # bytes read at a time (a block is cut back to its last newline)


@dataclass
class TornLine:
    """A line that is not a valid event: a fragment a crash left mid-write (``corrupt``: changed later)."""

    offset: int  # byte offset of the line's start
    length: int  # bytes, without the newline
    sealed: bool  # True when a newline follows (a later append sealed it)
    error: str
    line: int = 0  # 1-based line number in the log (0: not counted)
    corrupt: bool = False  # bytes that are not UTF-8 before the line's end: changed after it was written


def utf8_damage(line: bytes) -> tuple[int, str] | None:
    """(index, reason) of the first byte of ``line`` that is not UTF-8, unless the only problem is a
    character cut short at the line's end (what a torn write leaves); None when the line decodes."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end == len(line) and exc.reason == "unexpected end of data":
            return None
        return exc.start, f"byte 0x{line[exc.start]:02x} is not UTF-8 ({exc.reason})"
    return None


def unreadable_line(line: bytes, offset: int, number: int, sealed: bool, error: str) -> TornLine:
    """A line that does not parse, as a TornLine: ``corrupt`` (saying where) when it is not UTF-8."""
    damage = utf8_damage(line)
    if damage is None:
        return TornLine(offset, len(line), sealed, error, number)
    at, why = damage
    return TornLine(offset, len(line), sealed, f"{why} at byte {offset + at}", number, corrupt=True)


def lines_backwards(fd: int, end: int, block: int = 65536) -> Iterator[bytes]:
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


class LineTail:
    """The complete lines of a log from byte ``offset`` on, handed out as they are appended.

    Not thread-safe: one reader, one tail. Keeps no file open between reads.
    """

    def __init__(self, path: Path | str, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset  # the byte just past the last complete line handed out

    def blocks(self, limit: int | None = None, block: int = BLOCK) -> Iterator[tuple[int, bytes]]:
        """``(offset, data)``: the complete lines appended since the last read, a block at a time.

        ``data`` is whole lines, each ending with a newline, starting at byte ``offset`` of the log.
        Reads up to the file's size when the read began; stops once ``limit`` bytes were handed out
        (a line longer than ``limit`` is still handed out whole). ``self.offset`` moves past a block
        when it is handed out, so a caller that stops early resumes at the next block.
        """
        try:
            if os.stat(self.path).st_size <= self.offset:  # nothing new: no need to open the file
                return
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return
        with fh:
            fd = fh.fileno()
            size = os.fstat(fd).st_size
            first = self.offset
            pos = self.offset
            carry: list[bytes] = []  # the blocks of a line longer than a block, joined once it ends
            while pos < size and (limit is None or self.offset - first < limit):
                data = os.pread(fd, min(block, size - pos), pos)
                if not data:
                    break
                pos += len(data)
                cut = data.rfind(b"\n") + 1  # only the new block is searched: linear in a long line's length
                if not cut:  # no line ends in this block: read on
                    carry.append(data)
                    continue
                buf = b"".join((*carry, data)) if carry else data
                cut += len(buf) - len(data)
                carry = [buf[cut:]] if cut < len(buf) else []
                start = self.offset
                self.offset = start + cut
                yield start, buf if cut == len(buf) else buf[:cut]

    def lines(self, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` for each complete line appended since the last read (without its newline)."""
        for base, data in self.blocks(limit):
            pos = base
            for line in data.split(b"\n")[:-1]:
                yield pos, line
                pos += len(line) + 1

    def unterminated(self) -> bytes:
        """The bytes after ``offset`` when they hold no newline: a line cut short (or still being written)."""
        try:
            with open(self.path, "rb") as fh:
                rest = os.pread(fh.fileno(), max(0, os.fstat(fh.fileno()).st_size - self.offset), self.offset)
        except FileNotFoundError:
            return b""
        return b"" if b"\n" in rest else rest


class LogTail:
    """The events appended to a log since the last :meth:`poll`, validated (by ``parse_line``).

    What the research loop folds its state from (and ``RunStore.scan`` from byte 0). A line that is
    not a valid event is kept in ``torn`` (with its line number when ``count_lines``: the tail then
    starts at byte 0) and never hides the lines after it.
    """

    def __init__(self, path: Path | str, offset: int = 0, *, count_lines: bool = False) -> None:
        self.line_tail = LineTail(path, offset)
        self.torn: list[TornLine] = []
        self.number = 1 if count_lines else 0  # the next line's 1-based number (0: not counted)

    @property
    def path(self) -> Path:
        return self.line_tail.path

    @property
    def offset(self) -> int:
        return self.line_tail.offset

    def poll(self, max_bytes: int | None = 64 * 1024 * 1024) -> list[Any]:
        """The valid events of the complete lines appended since the last poll (about ``max_bytes``)."""
        events = []
        number = self.number
        for pos, line in self.line_tail.lines(max_bytes):
            if line.strip():
                try:
                    events.append(decode_line(line, pos))
                except InvalidEvent as exc:
                    self.torn.append(unreadable_line(line, pos, number, True, str(exc)))
            if number:
                number += 1
        self.number = number
        return events
