"""What the audit's rules look for in a run: the metric, the oracle's files, the run's own files, the answers.

Built from the run's folded state alone (the task snapshot of ``run.started`` and the oracle's held-out
paths it records), so an old run is audited the same way as a live one; runs written before
``run.started`` recorded ``held_out`` fall back to the path-like strings of ``oracle.params``.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.audit.commands import Protected
from rrma.log.state import RunState
from rrma.registry import oracle_class

# the run's own files: its log, head record, checkpoint, blobs, the outcome cache (rrma/log/store.py, rrma/run/cache.py)
RUN_FILES = ("events.jsonl", "head.json", ".checkpoint", "cache.sqlite", "run.json", "/blobs")
PATHLIKE = re.compile(r"^(/|\./|\.\./|~/)|\.(v|vo|vos|vok|glob|lean|olean|ilean|jsonl|json|parquet|txt|csv|py)$")
SEED_WORDS = re.compile(r"\b(seed|RRMA_SEED|manual_seed|random\.Random|np\.random\.seed|default_rng|set_seed)\b")


def _path_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if PATHLIKE.search(value.strip()) else []
    if isinstance(value, list | tuple):
        return [p for v in value for p in _path_strings(v)]
    if isinstance(value, dict):
        return [p for v in value.values() for p in _path_strings(v)]
    return []


@dataclass
class AuditScope:
    run_dir: Path
    metric: str = "score"
    direction: str = "minimize"
    description: str = ""  # the task's description: it may name the metric in words (MetricWords)
    oracle_kind: str = ""
    editable: list[str] = field(default_factory=list)
    readonly: list[str] = field(default_factory=list)
    scorer_files: list[str] = field(default_factory=list)
    held_out: list[str] = field(default_factory=list)  # absolute paths (or, for old runs, path-like params)
    theorems: list[str] = field(default_factory=list)  # names an agent must prove without looking them up
    holds_answers: bool = False  # the oracle declares its held-out data the answers (rrma/declare.py)

    @classmethod
    def of(cls, state: RunState, run_dir: Path) -> AuditScope:
        task = state.task or {}
        oracle = task.get("oracle") or {}
        params = oracle.get("params") or {}
        workspace = task.get("workspace") or {}
        metric = task.get("metric") or {}
        kind = str(oracle.get("kind") or "")
        # what the oracle declares (rrma/declare.py); one that does not resolve here declares nothing
        declared = oracle_class(kind) if kind else None
        # old runs: the path-like params, but never those the oracle lets agents read (its program, its scorer)
        readable = set(declared.readable_params) if declared is not None else set()
        held = (list(state.held_out) if state.held_out is not None
                else _path_strings({k: v for k, v in params.items() if k not in readable}))
        theorems = [str(t) for t in params.get("theorems") or [] if isinstance(t, str)]
        theorems += sorted({t.theorem for t in state.trials.values() if t.theorem and t.theorem not in theorems})
        return cls(
            run_dir=run_dir.absolute(), metric=str(metric.get("name") or "score"),
            description=str(task.get("description") or ""),
            direction=str(metric.get("direction") or "minimize"), oracle_kind=kind,
            editable=list(workspace.get("editable") or []), readonly=list(workspace.get("readonly") or []),
            scorer_files=declared.scoring_files(oracle) if declared is not None else [], held_out=held,
            theorems=theorems, holds_answers=declared is not None and declared.holds_answers,
        )

    @property
    def answers_are_held_out(self) -> bool:
        """Reading the held-out paths is looking up the answer (a proof bench's theorems, or an oracle that declares
        ``holds_answers``: rrma/declare.py), not only the scorer's data. An oracle that does not resolve here (its
        plug-in is not installed) is read as holding none: :meth:`of` asks the registry once."""
        return bool(self.theorems) or self.holds_answers

    def run_markers(self) -> list[str]:
        """Strings whose presence in a tool call means it reaches for the run's own files."""
        run = str(self.run_dir)
        runs = self.run_dir.parent  # the runs beside it; not when it holds the agents' own scratch (/tmp, /)
        scratch = Path(tempfile.gettempdir()).absolute()
        beside = [] if runs == scratch or runs in scratch.parents else [str(runs).rstrip("/") + "/"]
        return [run, *beside, *RUN_FILES]

    def protected(self) -> Protected:
        """What a tool call must not reach for, as rrma/audit/commands.py matches it: the run's directory, the runs
        beside it (unless that is the agents' own scratch), the run's file names, the held-out paths and names."""
        runs = self.run_dir.parent
        scratch = Path(tempfile.gettempdir()).absolute()
        beside = None if runs == scratch or runs in scratch.parents else str(runs)
        held = [h for h in self.held_markers() if h.startswith("/")]
        names = [h for h in self.held_markers() if not h.startswith("/")]
        return Protected(str(self.run_dir), beside, RUN_FILES, tuple(held), tuple(names))

    def held_markers(self) -> list[str]:
        """The held-out paths and their file names (a search by name reaches them too)."""
        own = {*self.scorer_files, *self.readonly, *self.editable}  # the workspace's own files: never held out
        out: list[str] = []
        for raw in self.held_out:
            if raw in own:
                continue
            out.append(raw)
            name = Path(raw).name
            if name and len(name) >= 4 and name not in out and name not in own:
                out.append(name)
        return out
