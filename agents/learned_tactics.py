"""Online learning from the run's own proofs: the search proposes what worked on similar goals.

Why it exists: a run proves many theorems of one library, and a proof found for one is often the
shape of the next. :class:`LearnedTactics` is one of the proof-search agent's suggesters
(:mod:`agents.tactic_suggester`), fed by :class:`agents.proof_search.ProofSearchAgent` after each
proof it finds.

Invariants: it learns only from proofs the search found in this run; nothing here comes from a human
proof of the file being proved. A step or proof names only what the target's context has: one that
names something its own file declared (a lemma, a section variable, a constructor) is offered for
another theorem only if that theorem's context declares the same name too or the goal has it as a
local name (a run goes over several files, and a lemma of the first file is unknown in the second).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from agents.best_first import conclusion
from agents.premises import declared_names, tokens
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState

_NAME = re.compile(r"(?<![\w'.])[A-Za-z_][\w']*(?![\w'])")
_BOUND = re.compile(r"(?:forall|exists|fun|∀|∃|λ)\s+([^,]*?)\s*(?:,|=>)")
# a flag for tests: False restores the search before the rule (a step of one file offered in another)
KEEP_TO_ITS_FILE = True


def goal_locals(goal: str) -> set[str]:
    """The names a goal display (``h1 : T1; h2 : T2 |- concl``) binds itself: its hypotheses and the
    binders in it."""
    out: set[str] = set()
    for group in _BOUND.findall(goal):
        out.update(re.findall(r"[A-Za-z_][\w']*", group))
    for part in goal.rpartition("|- ")[0].split("; "):
        if " : " in part:
            out.update(n.strip() for n in part.split(" : ", 1)[0].split(","))
    return out


def _local_names(state: ProofState) -> set[str]:
    out = goal_locals(state.goals[0]) if state.goals else set()
    detail = state.detail[0] if state.detail else None
    if detail is not None:
        out.update(detail.hyp_names())
    return out


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
        # tactic -> the names it takes from its own file's declarations (every file it was learnt in)
        self.file_names: dict[str, list[frozenset[str]]] = {}
        self._declared: tuple[str, frozenset[str]] = ("", frozenset())  # the last context read
        # set by the search for each theorem: whether the theorem's scope can read a tactic (it parses,
        # its tactic names exist); a tactic it refuses does not take a slot
        self.screen: Callable[[str, ProofState], bool] | None = None

    def _declared_in(self, task: TheoremTask) -> frozenset[str]:
        """The names ``task``'s context declares, and the theorem's own (read once per context)."""
        key = f"{task.name}\0{len(task.context)}\0{hash(task.context)}"
        if self._declared[0] != key:
            self._declared = (key, declared_names(task.context) | {task.name.split(".")[-1]})
        return self._declared[1]

    def learn(self, task: TheoremTask, steps: Sequence[tuple[str, str]]) -> None:
        own = self._declared_in(task)
        for goal, tactic in steps:
            syms = frozenset(tokens(conclusion(goal)))
            self.steps.append((syms, tactic))
            for sym in syms:
                self.df[sym] = self.df.get(sym, 0) + 1
            self.file_names.setdefault(tactic, []).append(frozenset(_NAME.findall(tactic)) & own - goal_locals(goal))
        if steps:
            proof = "\n".join(t for _, t in steps)
            self.proofs.append((frozenset(tokens(task.statement)), proof))
            bound = goal_locals(steps[0][0]) | {n for goal, _ in steps for n in goal_locals(goal)}
            self.file_names.setdefault(proof, []).append(frozenset(_NAME.findall(proof)) & own - bound)

    def usable(self, tactic: str, task: TheoremTask, state: ProofState) -> bool:
        """Whether ``tactic`` names only what ``task``'s context has: every name it took from the
        declarations of a file it was learnt in is declared here too, or bound by the goal (the rule of
        the module docstring). A tactic learnt in several files needs one of them to fit."""
        if not KEEP_TO_ITS_FILE:
            return True
        needs = self.file_names.get(tactic)
        if not needs or not any(needs):
            return True
        have = self._declared_in(task) | _local_names(state)
        return any(names <= have for names in needs)

    def _weight(self, sym: str) -> float:
        import math

        return math.log((len(self.steps) + 1) / (self.df.get(sym, 0) + 0.5))

    def _rank(self, syms: frozenset[str], pool: Sequence[tuple[frozenset[str], str]], limit: int,
              task: TheoremTask, state: ProofState) -> list[str]:
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
            if tactic not in out and self.usable(tactic, task, state) and (
                    self.screen is None or self.screen(tactic, state)):
                out.append(tactic)
            if len(out) >= limit:
                break
        return out

    def candidates(self, task: TheoremTask, state: ProofState) -> list[Candidate]:
        if not state.goals or not self.steps:
            return []
        out = [Candidate(t, 0.45 + 0.05 * k, source="learned")
               for k, t in enumerate(self._rank(frozenset(tokens(conclusion(state.goals[0]))), self.steps,
                                                self.per_goal, task, state))]
        if not state.handle:  # at the statement: whole proofs of similar solved theorems
            out += [Candidate(p, 0.4 + 0.02 * k, True, "learned")
                    for k, p in enumerate(self._rank(frozenset(tokens(task.statement)), self.proofs, self.whole,
                                                     task, state))]
        return out
