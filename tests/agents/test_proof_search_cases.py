"""Case analyses the search offers (issue 33, round six), each shown against a real ``coqtop``.

1. The value a ``match`` inspects is destructed in parentheses when it is an application: after ``unfold
   sqrt`` (or ``Rabs``, ``Rmax``, ``Z.max``) the goal reads ``match Rcase_abs x with ...``, and the search
   offered ``destruct Rcase_abs x.``, which Coq refuses as a syntax error. ``destruct (Rcase_abs x).`` is
   the step the stdlib's own proofs take. The same for a ``match`` in a hypothesis (``unfold sqrt in H``).
2. A library constant the theorem names is unfolded: ``Rsqr (x * y) = Rsqr x * Rsqr y`` is ``unfold Rsqr.
   ring.``, but the search unfolded only the file's own definitions, and Coq prints ``Rsqr x`` as ``x²``, so
   the name is read from the statement's text as well (switch ``coq_tactics.LIBRARY_UNFOLD``).
3. The goals a step opens are offered the cheap closers at once: ``rewrite f_r`` with ``f_r : n <= m -> f n m
   = m`` leaves ``n <= m`` beside the rewritten goal, and the search ran it again as ``rewrite f_r; try solve
   [... | lia]``, so a side goal costs no search of its own (switch ``best_first.DISCHARGE``).
4. CoqHammer's tactics stop after three of them ran out of time in one theorem (``coq_tactics.HAMMER_TIMEOUTS``):
   on the Reals files each timeout cost a whole 2 s timer, and they took 40% of the search's seconds.
5. The steps the run learnt from its own proofs stop after two of them ran out of time in one theorem
   (``coq_tactics.LEARNED_TIMEOUTS``, round eight).
"""

from __future__ import annotations

import pytest
from coq_search import coq_search
from needs import needs_coq

import agents.best_first as best_first
import agents.coq_tactics as coq_tactics
from agents.best_first import Node, SearchResult
from agents.coq_lookups import ScopeFacts
from agents.coq_tactics import CoqTactics, match_scrutinees
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import TacticResult


def _rules_search(task: TheoremTask, max_checks: int) -> SearchResult:
    """A real-coqtop search of ``task`` by the rules alone (no library, no portfolio, no CoqHammer)."""
    return coq_search(task, max_checks, library=False)


def test_an_applied_scrutinee_is_destructed_in_parentheses() -> None:
    assert match_scrutinees("match Rcase_abs x with | left _ => 0 | right a => Rsqrt (mk x (le a)) end = 0") \
        == ["(Rcase_abs x)"]
    # a variable alone stays bare; an inner match on an application with nested arguments is found too
    assert match_scrutinees("match n with O => 1 | S k => match Nat.compare k (f (g y)) z with Lt => 0 "
                            "| _ => 1 end end = 1") == ["n", "(Nat.compare k (f (g y)) z)"]
    assert match_scrutinees("match (x, y) with (a, b) => a end = x") == ["(x, y)"]
    assert match_scrutinees("x + 0 = x") == []


CONTEXT = ("Definition pick (x y : nat) : nat := match Nat.compare x y with Lt => y | _ => x end.\n")
STATEMENT = "Lemma pick_ge : forall x y : nat, pick x y >= x."


@needs_coq
@pytest.mark.parametrize("where", ["conclusion", "hypothesis"])
def test_the_search_offers_a_destruct_coq_accepts_for_a_match_on_an_application(where: str) -> None:
    """Unfolded, ``pick x y`` is ``match Nat.compare x y with ...``: the offered ``destruct`` runs in Coq, where
    the unparenthesised form the search used to offer is a syntax error."""
    from oracle.proof_state_coq import CoqProofStates

    task = TheoremTask("pick_ge", STATEMENT, CONTEXT, "", prover="coq")
    states = CoqProofStates()
    try:
        state = states.start(task)
        steps = ["intros x y.", "unfold pick."] if where == "conclusion" else \
            ["intros x y.", "pose proof (eq_refl (pick x y)) as H.", "unfold pick in H."]
        for step in steps:
            result = states.run_tactic(state, step)
            assert result.state is not None, (step, result.message)
            state = result.state
        source = CoqTactics(states, task, state, library=False, portfolio=False, setting="rediscover")
        offered = [c.tactic for c in source.candidates(Node(1, 0, steps[-1], state, len(steps), 0.0, tuple(steps)))]
        assert "destruct (Nat.compare x y)." in offered, offered
        assert "destruct Nat.compare x y." not in offered
        assert states.run_tactic(state, "destruct (Nat.compare x y).").state is not None
        assert "Syntax error" in states.run_tactic(state, "destruct Nat.compare x y.").message
    finally:
        states.close()


REALS = "Require Import Rbase.\nLocal Open Scope R_scope.\n"


def _bare(definitions: list[str], statement: str) -> CoqTactics:
    source = object.__new__(CoqTactics)  # only what _library_unfolds reads
    source.definitions, source.facts, source._statement_constants = definitions, ScopeFacts(), None
    source.task = TheoremTask("t", statement, "", "", prover="coq")
    return source


def test_the_library_constants_to_unfold_leave_out_locals_bound_names_own_definitions_and_opaque_ones() -> None:
    source = _bare(["mine"], "Lemma t : forall x y : R, Rsqr (x * y) = Rsqr x * Rsqr y.")
    # the printed goal hides Rsqr behind its notation: the statement's text names it
    assert source._library_unfolds("(x * y)\u00b2 = x\u00b2 * y\u00b2", {"x", "y", "R"}) == ["Rsqr"]
    assert source._library_unfolds("exists z, fun w => mine z w = Rabs (f z) /\\ match g with | Some k => k "
                                   "| None => 0 end = 0", {"f", "g", "R"}) == ["Rabs", "Rsqr"]  # then the statement's
    source.facts.opaque.add("Rabs")
    assert "Rabs" not in source._library_unfolds("Rabs x = x", {"x"})


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_library_definition_the_statement_names_is_unfolded(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    monkeypatch.setattr(coq_tactics, "LIBRARY_UNFOLD", rule)
    task = TheoremTask("t", "Lemma t : forall x y : R, Rsqr (x + y) = Rsqr x + Rsqr y + 2 * x * y.", REALS, "",
                       prover="coq")
    result = _rules_search(task, max_checks=300)
    if rule:
        assert result.tactics is not None and "unfold Rsqr." in result.tactics, result.last_error
    else:
        assert result.tactics is None  # `ring` alone cannot see through Rsqr


SIDE = ("Require Import Lia.\nDefinition f (n m : nat) : nat := if Nat.leb n m then m else n.\n"
        "Lemma f_r : forall n m, n <= m -> f n m = m.\nAdmitted.\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_the_side_goals_a_rewrite_opens_are_closed_with_it(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """Two rewrites with a conditional lemma, each side goal `lia`'s (`auto using f_r` cannot): found in 600
    tactic runs with the rule (the proof keeps the one closer that did the work); without it, the side goals wait
    in the frontier behind the rewritten goals."""
    monkeypatch.setattr(best_first, "DISCHARGE", rule)
    task = TheoremTask("t", "Lemma t : forall n m p : nat, m = n + 1 -> p = m + 2 -> f n m + f m p = m + p.", SIDE,
                       "", prover="coq")
    result = _rules_search(task, max_checks=600)
    if rule:
        # one occurrence at a time, or both at once (`rewrite !f_r`, round twenty-two): either keeps its closer
        assert result.tactics is not None and ({"rewrite f_r; try solve [lia].", "rewrite !f_r; try solve [lia]."}
                                               & set(result.tactics)), result.tactics
    else:
        assert result.tactics is None, result.tactics


def _keeper() -> CoqTactics:
    source = object.__new__(CoqTactics)  # only what keep and observe read
    source.case_types, source.facts, source.unknown, source.slow = {}, ScopeFacts(), set(), {}
    source.witness_of = {}
    source.hammer_cap_seconds, source.hammer_spent, source.hammer_timeouts = None, 0.0, 0
    source.learned_timeouts = 0
    source.constructor_refusals = 0
    return source


@pytest.mark.parametrize("limit", [3, 0], ids=["rule on", "rule off"])
def test_coqhammers_tactics_stop_after_three_timeouts_in_a_theorem(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(coq_tactics, "HAMMER_TIMEOUTS", limit)
    source = _keeper()
    queued = Candidate("hauto use: foo.", 0.5, True, "hammer")
    rule = Candidate("auto.", 0.2, True, "rule")
    for tactic in ("sauto.", "qauto.", "sauto use: bar."):  # three different tactics, one family
        assert source.keep(queued)
        source.observe(Candidate(tactic, 0.5, True, "hammer"), TacticResult("timeout", message="no answer within 2 s"))
    source.observe(rule, TacticResult("timeout", message="no answer within 2 s"))  # not CoqHammer's: not counted
    assert source.hammer_timeouts == 3
    assert source.keep(queued) is (limit == 0)
    assert source.keep(rule)


@pytest.mark.parametrize("limit", [2, 0], ids=["rule on", "rule off"])
def test_learned_steps_stop_after_two_timeouts_in_a_theorem(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """Round eight: the steps a run learnt from its own early proofs stop in a theorem after two of them ran out
    of time there; other sources' timeouts do not count, and the next theorem (a fresh source) offers them again."""
    monkeypatch.setattr(coq_tactics, "LEARNED_TIMEOUTS", limit)
    source = _keeper()
    queued = Candidate("induction n; sauto.", 0.45, False, "learned")
    hammer = Candidate("sauto.", 0.5, True, "hammer")
    for tactic in ("induction f; sauto.", "destruct x; hauto."):
        assert source.keep(queued)
        source.observe(Candidate(tactic, 0.45, False, "learned"), TacticResult("timeout", message="no answer within 2 s"))
    source.observe(hammer, TacticResult("timeout", message="no answer within 2 s"))  # CoqHammer's: its own count
    assert source.learned_timeouts == 2
    assert source.keep(queued) is (limit == 0)
    assert source.keep(hammer)
    assert _keeper().keep(queued)


def test_a_steps_dual_names_the_other_sides_lemmas() -> None:
    """The dual a closed case's steps are replayed in (round twenty): `_l` and `_r` lemmas swapped, `left` and
    `right` swapped, other names and hypotheses kept."""
    dual = _keeper().dual
    assert dual("rewrite max_r; try solve [reflexivity | assumption].") == \
        "rewrite max_l; try solve [reflexivity | assumption]."
    assert dual("apply Nat.add_le_mono_l.") == "apply Nat.add_le_mono_r."
    assert dual("split; [left | right].") == "split; [right | left]."
    assert dual("destruct (le_ge_cases n m).") == "destruct (le_ge_cases n m)."
    assert dual("rewrite <- (add_1_l m) in Hleft.") == "rewrite <- (add_1_r m) in Hleft."


# a split whose second case is its first with each `_r` lemma an `_l` one (`ZMaxMin.v`'s `succ_max_distr`, abstract)
MIRROR = ("Parameter t : Type.\nParameter leq : t -> t -> Prop.\nParameter mx : t -> t -> t.\nParameter s : t -> t.\n"
          "Axiom mx_l : forall x y, leq y x -> mx x y = x.\nAxiom mx_r : forall x y, leq x y -> mx x y = y.\n"
          "Axiom leq_cases : forall x y, leq x y \\/ leq y x.\n"
          "Axiom s_mono : forall x y, leq x y -> leq (s x) (s y).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_closed_cases_steps_are_replayed_on_the_next_case(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`s (mx n m) = mx (s n) (s m)`: a case split on `leq_cases n m`, then in the first case `rewrite mx_r` twice
    and `s_mono` on the side goal; the second case is the same with `mx_l`. With the rule, the first case's steps
    are offered first on the second, as they were and mirrored (`CoqTactics.dual`): the second case is closed by
    them 15 runs after the first's end (the closers the search runs at each state besides). Without it the second
    case is searched afresh: 64 runs."""
    monkeypatch.setattr(best_first, "SIBLING_REPLAY", rule)
    monkeypatch.setattr(coq_tactics, "FILE_AXIOMS", True)
    # one rewrite a step, as the runs above were counted: `rewrite !mx_l` (round twenty-two) closes a case in one
    monkeypatch.setattr(coq_tactics, "REWRITE_ALL", False)
    task = TheoremTask("s_mx", "Lemma s_mx : forall n m, s (mx n m) = mx (s n) (s m).", MIRROR, "", prover="coq")
    result = _rules_search(task, max_checks=3000)
    assert result.reason == "proved", (result.reason, result.checks, result.last_error)
    tree = result.tree
    split = next(k for k in tree["proof"] if tree["nodes"][k][3] == 2)  # the case split: two goals
    first_closed = next(k for k in tree["proof"] if k > split and tree["nodes"][k][3] == 1)
    made = next(i for i, entry in enumerate(tree["tries"]) if entry[3] == first_closed)
    after = len(tree["tries"]) - made - 1  # tactic runs from the first case's end to the proof
    assert (after <= 30) is rule, (after, result.tactics)
    assert (best_first.REPLAY_SOURCE in result.proof_sources) is rule, (result.tactics, result.proof_sources)
    assert any("mx_l" in t for t in result.tactics or ()), result.tactics


def test_an_equivalences_two_sides_are_read() -> None:
    """Round twenty: `conclusion_of` cut `n <= m <-> S n <= S m` at the `->` of `<->`, so an equivalence was no
    rewrite rule and its premises read `n <= m <`; its two sides are the two ways `apply` can take."""
    from agents.coq_lookups import premises_of
    from agents.coq_tactics import iff_patterns, premise_pattern
    from agents.premises import conclusion_of, is_rewrite_rule

    mono = "forall n m : t, n <= m <-> S n <= S m"
    assert conclusion_of(mono) == "n <= m <-> S n <= S m" and is_rewrite_rule(mono)
    assert premises_of(mono) == ([], "n <= m <-> S n <= S m")
    assert premises_of("forall n m p : t, 0 <= p -> (n <= m <-> p * n <= p * m)") == \
        (["0 <= p"], "(n <= m <-> p * n <= p * m)")
    assert iff_patterns(mono) == ("_ <= _", "S _ <= S _") and premise_pattern(mono) == "S _ <= S _"
    assert iff_patterns("forall n, (n <= 0) <-> (n == 0)") == ("_ <= 0", "_ == 0")
    assert iff_patterns("forall n m p : t, 0 <= p -> n <= m -> p * n <= p * m") is None


MONO = ("Parameter t : Type.\nParameter le : t -> t -> Prop.\nParameter s : t -> t.\n"
        "Axiom s_le_mono : forall n m, le n m <-> le (s n) (s m).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_an_equivalence_is_applied_the_way_its_side_has_the_goals_shape(monkeypatch: pytest.MonkeyPatch,
                                                                         rule: bool) -> None:
    """`apply s_le_mono` on `le (s n) (s m)` takes the equivalence's `<-` way (`le ?n ?m` unifies with anything),
    and the goal becomes `le (s (s n)) (s (s m))`: `ZMaxMin.v`'s `apply succ_le_mono` at `S n <= S m`. With the
    rule the search offers `apply -> L` (the right side has the goal's shape) and proves it in one step; without it
    takes another route, several times the runs."""
    monkeypatch.setattr(coq_tactics, "IFF_DIRECTIONS", rule)
    monkeypatch.setattr(coq_tactics, "FILE_AXIOMS", True)
    task = TheoremTask("s_le", "Lemma s_le (n m : t) (H : le n m) : le (s n) (s m).", MONO, "", prover="coq")
    result = _rules_search(task, max_checks=400)
    assert result.reason == "proved", (result.reason, result.last_error)
    assert any(t.startswith("apply -> s_le_mono") for t in result.tactics or ()) is rule, result.tactics
    if rule:
        assert result.tactics == ("apply -> s_le_mono; auto.",) and result.checks <= 20, result.checks
    else:
        assert result.checks > 20, (result.checks, result.tactics)


# ----------------------------------------------------------------------------- a lemma the hypotheses imply (round 21)

def test_the_hypotheses_and_conclusion_make_one_implication_with_linked_variables() -> None:
    from agents.coq_lookups import implication_pattern

    local = ["n", "m", "H", "H0"]
    assert implication_pattern(["n <= m", "m <= n", "n = m"], local) == "(?n <= ?m) -> (?m <= ?n) -> (?n = ?m)"
    # a notation's `?` is kept, a qualified name is not a local name
    assert implication_pattern(["(n <=? m) = true", "Z.le n m"], local) == "((?n <=? ?m) = true) -> (Z.le ?n ?m)"
    assert implication_pattern(["?x = m", "n = m"], local) == ""  # an evar: no query
    assert implication_pattern(["P", "Q"], ["P", "Q"]) == ""  # nothing but local names: every lemma would match
    assert implication_pattern(["forall k, k <= n", "n = m"], local) == ""  # a product
    assert implication_pattern(["0 < 1"], local) == ""  # no local name: not the state's own implication


QARITH = "Require Import QArith.\nOpen Scope Q_scope.\n"


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_lemma_whose_premises_are_the_hypotheses_is_found_by_the_implication(monkeypatch: pytest.MonkeyPatch,
                                                                              rule: bool) -> None:
    """`H : x < y, H0 : y <= z |- x < z`: Coq's `Search ((?x < ?y) -> (?y <= ?z) -> (?x < ?z))` names `Qlt_le_trans`,
    and `eapply Qlt_le_trans; eauto.` proves it at once (`eapply`: `y` is not in the conclusion). Without the
    rule the search reaches it through the transitivity step of round eleven, about a hundred runs later."""
    import agents.coq_lookups as coq_lookups

    monkeypatch.setattr(coq_lookups, "IMPLIED", rule)
    task = TheoremTask("t", "Lemma t (x y z : Q) (H : x < y) (H0 : y <= z) : x < z.", QARITH, "", prover="coq")
    result = _rules_search(task, max_checks=400)
    assert result.reason == "proved", (result.reason, result.last_error)
    if rule:
        assert result.tactics == ("eapply Qlt_le_trans; eauto.",) and result.checks <= 10, (result.tactics,
                                                                                              result.checks)
        queries, seconds, _, _ = result.by_source["lookup:implied"]  # the time its Search took, reported
        assert queries >= 1 and seconds > 0, result.by_source
    else:
        assert result.checks > 50, (result.checks, result.tactics)


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_hypotheses_are_rewritten_with_an_equivalence_of_their_shape(monkeypatch: pytest.MonkeyPatch,
                                                                    rule: bool) -> None:
    """`Zbool.v`'s `Zle_bool_trans` in `Q`: `Qle_bool x y = true -> Qle_bool y z = true -> Qle_bool x z = true`.
    `Search (Qle_bool _ _ = true)` names `Qle_bool_iff : Qle_bool x y = true <-> x <= y`; rewriting with it turns
    the booleans into the order, where `Qle_trans` applies. Without the rule the search does not get there."""
    monkeypatch.setattr(coq_tactics, "EQUIVALENCES", rule)
    task = TheoremTask("t", "Lemma t : forall x y z : Q, Qle_bool x y = true -> Qle_bool y z = true -> "
                       "Qle_bool x z = true.", QARITH, "", prover="coq")
    result = _rules_search(task, max_checks=300)
    if rule:
        assert result.reason == "proved", (result.reason, result.last_error)
        assert any(t.startswith("rewrite") and "Qle_bool_iff" in t for t in result.tactics or ()), result.tactics
    else:
        assert result.reason != "proved", result.tactics


def test_a_conclusion_with_a_notations_question_mark_has_a_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """`(n <=? m) = true` had no pattern (a `?` was refused as a query's character), so no lemma was searched for
    a boolean comparison; a notation's `?` is a query's character now, an evar's (`?x`) still is not."""
    from agents.coq_tactics import conclusion_pattern

    assert conclusion_pattern("(n <=? m) = true", ["n", "m"]) == "(_ <=? _) = true"
    assert conclusion_pattern("(n ?= m) = Gt", ["n", "m"]) == "(_ ?= _) = Gt"
    assert conclusion_pattern("?x <= m + 1", ["m"]) == ""
    monkeypatch.setattr(coq_tactics, "QUERY_NOTATIONS", False)
    assert conclusion_pattern("(n <=? m) = true", ["n", "m"]) == ""


@needs_coq
def test_an_equivalence_rewrites_toward_its_simpler_side_only() -> None:
    """`H : Qle_bool x y = true` is rewritten with `Qle_bool_iff` (to `x <= y`), in the hypotheses and in a side of
    the equivalence to prove; `H0 : x < z` is not rewritten into `(x ?= z) = Lt` by `Qlt_alt`, nor `x <= y` into
    `(x ?= y) <> Gt` by `Qle_alt` (both rewrites to a longer statement, offered without the restriction)."""
    from oracle.proof_state_coq import CoqProofStates

    task = TheoremTask("t", "Lemma t (x y z : Q) (H : Qle_bool x y = true) (H0 : x < z) : "
                       "Qle_bool x y = true <-> x <= y.", QARITH, "", prover="coq")
    states = CoqProofStates()
    try:
        state = states.start(task)
        source = CoqTactics(states, task, state, library=False, portfolio=False, setting="rediscover")
        offered = [c.tactic for c in source.candidates(Node(0, -1, "", state, 0, 0.0, ()))]
        rewrites = [t for t in offered if t.startswith("rewrite") and "Qle_bool_iff" in t]
        assert "rewrite Qle_bool_iff in *." in rewrites and "rewrite Qle_bool_iff." in rewrites, rewrites
        assert not [t for t in offered if t.startswith("rewrite") and ("Qlt_alt" in t or "Qle_alt" in t)], offered
    finally:
        states.close()


def test_the_implication_lookups_stop_once_a_theorem_spent_their_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `Search` in a big context takes 0.2-0.4 s: the implication and equivalence lookups stop asking Coq once a
    theorem's queries of that kind took `LOOKUP_SECONDS` (an answer the scope already has is still given)."""
    import time

    import agents.coq_lookups as coq_lookups
    from agents.coq_lookups import ScopeLookups
    from oracle.proof_state import Premise

    asked: list[str] = []

    class SlowSearch:
        def search_premises(self, query: str, limit: int = 400) -> list[Premise]:
            asked.append(query)
            time.sleep(0.05)
            return [Premise("L", "forall n m : nat, n <= m -> m <= n -> n = m")]

    monkeypatch.setattr(coq_lookups, "LOOKUP_SECONDS", 0.08)
    lookups = ScopeLookups(ScopeFacts(), SlowSearch(), "t")
    patterns = [f"(?n <= ?m) -> (?m <= ?n) -> (?n = ?m + {k})" for k in range(4)]
    assert [len(lookups.implied(p)) for p in patterns] == [1, 1, 0, 0]  # 0.05 s, 0.10 s: then no more asking
    assert len(asked) == 2 and lookups.spent["implied"][0] == 2
    assert lookups.implied(patterns[0])[0].name == "L"  # kept for the scope: no query
    assert len(asked) == 2


HINTED = (QARITH + "Parameters lo hi : Q -> Q.\nAxiom lo_le : forall x, lo x <= x.\nAxiom le_hi : forall x, x <= hi x.\n"
          "#[global] Hint Resolve lo_le le_hi : qarith.\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_eauto_over_every_hint_database_chains_the_files_hints(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`Qround.v`'s `Qle_floor_ceiling` is `eauto with qarith.`: the file put its two earlier lemmas in `qarith`,
    where `Qle_trans` is, and `eauto` finds the middle value. `intuition` (`auto with *`) cannot choose one, and
    `eauto using` the file's lemmas lacks `Qle_trans`: without the rule the goal is open after 150 runs (and after 400:
    the budget was cut for the suite's time), with it proved within 20."""
    monkeypatch.setattr(coq_tactics, "HINTS_EAUTO", rule)
    # the rule alone: the premises ranked on a step's goals (round thirty-three) name `Qle_trans`, another way in
    monkeypatch.setattr(coq_tactics, "PREMISE_DISCHARGE", False)
    task = TheoremTask("lo_hi", "Lemma lo_hi : forall x, lo x <= hi x.", HINTED, "", prover="coq")
    result = coq_search(task, 150, library=True)
    if rule:
        assert result.reason == "proved" and result.tactics == (coq_tactics.HINT_EAUTO[0],), (result.reason,
                                                                                                result.tactics)
        assert result.checks <= 20, result.checks
    else:
        assert result.reason != "proved", result.tactics


ZARITH = "Require Import ZArith.\nOpen Scope Z_scope.\n"
# the oracle's screen of a `Search` query before round twenty-two: no `^`, no `~`
SCREEN_BEFORE = r"[\w'. ()\"+*:<>=@\[\]?&|,{}\\/-]+"


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_power_goals_shape_is_searched(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`Zpower.v`'s `two_p_is_exp` ends with `apply Z.pow_add_r.` at `2 ^ (x + y) = 2 ^ x * 2 ^ y`, yet the
    search never offered it: the proof states refused every `Search` query holding `^` (or `~`), silently, as
    answering nothing. With the screen mended the goal's shape names `Z.pow_add_r` and the search proves it at
    once; with the old screen it is open after 120 runs (and after 300: the budget was cut for the suite's time), and
    the refused queries are counted in its report."""
    import re

    import oracle.proof_state_coq as proof_state_coq

    if not rule:
        monkeypatch.setattr(proof_state_coq, "SEARCH_QUERY", re.compile(SCREEN_BEFORE))
    task = TheoremTask("t", "Lemma t (a b c : Z) (Hb : 0 <= b) (Hc : 0 <= c) : a ^ (b + c) = a ^ b * a ^ c.",
                       ZARITH, "", prover="coq")
    result = coq_search(task, 120, library=True)
    if rule:
        assert result.reason == "proved" and "Z.pow_add_r" in " ".join(result.tactics or ()), result.tactics
        assert result.checks <= 20, result.checks
        assert "lookup:refused" not in result.by_source, result.by_source
    else:
        assert result.reason != "proved", result.tactics
        assert result.by_source["lookup:refused"][0] >= 1, result.by_source  # the gap shows in the report


@needs_coq
def test_a_negations_shape_is_searched() -> None:
    """`Search (~ _ < _)` reaches Coq and names the irreflexivity lemma (refused before round twenty-two)."""
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    try:
        states.start(TheoremTask("t", "Lemma t (n : Z) : ~ n < n.", ZARITH, "", prover="coq"))
        assert "Z.lt_irrefl" in [p.name for p in states.search_premises("(~ _ < _)")]
    finally:
        states.close()


def test_a_lemma_that_replaces_a_constant_is_read() -> None:
    """`rewrite !L` stops only when the rule's right side no longer names the constant its left side replaces."""
    from agents.coq_tactics import occurrences, replaced_constant

    assert replaced_constant("forall x : Z, two_p x = 2 ^ x") == "two_p"
    assert replaced_constant("forall x, Qceiling x = - Qfloor (- x)") == "Qceiling"
    assert replaced_constant("forall n m, n + m = m + n") is None  # no constant applied on the left
    assert replaced_constant("forall a, f (g a) = g (f a)") is None  # the right side names `f` again: would loop
    assert replaced_constant("forall n, n <= n") is None
    assert occurrences("Z.two_p", "two_p (x + y) = two_p x * Z.two_p y") == 3


POW = "Require Import Arith.\nParameter tw : nat -> nat.\nAxiom tw_equiv : forall n, tw n = 2 ^ n.\n"


@needs_coq
def test_a_constant_named_twice_is_replaced_everywhere_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Zpower.v`'s `two_p_is_exp` is `rewrite !two_p_equiv. apply Z.pow_add_r.`: the search offered `rewrite
    two_p_equiv.` alone, one occurrence a step. With `rewrite !L.` the proof is the original's, in fewer runs;
    without it the search takes another way, later."""
    task = TheoremTask("t", "Lemma t (n m : nat) : tw (n + m) = tw n * tw m.", POW, "", prover="coq")
    runs = {}
    for rule in (True, False):
        monkeypatch.setattr(coq_tactics, "REWRITE_ALL", rule)
        result = coq_search(task, 600, library=True)
        assert result.reason == "proved", (rule, result.reason, result.last_error)
        runs[rule] = (result.tactics, result.checks)
    assert runs[True][0] == ("rewrite !tw_equiv.", "apply Nat.pow_add_r."), runs
    assert not any(t.startswith("rewrite !") for t in runs[False][0] or ()) and runs[False][1] > runs[True][1], runs


REALS_NAT = "Require Import Reals.\nOpen Scope R_scope.\n"


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_goal_in_another_scope_has_its_shape_searched(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """In a `Reals` file a goal on naturals prints as `(Nat.div2 n <= n)%nat`: before round twenty-two its `%`
    kept it from being a `Search` pattern (and the proof states refused such a query), so the lemma that closes
    it came late, from elsewhere. Now `Search ((Nat.div2 _ <= _)%nat)` names `Nat.div2_decr` at the first state."""
    import re

    # the rule alone: the library's premises ranked on a case's goal (round thirty-three) name `Nat.div2_decr` too
    monkeypatch.setattr(coq_tactics, "PREMISE_DISCHARGE", False)
    if not rule:
        monkeypatch.setattr(coq_tactics, "QUERY_TEXT", re.compile(r"(?:[\w'. ()+*:<>=@\[\]^/\\~-]|\?(?![A-Za-z_]))+"))
    task = TheoremTask("t", "Lemma t (n : nat) : (Nat.div2 n <= n)%nat.", REALS_NAT, "", prover="coq")
    result = coq_search(task, 30, library=True)
    if rule:
        assert result.reason == "proved" and "Nat.div2_decr" in " ".join(result.tactics or ()), result.tactics
    else:
        assert result.reason != "proved", result.tactics


def test_a_scopes_key_is_no_hole() -> None:
    """`%nat` stays as it is when a pattern's names become holes, even where a local value shares its name."""
    from agents.coq_tactics import conclusion_pattern, general_pattern

    assert conclusion_pattern("(n <= m)%nat", ["n", "m", "nat"]) == "(_ <= _)%nat"
    assert conclusion_pattern("(- Qfloor (- x) <= - Qfloor (- y))%Z", ["x", "y"]) == "(- Qfloor (- _) <= - Qfloor (- _))%Z"
    assert general_pattern("(S _ <= 0)%nat") == "(S _ <= _)%nat"


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_boolean_goals_shape_is_searched(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`a && (b || c) = a && b || a && c`: with `&&` and `||` allowed in a pattern (round twenty-two) the goal's
    shape names `andb_orb_distrib_r` at the first state; before, the goal had no shape and the search split `a`."""
    import re

    if not rule:
        monkeypatch.setattr(coq_tactics, "QUERY_TEXT", re.compile(r"(?:[\w'. ()+*:<>=@\[\]^/\\~-]|\?(?![A-Za-z_])|"
                                                                  r"%(?=[A-Za-z]))+"))
    task = TheoremTask("t", "Lemma t (a b c : bool) : a && (b || c) = a && b || a && c.", "Require Import Bool.\n",
                       "", prover="coq")
    result = coq_search(task, 200, library=True)
    assert result.reason == "proved", (result.reason, result.last_error)
    assert ("andb_orb_distrib_r" in " ".join(result.tactics or ())) is rule, result.tactics


FOUR_BITS = ("Inductive nibble := N4 (a b c d : bool).\n"
             "Definition code (t : nibble) : nat := let (a, b, c, d) := t in\n"
             "  (if a then 1 else 0) + (if b then 2 else 0) + (if c then 4 else 0) + (if d then 8 else 0).\n"
             "Definition decode (n : nat) : nibble := N4 (Nat.odd n) (Nat.odd (Nat.div2 n))\n"
             "  (Nat.odd (Nat.div2 (Nat.div2 n))) (Nat.odd (Nat.div2 (Nat.div2 (Nat.div2 n)))).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_value_of_a_finite_type_is_split_and_computed(monkeypatch: pytest.MonkeyPatch, rule: bool) -> None:
    """`Ascii.v`'s `ascii_nat_embedding` is `destruct a as [[|][|][|][|][|][|][|][|]]; compute; reflexivity.`: every
    one of 256 characters computed. The same for a record of four booleans: proved by one step with the rule; the
    search splitting one boolean a state is open after 300 runs without it."""
    monkeypatch.setattr(coq_tactics, "EXHAUST", rule)
    task = TheoremTask("t", "Lemma t : forall t : nibble, decode (code t) = t.", FOUR_BITS, "", prover="coq")
    result = coq_search(task, 300, library=True)
    if rule:
        assert result.reason == "proved" and result.tactics == (coq_tactics.EXHAUST_STEP.format(name="t"),), \
            result.tactics
    else:
        assert result.reason != "proved", result.tactics


# a record of two numbers (`QArith`'s `Q`: `Qnum : Z; Qden : positive`): its values are not finitely many
NUMBER_PAIR = "Record pair := mk { fst_of : nat; snd_of : nat }.\nDefinition swap (p : pair) := mk (snd_of p) (fst_of p).\n"


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_every_case_is_computed_only_for_a_type_of_finitely_many_values(monkeypatch: pytest.MonkeyPatch,
                                                                         rule: bool) -> None:
    """The step that splits a value and computes every case is for a type whose own principle shows finitely many
    values of booleans (`nibble`: the test above proves it by that step with this rule at its default, on). On a
    record of numbers it computes a goal with variables left: on `QArith/Qminmax.v`'s `Q` its `reflexivity` outran
    the tactic's timeout by seconds and the session was lost with the search (three theorems, round twenty-nine).
    With the rule the step is not tried there; without it, it is."""
    monkeypatch.setattr(coq_tactics, "FINITE_EXHAUST", rule)
    # not true: the search tries every step it has at the statement
    pair = TheoremTask("t", "Lemma t : forall p : pair, swap p = p.", NUMBER_PAIR, "", prover="coq")
    result = coq_search(pair, 60, library=False)
    assert result.reason != "proved", result.tactics
    step = coq_tactics.EXHAUST_STEP.format(name="p")
    assert any(t[1] == step for t in result.tree["tries"]) is not rule, result.tree["tries"]


# a library function that does not compute (its body a proof's witness: `NStrongRec.v`'s `recursion` is a functor
# parameter's) and its law stated for three arguments, which the goal applies to a fourth
REC_LIB = ("Lemma rec_exists : {r : forall A : Type, A -> (nat -> A -> A) -> nat -> A | forall A a f, r A a f 0 = a}.\n"
           "Proof. exists (fun A a f n => nat_rect (fun _ => A) a f n). reflexivity. Qed.\n"
           "Definition rec := proj1_sig rec_exists.\nArguments rec {A} _ _ _.\n"
           "Lemma rec_0 : forall {A} (a : A) (f : nat -> A -> A), rec a f 0 = a.\n"
           "Proof. intros. exact (proj2_sig rec_exists A a f). Qed.\n")
REC_USER = ("Require Import Lib.RecLib.\nDefinition strong0 {A} (a : A) (f : (nat -> A) -> nat -> A) : nat -> nat -> A :="
            " rec (fun _ => a) (fun _ => f).\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_the_lemmas_of_a_constant_an_unfold_shows_are_looked_up(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                                 rule: bool) -> None:
    """`strong0 a f 0 m = a` names no library constant; `unfold strong0` shows `rec ... 0 m`, whose law `rec_0`
    (three arguments: the goal's shape matches no conclusion) is found by `Search rec` with the rule (round
    twenty-three), `intros. unfold strong0. rewrite rec_0. reflexivity.`; without it, open after 600 runs."""
    import subprocess

    (tmp_path / "RecLib.v").write_text(REC_LIB)
    subprocess.run(["coqc", "-Q", ".", "Lib", "RecLib.v"], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    monkeypatch.setattr(coq_tactics, "FRESH_SYMBOLS", rule)
    task = TheoremTask("strong0_0", "Lemma strong0_0 : forall A (a : A) f m, strong0 a f 0 m = a.", REC_USER, "",
                       prover="coq")
    result = coq_search(task, 600, library=True, coq_args=("-Q", str(tmp_path), "Lib"))
    if rule:
        assert result.reason == "proved" and "rewrite rec_0." in (result.tactics or ()), result.tactics
        assert result.by_source.get("lookup:fresh", [0])[0] >= 1, result.by_source
    else:
        assert result.reason != "proved", result.tactics
