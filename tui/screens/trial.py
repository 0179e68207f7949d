"""The trial view: audit findings, hypothesis, diff (or proof), outcome and feedback, log tail, lineage, reviews.

A trial with audit findings (rrma/audit) lists them in a small table above the rest, open ones
most severe first: Enter on one opens the trace on the turn it cites, ``X`` dismisses it with a
note (an ``audit.dismissed`` event, asked first like a review). The body repeats each finding in
full (explanation, the cited seqs with their quotes, who dismissed it and why). ``C`` copies the
trial's id, proof or diff to the clipboard (OSC 52).

While the trial runs, a pane pinned under the body follows the program's live output (``tail -f``): the
file the executor has spawn append to as the program writes (``RUN/trials/<id>/live.log``, the path
:func:`rrma.log.store.live_output_path` gives both), polled every :data:`LIVE_POLL_S` seconds by a timer;
as many of its last lines as the pane has rows (so its newest line is always its last row, whatever the
body is scrolled to), each passed through the terminal filter (tui/terminal.py) and cut at the pane's edge.
The pane's head says ``following live output (N bytes)`` only while a running program's writer holds the
file (rrma/contain/live.py; a leftover of a finished program or a dead harness reads ``not live``), the
trial's age against its budget (``budget.trial_seconds``) ticking every second, and a sparkline of its
progress samples (``trial.progress``) where the log has them. The title and the outcome say the age too
(a running trial has no seconds yet). When the trial finishes the pane goes and the body shows the stored log
(the record) again. ``F`` follows whichever trial is running: the newest running one now, and the next one
to run when it finishes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from rrma.contain.live import LiveOutput, read_live_output
from rrma.log.codec import LogEvent
from rrma.log.layout import TRIALS, live_output_path
from tui.dialogs import ask_copy, ask_dismissal, ask_review
from tui.messages import OpenCompare, OpenProofTree, OpenTrace, ReviewDecided
from tui.screens.base import RunScreen, shown
from tui.session import RunSession
from tui.terminal import without_controls
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.run_header import run_now
from tui.widgets.trial_text import (
    CLAIM,
    HELD,
    MARKS,
    REVIEW_GLYPH,
    STATUS_GLYPH,
    Part,
    change_renderable,
    finding_cells,
    findings_text,
    fit_line,
    fmt_age,
    fmt_score,
    fmt_sigma,
    glyph,
    is_claim,
    lineage_text,
    log_tail,
    marker_name,
    ordered_findings,
    progress_series,
    proposal_of,
    reviews_text,
    running_age,
    search_renderable,
    sparkline,
)

FINDING_COLUMNS = [
    Column("severity", "sev", 4), Column("kind", "kind", 16), Column("source", "source", 10, drop=3),
    Column("cites", "seqs", 9, drop=2), Column("explanation", "explanation", 0, drop=1),
]
FINDING_ROWS = 4  # findings shown at once (more scroll); the table is as tall as its rows up to this
LIVE_POLL_S = 0.3  # how often a running trial's live output is read
LIVE_LINES = 20  # its last lines shown
LIVE_TAIL_BYTES = 16 * 1024  # read from the end of the file (the last lines are in it)
LIVE_LINE_CHARS = 2000  # a longer line shows its end


def live_lines(text: str, lines: int = LIVE_LINES) -> list[str]:
    """The last ``lines`` lines of live output as a terminal would show them: each line what follows its
    last carriage return (a progress bar redrawn in place), at most :data:`LIVE_LINE_CHARS` of its end,
    and without control characters (escape sequences from the trial never reach the terminal)."""
    out = []
    for line in text.rstrip("\n").split("\n")[-lines:]:
        shown_part = line.rstrip("\r").rsplit("\r", 1)[-1]
        if len(shown_part) > LIVE_LINE_CHARS:
            shown_part = "…" + shown_part[-LIVE_LINE_CHARS:]
        out.append(without_controls(shown_part))
    return out


def trial_budget(state: Any) -> float | None:
    """The wall-clock limit of one evaluation in this run (the task's ``budget.trial_seconds``); None: not known."""
    budget = (state.task or {}).get("budget") or {}
    value = budget.get("trial_seconds")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def age_text(age: float | None, budget: float | None, *, label: bool = True) -> Text:
    """``▸ running 1m02s of 5m00s``: a running trial's age against its budget (red past it); ``▸ running`` alone
    before its start is recorded. ``label=False``: the age alone (``1m02s of 5m00s``, after the status)."""
    char, style = STATUS_GLYPH["running"]
    text = Text(f"{char} running", style) if label else Text()
    if age is not None:
        text.append(f" {fmt_age(age)}" if label else fmt_age(age), "bold")
        if budget is not None:
            text.append(f" of {fmt_age(budget)}", "red" if age > budget else "dim")
    return text


def live_head(seen: LiveOutput | None, age: float | None, budget: float | None,
              progress: list[dict[str, Any]], width: int) -> Text:
    """The live pane's head: what is shown (following, or not live), the age against the budget, a sparkline."""
    if seen is None:
        what = Text("live output: none yet", "dim")
    elif seen.live:
        what = Text(f"following live output ({seen.size} bytes)", "bold")
    else:  # a finished program's file, or a dead harness's leftover: never shown as live
        what = Text(f"output so far ({seen.size} bytes; not live: no program writes it now)", "yellow")
    parts: list[Part] = [(what, 0), (Text.assemble("  ", age_text(age, budget)), 1)]
    series = progress_series(progress)
    if series is not None:
        name, values = series
        spark = sparkline(values, max(4, min(24, width // 4)))
        parts.append((Text.assemble(("  ", ""), (f"{name} ", "dim"), (spark, "cyan"), f" {values[-1]:.4g}"), 2))
    return fit_line(parts, width)


def live_body(seen: LiveOutput | None, rows: int) -> Text:
    """The last ``rows`` lines of the live output, one row each (cut at the pane's edge, never wrapped): the
    newest line is the pane's last row."""
    if seen is None:
        return Text("(the trial's program has not started, or it has just ended)", "dim")
    lines = live_lines(seen.text, max(1, rows)) if seen.text.strip() else []
    if not lines:
        return Text("(no output yet)", "dim")
    return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")


class TrialScreen(RunScreen):
    BINDINGS = [
        Binding("p", "parent", "Parent", show=False),
        Binding("right_square_bracket", "step(1)", "Next"),
        Binding("left_square_bracket", "step(-1)", "Prev"),
        Binding("t", "trace", "Trace"),
        Binding("P", "proof_tree", "Proof-search tree", show=False),
        Binding("d", "compare_best", "Compare with the best", show=False),
        Binding("D", "compare_pick", "Compare with a trial…", show=False),
        # reviews append to the permanent log: keys no screen uses for anything else, each asks first
        Binding("y", "decide('approve')", "Approve"),
        Binding("x", "decide('reject')", "Reject"),
        Binding("exclamation_mark", "decide('flag')", "Flag", key_display="!"),
        Binding("u", "decide('withdraw')", "Withdraw review", show=False),
        # audit findings: Enter opens the trace on the highlighted finding's cited turn; X dismisses it (a write: asks)
        Binding("enter", "cited_turn", "Cited turn", show=False),
        Binding("X", "dismiss_finding", "Dismiss finding", show=False),
        Binding("C", "copy", "Copy id/proof/diff", show=False),
        Binding("F", "follow_running", "Follow the running trial (again: stop)", show=False),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    TrialScreen #live-pane { height: 45%; min-height: 5; max-height: 16; border-top: solid $accent; display: none; }
    TrialScreen #live-pane.-running { display: block; }
    TrialScreen #live-head { height: 1; padding: 0 1; }
    TrialScreen #live-text { height: 1fr; padding: 0 1; }
    """

    def __init__(self, session: RunSession, trial_id: str, order: list[str] | None = None, *,
                 queue: bool = False, follow: bool = False) -> None:
        super().__init__(session)
        self.trial_id = trial_id
        self.order = list(order) if order else list(session.state.order)
        self.queue = queue  # opened from the review queue: a decision moves on to the next trial left to review
        self.decided: set[str] = set()  # decided here, their reviews not yet back from the log
        self.history: list[str] = []
        self._live_seen: tuple[int, bool, str, int, int] | None = None  # last drawn: size, live, text, rows, width
        self.follow = follow  # F: show whichever trial is running, the next one when it finishes

    def compose(self) -> ComposeResult:
        yield Static("", id="trial-title")
        yield LineTable(FINDING_COLUMNS, self._finding_row, id="findings", select_label="Cited turn")
        with VerticalScroll(id="trial-body"):
            yield Static("", id="trial-content")
        with Vertical(id="live-pane"):
            yield Static("", id="live-head")
            yield Static("", id="live-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.set_interval(LIVE_POLL_S, self._poll_live)
        self.set_interval(1.0, self._tick)
        self.refresh_view([])
        findings = self.query_one("#findings", LineTable)
        if findings.display:  # Enter and X act on the findings from the start
            findings.focus()

    def refresh_view(self, events: list[LogEvent]) -> None:
        if self.follow and self._follow_next():
            return  # show() redrew it
        if events and not any(getattr(e.data, "trial_id", None) == self.trial_id or e.kind == "trial.promoted" for e in events):
            return
        self.query_one("#trial-title", Static).update(self._title())
        self._update_findings()
        self.query_one("#trial-content", Static).update(self._content())
        self._draw_live(force=True)

    # ------------------------------------------------------------------ audit findings

    def findings(self) -> list[dict[str, Any]]:
        rec = self.state.trials.get(self.trial_id)
        return ordered_findings(rec) if rec is not None else []

    def _update_findings(self) -> None:
        table = self.query_one("#findings", LineTable)
        findings = self.findings()
        table.display = bool(findings)
        if not findings:
            if table.has_focus:
                self.query_one("#trial-body", VerticalScroll).focus()
            return
        table.styles.height = min(len(findings), FINDING_ROWS) + 3  # the header and the border
        opened = sum(1 for f in findings if f["dismissed"] is None)
        table.border_title = f"audit findings: {opened} open of {len(findings)}"
        table.border_subtitle = "Enter: the cited turn · X: dismiss"
        table.set_rows([str(f["seq"]) for f in findings])
        table.refresh_rows()

    def _finding_row(self, key: str) -> list[str | Text]:
        finding = self.finding(int(key))
        return finding_cells(finding) if finding is not None else [key]

    def finding(self, seq: int) -> dict[str, Any] | None:
        return next((f for f in self.findings() if f["seq"] == seq), None)

    def highlighted_finding(self) -> dict[str, Any] | None:
        """The finding under the findings table's cursor (None: the trial has none)."""
        table = self.query_one("#findings", LineTable)
        key = table.cursor_key if table.display else None
        return self.finding(int(key)) if key is not None else None

    def _title(self) -> Text:
        rec = self.state.trials.get(self.trial_id)
        if rec is None:
            return Text(f"trial {self.trial_id}: not in this run", "red")
        pos = self.order.index(self.trial_id) + 1 if self.trial_id in self.order else 0
        text = Text.assemble(("trial ", "dim"), (rec.trial_id, "bold"), "  ", glyph(rec.status), f" {rec.status}")
        if rec.status == "running":  # its age against its budget, ticking
            text.append(" ")
            text.append_text(age_text(self.age(), trial_budget(self.state), label=False))
        text.append_text(Text.assemble(("  by ", "dim"), rec.agent, ("  parent ", "dim"), rec.parent or "-"))
        if self.follow:
            text.append("  following the running trial (F: stop)", "cyan")
        if self.queue:
            left = len(self.left_to_review())
            text.append(f"  review queue: {left} left · a decision opens the next" if left else
                        "  review queue: none left", "dim")
        elif pos:
            text.append(f"  ({pos}/{len(self.order)})", "dim")
        mark = marker_name(self.state, rec)
        if mark is not None:
            char, style = MARKS[mark]
            text.append(f"  {char} {'held for review' if mark == 'held' else mark}", style)
        if rec.review_status != "unreviewed":
            label, style = REVIEW_GLYPH[rec.review_status]
            text.append(f"  {label}", style)
        return text

    # ------------------------------------------------------------------ live output

    def live_path(self) -> Path:
        """Where the executor has this trial's program write its output while it runs."""
        return live_output_path(self.session.run_dir / TRIALS, self.trial_id)

    def age(self) -> float | None:
        """Seconds this trial has run, to the run's clock (None: not running, or its start is not recorded)."""
        rec = self.state.trials.get(self.trial_id)
        return running_age(rec, run_now(self.session)) if rec is not None else None

    def _draw_live(self, *, force: bool = False) -> None:
        """Show the live pane while the trial runs (its head and its newest lines), hide it otherwise."""
        if not self.is_mounted:
            return
        pane = self.query_one("#live-pane", Vertical)
        rec = self.state.trials.get(self.trial_id)
        running = rec is not None and rec.status == "running"
        pane.set_class(running, "-running")
        if not running or rec is None:
            self._live_seen = None
            return
        text_box = self.query_one("#live-text", Static)
        rows = text_box.content_region.height or LIVE_LINES
        width = pane.content_region.width or self.app.size.width
        seen = read_live_output(self.live_path(), LIVE_TAIL_BYTES)
        key = None if seen is None else (seen.size, seen.live, seen.text, rows, width)
        self.query_one("#live-head", Static).update(
            live_head(seen, self.age(), trial_budget(self.state), rec.progress, max(1, width - 2)))
        if key == self._live_seen and not force:
            return
        self._live_seen = key
        text_box.update(live_body(seen, rows))

    def _poll_live(self) -> None:
        """Redraw the live pane of a running trial when its output changed (the timer's tick)."""
        rec = self.state.trials.get(self.trial_id)
        if rec is None or rec.status != "running" or not self.is_mounted or not shown(self):
            return
        self._draw_live()

    def _tick(self) -> None:
        """Once a second: a running trial's age, in the title and the live pane's head."""
        rec = self.state.trials.get(self.trial_id)
        if rec is None or rec.status != "running" or not self.is_mounted or not shown(self):
            return
        self.query_one("#trial-title", Static).update(self._title())
        self._draw_live()

    def on_resize(self) -> None:
        self.call_after_refresh(self._draw_live, force=True)  # the pane's rows changed: as many lines as fit

    def _content(self) -> RenderableType:
        model = self.model
        rec = self.state.trials.get(self.trial_id)
        if rec is None or model is None:
            return Text("(no such trial)")
        sigma = self.state.delta_sigma_of(rec.score) if rec.status == "ok" else None
        outcome = Text.assemble(
            ("status ", "dim"), glyph(rec.status), f" {rec.status}", ("   score ", "dim"), (fmt_score(rec.score), "bold"),
            ("   Δσ ", "dim"), fmt_sigma(sigma) or "-", (" vs baseline", "dim"),
            # a line of its own: at 80 columns a wrap split it from its value
            ("\nvs the best at the time ", "dim"), fmt_sigma(rec.delta_sigma) or "-",
        )
        if rec.status == "running":  # no seconds yet: its age (ticking in the title and the live pane)
            outcome.append("   ")
            outcome.append_text(age_text(self.age(), trial_budget(self.state)))
        else:
            outcome.append_text(Text.assemble(("   seconds ", "dim"), f"{rec.seconds:.1f}"))
        if rec.cached:
            outcome.append(f"   cached from {rec.cached_from}", "cyan")
        if rec.promoted:
            outcome.append("   promoted", "green")
        if rec.held:
            outcome.append(f"   {HELD} held for review", MARKS["held"][1])
        if is_claim(rec):
            outcome.append(f"   {CLAIM} awaiting review", "bold yellow")
        parts: list[RenderableType] = []
        if rec.findings:
            parts += [Rule("audit findings", align="left"), findings_text(rec)]
        parts += [
            Rule("hypothesis", align="left"),
            Text(rec.hypothesis or "(none)"),
        ]
        if rec.expected_effect:
            parts.append(Text(f"expected: {rec.expected_effect}", "dim"))
        parts += [
            Rule("outcome", align="left"), outcome,
            Text(rec.feedback or "(no feedback)", "italic"),
        ]
        running = rec.status == "running"
        if running:  # its live output is the pane pinned under the body
            parts.append(Rule("live output: the pane below, pinned to its newest line", align="left"))
        parts += [
            Rule("change against the parent" if not rec.baseline else "workspace", align="left"),
            change_renderable(model, rec),
        ]
        search = search_renderable(model, rec)
        if search is not None:  # proof search: the goals along the found proof, for the person approving it
            parts += [Rule("proof search: the goals along the found proof", align="left"), search]
        if not running:
            parts += [Rule("log tail", align="left"), Text(log_tail(model, rec))]
        parts += [
            Rule("lineage (back to the baseline)", align="left"),
            lineage_text(self.state, rec.trial_id),
            Rule("review", align="left"),
            reviews_text(rec),
        ]
        return Group(*parts)

    # ------------------------------------------------------------------ actions

    def show(self, trial_id: str) -> None:
        if trial_id not in self.state.trials:
            self.notify(f"no trial {trial_id}", severity="warning")
            return
        self.trial_id = trial_id
        self.query_one("#trial-body", VerticalScroll).scroll_home(animate=False)
        self.refresh_view([])

    def action_parent(self) -> None:
        rec = self.state.trials.get(self.trial_id)
        if rec is None or not rec.parent:
            self.notify("this trial has no parent (a baseline)")
            return
        self.show(rec.parent)

    def action_step(self, step: int) -> None:
        if self.trial_id not in self.order:
            return
        i = self.order.index(self.trial_id) + step
        if 0 <= i < len(self.order):
            self.show(self.order[i])

    def action_trace(self) -> None:
        self.post_message(OpenTrace(self.session, self.trial_id))

    def action_proof_tree(self) -> None:
        rec = self.state.trials.get(self.trial_id)
        model = self.model
        proposal = proposal_of(model, rec) if rec is not None and model is not None else {}
        tree = (proposal.get("meta") or {}).get("search_tree")
        if not isinstance(tree, dict):
            self.notify("this trial has no proof-search tree (only proofs found by the search agent do)")
            return
        theorem = str((rec.theorem if rec is not None else None) or proposal.get("theorem") or tree.get("theorem") or "")
        self.post_message(OpenProofTree(self.trial_id, theorem, tree))

    def action_compare_best(self) -> None:
        self.post_message(OpenCompare(self.session, self.trial_id, "best"))

    def action_compare_pick(self) -> None:
        self.post_message(OpenCompare(self.session, self.trial_id, "pick"))

    def action_decide(self, decision: str) -> None:
        ask_review(self, self.session, self.trial_id, decision)

    def left_to_review(self) -> list[str]:
        """The queue's trials still awaiting a decision (none decided here meanwhile), in the queue's order."""
        pending = {t.trial_id for t in self.state.pending_review()}
        return [t for t in self.order if t in pending and t not in self.decided]

    @on(ReviewDecided)
    def _decided(self, message: ReviewDecided) -> None:
        """Opened from the review queue: approve (or reject, flag) and go to the next trial left to review."""
        if not self.queue or message.trial_id != self.trial_id:
            return
        self.decided.add(message.trial_id)
        left = self.left_to_review()
        if not left:
            self.notify(f"{message.decision} {message.trial_id}: that was the last trial to review (Esc: the queue)")
            self.refresh_view([])
            return
        here = self.order.index(self.trial_id) if self.trial_id in self.order else -1
        after = [t for t in left if self.order.index(t) > here]
        following = (after or left)[0]
        self.notify(f"{message.decision} {message.trial_id}; next: {following} ({len(left)} left)")
        self.show(following)

    @on(LineTable.Selected, "#findings")
    def _finding_selected(self, message: LineTable.Selected) -> None:
        message.stop()
        self.action_cited_turn()

    def action_cited_turn(self) -> None:
        """Open the trace of this trial on the turn the highlighted finding cites."""
        finding = self.highlighted_finding()
        if finding is None:
            self.notify("this trial has no audit findings")
            return
        cited = tuple(int(e["seq"]) for e in finding["evidence"])
        if not cited:
            self.notify("this finding cites no event", severity="warning")
            return
        self.post_message(OpenTrace(self.session, self.trial_id, cited))

    def action_dismiss_finding(self) -> None:
        """Dismiss the highlighted finding with a note (asks first; the app writes the audit.dismissed)."""
        finding = self.highlighted_finding()
        if finding is None:
            self.notify("this trial has no audit findings")
            return
        ask_dismissal(self, self.session, finding)

    def action_follow_running(self) -> None:
        """F: show the running trial and keep showing whichever runs (the next one when it finishes); F again stops."""
        if self.follow:
            self.follow = False
            self.notify("no longer following the running trial")
            self.refresh_view([])
            return
        running = self.state.newest_running()
        if running is None:
            self.notify("no trial is running", severity="warning")
            return
        self.follow = True
        self.show(running)

    def _follow_next(self) -> bool:
        """Following: the trial shown finished, so show the one running now (True if it moved)."""
        rec = self.state.trials.get(self.trial_id)
        if rec is not None and rec.status == "running":
            return False
        running = self.state.newest_running()
        if running is None or running == self.trial_id:
            return False
        self.show(running)
        return True

    def action_copy(self) -> None:
        """Copy this trial's id, proof or diff to the clipboard (OSC 52; a small chooser asks which)."""
        ask_copy(self, self.session, self.trial_id)

    def action_back(self) -> None:
        self.app.pop_screen()
