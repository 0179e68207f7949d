"""The log's one line reader (rrma/log/tail.py): complete lines only, from a byte offset, as they are appended.

Each invariant of the module's docstring against a real file: a line still being written is left for the
next read and the offset is always a line boundary (a reader resumes exactly there, so nothing is read
twice or skipped); a torn or unreadable line never hides the lines after it; a line that is not UTF-8 is
corruption (``corrupt``, with where), not a tear; a block is cut back to its last newline, and a line
longer than a block is handed out whole; the backward walk (the store's chain head, the head check) hands
out every line once, last first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rrma.log.store import RunStore
from rrma.log.tail import LineTail, LogTail, lines_backwards, unreadable_line, utf8_damage


def test_only_complete_lines_and_the_offset_is_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\ntwo\nthr")  # a writer caught in the middle of the third line
    tail = LineTail(path)
    assert list(tail.lines()) == [(0, b"one"), (4, b"two")] and tail.offset == 8
    assert tail.unterminated() == b"thr"
    assert list(tail.lines()) == [] and tail.offset == 8  # nothing new: the fragment waits
    with open(path, "ab") as fh:
        fh.write(b"ee\nfour\n")
    assert list(tail.lines()) == [(8, b"three"), (14, b"four")] and tail.offset == 19
    assert tail.unterminated() == b""
    resumed = LineTail(path, 8)  # a reader resuming at a boundary it was given reads the same lines
    assert list(resumed.lines()) == [(8, b"three"), (14, b"four")]


def test_a_missing_log_reads_as_empty(tmp_path: Path) -> None:
    tail = LineTail(tmp_path / "nothing")
    assert list(tail.lines()) == [] and tail.unterminated() == b"" and tail.offset == 0


@pytest.mark.parametrize("block", [1, 3, 7, 64])
def test_blocks_are_whole_lines_and_a_long_line_is_handed_out_whole(tmp_path: Path, block: int) -> None:
    lines = [b"a" * 50, b"", b"bc", b"d" * 9, b"e"]
    path = tmp_path / "log"
    path.write_bytes(b"\n".join(lines) + b"\n" + b"unfinished")
    tail = LineTail(path)
    got = []
    for base, data in tail.blocks(block=block):
        assert data.endswith(b"\n") and base == sum(len(piece) for _, piece in got)
        got.append((base, data))
    assert b"".join(data for _, data in got) == b"\n".join(lines) + b"\n"
    assert tail.offset == len(b"\n".join(lines)) + 1


def test_a_limit_stops_after_a_block_and_the_next_read_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(100)))
    tail = LineTail(path)
    first = b"".join(data for _, data in tail.blocks(limit=50, block=16))  # stops once 50 bytes were handed out
    assert 50 <= len(first) < 50 + 16 and tail.offset == len(first)
    rest = b"".join(data for _, data in tail.blocks(block=16))
    assert (first + rest).splitlines() == [b"line %d" % n for n in range(100)]


def test_the_validated_tail_keeps_torn_lines_and_goes_on(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run", create=True)
    store.append("note", "harness", {"text": "before"})
    with open(store.events_path, "ab") as fh:
        fh.write(b'{"v":1,"seq":1,"ts":"2026\n')  # a torn line, sealed
        fh.write(b'{"v":1,"seq":1,"ts":"x","kind":"note","actor":"h","data":{"text":"\xff"},"prev":"p","hash":"h"}\n')
    store.append("note", "harness", {"text": "after"})  # seq 1: the chain continues from the last valid event
    tail = LogTail(store.events_path, count_lines=True)
    events = tail.poll()
    assert [e.data.text for e in events] == ["before", "after"]
    assert [(t.line, t.sealed, t.corrupt) for t in tail.torn] == [(2, True, False), (3, True, True)]
    assert "not JSON" in tail.torn[0].error
    assert "0xff" in tail.torn[1].error and "at byte" in tail.torn[1].error
    assert [e.offset for e in events] == [0, tail.torn[1].offset + tail.torn[1].length + 1]
    assert tail.poll() == [] and tail.offset == store.events_path.stat().st_size
    store.close()


def test_utf8_damage_is_corruption_and_a_cut_character_a_tear() -> None:
    snowman = "☃".encode()
    assert utf8_damage(b"plain") is None
    assert utf8_damage(b"ends in half a " + snowman[:2]) is None  # what a torn write leaves
    at, why = utf8_damage(b"ab" + snowman[:2] + b"cd")  # type: ignore[misc]
    assert at == 2 and "not UTF-8" in why
    assert utf8_damage(b"\xff trailing") == (0, "byte 0xff is not UTF-8 (invalid start byte)")
    torn = unreadable_line(b"ok" + b"\xfe" + b"rest", 100, 7, True, "not JSON")
    assert torn.corrupt and torn.error.endswith("at byte 102") and (torn.offset, torn.length, torn.line) == (100, 7, 7)
    cut = unreadable_line(b'{"v":1', 5, 0, False, "not JSON")
    assert not cut.corrupt and cut.error == "not JSON"


@pytest.mark.parametrize("block", [1, 2, 5, 65536])
def test_lines_backwards_hands_out_each_line_once_last_first(tmp_path: Path, block: int) -> None:
    data = b"first\n\nthird line\n" + b"x" * 20 + b"\nlast"
    path = tmp_path / "log"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        assert list(lines_backwards(fh.fileno(), len(data), block)) == data.split(b"\n")[::-1]
        end = data.index(b"third")  # the first ``end`` bytes only
        assert list(lines_backwards(fh.fileno(), end, block)) == [b"", b"", b"first"]
        assert list(lines_backwards(fh.fileno(), 0, block)) == [b""]
    assert os.path.getsize(path) == len(data)
