"""Theorems inside a functor (issue 33, round five: out-of-sample 6's `NMulOrder.v` and `NZDomain.v`, 0 of 35).

Much of Coq's standard library is written inside functors (``Module NMulOrderProp (Import N : ...).
Include NAddOrderProp N.``). Three things kept the search from proving any theorem there, each shown here
against a real ``coqtop`` with its rule off and on:

1. ``Print Assumptions`` lists the parameter's fields as axioms, so the search vetoed every proof it found,
   the human one included (:func:`agents.coq_scope.parameter_field`);
2. Coq's ``Search`` does not show what ``Include`` brought into the module being defined, so premise
   selection never offered the lemmas the file builds on (:func:`agents.coq_scope.included_premises`);
3. the file's own earlier lemmas inside the open functor were dropped from the file premises as "not
   reachable" (:func:`agents.premises.coq_file_premises`).

And one outside functors, found on out-of-sample 7 after its blind run: a file's own ``Axiom`` was never a
premise, although the checker allows a proof to rest on the axioms its original rests on.
"""

from __future__ import annotations

import re

import pytest
from coq_search import MODULE_OPS, coq_search, rules_search
from needs import needs_coq

import agents.coq_lookups as coq_lookups
import agents.coq_scope as coq_scope
import agents.coq_tactics as coq_tactics
from agents.best_first import Node, SearchResult
from agents.coq_tactics import CoqTactics, premise_pattern
from agents.premises import coq_file_premises, is_rewrite_rule
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import TacticResult
from oracle.strip_coq import OpenModule, open_modules, split_sentences

SIG = ("Module Type S.\nParameter t : Type.\nParameter f : t -> t.\nParameter P : t -> Prop.\n"
       "Axiom Pf : forall x, P x -> P (f x).\nEnd S.\n")
# `deep` is proved in a functor the target includes: only `Print Module`/`Check` can show it there
FACTS = ("Module Facts (Import M : S).\nDefinition dbl x := f (f x).\n"
         "Lemma deep : forall x, P x -> P (dbl (dbl x)).\nProof. intros x H. unfold dbl. apply Pf, Pf, Pf, Pf, H. Qed.\n"
         "End Facts.\n")
TARGET = SIG + FACTS + "Module Target (Import M : S).\nInclude Facts M.\n"


def _codes(context: str) -> list[str]:
    return [u.code for u in split_sentences(context)]


def _search(task: TheoremTask, max_checks: int) -> SearchResult:
    """A real-coqtop search of ``task`` by the rules and premises (no portfolio, no k-NN)."""
    return coq_search(task, max_checks, library=True)


def test_open_modules_reads_parameters_and_includes() -> None:
    context = (SIG + FACTS + "Module Closed := Facts.\nSection Sec.\nEnd Sec.\n"
               "Module Outer.\nModule Target (Import M : S) (N1 N2 : S) <: S.\nInclude Facts M <+ Facts N1.\n"
               "Include (Facts N2).\nSection Inner.\n")
    assert open_modules(_codes(context)) == [OpenModule("Outer", (), ()),
                                             OpenModule("Target", ("M", "N1", "N2"), ("Facts",))]
    assert open_modules(_codes(context + "End Inner.\nEnd Target.\nEnd Outer.\n")) == []


def test_the_earlier_lemmas_of_the_open_functor_are_file_premises() -> None:
    """A closed functor's lemmas are unreachable by name; the open functor's earlier lemmas are the theorem's
    neighbours (they used to be dropped with the closed ones)."""
    context = TARGET + "Lemma near : forall x, P x -> P (f x).\nProof. exact Pf. Qed.\n"
    names = [p.name for p in coq_file_premises(context)[0]]
    assert names == ["near"]


def test_a_setoid_equation_is_a_rewrite_rule_and_patterns_read_lemmas() -> None:
    assert is_rewrite_rule("forall n m : t, n * m == m * n") and not is_rewrite_rule("forall n m : t, n <= m")
    assert premise_pattern("forall n m p : t, 0 <= p -> n <= m -> p * n <= p * m") == "_ * _ <= _ * _"


@needs_coq
def test_module_lemmas_shows_what_include_brought_in() -> None:
    """Inside `Target`, Coq's `Search` finds `deep` nowhere; `module_lemmas` reads it, stated in this scope."""
    from oracle.proof_state_coq import CoqProofStates

    task = TheoremTask("goal", "Lemma goal : forall x, P x -> P (dbl (dbl x)).", TARGET, "", prover="coq")
    states = CoqProofStates()
    try:
        states.start(task)
        searched = [p.name for p in states.search_premises("dbl")]
        lemmas = {p.name: p.statement for p in states.module_lemmas("Facts")}
        assert states.module_lemmas("Nope") == [] and states.module_lemmas("Facts; Quit") == []
        located = states.locate("Pf")
    finally:
        states.close()
    assert "deep" not in searched  # why the lookup exists
    assert lemmas["deep"] == "forall x : t, P x -> P (dbl (dbl x))"
    assert located == "M.Pf" and coq_scope.parameter_field(located, open_modules(_codes(TARGET)))


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_proof_resting_on_the_functors_parameter_is_not_vetoed(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """Inside a functor over the library's `OrderedType`, every proof of `eq_back` rests on the parameter's
    `eq` and `eq_equiv`, which `Print Assumptions` lists as axioms: with the rule off the search vetoes each
    proof it finds (as it vetoed every theorem of NMulOrder.v and NZDomain.v), with it on it proves it."""
    monkeypatch.setattr(coq_scope, "PARAMETER_FIELDS", rule)
    context = "Require Import Orders.\nModule Target (Import O : OrderedType).\n"
    task = TheoremTask("eq_back", "Lemma eq_back : forall x y, eq x y -> eq y x.", context, "", prover="coq")
    result = _search(task, max_checks=400)
    assert (result.reason == "proved") is rule, (result.reason, result.last_error)


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_lemma_the_functor_included_is_offered(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`far` is two steps with the included `deep` (sixteen `Pf` steps through `dbl` without it): with the
    included lemmas read, the search proves it with `deep`; without, it stays open within the same budget."""
    monkeypatch.setattr(coq_scope, "INCLUDED", rule)
    task = TheoremTask("far", "Lemma far : forall x, P x -> P (dbl (dbl (dbl (dbl x)))).", TARGET, "", prover="coq")
    result = _search(task, max_checks=600)
    assert (result.reason == "proved") is rule, (result.reason, result.last_error)
    if rule:
        assert any("deep" in t for t in result.tactics or ()), result.tactics


@needs_coq
def test_the_order_tactic_is_offered_where_the_scope_has_it() -> None:
    """`order` (Structures/OrdersTac.v) closes order goals in every `Numbers` functor; where the scope has no
    such tactic the probe marks it missing, and no candidate names it."""
    from oracle.proof_state_coq import CoqProofStates

    numbers = ("Require Import NAxioms NProperties.\nModule T (Import N : NAxiomsSig').\nInclude NBasicProp N.\n")
    goal = "Lemma chain : forall n m p, n <= m -> m < p -> n < p."
    states = CoqProofStates()
    try:
        inside = TheoremTask("chain", goal, numbers, "", prover="coq")
        root = states.start(inside)
        tactics = CoqTactics(states, inside, root, library=False, portfolio=False, setting="rediscover")
        intro = states.run_tactic(root, "intros.")
        closed = states.run_tactic(intro.state, "order.") if intro.state is not None else None
        plain = TheoremTask("plain", "Lemma plain : forall n m : nat, n <= m -> n <= S m.", "", "", prover="coq")
        elsewhere = CoqTactics(states, plain, states.start(plain), library=False, portfolio=False, setting="rediscover")
    finally:
        states.close()
    assert "order" not in tactics.unknown and "order'" not in tactics.unknown
    assert closed is not None and closed.outcome == "proved"
    assert {"order", "order'"} <= elsewhere.unknown


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_commutativity_lemma_the_functor_included_is_found(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """In a `Numbers` functor `mul_comm` is stated with the setoid's `==` and came in by `Include`: Coq's `Search
    (?a * ?b = ?b * ?a)` finds nothing there; the included lemmas give it. The same for the decision lemmas
    (`le_gt_cases`, for a case split) and for the tactics the
    included functors define (`nzsimpl`): `Locate Ltac` places them in the open module."""
    from oracle.proof_state_coq import CoqProofStates

    monkeypatch.setattr(coq_scope, "INCLUDED", rule)
    numbers = ("Require Import NAxioms NProperties.\nModule T (Import N : NAxiomsSig').\nInclude NBasicProp N.\n")
    task = TheoremTask("swap", "Lemma swap : forall n m, n * m == m * n.", numbers, "", prover="coq")
    states = CoqProofStates()
    try:
        tactics = CoqTactics(states, task, states.start(task), library=True, portfolio=False, setting="rediscover")
        found = tactics.lookups.commutes("*")
        deciders = [p.name for p in tactics.lookups.deciders("t")]
    finally:
        states.close()
    assert ("mul_comm" in found) is rule, found
    assert ("le_gt_cases" in deciders) is rule, deciders  # a case split on `n <= m \/ m < n`
    # the functor's own argument-free tactics (NZBase's `nzsimpl`), offered like a file's own
    assert ("nzsimpl." in tactics.own_tactics) is rule, tactics.own_tactics


# a tactic of one term that a functor defines and the target includes (as NBase.v's `cases n` reaches NOrder.v)
PAIRED = ("Module Type PS.\nParameter P : nat -> Prop.\nAxiom P0 : P 0.\nAxiom P1 : P 1.\n"
          "Axiom PSS : forall n, P n -> P (S (S n)).\nEnd PS.\n"
          "Module Tacs (Import M : PS).\n"
          "Ltac pairs x := cut (P x /\\ P (S x)); [tauto | induction x as [|x IH]; "
          "[split; [exact P0 | exact P1] | split; [tauto | apply PSS; tauto]]].\nEnd Tacs.\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_tactic_of_one_term_the_functor_included_is_offered(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """Every `P k` from `P 0`, `P 1` and a two-step rule needs a two-step induction, which the included functor
    writes as `pairs x`: `Print Ltac Signatures` and `Locate Ltac` place it in the open module with its one
    parameter, and the search calls it on `k`. Without the rule (the file's own tactics off in both, so only the
    module's lookup can offer it) the goal stays open."""
    monkeypatch.setattr(coq_lookups, "CONTEXT_ARG_TACTICS", False)
    monkeypatch.setattr(coq_scope, "MODULE_ARG_TACTICS", rule)
    context = PAIRED + "Module Target (Import M : PS).\nInclude Tacs M.\n"
    task = TheoremTask("all_p", "Lemma all_p : forall k : nat, P k.", context, "", prover="coq")
    result = _search(task, max_checks=300)
    assert (result.reason == "proved") is rule, (result.reason, result.last_error)
    if rule:
        assert "pairs k." in (result.tactics or ()), result.tactics


class _Signatures:
    """A session whose open module and parameters carry these tactics (as `Locate Ltac` would place them)."""

    def __init__(self, found: list[tuple[str, int]]) -> None:
        self.found = found
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def module_tactic_signatures(self, module: str, parameters: tuple[str, ...] = ()) -> list[tuple[str, int]]:
        self.asked.append((module, tuple(parameters)))
        return self.found


def test_a_module_tactic_that_is_a_closer_takes_no_slot() -> None:
    """`order` and `order'` are among the search's closers: offered again as module tactics they cost a tactic run at
    every state, and took two of the four slots (round fourteen). Skipped, the slots go to the next tactics."""
    states = _Signatures([("order", 0), ("order'", 0), ("nzsimpl", 0), ("nzsimpl'", 0), ("auto'", 0),
                          ("Private_tac", 0), ("le_elim", 1)])
    functor = [OpenModule("NZGcdProp", ("A", "B", "C"), ())]
    assert coq_scope.module_tactics(states, functor, skip={"order.", "order'."}) == (
        ("nzsimpl", 0), ("nzsimpl'", 0), ("auto'", 0), ("le_elim", 1))
    assert coq_scope.module_tactics(states, functor)[:4] == (("order", 0), ("order'", 0), ("nzsimpl", 0),
                                                             ("nzsimpl'", 0))
    assert states.asked[0] == ("NZGcdProp", ("A", "B", "C"))  # the parameters are asked for


def test_a_functor_that_includes_nothing_asks_for_its_parameters_tactics_only_with_the_rule(
        monkeypatch: pytest.MonkeyPatch) -> None:
    states = _Signatures([("nzsimpl", 0)])
    functor = [OpenModule("NZGcdProp", ("A", "C"), ())]
    assert coq_scope.module_tactics(states, functor) == (("nzsimpl", 0),)
    monkeypatch.setattr(coq_scope, "PARAMETER_TACTICS", False)
    assert coq_scope.module_tactics(states, functor) == ()  # round eleven's rule: a module that includes nothing
    assert coq_scope.module_tactics(states, [OpenModule("M", (), ())]) == ()  # neither parameters nor includes


# a tactic that a functor's parameter carries (as `NZGcdProp`'s parameter `C : NZMulOrderProp A` carries `nzsimpl`):
# `Locate Ltac` names it `T.climb`, not a tactic of the open module
PARAMETER_TACTIC = ("Module Type PS.\nParameter P : nat -> Prop.\nAxiom P0 : P 0.\nAxiom P1 : P 1.\n"
                    "Axiom PSS : forall n, P n -> P (S (S n)).\nEnd PS.\n"
                    "Module Type PTacs (Import M : PS).\n"
                    "Ltac climb := repeat apply PSS; first [exact P0 | exact P1].\nEnd PTacs.\n"
                    "Module Target (Import M : PS) (Import T : PTacs M).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_an_argument_free_tactic_a_functor_parameter_carries_is_offered(monkeypatch: pytest.MonkeyPatch,
                                                                        rule: bool) -> None:
    """`P 40` is twenty steps of `PSS` and one axiom: past the search's depth, one step of the parameter's
    `climb`. The target includes nothing, so only the parameters' tactics (round fourteen, `NZGcd.v`'s
    `nzsimpl`) can offer it; the file's own tactics are off in both, so the context's text cannot."""
    monkeypatch.setattr(coq_lookups, "CONTEXT_TACTICS", False)
    monkeypatch.setattr(coq_scope, "PARAMETER_TACTICS", rule)
    task = TheoremTask("p40", "Lemma p40 : P 40.", PARAMETER_TACTIC, "", prover="coq")
    result = _search(task, max_checks=300)
    assert (result.reason == "proved") is rule, (result.reason, result.last_error)
    if rule:
        assert "climb." in (result.tactics or ()), result.tactics


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_the_files_own_axiom_is_a_premise(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """A file that declares an axiom builds on it (`Logic/ClassicalEpsilon.v`); the checker allows the axioms the
    original rests on, so the search offers the file's `Axiom`s as premises (before: left out, like `Admitted`)."""
    monkeypatch.setattr(coq_tactics, "FILE_AXIOMS", rule)
    context = "Parameter P : nat -> nat -> Prop.\nAxiom P_diag : forall n, P n (n * n + n).\n"
    task = TheoremTask("p3", "Lemma p3 : P 3 12.", context, "", prover="coq")
    result = _search(task, max_checks=400)
    assert (result.reason == "proved") is rule, (result.reason, result.last_error)


SETOID = ("Require Import Setoid Morphisms.\nParameter t : Type.\nParameter eq : t -> t -> Prop.\n"
          "Infix \"==\" := eq (at level 70).\nAxiom eq_equiv : Equivalence eq.\n#[global] Existing Instance eq_equiv.\n"
          "Parameter f : t -> t.\nAxiom f_wd : Proper (eq ==> eq) f.\n#[global] Existing Instance f_wd.\n"
          "Parameter P : t -> Prop.\nAxiom P_wd : Proper (eq ==> iff) P.\n#[global] Existing Instance P_wd.\n"
          "Parameter zero : t.\nAxiom P_zero : P (f zero).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_setoid_equation_hypothesis_is_rewritten_with(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`H : x == zero` (a setoid's equality, as in every `Numbers` functor) is a proof, not a value: with the rule
    the search offers `rewrite H` and proves `P (f x)` from `P (f zero)` (`rewrite H`, then `P_zero`); without it, `H`
    was read as a value (`destruct H`, `induction H`) and the search stays open within the same budget (round
    nineteen: `NSub.v`'s `sub_0_l` needs `rewrite IH` at `P (0 - n) == 0`)."""
    monkeypatch.setattr(coq_tactics, "SETOID_HYPOTHESES", rule)
    task = TheoremTask("target", "Lemma target : forall x, x == zero -> P (f x).", SETOID, "", prover="coq")
    result, _ = rules_search(task, max_checks=300)
    assert (result.reason == "proved") is rule, (result.reason, result.last_error, result.tactics)
    if rule:
        assert any(re.fullmatch(r"rewrite H\w*\.", t) for t in result.tactics or ()), result.tactics


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_setoid_equation_conclusion_is_a_relation_not_a_constant_to_unfold(monkeypatch: pytest.MonkeyPatch,
                                                                             rule: bool) -> None:
    """At `x : t; H : x == zero |- f x == zero` the search offers `rewrite H` and no `red.` (the conclusion is a
    relation between two terms, not an applied constant; before round nineteen it read as `f` applied, and `red.`
    ran, and failed, at every such state of a `Numbers` functor); without the rule, the reverse."""
    from oracle.proof_state_coq import CoqProofStates

    monkeypatch.setattr(coq_tactics, "SETOID_HYPOTHESES", rule)
    task = TheoremTask("target", "Lemma target : forall x, x == zero -> f x == zero.", SETOID, "", prover="coq")
    states = CoqProofStates()
    try:
        state = states.start(task)
        result = states.run_tactic(state, "intros.")
        assert result.state is not None, result.message
        source = CoqTactics(states, task, result.state, library=False, portfolio=False, setting="rediscover")
        offered = [c.tactic for c in source.candidates(Node(1, 0, "intros.", result.state, 1, 0.0, ("intros.",)))]
        assert ("red." in offered) is not rule, offered
        assert ("rewrite H." in offered) is rule, offered
    finally:
        states.close()


# a functor that wraps its parameter and restates its lemmas (`MSets/MSetInterface.v`'s `WRaw2SetsOn`)
WRAPPED = ("Module Type Raw.\nParameter t : Type.\nParameter ok : t -> Prop.\nExisting Class ok.\n"
           "Parameter mem : nat -> t -> bool.\nParameter In : nat -> t -> Prop.\n"
           "Axiom mem_spec : forall (s : t) (x : nat) `{ok s}, mem x s = true <-> In x s.\nEnd Raw.\n"
           "Module Wrap (M : Raw).\nRecord t := Mk { this :> M.t; is_ok : M.ok this }.\n"
           "#[global] Existing Instance is_ok.\nDefinition mem x (s : t) := M.mem x s.\n"
           "Definition In x (s : t) := M.In x s.\n")
WRAPPED_STATEMENT = "Lemma mem_spec (s : t) (x : nat) : mem x s = true <-> In x s."


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_parameters_lemma_of_the_theorems_name_is_applied(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`MSetInterface.v`'s wrapping functors prove `mem_spec` by `exact (@M.mem_spec _ _ _)`: 14 of its theorems
    were open on out-of-sample 36, their lemma filtered out for sharing the theorem's short name. `apply M.mem_spec`
    and the instance it leaves (`M.ok s`, `apply is_ok`) prove it with the rule; without it (and without round
    twenty-three's, which keeps such a lemma wherever the shape search finds it), open after 300 runs."""
    monkeypatch.setattr(coq_tactics, "NAMESAKES", rule)
    monkeypatch.setattr(coq_tactics, "OTHER_NAMESAKES", rule)
    result = _search(TheoremTask("mem_spec", WRAPPED_STATEMENT, WRAPPED, "", prover="coq"), 300)
    if rule:
        assert result.reason == "proved" and (result.tactics or ("",))[0] == "apply M.mem_spec.", result.tactics
    else:
        assert result.reason != "proved", result.tactics




# a functor that imports its parameter and restates the parameter's law for its own pairs (`ZNatPairs.v`'s
# `ZPairsAxiomsMod (Import N : NAxiomsMiniSig)`, whose `lt_eq_cases` is `intros; apply N.lt_eq_cases.`)
PAIRS = ("Module Type Ord.\nParameter t : Type.\nParameter le lt : t -> t -> Prop.\n"
         "Axiom lt_eq_cases : forall n m, le n m <-> lt n m \\/ n = m.\nEnd Ord.\n"
         "Module Pairs (Import O : Ord).\nDefinition t := (O.t * O.t)%type.\n"
         "Definition le (p q : t) := O.le (fst p) (fst q).\nDefinition lt (p q : t) := O.lt (fst p) (fst q).\n"
         "Definition eq (p q : t) := fst p = fst q.\n")
PAIRS_STATEMENT = "Lemma lt_eq_cases : forall p q : t, le p q <-> lt p q \\/ eq p q."

# a file restating a sibling library's lemma under its name (`HexadecimalN.v`'s `Unsigned.of_to` ends `apply
# HexadecimalPos.Unsigned.of_to`, which `Unsigned.of_to` names while the file's own is not yet defined)
HEX_CONTEXT = "Require Import Hexadecimal HexadecimalFacts HexadecimalPos PArith NArith.\n\nModule Unsigned.\n"
HEX_STATEMENT = "Lemma of_to (n:N) : N.of_hex_uint (N.to_hex_uint n) = n."


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_namesake_is_offered_past_the_statement(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """The parameter's `lt_eq_cases` proves the pairs' one by conversion once the pairs are introduced: at the
    statement it cannot unify (`forall n m : O.t` against `forall p q : t`). With the rule (round twenty-three) the
    namesakes are offered at every state and the shape search keeps them; without it only at the statement, and the
    search drops every lemma of the theorem's short name: open after 300 runs."""
    monkeypatch.setattr(coq_tactics, "OTHER_NAMESAKES", rule)
    result = _search(TheoremTask("lt_eq_cases", PAIRS_STATEMENT, PAIRS, "", prover="coq"), 300)
    if rule:
        assert result.reason == "proved" and result.tactics == ("intros.", "apply O.lt_eq_cases."), result.tactics
    else:
        assert result.reason != "proved", result.tactics


@needs_coq
@pytest.mark.parametrize("case", ["at the statement", "past the statement", "another library's"])
def test_the_checker_accepts_a_parameters_namesake(tmp_path, case: str) -> None:
    """The parameter's lemma is another constant than the stripped theorem (the theorem's own module is not loaded
    where the checker judges it): `bench coq` proves the wrapping functor's `mem_spec` with `M.mem_spec` (round
    twenty-two), the pairs' `lt_eq_cases` with `O.lt_eq_cases` after `intros` (round twenty-three), and a
    restated `of_to` with `HexadecimalPos`'s (out-of-sample 42's `HexadecimalN.v`), each the checker's verdict."""
    import json

    from search_bench import search_bench

    if case == "at the statement":
        name, lemma, source = "mem_spec", "M.mem_spec", WRAPPED + WRAPPED_STATEMENT + \
            "\nProof. exact (@M.mem_spec _ _ _). Qed.\nEnd Wrap.\n"
    elif case == "past the statement":
        name, lemma, source = "lt_eq_cases", "lt_eq_cases", PAIRS + PAIRS_STATEMENT + \
            "\nProof. intros; apply lt_eq_cases. Qed.\nEnd Pairs.\n"
    else:
        name, lemma, source = "of_to", "Unsigned.of_to", HEX_CONTEXT + HEX_STATEMENT + \
            "\nProof.\n  destruct n.\n  - reflexivity.\n  - apply HexadecimalPos.Unsigned.of_to.\nQed.\nEnd Unsigned.\n"
    run = search_bench(tmp_path, f"{name}.v", source, "--theorem-seconds", "20")
    report = json.loads((run / "bench_report.json").read_text())
    assert report["theorems"][name]["solved"], report["theorems"]
    assert lemma in report["proofs"][name], report["proofs"]


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_modules_definitions_are_unfolded_together(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`Z.pred (Z.succ n) == n` holds once every definition of `Z` is unfolded, `Z.eq` (the `==`) among them: one
    step with the rule (round twenty-three); without it, open after 300 runs. Round twenty-five's reading of the
    `Infix` (`==` is `Z.eq`) is off here: it offers `unfold Z.eq` alone, which proves this too
    (tests/agents/test_proof_search_notations.py)."""
    monkeypatch.setattr(coq_tactics, "MODULE_UNFOLDS", rule)
    monkeypatch.setattr(coq_tactics, "NOTATION_UNFOLDS", False)
    task = TheoremTask("pred_succ", "Lemma pred_succ : forall n, Z.pred (Z.succ n) == n.", MODULE_OPS, "",
                       prover="coq")
    result, _ = rules_search(task, 300)
    if rule:
        assert result.reason == "proved", result.tactics
        assert any(t.startswith("unfold ") and "Z.eq" in t and "Z.pred" in t for t in result.tactics or ()), \
            result.tactics
    else:
        assert result.reason != "proved", result.tactics


def test_a_name_locate_finds_only_as_a_paths_suffix_denotes_nothing() -> None:
    """`Locate opp_max_distr` where `ZArith` is loaded and `Z` not imported answers `Z.opp_max_distr`, with the
    shorter name to refer to it by: the bare name denotes nothing here (round twenty-three's namesakes offered
    `apply opp_max_distr.` on such an answer in `Rminmax.v`)."""
    from oracle.coq.replies import located_constant

    suffix = "Constant Coq.ZArith.BinInt.Z.opp_max_distr\n  (shorter name to refer to it in current context is Z.opp_max_distr)\n"
    assert located_constant(suffix) == "Coq.ZArith.BinInt.Z.opp_max_distr"  # the checker's reading, unchanged
    assert located_constant(suffix, "opp_max_distr") is None
    assert located_constant(suffix, "Z.opp_max_distr") == "Coq.ZArith.BinInt.Z.opp_max_distr"
    assert located_constant("Constant Coq.Numbers.Cyclic.Int63.PrimInt63.lsr\nNotation Coq.Numbers.Cyclic.Int63."
                            "Uint63.lsr\n  (shorter name to refer to it in current context is Uint63.lsr)\n",
                            "lsr") == "Coq.Numbers.Cyclic.Int63.PrimInt63.lsr"


@needs_coq
def test_the_theorems_own_name_is_never_marked_missing_for_the_scope() -> None:
    """In `Rminmax.v` a failed `apply opp_max_distr.` (a namesake `Locate` found only as `Z.`'s) marked the name
    missing for the whole scope, and every later theorem's candidates naming the then-proved `opp_max_distr` were
    dropped (`minus_max_distr_r`, whose proof is `eauto using opp_min_distr, opp_max_distr, ...`, went open). The
    namesake is not offered, and a not-found error for the theorem's own name marks nothing."""
    from oracle.proof_state_coq import CoqProofStates

    task = TheoremTask("opp_max_distr", "Lemma opp_max_distr : forall n m : Z, (- Z.max n m = Z.min (- n) (- m))%Z.",
                       "Require Import ZArith.\n", "", prover="coq")
    states = CoqProofStates()
    try:
        source = CoqTactics(states, task, states.start(task), library=False, portfolio=False, setting="rediscover")
        assert source._namesakes() == []
        missing = "The reference opp_max_distr was not found in the current environment."
        source.observe(Candidate("apply opp_max_distr.", 0.3, source="premise"), TacticResult("error", message=missing))
        source.observe(Candidate("apply other_lemma.", 0.6, source="premise"),
                       TacticResult("error", message=missing.replace("opp_max_distr", "other_lemma")))
        assert source.facts.missing == {"other_lemma"}
    finally:
        states.close()

