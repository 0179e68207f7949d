"""A second search on the second core, beside the search (agents/side_search.py, issue 33 round seventeen).

With real Coq: a theorem the search alone leaves open (its source proposes nothing that works) is proved
by the side search, whose proof is replayed in the search's own session; a proof the side search found
with something the search's session lacks (a lemma only its preload states) is not taken; a side search
still running when the search has its proof is cancelled at once and its session stays warm. With a
scripted prover: of two passes beside the search, a first proof that does not replay does not keep the
second from being taken; the narrow source (the cheapest few candidates a state) reaches a proof five
steps deep in runs a wide search spends near the statement.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from needs import needs_coq
from scripted_prover import ScriptedStates

from agents.best_first import SIDE_SOURCE, Node, SearchBudget, TacticSource, best_first_search
from agents.side_search import Beside, Narrow, SideSearch
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState, TacticResult

TASK = TheoremTask("mul_1_r", "Lemma mul_1_r : forall n : nat, n * 1 = n.", "", "", prover="coq")


class Table(TacticSource):
    def __init__(self, cands: Sequence[Candidate]) -> None:
        self.cands = list(cands)

    def candidates(self, node: Node) -> list[Candidate]:
        return [] if node.depth >= 2 else list(self.cands)


def _side(cands: Sequence[Candidate], preload: str = "") -> SideSearch:
    from oracle.proof_state_coq import CoqProofStates

    return SideSearch(lambda: CoqProofStates(preload=preload), lambda states, task: lambda root: Table(cands),
                      SearchBudget(max_checks=500, tactic_seconds=5.0))


# `auto` cannot do the induction: without the side search's step the search stays open
MAIN = [Candidate("auto.", 0.1, True), Candidate("reflexivity.", 0.2, True)]
INDUCTION = [Candidate("intros n.", 0.1), Candidate("induction n; simpl; auto.", 0.2, True)]


@needs_coq
def test_the_side_search_proves_what_the_search_alone_does_not() -> None:
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    side = _side(INDUCTION)
    try:
        alone = best_first_search(states, TASK, lambda root: Table(MAIN), SearchBudget(seconds=60))
        assert alone.proof is None and alone.side == ""
        found = best_first_search(states, TASK, lambda root: Table(MAIN), SearchBudget(seconds=60), side=side)
        assert found.proof is not None and found.proof.endswith("induction n; simpl; auto."), found.side
        assert set(found.proof_sources) == {SIDE_SOURCE}
        assert found.side.startswith("found after")
    finally:
        side.close()
        states.close()


@needs_coq
def test_a_side_proof_the_search_s_session_cannot_replay_is_not_taken() -> None:
    from oracle.proof_state_coq import CoqProofStates

    # the side session alone states `secret` (as a session that loaded the stripped original would have it)
    secret = "Lemma secret : forall n : nat, n * 1 = n. Proof. induction n; simpl; auto. Qed.\n"
    states = CoqProofStates()
    side = _side([Candidate("exact secret.", 0.1, True)], preload=secret)
    try:
        result = best_first_search(states, TASK, lambda root: Table(MAIN), SearchBudget(seconds=60), side=side)
        assert result.proof is None
        assert "exact secret. (found beside the search) did not replay" in result.last_error
        assert result.side.endswith("not taken: exact secret. did not replay"), result.side
    finally:
        side.close()
        states.close()


@needs_coq
def test_a_side_search_still_running_is_cancelled_when_the_search_has_its_proof() -> None:
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    # every step makes progress and none closes: left alone it would run until its budget
    busy = [Candidate(f"assert (H{k} : {k} = {k}) by reflexivity.", 0.1 + 0.001 * k) for k in range(400)]
    side = _side(busy)
    try:
        side.budget = SearchBudget(max_checks=100_000, tactic_seconds=5.0)
        proof = [Candidate("intros n.", 0.1), Candidate("induction n; simpl; auto.", 0.2, True)]

        class Slow(Table):  # the search proves the theorem after two seconds: the side search has begun by then
            def candidates(self, node: Node) -> list[Candidate]:
                time.sleep(2.0)
                return super().candidates(node)

        began = time.monotonic()
        result = best_first_search(states, TASK, lambda root: Slow(proof), SearchBudget(seconds=120), side=side)
        assert result.proof is not None and SIDE_SOURCE not in result.proof_sources
        assert side.done() and time.monotonic() - began < 60  # not its 120 s
        assert result.side.startswith("cancelled after"), result.side
        warm = side._states
        assert warm is not None and warm.session is not None and warm.session.alive  # kept for the next theorem
        again = best_first_search(states, TASK, lambda root: Table(MAIN), SearchBudget(seconds=60),
                                  side=_with(side, INDUCTION))
        assert again.proof is not None and again.proof_sources[-1] == SIDE_SOURCE
        assert side._states is warm
    finally:
        side.close()
        states.close()


def _with(side: SideSearch, cands: Sequence[Candidate]) -> SideSearch:
    side._make_source = lambda states, task: lambda root: Table(cands)
    return side


class Found:
    """A side pass that found ``tactics`` before the search began (scripted)."""

    def __init__(self, tactics: tuple[str, ...]) -> None:
        self.tactics, self.ended, self.stopped = tactics, "found", False

    def begin(self, task: TheoremTask, deadline: float) -> Found:
        return self

    def wait(self, until: float) -> None:
        return None

    def stop(self) -> None:
        self.stopped = True

    def done(self) -> bool:
        return True


def test_of_two_side_proofs_the_one_that_replays_is_taken() -> None:
    states = ScriptedStates({"intros.": ("progress", 0.1), "hauto use: lemma_a.": ("proved", 0.5)})
    bad, good = Found(("intros.", "hauto use: the_original.")), Found(("intros.", "hauto use: lemma_a."))
    result = best_first_search(states, TASK, lambda root: Table([]), SearchBudget(seconds=25, max_checks=100),
                               clock=states.clock, side=Beside([("hammer", bad), ("search", good)]))
    assert result.proof == "intros.\nhauto use: lemma_a."
    assert result.side == "hammer: found; search: found; not taken: hauto use: the_original. did not replay"
    assert bad.stopped and good.stopped
    states = ScriptedStates({"intros.": ("progress", 0.1), "hauto use: lemma_a.": ("proved", 0.5)})
    only_bad = best_first_search(states, TASK, lambda root: Table([]), SearchBudget(seconds=25, max_checks=100),
                                 clock=states.clock, side=Beside([("hammer", bad)]))
    assert only_bad.proof is None


def test_a_cancelled_search_stops_before_its_next_tactic() -> None:
    states = ScriptedStates({f"step{k}.": ("progress", 0.1) for k in range(50)})
    asked = iter(range(1000))
    result = best_first_search(states, TASK, lambda root: Table([Candidate(f"step{k}.", 0.1) for k in range(50)]),
                               SearchBudget(seconds=25, max_checks=1000), clock=states.clock,
                               cancelled=lambda: next(asked) >= 3)
    assert result.reason == "cancelled" and result.checks == 3


class Chain:
    """A scripted prover where only ``a1. ... a5.`` in that order proves the goal; every ``dJ.`` makes progress
    to a new state anywhere (a step that leads nowhere)."""

    prover = "coq"

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        return ProofState((), ("|- goal",))

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        path = (*state.handle, tactic)
        if tactic.startswith("a") and tactic == f"a{len(state.handle) + 1}." and all(
                t == f"a{k + 1}." for k, t in enumerate(state.handle)):
            if len(path) == 5:
                return TacticResult("proved", ProofState(path, ()), seconds=0.01)
            return TacticResult("progress", ProofState(path, (f"|- goal {len(path)}",)), seconds=0.01)
        if tactic.startswith("d"):
            return TacticResult("progress", ProofState(path, (f"|- goal {' '.join(path)}",)), seconds=0.01)
        return TacticResult("error", message="failed", seconds=0.01)

    def proof_text(self, tactics: Sequence[str]) -> str:
        return "\n".join(tactics)


class Steps(TacticSource):
    """The next chain step first, then twenty that lead nowhere, at every state."""

    def __init__(self) -> None:
        self.widened = 0

    def candidates(self, node: Node) -> list[Candidate]:
        return [Candidate(f"a{node.depth + 1}.", 0.1)] + [Candidate(f"d{j}.", 0.1 + 0.001 * j) for j in range(20)]

    def widen(self) -> bool:
        self.widened += 1
        return True


def test_the_narrow_source_goes_deep_where_the_wide_one_spends_its_runs_near_the_statement() -> None:
    budget = SearchBudget(seconds=1000, max_checks=60)
    wide = best_first_search(Chain(), TASK, lambda root: Steps(), budget)  # type: ignore[arg-type]
    assert wide.proof is None and wide.reason == "budget: checks" and wide.deepest < 5
    narrow = best_first_search(Chain(), TASK, lambda root: Narrow(Steps(), width=2), budget)  # type: ignore[arg-type]
    assert narrow.proof == "a1.\na2.\na3.\na4.\na5." and narrow.checks < budget.max_checks


class WithClosers(Steps):
    def candidates(self, node: Node) -> list[Candidate]:
        return [Candidate("sauto.", 2.0, True), *super().candidates(node), Candidate("auto.", 0.05, True)]


def test_the_narrow_source_offers_every_closer_and_the_cheapest_steps_and_widens_its_inner_source() -> None:
    inner = WithClosers()
    narrow = Narrow(inner, width=3)
    node = Node(0, -1, "", ProofState((), ("|- goal",)), 0, 0.0, ())
    assert [c.tactic for c in narrow.candidates(node)] == ["sauto.", "a1.", "d0.", "d1.", "auto."]
    assert narrow.widen() and inner.widened == 1
    assert [c.tactic for c in narrow.candidates(node)] == ["sauto.", "a1.", "d0.", "d1.", "d2.", "d3.", "d4.",
                                                           "auto."]


@needs_coq
@pytest.mark.parametrize("beside", [False, True], ids=["default", "search_beside"])
def test_the_agent_runs_the_side_search_only_when_asked(beside: bool) -> None:
    from types import SimpleNamespace
    from typing import Any

    from agents.proof_search import ProofSearchAgent
    from rrma.task import AgentConfig, TaskConfig

    params: dict[str, Any] = {"seconds": 20, "library_tactics": False, **({"search_beside": True} if beside else {})}
    agent = ProofSearchAgent(AgentConfig(name="s", backend="proof-search", params=params),
                             TaskConfig.model_validate({"name": "t", "oracle": {"kind": "coq"},
                                                        "metric": {"name": "solved", "direction": "maximize"}}))
    turns: list[dict[str, Any]] = []
    ctx = SimpleNamespace(theorem={"name": TASK.name, "statement": TASK.statement, "context": "", "prover": "coq",
                                   "difficulty": "easy", "line": 1, "setting": "rediscover"},
                          tried=set(), record_turn=lambda **kw: turns.append(kw), hidden=())
    try:
        proposal = agent.propose(ctx)  # type: ignore[arg-type]
        assert proposal is not None and proposal.proof
        side = turns[-1]["args"].get("side", "")
        if beside:
            assert side.startswith("search: "), side  # how the side search ended (cancelled, or found first)
            passes = agent._side[next(iter(agent._side))]
            assert isinstance(passes, Beside) and [n for n, _ in passes.passes] == ["search"]
        else:
            assert side == "" and not agent._side
    finally:
        agent.close()
