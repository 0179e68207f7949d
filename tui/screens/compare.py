"""Compare two trials: both summaries side by side, a unified diff of their workspaces, their proofs.

Screens ask for it with :class:`tui.messages.OpenCompare`, which the app answers with
:func:`compare_with_best` (a trial against the current best) or :func:`pick_and_compare` (asks for
the other trial's id in :class:`ComparePickScreen`); ``CompareScreen(session, left, right)`` opens
any pair. The diff reads as "from left to right": ``-`` lines are the left trial's, ``+`` lines
the right's.

The diff is computed in a thread worker from the run's blobs (manifests name each file's blob,
so files with the same blob are skipped unread) and drawn by :class:`DiffView` through the Line
API, which styles only the lines on screen: two trials with 10,000-line files open as fast as
two with ten. Files longer than ``PATIENCE_ABOVE`` lines are diffed between lines unique to both
sides (patience diff's anchors), so thousands of changes take milliseconds where difflib alone
takes seconds. Files larger than ``MAX_FILE_BYTES`` and binary files are named, not diffed, and
a diff longer than ``MAX_DIFF_LINES`` lines is cut with a note saying so. File content never
reaches the terminal raw: control characters are replaced.
"""

from __future__ import annotations

import bisect
import difflib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from rrma.log.codec import LogEvent
from rrma.log.state import RunState, TrialRecord
from rrma.log.store import RunStore
from tui.dialogs import TrialNotFound, best_trial_id, resolve_trial_id
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.side_diff import (
    ADD_WORD,
    BLANK,
    DEL_WORD,
    GUTTER,
    SideRow,
    number_cells,
    row_height,
    row_lines,
    rows_from_unified,
)
from tui.widgets.trial_text import REVIEW_GLYPH, best_marker, fmt_score, fmt_sigma, glyph, is_claim

MAX_DIFF_LINES = 50_000  # lines of diff kept; the rest is cut with a note
MAX_FILE_BYTES = 5_000_000  # a larger file is named as changed, not diffed
CONTEXT_LINES = 3  # unchanged lines around each change, as `diff -u`
PATIENCE_ABOVE = 2_000  # lines: a longer file is diffed between unique-line anchors (see line_opcodes)
HYPOTHESIS_CHARS = 400  # the summary cuts a longer hypothesis

# DiffLine kinds, each drawn with the DiffView component class "diff-view--<kind>"
FILE, HUNK, ADD, DEL, CTX, NOTE = "file", "hunk", "add", "del", "ctx", "note"
DiffLine = tuple[str, str]  # (kind, text without the newline)

_CONTROL = {i: "�" for i in (*range(0, 9), *range(10, 32), 127)}  # never send a file's escapes to the terminal


# ----------------------------------------------------------------------------- the diff


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


# ----------------------------------------------------------------------------- the view


class DiffView(ScrollView, can_focus=True):
    """Diff lines drawn through the Line API: only the visible lines are ever styled.

    Unified (:meth:`set_lines`: one diff line a screen line, ←/→ scroll a long one) or side by side
    (:meth:`set_side`: tui/widgets/side_diff.py's rows, each laid out at the view's width, long lines wrapped;
    a row's screen lines are made when the row comes into view)."""

    DEFAULT_CSS = """
    DiffView { height: 1fr; scrollbar-size-horizontal: 0; }
    DiffView > .diff-view--more { color: $text-muted; }
    DiffView > .diff-view--file { text-style: bold; }
    DiffView > .diff-view--hunk { color: $text-accent; }
    DiffView > .diff-view--add { color: $text-success; background: $success 12%; }
    DiffView > .diff-view--del { color: $text-error; background: $error 12%; }
    DiffView > .diff-view--ctx { }
    DiffView > .diff-view--note { color: $text-muted; text-style: italic; }
    DiffView > .diff-view--blank { background: $panel; }
    DiffView > .diff-view--gutter { color: $text-muted; }
    DiffView > .diff-view--add-word { background: $success 40%; text-style: bold; }
    DiffView > .diff-view--del-word { background: $error 40%; text-style: bold; }
    """
    COMPONENT_CLASSES = {f"diff-view--{kind}"
                         for kind in (FILE, HUNK, ADD, DEL, CTX, NOTE, BLANK, GUTTER, ADD_WORD, DEL_WORD, "more")}
    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[DiffLine] = []
        self._styles: dict[str, Style] | None = None
        self.side_rows: list[SideRow] | None = None  # side by side: the rows shown (None: unified)
        self._offsets: list[int] = []  # side by side: the screen line each row starts at
        self._gutter = 1
        self._laid_out_at = -1  # the width the rows' offsets are for
        self._row_cache: tuple[int, list[Strip]] | None = None  # (row, its laid-out lines)

    def set_lines(self, lines: list[DiffLine], width: int | None = None) -> None:
        self.lines = lines
        self.side_rows = None
        longest = width if width is not None else max((len(text) for _, text in lines), default=0)
        self.virtual_size = Size(longest, len(lines))
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def set_side(self, rows: list[SideRow]) -> None:
        """Show ``rows`` side by side (laid out at the view's width, again when it changes)."""
        self.side_rows = rows
        self._gutter = number_cells(rows)
        self._laid_out_at = -1
        self._lay_out()
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def _lay_out(self) -> None:
        width = self.scrollable_content_region.width
        if self.side_rows is None or width == self._laid_out_at or width <= 0:
            return
        offsets, at = [], 0
        for row in self.side_rows:
            offsets.append(at)
            at += row_height(row, width, self._gutter)
        self._offsets, self._laid_out_at, self._row_cache = offsets, width, None
        self.virtual_size = Size(width, at)

    def on_resize(self) -> None:
        if self.side_rows is not None:
            self._lay_out()
            self.refresh()

    def file_starts(self) -> list[int]:
        """Line numbers where a file's diff starts (its ``---`` line, or a note on a file not diffed)."""
        if self.side_rows is not None:
            return [self._offsets[i] for i, row in enumerate(self.side_rows)
                    if (row.left is not None and row.left.kind == FILE) or (row.span is not None and row.span[0] == FILE)]
        starts = []
        for i, (kind, text) in enumerate(self.lines):
            if kind == FILE and not text.startswith("+++"):
                starts.append(i)
        return starts

    def _style(self, kind: str) -> Style:
        if self._styles is None:
            base = self.rich_style
            self._styles = {k: base + self.get_component_rich_style(f"diff-view--{k}")
                            for k in (FILE, HUNK, ADD, DEL, CTX, NOTE, BLANK, GUTTER)}
            for word in (ADD_WORD, DEL_WORD):  # laid over the line's own style (side_diff.py adds them)
                self._styles[word] = self.get_component_rich_style(f"diff-view--{word}", partial=True)
        return self._styles[kind]

    def notify_style_update(self) -> None:
        self._styles = None
        self._row_cache = None
        super().notify_style_update()

    def _side_line(self, line: int, width: int) -> Strip:
        rows = self.side_rows
        assert rows is not None
        self._lay_out()
        if not rows or line >= self.virtual_size.height:
            return Strip.blank(width, self.rich_style)
        index = bisect.bisect_right(self._offsets, line) - 1
        if self._row_cache is None or self._row_cache[0] != index:
            self._style(CTX)  # the styles, once
            assert self._styles is not None
            self._row_cache = (index, [Strip(segments, width) for segments in
                                       row_lines(rows[index], self._laid_out_at, self._gutter, self._styles)])
        strips = self._row_cache[1]
        at = line - self._offsets[index]
        return strips[at] if at < len(strips) else Strip.blank(width, self.rich_style)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if self.side_rows is not None:
            return self._side_line(int(self.scroll_offset.y) + y, width)
        row = int(self.scroll_offset.y) + y
        if row >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        kind, text = self.lines[row]
        style = self._style(kind)
        scroll_x = int(self.scroll_offset.x)
        line = Strip([Segment(text, style)])
        if line.cell_length > scroll_x + width and width > 1:
            # no horizontal scroll bar (it took the pane's last row): a line that goes on past the right edge
            # ends in `›` (←/→ scroll sideways), as `less -S` marks one
            more = self.get_component_rich_style("diff-view--more", partial=True)
            return Strip([*line.crop(scroll_x, scroll_x + width - 1), Segment("›", style + more)])
        return line.crop(scroll_x, scroll_x + width).extend_cell_length(width, style)


# ----------------------------------------------------------------------------- the screen


def relation_text(state: RunState, left: str, right: str) -> Text:
    """How two trials are related in the lineage: one descends from the other, or their common ancestor."""
    up_left = [rec.trial_id for rec in state.lineage(left)]
    up_right = [rec.trial_id for rec in state.lineage(right)]
    if left in up_right:
        return Text(f"{right} descends from {left} ({up_right.index(left)} generation(s))")
    if right in up_left:
        return Text(f"{left} descends from {right} ({up_left.index(right)} generation(s))")
    seen = set(up_left)
    common = next((tid for tid in up_right if tid in seen), None)
    if common is None:
        return Text("no common ancestor", "dim")
    return Text(f"common ancestor {common} ({left}: {up_left.index(common)} generation(s) down, "
                f"{right}: {up_right.index(common)})")


def _review_cell(rec: TrialRecord) -> Text:
    if rec.review_status != "unreviewed":
        label, style = REVIEW_GLYPH.get(rec.review_status, (rec.review_status, ""))
        return Text(f"{label} by {rec.reviews[-1]['reviewer']}", style)
    if rec.held:
        return Text("held for review (a high audit finding)", "bold red")
    return Text("awaiting review (held by the hitl gate)", "yellow") if is_claim(rec) else Text("unreviewed", "dim")


def summary_table(state: RunState, left: TrialRecord, right: TrialRecord) -> Table:
    """The two trials' summaries, one column each."""
    table = Table(box=None, expand=True, show_header=True, header_style="bold", pad_edge=False)
    table.add_column("", style="dim", no_wrap=True, width=12)
    for rec, side in ((left, "left, − lines"), (right, "right, + lines")):
        table.add_column(Text.assemble(best_marker(state, rec), rec.trial_id, (f"  ({side})", "dim")), ratio=1)

    def sigma(rec: TrialRecord) -> str:
        return fmt_sigma(state.delta_sigma_of(rec.score) if rec.status == "ok" else None) or "-"

    def status(rec: TrialRecord) -> Text:
        return Text.assemble(glyph(rec.status), f" {rec.status}")

    def hypothesis(rec: TrialRecord) -> str:
        text = rec.hypothesis.strip() or "(none)"
        return text if len(text) <= HYPOTHESIS_CHARS else text[: HYPOTHESIS_CHARS - 1] + "…"

    rows: list[tuple[str, Callable[[TrialRecord], str | Text]]] = [
        ("agent", lambda r: r.agent),
        ("status", status),
        ("score", lambda r: Text(fmt_score(r.score), "bold")),
        ("vs baseline", sigma),
        ("parent", lambda r: r.parent or "- (a baseline)"),
        ("seconds", lambda r: f"{r.seconds:.1f}" if r.finished else "-"),
        ("review", _review_cell),
        ("hypothesis", hypothesis),
    ]
    if left.theorem or right.theorem:
        rows.append(("theorem", lambda r: r.theorem or "-"))
    for label, cell in rows:
        table.add_row(label, cell(left), cell(right))
    return table


def difference_text(state: RunState, left: TrialRecord, right: TrialRecord) -> Text:
    """Right's score against left's, in the metric's direction and in baseline σ."""
    text = Text()
    text.append(relation_text(state, left.trial_id, right.trial_id))
    if left.score is None or right.score is None:
        return text
    gain = state.better(right.score, left.score)  # > 0: right is better
    text.append(f"\n{right.trial_id} vs {left.trial_id}: {right.score - left.score:+.5g}")
    if state.sigma:
        text.append(f" ({gain / state.sigma:+.1f}σ)")
    verdict = ("better", "green") if gain > 0 else (("worse", "red") if gain < 0 else ("the same score", "dim"))
    text.append(f" {verdict[0]}", verdict[1])
    return text


class CompareScreen(RunScreen):
    """Two trials side by side and the diff from ``left`` to ``right``; ``o`` swaps them, ``}``/``{`` step files."""

    DEFAULT_CSS = """
    CompareScreen #compare-title, CompareScreen #compare-diff-title { height: 1; padding: 0 1; background: $boost; }
    CompareScreen #compare-summary-box { height: auto; max-height: 50%; padding: 0 1; }
    CompareScreen #compare-verdict { height: auto; padding: 0 1; }
    CompareScreen #compare-diff { border: round $primary-background; }
    CompareScreen #compare-diff:focus { border: round $accent; }
    """
    BINDINGS = [
        Binding("o", "swap", "Swap sides"),  # s sorts elsewhere; o: the other side
        Binding("right_curly_bracket", "file(1)", "Next file", key_display="}"),
        Binding("left_curly_bracket", "file(-1)", "Previous file", key_display="{"),
        Binding("B", "side_by_side", "Diff: side by side / unified"),  # B: both trials beside each other
        Binding("escape", "back", "Back"),
    ]

    @dataclass
    class DiffReady(Message):
        """The worker finished the diff of ``left`` -> ``right``."""

        left: str
        right: str
        comparison: TrialComparison

    def __init__(self, session: RunSession, left: str, right: str) -> None:
        super().__init__(session)
        self.left = left
        self.right = right
        self.comparison: TrialComparison | None = None  # the diff shown, once computed
        self._cache: dict[tuple[str, str], TrialComparison] = {}  # the last two diffs (swap back is free)
        self._waiting = False  # a trial was not in the run when the diff was asked for
        self.side_by_side = False  # the diff in two columns (B), else unified
        self._side: tuple[TrialComparison, list[SideRow]] | None = None  # the rows of the comparison last split

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        with VerticalScroll(id="compare-summary-box"):
            yield Static("", id="compare-summary")
        yield Static("", id="compare-verdict")  # out of the summary's scroll: always on screen
        yield Static("", id="compare-diff-title")
        yield DiffView(id="compare-diff")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DiffView).focus()
        self.start_diff()
        self.refresh_view([])

    @property
    def computing(self) -> bool:
        """A diff worker is running for the trials shown."""
        return any(w.node is self and w.group == "compare" and not w.is_finished for w in self.workers)

    def refresh_view(self, events: list[LogEvent]) -> None:
        ids = {self.left, self.right}
        if events and not any(getattr(e.data, "trial_id", None) in ids or e.kind == "trial.promoted" for e in events):
            return
        self.query_one("#compare-title", Static).update(self._title())
        state = self.state
        left, right = state.trials.get(self.left), state.trials.get(self.right)
        summary = self.query_one("#compare-summary", Static)
        verdict = self.query_one("#compare-verdict", Static)
        if left is None or right is None:
            missing = ", ".join(t for t in (self.left, self.right) if t not in state.trials)
            summary.update(Text(f"not in this run: {missing}", "red"))
            verdict.update("")
            return
        summary.update(summary_table(state, left, right))
        verdict.update(difference_text(state, left, right))
        if self._waiting:
            self.start_diff()  # the trial that was missing has arrived

    def _title(self) -> Text:
        """The trials, and how the diff reads: in full where it fits (a title is never cut at the edge)."""
        title = Text.assemble(("compare ", "dim"), (self.left, "bold"), ("  vs  ", "dim"), (self.right, "bold"))
        for note in ("   (the diff reads from the left trial to the right one)", "   (diff: left → right)"):
            if title.cell_len + len(note) <= self.app.size.width - 2:
                title.append(note, "dim")
                break
        return title

    def _diff_title(self, text: str | Text) -> None:
        self.query_one("#compare-diff-title", Static).update(text)

    def start_diff(self) -> None:
        """Show the cached diff of the trials shown, or start a worker on it."""
        key = (self.left, self.right)
        view = self.query_one(DiffView)
        if key in self._cache:
            self._show(self._cache[key])
            return
        left, right = self.state.trials.get(self.left), self.state.trials.get(self.right)
        self.comparison = None
        view.set_lines([])
        self._waiting = left is None or right is None or not self.session.loaded
        if left is None or right is None or not self.session.loaded:
            self._diff_title(Text("no diff: a trial is not in this run", "red"))
            return
        self._diff_title(Text.assemble(("diff ", "dim"), self.left, " → ", self.right, ("  computing…", "dim")))
        self._compute(self.session.run_dir, TrialFiles.of(left), TrialFiles.of(right))

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _compute(self, run_dir: Path, left: TrialFiles, right: TrialFiles) -> None:
        worker = get_current_worker()
        comparison = compare_trials(run_dir, left, right, cancelled=lambda: worker.is_cancelled)
        if not worker.is_cancelled:
            self.post_message(self.DiffReady(left.trial_id, right.trial_id, comparison))

    @on(DiffReady)
    def _diff_ready(self, message: DiffReady) -> None:
        self._cache = {k: v for k, v in self._cache.items() if k == (self.right, self.left)}
        self._cache[(message.left, message.right)] = message.comparison
        if (message.left, message.right) == (self.left, self.right):
            self._show(message.comparison)

    def _show(self, comparison: TrialComparison) -> None:
        self.comparison = comparison
        view = self.query_one(DiffView)
        if self.side_by_side:
            if self._side is None or self._side[0] is not comparison:
                self._side = (comparison, rows_from_unified(comparison.lines))
            view.set_side(self._side[1])
            self._diff_title(Text.assemble(("diff ", "dim"), (self.left, "bold"), (" | ", "dim"), (self.right, "bold"),
                                           "  ", comparison.summary(), ("  side by side (B: unified)", "dim")))
            return
        view.set_lines(comparison.lines, comparison.width)
        wide = comparison.width > (view.scrollable_content_region.width or self.app.size.width - 2)
        self._diff_title(Text.assemble(("diff ", "dim"), self.left, " → ", self.right, "  ", comparison.summary(),
                                       ("  (› goes on: ←/→ scroll)", "dim") if wide else ""))

    def on_resize(self) -> None:
        if self.is_mounted:
            self.query_one("#compare-title", Static).update(self._title())

    # ------------------------------------------------------------------ actions

    def action_swap(self) -> None:
        self.left, self.right = self.right, self.left
        self.start_diff()
        self.refresh_view([])

    def action_side_by_side(self) -> None:
        """Unified diff <-> side by side (left trial | right trial); kept for the sides swapped (o)."""
        self.side_by_side = not self.side_by_side
        if self.comparison is not None:
            self._show(self.comparison)

    def action_file(self, step: int) -> None:
        view = self.query_one(DiffView)
        starts = view.file_starts()
        top = int(view.scroll_offset.y)
        target = next((s for s in starts if s > top), None) if step > 0 else next((s for s in reversed(starts) if s < top), None)
        if target is not None:
            view.scroll_to(y=target, animate=False)

    def action_back(self) -> None:
        self.app.pop_screen()


# ----------------------------------------------------------------------------- picking the other trial


class ComparePickScreen(ModalScreen[str | None]):
    """Ask for the trial to compare ``against`` with; dismisses with a trial id of this run, or None (Esc)."""

    DEFAULT_CSS = """
    ComparePickScreen { align: center middle; }
    ComparePickScreen #compare-pick-box { width: 80; height: auto; border: thick $accent; background: $surface; padding: 0 1; }
    ComparePickScreen #compare-pick-error { height: auto; color: $text-error; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, session: RunSession, against: str) -> None:
        super().__init__()
        self.session = session
        self.against = against

    def compose(self) -> ComposeResult:
        best = best_trial_id(self.session.state)
        with Vertical(id="compare-pick-box"):
            yield Static(Text.assemble(("compare ", "bold"), (self.against, "bold"), (" with which trial?", "bold"),
                                       " Type its id (t0012, or just 12) or best; Enter compares, Esc cancels."))
            yield Input(placeholder=f"e.g. {best}" if best else "trial id", id="compare-pick-input")
            yield Static("", id="compare-pick-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        error = self.query_one("#compare-pick-error", Static)
        try:
            trial_id = resolve_trial_id(self.session.state, event.value)
        except TrialNotFound as exc:
            error.update(str(exc))
            return
        if trial_id == self.against:
            error.update(f"that is {self.against} itself: pick another trial")
            return
        self.dismiss(trial_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


# ----------------------------------------------------------------------------- for the screens that open it


def compare_with_best(app: App[Any], session: RunSession, trial_id: str) -> bool:
    """Push the comparison of the current best (left) with ``trial_id`` (right); False (and a notice) if there is none."""
    best = best_trial_id(session.state)
    if best is None:
        app.notify("this run has no best trial yet", severity="warning")
        return False
    if best == trial_id:
        app.notify(f"{trial_id} is the current best: pick another trial to compare it with (compare…)")
        return False
    app.push_screen(CompareScreen(session, best, trial_id))
    return True


def pick_and_compare(app: App[Any], session: RunSession, trial_id: str) -> None:
    """Ask for the other trial (ComparePickScreen), then push the comparison of ``trial_id`` (left) with it."""

    def chosen(other: str | None) -> None:
        if other is not None:
            app.push_screen(CompareScreen(session, trial_id, other))

    app.push_screen(ComparePickScreen(session, trial_id), chosen)


def diff_text(lines: Iterable[DiffLine]) -> str:
    """The diff as plain text (what the view shows), e.g. for a test or a copy."""
    return "\n".join(text for _, text in lines)
