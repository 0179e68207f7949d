"""Trials, proposals and outcomes: the nouns every other module speaks.

A *proposal* is what an agent asks for (a hypothesis plus file edits, or a proof body);
a *trial* is one proposal evaluated by the oracle against a parent snapshot; an *outcome*
is what the oracle (or the harness, for invalid edits and limits) says about it.

Invariant: an outcome's ``status`` is one of :class:`Status`; only ``ok`` outcomes carry a
score that can be promoted. Everything here is plain data (pydantic), safe to put in events.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Status(StrEnum):
    """How a trial ended. The harness labels limits; the oracle labels the rest."""

    ok = "ok"  # the oracle scored it
    rejected = "rejected"  # the oracle ran it and said no (a proof that does not check, a cheat)
    invalid = "invalid"  # the edit itself was refused before any evaluation (bad path, binary...)
    crash = "crash"  # the program failed: non-zero exit, signal, no metric, output flood
    timeout = "timeout"  # wall-clock budget exceeded; killed from outside
    oom = "oom"  # memory budget exceeded; killed from outside (or MemoryError)
    disk = "disk"  # disk budget used up: its workspace's file system (or /tmp) full, or more than it may found there
    aborted = "aborted"  # stopped early by the oracle (e.g. a predicted loss that cannot win)


class FileEdit(BaseModel):
    """One edit of one workspace file.

    Either ``content`` (the whole new file) or ``replacements`` (search/replace pairs applied
    in order; each ``search`` must occur exactly once in the current text). ``delete`` removes
    the file (only allowed for editable files).
    """

    model_config = ConfigDict(extra="forbid")

    path: str
    content: str | None = None
    replacements: list[tuple[str, str]] = Field(default_factory=list)
    delete: bool = False


class Proposal(BaseModel):
    """What an agent submits: a hypothesis and either file edits or a proof body."""

    model_config = ConfigDict(extra="forbid")

    hypothesis: str = ""
    expected_effect: str = ""
    edits: list[FileEdit] = Field(default_factory=list)
    proof: str | None = None  # proof oracles: the proof body only, never the statement
    theorem: str | None = None  # proof oracles: which theorem the proof is for
    parent: str | None = None  # tree policy: the trial to branch from (None = policy default)
    meta: dict[str, Any] = Field(default_factory=dict)  # agent-private (e.g. sampled params)


class Outcome(BaseModel):
    """What the oracle (or the harness) concluded about one trial."""

    model_config = ConfigDict(extra="forbid")

    status: Status
    score: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    feedback: str = ""  # the text the agent sees
    log: str = ""  # captured output (head and tail, capped); stored as a blob by the harness
    seconds: float = 0.0  # wall-clock seconds of the evaluation

    @property
    def scored(self) -> bool:
        return self.status == Status.ok and self.score is not None


class Budget(BaseModel):
    """Limits for one evaluation, enforced from outside the evaluated process."""

    model_config = ConfigDict(extra="forbid")

    seconds: float = 60.0  # wall clock
    memory_mb: int = 2048  # memory of the whole trial (its cgroup; else resident memory of its process group)
    max_processes: int = 1024  # processes and threads of the whole trial at once (its cgroup's pids.max)
    max_output_bytes: int = 8 * 1024 * 1024  # more output than this is a crash (flood)
    disk_mb: int = 4096  # MiB the trial may hold in its workspace (its own file system, rrma.contain.disk) and in /tmp
    num_cpus: float = 1.0
    num_gpus: float = 0.0
