"""The agent contract and the context an agent sees.

An agent turns a :class:`Context` into a :class:`~rrma.trial.Proposal` (or ``None`` when it has
nothing left to try). It never writes to disk: its only effects are the proposal it returns,
the trace turns it records (``ctx.record_turn``) and its blackboard posts (``ctx.post``); the
loop turns those into events. ``observe`` tells an agent how its own trial ended. An agent that runs
a program of its own (a coding agent, agents/coding) runs it sandboxed, and never lets it see
``ctx.hidden`` (the run directory, the oracle's held-out data).

The context is built by the loop from the run state (see :mod:`agents.context`): the task text,
the parent's files, the best and recent trials with outcomes and feedback, the blackboard, and the
steer notes people sent this agent (``rrma-tui steer``). With ``loop.history`` off (a control arm)
the history fields are empty; steer notes are not history and reach a control arm too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Proposal


@dataclass
class TrialSummary:
    """What an agent is told about one trial."""

    trial_id: str
    parent: str | None
    agent: str
    status: str
    score: float | None
    delta_sigma: float | None
    hypothesis: str
    feedback: str
    cached: bool = False
    theorem: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # proposal.meta of that trial
    promoted: bool = False

    def line(self) -> str:
        score = "-" if self.score is None else f"{self.score:.6g}"
        ds = "" if self.delta_sigma is None else f" ({self.delta_sigma:+.2f}σ)"
        return f"{self.trial_id} [{self.status}] {score}{ds} by {self.agent}: {self.hypothesis}"


def _no_turn(**_: Any) -> None:
    return None


def _no_post(_text: str, **_: Any) -> None:
    return None


def _not_stopping() -> bool:
    return False


def _no_files(_trial_id: str) -> dict[str, str]:
    raise KeyError("files of other trials are not available in this context")


@dataclass
class Context:
    task: TaskConfig
    agent_name: str
    parent_id: str | None  # the trial the next proposal builds on (policy default)
    files: dict[str, str]  # the parent's workspace (path -> text)
    editable: list[str]  # effective editable globs for this agent
    role: str | None = None
    best: TrialSummary | None = None
    baseline_score: float | None = None
    sigma: float | None = None
    top: list[TrialSummary] = field(default_factory=list)
    recent: list[TrialSummary] = field(default_factory=list)
    own: list[TrialSummary] = field(default_factory=list)  # this agent's latest trials
    lineage: list[TrialSummary] = field(default_factory=list)  # parent back to the baseline
    blackboard: list[str] = field(default_factory=list)
    steer: list[str] = field(default_factory=list)  # notes people addressed to this agent or to all ("human:<name>: text"), oldest first
    trials_left: int = 0
    history: bool = True
    theorem: dict[str, Any] | None = None  # proof benches: {"name", "statement", "context", "difficulty"}
    tried: set[str] = field(default_factory=set)  # cache keys / proof texts already evaluated
    record_turn: Callable[..., None] = _no_turn  # kwargs of rrma.log.events.AgentTurnData
    post: Callable[..., None] = _no_post  # post(text, trial_id=None, tags=[])
    files_of: Callable[[str], dict[str, str]] = _no_files  # tree policy: files of another trial
    hidden: tuple[Path, ...] = ()  # what an agent's own processes must never see: the run dir, held-out data
    stopping: Callable[[], bool] = _not_stopping  # the run is stopping (Ctrl-C, a stop order): end own processes


class Agent(ABC):
    """Base class of every agent backend."""

    backend: str = "base"

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        self.config = config
        self.task = task
        self.seed = seed
        self.name = config.name

    @abstractmethod
    def propose(self, ctx: Context) -> Proposal | None:
        """The next proposal, or None when this agent has nothing left to try."""

    def observe(self, trial: TrialSummary) -> None:
        """Called when one of this agent's trials has finished."""
        return None

    def close(self) -> None:
        return None


class AgentError(Exception):
    """An agent cannot run (missing key, unknown backend, exhausted budget): a setup problem."""


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
