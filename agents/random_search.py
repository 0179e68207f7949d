"""Offline random search over the constants a task declares in ``search_space``.

Each key is ``file:NAME`` and names a module-level assignment ``NAME = <literal>`` (an optional
trailing comment is kept). A proposal changes one or two of them: half of the time a fresh
sample from the declared distribution, otherwise a local perturbation of the parent's value
(log-normal steps for log_uniform, +-1 or 2 for int, Gaussian steps for uniform). Samples the
agent already proposed are not repeated. When one of its trials is promoted it posts the winning
values to the blackboard, and it reads other agents' winning posts only through the parent
(keep-revert makes the best the parent), so it needs no network and no key.
"""

from __future__ import annotations

import math
import random
from typing import Any

from pydantic import Field

from rrma.contracts import Agent, Context, PluginSettings, TrialSummary
from rrma.task import AgentConfig, SearchDim, TaskConfig
from rrma.trial import FileEdit, Proposal
from rrma.workspace import read_constant, write_constant

MAX_RESAMPLES = 50


def format_value(dim: SearchDim, value: Any) -> str:
    if dim.kind == "int":
        return str(int(value))
    if dim.kind == "choice":
        return repr(value)
    text = f"{float(value):.4g}"
    if "e" not in text and "." not in text:
        text += ".0"
    return text


def parse_number(literal: str | None) -> float | None:
    if literal is None:
        return None
    try:
        return float(literal.replace("_", ""))
    except ValueError:
        return None


class RandomSearchParams(PluginSettings):
    """``agents[].params`` of the random-search backend (checked when the task is loaded: rrma/declare.py)."""

    explore: float = Field(0.5, ge=0, le=1)
    """Chance of sampling a constant afresh from its distribution rather than nudging the current value."""
    max_changes: int = Field(2, ge=1, le=10_000)
    """At most this many constants changed per proposal."""


class RandomSearchAgent(Agent):
    backend = "random-search"
    params_model = RandomSearchParams

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.rng = random.Random(seed)
        keys = config.search_keys or list(task.search_space)
        unknown = [k for k in keys if k not in task.search_space]
        if unknown:
            raise ValueError(f"agent {config.name}: search_keys not in the task's search_space: {', '.join(unknown)}")
        self.dims = {k: task.search_space[k] for k in keys}
        self.explore = float(config.params.get("explore", 0.5))
        self.max_changes = int(config.params.get("max_changes", 2))
        self.seen: set[tuple[tuple[str, str], ...]] = set()
        self.last: TrialSummary | None = None

    def _sample(self, dim: SearchDim, current: Any) -> Any:
        fresh = current is None or self.rng.random() < self.explore
        if dim.kind == "choice":
            options = [c for c in (dim.choices or []) if c != current] or list(dim.choices or [])
            return self.rng.choice(options)
        low, high = float(dim.low), float(dim.high)  # type: ignore[arg-type]
        if dim.kind == "log_uniform":
            value = (math.exp(self.rng.uniform(math.log(low), math.log(high))) if fresh
                     else float(current) * math.exp(self.rng.gauss(0.0, 0.6)))
        elif dim.kind == "int":
            value = (self.rng.randint(int(low), int(high)) if fresh
                     else int(current) + self.rng.choice([-2, -1, 1, 2]))
        else:
            value = self.rng.uniform(low, high) if fresh else float(current) + self.rng.gauss(0.0, 0.2 * (high - low))
        value = min(max(value, low), high)
        return round(value) if dim.kind == "int" else value

    def propose(self, ctx: Context) -> Proposal | None:
        if self.last is not None and self.last.promoted and self.last.score is not None:
            ds = "" if self.last.delta_sigma is None else f" ({self.last.delta_sigma:+.1f}σ over the best)"
            ctx.post(f"new best {self.last.score:.6g}{ds} from {self.last.hypothesis}", trial_id=self.last.trial_id,
                     tags=["insight"])
        self.last = None
        if not self.dims:
            return None
        current: dict[str, Any] = {}
        for key, dim in self.dims.items():
            path, name = key.split(":", 1)
            literal = read_constant(ctx.files.get(path, ""), name)
            if dim.kind == "choice":
                current[key] = None if literal is None else _literal_value(literal)
            else:
                current[key] = parse_number(literal)
        usable = [k for k in self.dims if current[k] is not None or self.dims[k].kind == "choice"]
        usable = [k for k in usable if read_constant(ctx.files.get(k.split(":")[0], ""), k.split(":")[1]) is not None]
        if not usable:
            ctx.record_turn(role="error", text="none of the search_space constants were found in the files")
            return None
        for _ in range(MAX_RESAMPLES):
            count = self.rng.randint(1, min(self.max_changes, len(usable)))
            chosen = sorted(self.rng.sample(usable, count))
            changes = {k: format_value(self.dims[k], self._sample(self.dims[k], current[k])) for k in chosen}
            changes = {k: v for k, v in changes.items() if v != format_value(self.dims[k], current[k])}
            if not changes:
                continue
            signature = (*sorted(changes.items()), ("@parent", ctx.parent_id or ""))
            if signature in self.seen:
                continue
            self.seen.add(signature)
            break
        else:
            ctx.record_turn(role="assistant", text="no new sample found after many tries; stopping")
            return None
        new_files: dict[str, str] = {}
        parts = []
        for key, literal in changes.items():
            path, name = key.split(":", 1)
            text = new_files.get(path, ctx.files[path])
            parts.append(f"{name} {read_constant(text, name)} -> {literal}")
            new_files[path] = write_constant(text, name, literal)
        hypothesis = "; ".join(parts)
        ctx.record_turn(role="assistant", text=f"Random search from {ctx.parent_id}: {hypothesis}")
        edits = [FileEdit(path=p, content=t) for p, t in new_files.items()]
        return Proposal(hypothesis=hypothesis, expected_effect=f"better {self.task.metric.name}", edits=edits,
                        meta={"changes": changes})

    def observe(self, trial: TrialSummary) -> None:
        self.last = trial  # reported on the blackboard at the next propose (which has the context)


def _literal_value(literal: str) -> Any:
    import ast

    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return literal
