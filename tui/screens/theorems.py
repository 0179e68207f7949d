"""Theorems (``O`` on a proof run's dashboard): each theorem solved or not, the theorems solved over time and the
bench's difficulty table, live.

A proof run (a strip-and-rediscover bench, or any run under ``loop.policy: per-theorem``) works through its
theorems one at a time (rrma/run/theorems.py). One row per theorem, in the oracle's order: its difficulty,
its state (``✓ solved``; ``open`` while it is worked on (``▶ open``: the one worked on now), or left unfinished by a
stopped run; ``given up``
when the policy is done with it unproved: its attempts or seconds used, or every agent out of ideas, as the
log's ``done`` mark says; ``queued`` before it starts), its attempts and seconds as the policy counts them,
the trial that first proved it and when (wall time since the run began), and for an unsolved theorem its
last attempt's error (the first line of the checker's feedback). The line under the table says it all for
the highlighted theorem. ``Enter`` opens the proving trial, or the last attempt of an unsolved theorem.

Under the table: the theorems solved so far, by trial (``W``: by wall time), and the bench's difficulty
table (solved, total, rate, attempts per solved theorem, seconds per solved theorem: the figures ``bench
coq|lean`` prints, from the same function, rrma/proofs_summary.py; a finished run's are its recorded
summary's). Every theorem and its difficulty are those ``run.started`` recorded (the oracle's, before the first
trial), so the counts are against all of them from the start, as the dashboard's header and the runs list count
(rrma/log/theorems.py).

Everything is read from the session's model: redrawn as the dashboard's tail folds events, and every second
while the run is live (the current theorem's seconds grow). Text the checker or an agent wrote passes
``without_controls``. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Input, Static

from rrma.log.codec import LogEvent
from rrma.log.events import parse_ts
from rrma.proofs_summary import (
    ALL,
    GIVEN_UP,
    OPEN,
    QUEUED,
    SOLVED,
    DifficultyRow,
    ProofFigures,
    SolvedPoint,
    TheoremRow,
    proof_figures,
    solved_curve,
)
from tui.messages import OpenTrial
from tui.screens.base import RunScreen, shown
from tui.session import RunSession
from tui.terminal import without_controls
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.run_header import CURRENT, run_now
from tui.widgets.solved_chart import SolvedChart
from tui.widgets.trial_text import Part, fit_line, fmt_age, fmt_seconds

COLUMNS = [
    Column("theorem", "theorem", 16), Column("difficulty", "diff", 7), Column("state", "state", 8),
    Column("attempts", "att", 4, "right"), Column("seconds", "sec", 6, "right"),
    Column("trial", "trial", 7, drop=2), Column("at", "at", 6, "right", drop=1), Column("note", "last error", 0),
]
DIFFICULTY_COLUMNS = [
    Column("difficulty", "difficulty", 10), Column("solved", "solved", 6, "right"),
    Column("total", "total", 5, "right"), Column("rate", "rate", 4, "right"),
    Column("aps", "att/sol", 7, "right"), Column("sps", "s/sol", 6, "right"),
]
STATE_STYLE = {SOLVED: "green", OPEN: "yellow", GIVEN_UP: "red", QUEUED: "dim"}
STATES = [OPEN, SOLVED, GIVEN_UP, QUEUED]  # what f cycles through (after "every state")
SORTS = ["order", "state", "attempts", "seconds", "difficulty", "name"]
DIFFICULTY_RANK = {"easy": 0, "medium": 1, "hard": 2, "unknown": 3}
STATE_RANK = {OPEN: 0, GIVEN_UP: 1, QUEUED: 2, SOLVED: 3}
SHORT_BELOW, NARROW_BELOW = 20, 70  # rows, columns: below them the bottom pane, the chart are left out
TICK_S = 1.0  # a live run's current theorem: its seconds redrawn this often


def fmt_at(seconds: float | None) -> str:
    """When a theorem was first proved, from the run's start: ``0.9s`` under ten seconds, then as ages read."""
    if seconds is None:
        return "-"
    return f"{seconds:.1f}s" if seconds < 10 else fmt_age(seconds)


def state_cell(row: TheoremRow, current: bool = False) -> Text:
    """``✓ solved``, ``open``, ``given up``, ``queued``; ``▶ open`` for the theorem the run works on now."""
    word = "✓ solved" if row.state == SOLVED else f"{CURRENT} {row.state}" if current else row.state
    return Text(word, STATE_STYLE.get(row.state, "") + (" bold" if current else ""))


def note_of(row: TheoremRow) -> str:
    """The last column: an unsolved theorem's last error (why the policy gave up first), a solved one's prover."""
    if row.state == SOLVED:
        return f"by {row.solver}" if row.solver else ""
    why = f"{row.done.replace('_', ' ')}: " if row.state == GIVEN_UP and row.done else ""
    return without_controls(why + row.last_error)


def theorem_cells(row: TheoremRow, current: bool = False) -> list[str | Text]:
    return [without_controls(row.name), without_controls(row.difficulty), state_cell(row, current), str(row.attempts),
            fmt_seconds(row.seconds), row.solved_by or "-",
            fmt_at(row.solved_at), note_of(row)]


def difficulty_cells(row: DifficultyRow) -> list[str | Text]:
    cells: list[str | Text] = list(row.cells())
    cells[0] = without_controls(row.difficulty)
    if row.difficulty == ALL:
        cells = [Text(str(c), "bold") for c in cells]
    return cells


class TheoremsScreen(RunScreen):
    BINDINGS = [
        Binding("enter", "open_trial", "Trial"),
        Binding("s", "sort", "Sort"),
        Binding("r", "reverse", "Reverse sort", show=False),
        Binding("f", "status_filter", "State"),
        Binding("slash", "search", "Filter"),
        Binding("c", "clear_filters", "Clear filters", show=False),
        Binding("W", "wall_time", "Wall time"),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    TheoremsScreen #th-title { height: 1; padding: 0 1; background: $boost; }
    TheoremsScreen #th-filter { height: 3; }
    TheoremsScreen #th-rows { height: 1fr; min-height: 5; border: round $primary-background; }
    TheoremsScreen #th-rows:focus { border: round $accent; }
    TheoremsScreen #th-detail { height: 1; padding: 0 1; }
    TheoremsScreen #th-bottom { height: 9; }
    TheoremsScreen #th-chart { width: 1fr; height: 9; }
    TheoremsScreen #th-difficulty { width: 46; height: 9; border: round $primary-background; }
    """

    def __init__(self, session: RunSession) -> None:
        super().__init__(session)
        self.figures: ProofFigures | None = None
        self.rows: dict[str, TheoremRow] = {}
        self._difficulty: dict[str, DifficultyRow] = {}
        self.sort_key = "order"
        self.sort_reverse = False
        self.state_filter: str | None = None
        self._curve: list[SolvedPoint] = []  # every first proof of the run (the chart shows the filtered ones)
        self._trials = 0
        self._elapsed = 0.0
        self.text_filter = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="th-title")
        yield Input(placeholder="filter text (theorem, difficulty, state, error); Enter applies, Esc closes",
                    id="th-filter")
        yield LineTable(COLUMNS, self._row, id="th-rows", select_label="Trial")
        yield Static("", id="th-detail")
        with Horizontal(id="th-bottom"):
            yield SolvedChart(id="th-chart")
            yield LineTable(DIFFICULTY_COLUMNS, self._difficulty_row, id="th-difficulty")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#th-filter").display = False
        table = self.query_one("#th-rows", LineTable)
        table.border_title = "theorems"
        table.border_subtitle = "⏎ proof · f state · / filter · s sort"  # the next step
        self.query_one("#th-difficulty", LineTable).border_title = "by difficulty"
        self.query_one("#th-difficulty", LineTable).can_focus = False
        table.focus()
        self.refresh_view([])
        self.set_interval(TICK_S, self._tick)

    def _tick(self) -> None:
        state = self.state
        if state.finish_reason is None and state.theorem_marks and shown(self) and self.session.status() == "running":
            self.refresh_view([])

    # ------------------------------------------------------------------ drawing

    def refresh_view(self, events: list[LogEvent]) -> None:
        state = self.state
        now = run_now(self.session)
        self.figures = proof_figures(state, now.timestamp())
        self.rows = {row.name: row for row in self.figures.theorems} if self.figures else {}
        self._refilter()
        figures = self.figures
        difficulty = self.query_one("#th-difficulty", LineTable)
        self._difficulty = {r.difficulty: r for r in figures.difficulty} if figures else {}
        difficulty.set_rows(list(self._difficulty))
        difficulty.refresh_rows()
        started = parse_ts(state.started_ts) if state.started_ts else None
        self._elapsed = max(0.0, (now - started).total_seconds()) if started is not None else 0.0
        self._curve, self._trials = solved_curve(state), len(state.agent_trials())
        self._draw_chart()
        self._draw_title()
        self._draw_detail()

    def _row(self, key: str) -> list[str | Text]:
        row = self.rows.get(key)
        current = self.figures is not None and self.figures.progress.current == key
        return theorem_cells(row, current) if row is not None else [key]

    def _difficulty_row(self, key: str) -> list[str | Text]:
        row = self._difficulty.get(key)
        return difficulty_cells(row) if row is not None else [key]

    def shown_names(self) -> list[str]:
        """The theorems shown, filtered and sorted."""
        order = list(self.rows)
        needle = self.text_filter.lower()
        keep = [name for name in order if (self.state_filter is None or self.rows[name].state == self.state_filter)
                and (not needle or needle in self._haystack(self.rows[name]))]
        if self.sort_key != "order":
            position = {name: i for i, name in enumerate(order)}

            def key(name: str) -> tuple[object, ...]:
                row = self.rows[name]
                value: object = {"state": STATE_RANK.get(row.state, 9), "attempts": -row.attempts,
                                 "seconds": -row.seconds, "name": row.name,
                                 "difficulty": DIFFICULTY_RANK.get(row.difficulty, 9)}[self.sort_key]
                return value, position[name]

            keep.sort(key=key)
        if self.sort_reverse:
            keep.reverse()
        return keep

    @staticmethod
    def _haystack(row: TheoremRow) -> str:
        return f"{row.name} {row.difficulty} {row.state} {row.solved_by or ''} {row.solver or ''} " \
               f"{row.last_error}".lower()

    def _refilter(self) -> None:
        table = self.query_one("#th-rows", LineTable)
        table.set_rows(self.shown_names())
        table.refresh_rows()
        self._draw_title()
        self._draw_chart()

    def _draw_chart(self) -> None:
        """The solved chart over the theorems the table shows: with a filter on, only their first proofs,
        counted among themselves, against how many are shown (the trial axis stays the run's)."""
        shown = self.query_one("#th-rows", LineTable).rows
        points = self._curve
        filtered = (len(shown), len(self.rows)) if len(shown) != len(self.rows) else None
        if filtered is not None:
            keep = set(shown)
            points = [replace(p, solved=n) for n, p in enumerate((p for p in points if p.theorem in keep), start=1)]
        self.query_one("#th-chart", SolvedChart).update_from(
            points, trials=self._trials, elapsed=self._elapsed, total=len(shown) if filtered else len(self.rows),
            filtered=filtered)

    def _draw_title(self) -> None:
        figures = self.figures
        width = max(10, self.size.width - 2)
        if figures is None:
            self.query_one("#th-title", Static).update(fit_line([(Text("theorems: none named in this run"), 0)],
                                                              width))
            return
        shown_n, total = self.query_one("#th-rows", LineTable).rows, len(self.rows)
        solved = sum(1 for r in self.rows.values() if r.state == SOLVED)
        given_up = sum(1 for r in self.rows.values() if r.state == GIVEN_UP)
        filters = ", ".join(p for p in (self.state_filter or "", repr(self.text_filter) if self.text_filter else "")
                            if p)
        parts: list[Part] = [
            (Text.assemble(("theorems ", "bold"), (f"{solved} of {total} solved", "bold green")), 0),
            (Text(f", {given_up} given up"), 2),
            (Text(f" · shown {len(shown_n)} of {total} ({without_controls(filters)})" if filters else ""), 1),
            (Text(f" · sort {self.sort_key}{' ↑' if self.sort_reverse else ''}" if self.sort_key != "order"
                  or self.sort_reverse else ""), 3),
            (Text(" · recorded summary" if figures.recorded else " · live", "dim"), 4),
        ]
        self.query_one("#th-title", Static).update(fit_line(parts, width))

    def _draw_detail(self) -> None:
        key = self.query_one("#th-rows", LineTable).cursor_key
        row = self.rows.get(key) if key else None
        width = max(10, self.size.width - 2)
        if row is None:
            self.query_one("#th-detail", Static).update("")
            return
        head = Text.assemble((without_controls(row.name), "bold"), f" ({without_controls(row.difficulty)}): ")
        if row.state == SOLVED:
            parts: list[Part] = [
                (head, 0), (Text(f"solved by {row.solved_by}", "green"), 0),
                (Text(f" ({without_controls(row.solver or '?')})"), 3),
                (Text(f" at trial {row.solved_trial}" if row.solved_trial else ""), 2),
                (Text(f", {fmt_at(row.solved_at)} into the run" if row.solved_at is not None else ""), 2),
                (Text(f"; {row.attempts} attempt(s), {fmt_seconds(row.seconds, None)} s"), 1)]
        else:
            why = f" ({row.done.replace('_', ' ')})" if row.state == GIVEN_UP and row.done else ""
            parts = [(head, 0), (Text(row.state + why, STATE_STYLE.get(row.state, "")), 0),
                     (Text(f"; {row.attempts} attempt(s), {fmt_seconds(row.seconds, None)} s"), 1)]
            if row.last_error:
                error = Text(f"; {without_controls(row.last_error)}")
                error.truncate(max(1, width - sum(p.cell_len for p, _ in parts)), overflow="ellipsis")
                parts.append((error, 2))
        self.query_one("#th-detail", Static).update(fit_line(parts, width))

    @on(LineTable.Highlighted, "#th-rows")
    def _highlighted(self, message: LineTable.Highlighted) -> None:
        self._draw_detail()

    def on_resize(self) -> None:
        # a short screen keeps the table (the chart and the difficulty table need 9 rows); a narrow one drops the
        # chart first (the difficulty table's figures are whole in 46 columns)
        self.query_one("#th-bottom").display = self.size.height >= SHORT_BELOW
        self.query_one("#th-chart").display = self.size.width >= NARROW_BELOW
        self._draw_title()
        self._draw_detail()

    # ------------------------------------------------------------------ keys

    def action_sort(self) -> None:
        self.sort_key = SORTS[(SORTS.index(self.sort_key) + 1) % len(SORTS)]
        self._refilter()

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._refilter()

    def action_status_filter(self) -> None:
        options: list[str | None] = [None, *STATES]
        self.state_filter = options[(options.index(self.state_filter) + 1) % len(options)]
        self._refilter()

    def action_search(self) -> None:
        box = self.query_one("#th-filter", Input)
        box.display = True
        box.value = self.text_filter
        box.focus()

    @on(Input.Submitted, "#th-filter")
    def _filter_submitted(self, message: Input.Submitted) -> None:
        self.text_filter = message.value.strip()
        message.input.display = False
        self.query_one("#th-rows", LineTable).focus()
        self._refilter()

    def action_clear_filters(self) -> None:
        self.state_filter, self.text_filter = None, ""
        self._refilter()

    def action_wall_time(self) -> None:
        chart = self.query_one("#th-chart", SolvedChart)
        chart.wall_time = not chart.wall_time
        chart.draw()

    @on(LineTable.Selected, "#th-rows")
    def _selected(self, message: LineTable.Selected) -> None:
        self.open_trial(message.key)

    def action_open_trial(self) -> None:
        key = self.query_one("#th-rows", LineTable).cursor_key
        if key is not None:
            self.open_trial(key)

    def open_trial(self, name: str) -> None:
        """The trial that proved ``name``, else its last attempt."""
        row = self.rows.get(name)
        trial = (row.solved_by or row.last_trial) if row is not None else None
        if trial is None or trial not in self.state.trials:
            self.notify(f"no trial of {without_controls(name)} yet", severity="warning")
            return
        self.post_message(OpenTrial(self.session, trial))

    def action_back(self) -> None:
        box = self.query_one("#th-filter", Input)
        if box.display:
            box.display = False
            self.query_one("#th-rows", LineTable).focus()
            return
        self.app.pop_screen()
