"""The modal that asks before the dashboard writes an order or a note to the run log.

One screen serves the four writes (stop, pause or continue, a blackboard post, a steer note): it
says what will happen, takes the text (a reason for an order, optional; the words of a post or
note, required) and, for a steer note, the agents it is for. Enter sends, Esc cancels; nothing
is written before Enter.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


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
            yield Label(Text(self.title_text, "bold"), id="order-title")
            yield Static(Text(self.detail), id="order-detail")
            if self.agents is not None:
                known = ", ".join(self.agents) if self.agents else "none yet"
                yield Label(Text(f"to (agent names, comma-separated; empty: every agent). Agents: {known}", "dim"))
                yield Input(value=self.to, placeholder="every agent", id="order-to")
            yield Input(placeholder=self.placeholder, id="order-text")
            yield Static(Text("Enter sends, Esc cancels", "dim"), id="order-error")

    def on_mount(self) -> None:
        self.query_one("#order-text", Input).focus()

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
    """``q`` while a run this TUI started is still going: stop it first, quit now, or cancel.

    The run lives in this process (the loop worker), so it cannot outlive the TUI: there is no
    detach. A run meant to go on without the TUI is started headless and opened with ``rrma-tui RUN``.
    Answers: ``"stop"``, ``"now"``, or None (cancel).
    """

    BINDINGS = [
        Binding("h", "answer('stop')", "Stop the run, then quit"),
        Binding("k", "answer('now')", "Quit now (kill its running trials)"),
        Binding("escape", "answer(None)", "Cancel"),
    ]

    def __init__(self, run_name: str) -> None:
        super().__init__()
        self.run_name = run_name

    def compose(self) -> ComposeResult:
        with Vertical(id="order-box"):
            yield Label(Text(f"Run {self.run_name}, started here, is still running", "bold"), id="order-title")
            yield Static(Text(
                "It runs inside this TUI and ends with it.\n"
                "h  stop it (running trials finish within their budget; it ends as stopped), then quit\n"
                "k  quit now: its running trials are killed; `rrma-tui resume RUN` continues it later\n"
                "Esc  cancel: keep watching\n"
                "To keep a run going without the TUI, start it with `rrma-tui run TASK --headless` and open "
                "it with `rrma-tui RUN`."), id="order-detail")

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
