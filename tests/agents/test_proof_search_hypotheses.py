"""How the Coq search reads a state's hypotheses and the premises it ranks (issue 33, round twenty-four, read from
out-of-sample 42's `Lists/ListSet.v`).

1. A hypothesis whose type is an applied predicate with no sign of a proposition in its text (`H : set_In a x`) was
   read as a value: no `apply L in H`, no `apply H`, but `induction H` and `destruct H` as on a number. Now the
   head's type is asked once per scope (`Check set_In`: `A -> set -> Prop`) or read from the state (`P : nat ->
   Prop`) (:data:`agents.coq_tactics.PREDICATE_HYPOTHESES`).
2. A hypothesis's `if` (`H : set_In a (if set_mem a0 y then ... else ...)`, after `simpl`) offered no split on its
   condition; a conclusion's did (:data:`agents.coq_tactics.HYPOTHESIS_IFS`).
3. `Search set` lists the file's operations (`set_add : A -> set -> set`) and a file's predicate definition
   (`Definition set_In : A -> set -> Prop := ...`) was read as a lemma stated as a Definition: `apply set_add.` and
   `auto using set_In, set_add, set_remove` took the premises' slots (:data:`agents.premises.LEMMAS_ONLY`).

Each against a real `coqtop`, with its switch off and on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from coq_search import state_after
from needs import needs_coq

import agents.coq_tactics as coq_tactics
import agents.premises as premises
from agents.best_first import Node
from agents.coq_tactics import CoqTactics, returns_prop
from agents.premises import coq_file_premises, is_data_type
from oracle.proof_common import TheoremTask

# a finite-set library in the shape of `ListSet.v`: a predicate defined over lists, an operation by cases
SETS = ("Require Import List.\nSection Sets.\nVariable A : Type.\n"
        "Hypothesis Aeq_dec : forall x y : A, {x = y} + {x <> y}.\n"
        "Definition set := list A.\nDefinition set_In : A -> set -> Prop := In (A:=A).\n"
        "Fixpoint set_mem (a : A) (x : set) : bool := match x with nil => false | b :: y => "
        "if Aeq_dec a b then true else set_mem a y end.\n"
        "Fixpoint set_add (a : A) (x : set) : set := match x with nil => a :: nil | b :: y => "
        "if Aeq_dec a b then b :: y else b :: set_add a y end.\n"
        "Lemma set_add_elim : forall a b x, set_In a (set_add b x) -> a = b \\/ set_In a x.\n"
        "Proof. unfold set_In; induction x; simpl; intros; [intuition | destruct (Aeq_dec b a0); firstorder]. Qed.\n")
STATEMENT = "Lemma keep : forall (a b : A) (x y : set), set_In a (if set_mem b y then x else set_add b x) -> True."


def test_a_data_type_is_no_lemma_and_a_predicate_is_a_proposition(monkeypatch: pytest.MonkeyPatch) -> None:
    for typ in ("A -> set -> set", "set", "A -> set -> bool", "A -> set -> Prop", ": A -> set -> Prop"):
        assert is_data_type(typ), typ
    for typ in ("forall a b x, set_In a (set_add b x) -> a = b \\/ set_In a x", "True", "P -> Q", "Un_growing u",
                "forall A : Type, list A -> Prop"):
        assert not is_data_type(typ), typ
    assert returns_prop("A -> set -> Prop") and returns_prop("forall A : Type, list A -> Prop")
    assert returns_prop("Prop") and not returns_prop("A -> set -> set") and not returns_prop("Type -> Type")
    lemmas, definitions = coq_file_premises(SETS)
    assert [p.name for p in lemmas] == ["set_add_elim"] and "set_In" in definitions
    monkeypatch.setattr(premises, "LEMMAS_ONLY", False)
    assert not is_data_type("A -> set -> set")
    assert [p.name for p in coq_file_premises(SETS)[0]] == ["set_In", "set_add_elim"]


@pytest.fixture(scope="module")
def sets_state() -> Iterator[tuple[object, TheoremTask, object]]:
    yield from state_after(TheoremTask("keep", STATEMENT, SETS, "", prover="coq"), "intros a b x y H.")


def _tactics(sets_state: tuple[object, TheoremTask, object], *, library: bool = False) -> Sequence[str]:
    states, task, state = sets_state
    source = CoqTactics(states, task, state, library=library, portfolio=False, setting="rediscover")  # type: ignore[arg-type]
    return [c.tactic for c in source.candidates(Node(1, 0, "intros a b x y H.", state, 1, 0.0, ()))]  # type: ignore[arg-type]


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_an_applied_predicate_hypothesis_is_a_proof(sets_state, monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`H : set_In a (...)` shows no relation or connective: with the rule `Check set_In` says it is a predicate,
    and `H` is applied and rewritten with as a proof; without it, it is destructed and inducted on as a value."""
    monkeypatch.setattr(coq_tactics, "PREDICATE_HYPOTHESES", rule)
    monkeypatch.setattr(coq_tactics, "RULE_INDUCTIONS", False)  # which offers `induction H` on a proof of it too
    tactics = _tactics(sets_state)
    assert ("apply H." in tactics) is rule, tactics
    assert ("induction H." in tactics) is not rule, tactics


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_hypothesis_if_is_split_on_its_condition(sets_state, monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`destruct (set_mem b y).` splits `H`'s `if`, as a conclusion's always was (the proofs of `ListSet.v`'s
    `set_diff_elim1` and `set_inter_elim2` do it), with the rule only."""
    monkeypatch.setattr(coq_tactics, "HYPOTHESIS_IFS", rule)
    assert ("destruct (set_mem b y)." in _tactics(sets_state)) is rule


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_files_operations_take_no_premise_slot(sets_state, monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`Search set` lists `set_add : A -> set -> set` and `set_mem`: with the rule they are no premises (no `apply
    set_add.`), and the lemma `set_add_elim` is; `set_In`, a predicate, is a premise of neither kind."""
    monkeypatch.setattr(premises, "LEMMAS_ONLY", rule)
    tactics = _tactics(sets_state, library=True)
    assert "apply set_add_elim in H." in tactics or not rule, tactics
    named = {t.split()[1].rstrip(".") for t in tactics if t.startswith("apply ")}
    assert bool(named & {"set_add", "set_mem", "set_In"}) is not rule, sorted(named)
