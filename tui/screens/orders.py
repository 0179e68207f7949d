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
            yield Label(Text(f"Started here and still running: {names}", "bold"), id="order-title")
            yield Static(Text(
                "h    stop: no new trials; running trials finish within their budget and the run ends as "
                "stopped (`rrma-tui resume RUN` continues it later); the TUI quits now\n"
                "d    detach: quit; the runs go on in their own processes (`rrma-tui RUN` watches one again, "
                "`rrma-tui stop RUN` stops it)\n"
                "Esc  cancel: keep watching"), id="order-detail")

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
