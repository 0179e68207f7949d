"""Where the proof search spends its budget (issue 33, round two).

One frontier over (node, tactic): a tactic's priority is its node's, its cost and the seconds its
kind has taken so far in this search, so a slow kind of tactic waits behind cheap ones (shown on a
scripted prover with the time term on and off); the cheap closers run as one ``solve [...]`` and the
proof keeps the member that closed; a tactic the context loads without importing it runs by its full
name; a prover session lost mid-search is restarted; CoqHammer's ``hammer`` prints a reconstruction
the proof keeps instead of the ATP call (a real `hammer` call); the probe of which tactics a context
runs is shared by the theorems of one scope and redone for another.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from needs import needs_coq
from scripted_prover import ScriptedStates

import agents.best_first as search
import agents.coq_tactics as coq_tactics
from agents.best_first import Node, SearchBudget, TacticSource, best_first_search
from agents.coq_tactics import CoqTactics, if_scrutinees
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState, TacticResult


class Table(TacticSource):
    """The same candidates at every node."""

    def __init__(self, cands: list[Candidate]) -> None:
        self.cands = cands

    def candidates(self, node: Node) -> list[Candidate]:
        return [] if node.depth >= 3 else list(self.cands)


TASK = TheoremTask("t", "Lemma t : True.", "", "", prover="coq")


@pytest.mark.parametrize("time_weight", [search.TIME_WEIGHT, 0.0], ids=["timed", "time ignored"])
def test_a_slow_kind_of_tactic_waits_behind_cheap_ones(monkeypatch: pytest.MonkeyPatch, time_weight: float) -> None:
    """`slowtac` costs 5 s a run: once one run showed it, the next ones are put behind the cheap steps
    that lead to the proof (with the time term off they run first, at their lower cost)."""
    monkeypatch.setattr(search, "TIME_WEIGHT", time_weight)
    states = ScriptedStates({"slowtac.": ("error", 5.0), "step.": ("progress", 0.1), "close.": ("error", 0.1)})
    cands = [Candidate("slowtac.", 0.3), Candidate("step.", 0.6), Candidate("close.", 0.9)]
    result = best_first_search(states, TASK, lambda root: Table(cands), SearchBudget(seconds=100, max_checks=40),
                               clock=states.clock)
    assert states.ran[0] == ((), "slowtac.")  # the first one runs: nothing is known about it yet
    slow = [i for i, (_, tactic) in enumerate(states.ran) if tactic == "slowtac."]
    last_cheap = max(i for i, (_, tactic) in enumerate(states.ran) if tactic != "slowtac.")
    assert len(slow) == 3 and (slow[1] > last_cheap) is bool(time_weight), states.ran
    assert result.by_source["rule"][0] == len(states.ran) and result.reason == "exhausted"


@pytest.mark.parametrize("by_text", [True, False], ids=["timed by its kind", "timed by its head"])
def test_a_slow_closer_is_timed_apart_from_cheap_steps_of_its_head(monkeypatch: pytest.MonkeyPatch,
                                                                    by_text: bool) -> None:
    """`simpl in *; slowclose.` (a closer that takes 2 s and never closes) and the step `simpl.` (0.01 s) share
    the head `simpl`: timed by the head, the step pays the closer's seconds and waits with it, so the closer runs
    again before the search is deep; timed by its kind (the heads of its `;` pieces: `simpl;slowclose`), the step
    keeps its cost and the search reaches its depth before the closer's second run (round eighteen: `intuition` on
    real-number goals)."""
    if not by_text:
        monkeypatch.setattr(search, "time_key", lambda cand: search.tactic_head(cand.tactic))
    states = ScriptedStates({"simpl in *; slowclose.": ("error", 2.0), "simpl.": ("progress", 0.01)})
    cands = [Candidate("simpl in *; slowclose.", 0.3, closer=True), Candidate("simpl.", 0.6)]
    best_first_search(states, TASK, lambda root: Table(cands), SearchBudget(seconds=100, max_checks=40),
                      clock=states.clock)
    slow = [i for i, (_, tactic) in enumerate(states.ran) if tactic == "simpl in *; slowclose."]
    deepest_step = max(i for i, (path, tactic) in enumerate(states.ran) if tactic == "simpl." and len(path) == 2)
    assert states.ran[0] == ((), "simpl in *; slowclose.")  # the first one runs: nothing is known about it yet
    assert (slow[1] > deepest_step) is by_text, states.ran


def test_a_tactics_kind_is_the_heads_of_its_top_level_pieces() -> None:
    kinds = {"simpl in *; intuition.": "simpl;intuition", "induction d'; sauto.": "induction;sauto",
             "induction n.": "induction", "solve [auto; lia | easy].": "solve", "sauto use: a, b.": "sauto",
             "destruct (f x; g); [left | right]; auto.": "destruct;[];auto",
             "exact {| a := 1; b := 2 |}.": "exact"}
    assert {t: search.time_key(Candidate(t)) for t in kinds} == kinds


def test_a_lost_session_is_restarted_and_the_search_goes_on() -> None:
    states = ScriptedStates({"hang.": ("error", 0.1), "done.": ("proved", 0.1)}, lost="hang.")
    result = best_first_search(states, TASK, lambda root: Table([Candidate("hang.", 0.1), Candidate("done.", 0.5)]),
                               SearchBudget(seconds=100, max_checks=40), clock=states.clock)
    assert states.starts == 2 and result.proof == "done."


def test_a_session_lost_too_late_to_restart_names_the_tactic_that_lost_it() -> None:
    """With less than RESTART_MIN_S left the search stops; its report says which tactic the session was lost by."""
    states = ScriptedStates({"hang.": ("error", 0.1), "done.": ("proved", 0.1)}, lost="hang.")
    result = best_first_search(states, TASK, lambda root: Table([Candidate("hang.", 0.1), Candidate("done.", 0.5)]),
                               SearchBudget(seconds=search.RESTART_MIN_S - 1, max_checks=40), clock=states.clock)
    assert states.starts == 1 and result.proof is None and result.reason == "session lost"
    assert "by 'hang.'" in result.last_error and "too little time left to restart" in result.last_error


def test_if_conditions_are_read_whole() -> None:
    concl = "(if P ((a + b) / 2) then a else (a + b) / 2) <= (if Nat.eqb n 0 then 1 else 2)"
    assert if_scrutinees(concl) == ["P ((a + b) / 2)", "Nat.eqb n 0"]
    assert if_scrutinees("if (if b then c else d) then x else y = z") == ["b"]


@needs_coq
def test_the_closers_run_as_one_bundle_and_the_proof_keeps_the_member() -> None:
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    task = TheoremTask("t", "Lemma t : 2 + 2 = 4.", "", "", prover="coq")
    try:
        result = best_first_search(states, task, lambda root: CoqTactics(states, task, root, library=False,
                                                                          portfolio=False, setting="rediscover"),
                                   SearchBudget(seconds=60, max_checks=50))
    finally:
        states.close()
    # two runs: the bundle, which closed the goal, then its first member alone (the proof keeps that one)
    assert result.proof == "reflexivity." and result.checks == 2, result.tree["tries"]


@needs_coq
def test_lia_runs_by_its_full_name_where_it_is_loaded_but_not_imported(tmp_path: Path) -> None:
    """`Require Coq.micromega.Lia.` loads lia without importing it: `lia` is unknown, its full name is
    not; the proof found with it is accepted by the oracle (the same context)."""
    from oracle.coq import make_coq_checker
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    task = TheoremTask("t", "Lemma t : forall n m : nat, n <= m -> n < m + 1.", "Require Coq.micromega.Lia.\n", "",
                       prover="coq")
    made: list[CoqTactics] = []

    def source(root: ProofState) -> CoqTactics:
        made.append(CoqTactics(states, task, root, library=False, portfolio=False, setting="rediscover"))
        return made[-1]

    try:
        result = best_first_search(states, task, source, SearchBudget(seconds=60, max_checks=400))
    finally:
        states.close()
    assert made[0].aliases["lia"] == "Coq.micromega.Lia.lia"
    assert result.proof is not None and "Coq.micromega.Lia.lia" in result.proof, result.proof
    checker = make_coq_checker(warm=False)
    try:
        assert checker.check(task, result.proof, timeout_s=60).accepted
    finally:
        checker.close()


def _hammer_installed() -> bool:
    import subprocess

    if shutil.which("coqc") is None or shutil.which("eprover") is None:
        return False
    where = subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=False).stdout.strip()
    return (Path(where) / "user-contrib" / "Hammer" / "Plugin").is_dir()


# one real `hammer` call: its first step (a bounded sauto) closes this goal, 5-10 s here; a call that must
# go to eprover takes 40-60 s at load 15 (docs/proofs.md)
@pytest.mark.skipif(not _hammer_installed(), reason="CoqHammer's plugin or eprover is not installed "
                                                    "(Debian: apt-get install libcoq-hammer eprover)")
def test_hammer_prints_a_reconstruction_the_proof_keeps() -> None:
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    task = TheoremTask("t", "Lemma t : forall n m : nat, n + m = m + n.",
                       "From Hammer Require Import Hammer.\nRequire Import Arith.\n", "", prover="coq")
    try:
        root = states.start(task)
        tactics = CoqTactics(states, task, root, library=False, portfolio=False, hammer=True, hammer_seconds=20,
                             setting="rediscover")
        assert "hammer" not in tactics.unknown and tactics.reserve_seconds == 20
        _, cand = tactics.last_resort([Node(0, -1, "", root, 0, 0.0, ())])[0]
        ran = states.run_tactic(root, cand.tactic, 120)
        assert ran.outcome == "proved", ran.message
        replay = tactics.replacement(cand, ran.notes)
        assert replay is not None and "hammer" not in replay, ran.notes
        assert states.run_tactic(root, replay, 30).outcome == "proved"
    finally:
        states.close()


@needs_coq
@pytest.mark.parametrize("scope_in_key", [True, False])
def test_the_tactic_probe_is_shared_by_a_scope_and_redone_for_another(monkeypatch: pytest.MonkeyPatch,
                                                                       scope_in_key: bool) -> None:
    """Theorems whose contexts load the same libraries and read the same import sentences share one
    probe of which tactics run (the second asks coqtop nothing); `Require Import Lia` and `Require Lia`
    load the same library but only the first makes `lia` a short name, so the second is probed again
    and calls lia by its full name. Control: with the sentences left out of the key, it reuses the
    first scope's answer and would call `lia`, which that context does not know."""
    from oracle.proof_state_coq import CoqProofStates

    if not scope_in_key:
        monkeypatch.setattr(coq_tactics, "_SCOPE_SENTENCE", re.compile(r"(?!)"))
    states = CoqProofStates()
    cache: dict[tuple[object, ...], tuple[frozenset[str], dict[str, str]]] = {}
    probes: list[str] = []
    real_run = states.run_tactic

    def counting(state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        if tactic.startswith("try (fail;"):
            probes.append(tactic)
        return real_run(state, tactic, timeout_s)

    monkeypatch.setattr(states, "run_tactic", counting)

    def tactics_for(name: str, context: str) -> CoqTactics:
        task = TheoremTask(name, f"Lemma {name} : forall n : nat, n <= n + 1.", context, "", prover="coq")
        return CoqTactics(states, task, states.start(task), library=False, portfolio=False,
                          setting="rediscover", probe_cache=cache)

    try:
        first = tactics_for("a", "Require Import Coq.micromega.Lia.\n")
        assert "lia" not in first.unknown and "lia" not in first.aliases and probes
        probes.clear()
        again = tactics_for("b", "Require Import Coq.micromega.Lia.\n")  # the same scope: no probe
        assert probes == [] and again.unknown == first.unknown
        only_loaded = tactics_for("c", "Require Coq.micromega.Lia.\n")
        if scope_in_key:
            assert probes and only_loaded.aliases.get("lia") == "Coq.micromega.Lia.lia"
            root = states.start(only_loaded.task)
            assert states.run_tactic(root, "lia.", 10).outcome == "error"  # why the short name must not be kept
        else:
            assert probes == [] and "lia" not in only_loaded.aliases  # the stale answer
    finally:
        states.close()


@pytest.mark.parametrize("cap", [7.5, None], ids=["capped", "no cap"])
def test_coqhammers_tactics_take_at_most_their_share(cap: float | None) -> None:
    """CoqHammer's closers fail slowly (here 1 s each, never closing); capped at 7.5 s of a 25 s
    search they stop there (one run may overshoot) and the rules get the rest; without the cap they
    take most of the search."""
    effects = {t: ("error", 1.0) for t in ("sauto.", "hauto.", "qauto.")}
    effects["simpl."] = ("progress", 0.01)  # every state has a child: there is always a rule to run
    states = ScriptedStates(effects)
    made: list[CoqTactics] = []

    def source(root: ProofState) -> CoqTactics:
        made.append(CoqTactics(states, TASK, root, library=False, portfolio=False, hammer=True,
                               setting="rediscover", hammer_cap_seconds=cap))
        return made[-1]

    result = best_first_search(states, TASK, source, SearchBudget(seconds=25, max_checks=100_000), clock=states.clock)
    hammer_seconds = result.by_source["hammer"][1]
    assert result.proof is None and result.reason == "budget: seconds"
    if cap is not None:
        assert 7.5 <= hammer_seconds <= 8.5 and made[0].hammer_spent == hammer_seconds
    else:
        assert hammer_seconds > 15, result.by_source
