"""The trace on a sampled model's long rambling reply (issue 32): collapsed by characters (the reply is one long
line), a line on its tokens (count, mean and lowest logprob, the prompt's cut), the per-token logprobs on ``#``,
the prompt's messages collapsed, and none of the ids or logprobs printed as JSON."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from make_run import fake_clock, task_snapshot
from rich.console import Console
from textual.widgets import Static
from tui_helpers import fixed_clock, wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.dashboard import DashboardScreen
from tui.screens.trace import TraceScreen
from tui.widgets.line_table import LineTable
from tui.widgets.turn_view import clip, logprob_table

# one line of ~3,900 characters, as SmolLM2 writes when it explains instead of answering; KIWI only at its end
RAMBLE = " ".join(["To lower the loss we could consider changing the learning rate of the model,"] * 50) + " KIWI"
IDS = [(17 * k) % 49152 for k in range(200)]
LOGPROBS = [-0.5 - (k % 7) * 0.25 for k in range(200)]
LOGPROBS[16] = -9.75  # the lowest: token 17


def write_run(runs: Path) -> Path:
    run_dir = runs / "sampled-run"
    store = RunStore(run_dir, create=True)
    with fake_clock():
        store.append("run.started", "harness", {
            "run_id": "sampled-run", "task_name": "demo", "seed": 0, "versions": {},
            "task": task_snapshot("demo", hitl=False, max_trials=1, agents=["smol"])})
        prompt = [{"role": "system", "content": "Minimise loss.\nReply with the constants to change."},
                  {"role": "user", "content": "score now: 3.2\nA = 1.0"},
                  {"role": "assistant", "content": "A = 0.4"},
                  {"role": "user", "content": "loss now: 7.39 (lower is better)\nX = 0.0"}]
        store.append("agent.turn", "agent:smol", {
            "agent": "smol", "role": "assistant", "step": 1, "text": RAMBLE, "model": "/store/smollm2",
            "tokens_in": 180, "tokens_out": 200, "latency_s": 4.0,
            "args": {"format": "rrma-policy/1", "prompt": "rrma-local/1", "stop": ["\n\n"], "messages": prompt,
                     "completion_ids": IDS, "logprobs": LOGPROBS, "prompt_truncated_tokens": 12}})
        store.append("run.finished", "harness", {"reason": "max_trials", "summary": {}})
    store.close()
    return run_dir


def plain(content: object) -> str:
    console = Console(width=110, record=True, color_system=None)
    console.print(content)
    return console.export_text()


@pytest.mark.asyncio
async def test_a_long_sampled_reply_is_collapsed_with_token_counts_and_logprobs_on_demand(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    app = RRMAApp(runs, write_run(runs), reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.session.loaded
                         and app.screen.session.model is not None and app.screen.session.model.turns_indexed)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
        trace = app.screen
        assert isinstance(trace, TraceScreen)
        assert len(trace.query_one("#turns", LineTable).rows) == 1

        def detail() -> str:
            return " ".join(plain(trace.query_one("#turn-text", Static).content).split())

        shown = detail()
        # collapsed by characters: the reply's start, not its end; the hidden part counted
        assert "To lower the loss" in shown and "KIWI" not in shown
        assert "2.7k more characters (space expands)" in shown
        assert len(shown) < len(RAMBLE)
        # its tokens: count, mean and lowest logprob, the prompt's cut; the logprobs are not printed yet
        mean = sum(LOGPROBS) / len(LOGPROBS)
        assert f"sampled 200 tokens · logprob mean {mean:.2f}, lowest -9.75 (token 17) · prompt cut by 12 tokens" in shown
        assert "# shows each token's logprob" in shown and "#17" not in shown
        # the prompt's messages (the worked example included), then the other details; no id list as JSON
        assert "prompt (4 messages)" in shown and "[assistant] A = 0.4" in shown
        assert '"prompt": "rrma-local/1"' in shown and "completion_ids" not in shown and str(IDS[5]) not in shown

        await pilot.press("number_sign")  # every token's logprob
        shown = detail()
        assert "logprobs (token id: log-probability)" in shown and "# hides the logprobs" in shown
        assert f"#17 {IDS[16]}: -9.750" in shown and f"#200 {IDS[199]}:" in shown

        await pilot.press("space")  # expanded: the whole reply
        assert "KIWI" in detail() and "more characters" not in detail()
        await pilot.press("number_sign")
        assert "#17" not in detail()


@pytest.mark.parametrize(("text", "hidden"), [
    ("short", 0),  # nothing to hide
    ("x" * 1300, 0),  # just over the limit: hiding 100 characters saves nothing
    ("word " * 400, 801),  # cut at the last space before 1,200 characters (index 1199)
    ("y" * 5000, 3800),  # no space at all: cut at the limit
], ids=["short", "just-over", "words", "one-word"])
def test_clip(text: str, hidden: int) -> None:
    shown, cut = clip(text, expanded=False)
    assert cut == hidden and shown + text[len(shown):] == text
    assert clip(text, expanded=True) == (text, 0)


def test_logprob_table_lines() -> None:
    table = logprob_table(IDS[:13], LOGPROBS[:13]).splitlines()
    assert len(table) == math.ceil(13 / 6) and table[0].startswith("#1 ") and "#13" in table[-1]
