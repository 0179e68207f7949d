"""A real-``coqtop`` best-first search of one theorem with the Coq rules, for the search's tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from agents.best_first import SearchBudget, SearchResult, best_first_search
from agents.coq_tactics import CoqTactics
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState


def coq_search_made(task: TheoremTask, max_checks: int, *, library: bool, seconds: float = 60,
                    coq_args: Sequence[str] = ()) -> tuple[SearchResult, list[CoqTactics]]:
    """Search ``task`` in the ``rediscover`` setting by the rules and premises (``library``: Coq's ``Search``
    over the loaded libraries as well), no portfolio and no k-NN, within ``max_checks`` tactic runs and
    ``seconds`` (``coq_args``: ``coqtop``'s, a compiled library's ``-Q``); the result and the candidate sources
    the search made."""
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates(coq_args=coq_args)
    made: list[CoqTactics] = []

    def source(root: ProofState) -> CoqTactics:
        made.append(CoqTactics(states, task, root, library=library, portfolio=False, setting="rediscover"))
        return made[-1]

    try:
        return best_first_search(states, task, source, SearchBudget(seconds=seconds, max_checks=max_checks),
                                 tree_limit=100_000), made
    finally:
        states.close()


def state_after(task: TheoremTask, tactic: str) -> Iterator[tuple[Any, TheoremTask, ProofState]]:
    """A module fixture's body: a real ``coqtop`` session at ``task``'s statement after ``tactic``, as (the
    proof states, the task, the state), closed when the fixture ends."""
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    try:
        after = states.run_tactic(states.start(task), tactic)
        assert after.state is not None, after.message
        yield states, task, after.state
    finally:
        states.close()


def coq_search(task: TheoremTask, max_checks: int, *, library: bool, coq_args: Sequence[str] = ()) -> SearchResult:
    """:func:`coq_search_made`'s result alone."""
    return coq_search_made(task, max_checks, library=library, coq_args=coq_args)[0]


def rules_search(task: TheoremTask, max_checks: int, seconds: float = 60) -> tuple[SearchResult, list[CoqTactics]]:
    """A search by the rules alone (no library, no portfolio), and the sources it made."""
    return coq_search_made(task, max_checks, library=False, seconds=seconds)


def proved_iff(task: TheoremTask, rule: bool, max_checks: int = 300) -> tuple[str, ...]:
    """An on/off test's search: the rules alone prove ``task`` within ``max_checks`` tactic runs exactly when the
    ``rule`` under test is on; the proof's tactics (none when off)."""
    result, _ = rules_search(task, max_checks)
    assert (result.reason == "proved") is rule, (result.reason, result.tactics)
    return tuple(result.tactics or ())


# a structure's operations in a module of the file, its relation behind a notation (`ZNatPairs.v`'s `Module Z` and
# `==`): no name of the goal shows `Z.eq` (test_proof_search_functors.py's module unfolds,
# test_proof_search_notations.py's infix reading)
MODULE_OPS = ("Require Import Lia.\nModule Z.\nDefinition t := (nat * nat)%type.\n"
              "Definition eq (p q : t) := fst p + snd q <= fst q + snd p.\n"
              "Definition succ (p : t) : t := (S (fst p), snd p).\nDefinition pred (p : t) : t := (fst p, S (snd p)).\n"
              "End Z.\nInfix \"==\" := Z.eq (at level 70, no associativity).\n")
