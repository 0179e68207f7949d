"""Text an agent or a trial wrote, made safe to print on a person's terminal.

Trial logs, feedback, hypotheses, agent turns, blackboard posts and proof goals come from programs
and models the harness does not trust. Printed raw, an escape sequence in them retitles the
window, moves the cursor, clears the screen or paints a forged "APPROVED" line above what the
reviewer reads; a right-to-left override makes a name read backwards. :func:`without_controls`
removes the C0 controls (except newline and tab, which :func:`printable` keeps for multi-line
text), DEL, the C1 range (8-bit CSI and OSC introducers) and the Unicode bidirectional controls.
The printable rest of a sequence stays (``]2;...``), which tells the reader that something tried.

The TUI applies the same rule to every rendered line (tui/terminal.py); the headless CLI applies
it to everything it prints that a run's agents or trials wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

# C0 controls, DEL, C1 controls; and the bidi embeddings, overrides and isolates (LRE..RLO, LRI..PDI)
# plus the implicit marks (LRM, RLM, ALM), which reorder what a line appears to say
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f" + "".join(chr(c) for c in _BIDI) + "]")
_DROP = {c: None for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)}
_DROP_KEEP_LINES = {c: None for c in _DROP if c not in (0x0A, 0x09)}


def clip_middle(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters by dropping its middle.

    Feedback starts with the verdict (``crash: output flood: more than N bytes written; killed``) and
    ends with the program's last output; cutting from the front would lose the verdict, cutting from
    the back the error. A quarter of the room goes to the head, the rest to the tail.
    """
    if len(text) <= limit:
        return text
    longest = len(f"\n[... {len(text)} characters cut ...]\n")
    keep = limit - longest
    if keep < 8:
        return text[-limit:] if limit > 0 else ""
    head = keep // 4
    tail = keep - head
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


def without_controls(text: str) -> str:
    """``text`` with every control character removed (C0 including newline and tab, DEL, C1, bidi)."""
    return text.translate(_DROP) if _CONTROL.search(text) else text


def printable(text: str) -> str:
    """``text`` safe for a terminal, keeping its newlines and tabs (multi-line feedback, logs)."""
    return text.translate(_DROP_KEEP_LINES) if _CONTROL.search(text) else text


class SafeConsole(Console):
    """A Console whose printed text never drives the terminal: every segment it renders (messages,
    table cells, titles) passes through :func:`printable`. Rich's own styles are not in a segment's
    text (they are written from its style), and its control segments are left alone.

    The backstop for every console that prints a run's text (the headless CLI, the benches): call
    sites clean that text themselves, which also keeps it on one line where the output is one line;
    this catches whatever a call site missed.
    """

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if not segment.control and segment.text:
                clean = printable(segment.text)
                if clean is not segment.text:  # printable returns its argument when there is nothing to drop
                    segment = Segment(clean, segment.style, segment.control)
            yield segment
