"""Text from a run never drives the terminal.

Trial logs, feedback, agent turns, tool results, blackboard posts and proof goals are written by
programs and models the harness does not trust, and the TUI shows them to the person who decides
whether to approve. Rich and Textual drop only a few control characters (BEL, BS, VT, FF, CR), so
an escape sequence in a trial's output reached the terminal as it was: shown in the trial view,
it retitled the window, cleared the screen and wrote "APPROVED BY alice" in reverse video above
the review controls (tested in tests/tui/test_tui_terminal.py, in tmux).

:class:`ControlCharFilter` is a line filter on the whole app (``RRMAApp.get_line_filters``): every
line of every widget passes through it before it is written, and it removes the C0 controls, DEL
and the C1 range (the 8-bit CSI and OSC introducers) from the text of each segment. Their cell
width is 0 to Rich, so nothing moves; the printable rest of a sequence stays visible (``]2;...``),
which tells the reviewer that something tried. Segments that carry Textual's own control codes
(``Segment.control``) are left alone.
"""

from __future__ import annotations

import re

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DROP = {c: None for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))}


def without_controls(text: str) -> str:
    """``text`` with its control characters removed (C0, DEL, C1)."""
    return text.translate(_DROP) if _CONTROL.search(text) else text


class ControlCharFilter(LineFilter):
    """Remove control characters from the text of every rendered segment (see the module docstring)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(not seg.control and _CONTROL.search(seg.text) for seg in segments):
            return segments  # the usual case: nothing to do, no copy
        return [seg if seg.control or not _CONTROL.search(seg.text)
                else Segment(seg.text.translate(_DROP), seg.style, seg.control) for seg in segments]
