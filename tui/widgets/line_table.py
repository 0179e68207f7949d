"""A virtual table drawn through the Line API: only the visible rows are ever formatted.

Why not DataTable: it measures every cell of every row when rows change, which takes over a
second for the five thousand trials of a long run and again on each live update. Here a row
is a key; ``render_row(key)`` formats it when (and only when) it scrolls into view, so setting
100,000 rows costs a list assignment (STYLE point 4). Columns have fixed widths; the header is
line 0 and stays put while the rows scroll. A table narrower than its columns leaves whole columns
out (each column's ``drop`` says which go first) rather than cutting a number at its right edge.

Marks (as lazygit's selected lines): a table made with ``marks=True`` keeps a two-cell gutter on its
left, where each key in ``marked`` (its owner's selection) is drawn with ``●``, whatever the columns.

Follow mode (as in toolong's tail): a table whose owner names its ``live_end`` (the edge where
new rows appear: ``"top"`` for newest-first, ``"bottom"`` for log order) keeps the cursor and the
view on that edge while rows arrive, as long as the cursor sits there. Any move away (keys, a
click, scrolling the view away with the wheel or the scroll bar) stops following, and then the
selected row and the rows on screen stay put however many rows are inserted around them; moving
back to the live end (``Home`` or ``End``, whichever it is) follows again. The table posts
:class:`LineTable.FollowChanged` so its owner can say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollDown, ScrollTo, ScrollUp
from textual.strip import Strip

LiveEnd = Literal["top", "bottom"]


def live_index(live_end: LiveEnd | None, count: int) -> int | None:
    """The row where new rows appear: 0 at the top, the last row at the bottom (None: no live end, no rows)."""
    if live_end is None or count == 0:
        return None
    return 0 if live_end == "top" else count - 1


def placed_cursor(count: int, old: int, kept: int | None, *, following: bool, live_end: LiveEnd | None) -> int:
    """Where the cursor goes when the rows are replaced by ``count`` rows.

    Following: the live end. Else the row of the key it was on (``kept``), else as near to the
    row it was on (``old``) as the new rows allow.
    """
    live = live_index(live_end, count) if following else None
    if live is not None:
        return live
    if kept is not None:
        return kept
    return min(old, max(0, count - 1))


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # cells; the last column may be 0 to take the remaining width
    justify: str = "left"  # left | right | center
    drop: int = 0  # 0: always shown; otherwise, when the table is too narrow, higher values are left out first


MARK = "●"  # a marked row (see LineTable's marks)
MARK_GUTTER = 2  # its cells: the mark and a space
FLEX_MIN = 10  # cells the flexible (width 0) column needs to be worth showing


def column_layout(columns: Sequence[Column], width: int) -> list[tuple[int, int]]:
    """(column index, cells) of the columns shown in ``width`` cells, each followed by one space.

    Nothing is cut at the table's right edge: columns that do not fit are left out whole, highest
    ``drop`` first (then the rightmost); if the ones that must stay still do not fit, the last of
    them is narrowed, and a narrowed cell ends in ``…`` (see ``_segments``).
    """
    keep = list(range(len(columns)))

    def need(idx: list[int]) -> int:
        return sum((columns[i].width or FLEX_MIN) + 1 for i in idx)

    while need(keep) > width:
        droppable = [i for i in keep if columns[i].drop > 0]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    fixed = sum(columns[i].width + 1 for i in keep if columns[i].width)
    free = max(1, width - fixed - 1)
    out = [(i, columns[i].width or max(free, 1)) for i in keep]
    over = sum(w + 1 for _, w in out) - width
    if over > 0 and out:  # only columns that must stay, and still too wide: narrow the last one
        i, w = out[-1]
        out[-1] = (i, max(1, w - over))
    return out


class LineTable(ScrollView, can_focus=True):
    """Rows are keys; cells come from ``render_row(key)`` at draw time."""

    DEFAULT_CSS = """
    LineTable { height: 1fr; }
    LineTable > .line-table--header { text-style: bold; background: $panel; color: $text; }
    LineTable > .line-table--cursor { background: $accent 40%; }
    LineTable:focus > .line-table--cursor { background: $accent; color: $text; }
    """
    COMPONENT_CLASSES = {"line-table--header", "line-table--cursor"}
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    @dataclass
    class Highlighted(Message):
        """The cursor moved to ``key`` (coalesced: only the latest matters)."""

        table: LineTable
        key: str | None

        @property
        def control(self) -> LineTable:
            return self.table

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LineTable.Highlighted) and message.table is self.table

    @dataclass
    class FollowChanged(Message):
        """Following the live end turned on or off (coalesced: only the latest matters)."""

        table: LineTable
        following: bool

        @property
        def control(self) -> LineTable:
            return self.table

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LineTable.FollowChanged) and message.table is self.table

    @dataclass
    class Selected(Message):
        """Enter (or a click on the cursor row) on ``key``."""

        table: LineTable
        key: str

        @property
        def control(self) -> LineTable:
            return self.table

    @dataclass
    class HeaderClicked(Message):
        table: LineTable
        column: str

        @property
        def control(self) -> LineTable:
            return self.table

    def __init__(self, columns: Sequence[Column], render_row: Callable[[str], Sequence[str | Text]],
                 *, live_end: LiveEnd | None = None, select_label: str | None = None, marks: bool = False,
                 name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        if select_label:  # Enter acts here: the footer says what it opens (the table's binding hides the screen's)
            self._bindings.key_to_bindings["enter"] = [Binding("enter", "select", select_label)]
        self.columns = list(columns)
        self.render_row = render_row
        self.rows: list[str] = []
        self._index: dict[str, int] = {}
        self._style_cache: tuple[Style, Style, Style, Style] | None = None
        self._columns_cache: tuple[int, list[tuple[int, int]]] | None = None
        self._live_end: LiveEnd | None = live_end
        self._following = True  # a new table follows its live end until the user moves
        self._placing = False  # set_rows is moving the cursor: not a user's move
        self.mark_cells = MARK_GUTTER if marks else 0  # cells left of the columns for the marks
        self.marked: set[str] = set()  # keys drawn with MARK in the gutter (the owner's selection)

    # ------------------------------------------------------------------ following

    @property
    def live_end(self) -> LiveEnd | None:
        """Where new rows appear (the owner says, e.g. from its sort order); None: nowhere to follow."""
        return self._live_end

    @live_end.setter
    def live_end(self, value: LiveEnd | None) -> None:
        was = self.following
        self._live_end = value
        if value is None:  # e.g. sorted by score: keep the selected row from now on
            self._following = False
        self._follow_changed(was)

    @property
    def following(self) -> bool:
        """Whether the cursor and the view stay on the live end as rows arrive."""
        return self._live_end is not None and self._following

    @following.setter
    def following(self, value: bool) -> None:
        """True also moves the cursor to the live end (if there is one)."""
        was = self.following
        self._following = value
        live = live_index(self._live_end, len(self.rows))
        if value and live is not None and live != self.cursor:
            self.cursor = live
        self._follow_changed(was)

    def _follow_changed(self, was: bool) -> None:
        if self.following != was:
            self.post_message(self.FollowChanged(self, self.following))

    def _user_scrolled(self, *, up: bool) -> None:
        """The view is scrolled by the wheel or the scroll bar: moving it off the live end stops following."""
        if not self.following:
            return
        away = (up and self.scroll_y > 0) if self._live_end == "bottom" else (not up and self.scroll_y < self.max_scroll_y)
        if away:
            was = self.following
            self._following = False
            self._follow_changed(was)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._user_scrolled(up=True)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._user_scrolled(up=False)

    def on_scroll_up(self, message: ScrollUp) -> None:
        self._user_scrolled(up=True)

    def on_scroll_down(self, message: ScrollDown) -> None:
        self._user_scrolled(up=False)

    def on_scroll_to(self, message: ScrollTo) -> None:
        if message.y is not None and round(message.y) != round(self.scroll_y):
            self._user_scrolled(up=message.y < self.scroll_y)

    # ------------------------------------------------------------------ data

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # line 0 is the header

    def set_rows(self, keys: list[str], *, keep: str | None = None) -> None:
        """Replace the rows. Following: the cursor goes to the live end. Else it stays on ``keep``
        (default: the current key) if present, and the view keeps the rows it showed where they were."""
        old_rows, old_cursor, old_top = self.rows, self.cursor, int(self.scroll_offset.y)
        visible = self._visible_rows()
        cursor_in_view = old_top <= old_cursor < old_top + visible
        current = keep if keep is not None else self.cursor_key
        top_key = old_rows[old_top] if 0 <= old_top < len(old_rows) else None
        self.rows = keys
        self._index = {}
        self.virtual_size = Size(self._total_width(), len(keys) + 1)
        kept = self.index_of(current) if current is not None else None
        following = self.following and keep is None
        cursor = placed_cursor(len(keys), old_cursor, kept, following=following, live_end=self._live_end)
        if following:  # show the live end: the top, or (by _scroll_to_cursor below) the last rows
            top = 0 if self._live_end == "top" else old_top
        elif kept is not None and cursor_in_view:  # the selected row stays on the same screen line
            top = cursor - (old_cursor - old_top)
        else:  # the row that was at the top of the view stays there
            anchor = self.index_of(top_key) if top_key is not None else None
            top = anchor if anchor is not None else old_top
        self._placing = True
        try:
            self.scroll_to(y=top, animate=False, immediate=True, force=True)  # force: the scroll bar may not be laid out yet
            self.cursor = cursor
        finally:
            self._placing = False
        if keep is not None and self._live_end is not None:
            self._set_following_from_cursor()
        if following or cursor_in_view or keep is not None:
            self._scroll_to_cursor()
        self.refresh()

    def set_columns(self, columns: Sequence[Column]) -> None:
        """Replace the columns (the owner shows other fields of the same rows); the rows and the cursor stay."""
        self.columns = list(columns)
        self._columns_cache = None
        self.virtual_size = Size(self._total_width(), len(self.rows) + 1)
        self.refresh()

    def index_of(self, key: str) -> int | None:
        if not self._index and self.rows:
            self._index = {k: i for i, k in enumerate(self.rows)}
        return self._index.get(key)

    @property
    def cursor_key(self) -> str | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def move_to(self, key: str) -> bool:
        index = self.index_of(key)
        if index is None:
            return False
        self.cursor = index
        return True

    def refresh_rows(self) -> None:
        """Redraw (cells changed, rows did not)."""
        self.refresh()

    # ------------------------------------------------------------------ cursor

    def watch_cursor(self, old: int, new: int) -> None:
        if not self._placing:  # a move (keys, click, move_to): following is whether it ended on the live end
            self._set_following_from_cursor()
            self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.Highlighted(self, self.cursor_key))

    def _set_following_from_cursor(self) -> None:
        live = live_index(self._live_end, len(self.rows))
        if live is not None:
            was = self.following
            self._following = self.cursor == live
            self._follow_changed(was)

    def _scroll_to_cursor(self) -> None:
        visible = self._visible_rows()
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True, force=True)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False, immediate=True, force=True)

    def action_cursor(self, step: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + step))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.scrollable_content_region.height - 2))

    def action_edge(self, end: int) -> None:
        if self.rows:
            self.cursor = len(self.rows) - 1 if end else 0

    def action_select(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(self, key))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            column = self._column_at(event.x + int(self.scroll_offset.x))
            if column is not None:
                self.post_message(self.HeaderClicked(self, column))
            return
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self.rows):
            if row == self.cursor and event.chain >= 2:
                self.action_select()
            self.cursor = row

    # ------------------------------------------------------------------ drawing

    def _column_layout(self) -> list[tuple[int, int]]:
        """The shown columns for the current width (cached per width; see :func:`column_layout`)."""
        width = self.scrollable_content_region.width - self.mark_cells
        if self._columns_cache is None or self._columns_cache[0] != width:
            self._columns_cache = (width, column_layout(self.columns, width))
        return self._columns_cache[1]

    @property
    def shown_columns(self) -> list[str]:
        """The keys of the columns that fit the table's width (the others are left out whole)."""
        return [self.columns[i].key for i, _ in self._column_layout()]

    def _total_width(self) -> int:
        return min(self.mark_cells + sum(w + 1 for _, w in self._column_layout()), max(1, self.scrollable_content_region.width))

    def _column_at(self, x: int) -> str | None:
        pos = self.mark_cells
        for i, width in self._column_layout():
            if pos <= x < pos + width + 1:
                return self.columns[i].key
            pos += width + 1
        return None

    def _segments(self, cells: Sequence[str | Text], base: Style) -> list[Segment]:
        """One row as segments: each cell cut or padded to its column's width (no rich layout)."""
        out: list[Segment] = []
        console = self.app.console
        for index, width in self._column_layout():
            if index >= len(cells):
                break
            col, cell = self.columns[index], cells[index]
            if isinstance(cell, Text):
                own = base + console.get_style(cell.style) if cell.style else base  # render() omits it
                parts = [(seg.text, own + seg.style if seg.style else own)
                         for seg in cell.render(console) if seg.text and seg.text != "\n"]
            else:
                parts = [(str(cell).replace("\n", " "), base)]
            cell_segments = Segment.adjust_line_length([Segment(t, st) for t, st in parts], width, base, pad=False)
            used = Segment.get_line_length(cell_segments)
            if used >= width and sum(len(t) for t, _ in parts) > width:  # cut: mark it
                cell_segments = Segment.adjust_line_length(cell_segments, width - 1, base, pad=False)
                cell_segments.append(Segment("…", base))
                used = width
            pad = width - used
            if col.justify == "right":
                out.append(Segment(" " * pad, base))
                out.extend(cell_segments)
            elif col.justify == "center":
                out.append(Segment(" " * (pad // 2), base))
                out.extend(cell_segments)
                out.append(Segment(" " * (pad - pad // 2), base))
            else:
                out.extend(cell_segments)
                out.append(Segment(" " * pad, base))
            out.append(Segment(" ", base))
        return out

    def _styles(self) -> tuple[Style, Style, Style, Style]:
        """(row, header, cursor, cursor colours) styles; cached until the widget's styles or focus change.

        Where the CSS gives the cursor row a foreground (focused), its colours win over the cells'
        colours, which are chosen to read on the table's background, not on the cursor's.
        """
        if self._style_cache is None:
            base = self.rich_style
            cursor = self.get_component_rich_style("line-table--cursor")
            sets_colour = self.get_component_rich_style("line-table--cursor", partial=True).color is not None
            over = Style(color=cursor.color, bgcolor=cursor.bgcolor) if sets_colour else Style()
            self._style_cache = (base, base + self.get_component_rich_style("line-table--header"), base + cursor, over)
        return self._style_cache

    def notify_style_update(self) -> None:
        self._style_cache = None
        super().notify_style_update()

    def on_focus(self) -> None:
        self._style_cache = None

    def on_blur(self) -> None:
        self._style_cache = None

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x = int(self.scroll_offset.x)
        base, header, cursor, over = self._styles()
        if y == 0:
            style = header
            segments = self._segments([c.label for c in self.columns], style)
            if self.mark_cells:
                segments.insert(0, Segment(" " * self.mark_cells, style))
        else:
            row = int(self.scroll_offset.y) + y - 1
            if row >= len(self.rows):
                return Strip.blank(width, base)
            style = cursor if row == self.cursor else base
            segments = self._segments(self.render_row(self.rows[row]), style)
            if self.mark_cells:
                mark = MARK if self.rows[row] in self.marked else ""
                segments.insert(0, Segment(mark.ljust(self.mark_cells), style + Style(bold=True) if mark else style))
            if row == self.cursor and over:
                segments = list(Segment.apply_style(segments, post_style=over))
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, style)

    def on_resize(self) -> None:
        self.virtual_size = Size(self._total_width(), len(self.rows) + 1)
        if self.following:  # a shorter view still shows the live end
            self._scroll_to_cursor()
