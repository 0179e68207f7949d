"""The seam between the proof search and its tactic sources: a candidate, and what a source implements.

Why it exists: the search (:mod:`agents.proof_search`) takes tactics from rules read off the goal
and from *suggesters*, sources that rank tactics for a goal from what they have learnt: the run's
own proofs (``LearnedTactics``), the human proofs of the target's library
(:class:`agents.library_tactics.LibraryTactics`), a chat model (``LLMTactics``), and later a local
model. They live in modules of their own and must not import the search, so the two types they
share live here. Invariant: a suggester only proposes; every candidate is screened by the
proof-state backend before it runs, and nothing it proposes counts until the oracle accepts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState


@dataclass(frozen=True)
class Candidate:
    """A tactic to try on a state's first goal; ``closer``: kept only if it closes that goal."""

    tactic: str
    cost: float = 1.0
    closer: bool = False
    source: str = "rule"  # rule | premise | portfolio | hammer | learned | library | llm
    # a bundle: ``tactic`` is ``solve [m1 | m2 | ...]`` over these closers, one prover round trip for all;
    # when it closes the goal the search finds the member that did and keeps that one
    members: tuple[str, ...] = ()


class TacticSuggester(Protocol):
    """A source of ranked tactics for a goal, beside the rules (the hook for learned or model-ranked
    tactics: ``LearnedTactics``, ``LibraryTactics``, ``LLMTactics`` for a chat model; a local model's
    ranked candidates plug in the same way). ``candidates`` returns tactics for ``state``'s first goal
    with their costs; ``learn`` is told each proof found in the run (its (goal, tactic) steps)."""

    def candidates(self, task: TheoremTask, state: ProofState) -> list[Candidate]: ...

    def learn(self, task: TheoremTask, steps: Sequence[tuple[str, str]]) -> None: ...


__all__ = ["Candidate", "TacticSuggester"]
