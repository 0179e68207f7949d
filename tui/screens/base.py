"""What every screen of one run shares: the session (model, reader, reviewer, clock).

The session's model is folded on the UI thread only (the dashboard's tail worker parses new
lines and posts them; the dashboard applies them), so a screen may read ``session.state``
freely. Screens are told about changes with :meth:`RunScreen.run_changed`; a screen that is
not on top only marks itself stale and redraws when it is shown again.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from textual.screen import Screen

from rrma.state import RunState
from tui.reader import ParsedChunk, RawEvent, RunModel, RunReader


class RunSession:
    """One open run: its reader, its model (once loaded) and who is looking at it."""

    def __init__(self, run_dir: Path, *, reviewer: str, clock: Callable[[], datetime]) -> None:
        self.run_dir = Path(run_dir)
        self.reviewer = reviewer
        self.clock = clock
        self.reader = RunReader(self.run_dir)
        self.model: RunModel | None = None
        self.pending: queue.SimpleQueue[ParsedChunk] = queue.SimpleQueue()
        self.generation = 0  # bumped on every applied update
        self.on_applied: Callable[[list[RawEvent]], None] | None = None  # benchmark hook
        self.load_seconds: float | None = None
        self.loaded_event = asyncio.Event()  # set on the UI thread once the model is in place

    @property
    def state(self) -> RunState:
        return self.model.state if self.model is not None else RunState(run_id=self.run_dir.name)

    @property
    def loaded(self) -> bool:
        return self.model is not None


class RunScreen(Screen[None]):
    """A screen about one run; subclasses implement :meth:`refresh_view`."""

    def __init__(self, session: RunSession) -> None:
        super().__init__()
        self.session = session
        self._stale = False

    @property
    def state(self) -> RunState:
        return self.session.state

    @property
    def model(self) -> RunModel | None:
        return self.session.model

    def run_changed(self, events: list[RawEvent]) -> None:
        # a screen just pushed is current before its widgets exist; its on_mount draws everything
        if self.is_current and self.is_mounted:
            self.refresh_view(events)
        else:
            self._stale = True

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.refresh_view([])

    def refresh_view(self, events: list[RawEvent]) -> None:
        """Redraw from ``self.state`` (``events`` are the ones just folded; [] means all)."""
