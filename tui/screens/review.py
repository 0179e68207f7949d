"""The review queue: trials awaiting a person's decision, would-be bests first.

A decision (approve, reject, flag, with a note) is a ``review`` event appended by the app's
review worker; this screen learns about it like every other reader, from the tail. Until the
tail brings it back, decided trials are hidden from the queue so the reviewer can move on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui.reader import RawEvent
from tui.screens.base import RunScreen, RunSession
from tui.screens.modals import NoteScreen
from tui.widgets.line_table import Column, LineTable
from tui.widgets.trial_text import change_renderable, fmt_score, fmt_sigma, is_claim

QUEUE_COLUMNS = [
    Column("id", "id", 7), Column("claim", "kind", 9), Column("agent", "agent", 10),
    Column("score", "score", 9, "right"), Column("delta", "Δσ", 7, "right"), Column("hypothesis", "hypothesis", 0),
]


def ask_and_record(screen: Screen[Any], session: RunSession, trial_id: str, decision: str) -> None:
    """Ask for a note, then have the app append the review (Esc cancels)."""

    def done(note: str | None) -> None:
        if note is None:
            return
        screen.post_message(ReviewScreen.Decided(trial_id, decision, note))
        screen.app.record_review(session, trial_id, decision, note)  # type: ignore[attr-defined]

    screen.app.push_screen(NoteScreen(decision, trial_id), done)


class ReviewScreen(RunScreen):
    BINDINGS = [
        Binding("a", "decide('approve')", "Approve"),
        Binding("x", "decide('reject')", "Reject"),
        Binding("f", "decide('flag')", "Flag"),
        Binding("enter", "open_trial", "Trial"),
        Binding("escape", "back", "Back"),
    ]

    @dataclass
    class Decided(Message):
        """A reviewer decided on ``trial_id`` (the event is being appended)."""

        trial_id: str
        decision: str
        note: str

    def __init__(self, session: RunSession) -> None:
        super().__init__(session)
        self.decided: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static("", id="review-title")
        with Horizontal(id="review-body"):
            yield LineTable(QUEUE_COLUMNS, self._row, id="queue")
            with VerticalScroll(id="review-detail"):
                yield Static("", id="review-detail-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.refresh_view([])

    def queue(self) -> list[str]:
        return [t.trial_id for t in self.state.pending_review() if t.trial_id not in self.decided]

    def refresh_view(self, events: list[RawEvent]) -> None:
        ids = self.queue()
        table = self.query_one("#queue", LineTable)
        table.set_rows(ids)
        claims = sum(1 for t in ids if is_claim(self.state.trials[t]))
        self.query_one("#review-title", Static).update(Text.assemble(
            ("review queue ", "bold"), f"{len(ids)} trial(s) to review", (f"  ⚑ {claims} held by the hitl gate", "yellow") if claims else "",
            ("   reviewer ", "dim"), self.session.reviewer,
        ))
        self._show(table.cursor_key)

    def _row(self, trial_id: str) -> list[str | Text]:
        state = self.state
        rec = state.trials[trial_id]
        kind = Text("⚑ claim", "bold yellow") if is_claim(rec) else (Text("★ best", "green") if rec.promoted else Text("trial"))
        return [rec.trial_id, kind, rec.agent, fmt_score(rec.score), fmt_sigma(state.delta_sigma_of(rec.score)),
                rec.hypothesis]

    def _show(self, trial_id: str | None) -> None:
        target = self.query_one("#review-detail-text", Static)
        if trial_id is None or self.model is None:
            target.update(Text("nothing to review", "dim"))
            return
        rec = self.state.trials[trial_id]
        parts: list[RenderableType] = [
            Text.assemble((rec.trial_id, "bold"), f" by {rec.agent}, parent {rec.parent or '-'}"),
            Text(rec.hypothesis),
            Rule("outcome", align="left"),
            Text(f"{rec.status} {fmt_score(rec.score)} ({fmt_sigma(self.state.delta_sigma_of(rec.score)) or '-'} vs baseline)"),
            Text(rec.feedback, "italic"),
            Rule("change", align="left"),
            change_renderable(self.model, rec),
        ]
        target.update(Group(*parts))

    @on(LineTable.Highlighted, "#queue")
    def _highlighted(self, message: LineTable.Highlighted) -> None:
        self._show(message.key)

    @on(LineTable.Selected, "#queue")
    def _selected(self, message: LineTable.Selected) -> None:
        self.action_open_trial()

    def action_decide(self, decision: str) -> None:
        key = self.query_one("#queue", LineTable).cursor_key
        if key is None:
            self.notify("the review queue is empty")
            return
        ask_and_record(self, self.session, key, decision)

    @on(Decided)
    def _decided(self, message: Decided) -> None:
        self.decided.add(message.trial_id)
        self.refresh_view([])

    def forget_decisions(self) -> None:
        """A review write failed: show again the trials hidden while their writes were pending."""
        self.decided.clear()
        if self.is_mounted:
            self.refresh_view([])

    def action_open_trial(self) -> None:
        from tui.screens.trial import TrialScreen

        key = self.query_one("#queue", LineTable).cursor_key
        if key is not None:
            self.app.push_screen(TrialScreen(self.session, key, self.queue()))

    def action_back(self) -> None:
        self.app.pop_screen()
