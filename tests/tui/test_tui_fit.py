"""Nothing a person reads is cut at a screen's edge (issue 24, wrong today #5).

Before: a score such as -0.0500123 was drawn `-0.0500…` in the trials table at 160, 100 and 80 columns
(five significant digits did not fit its 8 cells); at 60x15 every score was `…`, as the chart kept its 44
columns and left the table 14; the withdraw modal read "it replaces carol's approv" and ctrl+n's help line
ended mid-word (a Label does not wrap); the footer at 80 columns ended `f St▏^p palettee` (a key half hidden,
and the key underneath showing through the palette key's margin); in compare at 80x24 the diff pane's last
row was its horizontal scroll bar, blank, and the verdict line scrolled away under a long hypothesis.
Now a score takes fewer significant digits to fit its column, modal text wraps, the footer leaves out whole
keys, a narrow dashboard leaves out its right-hand panes, and compare keeps its verdict on screen.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scored_run import write_scored_run
from screen_text import flat, screen_lines
from test_tui_screens import open_dashboard
from tui_helpers import fixed_clock, wait_until

from tui.app import RRMAApp
from tui.dialogs import NewRunScreen, NoteScreen
from tui.screens.compare import CompareScreen
from tui.screens.review import ReviewScreen
from tui.screens.runs import RunsScreen
from tui.screens.trial import TrialScreen
from tui.widgets.diff_view import DiffView

pytestmark = pytest.mark.asyncio

AWKWARD = [-0.0500123, -0.0082345, 123456.789, 1.234567e-7, -98765.4321, -0.0612345678]
ROW = re.compile(r"^│(?:[ ●] )?.?(t\d{4}) ")  # the review queue's rows start with their selection mark's two cells


def app_for(runs: Path, run: str | None) -> RRMAApp:
    return RRMAApp(runs, runs / run if run else None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


def score_cells(lines: list[str], scores: dict[str, float]) -> dict[str, str]:
    """The score each table row shows (the first number after the trial id and its status glyph)."""
    shown = {}
    for line in lines:
        row = ROW.match(line)
        if row is None or row.group(1) not in scores:
            continue
        assert "…" not in line, f"a cell is cut: {line!r}"
        shown[row.group(1)] = next(word for word in line.strip("│ ").split()[1:]
                                   if re.fullmatch(r"[-+]?[\d.]+(e[-+]?\d+)?", word))
    return shown


def assert_close(shown: dict[str, str], scores: dict[str, float]) -> None:
    assert shown, "no trial row on screen"
    for tid, text in shown.items():
        value = scores[tid]
        assert abs(float(text) - value) <= 0.005 * abs(value), f"{tid}: {value} shown as {text}"


async def test_scores_fit_the_trials_table_whole(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "awkward", AWKWARD, baseline=(-0.07, -0.0701, -0.0699))
    scores = {f"t{i:04d}": s for i, s in enumerate(AWKWARD, start=1)}
    app = app_for(runs, "awkward")
    async with app.run_test(size=(160, 48)) as pilot:
        await open_dashboard(pilot, app)
        for size in [(160, 48), (100, 30), (80, 24), (60, 15)]:
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            lines = screen_lines(app)
            shown = score_cells(lines, scores)
            assert len(shown) >= min(len(scores), size[1] - 9), f"{size}:\n" + "\n".join(lines)  # every row that fits
            assert_close(shown, scores)
        await pilot.resize_terminal(80, 24)
        await pilot.press("v")  # the review queue: its score and Δσ columns too
        await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.pause(0.2)
        assert_close(score_cells(screen_lines(app), scores), scores)


async def test_modal_text_wraps_at_80x24(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "small", [1.5, 2.5])
    app = app_for(runs, "small")
    async with app.run_test(size=(80, 24)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.press("g", *"t0002", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        await pilot.press("enter")
        await wait_until(pilot, lambda: dash.state.trials["t0002"].review_status == "approved")
        await pilot.press("u")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        await pilot.pause(0.1)
        seq = dash.state.trials["t0002"].reviews[-1]["seq"]
        text = flat(screen_lines(app))
        assert f"it replaces carol's approve (seq {seq}); that review stays in the log" in text, text
    app = app_for(runs, None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, RunsScreen))
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen))
        await pilot.pause(0.1)
        text = flat(screen_lines(app))
        assert "then options (Enter starts, Esc cancels)" in text, text
        assert "--seed S --set KEY=VALUE" in text, text


async def test_footer_keys_are_whole_and_nothing_shows_after_the_palette_key(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "small", [1.5, 2.5])
    app = app_for(runs, "small")
    async with app.run_test(size=(80, 24)) as pilot:
        dash = await open_dashboard(pilot, app)
        described = {b.description for b in dash.BINDINGS if b.show} | {"Quit", "Help", "Trial"}
        for width in (80, 100, 80):
            await pilot.resize_terminal(width, 24)
            await pilot.pause(0.2)
            footer = screen_lines(app)[-1]
            keys, _, palette = footer.rpartition("▏")
            assert palette == "^p palette", repr(footer)  # nothing after it (was `^p palettee`)
            assert keys.startswith("q Quit ? Help"), repr(footer)
            assert keys.split()[-1] in described, f"the last key before the palette is cut: {footer!r}"


async def test_compare_at_80x24_fills_the_diff_pane_and_keeps_the_verdict(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    long = "a longer hypothesis that wraps over several lines of the summary at eighty columns: " * 4
    write_scored_run(runs, "diffs", [1.5, 2.5], hypotheses=[long, long])
    app = app_for(runs, "diffs")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("g", *"t0001", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        await pilot.press("D", *"t0002", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.comparison is not None)
        await pilot.pause(0.2)
        lines = screen_lines(app)
        shown = "\n".join(lines)
        assert "t0002 vs t0001: +1 " in shown and "better" in shown, shown  # the verdict line is on screen
        bottom = max(i for i, line in enumerate(lines) if line.startswith("╰"))
        assert lines[bottom - 1].strip("│ "), f"the diff pane's last row is blank:\n{shown}"
        view = app.screen.query_one(DiffView)
        assert len(view.lines) > view.scrollable_content_region.height  # a diff longer than the pane
        assert any(line.rstrip("│ ▅▇▃▂▁▄▆█").endswith("›") for line in lines[bottom - 8:bottom]), shown  # goes on
        assert "compare t0001  vs  t0002" in lines[0] and "…" not in lines[0]
