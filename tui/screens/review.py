"""The review queue: trials awaiting a person's decision, the most severe audit finding first, then
would-be bests (RunState.pending_review's order). The ``audit`` column says the severity of a trial's
most severe open finding and how many are open.

A decision (approve, reject, flag, with a note) is a ``review`` event appended by the app's
review worker (through rrma.log.review); this screen learns about it like every other reader,
from the tail. Until the tail brings it back, decided trials are hidden from the queue (the
:class:`tui.messages.ReviewDecided` passes this screen on its way to the app) so the reviewer can
move on.

Like lazygit, rows can be selected (space toggles the highlighted one, ctrl+a every one listed; a ``●``
marks them and the title counts them) and a decision key then decides them all: one confirmation lists
each review that will be written (tui.dialogs.ask_bulk_review), and the app writes them one by one the
way it writes a single review; a trial it cannot review is reported (on this screen and in a
notification) and the others are written. ``C`` copies the highlighted trial's id, proof or diff to the
clipboard (OSC 52).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from rrma.log.codec import LogEvent
from tui.dialogs import ask_bulk_review, ask_copy, ask_review
from tui.messages import OpenTrial, ReviewDecided, ReviewsDecided
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.trial_text import (
    CLAIM,
    HELD,
    MARKS,
    REVIEW_GLYPH,
    SIGMA_CELLS,
    SIGMA_LEGEND,
    Part,
    audit_cell,
    audit_cell_width,
    change_renderable,
    findings_text,
    fit_line,
    fmt_score,
    fmt_sigma,
    is_claim,
    marker_name,
    reviews_text,
)

QUEUE_SCORE_CELLS = 9


def queue_columns(audit_cells: int = len("audit")) -> list[Column]:
    """The to-review view's columns, the audit column as wide as its widest cell (``1 high · 2 warn``). What a
    reviewer decides on stays at any width (the id, the findings, why it is queued: ``☆ claim``); a narrow table
    leaves out the hypothesis, the agent, Δσ and then the score (the detail pane beside shows them all)."""
    return [
        Column("id", "id", 7), Column("audit", "audit", audit_cells), Column("claim", "kind", 10),
        Column("agent", "agent", 10, drop=3),
        Column("score", "score", QUEUE_SCORE_CELLS, "right", drop=1),
        Column("delta", "Δσ", SIGMA_CELLS, "right", drop=2),
        Column("hypothesis", "hypothesis", 0, drop=4),
    ]


QUEUE_COLUMNS = queue_columns()
HINTS = {  # the line under the table: the next step
    "to review": "⏎ read it, decide there, the next opens · y x ! decide here · space select",
    "flagged": "⏎ read it · y x decide again · u withdraw the flag · f the reviewed",
    "reviewed": "⏎ read it · u withdraw a review · f back to the trials to review",
}


# the flagged and reviewed views: who decided what and why (the decision in force; the detail lists every review)
REVIEWED_COLUMNS = [
    Column("id", "id", 7), Column("decision", "decision", 10), Column("reviewer", "reviewer", 8),
    Column("note", "note", 0), Column("score", "score", QUEUE_SCORE_CELLS, "right", drop=2),
    Column("delta", "Δσ", SIGMA_CELLS, "right", drop=3),
]

VIEWS = ("to review", "flagged", "reviewed")  # `f` cycles what the queue lists


class ReviewScreen(RunScreen):
    DEFAULT_CSS = "#review-result { height: auto; padding: 0 1; } #review-hint { height: 1; padding: 0 1; }"
    BINDINGS = [
        Binding("enter", "open_trial", "Open trial"),
        # reviews append to the permanent log: keys no screen uses for anything else, each asks first
        Binding("y", "decide('approve')", "Approve"),
        Binding("x", "decide('reject')", "Reject"),
        Binding("exclamation_mark", "decide('flag')", "Flag", key_display="!"),
        Binding("u", "decide('withdraw')", "Withdraw review", show=False),
        # with trials selected, the four keys above decide each of them (one confirmation lists every write)
        Binding("space", "toggle_select", "Select"),
        Binding("ctrl+a", "select_all", "Select all", show=False),
        Binding("f", "status_filter", "Show"),
        Binding("C", "copy", "Copy id/proof/diff", show=False),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, session: RunSession) -> None:
        super().__init__(session)
        self.decided: set[str] = set()
        self.selected: set[str] = set()  # the trials a decision key decides at once (the table marks them)
        self.last_result = ""  # what the last bulk review wrote and did not (said here until the next one)
        self.view = VIEWS[0]

    def compose(self) -> ComposeResult:
        yield Static("", id="review-title")
        yield Static("", id="review-result")
        with Horizontal(id="review-body"):
            yield LineTable(QUEUE_COLUMNS, self._row, id="queue", select_label="Open trial", marks=True)
            with VerticalScroll(id="review-detail"):
                yield Static("", id="review-detail-text")
        yield Static("", id="review-hint", classes="table-hint")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.refresh_view([])

    def queue(self) -> list[str]:
        """The trials of the current view: unreviewed claims and trials, flagged ones, or every reviewed one."""
        if self.view == "to review":
            return [t.trial_id for t in self.state.pending_review() if t.trial_id not in self.decided]
        wanted = ("flagged",) if self.view == "flagged" else ("approved", "rejected", "flagged")
        return [t.trial_id for t in self.state.agent_trials() if t.review_status in wanted]

    def action_status_filter(self) -> None:
        """Cycle what the queue lists: to review, flagged, reviewed."""
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]
        self.refresh_view([])

    def refresh_view(self, events: list[LogEvent]) -> None:
        ids = self.queue()
        table = self.query_one("#queue", LineTable)
        columns = (queue_columns(audit_cell_width(self.state.trials[t] for t in ids)) if self.view == "to review"
                   else REVIEWED_COLUMNS)
        if table.columns != columns:  # the reviewed views show the decision, the reviewer and the note
            table.set_columns(columns)
        table.set_rows(ids)
        claims = sum(1 for t in ids if is_claim(self.state.trials[t]))
        held = sum(1 for t in ids if self.state.trials[t].held)
        views = "  ".join(f"[{v}]" if v == self.view else v for v in VIEWS)
        title = self.query_one("#review-title", Static)
        self.selected &= set(ids)  # a trial no longer listed (reviewed, here or elsewhere) is no longer selected
        table.marked = self.selected
        parts: list[Part] = [(Text.assemble(("review queue ", "bold"), f"{len(ids)} trial(s) {self.view}"), 0)]
        if self.selected:
            parts.append((Text(f"  {len(self.selected)} selected", "bold reverse"), 0))
        if held and self.view == "to review":
            parts.append((Text(f"  {HELD} {held} held by the audit", MARKS["held"][1]), 0))
        if claims and self.view == "to review":
            parts.append((Text(f"  {CLAIM} {claims} held by the hitl gate", "yellow"), 0))
        parts += [(Text.assemble(("   reviewer ", "dim"), self.session.reviewer), 2),
                  (Text.assemble(("   f: ", "dim"), (views, "dim")), 1), (Text(f"   {SIGMA_LEGEND}", "dim"), 3)]
        title.update(fit_line(parts, title.content_region.width or self.app.size.width - 2))
        self.query_one("#review-hint", Static).update(Text(HINTS[self.view], "dim"))
        result = self.query_one("#review-result", Static)
        result.display = bool(self.last_result)
        result.update(Text(self.last_result, "yellow" if " not recorded" in self.last_result else "green"))
        self._show(table.cursor_key)

    def _row(self, trial_id: str) -> list[str | Text]:
        state = self.state
        rec = state.trials[trial_id]
        if self.view != "to review" and rec.reviews:  # the review in force: what, who, why
            review = rec.reviews[-1]
            label, style = REVIEW_GLYPH.get(rec.review_status, (review["decision"], ""))
            return [rec.trial_id, Text(label, style), str(review["reviewer"]),
                    " ".join(str(review.get("note") or "").split()) or Text("(no note)", "dim"),
                    fmt_score(rec.score, QUEUE_SCORE_CELLS), fmt_sigma(state.delta_sigma_of(rec.score), SIGMA_CELLS)]
        mark = marker_name(state, rec)
        if mark is None and rec.review_status != "unreviewed":
            mark = rec.review_status
        kind = Text(f"{MARKS[mark][0]} {mark}", MARKS[mark][1]) if mark is not None else Text("trial")
        return [rec.trial_id, audit_cell(rec), kind, rec.agent, fmt_score(rec.score, QUEUE_SCORE_CELLS),
                fmt_sigma(state.delta_sigma_of(rec.score), SIGMA_CELLS), rec.hypothesis]

    def _show(self, trial_id: str | None) -> None:
        target = self.query_one("#review-detail-text", Static)
        if trial_id is None or self.model is None:
            target.update(Text("nothing to review", "dim"))
            return
        rec = self.state.trials[trial_id]
        parts: list[RenderableType] = [
            Text.assemble((rec.trial_id, "bold"), f" by {rec.agent}, parent {rec.parent or '-'}"),
            Text(rec.hypothesis),
        ]
        if rec.reviews:  # every review, the superseded ones struck through (as the trial view lists them)
            parts += [Rule("reviews", align="left"), reviews_text(rec)]
        if rec.findings:  # Enter opens the trial, whose findings list jumps to the cited turns and dismisses
            parts += [Rule("audit findings", align="left"), findings_text(rec)]
        parts += [
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
        """Decide the selected trials (one confirmation lists every review it writes), else the highlighted one."""
        selection = self.selection()
        if selection:
            ask_bulk_review(self, self.session, selection, decision)
            return
        key = self.query_one("#queue", LineTable).cursor_key
        if key is None:
            self.notify("the review queue is empty")
            return
        ask_review(self, self.session, key, decision)

    def selection(self) -> list[str]:
        """The selected trials, in the queue's order."""
        return [t for t in self.query_one("#queue", LineTable).rows if t in self.selected]

    def action_toggle_select(self) -> None:
        """Select the highlighted trial, or unselect it, and go to the next row (space three times: three trials)."""
        table = self.query_one("#queue", LineTable)
        key = table.cursor_key
        if key is None:
            return
        self.selected ^= {key}
        table.action_cursor(1)
        self.refresh_view([])

    def action_select_all(self) -> None:
        """Select every trial listed; when they all are, unselect them."""
        rows = set(self.query_one("#queue", LineTable).rows)
        self.selected = set() if rows and self.selected >= rows else rows
        self.refresh_view([])

    def action_copy(self) -> None:
        """Copy the highlighted trial's id, proof or diff to the clipboard (a small chooser asks which)."""
        ask_copy(self, self.session, self.query_one("#queue", LineTable).cursor_key)

    @on(ReviewDecided)
    def _decided(self, message: ReviewDecided) -> None:
        """Hide the trial until the tail brings its review back (the message goes on to the app, which writes it)."""
        self.decided.add(message.trial_id)
        self.refresh_view([])

    @on(ReviewsDecided)
    def _bulk_decided(self, message: ReviewsDecided) -> None:
        """The same for each trial of a confirmed bulk review; the selection is done with."""
        self.decided.update(trial_id for trial_id, _ in message.planned)
        self.selected = set()
        self.last_result = f"{message.decision}: writing {len(message.planned)} review(s)…"
        self.refresh_view([])

    def reviews_recorded(self, summary: str, failed: list[str]) -> None:
        """A bulk review was written: say what happened, and list again the trials it could not review."""
        self.last_result = summary
        self.decided.difference_update(failed)
        if self.is_mounted:
            self.refresh_view([])

    def forget_decisions(self) -> None:
        """A review write failed: show again the trials hidden while their writes were pending."""
        self.decided.clear()
        if self.last_result.endswith("…"):
            self.last_result = "the reviews were not recorded (the notification says why)"
        if self.is_mounted:
            self.refresh_view([])

    def action_open_trial(self) -> None:
        key = self.query_one("#queue", LineTable).cursor_key
        if key is not None:
            self.post_message(OpenTrial(self.session, key, self.queue(), queue=self.view == "to review"))

    def action_back(self) -> None:
        """Esc: clear the selection, if any; else back."""
        if self.selected:
            self.selected = set()
            self.refresh_view([])
            return
        self.app.pop_screen()


def bulk_summary(decision: str, reviewer: str, written: list[tuple[str, bool]], failed: list[tuple[str, str]]) -> str:
    """One line on what a bulk review wrote: ``approve by carol recorded for 2 of 3: t0001, t0002 (t0002 promoted);
    1 not recorded: t0003: why``."""
    ids = ", ".join(trial_id for trial_id, _ in written)
    promoted = [trial_id for trial_id, up in written if up]
    text = f"{decision} by {reviewer} recorded for {len(written)} of {len(written) + len(failed)}" + (f": {ids}" if ids else "")
    if promoted:
        text += f" ({', '.join(promoted)} promoted)"
    if failed:
        text += f"; {len(failed)} not recorded: " + "; ".join(f"{trial_id}: {why}" for trial_id, why in failed)
    return text
