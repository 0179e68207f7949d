"""The footer every screen uses: the screen's keys, with quit and help first.

Textual's Footer lists the focused widget's and the screen's keys before the app's, and a narrow
terminal cuts the row at its right edge: at 80 columns ``q`` and ``?`` fell off. This footer puts
them first, so they stay visible at any width (``?`` lists every key of the screen).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer

FIRST = ("q", "question_mark")  # quit, help: always visible


class KeysFooter(Footer):
    def __init__(self) -> None:
        super().__init__(compact=True)

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        first = [k for k in keys if getattr(k, "key", None) in FIRST]
        yield from first + [k for k in keys if k not in first]
