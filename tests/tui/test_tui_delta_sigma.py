"""Δσ means one thing in every view (issue 24, wrong today #6): against the baseline, in units of the baseline's σ.

Before, the TUI's trials table gave Δσ against the baseline (+599σ) while `rrma-tui show` and the headless
progress lines printed each trial.finished's own delta_sigma, against the best at the time (+487.80), all
under the same name. Now the three give RunState.delta_sigma_of for every scored trial, and each says what it
is: the dashboard's header (`Δσ +15.0 vs baseline 1 (σ 0.1)`), show's line above its table, the headless
baseline line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scored_run import write_scored_run
from screen_text import screen_lines
from test_tui_screens import open_dashboard
from tui_helpers import fixed_clock

from cli.main import main as cli_main
from cli.runs import Progress
from rrma.log.store import RunStore
from tui.app import RRMAApp

# the baseline: mean 1.0, σ 0.1; base-0 (0.9) is the first best, so "against the best at the time" differs
BASELINE = (0.9, 1.0, 1.1)
SCORES = [1.5, 1.2, 2.5, 0.9, None]
EXPECTED = {"t0001": 5.0, "t0002": 2.0, "t0003": 15.0, "t0004": -1.0}  # (score - 1.0) / 0.1


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_scored_run(tmp_path / "runs", "sigmas", SCORES, baseline=BASELINE)


def test_show_gives_delta_sigma_against_the_baseline_and_says_so(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "┃ trial" in line)
    column = [cell.strip() for cell in header.split("┃")].index("Δσ")
    shown = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        trial = cells[1].split()[0] if len(cells) > column and cells[1] else ""
        if trial in EXPECTED:
            shown[trial] = float(cells[column])
    assert shown == pytest.approx(EXPECTED), out
    assert "Δσ: against the baseline (1), in units of its σ (0.1)" in out, out
    assert re.search(r"delta\s+│ 1\.5 against the baseline \(Δσ \+15\.00\)", out), out  # the best's, in the summary


def test_headless_progress_gives_the_same_delta_sigma(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(quiet=False)
    for event in RunStore(run_dir).scan().events:  # what the loop hands it, in order (a resume: from the start too)
        progress(event)
    out = capsys.readouterr().out
    shown = {m.group(1): float(m.group(2)) for m in re.finditer(r"(t\d{4}) ✓ ok .*\(Δσ ([-+][\d.]+)\)", out)}
    assert shown == pytest.approx(EXPECTED), out
    assert "Δσ: against this baseline, in units of its σ" in out, out
    assert re.search(r"t0005 ☠ crash\s*$", out, re.M), out  # no Δσ without a score


@pytest.mark.asyncio
async def test_the_dashboard_table_and_header_agree(run_dir: Path) -> None:
    app = RRMAApp(run_dir.parent, run_dir, reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.pause(0.2)
        lines = screen_lines(app)
    assert "Δσ +15.0 vs baseline 1 (σ 0.1)" in lines[1], lines[1]  # the header names what the column means
    shown = {}
    for line in lines:
        row = re.match(r"^│.?(t\d{4}) .*?([-+][\d.]+)σ", line)
        if row is not None:
            shown[row.group(1)] = float(row.group(2))
    assert shown == pytest.approx(EXPECTED), "\n".join(lines)
