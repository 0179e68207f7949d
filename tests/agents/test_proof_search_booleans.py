"""A boolean restatement is proved through the equivalences that reflect its booleans (issue 33, round twenty-six,
read from out-of-sample 46's `FSets/FSetFacts.v`).

`FSetFacts.v` restates its set lemmas with booleans (`mem y (add x s) = eqb x y || mem y s`) after stating them
with propositions (`In y (add x s) <-> E.eq x y \\/ In y s`); eleven of them were open after the whole budget. The
step that proves them (agents/coq_booleans.py, :data:`agents.coq_tactics.BOOLEAN_REFLECTIONS`) is read here from
the goal's terms and the lemmas Coq's `Search` gives; the last tests run it against a real `coqtop`, with the
switch off and on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from coq_search import proved_iff
from needs import needs_coq

import agents.coq_tactics as coq_tactics
from agents.coq_booleans import Equivalence, atoms, match, reflection, reflection_step, restatements
from oracle.proof_common import TheoremTask
from oracle.proof_state import Premise

MEM_SPEC = Premise("mem_spec", "forall (s : set) (x : nat), mem x s = true <-> In x s")
ADD_SPEC = Premise("add_spec", "forall (s : set) (x y : nat), In y (add x s) <-> x = y \\/ In y s")
# `Set Implicit Arguments` prints the variables a premise fixes in brackets; they are applied all the same
ADD_NEQ = Premise("add_neq", "forall (s : set) [x y : nat], x <> y -> In y (add x s) <-> In y s")
SAME = Premise("same", "forall (s : set) (x y : nat), x = y -> In x s <-> In y s")
LOCAL = {"s", "x", "y", "H", "f"}


def _holes(prop: str) -> str:
    return re.sub(r"(?<![\w'])[A-Za-z_][\w']*", lambda m: "_" if m.group(0) in LOCAL else m.group(0), prop)


def _step(concl: str, hyps: Sequence[tuple[str, str]], found: dict[str, list[Premise]]) -> str | None:
    return reflection_step(concl, hyps, local=LOCAL, definitions={"eqb"},
                           reflections=lambda head: [MEM_SPEC] if head == "mem" else [],
                           equivalences=lambda pattern: found.get(pattern, []), holes=_holes)


def test_the_booleans_under_and_or_and_negb_are_the_atoms() -> None:
    assert atoms("mem x s && negb (mem x s')") == ["mem x s", "mem x s'"]
    assert atoms("(eqb x y || mem y (add x s))") == ["eqb x y", "mem y (add x s)"]
    assert atoms("true") == [] and atoms("x <=? y") == []  # no application of a name


def test_a_pattern_fixes_the_variables_argument_by_argument() -> None:
    assert match("mem x s", "mem y (add x s)", {"x", "s"}) == {"x": "y", "s": "add x s"}
    assert match("In y (add x s)", "In y (add x (union s s'))", {"x", "y", "s"}) == \
        {"y": "y", "x": "x", "s": "union s s'"}
    assert match("mem x x", "mem y s", {"x"}) is None  # one variable, two values
    assert match("mem x s", "remove x s", {"x", "s"}) is None


def test_an_equivalence_is_read_with_its_binders_in_order_and_its_premises() -> None:
    lemma = Equivalence.read(ADD_NEQ)
    assert lemma is not None
    assert (lemma.binders, lemma.premises, lemma.sides) == (["s", "x", "y"], ["x <> y"], ("In y (add x s)", "In y s"))
    assert reflection(Equivalence.read(MEM_SPEC), "mem") == ("mem x s", "In x s")  # type: ignore[arg-type]
    assert reflection(Equivalence.read(ADD_SPEC), "mem") is None  # type: ignore[arg-type]
    assert Equivalence.read(Premise("le_trans", "forall n m p, n <= m -> m <= p -> n <= p")) is None


def test_a_restatement_is_kept_when_specific_or_when_the_hypotheses_give_its_premises() -> None:
    found = [ADD_SPEC, ADD_NEQ, MEM_SPEC]
    # `In y (add x s)` is specific: both its restatements; `add_neq` only once `H : x <> y` gives its premise
    assert restatements("In y (add x s)", found, [], set()) == ["(@add_spec s x y)"]
    assert restatements("In y (add x s)", found, [("H", "x <> y")], set()) == ["(@add_neq s x y H)", "(@add_spec s x y)"]
    # `In x s` is not: only a lemma whose premise a hypothesis gives, which fixes the variable it leaves
    assert restatements("In x s", [SAME, MEM_SPEC], [], set()) == []
    assert restatements("In x s", [SAME, MEM_SPEC], [("H", "x = y")], set()) == ["(@same s x y H)"]


def test_the_step_generalizes_unfolds_and_splits() -> None:
    step = _step("mem y (add x s) = eqb x y || mem y s", [], {"In _ (add _ _)": [ADD_SPEC, ADD_NEQ]})
    assert step == ("generalize (@mem_spec (add x s) y) (@mem_spec s y) (@add_spec s x y); unfold eqb; "
                    "repeat match goal with |- context [if ?c then _ else _] => destruct c end; "
                    "destruct (mem y (add x s)); destruct (mem y s); intuition.")
    # a local function's boolean is split, not looked up; no reflection at all: no step
    assert "destruct (f x)" in (_step("mem x s && f x = mem x s", [], {}) or "")
    assert _step("f x = f y", [], {}) is None
    assert _step("length l = 0", [], {}) is None


# a set's interface stated as this project's own parameters: a boolean membership that reflects `In`, and a
# definition `eqb` of an `if`; the restatement of `add_spec` with booleans is `add_b`'s shape
SETS = ("Require Import Bool PeanoNat.\nParameter set : Type.\nParameter In : nat -> set -> Prop.\n"
        "Parameter mem : nat -> set -> bool.\nParameter add : nat -> set -> set.\n"
        "Axiom mem_spec : forall (s : set) (x : nat), mem x s = true <-> In x s.\n"
        "Axiom add_spec : forall (s : set) (x y : nat), In y (add x s) <-> x = y \\/ In y s.\n"
        "Definition eqb (x y : nat) := if Nat.eq_dec x y then true else false.\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_boolean_restatement_is_proved_through_its_reflections(monkeypatch: pytest.MonkeyPatch,
                                                                  rule: bool) -> None:
    """`mem y (add x s) = eqb x y || mem y s`: proved by the one step with the rule, open after 300 tactic runs
    without it."""
    monkeypatch.setattr(coq_tactics, "BOOLEAN_REFLECTIONS", rule)
    task = TheoremTask("add_b", "Lemma add_b : forall s x y, mem y (add x s) = eqb x y || mem y s.", SETS, "",
                       prover="coq")
    tactics = proved_iff(task, rule)
    assert not rule or any(t.startswith("generalize (@mem_spec (add x s) y)") for t in tactics), tactics

