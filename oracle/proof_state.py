"""Proof states: run one tactic on a goal, read the goals it leaves, go back, for Coq and Lean.

Why it exists: a prover that only submits whole scripts to the oracle cannot see goals, so it
cannot tell a step that made progress from one that did nothing. A search over proof states (the
kind LeanDojo/ReProver-style provers run) needs an interactive prover: start at a theorem's
statement, apply one tactic to a state, get the new goals or the error, and come back to any
earlier state. This module is the seam; the backends are

* :class:`oracle.proof_state_coq.CoqProofStates`: a warm ``coqtop`` session (the oracle's
  :class:`~oracle.coq.CoqSession`); a state is a coqtop state id, going back is ``BackTo``;
* :class:`oracle.proof_state_lean.LeanReplProofStates`: the Lean REPL's tactic mode
  (``{"tactic": ..., "proofState": N}``); a state is a REPL proof-state number, which stays valid,
  so going back costs nothing;
* :class:`oracle.proof_state_lean.LeanDojoProofStates`: LeanDojo's ``Dojo`` (``run_tac`` on a
  ``TacticState``) for repositories a user has traced (optional: ``pip install lean-dojo``).

Invariant: nothing found here counts. A path of tactics that closes every goal is turned into a
proof body by :meth:`ProofStates.proof_text`, and that body is re-checked from scratch by the
oracle (:class:`~oracle.coq.WarmCoqPool`, :class:`~oracle.lean.LeanChecker`) before it is accepted.
Tactics sent to a backend pass the same text screen as a proof body, so exploring cannot run
what the oracle would refuse.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from oracle.proof_common import Prover, TheoremTask

Outcome = Literal["progress", "proved", "error", "timeout", "rejected"]


class ProofStateError(RuntimeError):
    """The backend cannot give a proof state (the context or the statement does not elaborate,
    the prover is missing or died)."""


def goal_key(goals: Sequence[str]) -> str:
    """A short stable hash of a list of goals (whitespace-insensitive): the search's state key."""
    canon = "\n\u241e\n".join(" ".join(g.split()) for g in goals)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class ProofState:
    """One node of a proof: the backend's handle and the goals, first goal first.

    ``goals`` are display strings ``"h1 : T1; h2 : T2 |- concl"`` for Coq's first goal and the
    prover's own rendering otherwise; an empty list means the proof is complete.
    """

    handle: Any  # coqtop: the tactic path; Lean REPL: the proofState number; LeanDojo: a TacticState
    goals: tuple[str, ...]
    detail: Any = field(default=None, compare=False, repr=False)  # the backend's structured goals
    # the hypotheses of the goals after the first, where the backend shows those goals' conclusions only (coqtop):
    # two states whose goals print alike may differ there (`induction H` keeps an induction hypothesis for the
    # later cases, `destruct H` does not), and the key tells them apart by it
    background: str = field(default="", repr=False)

    @property
    def done(self) -> bool:
        return not self.goals

    @property
    def key(self) -> str:
        return goal_key((*self.goals, self.background) if self.background else self.goals)


@dataclass(frozen=True)
class TacticResult:
    """What one tactic did to a state: a new state, or why it failed."""

    outcome: Outcome
    state: ProofState | None = None  # set for progress and proved
    message: str = ""  # the prover's error (first line), or the screen's reason
    seconds: float = 0.0
    notes: str = ""  # what the prover printed besides the goals on success (e.g. CoqHammer's advice), clipped


@dataclass
class Premise:
    """A lemma the search may use: its name, its statement, where it comes from."""

    name: str
    statement: str
    origin: Literal["file", "library"] = "file"
    symbols: frozenset[str] = field(default_factory=frozenset)


class ProofStates(Protocol):
    """An interactive prover for one theorem at a time (not thread-safe: one search per object)."""

    prover: Prover

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        """The state at the theorem's statement (context loaded); raises ProofStateError."""
        ...

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        """Apply ``tactic`` to ``state`` (its first goal, as the prover does by default)."""
        ...

    def proof_text(self, tactics: Sequence[str]) -> str:
        """The proof body the oracle checks for this path of tactics from the start state."""
        ...

    def close(self) -> None: ...
