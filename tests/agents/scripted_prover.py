"""A scripted prover for the search's tests: each tactic's outcome and seconds come from a table, and time
is a counter the search's clock reads (no sleeping, no real prover)."""

from __future__ import annotations

from collections.abc import Sequence

from oracle.proof_common import Prover, TheoremTask
from oracle.proof_state import ProofState, TacticResult


class ScriptedStates:
    """A prover stand-in: each tactic's effect and its seconds come from a table; time is a counter
    the search's clock reads (no sleeping, no real prover)."""

    prover: Prover = "coq"

    def __init__(self, effects: dict[str, tuple[str, float]], lost: str = "") -> None:
        self.effects = effects  # tactic -> (outcome: "progress"|"proved"|"error", seconds)
        self.now = 0.0
        self.ran: list[tuple[tuple[str, ...], str]] = []
        self.lost, self.starts = lost, 0

    def clock(self) -> float:
        return self.now

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        self.starts += 1
        return ProofState((), ("|- goal",))

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        self.ran.append((tuple(state.handle), tactic))
        if tactic == self.lost and self.starts == 1:
            return TacticResult("error", message="coqtop did not answer in time (session restarted)", seconds=0.1)
        outcome, seconds = self.effects.get(tactic, ("error", 0.01))
        self.now += seconds
        path = (*state.handle, tactic)
        if outcome == "proved":
            return TacticResult("proved", ProofState(path, ()), seconds=seconds)
        if outcome == "progress":
            return TacticResult("progress", ProofState(path, (f"|- goal after {' '.join(path)}",)), seconds=seconds)
        return TacticResult("error", message="failed", seconds=seconds)

    def proof_text(self, tactics: Sequence[str]) -> str:
        return "\n".join(tactics)

    def close(self) -> None:
        return None
