"""The review queue, third pass (issue 35, items 6 and 11): the audit column counts each severity (``1 high ·
2 warn``, not ``high 3``), the kind column (``☆ claim``, ``↑ promoted``) stays when the list is long enough to
scroll at 80x24, a hint line under the table says the next step, and a decision made on a trial opened from the
queue goes on to the next trial left to review (approve and next). Findings are appended as the auditor writes
them; what the log holds afterwards is read back from events.jsonl (json), not from the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from screen_text import flat, screen_lines
from textual.widgets import Static
from tui_helpers import fixed_clock, plain
from tui_helpers import wait_until as _wait_until

from rrma.audit.finding import Evidence, Finding
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.dialogs import NoteScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.review import ReviewScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable

SMALL = (80, 24)


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)


def queue_run(runs: Path) -> Path:
    """A finished hitl run of 30 trials (3 claims held, 20 to review: more than 80x24 shows) and three open findings
    on t0004 (one high, two warn) plus one dismissed."""
    run_dir = make_run(runs, "demo-run", trials=30, hitl=True, pending_claims=3)
    store = RunStore(run_dir)
    kinds = (("high", "scorer_access", "oracle_path"), ("warn", "claim_mismatch", "claimed_score"),
             ("warn", "out_of_scope", "edit_scope"), ("info", "noise_only", "noise_floor"))
    seqs = [store.append("audit.finding", "auditor",
                         Finding("t0004", kind, severity, f"{kind} seen", (Evidence(5, "quote"),), rule=rule).data()).seq
            for severity, kind, rule in kinds]
    store.append("audit.dismissed", "human:carol", {"finding_seq": seqs[-1], "trial_id": "t0004", "by": "human:carol",
                                                    "note": "noise"})
    store.close()
    return run_dir


async def open_queue(pilot: Any, app: RRMAApp) -> ReviewScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.model is not None)
    await pilot.press("v")
    await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen) and app.screen.is_mounted)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ReviewScreen)
    return screen


@pytest.mark.asyncio
async def test_the_audit_column_counts_each_severity_and_the_kind_column_stays_at_80x24(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = queue_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=SMALL) as pilot:
        screen = await open_queue(pilot, app)
        table = screen.query_one("#queue", LineTable)
        assert len(table.rows) > 18  # more than the table shows: it scrolls
        assert table.move_to("t0004")
        await pilot.pause()
        text = flat(screen_lines(app))
        assert "1 high · 2 warn" in text  # not `high 3`: one high and two warn findings are open (the info dismissed)
        assert "claim" in table.shown_columns
        await pilot.press("end")  # scrolled to the end, the kind column is still there
        await pilot.pause()
        text = flat(screen_lines(app))
        assert "☆ claim" in text or "↑ promoted" in text or " trial " in f" {text} "
        assert "claim" in table.shown_columns
        hint = plain(screen.query_one("#review-hint", Static).content, width=80)
        assert "the next opens" in hint and "space select" in hint


@pytest.mark.asyncio
async def test_approve_in_a_trial_opened_from_the_queue_goes_on_to_the_next(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = queue_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        queue = await open_queue(pilot, app)
        rows = list(queue.query_one("#queue", LineTable).rows)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        trial = app.screen
        assert isinstance(trial, TrialScreen) and trial.trial_id == rows[0]
        assert f"review queue: {len(rows)} left" in plain(trial.query_one("#trial-title", Static).content, width=200)
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        await pilot.press(*"ok", "enter")
        await wait_until(pilot, lambda: app.screen is trial and trial.trial_id == rows[1])
        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, NoteScreen))
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is trial and trial.trial_id == rows[2])
        await wait_until(pilot, lambda: f"{len(rows) - 2} left" in plain(trial.query_one("#trial-title", Static).content,
                                                                         width=200))
        await pilot.press("escape")  # back in the queue: the two decided trials are gone from it
        await wait_until(pilot, lambda: app.screen is queue)
        await wait_until(pilot, lambda: queue.query_one("#queue", LineTable).rows == rows[2:])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    reviews = [(e["data"]["trial_id"], e["data"]["decision"]) for e in events if e["kind"] == "review"]
    assert reviews == [(rows[0], "approve"), (rows[1], "reject")]


def test_snapshot_review_queue_findings_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    run_dir = queue_run(runs)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = await open_queue(pilot, pilot.app)
        screen.query_one("#queue", LineTable).move_to("t0004")
        await pilot.pause()

    assert snap_compare(RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock), terminal_size=SMALL,
                        run_before=run_before)
