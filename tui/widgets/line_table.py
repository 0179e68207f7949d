"""A virtual table drawn through the Line API: only the visible rows are ever formatted.

Why not DataTable: it measures every cell of every row when rows change, which takes over a
second for the five thousand trials of a long run and again on each live update. Here a row
is a key; ``render_row(key)`` formats it when (and only when) it scrolls into view, so setting
100,000 rows costs a list assignment (STYLE point 4). Columns have fixed widths; the header is
line 0 and stays put while the rows scroll.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # cells; the last column may be 0 to take the remaining width
    justify: str = "left"  # left | right | center


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
                 *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = list(columns)
        self.render_row = render_row
        self.rows: list[str] = []
        self._index: dict[str, int] = {}
        self._style_cache: tuple[Style, Style, Style] | None = None

    # ------------------------------------------------------------------ data

    def set_rows(self, keys: list[str], *, follow: str | None = None) -> None:
        """Replace the rows; the cursor stays on ``follow`` (default: the current key) if present."""
        current = follow if follow is not None else self.cursor_key
        self.rows = keys
        self._index = {}
        self.virtual_size = Size(self._total_width(), len(keys) + 1)
        target = self.index_of(current) if current is not None else None
        self.cursor = target if target is not None else min(self.cursor, max(0, len(keys) - 1))
        self._scroll_to_cursor()
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
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.Highlighted(self, self.cursor_key))

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False, immediate=True)

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

    def _widths(self) -> list[int]:
        fixed = sum(c.width + 1 for c in self.columns if c.width)
        free = max(10, self.scrollable_content_region.width - fixed)
        return [c.width or free for c in self.columns]

    def _total_width(self) -> int:
        total = sum(w + 1 for w in self._widths())
        if any(c.width == 0 for c in self.columns):  # the flexible column absorbs the width
            return min(total, self.scrollable_content_region.width)
        return total

    def _column_at(self, x: int) -> str | None:
        pos = 0
        for col, width in zip(self.columns, self._widths(), strict=True):
            if pos <= x < pos + width + 1:
                return col.key
            pos += width + 1
        return None

    def _segments(self, cells: Sequence[str | Text], base: Style) -> list[Segment]:
        """One row as segments: each cell cut or padded to its column's width (no rich layout)."""
        out: list[Segment] = []
        console = self.app.console
        for col, width, cell in zip(self.columns, self._widths(), cells, strict=False):
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

    def _styles(self) -> tuple[Style, Style, Style]:
        """(row, header, cursor) styles; cached until the widget's styles or focus change."""
        if self._style_cache is None:
            base = self.rich_style
            self._style_cache = (base, base + self.get_component_rich_style("line-table--header"),
                                 base + self.get_component_rich_style("line-table--cursor"))
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
        base, header, cursor = self._styles()
        if y == 0:
            style = header
            segments = self._segments([c.label for c in self.columns], style)
        else:
            row = int(self.scroll_offset.y) + y - 1
            if row >= len(self.rows):
                return Strip.blank(width, base)
            style = cursor if row == self.cursor else base
            segments = self._segments(self.render_row(self.rows[row]), style)
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, style)

    def on_resize(self) -> None:
        self.virtual_size = Size(self._total_width(), len(self.rows) + 1)
