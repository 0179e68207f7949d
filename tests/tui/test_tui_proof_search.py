"""The trial view shows the goals along a proof the search agent found, and `P` its whole search tree
(a real Coq search, the real app under Pilot)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from search_bench import search_bench
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from tui.app import RRMAApp
from tui.screens.proof_tree import ProofTreeScreen
from tui.screens.trial import TrialScreen

pytestmark = [pytest.mark.asyncio,
              pytest.mark.skipif(shutil.which("coqtop") is None, reason="Coq (coqtop) is not installed")]

SOURCE = """Require Import Arith.

Fixpoint double (n : nat) : nat := match n with 0 => 0 | S k => S (S (double k)) end.

Theorem double_plus : forall n : nat, double n = n + n.
Proof. induction n; simpl; auto. rewrite IHn. rewrite <- plus_n_Sm. reflexivity. Qed.
"""


def _walk(node: TreeNode[int]) -> list[TreeNode[int]]:
    out = [node]
    for child in node.children:
        out.extend(_walk(child))
    return out


def _rendered(screen: TrialScreen) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(screen._content())
    return console.export_text()


async def test_trial_view_steps_through_the_goals_of_a_found_proof(tmp_path: Path) -> None:
    run = search_bench(tmp_path, "double.v", SOURCE, "--theorem-seconds", "25")
    runs = run.parent
    trial = next(json.loads(line)["data"]["trial_id"] for line in (run / "events.jsonl").read_text().splitlines()
                 if '"trial.finished"' in line and '"status":"ok"' in line.replace(" ", ""))
    app = RRMAApp(runs, run)
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause(0.5)
        app.push_screen(TrialScreen(app.screen.session, trial))  # type: ignore[attr-defined]
        await pilot.pause(0.3)
        text = _rendered(app.screen)  # type: ignore[arg-type]
        await pilot.press("P")  # the whole search tree
        await pilot.pause(0.3)
        tree_screen = app.screen
        assert isinstance(tree_screen, ProofTreeScreen)
        widget = tree_screen.query_one(Tree)
        rows = [str(node.label) for node in _walk(widget.root)]
        panel = str(tree_screen.query_one("#ptree-goal-text", Static).render())
        await pilot.press("escape")
        await pilot.pause(0.2)
        back_on_trial = isinstance(app.screen, TrialScreen)
    assert back_on_trial
    assert rows[0].startswith("the statement") and "1 goal(s)" in rows[0]
    proved = [r for r in rows if r.startswith("★") and "proved" in r]
    assert proved, rows[:10]  # the found proof's last step, marked
    assert any(not r.startswith("★") for r in rows[1:]), "only the proof path: the other tries are missing"
    assert "double n = n + n" in panel  # the goals of the state under the cursor (the statement)
    assert "proof search: the goals along the found proof" in text
    assert "proved after" in text and "tactic runs" in text
    section = text.split("proof search: the goals along the found proof", 1)[1].split("log tail", 1)[0]
    assert "(the statement)" in section and "double n = n + n" in section  # the root goal, as Coq prints it
    assert section.rstrip().splitlines()[-1].strip().endswith("]") and "no goals: proved" in section
