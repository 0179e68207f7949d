"""The dashboard's side panes: the agents table, the blackboard, and which panes show at what width.

Why it exists: the dashboard screen (tui/screens/dashboard.py) wires the live run to its widgets; what each side
pane shows, and how wide the column they share is, are drawn from the session's state alone and tested on
their own (tests/tui/test_tui_layout.py), so they live here.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App

from tui.counts import token_count
from tui.session import RunSession


def agents_table(session: RunSession) -> Table:
    state = session.state
    table = Table(box=None, expand=True, show_header=True, header_style="bold", pad_edge=False)
    # the numbers' headers are never cut (``tur… tria… tok…`` at 80 columns): each column is at least as wide
    # as its header, and what is doing now takes what is left (cut with an ellipsis)
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=12)
    table.add_column("turns", justify="right", no_wrap=True, min_width=len("turns"))
    table.add_column("trials", justify="right", no_wrap=True, min_width=len("trials"))
    table.add_column("tokens", justify="right", no_wrap=True, min_width=len("tokens"))
    table.add_column("now", ratio=1, no_wrap=True, overflow="ellipsis")
    for rec in sorted(state.agents.values(), key=lambda a: a.name):
        tokens = rec.tokens_in + rec.tokens_out
        table.add_row(rec.name, str(rec.turns), str(rec.trials), token_count(tokens) if tokens else "-",
                      rec.last_activity)
    return table


def blackboard_text(session: RunSession, limit: int = 60) -> Text:
    """Blackboard posts and steer notes (``→ agents``), newest first."""
    state = session.state
    items = sorted([*state.blackboard[-limit:], *state.steers[-limit:]], key=lambda p: p["seq"])[-limit:]
    text = Text()
    if not items:
        text.append("(no posts yet)", "dim")
    for post in reversed(items):
        if "to" in post:  # a steer note
            text.append(f"{post['by']}", "bold magenta")
            text.append(f" → {', '.join(post['to']) or 'every agent'}", "magenta")
        else:
            text.append(f"{post['agent']}", "bold cyan")
        if post.get("trial_id"):
            text.append(f" [{post['trial_id']}]", "dim")
        text.append(f" {post['text']}\n")
    return text


@dataclass
class PaneLayout:
    """Which of the dashboard's panes show (btop/k9s style): ``Z`` cycles the zoom (normal, the chart over the
    whole body, the table alone), ``1`` ``2`` ``3`` hide or show the chart, the agents and the blackboard. One
    per app session: it survives screen switches and opening another run, not a restart."""

    zoom: str = "normal"  # one of ZOOMS
    chart: bool = True
    agents: bool = True
    blackboard: bool = True


ZOOMS = ["normal", "chart", "table"]
_LAYOUTS: weakref.WeakKeyDictionary[App[Any], PaneLayout] = weakref.WeakKeyDictionary()


def pane_layout(app: App[Any]) -> PaneLayout:
    """The app session's pane layout (made on first use)."""
    layout = _LAYOUTS.get(app)
    if layout is None:
        layout = _LAYOUTS[app] = PaneLayout()
    return layout


NARROW_BELOW = 76  # columns: a narrower dashboard leaves out the right-hand panes (the table keeps its numbers whole)
RIGHT_PANES = 44  # columns of the chart, agents and blackboard (app.tcss #dash-right) up to ROOMY_FROM
ROOMY_FROM = 140  # columns: past this the table has every column whole, and the chart takes most of the rest


def right_panes_width(screen_width: int) -> int:
    """The chart's column (with the agents and the blackboard under it): RIGHT_PANES, and two thirds of every
    column past ROOMY_FROM (at 200 columns, 84 beside a table of 116: the table's extra room is its hypothesis)."""
    return RIGHT_PANES + max(0, screen_width - ROOMY_FROM) * 2 // 3
