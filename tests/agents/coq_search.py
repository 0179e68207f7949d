"""A real-``coqtop`` best-first search of one theorem with the Coq rules, for the search's tests."""

from __future__ import annotations

from agents.best_first import SearchBudget, SearchResult, best_first_search
from agents.coq_tactics import CoqTactics
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState


def coq_search(task: TheoremTask, max_checks: int, *, library: bool) -> SearchResult:
    """Search ``task`` in the ``rediscover`` setting by the rules and premises (``library``: Coq's ``Search``
    over the loaded libraries as well), no portfolio and no k-NN, within ``max_checks`` tactic runs."""
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()

    def source(root: ProofState) -> CoqTactics:
        return CoqTactics(states, task, root, library=library, portfolio=False, setting="rediscover")

    try:
        return best_first_search(states, task, source, SearchBudget(seconds=60, max_checks=max_checks),
                                 tree_limit=100_000)
    finally:
        states.close()
