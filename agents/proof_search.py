"""Best-first proof search over proof states: the offline prover that reads goals.

Why it exists: the tactic portfolio (:mod:`agents.tactic_portfolio`) submits closed scripts and
never looks at a goal, so it solves the easy theorems of a real library and few others. This
agent searches the way LeanDojo/ReProver-style provers do: from the theorem's statement it
applies one tactic at a time through a proof-state backend (:mod:`oracle.proof_state`), keeps
every new state in a priority queue, and expands the most promising state next, until a path
of tactics closes every goal or the per-theorem budget (tactic runs and seconds) is spent.

Candidates for a state, cheap and decisive ones first (:class:`CoqTactics`, :class:`LeanTactics`):

* closers that either close the first goal or are dropped (``reflexivity``, ``auto``, ``lia``,
  ``congruence``, ``auto using`` the best premises, CoqHammer's ``sauto``/``hauto`` when the
  oracle preloads ``Hammer.Tactics``...);
* structural steps read off the goal: ``intros``, ``split``/``left``/``right``, ``destruct`` and
  ``induction`` on each variable (and on each binder of a ``forall``, which generalizes the rest),
  ``inversion``/``destruct`` of hypotheses, ``unfold`` of the file's definitions that occur, ``destruct``
  of a ``match`` scrutinee, ``rewrite`` with hypotheses and induction hypotheses;
* premises (:mod:`agents.premises`): lemmas of the file and of the imported libraries (Coq's
  ``Search`` on the goal's constants), ranked by shared rare symbols: ``apply``, ``rewrite``
  (both ways) and ``apply ... in`` a hypothesis;
* the portfolio's closed scripts at the statement (so the search never does worse than it);
* optionally a chat model (``params.llm``: ``anthropic``, ``openai`` or ``module:Class``) asked for
  tactics for the goal (:class:`LLMTactics`), screened like every other tactic.

Priority of a (state, tactic): the cost of the state's path (each tactic has a cost) plus ``2 x
goals`` plus a size term, plus the tactic's cost and the seconds its kind has taken so far in this
search; one frontier holds them all, so a cheap tactic deep in the tree runs before a slow one near
the root. A state whose goals were seen before is not
kept; a tactic that closes a state's first goal ends that state's expansion (the other ways of
closing the same goal cannot do better).

The search tree is part of the trace: the proposal's ``meta["search_tree"]`` holds every tried
tactic compactly (parent node, tactic, outcome, child node, and why a failed one failed: the
prover's error, clipped), each node's goal hash and the goals of the nodes (clipped), so the TUI's
proof-tree screen can replay it. The found proof is
first closed in the agent's own session (``Qed`` and ``Print Assumptions``: a proof that leans
on an axiom is not proposed) and then re-checked from scratch by the oracle; only the oracle's
verdict counts.

Params: ``seconds`` (per-theorem search budget, 25), ``max_checks`` (tactic runs, 6000),
``tactic_seconds`` (each tactic's timeout, 2), ``library`` (search imported libraries, true),
``hammer`` (false; true when the bench preloads CoqHammer), ``portfolio`` (true), ``llm``,
``llm_model``, ``llm_calls`` (model calls per theorem, 4), ``coq_args`` (load paths),
``preload`` (Coq sentences the oracle runs before each context), ``lean_project``,
``lean_backend`` (``repl`` or ``dojo``), ``tree_limit`` (tries kept in the trace, 600).
"""

from __future__ import annotations

import heapq
import itertools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agents.library_tactics import LibraryTactics, library_modules
from agents.premises import (
    PremiseIndex,
    coq_file_premises,
    coq_file_proofs,
    is_rewrite_rule,
    lean_file_premises,
    similar,
    tokens,
)
from agents.tactic_portfolio import (
    COQ_TEMPLATES,
    LEAN_TEMPLATES,
    induction_order,
    instantiate,
    lemmas_of,
    variables_of,
)
from agents.tactic_suggester import Candidate, TacticSuggester
from oracle.proof_common import TheoremTask
from oracle.proof_state import Premise, ProofState, ProofStateError, ProofStates, TacticResult
from oracle.strip_coq import CoqSyntaxError, split_sentences
from rrma.contracts import Agent, AgentError, Context, TrialSummary
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Proposal

RESTART_MIN_S = 6.0  # a search whose prover session died restarts it only with this many seconds left
_SESSION_LOST = re.compile(r"session (?:restarted|is not running)|no proof started")
GOAL_WEIGHT = 2.0  # priority units per open goal
LOCALITY_SLACK = 0.5  # priority units a tactic at the current node may trail the best elsewhere and still run next
TIME_WEIGHT = 1.0  # priority units per second a tactic of that head has taken on average in this search
WIDEN_BEFORE = 0.8  # a search exhausted before this share of its seconds makes a second, wider pass
SIZE_WEIGHT = 0.004  # per character of the first goal
TREE_GOAL_CHARS = 400  # a goal's text kept in the trace
TREE_MESSAGE_CHARS = 300  # a failed tactic's error (or veto) kept in the trace
OUTCOME_CODE = {"progress": "p", "proved": "P", "error": "e", "timeout": "t", "rejected": "r"}


@dataclass
class SearchBudget:
    seconds: float = 20.0
    max_checks: int = 6000
    tactic_seconds: float = 2.0


@dataclass
class Node:
    id: int
    parent: int
    tactic: str
    state: ProofState
    depth: int
    cost: float
    tactics: tuple[str, ...]
    source: str = ""  # the candidate source of the tactic that made this node


@dataclass
class SearchResult:
    proof: str | None
    tactics: tuple[str, ...] | None
    checks: int
    seconds: float
    expanded: int
    tree: dict[str, Any]
    reason: str  # "proved", "budget: seconds", "budget: checks", "exhausted", or a start error
    steps: list[tuple[str, str]] = field(default_factory=list)  # (first goal, tactic) along the proof
    deepest: int = 0  # the depth of the deepest state reached
    last_error: str = ""  # the last tactic error seen (why the search stopped where it did)
    # where the time went: candidate source -> [tactic runs, seconds in them, new states, first goals closed]
    by_source: dict[str, list[float]] = field(default_factory=dict)
    start_seconds: float = 0.0  # bringing the prover to the statement (the context, the probe, premises)
    proof_sources: tuple[str, ...] = ()  # the source of each tactic of the proof found


def conclusion(goal: str) -> str:
    """A goal's conclusion: the text after its turnstile (``|-`` for Coq, ``⊢`` for Lean)."""
    for mark in ("|- ", "⊢ "):
        if mark in goal:
            return goal.rsplit(mark, 1)[1].strip()
    return goal.strip()


def closes_first_goal(parent: ProofState, child: ProofState) -> bool:
    """Whether ``child`` is ``parent`` with its first goal closed (the others unchanged)."""
    if len(child.goals) != len(parent.goals) - 1:
        return False
    return [conclusion(g) for g in child.goals] == [conclusion(g) for g in parent.goals[1:]]


def priority(node_cost: float, state: ProofState) -> float:
    size = len(state.goals[0]) if state.goals else 0
    return node_cost + GOAL_WEIGHT * len(state.goals) + SIZE_WEIGHT * size


class SearchTree:
    """The trace of one search, kept compact (see the module docstring for the layout)."""

    def __init__(self, prover: str, theorem: str, limit: int = 600) -> None:
        self.prover, self.theorem, self.limit = prover, theorem, limit
        self.nodes: list[list[Any]] = []  # [parent, tactic, depth, goal count, goal key]
        # [node, tactic, outcome code, child node or -1, milliseconds(, why it failed: the prover's error, the veto)]
        self.tries: list[list[Any]] = []
        self.goals: dict[str, list[str]] = {}
        self.dropped = 0

    def add_node(self, node: Node) -> None:
        self.nodes.append([node.parent, node.tactic, node.depth, len(node.state.goals), node.state.key])
        if node.state.key not in self.goals and (len(self.goals) < 300 or node.depth <= 1):
            self.goals[node.state.key] = [g[:TREE_GOAL_CHARS] for g in node.state.goals[:4]]

    def add_try(self, node: int, tactic: str, code: str, child: int, seconds: float, message: str = "") -> None:
        if len(self.tries) >= self.limit and code not in ("p", "P"):
            self.dropped += 1
            return
        entry: list[Any] = [node, tactic, code, child, round(seconds * 1000, 1)]
        if message:  # what the TUI's proof tree shows on the failed try's row
            entry.append(" ".join(message.split())[:TREE_MESSAGE_CHARS])
        self.tries.append(entry)

    def to_json(self, *, result: str, proof_nodes: Sequence[int], budget: SearchBudget, checks: int,
                seconds: float) -> dict[str, Any]:
        return {"v": 1, "prover": self.prover, "theorem": self.theorem, "result": result,
                "budget": {"seconds": budget.seconds, "checks": budget.max_checks},
                "used": {"seconds": round(seconds, 3), "checks": checks},
                "nodes": self.nodes, "tries": self.tries, "goals": self.goals,
                "proof": list(proof_nodes), "dropped_tries": self.dropped}


class TacticSource:
    """Where candidates come from; :meth:`validate` may veto a found proof (e.g. axioms)."""

    def candidates(self, node: Node) -> Iterable[Candidate]:
        raise NotImplementedError

    def validate(self, tactics: Sequence[str]) -> str | None:
        """None when the proof may be proposed; otherwise why not."""
        return None

    def observe(self, candidate: Candidate, result: TacticResult) -> None:
        """Learn from a run (a tactic that keeps timing out is dropped for this theorem)."""
        return None

    def replacement(self, candidate: Candidate, notes: str) -> str | None:
        """The tactic a proof keeps for a last-resort tactic that closed a goal (``notes``: what it
        printed); None when it cannot be kept."""
        return candidate.tactic


def best_first_search(states: ProofStates, task: TheoremTask, source: Callable[[ProofState], TacticSource],
                      budget: SearchBudget, *, tree_limit: int = 600,
                      clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Search for a proof of ``task`` (see the module docstring); never raises on a failed start."""
    started = clock()
    tree = SearchTree(states.prover, task.name, tree_limit)
    try:
        root_state = states.start(task, timeout_s=max(60.0, budget.seconds))
    except ProofStateError as exc:
        return SearchResult(None, None, 0, clock() - started, 0,
                            tree.to_json(result="error", proof_nodes=[], budget=budget, checks=0,
                                         seconds=clock() - started), f"cannot start: {exc}")
    tactics_source = source(root_state)
    start_seconds = clock() - started
    by_source: dict[str, list[float]] = {}
    nodes = [Node(0, -1, "", root_state, 0, 0.0, ())]
    tree.add_node(nodes[0])
    seen = {root_state.key}
    counter = itertools.count()
    # the frontier: one entry per node, keyed by the priority of its best untried tactic (its own priority
    # before it is expanded); a node's tactics wait in `pending`, cheapest first. So a cheap tactic deep in
    # the tree runs before a costly one near the root, and a slow tactic waits until the cheap ones of its
    # node and its peers ran. A node keeps the prover while its next tactic is nearly as good as the best
    # elsewhere (LOCALITY_SLACK): the prover's document is linear, moving to another node replays its path.
    heap: list[tuple[float, int, int]] = [(priority(0.0, root_state), next(counter), 0)]
    pending: dict[int, list[tuple[float, int, Candidate]]] = {}  # node -> (priority, order, candidate), sorted
    closed_nodes: set[int] = set()  # nodes whose first goal some tactic closed: their other tactics are moot
    seconds_of: dict[str, tuple[float, int]] = {}  # tactic key -> (seconds, runs): what it costs here
    checks = expanded = 0
    reason = "exhausted"
    last_error = ""

    def finish(proof_node: Node | None, why: str) -> SearchResult:
        seconds = clock() - started
        path: list[int] = []
        if proof_node is not None:
            k = proof_node.id
            while k >= 0:
                path.append(k)
                k = nodes[k].parent
            path.reverse()
        data = tree.to_json(result="proved" if proof_node is not None else "open", proof_nodes=path, budget=budget,
                            checks=checks, seconds=seconds)
        deepest = max((n.depth for n in nodes), default=0)
        stats = {k: [int(v[0]), round(v[1], 2), int(v[2]), int(v[3])] for k, v in by_source.items()}
        if proof_node is None:
            return SearchResult(None, None, checks, seconds, expanded, data, why, deepest=deepest,
                                last_error=last_error, by_source=stats, start_seconds=start_seconds)
        steps = [(nodes[path[k]].state.goals[0] if nodes[path[k]].state.goals else "", nodes[path[k + 1]].tactic)
                 for k in range(len(path) - 1)]
        return SearchResult(states.proof_text(proof_node.tactics), proof_node.tactics, checks, seconds, expanded,
                            data, "proved", steps=steps, deepest=deepest, by_source=stats,
                            start_seconds=start_seconds, proof_sources=tuple(nodes[k].source for k in path[1:]))

    tried: set[tuple[int, str]] = set()  # (node, tactic) already run: a wider pass never repeats one
    stop: list[str] = []

    # seconds kept back for the source's last resort (CoqHammer's `hammer` on the statement): the search
    # proper stops that much earlier
    reserve = max(0.0, min(float(getattr(tactics_source, "reserve_seconds", 0.0)), budget.seconds / 2))

    def last_resort() -> SearchResult | None:
        """The source's last-resort tactics with the seconds kept back (each may name, in its output,
        the tactic that replays it: that one is what the proof keeps)."""
        nonlocal checks, last_error
        final = getattr(tactics_source, "last_resort", None)
        if not reserve or final is None:
            return None
        for node, cand in final(nodes):
            left = budget.seconds - (clock() - started)
            if left < 1.0 or (node.id, cand.tactic) in tried:
                continue
            tried.add((node.id, cand.tactic))
            result = states.run_tactic(node.state, cand.tactic, left)
            checks += 1
            spent = by_source.setdefault(cand.source, [0, 0.0, 0, 0])
            spent[0] += 1
            spent[1] += result.seconds
            tree.add_try(node.id, cand.tactic, OUTCOME_CODE[result.outcome], -1, result.seconds, result.message)
            if result.state is None or not (result.outcome == "proved" or closes_first_goal(node.state, result.state)):
                if result.message:
                    last_error = f"{cand.tactic} at depth {node.depth}: {result.message}"
                continue
            replay = tactics_source.replacement(cand, result.notes)
            if replay is None:
                continue
            left = budget.seconds - (clock() - started)
            again = states.run_tactic(node.state, replay, max(budget.tactic_seconds, min(left, 10.0)))
            checks += 1
            if again.state is None or not (again.outcome == "proved" or closes_first_goal(node.state, again.state)):
                last_error = f"{replay} (from {cand.tactic}) did not replay: {again.message}"
                continue
            child = Node(len(nodes), node.id, replay, again.state, node.depth + 1, node.cost + cand.cost,
                         (*node.tactics, replay), cand.source)
            spent[2] += 1
            spent[3] += 1
            if again.outcome == "proved":
                veto = tactics_source.validate(child.tactics)
                if veto is not None:
                    continue
                nodes.append(child)
                tree.add_node(child)
                return finish(child, "proved")
        return None

    def expected_seconds(tactic: str) -> float:
        spent, runs = seconds_of.get(tactic_head(tactic), (0.0, 0))
        return spent / runs if runs else 0.0

    def expand(node: Node) -> None:
        """Ask the source for the node's candidates and queue them, cheapest first."""
        base = priority(node.cost, node.state)
        queue = [(base + cand.cost + TIME_WEIGHT * expected_seconds(cand.tactic), k, cand)
                 for k, cand in enumerate(tactics_source.candidates(node)) if (node.id, cand.tactic) not in tried]
        queue.sort(key=lambda item: (item[0], item[1]))
        pending[node.id] = queue

    def attempt(node: Node, cand: Candidate) -> SearchResult | None:
        nonlocal checks, last_error
        if clock() - started >= budget.seconds - reserve:
            stop.append("budget: seconds")
            return None
        if checks >= budget.max_checks:
            stop.append("budget: checks")
            return None
        tried.add((node.id, cand.tactic))
        left = budget.seconds - (clock() - started)
        result = states.run_tactic(node.state, cand.tactic, min(budget.tactic_seconds, max(0.5, left)))
        checks += 1
        if cand.members and result.state is not None and (
                result.outcome == "proved" or closes_first_goal(node.state, result.state)):
            # the bundle closed the goal: keep the member that did (what `solve` ran first), not the bundle
            for member in cand.members:
                left = budget.seconds - (clock() - started)
                alone = states.run_tactic(node.state, member, min(budget.tactic_seconds, max(0.5, left)))
                checks += 1
                if alone.state is not None and (alone.outcome == "proved"
                                                or closes_first_goal(node.state, alone.state)):
                    tried.add((node.id, member))
                    cand, result = replace(cand, tactic=member, members=()), alone
                    break
        head = tactic_head(cand.tactic)
        spent_head = seconds_of.get(head, (0.0, 0))
        seconds_of[head] = (spent_head[0] + result.seconds, spent_head[1] + 1)
        if result.outcome in ("error", "timeout") and _SESSION_LOST.search(result.message or ""):
            # the prover's session was restarted (a tactic ignored its timeout): the states are tactic
            # paths, so a fresh start at the statement makes every node reachable again
            left = budget.seconds - (clock() - started)
            try:
                if left < RESTART_MIN_S:
                    raise ProofStateError("too little time left to restart")
                states.start(task, timeout_s=left)
            except ProofStateError as exc:
                last_error = f"the prover's session was lost and not restarted: {exc}"
                stop.append("session lost")
                return None
        tactics_source.observe(cand, result)
        code = OUTCOME_CODE[result.outcome]
        spent = by_source.setdefault(cand.source, [0, 0.0, 0, 0])
        spent[0] += 1
        spent[1] += result.seconds
        if result.state is None or result.outcome not in ("progress", "proved"):
            tree.add_try(node.id, cand.tactic, code, -1, result.seconds, result.message)
            if result.message and result.outcome == "error" and (
                    not result.message.startswith("no progress") or not last_error):
                last_error = f"{cand.tactic} at depth {node.depth}: {result.message}"
            return None
        child_state = result.state
        closed = result.outcome == "proved" or closes_first_goal(node.state, child_state)
        if cand.closer and not closed:
            tree.add_try(node.id, cand.tactic, "n", -1, result.seconds)  # a closer that did not close
            return None
        if result.outcome != "proved" and child_state.key in seen:
            tree.add_try(node.id, cand.tactic, "d", -1, result.seconds)
            return None
        seen.add(child_state.key)
        child = Node(len(nodes), node.id, cand.tactic, child_state, node.depth + 1, node.cost + cand.cost,
                     (*node.tactics, cand.tactic), cand.source)
        spent[2] += 1
        spent[3] += int(closed)
        if result.outcome == "proved":
            veto = tactics_source.validate(child.tactics)
            if veto is not None:
                tree.add_try(node.id, cand.tactic, "v", -1, result.seconds, veto)
                return None
        nodes.append(child)
        tree.add_node(child)
        tree.add_try(node.id, cand.tactic, code, child.id, result.seconds)
        if result.outcome == "proved":
            return finish(child, "proved")
        heapq.heappush(heap, (priority(child.cost, child_state), next(counter), child.id))
        if closed:
            closed_nodes.add(node.id)  # the first goal is closed: other ways of closing it cannot do better
        return None

    widened = False
    while True:
        while heap and not stop:
            _, _, node_id = heapq.heappop(heap)
            if node_id in closed_nodes:
                continue
            node = nodes[node_id]
            if node_id not in pending:
                expanded += 1
                expand(node)
            queue = pending[node_id]
            while queue and not stop and node_id not in closed_nodes:
                if heap and queue[0][0] > heap[0][0] + LOCALITY_SLACK:
                    break  # a better tactic waits at another node
                _, _, cand = queue.pop(0)
                if (node_id, cand.tactic) in tried:
                    continue
                proof = attempt(node, cand)
                if proof is not None:
                    return proof
            if queue and node_id not in closed_nodes:
                heapq.heappush(heap, (queue[0][0], next(counter), node_id))
        if stop:
            return last_resort() or finish(None, stop[0])
        # exhausted with budget left: a second, wider pass over every open state (the narrow first
        # pass proposes nothing more; the rest of the budget is better spent widening it)
        widen = getattr(tactics_source, "widen", None)
        if widened or widen is None or clock() - started > WIDEN_BEFORE * budget.seconds or not widen():
            break
        widened = True
        reason = "exhausted after a wider pass"
        for n in nodes:
            if n.state.goals and n.id not in closed_nodes:
                pending.pop(n.id, None)  # expanded again: the wider source's candidates, none run twice
                heapq.heappush(heap, (priority(n.cost, n.state), next(counter), n.id))
    return last_resort() or finish(None, reason)


def tactic_head(tactic: str) -> str:
    """A tactic's first word (``induction`` for ``induction n; simpl.``): what its cost is learnt by."""
    return tactic.split(maxsplit=1)[0].rstrip(".;") if tactic.strip() else ""


# ----------------------------------------------------------------------------- Coq candidates

COQ_CLOSERS: list[tuple[str, float]] = [
    ("reflexivity.", 0.1), ("assumption.", 0.1), ("discriminate.", 0.1), ("contradiction.", 0.1),
    ("trivial.", 0.15), ("easy.", 0.15), ("auto.", 0.2), ("congruence.", 0.25), ("tauto.", 0.3),
    ("lia.", 0.3), ("auto with arith.", 0.3), ("auto with datatypes.", 0.3), ("intuition.", 0.4),
    ("eauto.", 0.4), ("now simpl.", 0.3), ("simpl; lia.", 0.4), ("firstorder.", 0.6),
    ("now (intros; subst; auto).", 0.5), ("intuition lia.", 0.6), ("simpl in *; auto.", 0.4),
    ("simpl in *; lia.", 0.5), ("simpl in *; congruence.", 0.5), ("simpl in *; intuition.", 0.6),
    ("ring.", 0.3), ("field.", 0.4), ("lra.", 0.3), ("nra.", 0.6),
]
BUNDLE_MAX_COST = 0.35  # rule closers this cheap are tried together, in one `solve [...]`
HAMMER_CLOSERS: list[tuple[str, float]] = [("sauto.", 0.5), ("hauto.", 0.5), ("qauto.", 0.5)]
_PROP_HINT = re.compile(r"(?<![<>=:!])=(?![>=])|<>|->|<->|/\\|\\/|~|\bTrue\b|\bFalse\b|<=|<|>|\bIn\b|\bForall\b|"
                        r"\bExists\b|\ble\b|\blt\b|\bNoDup\b|\bEven\b|\bOdd\b|\bPermutation\b|\bincl\b|\bsig\b")
_MATCH = re.compile(r"\bmatch\s+(?P<scrut>[A-Za-z_][\w'.]*(?:\s+[A-Za-z_][\w'.]*)*|\([^()]*\))\s+with\b")
_IDENT = re.compile(r"[A-Za-z_][\w']*")
_BINDERS = re.compile(r"^(?:forall|∀)\s+(?P<binders>.*?),", re.S)


def if_scrutinees(concl: str) -> list[str]:
    """The conditions of the ``if C then`` expressions of a conclusion, outermost first (a condition
    with its own ``if``, ``match`` or binder is left out: it cannot be destructed as it is printed)."""
    out: list[str] = []
    for m in re.finditer(r"(?<![\w'])if\s+", concl):
        depth, i = 0, m.end()
        while i < len(concl):
            ch = concl[i]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and concl.startswith(" then", i):
                cond = concl[m.end():i].strip()
                if cond and not re.search(r"(?<![\w'])(?:if|match|fun|forall|exists|let)(?![\w'])", cond) \
                        and cond not in out:
                    out.append(cond)
                break
            i += 1
    return out


def leading_binders(concl: str) -> list[str]:
    """The names bound by a goal's leading ``forall`` (``forall (n : nat) (l : list A) d,``)."""
    m = _BINDERS.match(concl.strip())
    if m is None:
        return []
    text = m.group("binders")
    names: list[str] = []
    for group in re.findall(r"\(([^()]*)\)|([^()]+)", text):
        part = group[0] or group[1]
        head = part.split(":")[0]
        names.extend(n for n in head.split() if _IDENT.fullmatch(n))
    return names


def _is_prop(typ: str) -> bool:
    return bool(_PROP_HINT.search(typ)) or typ.startswith(("forall", "exists", "~"))


# tactics a context may lack (lia needs Lia; the Init files run without the prelude; sauto needs
# CoqHammer): probed once per theorem, and no candidate that names a missing one is tried
GATED_TACTICS = ("lia", "nia", "congruence", "tauto", "intuition", "firstorder", "easy", "now", "sauto",
                 "hauto", "qauto", "eauto", "f_equal", "discriminate", "decide", "ring", "field", "lra", "nra",
                 "hammer")
# Ltac tactics a context may load without importing them (CoqHammer's tactics load Lia; many Reals files
# load Lra): reachable by their qualified names, which the probe tries when the short one is missing
QUALIFIED_TACTICS = {"lia": "Coq.micromega.Lia.lia", "nia": "Coq.micromega.Lia.nia",
                     "lra": "Coq.micromega.Lra.lra", "nra": "Coq.micromega.Lra.nra"}
_GATED_NAME = re.compile(r"(?<![\w'.])(?P<name>" + "|".join(QUALIFIED_TACTICS) + r")(?![\w'])")
# context sentences that change which tactics (and names) are in scope
_SCOPE_SENTENCE = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?(?:Require|From|Import|Export|Ltac|Tactic|"
                             r"Module|End|Section|Open|Close|Declare|Notation|Infix|Reserved|Set|Unset|Include)\b")
_QUALIFIED_HEAD = re.compile(r"^[A-Z][\w']*(?:\.[A-Za-z_][\w']*)+(?=[\s;|.]|$)")
_REWRITE = re.compile(r"^rewrite\s+(?P<back><-\s*)?(?P<lemma>[\w'.]+)\s*\.$")
MAX_PATTERN_QUERIES = 12  # `Search (conclusion pattern)` calls per theorem


def conclusion_pattern(concl: str, local_names: Sequence[str]) -> str:
    """The goal's conclusion with its local variables as holes (``_``), for ``Search``: "" when it
    is a product, has no constant left, or holds characters a query must not carry."""
    text = " ".join(concl.split())
    if not text or text.startswith(("forall", "exists", "fun", "match", "let")) or "->" in text or len(text) > 160:
        return ""
    if not re.fullmatch(r"[\w'. ()+*:<>=@\[\]^/\\~-]+", text) or "Qed" in text:
        return ""
    local = set(local_names)
    out = _IDENT.sub(lambda m: "_" if m.group(0) in local else m.group(0), text)
    if not re.search(r"[^\s_()=]", out):  # holes only (`_ = _`): every equation would match
        return ""
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


class CoqTactics(TacticSource):
    """Coq candidates for one theorem (see the module docstring)."""

    def __init__(self, states: Any, task: TheoremTask, root: ProofState, *, library: bool = True,
                 hammer: bool = False, portfolio: bool = True, premises_per_node: int = 8,
                 llm: LLMTactics | None = None, setting: str = "library",
                 suggesters: Sequence[TacticSuggester] = (), hammer_seconds: float = 0.0,
                 probe_cache: dict[tuple[object, ...], tuple[frozenset[str], dict[str, str]]] | None = None) -> None:
        self.states = states
        # which tactics a scope can run, shared by the theorems of a run (the agent keeps it)
        self.probe_cache = probe_cache if probe_cache is not None else {}
        self.hammer_seconds = hammer_seconds if hammer else 0.0
        self.task = task
        self.setting = setting
        self.hammer_wanted = hammer
        # rediscover: the earlier theorems read `Admitted.` in the view (the checker has their proofs)
        file_premises, self.definitions = coq_file_premises(task.context, admitted=setting == "rediscover")
        self.file_index = PremiseIndex(file_premises)
        self.file_lemmas = {p.name.split(".")[-1] for p in file_premises}
        # library setting only: earlier human proofs of the file, most similar statements first (whole
        # scripts to retry at the statement, their sentences as candidates everywhere); the rediscover
        # view has none, and the search never reads them there
        proofs = coq_file_proofs(task.context) if setting == "library" else []
        self.similar_proofs = similar(task.statement, proofs, self.file_index, limit=8)
        sentences: list[str] = []
        for _, _, body in self.similar_proofs:
            for sentence in body.split("\n"):
                if not re.fullmatch(r"[-+*]+|[{}]", sentence) and sentence not in sentences and len(sentence) < 200:
                    sentences.append(sentence)
        self.retrieved = sentences[:16]
        self.root, self.library, self.wide = root, library, False
        self.library_index = PremiseIndex(self._library(root) if library else [])
        self.hammer = hammer
        self.portfolio = portfolio
        self.premises_per_node = premises_per_node
        self.llm = llm
        self.slow: dict[str, int] = {}  # tactic head -> timeouts in this theorem
        self.aliases: dict[str, str] = {}  # a gated tactic the context loads but does not import -> full name
        self.unknown: set[str] = self._unavailable(root)  # tactics this context cannot run (lia without Lia)
        self.allowed_axioms: tuple[str, ...] = ()
        self.suggesters = [*suggesters, *([llm] if llm is not None else [])]
        self.concl_premises: dict[str, list[Premise]] = {}  # conclusion pattern -> lemmas Search found
        self.pattern_queries = 0

    # -- the last resort: CoqHammer's `hammer` (its ATPs) on the statement, with the seconds kept back

    @property
    def reserve_seconds(self) -> float:
        return self.hammer_seconds if self.hammer_seconds > 0 and "hammer" not in self.unknown else 0.0

    def last_resort(self, nodes: Sequence[Node]) -> list[tuple[Node, Candidate]]:
        """``hammer.`` on the shallowest node whose goal is the statement's with its premises introduced
        (the root's ``intros`` child, else the root)."""
        intro = next((n for n in nodes if n.parent == 0 and n.tactic == "intros." and len(n.state.goals) == 1), None)
        node = intro or nodes[0]
        return [(node, Candidate("hammer.", 3.0, True, "hammer"))]

    def replacement(self, candidate: Candidate, notes: str) -> str | None:
        """For ``hammer``: the reconstruction it printed (``Replace the hammer tactic with: T``), which
        replays without the ATPs; None when it printed none."""
        if candidate.tactic != "hammer.":
            return candidate.tactic
        m = re.search(r"Replace the hammer tactic with:\s*(?P<tac>.+?)(?:\n\s*\n|$)", notes, re.S)
        if m is None:
            return None
        tactic = " ".join(m.group("tac").split())
        return tactic if tactic.endswith(".") else tactic + "."

    def _unavailable(self, root: ProofState) -> set[str]:
        """The tactics of :data:`GATED_TACTICS` this context cannot run: ``try (fail; T)`` is
        interpreted (so an unknown name or notation is an error) but never runs ``T``."""
        run = getattr(self.states, "run_tactic", None)
        if run is None or not root.goals:
            return set()
        key = self._scope_key()
        if key is not None and key in self.probe_cache:  # an earlier theorem of the same scope was probed
            missing_before, aliases = self.probe_cache[key]
            self.aliases.update(aliases)
            return set(missing_before)
        missing: set[str] = set()
        for name in GATED_TACTICS:
            if name in ("sauto", "hauto", "qauto", "hammer") and not self.hammer_wanted:
                missing.add(name)
                continue
            if not self._runs(root, name):
                qualified = QUALIFIED_TACTICS.get(name)
                if qualified is not None and self._runs(root, qualified):
                    self.aliases[name] = qualified  # loaded, not imported: called by its full name
                else:
                    missing.add(name)
        if key is not None:
            self.probe_cache[key] = (frozenset(missing), dict(self.aliases))
        return missing

    def _scope_key(self) -> tuple[object, ...] | None:
        """What decides which tactics a context can run: the libraries its session loaded and its
        sentences that import, define tactics or notations, or open and close scopes (None when
        the backend cannot list its libraries)."""
        loaded = getattr(self.states, "loaded_libraries", None)
        if loaded is None:
            return None
        try:
            scope = tuple(u.code for u in split_sentences(self.task.context) if _SCOPE_SENTENCE.match(u.code))
        except CoqSyntaxError:
            return None
        return (tuple(loaded()), scope, self.hammer_wanted, self.task.noinit)

    def _runs(self, root: ProofState, tactic: str) -> bool:
        """Whether the context knows ``tactic`` (``try (fail; T)`` is interpreted, never runs ``T``)."""
        result = self.states.run_tactic(root, f"try (fail; {tactic}).", 2.0)
        return not (result.outcome in ("error", "rejected") and re.search(
            r"not found|Unknown|Syntax error|Illegal|unknown|No such", result.message or ""))
    # -- premises from the imported libraries

    def widen(self) -> bool:
        """The second pass of an exhausted search: twice the premises per state, library lemmas
        found with more symbol pairs of the statement, ``eapply L; eauto`` closers, ``auto using``
        with more lemmas. False when it is already wide."""
        if self.wide:
            return False
        self.wide = True
        self.premises_per_node = 2 * self.premises_per_node
        if self.library:
            self.library_index = PremiseIndex([*self.library_index.premises, *self._library(self.root, wide=True)])
        return True

    def _library(self, root: ProofState, *, wide: bool = False) -> list[Premise]:
        goal = root.goals[0] if root.goals else ""
        syms = [t for t in dict.fromkeys(tokens(conclusion(goal))) if self._searchable(t, root)]
        queries: list[str] = []
        for a, b in itertools.combinations(syms[:8] if wide else syms[:5], 2):
            queries.append(f"{self._term(a)} {self._term(b)}")
        queries.extend(self._term(s) for s in (syms[:6] if wide else syms[:3]))
        if wide:
            queries = [q for q in queries if q not in self._library_queries(root)]
        found: list[Premise] = []
        search = getattr(self.states, "search_premises", None)
        if search is None:
            return []
        for query in queries[:12]:
            found.extend(p for p in search(query, limit=80) if not p.name.startswith("rrma_"))
        return found

    def _library_queries(self, root: ProofState) -> list[str]:
        """The queries the first pass ran (the wider pass runs the others)."""
        goal = root.goals[0] if root.goals else ""
        syms = [t for t in dict.fromkeys(tokens(conclusion(goal))) if self._searchable(t, root)]
        out = [f"{self._term(a)} {self._term(b)}" for a, b in itertools.combinations(syms[:5], 2)]
        return (out + [self._term(x) for x in syms[:3]])[:12]

    @staticmethod
    def _term(sym: str) -> str:
        return sym if _IDENT.fullmatch(sym.split(".")[-1] or "") else f'"{sym}"'

    @staticmethod
    def _searchable(sym: str, root: ProofState) -> bool:
        if sym in ("=", "->", "<->", "/\\", "\\/", "~", "<>", "S", "O", "0", "1", "true", "false", "nat", "list",
                   "bool", "A", "B", "Type"):
            return False
        names = set(root.detail[0].hyp_names()) if root.detail else set()
        if sym in names or sym in leading_binders(conclusion(root.goals[0] if root.goals else "")):
            return False
        return not (len(sym) == 1 and sym.isalpha())

    # -- candidates

    def candidates(self, node: Node) -> Iterable[Candidate]:
        state = node.state
        detail = state.detail[0] if state.detail else None
        concl = detail.concl if detail is not None else conclusion(state.goals[0])
        hyps: list[tuple[str, str]] = ([(n, t) for names, t in detail.hyps for n in names] if detail is not None
                                       else [])
        goal_text = state.goals[0]
        out: list[Candidate] = []
        if node.depth == 0:
            out.extend(Candidate(body, 0.4 + 0.02 * k, True, "retrieved")
                       for k, (_, _, body) in enumerate(self.similar_proofs[:6]))
            if self.portfolio:
                out.extend(self._portfolio())
        closers = COQ_CLOSERS + (HAMMER_CLOSERS if self.hammer else [])
        if concl.strip() == "True":
            out.append(Candidate("exact I.", 0.1, True))
        if re.match(r"^\{.*\}\s*\+\s*\{.*\}$", concl):
            out.append(Candidate("decide equality.", 0.3, True))
        file_top = self.file_index.rank(goal_text, self.premises_per_node, exclude=[self.task.name])
        # a library lemma may share the theorem's short name (`Peano.max_r` for `Nat.max_r`): it is
        # another constant, so it is not excluded
        lib_top = self.library_index.rank(goal_text, self.premises_per_node // 2 + 1,
                                          exclude=[p.name for p in file_top])
        using = ", ".join(p.name for p in ((file_top[:8] + lib_top[:4]) if self.wide else (file_top[:4] + lib_top[:2])))
        for tactic, cost in closers:
            out.append(Candidate(tactic, cost, True, "hammer" if (tactic, cost) in HAMMER_CLOSERS else "rule"))
        if using:
            out.append(Candidate(f"auto using {using}.", 0.3, True, "premise"))
            out.append(Candidate(f"eauto using {using}.", 0.5, True, "premise"))
        premises = file_top + lib_top
        if self.wide:
            out.extend(Candidate(f"eapply {p.name}; eauto.", 0.5 + 0.05 * k, True, "premise")
                       for k, p in enumerate(premises[:8]))
        out.extend(Candidate(sentence, 0.7 + 0.02 * k, source="retrieved") for k, sentence in enumerate(self.retrieved))
        if self.hammer and premises:
            names = ", ".join(p.name for p in premises[:5])
            out.append(Candidate(f"sauto use: {names}.", 0.5, True, "hammer"))
        if concl.startswith(("forall", "~")) or re.search(r"(?<![<-])->", concl):
            # a product: introduce it, or induct on one of its binders (which generalizes the rest)
            out.append(Candidate("intros.", 0.1))
            if concl.startswith("~"):
                out.append(Candidate("intro.", 0.1))  # `intros` does not unfold `not`
            for name in leading_binders(concl)[:4]:
                if self.hammer:
                    out.append(Candidate(f"induction {name}; sauto.", 0.5, True, "hammer"))
                out.append(Candidate(f"induction {name}.", 0.8))
                out.append(Candidate(f"induction {name}; simpl; auto.", 0.6))
                out.append(Candidate(f"destruct {name}.", 1.0))
            for k, premise in enumerate(premises[:4]):
                out.append(Candidate(f"apply {premise.name}.", 0.7 + 0.1 * k, source="premise"))
            for suggester in self.suggesters:
                out.extend(suggester.candidates(self.task, state))
            return self._bundled([c for c in self._filter(out) if not self.loops(node, c.tactic)])
        for m in _MATCH.finditer(concl):
            scrut = m.group("scrut")
            out.append(Candidate(f"destruct {scrut}.", 0.4))
            out.append(Candidate(f"destruct {scrut} eqn:?.", 0.6))
        for scrut in if_scrutinees(concl)[:2]:
            out.append(Candidate(f"destruct ({scrut}).", 0.4))
            out.append(Candidate(f"destruct ({scrut}) eqn:?.", 0.6))
        out.append(Candidate("simpl.", 0.5))
        out.append(Candidate("simpl in *.", 0.7))
        if any(re.fullmatch(r"[A-Za-z_][\w']* = .*|.* = [A-Za-z_][\w']*", t) for _, t in hyps):
            out.append(Candidate("subst.", 0.5))
        if "/\\" in concl or "<->" in concl:
            out.append(Candidate("split.", 0.3))
        if "\\/" in concl or re.match(r"^\{.*\}\s*\+", concl):
            out.append(Candidate("left.", 0.7))
            out.append(Candidate("right.", 0.7))
        if concl.startswith(("exists", "{")):
            out.append(Candidate("eexists.", 0.8))
        if re.match(r"^[^=]*\S \S[^=]* = [^=]*\S \S", concl):
            out.append(Candidate("f_equal.", 0.9))
        head = re.match(r"^(?:~\s*)?\(?\s*(?P<head>[A-Za-z_][\w'.]*)", concl)
        if head is not None and head.group("head") not in {n for n, _ in hyps} | {"exists", "fun", "match", "let"} \
                and not re.search(r" (?:=|<>|<=|<|>=|>|<->|->|/\\|\\/) ", concl):
            # the conclusion is an applied constant (`Un_growing u`, `continuity f`): unfold it
            out.append(Candidate("red.", 0.6))
            out.append(Candidate(f"unfold {head.group('head')}.", 0.7))
        used = set(tokens(goal_text))
        for name in self.definitions:
            if name in used or name.split(".")[-1] in used:
                out.append(Candidate(f"unfold {name}.", 0.8))
                out.append(Candidate(f"unfold {name} in *.", 1.0))
        for name, typ in reversed(hyps):
            if _is_prop(typ):
                out.append(Candidate(f"apply {name}.", 0.6))
                if re.search(r"(?<![<>=])=(?![>=])|<->", typ):
                    out.append(Candidate(f"rewrite {name}.", 0.7))
                    out.append(Candidate(f"rewrite <- {name}.", 0.9))
                if re.search(r"/\\|\\/|^exists|<->", typ):
                    out.append(Candidate(f"destruct {name}.", 0.5))
                if not name.startswith("IH"):
                    out.append(Candidate(f"inversion {name}; subst.", 1.0))
            elif typ not in ("Type", "Set", "Prop") and not typ.startswith("Type"):
                later = [n for n, t in hyps[hyps.index((name, typ)) + 1:] if not _is_prop(t)
                         and t not in ("Type", "Set", "Prop")]
                if later:  # induction with the later variables generalized (a stronger hypothesis)
                    out.append(Candidate(f"revert {' '.join(later)}; induction {name}.", 0.8))
                if self.hammer:
                    out.append(Candidate(f"induction {name}; sauto.", 0.6, True, "hammer"))
                    out.append(Candidate(f"destruct {name}; sauto.", 0.6, True, "hammer"))
                out.append(Candidate(f"destruct {name}.", 0.9))
                out.append(Candidate(f"induction {name}.", 1.0))
                # one step per case with the routine closers (a datatype of many constructors makes the
                # plain split too wide to search case by case)
                out.append(Candidate(f"destruct {name}; simpl; auto.", 0.7))
                out.append(Candidate(f"induction {name}; simpl; auto.", 0.75))
        prop_hyps = [n for n, t in hyps if _is_prop(t) and not n.startswith("IH")][-2:]
        for k, premise in enumerate(premises):
            weight = 0.6 + 0.08 * k
            out.append(Candidate(f"apply {premise.name}.", weight, source="premise"))
            if is_rewrite_rule(premise.statement):
                out.append(Candidate(f"rewrite {premise.name}.", weight, source="premise"))
                out.append(Candidate(f"rewrite <- {premise.name}.", weight + 0.2, source="premise"))
            if k < 3:
                out.append(Candidate(f"eapply {premise.name}.", weight + 0.3, source="premise"))
                for h in prop_hyps:
                    out.append(Candidate(f"apply {premise.name} in {h}.", weight + 0.3, source="premise"))
        out.extend(self._concl_candidates(state, concl, hyps))
        for suggester in self.suggesters:
            out.extend(suggester.candidates(self.task, state))
        return self._bundled([c for c in self._filter(out) if not self.loops(node, c.tactic)])

    @staticmethod
    def _bundled(candidates: list[Candidate]) -> list[Candidate]:
        """The cheap one-sentence closers of the rules as one ``solve [...]`` candidate (one prover
        round trip instead of a dozen: most fail, and a failing run costs its round trip)."""
        cheap = [c for c in candidates if c.closer and c.source == "rule" and c.cost <= BUNDLE_MAX_COST
                 and c.tactic.endswith(".") and ". " not in c.tactic and "\n" not in c.tactic and "[" not in c.tactic]
        if len(cheap) < 2:
            return candidates
        body = " | ".join(c.tactic[:-1].removeprefix("idtac; ") for c in cheap)
        bundle = Candidate(f"solve [{body}].", min(c.cost for c in cheap), True, "rule",
                           members=tuple(c.tactic for c in cheap))
        members = set(bundle.members)
        return [bundle, *(c for c in candidates if c.tactic not in members)]

    def _concl_candidates(self, state: ProofState, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """``apply``/``rewrite`` with the lemmas whose conclusion has the goal's shape: Coq's
        ``Search`` on the conclusion with its variables as holes (``1 < _ ^ _`` for ``1 < a ^ b``),
        over everything in scope (the file's earlier statements included), best ranked first."""
        pattern = conclusion_pattern(concl, [n for n, _ in hyps])
        if not pattern:
            return []
        found = self.concl_premises.get(pattern)
        if found is None:
            search = getattr(self.states, "search_premises", None)
            if search is None or self.pattern_queries >= MAX_PATTERN_QUERIES:
                return []
            self.pattern_queries += 1
            found = [p for p in search(f"({pattern})", limit=200) if not p.name.startswith("rrma_")
                     and p.name.split(".")[-1] != self.task.name]
            found = PremiseIndex(found).rank(state.goals[0], 6) if found else []
            self.concl_premises[pattern] = found
        out: list[Candidate] = []
        for k, premise in enumerate(found):
            weight = 0.35 + 0.05 * k
            out.append(Candidate(f"apply {premise.name}.", weight, source="premise"))
            out.append(Candidate(f"apply {premise.name}; auto.", weight + 0.05, True, "premise"))
            if is_rewrite_rule(premise.statement):
                out.append(Candidate(f"rewrite {premise.name}.", weight + 0.1, source="premise"))
        return out

    def _portfolio(self) -> list[Candidate]:
        statement = self.task.statement
        vars_ = induction_order(variables_of(statement))
        lemmas = lemmas_of(self.task.context, statement)
        out: list[Candidate] = []
        for index, template in enumerate(COQ_TEMPLATES):
            for proof in instantiate(template, vars_=vars_, lemmas=lemmas, ihs=[])[:2]:
                out.append(Candidate(proof, 0.5 + 0.01 * index, True, "portfolio"))
        return out

    def _filter(self, candidates: list[Candidate]) -> list[Candidate]:
        out: list[Candidate] = []
        seen: set[str] = set()
        for cand in candidates:
            if self.aliases and _GATED_NAME.search(cand.tactic):
                cand = replace(cand, tactic=_GATED_NAME.sub(lambda m: self.aliases.get(m.group("name"),
                                                                                      m.group("name")), cand.tactic))
            if _QUALIFIED_HEAD.match(cand.tactic):
                # `Nat.order.`: the oracle's screen reads a sentence that starts with a capitalised word as a
                # command (Coq lexes `Check.x` as the command `Check`), so the call goes after an `idtac;`
                cand = replace(cand, tactic=f"idtac; {cand.tactic}")
            if cand.tactic in seen:
                continue
            seen.add(cand.tactic)
            head = cand.tactic.split()[0].rstrip(".;")
            if head in self.unknown or self.slow.get(head, 0) >= 3 or self.slow.get(cand.tactic, 0) >= 1:
                continue
            if self.unknown and set(_IDENT.findall(cand.tactic)) & self.unknown:
                continue  # names a tactic this context cannot run
            out.append(cand)
        return out

    @staticmethod
    def loops(node: Node, tactic: str) -> bool:
        """Whether ``tactic`` would undo the step before it or repeat a rewrite for the third time:
        ``rewrite <- L`` right after ``rewrite L`` (or the reverse), the same lemma rewritten in
        the same direction more than twice on one path."""
        m = _REWRITE.match(tactic)
        if m is None:
            return False
        lemma, back = m.group("lemma"), bool(m.group("back"))
        if node.tactics:
            last = _REWRITE.match(node.tactics[-1])
            if last is not None and last.group("lemma") == lemma and bool(last.group("back")) != back:
                return True
        same = sum(1 for t in node.tactics if (r := _REWRITE.match(t)) is not None and r.group("lemma") == lemma
                   and bool(r.group("back")) == back)
        return same >= 2

    def observe(self, candidate: Candidate, result: TacticResult) -> None:
        head = candidate.tactic.split()[0].rstrip(".;")
        if result.outcome == "timeout":
            self.slow[head] = self.slow.get(head, 0) + 1
            self.slow[candidate.tactic] = self.slow.get(candidate.tactic, 0) + 1
        elif result.outcome == "error" and re.search(r"(?:was not found|Unknown (?:tactic|command))", result.message) \
                and head in result.message:
            self.unknown.add(head)

    def validate(self, tactics: Sequence[str]) -> str | None:
        check = getattr(self.states, "assumptions_of_proof", None)
        if check is None:
            return None
        axioms = check(list(tactics))
        if axioms is None:
            return "the proof does not close at Qed"
        # rediscover: the view's earlier theorems are `Admitted` here (the checker has their proofs)
        allowed = (*self.allowed_axioms, *(self.file_lemmas if self.setting == "rediscover" else ()))
        bad = [a for a in axioms if a not in allowed and a.split(".")[-1] not in allowed]
        return f"relies on {', '.join(bad)}" if bad else None


# ----------------------------------------------------------------------------- Lean candidates

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


# ----------------------------------------------------------------------------- a model's suggestions

_FENCE = re.compile(r"```[a-zA-Z0-9]*\n(?P<body>.*?)```", re.S)


def parse_tactic_lines(text: str, prover: str, limit: int = 8) -> list[str]:
    """Tactics from a model's reply: the lines of its first fenced block (or of the whole reply),
    numbering and bullets removed, one tactic per line."""
    m = _FENCE.search(text)
    body = m.group("body") if m else text
    out: list[str] = []
    for raw in body.splitlines():
        line = re.sub(r"^\s*(?:\d+[.)]\s+|[-*]\s+)", "", raw).strip().strip("`").strip()
        if not line or line.startswith(("#", "//", "(*", "--")):
            continue
        if prover == "coq" and not line.endswith("."):
            line += "."
        if line not in out:
            out.append(line)
        if len(out) >= limit:
            break
    return out


class LLMTactics:
    """Tactic suggestions from a chat model, through the existing LLM backends (no tools).

    One call per expanded state, at most ``max_calls`` per theorem; the reply's tactics are
    candidates like any other (the backend screens each before it runs). The conversation is
    recorded as trace turns by the search agent.
    """

    def __init__(self, backend: str, model: str | None, task: TaskConfig, name: str, *, max_calls: int = 4,
                 per_call: int = 6, record: Callable[..., None] | None = None) -> None:
        from agents.llm.agent import LLMAgent
        from rrma.plugins import make_agent

        agent = make_agent(AgentConfig(name=f"{name}-tactics", backend=backend, model=model,
                                       max_tokens=512, temperature=0.2), task)
        if not isinstance(agent, LLMAgent):
            raise AgentError(f"params.llm: backend {backend!r} is not a chat-model backend")
        self.model = agent
        self.max_calls = max_calls
        self.per_call = per_call
        self.calls: dict[str, int] = {}
        self.record = record

    def candidates(self, task: TheoremTask, state: ProofState) -> list[Candidate]:
        used = self.calls.get(task.name, 0)
        if used >= self.max_calls:
            return []
        self.calls[task.name] = used + 1
        prover = task.prover
        instructions = (f"You propose the next tactic of a {prover} proof. Reply with up to {self.per_call} "
                        "candidate tactics, most promising first, one per line, inside one fenced code block. "
                        "Each line is a single tactic that applies to the first goal; no explanations.")
        context = (f"Theorem: {task.statement.strip()}\n\nCurrent goals (first goal first):\n"
                   + "\n\n".join(state.goals[:3]))
        started = time.monotonic()
        try:
            convo = self.model.start(instructions, "", "", context, [])
            reply = self.model.call(convo)
        except Exception as exc:  # a model error costs this state its suggestions, not the search
            if self.record is not None:
                self.record(role="error", tool="llm-tactics", text=f"{type(exc).__name__}: {exc}"[:500])
            return []
        tactics = parse_tactic_lines(reply.text, prover, self.per_call)
        if self.record is not None:
            self.record(role="assistant", tool="llm-tactics", text=reply.text[:2000], model=reply.model,
                        tokens_in=reply.usage.tokens_in, tokens_out=reply.usage.tokens_out,
                        latency_s=round(time.monotonic() - started, 3), args={"goal": state.goals[0][:500]})
        return [Candidate(t, 0.4 + 0.05 * k, False, "llm") for k, t in enumerate(tactics)]

    def learn(self, task: TheoremTask, steps: Sequence[tuple[str, str]]) -> None:
        return None  # a chat model is not trained here


# ----------------------------------------------------------------------------- the agent


@dataclass
class _Theorem:
    searched: bool = False
    proposed: set[str] = field(default_factory=set)


class ProofSearchAgent(Agent):
    """Best-first proof search (see the module docstring for params)."""

    backend = "proof-search"

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        p = dict(config.params)
        self.budget = SearchBudget(seconds=float(p.get("seconds", 25.0)), max_checks=int(p.get("max_checks", 6000)),
                                   tactic_seconds=float(p.get("tactic_seconds", 2.0)))
        self.library = bool(p.get("library", True))
        self.hammer = bool(p.get("hammer", False))
        self.hammer_seconds = float(p.get("hammer_seconds", 0.0))  # kept back for a last `hammer` (ATPs)
        self.portfolio = bool(p.get("portfolio", True))
        self.tree_limit = int(p.get("tree_limit", 600))
        self.coq_args = tuple(str(a) for a in p.get("coq_args", ()))
        self.preload = str(p.get("preload", ""))
        self.allowed_axioms = tuple(str(a) for a in p.get("allowed_axioms", ()))
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
        self.learned = LearnedTactics()  # online: the steps of the proofs this agent found in this run
        self.learn = bool(p.get("learn", True))
        # offline: the human proofs of the target's library (agents/library_tactics.py), when indexed
        self.library_tactics: LibraryTactics | None = None
        if bool(p.get("library_tactics", True)):
            index = p.get("library_index")
            lib = LibraryTactics(Path(str(index)) if index else None)
            if lib.available():  # read once, here: an offline model, loaded before any theorem's clock runs
                self.library_tactics = lib.load()

    def _backend(self, prover: str, hidden: tuple[Path, ...] = ()) -> ProofStates:
        """The prover session of this agent; its processes never see ``hidden`` (``Context.hidden``)."""
        key = f"{prover}:{hash(tuple(sorted(map(str, hidden))))}"  # a session sees one theorem file's hiding
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

    def _library_for(self, states: Any, task: TheoremTask) -> LibraryTactics | None:
        """The library k-NN for this theorem, restricted to the modules its session has loaded (the
        rule of :func:`agents.library_tactics.library_modules`); None without an index."""
        lib = self.library_tactics
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
        record = self._theorems.setdefault(name, _Theorem())
        if record.searched:
            return None  # one search per theorem: its budget is spent
        record.searched = True
        prover = str(th.get("prover", "coq"))
        task = TheoremTask(name=name, statement=str(th.get("statement", "")), context=str(th.get("context", "")),
                           original_proof="", difficulty=str(th.get("difficulty", "unknown")),
                           prover="lean" if prover == "lean" else "coq",  # the view names no source file
                           noinit=bool(th.get("noinit", False)))
        try:
            states = self._backend(prover, ctx.hidden)
        except Exception as exc:  # the prover is missing here: say so in the trace, propose nothing
            ctx.record_turn(role="error", tool="proof-search", text=f"no proof-state backend: {exc}"[:500])
            return None
        llm = self._llm_for(ctx)

        def source(root: ProofState) -> TacticSource:
            if prover == "coq":
                suggesters: list[TacticSuggester] = [self.learned] if self.learn else []
                library = self._library_for(states, task)
                if library is not None:
                    suggesters.append(library)
                tactics = CoqTactics(states, task, root, library=self.library, hammer=self.hammer,
                                     portfolio=self.portfolio, llm=llm, setting=str(th.get("setting", "library")),
                                     suggesters=suggesters, hammer_seconds=self.hammer_seconds,
                                     probe_cache=self.probe_cache)
                tactics.allowed_axioms = self.allowed_axioms
                return tactics
            return LeanTactics(task, portfolio=self.portfolio, llm=llm)

        result = best_first_search(states, task, source, self.budget, tree_limit=self.tree_limit)
        self.searches.append(result)
        if result.proof is not None and self.learn:
            self.learned.learn(task, result.steps)
        summary = (f"{name}: {result.reason} after {result.checks} tactic runs, {result.expanded} states expanded, "
                   f"{result.seconds:.1f} s")
        ctx.record_turn(role="tool_result", tool="proof-search", text=summary,
                        args={"theorem": name, "result": result.reason, "checks": result.checks,
                              "expanded": result.expanded, "seconds": round(result.seconds, 3),
                              "deepest": result.deepest, "last_error": result.last_error[:300],
                              "tactics": list(result.tactics or []), "sources": list(result.proof_sources),
                              "by_source": result.by_source, "start_seconds": round(result.start_seconds, 3)})
        if result.proof is None or result.proof in record.proposed or result.proof in ctx.tried:
            return None
        record.proposed.add(result.proof)
        return Proposal(hypothesis=f"proof search: {len(result.tactics or ())} tactic(s) found by best-first search",
                        proof=result.proof, theorem=name,
                        meta={"search_tree": result.tree, "checks": result.checks, "expanded": result.expanded,
                              "search_seconds": round(result.seconds, 3), "tactics": list(result.tactics or [])})

    def observe(self, trial: TrialSummary) -> None:
        return None

    def close(self) -> None:
        for states in self._states.values():
            states.close()
        self._states.clear()


__all__ = [
    "COQ_CLOSERS",
    "Candidate",
    "CoqTactics",
    "LLMTactics",
    "LeanTactics",
    "LearnedTactics",
    "ProofSearchAgent",
    "SearchBudget",
    "SearchResult",
    "SearchTree",
    "TacticSuggester",
    "best_first_search",
    "closes_first_goal",
    "conclusion",
    "conclusion_pattern",
    "if_scrutinees",
    "leading_binders",
    "parse_tactic_lines",
]
