"""The TUI's open run: one reader, one folded model, the reviewer and the clock, shared by every view of it.

Screens, widgets, dialogs and the app's messages all carry a :class:`RunSession`, so it sits below them
all (it imports no screen and no widget). Its model is folded on the UI thread only: the dashboard's
tail worker parses new lines into :attr:`RunSession.pending` and the dashboard applies them, so a view
may read :attr:`RunSession.state` freely. ``status`` reads the log's word together with whether a
driver still holds the run, so a crashed run reads ``stopped`` rather than ``running``.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from rrma.log.codec import LogEvent
from rrma.log.control import live_driver
from rrma.log.reader import LiveFold, ParsedChunk, RunReader
from rrma.log.state import RunState


class RunSession:
    """One open run: its reader, its model (once loaded) and who is looking at it."""

    def __init__(self, run_dir: Path, *, reviewer: str, clock: Callable[[], datetime]) -> None:
        self.run_dir = Path(run_dir)
        self.reviewer = reviewer
        self.clock = clock
        self.reader = RunReader(self.run_dir)
        self.model: LiveFold | None = None
        self.pending: queue.SimpleQueue[ParsedChunk] = queue.SimpleQueue()
        self.generation = 0  # bumped on every applied update
        self.on_applied: Callable[[list[LogEvent]], None] | None = None  # benchmark hook
        self.load_seconds: float | None = None
        self.loaded_event = asyncio.Event()  # set on the UI thread once the model is in place
        self._driver: str | None = None
        self._driver_probed = -1e9

    @property
    def state(self) -> RunState:
        return self.model.state if self.model is not None else RunState(run_id=self.run_dir.name)

    @property
    def loaded(self) -> bool:
        return self.model is not None

    def driver(self, max_age: float = 1.0) -> str | None:
        """Who drives the run ("pid N on HOST since T"), or None; probed at most once per ``max_age`` seconds."""
        now = time.monotonic()
        if now - self._driver_probed >= max_age:
            self._driver = live_driver(self.run_dir)
            self._driver_probed = now
        return self._driver

    def status(self) -> str:
        """The run's status for display: ``stopped`` for a run whose log says running but whose driver is gone
        (a crash or a kill -9 left no ``run.finished``; `rrma-tui resume` continues it)."""
        state = self.state
        if state.status == "running" and self.driver() is None:
            return "stopped"
        return state.status
