"""The trial view follows a running trial's output live (``tail -f``; issue 24).

A run whose last trial is running: its events written by hand, its live-output file written by a
real :class:`rrma.contain.live.LiveWriter` (what spawn uses) at the path the executor uses. The
trial view (Pilot, 80x24) shows the lines and the header ``following live output (N bytes)``; new
lines appear with no key pressed; an escape sequence in the output is shown filtered; when the
writer lets go the header says ``not live``; when the trial finishes the view shows the stored log.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run
from screen_text import flat, screen_lines
from test_tui_screens import make_app, open_dashboard
from textual.widgets import Static
from tui_helpers import plain, wait_until

from rrma.contain.live import LiveWriter
from rrma.log.store import RunStore
from tui.screens.trial import LIVE_LINES, TrialScreen, live_lines
from tui.widgets.line_table import LineTable

HOSTILE = b"\x1b]2;pwned\x07\x1b[2J\x1b[7mAPPROVED BY alice\x1b[0m\n"


def running_run(runs: Path) -> Path:
    """Four finished trials, then t0005 proposed and started, never finished (yet)."""
    run_dir = make_run(runs, "tail-run", trials=4, finished=False)
    store = RunStore(run_dir)
    blob = store.put_blob("LEARNING_RATE = 0.2\n")
    store.append_many([
        ("trial.proposed", "agent:alice", {
            "trial_id": "t0005", "parent": "base-0", "agent": "alice", "hypothesis": "a slower warmup",
            "proposal_blob": store.put_json_blob({"hypothesis": "a slower warmup", "edits": []}),
            "edits": [{"path": "train.py", "blob": blob}], "manifest_blob": store.put_json_blob({"train.py": blob}),
        }),
        ("trial.started", "harness", {"trial_id": "t0005"}),
    ])
    store.close()
    return run_dir


def body(app: Any) -> str:
    """The trial view's text: the live pane pinned under the body while the trial runs (its head and lines), then
    the body."""
    screen = app.screen
    assert isinstance(screen, TrialScreen)
    pane = ""
    if screen.query_one("#live-pane").display and screen.query_one("#live-pane").has_class("-running"):
        pane = (plain(screen.query_one("#live-head", Static).content, width=78)
                + plain(screen.query_one("#live-text", Static).content, width=78))
    return pane + plain(screen.query_one("#trial-content", Static).content, width=78)


async def until(pilot: Any, predicate: Callable[[], bool]) -> None:
    await wait_until(pilot, predicate)


@pytest.mark.asyncio
async def test_the_trial_view_follows_a_running_trials_output_and_then_shows_the_record(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    store = RunStore(run_dir)
    live = store.live_output_path("t0005")
    live.parent.mkdir(parents=True)
    writer = LiveWriter(live, 10**6)
    assert writer.refused is None
    writer.write(b"step 100 loss 2.71\n")
    app = make_app(runs, "tail-run")
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            dash = await open_dashboard(pilot, app)
            dash.query_one("#trials", LineTable).move_to("t0005")
            await pilot.press("enter")
            assert isinstance(app.screen, TrialScreen) and app.screen.trial_id == "t0005"
            await until(pilot, lambda: "step 100 loss 2.71" in body(app))
            assert "following live output (19 bytes)" in body(app)

            # new output appears with no key pressed (the view's timer reads the file)
            writer.write(b"step 200 loss 2.64\n")
            await until(pilot, lambda: "step 200 loss 2.64" in body(app))
            assert "following live output (38 bytes)" in body(app)

            # a hostile program's escape sequences: their printable rest shows, the controls never
            writer.write(HOSTILE)
            await until(pilot, lambda: "APPROVED BY alice" in body(app))
            await pilot.pause()
            lines = screen_lines(app)  # type: ignore[arg-type]
            text = "\n".join(lines)
            assert "\x1b" not in text and "\x07" not in text
            assert "]2;pwned" in flat(lines) and "APPROVED BY alice" in flat(lines)

            # at 80x24 the section is on screen under the (empty) outcome, its header and lines whole
            size = live.stat().st_size
            header = next(line for line in lines if "following live output" in line)
            assert f"following live output ({size} bytes)" in header and "…" not in header
            assert any(line.strip().startswith("step 100 loss 2.71") for line in lines)
            assert any(line.strip().startswith("step 200 loss 2.64") for line in lines)
            assert all(len(line) <= 80 for line in lines)

            # the program ends: the file stays until the outcome is recorded, and never reads as live
            writer.close()
            await until(pilot, lambda: "not live" in body(app))
            assert "following live output" not in body(app) and "step 200 loss 2.64" in body(app)

            # the trial finishes: the stored log is the record, the live file is not read any more
            writer_store = RunStore(run_dir)
            writer_store.append("trial.finished", "oracle", {
                "trial_id": "t0005", "status": "ok", "score": 2.31, "feedback": "val_loss: 2.31",
                "log_blob": writer_store.put_blob("step 100 loss 2.71\nval_loss: 2.31 (stored)\n"), "seconds": 30.0,
            })
            writer_store.close()
            await until(pilot, lambda: "val_loss: 2.31 (stored)" in body(app))
            assert "log tail" in body(app) and "live output" not in body(app) and "APPROVED" not in body(app)
    finally:
        writer.close()
        store.close()


@pytest.mark.asyncio
async def test_a_leftover_of_a_dead_harness_is_not_shown_as_live(tmp_path: Path) -> None:
    """The run log says t0005 runs, but nothing writes its live file (the harness died): ``not live``."""
    runs = tmp_path / "runs"
    run_dir = running_run(runs)
    live = RunStore(run_dir).live_output_path("t0005")
    live.parent.mkdir(parents=True)
    live.write_text("step 100 loss 2.71\n")  # what a killed harness left; no lock is held
    app = make_app(runs, "tail-run")
    async with app.run_test(size=(80, 24)) as pilot:
        dash = await open_dashboard(pilot, app)
        dash.query_one("#trials", LineTable).move_to("t0005")
        await pilot.press("enter")
        await until(pilot, lambda: "step 100 loss 2.71" in body(app))
        assert "output so far (19 bytes; not live" in body(app) and "following" not in body(app)


def test_live_lines_show_what_a_terminal_would_and_drop_controls() -> None:
    text = "".join(f"line {i}\n" for i in range(50)) + "epoch 1 10%\repoch 1 50%\repoch 1 90%\r\n" + "\x1b[31mred\x1b[0m\n"
    shown = live_lines(text)
    assert len(shown) == LIVE_LINES and shown[-2] == "epoch 1 90%" and shown[-1] == "[31mred[0m"
    assert shown[0] == f"line {50 - LIVE_LINES + 2}"
    assert live_lines("x" * 5000)[0].startswith("…") and len(live_lines("x" * 5000)[0]) == 2001
