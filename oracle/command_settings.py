"""The command and noop oracles' settings, as they declare them (rrma/declare.py): checked when a task is loaded.

Why it exists: what ``oracle.params`` and ``oracle.scorer`` mean for the command oracle, and the rules that
tie them to the rest of the task (a scorer is never editable, a metric its program prints is self-reported),
are the command oracle's knowledge, not the task table's. :class:`~oracle.command.CommandOracle` declares
:class:`CommandParams` and the ``scorer`` section (:class:`ScorerConfig`), and its hooks are the functions
here. The invariant they keep: the metric of a command task either comes from an oracle-owned scorer that
agents cannot edit, or is labelled ``self-reported``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from rrma.declare import PluginSettings, SettingError


class ScorerConfig(PluginSettings):
    """The command oracle's own scorer: the metric comes from it, never from what a trial's program prints.

    Its files live in the task's workspace (read-only to agents); the oracle copies them at prepare
    time and restores them from that copy into its own directory before each scoring (never from a
    trial). The scorer runs in a process of its own, with the trial's workspace read-only and no
    network, and reads the agent's files as data (oracle/command.py).
    """

    only_for: ClassVar[str] = "only the {owners} oracle runs a scorer (the {name} oracle computes its metric itself)"

    files: list[str] = Field(default_factory=list)
    """The scorer's files, relative to workspace.source; agents may read them, never edit them."""
    command: list[str] = Field(default_factory=list)
    """The scorer's argv, run in the oracle's directory ({python}: the harness's interpreter, {trial_dir}: the trial's workspace); its `name: value` output is the metric. Empty: no scorer."""
    reads: Literal["proposal", "outputs"] = "proposal"
    """proposal: score the workspace as proposed, before the trial's program runs (the program cannot rewrite it); outputs: after the program, reading what it wrote."""
    seconds: float = Field(60.0, gt=0, le=86400)
    """Wall-clock limit of one scoring process (seconds); its memory limit is the trial's."""


class CommandParams(PluginSettings):
    """``oracle.params`` of the command oracle."""

    command: str | list[str] | None = None
    """The trial's own program: a string split like a shell would (no shell) or a list of arguments ({python}: the running interpreter); optional with an oracle.scorer."""
    env: dict[str, Any] = Field(default_factory=dict)
    """Extra environment variables of the program (RRMA_SEED and RRMA_TRIAL_ID are always set)."""
    scorer: dict[str, Any] | None = None
    """Set from oracle.scorer when the task is loaded (never written by hand)."""


class NoopParams(PluginSettings):
    """``oracle.params`` of the noop oracle (harness overhead and executor scaling)."""

    score: float = 0.0
    """The score every trial gets."""
    sleep: float = Field(0.0, ge=0, le=86400)
    """Seconds each trial waits before it is scored (a sleeping trial needs no core)."""


def scorer_of(oracle: Any) -> ScorerConfig:
    """The task's oracle.scorer (defaults where the task has none)."""
    found = oracle.section("scorer")
    return found if isinstance(found, ScorerConfig) else ScorerConfig.model_validate(found or {})


def fold_scorer(oracle: Any) -> None:
    """The scorer reaches the oracle as ``params["scorer"]`` (so it is part of the cache key and travels with
    every job, Ray's included); a hand-written ``params.scorer`` would bypass the task's checks and is refused
    (a run.json snapshot carries both, equal)."""
    scorer = scorer_of(oracle)
    folded = scorer.model_dump(mode="json") if scorer.command else None
    given = oracle.params.get("scorer")
    if given is not None and given != folded:
        raise SettingError("oracle", "params.scorer is set from oracle.scorer; write the scorer there")
    if folded is not None:
        oracle.params = {**oracle.params, "scorer": folded}


def program_reason(oracle: Any, metric: str) -> str | None:
    """Why the metric is self-reported: the oracle runs a program (``params.command``) with no scorer (with
    neither, the oracle refuses to start); None when a scorer computes it."""
    if scorer_of(oracle).command or oracle.params.get("command") is None:
        return None
    return (f"the command oracle without oracle.scorer reads `{metric}` from what the trial's own program prints "
            "(a program agents edit); say `metric.source: self-reported`, or add an oracle.scorer that computes it")


def check_scorer(task: Any) -> None:
    """The scorer is never editable by agents, and a metric it computes is never labelled ``self-reported``."""
    from rrma.workspace import EditRules, InvalidEdit, normalize_path

    scorer = scorer_of(task.oracle)
    if scorer.files and not scorer.command:
        raise SettingError("oracle.scorer.command", "empty, but oracle.scorer.files names files; "
                           "give the command that runs the scorer")
    if not scorer.command:
        return
    if task.metric.source == "self-reported":
        raise SettingError("metric.source", f"self-reported, but oracle.scorer computes `{task.metric.name}`; "
                           "remove the line (the default is oracle)")
    rules = [("workspace.editable", EditRules(task.workspace.editable, task.workspace.readonly))]
    rules += [(f"agents[{a.name}].editable", EditRules(a.editable, task.workspace.readonly))
              for a in task.agents if a.editable]
    for name in scorer.files:
        try:
            path = normalize_path(name)
        except InvalidEdit as exc:
            raise SettingError("oracle.scorer.files", str(exc)) from None
        if any(ch in path for ch in "*?["):
            raise SettingError("oracle.scorer.files", f"{path!r} is a pattern; name each file")
        for field, rule in rules:
            if rule.is_editable(path):
                raise SettingError("oracle.scorer.files", f"{path} is editable by agents ({field}); "
                                   "a scorer must be read-only (list it in workspace.readonly)")


def check_scorer_files(task: Any, workspace: Path) -> None:
    """Each of the scorer's files is a regular file of the task's workspace folder."""
    for name in scorer_of(task.oracle).files:
        if not (workspace / name).is_file() or (workspace / name).is_symlink():
            raise SettingError("oracle.scorer.files", f"{name} is not a file in {workspace}")


__all__ = ["CommandParams", "NoopParams", "ScorerConfig", "check_scorer", "check_scorer_files", "fold_scorer",
           "program_reason", "scorer_of"]
