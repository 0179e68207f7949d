"""Compare two trials: both summaries side by side, the diff of their workspaces, their proofs.

Screens ask for it with :class:`tui.messages.OpenCompare`, which the app answers with
:func:`compare_with_best` (a trial against the current best) or :func:`pick_and_compare` (asks for
the other trial's id in :class:`tui.dialogs.ComparePickScreen`); ``CompareScreen(session, left, right)``
opens any pair. The diff reads as "from left to right": ``-`` lines are the left trial's, ``+`` lines
the right's.

The diff is computed by rrma/diff.py in a thread worker, so the screen answers keys meanwhile, and
drawn by :class:`tui.widgets.diff_view.DiffView`, unified or side by side (``B``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static
from textual.worker import get_current_worker

from rrma.diff import TrialComparison, TrialFiles, compare_trials
from rrma.log.codec import LogEvent
from rrma.log.state import RunState, TrialRecord
from tui.dialogs import ComparePickScreen, best_trial_id
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.widgets.diff_view import DiffView
from tui.widgets.footer import KeysFooter
from tui.widgets.side_diff import SideRow, rows_from_unified
from tui.widgets.trial_text import REVIEW_GLYPH, best_marker, fmt_score, fmt_sigma, glyph, is_claim

HYPOTHESIS_CHARS = 400  # the summary cuts a longer hypothesis


def relation_text(state: RunState, left: str, right: str) -> Text:
    """How two trials are related in the lineage: one descends from the other, or their common ancestor."""
    up_left = [rec.trial_id for rec in state.lineage(left)]
    up_right = [rec.trial_id for rec in state.lineage(right)]
    if left in up_right:
        return Text(f"{right} descends from {left} ({up_right.index(left)} generation(s))")
    if right in up_left:
        return Text(f"{left} descends from {right} ({up_left.index(right)} generation(s))")
    seen = set(up_left)
    common = next((tid for tid in up_right if tid in seen), None)
    if common is None:
        return Text("no common ancestor", "dim")
    return Text(f"common ancestor {common} ({left}: {up_left.index(common)} generation(s) down, "
                f"{right}: {up_right.index(common)})")


def _review_cell(rec: TrialRecord) -> Text:
    if rec.review_status != "unreviewed":
        label, style = REVIEW_GLYPH.get(rec.review_status, (rec.review_status, ""))
        return Text(f"{label} by {rec.reviews[-1]['reviewer']}", style)
    if rec.held:
        return Text("held for review (a high audit finding)", "bold red")
    return Text("awaiting review (held by the hitl gate)", "yellow") if is_claim(rec) else Text("unreviewed", "dim")


def summary_table(state: RunState, left: TrialRecord, right: TrialRecord) -> Table:
    """The two trials' summaries, one column each."""
    table = Table(box=None, expand=True, show_header=True, header_style="bold", pad_edge=False)
    table.add_column("", style="dim", no_wrap=True, width=12)
    for rec, side in ((left, "left, − lines"), (right, "right, + lines")):
        table.add_column(Text.assemble(best_marker(state, rec), rec.trial_id, (f"  ({side})", "dim")), ratio=1)

    def sigma(rec: TrialRecord) -> str:
        return fmt_sigma(state.delta_sigma_of(rec.score) if rec.status == "ok" else None) or "-"

    def status(rec: TrialRecord) -> Text:
        return Text.assemble(glyph(rec.status), f" {rec.status}")

    def hypothesis(rec: TrialRecord) -> str:
        text = rec.hypothesis.strip() or "(none)"
        return text if len(text) <= HYPOTHESIS_CHARS else text[: HYPOTHESIS_CHARS - 1] + "…"

    rows: list[tuple[str, Callable[[TrialRecord], str | Text]]] = [
        ("agent", lambda r: r.agent),
        ("status", status),
        ("score", lambda r: Text(fmt_score(r.score), "bold")),
        ("vs baseline", sigma),
        ("parent", lambda r: r.parent or "- (a baseline)"),
        ("seconds", lambda r: f"{r.seconds:.1f}" if r.finished else "-"),
        ("review", _review_cell),
        ("hypothesis", hypothesis),
    ]
    if left.theorem or right.theorem:
        rows.append(("theorem", lambda r: r.theorem or "-"))
    for label, cell in rows:
        table.add_row(label, cell(left), cell(right))
    return table


def difference_text(state: RunState, left: TrialRecord, right: TrialRecord) -> Text:
    """Right's score against left's, in the metric's direction and in baseline σ."""
    text = Text()
    text.append(relation_text(state, left.trial_id, right.trial_id))
    if left.score is None or right.score is None:
        return text
    gain = state.better(right.score, left.score)  # > 0: right is better
    text.append(f"\n{right.trial_id} vs {left.trial_id}: {right.score - left.score:+.5g}")
    if state.sigma:
        text.append(f" ({gain / state.sigma:+.1f}σ)")
    verdict = ("better", "green") if gain > 0 else (("worse", "red") if gain < 0 else ("the same score", "dim"))
    text.append(f" {verdict[0]}", verdict[1])
    return text


class CompareScreen(RunScreen):
    """Two trials side by side and the diff from ``left`` to ``right``; ``o`` swaps them, ``}``/``{`` step files."""

    DEFAULT_CSS = """
    CompareScreen #compare-title, CompareScreen #compare-diff-title { height: 1; padding: 0 1; background: $boost; }
    CompareScreen #compare-summary-box { height: auto; max-height: 50%; padding: 0 1; }
    CompareScreen #compare-verdict { height: auto; padding: 0 1; }
    CompareScreen #compare-diff { border: round $primary-background; }
    CompareScreen #compare-diff:focus { border: round $accent; }
    """
    BINDINGS = [
        Binding("o", "swap", "Swap sides"),  # s sorts elsewhere; o: the other side
        Binding("right_curly_bracket", "file(1)", "Next file", key_display="}"),
        Binding("left_curly_bracket", "file(-1)", "Previous file", key_display="{"),
        Binding("B", "side_by_side", "Diff: side by side / unified"),  # B: both trials beside each other
        Binding("escape", "back", "Back"),
    ]

    @dataclass
    class DiffReady(Message):
        """The worker finished the diff of ``left`` -> ``right``."""

        left: str
        right: str
        comparison: TrialComparison

    def __init__(self, session: RunSession, left: str, right: str) -> None:
        super().__init__(session)
        self.left = left
        self.right = right
        self.comparison: TrialComparison | None = None  # the diff shown, once computed
        self._cache: dict[tuple[str, str], TrialComparison] = {}  # the last two diffs (swap back is free)
        self._waiting = False  # a trial was not in the run when the diff was asked for
        self.side_by_side = False  # the diff in two columns (B), else unified
        self._side: tuple[TrialComparison, list[SideRow]] | None = None  # the rows of the comparison last split

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        with VerticalScroll(id="compare-summary-box"):
            yield Static("", id="compare-summary")
        yield Static("", id="compare-verdict")  # out of the summary's scroll: always on screen
        yield Static("", id="compare-diff-title")
        yield DiffView(id="compare-diff")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DiffView).focus()
        self.start_diff()
        self.refresh_view([])

    @property
    def computing(self) -> bool:
        """A diff worker is running for the trials shown."""
        return any(w.node is self and w.group == "compare" and not w.is_finished for w in self.workers)

    def refresh_view(self, events: list[LogEvent]) -> None:
        ids = {self.left, self.right}
        if events and not any(getattr(e.data, "trial_id", None) in ids or e.kind == "trial.promoted" for e in events):
            return
        self.query_one("#compare-title", Static).update(self._title())
        state = self.state
        left, right = state.trials.get(self.left), state.trials.get(self.right)
        summary = self.query_one("#compare-summary", Static)
        verdict = self.query_one("#compare-verdict", Static)
        if left is None or right is None:
            missing = ", ".join(t for t in (self.left, self.right) if t not in state.trials)
            summary.update(Text(f"not in this run: {missing}", "red"))
            verdict.update("")
            return
        summary.update(summary_table(state, left, right))
        verdict.update(difference_text(state, left, right))
        if self._waiting:
            self.start_diff()  # the trial that was missing has arrived

    def _title(self) -> Text:
        """The trials, and how the diff reads: in full where it fits (a title is never cut at the edge)."""
        title = Text.assemble(("compare ", "dim"), (self.left, "bold"), ("  vs  ", "dim"), (self.right, "bold"))
        for note in ("   (the diff reads from the left trial to the right one)", "   (diff: left → right)"):
            if title.cell_len + len(note) <= self.app.size.width - 2:
                title.append(note, "dim")
                break
        return title

    def _diff_title(self, text: str | Text) -> None:
        self.query_one("#compare-diff-title", Static).update(text)

    def start_diff(self) -> None:
        """Show the cached diff of the trials shown, or start a worker on it."""
        key = (self.left, self.right)
        view = self.query_one(DiffView)
        if key in self._cache:
            self._show(self._cache[key])
            return
        left, right = self.state.trials.get(self.left), self.state.trials.get(self.right)
        self.comparison = None
        view.set_lines([])
        self._waiting = left is None or right is None or not self.session.loaded
        if left is None or right is None or not self.session.loaded:
            self._diff_title(Text("no diff: a trial is not in this run", "red"))
            return
        self._diff_title(Text.assemble(("diff ", "dim"), self.left, " → ", self.right, ("  computing…", "dim")))
        self._compute(self.session.run_dir, TrialFiles.of(left), TrialFiles.of(right))

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _compute(self, run_dir: Path, left: TrialFiles, right: TrialFiles) -> None:
        worker = get_current_worker()
        comparison = compare_trials(run_dir, left, right, cancelled=lambda: worker.is_cancelled)
        if not worker.is_cancelled:
            self.post_message(self.DiffReady(left.trial_id, right.trial_id, comparison))

    @on(DiffReady)
    def _diff_ready(self, message: DiffReady) -> None:
        self._cache = {k: v for k, v in self._cache.items() if k == (self.right, self.left)}
        self._cache[(message.left, message.right)] = message.comparison
        if (message.left, message.right) == (self.left, self.right):
            self._show(message.comparison)

    def _show(self, comparison: TrialComparison) -> None:
        self.comparison = comparison
        view = self.query_one(DiffView)
        if self.side_by_side:
            if self._side is None or self._side[0] is not comparison:
                self._side = (comparison, rows_from_unified(comparison.lines))
            view.set_side(self._side[1])
            self._diff_title(Text.assemble(("diff ", "dim"), (self.left, "bold"), (" | ", "dim"), (self.right, "bold"),
                                           "  ", comparison.summary(), ("  side by side (B: unified)", "dim")))
            return
        view.set_lines(comparison.lines, comparison.width)
        wide = comparison.width > (view.scrollable_content_region.width or self.app.size.width - 2)
        self._diff_title(Text.assemble(("diff ", "dim"), self.left, " → ", self.right, "  ", comparison.summary(),
                                       ("  (› goes on: ←/→ scroll)", "dim") if wide else ""))

    def on_resize(self) -> None:
        if self.is_mounted:
            self.query_one("#compare-title", Static).update(self._title())

    # ------------------------------------------------------------------ actions

    def action_swap(self) -> None:
        self.left, self.right = self.right, self.left
        self.start_diff()
        self.refresh_view([])

    def action_side_by_side(self) -> None:
        """Unified diff <-> side by side (left trial | right trial); kept for the sides swapped (o)."""
        self.side_by_side = not self.side_by_side
        if self.comparison is not None:
            self._show(self.comparison)

    def action_file(self, step: int) -> None:
        view = self.query_one(DiffView)
        starts = view.file_starts()
        top = int(view.scroll_offset.y)
        target = next((s for s in starts if s > top), None) if step > 0 else next((s for s in reversed(starts) if s < top), None)
        if target is not None:
            view.scroll_to(y=target, animate=False)

    def action_back(self) -> None:
        self.app.pop_screen()


# ----------------------------------------------------------------------------- for the screens that open it


def compare_with_best(app: App[Any], session: RunSession, trial_id: str) -> bool:
    """Push the comparison of the current best (left) with ``trial_id`` (right); False (and a notice) if there is none."""
    best = best_trial_id(session.state)
    if best is None:
        app.notify("this run has no best trial yet", severity="warning")
        return False
    if best == trial_id:
        app.notify(f"{trial_id} is the current best: pick another trial to compare it with (compare…)")
        return False
    app.push_screen(CompareScreen(session, best, trial_id))
    return True


def pick_and_compare(app: App[Any], session: RunSession, trial_id: str) -> None:
    """Ask for the other trial (ComparePickScreen), then push the comparison of ``trial_id`` (left) with it."""

    def chosen(other: str | None) -> None:
        if other is not None:
            app.push_screen(CompareScreen(session, trial_id, other))

    app.push_screen(ComparePickScreen(session, trial_id), chosen)
