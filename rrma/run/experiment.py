"""Experiments: arms x seeds. Does arm A beat arm B, with an honest interval?

Why it exists: a seed's headline is a comparison (SDPO vs GRPO, specialists vs a control arm, early
abort vs none). One run answers nothing: runs differ by seed. An experiment runs every *arm* (a set
of overrides of one task) with the same *seeds*, one run per cell, and reports per arm the
best-so-far curves (against trials and against wall time), the final best with a bootstrap interval
across seeds, paired tests between arms on the seeds they share, and the cost.

The spec (YAML, or ``rrma-tui bench NAME --arms ... --seeds N``)::

    name: demo-history
    bench: demo                      # or task: path/to/task.yaml (relative to this file)
    seeds: 5                         # seeds 0..4, or a list [3, 7, 11]
    set: {budget.max_trials: 12}     # overrides every arm gets
    arms:
      history: {}                                        # the task as it is
      no-history: {loop.history: false, loop.lineage: false}
    concurrency: 2                   # cells at once (default: CPUs / trials per cell; on Ray: every cell)

The experiment directory (the only source of truth, like a run's)::

    EXP/experiment.json      the spec as loaded, the base task's path, the cells (arm, seed, run id)
    EXP/runs/<arm>-s<seed>/  one ordinary run directory per cell (verify, show, export, the TUI all work)

Each cell's run records ``experiment: {id, arm, seed}`` in run.json and ``run.started``. Nothing
else is stored: every figure of the report is folded from the cells' logs, so ``resume`` after a
crash or Ctrl-C (a stop event every cell shares) continues exactly the cells that did not end.

Invariants: the cells of an arm differ only by seed, and the arms only by their overrides (the
spec is checked against the task schema before any cell starts: a typo is a clean error naming the
arm and the field); a cell's seed is the task's ``seed`` field, so arm A and arm B on seed 3 start
from the same random state.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import statistics
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.stats import bootstrap_mean_ci, paired_bootstrap, sign_flip_test
from rrma.task import TaskConfig, TaskError, load_task, read_yaml

EXPERIMENT_JSON = "experiment.json"
BENCH_ROOT = Path(__file__).resolve().parents[2] / "benches"  # rrma/run/experiment.py -> the repository
DONE_REASONS = frozenset({"max_trials", "max_wall_time", "target", "agents_exhausted", "completed", "baseline_failed"})
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


class ExperimentError(ValueError):
    """The experiment spec or directory is missing, malformed, or names an arm or field that does not exist."""


class ExperimentSpec(BaseModel):
    """An experiment: one task, its arms (overrides) and the seeds every arm runs."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Short name (used in the experiment's id)."""
    description: str = ""
    """What the experiment asks."""
    task: str | None = None
    """The task YAML every arm overrides (relative to the spec file)."""
    bench: str | None = None
    """Or a bench name whose task.yaml is used (demo, autoresearch, ...)."""
    seeds: int | list[int] = 5
    """How many seeds (0..N-1), or the seeds themselves; every arm runs each."""
    set: dict[str, Any] = Field(default_factory=dict)
    """Dotted task overrides every arm gets (budget.max_trials: 12)."""
    arms: dict[str, dict[str, Any]]
    """Arm name -> dotted task overrides ({} is the task as it is)."""
    concurrency: int | None = Field(None, ge=1)
    """Cells running at once (default: CPUs / the task's max_concurrent; on Ray every cell)."""

    @field_validator("arms")
    @classmethod
    def _arms(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not value:
            raise ValueError("an experiment needs at least one arm")
        for name, overrides in value.items():
            if not _ARM_NAME.match(name):
                raise ValueError(f"arm name {name!r}: letters, digits, '-', '_', '.' (at most 40), not starting with a sign")
            if not isinstance(overrides, dict):
                raise ValueError(f"arm {name!r}: expected a mapping of dotted task fields, got {type(overrides).__name__}")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: int | list[int]) -> int | list[int]:
        if isinstance(value, int) and not 1 <= value <= 1000:
            raise ValueError(f"seeds must be between 1 and 1000, got {value}")
        if isinstance(value, list) and (not value or len(set(value)) != len(value)):
            raise ValueError(f"seeds must be a non-empty list of different integers, got {value}")
        return value

    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


@dataclass(frozen=True)
class Cell:
    arm: str
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.arm}-s{self.seed}"


# ----------------------------------------------------------------------------- specs


def load_spec(path: Path | str) -> tuple[ExperimentSpec, Path]:
    """Read and validate an experiment YAML; (spec, the base task's path)."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"{path}: no such experiment file")
    try:
        data = read_yaml(path.read_text(encoding="utf-8"))  # refuses an alias bomb
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"{path}: cannot read it: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ExperimentError(f"{path}{where}: malformed YAML: {getattr(exc, 'problem', None) or exc}") from None
    return spec_from_dict(data, source=str(path), base_dir=path.parent.resolve())


def spec_from_dict(data: Any, *, source: str = "<experiment>", base_dir: Path | None = None) -> tuple[ExperimentSpec, Path]:
    if not isinstance(data, dict):
        raise ExperimentError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "unknown field (expected name, description, task or bench, seeds, set, arms, concurrency)"
        raise ExperimentError(f"{source}: {loc}: {msg}") from None
    if (spec.task is None) == (spec.bench is None):
        raise ExperimentError(f"{source}: give exactly one of task (a task YAML) or bench (a bench name)")
    if spec.bench is not None:
        task_path = BENCH_ROOT / spec.bench.replace("-", "_") / "task.yaml"
        if not task_path.is_file():
            raise ExperimentError(f"{source}: bench {spec.bench!r} has no task.yaml (benches with a task: "
                                  f"{', '.join(sorted(p.parent.name.replace('_', '-') for p in BENCH_ROOT.glob('*/task.yaml')))})")
    else:
        task_path = ((base_dir or Path.cwd()) / Path(str(spec.task)).expanduser()).resolve()
        if not task_path.is_file():
            raise ExperimentError(f"{source}: task: no such task file {task_path}")
    for arm in spec.arms:  # every cell's task must load: a typo fails here, before any run
        cell_task(spec, task_path, Cell(arm, spec.seed_list()[0]))
    return spec, task_path


def parse_arm(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME: key=value key=value`` (values read as YAML) -> (name, overrides); for ``bench --arms``."""
    name, sep, rest = text.partition(":")
    name = name.strip()
    if not sep and "=" in name:
        raise ExperimentError(f"--arms {text!r}: expected 'NAME: key=value ...' (a name first)")
    overrides: dict[str, Any] = {}
    for item in rest.split():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ExperimentError(f"--arms {text!r}: {item!r} is not key=value")
        try:
            overrides[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ExperimentError(f"--arms {text!r}: the value of {key} is not valid YAML") from None
    return name, overrides


def cell_task(spec: ExperimentSpec, task_path: Path, cell: Cell) -> TaskConfig:
    """The task of one cell: the base task, the common overrides, the arm's, and the cell's seed."""
    overrides = {**spec.set, **spec.arms[cell.arm], "seed": cell.seed}
    try:
        return load_task(task_path, overrides)
    except TaskError as exc:
        raise ExperimentError(f"arm {cell.arm}: {exc}") from None


# ----------------------------------------------------------------------------- the directory


def new_experiment(spec: ExperimentSpec, task_path: Path, root: Path, *, exp_id: str | None = None) -> Path:
    """Create ``root/<id>/experiment.json`` for a validated spec; returns the experiment directory."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_-]", "-", spec.name)[:40]
    exp_id = exp_id or f"{stamp}-{safe}"
    exp_dir = Path(root) / exp_id
    if (exp_dir / EXPERIMENT_JSON).exists():
        raise ExperimentError(f"{exp_dir}: an experiment is already there (`rrma-tui experiment resume` continues it)")
    (exp_dir / "runs").mkdir(parents=True, exist_ok=True)
    cells = [Cell(arm, seed) for arm in spec.arms for seed in spec.seed_list()]
    record = {"id": exp_id, "spec": spec.model_dump(mode="json"), "task_path": str(task_path),
              "created": datetime.now(UTC).isoformat(), "cells": [
                  {"arm": c.arm, "seed": c.seed, "run_id": c.run_id} for c in cells]}
    tmp = exp_dir / (EXPERIMENT_JSON + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")  # not sorted: the arms keep the order of the spec
    tmp.replace(exp_dir / EXPERIMENT_JSON)
    return exp_dir


@dataclass
class Experiment:
    """An experiment directory as read back: its id, spec, base task and cells."""

    dir: Path
    id: str
    spec: ExperimentSpec
    task_path: Path
    cells: list[Cell]

    def run_dir(self, cell: Cell) -> Path:
        return self.dir / "runs" / cell.run_id

    @property
    def runs_dir(self) -> Path:
        return self.dir / "runs"


def open_experiment(exp_dir: Path | str) -> Experiment:
    exp_dir = Path(exp_dir)
    path = exp_dir / EXPERIMENT_JSON
    if not path.is_file():
        raise ExperimentError(f"{exp_dir}: not an experiment directory (no {EXPERIMENT_JSON})")
    try:
        record = json.loads(path.read_text())
        spec = ExperimentSpec.model_validate(record["spec"])
        cells = [Cell(str(c["arm"]), int(c["seed"])) for c in record["cells"]]
        return Experiment(exp_dir, str(record["id"]), spec, Path(record["task_path"]), cells)
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        raise ExperimentError(f"{path}: unreadable ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None


def cell_state(exp: Experiment, cell: Cell) -> RunState | None:
    run_dir = exp.run_dir(cell)
    if not (run_dir / "events.jsonl").exists():
        return None
    return RunState.fold(RunStore(run_dir).scan().events)


def cell_done(state: RunState | None) -> bool:
    """A cell that ended by itself (budget, target, agents out of ideas); interrupted, stopped or failed ones are not."""
    return state is not None and state.finish_reason in DONE_REASONS


# ----------------------------------------------------------------------------- running


@dataclass
class CellResult:
    cell: Cell
    reason: str  # the run's finish reason, "already done", or "failed: ..."
    run_dir: Path | None = None


CellHook = Callable[[Cell, str], None]  # (cell, "started" | "resumed" | "done: <reason>" | "failed: <message>")


def default_concurrency(exp: Experiment, executor: str) -> int:
    if exp.spec.concurrency is not None:
        return exp.spec.concurrency
    if executor == "ray":
        return len(exp.cells)  # trials queue on the cluster's resources
    per_cell = cell_task(exp.spec, exp.task_path, exp.cells[0]).budget.max_concurrent
    return max(1, (os.cpu_count() or 1) // per_cell)


def run_experiment(exp: Experiment, *, executor: Any = None, executor_name: str = "local",
                   concurrency: int | None = None, stop: threading.Event | None = None,
                   on_event: Callable[[Cell, Any], None] | None = None, on_cell: CellHook | None = None) -> list[CellResult]:
    """Run (or continue) every cell that has not ended by itself; ``concurrency`` cells at a time.

    Each cell is a run driven in a thread of this process (its trials run where ``executor`` says:
    the local process pool, or Ray). A cell that cannot start (a missing API key) is reported and
    the others go on. ``stop`` (Ctrl-C) stops every cell the way it stops one run.
    """
    from rrma.run.loop import resume_run, start_run  # the loop imports agents and oracles: only when running

    stop = stop or threading.Event()
    workers = concurrency or default_concurrency(exp, executor_name)
    results: list[CellResult] = []
    lock = threading.Lock()

    def one(cell: Cell) -> None:
        if stop.is_set():
            return
        state = cell_state(exp, cell)
        if cell_done(state):
            with lock:
                results.append(CellResult(cell, "already done", exp.run_dir(cell)))
            return
        hook: Callable[[Any], None] | None = (lambda event: on_event(cell, event)) if on_event is not None else None
        try:
            if state is None:
                if on_cell is not None:
                    on_cell(cell, "started")
                task = cell_task(exp.spec, exp.task_path, cell)
                result = start_run(task, exp.runs_dir, run_id=cell.run_id, stop=stop, on_event=hook, executor=executor,
                                   experiment={"id": exp.id, "arm": cell.arm, "seed": cell.seed})
            else:
                if on_cell is not None:
                    on_cell(cell, "resumed")
                result = resume_run(exp.run_dir(cell), stop=stop, on_event=hook, executor=executor)
            reason = result.reason
        except Exception as exc:  # one cell's failure (a missing key, a broken task) never stops the others
            reason = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        with lock:
            results.append(CellResult(cell, reason, exp.run_dir(cell)))
        if on_cell is not None:
            on_cell(cell, reason if reason.startswith("failed") else f"done: {reason}")

    exp.runs_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="cell") as pool:
        list(pool.map(one, exp.cells))
    order = {c: i for i, c in enumerate(exp.cells)}
    return sorted(results, key=lambda r: order[r.cell])


# ----------------------------------------------------------------------------- the report


@dataclass
class Curve:
    """Best-so-far of one cell: after each finished agent trial, at its time (seconds the run was driven)."""

    trials: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    best: list[float] = field(default_factory=list)
    start: float | None = None  # the best before the first trial (the baseline)


@dataclass
class CellReport:
    cell: Cell
    status: str  # not started | running | <finish reason>
    baseline: float | None
    final_best: float | None
    improvement: float | None  # final best over the baseline, > 0 better
    trials: int
    wall_seconds: float
    compute_seconds: float  # oracle seconds of every trial (baseline and confirmation repeats too)
    tokens: int
    cost_usd: float
    curve: Curve


@dataclass
class ArmReport:
    name: str
    cells: list[CellReport]
    final: tuple[float, float, float] | None  # (mean, low, high): bootstrap CI of the final best across seeds
    improvement: tuple[float, float, float] | None
    trials: int
    tokens: int
    cost_usd: float
    compute_seconds: float
    wall_seconds: float
    mean_curve: list[tuple[int, float]]  # trials -> mean best over the seeds that got that far
    mean_time_curve: list[tuple[float, float]]  # seconds -> mean best (forward-filled per seed)


@dataclass
class Comparison:
    """Arm ``b`` against arm ``a`` on the seeds both finished; ``delta`` > 0 means b is better."""

    a: str
    b: str
    seeds: list[int]
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # exact paired sign-flip test
    wins: int  # seeds where b is better
    losses: int


@dataclass
class ExperimentReport:
    experiment: Experiment
    direction: str
    metric: str
    arms: list[ArmReport]
    comparisons: list[Comparison]

    def arm(self, name: str) -> ArmReport:
        return next(a for a in self.arms if a.name == name)


def _ts(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def cell_report(exp: Experiment, cell: Cell) -> CellReport:
    run_dir = exp.run_dir(cell)
    events = RunStore(run_dir).scan().events if (run_dir / "events.jsonl").exists() else []
    state = RunState.fold(events)
    curve = Curve()
    best: float | None = None
    driven = 0.0  # seconds of earlier driver sessions
    session: float | None = None
    last = 0.0
    tokens, cost = 0, 0.0
    refused = {r["seq"] for r in state.refused}  # not counted by the fold (a forged promotion): not on the curve
    for ev in events:
        if ev.seq in refused:
            continue
        t = _ts(ev.ts)
        if ev.kind in ("run.started", "run.resumed"):
            if session is not None:
                driven += last - session
            session = t
        last = t
        now = driven + (t - session if session is not None else 0.0)
        if ev.kind == "agent.turn":
            tokens += ev.data.tokens_in + ev.data.tokens_out
            cost += ev.data.cost_usd
        elif ev.kind == "trial.promoted":
            best = ev.data.score
            if curve.start is None and not curve.trials:
                curve.start = best
            elif curve.best:
                curve.best[-1] = best  # a promotion follows the trial.finished of what it promotes
        elif ev.kind == "trial.finished":
            rec = state.trials.get(ev.data.trial_id)
            if rec is not None and not rec.baseline and rec.confirms is None and best is not None:
                curve.trials.append(len(curve.trials) + 1)
                curve.seconds.append(round(now, 3))
                curve.best.append(best)
    final = state.best_history[-1][1] if state.best_history else None
    improvement = state.better(final, state.baseline_mean) if final is not None and state.baseline_mean is not None else None
    wall = driven + (last - session if session is not None else 0.0)
    status = "not started" if not events else (state.finish_reason or "running")
    return CellReport(cell, status, state.baseline_mean, final, improvement, len(state.agent_trials()), round(wall, 3),
                      round(math.fsum(t.seconds for t in state.trials.values()), 3), tokens, round(cost, 6), curve)


def _mean_curve(curves: list[Curve]) -> list[tuple[int, float]]:
    longest = max((len(c.trials) for c in curves), default=0)
    out = []
    for n in range(1, longest + 1):
        values = [c.best[min(n, len(c.best)) - 1] for c in curves if c.best]  # a seed that ended keeps its last best
        if values:
            out.append((n, statistics.fmean(values)))
    return out


def _mean_time_curve(curves: list[Curve], points: int = 60) -> list[tuple[float, float]]:
    usable = [c for c in curves if c.best]
    if not usable:
        return []
    end = max(c.seconds[-1] for c in usable)
    out = []
    for i in range(1, points + 1):
        t = end * i / points
        values = []
        for c in usable:
            k = sum(1 for s in c.seconds if s <= t)
            values.append(c.best[k - 1] if k else (c.start if c.start is not None else c.best[0]))
        out.append((round(t, 3), statistics.fmean(values)))
    return out


def report(exp: Experiment, *, seed: int = 0) -> ExperimentReport:
    """Fold every cell's log into per-arm figures and the paired comparisons (deterministic per ``seed``)."""
    task = cell_task(exp.spec, exp.task_path, exp.cells[0])
    direction, sign = task.metric.direction, (1.0 if task.metric.direction == "maximize" else -1.0)
    by_arm: dict[str, list[CellReport]] = {arm: [] for arm in exp.spec.arms}
    for cell in exp.cells:
        by_arm[cell.arm].append(cell_report(exp, cell))
    arms = []
    for name, cells in by_arm.items():
        finals = [c.final_best for c in cells if c.final_best is not None]
        gains = [c.improvement for c in cells if c.improvement is not None]
        arms.append(ArmReport(
            name=name, cells=cells,
            final=bootstrap_mean_ci(finals, seed=seed) if finals else None,
            improvement=bootstrap_mean_ci(gains, seed=seed) if gains else None,
            trials=sum(c.trials for c in cells), tokens=sum(c.tokens for c in cells),
            cost_usd=round(math.fsum(c.cost_usd for c in cells), 6),
            compute_seconds=round(math.fsum(c.compute_seconds for c in cells), 3),
            wall_seconds=round(math.fsum(c.wall_seconds for c in cells), 3),
            mean_curve=_mean_curve([c.curve for c in cells]),
            mean_time_curve=_mean_time_curve([c.curve for c in cells])))
    comparisons = []
    names = list(by_arm)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            comparisons.append(compare_arms(by_arm[a], by_arm[b], sign, a, b, seed=seed))
    return ExperimentReport(exp, direction, task.metric.name, arms, comparisons)


def compare_arms(cells_a: Iterable[CellReport], cells_b: Iterable[CellReport], sign: float, a: str, b: str,
                 *, seed: int = 0) -> Comparison:
    """Arm b against arm a on their shared, finished seeds: the mean difference of final bests (> 0: b better)."""
    finals_a = {c.cell.seed: c.final_best for c in cells_a if c.final_best is not None and c.status in DONE_REASONS}
    finals_b = {c.cell.seed: c.final_best for c in cells_b if c.final_best is not None and c.status in DONE_REASONS}
    seeds = sorted(set(finals_a) & set(finals_b))
    if not seeds:
        return Comparison(a, b, [], None, None, None, None, 0, 0)
    xa = [sign * float(finals_a[s]) for s in seeds]  # type: ignore[arg-type]
    xb = [sign * float(finals_b[s]) for s in seeds]  # type: ignore[arg-type]
    diffs = [y - x for x, y in zip(xa, xb, strict=True)]
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    if len(seeds) == 1:
        return Comparison(a, b, seeds, diffs[0], None, None, None, wins, losses)
    boot = paired_bootstrap(xa, xb, resamples=10_000, seed=seed)
    return Comparison(a, b, seeds, boot.delta, boot.ci_low, boot.ci_high, sign_flip_test(diffs), wins, losses)


def report_json(rep: ExperimentReport) -> dict[str, Any]:
    """The report as plain JSON (``experiment show --json``)."""
    def ci(x: tuple[float, float, float] | None) -> dict[str, float] | None:
        return None if x is None else {"mean": x[0], "low": x[1], "high": x[2]}

    return {
        "id": rep.experiment.id, "metric": rep.metric, "direction": rep.direction,
        "arms": [{
            "name": a.name, "final_best": ci(a.final), "improvement": ci(a.improvement), "trials": a.trials,
            "tokens": a.tokens, "cost_usd": a.cost_usd, "compute_seconds": a.compute_seconds,
            "wall_seconds": a.wall_seconds, "mean_curve": a.mean_curve, "mean_time_curve": a.mean_time_curve,
            "cells": [{"seed": c.cell.seed, "run_id": c.cell.run_id, "status": c.status, "final_best": c.final_best,
                       "improvement": c.improvement, "trials": c.trials, "wall_seconds": c.wall_seconds,
                       "compute_seconds": c.compute_seconds, "tokens": c.tokens, "cost_usd": c.cost_usd,
                       "curve": {"trials": c.curve.trials, "seconds": c.curve.seconds, "best": c.curve.best}}
                      for c in a.cells],
        } for a in rep.arms],
        "comparisons": [{"a": c.a, "b": c.b, "seeds": c.seeds, "delta": c.delta, "ci": [c.ci_low, c.ci_high],
                         "p_value": c.p_value, "wins": c.wins, "losses": c.losses} for c in rep.comparisons],
    }


def export_experiment(exp: Experiment, out: Path) -> list[Any]:
    """Export every started cell's run (``runs``, ``trials``... and the ``experiments`` rows) to SQLite."""
    from rrma.log.export import export_runs

    dirs = [exp.run_dir(c) for c in exp.cells if (exp.run_dir(c) / "events.jsonl").exists()]
    if not dirs:
        raise ExperimentError(f"{exp.dir}: no cell has started yet; nothing to export")
    return export_runs(dirs, out)


def find_experiments(root: Path) -> list[Path]:
    """Experiment directories under ``root`` (newest first)."""
    with contextlib.suppress(OSError):
        found = [p for p in Path(root).iterdir() if (p / EXPERIMENT_JSON).is_file()]
        return sorted(found, key=lambda p: p.name, reverse=True)
    return []


__all__ = [
    "ArmReport", "Cell", "CellReport", "Comparison", "Experiment", "ExperimentError", "ExperimentReport",
    "ExperimentSpec", "cell_done", "cell_report", "cell_task", "compare_arms", "export_experiment",
    "find_experiments", "load_spec", "new_experiment", "open_experiment", "parse_arm", "report", "report_json",
    "run_experiment", "spec_from_dict",
]
