"""Proof runs read as proof runs (issue 24, wrong today #9).

Before: the trials table had no theorem column and `/pair_eq` matched nothing (the filter did not look at
the theorem); the header said "no best yet" and the chart drew a flat line at 1.00 with a baseline in its
legend though the run has none; in the proof tree an `→ error` row's panel said only that the tactic led to
no new state (the search did not keep the prover's message). Now the table has a theorem column and the
filter matches it, the header counts the theorems solved and names the unsolved ones, the chart draws the
theorems solved so far and its legend names only what it draws, and a failed try's row and panel show the
prover's error. (The trace's tool result labelled `call arguments`, the fourth part of #9, is fixed with the
trace view: tests/tui/test_trace_view.py.)
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from make_run import fake_clock
from screen_text import screen_lines
from search_bench import search_bench
from test_tui_screens import open_dashboard
from textual.widgets import Static, Tree
from tui_helpers import fixed_clock, plain, wait_until

from rrma.log.store import RunStore
from tui.app import RRMAApp
from tui.screens.proof_tree import ProofTreeScreen
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable
from tui.widgets.score_chart import ScoreChart

pytestmark = pytest.mark.asyncio

ERROR = 'In environment n : nat Unable to unify "n" with "n + 0".'
TREE = {  # agents/proof_search.py's layout: nodes [parent, tactic, depth, goals, key]; tries [node, tactic, code, child,
    # ms(, why)]; the second try is from an older search that kept no message
    "v": 1, "prover": "coq", "theorem": "pair_eq", "result": "proved",
    "budget": {"seconds": 20, "checks": 6000}, "used": {"seconds": 0.3, "checks": 3},
    "nodes": [[None, None, 0, 1, "root"], [0, "auto.", 1, 0, "done"]],
    "tries": [[0, "reflexivity.", "e", -1, 1.2, ERROR], [0, "lia.", "t", -1, 2000.0], [0, "auto.", "P", 1, 1.1]],
    "goals": {"root": ["a, b, c, d : nat\nH1 : a = c\nH2 : b = d\n============================\n(a, b) = (c, d)"]},
    "proof": [1], "dropped_tries": 0,
}


def write_proof_run(runs: Path) -> Path:
    """A per-theorem Coq run as the coq bench writes one (no baseline): three theorems, two solved."""
    run_dir = runs / "proofs"
    store = RunStore(run_dir, create=True)
    task = {"name": "bench-coq", "oracle": {"kind": "coq", "params": {}},
            "metric": {"name": "solved", "direction": "maximize", "source": "oracle", "target": None},
            "budget": {"max_trials": 6}, "loop": {"policy": "per-theorem"},
            "agents": [{"name": "proof-search-1", "backend": "proof-search"}, {"name": "red-team", "backend": "x"}]}
    trials: list[tuple[str, str, str, float | None, dict[str, Any]]] = [
        ("red-team", "pair_eq", "rejected", None, {}),
        ("proof-search-1", "pair_eq", "ok", 1.0, {"search_tree": TREE}),
        ("proof-search-1", "add_zero_r", "rejected", None, {}),
        ("proof-search-1", "mul_one", "ok", 1.0, {}),
    ]
    with fake_clock():
        store.append("run.started", "harness", {"run_id": "proofs", "task_name": "bench-coq", "task": task})
        for i, (agent, theorem, status, score, meta) in enumerate(trials, start=1):
            tid = f"t{i:04d}"
            proposal = {"hypothesis": f"a proof of {theorem}", "proof": "auto.", "theorem": theorem, "meta": meta}
            store.append_many([
                ("trial.proposed", f"agent:{agent}", {"trial_id": tid, "parent": None, "agent": agent,
                                                      "hypothesis": f"a proof of {theorem}", "theorem": theorem,
                                                      "proposal_blob": store.put_json_blob(proposal)}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {"trial_id": tid, "status": status, "score": score, "seconds": 0.3}),
            ])
        store.append("run.finished", "harness", {"reason": "completed", "summary": {}})
    store.close()
    return run_dir


async def test_the_dashboard_of_a_proof_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_proof_run(runs)
    app = RRMAApp(runs, runs / "proofs", reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        dash = await open_dashboard(pilot, app)
        await pilot.pause(0.2)
        lines = screen_lines(app)
        header = "\n".join(lines[:3])
        # against every theorem the run names (issue 35: one count, rrma/log/theorems.py); add_zero_r was attempted
        assert "no best yet" not in header and "proofs: 2/3 solved · 1 open · 0 queued · 0 given up" in header, header
        table = dash.query_one("#trials", LineTable)
        assert "theorem" in table.shown_columns
        rows = {m.group(1): line for line in lines if (m := re.match(r"^│.?(t\d{4}) ", line))}
        assert "pair_eq" in rows["t0001"] and "add_zero_r" in rows["t0003"] and "mul_one" in rows["t0004"], rows
        chart = dash.query_one("#chart", ScoreChart)
        legend = plain(chart.query_one(".score-chart--legend", Static).content)
        assert "baseline" not in legend and "theorems solved so far" in legend, legend
        assert chart.title_text.startswith("theorems solved by trial (2 of 3)"), chart.title_text
        await pilot.press("slash", *"pair_eq", "enter")
        await wait_until(pilot, lambda: table.rows == ["t0002", "t0001"])


def rows_of(screen: ProofTreeScreen) -> list[Any]:
    widget = screen.query_one(Tree)
    out, stack = [], [widget.root]
    while stack:
        node = stack.pop(0)
        out.append(node)
        stack[:0] = list(node.children)
    return out


async def test_a_failed_try_in_the_proof_tree_shows_the_provers_error(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_proof_run(runs)
    app = RRMAApp(runs, runs / "proofs", reviewer="carol", clock=fixed_clock, poll_interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        dash = await open_dashboard(pilot, app)
        app.push_screen(TrialScreen(dash.session, "t0002"))
        await wait_until(pilot, lambda: isinstance(app.screen, TrialScreen))
        await pilot.pause(0.2)
        await pilot.press("P")
        await wait_until(pilot, lambda: isinstance(app.screen, ProofTreeScreen))
        screen = app.screen
        assert isinstance(screen, ProofTreeScreen)
        panel = screen.query_one("#ptree-goal-text", Static)
        texts = {}
        for node in rows_of(screen)[1:]:
            screen.query_one(Tree).move_cursor(node)
            await pilot.pause(0.05)
            texts[str(node.label).split("→")[0].strip(" ★")] = plain(panel.content)
    error, timeout = texts["reflexivity."], texts["lia."]
    assert "→ error" in error and ERROR in " ".join(error.split()), error  # the prover's message
    assert "(a, b) = (c, d)" not in error and "(a, b) = (c, d)" not in timeout  # never the state's goals
    assert "→ timeout" in timeout and "did not record the prover's message" in timeout, timeout
    assert "no goals: proved" in texts["auto."]


@pytest.mark.skipif(shutil.which("coqtop") is None, reason="Coq (coqtop) is not installed")
async def test_a_real_search_keeps_the_provers_error_of_a_failed_tactic(tmp_path: Path) -> None:
    # a theorem the search proves only after a failed try: its first round trip (the cheap closers) fails at
    # the root (`n + 0 = n`, used before, is now closed by the first closer, with no failure to keep)
    run = search_bench(tmp_path, "maplen.v", "Require Import List.\n\nTheorem map_len : forall (A B : Type) "
                       "(f : A -> B) (l : list A), length (map f l) = length l.\nProof. intros. induction l; simpl; "
                       "auto. Qed.\n", "--theorem-seconds", "20")
    store = RunStore(run)
    trees = [json.loads(store.get_blob(e.data.proposal_blob))["meta"]["search_tree"] for e in store.scan().events
             if e.kind == "trial.proposed" and e.data.agent.startswith("proof-search")]
    failed = [t for tree in trees for t in tree["tries"] if t[2] == "e"]
    assert failed and all(len(t) == 6 and t[5] for t in failed), failed  # each error says what Coq said
