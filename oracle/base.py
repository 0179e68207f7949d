"""The oracle contract: the fixed judge of a task.

An oracle owns its score. It receives a materialized trial workspace (the parent's files plus
the agent's edit, already validated by the harness) and returns an :class:`Outcome`. Nothing an
agent edits can change how the score is computed: oracles read their scoring code and data
from the package or from read-only workspace files, never from editable ones.

Untrusted work (the agent's program, a proof checker on an agent's proof) must run in a child
process under :func:`rrma.contain.spawn.spawn`, which enforces the wall clock, memory and
output caps from outside and labels the result. The oracle object itself lives in the harness
(one per run, created by :func:`oracle.make_oracle`), so it can keep warm resources (REPL
pools) across trials; ``evaluate`` may be called from several threads at once.
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
from rrma.trial import Budget, Outcome, Proposal

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


class OracleError(Exception):
    """The oracle cannot run at all here (missing toolchain, bad params): a setup problem."""


class Oracle(ABC):
    """Base class of every oracle. Subclasses set ``kind`` and implement ``evaluate``."""

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

    @abstractmethod
    def evaluate(self, ctx: EvalContext) -> Outcome:
        """Judge one trial; never raise for anything the trial did (label it instead)."""

    def close(self) -> None:
        """Release warm resources (REPL pools, servers)."""
        return None
