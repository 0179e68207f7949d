"""The k-NN over the human proofs of a target's library (agents/library_tactics.py, issue 33).

A small library is built here (no prebuilt index: ``Lib.v`` compiled with ``coqc``, indexed into a
temporary folder), then a target file that requires it. The contract: a step is recorded with the
goal before it and the file's own lemma names qualified; a suggestion is adapted to the current
goal's hypotheses; and the target's own proofs are never proposed: neither when the target's module
is in the index (the rule keeps only the modules the target's session has loaded) nor when the
session wrongly claims to have it loaded (the second guard: a module holding the target's name and
statement is left out). Each defence is shown off (the target's own tactic then comes back) and on.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from coq_index import compiled_and_indexed
from needs import needs_coq

import agents.library_tactics as lt
from agents.library_tactics import (
    KnnIndex,
    LibraryTactics,
    adapt,
    goal_features,
    holds_target,
    library_modules,
    qualify,
)
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState
from oracle.proof_state_coq import CoqGoal

LIB = """Require Import Arith.
Module Twice.
Lemma plus_zero_right : forall n : nat, n + 0 = n.
Proof. intros n. induction n as [| k IH]. reflexivity. simpl. rewrite IH. reflexivity. Qed.
End Twice.
Lemma uses_it : forall m : nat, (m + 0) + 0 = m.
Proof. intro m. rewrite Twice.plus_zero_right. apply Twice.plus_zero_right. Qed.
"""
# the target's own proof uses a tactic no rule or library step proposes: its return is the attack
TARGET_SECRET = "exact (plus_n_O q)."
TARGET = f"""Require Import Lib.Lib.
Lemma target_own : forall q : nat, q = q + 0.
Proof. intro q. {TARGET_SECRET} Qed.
"""


def _where() -> Path:
    return Path(subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True).stdout.strip())


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """``Lib.v`` compiled and both ``Lib.v`` and ``Target.v`` indexed into a temporary folder."""
    src, args, index, written = compiled_and_indexed(tmp_path_factory, "lib", {"Lib.v": LIB, "Target.v": TARGET},
                                                     ["Lib.v", "Target.v"])
    assert {p.name for p in written} == {"Lib.Lib.json", "Lib.Target.json"}
    return {"src": src, "args": args, "index": index}


@needs_coq
def test_index_records_goal_before_each_tactic_and_qualifies_own_names(library: dict[str, object]) -> None:
    entry = json.loads((Path(str(library["index"])) / "Lib.Lib.json").read_text())
    steps = {(s["theorem"], s["tactic"]): s for s in entry["steps"]}
    first = steps[("plus_zero_right", "intros n.")]
    assert first["goal"] == "|- forall n : nat, n + 0 = n"
    assert steps[("plus_zero_right", "rewrite IH.")]["goal"].startswith("k : nat; IH : k + 0 = k |- ")
    # the file's own lemma, named from outside the file by its full path
    assert ("uses_it", "rewrite Lib.Lib.Twice.plus_zero_right.") in steps
    assert entry["proofs"][0]["theorem"] == "plus_zero_right" and entry["errors"] == 0
    assert all(s["features"] for s in entry["steps"])


def _target_task(library: dict[str, object]) -> TheoremTask:
    return TheoremTask(name="target_own", statement="Lemma target_own : forall q : nat, q = q + 0.",
                       context="Require Import Lib.Lib.\n", original_proof="", prover="coq")


def _suggested(library: dict[str, object], monkeypatch: pytest.MonkeyPatch, rule: bool, guard: bool) -> list[str]:
    """The library's suggestions at the target's goal after ``intro q``, from its real session."""
    from oracle.proof_state_coq import CoqProofStates

    if not guard:
        monkeypatch.setattr(lt, "holds_target", lambda entry, task: False)
    states = CoqProofStates(coq_args=tuple(str(a) for a in library["args"]))  # type: ignore[union-attr]
    try:
        task = _target_task(library)
        root = states.start(task)
        loaded = states.loaded_libraries()
        assert "Lib.Lib" in loaded and "Lib.Target" not in loaded
        lib = LibraryTactics(Path(str(library["index"]))).load()
        # the rule off: every module of the index counts as the target's library
        lib.use(library_modules(loaded) if rule else lib.module_names, task)
        after = states.run_tactic(root, "intro q.")
        assert after.state is not None
        return [c.tactic for c in lib.candidates(task, after.state)]
    finally:
        states.close()


@needs_coq
@pytest.mark.parametrize(("rule", "guard", "leaks"), [(True, True, False), (False, True, False),
                                                      (True, False, False), (False, False, True)],
                         ids=["both", "guard only", "rule only", "neither"])
def test_the_targets_own_proof_is_never_suggested(library: dict[str, object], monkeypatch: pytest.MonkeyPatch,
                                                  rule: bool, guard: bool, leaks: bool) -> None:
    tactics = _suggested(library, monkeypatch, rule, guard)
    assert tactics, "the library suggested nothing at all"
    assert (TARGET_SECRET in tactics) is leaks, tactics


def test_holds_target_matches_name_and_statement_only() -> None:
    task = TheoremTask(name="foo", statement="Lemma foo : forall n : nat, n = n.", context="", original_proof="",
                       prover="coq")
    same = {"proofs": [{"theorem": "foo", "statement": "Theorem foo: forall n : nat,  n = n."}]}
    other = {"proofs": [{"theorem": "foo", "statement": "Lemma foo : forall n : nat, n + 0 = n."}]}
    assert holds_target(same, task) and not holds_target(other, task)
    assert library_modules(["Coq.Init.Peano", "T.Target", ""], "T.Target") == ["Coq.Init.Peano"]


def test_adapt_maps_local_names_by_hypothesis_type() -> None:
    target = CoqGoal(hyps=((("m",), "nat"), (("Hm",), "m + 0 = m")), concl="S m + 0 = S m")
    # kept when the target has the same names; mapped by type; refused when nothing fits
    assert adapt("rewrite Hm.", ("m", "Hm"), "m : nat; Hm : m + 0 = m |- x", target) == "rewrite Hm."
    assert adapt("rewrite IH.", ("k", "IH"), "k : nat; IH : k + 0 = k |- x", target) == "rewrite Hm."
    assert adapt("apply H.", ("H",), "H : forall l : list nat, l = l |- x", target) is None
    assert adapt("reflexivity.", (), "|- x", target) == "reflexivity."


def test_qualify_leaves_binders_and_locals_alone() -> None:
    names = {"add_zero": "M.add_zero"}
    assert qualify("rewrite add_zero, <- (add_zero n).", names, ["n"]) == \
        "rewrite M.add_zero, <- (M.add_zero n)."
    assert qualify("destruct x as [add_zero y].", names, []) == "destruct x as [add_zero y]."
    assert qualify("apply add_zero in H.", names, ["add_zero"]) == "apply add_zero in H."


def test_knn_ranks_by_shared_rare_features_within_the_mask() -> None:
    feats = [goal_features("n : nat |- n + 0 = n"), goal_features("l : list nat |- rev (rev l) = l"),
             goal_features("l : list nat |- length (rev l) = length l")]
    index = KnnIndex([sorted(f) for f in feats])
    query = goal_features("xs : list nat |- rev (rev xs) = xs")
    assert "rev>rev" in query and "xs" not in query  # pairs of global symbols; local names dropped
    assert index.nearest(query, 2)[0][1] == 1
    mask = np.array([True, False, True])
    assert all(i != 1 for _, i in index.nearest(query, 3, mask))


def test_an_empty_index_folder_suggests_nothing(tmp_path: Path) -> None:
    lib = LibraryTactics(tmp_path / "none")
    assert not lib.available()
    lib.load()
    task = TheoremTask(name="t", statement="Lemma t : True.", context="", original_proof="", prover="coq")
    lib.use(["Coq.Init.Logic"], task)
    assert lib.candidates(task, ProofState((), ("|- True",))) == []


@needs_coq
@pytest.mark.parametrize("top", [True, False], ids=["as-its-module", "as-Top"])
def test_a_file_that_compiles_only_as_its_own_module_is_indexed_whole(monkeypatch: pytest.MonkeyPatch,
                                                                       top: bool) -> None:
    """Classes/CMorphisms.v's generalized rewriting finds the file's relations by its own path: run as
    ``Top`` (before round nine), 14 of its proofs failed and their steps were lost to the index."""
    import oracle.coq.modules as modules_module
    from oracle.coq.sandboxing import coq_where

    where = coq_where()
    source = where / "theories" / "Classes" / "CMorphisms.v" if where is not None else None
    if source is None or not source.is_file():
        pytest.skip("the Coq standard library's sources are not installed")
    monkeypatch.setattr(modules_module, "TOP_MODULE", top)
    entry = lt.index_file(source, module="Coq.Classes.CMorphisms")
    assert (entry["errors"] == 0) is top, entry["error"]
    if not top:
        assert "not a declared transitive relation" in entry["error"]


@needs_coq
@pytest.mark.parametrize("version_checked", [True, False], ids=["rebuilt", "kept-and-ignored"])
def test_an_entry_of_an_older_index_version_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        version_checked: bool) -> None:
    """The loader skips an entry of another INDEX_VERSION; ``build`` must then count it stale, or a version
    bump leaves the index empty while every entry reads "up to date" (round nine, before this check)."""
    source = tmp_path / "Small.v"
    source.write_text("Lemma small : forall n : nat, n + 0 = n.\nProof. intros n. induction n; simpl; auto. Qed.\n")
    args = ("-Q", str(tmp_path), "Small")
    index = tmp_path / "index"
    assert [p.name for p in lt.build([source], root=index, coq_args=args)] == ["Small.Small.json"]
    entry = index / "Small.Small.json"
    old = json.loads(entry.read_text())
    entry.write_text(json.dumps({**old, "version": lt.INDEX_VERSION - 1}))
    if not version_checked:  # build reads the old entry as current (as when it compared the source's hash
        monkeypatch.setattr(lt, "INDEX_VERSION", lt.INDEX_VERSION - 1)  # alone), then the loader skips it
    rebuilt = lt.build([source], root=index, coq_args=args)
    assert bool(rebuilt) is version_checked
    monkeypatch.undo()
    assert bool(LibraryTactics(index).load().module_names) is version_checked


def test_vote_orders_tactics_by_their_summed_squared_similarity() -> None:
    near = [(1.0, 0), (0.8, 1), (0.8, 2), (0.8, 3), (0.5, 4)]
    tactic = {0: "apply A.", 1: "apply B.", 2: "apply B.", 3: "apply B.", 4: "apply A."}.__getitem__
    # B: 3 * 0.64 = 1.92 against A's 1.0 + 0.25; the first item met stands for its tactic
    assert lt.vote(near, tactic) == [1, 0]
    assert lt.vote(near, tactic, power=8.0) == [0, 1]  # a steep power is nearly "the nearest goal first"
    assert lt.vote([(0.5, 7), (0.5, 8)], {7: "t1.", 8: "t2."}.__getitem__) == [7, 8]  # a tie: the order met


def test_the_nearest_goals_tactics_keep_their_slots_and_a_vote_ranks_the_rest() -> None:
    near = [(1.0, 0), (0.95, 1), (0.7, 2), (0.7, 3), (0.7, 4), (0.95, 5)]
    tactic = {0: "a.", 1: "b.", 2: "c.", 3: "c.", 4: "c.", 5: "a."}.__getitem__
    assert lt.proposal_order(near, tactic, keep=1) == [0, 2, 1]  # c: 1.47 outvotes b: 0.90
    assert lt.proposal_order(near, tactic, keep=2) == [0, 1, 2]  # a and b kept as met, as with no vote
    assert lt.proposal_order(near, tactic, first=1, keep=4) == [0, 2, 1]  # only the `first` nearest keep a slot


@pytest.mark.parametrize("voting", [True, False], ids=["vote", "first-met"])
def test_several_near_goals_closed_by_one_tactic_outrank_a_single_nearer_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, voting: bool) -> None:
    """Round sixteen: past the slots kept for the nearest goals' tactics (one here), a tactic that closed three
    goals a little less like this one goes before the tactic of one nearer goal (with the vote off, the order
    met, as before)."""
    monkeypatch.setattr(lt, "VOTE", voting)
    monkeypatch.setattr(lt, "VOTE_KEEP", 1)
    steps = [("y : nat; H : ok y |- foo (bar y) = baz (qux y)", "apply Nearest."),
             ("y : nat |- foo (bar y) = baz (qux y)", "apply Single.")]
    steps += [("y : nat; H : ok y |- foo (bar y) = baz y", "apply Common.")] * 3
    steps += [("l : list nat |- rev l = l", "apply rev_involutive.")] * 6
    entry = {"module": "M", "version": lt.INDEX_VERSION, "proofs": [],
             "steps": [{"theorem": f"t{k}", "goal": g, "tactic": t, "locals": ["y", "H", "l"]}
                       for k, (g, t) in enumerate(steps)]}
    (tmp_path / "M.json").write_text(json.dumps(entry))
    lib = LibraryTactics(tmp_path).load()
    task = TheoremTask(name="t", statement="Lemma t : True.", context="", original_proof="", prover="coq")
    lib.use(["M"], task)
    goal = "x : nat; H : ok x |- foo (bar x) = baz (qux x)"
    assert lib.index is not None
    sims = {i: s for s, i in lib.index.nearest(goal_features(goal), 5)}
    assert sims[0] > sims[1] > sims[2] and sims[1] ** 2 < 3 * sims[2] ** 2  # Single is nearer, Common outvotes it
    detail = CoqGoal(((("x",), "nat"), (("H",), "ok x")), "foo (bar x) = baz (qux x)")
    tactics = [c.tactic for c in lib.candidates(task, ProofState((), (goal,), (detail,)))]
    assert tactics[:3] == (["apply Nearest.", "apply Common.", "apply Single."] if voting
                           else ["apply Nearest.", "apply Single.", "apply Common."])
