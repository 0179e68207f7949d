"""Small modal screens: the help screen (every active key), the review note, the new-run prompt, picking a
trial, and where to export a run."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from rrma.task import TaskError
from tui.screens.base import RunSession


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

    def __init__(self, decision: str, trial_id: str, detail: str = "") -> None:
        super().__init__()
        self.decision = decision
        self.trial_id = trial_id
        self.detail = detail  # e.g. which review this one supersedes

    def compose(self) -> ComposeResult:
        with Vertical(id="note-box"):
            yield Label(Text.assemble((self.decision, "bold"), f" {self.trial_id}: note (Enter to confirm, Esc to cancel)"))
            yield Label(Text("a review is permanent: it goes into the run's log" +
                             (f"; it {self.detail}" if self.detail else ""), "dim"))
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
        from cli.main import list_benches

        benches = ", ".join(name for name, _ in list_benches())
        with Vertical(id="new-run-box"):
            yield Label(Text("Start a run: a task YAML or a bench name, then options (Enter starts, Esc cancels)",
                             "bold"))
            yield Label(Text(f"benches: {benches}. Options as `rrma-tui run` / `rrma-tui bench NAME` take them: "
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
    """Ask for a trial of the run: an id, ``best``, or the end of one id (``12`` for t0012). Returns its id."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, session: RunSession, title: str) -> None:
        super().__init__()
        self.session = session
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="note-box"):
            yield Label(Text.assemble((self.title_text, "bold"),
                                      ": a trial id, or best (Enter to go, Esc to cancel)"))
            yield Input(placeholder="t0012, 12 or best", id="trial-input")
            yield Static("", id="trial-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from tui.screens.compare import TrialNotFound, resolve_trial_id

        event.stop()
        try:
            trial_id = resolve_trial_id(self.session.state, event.value)
        except TrialNotFound as exc:
            self.query_one("#trial-error", Static).update(Text(str(exc), "red"))
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
            yield Label(Text.assemble(("Export ", "bold"), (self.run_dir.name, "bold"),
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
