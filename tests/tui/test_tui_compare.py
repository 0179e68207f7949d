"""The compare screen: two trials side by side, the diff between them, swap, vs the best, the pick modal."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tui_helpers import fixed_clock, plain, wait_until

from rrma.diff import ADD, DEL, FILE
from rrma.log.state import RunState, TrialRecord
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.dialogs import ComparePickScreen, TrialNotFound, best_trial_id, resolve_trial_id
from tui.screens import compare
from tui.screens.compare import CompareScreen, compare_with_best, pick_and_compare
from tui.screens.dashboard import DashboardScreen
from tui.widgets.diff_view import DiffView


def make_app(runs_dir: Path) -> RRMAApp:
    return RRMAApp(runs_dir, runs_dir / "demo-run", reviewer="carol", clock=fixed_clock, poll_interval=0.05)


async def open_dashboard(pilot, app: RRMAApp) -> DashboardScreen:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    await pilot.pause()
    assert isinstance(app.screen, DashboardScreen)
    return app.screen


async def open_compare(pilot, app: RRMAApp, left: str, right: str) -> CompareScreen:  # type: ignore[no-untyped-def]
    dash = await open_dashboard(pilot, app)
    screen = CompareScreen(dash.session, left, right)
    app.push_screen(screen)
    await wait_until(pilot, lambda: screen.comparison is not None)
    return screen


def shown_lines(view: DiffView) -> list[str]:
    """What the view draws now, line by line (its Line API output)."""
    return [view.render_line(y).text.rstrip() for y in range(view.scrollable_content_region.height)]


def add_trials(run_dir: Path, files: dict[str, dict[str, str]], proofs: dict[str, tuple[str, str]] | None = None) -> None:
    """Append proposed and finished trials whose workspace is ``files[trial_id]`` (path -> text)."""
    store = RunStore(run_dir)
    events = []
    for n, (tid, workspace) in enumerate(files.items()):
        manifest = {path: store.put_blob(text) for path, text in workspace.items()}
        proposal: dict[str, object] = {"hypothesis": f"{tid} hypothesis", "edits": []}
        if proofs and tid in proofs:
            proposal["theorem"], proposal["proof"] = proofs[tid]
        events += [
            ("trial.proposed", "agent:alice", {"trial_id": tid, "parent": "t0003", "agent": "alice",
                                               "hypothesis": f"{tid} hypothesis",
                                               "proposal_blob": store.put_json_blob(proposal),
                                               "manifest_blob": store.put_json_blob(manifest)}),
            ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": 2.5 + n, "seconds": 1.0}),
        ]
    store.append_many(events)
    store.close()


# ----------------------------------------------------------------------------- pure parts


def state_with(ids: list[str], best: str | None) -> RunState:
    state = RunState()
    for tid in ids:
        state.trials[tid] = TrialRecord(tid, None, "alice")
        state.order.append(tid)
    state.best_id = best
    return state


RESOLVE_CASES = [
    ("t0012", "t0012"),  # an exact id
    ("  t0003 ", "t0003"),  # surrounding spaces are ignored
    ("12", "t0012"),  # a trial number: 12 is t0012, not t0112
    ("112", "t0112"),  # ... and 112 is t0112
    ("ase-0", "base-0"),  # the end of exactly one id
    ("best", "t0003"),  # the current best
    ("BASE-0", "base-0"),  # case does not matter for the end-of-id match
]


@pytest.mark.parametrize(("typed", "trial_id"), RESOLVE_CASES)
def test_resolve_trial_id(typed: str, trial_id: str) -> None:
    state = state_with(["base-0", "t0000", "t0003", "t0012", "t0112"], best="t0003")
    assert resolve_trial_id(state, typed) == trial_id


REJECT_CASES = [
    ("t9999", "no trial 't9999' in this run"),  # an unknown id
    ("", "type a trial id"),  # nothing typed
    ("0", "could be base-0, t0000"),  # number 0 is t0000, and base-0 ends with it: ambiguous, both named
]


@pytest.mark.parametrize(("typed", "message"), REJECT_CASES)
def test_resolve_trial_id_rejects(typed: str, message: str) -> None:
    state = state_with(["base-0", "t0000", "t0003", "t0012", "t0112"], best="t0003")
    with pytest.raises(TrialNotFound, match=message):
        resolve_trial_id(state, typed)


def test_best_trial_id_is_the_headers_best_approved_or_not(run_dir: Path) -> None:
    from rrma.log.reader import RunReader

    state = RunReader(run_dir).load().state
    assert best_trial_id(state) == "t0003" == state.best_id  # promoted, not yet approved (header: unreviewed claim)
    assert best_trial_id(RunState()) is None
    with pytest.raises(TrialNotFound, match="no best trial yet"):
        resolve_trial_id(state_with(["t0001"], best=None), "best")


# ----------------------------------------------------------------------------- the screen



@pytest.mark.asyncio
async def test_two_trials_diff_shows_the_changed_lines_and_both_summaries(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_compare(pilot, app, "t0003", "t0012")
        assert app.screen is screen
        lines = screen.query_one(DiffView).lines
        assert lines[0] == (FILE, "--- t0003/train.py") and lines[1] == (FILE, "+++ t0012/train.py")
        removed = [t for k, t in lines if k == DEL]
        added = [t for k, t in lines if k == ADD]
        assert any(t.startswith("-BATCH_SIZE") for t in removed) and any(t.startswith("+BATCH_SIZE") for t in added)
        on_screen = "\n".join(shown_lines(screen.query_one(DiffView)))
        assert "--- t0003/train.py" in on_screen and "+BATCH_SIZE" in on_screen
        summary = plain(screen.query_one("#compare-summary").content) + plain(screen.query_one("#compare-verdict").content)
        for expected in ("t0003", "t0012", "agent", "vs baseline", "hypothesis", "awaiting review (held by the hitl gate)",
                         "t0012 descends from t0003 (1 generation(s))", "t0012 vs t0003:"):
            assert expected in summary, expected
        assert "1 file differs" in plain(screen.query_one("#compare-diff-title").content)
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


@pytest.mark.asyncio
async def test_s_swaps_the_sides(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_compare(pilot, app, "t0003", "t0012")
        before = screen.query_one(DiffView).lines
        await pilot.press("o")
        assert (screen.left, screen.right) == ("t0012", "t0003")
        await wait_until(pilot, lambda: screen.comparison is not None)
        after = screen.query_one(DiffView).lines
        assert after[0] == (FILE, "--- t0012/train.py")
        assert {t[1:] for k, t in after if k == ADD} == {t[1:] for k, t in before if k == DEL}  # the sides' lines swap
        assert "compare t0012  vs  t0003" in plain(screen.query_one("#compare-title").content)
        await pilot.press("o")  # and back: the cached diff, at once
        assert screen.comparison is not None and screen.query_one(DiffView).lines == before


@pytest.mark.asyncio
async def test_trial_vs_the_current_best(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        assert compare_with_best(app, dash.session, "t0012")
        screen = app.screen
        assert isinstance(screen, CompareScreen) and (screen.left, screen.right) == ("t0003", "t0012")
        await wait_until(pilot, lambda: screen.comparison is not None)
        assert screen.query_one(DiffView).lines[0] == (FILE, "--- t0003/train.py")
        await pilot.press("escape")
        assert not compare_with_best(app, dash.session, "t0003")  # the best itself: a notice, no screen
        assert app.screen is dash


@pytest.mark.asyncio
async def test_pick_modal_rejects_an_unknown_id_then_opens_the_comparison(runs_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        pick_and_compare(app, dash.session, "t0012")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ComparePickScreen)
        await pilot.press(*"t9999", "enter")
        assert app.screen is modal  # refused in the modal
        assert "no trial 't9999' in this run" in plain(modal.query_one("#trial-error").content)
        modal.query_one("#trial-input").value = "t0012"  # type: ignore[attr-defined]
        await pilot.press("enter")
        assert app.screen is modal and "t0012 itself" in plain(modal.query_one("#trial-error").content)
        modal.query_one("#trial-input").value = "4"  # type: ignore[attr-defined]
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, CompareScreen) and (screen.left, screen.right) == ("t0012", "t0004")
        await pilot.press("escape")
        pick_and_compare(app, dash.session, "t0012")
        await pilot.pause()
        await pilot.press("escape")  # Esc cancels: back to the dashboard, nothing pushed
        assert app.screen is dash


@pytest.mark.asyncio
async def test_a_huge_diff_is_computed_off_the_ui_thread_and_drawn_lazily(runs_dir: Path, run_dir: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    add_trials(run_dir, {
        "big-a": {"data.txt": "".join(f"row {i} = {i * 7 % 1000}\n" for i in range(10_000))},
        "big-b": {"data.txt": "".join(f"row {i} = {i * 7 % 1000 + (i % 3 == 0)}\n" for i in range(10_000))},
    })
    gate = threading.Event()  # holds the worker: the diff is still being computed while keys are pressed
    real = compare.compare_trials

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        assert threading.current_thread() is not threading.main_thread()
        gate.wait(timeout=30)
        return real(*args, **kwargs)

    monkeypatch.setattr(compare, "compare_trials", held)
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        screen = CompareScreen(dash.session, "big-a", "big-b")
        app.push_screen(screen)
        await pilot.pause()
        assert screen.computing and screen.comparison is None
        assert "computing…" in plain(screen.query_one("#compare-diff-title").content)
        await pilot.press("o")  # the screen answers keys while the worker runs
        assert (screen.left, screen.right) == ("big-b", "big-a")
        assert "compare big-b  vs  big-a" in plain(screen.query_one("#compare-title").content)
        gate.set()
        await wait_until(pilot, lambda: screen.comparison is not None, timeout=30)
        view = screen.query_one(DiffView)
        assert len(view.lines) > 10_000 and view.virtual_size.height == len(view.lines)
        assert view.lines[0] == (FILE, "--- big-b/data.txt")
        await pilot.press("end")
        await pilot.pause()
        assert view.scroll_offset.y == view.max_scroll_y > 10_000 - 40  # scrolled to the end at once
        assert shown_lines(view)[-1].startswith(("+", "-", " "))
        await pilot.press("escape")
        assert app.screen is dash
        assert app.return_code is None


@pytest.mark.asyncio
async def test_a_trial_not_yet_in_the_run_is_diffed_when_it_arrives(runs_dir: Path, run_dir: Path) -> None:
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        dash = await open_dashboard(pilot, app)
        screen = CompareScreen(dash.session, "t0003", "t7777")
        app.push_screen(screen)
        await pilot.pause()
        assert "not in this run: t7777" in plain(screen.query_one("#compare-summary").content)
        assert "no diff" in plain(screen.query_one("#compare-diff-title").content) and not screen.computing
        add_trials(run_dir, {"t7777": {"train.py": "x = 1\n", "eval.py": "", "notes.md": "".join(f"note {i}\n" for i in range(60))}})
        await wait_until(pilot, lambda: screen.comparison is not None)  # the tail brought it: the diff follows
        assert "3 files differ" in plain(screen.query_one("#compare-diff-title").content)  # eval.py emptied, notes.md added, train.py
        view = screen.query_one(DiffView)
        starts = view.file_starts()
        assert [view.lines[i][1] for i in starts] == ["--- t0003/eval.py", "--- /dev/null", "--- t0003/train.py"]
        await pilot.press("right_curly_bracket")  # next file
        await pilot.pause()
        assert view.scroll_offset.y == min(starts[1], view.max_scroll_y)
