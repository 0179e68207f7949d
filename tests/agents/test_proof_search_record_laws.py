"""A hypothesis that is a record of laws gives its fields as premises (issue 33, round fifteen).

``setoid_ring/Ring_theory.v`` takes its ring as section variables (``Variable Rth : ring_theory rO rI radd rmul
rsub ropp req``) and proves its lemmas through the record's fields: ``rewrite <- (ARadd_assoc ARth)``. Those
terms are no constants, so neither the file's statements nor ``Search`` list them. The search now asks Coq for
the fields of such a record (``Print``) and their types here (``Check (Radd_comm Rth)``), and ranks them with the
file's premises. Shown against a real ``coqtop`` with the rule off (no field is tried) and on. The rule is off by
default: in-sample it gained 2 of ``Ring_theory.v``'s 35 theorems and lost 3 of ``micromega/OrderedRing.v``'s 51.
"""

from __future__ import annotations

import pytest
from coq_search import rules_search
from needs import needs_coq

import agents.coq_lookups as coq_lookups
from agents.coq_tactics import CoqTactics
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState
from oracle.proof_state_coq import parse_check_replies, parse_record_fields

PRINTED = """Record
ring_theory (R : Type) (rO rI : R) (radd rmul rsub : R -> R -> R)
(ropp : R -> R) (req : R -> R -> Prop) : Prop := mk_rt
  { Radd_0_l : forall x : R, req (radd rO x) x;
    Radd_comm : forall x y : R, req (radd x y) (radd y x);
    SRadd_ext : Morphisms.Proper
                  (Morphisms.respectful req (Morphisms.respectful req req)) radd;
    Ropp_def : forall x : R, req (radd x (ropp x)) rO }.

Arguments ring_theory [R]%type_scope rO rI
"""


def test_parse_record_fields_reads_a_record_of_propositions_only() -> None:
    assert parse_record_fields(PRINTED) == (["Radd_0_l", "Radd_comm", "SRadd_ext", "Ropp_def"], 8)
    assert parse_record_fields("Inductive nat : Set :=  O : nat | S : nat -> nat.") == ([], 0)
    assert parse_record_fields("Record point : Type := mk_point { px : nat;  py : nat }.") == ([], 0)
    assert parse_record_fields("Module\nEquivalence\n:= Struct Definition Reflexive : ... End") == ([], 0)


def test_parse_check_replies_reads_each_answer_of_a_batch_in_order() -> None:
    text = ("Radd_comm Rth\n     : forall x y : R, req (radd x y)\n         (radd y x)\n\n<prompt>t < 3 |t| 0 < </prompt>"
            "Toplevel input, characters 7-13:\n> Check (nosuch Rth).\n"
            "Error: The reference nosuch was not found in the current environment.\n\n<prompt>t < 3 |t| 0 < </prompt>")
    found = parse_check_replies(text, ["Radd_comm Rth", "nosuch Rth"])
    assert found[1] is None and found[0] is not None
    assert (found[0].name, found[0].statement) == ("(Radd_comm Rth)", "forall x y : R, req (radd x y) (radd y x)")


LAWS = ("Record laws (P : nat -> Prop) : Prop := mk_laws { base : P 0 ; step : forall n, P n -> P (S (S n)) }.\n"
        "Section S.\nVariable P : nat -> Prop.\nVariable L : laws P.\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_the_fields_of_a_hypothesis_record_of_laws_are_premises(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`P 4` from `L : laws P`: with the rule the fields are premises, with the types Coq gives them (written
    `@step _ L`: the record's parameter is not implicit here), and the proof goes through them; without it no
    tactic names them."""
    monkeypatch.setattr(coq_lookups, "RECORD_FIELDS", rule)
    result, made = rules_search(TheoremTask("p4", "Lemma p4 : P 4.", LAWS, "", prover="coq"), 300)
    premises = {p.name: p.statement for p in made[0].file_index.premises}
    tried = " ".join(t[1] for t in result.tree["tries"])
    if rule:
        assert premises.get("(@step _ L)") == "forall n : nat, P n -> P (S (S n))"
        assert premises.get("(@base _ L)") == "P 0"
        assert result.proof is not None and "(@step _ L)" in result.proof, (result.proof, result.last_error)
    else:
        assert not any("step" in name for name in premises)
        assert "step _ L" not in tried and "base _ L" not in tried
    assert made[0].facts.records.get("laws") == ((("base", "step"), 1) if rule else None)


@needs_coq
def test_a_record_whose_parameters_are_implicit_gives_its_fields_applied_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ring_theory`'s parameters are implicit: `(Radd_comm Rth)`, as the stdlib writes it, with this scope's type."""
    from agents.best_first import Node
    from oracle.proof_state_coq import CoqProofStates

    monkeypatch.setattr(coq_lookups, "RECORD_FIELDS", True)

    context = ("Require Import Ring_theory.\nSection S.\nVariable R : Type.\n"
               "Variables (rO rI : R) (radd rmul rsub : R -> R -> R) (ropp : R -> R).\n"
               "Variable Rth : ring_theory rO rI radd rmul rsub ropp (@eq R).\n")
    task = TheoremTask("c", "Lemma c : forall x y : R, radd x y = radd y x.", context, "", prover="coq")
    states = CoqProofStates()
    try:
        root = states.start(task)
        tactics = CoqTactics(states, task, root, library=False, portfolio=False, setting="rediscover")
        premises = {p.name: p.statement for p in tactics.file_index.premises}
        offered = [c.tactic for c in tactics.candidates(Node(0, -1, "", root, 0, 0.0, ()))]
    finally:
        states.close()
    assert premises.get("(Radd_comm Rth)") == "forall x y : R, radd x y = radd y x"
    assert tactics.facts.records["ring_theory"][1] == 8 and len(premises) == len(tactics.facts.records["ring_theory"][0])
    assert any(t.startswith("apply (R") and t.endswith(" Rth).") for t in offered), offered


def test_a_rewrite_with_a_field_is_not_undone_or_repeated() -> None:
    """The loop guard reads a parenthesised lemma (`rewrite (Radd_comm Rth)` undone by `rewrite <- (Radd_comm Rth)`),
    as it reads a named one."""
    from agents.best_first import Node

    def after(*tactics: str) -> Node:
        return Node(1, 0, tactics[-1], ProofState(tactics, ("x",)), len(tactics), 0.0, tactics)

    assert CoqTactics.loops(after("rewrite (Radd_comm Rth)."), "rewrite <- (Radd_comm Rth).")
    assert CoqTactics.loops(after("rewrite (@step _ L).", "rewrite (@step _ L)."), "rewrite (@step _ L).")
    assert not CoqTactics.loops(after("rewrite (Radd_comm Rth)."), "rewrite (Radd_assoc Rth).")
