"""A definition the goal shows only by its notation is offered to `unfold` (issue 33, round twenty-five, read from
out-of-sample 44's `Numbers/Natural/Abstract/NDefOps.v`).

`NDefOps.v` defines `def_add` and declares `Local Infix "+++" := def_add`; the goal `0 +++ y == y` never names
`def_add`, so no `unfold def_add.` was offered and the one-line proof (`unfold def_add. now rewrite
recursion_0.`) was out of reach: 2,003 tactic runs, 65 states, open. The context's `Infix` and `Notation`
sentences now say which constant a symbol prints (:func:`agents.premises.notation_names`,
:data:`agents.coq_tactics.NOTATION_UNFOLDS`). Against a real `coqtop`, with the switch off and on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from coq_search import MODULE_OPS, proved_iff, state_after
from needs import needs_coq

import agents.coq_tactics as coq_tactics
from agents.best_first import Node
from agents.coq_tactics import CoqTactics
from agents.premises import notation_names
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState

# the shape of `NDefOps.v`: an operation defined through an abstract recursor, printed by a local infix
RECURSOR = ("Section Defs.\nVariable rec : nat -> (nat -> nat -> nat) -> nat -> nat.\n"
            "Hypothesis rec_0 : forall a f, rec a f 0 = a.\n"
            "Definition dadd (x y : nat) := rec y (fun _ => S) x.\n"
            "Local Infix \"+++\" := dadd (at level 50, left associativity).\n"
            "Definition twice (x : nat) := x +++ x.\n"
            "Notation \"x <<= y\" := (twice x <= y) (at level 70).\n")
STATEMENT = "Lemma dadd_0_l : forall y, 0 +++ y = y."


def test_the_contexts_notations_name_their_constants() -> None:
    codes = ["Local Infix \"+++\" := def_add (at level 50, left associativity).",
             "#[local] Notation \"x <<= y\" := (twice x <= y) (at level 70).",
             "Notation \"'S' n\" := (succ n) (at level 0).",
             "Notation id x := x.",  # an abbreviation: no quoted pattern
             "Notation \"[ x ]\" := (cons x nil).",  # brackets only: no symbol a goal's words would show
             "Infix \"==\" := N.eq (at level 70) : N_scope."]
    assert notation_names(codes) == [(frozenset({"+++"}), "def_add"), (frozenset({"<<="}), "twice"),
                                      (frozenset({"S"}), "succ"), (frozenset({"=="}), "N.eq")]


@pytest.fixture(scope="module")
def recursor_state() -> Iterator[tuple[Any, TheoremTask, ProofState]]:
    for opened in state_after(TheoremTask("dadd_0_l", STATEMENT, RECURSOR, "", prover="coq"), "intro y."):
        goal = opened[2].goals[0]
        assert "+++" in goal and "dadd" not in goal, goal
        yield opened


def _tactics(opened: tuple[Any, TheoremTask, ProofState], tactic: str, *, library: bool) -> Sequence[str]:
    """The candidates the rules offer at the opened state, reached by ``tactic``."""
    states, task, state = opened
    source = CoqTactics(states, task, state, library=library, portfolio=False, setting="rediscover")
    return [c.tactic for c in source.candidates(Node(1, 0, tactic, state, 1, 0.0, ()))]


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_definition_shown_by_its_infix_is_unfolded(recursor_state, monkeypatch: pytest.MonkeyPatch,
                                                     rule: bool) -> None:
    """`0 +++ y = y`: `unfold dadd.` with the rule only; `twice`, whose notation the goal does not show, never."""
    monkeypatch.setattr(coq_tactics, "NOTATION_UNFOLDS", rule)
    tactics = _tactics(recursor_state, "intro y.", library=False)
    assert ("unfold dadd." in tactics) is rule, tactics
    assert "unfold twice." not in tactics, tactics
    states, _, state = recursor_state
    unfolded = states.run_tactic(state, "unfold dadd.")
    assert unfolded.state is not None and "rec y" in unfolded.state.goals[0], unfolded


# `NZAddOrder.v`'s `add_lt_le_mono`, on `nat`: the stdlib proves it `apply lt_le_trans with (m + p)`
MONO = "Require Import PeanoNat.\n"
MONO_STATEMENT = "Lemma mono : forall n m p q, n < m -> p <= q -> n + p < m + q."


@pytest.fixture(scope="module")
def mono_state() -> Iterator[tuple[Any, TheoremTask, ProofState]]:
    yield from state_after(TheoremTask("mono", MONO_STATEMENT, MONO, "", prover="coq"), "intros n m p q H1 H2.")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_transitivity_step_through_the_crossed_middle(mono_state, monkeypatch: pytest.MonkeyPatch,
                                                        rule: bool) -> None:
    """`n + p < m + q`: with the rule, `apply L with (m + p).` for a transitivity lemma `L` into `<` (the one
    chaining `<` and `<=`, the hypotheses' relations, first), and the step leaves the two one-operand goals."""
    monkeypatch.setattr(coq_tactics, "CROSSED_MIDDLES", rule)
    states, _, state = mono_state
    tactics = _tactics(mono_state, "intros n m p q H1 H2.", library=True)
    crossed = [t for t in tactics if t.startswith("apply ") and t.endswith((" with (m + p).", " with (n + q)."))]
    assert bool(crossed) is rule, tactics
    if rule:
        assert "lt_le_trans" in crossed[0], crossed
        step = states.run_tactic(state, crossed[0])
        assert step.state is not None, step.message
        assert [g.split("|-")[-1].strip() for g in step.state.goals] == ["n + p < m + p", "m + p <= m + q"]


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_search_unfolds_the_relation_its_infix_prints(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`Z.pred (Z.succ n) == n` with round twenty-three's module unfolds off: proved through `unfold Z.eq` with
    the rule, open after 300 tactic runs without it."""
    monkeypatch.setattr(coq_tactics, "MODULE_UNFOLDS", False)
    monkeypatch.setattr(coq_tactics, "NOTATION_UNFOLDS", rule)
    task = TheoremTask("pred_succ", "Lemma pred_succ : forall n, Z.pred (Z.succ n) == n.", MODULE_OPS, "",
                       prover="coq")
    tactics = proved_iff(task, rule)
    assert not rule or any(t.startswith("unfold ") and "Z.eq" in t for t in tactics), tactics
