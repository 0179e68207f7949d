"""The timeline: the run's orders and decisions as a log, live, with a verify badge (in the spirit of toolong).

``E`` on the dashboard (or "Timeline" in the command palette). One row per event that a person or the
harness decided: orders (``run.control``, ``agent.steer``, people's blackboard posts), reviews, promotions
and confirmations, audit findings and dismissals, training sessions and checkpoints, the run's start,
resumes, end and harness notes (tui/widgets/timeline.py ``KINDS``): time, actor, kind, the trial it
concerns and a one-line summary (cut at a word, never inside a number); the highlighted row's seq,
timestamp and whole summary on the line under the table. Rows are in log order and
the table follows the newest (``End`` follows again after moving away).

Where the rows come from: at open a worker reads the log up to the byte the dashboard's model had reached,
a block at a time (the reader's own line parser, agent turns left unparsed), and posts its rows as it goes;
after that, the events the dashboard's tail folds come to :meth:`TimelineScreen.run_changed` (whether the
screen is shown or not) and only the new rows are added, so a run of thousands of events costs one pass.
Nothing here writes.

The badge in the title: the head record checked against the log in a background worker (at open the whole
chain too, for a log under 4 MiB), then again each time the log's size or the head record changes (at
most once a second): ``✔ chain ok``, ``✘ tail cut``, ``✘ tail changed``, ``… checking``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from rrma.log.codec import LogEvent
from rrma.log.head import log_stamp
from tui.messages import OpenTrial
from tui.screens.base import RunScreen, shown
from tui.session import RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable, column_layout
from tui.widgets.timeline import GROUPS, Badge, Entry, check_log, entry_of, scan_entries
from tui.widgets.trial_text import Part, fit_line

COLUMNS = [  # the seq is on the line under the table (and in the filter's haystack): the summary needs the cells
    Column("time", "time", 8), Column("actor", "actor", 12, drop=2), Column("kind", "kind", 16),
    Column("trial", "trial", 7, drop=1), Column("summary", "summary", 0),
]
SUMMARY = len(COLUMNS) - 1
CHECK_INTERVAL = 1.0  # seconds between looks at the log's size and head record (the badge's throttle)
BADGE_STYLE = {"ok": "bold green", "running": "yellow", "none": "yellow", "cut": "bold red", "changed": "bold red",
               "error": "bold red"}
BADGE_MARK = {"ok": "✔", "running": "…", "none": "?", "cut": "✘", "changed": "✘", "error": "✘"}


def fit_words(text: str, cells: int | None) -> str:
    """``text`` cut at a word boundary to fit ``cells``, ending in ``…``: a number is shown whole or not at all
    (the line under the table shows the highlighted row's summary in full)."""
    if cells is None or len(text) <= cells:
        return text
    cut = text.rfind(" ", 0, cells - 1)  # the cut text, a space and the ellipsis fit
    return text[:cut] + " …" if cut > 0 else "…"


class TimelineScreen(RunScreen):
    BINDINGS = [
        Binding("enter", "open_trial", "Trial"),
        Binding("f", "status_filter", "Kind"),
        Binding("slash", "search", "Filter"),
        Binding("c", "clear_filters", "Clear filters", show=False),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    TimelineScreen #tl-top { height: 1; background: $boost; }
    TimelineScreen #tl-title { width: 1fr; height: 1; padding: 0 1; }
    TimelineScreen #tl-badge { width: auto; height: 1; padding: 0 1; }
    TimelineScreen #tl-filter { height: 3; }
    TimelineScreen #tl-rows { height: 1fr; border: round $primary-background; }
    TimelineScreen #tl-rows:focus { border: round $accent; }
    TimelineScreen #tl-detail { height: 3; padding: 0 1; }
    """

    @dataclass
    class Rows(Message):
        """Rows the opening scan read (in log order); ``done`` with the last batch."""

        entries: list[Entry]
        done: bool

    @dataclass
    class Checked(Message):
        """The verify badge's latest verdict."""

        badge: Badge

    def __init__(self, session: RunSession) -> None:
        super().__init__(session)
        self.entries: dict[str, Entry] = {}  # str(seq) -> row, in log order
        self.last_seq = -1
        self.kind_filter: str | None = None  # a group of GROUPS
        self.text_filter = ""
        self.scanning = False
        self.scanned = False
        self._early: list[Entry] = []  # rows folded live while the opening scan runs
        self.badge = Badge("running", "checking")
        self._looked: tuple[int, int, int] | None = None  # (log size, log mtime, head mtime) last checked
        self._checked_at = 0.0
        self._checking = False
        self._layout_width = -1
        self._refused: dict[int, str] = {}
        self._refused_count = 0
        self._summary_width: int | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="tl-top"):
            yield Static("", id="tl-title")
            yield Static("", id="tl-badge")
        yield Input(placeholder="filter text (actor, kind, summary, trial); Enter applies, Esc closes", id="tl-filter")
        yield LineTable(COLUMNS, self._row, id="tl-rows", select_label="Trial")
        yield Static("", id="tl-detail")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#tl-filter").display = False
        table = self.query_one("#tl-rows", LineTable)
        table.border_title = "timeline"
        table.border_subtitle = "⏎ its trial · f kind · / filter · c clear"  # the next step, under the table
        table.live_end = "bottom"
        table.focus()
        self._draw_badge()
        self._start_scan()
        self.set_interval(CHECK_INTERVAL, self._look)
        self._look()

    # ------------------------------------------------------------------ rows

    def _start_scan(self) -> None:
        if self.scanning or self.scanned or not self.session.loaded:
            return
        assert self.session.model is not None
        self.scanning = True
        self._scan(self.session.model.offset)
        self._draw_title()

    @work(thread=True, exclusive=True, group="tail", exit_on_error=False)
    def _scan(self, limit: int) -> None:
        worker = get_current_worker()
        for rows in scan_entries(self.session.run_dir, limit, lambda: worker.is_cancelled):
            if rows:
                self.post_message(self.Rows(rows, False))
        if not worker.is_cancelled:
            self.post_message(self.Rows([], True))

    @on(Rows)
    def _rows(self, message: Rows) -> None:
        added = self._add(message.entries)
        if message.done:
            self.scanning, self.scanned = False, True
            added += self._add(self._early)
            self._early = []
        if added or message.done:
            self._show(added)

    def _add(self, entries: list[Entry]) -> list[Entry]:
        """Add the rows not yet held (by seq: the scan and the live tail may both bring an event)."""
        added = []
        for entry in entries:
            if entry.seq > self.last_seq:
                self.entries[str(entry.seq)] = entry
                self.last_seq = entry.seq
                added.append(entry)
        return added

    def run_changed(self, events: list[LogEvent]) -> None:
        """Every folded event comes here, shown or not (a screen above must not lose rows): only new rows are built."""
        if not self.session.loaded:
            return
        if not self.scanned:
            if not events:
                self._start_scan()
            else:
                self._early.extend(e for ev in events if (e := entry_of(ev)) is not None)
            return
        added = self._add([e for ev in events if (e := entry_of(ev)) is not None])
        if added:
            if shown(self) and self.is_mounted:
                self._show(added)
            else:
                self._stale = True
        self._look()

    def refresh_view(self, events: list[LogEvent]) -> None:
        self._refilter()

    def _matches(self, entry: Entry) -> bool:
        if self.kind_filter is not None and entry.group != self.kind_filter:
            return False
        return not self.text_filter or self.text_filter.lower() in entry.haystack()

    def _show(self, added: list[Entry]) -> None:
        """Append the new rows that pass the filters (the rows already shown are not looked at again)."""
        if not self.is_mounted:
            return
        table = self.query_one("#tl-rows", LineTable)
        new = [str(e.seq) for e in added if self._matches(e)]
        if new or not table.rows:
            table.set_rows([*table.rows, *new])
        self._draw_title()
        self._draw_detail()

    def _refilter(self) -> None:
        if not self.is_mounted:
            return
        keys = [k for k, e in self.entries.items() if self._matches(e)]
        self.query_one("#tl-rows", LineTable).set_rows(keys)
        self._draw_title()
        self._draw_detail()

    def _row(self, key: str) -> list[str | Text]:
        e = self.entries.get(key)
        if e is None:
            return [key]
        actor = Text(e.actor, "bold magenta" if e.actor.startswith("human:") else "")
        if e.seq in self.refused():  # the fold did not count it (verify reports it): say so before anything else
            summary = fit_words(f"✗ not counted: {e.summary}", self._summary_cells())
            return [e.ts[11:19], actor, Text(e.kind, "strike"), e.trial_id or "", Text(summary, "red")]
        return [e.ts[11:19], actor, e.kind, e.trial_id or "", fit_words(e.summary, self._summary_cells())]

    def refused(self) -> dict[int, str]:
        """seq -> why, of the events the fold did not count (RunState.refused; kept until that list grows)."""
        found = self.state.refused
        if len(found) != self._refused_count:
            self._refused_count = len(found)
            self._refused = {r["seq"]: str(r["why"]) for r in found}
        return self._refused

    def _summary_cells(self) -> int | None:
        """The summary column's cells at the table's width (None: left out)."""
        table = self.query_one("#tl-rows", LineTable)
        width = table.scrollable_content_region.width
        if width != self._layout_width:
            self._layout_width = width
            self._summary_width = dict(column_layout(COLUMNS, width)).get(SUMMARY)
        return self._summary_width

    # ------------------------------------------------------------------ drawing

    def _draw_title(self) -> None:
        if not self.is_mounted:
            return
        table = self.query_one("#tl-rows", LineTable)
        shown_n, total = len(table.rows), len(self.entries)
        parts: list[Part] = [(Text("timeline", "bold"), 0), (Text(f" {self.session.run_dir.name}", "dim"), 3),
                             (Text(f" · {shown_n:,} of {total:,}"), 0)]
        if self.scanning:
            parts.append((Text(" · reading the log…", "yellow"), 0))
        parts.append((Text(f" · kind {self.kind_filter or 'all'}"), 1))
        if self.text_filter:
            parts.append((Text(f" · text {self.text_filter!r}"), 2))
        title = self.query_one("#tl-title", Static)
        title.update(fit_line(parts, title.content_region.width or self.app.size.width - 24))

    def _draw_badge(self) -> None:
        if not self.is_mounted:
            return
        b = self.badge
        self.query_one("#tl-badge", Static).update(Text(f"{BADGE_MARK[b.verdict]} {b.text}", BADGE_STYLE[b.verdict]))

    def _draw_detail(self) -> None:
        table = self.query_one("#tl-rows", LineTable)
        e = self.entries.get(table.cursor_key or "")
        text = Text()
        if e is not None:
            text.append(f"seq {e.seq}  {e.ts}  ", "dim")
            text.append(e.actor, "bold")
            text.append(f"  {e.kind}" + (f"  {e.trial_id}" if e.trial_id else "") + "\n")
            why = self.refused().get(e.seq)
            if why is not None:
                text.append(f"not counted: {why}; ", "bold red")
            text.append(e.summary)
        elif not self.entries and not self.scanning:
            text.append("no orders, reviews, promotions or findings in this run yet", "dim")
        self.query_one("#tl-detail", Static).update(text)

    @on(LineTable.Highlighted, "#tl-rows")
    def _highlighted(self, message: LineTable.Highlighted) -> None:
        self._draw_detail()

    @on(LineTable.FollowChanged, "#tl-rows")
    def _follow_changed(self, message: LineTable.FollowChanged) -> None:
        message.table.border_title = "timeline · following" if message.following else "timeline"

    def on_resize(self) -> None:
        if self.is_mounted:
            self.call_after_refresh(self._draw_title)

    # ------------------------------------------------------------------ the verify badge

    def _look(self) -> None:
        """Check again when the log or its head record changed (a grown log, a cut one), at most once a second."""
        if self._checking or (time.monotonic() - self._checked_at < CHECK_INTERVAL and self._looked is not None):
            return
        run_dir = self.session.run_dir
        mark = log_stamp(run_dir)
        if mark == self._looked:
            return
        first = self._looked is None
        self._looked, self._checking = mark, True
        self._check(first)

    @work(thread=True, exclusive=True, group="verify", exit_on_error=False)
    def _check(self, full: bool) -> None:
        try:
            badge = check_log(self.session.run_dir, full=full)
        except Exception as exc:  # a check that fails is a badge that says so, never a failed screen
            badge = Badge("error", "cannot check", f"{type(exc).__name__}: {exc}")
        self.post_message(self.Checked(badge))

    @on(Checked)
    def _checked(self, message: Checked) -> None:
        was = self.badge.verdict
        self.badge, self._checking, self._checked_at = message.badge, False, time.monotonic()
        self._draw_badge()
        if message.badge.verdict in ("cut", "changed", "error") and was != message.badge.verdict:
            self.notify(message.badge.detail, title=f"verify: {message.badge.text}", severity="error", timeout=15)

    # ------------------------------------------------------------------ keys

    def action_status_filter(self) -> None:
        i = GROUPS.index(self.kind_filter) if self.kind_filter in GROUPS else 0
        self.kind_filter = GROUPS[(i + 1) % len(GROUPS)]
        self._refilter()

    def action_search(self) -> None:
        box = self.query_one("#tl-filter", Input)
        box.display = True
        box.value = self.text_filter
        box.focus()

    @on(Input.Submitted, "#tl-filter")
    def _filter_submitted(self, message: Input.Submitted) -> None:
        self.text_filter = message.value.strip()
        message.input.display = False
        self.query_one("#tl-rows", LineTable).focus()
        self._refilter()

    def action_clear_filters(self) -> None:
        self.kind_filter, self.text_filter = None, ""
        self._refilter()

    @on(LineTable.Selected, "#tl-rows")
    def _selected(self, message: LineTable.Selected) -> None:
        self.open_trial(message.key)

    def action_open_trial(self) -> None:
        key = self.query_one("#tl-rows", LineTable).cursor_key
        if key is not None:
            self.open_trial(key)

    def open_trial(self, key: str) -> None:
        entry = self.entries.get(key)
        if entry is None or not entry.trial_id:
            self.notify("this row names no trial", severity="warning")
            return
        if entry.trial_id not in self.state.trials:
            self.notify(f"{entry.trial_id} is not a trial of this run", severity="warning")
            return
        self.post_message(OpenTrial(self.session, entry.trial_id))

    def action_back(self) -> None:
        box = self.query_one("#tl-filter", Input)
        if box.display:
            box.display = False
            self.query_one("#tl-rows", LineTable).focus()
            return
        self.app.pop_screen()
