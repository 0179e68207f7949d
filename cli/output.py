"""What a command gives back: lines on the terminal, an exit code, or a request to show the TUI.

Exit codes: 0 done, 1 the run (or check) failed, 2 bad input or a missing requirement
(:class:`CliError`, printed as one line).

Nothing a run's agents, trials or task file wrote reaches the terminal as it is: :func:`plain` (one
line) and :func:`plain_lines` (where the output is multi-line by design) apply :mod:`rrma.text`, and
both consoles pass every segment they render through the same rule (:class:`SafeConsole`), so an
escape sequence or a bidi override in a hypothesis, a note, a trial log, a task name or an error
message that quotes them is printed inert, never obeyed.

The CLI never imports the TUI: a command that shows it returns a :class:`TuiRequest`, and
:func:`cli.main.main` hands that to the opener it was given (the ``rrma-tui`` entry point,
``tui/main.py``, passes the one that starts the Textual app).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from rrma.text import SafeConsole, printable, without_controls

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

# piped output (logs, CI) gets a wide console so tables do not wrap their first column. No emoji
# codes anywhere: `prog.py:x: low` in a message must not print as an emoji. Markup is only ever in
# the CLI's own literals; text from users, agents and oracles goes in as Text (see `plain`).
console = SafeConsole(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False, markup=False)
_LINE_BREAKS = re.compile(r"[\r\n]+")


def one_line(value: Any) -> str:
    """``value`` as one line of terminal-safe text: line breaks become spaces and every other control
    character (escape introducers, C1, bidi overrides) is removed (:func:`rrma.text.without_controls`)."""
    text = "" if value is None else str(value)
    return without_controls(_LINE_BREAKS.sub(" ", text))


def plain(value: Any) -> Text:
    """``value`` as literal, one-line, terminal-safe text: no Rich markup (``[red]``), no emoji codes
    (``:x:``), no control characters (:func:`one_line`). For anything a run or a task file wrote."""
    return Text(one_line(value))


def plain_lines(value: Any) -> Text:
    """Like :func:`plain` for text that is multi-line by design (a trial's output tail): newlines and
    tabs stay, every other control character goes (:func:`rrma.text.printable`)."""
    return Text(printable("" if value is None else str(value)))


def print_table(table: Table) -> None:
    """``table`` as a table where it fits the terminal whole, else as one line per row (``first: header value ·
    header value ...``; a two-column table reads ``label: value``, its second header never repeated into every
    row), each line soft-wrapped by the terminal: at 80 columns a table too wide was hard-wrapped cell by cell or
    cut (``histo…``, ``[1.01… 3.618…``), and a number cut at its edge reads as another number. Piped (stdout not
    a terminal: 160 columns) a two-column list such as ``bench --list`` reads ``coq: Coq strip-and-rediscover…``,
    one line per row, greppable."""
    if console.measure(table, options=console.options.update_width(1 << 20)).maximum <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(table.title if isinstance(table.title, Text) else Text(str(table.title)), style="bold",
                      soft_wrap=True)
    columns = table.columns
    headers = [c.header if isinstance(c.header, Text) else Text(str(c.header)) for c in columns]
    cells = [list(c.cells) for c in columns]
    for row in range(table.row_count):
        values = [cell if isinstance(cell, Text) else Text(str(cell)) for cell in (col[row] for col in cells)]
        line = Text.assemble(values[0], ":")
        for i, value in enumerate(values[1:], start=1):
            if not value.plain.strip():
                continue
            line.append(" ·" if len(line.plain) > len(values[0].plain) + 1 else "")
            if table.show_header and headers[i].plain and len(columns) > 2:  # which value is which
                line.append_text(Text.assemble(" ", (headers[i].plain, "dim")))
            line.append_text(Text.assemble(" ", value))
        console.print(line, soft_wrap=True)


class CliError(Exception):
    """Bad input or a missing requirement: printed as one line, exit code 2."""


@dataclass(frozen=True)
class TuiRequest:
    """What a command asks the TUI to show: the runs of ``runs_dir``, one run, a run it starts, an experiment."""

    runs_dir: Path
    run_dir: Path | None = None  # `rrma-tui RUN`: open this run's dashboard
    reviewer: str | None = None  # the name recorded on reviews and orders
    start_args: tuple[str, ...] | None = None  # `rrma-tui run TASK.yaml`: the headless driver's arguments
    experiment: Path | None = None  # `rrma-tui experiment show EXP`: its arms side by side


OpenTui = Callable[[TuiRequest], int]  # shows the TUI until the person quits; returns the exit code
