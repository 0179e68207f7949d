"""A real Coq bench stopped early counts against all of its theorems (issue 35, items 1 and 5).

The issue: "stopped after 4 trials of a 10-theorem bench it says `1 of 2 theorems solved`", and the live
difficulty table counted the theorems not started as ``unknown``. Here the Coq bench (the one loop, the
per-theorem policy, a real coqtop) runs a file of ten theorems, each with its difficulty comment, in a process of
its own with ``--trials 4``; then the run's ``run.started`` must name all ten with their difficulties (read back
from events.jsonl, against the file's own comments), and the dashboard's header, the runs list and the theorems
view must count against the ten.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from screen_text import screen_lines
from test_tui_screens import open_dashboard
from tui_helpers import wait_until

from tui.app import RRMAApp
from tui.screens.runs import RunsScreen
from tui.screens.theorems import TheoremsScreen
from tui.widgets.line_table import LineTable

REPO = Path(__file__).resolve().parents[2]
LEVELS = ["easy", "easy", "medium", "hard", "easy", "medium", "hard", "easy", "medium", "hard"]
SOURCE = "Require Import Arith Lia.\n\n" + "\n".join(
    f"(* difficulty: {level} *)\nTheorem t{i}_add : forall n : nat, n + {i} = {i} + n.\nProof. intros n. lia. Qed.\n"
    for i, level in enumerate(LEVELS))


@pytest.mark.asyncio
@pytest.mark.skipif(shutil.which("coqtop") is None, reason="Coq (coqtop) is not installed")
async def test_a_coq_bench_stopped_after_four_trials_counts_all_ten_theorems(tmp_path: Path) -> None:
    source = tmp_path / "ten.v"
    source.write_text(SOURCE)
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "bench", "coq", "--source", str(source), "--runs", str(runs), "--quiet",
         "--agents", "1", "--agent", "portfolio", "--trials", "4", "--check-seconds", "10"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    [run_dir] = [p for p in runs.iterdir() if (p / "events.jsonl").exists()]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    started = events[0]
    assert started["kind"] == "run.started", done.stdout
    names = re.findall(r"^Theorem (\w+)", SOURCE, re.M)
    recorded = started["data"]["theorems"]
    assert [t["name"].rpartition(".")[2] for t in recorded] == names, recorded  # before: not recorded at all
    assert [t["difficulty"] for t in recorded] == LEVELS
    proved = {e["data"]["trial_id"] for e in events if e["kind"] == "trial.finished" and e["data"]["status"] == "ok"}
    solved = {e["data"]["theorem"] for e in events if e["kind"] == "trial.proposed" and e["data"]["trial_id"] in proved}
    assert events[-1]["kind"] == "run.finished" and 1 <= len(solved) < 10, done.stdout

    app = RRMAApp(runs, run_dir, reviewer="carol", poll_interval=0.05)
    async with app.run_test(size=(160, 40)) as pilot:
        await open_dashboard(pilot, app)
        header = "\n".join(screen_lines(app)[:3])
        assert f"proofs: {len(solved)}/10 solved" in header, header  # before: "1 of 2 theorems solved"
        await pilot.press("O")
        await wait_until(pilot, lambda: isinstance(app.screen, TheoremsScreen))
        screen = app.screen
        assert isinstance(screen, TheoremsScreen)
        await wait_until(pilot, lambda: bool(screen.query_one("#th-difficulty", LineTable).rows))
        totals = {row.difficulty: row.total for row in screen.figures.difficulty} if screen.figures else {}
        assert totals == {"easy": 4, "medium": 3, "hard": 3, "all": 10}, totals  # before: unknown for the rest
        await pilot.press("escape", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, RunsScreen))
        await wait_until(pilot, lambda: any(f"{len(solved)}/10 solved" in line for line in screen_lines(app)))
