"""How long and how long ago, in a few cells: the views' clock and their words for durations.

Pure formatting, shared by the header, the runs list, the run comparison and the training panel; the
app's clock (:func:`utcnow`) is handed to screens so a test can move it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rrma.log.events import parse_ts


def human_duration(seconds: float) -> str:
    """Whole seconds in at most two units: ``42s``, ``3m05s``, ``2h07m``, ``3d04h`` (negative reads as 0s)."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def age(ts: str, now: datetime) -> str:
    """How long before ``now`` an event's ``ts`` was (``-`` when it is not a timestamp)."""
    when = parse_ts(ts)
    return "-" if when is None else human_duration((now - when).total_seconds())


def utcnow() -> datetime:
    """The views' clock: now, in UTC."""
    return datetime.now(UTC)
