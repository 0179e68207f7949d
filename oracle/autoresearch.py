"""The autoresearch oracle: train the trial's ``train.py`` under a wall-clock budget, score val_bpb.

Agents edit ``train.py`` (a small GPT pretraining script); ``prepare.py`` is read-only and owns
the data and the metric. How the score stays the oracle's own:

1. :meth:`AutoresearchOracle.prepare` (once per run) copies the task's pristine ``prepare.py``
   (``<workspace>/prepare.py`` of the task, i.e. the bench's package copy, never a trial's) to
   ``<run_dir>/oracle/prepare.py``, records its sha256, and runs it in a child process to build
   the corpus (cached under a directory named by the corpus sha256, recorded in run.json).
   An oracle that evaluates without having prepared (a fresh copy in a remote worker) prepares
   itself from the package's ``benches/autoresearch/workspace/prepare.py``.
2. :meth:`evaluate` overwrites the trial's ``prepare.py`` with that pristine copy and runs
   ``python train.py`` under :func:`rrma.contain.spawn.spawn` (the task's wall clock and memory,
   killed by process group from outside). ``train.py`` trains for ``time_budget`` seconds
   (``RRMA_TIME_BUDGET``), seeded by ``RRMA_SEED`` (the trial's seed: baseline repeats differ),
   prints progress lines, saves its model with ``prepare.save_model`` (a ``torch.export``
   graph: tensor operations only) and prints the autoresearch ``---`` / ``key: value`` block.
3. The score is then computed **by oracle code in a second limited process**:
   ``python <run_dir>/oracle/prepare.py evaluate model.pt2`` loads the graph (no trial Python
   runs there: the graph is aten operations, and the script's directory, not the trial's, is
   first on ``sys.path``), checks the model is causal, and computes val_bpb on the fixed
   validation stream. The ``val_bpb`` that train.py printed is kept only as
   ``metrics.reported_val_bpb``; an edit to train.py can change the model, never the metric.

Labels: ``ok`` (scored), ``crash`` (exit != 0 with the traceback tail as feedback; a ``FAIL``
line means the loss diverged, ``metrics.failure = "diverged"``; exit 0 without a metric block or
a model is ``failure = "no-metric"``), ``timeout`` and ``oom`` (from the sandbox's limits, or a
MemoryError in the trial), ``rejected`` (the saved model looks ahead), ``aborted`` (early abort,
or the run was cancelled).

Progress: every progress line ``step N | loss L | ... | elapsed Ts`` is parsed; one sample per
``progress_every_s`` seconds of training (default: a hundredth of the budget) goes out as
``ctx.progress({"step", "loss", "elapsed", "frac", "score_est"})`` (the loop records them as
``trial.progress`` events): ``frac`` is the fraction of the training budget used and
``score_est`` the training loss on the val_bpb scale (``loss / ln 2`` plus the train/val gap below),
which is what the loop's early abort reads (``loop.early_abort``, rrma/abort.py: the same rule for
every oracle that reports progress, and the one the autoresearch bench uses).

Early abort inside the oracle (``early_abort: true``; off by default; kept for tasks written
before the loop could do it): at the looks of
:class:`rrma.powerlaw.EarlyAbortRule` a power law is fitted to the training-loss curve and the
trial is stopped when its predicted final loss cannot beat the current best (``ctx.best_score``)
at false-abort rate ``abort_alpha``. The best is a val_bpb; it is mapped to the training-loss
scale with the train/val gap this oracle measured on earlier scored trials of the run
(``val_bpb - final train loss / ln 2``, the final loss being the mean of the last progress windows; 0, the lenient choice, before any). Baseline
repeats are never aborted.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oracle.base import EvalContext, Oracle, OracleError
from rrma.contain.sandbox import Policy, harness_python
from rrma.contain.spawn import ProcessResult, spawn
from rrma.powerlaw import AbortDecision, EarlyAbortRule
from rrma.trial import Budget, Outcome, Status

PACKAGE_WORKSPACE = Path(__file__).resolve().parents[1] / "benches" / "autoresearch" / "workspace"
LN2 = math.log(2)
PROGRESS_LINE = re.compile(r"^step\s+(\d+)\s*\|\s*loss\s+(\S+)\s*\|.*?elapsed\s+([0-9.]+)s?\s*$")
METRIC_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(\S+)\s*$")
MODEL_FILE = "model.pt2"
ENV_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV")


class AutoresearchParams(BaseModel):
    """``oracle.params`` of an autoresearch task."""

    model_config = ConfigDict(extra="forbid")

    time_budget: float = Field(20.0, gt=0)
    """Seconds of training time train.py gets (RRMA_TIME_BUDGET); the task's trial_seconds must leave room for start-up and export."""
    data: str = "stdlib"
    """Corpus: 'stdlib' (offline default), a path to a text file, or an http(s) parquet URL."""
    cache_dir: str | None = None
    """Where prepared corpora are cached (default ~/.cache/rrma, or RRMA_CACHE)."""
    seq_len: int = Field(128, gt=0)
    """Context length the model is evaluated at (RRMA_SEQ_LEN)."""
    eval_tokens: int = Field(65536, gt=0)
    """Target tokens in the fixed validation stream (RRMA_EVAL_TOKENS)."""
    threads: int = Field(1, ge=1)
    """CPU threads of the trial's torch (RRMA_THREADS, OMP_NUM_THREADS)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Device the oracle evaluates the saved model on; auto: cuda when torch sees one."""
    eval_seconds: float = Field(120.0, gt=0)
    """Wall-clock limit of the scoring process, reserved out of the task's trial_seconds (training gets the rest)."""
    progress_every_s: float | None = Field(None, gt=0)
    """Seconds of training between trial.progress samples (None: a hundredth of time_budget, what the loop's early abort needs)."""
    early_abort: bool = False
    """Stop trials whose predicted final loss cannot beat the current best."""
    abort_alpha: float = Field(0.05, gt=0, lt=1)
    """False-abort rate of the sequential test (over all looks together)."""
    abort_misfit: float = Field(1.0, ge=0)
    """Allowance (nats) times (1 - fraction seen)^2 for a curve ending below its power-law forecast."""
    abort_looks: list[float] = Field(default_factory=lambda: [0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    """Budget fractions at which the early-abort test is run."""


@dataclass
class TrainingRun:
    """What the oracle saw of one train.py process while it ran."""

    time_budget: float
    curve: list[tuple[int, float, float]] = field(default_factory=list)  # (step, loss, elapsed s)
    next_sample: float = 0.0
    next_look: int = 0  # index into the rule's looks
    decision: AbortDecision | None = None  # the aborting decision, if any
    last_decision: AbortDecision | None = None
    diverged: str | None = None

    def losses(self) -> tuple[list[float], list[float]]:
        t = [e / self.time_budget for _, _, e in self.curve]
        y = [loss for _, loss, _ in self.curve]
        return t, y


def parse_progress(line: str) -> tuple[int, float, float] | None:
    """(step, loss, elapsed seconds) of a train.py progress line, else None."""
    m = PROGRESS_LINE.match(line.strip())
    if m is None:
        return None
    try:
        return int(m.group(1)), float(m.group(2)), float(m.group(3))
    except ValueError:
        return None


def parse_metrics(output: str) -> dict[str, float]:
    """The ``key: value`` lines after the last ``---`` line (numeric values only)."""
    lines = output.splitlines()
    try:
        start = len(lines) - 1 - lines[::-1].index("---")
    except ValueError:
        return {}
    out: dict[str, float] = {}
    for line in lines[start + 1 :]:
        m = METRIC_LINE.match(line.strip())
        if m is None:
            continue
        try:
            out[m.group(1)] = float(m.group(2))
        except ValueError:
            continue
    return out


def traceback_tail(output: str, max_lines: int = 25) -> str:
    """The last Python traceback in ``output`` (capped), else the last lines."""
    lines = output.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    chunk = lines[starts[-1] :] if starts else lines
    if len(chunk) > max_lines:
        chunk = ["...", *chunk[-max_lines:]]
    return "\n".join(chunk)


def final_train_loss(curve: list[tuple[int, float, float]], last: int = 4) -> float | None:
    """The training loss at the end of a run: the mean of its last ``last`` progress windows."""
    if not curve:
        return None
    tail = [loss for _, loss, _ in curve[-last:]]
    return sum(tail) / len(tail)


class GapTracker:
    """The train/val gap (val_bpb minus final training loss in bits) over scored trials.

    Early abort predicts a *training* loss; the best is a *validation* bpb. The median gap of the
    trials this oracle scored maps one to the other (0 before any: lenient, it aborts less).
    """

    def __init__(self) -> None:
        self._gaps: list[float] = []
        self._lock = threading.Lock()

    def add(self, val_bpb: float, train_loss_nats: float) -> None:
        with self._lock:
            self._gaps.append(val_bpb - train_loss_nats / LN2)

    def gap(self) -> float:
        with self._lock:
            return statistics.median(self._gaps) if self._gaps else 0.0

    def loss_threshold(self, best_bpb: float) -> float:
        """The training loss (nats/token) a trial must beat to reach ``best_bpb`` on validation."""
        return (best_bpb - self.gap()) * LN2


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _torch_has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class AutoresearchOracle(Oracle):
    """Scores a GPT-training trial by the val_bpb of the model it saves (lower is better)."""

    kind = "autoresearch"
    version = "1"

    def __init__(self, params: dict[str, Any], *, metric: str = "val_bpb", direction: str = "minimize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        try:
            self.settings = AutoresearchParams.model_validate(self.params)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise OracleError(f"autoresearch oracle params: {problems}") from None
        try:
            self.rule = EarlyAbortRule(
                looks=tuple(self.settings.abort_looks), alpha=self.settings.abort_alpha, misfit=self.settings.abort_misfit
            )
        except ValueError as exc:
            raise OracleError(f"autoresearch oracle params: {exc}") from None
        if direction != "minimize":
            raise OracleError("autoresearch oracle: val_bpb is minimized; set metric.direction: minimize")
        self.gaps = GapTracker()
        self.prepare_py: Path | None = None
        self.data_dir: Path | None = None
        self.facts: dict[str, Any] = {}
        self._prepare_lock = threading.Lock()
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    # ------------------------------------------------------------------ set-up

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        """Freeze the pristine prepare.py into the run and build (or find) the corpus."""
        source = Path(workspace) / "prepare.py"
        if not source.is_file():
            raise OracleError(f"autoresearch: {source} not found; the workspace must hold the read-only prepare.py")
        oracle_dir = Path(run_dir) / "oracle"
        oracle_dir.mkdir(parents=True, exist_ok=True)
        pristine = oracle_dir / "prepare.py"
        shutil.copyfile(source, pristine)
        env = self._env(seed=0)
        result = spawn(
            [*harness_python(), str(pristine), "data", "--data", self.settings.data],
            cwd=oracle_dir,
            budget=Budget(seconds=1800, memory_mb=8192),
            env=env,
        )
        info = parse_metrics("---\n" + result.output)
        lines = dict(
            (m.group(1), m.group(2)) for m in (METRIC_LINE.match(x.strip()) for x in result.output.splitlines()) if m
        )
        if result.status != Status.ok or "data_dir" not in lines:
            raise OracleError(
                f"autoresearch: preparing the data {self.settings.data!r} failed ({result.reason}):\n"
                + traceback_tail(result.output, 12)
            )
        self.prepare_py = pristine
        self.data_dir = Path(lines["data_dir"])
        try:
            torch_version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch_version = None
        self.facts = {
            "data_source": self.settings.data,
            "data_sha256": lines.get("sha256"),
            "data_dir": str(self.data_dir),
            "train_bytes": int(info.get("train_bytes", 0)),
            "val_bytes": int(info.get("val_bytes", 0)),
            "tokenizer": lines.get("tokenizer"),
            "prepare_py_sha256": _sha256(pristine),
            "torch": torch_version,
            "device": self._device(),
            "time_budget_s": self.settings.time_budget,
        }
        return dict(self.facts)

    def _ensure_prepared(self) -> None:
        with self._prepare_lock:
            if self.prepare_py is not None:
                return
            self._scratch = tempfile.TemporaryDirectory(prefix="rrma-autoresearch-")
            self.prepare(Path(self._scratch.name), PACKAGE_WORKSPACE)

    def _device(self) -> str:
        if self.settings.device != "auto":
            return self.settings.device
        return "cuda" if _torch_has_cuda() else "cpu"

    def _env(self, seed: int) -> dict[str, str]:
        s = self.settings
        env = {k: os.environ[k] for k in ENV_PASSTHROUGH if k in os.environ}
        threads = str(s.threads)
        env.update(
            PYTHONUNBUFFERED="1",
            PYTHONDONTWRITEBYTECODE="1",
            OMP_NUM_THREADS=threads,
            MKL_NUM_THREADS=threads,
            RRMA_THREADS=threads,
            RRMA_TIME_BUDGET=f"{s.time_budget:g}",
            RRMA_SEED=str(seed),
            RRMA_SEQ_LEN=str(s.seq_len),
            RRMA_EVAL_TOKENS=str(s.eval_tokens),
            RRMA_MODEL_OUT=MODEL_FILE,
        )
        if s.cache_dir:
            env["RRMA_CACHE"] = s.cache_dir
        elif "RRMA_CACHE" in os.environ:
            env["RRMA_CACHE"] = os.environ["RRMA_CACHE"]
        if self.data_dir is not None:
            env["RRMA_DATA_DIR"] = str(self.data_dir)
        return env

    # ------------------------------------------------------------------ one trial

    def held_out(self) -> tuple[Path, ...]:
        """The validation split: a coding agent's sandbox hides it (trials see it only while scored)."""
        return (self.data_dir / "val.bin",) if self.data_dir is not None else ()

    def evaluate(self, ctx: EvalContext) -> Outcome:
        self._ensure_prepared()
        assert self.prepare_py is not None
        started = time.monotonic()
        trial_dir = Path(ctx.trial_dir)
        if not (trial_dir / "train.py").is_file():
            return Outcome(status=Status.crash, feedback="train.py is missing from the workspace", metrics={"failure": "no-train-py"})
        shutil.copyfile(self.prepare_py, trial_dir / "prepare.py")  # the metric is the oracle's
        (trial_dir / MODEL_FILE).unlink(missing_ok=True)
        run = TrainingRun(time_budget=self.settings.time_budget)
        threshold = None
        if self.settings.early_abort and not ctx.is_baseline and ctx.best_score is not None:
            threshold = self.gaps.loss_threshold(ctx.best_score)

        def on_line(line: str) -> str | None:
            return self._on_line(ctx, run, threshold, line)

        train_budget = ctx.budget.model_copy(update={"seconds": self.train_seconds(ctx.budget)})
        train = spawn(
            [sys.executable, "train.py"],
            cwd=trial_dir,
            budget=train_budget,
            env=self._env(ctx.seed),
            on_line=on_line,
            cancel=ctx.cancel,
            guard=self._guard(ctx, hide_val=True),
        )
        outcome = self._classify_training(ctx, run, train)
        if outcome is None:
            outcome = self._score(ctx, run, train)
        outcome.seconds = time.monotonic() - started
        return outcome

    def _guard(self, ctx: EvalContext, *, hide_val: bool) -> Policy | None:
        """The trial's guard plus the data: read-only, and while training its val split hidden
        (train.py cannot train on what it is scored on; prepare.py then reports its own number on
        a dev slice of train)."""
        if ctx.guard is None or self.data_dir is None or self.prepare_py is None:
            return ctx.guard
        # the data and the oracle's frozen prepare.py (the scorer's working dir, inside the hidden
        # run dir) are visible read-only
        guard = ctx.guard.protecting(self.data_dir, self.prepare_py.parent)
        return guard.hiding(self.data_dir / "val.bin") if hide_val else guard

    def train_seconds(self, budget: Budget) -> float:
        """Wall-clock limit of the training process: the trial's budget less the scoring reserve."""
        return max(budget.seconds - self.settings.eval_seconds, budget.seconds / 2)

    def _on_line(self, ctx: EvalContext, run: TrainingRun, threshold: float | None, line: str) -> str | None:
        sample = parse_progress(line)
        if sample is None:
            return None
        step, loss, elapsed = sample
        if not math.isfinite(loss):
            run.diverged = f"loss {loss} at step {step}"
            return None
        run.curve.append(sample)
        if elapsed >= run.next_sample:
            budget = self.settings.time_budget
            ctx.progress({"step": step, "loss": round(loss, 5), "elapsed": round(elapsed, 2),
                          "frac": round(min(elapsed / budget, 1.0), 5),
                          "score_est": round(loss / LN2 + self.gaps.gap(), 5)})  # val_bpb scale (rrma/abort.py)
            run.next_sample = elapsed + (self.settings.progress_every_s or budget / 100)
        if threshold is None or run.next_look >= len(self.rule.looks):
            return None
        frac = elapsed / self.settings.time_budget
        if frac < self.rule.looks[run.next_look]:
            return None
        while run.next_look < len(self.rule.looks) and frac >= self.rule.looks[run.next_look]:
            run.next_look += 1
        t, y = run.losses()
        decision = self.rule.decide(run.next_look, t, y, threshold)
        if decision is None:
            return None
        run.last_decision = decision
        if decision.abort:
            run.decision = decision
            return "early abort: " + decision.describe()
        return None

    def _classify_training(self, ctx: EvalContext, run: TrainingRun, res: ProcessResult) -> Outcome | None:
        """The outcome of a training process that did not finish normally (None when it did)."""
        metrics: dict[str, Any] = {"train_wall_seconds": round(res.seconds, 2), "peak_rss_mb": round(res.peak_rss_mb, 1)}
        if run.curve:
            metrics["last_step"], metrics["last_loss"], metrics["last_elapsed"] = run.curve[-1]
        where = ""
        if run.curve:
            step, loss, elapsed = run.curve[-1]
            where = f" (last progress: step {step}, loss {loss:.4f}, {elapsed:.1f}s of training)"
        tail = traceback_tail(res.output)
        if res.status == Status.aborted:
            if run.decision is not None:
                d = run.decision
                metrics.update(
                    failure="early-abort",
                    predicted_final_loss=round(d.predicted, 5),
                    predicted_interval=[round(d.lower, 5), round(d.upper, 5)],
                    threshold_loss=round(d.threshold, 5),
                    aborted_at_fraction=d.at,
                    abort_alpha=self.rule.alpha,
                )
                feedback = (
                    "Stopped early: the power-law fit of the training loss says this run cannot beat the "
                    f"current best (val_bpb {ctx.best_score:.4f}). {d.describe()}; false-abort rate "
                    f"{self.rule.alpha:g}.{where}"
                )
            else:
                metrics["failure"] = "cancelled"
                feedback = f"Stopped: {res.reason}.{where}"
            return Outcome(status=Status.aborted, metrics=metrics, feedback=feedback, log=res.output)
        if res.status == Status.timeout:
            metrics["failure"] = "timeout"
            feedback = (
                f"Timeout: {res.reason}. train.py must finish training within TIME_BUDGET "
                f"({self.settings.time_budget:g}s of training) and then save and evaluate the model; the whole "
                f"process gets {self.train_seconds(ctx.budget):g}s of wall clock.{where}\nLast output:\n{tail}"
            )
            return Outcome(status=Status.timeout, metrics=metrics, feedback=feedback, log=res.output)
        if res.status == Status.oom:
            metrics["failure"] = "oom"
            feedback = (
                f"Out of memory: {res.reason} (peak {res.peak_rss_mb:.0f} MiB, budget {ctx.budget.memory_mb} MiB). "
                f"Use a smaller model, batch or sequence length.{where}\nLast output:\n{tail}"
            )
            return Outcome(status=Status.oom, metrics=metrics, feedback=feedback, log=res.output)
        if res.status != Status.ok:
            failed = "FAIL" in res.output[-4000:] or run.diverged is not None
            if failed:
                metrics["failure"] = "diverged"
                fail_line = next((x for x in reversed(res.output.splitlines()) if "FAIL" in x), run.diverged or "")
                feedback = (
                    f"Training diverged (NaN or exploding loss): {fail_line.strip()}{where}. "
                    "Lower the learning rate, clip gradients or fix the numerics."
                )
            else:
                metrics["failure"] = "crash"
                feedback = f"train.py crashed ({res.reason}){where}:\n{tail}"
            return Outcome(status=Status.crash, metrics=metrics, feedback=feedback, log=res.output)
        return None

    def _score(self, ctx: EvalContext, run: TrainingRun, train: ProcessResult) -> Outcome:
        """Training exited 0: check the metric block and the model, then score it ourselves."""
        assert self.prepare_py is not None
        reported = parse_metrics(train.output)
        metrics: dict[str, Any] = {k: v for k, v in reported.items() if k != "val_bpb"}
        metrics["train_wall_seconds"] = round(train.seconds, 2)
        if "val_bpb" in reported:
            metrics["reported_val_bpb"] = reported["val_bpb"]
        model = Path(ctx.trial_dir) / MODEL_FILE
        missing = [what for what, ok in (("a '---' block with 'val_bpb:'", "val_bpb" in reported), (f"the model file {MODEL_FILE} (prepare.save_model)", model.is_file())) if not ok]
        if missing:
            metrics["failure"] = "no-metric"
            feedback = (
                f"train.py exited 0 but produced no {' and no '.join(missing)}. It must call "
                "prepare.save_model(model) and end with '---' then 'val_bpb: ...'.\nLast output:\n"
                + traceback_tail(train.output, 15)
            )
            return Outcome(status=Status.crash, metrics=metrics, feedback=feedback, log=train.output)
        device = self._device()
        ev = spawn(
            [*harness_python(), str(self.prepare_py), "evaluate", str(model.resolve()), "--device", device],
            cwd=self.prepare_py.parent,
            budget=Budget(seconds=min(self.settings.eval_seconds, ctx.budget.seconds), memory_mb=ctx.budget.memory_mb),
            env=self._env(ctx.seed),
            cancel=ctx.cancel,
            # the scorer reads the trial's files as data: read-only, no network, nothing writable
            guard=None if ctx.guard is None else Policy.for_scorer(
                (Path(ctx.trial_dir), self.data_dir or self.prepare_py.parent, self.prepare_py.parent),
                required=ctx.guard.required),
        )
        log = train.output + "\n=== oracle evaluation ===\n" + ev.output
        scored = parse_metrics("---\n" + ev.output)
        metrics["eval_seconds"] = round(ev.seconds, 2)
        if "causal_max_diff" in scored:
            metrics["causal_max_diff"] = scored["causal_max_diff"]
        if ev.status == Status.crash and ev.returncode == 3:
            metrics["failure"] = "not-causal"
            feedback = (
                "Rejected: the saved model is not causal (its logits for a position change when later "
                f"tokens change, by {scored.get('causal_max_diff', float('nan')):.3g}); it would read the "
                "answers it is scored on. Keep attention causal."
            )
            return Outcome(status=Status.rejected, metrics=metrics, feedback=feedback, log=log)
        if ev.status != Status.ok or "val_bpb" not in scored:
            metrics["failure"] = "eval-failed"
            status = ev.status if ev.status in (Status.oom, Status.timeout, Status.aborted) else Status.crash
            feedback = (
                f"The oracle could not evaluate the saved model ({ev.reason}). The model must map token ids "
                f"(batch, {self.settings.seq_len}) to logits (batch, {self.settings.seq_len}, 256) and be exportable "
                "with torch.export:\n" + traceback_tail(ev.output, 15)
            )
            return Outcome(status=status, metrics=metrics, feedback=feedback, log=log)
        val_bpb = scored["val_bpb"]
        metrics["val_bpb"] = val_bpb
        final_loss = final_train_loss(run.curve)
        if final_loss is not None:
            metrics["final_train_loss"] = round(final_loss, 5)
            self.gaps.add(val_bpb, final_loss)
        parts = [f"val_bpb {val_bpb:.4f}"]
        if ctx.best_score is not None:
            parts.append(f"best so far {ctx.best_score:.4f}")
        if "reported_val_bpb" in metrics and abs(metrics["reported_val_bpb"] - val_bpb) > 1e-3:
            parts.append(f"train.py printed {metrics['reported_val_bpb']:.4f}, the oracle's score counts")
        if "num_steps" in metrics:
            parts.append(f"{int(metrics['num_steps'])} steps in {metrics.get('training_seconds', 0):.1f}s of training")
        if "num_params" in metrics:
            parts.append(f"{int(metrics['num_params'])} parameters")
        if final_loss is not None:
            parts.append(f"final train loss {final_loss:.4f} nats/byte")
        return Outcome(status=Status.ok, score=val_bpb, metrics=metrics, feedback="; ".join(parts), log=log)

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
