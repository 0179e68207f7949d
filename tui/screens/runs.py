"""The runs list: every run under the runs directory, newest first, summarised in a worker.

A run that cannot be read at all is a row saying why (status ``unreadable``); one with lines
that are not valid events is marked ``⚠`` (its dashboard says how many and where). A run whose
log says it is running but that no process drives (its driver crashed or was killed) is
``stopped``; the check is repeated on every scan, as it can change without the log changing.

Each row says whether its log verifies (the ``log`` column: rrma/log/chain.py :func:`log_integrity`, the one
rule every view shows): ``✔ chain`` (every hash checked, a log up to 4 MiB), ``✔ head`` (a longer log: its end
against the head record), ``✘ cut`` / ``✘ changed`` / ``✘ broken`` / ``✘ no head`` / ``✘ unreadable`` (what
``rrma-tui verify`` reports as an error), ``⚠ torn`` (a crash mid-write), ``· old`` (written before head records).
The check runs in the scan's worker, again only when the log or its head record changes (size, mtime): the head
record (one line) of every run before its row is filled, so the rows fill as fast as without it, the whole chain
of a small log (up to 256 KiB) with it, and of the others up to 4 MiB once every row is filled (``✔ head`` turns
``✔ chain``).

The best column leads with the Δσ (against the baseline, in its σ; whole sigmas from 100 on), so it survives 80
columns; a proof run's row gives its progress against all of its theorems instead (``9/30 solved · 1 open · 20
queued · 0 given up ▶ pair_eq``, the theorem worked on now last; rrma/log/theorems.py).

Two runs are compared (tui/screens/run_compare.py) by marking one with space (``●`` before its name; space
again, or on another run, moves or clears the mark) and pressing ``=`` on the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from rrma.log.chain import CHAIN_CHECK_BYTES, LogIntegrity, log_integrity
from rrma.log.control import live_driver
from rrma.log.head import log_stamp
from rrma.log.layout import EVENTS
from rrma.log.reader import find_runs, read_summary
from rrma.log.store import check_first_event, check_readable
from rrma.log.summary import ListedRun
from tui.dialogs import NewRunScreen
from tui.durations import age, utcnow
from tui.messages import OpenRun, OpenRunCompare, StartRun
from tui.screens.base import WorkerScreen, failure_line, shown
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable, column_layout
from tui.widgets.run_header import progress_parts
from tui.widgets.trial_text import fit_line, fmt_sigma

RUN_COLUMNS = [
    Column("name", "run", 30), Column("task", "task", 14, drop=4), Column("status", "status", 11),
    Column("log", "log", 9), Column("trials", "trials", 6, "right", drop=2), Column("age", "age", 8, "right", drop=3),
    Column("sigma", "Δσ", 7, "right"), Column("best", "best", 0),  # "2.378 vs 2.398" (the baseline), or "9/30 solved · …"
]
RUNS_HINT = "⏎ open · space mark · = compare with the marked · ctrl+n new run"
SIGMA_CELLS = 7  # the Δσ column: +2028σ, +15.0σ, +1.2e5σ
INLINE_CHAIN_BYTES = 256 << 10  # a log up to this size has its chain checked before its row is filled (~15 ms)
LOG_CELLS: dict[str, tuple[str, str]] = {  # LogIntegrity.verdict -> the log column's cell and its style
    "ok": ("✔ chain", "green"), "torn": ("⚠ torn", "yellow"), "old": ("· old", "dim"),
    "cut": ("✘ cut", "bold red"), "changed": ("✘ changed", "bold red"), "broken": ("✘ broken", "bold red"),
    "missing": ("✘ no head", "bold red"), "unreadable": ("✘ unread", "bold red")}


def log_cell(integrity: LogIntegrity | None) -> Text:
    """The log column: what :func:`rrma.log.chain.log_integrity` found, in a few cells (``…`` until it has)."""
    if integrity is None:
        return Text("…", "dim")
    text, style = LOG_CELLS[integrity.verdict]
    if integrity.verdict == "ok" and not integrity.chain_checked:
        text = "✔ head"
    return Text(text, style)


ENDED_EARLY = {"stopped": "stopped", "interrupted": "interrupted", "error": "error", "baseline_failed": "failed"}


def shown_status(summary: ListedRun) -> str:
    """The status column: a run that ended before its budget or goal says how (``stopped`` by an order,
    ``interrupted``, ``error``, ``failed``: its baseline did), not ``finished`` like a completed run; a run
    whose log says running but that no process drives is ``stopped`` too (both are resumable)."""
    if summary.status == "finished":
        return ENDED_EARLY.get(summary.reason, "finished")
    return summary.status


class RunsScreen(WorkerScreen):
    BINDINGS = [
        Binding("enter", "open_run", "Open run"),
        Binding("ctrl+n", "new_run", "New run"),
        Binding("ctrl+r", "rescan", "Refresh", show=False),
        Binding("space", "toggle_select", "Mark to compare", show=False),
        Binding("equals_sign", "compare_runs", "Compare with the marked run", key_display="=", show=False),
    ]

    @dataclass
    class Summarized(Message):
        """One run's summary is ready."""

        summary: ListedRun

    @dataclass
    class Verified(Message):
        """One run's log was checked (rrma/log/chain.py log_integrity) at ``stamp`` (rrma/log/head.py log_stamp)."""

        name: str
        stamp: tuple[int, int, int]
        integrity: LogIntegrity

    @dataclass
    class ScanDone(Message):
        runs: list[Path]

    def __init__(self, runs_dir: Path, *, scan_now: bool = True, clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__()
        self.runs_dir = Path(runs_dir)
        self.clock = clock  # what "now" is for the age column (a fixed clock in tests)
        self.scan_now = scan_now  # False when a run opens on top: scan when first shown
        self.summaries: dict[str, ListedRun] = {}
        self.order: list[str] = []
        self._sizes: dict[str, int] = {}  # log size each summary was made at
        self.integrity: dict[str, tuple[tuple[int, int, int], LogIntegrity]] = {}  # the worker's: (log stamp, check)
        self.verdicts: dict[str, LogIntegrity] = {}  # run -> its log's check, as the rows show it (the UI thread's)
        self._resumed = False
        self.marked: str | None = None  # the run space marked: = compares the highlighted run with it

    def compose(self) -> ComposeResult:
        yield Static("", id="runs-title")
        yield LineTable(RUN_COLUMNS, self._row, id="runs", select_label="Open run")
        yield Static(Text(RUNS_HINT, "dim"), id="runs-hint", classes="table-hint")  # the next step, under the table
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#runs").focus()
        self._title()
        if self.scan_now:
            self.rescan()
        self.set_interval(5.0, self._rescan_if_shown)

    def _rescan_if_shown(self) -> None:
        if shown(self):  # not is_current: Textual counts the screen under a full-screen one as current
            self.rescan()

    def on_screen_resume(self) -> None:
        if self.scan_now or self._resumed:  # not when a run opens straight away on top of it
            self.rescan()
        self._resumed = True

    def _title(self) -> None:
        damaged = sum(1 for name in self.order if name in self.summaries and self.summaries[name].torn)
        failing = sum(1 for name in self.order if (v := self.verdicts.get(name)) is not None and v.fails)
        mark = (Text.assemble((f"● {self.marked}", "bold"), " marked: = compares the highlighted run with it   ")
                if self.marked is not None else "")
        self.query_one("#runs-title", Static).update(Text.assemble(  # what needs a look first: the path is long
            mark, ("runs ", "bold"), (f"✘ {failing} failing verify  ", "bold red") if failing else "",
            (f"⚠ {damaged} with unreadable lines  ", "red") if damaged else "", str(self.runs_dir),
            (f"  {len(self.order)} run(s)", "dim"), ("   Enter opens a run, ctrl+n starts one", "dim"),
        ))

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def rescan(self) -> None:
        worker = get_current_worker()
        runs = find_runs(self.runs_dir)
        self.post_message(self.ScanDone(runs))
        for run_dir in runs:
            if worker.is_cancelled:
                return
            self._verify(run_dir, first_pass=True)  # before its summary: a cut log never shows as a plain "stopped" row
            try:
                size = (run_dir / EVENTS).stat().st_size
                known = self.summaries.get(run_dir.name)
                if self._sizes.get(run_dir.name) == size and known is not None:
                    # unchanged since the last summary; only whether a "running" run still has a driver can change
                    if known.status in ("running", "stopped"):
                        status = "running" if live_driver(run_dir) is not None else "stopped"
                        if status != known.status:
                            self.post_message(self.Summarized(replace(known, status=status)))
                    continue
                check_readable(run_dir, log=False)  # file types, then the first event: cheap, no read of the log
                check_first_event(run_dir)  # no readable first event: unreadable, not an empty run loading forever
                summary = read_summary(run_dir)
                summary.size = size
                if summary.status == "running" and live_driver(run_dir) is None:
                    summary.status = "stopped"  # its log says running, but no process drives it (a crash, kill -9)
            except Exception as exc:  # one run that cannot be read says why in its row (read again next scan)
                summary = ListedRun(run_dir, run_dir.name, "?", "unreadable", 0, None, None, None, "minimize", "", "",
                                     error=failure_line(exc).removeprefix(f"{run_dir / EVENTS}: "))
            self.post_message(self.Summarized(summary))
        for run_dir in runs:  # every row is filled: now the whole chains the first pass left to the head record
            if worker.is_cancelled:
                return
            self._verify(run_dir, first_pass=False)

    def _verify(self, run_dir: Path, *, first_pass: bool) -> None:
        """Check the run's log (rrma/log/chain.py log_integrity) unless neither it nor its head record changed since
        its last whole check. The first pass (before the run's row is filled) checks a log up to INLINE_CHAIN_BYTES
        whole and the head record of a longer one: one line, so the rows fill as fast as without it; the second (after
        every row) checks the whole chain of the logs up to CHAIN_CHECK_BYTES that the first did not. In the worker."""
        stamp = log_stamp(run_dir)
        known = self.integrity.get(run_dir.name)
        if known is not None and known[0] == stamp and (known[1].chain_checked or stamp[0] > CHAIN_CHECK_BYTES):
            return
        if not first_pass and stamp[0] > CHAIN_CHECK_BYTES:
            return  # a longer log's head record is all there is to check here
        chain_bytes = INLINE_CHAIN_BYTES if first_pass else CHAIN_CHECK_BYTES
        try:
            integrity = log_integrity(run_dir, chain_bytes=chain_bytes)
        except Exception as exc:  # a check that fails says so in the row, never fails the scan
            integrity = LogIntegrity("unreadable", "cannot check", failure_line(exc))
        self.integrity[run_dir.name] = (stamp, integrity)  # read on the UI thread only through Verified
        self.post_message(self.Verified(run_dir.name, stamp, integrity))

    @on(ScanDone)
    def _scan_done(self, message: ScanDone) -> None:
        self.order = [p.name for p in message.runs]
        if self.marked is not None and self.marked not in self.order:
            self.marked = None  # removed since it was marked
        for name in self.order:
            self.summaries.setdefault(name, ListedRun(self.runs_dir / name, name, "", "reading…", 0, None, None, None,
                                                       "minimize", "", ""))
        self.query_one("#runs", LineTable).set_rows(list(self.order))
        self._title()

    @on(Summarized)
    def _summarized(self, message: Summarized) -> None:
        self.summaries[message.summary.name] = message.summary
        self._sizes[message.summary.name] = message.summary.size
        self.query_one("#runs", LineTable).refresh_rows()
        if message.summary.torn:
            self._title()

    @on(Verified)
    def _verified(self, message: Verified) -> None:
        was = self.verdicts.get(message.name)
        self.verdicts[message.name] = message.integrity
        self.query_one("#runs", LineTable).refresh_rows()
        if was is None or was.fails != message.integrity.fails:
            self._title()

    def _row(self, name: str) -> list[str | Text]:
        s = self.summaries[name]
        shown = shown_status(s)
        style = {"finished": "green", "running": "yellow", "stopped": "red", "interrupted": "red", "error": "bold red",
                 "failed": "bold red", "unreadable": "bold red"}.get(shown, "dim")
        status = Text(shown, style)
        if s.torn:
            status.append(" ⚠", "bold red")
        now = self.clock()
        best: str | Text
        if s.error:
            best = Text(s.error, "red")
        elif s.proofs is not None:  # the least needed parts left out where the column is narrow (80 columns)
            cells = self._best_cells()
            best = fit_line(progress_parts(s.proofs), cells)
            if best.cell_len > cells:  # "1/10 solved" itself too long: "1/10"
                best = Text(f"{s.proofs['solved']}/{s.proofs['total']}", "bold green")
        else:  # the best and the baseline where both fit whole, else the best alone: no number cut at the edge
            best = s.best_vs_baseline
            if len(best) > self._best_cells() and s.best is not None:
                best = f"{s.best:.4g}"
        mark = f"● {s.name}" if name == self.marked else s.name
        return [mark, s.task, status, log_cell(self.verdicts.get(name)),
                "-" if s.status == "unreadable" else str(s.trials), age(s.last_ts, now),
                fmt_sigma(s.delta_sigma, SIGMA_CELLS) or "-", best]

    def _best_cells(self) -> int:
        """The cells the best column has at the table's width now (the last column takes what is left)."""
        table = self.query_one("#runs", LineTable)
        layout = column_layout(RUN_COLUMNS, table.scrollable_content_region.width - table.mark_cells)
        return next((cells for i, cells in layout if RUN_COLUMNS[i].key == "best"), 0)

    @on(LineTable.Selected, "#runs")
    def _selected(self, message: LineTable.Selected) -> None:
        self._open(message.key)

    def action_open_run(self) -> None:
        key = self.query_one("#runs", LineTable).cursor_key
        if key is not None:
            self._open(key)

    def _open(self, name: str) -> None:
        run_dir = self.runs_dir / name
        if not (run_dir / EVENTS).is_file():  # removed (or moved) since the list was read
            self.notify(f"{run_dir}: not a run directory any more (no {EVENTS})", severity="error")
            self.rescan()
            return
        self.post_message(OpenRun(run_dir))

    def action_new_run(self) -> None:
        def chosen(answer: tuple[list[str], str] | None) -> None:
            if answer is not None:
                self.post_message(StartRun(*answer))

        self.app.push_screen(NewRunScreen(self.runs_dir), chosen)

    # ------------------------------------------------------------------ comparing two runs

    def action_toggle_select(self) -> None:
        """Mark the highlighted run (the one ``=`` compares others with), or clear the mark if it is this one."""
        key = self.query_one("#runs", LineTable).cursor_key
        if key is None:
            return
        self.marked = None if self.marked == key else key
        self.query_one("#runs", LineTable).refresh_rows()
        self._title()

    def action_compare_runs(self) -> None:
        """Compare the highlighted run with the marked one (marked: A, on the left; highlighted: B)."""
        key = self.query_one("#runs", LineTable).cursor_key
        if key is None:
            return
        if self.marked is None:
            self.notify("no run marked: press space on a run, then = on the run to compare it with",
                        severity="warning")
            return
        if key == self.marked:
            self.notify(f"{key} is the marked run: highlight another run to compare it with", severity="warning")
            return
        for name in (self.marked, key):
            summary = self.summaries.get(name)
            run_dir = self.runs_dir / name
            if summary is not None and summary.status == "unreadable":
                self.notify(f"{name} cannot be read: {summary.error}", severity="error")
                return
            if not (run_dir / EVENTS).is_file():
                self.notify(f"{run_dir}: not a run directory any more (no {EVENTS})", severity="error")
                self.rescan()
                return
        self.post_message(OpenRunCompare(self.runs_dir / self.marked, self.runs_dir / key))
