"""The footer every screen uses: the screen's keys, with quit and help first, each key whole.

Textual's Footer lists the focused widget's and the screen's keys before the app's, and a narrow
terminal cuts the row at its right edge: at 80 columns ``q`` and ``?`` fell off. This footer puts
them first, so they stay visible at any width (``?`` lists every key of the screen), and leaves out
whole the keys that do not fit before the command palette's key (docked on the right), rather than
drawing one half hidden under it (``f St▏^p palette``). Before leaving any out it shortens descriptions to
their first word, the last keys first, so a narrow footer keeps more keys (``B Diff`` at 80 columns). The palette key keeps no margin on its right:
with one, the cell after it showed the key underneath (``^p palettee``).
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FIRST = ("q", "question_mark")  # quit, help: always visible


def key_cells(key: FooterKey) -> int:
    """The cells a compact footer key takes, its one-cell margin included (``q Quit`` and a space)."""
    shown = len(key.key_display) + (1 + len(key.description) if key.description else 0)
    return shown + 1


def short_description(description: str) -> str:
    """A key's description in one word: its first (``Diff: side by side / unified`` -> ``Diff``)."""
    words = description.split()
    return words[0].rstrip(":,") if words else description


def shorten(keys: list[FooterKey], room: int) -> None:
    """Where the keys do not all fit in ``room`` cells, shorten their descriptions to one word, the last key first,
    until they do: at 80 columns ``B Diff`` shows rather than ``B Diff: side by side / unified`` being left out."""
    need = sum(key_cells(k) for k in keys)
    for key in reversed(keys):
        if need <= room:
            return
        if getattr(key, "key", None) in FIRST:
            continue
        short = short_description(key.description)
        need -= len(key.description) - len(short)
        key.description = short


class KeysFooter(Footer):
    DEFAULT_CSS = """
    KeysFooter.-compact FooterKey.-command-palette { margin-right: 0; }
    """

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._composed_width = 0

    def compose(self) -> ComposeResult:
        keys: list[Widget] = list(super().compose())
        first = [k for k in keys if getattr(k, "key", None) in FIRST]
        ordered = first + [k for k in keys if k not in first]
        width = self.app.size.width
        self._composed_width = width
        footer_keys = [k for k in ordered if isinstance(k, FooterKey)]
        if len(footer_keys) != len(ordered):  # a group of keys: no way to size it here
            yield from ordered
            return
        palette = [k for k in footer_keys if k.has_class("-command-palette")]
        room = width - sum(key_cells(k) for k in palette)  # the palette key: its border instead of a margin
        shorten([k for k in footer_keys if k not in palette], room)
        for key in footer_keys:
            if key in palette:
                continue
            cells = key_cells(key)
            if cells > room and key not in first:
                continue  # left out whole (`?` lists it); a shorter one after it may still fit
            room -= cells
            yield key
        yield from palette

    def on_resize(self, event: events.Resize) -> None:
        if self._composed_width and event.size.width != self._composed_width:
            self.call_after_refresh(self.recompose)
