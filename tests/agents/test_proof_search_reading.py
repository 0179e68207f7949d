"""What the search reads of a state and of its context (issue 33, round twenty-eight, read from out-of-sample 54's
`Relations/Operators_Properties.v`): a state's key reads every goal's hypotheses, and a tactic's name the context
gives a term is no tactic there, and a hypothesis that is an applied predicate is taken apart by induction.

coqtop prints the first goal with its hypotheses and the later goals by their conclusions only. Keyed by that display,
`induction H` and `destruct H` made one state whenever their first cases agreed, and the search dropped whichever ran
second as a state already seen: at `H : clos_refl_trans (clos_refl_trans R) x y |- clos_refl_trans R x y` the
induction, whose transitivity case needs its two induction hypotheses, was never expanded.
:data:`oracle.proof_state_coq.BACKGROUND_CONTEXTS` adds the contexts `Show Existentials` prints to the key of a state
of several goals.

`Relation_Definitions` defines a record `order`, so `order` names a term wherever it is loaded, and `try (fail;
order)` answers "Tactic expected" (not "not found"): the probe read the tactic of Coq's ordered structures as there,
and every `solve [...]` bundle of the cheap closers, which ends with `order`, failed whole at every state of such a
file. :data:`agents.coq_tactics.NAMED_TERMS` reads that answer as a missing tactic.

The rules took a hypothesis `H : clos_trans_1n R x y` apart by `inversion` only: an induction on the derivation, with
the induction hypotheses its step case needs, came from a learnt step or not at all
(:data:`agents.coq_tactics.RULE_INDUCTIONS`). Round thirty: that induction also with the later hypotheses given back
to the goal first, so that its induction hypothesis holds for every value of them
(:data:`agents.coq_tactics.GENERALIZED_DERIVATIONS`); round thirty-one: a value's induction reverting the hypotheses
about the later values with them (:data:`agents.coq_tactics.REVERT_DEPENDENTS`). Round thirty-three: a conclusion is a
product only by its top-level connective (:data:`agents.coq_tactics.TOP_PRODUCTS`; `~ In x s <-> mem x s = false` is
an equivalence). Against a real `coqtop`, each switch off and on.
"""

from __future__ import annotations

import pytest
from coq_search import proved_iff, state_after
from needs import needs_coq

import agents.coq_tactics as coq_tactics
import oracle.proof_state_coq as proof_state_coq
from agents.best_first import Node
from agents.coq_lookups import ScopeFacts
from agents.coq_tactics import CoqTactics, _middle_values, is_product, middle_binders, top_connectives
from oracle.proof_common import TheoremTask

DOUBLE = TheoremTask("double_twice", "Lemma double_twice : forall n : nat, n + n = 2 * n.", "", "", prover="coq")

# a reflexive-transitive closure of the file's own, in the shape of `Relation_Operators.clos_refl_trans`
CLOSURE = ("Inductive rt {A : Type} (R : A -> A -> Prop) : A -> A -> Prop :=\n"
           "| rt_step : forall x y, R x y -> rt R x y\n| rt_refl : forall x, rt R x x\n"
           "| rt_trans : forall x y z, rt R x y -> rt R y z -> rt R x z.\n")
MAX_CHECKS = 1000  # about 410 with the rule on; open after 3,000 with it off
IDEMPOTENT = TheoremTask("rt_idem", "Lemma rt_idem : forall (A : Type) (R : A -> A -> Prop) x y, "
                         "rt (rt R) x y -> rt R x y.", CLOSURE, "", prover="coq")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_induction_and_destruct_are_two_states(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """At `n : nat`, both print `0 + 0 = 2 * 0` and then `S n + S n = 2 * S n`; only the induction's second case holds
    `IHn`. Keyed apart with the rule on, as one state with it off."""
    monkeypatch.setattr(proof_state_coq, "BACKGROUND_CONTEXTS", rule)
    for states, _task, state in state_after(DOUBLE, "intros n."):
        split = states.run_tactic(state, "destruct n.")
        induct = states.run_tactic(state, "induction n.")
        assert split.state is not None and induct.state is not None, (split.message, induct.message)
        assert split.state.goals == induct.state.goals  # what coqtop prints of them
        assert (split.state.key != induct.state.key) is rule
        # why it matters: once the first case is closed, the second shows its hypotheses
        after_split = states.run_tactic(split.state, "reflexivity.")
        after_induct = states.run_tactic(induct.state, "reflexivity.")
        assert after_split.state is not None and after_induct.state is not None
        assert "IHn" in after_induct.state.goals[0] and "IHn" not in after_split.state.goals[0]


@needs_coq
def test_a_state_whose_contexts_coq_does_not_answer_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """When `Show Existentials` outruns its deadline the session is dropped with it: the tactic's state cannot be
    reached again, so the run is an error, not a state handed back in a dead session."""
    for states, _task, state in state_after(DOUBLE, "intros n."):
        def slow(chunk: str, deadline: float, states=states, send=states._send):  # type: ignore[no-untyped-def]
            if chunk.startswith("Show Existentials"):
                states._drop_session()
                raise proof_state_coq.ProofStateError("coqtop did not answer in time (session restarted)")
            return send(chunk, deadline)

        monkeypatch.setattr(states, "_send", slow)
        result = states.run_tactic(state, "destruct n.")
        assert (result.outcome, result.state) == ("error", None) and "did not answer" in result.message


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_an_induction_on_a_hypothesis_is_searched(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """The closure of a closure is the closure: its transitivity case needs the induction hypotheses, which the
    destruct tried before the induction lacks. Proved within the runs with the rule on, open with it off (the
    hypothesis's own induction rule off, so that the induction comes from the variables' rules alone)."""
    monkeypatch.setattr(proof_state_coq, "BACKGROUND_CONTEXTS", rule)
    monkeypatch.setattr(coq_tactics, "RULE_INDUCTIONS", False)
    tactics = proved_iff(IDEMPOTENT, rule, max_checks=MAX_CHECKS)
    assert not rule or any(t.startswith("induction H") for t in tactics), tactics


# `order` a term of the context, as where `Relation_Definitions` is loaded
NAMED_ORDER = TheoremTask("n_n", "Lemma n_n : forall n : nat, n = n.", "Require Import Relation_Definitions.\n", "",
                          prover="coq")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_tactic_name_the_context_gives_a_term_is_missing(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """Where `order` is `Relation_Definitions`' record, the closers' bundle leaves it out and closes `n = n` with the
    rule on; with it off the bundle names `order` and Coq refuses it whole."""
    monkeypatch.setattr(coq_tactics, "NAMED_TERMS", rule)
    for states, task, state in state_after(NAMED_ORDER, "intros n."):
        source = CoqTactics(states, task, state, library=False, portfolio=False, setting="rediscover")
        bundles = [c.tactic for c in source.candidates(Node(1, 0, "intros n.", state, 1, 0.0, ()))
                   if c.tactic.startswith("solve [")]
        assert len(bundles) == 1, bundles
        assert ("order" in bundles[0]) is not rule, bundles
        ran = states.run_tactic(state, bundles[0])
        assert (ran.outcome == "proved") is rule, (ran.outcome, ran.message)
        if not rule:
            assert "Tactic expected" in ran.message, ran.message


def test_a_steps_middle_is_a_value_the_hypotheses_name_and_the_goal_does_not() -> None:
    """:data:`agents.coq_tactics.MIDDLE_VALUES` (measured and left off): what `apply L with v` would be offered."""
    assert middle_binders("forall x y z : A, R x y -> R y z -> R x z") == ["y"]
    assert middle_binders("forall n m : nat, n <= m -> S n <= S m") == []
    hyps = [("A", "Type"), ("R", "relation A"), ("x", "A"), ("y", "A"), ("z", "A"), ("w", "A"),
            ("H", "R* x y"), ("H0", "R* y z")]
    # `w` is named by no hypothesis, `x` and `z` by the goal, `R` is no plain value
    assert _middle_values("R* x z", hyps, {"R* x y", "R* y z"}) == ["y"]


# an order of the file's own, in the shape of the prelude's `le`
ORDER = ("Inductive le2 : nat -> nat -> Prop :=\n| le2_n : forall n, le2 n n\n"
         "| le2_S : forall n m, le2 n m -> le2 n (S m).\n")
LE2_LE = TheoremTask("le2_le", "Lemma le2_le : forall n m, le2 n m -> n <= m.", ORDER, "", prover="coq")
INDUCTION_CHECKS = 150  # about 35 with the rule on; about 680 with it off (a nested induction on the values)


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_derivation_is_taken_apart_by_induction(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`le2 n m -> n <= m`: its step case needs the induction hypothesis. Proved within the runs with the rule on,
    by `induction H; auto.`; open within them with it off."""
    monkeypatch.setattr(coq_tactics, "RULE_INDUCTIONS", rule)
    tactics = proved_iff(LE2_LE, rule, max_checks=INDUCTION_CHECKS)
    assert not rule or any(t.startswith("induction H") for t in tactics), tactics


# an accumulator: the step case needs the induction hypothesis at another accumulator than the one introduced
EV = "Inductive ev : nat -> Prop := ev0 : ev 0 | evSS : forall n, ev n -> ev (S (S n)).\n"
ADDACC = "Fixpoint addacc (n acc : nat) := match n with 0 => acc | S k => addacc k (S acc) end.\n"
EVEN_ACC = TheoremTask("ev_acc", "Lemma ev_acc : forall n, ev n -> forall m, ev m -> ev (addacc n m).",
                       EV + ADDACC, "", prover="coq")
GENERALIZED_CHECKS = 700  # about 455 with the rule on (measured); none of 1000 with it off


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_derivations_induction_keeps_the_later_hypotheses_general(monkeypatch: pytest.MonkeyPatch,
                                                                     rule: bool) -> None:
    """`ev n -> forall m, ev m -> ev (addacc n m)` (SetoidList.v's `eqlistA_rev_app`, `induction 1` before the later
    binders): after `intros`, `induction H` fixes `m`, and the step case's `addacc n (S (S m))` is out of its
    hypothesis's reach. With the rule, `revert m H0; induction H.` gives the hypothesis for every `m`; without it the
    goal stays open within the runs."""
    monkeypatch.setattr(coq_tactics, "GENERALIZED_DERIVATIONS", rule)
    tactics = proved_iff(EVEN_ACC, rule, max_checks=GENERALIZED_CHECKS)
    assert not rule or any(t.startswith("revert m H0; induction H") for t in tactics), tactics


# a statement whose binders come before its colon (`Lemma inj_le n m : ..`, the stdlib's habit): they are
# hypotheses from the start, so no induction before `intros` can leave `m` general
DOUBLE_ACC = TheoremTask("ev_double_acc", "Lemma ev_double_acc (n m : nat) (H : ev m) : ev (addacc (double n) m).",
                         EV + "Fixpoint double (n : nat) := match n with 0 => 0 | S k => S (S (double k)) end.\n"
                         + ADDACC, "", prover="coq")
DEPENDENT_CHECKS = 700  # about 280 with the rule on (measured); none of 1500 with it off


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_values_induction_reverts_the_hypotheses_about_the_later_values(monkeypatch: pytest.MonkeyPatch,
                                                                          rule: bool) -> None:
    """`addacc (double (S n)) m` is `addacc (double n) (S (S m))`: the step needs the induction hypothesis for every
    `m`. `revert m; induction n.` is refused ("m is used in hypothesis H"); with the rule the hypothesis about `m` goes
    back to the goal with it (`revert m H; induction n`) and the goal is proved; without it, open within the runs."""
    monkeypatch.setattr(coq_tactics, "REVERT_DEPENDENTS", rule)
    tactics = proved_iff(DOUBLE_ACC, rule, max_checks=DEPENDENT_CHECKS)
    assert not rule or any(t.startswith("revert m H; induction n") for t in tactics), tactics


def test_a_predicate_coq_called_no_inductive_is_not_taken_apart_again() -> None:
    """Once `induction H` on `H : le a b` was answered "Not an inductive product" (an abstract `le`), no hypothesis of
    `le` is taken apart in the scope: `le b c` neither (no prover here: the facts are given)."""
    tactics = CoqTactics.__new__(CoqTactics)
    tactics.facts = ScopeFacts(not_inductive={"le"})
    assert not tactics._inductive_may_be("le b c", set())
    assert tactics._inductive_may_be("lex b c", set())


def test_a_product_is_read_by_its_top_level_connective() -> None:
    """:func:`agents.coq_tactics.is_product`: `intros` introduces from a leading `forall`, a top-level `->`, or a
    negation of the whole conclusion; an equivalence, a conjunction or an `exists` whose parts hold an arrow or a
    negation is none."""
    for product in ("forall x, P x", "A -> B", "~ (A /\\ B)", "~ a = b", "~ A -> B", "A <-> B -> C",
                    "A -> exists x, P x", "x <= y ->\n  y <= x"):
        assert is_product(product), product
    for other in ("~ In x s <-> mem x s = false", "~ A /\\ ~ B", "~ P \\/ Q", "(A -> B) <-> C",
                  "exists x, P x -> Q x", "{x | P x -> Q x}", "map f l = map g l <-> forall a, In a l -> f a = g a",
                  "match n with 0 => A -> B | _ => C end = D"):
        assert not is_product(other), other
    assert top_connectives("(A -> B) <-> C /\\ D") == ["<->", "/\\"]


# a membership test of the file's own and its specification (`MSetFacts.not_mem_iff`'s shape)
MEMBERSHIP = ("Require Import List.\nFixpoint mem (x : nat) (l : list nat) : bool :=\n"
              "  match l with nil => false | cons y t => Nat.eqb x y || mem x t end.\n"
              "Lemma mem_spec : forall x l, mem x l = true <-> In x l.\nAdmitted.\n")
NOT_MEM = TheoremTask("not_mem", "Lemma not_mem : forall x l, ~ In x l <-> mem x l = false.", MEMBERSHIP, "",
                      prover="coq")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_an_equivalence_of_a_negation_is_no_product(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`~ In x l <-> mem x l = false` after `intros`: with the rule (:data:`agents.coq_tactics.TOP_PRODUCTS`) the
    search reads an equivalence and proves it within 300 runs (about 110); with it off the leading `~` made it a
    product, offered `intros` (no progress), the closers and applied premises only, and the search ran out of
    candidates (about 230 runs)."""
    monkeypatch.setattr(coq_tactics, "TOP_PRODUCTS", rule)
    proved_iff(NOT_MEM, rule, max_checks=300)
