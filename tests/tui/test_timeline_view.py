"""The timeline (`E` on the dashboard): the run's orders and decisions in log order, live, filterable, Enter
opening the trial a row names, and a verify badge that turns when the log's tail is cut; 80x24.

The run is make_run's (real trials, promotions, agents' blackboard posts) with every kind of entry appended
through RunStore as the CLI, the TUI, the auditor and the trainer write them. What the rows must say is read
back from events.jsonl itself (json), not from the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from make_run import START, fake_clock, make_run
from test_tui_keys import bindings, documented
from textual.widgets import Static
from tui_helpers import fixed_clock, settle
from tui_helpers import wait_until as _wait_until

from rrma.log.head import check_head
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.timeline import TimelineScreen, fit_words
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable
from tui.widgets.timeline import KINDS, Badge, check_log, head_badge

HUMAN_KINDS = {"blackboard.post"}  # listed only when a person wrote them


async def wait_until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await _wait_until(pilot, predicate)


def orders_run(runs: Path) -> Path:
    """make_run's run (still going) plus one event of each kind the timeline lists."""
    run_dir = make_run(runs, "tl-run", trials=8, finished=False, checkpoint=False)
    store = RunStore(run_dir)
    with fake_clock(START + timedelta(minutes=30)):  # the confirmation repeats the verdict below names
        for rid, score in (("t0002-r1", 2.39), ("t0002-r2", 2.391)):
            store.append("trial.proposed", "harness", {"trial_id": rid, "parent": "t0001", "agent": "alice",
                                                       "proposal_blob": "0" * 64, "confirms": "t0002"})
            store.append("trial.finished", "oracle", {"trial_id": rid, "status": "ok", "score": score})
    with fake_clock(START + timedelta(hours=1)):
        store.append("run.control", "human:carol", {"action": "pause", "by": "human:carol", "reason": "lunch"})
        store.append("run.control", "human:carol", {"action": "continue", "by": "human:carol"})
        store.append("agent.steer", "human:carol", {"by": "human:carol", "to": ["alice"], "text": "try warmup"})
        store.append("blackboard.post", "human:dave", {"agent": "human:dave", "text": "eval.py is fixed",
                                                       "trial_id": "t0002"})
        review = store.append("review", "human:carol", {"trial_id": "t0001", "decision": "approve",
                                                        "reviewer": "carol", "note": "clean diff"})
        store.append("review", "human:carol", {"trial_id": "t0001", "decision": "withdraw", "reviewer": "carol",
                                               "supersedes": review.seq})
        store.append("review", "human:dave", {"trial_id": "t0003", "decision": "reject", "reviewer": "dave",
                                              "note": "noise"})
        store.append("review", "human:dave", {"trial_id": "t0004", "decision": "flag", "reviewer": "dave"})
        store.append("trial.confirmed", "harness", {
            "trial_id": "t0002", "repeats": ["t0002-r1", "t0002-r2"], "scores": [2.39, 2.391], "mean": 2.3905,
            "best_trial": "base-0", "best_score": 2.4, "delta": 0.0095, "floor": 0.008, "confirmed": True})
        finding = store.append("audit.finding", "auditor", {
            "finding_id": "f" * 16, "trial_id": "t0005", "kind": "metric_tampering", "severity": "high",
            "rule": "prints-metric", "explanation": "edits the line that prints val_loss", "held": True})
        store.append("audit.dismissed", "human:carol", {"finding_seq": finding.seq, "trial_id": "t0005",
                                                        "by": "human:carol", "note": "it only reformats"})
        store.append("train.started", "trainer", {"method": "grpo", "base_model": "tiny"})
        store.append("train.checkpoint", "trainer", {"step": 3, "kind": "adapter", "artifact": "ab" * 32,
                                                     "path": "artifacts/x"})
        store.append("train.finished", "trainer", {"reason": "done", "steps": 3})
        store.append("note", "harness", {"text": "the oracle's cache was cleared"})
    store.close()
    return run_dir


def logged(run_dir: Path) -> list[dict[str, Any]]:
    """The log's events the timeline must list, in log order (from the file itself)."""
    out = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] in KINDS and (event["kind"] not in HUMAN_KINDS or event["actor"].startswith("human:")):
            out.append(event)
    return out


async def open_timeline(pilot: Any) -> TimelineScreen:
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
    await pilot.press("E")
    await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.scanned)
    await pilot.pause()
    return app.screen  # type: ignore[no-any-return]


def title(screen: TimelineScreen) -> str:
    return str(screen.query_one("#tl-title", Static).content)


def badge(screen: TimelineScreen) -> str:
    return str(screen.query_one("#tl-badge", Static).content)


@pytest.mark.asyncio
async def test_timeline_lists_filters_opens_follows_and_verifies(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = orders_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_timeline(pilot)
        table = screen.query_one("#tl-rows", LineTable)
        events = logged(run_dir)
        # every kind is there, in log order; agents' posts are not
        assert table.rows == [str(e["seq"]) for e in events]
        assert {e["kind"] for e in events} == set(KINDS) - {"run.resumed", "run.finished"}
        assert not any(screen.entries[k].kind == "blackboard.post" and not screen.entries[k].actor.startswith("human:")
                       for k in table.rows)
        rows = {e["seq"]: screen._row(str(e["seq"])) for e in events}
        for e in events:  # each row: time, actor, kind, trial (at 120 columns the summary is whole)
            cells = [str(c) for c in rows[e["seq"]]]
            assert cells[:4] == [e["ts"][11:19], e["actor"], e["kind"], e["data"].get("trial_id") or ""]
            assert cells[4] == screen.entries[str(e["seq"])].summary
        summaries = [screen.entries[str(e["seq"])].summary for e in events]
        assert "pause: lunch" in summaries and "continue" in summaries
        assert "→ alice: try warmup" in summaries and "post: eval.py is fixed" in summaries
        assert "approve: clean diff" in summaries and "reject: noise" in summaries and "flag" in summaries
        withdraw = next(e for e in events if e["kind"] == "review" and e["data"]["decision"] == "withdraw")
        assert f"withdraw (supersedes seq {withdraw['data']['supersedes']})" in summaries
        assert "confirmed: mean 2.3905 of 2/2 repeats" in summaries
        assert "high metric_tampering (held): edits the line that prints val_loss" in summaries
        promoted = [e for e in events if e["kind"] == "trial.promoted"]
        assert promoted and all(summaries[events.index(e)].startswith("promoted at ") for e in promoted)
        assert f"step 3 adapter {'ab' * 6}" in summaries and "done after 3 steps" in summaries
        assert title(screen).count(f"{len(events)} of {len(events)}") == 1
        await wait_until(pilot, lambda: "chain ok" in badge(screen))
        assert f"seq {json.loads((run_dir / 'head.json').read_text())['seq']}" in badge(screen)

        # f cycles the kinds: orders, then reviews; the count says N of M
        await pilot.press("f")
        orders = [str(e["seq"]) for e in events if e["kind"] in ("run.control", "agent.steer", "blackboard.post")]
        assert table.rows == orders and f"{len(orders)} of {len(events)}" in title(screen)
        await pilot.press("f")
        reviews = [str(e["seq"]) for e in events if e["kind"] == "review"]
        assert table.rows == reviews and "kind reviews" in title(screen)
        # / filters by text, with the kind filter
        await pilot.press("slash", *"dave", "enter")
        daves = [str(e["seq"]) for e in events if e["kind"] == "review" and e["actor"] == "human:dave"]
        assert table.rows == daves and f"{len(daves)} of {len(events)}" in title(screen)
        await pilot.press("c")
        assert len(table.rows) == len(events)

        # Enter on a row that names a trial opens it; Esc comes back
        reject = next(e for e in events if e["kind"] == "review" and e["data"]["decision"] == "reject")
        assert table.move_to(str(reject["seq"]))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        assert app.screen.trial_id == "t0003"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)

        # live: orders appended while the timeline is open arrive as rows; the table follows the newest
        await pilot.press("end")
        store = RunStore(run_dir)
        stop = store.append("run.control", "human:erin", {"action": "stop", "by": "human:erin", "reason": "enough"})
        store.append("run.finished", "harness", {"reason": "stopped"})
        store.close()
        await wait_until(pilot, lambda: str(stop.seq + 1) in table.rows)
        assert table.rows[-2:] == [str(stop.seq), str(stop.seq + 1)] and table.cursor_key == str(stop.seq + 1)
        assert screen.entries[str(stop.seq)].summary == "stop: enough"
        await wait_until(pilot, lambda: f"✔ head ok (seq {stop.seq + 1})" in badge(screen))  # checked again, unasked

        # the tail is cut (its last line removed): the badge says so without a key pressed
        data = (run_dir / "events.jsonl").read_bytes()
        (run_dir / "events.jsonl").write_bytes(data[:data.rstrip(b"\n").rfind(b"\n") + 1])
        await wait_until(pilot, lambda: "tail cut" in badge(screen))
        assert "✘" in badge(screen)


def test_timeline_keys_mean_one_thing_and_are_documented() -> None:
    keys = [key for key, _ in bindings(TimelineScreen)]
    assert len(keys) == len(set(keys))
    assert documented("Timeline") == set(keys)
    dashboard = dict(bindings(DashboardScreen))
    assert dashboard["E"] == "timeline"
    for key, action in bindings(TimelineScreen):  # the same meaning as on the dashboard
        if key in dashboard and key not in ("Enter", "Esc"):
            assert dashboard[key] == action, key


def test_snapshot_timeline_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    run_dir = orders_run(runs)
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = await open_timeline(pilot)
        await wait_until(pilot, lambda: "chain ok" in badge(screen))
        # the picture is taken once the table has placed itself at the live end: following, its cursor on the
        # last row and scrolled there (a loaded full-suite run once drew it a frame early: the scroll bar's
        # thumb still at the top and the cursor row in another style)
        table = screen.query_one("#tl-rows", LineTable)
        # (the 18 rows do not fit at 80x24: at the live end the view is scrolled down)
        await wait_until(pilot, lambda: table.following and table.cursor == len(table.rows) - 1
                         and table.scroll_offset.y > 0)
        await settle(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_badge_check_of_a_changed_or_unrecorded_tail(tmp_path: Path) -> None:
    """The badge without the screen says the core's head check (rrma.log.head.check_head; its table is in
    tests/log/test_head.py): the last line replaced by one of the same length is a changed tail, a cut one is a
    cut tail, a log without head.json says so; the whole chain at open names a change in the middle."""
    run_dir = make_run(tmp_path, "r", trials=3, checkpoint=False)
    head = json.loads((run_dir / "head.json").read_text())
    assert head_badge(check_head(run_dir)) == Badge("ok", f"head ok (seq {head['seq']})",
                                                    f"head.json matches the log's event seq {head['seq']}", head["seq"])
    assert check_log(run_dir, full=True).text == f"chain ok (seq {head['seq']})"
    log = run_dir / "events.jsonl"
    data = log.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    changed = data[last:].replace(b'"max_trials"', b'"max_tri4ls"')
    assert len(changed) == len(data) - last and changed != data[last:]
    log.write_bytes(data[:last] + changed)  # same length: only the recomputed hash can tell
    assert check_log(run_dir, full=False).verdict == "changed"
    assert "does not match its content" in check_log(run_dir, full=False).detail
    log.write_bytes(data[:last])
    assert check_log(run_dir, full=False).verdict == "cut" and check_log(run_dir, full=True).text == "tail cut"
    middle = data.index(b'"hypothesis":"baseline"')
    log.write_bytes(data[:middle] + data[middle:].replace(b'"baseline"', b'"basel1ne"', 1))
    assert check_log(run_dir, full=False).verdict == "ok"  # the head record alone cannot see it...
    assert check_log(run_dir, full=True).verdict == "changed"  # ...the chain checked at open does
    (run_dir / "head.json").unlink()
    assert check_log(run_dir, full=False).verdict == "none"


def test_a_summary_is_cut_at_a_word_never_in_a_number() -> None:
    text = "confirmed: mean 2.3905 of 2/2 repeats"
    assert fit_words(text, 40) == text
    assert fit_words(text, 20) == "confirmed: mean …"
    assert fit_words(text, 4) == "…"
    for cells in range(1, len(text)):
        fitted = fit_words(text, cells)
        assert len(fitted) <= cells and fitted.endswith("…")
        assert all(word in text.split() for word in fitted.removesuffix("…").split()), (cells, fitted)


@pytest.mark.asyncio
async def test_an_event_the_fold_did_not_count_says_so(tmp_path: Path) -> None:
    """A review whose supersedes names no earlier review of its trial: listed (it is in the log) but marked not
    counted, with the fold's reason under the table."""
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "r", trials=3)
    store = RunStore(run_dir)
    bad = store.append("review", "human:mallory", {"trial_id": "t0001", "decision": "approve", "reviewer": "mallory",
                                                   "supersedes": 2})
    good = store.append("review", "human:carol", {"trial_id": "t0002", "decision": "reject", "reviewer": "carol"})
    store.close()
    app = RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:  # opened from the command palette's "Timeline" this time
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Timeline"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, TimelineScreen) and app.screen.scanned)
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        table = screen.query_one("#tl-rows", LineTable)
        assert table.rows == [str(e["seq"]) for e in logged(run_dir)]
        cells = [str(c) for c in screen._row(str(bad.seq))]
        assert cells[4].startswith("✗ not counted: approve")
        assert not str(screen._row(str(good.seq))[4]).startswith("✗")
        assert table.move_to(str(bad.seq))
        await pilot.pause()
        detail = str(screen.query_one("#tl-detail", Static).content)
        assert "not counted: review seq" in detail and "supersedes seq 2" in detail
