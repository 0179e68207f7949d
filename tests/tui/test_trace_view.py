"""The trace as Inspect AI's viewer draws one (issue 24): a tool call and its result as one block with
the right labels, each turn's time and the time since the agent's previous turn (or its latency),
tokens and cost per step, trial and agent, the agent's prose as markdown, long outputs collapsed
(space / e / z), search with a match count, highlights and n/N, and the 80x24 screen."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from make_run import START, fake_clock, task_snapshot
from rich.text import Text
from textual.widgets import Static
from tui_helpers import MessageLog, fixed_clock, settle, wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.trace import TraceScreen
from tui.widgets.line_table import LineTable

PLAN = """## Plan

The loss is still falling at the end, so the **learning rate** is too low (ZEBRA).

- raise `LEARNING_RATE` to 0.02
- keep the batch size

```python
LEARNING_RATE = 0.02
```"""
LOG_LINES = [f"step {k * 25:4d} loss {3.0 - k * 0.02:.3f}" for k in range(40)] + ["val_loss: 2.2100 ZEBRA"]
LONG_RESULT = "\n".join(LOG_LINES)  # 41 lines: 12 shown, 29 hidden (the one match among them)


def write_run(runs: Path, *, finished: bool = True) -> Path:
    """A finished run: a baseline, alice's trial t0001 (markdown plan, a long command output, a short file read,
    her proposal) and bob's trial t0002 (one turn), with tokens, costs and latencies; events 3 s apart."""
    run_dir = runs / "trace-run"
    store = RunStore(run_dir, create=True)
    with fake_clock():
        store.append("run.started", "harness", {
            "run_id": "trace-run", "task_name": "tiny-train", "seed": 0, "versions": {"python": "3.11.7"},
            "task": task_snapshot("tiny-train", hitl=False, max_trials=2, agents=["alice", "bob"]),
        })
        files = {"train.py": "LEARNING_RATE = 0.01\n"}
        manifest = {path: store.put_blob(text) for path, text in files.items()}
        store.append_many([
            ("trial.proposed", "harness", {
                "trial_id": "base-0", "parent": None, "agent": "baseline", "hypothesis": "baseline", "baseline": True,
                "proposal_blob": store.put_json_blob({"hypothesis": "baseline", "edits": []}),
                "manifest_blob": store.put_json_blob(manifest)}),
            ("trial.started", "harness", {"trial_id": "base-0"}),
            ("trial.finished", "oracle", {"trial_id": "base-0", "status": "ok", "score": 2.4, "seconds": 40.0}),
            ("baseline.measured", "harness", {"trial_ids": ["base-0"], "scores": [2.4], "mean": 2.4, "sigma": 0.01,
                                              "floor": 0.02}),
        ])

        def turn(agent: str, role: str, **data: Any) -> tuple[str, str, dict[str, Any]]:
            return ("agent.turn", f"agent:{agent}", {"agent": agent, "role": role, "model": "claude-sonnet-4", **data})

        def trial(tid: str, agent: str) -> list[tuple[str, str, dict[str, Any]]]:
            blob = store.put_blob("LEARNING_RATE = 0.02\n")
            return [
                ("trial.proposed", f"agent:{agent}", {
                    "trial_id": tid, "parent": "base-0", "agent": agent, "hypothesis": "raise the learning rate",
                    "proposal_blob": store.put_json_blob({"hypothesis": "raise", "edits": []}),
                    "edits": [{"path": "train.py", "blob": blob}],
                    "manifest_blob": store.put_json_blob({"train.py": blob})}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": 2.41, "seconds": 30.0}),
            ]

        store.append_many([
            turn("alice", "assistant", text=PLAN, tokens_in=1800, tokens_out=240, latency_s=2.5, cost_usd=0.009,
                 args={"stop_reason": "tool_use", "tool_calls": ["run_command", "read_file"]}),
            turn("alice", "tool_call", tool="run_command", args={"command": "python train.py"}),
            turn("alice", "tool_result", tool="run_command", result=LONG_RESULT, args={"exit_code": 0}),
            turn("alice", "tool_call", tool="read_file", args={"path": "train.py"}),
            turn("alice", "tool_result", tool="read_file", result="LEARNING_RATE = 0.01", text="error"),
            turn("alice", "assistant", trial_id="t0001", text="Proposing t0001.", tokens_in=900, tokens_out=120,
                 latency_s=1.25, cost_usd=0.004),
            *trial("t0001", "alice"),
            turn("bob", "assistant", trial_id="t0002", text="Same idea, ZEBRA too.", tokens_in=500, tokens_out=50,
                 cost_usd=0.002),
            *trial("t0002", "bob"),
        ])
        if finished:
            store.append("run.finished", "harness", {"reason": "max_trials", "summary": {}})
    store.close()
    return run_dir


def plain(content: object) -> str:
    from rich.console import Console

    console = Console(width=100, record=True, color_system=None)
    console.print(content)
    return console.export_text()


async def open_trace(pilot, app: RRMAApp) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                     and app.screen.session.model is not None and app.screen.session.model.turns_indexed)
    await pilot.press("t")
    await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
    trace = app.screen
    assert isinstance(trace, TraceScreen)
    return trace


def make_app(tmp_path: Path, *, finished: bool = True) -> RRMAApp:
    runs = tmp_path / "runs"
    run_dir = write_run(runs, finished=finished)
    return RRMAApp(runs, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


@pytest.mark.asyncio
async def test_call_and_result_one_block_times_usage_markdown_and_folding(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        trace = await open_trace(pilot, app)
        table = trace.query_one("#turns", LineTable)
        assert len(table.rows) == 7 and table.cursor == 0  # a finished run's trace opens at its first step

        def detail() -> str:
            return plain(trace.query_one("#turn-text", Static).content)

        first = detail()
        # markdown: a heading and bold without their marks, a bullet list, the code block's text
        assert "Plan" in first and "## Plan" not in first and "**" not in first
        assert "• raise LEARNING_RATE to 0.02" in first and "LEARNING_RATE = 0.02" in first
        # time, latency; the step's tokens and cost; its trial's and its agent's totals (2 assistant turns of t0001)
        assert "at 09:00:" in first and "latency 2.5s" in first
        assert "tokens 1.8k in / 240 out, $0.0090" in first
        assert "trial t0001: 2.7k in / 360 out, $0.0130" in first and "agent alice: 2.7k in / 360 out, $0.0130" in first
        assert "details" in first and "call arguments" not in first  # an assistant's args are not a call's

        await pilot.press("down")  # the call: its arguments, then its result, collapsed
        call = detail()
        assert "call run_command" in call and '"command": "python train.py"' in call
        assert "result · 3.0s" in call  # how long the tool took
        assert "+3.0s since the agent's previous turn" in call
        assert "step    0 loss 3.000" in call and LOG_LINES[11] in call and LOG_LINES[12] not in call
        assert "… 29 more lines  (space expands)" in call
        assert "result details" in call and '"exit_code": 0' in call
        assert call.index("call run_command") < call.index("result · ") < call.index("result details")
        assert "call arguments" not in call

        await pilot.press("down")  # the result's row shows the same block, the call first
        result = detail()
        assert "tool_result" in result.splitlines()[0]
        assert "call run_command" in result and '"command": "python train.py"' in result
        assert result.index("call run_command") < result.index("result · 3.0s") < result.index("… 29 more lines")
        assert "call arguments" not in result  # issue 24, wrong today #9: a result labelled as the call's arguments

        await pilot.press("space")  # expand this block (the call and its result together)
        assert LOG_LINES[-1] in detail() and "more lines" not in detail()
        await pilot.press("up")
        assert LOG_LINES[-1] in detail()  # the call's row: the same block, expanded
        await pilot.press("space")
        assert "… 29 more lines" in detail() and LOG_LINES[-1] not in detail()
        await pilot.press("e")  # every step expanded
        assert LOG_LINES[-1] in detail()
        await pilot.press("down", "space")  # one folded while all are expanded
        assert "… 29 more lines" in detail()
        await pilot.press("z")
        assert "… 29 more lines" in detail()

        await pilot.press("down", "down")  # the read_file result: the tool failed
        failed = detail()
        assert "call read_file" in failed and '"path": "train.py"' in failed
        assert "result (error) · 3.0s" in failed

        await pilot.press("end")  # bob: no latency recorded, the time since his previous turn (none: none shown)
        bob = detail()
        assert "trial t0002: 500 in / 50 out, $0.0020" in bob and "agent bob: 500 in / 50 out, $0.0020" in bob
        assert "latency" not in bob and "since its previous turn" not in bob
        assert app.return_code is None


@pytest.mark.asyncio
async def test_search_counts_highlights_and_moves_with_n_and_shift_n(tmp_path: Path) -> None:
    log = MessageLog()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        trace = await open_trace(pilot, app)
        table = trace.query_one("#turns", LineTable)
        title = trace.query_one("#trace-title", Static)

        await pilot.press("slash", *"zebra", "enter")
        await wait_until(pilot, lambda: bool(log.of(TraceScreen.SearchDone)))  # type: ignore[arg-type]
        # the plan (0), the run_command call (1: through its result) and its result (2), bob's turn (6)
        assert trace.matches == [0, 1, 2, 6]
        assert table.cursor_key == "1" and "/zebra 2 of 4" in plain(title.content)  # the first match after the cursor
        await pilot.press("n")
        assert table.cursor_key == "2" and "3 of 4" in plain(title.content)
        assert "… 29 more lines (1 match in them)" in plain(trace.query_one("#turn-text", Static).content)  # the match it hides
        await pilot.press("n")
        assert table.cursor_key == "6" and "4 of 4" in plain(title.content)
        await pilot.press("n")  # round the end
        assert table.cursor_key == "0" and "1 of 4" in plain(title.content)
        await pilot.press("N")
        assert table.cursor_key == "6"
        await pilot.press("N", "N")
        assert table.cursor_key == "1"
        await pilot.press("down", "down")  # not on a match: the count alone
        assert "4 matches" in plain(title.content)

        style = trace._match_style()
        row = trace._row("6")[-1]  # the list's text column: the match highlighted
        assert isinstance(row, Text)
        assert [row.plain[s.start:s.end] for s in row.spans if s.style == style] == ["ZEBRA"]
        await pilot.press("end")
        content = trace.query_one("#turn-text", Static).content
        texts = [r for r in content.renderables if isinstance(r, Text) and "ZEBRA" in r.plain]  # type: ignore[union-attr]
        assert texts and any(t.plain[s.start:s.end] == "ZEBRA" and s.style == style for t in texts for s in t.spans)

        await pilot.press("slash", *"qqq", "enter")
        await wait_until(pilot, lambda: trace.matches == [])  # type: ignore[arg-type]
        assert "no match" in plain(title.content)
        assert app.return_code is None


def test_snapshot_trace_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_trace(pilot, pilot.app)
        await pilot.press("down")  # the run_command call and its (collapsed) result
        await settle(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=run_before)


@pytest.mark.asyncio
async def test_a_live_call_gets_its_result_and_the_match_count_grows(tmp_path: Path) -> None:
    app = make_app(tmp_path, finished=False)
    run_dir = tmp_path / "runs" / "trace-run"
    async with app.run_test(size=(120, 40)) as pilot:
        trace = await open_trace(pilot, app)
        table = trace.query_one("#turns", LineTable)
        await pilot.press("slash", *"zebra", "enter")
        await wait_until(pilot, lambda: trace.matches == [0, 1, 2, 6])  # type: ignore[arg-type]
        await pilot.press("end")  # the newest turn: the list follows the run

        def detail() -> str:
            return plain(trace.query_one("#turn-text", Static).content)

        def append(role: str, at_s: float, **data: Any) -> None:
            store = RunStore(run_dir)
            with fake_clock(START + timedelta(minutes=5, seconds=at_s)):
                store.append("agent.turn", "agent:bob", {"agent": "bob", "role": role, **data})
            store.close()

        append("tool_call", 0, tool="grep", args={"pattern": "zebra"})
        await wait_until(pilot, lambda: "call grep" in detail())  # type: ignore[arg-type]
        assert "(no result recorded yet)" in detail() and table.cursor_key == "7"
        await wait_until(pilot, lambda: trace.matches == [0, 1, 2, 6, 7])  # type: ignore[arg-type]
        append("tool_result", 4.5, tool="grep", result="train.py:1: # ZEBRA")
        await wait_until(pilot, lambda: "train.py:1: # ZEBRA" in detail())  # type: ignore[arg-type]
        text = detail()
        assert text.index("call grep") < text.index("result · 4.5s") < text.index("train.py:1")
        await wait_until(pilot, lambda: trace.matches == [0, 1, 2, 6, 7, 8])  # type: ignore[arg-type]
        assert table.cursor_key == "8"  # a recount does not move the cursor (it follows the run)
        assert app.return_code is None
