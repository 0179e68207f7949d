"""Strip-and-rediscover in its declared settings (issue 33): the checker never has the stripped
theorem's own module loaded (the Peano attack and its ``--hammer`` variant, each shown working with the
defence off), the ``rediscover`` view hides the file's earlier proofs, theorems named twice in one file
run, ``bench coq --list``, why an open theorem stayed open, found proofs compared with the originals,
and the search's online learning, pattern premises, tactic probe and rewrite-loop rule."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from needs import needs_coq

import oracle.coq.cold as cold_module
import oracle.coq.modules as modules_module
import oracle.coq.oracle as oracle_module
import oracle.coq.warm as warm_module
from agents.best_first import Node
from agents.coq_tactics import CoqTactics, conclusion_pattern
from agents.learned_tactics import LearnedTactics
from benches.proofs import compare_proofs, why_open
from oracle.coq import CoqOracle, loaded_libraries, logical_module
from oracle.proof_common import TheoremTask, theorem_keys
from oracle.proof_state import ProofState
from oracle.strip_coq import hide_proofs
from rrma.contracts import EvalContext
from rrma.trial import Budget, Proposal


def _where() -> Path:
    return Path(subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True).stdout.strip())


def _oracle(tmp_path: Path, sources: list[str], **params: Any) -> CoqOracle:
    oracle = CoqOracle({"sources": sources, **params})
    oracle.prepare(tmp_path / "run", tmp_path)
    return oracle


def _check(oracle: CoqOracle, theorem: str, proof: str) -> dict[str, Any]:
    ctx = EvalContext(trial_id="t", trial_dir=Path("."), budget=Budget(seconds=60),
                      proposal=Proposal(hypothesis="h", proof=proof, theorem=theorem))
    return dict(oracle.evaluate(ctx).metrics)


PEANO_ATTACKS = ["exact plus_n_Sm.", "exact Coq.Init.Peano.plus_n_Sm.", "apply Peano.plus_n_Sm."]
GENUINE = "intros n m; induction n; simpl; auto."


@needs_coq
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_peano_original_refused_by_every_name(tmp_path: Path, warm: bool) -> None:
    oracle = _oracle(tmp_path, [str(_where() / "theories" / "Init" / "Peano.v")], theorems=["plus_n_Sm"], warm=warm)
    try:
        task = oracle.tasks["plus_n_Sm"]
        assert task.module == "Coq.Init.Peano" and task.noinit
        for proof in PEANO_ATTACKS:
            assert not _check(oracle, "plus_n_Sm", proof)["accepted"], proof
        assert _check(oracle, "plus_n_Sm", GENUINE)["accepted"]
    finally:
        oracle.close()


@needs_coq
@pytest.mark.parametrize("defence", ["off", "no -noinit", "no library check", "-top only"])
def test_peano_attack_works_with_the_defence_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  defence: str) -> None:
    """Each layer alone refuses the attack: without -noinit the Print Libraries check refuses the
    session; without that check -noinit leaves the original unreachable; a session run as the module
    itself (``-top``, round eight) cannot load it; with all three off it passes."""
    if defence != "-top only":
        monkeypatch.setattr(modules_module, "TOP_MODULE", False)
    if defence in ("off", "no -noinit", "-top only"):  # the prelude is not known to load the module: no -noinit
        monkeypatch.setattr(oracle_module, "attach_modules",
                            lambda tasks, coq_args=(): [replace(t, module="Coq.Init.Peano") for t in tasks])
    if defence in ("off", "no library check", "-top only"):
        for module in (cold_module, warm_module):
            monkeypatch.setattr(module, "module_refusal", lambda task, loaded: "")
    oracle = _oracle(tmp_path, [str(_where() / "theories" / "Init" / "Peano.v")], theorems=["plus_n_Sm"])
    try:
        verdicts = [_check(oracle, "plus_n_Sm", proof) for proof in PEANO_ATTACKS]
        if defence == "off":
            assert all(v["accepted"] for v in verdicts), verdicts
        else:
            assert not any(v["accepted"] for v in verdicts), verdicts
        if defence == "no -noinit":
            assert all("holds the original of plus_n_Sm" in v["reason"] for v in verdicts)
    finally:
        oracle.close()


HAMMER = "From Hammer Require Import Tactics.\n"
needs_hammer = pytest.mark.skipif(not (shutil.which("coqc") and (_where() / "user-contrib" / "Hammer").is_dir()
                                       if shutil.which("coqc") else False),
                                  reason="CoqHammer not installed (Debian: apt-get install libcoq-hammer)")


@needs_hammer
@pytest.mark.slow  # CoqHammer's Tactics load the whole of List, Arith, ZArith and Bool: seconds per session
@pytest.mark.parametrize("defence", [True, False], ids=["on", "off"])
def test_hammer_preload_cannot_reach_the_stripped_list_lemma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             defence: bool) -> None:
    """``--hammer`` loads List: the preload is dropped for List.v's theorems. With the drop and the
    library check off, and the session not run as List's own module (``-top``, which cannot load it), ``apply
    Coq.Lists.List.app_nil_r.`` is accepted."""
    if not defence:
        monkeypatch.setattr(modules_module, "TOP_MODULE", False)
        monkeypatch.setattr(oracle_module, "with_preload",
                            lambda tasks, preload, coq_args=(): ([replace(t, context=t.context + preload)
                                                                  for t in tasks], []))
        for module in (cold_module, warm_module):
            monkeypatch.setattr(module, "module_refusal", lambda task, loaded: "")
    oracle = _oracle(tmp_path, [str(_where() / "theories" / "Lists" / "List.v")], theorems=["app_nil_r"],
                     preload=HAMMER)
    try:
        task = oracle.tasks["app_nil_r"]
        assert (HAMMER not in task.context) == defence
        verdict = _check(oracle, "app_nil_r", "apply Coq.Lists.List.app_nil_r.")
        assert verdict["accepted"] is (not defence), verdict
    finally:
        oracle.close()


def test_a_print_libraries_reply_that_lists_none_names_no_module() -> None:
    assert loaded_libraries("Coq < Loaded library files: none\n\nCoq < ") == []
    assert loaded_libraries("Loaded library files: Coq.Init.Ltac\n  Coq.Init.Notations\n") == [
        "Coq.Init.Ltac", "Coq.Init.Notations"]


@needs_hammer
@pytest.mark.slow
@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "none-as-a-module"])
def test_the_hammer_preload_is_dropped_for_a_file_of_the_prelude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 fixed: bool) -> None:
    """``Init/Peano.v`` is checked without the prelude; CoqHammer's ``Tactics`` cannot load there (``Print
    Libraries`` then answers "none"). Read as a module named "none", the preload stayed, and no proof of
    the file could be accepted: its context did not compile (round nine's sweep of every stdlib file)."""
    if not fixed:
        monkeypatch.setattr(oracle_module, "libraries_loaded_by", lambda preload, noinit=False, coq_args=(): (
            frozenset({"none"}) if noinit else frozenset({"Coq.Init.Prelude"})))
    oracle = _oracle(tmp_path, [str(_where() / "theories" / "Init" / "Peano.v")], theorems=["plus_n_Sm"],
                     preload=HAMMER)
    try:
        assert (HAMMER not in oracle.tasks["plus_n_Sm"].context) is fixed
        assert _check(oracle, "plus_n_Sm", GENUINE)["accepted"] is fixed
        assert not any(_check(oracle, "plus_n_Sm", proof)["accepted"] for proof in PEANO_ATTACKS)
    finally:
        oracle.close()


@needs_hammer
@pytest.mark.slow
@pytest.mark.parametrize("after", [True, False], ids=["after-the-context", "before-the-context"])
def test_the_hammer_preload_runs_after_the_files_own_proofs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            after: bool) -> None:
    """Loaded before the context, CoqHammer's ``Tactics`` changes how a human proof of ``Lists/ListSet.v``
    runs (line 281: "No such goal"): the context stops compiling there and none of the 20 theorems after
    it can be accepted. Run after the context, right before the statement, the file's proofs run as
    written and the last theorem's own proof is accepted."""
    if not after:
        monkeypatch.setattr(oracle_module, "with_preload", lambda tasks, preload, coq_args=(): (
            [replace(t, context=preload + t.context) for t in tasks], []))
    oracle = _oracle(tmp_path, [str(_where() / "theories" / "Lists" / "ListSet.v")], theorems=["set_diff_trivial"],
                     preload=HAMMER)
    try:
        assert oracle.tasks["set_diff_trivial"].context.endswith(HAMMER) is after
        verdict = _check(oracle, "set_diff_trivial", "red; intros a x H. apply (set_diff_elim2 _ _ _ H). "
                                                      "apply (set_diff_elim1 _ _ _ H).")
        assert verdict["accepted"] is after, verdict
        if not after:
            assert verdict["reason"].startswith("the context does not compile: Error: No such goal"), verdict
    finally:
        oracle.close()


SOURCE = """Require Import Arith.
Module A.
Lemma twice : forall n : nat, n + 0 = n.
Proof. SECRET_A. intros; auto with arith. Qed.
End A.
Module B.
Lemma twice : forall n : nat, 0 + n = n.
Proof. SECRET_B. reflexivity. Qed.
End B.
Theorem uses_both : forall n : nat, n + 0 = 0 + n.
Proof. intros; rewrite A.twice, B.twice; reflexivity. Qed.
"""


def test_rediscover_view_hides_earlier_proofs(tmp_path: Path) -> None:
    text = SOURCE.replace("SECRET_A. ", "").replace("SECRET_B. ", "")
    hidden = hide_proofs(text)
    assert "auto with arith" not in hidden and "rewrite" not in hidden
    assert hidden.count("Admitted.") == 3 and "Lemma twice : forall n : nat, n + 0 = n." in hidden


@needs_coq
@pytest.mark.parametrize("setting", ["rediscover", "library"])
def test_settings_decide_what_the_view_shows_and_names_repeat_in_modules(tmp_path: Path, setting: str) -> None:
    path = tmp_path / "Twice.v"
    path.write_text(SOURCE.replace("SECRET_A. ", "").replace("SECRET_B. ", ""))
    oracle = _oracle(tmp_path, [str(path)], setting=setting)
    try:
        keys = list(oracle.tasks)
        assert keys == ["twice (Twice.v:3)", "twice (Twice.v:7)", "uses_both"]
        views = {v["name"]: v for v in oracle.theorems()}
        assert all(v["setting"] == setting for v in views.values())
        shows_proofs = "auto with arith" in views["uses_both"]["context"]
        assert shows_proofs is (setting == "library")
        assert _check(oracle, "twice (Twice.v:7)", "reflexivity.")["accepted"]
        assert _check(oracle, "uses_both", "intros; rewrite A.twice, B.twice; reflexivity.")["accepted"]
    finally:
        oracle.close()


def test_theorem_keys_name_repeats_apart() -> None:
    tasks = [TheoremTask("x", "", "", "", source_file="/a/F.v", line=3), TheoremTask("y", "", "", ""),
             TheoremTask("x", "", "", "", source_file="/a/F.v", line=9)]
    assert theorem_keys(tasks) == ["x (F.v:3)", "y", "x (F.v:9)"]


@needs_coq
def test_bench_lists_theorems_without_proving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    path = tmp_path / "Twice.v"
    path.write_text(SOURCE.replace("SECRET_A. ", "").replace("SECRET_B. ", ""))
    assert main(["--headless", "bench", "coq", "--source", str(path), "--list", "--runs", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "twice (Twice.v:3)\tTwice.v:3" in out and "twice (Twice.v:7)" in out and "theorems: 3" in out
    assert not (tmp_path / "r").exists()  # nothing ran


def test_logical_module_and_print_libraries() -> None:
    where = _where() if shutil.which("coqc") else None
    if where is not None:
        assert logical_module(where / "theories" / "Init" / "Peano.v") == "Coq.Init.Peano"
    assert logical_module("/nowhere/F.v") == ""
    assert logical_module("/src/lib/Sub/F.v", ["-Q", "/src/lib", "Lib"]) == "Lib.Sub.F"
    reply = "Loaded library files: \n  Coq.Init.Notations\n  Coq.Init.Peano\n\n<prompt>Coq < 5 |</prompt>"
    assert loaded_libraries(reply) == ["Coq.Init.Notations", "Coq.Init.Peano"]


def test_compare_proofs_and_why_open() -> None:
    assert compare_proofs("intros.\nauto.", "Proof.\n  intros. auto.\nQed.")["relation"] == "same"
    row = compare_proofs("intros.\nlia.", "Proof. intros. simpl. auto. Qed.")
    assert row == {"relation": "same first tactic", "found_sentences": 2, "original_sentences": 3, "ratio": 0.67}
    assert compare_proofs("lia.", "Proof. intros. auto. Qed.")["relation"] == "different"
    line = why_open({"result": "budget: seconds", "checks": 812, "expanded": 95, "seconds": 25.0, "deepest": 4,
                     "last_error": "apply foo. at depth 3: Unable to unify"}, "")
    assert "budget: seconds after 812 tactic runs, 95 states explored" in line
    assert "deepest state 4" in line and "last error: apply foo." in line
    assert "vetoed" not in line
    line = why_open({"result": "exhausted", "checks": 3, "vetoed": 2, "first_veto": "exact ax. (relies on ax)"}, "")
    assert line.endswith("2 proof(s) found and vetoed by the agent, the first: exact ax. (relies on ax)"), line
    assert why_open(None, "") == "no agent proposed a proof and none said why"


def test_learned_tactics_rank_the_closest_goal_first() -> None:
    learned = LearnedTactics()
    task = TheoremTask("t", "Lemma t : forall l, rev (rev l) = l.", "", "", prover="coq")
    learned.learn(task, [("|- forall l, rev (rev l) = l", "induction l."),
                         ("l : list A |- rev (rev l) = l", "rewrite rev_app_distr.")])
    learned.learn(TheoremTask("u", "Lemma u : True.", "", "", prover="coq"), [("|- True", "exact I.")])
    state = ProofState(("intros.",), ("m : list B |- rev (rev m) = m",))
    tactics = [c.tactic for c in learned.candidates(task, state)]
    assert tactics[0] == "rewrite rev_app_distr."
    assert "exact I." not in tactics  # its goal shares no symbol with this one
    root = [c for c in learned.candidates(task, ProofState((), ("|- forall k, rev (rev k) = k",))) if c.closer]
    assert root and root[0].tactic == "induction l.\nrewrite rev_app_distr."


def test_conclusion_pattern_and_rewrite_loops() -> None:
    assert conclusion_pattern("1 < a ^ b", ["a", "b"]) == "1 < _ ^ _"
    assert conclusion_pattern("forall n, n = n", []) == ""
    assert conclusion_pattern("x = y", ["x", "y"]) == ""  # nothing left to search for
    node = Node(1, 0, "rewrite foo.", ProofState(("rewrite foo.",), ("|- g",)), 1, 1.0, ("rewrite foo.",))
    assert CoqTactics.loops(node, "rewrite <- foo.")
    assert not CoqTactics.loops(node, "rewrite foo.")  # the second time is allowed
    twice = replace(node, tactics=("rewrite foo.", "simpl.", "rewrite foo."))
    assert CoqTactics.loops(twice, "rewrite foo.") and not CoqTactics.loops(twice, "rewrite bar.")


@needs_coq
def test_search_never_tries_a_tactic_the_context_lacks() -> None:
    """lia without Lia loaded: the probe finds it missing and no candidate naming it is tried."""
    from agents.best_first import SearchBudget, best_first_search
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    task = TheoremTask("t", "Lemma t : forall n : nat, n + 0 = n.", "", "", prover="coq")
    made: list[CoqTactics] = []

    def source(root: ProofState) -> CoqTactics:
        made.append(CoqTactics(states, task, root, library=False, portfolio=False, setting="rediscover"))
        return made[-1]

    try:
        result = best_first_search(states, task, source, SearchBudget(seconds=30, max_checks=400))
    finally:
        states.close()
    assert result.proof is not None
    assert "lia" in made[0].unknown and "congruence" not in made[0].unknown
    tried = [t[1] for t in result.tree["tries"]]
    assert not any("lia" in t.replace("(fail; lia)", "") for t in tried if "lia" in t.split(".")[0]), tried


@needs_coq
@pytest.mark.parametrize("can_widen", [True, False], ids=["widens", "narrow only"])
def test_an_exhausted_search_makes_a_wider_second_pass(can_widen: bool) -> None:
    """The first pass proposes nothing that works; with budget left, a source that can widen gets a
    second pass over the open states (without ``widen`` the search stops exhausted)."""
    from agents.best_first import SearchBudget, TacticSource, best_first_search
    from agents.tactic_suggester import Candidate
    from oracle.proof_state_coq import CoqProofStates

    class Narrow(TacticSource):
        wide = False

        def candidates(self, node: Node) -> list[Candidate]:
            return [Candidate("idtac.", 1.0), *([Candidate("reflexivity.", 0.1, True)] if self.wide else [])]

    class Widening(Narrow):
        def widen(self) -> bool:
            was, self.wide = self.wide, True
            return not was

    states = CoqProofStates()
    task = TheoremTask("t", "Lemma t : 2 + 2 = 4.", "", "", prover="coq")
    try:
        result = best_first_search(states, task, lambda root: Widening() if can_widen else Narrow(),
                                   SearchBudget(seconds=60, max_checks=50))
    finally:
        states.close()
    assert (result.proof == "reflexivity.") is can_widen
    assert result.reason == ("proved" if can_widen else "exhausted")
