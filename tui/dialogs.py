"""Modal dialogs: each asks one thing and answers through ``dismiss``; none opens a screen.

The help (every active key), a review's note, one decision for several trials (listing each write
before any), what run to start, a trial by id, where to export a run, an order for the live driver
(stop, pause or continue, a blackboard post, a steer note), the note dismissing an audit finding,
what to copy to the clipboard, what to do with runs started here when the TUI quits, and whether to resume a run
whose log fails verification. A screen pushes one with a callback
for the answer; any screen may use them, as they import no screen (tui/messages.py says how
screens reach each other).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from rrma.log.review import ReviewError, signed_approval_policy, superseded_review
from rrma.log.signing import default_signing_key
from rrma.log.state import RunState
from rrma.task import TaskError
from tui.messages import FindingDismissed, ReviewDecided, ReviewsDecided
from tui.session import RunSession
from tui.widgets.trial_text import proposal_of, trial_diff

_TRAILING_NUMBER = re.compile(r"\d+$")


def binding_rows(screen: Screen[Any]) -> list[tuple[str, str]]:
    """(keys, description) for every binding active on ``screen`` (focused widget, screen, app)."""
    rows: dict[str, list[str]] = {}
    order: list[str] = []
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.system:
            continue
        desc = binding.description or binding.action
        key = screen.app.get_key_display(binding)
        if desc not in rows:
            rows[desc] = []
            order.append(desc)
        if key not in rows[desc]:
            rows[desc].append(key)
    return [(" / ".join(rows[d]), d) for d in order]


class HelpScreen(ModalScreen[None]):
    """Every key binding of the screen underneath, with what it does."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close help")]

    def __init__(self, title: str, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.rows = rows

    def compose(self) -> ComposeResult:
        table = Table(show_header=True, header_style="bold", box=None, expand=True)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("does")
        for keys, desc in self.rows:
            table.add_row(keys, desc)
        with Vertical(id="help-box"):
            yield Static(Text(f"Keys: {self.title_text}", "bold"), id="help-title")
            with VerticalScroll():
                yield Static(table, id="help-table")
            yield Static(Text("escape or ? closes", "dim"))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)


class NoteScreen(ModalScreen[str | None]):
    """Ask for the note of a review decision; Enter confirms (an empty note is fine)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, decision: str, trial_id: str, detail: str = "") -> None:
        super().__init__()
        self.decision = decision
        self.trial_id = trial_id
        self.detail = detail  # e.g. which review this one supersedes

    def compose(self) -> ComposeResult:
        with Vertical(id="note-box"):
            yield Static(Text.assemble((self.decision, "bold"), f" {self.trial_id}: note (Enter to confirm, Esc to cancel)"))
            yield Static(Text("a review is permanent: it goes into the run's log" +
                              (f"; it {self.detail}" if self.detail else ""), "dim"), id="note-detail")
            yield Input(placeholder="why (optional)", id="note-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class NewRunScreen(ModalScreen[tuple[list[str], str] | None]):
    """Ask what to run: a task YAML or a bench name, with options (``demo --trials 5``,
    ``my/task.yaml --set budget.max_trials=3``). Checked here (tui.driver.parse_start), so a bad
    file, bench or option never starts a process; returns (rrma-tui arguments, label)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, runs_dir: Path) -> None:
        super().__init__()
        self.runs_dir = runs_dir

    def compose(self) -> ComposeResult:
        from cli.benches import list_benches

        benches = ", ".join(name for name, _ in list_benches())
        with Vertical(id="new-run-box"):
            yield Static(Text("Start a run: a task YAML or a bench name, then options (Enter starts, Esc cancels)",
                              "bold"))
            yield Static(Text(f"benches: {benches}. Options as `rrma-tui run` / `rrma-tui bench NAME` take them: "
                              "--trials N --agents N --backend B --model M --seed S --set KEY=VALUE", "dim"))
            yield Input(placeholder="demo --trials 12   or   benches/demo/task.yaml --set budget.max_trials=5",
                        id="task-input")
            yield Static("", id="task-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from tui.driver import StartError, parse_start

        event.stop()
        try:
            args, label = parse_start(event.value, self.runs_dir, Path.cwd())
        except (StartError, TaskError) as exc:
            self.query_one("#task-error", Static).update(Text(str(exc), "red"))
            return
        self.dismiss((args, label))

    def action_cancel(self) -> None:
        self.dismiss(None)


class TrialPickScreen(ModalScreen[str | None]):
    """Ask for a trial of the run: an id, ``best``, or the end of one id (``12`` for t0012). Returns its id, or None
    (Esc). ``exclude``: a trial that may not be the answer (the one a comparison starts from)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, session: RunSession, title: str, *, prompt: Text | None = None,
                 exclude: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.prompt = prompt or Text.assemble((title, "bold"), ": a trial id, or best (Enter to go, Esc to cancel)")
        self.exclude = exclude

    def compose(self) -> ComposeResult:
        best = best_trial_id(self.session.state)
        with Vertical(id="note-box"):
            yield Static(self.prompt)
            yield Input(placeholder=f"t0012, 12 or best ({best})" if best else "t0012, 12 or best", id="trial-input")
            yield Static("", id="trial-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        error = self.query_one("#trial-error", Static)
        try:
            trial_id = resolve_trial_id(self.session.state, event.value)
        except TrialNotFound as exc:
            error.update(Text(str(exc), "red"))
            return
        if trial_id == self.exclude:
            error.update(Text(f"that is {self.exclude} itself: pick another trial", "red"))
            return
        self.dismiss(trial_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportScreen(ModalScreen[Path | None]):
    """Ask where to export a run (a SQLite file; re-exporting into it is idempotent). Returns the path."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir

    def compose(self) -> ComposeResult:
        default = self.run_dir.parent / "export.db"
        with Vertical(id="note-box"):
            yield Static(Text.assemble(("Export ", "bold"), (self.run_dir.name, "bold"),
                                      " to SQLite (Enter exports, Esc cancels)"))
            yield Input(value=str(default), id="export-input")
            yield Static("", id="export-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        path = Path(text).expanduser() if text else None
        problem = None
        if path is None:
            problem = "type the path of a SQLite file"
        elif path.is_dir():
            problem = f"{path} is a directory: give a file name (export.db)"
        elif not path.parent.is_dir():
            problem = f"{path.parent}: no such directory"
        if problem is not None:
            self.query_one("#export-error", Static).update(Text(problem, "red"))
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)


# ----------------------------------------------------------------------------- a trial by what was typed


def best_trial_id(state: RunState) -> str | None:
    """The current best trial, approved or not: the one the dashboard's header names as best."""
    return state.best_id if state.best_id in state.trials else None


class TrialNotFound(LookupError):
    """The text typed for a trial names no trial of this run (or more than one)."""


def resolve_trial_id(state: RunState, text: str) -> str:
    """The trial ``text`` names: an id (any case), ``best``, a trial number (``12`` for t0012), or the end of one id."""
    wanted = text.strip()
    if not wanted:
        raise TrialNotFound("type a trial id (or best)")
    if wanted in state.trials:
        return wanted
    if wanted.lower() == "best":
        best = best_trial_id(state)
        if best is None:
            raise TrialNotFound("this run has no best trial yet")
        return best
    low = wanted.lower()
    matches = [tid for tid in state.order if tid.lower() == low]
    if not matches and wanted.isdigit():
        matches = [tid for tid in state.order if (m := _TRAILING_NUMBER.search(tid)) and int(m.group()) == int(wanted)]
    if not matches:
        matches = [tid for tid in state.order if tid.lower().endswith(low)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:6]) + (f", … {len(matches) - 6} more" if len(matches) > 6 else "")
        raise TrialNotFound(f"{wanted!r} could be {shown}: type more of the id")
    raise TrialNotFound(f"no trial {wanted!r} in this run")


class ComparePickScreen(TrialPickScreen):
    """Ask for the trial to compare ``against`` with (the trial picker, ``against`` itself refused)."""

    def __init__(self, session: RunSession, against: str) -> None:
        super().__init__(session, "Compare", exclude=against, prompt=Text.assemble(
            ("compare ", "bold"), (against, "bold"), (" with which trial?", "bold"),
            " Type its id (t0012, or just 12) or best; Enter compares, Esc cancels."))
        self.against = against


# ----------------------------------------------------------------------------- orders and quitting


@dataclass
class OrderInput:
    """What the person confirmed: the text and, for a steer note, the agents (empty: every agent)."""

    text: str
    to: list[str]


class OrderScreen(ModalScreen[OrderInput | None]):
    """Confirm one write to the log; ``agents`` (the run's agent names) adds the steer note's "to" field."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, detail: str, placeholder: str, *, required: bool = False,
                 agents: list[str] | None = None, to: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail
        self.placeholder = placeholder
        self.required = required
        self.agents = agents
        self.to = to

    def compose(self) -> ComposeResult:
        with Vertical(id="order-box"):
            yield Static(Text(self.title_text, "bold"), id="order-title")
            yield Static(Text(self.detail), id="order-detail")
            if self.agents is not None:
                known = ", ".join(self.agents) if self.agents else "none yet"
                yield Static(Text(f"to (agent names, comma-separated; empty: every agent). Agents: {known}", "dim"))
                yield Input(value=self.to, placeholder="every agent", id="order-to")
            yield Input(placeholder=self.placeholder, id="order-text")
            yield Static(Text("Enter sends, Esc cancels", "dim"), id="order-error")

    def on_mount(self) -> None:  # a steer note asks "to" first, as read top to bottom (to, Tab, the note)
        self.query_one("#order-to" if self.agents is not None else "#order-text", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "order-to":
            self.query_one("#order-text", Input).focus()
            return
        text = event.value.strip()
        if self.required and not text:
            self.query_one("#order-error", Static).update(Text("type the text first (Esc cancels)", "red"))
            return
        to: list[str] = []
        if self.agents is not None:
            to = [name.strip() for name in self.query_one("#order-to", Input).value.split(",") if name.strip()]
            unknown = [name for name in to if self.agents and name not in self.agents]
            if unknown:
                self.query_one("#order-error", Static).update(
                    Text(f"no agent {', '.join(unknown)} in this run (Esc cancels)", "red"))
                return
        self.dismiss(OrderInput(text, to))

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuitRunScreen(ModalScreen[str | None]):
    """``q`` while runs this TUI started are still going: stop them, detach (they go on), or cancel.

    Each such run is driven by a headless process of its own (tui/driver.py), so it can outlive
    the TUI. Answers: ``"stop"`` (a ``run.control`` stop to each, then quit at once: each driver
    finishes its running trials and ends the run as ``stopped`` by itself), ``"detach"`` (quit;
    the runs go on), or None (cancel).
    """

    BINDINGS = [
        Binding("h", "answer('stop')", "Stop the runs, then quit"),
        Binding("d", "answer('detach')", "Detach: quit, the runs go on"),
        Binding("escape", "answer(None)", "Cancel"),
    ]

    def __init__(self, runs: list[str]) -> None:
        super().__init__()
        self.runs = runs

    def compose(self) -> ComposeResult:
        names = ", ".join(self.runs)
        with Vertical(id="order-box"):
            yield Static(Text(f"Started here and still running: {names}", "bold"), id="order-title")
            yield Static(Text(
                "h    stop: no new trials; running trials finish within their budget and the run ends as "
                "stopped (`rrma-tui resume RUN` continues it later); the TUI quits now\n"
                "d    detach: quit; the runs go on in their own processes (`rrma-tui RUN` watches one again, "
                "`rrma-tui stop RUN` stops it)\n"
                "Esc  cancel: keep watching"), id="order-detail")

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)


class UnverifiedResumeScreen(ModalScreen[bool]):
    """``R`` on a run whose log fails verification (rrma/log/chain.py log_integrity): the finding, quoted, before
    anything is resumed. ``y`` goes on to the resume's own confirmation; Enter or Esc cancels (the safe answer is
    the easy one). True: go on."""

    BINDINGS = [
        Binding("y", "answer(True)", "Resume anyway"),
        Binding("escape,enter,n", "answer(False)", "Cancel"),
    ]

    def __init__(self, run: str, words: str, finding: str) -> None:
        super().__init__()
        self.run = run
        self.words = words
        self.finding = finding

    def compose(self) -> ComposeResult:
        with Vertical(id="order-box"):
            yield Static(Text(f"The log of {self.run} fails verification: {self.words}", "bold red"), id="order-title")
            yield Static(Text.assemble(
                (self.finding, ""), "\n\n",
                ("A driver resumed on it appends to a log that does not verify (one whose end was cut or replaced "
                 "it refuses to extend). `rrma-tui verify RUN` says everything it finds.", "dim"), "\n",
                "y    resume anyway (the resume asks once more)\n"
                "Esc  cancel (Enter too)"), id="order-detail")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


# ----------------------------------------------------------------------------- a review


def ask_review(screen: Screen[Any], session: RunSession, trial_id: str, decision: str) -> None:
    """Ask for a note (the confirmation: Enter writes, Esc cancels), then post :class:`ReviewDecided`
    from ``screen``; the app appends the review (rrma.run.promotion.review_trial).

    The review supersedes the trial's latest review (the note's dialog names it); a withdrawal needs
    one in force.
    """
    try:
        superseded_review(session.state, trial_id, decision)
    except ReviewError as exc:
        screen.notify(str(exc), severity="warning")
        return
    rec = session.state.trials.get(trial_id)
    latest = rec.reviews[-1] if rec is not None and rec.reviews else None
    replaces = (f"replaces {latest['reviewer']}'s {latest['decision']} (seq {latest['seq']}); that review stays "
                "in the log") if latest is not None else ""

    def done(note: str | None) -> None:
        if note is None:
            return
        screen.post_message(ReviewDecided(session, trial_id, decision, note))

    screen.app.push_screen(NoteScreen(decision, trial_id, replaces), done)


# ----------------------------------------------------------------------------- one decision for several trials


@dataclass
class BulkPlan:
    """What a bulk review will write, worked out before the confirmation shows it."""

    decision: str
    writes: list[tuple[str, int | None, str]]  # (trial id, seq of the review it supersedes or None, what it replaces)
    skipped: list[tuple[str, str]]  # (trial id, why no review of it is written)


def plan_bulk_review(state: RunState, trial_ids: list[str], decision: str) -> BulkPlan:
    """The review each of ``trial_ids`` gets (the one it supersedes named), and those that get none (a withdrawal
    with nothing in force to withdraw, a trial the run does not have)."""
    plan = BulkPlan(decision, [], [])
    for trial_id in trial_ids:
        rec = state.trials.get(trial_id)
        if rec is None:
            plan.skipped.append((trial_id, "no such trial in this run"))
            continue
        try:
            supersedes = superseded_review(state, trial_id, decision)
        except ReviewError as exc:
            plan.skipped.append((trial_id, str(exc)))
            continue
        latest = rec.reviews[-1] if rec.reviews else None
        replaces = f"replaces {latest['reviewer']}'s {latest['decision']} (seq {latest['seq']})" if latest else ""
        plan.writes.append((trial_id, supersedes, replaces))
    return plan


class BulkReviewScreen(ModalScreen[str | None]):
    """Confirm one decision for several trials: every review that will be written is listed (trial id and
    decision, and the review each replaces) before anything is; one note for all. Enter writes, Esc cancels."""

    DEFAULT_CSS = """
    BulkReviewScreen { align: center middle; }
    BulkReviewScreen #bulk-list { height: auto; max-height: 12; }
    BulkReviewScreen #bulk-list > Static { height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, plan: BulkPlan, reviewer: str, signing: str) -> None:
        super().__init__()
        self.plan = plan
        self.reviewer = reviewer
        self.signing = signing

    def listing(self) -> Text:
        """The writes, one line each (``approve t0012``, what it replaces), then the trials that get none."""
        text = Text()
        width = max(len(trial_id) for trial_id, *_ in self.plan.writes)
        for trial_id, _, replaces in self.plan.writes:
            text.append(f"{self.plan.decision} ", "bold")
            text.append(trial_id.ljust(width), "bold")
            if replaces:
                text.append(f"  {replaces}", "dim")
            text.append("\n")
        for trial_id, why in self.plan.skipped:
            text.append(f"not written: {trial_id}: {why}\n", "yellow")
        text.rstrip()
        return text

    def compose(self) -> ComposeResult:
        count = len(self.plan.writes)
        with Vertical(id="order-box"):
            yield Static(Text(f"{self.plan.decision} {count} trial{'s' if count != 1 else ''} as "
                              f"human:{self.reviewer}? These {count} review{'s' if count != 1 else ''} will be "
                              "written:", "bold"), id="order-title")
            with VerticalScroll(id="bulk-list"):
                yield Static(self.listing(), id="bulk-listing")
            yield Static(Text("Each is a review event in the run's log, written one by one as a single review is "
                              f"(permanent: a later review supersedes it, the log keeps both); {self.signing}. "
                              "A trial reviewed by someone else meanwhile is not written, and said so.", "dim"),
                         id="order-detail")
            yield Input(placeholder="why, one note for all (optional); Enter writes, Esc cancels", id="bulk-note")

    def on_mount(self) -> None:
        self.query_one("#bulk-note", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


def ask_bulk_review(screen: Screen[Any], session: RunSession, trial_ids: list[str], decision: str) -> None:
    """Ask once for ``decision`` on every trial of ``trial_ids`` (the confirmation lists each write, Enter writes,
    Esc cancels), then post :class:`ReviewsDecided` from ``screen``; the app appends one review per trial."""
    state = session.state
    plan = plan_bulk_review(state, trial_ids, decision)
    if not plan.writes:
        why = "; ".join(f"{why}" for _, why in plan.skipped[:3])
        screen.notify(f"nothing to write: {why}", severity="warning")
        return
    key = default_signing_key()
    signing = f"signed with {key}" if key is not None else "unsigned ($RRMA_SIGNING_KEY is not set)"
    if key is None and decision == "approve" and signed_approval_policy(state, None)[0]:
        signing += ("; this run requires signed approvals (loop.require_signed_approval): an unsigned approval is "
                    "kept in the log but promotes nothing")

    def done(note: str | None) -> None:
        if note is not None:
            screen.post_message(ReviewsDecided(session, decision, note,
                                               [(trial_id, supersedes) for trial_id, supersedes, _ in plan.writes]))

    screen.app.push_screen(BulkReviewScreen(plan, session.reviewer, signing), done)


# ----------------------------------------------------------------------------- copy to the clipboard

COPY_CHOICES = {"i": "id", "p": "proof", "d": "diff"}  # the chooser's key -> what it copies


def copy_texts(session: RunSession, trial_id: str) -> dict[str, str]:
    """What can be copied of a trial: its id, its proof (proof oracles), its diff against its parent."""
    out = {"id": trial_id}
    model = session.model
    rec = session.state.trials.get(trial_id)
    if model is None or rec is None:
        return out
    proof = proposal_of(model, rec).get("proof")
    if proof:
        out["proof"] = str(proof)
    if not rec.baseline:
        diff = trial_diff(model, rec)
        if diff:
            out["diff"] = diff
    return out


def size_text(text: str) -> str:
    """``3 lines, 120 B`` / ``1.2 kB``: how much was copied."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    size = len(text.encode("utf-8"))
    amount = f"{size} B" if size < 1000 else f"{size / 1000:.1f} kB" if size < 1_000_000 else f"{size / 1e6:.1f} MB"
    return f"{lines} line{'s' if lines != 1 else ''}, {amount}"


class CopyScreen(ModalScreen[str | None]):
    """What of a trial to copy to the clipboard: ``i`` its id, ``p`` its proof, ``d`` its diff. Returns the choice."""

    DEFAULT_CSS = "CopyScreen { align: center middle; }"
    BINDINGS = [
        Binding("i", "pick('id')", "Trial id"),
        Binding("p", "pick('proof')", "Proof"),
        Binding("d", "pick('diff')", "Diff"),
        Binding("escape", "pick(None)", "Cancel"),
    ]

    def __init__(self, trial_id: str, texts: dict[str, str]) -> None:
        super().__init__()
        self.trial_id = trial_id
        self.texts = texts

    def compose(self) -> ComposeResult:
        lines = Text()
        for key, what in COPY_CHOICES.items():
            text = self.texts.get(what)
            if text is None:
                lines.append(f"{key}    ({what}: this trial has none)\n", "dim")
            else:
                lines.append(f"{key}    ", "bold cyan")
                lines.append(f"{what}: {self.trial_id if what == 'id' else size_text(text)}\n")
        lines.append("Esc  cancel", "dim")
        with Vertical(id="order-box"):
            yield Static(Text(f"Copy to the clipboard (OSC 52) from {self.trial_id}:", "bold"), id="order-title")
            yield Static(lines, id="order-detail")

    def action_pick(self, what: str | None) -> None:
        if what is not None and what not in self.texts:
            self.notify(f"{self.trial_id} has no {what} to copy", severity="warning")
            return
        self.dismiss(what)


def ask_copy(screen: Screen[Any], session: RunSession, trial_id: str | None) -> None:
    """Ask what of ``trial_id`` to copy (its id, proof or diff), copy it with OSC 52 (App.copy_to_clipboard) and
    say what was copied."""
    if trial_id is None:
        screen.notify("no trial to copy from")
        return
    texts = copy_texts(session, trial_id)

    def done(what: str | None) -> None:
        if what is None:
            return
        text = texts[what]
        screen.app.copy_to_clipboard(text)
        shown = f"trial id {trial_id}" if what == "id" else f"the {what} of {trial_id} ({size_text(text)})"
        screen.notify(f"copied {shown} to the clipboard")

    screen.app.push_screen(CopyScreen(trial_id, texts), done)


# ----------------------------------------------------------------------------- an audit finding's dismissal


def ask_dismissal(screen: Screen[Any], session: RunSession, finding: dict[str, Any]) -> None:
    """Ask for the note dismissing an audit finding (the confirmation: Enter writes, Esc cancels; a note is
    required), then post :class:`FindingDismissed` from ``screen``; the app appends the ``audit.dismissed``."""
    if finding["dismissed"] is not None:
        by = finding["dismissed"]
        screen.notify(f"this finding was dismissed already by {by['by']} (seq {by['seq']})", severity="warning")
        return
    trial_id = finding["trial_id"]
    detail = (f"{finding['explanation']}\n\nA dismissal is permanent: an audit.dismissed event with your note goes "
              "into the run's log, and the finding stays there, no longer counted as unresolved. It approves "
              "nothing: a trial the finding held still waits for a review (y approves).")

    def done(answer: OrderInput | None) -> None:
        if answer is not None:
            screen.post_message(FindingDismissed(session, trial_id, int(finding["seq"]), answer.text))

    screen.app.push_screen(OrderScreen(
        f"Dismiss the {finding['severity']} {finding['kind']} finding on {trial_id} (seq {finding['seq']}) "
        f"as human:{session.reviewer}?", detail, "why the finding is wrong or does not matter", required=True), done)
