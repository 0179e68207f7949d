"""The diff of two trials' workspaces (and proofs), read from the run's blobs: pure text, no terminal.

A trial's files are named by its workspace manifest (path -> blob id) or, for a trial without one,
by its edits; files with the same blob on both sides are skipped unread. :func:`compare_trials`
returns the unified diff as (kind, text) lines, which the TUI's diff view draws and a test or a copy
reads as plain text (:func:`diff_text`). The diff reads as "from left to right": ``-`` lines are the
left trial's, ``+`` lines the right's.

Invariants: the diff is exactly difflib's for files up to ``PATIENCE_ABOVE`` lines; a longer file is
diffed between lines unique to both sides (patience diff's anchors), so thousands of changes take
milliseconds where difflib alone takes seconds, and applying the diff to the left side still gives the
right one. Files larger than ``MAX_FILE_BYTES`` and binary files are named, not diffed; a diff longer
than ``MAX_DIFF_LINES`` lines is cut with a note saying so (its counts are then lower bounds). No line
carries a file's control characters: they are replaced, tabs expanded, so the text is safe to show
anywhere. It reads files only (its own :class:`~rrma.log.store.RunStore`), never a view's model, so it
runs in any thread.
"""

from __future__ import annotations

import bisect
import difflib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rrma.log.state import TrialRecord
from rrma.log.store import RunStore

MAX_DIFF_LINES = 50_000  # lines of diff kept; the rest is cut with a note
MAX_FILE_BYTES = 5_000_000  # a larger file is named as changed, not diffed
CONTEXT_LINES = 3  # unchanged lines around each change, as `diff -u`
PATIENCE_ABOVE = 2_000  # lines: a longer file is diffed between unique-line anchors (see line_opcodes)

# DiffLine kinds (the TUI's diff view draws each with its own style)
FILE, HUNK, ADD, DEL, CTX, NOTE = "file", "hunk", "add", "del", "ctx", "note"
DiffLine = tuple[str, str]  # (kind, text without the newline)

_CONTROL = {i: "�" for i in (*range(0, 9), *range(10, 32), 127)}  # never send a file's escapes to the terminal


@dataclass(frozen=True)
class TrialFiles:
    """Where a trial's files and proof are (blob ids), copied from its record on the UI thread."""

    trial_id: str
    manifest_blob: str | None
    edits: tuple[tuple[str, str | None], ...]  # (path, blob) of each edit, for a trial without a manifest
    proposal_blob: str | None

    @classmethod
    def of(cls, rec: TrialRecord) -> TrialFiles:
        edits = tuple((str(e.get("path", "?")), e.get("blob")) for e in rec.edits)
        return cls(rec.trial_id, rec.manifest_blob, edits, rec.proposal_blob)


@dataclass
class TrialComparison:
    """The diff of two trials' workspaces (and proofs), as lines ready to draw."""

    lines: list[DiffLine] = field(default_factory=list)
    files_changed: int = 0
    added: int = 0
    removed: int = 0
    truncated: bool = False  # the diff was cut at max_lines: counts are then lower bounds
    width: int = 0  # longest line, in characters (the view's scroll width)

    def summary(self) -> str:
        if not self.files_changed:
            return "no difference"
        at_least = "at least " if self.truncated else ""
        files = "1 file differs" if self.files_changed == 1 else f"{self.files_changed} files differ"
        return f"{at_least}{files}, +{self.added} −{self.removed}"


Tag = Literal["replace", "delete", "insert", "equal"]
Opcode = tuple[Tag, int, int, int, int]  # (tag, a from, a to, b from, b to), as difflib's


class _KnownOpcodes(difflib.SequenceMatcher[str]):
    """A SequenceMatcher told its opcodes, so its ``get_grouped_opcodes`` cuts them into hunks."""

    def __init__(self, opcodes: list[Opcode]) -> None:
        super().__init__(None, [], [])
        self._known = opcodes

    def get_opcodes(self) -> list[Opcode]:
        return self._known


def _unique_anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """(i, j) pairs of lines that occur once in ``a`` and once in ``b``, the longest run in order in both.

    This is patience diff's first step: such lines almost always pair correctly, and they cut a
    long diff into small gaps, where difflib is fast. The longest increasing subsequence of the
    j's (pairs come sorted by i) is found with bisect in O(n log n).
    """
    count_a: dict[str, int] = {}
    for line in a:
        count_a[line] = count_a.get(line, 0) + 1
    count_b: dict[str, int] = {}
    where_b: dict[str, int] = {}
    for j, line in enumerate(b):
        count_b[line] = count_b.get(line, 0) + 1
        where_b[line] = j
    pairs = [(i, where_b[line]) for i, line in enumerate(a)
             if count_a[line] == 1 and count_b.get(line) == 1]
    tails: list[int] = []  # tails[k]: the smallest j ending an increasing run of length k + 1
    tail_at: list[int] = []  # index into pairs of that tail
    before: list[int] = []  # index into pairs of each pair's predecessor in its run (-1: none)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        before.append(tail_at[pos - 1] if pos else -1)
        if pos == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[pos], tail_at[pos] = j, k
    run: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        run.append(pairs[k])
        k = before[k]
    return run[::-1]


def line_opcodes(a: list[str], b: list[str], cancelled: Callable[[], bool] = lambda: False) -> list[Opcode]:
    """How to turn ``a`` into ``b``: difflib's opcodes; above PATIENCE_ABOVE lines, difflib between unique-line anchors.

    difflib alone slows down with the number of changes times the file's length (10,000 lines
    with a change every third line take seconds); anchored, the same diff takes a fraction of a second.
    """
    if max(len(a), len(b)) <= PATIENCE_ABOVE:
        return difflib.SequenceMatcher(None, a, b).get_opcodes()
    out: list[Opcode] = []

    def add(tag: Tag, i1: int, i2: int, j1: int, j2: int) -> None:
        if out and tag == "equal" and out[-1][0] == "equal":
            out[-1] = ("equal", out[-1][1], i2, out[-1][3], j2)
        else:
            out.append((tag, i1, i2, j1, j2))

    i0 = j0 = 0
    for n, (i, j) in enumerate([*_unique_anchors(a, b), (len(a), len(b))]):
        if n % 1000 == 999 and cancelled():
            break
        if i > i0 and j > j0:
            for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, a[i0:i], b[j0:j]).get_opcodes():
                add(tag, a1 + i0, a2 + i0, b1 + j0, b2 + j0)
        elif i > i0:
            add("delete", i0, i, j0, j0)
        elif j > j0:
            add("insert", i0, i0, j0, j)
        if i < len(a):  # an anchor (the last pair is the end, not a line)
            add("equal", i, i + 1, j, j + 1)
        i0, j0 = i + 1, j + 1
    return out


def _hunk_range(start: int, stop: int) -> str:
    """A unified diff hunk header's range: first line (1-based) and length, as `diff -u` writes it."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def unified_lines(a: list[str], b: list[str], label_a: str, label_b: str, *, context: int = CONTEXT_LINES,
                  cancelled: Callable[[], bool] = lambda: False) -> Iterator[DiffLine]:
    """The unified diff of two texts' lines as (kind, text), the ``---``/``+++`` lines first ([] when equal)."""
    opcodes = line_opcodes(a, b, cancelled)
    if all(tag == "equal" for tag, *_ in opcodes):
        return
    yield FILE, f"--- {label_a}"
    yield FILE, f"+++ {label_b}"
    for group in _KnownOpcodes(opcodes).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        yield HUNK, f"@@ -{_hunk_range(first[1], last[2])} +{_hunk_range(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield CTX, " " + line
                continue
            for line in a[i1:i2]:
                yield DEL, "-" + line
            for line in b[j1:j2]:
                yield ADD, "+" + line


class _DiffBuilder:
    def __init__(self, max_lines: int) -> None:
        self.out = TrialComparison()
        self.max_lines = max_lines

    @property
    def full(self) -> bool:
        return self.out.truncated

    def add(self, kind: str, text: str) -> bool:
        """Append a line; False once the diff is full (the cut is noted once)."""
        if self.out.truncated:
            return False
        if len(self.out.lines) >= self.max_lines:
            self.out.truncated = True
            self.out.lines.append((NOTE, f"… the diff is cut here at {self.max_lines:,} lines"))
            return False
        text = text.expandtabs(4).translate(_CONTROL)
        self.out.lines.append((kind, text))
        self.out.width = max(self.out.width, len(text))
        if kind == ADD:
            self.out.added += 1
        elif kind == DEL:
            self.out.removed += 1
        return True

    def texts(self, label_a: str, label_b: str, old: str | None, new: str | None,
              cancelled: Callable[[], bool]) -> None:
        """The unified diff of two texts (None: the file does not exist on that side)."""
        self.out.files_changed += 1
        lines = unified_lines((old or "").splitlines(), (new or "").splitlines(),
                              label_a if old is not None else "/dev/null", label_b if new is not None else "/dev/null",
                              cancelled=cancelled)
        shown = 0
        for shown, (kind, line) in enumerate(lines, start=1):
            if not self.add(kind, line) or (shown % 2000 == 0 and cancelled()):
                return
        if not shown:  # the texts differ, their lines do not: line endings or the last newline
            self.add(FILE, f"{label_a} vs {label_b}")
            self.add(NOTE, "  the same lines; only line endings or the final newline differ")

    def note(self, label: str, why: str) -> None:
        """A file that differs but is not diffed (binary, too large, unreadable)."""
        self.out.files_changed += 1
        self.add(FILE, label)
        self.add(NOTE, f"  {why}")


def _digests(store: RunStore, files: TrialFiles) -> tuple[dict[str, str | None], str | None]:
    """(path -> blob id, a problem worth a note) from the trial's manifest, else its edits."""
    if files.manifest_blob:
        try:
            manifest = store.get_json_blob(files.manifest_blob)
        except (OSError, ValueError) as exc:
            return {}, f"{files.trial_id}: its workspace manifest cannot be read ({exc})"
        if isinstance(manifest, dict):
            return {str(path): (str(blob) if blob else None) for path, blob in manifest.items()}, None
        return {}, f"{files.trial_id}: its workspace manifest is not a path -> blob map"
    return dict(files.edits), None


def _read(store: RunStore, digest: str | None) -> tuple[str | None, str | None]:
    """(text, None) or (None, why it is not diffed)."""
    if not digest:
        return None, "no content recorded"
    try:
        size = (store.blob_dir / digest).stat().st_size
        if size > MAX_FILE_BYTES:
            return None, f"{size / 1e6:.1f} MB: too large to diff here"
        data = store.get_blob(digest)
    except (OSError, ValueError) as exc:
        return None, f"cannot be read ({exc})"
    if b"\x00" in data[:8192]:
        return None, "binary file"
    return data.decode("utf-8", errors="replace"), None


def _proof(store: RunStore, files: TrialFiles) -> tuple[str | None, str | None]:
    """(proof, theorem) from the trial's proposal (proof tasks); (None, None) elsewhere."""
    if not files.proposal_blob:
        return None, None
    try:
        data: Any = json.loads(store.get_blob(files.proposal_blob))
    except (OSError, ValueError):
        return None, None
    if not isinstance(data, dict) or not data.get("proof"):
        return None, None
    theorem = data.get("theorem")
    return str(data["proof"]), (str(theorem) if theorem else None)


def compare_trials(run_dir: Path, left: TrialFiles, right: TrialFiles, *,
                   cancelled: Callable[[], bool] = lambda: False, max_lines: int = MAX_DIFF_LINES) -> TrialComparison:
    """Diff ``left``'s workspace (and proof) against ``right``'s, reading blobs from ``run_dir``.

    Safe in a worker thread: it reads files only (its own RunStore), never the UI's model.
    """
    store = RunStore(run_dir)
    out = _DiffBuilder(max_lines)
    try:
        old, old_problem = _digests(store, left)
        new, new_problem = _digests(store, right)
        for problem in (old_problem, new_problem):
            if problem:
                out.add(NOTE, problem)
        for path in sorted(set(old) | set(new)):
            if out.full or cancelled():
                break
            a, b = old.get(path), new.get(path)
            if path in old and path in new and a == b:
                continue  # the same blob: the same file
            label_a, label_b = f"{left.trial_id}/{path}", f"{right.trial_id}/{path}"
            text_a, why_a = _read(store, a) if path in old else (None, None)
            text_b, why_b = _read(store, b) if path in new else (None, None)
            why = why_a or why_b
            if why:
                out.note(f"{label_a} vs {label_b}", why)
            elif text_a != text_b:
                out.texts(label_a, label_b, text_a, text_b, cancelled)
        proof_a, theorem_a = _proof(store, left)
        proof_b, theorem_b = _proof(store, right)
        if (proof_a or proof_b) and not out.full and not cancelled():
            if proof_a == proof_b:
                out.add(NOTE, f"the proofs are the same ({theorem_a or theorem_b or 'theorem not named'})")
            else:
                out.texts(f"{left.trial_id}/proof of {theorem_a or '?'}", f"{right.trial_id}/proof of {theorem_b or '?'}",
                          proof_a, proof_b, cancelled)
        if not out.out.lines:
            out.add(NOTE, "the same workspace: every file has the same content" if old or new
                    else "neither trial recorded its workspace files")
    finally:
        store.close()
    return out.out


def diff_text(lines: Iterable[DiffLine]) -> str:
    """The diff as plain text (what the view shows), e.g. for a test or a copy."""
    return "\n".join(text for _, text in lines)
