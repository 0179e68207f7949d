"""What every screen of one run shares: the base screen over a :class:`~tui.session.RunSession`, failure lines.

The session's model is folded on the UI thread only (the dashboard's tail worker parses new
lines and posts them; the dashboard applies them), so a screen may read ``session.state``
freely. Screens are told about changes with :meth:`RunScreen.run_changed`; a screen that is
not on top only marks itself stale and redraws when it is shown again.

Workers never take the app down: each is started with ``exit_on_error=False``, and a failure
reaches the app's one ``Worker.StateChanged`` handler, which shows it as a notification. That
message does not bubble, so screens that start workers derive from :class:`WorkerScreen`,
which hands their workers' failures to the app.
"""

from __future__ import annotations

from typing import Any

from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from rrma.errors import error_line
from rrma.log.codec import LogEvent
from rrma.log.reader import LiveFold
from rrma.log.state import RunState
from tui.session import RunSession

FAILURE_TITLES = {  # worker group -> what a failure in it means to the user
    "driver": "the run's driver failed", "review": "review not recorded", "runs": "cannot list the runs",
    "tail": "cannot read the run", "index": "cannot index the trace", "search": "search failed",
    "control": "order not sent", "compare": "cannot compare the trials", "export": "export failed",
    "audit": "dismissal not recorded",
}


def failure_line(error: BaseException | None) -> str:
    """One line for a failure: our own named errors (bad task, agent, log) are already written for people."""
    if error is None:
        return "unknown error"
    if type(error).__module__.split(".")[0] in ("rrma", "agents", "oracle") or isinstance(error, OSError):
        text = str(error).strip()
        return text.splitlines()[0] if text else type(error).__name__
    return error_line(error)


class WorkerScreen(Screen[None]):
    """A screen whose workers' failures reach the app (``Worker.StateChanged`` does not bubble)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.post_message(Worker.StateChanged(event.worker, event.state))


def shown(screen: Screen[Any]) -> bool:
    """Whether ``screen`` is on view: on top, or right under a modal (Textual's ``is_current`` also counts
    the screen under a full-screen one, which is hidden: redrawing it there costs a big run dearly)."""
    stack = screen.app.screen_stack
    if stack and stack[-1] is screen:
        return True
    return len(stack) >= 2 and stack[-2] is screen and isinstance(stack[-1], ModalScreen)


class RunScreen(WorkerScreen):
    """A screen about one run; subclasses implement :meth:`refresh_view`."""

    def __init__(self, session: RunSession) -> None:
        super().__init__()
        self.session = session
        self._stale = False

    @property
    def state(self) -> RunState:
        return self.session.state

    @property
    def model(self) -> LiveFold | None:
        return self.session.model

    def run_changed(self, events: list[LogEvent]) -> None:
        # a screen just pushed is current before its widgets exist; its on_mount draws everything
        if shown(self) and self.is_mounted:
            self.refresh_view(events)
        else:
            self._stale = True

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.refresh_view([])

    def refresh_view(self, events: list[LogEvent]) -> None:
        """Redraw from ``self.state`` (``events`` are the ones just folded; [] means all)."""
