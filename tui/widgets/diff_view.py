"""The diff view: a trial comparison's lines (rrma/diff.py) drawn through Textual's Line API.

Only the lines on screen are ever styled, so two trials with 10,000-line files open as fast as two
with ten. Unified, one diff line a screen line (a line longer than the view ends in ``›`` and
scrolls sideways), or side by side, with tui/widgets/side_diff.py's rows laid out at the view's width.
"""

from __future__ import annotations

import bisect

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from rrma.diff import ADD, CTX, DEL, FILE, HUNK, NOTE, DiffLine
from tui.widgets.side_diff import (
    ADD_WORD,
    BLANK,
    DEL_WORD,
    GUTTER,
    SideRow,
    number_cells,
    row_height,
    row_lines,
)


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
