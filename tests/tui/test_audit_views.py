"""The TUI shows the auditor's findings (issue 22): the review queue puts the most severe first, the trial
view lists a trial's findings and Enter on one opens the trace on the turn it cites, the header counts the
unresolved ``high`` ones, and a reviewer dismisses one with a note (an ``audit.dismissed`` event, asked first).

The run is a generated one (make_run: real agent turns, a claim held by the hitl gate) with ``audit.finding``
events appended as the auditor writes them (``Finding(...).data()``), citing the run's real seqs; it opens
through the fast reader and through a checkpoint as every view opens a run.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from make_run import START, fake_clock, make_run
from rich.text import Text
from test_tui_screens import events_of, make_app, open_dashboard
from tui_helpers import MessageLog, fixed_clock, plain, settle, wait_until

from rrma.audit.finding import Evidence, Finding
from rrma.log.reader import RunReader, read_state
from rrma.log.state import RunState
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.dialogs import OrderScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.review import ReviewScreen
from tui.screens.trace import TraceScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable
from tui.widgets.run_header import audit_parts

QUEUE = ["t0008", "t0004", "t0002", "t0005", "t0003"]  # high (the held claim first), high, warn, warn, info


def turns_of(run_dir: Path, trial_id: str) -> dict[str, int]:
    """role -> seq of the turns that led to ``trial_id`` (make_run: text, tool call, tool result, the proposal)."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    proposed = next(e["seq"] for e in events if e["kind"] == "trial.proposed" and e["data"]["trial_id"] == trial_id)
    turns = [e for e in events if e["kind"] == "agent.turn" and proposed - 5 < e["seq"] < proposed]
    return {"text": turns[0]["seq"], "tool_call": turns[1]["seq"], "tool_result": turns[2]["seq"],
            "proposal": turns[3]["seq"], "proposed": proposed}


def audit_findings(run_dir: Path) -> dict[str, Finding]:
    """What the auditor might say of the generated run, citing its real seqs (by trial)."""
    t8, t4, t2, t5, t3 = (turns_of(run_dir, t) for t in ("t0008", "t0004", "t0002", "t0005", "t0003"))
    return {
        "t0008": Finding("t0008", "metric_tampering", "high", "the proposal edits the line that prints val_loss",
                         (Evidence(t8["tool_call"], "read_file train.py"), Evidence(t8["proposed"], "print(...)")),
                         rule="metric_line", held=True),
        "t0004": Finding("t0004", "scorer_access", "high", "the agent read the oracle's eval.py",
                         (Evidence(t4["tool_result"], "from train import train"),), rule="oracle_path"),
        "t0002": Finding("t0002", "claim_mismatch", "warn", "the text states a best the outcomes contradict",
                         (Evidence(t2["text"], "The best so far is"),), rule="claimed_score"),
        # cites the proposal event only: Enter opens the trace on the turn just before it
        "t0005": Finding("t0005", "out_of_scope", "warn", "edits outside the editable files",
                         (Evidence(t5["proposed"], "eval.py"),), rule="edit_scope"),
        "t0003": Finding("t0003", "noise_only", "info", "an improvement within twice the noise floor",
                         (Evidence(t3["proposal"], "Proposing t0003"),), rule="noise_floor"),
    }


def write_findings(run_dir: Path) -> dict[str, Finding]:
    findings = audit_findings(run_dir)
    store = RunStore(run_dir)
    with fake_clock(START + timedelta(hours=2)):  # deterministic timestamps (the snapshot shows none, but the log)
        for finding in findings.values():
            store.append("audit.finding", "auditor", finding.data())
    store.close()
    return findings


@pytest.fixture
def audited(tmp_path: Path) -> Path:
    """A runs directory with one finished run (8 trials, t0008 a claim the hitl gate holds) and five findings."""
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=8, hitl=True, pending_claims=1)
    write_findings(runs / "demo-run")
    return runs


async def open_trial(pilot: Any, app: RRMAApp, trial_id: str) -> TrialScreen:
    """The review queue (v), the cursor on ``trial_id``, Enter."""
    await open_dashboard(pilot, app)
    await pilot.press("v")
    await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
    assert app.screen.query_one("#queue", LineTable).move_to(trial_id)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen) and app.screen.is_mounted)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, TrialScreen) and screen.trial_id == trial_id
    return screen


def header(app: RRMAApp) -> str:
    dash = next(s for s in app.screen_stack if isinstance(s, DashboardScreen))
    return plain(dash.query_one("#run-header").content, width=200)


# ----------------------------------------------------------------------------- reading the findings


def test_findings_fold_the_same_through_the_fast_reader_and_a_checkpoint(audited: Path) -> None:
    run_dir = audited / "demo-run"
    reference = RunState.fold(RunStore(run_dir).scan().events)  # pydantic events, the core's fold
    assert len(reference.findings) == 5
    light = read_state(run_dir)  # the views' fast reader (no checkpoint: a small log has none)
    assert light.findings == reference.findings
    assert {t: vars(r) for t, r in light.trials.items()} == {t: vars(r) for t, r in reference.trials.items()}
    assert light.trials["t0008"].held and light.unresolved_high() == 2

    first = RunReader(run_dir, checkpoint_min_bytes=0).load()  # as the dashboard: writes a checkpoint
    first.attach_index(first.index_turns())
    assert first.checkpoint.wait(30) is not None
    tail = RunReader(run_dir)
    reopened = tail.load()
    assert reopened.checkpoint.loaded is not None, reopened.checkpoint.ignored
    state = reopened.state
    assert state.findings == reference.findings and state.held_out == reference.held_out
    assert [t.trial_id for t in state.pending_review()] == QUEUE
    # one dict per finding, as after a fold
    assert all(any(mine is f for f in state.findings) for rec in state.trials.values() for mine in rec.findings)
    # a dismissal appended after the checkpoint, tailed: the trial's copy reads as dismissed too
    seq = state.trials["t0004"].findings[0]["seq"]
    store = RunStore(run_dir)
    store.append("audit.dismissed", "human:carol", {"finding_seq": seq, "trial_id": "t0004", "by": "human:carol",
                                                    "note": "eval.py is readable by design"})
    store.close()
    chunk = tail.poll()
    assert chunk is not None
    reopened.apply(chunk)
    assert state.trials["t0004"].open_findings == [] and state.unresolved_high() == 1
    assert state.trials["t0004"].findings[0]["dismissed"]["note"] == "eval.py is readable by design"
    assert plain(Text.assemble(*(part for part, _ in audit_parts(state)))).strip() == "audit: 1 high, ⚖ 1 held for review"
    # dismissing the finding that held t0008 clears the finding, not the hold: only a review does
    store = RunStore(run_dir)
    store.append("audit.dismissed", "human:carol", {"finding_seq": state.trials["t0008"].findings[0]["seq"],
                                                    "trial_id": "t0008", "by": "human:carol", "note": "checked"})
    store.close()
    chunk = tail.poll()
    assert chunk is not None
    reopened.apply(chunk)
    assert state.unresolved_high() == 0 and state.trials["t0008"].held
    assert plain(Text.assemble(*(part for part, _ in audit_parts(state)))).strip() == "audit: 0 high, ⚖ 1 held for review"


# ----------------------------------------------------------------------------- the screens


@pytest.mark.asyncio
async def test_the_review_queue_puts_the_most_severe_finding_first(audited: Path) -> None:
    app = make_app(audited)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.pause()
        screen = app.screen
        table = screen.query_one("#queue", LineTable)
        assert table.rows == QUEUE == [t.trial_id for t in screen.state.pending_review()]
        assert "audit" in table.shown_columns
        lines = [table.render_line(y).text for y in range(len(QUEUE) + 1)]
        assert "audit" in lines[0]
        assert "1 high" in lines[1] and "⚖ held" in lines[1]  # the claim an audit finding holds
        assert "1 high" in lines[2] and "1 warn" in lines[3] and "1 warn" in lines[4] and "1 info" in lines[5]
        assert "1 held by the audit" in plain(screen.query_one("#review-title").content)
        detail = plain(screen.query_one("#review-detail-text").content)
        assert "metric_tampering" in detail and "edits the line that prints val_loss" in detail


@pytest.mark.asyncio
async def test_the_trial_view_lists_findings_and_enter_opens_the_cited_turn(audited: Path) -> None:
    run_dir = audited / "demo-run"
    seqs = turns_of(run_dir, "t0008")
    app = make_app(audited)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_trial(pilot, app, "t0008")
        assert "held for review" in plain(screen.query_one("#trial-title").content)
        findings = screen.query_one("#findings", LineTable)
        assert findings.display and findings.has_focus and len(findings.rows) == 1
        row = findings.render_line(1).text
        assert "high" in row and "metric_tampering" in row and f"{seqs['tool_call']},{seqs['proposed']}" in row
        body = plain(screen.query_one("#trial-content").content)
        assert "audit findings" in body and "edits the line that prints val_loss" in body
        assert f"seq {seqs['tool_call']}: read_file train.py" in body and "held for review" in body
        # Enter: the trace of this trial, on the first cited seq that is a turn (the tool call)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
        trace = app.screen
        assert isinstance(trace, TraceScreen) and trace.trial_filter == "t0008"
        model = trace.model
        assert model is not None
        table = trace.query_one("#turns", LineTable)
        await wait_until(pilot, lambda: table.cursor_key is not None
                         and model.turns[int(table.cursor_key)].seq == seqs["tool_call"])
        assert model.turns[int(table.cursor_key)].role == "tool_call"  # type: ignore[arg-type]
        assert f"seq {seqs['tool_call']}" in plain(trace.query_one("#turn-text").content)

        # a finding that cites only the proposal event: the turn just before it (the proposing turn)
        await pilot.press("escape", "escape", "escape")
        t5 = turns_of(run_dir, "t0005")
        screen = await open_trial(pilot, app, "t0005")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
        table = app.screen.query_one("#turns", LineTable)
        await wait_until(pilot, lambda: table.cursor_key is not None
                         and model.turns[int(table.cursor_key)].seq == t5["proposal"])


@pytest.mark.asyncio
async def test_the_header_counts_unresolved_high_and_a_dismissal_lowers_it(audited: Path) -> None:
    run_dir = audited / "demo-run"
    log = MessageLog()
    app = make_app(audited)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        await open_dashboard(pilot, app)
        assert "audit: 2 high, ⚖ 1 held for review" in header(app)
        trials = app.screen.query_one("#trials", LineTable)
        row = next(line for line in (trials.render_line(y).text for y in range(1, 13)) if "t0008" in line)
        assert "⚖ held" in row  # the trials table's review column
        screen = await open_trial(pilot, app, "t0004")
        finding = screen.highlighted_finding()
        assert finding is not None and finding["kind"] == "scorer_access"

        # X asks first: Esc writes nothing; an empty note is refused in the dialog
        await pilot.press("X")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("X")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, OrderScreen)
        assert "type the text first" in plain(app.screen.query_one("#order-error").content)
        assert not [e for e in events_of(run_dir) if e["kind"] == "audit.dismissed"]

        await pilot.press(*"eval.py is readable", "enter")
        await wait_until(pilot, lambda: bool(log.of(RRMAApp.DismissalRecorded)))
        [dismissed] = [e for e in events_of(run_dir) if e["kind"] == "audit.dismissed"]
        assert dismissed["actor"] == "human:carol" and dismissed["data"] == {
            "finding_seq": finding["seq"], "trial_id": "t0004", "by": "human:carol", "note": "eval.py is readable"}
        # the tail brings it back: the finding reads as dismissed, the header counts one high finding
        assert isinstance(app.screen, TrialScreen)
        await wait_until(pilot, lambda: "dismissed by human:carol" in plain(app.screen.query_one("#trial-content").content))
        assert "dismissed" in app.screen.query_one("#findings", LineTable).render_line(1).text
        assert "0 open of 1" in str(app.screen.query_one("#findings", LineTable).border_title)
        # dismissing it again is refused before any dialog
        await pilot.press("X")
        await pilot.pause()
        assert isinstance(app.screen, TrialScreen)
        await pilot.press("escape", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await wait_until(pilot, lambda: "audit: 1 high, ⚖ 1 held for review" in header(app))
    assert len([e for e in events_of(run_dir) if e["kind"] == "audit.dismissed"]) == 1


# ----------------------------------------------------------------------------- 80x24


def test_snapshot_trial_with_findings_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=8, hitl=True, pending_claims=1)
    write_findings(runs / "demo-run")
    app = RRMAApp(runs, runs / "demo-run", reviewer="carol", clock=fixed_clock, poll_interval=0.05)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                         and app.screen.session.model.turns_indexed)
        await pilot.pause()
        await pilot.press("v", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        await settle(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
