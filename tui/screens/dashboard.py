"""The run dashboard: header, trials table, score chart, agents panel, live blackboard.

The dashboard owns the run's tail: a thread worker folds the log once (fast path, see
rrma.log.reader), posts :class:`Loaded`, then polls for appended bytes and posts
:class:`Appended`, which coalesces (the parsed chunks wait in the session's queue, so a
replaced message loses nothing). The handler folds on the UI thread and tells every screen of
the run to redraw. The worker never touches a widget.
"""

from __future__ import annotations

import gc
import queue
import threading
import time
from dataclasses import astuple, dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from rrma.log.chain import ChainCheck, LogIntegrity, log_integrity
from rrma.log.codec import LogEvent, Torn
from rrma.log.head import log_stamp
from rrma.log.layout import EVENTS
from rrma.log.reader import LiveFold, trials_touched
from rrma.log.store import RunStore, RunUnreadable, check_first_event, check_readable
from rrma.log.turns import TurnIndex
from tui.dialogs import ExportScreen, TrialPickScreen, UnverifiedResumeScreen
from tui.messages import (
    OpenAnalysis,
    OpenCompare,
    OpenLineage,
    OpenReview,
    OpenTheorems,
    OpenTimeline,
    OpenTrace,
    OpenTraining,
    OpenTrial,
)
from tui.orders import OrderDone, ask_pause, ask_post, ask_resume, ask_steer, ask_stop
from tui.screens.base import RunScreen, failure_line, shown
from tui.session import RunSession
from tui.widgets.dashboard_panes import (
    NARROW_BELOW,
    ROOMY_FROM,
    ZOOMS,
    agents_table,
    blackboard_text,
    pane_layout,
    right_panes_width,
)
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.run_header import header_text, run_now, unreadable_header
from tui.widgets.score_chart import ScoreChart
from tui.widgets.trial_text import (
    SCORE_CELLS,
    SIGMA_CELLS,
    is_proof_run,
    trial_cells,
)

SORTS = ["order", "score", "delta", "seconds", "agent", "status"]
REDRAW_INTERVAL = 0.1  # seconds between live redraws (updates in between are coalesced); the tail polls as often
HEADER_TICK = 1.0  # seconds between header redraws with no event (elapsed and `last event N ago` move on)
VERIFY_INTERVAL = 2.0  # seconds at least between two checks of the log's integrity (each when it changed)
FIRST_VERIFY_AFTER = 0.8  # seconds after the run is loaded before the first check: it would slow the open
STATUSES = [None, "ok", "rejected", "invalid", "crash", "timeout", "oom", "disk", "aborted", "running", "proposed"]

TRIAL_COLUMNS = [  # drop: which columns a narrow terminal leaves out first (80x24 keeps id, st, score, Δσ, review)
    Column("id", "id", 7), Column("parent", "parent", 6, drop=6), Column("agent", "agent", 8, drop=4),
    Column("status", "st", 2), Column("score", "score", SCORE_CELLS, "right"),
    Column("delta", "Δσ", SIGMA_CELLS, "right", drop=2),
    Column("seconds", "sec", 5, "right", drop=7), Column("review", "review", 10, drop=3),
    Column("hypothesis", "hypothesis", 0, drop=5),
]


# a proof run's table: the theorem each trial proves, kept at 80 columns (its Δσ is empty: no baseline to beat)
PROOF_COLUMNS = [*TRIAL_COLUMNS[:-1], Column("theorem", "theorem", 12), TRIAL_COLUMNS[-1]]
THEOREM_CELL = len(TRIAL_COLUMNS) - 1  # where the theorem goes in a row's cells


TRIALS_HINT = "⏎ open · F follow · ? keys"  # under the trials table: the next step (fits 80 columns)


class DashboardScreen(RunScreen):
    # below NARROW_BELOW columns the screen has the class -narrow (app.tcss hides the chart, agents and blackboard):
    # beside a 44-column right pane the trials table could not show a score whole
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]
    BINDINGS = [
        Binding("enter", "open_trial", "Trial"),
        Binding("t", "trace", "Trace"),
        Binding("v", "review", "Review"),
        Binding("l", "lineage", "Lineage"),
        Binding("g", "goto_trial", "Go to trial", show=False),
        Binding("F", "follow_running", "Follow the running trial (its live output)", show=False),
        Binding("d", "compare_best", "Compare with the best", show=False),
        Binding("D", "compare_pick", "Compare with a trial…", show=False),
        Binding("L", "log_scale", "Chart: log scale on/off", show=False),
        Binding("T", "training", "Training curves (a training run)", show=False),
        Binding("E", "timeline", "Timeline: orders, reviews, promotions, findings", show=False),
        Binding("A", "analysis", "Analysis: any metric, wall time, parameters (the table's filter)", show=False),
        Binding("O", "theorems", "Theorems: solved per theorem, difficulty (a proof run)", show=False),
        Binding("s", "sort", "Sort"),
        Binding("r", "reverse", "Reverse sort", show=False),
        Binding("a", "agent_filter", "Agent"),
        Binding("f", "status_filter", "Status"),
        Binding("slash", "search", "Filter"),  # / is text search everywhere: here it filters the table
        Binding("c", "clear_filters", "Clear filters", show=False),
        Binding("Z", "zoom", "Zoom: the chart over the body, the table alone, both", show=False),
        Binding("1", "pane('chart')", "Chart pane on/off", show=False),
        Binding("2", "pane('agents')", "Agents pane on/off", show=False),
        Binding("3", "pane('blackboard')", "Blackboard pane on/off", show=False),
        # writes to the log: letters no screen uses for anything else, each asks first (docs/tui.md);
        # listed by `?`, not in the footer, which must keep `q` and `?` visible at 80 columns
        Binding("h", "stop_run", "Stop (halt) the run", show=False),
        Binding("w", "pause_run", "Pause / continue the run", show=False),
        Binding("m", "post", "Post to the blackboard", show=False),
        Binding("i", "steer", "Steer agents (a note)", show=False),
        Binding("R", "resume_run", "Resume the run here (a driver started by this TUI)", show=False),
        Binding("escape", "back", "Runs"),
    ]

    @dataclass
    class Loaded(Message):
        """The whole log as it was at open time is folded into ``model``."""

        model: LiveFold
        seconds: float

    @dataclass
    class Unreadable(Message):
        """The run cannot be read as one (rrma.log.store.check_first_event): why; nothing is loaded."""

        reason: str

    @dataclass
    class Appended(Message):
        """New lines wait in the session's queue (coalesced: one pending message is enough)."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, DashboardScreen.Appended)

    @dataclass
    class Verified(Message):
        """The log was checked (rrma/log/chain.py log_integrity) as it was at ``stamp`` (rrma/log/head.py log_stamp)."""

        integrity: LogIntegrity
        stamp: tuple[int, int, int]

    @dataclass
    class TurnsIndexed(Message):
        """The turns folded unparsed at open are indexed (refs and per-agent totals)."""

        index: TurnIndex

    def __init__(self, session: RunSession, *, poll_interval: float = 0.1) -> None:
        super().__init__(session)
        self.poll_interval = poll_interval
        self.sort_key = "order"
        self.sort_reverse = True  # newest first
        self.agent_filter: str | None = None
        self.status_filter: str | None = None
        self.text_filter = ""
        self._wake = threading.Event()
        self._unshown: list[LogEvent] = []  # folded but not yet drawn
        self._redraw_timer: Timer | None = None
        self._last_redraw = 0.0
        self.unreadable: str | None = None  # why the run cannot be read (then the header says so, not "(loading)")
        self._proof = False  # a proof run: the table has a theorem column
        self._layout_drawn: tuple[object, ...] = ()  # the PaneLayout this screen's classes show
        # the header's integrity: the last check of the log, the log's stamp it was made at, a check under way
        self.integrity: LogIntegrity | None = None
        self._verified_stamp: tuple[int, int, int] | None = None
        self._verifying = False
        self._verified_at = 0.0
        self._loaded_at: float | None = None  # when the header first drew the loaded run (the first check waits)
        self._chain: ChainCheck | None = None  # the check kept between calls (the verify worker's alone)

    def compose(self) -> ComposeResult:
        yield Static(header_text(self.session, self.app.size.width - 2), id="run-header")
        with Horizontal(id="dash-body"):
            with Vertical(id="dash-left"):
                yield Static("", id="filter-bar")
                yield Input(placeholder="filter text (id, agent, theorem, hypothesis); Enter applies, Esc closes",
                            id="filter-input")
                yield LineTable(TRIAL_COLUMNS, self._row, id="trials", select_label="Trial")
            with Vertical(id="dash-right"):
                yield ScoreChart(id="chart")  # drawn with the table on every (coalesced) redraw
                yield Static("", id="agents", classes="panel")
                with VerticalScroll(id="blackboard", classes="panel"):
                    yield Static("", id="blackboard-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#filter-input").display = False
        self.query_one("#agents").border_title = "agents"
        self.query_one("#blackboard").border_title = "blackboard"
        self.query_one("#trials", LineTable).border_title = "trials"
        self.query_one("#trials", LineTable).border_subtitle = TRIALS_HINT  # the next step, under the table
        self.query_one("#trials", LineTable).focus()
        self._update_filter_bar()
        self._apply_layout()
        self.set_interval(HEADER_TICK, self._tick)
        self.watch_run()  # the reader yields the GIL between 1 MiB chunks, so the UI paints meanwhile

    # ------------------------------------------------------------------ the tail

    @work(thread=True, exclusive=True, group="tail", exit_on_error=False)
    def watch_run(self) -> None:
        worker = get_current_worker()
        session = self.session
        path = session.run_dir / EVENTS
        while not path.exists():  # a run being created by the loop worker
            if worker.is_cancelled or self._wake.wait(self.poll_interval):
                return
        try:  # a run with no readable first event would stay "(loading)" forever: say why instead
            check_readable(session.run_dir, log=False)
            check_first_event(session.run_dir)
        except RunUnreadable as exc:
            self.post_message(self.Unreadable(str(exc)))
            return
        started = time.perf_counter()
        model = session.reader.load()
        self.post_message(self.Loaded(model, time.perf_counter() - started))
        while not worker.is_cancelled:
            chunk = session.reader.poll()
            if chunk is not None:
                session.pending.put(chunk)
                self.post_message(self.Appended())
            if self._wake.wait(self.poll_interval):
                return

    @work(thread=True, exclusive=True, group="index", exit_on_error=False)
    def index_turns(self, model: LiveFold) -> None:
        worker = get_current_worker()
        index = model.index_turns(lambda: worker.is_cancelled)
        if index is not None and not worker.is_cancelled:
            self.post_message(self.TurnsIndexed(index))

    def on_unmount(self) -> None:
        self._wake.set()

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        self.session.model = message.model
        self.session.load_seconds = message.seconds
        self.session.loaded_event.set()
        # a long run is a million live objects; exclude them from the cyclic GC's full passes,
        # which otherwise stall the UI for hundreds of milliseconds now and then
        gc.freeze()
        self.session.generation += 1
        self._broadcast([])
        self._warn_unreadable(message.model.torn)
        self.call_after_refresh(self.index_turns, message.model)  # after the first paint

    @on(Unreadable)
    def _unreadable(self, message: Unreadable) -> None:
        self.unreadable = message.reason
        self._update_header()
        self.notify(message.reason, title="run unreadable", severity="error", timeout=15)

    @on(Appended)
    def _appended(self, message: Appended) -> None:
        model = self.session.model
        if model is None:
            return
        torn = len(model.torn)
        while True:
            try:
                chunk = self.session.pending.get_nowait()
            except queue.Empty:
                break
            self._unshown.extend(model.apply(chunk))
        unreadable = self._warn_unreadable(model.torn[torn:])
        if (self._unshown or unreadable) and self._redraw_timer is None:
            # redraw at most every REDRAW_INTERVAL seconds however fast events arrive
            delay = max(0.001, self._last_redraw + REDRAW_INTERVAL - time.monotonic())
            self._redraw_timer = self.set_timer(delay, self._redraw)

    def _redraw(self) -> None:
        self._redraw_timer = None
        events, self._unshown = self._unshown, []
        self._last_redraw = time.monotonic()
        self.session.generation += 1
        self._broadcast(events)
        if self.session.on_applied is not None:
            self.session.on_applied(events)

    @on(TurnsIndexed)
    def _indexed(self, message: TurnsIndexed) -> None:
        if self.session.model is not None:
            self.session.model.attach_index(message.index)
            gc.freeze()  # the turn index is long-lived too
            self._broadcast([])
            self._warn_unreadable(message.index.torn)

    def _warn_unreadable(self, torn: list[Torn]) -> bool:
        """Say that lines just read are not valid events (the header keeps the count); False if none."""
        if not torn:
            return False
        self.notify(f"{len(torn)} line(s) of {EVENTS} are not valid events and are skipped; the first, at byte "
                    f"{torn[0].offset}: {torn[0].error}", title="unreadable lines", severity="warning", timeout=10)
        return True

    def _broadcast(self, events: list[LogEvent]) -> None:
        # a screen being pruned (popped, or the app shutting down with this redraw still due) has lost its
        # widgets while it is still on the stack: it gets nothing, whatever its run_changed would draw
        if not self.app.is_running:
            return
        for screen in self.app.screen_stack:
            if isinstance(screen, RunScreen) and screen.session is self.session and not screen._pruning:
                screen.run_changed(events)

    # ------------------------------------------------------------------ drawing

    def _update_header(self) -> None:
        header = self.query_one("#run-header", Static)
        width = header.content_region.width or self.app.size.width - 2
        text = header_text(self.session, width, self.integrity) if self.unreadable is None else \
            unreadable_header(self.session, self.unreadable, width)
        header.update(text, layout=False)  # three lines, always (app.tcss)
        self._look_at_log()

    def _look_at_log(self) -> None:
        """Check the log's integrity again when it or its head record changed (three stats), in a worker, at most
        every VERIFY_INTERVAL seconds; the first check FIRST_VERIFY_AFTER seconds after the run is loaded (the check
        of a whole chain would otherwise take the GIL from the open's first paints)."""
        if self._verifying or not self.session.loaded or \
                (time.monotonic() - self._verified_at < VERIFY_INTERVAL and self.integrity is not None):
            return
        if self._loaded_at is None:
            self._loaded_at = time.monotonic()
            self.set_timer(FIRST_VERIFY_AFTER, self._look_at_log)  # the first check after the open has drawn
            return
        if time.monotonic() - self._loaded_at < FIRST_VERIFY_AFTER:
            return
        stamp = log_stamp(self.session.run_dir)
        if stamp != self._verified_stamp:
            self._verifying = True
            self.verify_log(stamp)

    @work(thread=True, exclusive=True, group="verify", exit_on_error=False)
    def verify_log(self, stamp: tuple[int, int, int]) -> None:
        """The whole chain of a log up to 4 MiB (kept between checks: only the lines since the last one), the head
        record of a longer one (rrma/log/chain.py log_integrity, the runs list's rule too)."""
        run_dir = self.session.run_dir
        try:
            if self._chain is None:
                self._chain = ChainCheck(RunStore(run_dir))
            integrity = log_integrity(run_dir, chain=self._chain)
        except Exception as exc:  # a check that fails says so in the header, never fails the screen
            integrity = LogIntegrity("unreadable", "cannot check", failure_line(exc))
        self.post_message(self.Verified(integrity, stamp))

    @on(Verified)
    def _verified(self, message: Verified) -> None:
        was = self.integrity
        self.integrity, self._verified_stamp = message.integrity, message.stamp
        self._verifying, self._verified_at = False, time.monotonic()
        if was is None or was.verdict != message.integrity.verdict:
            self._update_header()
            if message.integrity.fails:
                self.notify(message.integrity.finding, title=f"verify: {message.integrity.words}", severity="error",
                            timeout=15)

    def _tick(self) -> None:
        """The header once a second, events or not (like btop's): ages and elapsed time move on while the
        log is quiet (a paused run, a finished one, a run no driver holds). Only while the dashboard is shown
        (a stale screen redraws on resume); the header alone: head.json (one small file) and the counts kept
        by the model. The trials table's visible rows too while one of them is running (its ``sec`` is its age):
        a look at their statuses, and the table's redraw (only the rows on screen are formatted) when one runs."""
        if self.session.loaded and self.is_mounted and shown(self):
            self._update_header()
            table, trials = self.query_one("#trials", LineTable), self.state.trials
            top = int(table.scroll_offset.y)
            if any((rec := trials.get(tid)) is not None and rec.status == "running"
                   for tid in table.rows[top:top + table.size.height]):
                table.refresh_rows()

    def on_resize(self) -> None:
        if self.is_mounted:
            self.call_after_refresh(self._update_header)

    def refresh_view(self, events: list[LogEvent]) -> None:
        self._update_header()
        ids = self._update_rows()
        self._update_filter_bar(len(ids))
        touched: set[str] | None = None
        if events:  # the trials these events changed; [] means all
            touched = {tid for event in events for tid in trials_touched(event)}
        self._update_chart(ids, touched)
        agents, table = self.query_one("#agents", Static), agents_table(self.session)
        shown = agents.content
        # the panel is as tall as its rows: lay the screen out again only when an agent is added
        agents.update(table, layout=not isinstance(shown, Table) or shown.row_count != table.row_count)
        if not events or any(e.kind in ("blackboard.post", "agent.steer") for e in events):
            self.query_one("#blackboard-text", Static).update(blackboard_text(self.session))

    def _row(self, trial_id: str) -> list[str | Text]:
        rec = self.state.trials.get(trial_id)
        if rec is None:
            return [trial_id]
        cells = trial_cells(self.state, rec, now=run_now(self.session) if rec.status == "running" else None)
        if self._proof:
            cells.insert(THEOREM_CELL, rec.theorem or "-")
        return cells

    def visible_ids(self) -> list[str]:
        state = self.state
        needle = self.text_filter.lower()
        if self.sort_key == "order" and not (self.agent_filter or self.status_filter or needle):
            return state.order[::-1] if self.sort_reverse else list(state.order)  # every live redraw: no pass
        ids = []
        for tid in state.order:
            rec = state.trials[tid]
            if self.agent_filter and rec.agent != self.agent_filter:
                continue
            if self.status_filter and rec.status != self.status_filter:
                continue
            if needle and needle not in f"{rec.trial_id} {rec.agent} {rec.theorem or ''} {rec.hypothesis} " \
                                        f"{rec.feedback}".lower():
                continue
            ids.append(tid)
        if self.sort_key != "order":
            sign = 1 if state.direction == "minimize" else -1

            def key(tid: str) -> tuple[int, float | str]:
                rec = state.trials[tid]
                if self.sort_key == "score":
                    return (rec.score is None, sign * rec.score if rec.score is not None else 0.0)
                if self.sort_key == "delta":
                    ds = state.delta_sigma_of(rec.score) if rec.status == "ok" else None
                    return (ds is None, -ds if ds is not None else 0.0)
                if self.sort_key == "seconds":
                    return (0, -rec.seconds)
                return (0, str(getattr(rec, self.sort_key)))

            ids.sort(key=key)
            if self.sort_reverse:
                ids.reverse()
        elif self.sort_reverse:
            ids.reverse()
        return ids

    @property
    def filtered(self) -> bool:
        return bool(self.agent_filter or self.status_filter or self.text_filter)

    def _update_chart(self, ids: list[str], touched: set[str] | None = None) -> None:
        """The chart shows what the table shows: with a filter, only its trials ("filtered: N of M")."""
        chart = self.query_one("#chart", ScoreChart)
        if self.filtered:
            chart.update_from(self.state, only=set(ids), of=len(self.state.order))
        else:
            chart.update_from(self.state, touched=touched)

    def _update_rows(self) -> list[str]:
        table = self.query_one("#trials", LineTable)
        if not self._proof and is_proof_run(self.state):  # known once its first trials are read
            self._proof = True
            table.set_columns(PROOF_COLUMNS)
        # new trials appear at the top (newest first) or the bottom; sorted by anything else, nowhere to follow
        table.live_end = ("top" if self.sort_reverse else "bottom") if self.sort_key == "order" else None
        ids = self.visible_ids()
        table.set_rows(ids)
        return ids

    @on(LineTable.FollowChanged, "#trials")
    def _follow_changed(self, message: LineTable.FollowChanged) -> None:
        message.table.border_title = "trials · following" if message.following else "trials"

    def _update_filter_bar(self, shown: int | None = None) -> None:
        """How many trials the table shows (``12 of 40`` with a filter, else ``all 40``), the sort, the filters."""
        arrow = "↓" if self.sort_reverse else "↑"
        total = len(self.state.order)
        count = f"{total if shown is None else shown} of {total}" if self.filtered else f"all {total}"
        bar = Text.assemble(
            (count, "bold" if self.filtered else ""), ("  sort ", "dim"), f"{self.sort_key}{arrow}",
            ("  agent ", "dim"), self.agent_filter or "all", ("  status ", "dim"), self.status_filter or "all",
            ("  text ", "dim"), repr(self.text_filter) if self.text_filter else "-",
            no_wrap=True, overflow="ellipsis",
        )
        self.query_one("#filter-bar", Static).update(bar, layout=False)  # one line, always (app.tcss)

    def _refilter(self) -> None:
        ids = self._update_rows()
        self._update_filter_bar(len(ids))
        self._update_chart(ids)

    # ------------------------------------------------------------------ actions

    @on(LineTable.Selected, "#trials")
    def _selected(self, message: LineTable.Selected) -> None:
        self.open_trial(message.key)

    def open_trial(self, trial_id: str) -> None:
        ids = self.query_one("#trials", LineTable).rows
        self.post_message(OpenTrial(self.session, trial_id, ids))

    def action_open_trial(self) -> None:
        key = self.query_one("#trials", LineTable).cursor_key
        if key is not None:
            self.open_trial(key)

    def action_follow_running(self) -> None:
        """F: open the trial running now, following whichever runs next (the trial page's F)."""
        running = self.state.newest_running()
        if running is None:
            self.notify("no trial is running", severity="warning")
            return
        self.post_message(OpenTrial(self.session, running, self.query_one("#trials", LineTable).rows, follow=True))

    def action_trace(self) -> None:
        self.post_message(OpenTrace(self.session))

    def action_goto_trial(self) -> None:
        """Ask for a trial id (or ``best``, or the end of an id) and open it."""
        def chosen(trial_id: str | None) -> None:
            if trial_id is not None:
                self.open_trial(trial_id)

        self.app.push_screen(TrialPickScreen(self.session, "Go to trial"), chosen)

    def _highlighted(self) -> str | None:
        key = self.query_one("#trials", LineTable).cursor_key
        if key is None:
            self.notify("no trial highlighted", severity="warning")
        return key

    def action_compare_best(self) -> None:
        key = self._highlighted()
        if key is not None:
            self.post_message(OpenCompare(self.session, key, "best"))

    def action_compare_pick(self) -> None:
        key = self._highlighted()
        if key is not None:
            self.post_message(OpenCompare(self.session, key, "pick"))

    # ------------------------------------------------------------------ layout (PaneLayout)

    def _apply_layout(self) -> None:
        """The screen's layout classes from the session's PaneLayout (app.tcss shows and hides the panes)."""
        layout = pane_layout(self.app)
        self.set_class(layout.zoom == "chart", "-zoom-chart")
        self.set_class(layout.zoom == "table", "-table-only")
        self.set_class(not layout.chart, "-hide-chart")
        self.set_class(not layout.agents, "-hide-agents")
        self.set_class(not layout.blackboard, "-hide-blackboard")
        self.set_class(not (layout.chart or layout.agents or layout.blackboard), "-no-panes")
        self._layout_drawn = (layout.zoom, layout.chart, layout.agents, layout.blackboard)
        self._fit_right_panes()

    @on(events.Resize)
    def _fit_right_panes(self) -> None:
        """Past ROOMY_FROM columns the chart's column grows (right_panes_width); up to it, and zoomed to the chart,
        app.tcss sizes it."""
        right = self.query_one("#dash-right")
        roomy = self.size.width > ROOMY_FROM and pane_layout(self.app).zoom != "chart"
        right.styles.width = right_panes_width(self.size.width) if roomy else None

    def action_zoom(self) -> None:
        """The chart over the whole body, the table alone, both (a chart shown or resized is drawn again at its
        new size: ScoreChart.on_resize)."""
        layout = pane_layout(self.app)
        layout.zoom = ZOOMS[(ZOOMS.index(layout.zoom) + 1) % len(ZOOMS)]
        self._apply_layout()

    def action_pane(self, pane: str) -> None:
        layout = pane_layout(self.app)
        setattr(layout, pane, not getattr(layout, pane))
        layout.zoom = "normal"  # a pane toggled is seen toggled (not under a zoom)
        self._apply_layout()

    def on_screen_resume(self) -> None:
        if self._layout_drawn != astuple(pane_layout(self.app)):  # changed on another dashboard meanwhile
            self._apply_layout()
        super().on_screen_resume()

    def action_log_scale(self) -> None:
        on = self.query_one("#chart", ScoreChart).toggle_log()
        self.notify(f"chart: {'log' if on else 'linear'} scale")

    def action_export(self) -> None:
        """Ask for a SQLite file and export this run into it (rrma-tui export) in a worker."""
        def chosen(path: Path | None) -> None:
            if path is not None:
                self.export_run(path)

        self.app.push_screen(ExportScreen(self.session.run_dir), chosen)

    @work(thread=True, group="export", exit_on_error=False)
    def export_run(self, out: Path) -> None:
        from rrma.log.export import export_runs

        started = time.perf_counter()
        [result] = export_runs([self.session.run_dir], out)
        what = "unchanged since the last export" if result.skipped else f"{result.events:,} events, {result.trials} trials"
        self.post_message(OrderDone(f"exported {result.run_id} to {out}: {what} "
                                    f"({time.perf_counter() - started:.1f} s; `datasette {out}` browses it)"))

    def action_review(self) -> None:
        self.post_message(OpenReview(self.session))

    def action_training(self) -> None:
        if not self.state.train_steps:
            self.notify("no training steps in this run (`rrma-tui train` writes them)", severity="warning")
            return
        self.post_message(OpenTraining(self.session))

    def action_lineage(self) -> None:
        self.post_message(OpenLineage(self.session))

    def action_timeline(self) -> None:
        self.post_message(OpenTimeline(self.session))

    def action_analysis(self) -> None:
        label = ", ".join(part for part in (f"agent {self.agent_filter}" if self.agent_filter else "",
                                            f"status {self.status_filter}" if self.status_filter else "",
                                            f"text {self.text_filter!r}" if self.text_filter else "") if part)
        self.post_message(OpenAnalysis(self.session, self.visible_ids() if self.filtered else None, label))

    def action_theorems(self) -> None:
        if not is_proof_run(self.state):
            self.notify("not a proof run: the theorems view is for strip-and-rediscover runs", severity="warning")
            return
        self.post_message(OpenTheorems(self.session))

    def action_sort(self) -> None:
        self.sort_key = SORTS[(SORTS.index(self.sort_key) + 1) % len(SORTS)]
        self.sort_reverse = self.sort_key == "order"
        self._resorted()

    def _resorted(self) -> None:
        """Rows in a new order: the cursor and the view go to the first row (by score or Δσ: the best), which
        stayed off screen when the cursor kept its trial, wherever that went."""
        self._refilter()
        table = self.query_one("#trials", LineTable)
        if table.rows:
            table.cursor = 0

    @on(LineTable.HeaderClicked, "#trials")
    def _header_clicked(self, message: LineTable.HeaderClicked) -> None:
        column = {"id": "order", "review": "order", "hypothesis": "order"}.get(message.column, message.column)
        if column in SORTS:
            if column == self.sort_key:
                self.sort_reverse = not self.sort_reverse
                self._refilter()
            else:
                self.sort_key, self.sort_reverse = column, False
                self._resorted()

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._refilter()

    def action_agent_filter(self) -> None:
        agents = [None, *sorted({self.state.trials[t].agent for t in self.state.order})]
        i = agents.index(self.agent_filter) if self.agent_filter in agents else 0
        self.agent_filter = agents[(i + 1) % len(agents)]
        self._refilter()

    def action_status_filter(self) -> None:
        i = STATUSES.index(self.status_filter) if self.status_filter in STATUSES else 0
        self.status_filter = STATUSES[(i + 1) % len(STATUSES)]
        self._refilter()

    def action_search(self) -> None:
        box = self.query_one("#filter-input", Input)
        box.display = True
        box.value = self.text_filter
        box.focus()

    @on(Input.Submitted, "#filter-input")
    def _filter_submitted(self, message: Input.Submitted) -> None:
        self.text_filter = message.value.strip()
        message.input.display = False
        self.query_one("#trials", LineTable).focus()
        self._refilter()

    def action_clear_filters(self) -> None:
        self.agent_filter = self.status_filter = None
        self.text_filter = ""
        self._refilter()

    # ------------------------------------------------------------------ driving the run (tui/orders.py)

    def action_stop_run(self) -> None:
        ask_stop(self, self.session)

    def action_pause_run(self) -> None:
        ask_pause(self, self.session)

    def action_resume_run(self) -> None:
        """Resume, after saying so first when the log fails verification (quoting the finding): the header's last
        check, or one made now (the head record: one line) before the first is in."""
        integrity = self.integrity if self.integrity is not None else log_integrity(self.session.run_dir, chain_bytes=0)
        if not integrity.fails:
            ask_resume(self, self.session)
            return

        def answered(go_on: bool | None) -> None:
            if go_on:
                ask_resume(self, self.session)

        self.app.push_screen(UnverifiedResumeScreen(self.session.run_dir.name, integrity.words, integrity.finding),
                             answered)

    def action_post(self) -> None:
        ask_post(self, self.session)

    def action_steer(self) -> None:
        ask_steer(self, self.session, self.agent_filter or "")

    @on(OrderDone)
    def _order_done(self, message: OrderDone) -> None:
        self.notify(message.text, timeout=5)

    def action_back(self) -> None:
        box = self.query_one("#filter-input", Input)
        if box.display:
            box.display = False
            self.query_one("#trials", LineTable).focus()
            return
        self.app.pop_screen()
