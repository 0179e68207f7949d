"""Text from a run never drives the terminal.

Trial logs, feedback, agent turns, tool results, blackboard posts and proof goals are written by
programs and models the harness does not trust, and the TUI shows them to the person who decides
whether to approve. Rich and Textual drop only a few control characters (BEL, BS, VT, FF, CR), so
an escape sequence in a trial's output reached the terminal as it was: shown in the trial view,
it retitled the window, cleared the screen and wrote "APPROVED BY alice" in reverse video above
the review controls (tested in tests/tui/test_tui_terminal.py, in tmux).

:class:`ControlCharFilter` is a line filter on the whole app (``RRMAApp.get_line_filters``): every
line of every widget passes through it before it is written, and it removes what
:func:`rrma.text.without_controls` removes (the one rule, shared with the headless CLI): the C0
controls, DEL, the C1 range (the 8-bit CSI and OSC introducers) and the Unicode bidi controls, from
the text of each segment. Their cell width is 0 to Rich, so nothing moves; the printable rest of a
sequence stays visible (``]2;...``), which tells the reviewer that something tried. Segments that
carry Textual's own control codes (``Segment.control``) are left alone.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from rrma.text import without_controls

__all__ = ["ControlCharFilter", "without_controls"]


class ControlCharFilter(LineFilter):
    """Remove control characters from the text of every rendered segment (see the module docstring)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        out: list[Segment] | None = None
        for i, seg in enumerate(segments):
            if seg.control:
                continue
            clean = without_controls(seg.text)
            if clean is not seg.text:  # without_controls returns its argument when there is nothing to drop
                if out is None:
                    out = list(segments)
                out[i] = Segment(clean, seg.style, seg.control)
        return segments if out is None else out  # the usual case: nothing to do, no copy
