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
   killed by process group from outside; its output appended to ``ctx.live_output`` as it arrives, for a
   view to follow). ``train.py`` trains for ``time_budget`` seconds
   (``RRMA_TIME_BUDGET``), seeded by ``RRMA_SEED`` (the trial's seed: baseline repeats differ),
   prints progress lines, saves its model with ``prepare.save_model`` (a ``torch.export``
   graph: tensor operations only) and prints the autoresearch ``---`` / ``key: value`` block.
3. The score is then computed **by oracle code in a second limited process**:
   ``python <run_dir>/oracle/prepare.py evaluate <trial>/model.pt2 --scratch D --result D/score.json``,
   sandboxed (:meth:`rrma.contain.sandbox.Policy.for_scorer`: the trial's files and the data
   read-only, only the oracle's own per-trial directory ``ctx.oracle_dir`` writable and its cwd,
   no network). ``prepare.load_model`` reads the archive as data before anything loads it:
   entries allow-listed, every weight and constant a plain tensor (``use_pickle`` false, no
   custom objects), every graph node an ``aten``/``prims`` tensor operator that takes no file
   name or message (``operator_refusal``), no ``guards_code``, no symbolic expressions, node
   metadata and the pickled sample inputs dropped; it writes what passed to a fresh archive in
   the scorer's directory, loads that with ``torch.export.load`` and checks the loaded graph
   again. Why not a new weight format (safetensors + our own graph JSON)? The graph would still
   need an interpreter; torch's deserializer fed only checked data keeps one, tested, loader and
   the agent's familiar ``torch.export`` contract. The model then runs as a pure function (fresh
   copies of input and weights, the same seed, every call) and every batch twice, the second
   time reordered and cut at secret positions: a model whose earlier log-probabilities change
   looked ahead (or across windows) and is ``rejected``. The score is the JSON the scorer wrote;
   what train.py printed is kept only as ``metrics.reported_val_bpb``. A model the loader
   refuses is ``rejected`` with its one-line reason ("model.pt2: weight 'w' is pickled ...").
4. **What train.py cannot see.** The validation text is built from files no trial can read: for
   the default ``stdlib`` corpus the sources of ``idlelib``, ``tkinter`` and ``turtledemo``
   (``prepare.HELD_OUT_PACKAGES``; the rest of the stdlib is the training text), every copy of
   them on the machine that ``prepare.held_out_sources`` finds, the text file or the parquet
   download of other sources, ``val.bin`` and the whole corpus cache (older corpora included);
   :meth:`held_out` declares them, so the executor hides them from every trial program and the
   loop from every coding agent. The trial sees its own corpus's ``train.bin`` read-only.

Labels: ``ok`` (scored), ``crash`` (exit != 0 with the traceback tail as feedback; a ``FAIL``
line means the loss diverged, ``metrics.failure = "diverged"``; exit 0 without a metric block or
a model is ``failure = "no-metric"``), ``timeout`` and ``oom`` (from the sandbox's limits, or a
MemoryError in the trial), ``rejected`` (the saved model looks ahead: ``not-causal``; or it is not
a plain tensor program: ``refused``), ``aborted`` (early abort, or the run was cancelled).

Progress: every progress line ``step N | loss L | ... | elapsed Ts`` is parsed; one sample per
``progress_every_s`` seconds of training (default: a hundredth of the budget) goes out as
``ctx.progress({"step", "loss", "elapsed", "frac", "score_est"})`` (the loop records them as
``trial.progress`` events): ``frac`` is the fraction of the training budget used and
``score_est`` the training loss on the val_bpb scale (``loss / ln 2`` plus the train/val gap below),
which is what the loop's early abort reads (``loop.early_abort``, rrma/run/abort.py: the same rule for
every oracle that reports progress, and the one the autoresearch bench uses).

Early abort inside the oracle (``early_abort: true``; off by default; kept for tasks written
before the loop could do it): at the looks of
:class:`rrma.powerlaw.EarlyAbortRule` a power law is fitted to the training-loss curve and the
trial is stopped when its predicted final loss cannot beat the current best (``ctx.best_score``)
at false-abort rate ``abort_alpha``. The best is a val_bpb; it is mapped to the training-loss
scale with the train/val gap (``val_bpb - final train loss / ln 2``, the final loss being the mean
of the last progress windows) of the run's **baseline repeats** only: they run the task's own
train.py, so the losses they print are the harness's; an agent's train.py prints whatever it likes,
and a gap learned from it would move the abort threshold (and ``score_est``) of every other trial.
0, the lenient choice, before the first baseline repeat is scored. Baseline repeats are never aborted.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import re
import shutil
import stat
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from rrma.contain.files import LinkRefused, fresh_dir, read_bytes
from rrma.contain.sandbox import Policy, harness_python
from rrma.contain.spawn import ProcessResult, spawn
from rrma.contracts import EvalContext, Oracle, OracleError, PluginSettings
from rrma.powerlaw import AbortDecision, EarlyAbortRule
from rrma.trial import Budget, Outcome, Status

PACKAGE_WORKSPACE = Path(__file__).resolve().parents[1] / "benches" / "autoresearch" / "workspace"
LN2 = math.log(2)
PROGRESS_LINE = re.compile(r"^step\s+(\d+)\s*\|\s*loss\s+(\S+)\s*\|.*?elapsed\s+([0-9.]+)s?\s*$")
METRIC_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(\S+)\s*$")
MODEL_FILE = "model.pt2"
SCORE_FILE = "score.json"  # what the scorer writes in ctx.oracle_dir
# RRMA_EVAL_TOKENS is a count, not a credential: passed by name past the environment rule (rrma.contain.env)
NOT_SECRET = ("RRMA_EVAL_TOKENS",)
ENV_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV")


class AutoresearchParams(PluginSettings):
    """``oracle.params`` of an autoresearch task (checked when a task is loaded, and again when the oracle is built)."""

    time_budget: float = Field(20.0, gt=0)
    """Seconds of training time train.py gets (RRMA_TIME_BUDGET); the task's trial_seconds must leave room for start-up and export."""
    data: str = "stdlib"
    """Corpus: 'stdlib' (offline default), a path to a text file, or an http(s) parquet URL."""
    cache_dir: str | None = None
    """Where prepared corpora are cached (default ~/.cache/rrma, or RRMA_CACHE)."""
    seq_len: int = Field(128, gt=0, le=1_000_000)
    """Context length the model is evaluated at (RRMA_SEQ_LEN)."""
    eval_tokens: int = Field(65536, gt=0, le=1_000_000_000)
    """Target tokens in the fixed validation stream (RRMA_EVAL_TOKENS)."""
    threads: int = Field(1, ge=1, le=1024)
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
    abort_looks: list[float] = Field(default_factory=lambda: [0.3, 0.4, 0.5, 0.6, 0.7, 0.8], max_length=100)
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


def parse_summary_block(output: str) -> dict[str, float]:
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
    """The train/val gap (val_bpb minus final training loss in bits) over trusted trials.

    Early abort predicts a *training* loss; the best is a *validation* bpb. The median gap maps one
    to the other (0 before any: lenient, it aborts less). The training loss is what a trial's
    program printed, so feed it only runs whose program the harness trusts: the oracle adds the
    baseline repeats (the task's own train.py) and nothing else, so no agent's trial can move the
    threshold other trials are judged by.
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

    params_model = AutoresearchParams
    kind = "autoresearch"
    version = "2"  # 2: validation text from held-out packages, the model archive read as data, checked causality

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
        self.validation_sources: tuple[Path, ...] = ()  # the files the validation text is built from
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
            pass_env=NOT_SECRET,
        )
        info = parse_summary_block("---\n" + result.output)
        lines = dict(
            (m.group(1), m.group(2)) for m in (METRIC_LINE.match(x.strip()) for x in result.output.splitlines()) if m
        )
        if result.status != Status.ok or "data_dir" not in lines:
            raise OracleError(
                f"autoresearch: preparing the data {self.settings.data!r} failed ({result.reason}):\n"
                + traceback_tail(result.output, 12)
            )
        sources = next((x.partition(": ")[2] for x in result.output.splitlines() if x.startswith("held_out: ")), None)
        try:
            held = json.loads(sources) if sources is not None else None
        except ValueError:
            held = None
        if not isinstance(held, list) or not all(isinstance(p, str) for p in held):
            raise OracleError(f"autoresearch: {pristine} did not say which files the validation text comes from "
                              "(no 'held_out: [...]' line); is it the bench's prepare.py?")
        need = (self.settings.eval_tokens // self.settings.seq_len) * self.settings.seq_len + 1
        if int(info.get("val_bytes", 0)) < need:
            raise OracleError(
                f"autoresearch: the validation text of {self.settings.data!r} (held out: "
                f"{', '.join(held) or 'nothing found'}) is {int(info.get('val_bytes', 0))} bytes; eval_tokens "
                f"{self.settings.eval_tokens} at seq_len {self.settings.seq_len} needs {need}. Lower eval_tokens or "
                "use a larger corpus (a text file or a parquet URL)")
        self.prepare_py = pristine
        self.data_dir = Path(lines["data_dir"])
        self.validation_sources = tuple(Path(p) for p in held)
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
            "held_out_sources": [str(p) for p in self.validation_sources],
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
        """Everything the validation text can be read from: its source files (every copy found),
        the corpus cache (older corpora hold other splits; the trial's guard shows its own corpus
        directory again, read-only, less ``val.bin``) and ``val.bin``. Only the scorer reads them."""
        if self.data_dir is None:
            return ()
        return (*self.validation_sources, self.data_dir.parent, self.data_dir / "val.bin")

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
            pass_env=NOT_SECRET,
            on_line=on_line,
            cancel=ctx.cancel,
            guard=self._guard(ctx),
            live_output=ctx.live_output,  # followed live (rrma-tui's trial view)
        )
        outcome = self._classify_training(ctx, run, train)
        if outcome is None:
            outcome = self._score(ctx, run, train)
        outcome.seconds = time.monotonic() - started
        return outcome

    def _guard(self, ctx: EvalContext) -> Policy | None:
        """The trial's guard: :meth:`held_out` hidden (whoever built ``ctx.guard``), the corpus
        directory shown again read-only with its val split still hidden (train.py cannot train on
        what it is scored on; prepare.py then reports its own number on a dev slice of train)."""
        if ctx.guard is None or self.data_dir is None or self.prepare_py is None:
            return ctx.guard
        # the data and the oracle's frozen prepare.py (inside the hidden run dir) are visible read-only
        guard = ctx.guard.hiding(*self.held_out()).protecting(self.data_dir, self.prepare_py.parent)
        return guard.hiding(self.data_dir / "val.bin")

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
                          "score_est": round(loss / LN2 + self.gaps.gap(), 5)})  # val_bpb scale (rrma/run/abort.py)
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
        if res.status == Status.disk:
            metrics["failure"] = "disk"
            feedback = (
                f"Out of disk: {res.reason}. train.py may keep at most {ctx.budget.disk_mb} MiB in its workspace "
                f"(and as much in /tmp); save fewer or smaller files.{where}\nLast output:\n{tail}"
            )
            return Outcome(status=Status.disk, metrics=metrics, feedback=feedback, log=res.output)
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
        reported = parse_summary_block(train.output)
        metrics: dict[str, Any] = {k: v for k, v in reported.items() if k != "val_bpb"}
        metrics["train_wall_seconds"] = round(train.seconds, 2)
        if "val_bpb" in reported:
            metrics["reported_val_bpb"] = reported["val_bpb"]
        model = Path(ctx.trial_dir) / MODEL_FILE
        try:
            model_ok = stat.S_ISREG(os.lstat(model).st_mode)  # a link is no model: never followed
        except OSError:
            model_ok = False
        missing = [what for what, ok in (("a '---' block with 'val_bpb:'", "val_bpb" in reported),
                                         (f"the model file {MODEL_FILE} (prepare.save_model)", model_ok)) if not ok]
        if missing:
            metrics["failure"] = "no-metric"
            feedback = (
                f"train.py exited 0 but produced no {' and no '.join(missing)}. It must call "
                "prepare.save_model(model) and end with '---' then 'val_bpb: ...'.\nLast output:\n"
                + traceback_tail(train.output, 15)
            )
            return Outcome(status=Status.crash, metrics=metrics, feedback=feedback, log=train.output)
        with self._scorer_dir(ctx) as own:
            ev, result = self._run_scorer(ctx, model, own)
        log = train.output + "\n=== oracle evaluation ===\n" + ev.output
        metrics["eval_seconds"] = round(ev.seconds, 2)
        if isinstance(result.get("causal_max_diff"), float | int):
            metrics["causal_max_diff"] = float(result["causal_max_diff"])
        if result.get("status") == "refused" and ev.returncode == 4:
            metrics["failure"] = "refused"
            reason = str(result.get("reason", ""))[:600]
            feedback = (
                f"Rejected: {reason}. The oracle scores only a plain tensor program: save the model with "
                "prepare.save_model(model), whose forward uses tensor operations only."
            )
            return Outcome(status=Status.rejected, metrics=metrics, feedback=feedback, log=log)
        if result.get("status") == "not-causal" and ev.returncode == 3:
            metrics["failure"] = "not-causal"
            feedback = (
                "Rejected: the saved model is not causal: the log-probabilities it gives a position change "
                f"(by {metrics.get('causal_max_diff', float('nan')):.3g} nats) when later tokens or the other "
                "windows of the batch change; it would read the answers it is scored on. Keep attention "
                "causal, keep the windows of a batch independent, and keep the forward pass deterministic."
            )
            return Outcome(status=Status.rejected, metrics=metrics, feedback=feedback, log=log)
        scored = result if ev.status == Status.ok and result.get("status") == "ok" else {}
        if scored and scored.get("eval_tokens") != self.settings.eval_tokens:  # the stream is the task's or no score
            raise OracleError(f"autoresearch: the scorer evaluated {scored.get('eval_tokens')} tokens, the task says "
                              f"{self.settings.eval_tokens} (was RRMA_EVAL_TOKENS lost from its environment?)")
        if not isinstance(scored.get("val_bpb"), float | int) or not math.isfinite(scored["val_bpb"]):
            metrics["failure"] = "eval-failed"
            status = ev.status if ev.status in (Status.oom, Status.timeout, Status.aborted) else Status.crash
            feedback = (
                f"The oracle could not evaluate the saved model ({ev.reason}). The model must map token ids "
                f"(batch, {self.settings.seq_len}) to logits (batch, {self.settings.seq_len}, 256) and be exportable "
                "with torch.export:\n" + traceback_tail(ev.output, 15)
            )
            return Outcome(status=status, metrics=metrics, feedback=feedback, log=log)
        val_bpb = float(scored["val_bpb"])
        metrics["val_bpb"] = val_bpb
        final_loss = final_train_loss(run.curve)
        if final_loss is not None:
            metrics["final_train_loss"] = round(final_loss, 5)
            if ctx.is_baseline:  # the task's own train.py printed this loss; an agent's could print anything
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

    @contextlib.contextmanager
    def _scorer_dir(self, ctx: EvalContext) -> Iterator[Path]:
        """The scorer's own directory: ``ctx.oracle_dir`` (the executor makes it fresh, and no trial
        program sees it), else a private temporary one (an oracle called directly)."""
        if ctx.oracle_dir is not None:
            yield Path(ctx.oracle_dir)
            return
        with tempfile.TemporaryDirectory(prefix="rrma-autoresearch-score-") as tmp:
            yield Path(tmp)

    def _run_scorer(self, ctx: EvalContext, model: Path, own: Path) -> tuple[ProcessResult, dict[str, Any]]:
        """Run prepare.py's scorer on ``model`` (sandboxed: reads the trial's files and the data, writes
        only ``own``, its cwd) and read the JSON it wrote there ({} when it wrote none)."""
        assert self.prepare_py is not None
        scratch = own / "scorer"
        fresh_dir(scratch)
        (own / SCORE_FILE).unlink(missing_ok=True)
        ev = spawn(
            [*harness_python(), str(self.prepare_py), "evaluate", str(model.absolute()), "--device", self._device(),
             "--scratch", str(scratch), "--result", str(own / SCORE_FILE)],
            cwd=own,
            budget=Budget(seconds=min(self.settings.eval_seconds, ctx.budget.seconds), memory_mb=ctx.budget.memory_mb),
            env=self._env(ctx.seed),
            pass_env=NOT_SECRET,
            cancel=ctx.cancel,
            guard=None if ctx.guard is None else Policy.for_scorer(
                (Path(ctx.trial_dir), self.data_dir or self.prepare_py.parent, self.prepare_py.parent),
                writable=(own,), required=ctx.guard.required),
        )
        try:
            result = json.loads(read_bytes(own, SCORE_FILE, limit=1 << 16))
        except (OSError, LinkRefused, ValueError):
            result = {}
        return ev, result if isinstance(result, dict) else {}

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
