"""Small modal screens: the help screen (every active key), the review note, the new-run prompt."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from rrma.task import TaskError, load_task


def binding_rows(screen: object) -> list[tuple[str, str]]:
    """(keys, description) for every binding active on ``screen`` (focused widget, screen, app)."""
    from textual.screen import Screen

    assert isinstance(screen, Screen)
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
            yield Label(Text(f"Keys: {self.title_text}", "bold"), id="help-title")
            with VerticalScroll():
                yield Static(table, id="help-table")
            yield Label(Text("escape or ? closes", "dim"))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)


class NoteScreen(ModalScreen[str | None]):
    """Ask for the note of a review decision; Enter confirms (an empty note is fine)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, decision: str, trial_id: str) -> None:
        super().__init__()
        self.decision = decision
        self.trial_id = trial_id

    def compose(self) -> ComposeResult:
        with Vertical(id="note-box"):
            yield Label(Text.assemble((self.decision, "bold"), f" {self.trial_id}: note (Enter to confirm, Esc to cancel)"))
            yield Input(placeholder="why (optional)", id="note-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class NewRunScreen(ModalScreen[Path | None]):
    """Ask for a task YAML; it is validated here so a bad file never starts a worker."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="new-run-box"):
            yield Label(Text("Start a run: path to a task YAML (Enter to start, Esc to cancel)", "bold"))
            yield Input(placeholder="benches/demo/task.yaml", id="task-input")
            yield Static("", id="task-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():
            self.query_one("#task-error", Static).update(Text("type the path of a task YAML file", "red"))
            return
        path = Path(event.value.strip()).expanduser()
        try:
            load_task(path)
        except (TaskError, OSError) as exc:  # OSError: unreadable in a way load_task does not name
            self.query_one("#task-error", Static).update(Text(str(exc), "red"))
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)
