"""A trial's output must not drive the reviewer's terminal (tui/terminal.py).

The attack, in a real terminal (tmux): a trial program prints an OSC title sequence, a clear-screen
and a reverse-video "APPROVED BY alice" into its log. Shown in the trial view, before the filter,
it retitled the window and wrote that line at the top of a cleared screen above the review keys.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from tmux_session import Tmux

from tui.terminal import ControlCharFilter, without_controls

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "note \x1b]2;PWNED-TITLE\x1b\\ \x1b[2J\x1b[H\x1b[7m APPROVED BY alice \x1b[0m \x9b31m end"


def test_the_filter_drops_control_characters_and_nothing_else() -> None:
    bold = Style(bold=True)
    clean = [Segment("plain text, unicode ✓ σ", bold), Segment("  ")]
    assert ControlCharFilter().apply(clean, Color(0, 0, 0)) is clean  # the usual case costs no copy
    out = ControlCharFilter().apply([Segment(HOSTILE, bold), Segment("ok"), Segment("\x1b[?25l", None, [(1,)])],
                                    Color(0, 0, 0))
    assert out[0] == Segment("note ]2;PWNED-TITLE\\ [2J[H[7m APPROVED BY alice [0m 31m end", bold)
    assert out[1] == Segment("ok")
    assert out[2].text == "\x1b[?25l" and out[2].control  # Textual's own control segments pass
    assert without_controls("a\tb\x00c\x7fd\x85e") == "abcde"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_a_trials_escape_sequences_do_not_reach_the_reviewers_terminal(tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text().replace(
        "import math\n", f"import math\nimport sys\nsys.stdout.write({HOSTILE + chr(10)!r})\n", 1))
    runs = tmp_path / "runs"
    made = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "run", str(task_dir / "task.yaml"),
                           "--runs", str(runs), "--set", "budget.max_trials=1", "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    (run_dir,) = runs.iterdir()
    session = f"rrma-{uuid.uuid4().hex[:8]}"
    tmux = Tmux(session, tmp_path / "exit-code")
    # the control: this terminal does obey the sequence (printed by a plain shell, it retitles the pane)
    tmux.run("new-session", "-d", "-s", session, "-x", "120", "-y", "40",
             f"printf '\\033]2;CONTROL-TITLE\\033\\\\'; sleep 1; cd {REPO} && {sys.executable} -m tui.app "
             f"--runs {runs} {run_dir.name}; echo $? > {tmp_path / 'exit-code'}; sleep 60")
    try:
        deadline = time.monotonic() + 10
        while tmux.title() != "CONTROL-TITLE" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tmux.title() == "CONTROL-TITLE", "the terminal ignores OSC 2: this test could not see the attack"
        tmux.wait_for("t0001")
        tmux.send("Enter")  # the trial view, with the log tail
        screen = tmux.wait_for("APPROVED BY alice")
        time.sleep(0.5)
        screen = tmux.capture()
        assert tmux.title() == "CONTROL-TITLE", f"a trial's output retitled the terminal: {tmux.title()!r}"
        lines = screen.splitlines()
        assert lines[0].lstrip().startswith("trial t0001"), screen  # not a cleared screen with the forgery on top
        shown = next(line for line in lines if "APPROVED BY alice" in line)
        assert "]2;PWNED-TITLE" in shown and "[7m" in shown, shown  # the attempt stays visible, inert
        tmux.quit_cleanly()
    finally:
        tmux.kill()
