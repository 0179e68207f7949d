"""A second, narrow proof search on the second core, beside the search (issue 33, round seventeen).

Why it exists: the bench's budget is 30 s of wall time per theorem on two cores, and the search
(:mod:`agents.best_first`) drives one ``coqtop``. The second core went to CoqHammer's ``hammer``
(:mod:`agents.side_hammer`) only where the search's session loads CoqHammer's tactics; on the
files whose context those tactics would load (``ZArith``, ``Lia``, ``PeanoNat``...; 444 of the
1,137 theorems of the blind sets) it idled, and where ``hammer`` runs it rarely finds what the search
does not (round seven: 4 theorems of 129). The search goes wide: on out-of-sample 30's open theorems
it ran 30-50 tactics at each state it expanded and reached depth 3-6, while the proofs it misses are
mostly 5 sentences or more. Rounds twelve to sixteen changed how the one search ranks its candidates;
each gained theorems on some files and lost about as many on others, because a candidate promoted
takes seconds from those demoted. A second search with its own session can rank differently without
taking the first one's candidates: the theorem is proved when either finds a proof.

:class:`SideSearch` runs :func:`agents.best_first.best_first_search` in a thread, with its own
``coqtop`` session (the same load paths, preload and hidden files as the search's, at the lowest
priority) and a tactic source the caller builds (the proof-search agent's: the search's own candidates,
its closers and the :data:`WIDTH` cheapest other steps at each state, :class:`Narrow`). When it finds a proof, the search replays
that proof's tactics from the statement in its own session, where every step must run and the last
close the theorem, and the source's checks pass, as for ``hammer``'s reconstruction; then the oracle
checks it as any proof. When the search ends first, the side search is cancelled (it stops before its
next tactic run) and its session stays warm for the next theorem. What it costs: its thread shares
this process's interpreter with the search, and its ``coqtop`` the two cores, so the search runs fewer
tactics in its seconds (docs/proofs.md, round seventeen).

:class:`Beside` starts several side passes with one search (``hammer`` and a side search) and
gives the search each proof they find, first found first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.best_first import (
    Node,
    SearchBudget,
    SidePass,
    SideRun,
    TacticSource,
    best_first_search,
)
from agents.side_hammer import ThreadPass
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState, TacticResult

NICE = 19  # the side search's coqtop: the lowest priority, so it takes only what the search leaves of the two cores
MIN_SECONDS = 4.0  # a side search with less time than this before its deadline is not started
STOP_SECONDS = 5.0  # how long a cancelled side search may take to end (one tactic's timeout and its replay)
WIDTH = 12  # the narrow side search's steps a state (the cheapest that are not closers); doubled by its wider pass


class Narrow(TacticSource):
    """A tactic source that offers, at each state, the closers of ``inner`` (they close a goal or
    nothing: they make no state to search) and only its ``width`` cheapest other steps, so that a search
    driven by it goes deep where the search proper goes wide; its wider pass (``widen``) doubles the width
    and widens ``inner``. Everything else is ``inner``'s."""

    def __init__(self, inner: TacticSource, width: int = WIDTH) -> None:
        self.inner, self.width = inner, width

    def candidates(self, node: Node) -> list[Candidate]:
        cands = list(self.inner.candidates(node))
        steps = sorted((c for c in cands if not c.closer), key=lambda c: c.cost)[:self.width]
        return [c for c in cands if c.closer or c in steps]

    def widen(self) -> bool:
        inner = getattr(self.inner, "widen", None)
        if inner is not None:
            inner()
        self.width *= 2
        return True

    def validate(self, tactics: Sequence[str]) -> str | None:
        return self.inner.validate(tactics)

    def observe(self, candidate: Candidate, result: TacticResult) -> None:
        self.inner.observe(candidate, result)

    def keep(self, candidate: Candidate) -> bool:
        return self.inner.keep(candidate)

    def replacement(self, candidate: Candidate, notes: str) -> str | None:
        return self.inner.replacement(candidate, notes)

    def __getattr__(self, name: str) -> Any:  # discharge, discharge_variants, reserve_seconds, last_resort
        return getattr(self.inner, name)


@dataclass
class SideSearchRun:
    """One side search: its proof's tactics from the statement once found, how it ended."""

    tactics: tuple[str, ...] | None = None
    ended: str = "running"


class SideSearch(ThreadPass):
    """A second best-first search in a thread (see the module docstring).

    ``make_states``: builds its prover session, once, on first use; ``make_source(states, task)``:
    the tactic source factory for one theorem (as :func:`best_first_search` takes it), given this
    side's session; ``budget``: its tactic runs and tactic timeout (its seconds are the deadline's)."""

    def __init__(self, make_states: Callable[[], Any],
                 make_source: Callable[[Any, TheoremTask], Callable[[ProofState], TacticSource]],
                 budget: SearchBudget) -> None:
        self._make = make_states
        self._make_source = make_source
        self.budget = budget
        self._states: Any = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self.broken = ""  # why no side session can be made (then none is started again)
        self.skipped = 0  # theorems that began while the previous side search still ran

    def begin(self, task: TheoremTask, deadline: float) -> SideSearchRun | None:
        """Start the side search on ``task``, to end by ``deadline`` (monotonic); None while the
        previous one still runs."""
        if self.broken:
            return SideSearchRun(ended=f"skipped: no side session: {self.broken}"[:300])
        if self._thread is not None and self._thread.is_alive():
            self.skipped += 1
            return None
        seconds = deadline - time.monotonic()
        if seconds < MIN_SECONDS:
            return SideSearchRun(ended=f"skipped: {seconds:.1f} s left")
        run = SideSearchRun()
        self._cancel.clear()
        self._thread = threading.Thread(target=self._run, args=(task, seconds, run),
                                        name=f"side-search-{task.name}", daemon=True)
        self._thread.start()
        return run

    def _run(self, task: TheoremTask, seconds: float, run: SideSearchRun) -> None:
        try:
            if self._states is None:
                self._states = self._make()
            states = self._states
            budget = SearchBudget(seconds=seconds, max_checks=self.budget.max_checks,
                                  tactic_seconds=self.budget.tactic_seconds)
            result = best_first_search(states, task, self._make_source(states, task), budget, tree_limit=0,
                                       cancelled=self._cancel.is_set)
            if result.proof is not None and result.tactics:
                run.tactics = tuple(result.tactics)
                run.ended = f"found after {result.checks} tactic runs, {result.seconds:.1f} s"
            else:
                run.ended = f"{result.reason} after {result.checks} tactic runs, {result.seconds:.1f} s"
        except Exception as exc:  # the side search must never take the search down: say why
            run.ended = f"error: {type(exc).__name__}: {exc}"[:300]
            if self._states is None:
                self.broken = run.ended

    def stop(self) -> None:
        """The search is over: cancel the side search (it ends before its next tactic run)."""
        self._cancel.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(STOP_SECONDS)
            if self._thread.is_alive() and self._states is not None:  # a tactic past its timeout: end the session
                self._states.close()
                self._states = None
                self._thread.join(5.0)

    def close(self) -> None:
        self.stop()
        if self._states is not None:
            self._states.close()
            self._states = None


class BesideRun:
    """The runs of several side passes for one theorem (:class:`Beside`)."""

    def __init__(self, runs: Sequence[tuple[str, SideRun | None]]) -> None:
        self.runs = list(runs)

    @property
    def found(self) -> list[tuple[str, ...]]:
        """Every proof found so far, in the order of the passes."""
        return [run.tactics for _, run in self.runs if run is not None and run.tactics]

    @property
    def tactics(self) -> tuple[str, ...] | None:
        found = self.found
        return found[0] if found else None

    @property
    def ended(self) -> str:
        return "; ".join(f"{name}: {run.ended if run is not None else 'skipped: busy'}" for name, run in self.runs)


class Beside:
    """Several side passes started with one search (``hammer``, a side search), as one :class:`SidePass`."""

    def __init__(self, passes: Sequence[tuple[str, SidePass]]) -> None:
        self.passes = list(passes)
        self.current: BesideRun | None = None

    def begin(self, task: TheoremTask, deadline: float) -> BesideRun:
        self.current = BesideRun([(name, side.begin(task, deadline)) for name, side in self.passes])
        return self.current

    def wait(self, until: float) -> None:
        """Wait until one more pass has found a proof or every pass has ended, at most until ``until``."""
        before = len(self.current.found) if self.current is not None else 0
        while time.monotonic() < until and not (self.current is not None and len(self.current.found) > before):
            running = [side for _, side in self.passes if not side.done()]
            if not running:
                return
            running[0].wait(min(until, time.monotonic() + 0.2))

    def stop(self) -> None:
        for _, side in self.passes:
            side.stop()

    def done(self) -> bool:
        return all(side.done() for _, side in self.passes)

    def close(self) -> None:
        for _, side in self.passes:
            close = getattr(side, "close", None)
            if close is not None:
                close()
