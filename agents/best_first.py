"""Best-first search over proof states: the frontier, the trace it keeps, the budget it spends.

Why it exists: the proof-search agent (:mod:`agents.proof_search`) and its tactic sources
(:mod:`agents.coq_tactics`, :mod:`agents.lean_tactics`) meet here. :func:`best_first_search`
applies one tactic at a time through a proof-state backend (:mod:`oracle.proof_state`), keeps
every new state, and runs the most promising (state, tactic) next, until a path of tactics closes
every goal or the per-theorem budget (tactic runs and seconds) is spent. It knows no prover: the
candidates come from a :class:`TacticSource`.

Priority of a (state, tactic): the cost of the state's path (each tactic has a cost) plus ``2 x
goals`` plus a size term, plus the tactic's cost and the seconds its kind has taken so far in this
search; one frontier holds them all, so a cheap tactic deep in the tree runs before a slow one near
the root. A state whose goals were seen before is not kept; a tactic that closes a state's first
goal ends that state's expansion (the other ways of closing the same goal cannot do better). A goal closed
in several steps (:data:`SIBLING_REPLAY`) prices the next state from the state where that goal was first,
and its steps, as they were and as the source's ``dual``, are the next goal's first candidates.

Invariant: the search tree is part of the trace. :class:`SearchTree` holds every tried tactic
compactly (parent node, tactic, outcome, child node, and why a failed one failed: the prover's
error, clipped), each node's goal hash and the goals of the nodes (clipped); the TUI's proof-tree
screen replays exactly this layout (``meta["search_tree"]`` of the proposal).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agents.coq_lookups import split_top
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState, ProofStateError, ProofStates, TacticResult

RESTART_MIN_S = 6.0  # a search whose prover session died restarts it only with this many seconds left
_SESSION_LOST = re.compile(r"session (?:restarted|is not running)|no proof started")
GOAL_WEIGHT = 2.0  # priority units per open goal
LOCALITY_SLACK = 0.5  # priority units a tactic at the current node may trail the best elsewhere and still run next
TIME_WEIGHT = 4.0  # priority units per second a tactic of that kind (time_key) has taken on average in this search
WIDEN_BEFORE = 0.8  # a search exhausted before this share of its seconds makes a second, wider pass
SIZE_WEIGHT = 0.004  # per character of the first goal
TREE_GOAL_CHARS = 400  # a goal's text kept in the trace
TREE_MESSAGE_CHARS = 300  # a failed tactic's error (or veto) kept in the trace
DISCHARGE = True  # a switch for tests: False leaves the goals a tactic opens to the search (before round six)
SIDE_MARGIN_S = 3.0  # a side pass ends this long before the budget, leaving time to replay what it found
SIDE_REPLAY_S = 10.0  # at most this long for each step of its proof here
SIDE_SOURCE = "side-hammer"  # the source its steps are counted under (by_source, proof_sources)
OUTCOME_CODE = {"progress": "p", "proved": "P", "error": "e", "timeout": "t", "rejected": "r"}
# a goal closed in several steps: the state after it is priced from the state where that goal was first (its cost
# no longer carries the closed goal's steps), and the steps are offered first on the next goal, as they are and as the
# source's dual (`max_r` for `max_l`): the second case of a split is often the first's proof again (round twenty)
SIBLING_REPLAY = True
REPLAY_SOURCE = "replay"  # the source the replayed steps are counted under (by_source, proof_sources)
LOOKUP_SOURCE = "lookup:"  # by_source's rows of the source's own queries (TacticSource.lookup_stats), not tactics


class SideRun(Protocol):
    """A prover call running beside the search (:class:`agents.side_hammer.SideOutcome`)."""

    @property
    def tactics(self) -> tuple[str, ...] | None: ...  # from the statement, once it found a proof

    @property
    def ended(self) -> str: ...


class SidePass(Protocol):
    """Something that proves the theorem beside the search, on another core
    (:class:`agents.side_hammer.SideHammer`): started with the search, its proof replayed by it."""

    def begin(self, task: TheoremTask, deadline: float) -> SideRun | None: ...

    def wait(self, until: float) -> None: ...

    def stop(self) -> None: ...

    def done(self) -> bool: ...


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
    side: str = ""  # how the side pass (SidePass) ended: "" without one
    # proofs found and vetoed by the source itself (:meth:`TacticSource.validate`): how many, and the first one's
    # tactic and reason; a veto the checker would not have made is a silent loss unless the report says so
    vetoed: int = 0
    first_veto: str = ""


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

    def keep(self, candidate: Candidate) -> bool:
        """Whether a queued candidate is still worth its run (what the source learnt since it was
        proposed may rule it out: a type found not inductive, a tactic found unknown)."""
        return True

    def replacement(self, candidate: Candidate, notes: str) -> str | None:
        """The tactic a proof keeps for a last-resort tactic that closed a goal (``notes``: what it
        printed); None when it cannot be kept."""
        return candidate.tactic


def best_first_search(states: ProofStates, task: TheoremTask, source: Callable[[ProofState], TacticSource],
                      budget: SearchBudget, *, tree_limit: int = 600,
                      clock: Callable[[], float] = time.monotonic, side: SidePass | None = None,
                      cancelled: Callable[[], bool] | None = None) -> SearchResult:
    """Search for a proof of ``task`` (see the module docstring); never raises on a failed start.

    ``side``: started once the statement is open here, to end :data:`SIDE_MARGIN_S` before the
    budget (its deadline on ``clock``); a proof it finds is replayed here once (and validated by the
    source) as soon as the search sees it, or when the search ends before the budget, after waiting
    for it; stopped when the search is over. Several passes (:class:`agents.side_search.Beside`) may each find
    one (their run's ``found``): each is replayed once, first found first.

    ``cancelled``: asked before each tactic run; when it answers True the search ends as if its budget were
    spent (``reason`` "cancelled"): a side search (:mod:`agents.side_search`) whose search has ended."""
    started = clock()
    tree = SearchTree(states.prover, task.name, tree_limit)
    try:
        root_state = states.start(task, timeout_s=max(60.0, budget.seconds))
    except ProofStateError as exc:
        return SearchResult(None, None, 0, clock() - started, 0,
                            tree.to_json(result="error", proof_nodes=[], budget=budget, checks=0,
                                         seconds=clock() - started), f"cannot start: {exc}")
    # after the search's own start: the side pass compares what its session loads with this one's
    side_run = side.begin(task, started + budget.seconds - SIDE_MARGIN_S) if side is not None else None
    side_refused = ""  # why the side passes' proofs replayed here were not taken
    side_tried: set[tuple[str, ...]] = set()  # the side passes' proofs replayed here
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
    replays: dict[int, list[tuple[str, ...]]] = {}  # node -> the steps offered first at it (SIBLING_REPLAY)
    replay_next: dict[tuple[int, str], tuple[str, ...]] = {}  # (node, replayed step) -> the steps after it
    seconds_of: dict[str, tuple[float, int]] = {}  # tactic key -> (seconds, runs): what it costs here
    checks = expanded = 0
    reason = "exhausted"
    last_error = ""
    vetoes: list[str] = []  # the vetoed proofs' last tactic and reason, in the order found

    def vetoed(tactic: str, why: str) -> None:
        vetoes.append(f"{tactic} ({why})")

    def finish(proof_node: Node | None, why: str) -> SearchResult:
        if side is not None and side_run is not None:
            side.stop()  # the search is over: a side call still running is of no use
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
        # the prover's lookups (Coq's `Search`) by kind, as [queries, seconds, 0, 0]: time no tactic run shows
        for kind, (queries, spent) in (getattr(tactics_source, "lookup_stats", None) or {}).items():
            stats[f"{LOOKUP_SOURCE}{kind}"] = [int(queries), round(spent, 2), 0, 0]
        side_ended = side_run.ended if side_run is not None else ("skipped: busy" if side is not None else "")
        if side_refused:
            side_ended += f"; not taken: {side_refused}"
        if proof_node is None:
            return SearchResult(None, None, checks, seconds, expanded, data, why, deepest=deepest,
                                last_error=last_error, by_source=stats, start_seconds=start_seconds,
                                side=side_ended, vetoed=len(vetoes), first_veto=vetoes[0] if vetoes else "")
        tactics = shortened(path)
        steps = [(nodes[path[k]].state.goals[0] if nodes[path[k]].state.goals else "", tactics[k])
                 for k in range(len(path) - 1)]
        return SearchResult(states.proof_text(tactics), tactics, checks, seconds, expanded,
                            data, "proved", steps=steps, deepest=deepest, by_source=stats,
                            start_seconds=start_seconds, proof_sources=tuple(nodes[k].source for k in path[1:]),
                            side=side_ended, vetoed=len(vetoes), first_veto=vetoes[0] if vetoes else "")

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
                    vetoed(replay, veto)
                    continue
                nodes.append(child)
                tree.add_node(child)
                return finish(child, "proved")
        return None

    def from_side() -> SearchResult | None:
        """A proof the side passes found, replayed from the root in this session: each step must run and the
        last close the theorem, and the source must not veto it; else None (the search goes on). Each proof
        found is tried once."""
        nonlocal side_refused
        if side_run is None:
            return None
        found = getattr(side_run, "found", None)
        for tactics in (found if found is not None else [side_run.tactics] if side_run.tactics else []):
            if tactics in side_tried:
                continue
            side_tried.add(tactics)
            why = replay_side(tactics)
            if isinstance(why, SearchResult):
                return why
            side_refused = f"{side_refused}; {why}" if side_refused else why
        return None

    def replay_side(found: tuple[str, ...]) -> SearchResult | str:
        """One proof found beside the search, replayed here: the search's result, or why it was not taken."""
        nonlocal checks, last_error
        node = nodes[0]
        spent = by_source.setdefault(SIDE_SOURCE, [0, 0.0, 0, 0])
        for tactic in found:
            left = budget.seconds + SIDE_MARGIN_S - (clock() - started)
            result = states.run_tactic(node.state, tactic, max(budget.tactic_seconds, min(left, SIDE_REPLAY_S)))
            checks += 1
            spent[0] += 1
            spent[1] += result.seconds
            code = OUTCOME_CODE[result.outcome]
            if result.state is None or result.outcome not in ("progress", "proved"):
                tree.add_try(node.id, tactic, code, -1, result.seconds, result.message)
                last_error = f"{tactic} (found beside the search) did not replay: {result.message}"
                return f"{tactic} did not replay"
            child = Node(len(nodes), node.id, tactic, result.state, node.depth + 1, node.cost, (*node.tactics, tactic),
                         SIDE_SOURCE)
            if result.outcome == "proved":
                veto = tactics_source.validate(child.tactics)
                if veto is not None:
                    tree.add_try(node.id, tactic, "v", -1, result.seconds, veto)
                    vetoed(tactic, veto)
                    last_error = f"{tactic} (found beside the search) was vetoed: {veto}"
                    return "vetoed"
            nodes.append(child)
            tree.add_node(child)
            tree.add_try(node.id, tactic, code, child.id, result.seconds)
            spent[2] += 1
            if result.outcome == "proved":
                spent[3] += 1
                return finish(child, "proved")
            node = child
        last_error = f"{' '.join(found)} (found beside the search) left goals open here"
        return "left goals open"

    def ending(why: str) -> SearchResult:
        """The search is over: the side pass's proof (waited for while the budget lasts), the source's
        last resort, or none."""
        found = getattr(side_run, "found", None)
        if side is not None and side_run is not None and (
                side_run.tactics is None if found is None else all(t in side_tried for t in found)):
            side.wait(started + budget.seconds - SIDE_MARGIN_S + 1.0)
        return from_side() or last_resort() or finish(None, why)

    def expected_seconds(cand: Candidate) -> float:
        spent, runs = seconds_of.get(time_key(cand), (0.0, 0))
        return spent / runs if runs else 0.0

    dual = getattr(tactics_source, "dual", None)

    def expand(node: Node) -> None:
        """Ask the source for the node's candidates and queue them, cheapest first (a closed goal's steps to
        replay here, :data:`SIBLING_REPLAY`, before them)."""
        base = priority(node.cost, node.state)
        replayed = []
        for plan in replays.get(node.id, ()):
            for step in dict.fromkeys([plan[0], dual(plan[0]) if dual is not None else plan[0]]):
                replay_next[(node.id, step)] = plan[1:]
                replayed.append(Candidate(step, 0.0, source=REPLAY_SOURCE))
        queue = [(base + cand.cost + TIME_WEIGHT * expected_seconds(cand), k, cand)
                 for k, cand in enumerate([*replayed, *tactics_source.candidates(node)])
                 if (node.id, cand.tactic) not in tried]
        queue.sort(key=lambda item: (item[0], item[1]))
        pending[node.id] = queue

    discharge = getattr(tactics_source, "discharge", None)
    discharges: set[str] = set()  # the `T; try solve [...]` forms kept in the tree

    def shortened(path: list[int]) -> tuple[str, ...]:
        """The proof's tactics, each discharge step with the one closer that does its work where one does
        (``rewrite f_r; try solve [lia].``: the same goals left, checked in the prover), so that the proof reads
        as a person would write it; the whole proof is validated again, and kept as found if it is vetoed."""
        nonlocal checks
        tactics = list(nodes[path[-1]].tactics)
        variants = getattr(tactics_source, "discharge_variants", None)
        if variants is None or not discharges:
            return tuple(tactics)
        changed = False
        for k in range(1, len(path)):
            node, parent = nodes[path[k]], nodes[path[k - 1]]
            if node.tactic not in discharges:
                continue
            for variant in variants(node.tactic):
                if clock() - started >= budget.seconds + 2.0:
                    break
                again = states.run_tactic(parent.state, variant, budget.tactic_seconds)
                checks += 1
                if again.state is not None and again.outcome == ("proved" if not node.state.goals else "progress") \
                        and again.state.key == node.state.key:
                    tactics[k - 1], changed = variant, True
                    break
        if changed and tactics_source.validate(tactics) is not None:
            return nodes[path[-1]].tactics
        return tuple(tactics)

    def discharged(node: Node, cand: Candidate, result: TacticResult) -> tuple[Candidate, TacticResult]:
        """A tactic that opened goals (``rewrite`` with a conditional lemma, ``apply`` with premises, a case
        split), run again with the source's cheap closers on every goal it leaves (``T; try solve [...]``):
        kept when they closed some, so a side goal like ``n <= m`` with ``H : n <= m`` costs no search
        of its own (one tactic run; none when the source offers no such form)."""
        nonlocal checks
        assert result.state is not None
        both = discharge(cand.tactic, result.state) if discharge is not None and DISCHARGE else None
        left = budget.seconds - (clock() - started)
        if both is None or left < 1.0 or checks >= budget.max_checks or (node.id, both) in tried:
            return cand, result
        tried.add((node.id, both))
        again = states.run_tactic(node.state, both, min(budget.tactic_seconds, max(0.5, left)))
        checks += 1
        spent = by_source.setdefault(cand.source, [0, 0.0, 0, 0])
        spent[0] += 1
        spent[1] += again.seconds
        if again.state is None or again.outcome not in ("progress", "proved") \
                or len(again.state.goals) >= len(result.state.goals):
            return cand, result
        discharges.add(both)
        return replace(cand, tactic=both), again

    def attempt(node: Node, cand: Candidate) -> SearchResult | None:
        nonlocal checks, last_error
        if clock() - started >= budget.seconds - reserve:
            stop.append("budget: seconds")
            return None
        if cancelled is not None and cancelled():
            stop.append("cancelled")
            return None
        if checks >= budget.max_checks:
            stop.append("budget: checks")
            return None
        tried.add((node.id, cand.tactic))
        plan_after = replay_next.get((node.id, cand.tactic)) if cand.source == REPLAY_SOURCE else None
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
        key = time_key(cand)
        spent_key = seconds_of.get(key, (0.0, 0))
        seconds_of[key] = (spent_key[0] + result.seconds, spent_key[1] + 1)
        if result.outcome in ("error", "timeout") and _SESSION_LOST.search(result.message or ""):
            # the prover's session was restarted (a tactic ignored its timeout): the states are tactic
            # paths, so a fresh start at the statement makes every node reachable again
            left = budget.seconds - (clock() - started)
            try:
                if left < RESTART_MIN_S:
                    raise ProofStateError("too little time left to restart")
                states.start(task, timeout_s=left)
            except ProofStateError as exc:
                last_error = (f"the prover's session was lost at depth {node.depth} (by {cand.tactic!r}, which did not "
                              f"stop at its timeout) and not restarted: {exc}")
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
        if result.outcome == "progress" and len(child_state.goals) > len(node.state.goals) and not cand.closer:
            cand, result = discharged(node, cand, result)
            assert result.state is not None
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
                vetoed(cand.tactic, veto)
                return None
        nodes.append(child)
        tree.add_node(child)
        tree.add_try(node.id, cand.tactic, code, child.id, result.seconds)
        if result.outcome == "proved":
            return finish(child, "proved")
        if plan_after:  # a replayed step made progress: the next one is offered first at its state
            replays.setdefault(child.id, []).append(plan_after)
        if closed and SIBLING_REPLAY:
            sibling(node, child)
        heapq.heappush(heap, (priority(child.cost, child_state), next(counter), child.id))
        if closed:
            closed_nodes.add(node.id)  # the first goal is closed: other ways of closing it cannot do better
        return None

    def sibling(parent: Node, child: Node) -> None:
        """``child`` is ``parent`` with its first goal closed: find the state where that goal was first (the
        topmost ancestor whose other goals are ``child``'s goals); when it took more than one step, price
        ``child`` from there and offer those steps first on ``child``'s first goal, one by one, each as it
        was and as the source's dual."""
        rest = [conclusion(g) for g in child.state.goals]
        first = parent
        while first.parent >= 0 and [conclusion(g) for g in nodes[first.parent].state.goals[1:]] == rest:
            first = nodes[first.parent]
        steps = child.tactics[len(first.tactics):]
        if len(steps) < 2:
            return
        child.cost = min(child.cost, first.cost)
        replays.setdefault(child.id, []).append(steps)

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
                if (node_id, cand.tactic) in tried or not tactics_source.keep(cand):
                    continue
                adopted = from_side()  # the side pass's proof, the first time it is there
                if adopted is not None:
                    return adopted  # else there is none yet, or it did not replay here: the search goes on
                proof = attempt(node, cand)
                if proof is not None:
                    return proof
            if queue and node_id not in closed_nodes:
                heapq.heappush(heap, (queue[0][0], next(counter), node_id))
        if stop:
            return ending(stop[0])
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
    return ending(reason)


def time_key(cand: Candidate) -> str:
    """What a tactic's seconds are learnt by in one search: its kind, the heads of its top-level ``;`` pieces
    (``simpl in *; intuition.`` is ``simpl;intuition``, not ``simpl.``'s ``simpl``; ``induction d; sauto.`` is not
    ``induction n.``; a ``[t1 | t2]`` piece is ``[]``)."""
    return _kind(cand.tactic)


@functools.lru_cache(maxsize=8192)
def _kind(tactic: str) -> str:
    """:func:`time_key` of one tactic text, kept: the same closers and steps come back at every state."""
    return ";".join("[]" if piece.startswith("[") else tactic_head(piece) for piece in split_top(tactic, ";"))


def tactic_head(tactic: str) -> str:
    """A tactic's first word (``induction`` for ``induction n; simpl.``): one piece of its kind (:func:`time_key`)."""
    return tactic.split(maxsplit=1)[0].rstrip(".;") if tactic.strip() else ""
