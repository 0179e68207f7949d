"""The review queue like lazygit: select trials (space, ctrl+a), decide them with one confirmation that lists
every review it will write, a trial that cannot be reviewed reported while the others are written; copy a
trial's id or diff to the clipboard (OSC 52) from the queue and the trial view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from screen_text import flat, screen_lines
from test_tui_screens import events_of, make_app, open_dashboard
from tui_helpers import MessageLog, fixed_clock, settle, wait_until

from rrma.log.review import record_review
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.dialogs import BulkReviewScreen, CopyScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.review import ReviewScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import MARK, LineTable


def reviews_in(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in events_of(run_dir) if e["kind"] == "review"]


async def open_queue(pilot, app: RRMAApp) -> ReviewScreen:  # type: ignore[no-untyped-def]
    await open_dashboard(pilot, app)
    await pilot.press("v")
    await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ReviewScreen)
    return screen


async def select_first_three(pilot, screen: ReviewScreen) -> list[str]:  # type: ignore[no-untyped-def]
    table = screen.query_one("#queue", LineTable)
    first = table.rows[:3]
    table.move_to(first[0])
    await pilot.press("space", "space", "space")
    await pilot.pause()
    assert screen.selection() == first
    return first


@pytest.mark.asyncio
async def test_selected_trials_are_decided_with_one_confirmation_and_esc_writes_nothing(runs_dir: Path, run_dir: Path) -> None:
    log = MessageLog()
    app: Any = make_app(runs_dir)  # Any: the Pilot helpers take App[object]
    before = (run_dir / "events.jsonl").read_bytes()
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        screen = await open_queue(pilot, app)
        table = screen.query_one("#queue", LineTable)
        listed = list(table.rows)
        # first a confirmation cancelled: it listed every trial, and wrote nothing
        await pilot.press("ctrl+a")  # every trial listed
        await pilot.pause()
        assert screen.selection() == listed and f"{len(listed)} selected" in flat(screen_lines(app))
        await pilot.press("!")
        await wait_until(pilot, lambda: isinstance(app.screen, BulkReviewScreen))
        assert all(f"flag {trial_id}" in flat(screen_lines(app)) for trial_id in listed)
        await pilot.press(*"no", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.pause(0.3)
        assert (run_dir / "events.jsonl").read_bytes() == before
        assert table.rows == listed and screen.selection() == listed  # still listed, still selected
        await pilot.press("escape")  # Esc clears the selection (a second Esc would go back)
        await pilot.pause()
        assert screen.selection() == [] and isinstance(app.screen, ReviewScreen)
        assert "selected" not in flat(screen_lines(app))

        chosen = await select_first_three(pilot, screen)
        text = flat(screen_lines(app))
        assert "3 selected" in text
        assert all(f"{MARK} {trial_id}" in text for trial_id in chosen)  # each selected row is marked
        assert f"{MARK} {listed[3]}" not in text
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, BulkReviewScreen))
        await pilot.pause()
        confirmation = flat(screen_lines(app))
        assert "approve 3 trials as human:carol" in confirmation
        assert all(f"approve {trial_id}" in confirmation for trial_id in chosen)
        assert not any(f"approve {trial_id}" in confirmation for trial_id in listed[3:])
        assert reviews_in(run_dir) == []  # nothing is written before Enter
        await pilot.press(*"looked at all three", "enter")
        await wait_until(pilot, lambda: bool(log.of(RRMAApp.ReviewsRecorded)))
        await wait_until(pilot, lambda: not set(chosen) & set(table.rows))  # the queue updates
        assert table.rows == listed[3:] and screen.selection() == []
        [recorded] = log.of(RRMAApp.ReviewsRecorded)
        assert isinstance(recorded, RRMAApp.ReviewsRecorded)
        assert [trial_id for trial_id, _ in recorded.written] == chosen and recorded.failed == []
        assert "approve by carol recorded for 3 of 3" in flat(screen_lines(app))
    reviews = reviews_in(run_dir)
    assert len(reviews) == 3  # exactly one review event per selected trial
    assert [r["data"]["trial_id"] for r in reviews] == chosen
    assert {(r["actor"], r["data"]["decision"], r["data"]["reviewer"], r["data"]["note"]) for r in reviews} == {
        ("human:carol", "approve", "carol", "looked at all three")}


@pytest.mark.asyncio
async def test_a_trial_reviewed_meanwhile_is_reported_and_the_others_written(runs_dir: Path, run_dir: Path) -> None:
    log = MessageLog()
    app: Any = make_app(runs_dir)  # Any: the Pilot helpers take App[object]
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        screen = await open_queue(pilot, app)
        chosen = await select_first_three(pilot, screen)
        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, BulkReviewScreen))
        # while the confirmation is open, bob flags the second trial from another terminal
        store = RunStore(run_dir)
        try:
            bob = record_review(store, chosen[1], "flag", "bob", "looks copied")
        finally:
            store.close()
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(log.of(RRMAApp.ReviewsRecorded)))
        [recorded] = log.of(RRMAApp.ReviewsRecorded)
        assert isinstance(recorded, RRMAApp.ReviewsRecorded)
        assert [trial_id for trial_id, _ in recorded.written] == [chosen[0], chosen[2]]
        [(failed_id, why)] = recorded.failed
        assert failed_id == chosen[1] and f"bob's flag (seq {bob.seq})" in why and "changed since you confirmed" in why
        await pilot.pause(0.2)
        said = flat(screen_lines(app))  # the screen says it (and a notification)
        assert "reject by carol recorded for 2 of 3" in said and f"1 not recorded: {chosen[1]}" in said
        assert any(f"1 not recorded: {chosen[1]}" in n.message and n.severity == "warning"
                   for n in app._notifications)
        # the reviewed list: a withdrawal of all three names the review each one replaces
        await pilot.press("f", "f")
        await wait_until(pilot, lambda: screen.view == "reviewed" and len(screen.query_one("#queue", LineTable).rows) == 3)
        await pilot.press("ctrl+a", "u")
        await wait_until(pilot, lambda: isinstance(app.screen, BulkReviewScreen))
        seqs = {r["data"]["trial_id"]: r["seq"] for r in reviews_in(run_dir)}
        confirmation = flat(screen_lines(app))
        assert f"withdraw {chosen[1]} replaces bob's flag (seq {seqs[chosen[1]]})" in confirmation
        assert all(f"withdraw {t} replaces carol's reject (seq {seqs[t]})" in confirmation for t in (chosen[0], chosen[2]))
        await pilot.press("escape")
    reviews = reviews_in(run_dir)
    assert [(r["data"]["trial_id"], r["data"]["decision"], r["data"]["reviewer"]) for r in reviews] == [
        (chosen[1], "flag", "bob"), (chosen[0], "reject", "carol"), (chosen[2], "reject", "carol")]


def blob_text(run_dir: Path, digest: str) -> str:
    return (run_dir / "blobs" / digest).read_text()


def train_py(run_dir: Path, trial_id: str) -> list[str]:
    """The trial's train.py as its workspace manifest has it (read from the log and the blobs)."""
    manifest = json.loads(blob_text(run_dir, MANIFESTS.setdefault(run_dir, manifests(run_dir))[trial_id]))
    return blob_text(run_dir, manifest["train.py"]).splitlines()


MANIFESTS: dict[Path, dict[str, str]] = {}


def manifests(run_dir: Path) -> dict[str, str]:
    """Each trial's workspace manifest blob, from its trial.proposed."""
    return {e["data"]["trial_id"]: e["data"]["manifest_blob"] for e in events_of(run_dir) if e["kind"] == "trial.proposed"}


@pytest.mark.asyncio
async def test_copy_puts_the_trial_id_and_its_diff_on_the_clipboard(runs_dir: Path, run_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    copied: list[str] = []
    real = RRMAApp.copy_to_clipboard

    def spy(self: RRMAApp, text: str) -> None:
        copied.append(text)
        real(self, text)

    monkeypatch.setattr(RRMAApp, "copy_to_clipboard", spy)
    app: Any = make_app(runs_dir)  # Any: the Pilot helpers take App[object]
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_queue(pilot, app)
        table = screen.query_one("#queue", LineTable)
        state = screen.session.state
        # a trial whose train.py differs from its parent's
        trial_id = next(t for t in table.rows if train_py(run_dir, t) != train_py(run_dir, state.trials[t].parent or ""))
        parent = state.trials[trial_id].parent or ""
        table.move_to(trial_id)
        await pilot.press("C")
        await wait_until(pilot, lambda: isinstance(app.screen, CopyScreen))
        assert f"id: {trial_id}" in flat(screen_lines(app)) and "(proof: this trial has none)" in flat(screen_lines(app))
        await pilot.press("i")
        await wait_until(pilot, lambda: copied == [trial_id])
        assert app.clipboard == trial_id
        assert any(n.message == f"copied trial id {trial_id} to the clipboard" for n in app._notifications)
        await pilot.press("C", "d")
        await wait_until(pilot, lambda: len(copied) == 2)
        diff = copied[1]
        assert app.clipboard == diff and diff.startswith("--- a/train.py\n+++ b/train.py\n")
        added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
        removed = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
        assert added and removed
        assert set(added) <= set(train_py(run_dir, trial_id)) and set(removed) <= set(train_py(run_dir, parent))
        assert not set(added) <= set(train_py(run_dir, parent))
        assert any(n.message.startswith(f"copied the diff of {trial_id} (") for n in app._notifications)
        # the trial view: the same key
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        await pilot.press("C", "i")
        await wait_until(pilot, lambda: len(copied) == 3)
        assert copied[2] == trial_id == app.clipboard


def test_snapshot_review_with_a_selection_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12, hitl=True, pending_claims=1)
    app: Any = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.model is not None
                         and app.screen.model.turns_indexed)
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("space", "down", "space", "space")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
