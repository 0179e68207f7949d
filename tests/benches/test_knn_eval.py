"""benches/coq/knn_eval.py: the k-NN's leave-one-module-out figure, on a small index written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents import library_tactics as lt
from benches.coq import knn_eval


def _entry(root: Path, module: str, steps: list[tuple[str, str]]) -> None:
    entry = {"module": module, "version": lt.INDEX_VERSION, "proofs": [],
             "steps": [{"theorem": f"t{k}", "goal": g, "tactic": t, "locals": ["n", "m", "H"]}
                       for k, (g, t) in enumerate(steps)]}
    (root / f"{module}.json").write_text(json.dumps(entry))


def test_a_module_is_answered_by_the_others_only(tmp_path: Path) -> None:
    # A's steps are answered from B (the same goals, the same tactics, other local names); C's goal is like no
    # other module's, and its own second step (which would answer it) is left out with its module
    _entry(tmp_path, "A", [("n : nat |- n + 0 = n", "rewrite Nat.add_0_r."), ("n : nat |- rev (rev n) = n", "auto.")])
    _entry(tmp_path, "B", [("m : nat |- m + 0 = m", "rewrite Nat.add_0_r."), ("m : nat |- rev (rev m) = m", "auto.")])
    _entry(tmp_path, "C", [("H : odd_thing |- weird_goal", "exact H."), ("H : odd_thing |- weird_goal", "exact H.")])
    entries = knn_eval.load_entries(tmp_path)
    for voting in (True, False):
        hits = knn_eval.evaluate(knn_eval.probe(entries, per_module=2), voting=voting)
        assert (hits.steps, hits.first, hits.top) == (6, 4, 4)
    # the most common tactic counted apart (three tie at two steps each: the first met, the rewrite, is taken)
    split = knn_eval.evaluate(knn_eval.probe(entries, per_module=2, common=1), voting=False)
    assert (split.common_steps, split.common_top) == (2, 2)
    assert "specific  50.0%" in split.line("x", 1) and "common 100.0%" in split.line("x", 1)


def test_an_index_without_two_modules_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _entry(tmp_path, "A", [("n : nat |- n + 0 = n", "auto.")])
    assert knn_eval.main(["--index", str(tmp_path)]) == 2
    assert "at least 2 are needed" in capsys.readouterr().err


def test_main_prints_both_rankings_and_their_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _entry(tmp_path, "A", [("n : nat |- n + 0 = n", "rewrite Nat.add_0_r.")])
    _entry(tmp_path, "B", [("m : nat |- m + 0 = m", "rewrite Nat.add_0_r.")])
    assert knn_eval.main(["--index", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 modules, 2 steps" in out and "first met" in out and "vote" in out
    assert "top 100.0%" in out and "1.00x" in out and "specific" in out and "common proposed" in out
