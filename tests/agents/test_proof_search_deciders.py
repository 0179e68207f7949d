"""A case split chosen by what the hypotheses say (issue 33, round twenty-seven, read from out-of-sample 50's
`Reals/Ranalysis4.v`).

`Rderivable_pt_abs : forall x, x <> 0 -> derivable_pt Rabs x` is proved by `destruct (total_order_T x 0)`. The search
offered the two decision lemmas nearest the goal, `Req_EM_T x 0` (`{x = 0} + {x <> 0}`: one case is `H`, the other
contradicts it; it added a copy of `H` three times over) and `cos_sin_0_var x` (`cos x <> 0 \\/ sin x <> 0`, whose
constants the goal never shows). :data:`agents.coq_tactics.DECIDER_HYPOTHESES` reads each lemma's cases at the values.
And `Sets/Powerset_facts.v` proves its algebra of sets by `auto 9 with sets`, past `auto`'s default depth:
:data:`agents.coq_tactics.HINTS_AUTO_DEEP` (measured and left off) offers `auto 9 with *.`. Against a real `coqtop`,
each switch off and on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from coq_search import proved_iff, state_after
from needs import needs_coq

import agents.coq_tactics as coq_tactics
from agents.best_first import Node
from agents.coq_lookups import decider_cases, proposition_key
from agents.coq_tactics import CoqTactics, _unrelated
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState

# a type with an equality decider, a trichotomy, an order decider and a split on two predicates no goal names;
# `P` holds on each side of the order, and nothing says it holds at equal values
ORDERED = ("Parameter T : Type.\nParameter lt : T -> T -> Prop.\nParameters g h : T -> Prop.\n"
           "Parameter P : T -> T -> Prop.\n"
           "Axiom T_eq_dec : forall a b : T, {a = b} + {a <> b}.\n"
           "Axiom T_trichotomy : forall a b : T, {lt a b} + {a = b} + {lt b a}.\n"
           "Axiom T_lt_dec : forall a b : T, {lt a b} + {~ lt a b}.\n"
           "Axiom g_or_h : forall a : T, g a \\/ h a.\n"
           "Axiom P_lt : forall a b, lt a b -> P a b.\nAxiom P_gt : forall a b, lt b a -> P a b.\n")
APART = TheoremTask("P_apart", "Lemma P_apart : forall x y : T, x <> y -> P x y.", ORDERED, "", prover="coq")


def test_a_deciders_cases_are_read_at_its_arguments() -> None:
    assert decider_cases("forall r1 r2 : R, {r1 = r2} + {r1 <> r2}", ("x", "0")) == ["0 = x", "0 <> x"]
    assert decider_cases("forall r1 r2 : R, {r1 < r2} + {r1 = r2} + {r2 < r1}", ("x", "0")) == [
        "x < 0", "0 = x", "0 < x"]
    assert decider_cases("forall n m : t, n <= m \\/ m < n", ("a", "b + 1")) == ["a <= (b + 1)", "(b + 1) < a"]
    assert decider_cases("forall r : R, {r < 0} + {r >= 0}", ("h",)) == ["h < 0", "0 <= h"]
    # a specification type has no cases to read, and another arity is none
    assert decider_cases("forall x y : t, CompareSpec (x == y) (x < y) (y < x) (compare x y)", ("a", "b")) == []
    assert decider_cases("forall r : R, {r < 0} + {r >= 0}", ("a", "b")) == []


def test_a_proposition_has_one_spelling() -> None:
    assert proposition_key("~ (x = 0)") == proposition_key("x <> 0") == proposition_key(" 0 <>  x ")
    assert proposition_key("(0 > x)") == proposition_key("x < 0")
    assert proposition_key("a >= b") == proposition_key("b <= a")
    assert proposition_key("y = x") == proposition_key("x = y")
    assert proposition_key("x < y") != proposition_key("y < x")  # an order keeps its sides
    assert proposition_key("~ P x") == "~ P x"


def test_a_lemma_whose_constants_the_goal_never_shows_is_unrelated() -> None:
    assert _unrelated("forall x : R, cos x <> 0 \\/ sin x <> 0", "x : R; H : x <> 0 |- derivable_pt Rabs x")
    assert not _unrelated("forall x : Z, {Zeven x} + {Zodd x}", "n : Z |- Zeven n")  # one of them is shown
    assert not _unrelated("forall r1 r2 : R, {r1 < r2} + {r1 = r2} + {r2 < r1}", "x : R |- P x")  # none named


@pytest.fixture(scope="module")
def apart_state() -> Iterator[tuple[Any, TheoremTask, ProofState]]:
    for opened in state_after(APART, "intros x y H."):
        assert opened[2].goals[0].endswith("P x y"), opened[2].goals
        yield opened


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_the_split_a_hypothesis_decides_is_not_offered(apart_state, monkeypatch: pytest.MonkeyPatch,
                                                        rule: bool) -> None:
    """`H : x <> y`: `destruct (T_eq_dec ..)` only with the rule off, and with it on the trichotomy and the order's
    decider come before the split on `g` and `h`."""
    monkeypatch.setattr(coq_tactics, "DECIDER_HYPOTHESES", rule)
    states, task, state = apart_state
    source = CoqTactics(states, task, state, library=False, portfolio=False, setting="rediscover")
    splits = [c.tactic for c in source.candidates(Node(1, 0, "intros x y H.", state, 1, 0.0, ()))
              if c.tactic.startswith("destruct (")]
    assert any("T_eq_dec" in t for t in splits) is not rule, splits
    if rule:
        assert {t.split()[1].lstrip("(") for t in splits} == {"T_trichotomy", "T_lt_dec"}, splits
    # the trichotomy splits three ways on coqtop (the middle case is the one H contradicts)
    step = states.run_tactic(state, "destruct (T_trichotomy x y) as [[L|E]|G].")
    assert step.state is not None and len(step.state.goals) == 3, step
    assert "L : lt x y" in step.state.goals[0], step.state.goals


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_the_search_splits_on_the_order_the_hypothesis_leaves_open(monkeypatch: pytest.MonkeyPatch,
                                                                   rule: bool) -> None:
    """`x <> y -> P x y`: proved within 1,000 tactic runs with the rule (about 730 runs here, through a split on
    the order), open without it (about 2,600 runs here: the equality's split comes first)."""
    monkeypatch.setattr(coq_tactics, "DECIDER_HYPOTHESES", rule)
    # the rule alone: with the premises ranked on a split's cases (round thirty-three) the order's split comes in
    # reach without it as well
    monkeypatch.setattr(coq_tactics, "PREMISE_DISCHARGE", False)
    tactics = proved_iff(APART, rule, max_checks=1000)
    assert not rule or any(t.startswith("destruct (T_") and "T_eq_dec" not in t for t in tactics), tactics


# a hint database whose proof of `A0` is eight `apply`s deep: past `auto`'s default depth 5 (`Sets/Powerset_facts.v`'s
# `auto 9 with sets`, round twenty-seven's `auto 9 with *.`)
CHAIN = ("Parameters A0 A1 A2 A3 A4 A5 A6 A7 : Prop.\nAxiom a7 : A7.\n"
         + "".join(f"Axiom a{k} : A{k + 1} -> A{k}.\n" for k in range(7))
         + "Create HintDb chain.\n#[global] Hint Resolve a0 a1 a2 a3 a4 a5 a6 a7 : chain.\n")
DEEP = TheoremTask("deep", "Lemma deep : A0.", CHAIN, "", prover="coq")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_hint_chain_past_autos_depth_is_closed(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`A0` from eight hints of one database: closed by `auto 9 with *.` within 40 tactic runs with the rule, open
    without it (`auto with *` stops at depth 5; step by step the search needs eight levels)."""
    monkeypatch.setattr(coq_tactics, "HINTS_AUTO_DEEP", rule)
    tactics = proved_iff(DEEP, rule, max_checks=40)
    assert not rule or tactics[-1] == "auto 9 with *.", tactics
