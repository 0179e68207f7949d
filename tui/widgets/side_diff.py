"""A side-by-side diff: the left trial's lines in the left column, the right trial's in the right, hunks aligned.

Pure functions, no widget: :func:`rows_from_opcodes` (two texts' lines and difflib's opcodes) and
:func:`rows_from_unified` (rrma/diff.py's unified diff lines, which the compare screen computed already) give the same
:class:`SideRow` list; :func:`row_lines` lays one row out at a width (each side wraps: a long line goes on under
itself after a ``↪`` in the line-number gutter, so nothing is cut, and a narrow side never hides text);
:class:`SideBySide` is the Rich renderable of a list of rows (and :func:`side_by_side` the one from two texts).
The compare screen draws the same rows through tui/widgets/diff_view.py, one laid-out line at a time.

A changed line is drawn in the removed/added style on its side; a line with no partner (more lines removed than
added, or the other way) faces a blank filler. File and hunk headers and notes run across both columns.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

from rrma.diff import ADD, CTX, DEL, FILE, HUNK, NOTE, DiffLine

BLANK = "blank"  # no line on this side (the other kinds are the unified diff's, rrma/diff.py)
GUTTER = "gutter"  # the line numbers' style
ADD_WORD, DEL_WORD = "add-word", "del-word"  # the characters that differ in a changed line facing its edit
CHANGED_CHARS_UP_TO = 500  # characters: a longer pair of lines is not compared character by character
Opcode = tuple[str, int, int, int, int]
WRAP_MARK = "↪"  # in the gutter of a line that goes on from the one above
SEPARATOR = "│"

DEFAULT_STYLES: dict[str, Style] = {
    FILE: Style(bold=True), HUNK: Style(color="cyan"), ADD: Style(color="green", bgcolor="#12301a"),
    DEL: Style(color="red", bgcolor="#3a1414"), CTX: Style(), NOTE: Style(dim=True, italic=True),
    BLANK: Style(dim=True), GUTTER: Style(dim=True),
    ADD_WORD: Style(color="bright_green", bgcolor="#1f5a2e", bold=True),
    DEL_WORD: Style(color="bright_red", bgcolor="#6a1f1f", bold=True),
}


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a row: a line (its kind CTX, DEL or ADD, or FILE for a file's label), or BLANK."""

    kind: str
    text: str = ""
    number: int | None = None  # the line's number in its file (1-based); None for a label or a filler


@dataclass(frozen=True, slots=True)
class SideRow:
    """A line of each side, or ``span``: a hunk header or note across both columns."""

    left: Side | None = None
    right: Side | None = None
    span: DiffLine | None = None


FILLER = Side(BLANK)
ALIKE = 0.6  # lines at least this alike (difflib's ratio) face each other in a change
MAX_PAIRING = 1600  # removed x added lines in one change above which they face each other in order, unmatched


def _paired(dels: list[Side], adds: list[Side]) -> Iterator[SideRow]:
    """Removed lines beside the added lines that replace them, the shorter side going on blank. A removed line
    and an added one that are alike (difflib ratio >= ALIKE, as ``difflib.Differ`` pairs them) face each other:
    the lines between them pair up before and after, so an edited line is never beside an unrelated new one."""
    if dels and adds and len(dels) * len(adds) <= MAX_PAIRING:
        best, at_i, at_j = ALIKE, -1, -1
        matcher = difflib.SequenceMatcher(None)
        for j, add in enumerate(adds):
            matcher.set_seq2(add.text)
            for i, removed in enumerate(dels):
                matcher.set_seq1(removed.text)
                if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best and matcher.ratio() > best:
                    best, at_i, at_j = matcher.ratio(), i, j
        if at_i >= 0 and not (at_i == at_j == 0 and len(dels) == len(adds) == 1):
            yield from _paired(dels[:at_i], adds[:at_j])
            yield SideRow(dels[at_i], adds[at_j])
            yield from _paired(dels[at_i + 1:], adds[at_j + 1:])
            return
    for i in range(max(len(dels), len(adds))):
        yield SideRow(dels[i] if i < len(dels) else FILLER, adds[i] if i < len(adds) else FILLER)


class _Grouped(difflib.SequenceMatcher[str]):
    """A SequenceMatcher told its opcodes, so that ``get_grouped_opcodes`` cuts them into hunks."""

    def __init__(self, opcodes: list[Opcode]) -> None:
        super().__init__(None, [], [])
        self._known = opcodes

    def get_opcodes(self) -> list[Opcode]:  # type: ignore[override]
        return self._known


def rows_from_opcodes(a: list[str], b: list[str], opcodes: list[Opcode] | None = None, *, label_a: str = "left",
                      label_b: str = "right", context: int = 3) -> list[SideRow]:
    """The side-by-side rows of ``a`` -> ``b`` (difflib's opcodes, computed here when not given), ``context``
    unchanged lines around each change as in a unified diff; [] when the texts' lines are the same."""
    known: list[Opcode] = list(difflib.SequenceMatcher(None, a, b).get_opcodes()) if opcodes is None else opcodes
    if all(tag == "equal" for tag, *_ in known):
        return []
    rows = [SideRow(Side(FILE, label_a), Side(FILE, label_b))]
    for group in _Grouped(known).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        rows.append(SideRow(span=(HUNK, f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@")))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows.extend(SideRow(Side(CTX, a[i], i + 1), Side(CTX, b[j], j + 1))
                            for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
            else:
                rows.extend(_paired([Side(DEL, a[i], i + 1) for i in range(i1, i2)],
                                    [Side(ADD, b[j], j + 1) for j in range(j1, j2)]))
    return rows


def _range(start: int, stop: int) -> str:
    length = stop - start
    return str(start + 1) if length == 1 else f"{start if length == 0 else start + 1},{length}"


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def rows_from_unified(lines: Iterable[DiffLine]) -> list[SideRow]:
    """The side-by-side rows of a unified diff given as (kind, text) lines (``-``/``+``/space first on a line;
    ``---``/``+++`` file lines; ``@@`` hunk headers, whose numbers the lines count on from; notes)."""
    rows: list[SideRow] = []
    dels: list[Side] = []
    adds: list[Side] = []
    left_no = right_no = 1
    label_a: str | None = None

    def flush() -> None:
        rows.extend(_paired(dels, adds))
        dels.clear()
        adds.clear()

    for kind, text in lines:
        if kind == DEL:
            if adds:  # a removal after additions starts a new change
                flush()
            dels.append(Side(DEL, text[1:], left_no))
            left_no += 1
            continue
        if kind == ADD:
            adds.append(Side(ADD, text[1:], right_no))
            right_no += 1
            continue
        flush()
        if kind == CTX:
            rows.append(SideRow(Side(CTX, text[1:], left_no), Side(CTX, text[1:], right_no)))
            left_no += 1
            right_no += 1
        elif kind == FILE and text.startswith("--- "):
            label_a = text[4:]
        elif kind == FILE and text.startswith("+++ ") and label_a is not None:
            rows.append(SideRow(Side(FILE, label_a), Side(FILE, text[4:])))
            label_a = None
        else:
            if kind == HUNK and (match := _HUNK.match(text)):
                left_no, right_no = max(1, int(match[1])), max(1, int(match[3]))
            rows.append(SideRow(span=(kind, text)))
    flush()
    return rows


# ----------------------------------------------------------------------------- layout


def number_cells(rows: Iterable[SideRow]) -> int:
    """The gutter's width: the digits of the largest line number (at least 1)."""
    top = 0
    for row in rows:
        for side in (row.left, row.right):
            if side is not None and side.number is not None and side.number > top:
                top = side.number
    return len(str(top)) if top else 1


def column_widths(width: int) -> tuple[int, int]:
    """(left, right) cells of the two columns at ``width`` (one cell between them for the separator)."""
    left = max(1, (width - 1) // 2)
    return left, max(1, width - 1 - left)


def _chunks(text: str, cells: int) -> list[str]:
    """``text`` cut into pieces of at most ``cells`` cells (a wide character never split)."""
    if cell_len(text) <= cells:
        return [text]
    return chop_cells(text, max(1, cells)) or [""]


def row_height(row: SideRow, width: int, gutter: int) -> int:
    """How many screen lines ``row`` takes at ``width`` (its longer side's wrapped lines)."""
    if row.span is not None:
        return max(1, -(-cell_len(row.span[1]) // max(1, width)))
    left, right = column_widths(width)
    return max(_side_height(row.left, left, gutter), _side_height(row.right, right, gutter))


def _side_height(side: Side | None, cells: int, gutter: int) -> int:
    if side is None or not side.text:
        return 1
    room = cells - gutter - 1 if side.number is not None else cells
    return max(1, -(-cell_len(side.text) // max(1, room)))


def changed_spans(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The character ranges of ``old`` and of ``new`` that differ (difflib on characters); ([], []) for lines
    longer than CHANGED_CHARS_UP_TO (the whole line is marked changed then, by its colour)."""
    if len(old) > CHANGED_CHARS_UP_TO or len(new) > CHANGED_CHARS_UP_TO:
        return [], []
    spans_old: list[tuple[int, int]] = []
    spans_new: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            if i2 > i1:
                spans_old.append((i1, i2))
            if j2 > j1:
                spans_new.append((j1, j2))
    return spans_old, spans_new


def _marked(piece: str, start: int, spans: list[tuple[int, int]], style: Style, marked: Style) -> list[Segment]:
    """``piece`` (the characters from ``start`` of its line) as segments, the ``spans`` of the line in ``marked``."""
    if not spans:
        return [Segment(piece, style)]
    out: list[Segment] = []
    at, end = 0, len(piece)
    for lo, hi in spans:
        lo, hi = max(lo - start, at), min(hi - start, end)
        if hi <= lo:
            continue
        if lo > at:
            out.append(Segment(piece[at:lo], style))
        out.append(Segment(piece[lo:hi], marked))
        at = hi
    if at < end:
        out.append(Segment(piece[at:], style))
    return out


def _side_lines(side: Side | None, cells: int, gutter: int, height: int, styles: Mapping[str, Style],
                spans: list[tuple[int, int]] | None = None) -> list[list[Segment]]:
    """The side's ``height`` lines, each exactly ``cells`` cells: gutter (number or ↪), then its text (``spans``:
    the characters that differ from the line facing it, in the side's word style)."""
    kind = side.kind if side is not None else BLANK
    style = styles.get(kind, Style())
    gutter_style = styles.get(GUTTER, Style())
    if side is None or side.kind == BLANK:
        return [[Segment(" " * cells, style)] for _ in range(height)]
    numbered = side.number is not None
    room = max(1, cells - gutter - 1) if numbered else cells
    pieces = _chunks(side.text, room)
    marked = style + styles.get(ADD_WORD if kind == ADD else DEL_WORD, Style(bold=True))
    out: list[list[Segment]] = []
    start = 0
    for i in range(height):
        line: list[Segment] = []
        if numbered:
            mark = str(side.number) if i == 0 else (WRAP_MARK if i < len(pieces) else "")
            line.append(Segment(mark.rjust(gutter)[:gutter] + " ", gutter_style))
        piece = pieces[i] if i < len(pieces) else ""
        line.extend(_marked(piece, start, spans or [], style, marked))
        start += len(piece)
        line.append(Segment(" " * max(0, room - cell_len(piece)), style))
        out.append(line)
    return out


def row_lines(row: SideRow, width: int, gutter: int, styles: Mapping[str, Style] = DEFAULT_STYLES) -> list[
        list[Segment]]:
    """``row`` laid out at ``width`` cells: its lines (row_height of them), each ``width`` cells exactly."""
    if row.span is not None:
        kind, text = row.span
        style = styles.get(kind, Style())
        return [[Segment(piece + " " * (width - cell_len(piece)), style)] for piece in _chunks(text, max(1, width))]
    left, right = column_widths(width)
    height = row_height(row, width, gutter)
    separator = Segment(SEPARATOR, styles.get(GUTTER, Style()))
    old: list[tuple[int, int]] = []
    new: list[tuple[int, int]] = []
    if row.left is not None and row.right is not None and row.left.kind == DEL and row.right.kind == ADD:
        old, new = changed_spans(row.left.text, row.right.text)  # an edited line facing its edit
    return [[*a, separator, *b] for a, b in zip(_side_lines(row.left, left, gutter, height, styles, old),
                                                _side_lines(row.right, right, gutter, height, styles, new),
                                                strict=True)]


class SideBySide:
    """The Rich renderable of side-by-side rows, as wide as it is given."""

    def __init__(self, rows: list[SideRow], styles: Mapping[str, Style] = DEFAULT_STYLES) -> None:
        self.rows = rows
        self.styles = styles

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        gutter = number_cells(self.rows)
        for row in self.rows:
            for line in row_lines(row, width, gutter, self.styles):
                yield from line
                yield Segment.line()


def side_by_side(old: str, new: str, label_a: str = "left", label_b: str = "right", *, context: int = 3) -> SideBySide:
    """Two texts side by side (the lines that differ and ``context`` lines around them)."""
    return SideBySide(rows_from_opcodes(old.splitlines(), new.splitlines(), label_a=label_a, label_b=label_b,
                                        context=context))
