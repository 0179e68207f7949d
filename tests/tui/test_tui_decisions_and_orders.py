"""Who decided what, who ordered what, and what is left to do (issue 24, wrong today #8).

Before: the review queue's reviewed list hid the decision's reviewer and note; the runs list said `finished`
for a stopped run and a completed one alike; `h` `w` `i` on a run that had used all its trials suggested
`rrma-tui resume`, which then said there was nothing to resume; the steer modal started in the note, so
"to, Tab, note" swapped them; `rrma-tui show` listed no orders; sorting by score left the best off screen;
headless tables at 80 columns were hard-wrapped cell by cell and cut (`histo…`, `[1.01… 3.618…`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from make_run import START, fake_clock, make_run
from rich.table import Table
from scored_run import write_scored_run
from screen_text import flat, screen_lines
from test_tui_screens import open_dashboard
from tui_helpers import fixed_clock, wait_until

import cli.output
from cli.main import main as cli_main
from rrma.log.control import post_to_blackboard, send_steer
from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.dialogs import OrderScreen
from tui.screens.review import ReviewScreen
from tui.screens.runs import RunsScreen
from tui.widgets.line_table import LineTable

asyncio = pytest.mark.asyncio


def app_for(runs: Path, run: str | None) -> RRMAApp:
    return RRMAApp(runs, runs / run if run else None, reviewer="carol", clock=fixed_clock, poll_interval=0.05)


def review(run_dir: Path, trial: str, decision: str, reviewer: str, note: str) -> None:
    store = RunStore(run_dir)
    store.append("review", f"human:{reviewer}", {"trial_id": trial, "decision": decision, "reviewer": reviewer,
                                                 "note": note})
    store.close()


def notices(app: RRMAApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


@asyncio
async def test_the_reviewed_list_shows_decision_reviewer_and_note(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = write_scored_run(runs, "reviewed", [1.5, 2.5, 1.2])
    review(run_dir, "t0001", "approve", "carol", "checked the diff: a real gain")
    review(run_dir, "t0002", "reject", "bob", "within the noise of its seed")
    review(run_dir, "t0003", "flag", "dana", "ask about the scorer")
    app = app_for(runs, "reviewed")
    async with app.run_test(size=(160, 30)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("f", "f")  # to review -> flagged -> reviewed
        await pilot.pause(0.2)
        lines = screen_lines(app)
    rows = {m.group(1): line for line in lines if (m := re.match(r"^│\s*(t\d{4}) ", line))}
    assert set(rows) == {"t0001", "t0002", "t0003"}, "\n".join(lines)
    for tid, words in (("t0001", ("✔ approved", "carol", "checked the diff: a real gain")),
                       ("t0002", ("✘ rejected", "bob", "within the noise of its seed")),
                       ("t0003", ("⚑ flagged", "dana", "ask about the scorer"))):
        assert all(w in rows[tid] for w in words), rows[tid]


@asyncio
async def test_the_runs_list_tells_a_stopped_run_from_a_completed_one(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "completed", [1.5, 2.5])
    write_scored_run(runs, "halted", [1.5], reason="stopped")
    write_scored_run(runs, "cut-short", [1.5], reason="interrupted")
    app = app_for(runs, None)
    async with app.run_test(size=(120, 20)) as pilot:
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", LineTable)

        def statuses() -> dict[str, str]:
            return {key: [c if isinstance(c, str) else c.plain for c in table.render_row(key)][2] for key in table.rows}

        await wait_until(pilot, lambda: len(statuses()) == 3 and "reading…" not in statuses().values())
        assert statuses() == {"completed": "finished", "halted": "stopped", "cut-short": "interrupted"}


@asyncio
async def test_orders_on_a_run_with_nothing_to_resume_do_not_suggest_resume(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_scored_run(runs, "used-up", [1.5, 2.5])  # max_trials 2, both run: resume would do nothing
    write_scored_run(runs, "halted", [1.5], reason="stopped", task=None)
    app = app_for(runs, "used-up")
    async with app.run_test(size=(120, 30)) as pilot:
        dash = await open_dashboard(pilot, app)
        for key in ("h", "w", "i", "R"):
            app.clear_notifications()
            await pilot.press(key)
            await wait_until(pilot, lambda: bool(notices(app)))
            assert app.screen is dash, key  # no modal: nothing to order
            [said] = notices(app)
            assert "nothing to resume" in said and "R resumes" not in said and "rrma-tui resume" not in said, (key, said)
            assert "used all 2 of its trials" in said, said
        await pilot.press("m")  # a post is still kept in the log; the modal says nobody reads it
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        text = flat(screen_lines(app))
        assert "nothing to resume" in text and "R resumes" not in text and "Every agent" not in text, text
    app = app_for(runs, "halted")
    async with app.run_test(size=(120, 30)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("h")
        await wait_until(pilot, lambda: bool(notices(app)))
        assert "R resumes it" in notices(app)[-1], notices(app)  # a stopped run can be resumed: say how


@asyncio
async def test_the_steer_modal_asks_to_first(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = write_scored_run(runs, "halted", [1.5], reason="stopped")  # resumable: a note reaches its agents
    app = app_for(runs, "halted")
    async with app.run_test(size=(120, 30)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, OrderScreen))
        await pilot.press(*"ann", "tab", *"smaller steps", "enter")  # to, Tab, the note: as read top to bottom
        events = lambda: [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]  # noqa: E731
        await wait_until(pilot, lambda: events()[-1]["kind"] == "agent.steer")
    assert events()[-1]["data"] == {"text": "smaller steps", "by": "human:carol", "to": ["ann"]}


@asyncio
async def test_sorting_by_score_keeps_the_best_on_screen(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs, "long-run", trials=60)
    app = app_for(runs, "long-run")
    async with app.run_test(size=(80, 24)) as pilot:
        dash = await open_dashboard(pilot, app)
        state = dash.state
        scored = [rec for rec in state.agent_trials() if rec.score is not None and rec.status == "ok"]
        best = min(scored, key=lambda rec: rec.score or 0.0).trial_id  # a minimize run
        worst = max(scored, key=lambda rec: rec.score or 0.0).trial_id
        dash.query_one("#trials", LineTable).move_to(worst)  # the cursor where a person left it: a poor trial
        await pilot.pause(0.1)
        await pilot.press("s")  # sort: score
        await pilot.pause(0.2)
        assert dash.sort_key == "score"
        lines = screen_lines(app)
        assert any(line.startswith("│") and best in line[:10] for line in lines), f"{best} is off screen:\n" + \
            "\n".join(lines)
        assert dash.query_one("#trials", LineTable).cursor_key == best
    assert run_dir.exists()


def test_show_lists_the_orders_who_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run_dir = write_scored_run(runs, "ordered", [1.5, 2.5], finished=False)
    store = RunStore(run_dir)
    with fake_clock(START):
        store.append("run.control", "human:carol", {"action": "pause", "by": "human:carol", "reason": "check the seed"})
        store.append("run.control", "human:carol", {"action": "continue", "by": "human:carol", "reason": ""})
    store.close()
    send_steer(run_dir, "try smaller steps", "dana", ["ann"])
    post_to_blackboard(run_dir, "the sweep is done", "carol")
    with fake_clock(START):
        store = RunStore(run_dir)
        store.append("run.control", "human:bob", {"action": "stop", "by": "human:bob", "reason": "out of budget"})
        store.close()
    assert cli_main(["show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("orders ("):].splitlines()
    assert "pause by human:carol: check the seed" in lines[1], out
    assert "continue by human:carol (no reason given)" in lines[2], out
    assert "steer by human:dana to ann: try smaller steps" in lines[3], out
    assert "post by human:carol: the sweep is done" in lines[4], out
    assert "stop by human:bob: out of budget" in lines[5], out


def test_headless_tables_at_80_columns_are_neither_wrapped_nor_cut(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    hypothesis = "raise the learning rate: the loss curve is still falling steeply at the end"
    run_dir = write_scored_run(runs, "narrow", [1.5, 2.5], hypotheses=[hypothesis, hypothesis])
    console = cli.output.console
    width = console.width
    console.width = 80
    try:
        with console.capture() as captured:
            assert cli_main(["show", str(run_dir)]) == 0
            arms = Table("arm", "seeds done", "final best", "gain over baseline", "trials", "tokens", "USD")
            arms.add_row("history", "5/5", "2.1925 [1.0186, 3.6183]", "5.2276 [4.1866, 6.3396]", "60", "0", "0.0000")
            cli.output.print_table(arms)
    finally:
        console.width = width
    out = captured.get()
    assert "…" not in out, out
    assert f"t0001 ↑: parent base-0 · agent ann · status ok · score 1.5 · Δσ +500.00 · review unreviewed · " \
           f"hypothesis {hypothesis[:70]}" in out, out  # one line per trial, whole (soft-wrapped by the terminal)
    assert "history: seeds done 5/5 · final best 2.1925 [1.0186, 3.6183] · gain over baseline 5.2276 " \
           "[4.1866, 6.3396]" in out, out
