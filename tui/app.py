"""The RRMA terminal UI: watch runs live, read trials and traces, review claims.

Entry point for the CLI: :func:`run_app`. ``python -m tui.app [--runs DIR] [RUN]`` runs it
without the CLI. The app owns the long jobs that are not about one screen: the research loop
started with ``n`` (a thread worker in group ``loop``) and review writes (group ``review``).
Workers only post messages; one ``Worker.StateChanged`` handler turns failures into
notifications. Every screen is a reader of the run directory, like ``rrma-tui --headless``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.worker import Worker, WorkerState

from rrma.store import EVENTS, RunStore
from tui.reader import RunReader, utcnow
from tui.screens.base import FAILURE_TITLES, RunSession, failure_line
from tui.screens.dashboard import DashboardScreen
from tui.screens.modals import HelpScreen, binding_rows
from tui.screens.orders import QuitRunScreen
from tui.screens.runs import RunsScreen

StartFn = Callable[..., Any]  # rrma.loop.start_run's signature


def default_reviewer() -> str:
    try:
        from rrma.review import default_reviewer as core_default
    except ImportError:  # pragma: no cover - rrma.review ships with the core
        return os.environ.get("RRMA_REVIEWER") or os.environ.get("USER") or "reviewer"
    return core_default()


class RRMAApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "RRMA"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
    ]

    @dataclass
    class ReviewRecorded(Message):
        """A review event was appended to the run log."""

        run_dir: Path
        trial_id: str
        decision: str
        reviewer: str
        promoted: bool

    @dataclass
    class LoopFinished(Message):
        run_dir: Path
        reason: str

    def __init__(self, runs_dir: Path, run_dir: Path | None = None, reviewer: str | None = None,
                 start_task: Path | None = None, *, start_fn: StartFn | None = None,
                 clock: Callable[[], datetime] = utcnow, poll_interval: float = 0.1) -> None:
        super().__init__()
        self.runs_dir = Path(runs_dir)
        self.initial_run = Path(run_dir) if run_dir is not None else None
        self.reviewer = reviewer or default_reviewer()
        self.start_task = Path(start_task) if start_task is not None else None
        self.start_fn = start_fn
        self.clock = clock
        self.poll_interval = poll_interval
        self.stop_loop = threading.Event()
        self.exiting = False  # set by exit(): input after that is dropped
        self.loop_run_dir: Path | None = None  # the run the loop worker drives (started here)
        self.quit_when_loop_ends = False  # `q`, then `h`: quit once the stopped run has finished
        self.kill_on_exit = False  # `q`, then `k`: run_app kills the running trials' process groups and exits

    def on_mount(self) -> None:
        self.push_screen(RunsScreen(self.runs_dir, scan_now=self.initial_run is None and self.start_task is None))
        if self.initial_run is not None:
            self.open_run(self.initial_run)
        if self.start_task is not None:
            self.start_loop(self.start_task)

    # ------------------------------------------------------------------ runs

    def open_run(self, run_dir: Path) -> DashboardScreen:
        session = RunSession(run_dir, reviewer=self.reviewer, clock=self.clock)
        screen = DashboardScreen(session, poll_interval=self.poll_interval)
        self.push_screen(screen)
        return screen

    def start_loop(self, task_path: Path) -> None:
        """Validate the task, then run the loop in a worker and open its dashboard."""
        from rrma.task import TaskError, load_task

        try:
            task = load_task(task_path)
        except TaskError as exc:
            self.notify(str(exc), title="cannot start the run", severity="error", timeout=10)
            return
        start = self.start_fn
        if start is None:
            try:
                from rrma.loop import start_run as start
            except ImportError as exc:
                self.notify(f"the research loop is not available: {exc}", severity="error")
                return
        try:
            from rrma.loop import new_run_id
            run_id = new_run_id(task.name)
        except ImportError:
            run_id = f"{utcnow():%Y%m%d-%H%M%S}-{task.name}"
        self.loop_run_dir = self.runs_dir / run_id
        self.run_loop(start, task, run_id)
        self.open_run(self.runs_dir / run_id)

    @work(thread=True, exclusive=True, group="loop", exit_on_error=False)
    def run_loop(self, start: StartFn, task: Any, run_id: str) -> None:
        result = start(task, self.runs_dir, run_id=run_id, stop=self.stop_loop)
        self.post_message(self.LoopFinished(Path(getattr(result, "run_dir", self.runs_dir / run_id)),
                                            str(getattr(result, "reason", "done"))))

    @on(LoopFinished)
    def _loop_finished(self, message: LoopFinished) -> None:
        self.notify(f"run {message.run_dir.name} finished: {message.reason}")
        if self.quit_when_loop_ends:
            self.exit(0)

    def running_loop(self) -> Path | None:
        """The run this TUI's loop worker is driving, while it runs; None otherwise."""
        for worker in self.workers:
            if worker.group == "loop" and worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
                return self.loop_run_dir
        return None

    def _quit_answer(self, answer: str | None) -> None:
        run_dir = self.running_loop()
        if answer is None or run_dir is None:
            if run_dir is None and answer is not None:
                self.exit(0)  # the run ended while the question was shown
            return
        if answer == "now":
            self.kill_on_exit = True
            self.stop_loop.set()
            self.exit(0)
            return
        self.quit_when_loop_ends = True
        self.notify(f"stopping {run_dir.name}: the TUI quits when its running trials have finished "
                    "(q then k quits now)", timeout=10)
        self._stop_for_quit(run_dir)

    @work(thread=True, group="control", exit_on_error=False)
    def _stop_for_quit(self, run_dir: Path) -> None:
        from rrma.control import RunNotLive, send_control
        from rrma.store import RunNotFound

        try:
            send_control(run_dir, "stop", self.reviewer, "quit the TUI")
        except (RunNotLive, RunNotFound):  # not started yet, or already finishing: the Ctrl-C way
            self.stop_loop.set()

    # ------------------------------------------------------------------ reviews

    def record_review(self, session: RunSession, trial_id: str, decision: str, note: str) -> None:
        self._write_review(session.run_dir, trial_id, decision, session.reviewer, note)

    @work(thread=True, group="review", exit_on_error=False)
    def _write_review(self, run_dir: Path, trial_id: str, decision: str, reviewer: str, note: str) -> None:
        store = RunStore(run_dir)
        try:
            data: dict[str, Any] = {"trial_id": trial_id, "decision": decision, "reviewer": reviewer, "note": note}
            from rrma.signing import default_signing_key

            key = default_signing_key()
            if key is not None:  # $RRMA_SIGNING_KEY: signed like `rrma-tui review --sign-key` (a failure is notified)
                from rrma.review import review_data
                from rrma.state import RunState

                # a full fold: the signature binds the trial.finished hash, which the light reader skips
                state = RunState.fold(store.scan().events)
                data = review_data(state, trial_id, decision, reviewer, note, key)
            store.append("review", f"human:{reviewer}", data)
            promoted = False
            if decision == "approve":
                # a live loop promotes approved claims itself; a finished run is promoted here,
                # by the same rule (rrma.review), from a fresh fold that includes this review
                state = RunReader(run_dir).load().state
                if state.finish_reason is not None:
                    from rrma.review import promote_if_approved

                    promoted = promote_if_approved(store, state, None, trial_id)
        finally:
            store.close()
        self.post_message(self.ReviewRecorded(run_dir, trial_id, decision, reviewer, promoted))

    @on(ReviewRecorded)
    def _review_recorded(self, message: ReviewRecorded) -> None:
        extra = " and promoted" if message.promoted else ""
        self.notify(f"{message.decision} {message.trial_id} by {message.reviewer} recorded{extra}")

    # ------------------------------------------------------------------ misc

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker is reported (screens hand theirs on, see WorkerScreen): never an exit."""
        if event.state != WorkerState.ERROR:
            return
        group = event.worker.group
        self.notify(failure_line(event.worker.error), title=FAILURE_TITLES.get(group, f"{group or 'background'} task failed"),
                    severity="error", timeout=15)
        if group == "loop":
            # the loop failed before its first event (a misconfigured agent): leave the dashboard waiting for it
            while isinstance(self.screen, DashboardScreen) and not (self.screen.session.run_dir / EVENTS).exists():
                self.pop_screen()
            if self.quit_when_loop_ends:  # `q` then `h` waited for this run to end: it has
                self.exit(0)
        elif group == "review":
            from tui.screens.review import ReviewScreen

            for screen in self.screen_stack:
                if isinstance(screen, ReviewScreen):
                    screen.forget_decisions()  # the trials it hid while the write was pending come back

    def exit(self, result: int | None = None, return_code: int = 0, message: Any = None) -> None:
        self.exiting = True
        super().exit(result, return_code, message)

    async def on_event(self, event: events.Event) -> None:
        if self.exiting and isinstance(event, events.InputEvent):
            return  # keys typed after quitting (`qt`) must not push screens while the app shuts down
        await super().on_event(event)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        name = type(self.screen).__name__.removesuffix("Screen").lower() or "app"
        self.push_screen(HelpScreen(name, binding_rows(self.screen)))

    def action_quit(self) -> None:  # type: ignore[override]
        run_dir = self.running_loop()
        if run_dir is not None and not self.exiting:  # a run started here ends with the TUI: ask first
            if not isinstance(self.screen, QuitRunScreen):
                self.push_screen(QuitRunScreen(run_dir.name), self._quit_answer)
            return
        self.stop_loop.set()
        self.exit(0)

    def on_unmount(self) -> None:
        self.stop_loop.set()


def run_app(runs_dir: Path, run_dir: Path | None = None, reviewer: str | None = None,
            start_task: Path | None = None) -> int:
    """Run the TUI until the user quits; returns the exit code."""
    app = RRMAApp(runs_dir, run_dir, reviewer, start_task)
    result = app.run()
    if app.kill_on_exit:  # `q` then `k`: as a second Ctrl-C of a headless run, the log stays resumable
        from rrma.sandbox import kill_active_groups

        kill_active_groups()
        sys.stdout.flush()
        os._exit(int(result or 0))
    return int(result or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.app", description="RRMA terminal UI")
    parser.add_argument("run", nargs="?", type=Path, help="a run directory to open")
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="directory of runs (default ./runs)")
    parser.add_argument("--reviewer", help="name recorded on reviews (default $RRMA_REVIEWER or $USER)")
    parser.add_argument("--task", type=Path, help="start a run of this task YAML")
    args = parser.parse_args(argv)
    run_dir = args.run
    if run_dir is not None and not (run_dir / "events.jsonl").exists() and (args.runs / run_dir / "events.jsonl").exists():
        run_dir = args.runs / run_dir
    if run_dir is not None and not (run_dir / "events.jsonl").exists():
        print(f"{run_dir}: not a run directory (no events.jsonl)", file=sys.stderr)
        return 2
    return run_app(args.runs, run_dir, args.reviewer, args.task)


if __name__ == "__main__":
    sys.exit(main())
