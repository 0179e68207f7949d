"""How many, in a few cells: the one way the views write a token count.

Why it exists: the agents pane, the trace and the run comparison each wrote token counts their own way
(``1785.7k`` in one place and ``1.62M`` in another, issue 35). Pure formatting, so it lives with the views
(tui/durations.py holds their words for time); the core keeps the counts as integers.
"""

from __future__ import annotations


def token_count(n: float) -> str:
    """A token count in at most five cells, three significant digits: ``950``, ``1.8k``, ``13.3k``, ``178k``,
    ``1.79M``, ``17.9M``, ``179M``, ``1.79G``."""
    n = max(0.0, float(n))
    if n < 1000:
        return f"{int(n)}"
    for unit, scale in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        value = n / scale
        if value < 999.5 or unit == "G":
            return f"{value:.2f}{unit}" if value < 9.995 and unit != "k" else (
                f"{value:.1f}{unit}" if value < 99.95 else f"{value:.0f}{unit}")
    raise AssertionError("unreachable")  # pragma: no cover
