"""The generic ``command`` oracle: a program in the trial dir, and the scorer that owns the metric.

Parameters (``oracle.params`` in the task YAML):

* ``command``: the trial's own program (a string split like a shell would, no shell involved, or a
  list of arguments; ``{python}`` is the running interpreter). Runs with the trial's workspace as
  cwd, sandboxed like every trial program (``ctx.guard``). Optional when the task has a scorer. Its
  output is appended to ``ctx.live_output`` as it arrives (rrma.contain.live), for a view to follow.
* ``env``: extra environment variables of the program. ``RRMA_SEED`` (the trial's seed) and
  ``RRMA_TRIAL_ID`` are always set.

These and the scorer are declared in :mod:`oracle.command_settings` and checked when the task is loaded.

Where the metric comes from (``metric.source``, rrma/task.py):

* **With a scorer** (``oracle.scorer``, which reaches the oracle as ``params["scorer"]``): the
  metric is computed by oracle code. :meth:`CommandOracle.prepare` copies the scorer's files from
  the task's own workspace (never a trial's) into ``<run_dir>/oracle/scorer`` and keeps their bytes
  and sha256; before each scoring they are written afresh into ``ctx.oracle_dir`` (a directory no
  trial program sees) and the scorer runs there through :func:`rrma.contain.spawn.spawn`, under
  :meth:`Policy.for_scorer <rrma.contain.sandbox.Policy.for_scorer>`: the trial's workspace and its
  own directory read-only, nothing writable, no network. It reads the agent's files as data (the
  demo's score.py parses objective.py's constants, never runs it). Only its stdout is read for
  the metric: its stderr is kept apart (``spawn(stderr_apart=True)``), so a scorer that echoes an
  agent's text as a warning cannot print a metric line that way. With ``reads: proposal`` (the
  default) it runs before the trial's program, on the workspace exactly as proposed; with
  ``reads: outputs`` after it, on what the program wrote. The metric is the scorer's ``name:
  value`` output on exit 0; exit 2 with an ``invalid: <reason>`` line is ``invalid`` (the artifact
  cannot be read as data); anything else is a ``crash`` of the trial. The program, where the task
  runs one, runs either way: its failure (crash, timeout, oom) is the trial's, whatever the scorer
  said, and what it printed is kept only as ``reported_<name>`` metrics.
* **Without a scorer** the metric is the program's own ``name: value`` line (the last occurrence
  of a name wins, like autoresearch's greppable summaries): it is **self-reported**, and the task
  must say ``metric.source: self-reported`` (every surface then marks its results). A missing
  metric is a ``crash`` with the output's tail as feedback.

A line ``progress: {json object}`` of the program is a progress sample (``trial.progress``): with
``frac`` and ``score_est``, or ``items`` and ``hits``, the loop's early abort can stop the trial
(rrma/run/abort.py, ``loop.early_abort``). Samples are bounded, since the program is the agent's: a
flat object of at most :data:`PROGRESS_MAX_KEYS` numbers, booleans or short strings, at most
:data:`PROGRESS_MAX_CHARS` characters of JSON, at most :data:`PROGRESS_BURST` at once and then
:data:`PROGRESS_PER_SECOND` a second, at most :data:`MAX_PROGRESS_SAMPLES` a trial. Anything else
is dropped, never an error in the thread that reads the output.

Limits (time, memory, output) are enforced by :func:`rrma.contain.spawn.spawn`, which labels
timeout / oom / crash.

``noop`` is an oracle that does nothing and returns a fixed score: it measures harness overhead.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oracle.command_settings import (
    CommandParams,
    NoopParams,
    ScorerConfig,
    check_scorer,
    check_scorer_files,
    fold_scorer,
    program_reason,
)
from rrma.contain.files import LinkRefused, fresh_dir, read_bytes, write_bytes
from rrma.contain.sandbox import Policy, harness_python
from rrma.contain.spawn import ProcessResult, spawn
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.trial import Budget, Outcome, Status

MAX_PROGRESS_SAMPLES = 300  # progress samples of one trial that become trial.progress events (the rest are dropped)
PROGRESS_MAX_CHARS = 512  # JSON text of one sample
PROGRESS_MAX_KEYS = 16
PROGRESS_MAX_STRING = 64  # characters of a string value
PROGRESS_BURST = 50  # samples forwarded at once before the rate applies
PROGRESS_PER_SECOND = 10.0  # sustained rate of forwarded samples
METRIC_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_./-]*)\s*:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)\s*$")
INVALID_EXIT = 2  # a scorer's exit code for an artifact it cannot read as data (with an `invalid: ...` line)
SCORER_ENV = ("PATH", "LANG", "LC_ALL", "TMPDIR")  # passed to the scorer from the harness's environment


def parse_metrics(output: str) -> dict[str, float]:
    """Every ``name: number`` line of ``output``; the last occurrence of a name wins."""
    metrics: dict[str, float] = {}
    for line in output.splitlines():
        match = METRIC_LINE.match(line)
        if match:
            metrics[match.group(1)] = float(match.group(2))
    return metrics


def parse_progress(line: str) -> dict[str, Any] | None:
    """The sample of a ``progress: {...}`` line, or None for anything else (never raises).

    Accepted: a flat JSON object of at most PROGRESS_MAX_KEYS keys whose values are finite numbers,
    booleans, null or strings of at most PROGRESS_MAX_STRING characters, in at most
    PROGRESS_MAX_CHARS characters. A nested value, a deep structure or a long line is dropped
    before it costs more than its length to look at.
    """
    if not line.startswith("progress:"):
        return None
    text = line[len("progress:"):].strip()
    if len(text) > PROGRESS_MAX_CHARS or not text.startswith("{"):
        return None
    try:
        sample = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(sample, dict) or len(sample) > PROGRESS_MAX_KEYS:
        return None
    for key, value in sample.items():
        if len(key) > PROGRESS_MAX_STRING:
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, str) and len(value) > PROGRESS_MAX_STRING:
            return None
        if not (value is None or isinstance(value, bool | int | float | str)):
            return None
    return sample


class ProgressGate:
    """Which of a trial's progress samples are forwarded: a token bucket plus a cap per trial."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.tokens = float(PROGRESS_BURST)
        self.last = clock()
        self.forwarded = 0

    def admit(self) -> bool:
        now = self.clock()
        self.tokens = min(float(PROGRESS_BURST), self.tokens + (now - self.last) * PROGRESS_PER_SECOND)
        self.last = now
        if self.forwarded >= MAX_PROGRESS_SAMPLES or self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        self.forwarded += 1
        return True


def command_argv(command: Any, *, what: str = "params.command", python: list[str] | None = None) -> list[str]:
    """The argv of a command given as a string or a list; ``{python}`` becomes ``python`` (default:
    the running interpreter)."""
    if isinstance(command, str):
        argv = shlex.split(command)
    elif isinstance(command, list) and all(isinstance(x, str) for x in command):
        argv = list(command)
    else:
        raise OracleError(f"command oracle: {what} must be a string or a list of strings")
    if not argv:
        raise OracleError(f"command oracle: {what} is empty")
    out: list[str] = []
    for arg in argv:
        out.extend((python or [sys.executable]) if arg == "{python}" else [arg])
    return out


class ScorerSpec(BaseModel):
    """``params["scorer"]``: the task's ``oracle.scorer`` (:class:`~oracle.command_settings.ScorerConfig`, checked
    when the task is loaded)."""

    model_config = ConfigDict(extra="forbid")

    files: list[str] = Field(default_factory=list)
    command: list[str]
    reads: Literal["proposal", "outputs"] = "proposal"
    seconds: float = Field(60.0, gt=0)


class CommandOracle(Oracle):
    kind = "command"
    version = "2"  # 2: the oracle.scorer
    # what it takes (rrma/declare.py; oracle/command_settings.py): params, the oracle.scorer section, and the rules
    # that tie them to the task (a scorer never editable, a metric the program prints is self-reported)
    params_model = CommandParams
    sections = {"scorer": ScorerConfig}
    readable_params = ("command", "scorer")  # the program and the scorer: readable by design, never held out

    @classmethod
    def scoring_files(cls, recorded: Any) -> list[str]:
        scorer = recorded.get("scorer") if isinstance(recorded, dict) else None
        return [str(f) for f in (scorer or {}).get("files") or []] if isinstance(scorer, dict) else []

    @classmethod
    def settle(cls, config: Any) -> None:
        fold_scorer(config)

    @classmethod
    def self_reported(cls, config: Any, metric: str = "score") -> str | None:
        return program_reason(config, metric)

    @classmethod
    def check_task(cls, task: Any) -> None:
        check_scorer(task)

    @classmethod
    def check_files(cls, task: Any, workspace: Path) -> None:
        check_scorer_files(task, workspace)

    def __init__(self, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.scorer: ScorerSpec | None = None
        if params.get("scorer") is not None:
            try:
                self.scorer = ScorerSpec.model_validate(params["scorer"])
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
                raise OracleError(f"command oracle: scorer: {problems}") from None
            command_argv(self.scorer.command, what="scorer.command")  # checked now, built per trial
        if params.get("command") is None and self.scorer is None:
            raise OracleError("command oracle: params.command is required (or an oracle.scorer)")
        self.argv = command_argv(params["command"]) if params.get("command") is not None else None
        env = params.get("env", {})
        if not isinstance(env, dict):
            raise OracleError("command oracle: params.env must be a mapping")
        self.extra_env = {str(k): str(v) for k, v in env.items()}
        self.scorer_files: dict[str, bytes] | None = None  # the pristine copies, from prepare()

    # ------------------------------------------------------------------ set-up

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        """Freeze the scorer's files from the task's own workspace (never a trial's) into the run."""
        if self.scorer is None:
            return {}
        frozen: dict[str, bytes] = {}
        for name in self.scorer.files:
            try:
                frozen[name] = read_bytes(workspace, name, limit=16 * 2**20)
            except (OSError, ValueError) as exc:
                raise OracleError(f"command oracle: scorer file {name} of {workspace}: {exc}") from None
        record = Path(run_dir) / "oracle" / "scorer"
        record.mkdir(parents=True, exist_ok=True)
        for name, data in frozen.items():
            write_bytes(record, name, data)
        self.scorer_files = frozen
        return {"scorer": {"command": self.scorer.command, "reads": self.scorer.reads,
                           "files": {name: hashlib.sha256(data).hexdigest() for name, data in frozen.items()}}}

    # ------------------------------------------------------------------ one trial

    def evaluate(self, ctx: EvalContext) -> Outcome:
        scorer = self.scorer
        if scorer is None:
            assert self.argv is not None
            return self._self_reported(ctx, self._run_program(ctx, self.argv))
        if self.scorer_files is None:
            raise OracleError("command oracle: the scorer was not prepared (prepare() copies its files)")
        started = time.monotonic()
        score = self._run_scorer(ctx, scorer) if scorer.reads == "proposal" else None  # before the program
        program = self._run_program(ctx, self.argv) if self.argv is not None else None
        if score is None and (program is None or program.status == Status.ok):
            score = self._run_scorer(ctx, scorer)
        outcome = self._scored(program, score)
        outcome.seconds = time.monotonic() - started
        return outcome

    def _env(self, ctx: EvalContext) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["RRMA_SEED"] = str(ctx.seed)
        env["RRMA_TRIAL_ID"] = ctx.trial_id
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        return env

    def _run_program(self, ctx: EvalContext, argv: list[str]) -> ProcessResult:
        """The trial's own program, sandboxed (``ctx.guard``), its progress lines bounded."""
        gate = ProgressGate()

        def on_line(line: str) -> str | None:
            if line.startswith("progress:"):  # the program is the agent's: bounded in shape, size and rate
                sample = parse_progress(line)
                if sample is not None and gate.admit():
                    ctx.progress(sample)
            return None

        try:
            return spawn(argv, cwd=ctx.trial_dir, budget=ctx.budget, env=self._env(ctx), cancel=ctx.cancel,
                         guard=ctx.guard, on_line=on_line, pass_env=ctx.pass_env,
                         live_output=ctx.live_output)  # followed live (rrma-tui's trial view)
        except FileNotFoundError as exc:
            reason = f"command not found: {exc.filename}"
            return ProcessResult(status=Status.crash, returncode=None, reason=reason, seconds=0.0, peak_rss_mb=0.0,
                                 output=reason, output_bytes=0)

    def _run_scorer(self, ctx: EvalContext, scorer: ScorerSpec) -> ProcessResult:
        """The oracle's scorer, from its pristine files, apart from the trial: it reads the trial's
        workspace as data (read-only) and writes nothing."""
        assert self.scorer_files is not None
        trial_dir = Path(ctx.trial_dir)
        scratch: tempfile.TemporaryDirectory[str] | None = None
        if ctx.oracle_dir is not None:
            home = fresh_dir(Path(ctx.oracle_dir) / "scorer")
        else:  # an oracle driven without an executor (a script, a test): a directory of its own
            scratch = tempfile.TemporaryDirectory(prefix="rrma-scorer-")
            home = Path(scratch.name)
        try:
            for name, data in self.scorer_files.items():  # restored before every scoring
                write_bytes(home, name, data)
            argv = [str(trial_dir) if a == "{trial_dir}" else a
                    for a in command_argv(scorer.command, what="scorer.command", python=harness_python())]
            env = {k: os.environ[k] for k in SCORER_ENV if k in os.environ}
            env.update(PYTHONDONTWRITEBYTECODE="1", RRMA_SEED=str(ctx.seed), RRMA_TRIAL_ID=ctx.trial_id,
                       RRMA_TRIAL_DIR=str(trial_dir), HOME=str(home))
            guard = None if ctx.guard is None else Policy.for_scorer((trial_dir, home), required=ctx.guard.required)
            try:
                # stderr apart: a scorer that echoes the agent's text as a warning cannot print its metric
                return spawn(argv, cwd=home, budget=Budget(seconds=scorer.seconds, memory_mb=ctx.budget.memory_mb),
                             env=env, cancel=ctx.cancel, guard=guard, stderr_apart=True)
            except FileNotFoundError as exc:
                raise OracleError(f"command oracle: scorer command not found: {exc.filename}") from None
        except LinkRefused as exc:  # the oracle's own directory: only the harness writes there
            raise OracleError(f"command oracle: scorer directory: {exc}") from None
        finally:
            if scratch is not None:
                scratch.cleanup()

    def _self_reported(self, ctx: EvalContext, result: ProcessResult) -> Outcome:
        """No scorer: the metric is the program's own line (metric.source: self-reported)."""
        metrics: dict[str, Any] = parse_metrics(result.output)
        metrics["peak_rss_mb"] = round(result.peak_rss_mb, 1)
        if result.status != Status.ok:
            return _failed(result, metrics, result.output)
        value = metrics.get(self.metric)
        if value is None or not math.isfinite(value):
            why = "no" if value is None else f"a non-finite ({value})"
            return Outcome(
                status=Status.crash,
                metrics=metrics,
                feedback=f"crash: {why} `{self.metric}: <number>` line in the output\n--- output tail ---\n{result.tail}",
                log=result.output,
                seconds=result.seconds,
            )
        return Outcome(status=Status.ok, score=value, metrics=metrics, feedback=f"{self.metric}: {value:.6g}",
                       log=result.output, seconds=result.seconds)

    def _scored(self, program: ProcessResult | None, score: ProcessResult | None) -> Outcome:
        """The outcome of a trial with a scorer: the program's failure is the trial's; the metric is the
        scorer's; what the program printed is kept as ``reported_*``."""
        metrics: dict[str, Any] = {}
        parts: list[str] = []
        if program is not None:
            metrics.update({f"reported_{k}": v for k, v in parse_metrics(program.output).items()})
            metrics["peak_rss_mb"] = round(program.peak_rss_mb, 1)
            parts.append(program.output)
        if score is not None:
            parts.append(f"=== oracle scorer ({score.reason}) ===\n{score.output}")
            if score.stderr:
                parts.append(f"=== oracle scorer's stderr (never read for the metric) ===\n{score.stderr}")
        log = "\n".join(parts)
        if program is not None and program.status != Status.ok:
            return _failed(program, metrics, log)
        assert score is not None
        if score.status in (Status.timeout, Status.oom, Status.aborted):
            return Outcome(status=score.status, metrics=metrics, log=log,
                           feedback=f"{score.status.value}: the oracle's scorer: {score.reason}")
        if score.status != Status.ok:
            reasons = [line[len("invalid:"):].strip() for line in score.output.splitlines() if line.startswith("invalid:")]
            if score.returncode == INVALID_EXIT and reasons:
                return Outcome(status=Status.invalid, metrics=metrics, log=log, feedback=f"invalid: {reasons[-1]}")
            return Outcome(status=Status.crash, metrics=metrics, log=log,
                           feedback=f"crash: the oracle's scorer could not score this trial ({score.reason})\n"
                                    f"--- scorer output tail ---\n{_scorer_tail(score)}")
        scored = parse_metrics(score.output)
        value = scored.get(self.metric)
        if value is None or not math.isfinite(value):
            why = "no" if value is None else f"a non-finite ({value})"
            return Outcome(status=Status.crash, metrics=metrics, log=log,
                           feedback=f"crash: the oracle's scorer printed {why} `{self.metric}: <number>` line\n"
                                    f"--- scorer output tail ---\n{_scorer_tail(score)}")
        metrics.update(scored)
        feedback = f"{self.metric}: {value:.6g}"
        reported = metrics.get(f"reported_{self.metric}")
        if reported is not None and reported != value:
            feedback += f" (the program printed {reported:.6g}; the oracle's scorer counts)"
        return Outcome(status=Status.ok, score=value, metrics=metrics, feedback=feedback, log=log)


def _scorer_tail(score: ProcessResult) -> str:
    """The end of a scorer's stdout, then of its stderr (where a traceback goes), for feedback."""
    if not score.stderr:
        return score.tail
    errors = "\n".join(score.stderr.splitlines()[-20:])
    return f"{score.tail}\n--- scorer stderr tail ---\n{errors}"


def _failed(result: ProcessResult, metrics: dict[str, Any], log: str) -> Outcome:
    """The outcome of a program that did not exit 0 (crash, timeout, oom, aborted)."""
    return Outcome(
        status=result.status,
        metrics=metrics,
        # the verdict opens and closes the feedback: a flood's tail is long, and whoever cuts it
        # (from the front or the back) must not cut "output flood ...; killed" away
        feedback=f"{result.status.value}: {result.reason}\n--- output tail ---\n{result.tail}\n"
                 f"--- end of output ({result.status.value}: {result.reason}) ---",
        log=log,
        seconds=result.seconds,
    )


class NoopOracle(Oracle):
    """Returns ``params.score`` (default 0.0) at once, or after ``params.sleep`` seconds: for measuring
    harness overhead and executor scaling (a sleeping trial needs no core)."""

    kind = "noop"
    params_model = NoopParams

    def evaluate(self, ctx: EvalContext) -> Outcome:
        pause = float(self.params.get("sleep", 0.0))
        if pause > 0:
            ctx.cancel.wait(pause)
        return Outcome(status=Status.ok, score=float(self.params.get("score", 0.0)), feedback="noop")
