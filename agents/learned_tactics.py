"""Online learning from the run's own proofs: the search proposes what worked on similar goals.

Why it exists: a run proves many theorems of one library, and a proof found for one is often the
shape of the next. :class:`LearnedTactics` is one of the proof-search agent's suggesters
(:mod:`agents.tactic_suggester`), fed by :class:`agents.proof_search.ProofSearchAgent` after each
proof it finds.

Invariant: it learns only from proofs the search found in this run; nothing here comes from a human
proof of the file being proved.
"""

from __future__ import annotations

from collections.abc import Sequence

from agents.best_first import conclusion
from agents.premises import tokens
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState


class LearnedTactics:
    """Online learning from the run's own proofs, Tactician-style: every (goal, tactic) step of a
    proof the search found is remembered; for a new goal the tactics of the most similar remembered
    goals (rare shared symbols, IDF-weighted) are proposed, best first. Whole proofs of the most
    similar solved statements are proposed at the statement. Nothing here comes from a human proof
    of the file being proved."""

    def __init__(self, per_goal: int = 6, whole: int = 3) -> None:
        self.steps: list[tuple[frozenset[str], str]] = []
        self.proofs: list[tuple[frozenset[str], str]] = []
        self.per_goal, self.whole = per_goal, whole
        self.df: dict[str, int] = {}

    def learn(self, task: TheoremTask, steps: Sequence[tuple[str, str]]) -> None:
        for goal, tactic in steps:
            syms = frozenset(tokens(conclusion(goal)))
            self.steps.append((syms, tactic))
            for sym in syms:
                self.df[sym] = self.df.get(sym, 0) + 1
        if steps:
            self.proofs.append((frozenset(tokens(task.statement)), "\n".join(t for _, t in steps)))

    def _weight(self, sym: str) -> float:
        import math

        return math.log((len(self.steps) + 1) / (self.df.get(sym, 0) + 0.5))

    def _rank(self, syms: frozenset[str], pool: Sequence[tuple[frozenset[str], str]], limit: int) -> list[str]:
        scored = []
        for k, (other, tactic) in enumerate(pool):
            shared = syms & other
            if not shared:
                continue
            score = sum(self._weight(x) for x in shared) / (1.0 + sum(self._weight(x) for x in syms | other))
            scored.append((score, k, tactic))
        scored.sort(key=lambda item: (-item[0], -item[1]))
        out: list[str] = []
        for _, _, tactic in scored:
            if tactic not in out:
                out.append(tactic)
            if len(out) >= limit:
                break
        return out

    def candidates(self, task: TheoremTask, state: ProofState) -> list[Candidate]:
        if not state.goals or not self.steps:
            return []
        out = [Candidate(t, 0.45 + 0.05 * k, source="learned")
               for k, t in enumerate(self._rank(frozenset(tokens(conclusion(state.goals[0]))), self.steps,
                                                self.per_goal))]
        if not state.handle:  # at the statement: whole proofs of similar solved theorems
            out += [Candidate(p, 0.4 + 0.02 * k, True, "learned")
                    for k, p in enumerate(self._rank(frozenset(tokens(task.statement)), self.proofs, self.whole))]
        return out
