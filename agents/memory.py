"""An agent's memory of its own trials: one line per outcome, for its next prompts (history runs).

Agent-side, not part of the contract: the LLM and coding agents remember what they proposed
(:func:`memory_note`) until :meth:`rrma.contracts.Agent.observe` brings the outcome
(:func:`remember_outcome`).
"""

from __future__ import annotations

from rrma.contracts import TrialSummary
from rrma.trial import Proposal

MEMORY_LINES = 50  # an agent's own outcomes kept for its next prompts (history runs)


def memory_note(proposal: Proposal) -> str:
    """How an agent remembers its own proposal until the outcome comes: the hypothesis and what it touched."""
    files = ", ".join(e.path for e in proposal.edits) or ("proof" if proposal.proof else "-")
    return f"{proposal.hypothesis} [{files}]"


def remember_outcome(memory: list[str], pending: dict[str, str], trial: TrialSummary) -> None:
    """Append one line for ``trial`` (its remembered proposal, status, score, sigmas) to ``memory``,
    keeping the last ``MEMORY_LINES``; ``pending`` maps hypotheses to :func:`memory_note` lines."""
    note = pending.pop(trial.hypothesis, trial.hypothesis)
    score = "-" if trial.score is None else f"{trial.score:.6g}"
    ds = "" if trial.delta_sigma is None else f", {trial.delta_sigma:+.2f}σ"
    promoted = ", promoted" if trial.promoted else ""
    memory.append(f"{trial.trial_id}: {note} -> {trial.status} {score}{ds}{promoted}")
    del memory[: max(0, len(memory) - MEMORY_LINES)]
