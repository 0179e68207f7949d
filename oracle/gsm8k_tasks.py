"""The GSM8K oracles: ``gsm8k-eval``, ``gsm8k-recipe`` and ``gsm8k-prompt``.

Why it exists: three ways of improving GSM8K accuracy (score a model or a completions file,
improve a training recipe, improve a system prompt) share one scorer, :func:`grade_pairs`,
built on the versioned policy of :mod:`oracle.gsm8k` and the statistics of :mod:`rrma.stats`.

Invariants (what keeps the score honest):

* The oracle owns the questions, the gold answers, the prompt around the agent's part, the
  decoding settings and the verifier. An agent edits only its surface (``recipe.py`` or
  ``system_prompt.txt``); nothing it edits is imported or read by the scoring code.
* ``gsm8k-recipe`` gives the recipe only the ``train-pool`` split (train minus dev, minus any
  held-out question: :func:`oracle.gsm8k_data.assert_disjoint` is checked). The recipe runs
  in its own process group under the trial budget; the oracle then evaluates the model
  directory it wrote in a *separate* child process with the oracle's own generation code,
  on held-out questions written to a temporary directory outside the trial workspace.
* Scores are pass@1 on a fixed, index-determined subset; metrics carry the standard error,
  the strict-final-line and trailing-text rates and the failure taxonomy, plus what the loop's
  promotion rule reads (rrma/promotion.py): ``score_se`` and the per-question ``item_scores``
  with their ``items_key``, so that a gain is promoted only when a paired test (McNemar on the
  questions) says it is real, even with one baseline repeat.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from oracle.base import EvalContext, Oracle, OracleError
from oracle.gsm8k import ANSWER_FORMATS, FAILURES, MODES, POLICY_VERSION, Grade, grade, truncate_at_stop
from oracle.gsm8k_data import (
    REPO_ROOT,
    DataError,
    Problem,
    assert_disjoint,
    data_locations,
    file_sha256,
    iter_json_objects,
    load_split,
    locate,
    question_key,
    remove_overlap,
    subset,
    write_jsonl,
)
from rrma.contain.sandbox import harness_python
from rrma.contain.spawn import ProcessResult, spawn
from rrma.stats import Estimate, mean_pass_at_k, pass_at_1, taxonomy_counts
from rrma.trial import Budget, Outcome, Status

# ----------------------------------------------------------------------------- scoring


class CompletionsError(ValueError):
    """A completions file is malformed or names questions that are not in the split."""


@dataclass
class QuestionResult:
    """All graded samples of one question (``n`` completions, ``c`` correct)."""

    idx: int
    grades: list[Grade] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.grades)

    @property
    def c(self) -> int:
        return sum(g.correct for g in self.grades)


@dataclass
class EvalReport:
    """Scores of one set of completions on one set of questions under one grading policy."""

    mode: str
    answer_format: str
    questions: list[QuestionResult]
    seconds: float = 0.0
    policy: str = POLICY_VERSION

    @property
    def n_completions(self) -> int:
        return sum(q.n for q in self.questions)

    def all_grades(self) -> Iterable[Grade]:
        for q in self.questions:
            yield from q.grades

    def pass_at_1(self) -> Estimate:
        """Mean over questions of c/n (= accuracy with one sample per question)."""
        if all(q.n == 1 for q in self.questions):
            return pass_at_1([q.c for q in self.questions])
        return mean_pass_at_k([(q.n, q.c) for q in self.questions], 1)

    def pass_at_k(self) -> dict[int, Estimate]:
        """Unbiased pass@k for k = 2, 4, 8, ... up to the smallest sample count."""
        n_min = min((q.n for q in self.questions), default=1)
        out = {}
        k = 2
        while k <= n_min:
            out[k] = mean_pass_at_k([(q.n, q.c) for q in self.questions], k)
            k *= 2
        return out

    def rate(self, attr: str) -> float:
        grades = list(self.all_grades())
        return sum(bool(getattr(g, attr)) for g in grades) / len(grades) if grades else 0.0

    def failures(self) -> dict[str, int]:
        return taxonomy_counts((g.failure for g in self.all_grades()), FAILURES)

    def correct_flags(self) -> list[bool]:
        """Per question, in index order: correct on the first sample (paired comparisons)."""
        return [bool(q.grades and q.grades[0].correct) for q in sorted(self.questions, key=lambda q: q.idx)]

    def item_scores(self) -> str | list[float]:
        """Per question in index order: "0"/"1" (one sample each) or the share of correct samples."""
        ordered = sorted(self.questions, key=lambda q: q.idx)
        if all(q.n == 1 for q in ordered):
            return "".join("1" if q.c else "0" for q in ordered)
        return [round(q.c / q.n, 6) if q.n else 0.0 for q in ordered]

    def items_key(self) -> str:
        """Names the questions scored (their indices): two trials with the same key are paired."""
        idx = ",".join(str(q.idx) for q in sorted(self.questions, key=lambda q: q.idx))
        return hashlib.sha256(idx.encode()).hexdigest()[:16]

    def metrics(self) -> dict[str, Any]:
        p1 = self.pass_at_1()
        out: dict[str, Any] = {
            "pass_at_1": round(p1.mean, 6),
            "pass_at_1_se": round(p1.se, 6),
            "score_se": round(p1.se, 6),  # what the promotion rule reads (rrma/promotion.py)
            "item_scores": self.item_scores(),
            "items_key": self.items_key(),
            "questions": len(self.questions),
            "completions": self.n_completions,
            "strict_final_line": round(self.rate("strict_final_line"), 6),
            "trailing_text": round(self.rate("trailing_text"), 6),
            "failures": self.failures(),
            "mode": self.mode,
            "answer_format": self.answer_format,
            "policy": self.policy,
            "grade_seconds": round(self.seconds, 4),
        }
        for k, est in self.pass_at_k().items():
            out[f"pass_at_{k}"] = round(est.mean, 6)
            out[f"pass_at_{k}_se"] = round(est.se, 6)
        return out

    def lines(self) -> list[str]:
        """Greppable ``key: value`` lines (the feedback agents see and the bench prints)."""
        p1 = self.pass_at_1()
        out = [
            f"pass@1: {p1.mean:.4f} ± {p1.se:.4f} (SE, {len(self.questions)} questions, "
            f"{self.n_completions} completions, {self.mode} mode, policy {self.policy})",
        ]
        out += [f"pass@{k}: {est.mean:.4f} ± {est.se:.4f}" for k, est in self.pass_at_k().items()]
        out.append(f"strict_final_line: {self.rate('strict_final_line'):.4f} ('{self.answer_format}' format)")
        out.append(f"trailing_text: {self.rate('trailing_text'):.4f}")
        out.append("failures: " + ", ".join(f"{k}={v}" for k, v in self.failures().items()))
        return out


def grade_pairs(
    pairs: Iterable[tuple[Problem, str]], *, mode: str = "lenient", answer_format: str = "hash"
) -> EvalReport:
    """Grade (problem, completion) pairs; several completions of one problem are its samples."""
    if mode not in MODES:
        raise ValueError(f"unknown grading mode {mode!r}; expected one of {', '.join(MODES)}")
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"unknown answer format {answer_format!r}; expected one of {', '.join(ANSWER_FORMATS)}")
    started = time.perf_counter()
    by_idx: dict[tuple[str, int], QuestionResult] = {}
    for problem, completion in pairs:
        key = (problem.split, problem.idx)
        result = by_idx.get(key)
        if result is None:
            result = by_idx[key] = QuestionResult(problem.idx)
        result.grades.append(grade(completion, problem.gold, mode, answer_format=answer_format))
    if not by_idx:
        raise CompletionsError("nothing to grade: no completions")
    questions = [by_idx[k] for k in sorted(by_idx)]
    return EvalReport(mode, answer_format, questions, time.perf_counter() - started)


def read_completions(path: Path) -> list[dict[str, Any]]:
    """Rows of a completions jsonl file: ``completion`` plus ``idx`` or ``question``."""
    path = Path(path)
    rows = []
    for lineno, row in iter_json_objects(path, CompletionsError, "completions"):
        if not isinstance(row.get("completion"), str):
            raise CompletionsError(f"{path}:{lineno}: field 'completion' is missing or not a string")
        has_idx = isinstance(row.get("idx"), int) and not isinstance(row.get("idx"), bool)
        if not has_idx and not isinstance(row.get("question"), str):
            raise CompletionsError(f"{path}:{lineno}: needs an integer 'idx' or a 'question' string")
        row["_line"] = lineno
        rows.append(row)
    if not rows:
        raise CompletionsError(f"{path}: contains no completions")
    return rows


def match_completions(
    rows: Sequence[dict[str, Any]], problems: Sequence[Problem], *, source: str = "completions"
) -> list[tuple[Problem, str]]:
    """Pair each row with its problem by ``idx`` (line index in the split file) or question text."""
    by_idx = {p.idx: p for p in problems}
    by_q = {question_key(p.question): p for p in problems}
    pairs = []
    for row in rows:
        idx = row.get("idx")
        if isinstance(idx, int) and not isinstance(idx, bool):
            problem = by_idx.get(idx)
            if problem is None:
                raise CompletionsError(
                    f"{source}:{row.get('_line', '?')}: idx {idx} is not a question of this split "
                    f"({len(problems)} questions, idx {min(by_idx)}..{max(by_idx)})"
                )
            if isinstance(row.get("question"), str) and question_key(row["question"]) != question_key(problem.question):
                raise CompletionsError(f"{source}:{row.get('_line', '?')}: idx {idx} and its question text disagree")
        else:
            problem = by_q.get(question_key(row["question"]))
            if problem is None:
                raise CompletionsError(
                    f"{source}:{row.get('_line', '?')}: question not found in this split: {row['question'][:80]!r}"
                )
        pairs.append((problem, row["completion"]))
    return pairs


# ----------------------------------------------------------------------------- shared helpers


def _param(params: dict[str, Any], key: str, default: Any, kind: type | tuple[type, ...]) -> Any:
    value = params.get(key, default)
    if value is not None and not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise OracleError(f"oracle param {key!r} must be {names}, got {value!r}")
    return value


def _check_grading(params: dict[str, Any]) -> tuple[str, str]:
    mode = _param(params, "mode", "lenient", str)
    fmt = _param(params, "answer_format", "hash", str)
    if mode not in MODES:
        raise OracleError(f"oracle param 'mode' must be one of {', '.join(MODES)}, got {mode!r}")
    if fmt not in ANSWER_FORMATS:
        raise OracleError(f"oracle param 'answer_format' must be one of {', '.join(ANSWER_FORMATS)}, got {fmt!r}")
    return mode, fmt


def _gen_args(gen: dict[str, Any], fmt: str) -> list[str]:
    """Command-line flags of ``python -m oracle.gsm8k_gen`` from the oracle's ``gen`` params."""
    from oracle.gsm8k_gen import GenConfig  # light: no torch import at module level

    known = {f.name for f in fields(GenConfig)}
    unknown = sorted(set(gen) - known)
    if unknown:
        raise OracleError(f"unknown oracle 'gen' settings {unknown}; known: {', '.join(sorted(known))}")
    flags = ["--answer-format", fmt]
    mapping = {"max_new_tokens": "--max-new-tokens", "batch_size": "--batch-size", "temperature": "--temperature",
               "num_samples": "--num-samples", "seed": "--seed", "device": "--device"}
    for key, flag in mapping.items():
        if key in gen:
            flags += [flag, str(gen[key])]
    if "stop" in gen:  # a list of strings; [] turns the stop sequences off
        stop = gen["stop"]
        if not isinstance(stop, list) or not all(isinstance(x, str) and x for x in stop):
            raise OracleError(f"oracle 'gen' setting 'stop' must be a list of non-empty strings, got {stop!r}")
        flags += [f"--stop={x}" for x in stop] if stop else ["--no-stop"]
    return flags


def _child_env(extra: dict[str, str] | None = None, *, threads: int = 1) -> dict[str, str]:
    """A small environment for child processes: no API keys, no data locations."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER",
                                                          "CUDA_VISIBLE_DEVICES", "HF_HOME", "XDG_CACHE_HOME"}}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["OMP_NUM_THREADS"] = str(max(1, threads))
    env.update(extra or {})
    return env


def generate_in_child(
    model_dir: Path,
    problems: Sequence[Problem],
    *,
    backend: str,
    gen: dict[str, Any],
    answer_format: str,
    budget: Budget,
    progress: Callable[[dict[str, Any]], None] | None = None,
    cancel: threading.Event | None = None,
    system_prompt: str | None = None,
) -> tuple[ProcessResult, list[tuple[Problem, str]]]:
    """Run the oracle's own generation code on ``model_dir`` in a limited child process.

    The questions go to a private temporary directory (never the trial workspace); the
    answers never leave this process.
    """
    with tempfile.TemporaryDirectory(prefix="rrma-gsm8k-eval-") as tmp:
        tmpdir = Path(tmp)
        qfile = tmpdir / "questions.jsonl"
        with qfile.open("w", encoding="utf-8") as fh:
            for p in problems:
                fh.write(json.dumps({"idx": p.idx, "question": p.question}) + "\n")
        out = tmpdir / "completions.jsonl"
        argv = [*harness_python(), "-m", "oracle.gsm8k_gen", "--model", str(model_dir), "--questions", str(qfile),
                "--out", str(out), "--backend", backend, *_gen_args(gen, answer_format)]
        if system_prompt is not None:
            (tmpdir / "system.txt").write_text(system_prompt, encoding="utf-8")
            argv += ["--system-prompt-file", str(tmpdir / "system.txt")]

        def on_line(line: str) -> str | None:
            m = re.match(r"generated: (\d+)/(\d+)", line)
            if m and progress is not None:
                progress({"phase": "eval", "generated": int(m.group(1)), "of": int(m.group(2))})
            return None

        result = spawn(argv, cwd=tmpdir, budget=budget, env=_child_env(threads=int(budget.num_cpus)),
                             on_line=on_line, cancel=cancel)
        if result.status != Status.ok or not out.is_file():
            return result, []
        rows = read_completions(out)
        return result, match_completions(rows, problems, source="generated completions")


def _data_facts(path: Path) -> dict[str, Any]:
    return {"path": str(path), "sha256": file_sha256(path)}


# ----------------------------------------------------------------------------- gsm8k-eval


class Gsm8kEvalOracle(Oracle):
    """Scores a completions file or a model on a GSM8K split.

    Params: ``completions`` (jsonl path, relative to the trial workspace or absolute) or
    ``model`` (a model directory); ``data`` (file or dir), ``download`` (bool), ``split``
    (test), ``limit``, ``subset_seed``, ``mode`` (lenient|strict), ``answer_format`` (hash),
    ``backend`` (auto|transformers|vllm), ``gen`` (GenConfig fields), ``system_prompt``.
    """

    kind: ClassVar[str] = "gsm8k-eval"
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = _check_grading(self.params)
        self.split = _param(self.params, "split", "test", str)
        self.limit = _param(self.params, "limit", None, int)
        self.subset_seed = _param(self.params, "subset_seed", None, int)
        self._problems: list[Problem] | None = None

    def problems(self) -> list[Problem]:
        if self._problems is None:
            try:
                problems = load_split(self.split, self.params.get("data"), download=bool(self.params.get("download")))
            except DataError as exc:
                raise OracleError(str(exc)) from None
            self._problems = subset(problems, self.limit, self.subset_seed)
        return self._problems

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        problems = self.problems()
        file_split = "test" if self.split == "test" else "train"
        path: Path | None
        try:
            path = locate(file_split, self.params.get("data"))
        except DataError:
            path = Path(self.params["data"]) if self.params.get("data") else None
        facts: dict[str, Any] = {"policy": POLICY_VERSION, "split": self.split, "questions": len(problems)}
        if path is not None and path.is_file():
            facts["data"] = _data_facts(path)
        return facts

    def report_for(self, completions: Path) -> EvalReport:
        rows = read_completions(completions)
        pairs = match_completions(rows, self.problems(), source=str(completions))
        return grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)

    def evaluate(self, ctx: EvalContext) -> Outcome:
        started = time.monotonic()
        comp = self.params.get("completions")
        model = self.params.get("model")
        if comp is None and model is None:
            comp = "completions.jsonl"
        try:
            if comp is not None:
                report = self.report_for(ctx.trial_dir / comp)
                log = ""
            else:
                model_dir = ctx.trial_dir / str(model)
                result, pairs = generate_in_child(
                    model_dir, self.problems(), backend=_param(self.params, "backend", "auto", str),
                    gen=dict(self.params.get("gen") or {}), answer_format=self.answer_format, budget=ctx.budget,
                    progress=ctx.progress, cancel=ctx.cancel, system_prompt=self.params.get("system_prompt"),
                )
                if result.status != Status.ok:
                    return Outcome(status=result.status, feedback=f"generation failed: {result.reason}\n{result.tail}",
                                   log=result.output, seconds=time.monotonic() - started)
                report = grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)
                log = result.output
        except (CompletionsError, DataError) as exc:
            return Outcome(status=Status.invalid, feedback=str(exc), seconds=time.monotonic() - started)
        metrics = report.metrics()
        return Outcome(status=Status.ok, score=metrics["pass_at_1"], metrics=metrics,
                       feedback="\n".join(report.lines()), log=log, seconds=time.monotonic() - started)


# ----------------------------------------------------------------------------- gsm8k-recipe


@dataclass
class _RecipeState:
    train_file: Path
    base_model: str
    heldout: list[Problem]
    facts: dict[str, Any]


class Gsm8kRecipeOracle(Oracle):
    """Runs the agents' training recipe, then scores the model it wrote on held-out questions.

    Params: ``base_model`` (``tiny-random`` = a tiny random Llama built locally, or a model
    directory / hub id handed to the recipe), ``data``, ``download``, ``train_limit`` (train
    problems given to the recipe; None = all of train-pool), ``eval_split`` (dev | test),
    ``eval_limit`` (200), ``eval_subset_seed``, ``mode``, ``answer_format``, ``backend``
    (generation backend for the evaluation), ``gen`` (GenConfig fields), ``eval_seconds`` (the
    part of the trial's wall-clock budget kept for the evaluation; the recipe gets the rest),
    ``eval_memory_mb``, ``recipe`` (recipe.py), ``recipe_args`` (extra argv for the recipe),
    ``output_dir`` (name of the directory the recipe writes, model_out).

    The recipe is called as ``python recipe.py --base-model B --train-data T --output-dir O
    --seed S [recipe_args]`` with the trial workspace as its cwd; lines ``progress: {json}`` it
    prints become ``trial.progress`` samples.
    """

    kind: ClassVar[str] = "gsm8k-recipe"
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = _check_grading(self.params)
        self.eval_split = _param(self.params, "eval_split", "dev", str)
        if self.eval_split not in ("dev", "test"):
            raise OracleError(f"oracle param 'eval_split' must be dev or test (held out), got {self.eval_split!r}")
        self.eval_limit = _param(self.params, "eval_limit", 200, int)
        self.train_limit = _param(self.params, "train_limit", None, int)
        self.recipe = _param(self.params, "recipe", "recipe.py", str)
        self.recipe_args = [str(a) for a in _param(self.params, "recipe_args", [], list)]
        self.output_dir = _param(self.params, "output_dir", "model_out", str)
        self.eval_seconds = float(_param(self.params, "eval_seconds", 1800.0, (int, float)))
        self.eval_memory_mb = int(_param(self.params, "eval_memory_mb", 8192, int))
        self._state: _RecipeState | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock", None)  # locks do not pickle; a copy in another process gets its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        with self._lock:
            return self._prepare(Path(run_dir) / "gsm8k").facts

    def _prepare(self, home: Path) -> _RecipeState:
        if self._state is not None:
            return self._state
        data = self.params.get("data")
        download = bool(self.params.get("download"))
        try:
            pool = load_split("train-pool", data, download=download)
            heldout_all = load_split(self.eval_split, data, download=download)
            # the test split is held out too, whatever eval_split says
            test = heldout_all if self.eval_split == "test" else self._maybe_test(data, download)
        except DataError as exc:
            raise OracleError(str(exc)) from None
        heldout = subset(heldout_all, self.eval_limit, _param(self.params, "eval_subset_seed", None, int))
        train = remove_overlap(pool, [*heldout_all, *test])
        train = subset(train, self.train_limit)
        if not train:
            raise OracleError("no training problems are left once the held-out questions are removed; "
                              "give data with a train split (a directory with train.jsonl, or a train jsonl file)")
        assert_disjoint(train, [*heldout_all, *test])
        home.mkdir(parents=True, exist_ok=True)
        with (home / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            train_file = home / "train.jsonl"
            if not train_file.exists():
                write_jsonl(train, home / "train.jsonl.part").replace(train_file)
                train_file.chmod(0o444)
            base = str(self.params.get("base_model", "tiny-random"))
            if base == "tiny-random":
                model_dir = home / "tiny-random-model"
                if not (model_dir / "config.json").exists():
                    from oracle.gsm8k_gen import build_tiny_model

                    build_tiny_model(home / "tiny-random-model.part", seed=0)
                    shutil.rmtree(model_dir, ignore_errors=True)
                    (home / "tiny-random-model.part").rename(model_dir)
                base = str(model_dir)
        facts = {
            "policy": POLICY_VERSION,
            "base_model": base,
            "train_problems": len(train),
            "train_sha256": file_sha256(train_file),
            "eval_split": self.eval_split,
            "eval_questions": len(heldout),
            "eval_indices_head": [p.idx for p in heldout[:10]],
        }
        self._state = _RecipeState(train_file, base, heldout, facts)
        return self._state

    def _maybe_test(self, data: Any, download: bool) -> list[Problem]:
        if data is not None and Path(data).is_file():
            return []  # one jsonl file is a train-only source: dev comes from it, there is no test part
        try:
            return load_split("test", data, download=download)
        except DataError:
            return []  # a train-only data file: nothing more to hold out

    def evaluate(self, ctx: EvalContext) -> Outcome:
        started = time.monotonic()
        with self._lock:
            state = self._prepare(ctx.trial_dir.parent / ".gsm8k-recipe")
        recipe = ctx.trial_dir / self.recipe
        if not recipe.is_file():
            return Outcome(status=Status.invalid, feedback=f"{self.recipe} is missing from the workspace")
        out_dir = ctx.trial_dir / self.output_dir
        shutil.rmtree(out_dir, ignore_errors=True)
        argv = [sys.executable, str(recipe), "--base-model", state.base_model, "--train-data", str(state.train_file),
                "--output-dir", str(out_dir), "--seed", str(ctx.seed), *self.recipe_args]
        hub_offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"} if Path(state.base_model).exists() else {}
        env = _child_env({"RRMA_SEED": str(ctx.seed), **hub_offline}, threads=int(ctx.budget.num_cpus))

        def on_line(line: str) -> str | None:
            if line.startswith("progress: "):
                with contextlib.suppress(json.JSONDecodeError, TypeError):
                    sample = json.loads(line[len("progress: "):])
                    if isinstance(sample, dict):
                        ctx.progress({"phase": "train", **sample})
            return None

        # the trial budget covers training and evaluation: eval_seconds of it are kept for the evaluation
        train_seconds = ctx.budget.seconds - self.eval_seconds
        if train_seconds <= 0:
            raise OracleError(f"budget.trial_seconds ({ctx.budget.seconds:g}) must exceed the oracle's eval_seconds "
                              f"({self.eval_seconds:g}): the evaluation is part of the trial budget")
        train_budget = ctx.budget.model_copy(update={"seconds": train_seconds})
        # the recipe reads its train file and base model (shown read-only, though they live in the run
        # dir that is hidden from it); every GSM8K source is hidden from it
        guard = None
        if ctx.guard is not None:
            given = [p for p in (state.train_file, Path(state.base_model)) if p.exists()]
            guard = ctx.guard.protecting(*given).hiding(*data_locations(self.params.get("data")))
        train = spawn(argv, cwd=ctx.trial_dir, budget=train_budget, env=env, on_line=on_line, cancel=ctx.cancel,
                            guard=guard)
        if train.status != Status.ok:
            return Outcome(status=train.status, feedback=f"recipe: {train.reason}\n{train.tail}", log=train.output,
                           seconds=time.monotonic() - started, metrics={"train_seconds": round(train.seconds, 2)})
        if not (out_dir / "config.json").is_file():
            return Outcome(status=Status.crash, log=train.output, seconds=time.monotonic() - started,
                           feedback=f"recipe exited 0 but wrote no model (no config.json) to {self.output_dir}/\n{train.tail}")
        remaining = ctx.budget.seconds - (time.monotonic() - started)
        eval_budget = Budget(seconds=max(1.0, min(self.eval_seconds, remaining)), memory_mb=self.eval_memory_mb,
                             num_cpus=ctx.budget.num_cpus, num_gpus=ctx.budget.num_gpus)
        gen_result, pairs = generate_in_child(
            out_dir, state.heldout, backend=_param(self.params, "backend", "auto", str),
            gen=dict(self.params.get("gen") or {}), answer_format=self.answer_format, budget=eval_budget,
            progress=ctx.progress, cancel=ctx.cancel,
        )
        log = train.output + "\n--- oracle evaluation ---\n" + gen_result.output
        if gen_result.status != Status.ok or not pairs:
            status = Status.crash if gen_result.status == Status.ok else gen_result.status
            return Outcome(status=status, log=log, seconds=time.monotonic() - started,
                           feedback=f"evaluation of the trained model failed: {gen_result.reason}\n{gen_result.tail}")
        report = grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)
        metrics = report.metrics()
        metrics.update(train_seconds=round(train.seconds, 2), eval_seconds=round(gen_result.seconds, 2),
                       train_peak_rss_mb=round(train.peak_rss_mb, 1), eval_split=self.eval_split)
        (ctx.trial_dir / "oracle_eval.json").write_text(json.dumps(
            {"metrics": metrics, "correct": report.correct_flags(), "idx": [q.idx for q in report.questions]}))
        feedback = "\n".join([*report.lines(), f"train_seconds: {train.seconds:.1f}",
                              f"eval_seconds: {gen_result.seconds:.1f}"])
        return Outcome(status=Status.ok, score=metrics["pass_at_1"], metrics=metrics, feedback=feedback, log=log,
                       seconds=time.monotonic() - started)


# ----------------------------------------------------------------------------- gsm8k-prompt


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True


@dataclass
class _Endpoint:
    provider: str
    model: str
    base_url: str | None
    api_key: str


class Gsm8kPromptOracle(Oracle):
    """Scores the agents' system prompt on a fixed dev subset through a chat endpoint.

    Params: ``provider`` (openai | anthropic), ``model`` (required), ``base_url`` (else
    ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``), ``api_key_env`` (name of the variable
    holding the key; OPENAI_API_KEY / ANTHROPIC_API_KEY), ``prompt_file`` (system_prompt.txt),
    ``data``, ``download``, ``split`` (dev), ``limit`` (50), ``subset_seed``, ``mode``,
    ``answer_format``, ``max_tokens`` (512), ``temperature`` (0), ``concurrency`` (4),
    ``timeout_s`` (60), ``max_retries`` (2), ``max_prompt_chars`` (8000), ``stop`` (stop sequences sent
    to the endpoint, at most 4 as OpenAI allows; default ``["\\nQuestion:"]``: a few-shot prompt's next question).

    The user message is the question alone; only the system prompt is the agent's. A local
    OpenAI-compatible server (vLLM) needs no key: with a base URL and no key, ``EMPTY`` is sent.
    """

    kind: ClassVar[str] = "gsm8k-prompt"
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = _check_grading(self.params)
        self.provider = _param(self.params, "provider", "openai", str)
        if self.provider not in ("openai", "anthropic"):
            raise OracleError(f"oracle param 'provider' must be openai or anthropic, got {self.provider!r}")
        self.prompt_file = _param(self.params, "prompt_file", "system_prompt.txt", str)
        self.split = _param(self.params, "split", "dev", str)
        self.limit = _param(self.params, "limit", 50, int)
        self.concurrency = max(1, _param(self.params, "concurrency", 4, int))
        self.max_tokens = _param(self.params, "max_tokens", 512, int)
        self.temperature = float(_param(self.params, "temperature", 0.0, (int, float)))
        self.max_prompt_chars = _param(self.params, "max_prompt_chars", 8000, int)
        stop = _param(self.params, "stop", ["\nQuestion:"], list)
        if not all(isinstance(x, str) and x.strip() for x in stop) or len(stop) > 4:
            raise OracleError(f"oracle param 'stop' must be a list of at most 4 non-blank strings, got {stop!r}")
        self.stop: list[str] = list(stop)
        self._problems: list[Problem] | None = None
        self._client: Any = None
        self._client_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_client_lock", None)  # neither the lock nor the SDK client pickles
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()

    def endpoint(self) -> _Endpoint:
        """Resolve model, URL and key from params and the environment, or raise OracleError."""
        openai = self.provider == "openai"
        model = self.params.get("model")
        base_url = self.params.get("base_url") or os.environ.get("OPENAI_BASE_URL" if openai else "ANTHROPIC_BASE_URL")
        key_env = self.params.get("api_key_env") or ("OPENAI_API_KEY" if openai else "ANTHROPIC_API_KEY")
        key = os.environ.get(str(key_env), "")
        if not model:
            raise OracleError("gsm8k-prompt needs oracle param 'model' (the chat model to prompt)")
        if not key and not (openai and base_url):
            where = "set OPENAI_BASE_URL (or params.base_url) for a local OpenAI-compatible server, or " if openai else ""
            raise OracleError(
                f"gsm8k-prompt ({self.provider}) has no endpoint: {where}set {key_env} to an API key"
            )
        return _Endpoint(self.provider, str(model), base_url, key or "EMPTY")

    def problems(self) -> list[Problem]:
        if self._problems is None:
            try:
                problems = load_split(self.split, self.params.get("data"), download=bool(self.params.get("download")))
            except DataError as exc:
                raise OracleError(str(exc)) from None
            self._problems = subset(problems, self.limit, _param(self.params, "subset_seed", None, int))
        return self._problems

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        ep = self.endpoint()
        problems = self.problems()
        return {"policy": POLICY_VERSION, "provider": ep.provider, "model": ep.model, "base_url": ep.base_url,
                "split": self.split, "questions": len(problems), "indices_head": [p.idx for p in problems[:10]]}

    def _make_client(self, ep: _Endpoint) -> Any:
        timeout = float(_param(self.params, "timeout_s", 60.0, (int, float)))
        retries = int(_param(self.params, "max_retries", 2, int))
        if ep.provider == "openai":
            import openai

            return openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, timeout=timeout, max_retries=retries)
        import anthropic

        return anthropic.Anthropic(base_url=ep.base_url, api_key=ep.api_key, timeout=timeout, max_retries=retries)

    def ask(self, system_prompt: str, question: str) -> tuple[str, int, int]:
        """One chat call: (completion text, input tokens, output tokens)."""
        ep = self.endpoint()
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client(ep)
            client = self._client
        if ep.provider == "openai":
            messages = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
            messages.append({"role": "user", "content": question})
            stop: dict[str, Any] = {"stop": self.stop} if self.stop else {}
            resp = client.chat.completions.create(model=ep.model, messages=messages, max_tokens=self.max_tokens,
                                                  temperature=self.temperature, **stop)
            text = truncate_at_stop(resp.choices[0].message.content or "", self.stop)
            usage = resp.usage
            return text, getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0
        kwargs: dict[str, Any] = {"system": system_prompt} if system_prompt.strip() else {}
        if _accepts(client.messages.create, "temperature"):  # recent SDKs dropped the parameter
            kwargs["temperature"] = self.temperature
        if self.stop:
            kwargs["stop_sequences"] = self.stop
        resp = client.messages.create(model=ep.model, max_tokens=self.max_tokens,
                                      messages=[{"role": "user", "content": question}], **kwargs)
        text = truncate_at_stop("".join(getattr(block, "text", "") for block in resp.content), self.stop)
        return text, resp.usage.input_tokens, resp.usage.output_tokens

    def evaluate(self, ctx: EvalContext) -> Outcome:
        started = time.monotonic()
        path = ctx.trial_dir / self.prompt_file
        if not path.is_file():
            return Outcome(status=Status.invalid, feedback=f"{self.prompt_file} is missing from the workspace")
        system_prompt = path.read_text(encoding="utf-8")
        if len(system_prompt) > self.max_prompt_chars:
            return Outcome(status=Status.invalid, feedback=(
                f"{self.prompt_file} has {len(system_prompt)} characters; the limit is {self.max_prompt_chars}"))
        problems = self.problems()
        completions: list[str | None] = [None] * len(problems)
        errors: list[str] = []
        tokens = [0, 0]
        done = [0, 0]  # answered (a failed call counts: it is graded as no answer), correct
        lock = threading.Lock()
        every = max(1, len(problems) // 50)  # at most ~50 progress samples a trial

        def one(i: int) -> None:
            if ctx.cancel.is_set():
                return
            try:
                text, tin, tout = self.ask(system_prompt, problems[i].question)
            except Exception as exc:  # SDK errors (connection, status, timeout): counted, reported below
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                text, tin, tout = "", 0, 0
            else:
                with lock:
                    completions[i] = text
            hit = grade(text, problems[i].gold, self.mode, answer_format=self.answer_format).correct
            with lock:
                tokens[0] += tin
                tokens[1] += tout
                done[0] += 1
                done[1] += hit
                if done[0] % every == 0 or done[0] == len(problems):
                    # items/hits feed the loop's SPRT early abort (rrma/abort.py)
                    ctx.progress({"phase": "eval", "answered": done[0], "of": len(problems), "items": done[0],
                                  "hits": done[1], "frac": round(done[0] / len(problems), 4)})

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            list(pool.map(one, range(len(problems))))
        seconds = time.monotonic() - started
        if ctx.cancel.is_set():
            return Outcome(status=Status.aborted, feedback="cancelled: the run is stopping", seconds=seconds)
        if errors and len(errors) * 2 > len(problems):
            return Outcome(status=Status.crash, seconds=seconds,
                           feedback=f"{len(errors)}/{len(problems)} endpoint calls failed; first: {errors[0]}")
        # a failed call counts as an empty completion (no_answer), so the score never skips questions
        pairs = [(p, c if c is not None else "") for p, c in zip(problems, completions, strict=True)]
        report = grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)
        metrics = report.metrics()
        metrics.update(tokens_in=tokens[0], tokens_out=tokens[1], endpoint_errors=len(errors))
        lines = report.lines()
        if errors:
            lines.append(f"endpoint_errors: {len(errors)} (first: {errors[0]})")
        return Outcome(status=Status.ok, score=metrics["pass_at_1"], metrics=metrics, feedback="\n".join(lines),
                       seconds=seconds)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


__all__ = [
    "CompletionsError",
    "EvalReport",
    "Gsm8kEvalOracle",
    "Gsm8kPromptOracle",
    "Gsm8kRecipeOracle",
    "QuestionResult",
    "generate_in_child",
    "grade_pairs",
    "match_completions",
    "read_completions",
]
