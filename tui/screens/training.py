"""The training view: a training run's curves and figures, live as its ``train.step`` events arrive.

``T`` on the dashboard of a run with training steps. Four plots by step (the reward's mean with a dotted
± std band, the policy's entropy, its KL to the reference, the loss), the latest step's figures (with the
fraction of zero-variance groups and the novelty rate, this step's and their mean), the session (method,
base model, the checkpoint step it resumed from, how it ended) and the checkpoints saved (step, kind, the
artifact's short hash). Below the plots, one row per step; Enter opens the highlighted step's rollouts
(ordinary trials of the run) in the trial view, where ``]`` / ``[`` step through that step's rollouts.

Like every screen of a run it redraws from the session's state when the dashboard's tail folds new events
(only for ``train.*`` events; the plots at most twice a second). In a terminal narrower than
``WIDE`` columns the panels go under the plots and the steps table is left out.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from rrma.log.codec import LogEvent
from tui.messages import OpenTrial
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.training import (
    TrainCharts,
    TrainSeries,
    checkpoints_text,
    gist_text,
    latest_text,
    session_text,
    step_cells,
    train_series,
)
from tui.widgets.trial_text import Part, fit_line

WIDE = 100  # columns from which the panels sit beside the plots (and the steps table shows)
STEP_COLUMNS = [
    Column("step", "step", 6, "right"), Column("reward", "reward", 9, "right"), Column("std", "± std", 7, "right"),
    Column("kl", "KL", 8, "right", drop=3), Column("entropy", "entropy", 8, "right", drop=2),
    Column("loss", "loss", 9, "right", drop=4), Column("zero", "0-var", 6, "right", drop=1),
    Column("novel", "novel", 6, "right", drop=1), Column("trials", "rollouts", 8, "right", drop=5),
]


class TrainingScreen(RunScreen):
    BINDINGS = [
        Binding("enter", "open_step", "Rollouts"),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    TrainingScreen #train-title { height: 1; padding: 0 1; background: $boost; }
    TrainingScreen #train-body { height: 1fr; }
    TrainingScreen #train-main { width: 1fr; }
    TrainingScreen #train-steps { height: 10; border: round $primary-background; }
    TrainingScreen #train-steps:focus { border: round $accent; }
    TrainingScreen #train-side { width: 44; height: 1fr; }
    TrainingScreen .train-panel { border: round $primary-background; padding: 0 1; height: auto; }
    TrainingScreen #train-checkpoints { height: 1fr; }
    TrainingScreen.narrow #train-body { layout: vertical; }
    TrainingScreen.narrow #train-main { width: 1fr; height: 1fr; }
    TrainingScreen.narrow #train-steps { display: none; }
    TrainingScreen.narrow #train-side { width: 1fr; height: 7; layout: horizontal; }
    TrainingScreen.narrow .train-panel { width: 1fr; height: 7; border: none; border-top: round $primary-background; }
    TrainingScreen.narrow #train-checkpoints { height: 7; }
    TrainingScreen.narrow #train-session { display: none; }
    """

    def __init__(self, session: RunSession, *, min_interval: float = 0.5) -> None:
        super().__init__(session)
        self.min_interval = min_interval
        self.series = TrainSeries()
        self._steps: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="train-title")
        with Horizontal(id="train-body"):
            with Vertical(id="train-main"):
                yield TrainCharts(id="train-charts", min_interval=self.min_interval)
                yield LineTable(STEP_COLUMNS, self._row, id="train-steps", select_label="Rollouts")
            with Vertical(id="train-side"):
                yield Static("", id="train-latest", classes="train-panel")
                yield Static("", id="train-session", classes="train-panel")
                yield Static("", id="train-checkpoints", classes="train-panel")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#train-latest").border_title = "latest step"
        self.query_one("#train-session").border_title = "session"
        self.query_one("#train-checkpoints").border_title = "checkpoints"
        table = self.query_one("#train-steps", LineTable)
        table.border_title = "steps"
        table.live_end = "bottom"
        table.focus()
        self._layout(self.app.size.width)
        self.refresh_view([])

    def on_resize(self) -> None:
        self._layout(self.app.size.width)

    def _layout(self, width: int) -> None:
        """Panels beside the plots from WIDE columns on; under them (and no steps table) in a narrower terminal."""
        self.set_class(width < WIDE, "narrow")
        self._draw_panels()

    # ------------------------------------------------------------------ drawing

    def refresh_view(self, events: list[LogEvent]) -> None:
        if events and not any(e.kind.startswith("train.") for e in events):
            self._draw_title()  # rollouts finishing move nothing here but the title's counts
            return
        self.series = train_series(self.state)
        self._steps = {str(s["step"]): s for s in self.series.steps}
        self.query_one("#train-charts", TrainCharts).update_from(self.series, now=not events)
        table = self.query_one("#train-steps", LineTable)
        table.set_rows(list(self._steps))
        self._draw_title()
        self._draw_panels()

    def _draw_title(self) -> None:
        """One line; a narrow terminal leaves out the run id, then the rollouts and checkpoints counts."""
        state = self.state
        latest = self.series.latest
        parts: list[Part] = [(Text("training", "bold"), 0), (Text(f" {state.run_id or self.session.run_dir.name}"), 3)]
        if self.series.method:
            parts.append((Text(f" · {self.series.method}", "bold"), 0))
        steps = f" · {len(self.series.steps)} steps" + (f" (last {latest['step']})" if latest is not None else "")
        parts.append((Text(steps), 0))
        status = self.session.status()
        parts.append((Text(f" · {status}", "green" if state.finish_reason else ("red" if status == "stopped" else "yellow")), 0))
        parts.append((Text(f" · {len(state.train_checkpoints)} checkpoints"), 2))
        parts.append((Text(f" · {len(state.order)} trials"), 1))
        title = self.query_one("#train-title", Static)
        title.update(fit_line(parts, title.content_region.width or self.app.size.width - 2))

    def _draw_panels(self) -> None:
        if not self.is_mounted:
            return
        state, narrow = self.state, self.has_class("narrow")
        self.query_one("#train-latest", Static).update(latest_text(self.series, self.session.clock(), compact=narrow))
        self.query_one("#train-session", Static).update(session_text(state))
        panel = self.query_one("#train-checkpoints", Static)
        # narrow: the session's panel is left out and this one says its gist above the latest checkpoints
        panel.border_title = "session · checkpoints" if narrow else "checkpoints"
        panel.update(gist_text(state) if narrow else checkpoints_text(state))

    def _row(self, key: str) -> list[str | Text]:
        step = self._steps.get(key)
        return list(step_cells(step)) if step is not None else [key]

    # ------------------------------------------------------------------ keys

    @on(LineTable.Selected, "#train-steps")
    def _selected(self, message: LineTable.Selected) -> None:
        self.open_step(message.key)

    def action_open_step(self) -> None:
        table = self.query_one("#train-steps", LineTable)
        key = table.cursor_key if table.display else None
        if key is None and self.series.latest is not None:
            key = str(self.series.latest["step"])  # narrow: no table, the latest step
        if key is not None:
            self.open_step(key)

    def open_step(self, key: str) -> None:
        """The step's rollouts in the trial view (``]`` / ``[`` step through them)."""
        step = self._steps.get(key)
        trials = [t for t in (step or {}).get("trials") or [] if t in self.state.trials]
        if not trials:
            self.notify(f"step {key} has no rollouts in this run (sft trains on a dataset)", severity="warning")
            return
        self.post_message(OpenTrial(self.session, trials[0], trials))

    def action_back(self) -> None:
        self.app.pop_screen()
