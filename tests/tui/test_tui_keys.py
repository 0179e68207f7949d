"""Keys: one meaning per key on every screen, log writes on keys nothing else uses, and docs/tui.md agrees.

The issue this guards against: `a` filtered on the dashboard and approved on the trial screen,
so a reviewer's habit could write to the permanent log. These checks read the screens' own
BINDINGS (what the app runs) and the key tables of docs/tui.md (what people read).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.app import RRMAApp
from tui.screens.analysis import AnalysisScreen
from tui.screens.compare import CompareScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.lineage import LineageScreen, LineageTree
from tui.screens.proof_tree import ProofTreeScreen
from tui.screens.review import ReviewScreen
from tui.screens.run_compare import RunCompareScreen
from tui.screens.runs import RunsScreen
from tui.screens.theorems import TheoremsScreen
from tui.screens.timeline import TimelineScreen
from tui.screens.trace import TraceScreen
from tui.screens.trial import TrialScreen

DOC = Path(__file__).resolve().parents[2] / "docs" / "tui.md"
SCREENS: dict[str, list[type]] = {  # docs/tui.md section -> the classes whose BINDINGS it documents
    "Runs list": [RunsScreen], "Dashboard": [DashboardScreen], "Trial": [TrialScreen], "Trace": [TraceScreen],
    "Review queue": [ReviewScreen], "Lineage": [LineageScreen, LineageTree], "Compare": [CompareScreen],
    "Proof-search tree": [ProofTreeScreen], "Timeline": [TimelineScreen],
    "Analysis": [AnalysisScreen],
    "Run compare": [RunCompareScreen],
    "Theorems": [TheoremsScreen],
}
DISPLAY = {"escape": "Esc", "enter": "Enter", "slash": "/", "question_mark": "?", "exclamation_mark": "!",
           "left_square_bracket": "[", "right_square_bracket": "]", "left_curly_bracket": "{",
           "right_curly_bracket": "}", "down": "↓", "up": "↑",
           "left": "←", "right": "→", "home": "Home", "end": "End",
           "equals_sign": "=", "number_sign": "#"}
LOG_WRITES = {"decide", "stop_run", "pause_run", "post", "steer", "resume_run",
              "dismiss_finding"}  # actions that append to the log


def bindings(cls: type) -> list[tuple[str, str]]:
    """(key as docs/tui.md writes it, action name without arguments) for each key of a class's own bindings."""
    out = []
    for binding in cls.BINDINGS:  # type: ignore[attr-defined]
        for key in binding.key.split(","):
            out.append((DISPLAY.get(key, key), binding.action.split("(")[0]))
    return out


def documented(section: str) -> set[str]:
    """The keys in the table under ``### section`` of docs/tui.md."""
    text = DOC.read_text()
    start = text.index(f"### {section}\n")
    end = text.find("\n###", start + 1)
    body = text[start:end if end != -1 else None]
    keys: set[str] = set()
    for line in body.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            keys.update(re.findall(r"`([^`]+)`", first_cell))
    return keys


def test_each_key_means_one_thing_on_every_screen() -> None:
    meaning: dict[str, set[str]] = {}
    for classes in SCREENS.values():
        for cls in classes:
            for key, action in bindings(cls):
                meaning.setdefault(key, set()).add(action)
    for key, action in bindings(RRMAApp):
        meaning.setdefault(key, set()).add(action)
    # Enter opens what is highlighted and Esc goes back, whatever the screen shows
    clashes = {key: actions for key, actions in meaning.items()
               if len(actions) > 1 and key not in ("Enter", "Esc", "space")}
    assert not clashes, f"keys with more than one meaning: {clashes}"
    # space toggles the highlighted row, and nothing else: folds a tree's node, selects a trial of the review queue
    assert meaning["space"] <= {"toggle_node", "toggle_select"}, meaning["space"]


def test_keys_that_write_to_the_log_are_used_for_nothing_else() -> None:
    writers = {key for classes in SCREENS.values() for cls in classes for key, action in bindings(cls)
               if action in LOG_WRITES}
    assert {"y", "x", "!", "u", "h", "w", "m", "i", "R", "X"} <= writers
    for classes in SCREENS.values():
        for cls in classes:
            for key, action in bindings(cls):
                if key in writers:
                    assert action in LOG_WRITES, f"{cls.__name__}: {key} writes elsewhere but means {action} here"
    assert not writers & {key for key, _ in bindings(RRMAApp)}


@pytest.mark.parametrize("section", list(SCREENS))
def test_docs_list_every_key_of_each_screen_once(section: str) -> None:
    in_code = [key for cls in SCREENS[section] for key, _ in bindings(cls)]
    assert len(in_code) == len(set(in_code)), f"{section}: a key bound twice: {in_code}"
    assert documented(section) == set(in_code), section


def test_docs_name_the_keys_every_screen_has() -> None:
    text = DOC.read_text()
    assert "`q` quit" in text and "`?` help" in text and "`ctrl+p` the command palette" in text
    assert {key for key, _ in bindings(RRMAApp)} == {"q", "?"}
