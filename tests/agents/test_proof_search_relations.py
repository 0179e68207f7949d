"""`intro` at an order defined as a negation (issue 33, round twenty-six, read from out-of-sample 47's
`Reals/Abstract/ConstructiveRealsMorphisms.v`).

`CRle x y` is `CRlt y x -> False`, printed `x <= y`: the stdlib proves `CRmorph_le` by `intros. intro abs. apply
CRmorph_increasing_inv in abs. contradiction.`, and the search offered `intro` only at a conclusion that shows a
product or starts with `~`. :data:`agents.coq_tactics.RELATION_INTROS` offers it at a conclusion of one order or
disequality. Against a real `coqtop` state, with the switch off and on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from coq_search import state_after
from needs import needs_coq

import agents.coq_tactics as coq_tactics
from agents.best_first import Node
from agents.coq_tactics import CoqTactics
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState

# an order defined as the negation of a strict one, in a module of its own (no `unfold` the goal's names offer)
ORDER = ("Module O.\nParameter T : Type.\nParameter lt : T -> T -> Prop.\n"
         "Definition le (x y : T) := lt y x -> False.\nEnd O.\nImport O.\n"
         "Parameter f : T -> T.\nAxiom f_inc_inv : forall x y, lt (f x) (f y) -> lt x y.\n")


@pytest.fixture(scope="module")
def le_state() -> Iterator[tuple[Any, TheoremTask, ProofState]]:
    task = TheoremTask("f_le", "Lemma f_le : forall x y, le x y -> le (f x) (f y).",
                       ORDER + "Infix \"<=\" := le (at level 70).\n", "", prover="coq")
    for opened in state_after(task, "intros x y H."):
        assert opened[2].goals[0].endswith("f x <= f y"), opened[2].goals
        yield opened


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_intro_is_offered_at_an_order(le_state, monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`f x <= f y`: `intro.` with the rule only, and it takes the premise `lt (f y) (f x)`."""
    monkeypatch.setattr(coq_tactics, "RELATION_INTROS", rule)
    states, task, state = le_state
    source = CoqTactics(states, task, state, library=False, portfolio=False, setting="rediscover")
    tactics = [c.tactic for c in source.candidates(Node(1, 0, "intros x y H.", state, 1, 0.0, ()))]
    assert ("intro." in tactics) is rule, tactics
    step = states.run_tactic(state, "intro.")
    assert step.state is not None and "lt (f y) (f x)" in step.state.goals[0], step

