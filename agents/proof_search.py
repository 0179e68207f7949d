"""The proof-search agent: best-first search over proof states, the offline prover that reads goals.

Why it exists: the tactic portfolio (:mod:`agents.tactic_portfolio`) submits closed scripts and
never looks at a goal, so it solves the easy theorems of a real library and few others. This
agent searches the way LeanDojo/ReProver-style provers do: from the theorem's statement it
applies one tactic at a time through a proof-state backend (:mod:`oracle.proof_state`), keeps
every new state in a priority queue, and expands the most promising state next, until a path
of tactics closes every goal or the per-theorem budget (tactic runs and seconds) is spent.

The rooms of the search, each in its own module:

* :mod:`agents.best_first`: the frontier, its priorities and budget, and the search tree kept in
  the trace (the proposal's ``meta["search_tree"]``, which the TUI's proof-tree screen replays);
* :mod:`agents.coq_tactics` and :mod:`agents.lean_tactics`: the candidates for a goal, cheap and
  decisive ones first (closers, structural steps read off the goal, premises, the portfolio's scripts);
* the suggesters: :mod:`agents.learned_tactics` (this run's own proofs),
  :mod:`agents.library_tactics` (the library's human proofs, when indexed) and
  :mod:`agents.llm_tactics` (a chat model, ``params.llm``).

This module holds the agent: it reads its params, keeps one prover session per prover (and per
hidden-file set), runs one search per theorem (another after the checker refused its proof) and proposes what it
found.

Invariant: the found proof is first closed in the agent's own session (``Qed`` and ``Print
Assumptions``: a proof that leans on an axiom is not proposed) and then re-checked from scratch by
the oracle; only the oracle's verdict counts.

Params: ``seconds`` (per-theorem search budget, 25), ``max_checks`` (tactic runs, 6000),
``tactic_seconds`` (each tactic's timeout, 2), ``library`` (search imported libraries, true),
``hammer`` (false; true when the bench preloads CoqHammer), ``hammer_beside`` (true: with ``hammer``,
CoqHammer's ``hammer`` runs on each statement in a second session beside the search,
:mod:`agents.side_hammer`), ``search_beside`` (false; true: a second, narrow search runs in a third
session beside it, :mod:`agents.side_search`, and the search replays what either finds), ``hammer_share`` (1: the share of
each search's seconds CoqHammer's tactics may take; 1 is no cap), ``portfolio`` (true), ``llm``,
``llm_model``, ``llm_calls`` (model calls per theorem, 4), ``coq_args`` (load paths),
``preload`` (Coq sentences the search's session runs before each context; the oracle's own preload is
already at the end of the context it shows), ``lean_project``,
``lean_backend`` (``repl`` or ``dojo``), ``tree_limit`` (tries kept in the trace, 600), ``again`` (true: a proof the
Coq checker refused is searched again in the theorem's seconds left, that proof vetoed and any axiom the refusal
names banned).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agents import side_hammer, side_search
from agents.best_first import SearchBudget, SearchResult, SidePass, TacticSource, best_first_search
from agents.coq_tactics import CoqTactics, ScopeFacts
from agents.lean_tactics import LeanTactics
from agents.learned_tactics import LearnedTactics
from agents.library_tactics import LibraryTactics, library_modules
from agents.llm_tactics import LLMTactics
from agents.side_hammer import SideHammer
from agents.side_search import Beside, SideSearch
from agents.tactic_suggester import TacticSuggester
from oracle.coq.replies import AXIOMS_REASON
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState, ProofStates
from rrma.contracts import Agent, Context, PluginSettings, TrialSummary
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Proposal


class ProofSearchParams(PluginSettings):
    """``agents[].params`` of the proof-search backend (checked when the task is loaded: rrma/declare.py)."""

    seconds: float = 25.0
    """Search budget per theorem (seconds)."""
    max_checks: int = Field(6000, ge=0, le=100_000_000)
    """Tactic runs per theorem."""
    tactic_seconds: float = 2.0
    """Timeout of one tactic (seconds)."""
    library: bool = True
    """Search the imported libraries' lemmas."""
    hammer: bool = False
    """Try CoqHammer's sauto/hauto (the coq bench's --hammer preloads its tactics)."""
    hammer_seconds: float = 0.0
    """Seconds of each search kept back for one call of CoqHammer's `hammer` (0: off)."""
    hammer_beside: bool = True
    """With hammer: CoqHammer's `hammer` (its ATP, eprover) on each statement in a second coqtop beside the
    search, on the other core, when the plugin and eprover are installed; the search replays what it finds."""
    search_beside: bool = False
    """A second, narrow search (every closer and the cheapest few other steps a state: it goes deep) in its own
    coqtop on the other core (Coq only); the search replays what it finds (agents/side_search.py). Off: it
    gained nothing in-sample (docs/proofs.md, round seventeen)."""
    hammer_share: float = Field(1.0, ge=0.0, le=1.0)
    """Share of each search's seconds CoqHammer's tactics (sauto, hauto, qauto) may take (1: no cap)."""
    portfolio: bool = True
    """Try the tactic portfolio's closed scripts."""
    tree_limit: int = Field(600, ge=0, le=100_000_000)
    """Tries kept in the trace's search tree."""
    coq_args: list[str] = Field(default_factory=list)
    """Coq's load paths (as the oracle's coq_args)."""
    preload: str = ""
    """Coq sentences the search's session runs before each theorem's context (the oracle's preload is already in the context)."""
    allowed_axioms: list[str] = Field(default_factory=list)
    """Axioms a found proof may lean on."""
    lean_project: str | None = None
    """The Lean project (default: the repository's lean_project)."""
    lean_backend: Literal["repl", "dojo"] = "repl"
    """Lean's proof-state backend: the Lean REPL or LeanDojo."""
    llm: str | None = None
    """A chat-model backend suggesting tactics (anthropic, openai; None: none)."""
    llm_model: str | None = None
    """Its model (default: agents[].model)."""
    llm_calls: int = Field(4, ge=0, le=100_000)
    """Model calls per theorem."""
    learn: bool = True
    """Suggest the steps of the proofs this agent found earlier in the run."""
    library_tactics: bool = True
    """Suggest the library's human proofs' tactics (when indexed)."""
    library_index: str | None = None
    """The library index (default: the one built in place)."""
    again: bool = True
    """Coq: search again, in the theorem's seconds left, when the checker refused the proof found (that proof
    vetoed; an axiom the refusal names neither offered nor allowed)."""


def _session_key(prover: str, hidden: tuple[Path, ...]) -> str:
    """Which prover session a theorem uses: a session sees one theorem file's hiding (``Context.hidden``)."""
    return f"{prover}:{hash(tuple(sorted(map(str, hidden))))}"


@dataclass
class _Theorem:
    searched: bool = False
    proposed: set[str] = field(default_factory=set)
    started: float = 0.0  # when its first search started (time.monotonic): a second search has what is left
    refused: set[tuple[str, ...]] = field(default_factory=set)  # the tactics of the proofs the checker refused
    banned: set[str] = field(default_factory=set)  # the axioms those refusals named
    answered: set[str] = field(default_factory=set)  # the trials already read for a refusal
    # the (goal, tactic) steps of the proof proposed last: learnt once the checker accepts it
    steps: list[tuple[str, str]] = field(default_factory=list)
    task: TheoremTask | None = None


AGAIN_MIN_S = 3.0  # a second search starts only with this many of the theorem's search seconds left
# the checker's refusal that names axioms (oracle.coq.replies.AXIOMS_REASON), and the names it lists
_AXIOMS_REFUSED = re.compile(re.escape(AXIOMS_REASON) + r"(?P<names>[\w'.]+(?:, (?!which\b)[\w'.]+)*)")


def refused_axioms(feedback: str) -> set[str]:
    """The axioms a Coq checker's refusal names (``relies on axiom(s) classic, which the original proof does
    not``): ``{"classic"}``; an empty set for another refusal."""
    found = _AXIOMS_REFUSED.search(feedback)
    return {name for name in found.group("names").split(", ")} if found else set()


class ProofSearchAgent(Agent):
    """Best-first proof search (see the module docstring for params)."""

    backend = "proof-search"
    params_model = ProofSearchParams

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        p = dict(config.params)
        self.budget = SearchBudget(seconds=float(p.get("seconds", 25.0)), max_checks=int(p.get("max_checks", 6000)),
                                   tactic_seconds=float(p.get("tactic_seconds", 2.0)))
        self.library = bool(p.get("library", True))
        self.hammer = bool(p.get("hammer", False))
        self.hammer_seconds = float(p.get("hammer_seconds", 0.0))  # kept back for a last `hammer` (ATPs)
        self.hammer_beside = bool(p.get("hammer_beside", True))
        self.search_beside = bool(p.get("search_beside", False))
        self._side: dict[str, SidePass] = {}  # what runs beside the search (hammer, a side search), per hiding
        share = float(p.get("hammer_share", 1.0))
        self.hammer_cap = share * self.budget.seconds if share < 1.0 else None
        self.portfolio = bool(p.get("portfolio", True))
        self.tree_limit = int(p.get("tree_limit", 600))
        self.coq_args = tuple(str(a) for a in p.get("coq_args", ()))
        self.preload = str(p.get("preload", ""))
        self.allowed_axioms = tuple(str(a) for a in p.get("allowed_axioms", ()))
        self.again = bool(p.get("again", True))
        self.lean_project = p.get("lean_project")
        self.lean_backend = str(p.get("lean_backend", "repl"))
        self.llm_backend = p.get("llm")
        self.llm_model = p.get("llm_model", config.model)
        self.llm_calls = int(p.get("llm_calls", 4))
        self._states: dict[str, ProofStates] = {}
        self._theorems: dict[str, _Theorem] = {}
        self._llm: LLMTactics | None = None
        self.searches: list[SearchResult] = []
        self.probe_cache: dict[tuple[object, ...], tuple[frozenset[str], dict[str, str]]] = {}
        self.scope_facts: dict[tuple[object, ...], ScopeFacts] = {}  # what each scope parses, its non-inductive types
        self.learned = LearnedTactics()  # online: the steps of the proofs this agent found in this run
        self.learn = bool(p.get("learn", True))
        # offline: the human proofs of the target's library (agents/library_tactics.py), when indexed
        self.library_tactics: LibraryTactics | None = None
        if bool(p.get("library_tactics", True)):
            index = p.get("library_index")
            lib = LibraryTactics(Path(str(index)) if index else None)
            if lib.available():  # read once, here: an offline model, loaded before any theorem's clock runs
                self.library_tactics = lib.load()
        # the side search's own suggesters (each search screens with its own session and sets the modules
        # its theorem may learn from): the same models, shallow copies (what the search learns, it sees)
        self._side_learned = copy.copy(self.learned)
        self._side_library = copy.copy(self.library_tactics)

    def _backend(self, prover: str, hidden: tuple[Path, ...] = ()) -> ProofStates:
        """The prover session of this agent; its processes never see ``hidden`` (``Context.hidden``)."""
        key = _session_key(prover, hidden)
        states = self._states.get(key)
        if states is not None:
            return states
        for other in [k for k in self._states if k.startswith(f"{prover}:")]:
            self._states.pop(other).close()
        if prover == "coq":
            from oracle.proof_state_coq import CoqProofStates

            states = CoqProofStates(coq_args=self.coq_args, preload=self.preload, hidden=hidden)
        elif self.lean_backend == "dojo":
            from oracle.proof_state_lean import LeanDojoProofStates

            states = LeanDojoProofStates(self.lean_project)
        else:
            from oracle.proof_state_lean import LeanReplProofStates

            states = LeanReplProofStates(self.lean_project, hidden=hidden)
        self._states[key] = states
        return states

    def _side_for(self, prover: str, hidden: tuple[Path, ...], setting: str) -> SidePass | None:
        """What runs beside the search on the other core, one per hiding: CoqHammer's `hammer`
        (agents/side_hammer.py; with ``hammer`` where the plugin and eprover are installed) and the side
        search (agents/side_search.py; ``search_beside``); None for Lean or when both are off."""
        if prover != "coq":
            return None
        key = _session_key(prover, hidden)
        side = self._side.get(key)
        if side is not None:
            return side
        for other in list(self._side):
            close = getattr(self._side.pop(other), "close", None)
            if close is not None:
                close()
        from oracle.proof_state_coq import CoqProofStates

        passes: list[tuple[str, SidePass]] = []
        if self.hammer and self.hammer_beside and side_hammer.available():
            main = self._backend(prover, hidden)
            passes.append(("hammer", SideHammer(lambda: CoqProofStates(
                coq_args=self.coq_args, hidden=hidden, nice=side_hammer.NICE, memory_mb=side_hammer.MEMORY_MB,
                preload=side_hammer.preload(side_hammer.ATP_SECONDS, side_hammer.RECONSTRUCT_SECONDS) + self.preload),
                lambda: getattr(main, "loaded_libraries", list)())))
        if self.search_beside:
            passes.append(("search", SideSearch(
                lambda: CoqProofStates(coq_args=self.coq_args, preload=self.preload, hidden=hidden,
                                       nice=side_search.NICE),
                lambda states, task: self._narrow(self._coq_source(states, task, setting, None, self._side_learned,
                                                                   self._side_library, {}, {}, 0.0)),
                self.budget)))
        if not passes:
            return None
        side = self._side[key] = passes[0][1] if len(passes) == 1 and passes[0][0] == "hammer" else Beside(passes)
        return side

    @staticmethod
    def _narrow(source: Callable[[ProofState], TacticSource]) -> Callable[[ProofState], TacticSource]:
        """The side search's source: the search's candidates, the cheapest few a state (side_search.Narrow)."""
        return lambda root: side_search.Narrow(source(root))

    def _coq_source(self, states: Any, task: TheoremTask, setting: str, llm: LLMTactics | None,
                    learned: LearnedTactics, library: LibraryTactics | None,
                    probe_cache: dict[tuple[object, ...], tuple[frozenset[str], dict[str, str]]],
                    scope_facts: dict[tuple[object, ...], ScopeFacts],
                    hammer_seconds: float, record: _Theorem | None = None) -> Callable[[ProofState], TacticSource]:
        """The tactic source of one Coq search (the search's, or the side search's with its own suggesters
        and caches: each drives its own session)."""
        def source(root: ProofState) -> TacticSource:
            suggesters: list[TacticSuggester] = [learned] if self.learn else []
            lib = self._library_for(states, task, library)
            if lib is not None:
                suggesters.append(lib)
            tactics = CoqTactics(states, task, root, library=self.library, hammer=self.hammer,
                                 portfolio=self.portfolio, llm=llm, setting=setting,
                                 suggesters=suggesters, hammer_seconds=hammer_seconds,
                                 probe_cache=probe_cache, scope_facts=scope_facts, hammer_cap_seconds=self.hammer_cap)
            tactics.allowed_axioms = self.allowed_axioms
            if record is not None:  # a second search: what the checker refused (the sets are the record's own)
                tactics.refused_proofs, tactics.banned_axioms = record.refused, record.banned
            return tactics
        return source

    @staticmethod
    def _library_for(states: Any, task: TheoremTask, lib: LibraryTactics | None) -> LibraryTactics | None:
        """The library k-NN ``lib`` for this theorem, restricted to the modules its session has loaded (the
        rule of :func:`agents.library_tactics.library_modules`); None without an index."""
        loaded = getattr(states, "loaded_libraries", None)
        if lib is None or loaded is None or lib.index is None:
            return None
        lib.use(library_modules(loaded()), task)
        return lib if lib.modules else None

    def _llm_for(self, ctx: Context) -> LLMTactics | None:
        if not self.llm_backend:
            return None
        if self._llm is None:
            self._llm = LLMTactics(str(self.llm_backend), self.llm_model, self.task, self.name,
                                   max_calls=self.llm_calls, record=ctx.record_turn)
        self._llm.record = ctx.record_turn
        return self._llm

    def propose(self, ctx: Context) -> Proposal | None:
        th = ctx.theorem
        if not th:
            return None
        name = str(th["name"])
        prover = str(th.get("prover", "coq"))
        record = self._theorems.setdefault(name, _Theorem())
        budget = self.budget
        if record.searched:  # one search per theorem, and another only after the checker refused its proof
            again = self._again(ctx, name, record, prover)
            if again is None:
                return None
            budget = again
        else:
            record.started = time.monotonic()
        record.searched = True
        task = TheoremTask.from_view(th)
        setting = str(th.get("setting", "library"))
        try:
            states = self._backend(prover, ctx.hidden)
        except Exception as exc:  # the prover is missing here: say so in the trace, propose nothing
            ctx.record_turn(role="error", tool="proof-search", text=f"no proof-state backend: {exc}"[:500])
            return None
        llm = self._llm_for(ctx)

        if prover == "coq":
            source = self._coq_source(states, task, setting, llm, self.learned, self.library_tactics, self.probe_cache,
                                      self.scope_facts, self.hammer_seconds, record)
        else:
            def source(root: ProofState) -> TacticSource:
                return LeanTactics(task, portfolio=self.portfolio, llm=llm)

        result = best_first_search(states, task, source, budget, tree_limit=self.tree_limit,
                                   side=self._side_for(prover, ctx.hidden, setting))
        self.searches.append(result)
        record.steps, record.task = list(result.steps), task  # learnt when the checker accepts the proof
        retry = f" (again, the checker having refused {len(record.refused)} proof(s)" + (
            f"; not resting on {', '.join(sorted(record.banned))})" if record.banned else ")") if record.refused else ""
        summary = (f"{name}: {result.reason} after {result.checks} tactic runs, {result.expanded} states expanded, "
                   f"{result.seconds:.1f} s{retry}")
        ctx.record_turn(role="tool_result", tool="proof-search", text=summary,
                        args={"theorem": name, "result": result.reason, "checks": result.checks,
                              "expanded": result.expanded, "seconds": round(result.seconds, 3),
                              "deepest": result.deepest, "last_error": result.last_error[:300],
                              "tactics": list(result.tactics or []), "sources": list(result.proof_sources),
                              "by_source": result.by_source, "start_seconds": round(result.start_seconds, 3),
                              **({"side": result.side} if result.side else {}),
                              **({"vetoed": result.vetoed, "first_veto": result.first_veto[:300]}
                                 if result.vetoed else {}),
                              **({"again": {"refused": len(record.refused), "banned": sorted(record.banned)}}
                                 if record.refused else {})})
        if result.proof is None or result.proof in record.proposed or result.proof in ctx.tried:
            return None
        record.proposed.add(result.proof)
        return Proposal(hypothesis=f"proof search: {len(result.tactics or ())} tactic(s) found by best-first search",
                        proof=result.proof, theorem=name,
                        meta={"search_tree": result.tree, "checks": result.checks, "expanded": result.expanded,
                              "search_seconds": round(result.seconds, 3), "tactics": list(result.tactics or [])})

    def observe(self, trial: TrialSummary) -> None:
        """A proof the checker accepted teaches its steps (online learning); one it refused teaches nothing (a
        step resting on an axiom the original does not use would be offered to every later theorem)."""
        record = self._theorems.get(str(trial.theorem)) if trial.theorem else None
        if record is None or record.task is None or trial.status != "ok" or not self.learn:
            return
        self.learned.learn(record.task, record.steps)
        record.steps = []

    def _again(self, ctx: Context, name: str, record: _Theorem, prover: str) -> SearchBudget | None:
        """The budget of a second search of ``name``, when its last proof was refused by the checker and
        :data:`AGAIN_MIN_S` of its search seconds are left (Coq; ``again``); None: nothing more for it. The refused
        proof is vetoed and the axioms the refusal names are banned (:meth:`CoqTactics.validate`)."""
        refusals = [t for t in ctx.own if t.theorem == name and t.status == "rejected" and t.trial_id not in
                    record.answered and t.params.get("tactics")]
        if not self.again or prover != "coq" or not refusals:
            return None
        for trial in refusals:
            record.answered.add(trial.trial_id)
            record.refused.add(tuple(str(t) for t in trial.params["tactics"]))
            record.banned |= refused_axioms(trial.feedback)
        left = self.budget.seconds - (time.monotonic() - record.started)
        if left < AGAIN_MIN_S:
            return None
        return SearchBudget(seconds=left, max_checks=self.budget.max_checks, tactic_seconds=self.budget.tactic_seconds)

    def close(self) -> None:
        for states in self._states.values():
            states.close()
        self._states.clear()
        for side in self._side.values():
            close = getattr(side, "close", None)
            if close is not None:
                close()
        self._side.clear()
