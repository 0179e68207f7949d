"""An induction along an order from a hypothesis's lower bound (issue 33, round twenty-six, read from out-of-sample
47's `Numbers/NatInt/NZPow.v`).

`NZPow.v` proves most of its lemmas by `apply le_ind with (4 := Hb)` at `Hb : 0 <= b`: the induction of
`NZOrder.v` from a lower bound, whose motive Coq reads off the conclusion once the premise fixes the variable,
then `solve_proper` for its `Proper` premise. `induction b using le_ind` cannot use it (the `Proper` premise), and a
plain `apply` finds no motive that is not first-order. :func:`agents.coq_lookups.relation_inductions` reads such
lemmas from Coq's `Search`; :data:`agents.coq_tactics.ORDER_INDUCTIONS` offers the step. Against a real `coqtop`,
with the switch off and on.
"""

from __future__ import annotations

import re

import pytest
from coq_search import proved_iff
from needs import needs_coq

import agents.coq_tactics as coq_tactics
from agents.coq_lookups import relation_inductions
from oracle.proof_common import TheoremTask
from oracle.proof_state import Premise


def test_an_induction_along_an_order_is_read_with_its_premise_position() -> None:
    le_ind = Premise("C.le_ind", "forall A : t -> Prop, Proper (eq ==> iff) A -> forall n : t, A n -> (forall m : t, "
                                 "n <= m -> A m -> A (S m)) -> forall m : t, n <= m -> A m")
    bi = Premise("bi_induction", "forall A : t -> Prop, Proper (eq ==> iff) A -> A 0 -> (forall n : t, A n <-> A (S n)) "
                                 "-> forall n : t, A n")
    assert relation_inductions("t", [bi, le_ind]) == (("C.le_ind", "<=", 4, True),)
    assert relation_inductions("nat", [le_ind]) == ()


# an order on an abstract type and its induction from a lower bound, the shape of `NZOrder.v`'s `le_ind`; the
# motive of `Q b b` is no first-order instance of `?A ?m`, so a plain `apply` of the induction cannot find it
ORDER = ("Require Import Morphisms.\nParameter t : Type.\nParameter z : t.\nParameter s : t -> t.\n"
         "Parameter le : t -> t -> Prop.\nInfix \"<=\" := le.\n"
         "Axiom le_ind : forall A : t -> Prop, Proper (eq ==> iff) A -> forall n : t, A n -> "
         "(forall m : t, n <= m -> A m -> A (s m)) -> forall m : t, n <= m -> A m.\n"
         "Parameter Q : t -> t -> Prop.\nAxiom Q_z : Q z z.\nAxiom Q_s : forall m, Q m m -> Q (s m) (s m).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_an_induction_along_an_order_from_a_hypothesis(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`forall a b : t, z <= b -> Q b b` (`a` first: no `apply le_ind` at the statement): proved through `apply
    le_ind with (4 := H); [solve_proper | idtac ..]` with the rule, open after 300 tactic runs without it."""
    monkeypatch.setattr(coq_tactics, "ORDER_INDUCTIONS", rule)
    task = TheoremTask("Q_le", "Lemma Q_le : forall a b : t, z <= b -> Q b b.", ORDER, "", prover="coq")
    tactics = proved_iff(task, rule)
    # the step as it is, or with its discharge (round thirty-three's premises: `; try solve [eauto using Q_z, Q_s]`)
    assert not rule or any(re.fullmatch(r"apply le_ind with \(4 := \w+\); \[solve_proper \| idtac \.\.\]"
                                        r"(?:; try solve \[[^\[\]]*\])?\.", t)
                           for t in tactics), tactics
