"""Lean 4 candidates for the best-first proof search.

Why it exists: :func:`agents.best_first.best_first_search` knows no prover; :class:`LeanTactics`
reads a Lean goal and proposes closers, ``intro``/``induction``/``cases`` on variables, premises of
the file (``rw``/``simp [L]``/``exact L``/``apply L``), the portfolio's scripts at the statement and,
when the agent has one, a chat model's tactics (:mod:`agents.llm_tactics`). Each candidate appears
once; the backend screens each before it runs.
"""

from __future__ import annotations

from collections.abc import Iterable

from agents.best_first import Node, TacticSource, conclusion
from agents.llm_tactics import LLMTactics
from agents.premises import PremiseIndex, lean_file_premises
from agents.tactic_portfolio import LEAN_TEMPLATES, induction_order, instantiate, variables_of
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask

LEAN_CLOSERS: list[tuple[str, float]] = [
    ("rfl", 0.1), ("assumption", 0.1), ("trivial", 0.15), ("decide", 0.2), ("simp", 0.2), ("omega", 0.3),
    ("simp_all", 0.3), ("contradiction", 0.2), ("exact?", 0.6), ("simp_arith", 0.4), ("constructor", 0.4),
]


class LeanTactics(TacticSource):
    """Lean 4 candidates: closers, ``intro``/``induction``/``cases`` on variables, premises of the
    file (``rw``/``simp [L]``/``exact L``/``apply L``), and the portfolio's scripts at the statement."""

    def __init__(self, task: TheoremTask, *, portfolio: bool = True, premises_per_node: int = 6,
                 llm: LLMTactics | None = None) -> None:
        self.task = task
        premises, self.definitions = lean_file_premises(task.context)
        self.index = PremiseIndex(premises)
        self.portfolio = portfolio
        self.premises_per_node = premises_per_node
        self.llm = llm

    def candidates(self, node: Node) -> Iterable[Candidate]:
        state = node.state
        goal = state.goals[0]
        hyps = [line.split(" : ", 1) for line in goal.split("⊢")[0].splitlines() if " : " in line]
        out: list[Candidate] = []
        if node.depth == 0 and self.portfolio:
            vars_ = induction_order(variables_of(self.task.statement))
            for index, template in enumerate(LEAN_TEMPLATES):
                for proof in instantiate(template, vars_=vars_, lemmas=[], ihs=[])[:2]:
                    out.append(Candidate(proof.removeprefix("by ").strip(), 0.5 + 0.01 * index, True, "portfolio"))
        out.extend(Candidate(t, c, True) for t, c in LEAN_CLOSERS)
        concl = conclusion(goal)
        if concl.startswith(("∀", "¬")) or "→" in concl:
            out.append(Candidate("intro", 0.3))
            out.append(Candidate("intros", 0.4))
        for names, typ in hyps:
            for name in names.split():
                if typ.strip() in ("Nat", "ℕ", "Bool", "Prop", "Type") or typ.strip().startswith(("List", "Option")):
                    out.append(Candidate(f"induction {name} <;> simp_all", 0.9, True))
                    out.append(Candidate(f"induction {name}", 1.1))
                    out.append(Candidate(f"cases {name}", 1.1))
        for premise in self.index.rank(goal, self.premises_per_node, exclude=[self.task.name.split(".")[-1]]):
            out.append(Candidate(f"simp [{premise.name}]", 0.6, True, "premise"))
            out.append(Candidate(f"rw [{premise.name}]", 0.8, source="premise"))
            out.append(Candidate(f"exact {premise.name}", 0.5, True, "premise"))
            out.append(Candidate(f"apply {premise.name}", 0.8, source="premise"))
        out.append(Candidate("constructor", 0.8))
        out.append(Candidate("simp only []", 0.9))
        if self.llm is not None:
            out.extend(self.llm.candidates(self.task, state))
        seen: set[str] = set()
        return [c for c in out if not (c.tactic in seen or seen.add(c.tactic))]  # type: ignore[func-returns-value]
