"""One line for an unexpected exception, the same wherever it is shown.

The loop records a run's first unexpected error with it (``run.finished``'s error, a harness note), the
CLI prints it when a command fails unexpectedly, and the TUI shows it when a worker fails: so a person
reads the same words for one failure in the log, the terminal and the app. The line names the type, the
message's first line and the frame it was raised in (file name, line, function), never a traceback, and
it never raises. It sits beside the core's other leaf modules, so a view can read it without importing
the loop.
"""

from __future__ import annotations

import traceback
from pathlib import Path


def error_line(exc: BaseException) -> str:
    """One line for an unexpected exception: its type, the first line of its message, where it was raised."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    msg = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        msg += f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"
    return msg
