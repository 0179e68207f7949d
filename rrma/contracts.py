"""The contracts between the core and its plug-ins: what an oracle and an agent may and must do.

The core (``rrma/``) runs trials and records them; oracles (``oracle/``) and agents (``agents/``)
are plug-ins that implement the two base classes here and are found by name
(:mod:`rrma.plugins`), so a third-party package can add either without touching RRMA
(docs/plugins.md). The core imports no plug-in; plug-ins import this module.

**Oracle** (:class:`Oracle`): the fixed judge of a task. It owns its score. ``prepare(run_dir,
workspace)`` runs once per run before the baseline; ``evaluate(ctx)`` receives a materialized
trial workspace (the parent's files plus the agent's edit, already validated by the harness) and
returns an :class:`~rrma.trial.Outcome`. Nothing an agent edits can change how the score is
computed: an oracle reads its scoring code and data from its own package or from read-only
workspace files, never from editable ones, and declares what no agent may read
(:meth:`Oracle.held_out`). Untrusted work (the agent's program, a proof checker on an agent's
proof) runs in a child process under :func:`rrma.contain.spawn.spawn` with ``ctx.guard``, which
enforces the wall clock, memory and output caps from outside and labels the result.
``evaluate`` never raises for anything the trial did (it labels it); :class:`OracleError` means
the oracle cannot run here at all. The oracle object lives in the harness (one per run, built
by :func:`rrma.plugins.make_oracle`), so it can keep warm resources (REPL pools) across trials;
``evaluate`` may be called from several threads at once, and on a Ray worker from a fresh
process that imported the class by its ``module:Class`` target.

**Agent** (:class:`Agent`): turns a :class:`Context` into a :class:`~rrma.trial.Proposal` (or
``None`` when it has nothing left to try). It never writes to disk: its only effects are the
proposal it returns, the trace turns it records (``ctx.record_turn``) and its blackboard posts
(``ctx.post``); the loop turns those into events. ``observe`` tells an agent how its own trial
ended. An agent that runs a program of its own (a coding agent, agents/coding) runs it
sandboxed and never lets it see ``ctx.hidden`` (the run directory, the oracle's held-out data).
The context is built by the loop from the run state (:mod:`rrma.run.context`): the task text,
the parent's files, the best and recent trials with outcomes and feedback, the blackboard, and
the steer notes people sent this agent (``rrma-tui steer``). With ``loop.history`` off (a
control arm) the history fields are empty; steer notes are not history and reach a control arm.

The data both sides speak (:class:`~rrma.trial.Proposal`, :class:`~rrma.trial.Outcome`,
:class:`~rrma.trial.Budget`, :class:`~rrma.trial.Status`, :class:`~rrma.trial.FileEdit`) is
defined in :mod:`rrma.trial` and named here, so a plug-in needs this one import.

**Settings** (:mod:`rrma.declare`): a plug-in declares what it takes (``params_model``, ``sections``) and,
for an oracle, what it can do (``needs_workspace``, ``holds_answers``); the task file is checked against
the plug-in it names, with errors naming the field (:class:`SettingError`, :class:`PluginSettings`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rrma.contain.sandbox import Policy
from rrma.declare import Declares, OracleDeclares, PluginSettings, SettingError
from rrma.registry import AgentError, OracleError
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Budget, FileEdit, Outcome, Proposal, Status

# ----------------------------------------------------------------------------- oracle

ProgressFn = Callable[[dict[str, Any]], None]


def _ignore_progress(_: dict[str, Any]) -> None:
    return None


@dataclass
class EvalContext:
    """Everything one evaluation may look at. Picklable except ``progress`` and ``cancel``."""

    trial_id: str
    trial_dir: Path  # the materialized workspace of this trial (cwd of the trial's program)
    proposal: Proposal
    budget: Budget
    seed: int = 0
    is_baseline: bool = False
    best_score: float | None = None  # current best (for early abort), in the task's direction
    baseline_score: float | None = None
    sigma: float | None = None  # noise floor of the baseline
    progress: ProgressFn = _ignore_progress  # sparse samples, e.g. {"step": 10, "loss": 2.3}
    cancel: threading.Event = field(default_factory=threading.Event)  # set on run stop
    # pass to spawn(guard=...) for every program an agent wrote: the trial's workspace writable, the run
    # dir, the other trials and the oracle's held_out() absent (the executor fills this in; None = no sandbox)
    guard: Policy | None = None
    # a fresh directory only the harness writes (the trial's program never sees it): reports, evaluation
    # inputs and outputs go here, never into trial_dir, where a planted link would redirect the write
    oracle_dir: Path | None = None
    # credential-named variables the task passes to its programs by name (oracle.pass_env); ctx.guard carries
    # them too: an oracle that runs a program with guard=None passes spawn(pass_env=ctx.pass_env)
    pass_env: tuple[str, ...] = ()
    # where the trial's own program's output is appended while it runs (spawn(live_output=...)), for views to
    # follow: a fresh path only the harness writes and the trial never sees (the local executor's
    # RUN/trials/<id>/live.log, rrma.log.store.live_output_path); None: not followed (the Ray executor)
    live_output: Path | None = None


class Oracle(OracleDeclares, ABC):
    """Base class of every oracle. Subclasses set ``kind`` and implement ``evaluate``; they may declare their
    settings and capabilities (:class:`~rrma.declare.OracleDeclares`: ``params_model``, ``sections``,
    ``needs_workspace``, ``holds_answers``), which the task is checked against when it is loaded."""

    kind: ClassVar[str] = "base"
    version: ClassVar[str] = "1"  # bump when scoring changes, so cached outcomes are not reused

    def __init__(self, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> None:
        self.params = dict(params)
        self.metric = metric
        self.direction = direction

    def identity(self) -> str:
        """A stable string naming this oracle and its parameters (part of the cache key)."""
        blob = json.dumps(
            {"kind": self.kind, "version": self.version, "params": self.params, "metric": self.metric},
            sort_keys=True,
            default=str,
        )
        return f"{self.kind}@{self.version}:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        """Called once per run before the baseline. Returns facts for run.json (data hashes...).

        Raise :class:`OracleError` with an actionable message when a requirement is missing.
        """
        return {}

    def held_out(self) -> tuple[Path, ...]:
        """Files and directories no agent's own process may read, once prepared: the answers.

        Held-out data, the sources and compiled forms of what agents must rediscover, the files a
        validation set is built from. The executor hides them from every trial program
        (``ctx.guard``) and the loop from every coding agent's sandbox; an oracle's own scoring
        processes see them only where it shows them (:meth:`rrma.contain.sandbox.Policy.protecting`).
        """
        return ()

    def setup_allowance_s(self) -> float:
        """Seconds one evaluation may spend on a set-up of its own beyond the trial's budget, which the
        oracle itself bounds (a checker loading a file's context before the proof's seconds start). The
        executor's caller abandons an evaluation after the budget, this and
        :data:`rrma.exec.local.ORACLE_GRACE_S`; most oracles have none."""
        return 0.0

    @abstractmethod
    def evaluate(self, ctx: EvalContext) -> Outcome:
        """Judge one trial; never raise for anything the trial did (label it instead)."""

    def close(self) -> None:
        """Release warm resources (REPL pools, servers)."""
        return None


# ----------------------------------------------------------------------------- agent


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
    """What one agent sees before one proposal (built by :func:`rrma.run.context.build_context`)."""

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


class Agent(Declares, ABC):
    """Base class of every agent backend. Constructed as ``cls(config, task, seed)``; it may declare its
    settings (:class:`~rrma.declare.Declares`: ``params_model``, ``sections``), which the task is checked
    against when it is loaded."""

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

    def finish(self, ctx: Context) -> None:
        """Called once when the run has no more work for this agent (the per-theorem policy: every theorem
        is done), with a context that names no theorem: post what was learnt and not posted yet."""
        return None

    def close(self) -> None:
        return None


__all__ = [
    "Agent",
    "AgentError",
    "Budget",
    "Context",
    "EvalContext",
    "FileEdit",
    "Oracle",
    "OracleError",
    "Outcome",
    "PluginSettings",
    "ProgressFn",
    "Proposal",
    "SettingError",
    "Status",
    "TrialSummary",
]
