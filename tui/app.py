"""The RRMA terminal UI: watch runs live, read trials and traces, review claims.

Opened by the ``rrma-tui`` entry point (tui/main.py) through :func:`run_app`; ``python -m tui.app
[--runs DIR] [RUN]`` runs it without the CLI. The app owns the jobs that are not about one screen:
runs started with ``ctrl+n`` or ``rrma-tui run TASK.yaml`` (each a headless driver process of its
own, tui/driver.py, so a run can outlive the TUI), waiting for those to begin (group ``driver``),
review writes (group ``review``, through rrma.run.promotion.review_trial like ``rrma-tui review``) and dismissals
of audit findings (group ``audit``, through rrma.audit.auditor.dismiss_finding).

It is also the one place that knows every screen: screens never import one another, they post
the messages of tui/messages.py and the handlers here push the screen asked for.
Workers only post messages; one ``Worker.StateChanged`` handler turns failures into
notifications. Every screen is a reader of the run directory, like ``rrma-tui --headless``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.filter import LineFilter
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from rrma.log.state import RunState
from rrma.log.store import RunStore
from tui.dialogs import HelpScreen, NewRunScreen, QuitRunScreen, binding_rows
from tui.durations import utcnow
from tui.messages import (
    FindingDismissed,
    OpenAnalysis,
    OpenCompare,
    OpenLineage,
    OpenProofTree,
    OpenReview,
    OpenRun,
    OpenRunCompare,
    OpenTheorems,
    OpenTimeline,
    OpenTrace,
    OpenTraining,
    OpenTrial,
    ResumeRun,
    ReviewDecided,
    ReviewsDecided,
    StartRun,
)
from tui.screens.base import FAILURE_TITLES, RunScreen, failure_line
from tui.screens.compare import compare_with_best, pick_and_compare
from tui.screens.dashboard import DashboardScreen
from tui.screens.lineage import LineageScreen
from tui.screens.proof_tree import ProofTreeScreen
from tui.screens.review import ReviewScreen, bulk_summary
from tui.screens.runs import RunsScreen
from tui.screens.trace import TraceScreen
from tui.screens.trial import TrialScreen
from tui.session import RunSession
from tui.terminal import ControlCharFilter
from tui.typeahead import TypeAhead
from tui.widgets.trial_text import is_proof_run

if TYPE_CHECKING:
    from rrma.log.chain import ChainCheck
    from tui.driver import DriverProcess



def append_review(store: RunStore, state: RunState, trial_id: str, decision: str, reviewer: str, note: str,
                  sign_key: Path | None, chain: ChainCheck | None = None) -> bool:
    """Append one review as `rrma-tui review` does (rrma.run.promotion.review_trial: the review it supersedes,
    signed with ``sign_key`` where given, and a finished run's promotion by the loop's rule), bringing ``state``
    (a RunState read as the views read it) up to date; True if it promoted the trial. The TUI's one way to write
    a review: a single decision and each trial of a bulk one (which keeps one ``chain`` check for all)."""
    from rrma.run.promotion import review_trial

    rec = state.trials.get(trial_id)
    was_promoted = rec is not None and rec.promoted
    review_trial(store, trial_id, decision, reviewer, note, sign_key=sign_key, state=state, chain=chain)
    return bool(state.trials[trial_id].promoted and not was_promoted)


def changed_since(state: RunState, trial_id: str) -> str:
    """Why a trial of a bulk review is not written: its latest review is not the one the confirmation showed."""
    rec = state.trials.get(trial_id)
    latest = rec.reviews[-1] if rec is not None and rec.reviews else None
    now = (f"{latest['reviewer']}'s {latest['decision']} (seq {latest['seq']})" if latest is not None
           else "no review in force")
    return f"{trial_id} changed since you confirmed: its latest review is now {now}"


def help_rows(screen: Screen[Any]) -> list[tuple[str, str]]:
    """``?``'s rows: the screen's own keys first, then those of the widget focused on it (a table's ↑ ↓ PgUp …),
    then the app's (q, ?). Textual lists the focused widget's first, which put the generic table keys on top."""
    rows = binding_rows(screen)
    own = {b.description for cls in type(screen).__mro__ if cls.__module__.startswith("tui.")
           for b in cls.__dict__.get("BINDINGS", []) if isinstance(b, Binding)}  # a table's Enter may say "Trial" too
    where: dict[str, int] = {}  # description -> 0 the screen's own, 1 a widget's or Textual's (Tab …), 2 the app's
    for active in screen.active_bindings.values():
        node, binding = active.node, active.binding
        rank = 2 if node is screen.app else 0 if binding.description in own else 1
        desc = binding.description or binding.action
        where[desc] = min(where.get(desc, rank), rank)
    return sorted(rows, key=lambda row: where.get(row[1], 1))


def default_reviewer() -> str:
    try:
        from rrma.log.review import default_reviewer as core_default
    except ImportError:  # pragma: no cover - rrma.log.review ships with the core
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
    class ReviewsRecorded(Message):
        """One decision for several trials (a bulk review): those written, and those not with why."""

        run_dir: Path
        decision: str
        reviewer: str
        written: list[tuple[str, bool]]  # (trial id, whether the review promoted it)
        failed: list[tuple[str, str]]  # (trial id, why it was not written)

    @dataclass
    class DismissalRecorded(Message):
        """An audit.dismissed event was appended to the run log."""

        trial_id: str
        finding_seq: int
        reviewer: str

    @dataclass
    class RunStarted(Message):
        """A driver started here holds its run: open the dashboard."""

        run_dir: Path
        label: str

    @dataclass
    class DriverFailed(Message):
        """A driver started here exited with an error (before its run began, or during it)."""

        label: str
        code: int | None
        line: str  # the driver's last line of output (its one-line error)
        log_path: Path

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then one that keeps a run's text from driving the terminal (tui/terminal.py)."""
        return [*super().get_line_filters(), self._control_filter]

    def __init__(self, runs_dir: Path, run_dir: Path | None = None, reviewer: str | None = None,
                 start_args: list[str] | None = None, *, clock: Callable[[], datetime] = utcnow,
                 poll_interval: float = 0.1, experiment: Path | None = None) -> None:
        self._control_filter = ControlCharFilter()  # before super().__init__: Textual may render from there
        super().__init__()
        self.runs_dir = Path(runs_dir)
        self.initial_run = Path(run_dir) if run_dir is not None else None
        self.initial_experiment = Path(experiment) if experiment is not None else None  # `experiment show EXP`
        self.reviewer = reviewer or default_reviewer()
        self.start_args = list(start_args) if start_args else None  # `rrma-tui run TASK.yaml ...` without --headless
        self.clock = clock
        self.poll_interval = poll_interval
        self.exiting = False  # set by exit(): input after that is dropped
        self.drivers: list[DriverProcess] = []  # headless drivers started here (tui/driver.py)
        self.detached: list[DriverProcess] = []  # `q`, then `d`: left running (run_app says how to reach them)
        self.stopped_on_quit: list[DriverProcess] = []  # `q`, then `h`: ordered to stop
        self.typeahead = TypeAhead(self)  # keys typed in a burst are held until the focus they are meant for

    def on_mount(self) -> None:
        from tui.settings import load_settings

        saved = load_settings().get("theme")
        if isinstance(saved, str) and saved in self.available_themes and saved != self.theme:
            self._restoring_theme = True
            self.theme = saved
        self._restoring_theme = False
        self.push_screen(RunsScreen(self.runs_dir, scan_now=self.initial_run is None and self.start_args is None,
                                    clock=self.clock))
        if self.initial_run is not None:
            self.open_run(self.initial_run)
        if self.initial_experiment is not None:
            self.open_experiment(self.initial_experiment)
        if self.start_args is not None:
            self.start_run(self.start_args, " ".join(self.start_args[:2]))

    def watch_theme(self, theme: str) -> None:
        """A theme chosen in the palette (Theme) is the next session's theme too (tui/settings.py)."""
        if getattr(self, "_restoring_theme", True):
            return  # the saved theme being applied at start, or a change before mount
        from tui.settings import save_setting

        problem = save_setting("theme", theme)
        if problem is not None:
            self.notify(f"theme not saved: {problem}", severity="warning")

    # ------------------------------------------------------------------ runs

    def open_run(self, run_dir: Path) -> DashboardScreen:
        self.clear_notifications()  # what was said about the run shown before (an unreadable one's error) is no longer news
        session = RunSession(run_dir, reviewer=self.reviewer, clock=self.clock)
        screen = DashboardScreen(session, poll_interval=self.poll_interval)
        self.push_screen(screen)
        return screen

    def open_experiment(self, exp_dir: Path) -> None:
        """The arms of an experiment side by side (tui/screens/experiment.py)."""
        from rrma.run.experiment import ExperimentError, open_experiment
        from tui.screens.experiment import ExperimentScreen

        try:
            exp = open_experiment(exp_dir)
        except ExperimentError as exc:
            self.notify(str(exc), severity="error")
            return
        self.push_screen(ExperimentScreen(exp))

    def start_run(self, args: list[str], label: str) -> None:
        """Start a headless driver for ``args`` (from :func:`tui.driver.parse_start`) and open its run when it holds one."""
        from tui.driver import launch

        try:
            proc = launch(args, self.runs_dir, label)
        except OSError as exc:
            self.notify(f"cannot start {label}: {exc}", title="run not started", severity="error", timeout=15)
            return
        self.drivers.append(proc)
        self.notify(f"starting {label} (pid {proc.pid}); its dashboard opens when the run begins", timeout=5)
        self._await_run(proc)

    def resume_run(self, run_dir: Path) -> None:
        """Drive a run nobody drives from a headless child of this TUI (``rrma-tui resume RUN``)."""
        from tui.driver import launch_resume

        try:
            proc = launch_resume(run_dir, self.runs_dir)
        except OSError as exc:
            self.notify(f"cannot resume {run_dir.name}: {exc}", title="run not resumed", severity="error")
            return
        self.drivers.append(proc)
        self.notify(f"resuming {run_dir.name} (pid {proc.pid})", timeout=5)
        self._await_run(proc)

    @work(thread=True, group="driver", exit_on_error=False)
    def _await_run(self, proc: DriverProcess) -> None:
        from textual.worker import get_current_worker

        from tui.driver import wait_for_exit, wait_for_run

        worker = get_current_worker()
        resumed = proc.run_dir is not None
        run_dir = wait_for_run(proc, self.runs_dir, lambda: worker.is_cancelled)
        if worker.is_cancelled:
            return
        if run_dir is None or (resumed and not proc.alive() and proc.process.returncode not in (0, None)):
            if not wait_for_exit(proc, lambda: worker.is_cancelled):
                return
            self.post_message(self.DriverFailed(proc.label, proc.process.returncode, proc.error_line(), proc.log_path))
            return
        if not resumed:
            self.post_message(self.RunStarted(run_dir, proc.label))
        # Never Popen.wait() here: this thread is one of the executor's, which the interpreter joins at exit, so a
        # blocking wait kept a detached TUI's process alive until its run ended (issue 24). Textual cancels the
        # worker when the app exits; the wait below then ends within one poll and the driver goes on alone.
        if not wait_for_exit(proc, lambda: worker.is_cancelled):
            return
        if proc.process.returncode not in (0, None) and not self.exiting:
            self.post_message(self.DriverFailed(proc.label, proc.process.returncode, proc.error_line(), proc.log_path))

    @on(RunStarted)
    def _run_started(self, message: RunStarted) -> None:
        if self.exiting:
            return
        current = self.screen
        if isinstance(current, DashboardScreen) and current.session.run_dir == message.run_dir:
            return
        self.open_run(message.run_dir)

    @on(DriverFailed)
    def _driver_failed(self, message: DriverFailed) -> None:
        self.notify(f"{message.label}: {message.line} (exit {message.code}; output in {message.log_path})",
                    title="run not started" if message.code == 2 else "the run's driver failed",
                    severity="error", timeout=20)

    def live_drivers(self) -> list[DriverProcess]:
        """The driver processes this TUI started whose runs are still going (a driver whose run has
        finished in the log is only writing its last views and exiting: nothing to ask about)."""
        finished = {s.session.run_dir for s in self.screen_stack
                    if isinstance(s, DashboardScreen) and s.session.state.finish_reason is not None}
        return [proc for proc in self.drivers if proc.alive() and proc.run_dir not in finished]

    def _quit_answer(self, answer: str | None) -> None:
        if answer is None:
            return
        live = self.live_drivers()
        if answer == "stop" and live:
            self._stop_for_quit(live)
            return
        self.detached = [proc for proc in live if answer == "detach"]
        self.exit(0)

    @work(thread=True, group="control", exit_on_error=False)
    def _stop_for_quit(self, live: list[DriverProcess]) -> None:
        """Order every run started here to stop (each driver finishes its running trials on its own), then quit."""
        import signal

        from rrma.log.control import RunNotLive, send_control
        from rrma.log.store import RunNotFound

        for proc in live:
            try:
                if proc.run_dir is None:
                    raise RunNotLive("not started yet")
                send_control(proc.run_dir, "stop", self.reviewer, "quit the TUI")
            except (RunNotLive, RunNotFound):  # not holding its run yet (or already ending): Ctrl-C's first press
                if proc.alive():
                    os.killpg(proc.pid, signal.SIGINT)
        self.stopped_on_quit = live
        self.call_from_thread(self.exit, 0)

    # ------------------------------------------------------------------ what screens ask for (tui/messages.py)

    @on(OpenRun)
    def _open_run(self, message: OpenRun) -> None:
        self.open_run(message.run_dir)

    @on(StartRun)
    def _start_run(self, message: StartRun) -> None:
        self.start_run(message.args, message.label)

    @on(ResumeRun)
    def _resume_run(self, message: ResumeRun) -> None:
        self.resume_run(message.run_dir)

    @on(OpenTrial)
    def _open_trial(self, message: OpenTrial) -> None:
        self.push_screen(TrialScreen(message.session, message.trial_id, message.order, queue=message.queue,
                                     follow=message.follow))

    @on(OpenTrace)
    def _open_trace(self, message: OpenTrace) -> None:
        self.push_screen(TraceScreen(message.session, trial_id=message.trial_id, cited=message.cited))

    @on(OpenLineage)
    def _open_lineage(self, message: OpenLineage) -> None:
        self.push_screen(LineageScreen(message.session))

    @on(OpenReview)
    def _open_review(self, message: OpenReview) -> None:
        self.push_screen(ReviewScreen(message.session))

    @on(OpenTraining)
    def _open_training(self, message: OpenTraining) -> None:
        from tui.screens.training import TrainingScreen  # only runs with training steps open it

        self.push_screen(TrainingScreen(message.session))

    @on(OpenTimeline)
    def _open_timeline(self, message: OpenTimeline) -> None:
        from tui.screens.timeline import TimelineScreen

        self.push_screen(TimelineScreen(message.session))

    @on(OpenAnalysis)
    def _open_analysis(self, message: OpenAnalysis) -> None:
        from tui.screens.analysis import AnalysisScreen

        self.push_screen(AnalysisScreen(message.session, message.trial_ids, message.label))

    @on(OpenTheorems)
    def _open_theorems(self, message: OpenTheorems) -> None:
        from tui.screens.theorems import TheoremsScreen  # only proof runs open it

        self.push_screen(TheoremsScreen(message.session))

    @on(OpenRunCompare)
    def _open_run_compare(self, message: OpenRunCompare) -> None:
        from tui.screens.run_compare import RunCompareScreen

        self.push_screen(RunCompareScreen(message.left, message.right))

    @on(OpenProofTree)
    def _open_proof_tree(self, message: OpenProofTree) -> None:
        self.push_screen(ProofTreeScreen(message.trial_id, message.theorem, message.tree))

    @on(OpenCompare)
    def _open_compare(self, message: OpenCompare) -> None:
        if message.against == "best":
            compare_with_best(self, message.session, message.trial_id)
        else:
            pick_and_compare(self, message.session, message.trial_id)

    # ------------------------------------------------------------------ reviews

    @on(ReviewDecided)
    def _review_decided(self, message: ReviewDecided) -> None:
        session = message.session
        self._write_review(session.run_dir, message.trial_id, message.decision, session.reviewer, message.note)

    @work(thread=True, group="review", exit_on_error=False)
    def _write_review(self, run_dir: Path, trial_id: str, decision: str, reviewer: str, note: str) -> None:
        """Append the review as `rrma-tui review` does (rrma.run.promotion.review_trial: the review it supersedes,
        signed with $RRMA_SIGNING_KEY where set, and a finished run's promotion by the loop's rule)."""
        from rrma.log.reader import read_state
        from rrma.log.signing import default_signing_key

        key = default_signing_key()  # a signing failure fails the worker: notified, nothing written
        store = RunStore(run_dir)
        try:
            # read as the views read it (its checkpoint plus the lines after it), with the trial.finished
            # hashes a signature binds
            state = read_state(run_dir, turns=False)
            promoted = append_review(store, state, trial_id, decision, reviewer, note, key)
        finally:
            store.close()
        self.post_message(self.ReviewRecorded(run_dir, trial_id, decision, reviewer, promoted))

    @on(ReviewsDecided)
    def _reviews_decided(self, message: ReviewsDecided) -> None:
        session = message.session
        self._write_reviews(session.run_dir, message.planned, message.decision, session.reviewer, message.note)

    @work(thread=True, group="review", exit_on_error=False)
    def _write_reviews(self, run_dir: Path, planned: list[tuple[str, int | None]], decision: str, reviewer: str,
                       note: str) -> None:
        """Append one review per planned trial, each as :meth:`_write_review` appends one (:func:`append_review`).
        A trial that cannot be reviewed is reported and the others are still written: one whose latest review is
        no longer the one the confirmation showed (someone reviewed it meanwhile), one that cannot be signed, one
        the log refuses."""
        from rrma.log.chain import ChainCheck
        from rrma.log.reader import read_state
        from rrma.log.review import ReviewError, superseded_review
        from rrma.log.signing import SigningError, default_signing_key

        key = default_signing_key()
        written: list[tuple[str, bool]] = []
        failed: list[tuple[str, str]] = []
        store = RunStore(run_dir)
        chain = ChainCheck(store)  # each approval's chain check reads only the lines since the previous one's
        try:
            state = read_state(run_dir, turns=False)  # one fold; each review brings it up to date (review_trial)
            for trial_id, shown in planned:
                try:
                    if superseded_review(state, trial_id, decision) != shown:
                        raise ReviewError(changed_since(state, trial_id))
                    written.append((trial_id, append_review(store, state, trial_id, decision, reviewer, note, key,
                                                            chain)))
                except (ReviewError, SigningError, ValueError, OSError) as exc:
                    failed.append((trial_id, failure_line(exc)))
        finally:
            store.close()
        self.post_message(self.ReviewsRecorded(run_dir, decision, reviewer, written, failed))

    @on(ReviewsRecorded)
    def _reviews_recorded(self, message: ReviewsRecorded) -> None:
        text = bulk_summary(message.decision, message.reviewer, message.written, message.failed)
        self.notify(text, severity="warning" if message.failed else "information", timeout=15 if message.failed else 5)
        for screen in self.screen_stack:
            if isinstance(screen, ReviewScreen) and screen.session.run_dir == message.run_dir:
                screen.reviews_recorded(text, [trial_id for trial_id, _ in message.failed])

    @on(ReviewRecorded)
    def _review_recorded(self, message: ReviewRecorded) -> None:
        extra = " and promoted" if message.promoted else ""
        self.notify(f"{message.decision} {message.trial_id} by {message.reviewer} recorded{extra}")

    # ------------------------------------------------------------------ audit findings

    @on(FindingDismissed)
    def _finding_dismissed(self, message: FindingDismissed) -> None:
        session = message.session
        self._write_dismissal(session.run_dir, message.trial_id, message.finding_seq, session.reviewer, message.note)

    @work(thread=True, group="audit", exit_on_error=False)
    def _write_dismissal(self, run_dir: Path, trial_id: str, finding_seq: int, reviewer: str, note: str) -> None:
        """Append the dismissal (rrma.audit.auditor.dismiss_finding: refused, as an AuditError the failure handler
        shows, when the finding is unknown or was dismissed meanwhile); the tail brings it to every screen."""
        from rrma.audit.auditor import dismiss_finding
        from rrma.log.reader import read_state

        store = RunStore(run_dir)
        try:
            dismiss_finding(store, read_state(run_dir, turns=False), finding_seq, reviewer=reviewer, note=note)
        finally:
            store.close()
        self.post_message(self.DismissalRecorded(trial_id, finding_seq, reviewer))

    @on(DismissalRecorded)
    def _dismissal_recorded(self, message: DismissalRecorded) -> None:
        self.notify(f"finding seq {message.finding_seq} on {message.trial_id} dismissed by {message.reviewer}")

    # ------------------------------------------------------------------ misc

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker is reported (screens hand theirs on, see WorkerScreen): never an exit."""
        if event.state != WorkerState.ERROR:
            return
        group = event.worker.group
        self.notify(failure_line(event.worker.error), title=FAILURE_TITLES.get(group, f"{group or 'background'} task failed"),
                    severity="error", timeout=15)
        if group == "review":
            for screen in self.screen_stack:
                if isinstance(screen, ReviewScreen):
                    screen.forget_decisions()  # the trials it hid while the write was pending come back

    def exit(self, result: int | None = None, return_code: int = 0, message: Any = None) -> None:
        self.exiting = True
        super().exit(result, return_code, message)

    async def on_event(self, event: events.Event) -> None:
        if self.exiting and isinstance(event, events.InputEvent):
            return  # keys typed after quitting (`qt`) must not push screens while the app shuts down
        if isinstance(event, events.Key):  # a burst goes where it is typed (tui/typeahead.py)
            if self.typeahead.arrived(event):
                return
            if event.is_forwarded:
                screen = self.screen
                await super().on_event(event)
                self.typeahead.handled(screen)
                return
        await super().on_event(event)
        if isinstance(event, events.DescendantFocus):
            await self.typeahead.focus_moved()

    # ------------------------------------------------------------------ the command palette (ctrl+p)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The app's own commands first (those of the run on screen, then runs to open), then Textual's (Theme...)."""
        dash: DashboardScreen | None = None
        if isinstance(screen, RunScreen):
            dash = next((s for s in reversed(self.screen_stack)
                         if isinstance(s, DashboardScreen) and s.session is screen.session), None)
        if dash is not None:
            trial = getattr(screen, "trial_id", None) or dash.query_one("#trials").cursor_key  # type: ignore[attr-defined]
            name = dash.session.run_dir.name
            yield SystemCommand("Go to trial", f"open a trial of {name} by id (g)", dash.action_goto_trial)
            if trial:
                yield SystemCommand("Compare with the best", f"diff {trial} against the current best (d)",
                                    lambda: self._compare(dash, trial, best=True))
                yield SystemCommand("Compare trials", f"diff {trial} against a trial you name (D)",
                                    lambda: self._compare(dash, trial, best=False))
            yield SystemCommand("Follow the running trial", "its live output, then the next one to run (F)",
                                lambda: self._follow_running(dash))
            yield SystemCommand("Stop the run", f"order {name}'s driver to stop (h)", dash.action_stop_run)
            yield SystemCommand("Pause or continue the run", "hold or resume new proposals (w)", dash.action_pause_run)
            yield SystemCommand("Resume the run here", "drive a stopped run from a process of this TUI (R)",
                                dash.action_resume_run)
            yield SystemCommand("Post to the blackboard", f"as human:{self.reviewer} (m)", dash.action_post)
            yield SystemCommand("Steer agents", "a note in their next context (i)", dash.action_steer)
            yield SystemCommand("Export the run", "to SQLite, idempotent (datasette opens it)", dash.action_export)
            yield SystemCommand("Review queue", "trials to review, flagged, reviewed (v)",
                                lambda: self._on(dash, dash.action_review))
            yield SystemCommand("Lineage", "the tree of trials and the best path (l)",
                                lambda: self._on(dash, dash.action_lineage))
            yield SystemCommand("Trace", "every agent turn (t)", lambda: self._on(dash, dash.action_trace))
            yield SystemCommand("Timeline", "orders, reviews, promotions, findings, with a verify badge (E)",
                                lambda: self._on(dash, dash.action_timeline))
            yield SystemCommand("Chart log scale", "toggle the score chart's log scale (L)", dash.action_log_scale)
            yield SystemCommand("Analysis", "any metric against trial order, wall time or a parameter (A)",
                                lambda: self._on(dash, dash.action_analysis))
            if is_proof_run(dash.state):
                yield SystemCommand("Theorems", "solved per theorem, solved over time, difficulty table (O)",
                                    lambda: self._on(dash, dash.action_theorems))
            if dash.state.train_steps:
                yield SystemCommand("Training", "reward, entropy, KL and loss by step, checkpoints (T)",
                                    lambda: self._on(dash, dash.action_training))
        yield SystemCommand("New run", "from a task YAML or a bench name, with options (ctrl+n)", self._new_run)
        try:
            from rrma.log.reader import find_runs

            runs = find_runs(self.runs_dir)[:50]
        except OSError:
            runs = []
        for run_dir in runs:
            yield SystemCommand(f"Open run {run_dir.name}", f"its dashboard ({self.runs_dir})",
                                lambda run_dir=run_dir: self.open_run(run_dir))  # type: ignore[misc]
        from rrma.run.experiment import find_experiments

        for exp_dir in find_experiments(Path("experiments"))[:20]:
            yield SystemCommand(f"Open experiment {exp_dir.name}", "its arms' curves side by side (./experiments)",
                                lambda exp_dir=exp_dir: self.open_experiment(exp_dir))  # type: ignore[misc]
        yield from super().get_system_commands(screen)

    def _on(self, dash: DashboardScreen, action: Callable[[], None]) -> None:
        """Run a dashboard action that pushes a screen, from the dashboard (closing what is above it)."""
        while self.screen is not dash and len(self.screen_stack) > 1:
            self.pop_screen()
        action()

    def _follow_running(self, dash: DashboardScreen) -> None:
        """The trial view of the newest running trial, following whichever runs (``F`` on the dashboard and the
        trial view)."""
        screen = self.screen
        if isinstance(screen, TrialScreen) and screen.session is dash.session:
            if not screen.follow:
                screen.action_follow_running()
            return
        self._on(dash, dash.action_follow_running)

    def _compare(self, dash: DashboardScreen, trial: str, *, best: bool) -> None:
        if best:
            compare_with_best(self, dash.session, trial)
        else:
            pick_and_compare(self, dash.session, trial)

    def _new_run(self) -> None:
        def chosen(answer: tuple[list[str], str] | None) -> None:
            if answer is not None:
                self.start_run(*answer)

        self.push_screen(NewRunScreen(self.runs_dir), chosen)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        name = type(self.screen).__name__.removesuffix("Screen").lower() or "app"
        self.push_screen(HelpScreen(name, help_rows(self.screen)))

    def action_quit(self) -> None:  # type: ignore[override]
        live = self.live_drivers()
        if live and not self.exiting:  # runs started here go on without the TUI only if the person says so
            if not isinstance(self.screen, QuitRunScreen):
                self.push_screen(QuitRunScreen([p.run_dir.name if p.run_dir else p.label for p in live]),
                                 self._quit_answer)
            return
        self.exit(0)


def run_app(runs_dir: Path, run_dir: Path | None = None, reviewer: str | None = None,
            start_args: list[str] | None = None, experiment: Path | None = None) -> int:
    """Run the TUI until the user quits; returns the exit code. Says what became of the runs started here."""
    app = RRMAApp(runs_dir, run_dir, reviewer, start_args, experiment=experiment)
    result = app.run()
    for proc in app.detached:
        where = proc.run_dir or proc.log_path
        print(f"{proc.label}: goes on in process {proc.pid} ({where}); `rrma-tui {where}` watches it, "
              f"`rrma-tui stop {where}` stops it")
    for proc in app.stopped_on_quit:
        where = proc.run_dir or proc.log_path
        print(f"{proc.label}: stopping; process {proc.pid} ends when its running trials finish ({where})")
    return int(result or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.app", description="RRMA terminal UI")
    parser.add_argument("run", nargs="?", type=Path, help="a run directory to open")
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="directory of runs (default ./runs)")
    parser.add_argument("--reviewer", help="name recorded on reviews (default $RRMA_REVIEWER or $USER)")
    parser.add_argument("--task", type=Path, help="start a run of this task YAML (driven by a headless child)")
    args = parser.parse_args(argv)
    run_dir = args.run
    if run_dir is not None and not (run_dir / "events.jsonl").exists() and (args.runs / run_dir / "events.jsonl").exists():
        run_dir = args.runs / run_dir
    if run_dir is not None and not (run_dir / "events.jsonl").exists():
        print(f"{run_dir}: not a run directory (no events.jsonl)", file=sys.stderr)
        return 2
    start = ["run", str(args.task), "--headless", "--quiet", "--runs", str(args.runs)] if args.task else None
    return run_app(args.runs, run_dir, args.reviewer, start)


if __name__ == "__main__":
    sys.exit(main())
