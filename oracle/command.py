"""The generic ``command`` oracle: run a command in the trial dir, read ``key: value`` lines.

Parameters (``oracle.params`` in the task YAML):

* ``command``: a string (split like a shell would, no shell involved) or a list of arguments.
  ``{python}`` is replaced by the running interpreter. Runs with the trial's workspace as cwd.
* ``env``: extra environment variables. ``RRMA_SEED`` (the trial's seed) and
  ``RRMA_TRIAL_ID`` are always set.

A line ``progress: {json object}`` is a progress sample (``trial.progress``; the first
``MAX_PROGRESS_SAMPLES`` of a trial): with ``frac`` and
``score_est``, or ``items`` and ``hits``, the loop's early abort can stop the trial
(rrma/abort.py, ``loop.early_abort``).

The output is scanned for lines ``name: value`` with a numeric value (the last occurrence of a
name wins, like autoresearch's greppable summaries). The task's metric must be among them: a
missing metric is a ``crash`` with the output's tail as feedback. Limits (time, memory,
output) are enforced by :func:`rrma.contain.spawn.spawn`, which labels timeout / oom / crash.

``noop`` is an oracle that does nothing and returns a fixed score: it measures harness overhead.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
from typing import Any

from oracle.base import EvalContext, Oracle, OracleError
from rrma.contain.spawn import spawn
from rrma.trial import Outcome, Status

MAX_PROGRESS_SAMPLES = 1000  # progress lines of one trial that become trial.progress events (the rest are dropped)
METRIC_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_./-]*)\s*:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)\s*$")


def parse_metrics(output: str) -> dict[str, float]:
    """Every ``name: number`` line of ``output``; the last occurrence of a name wins."""
    metrics: dict[str, float] = {}
    for line in output.splitlines():
        match = METRIC_LINE.match(line)
        if match:
            metrics[match.group(1)] = float(match.group(2))
    return metrics


def command_argv(command: Any) -> list[str]:
    if isinstance(command, str):
        argv = shlex.split(command)
    elif isinstance(command, list) and all(isinstance(x, str) for x in command):
        argv = list(command)
    else:
        raise OracleError("command oracle: params.command must be a string or a list of strings")
    if not argv:
        raise OracleError("command oracle: params.command is empty")
    return [sys.executable if a == "{python}" else a for a in argv]


class CommandOracle(Oracle):
    kind = "command"
    version = "1"

    def __init__(self, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.argv = command_argv(params.get("command"))
        env = params.get("env", {})
        if not isinstance(env, dict):
            raise OracleError("command oracle: params.env must be a mapping")
        self.extra_env = {str(k): str(v) for k, v in env.items()}

    def evaluate(self, ctx: EvalContext) -> Outcome:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["RRMA_SEED"] = str(ctx.seed)
        env["RRMA_TRIAL_ID"] = ctx.trial_id
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        forwarded = [0]

        def on_line(line: str) -> str | None:
            if line.startswith("progress:") and forwarded[0] < MAX_PROGRESS_SAMPLES:  # a flood never floods the log
                try:
                    sample = json.loads(line[len("progress:"):])
                except json.JSONDecodeError:
                    return None
                if isinstance(sample, dict):
                    forwarded[0] += 1
                    ctx.progress(sample)
            return None

        try:
            result = spawn(self.argv, cwd=ctx.trial_dir, budget=ctx.budget, env=env, cancel=ctx.cancel,
                                 guard=ctx.guard, on_line=on_line)
        except FileNotFoundError as exc:
            return Outcome(status=Status.crash, feedback=f"command not found: {exc.filename}")
        metrics: dict[str, Any] = parse_metrics(result.output)
        metrics["peak_rss_mb"] = round(result.peak_rss_mb, 1)
        if result.status != Status.ok:
            return Outcome(
                status=result.status,
                metrics=metrics,
                # the verdict opens and closes the feedback: a flood's tail is long, and whoever cuts it
                # (from the front or the back) must not cut "output flood ...; killed" away
                feedback=f"{result.status.value}: {result.reason}\n--- output tail ---\n{result.tail}\n"
                         f"--- end of output ({result.status.value}: {result.reason}) ---",
                log=result.output,
                seconds=result.seconds,
            )
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


class NoopOracle(Oracle):
    """Returns ``params.score`` (default 0.0) at once, or after ``params.sleep`` seconds: for measuring
    harness overhead and executor scaling (a sleeping trial needs no core)."""

    kind = "noop"

    def evaluate(self, ctx: EvalContext) -> Outcome:
        pause = float(self.params.get("sleep", 0.0))
        if pause > 0:
            ctx.cancel.wait(pause)
        return Outcome(status=Status.ok, score=float(self.params.get("score", 0.0)), feedback="noop")
