"""The GSM8K oracles: ``gsm8k-eval``, ``gsm8k-recipe`` and ``gsm8k-prompt``.

Why it exists: three ways of improving GSM8K accuracy (score a model or a completions file,
improve a training recipe, improve a system prompt) share one scorer, :func:`grade_pairs`,
built on the versioned policy of :mod:`oracle.gsm8k` and the statistics of :mod:`rrma.stats`.

Invariants (what keeps the score honest):

* The oracle owns the questions, the gold answers, the prompt around the agent's part, the
  decoding settings and the verifier. An agent edits only its surface (``recipe.py`` or
  ``system_prompt.txt``); nothing it edits is imported or read by the scoring code.
* ``gsm8k-recipe`` gives the recipe only the ``train-pool`` split (train minus dev, minus any
  held-out question: :func:`oracle.gsm8k_data.assert_disjoint` is checked), read-only. The recipe
  runs in its own process group under the trial budget; the oracle then evaluates the model
  directory it wrote in a *separate* child process with the oracle's own generation code, on
  held-out questions written to the oracle's own directory (``ctx.oracle_dir``).
* Held out means unreadable: every oracle's ``held_out()`` names every place GSM8K split files
  and download caches live (:func:`oracle.gsm8k_data.held_out_paths`); the executor hides them
  from trial programs and the loop from coding agents.
* What an agent's program wrote is data, read without following links. The harness never writes
  into a trial's directory (a planted ``oracle_eval.json -> ../../../events.jsonl`` would turn
  the write into one on the run log): what the oracle writes goes to ``ctx.oracle_dir`` (or, for
  a caller without one, a private temporary directory) through :mod:`rrma.contain.files`; what it
  reads there (completions, system prompt, the model directory) is refused when it is or goes
  through a symbolic link. The trained model is loaded by the scorer child under
  ``Policy.for_scorer`` (model read-only, only its own scratch writable, no network) and only as
  safetensors with built-in code (:func:`oracle.gsm8k_gen.check_model_dir`).
* Scores are pass@1 on a fixed, index-determined subset; metrics carry the standard error,
  the strict-final-line and trailing-text rates and the failure taxonomy, plus what the loop's
  promotion rule reads (rrma/run/promotion.py): ``score_se`` and the per-question ``item_scores``
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
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from oracle.gsm8k import (
    ANSWER_FORMATS,
    FAILURES,
    MODES,
    POLICY_VERSION,
    STOP_SEQUENCES,
    Grade,
    grade,
    truncate_at_stop,
)
from oracle.gsm8k_data import (
    REPO_ROOT,
    DataError,
    Problem,
    assert_disjoint,
    file_sha256,
    held_out_paths,
    iter_json_lines,
    iter_json_objects,
    jsonl_bytes,
    load_split,
    locate,
    question_key,
    remove_overlap,
    subset,
)
from rrma.contain import files
from rrma.contain.files import LinkRefused, link_free
from rrma.contain.sandbox import Policy, harness_python
from rrma.contain.spawn import ProcessResult, spawn
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.models import ModelStoreError, model_path
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
            "score_se": round(p1.se, 6),  # what the promotion rule reads (rrma/run/promotion.py)
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
    """Rows of a completions jsonl file (a person's file: the bench): ``completion`` plus ``idx`` or ``question``."""
    path = Path(path)
    return _completion_rows(iter_json_objects(path, CompletionsError, "completions"), str(path))


def parse_completions(text: str, source: str) -> list[dict[str, Any]]:
    """Rows of completions jsonl text read by the oracle itself (see :func:`read_completions`)."""
    return _completion_rows(iter_json_lines(text.splitlines(), source, CompletionsError), source)


def _completion_rows(objects: Iterable[tuple[int, dict[str, Any]]], source: str) -> list[dict[str, Any]]:
    path = source
    rows = []
    for lineno, row in objects:
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


COMPLETIONS_LIMIT = 1 << 30  # bytes of completions the oracle reads back from its generation child


def _scratch_env(scratch: Path) -> dict[str, str]:
    """Caches of the libraries a scorer loads, inside its own writable scratch (offline: the model is local)."""
    return {"HF_HOME": str(scratch / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "XDG_CACHE_HOME": str(scratch / "cache"),
            "TRITON_CACHE_DIR": str(scratch / "triton"), "VLLM_CACHE_ROOT": str(scratch / "vllm")}


def generate_in_child(
    model_dir: Path,
    problems: Sequence[Problem],
    *,
    backend: str,
    gen: dict[str, Any],
    answer_format: str,
    budget: Budget,
    workdir: Path | None = None,
    trial_guard: Policy | None = None,
    hidden: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    progress: Callable[[dict[str, Any]], None] | None = None,
    cancel: threading.Event | None = None,
    system_prompt: str | None = None,
) -> tuple[ProcessResult, list[tuple[Problem, str]]]:
    """Run the oracle's own generation code on ``model_dir`` in a limited child process.

    The questions (never the answers) and the child's output live in a fresh ``generation/``
    directory under ``workdir`` (the oracle's own directory: ``ctx.oracle_dir``), or in a private
    temporary directory when there is none; never in the trial's workspace. That directory is
    removed once the completions are read back: no copy of held-out questions stays on disk. With ``trial_guard``
    (the trial's ``ctx.guard``: the sandbox is on) the child runs under ``Policy.for_scorer``: the
    model directory (and ``readable``) read-only, only its scratch writable, the trial's hidden
    paths and ``hidden`` absent, no network.
    """
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rrma-gsm8k-eval-")))
        scratch = files.fresh_dir(Path(workdir).absolute() / "generation")
        stack.callback(files.remove_tree, scratch)  # never follows a link the child left, never raises
        files.write_bytes(scratch, "questions.jsonl", "".join(
            json.dumps({"idx": p.idx, "question": p.question}) + "\n" for p in problems).encode("utf-8"))
        out = scratch / "completions.jsonl"
        model = Path(model_dir).absolute()
        argv = [*harness_python(), "-m", "oracle.gsm8k_gen", "--model", str(model), "--questions",
                str(scratch / "questions.jsonl"), "--out", str(out), "--backend", backend, *_gen_args(gen, answer_format)]
        if system_prompt is not None:
            files.write_bytes(scratch, "system.txt", system_prompt.encode("utf-8"))
            argv += ["--system-prompt-file", str(scratch / "system.txt")]

        def on_line(line: str) -> str | None:
            m = re.match(r"generated: (\d+)/(\d+)", line)
            if m and progress is not None:
                progress({"phase": "eval", "generated": int(m.group(1)), "of": int(m.group(2))})
            return None

        guard = None
        if trial_guard is not None:
            guard = Policy.for_scorer((model, *readable), writable=(scratch,), hidden=(*trial_guard.hidden, *hidden),
                                      required=trial_guard.required)
        env = _child_env(_scratch_env(scratch), threads=int(budget.num_cpus))
        result = spawn(argv, cwd=scratch, budget=budget, env=env, on_line=on_line, cancel=cancel, guard=guard)
        if result.status != Status.ok:
            return result, []
        try:
            text = files.read_bytes(scratch, "completions.jsonl", limit=COMPLETIONS_LIMIT).decode("utf-8")
        except (OSError, ValueError):
            return result, []
        rows = parse_completions(text, "generated completions")
        return result, match_completions(rows, problems, source="generated completions")


def _inside(root: Path, rel: str) -> Path:
    """``root/rel`` for a relative path an agent's program may have built with links: no component may
    be a link (:func:`rrma.contain.files.link_free`; nothing of the trial runs while the oracle reads),
    nor may the path be absolute or climb out with ``..`` (LinkRefused)."""
    try:
        return link_free(root, rel)
    except LinkRefused as exc:
        raise LinkRefused(f"{exc}; the oracle reads nothing through a link") from None


def _link_targets(model: Path) -> list[Path]:
    """Directories the links of a person's model directory point into (a hub cache snapshot's blobs)."""
    targets: list[Path] = []
    with contextlib.suppress(OSError):
        for path in model.rglob("*"):
            if path.is_symlink():
                parent = path.resolve().parent
                if parent not in targets:
                    targets.append(parent)
    return targets


@contextlib.contextmanager
def _oracle_home(ctx: EvalContext) -> Iterator[Path]:
    """Where the oracle writes for one evaluation: ``ctx.oracle_dir`` (harness-only, never seen by
    the trial), or for a caller without one a private temporary directory, removed afterwards."""
    if ctx.oracle_dir is not None:
        yield Path(ctx.oracle_dir).absolute()
        return
    with tempfile.TemporaryDirectory(prefix="rrma-gsm8k-oracle-") as tmp:
        yield Path(tmp)


def _check_model(root: Path, rel: str, *, follow_links: bool = False) -> tuple[Path | None, Outcome | None]:
    """The model directory ``root/rel`` an agent's program wrote (or, ``follow_links``, a person's
    model at the absolute path ``rel``), or the outcome that refuses it."""
    from oracle.gsm8k_gen import GenerationError, UnsafeModel, check_model_dir

    try:
        model = Path(rel) if follow_links else _inside(root, rel)
        if not os.path.lexists(model):
            where = rel if follow_links else f"{rel}/ in the workspace"
            return None, Outcome(status=Status.crash, feedback=f"no model directory {where}")
        names = check_model_dir(model, follow_links=follow_links)
    except (LinkRefused, UnsafeModel) as exc:
        return None, Outcome(status=Status.rejected, feedback=f"model rejected: {exc}")
    except GenerationError as exc:
        return None, Outcome(status=Status.invalid, feedback=f"model not readable: {exc}")
    if "config.json" not in names:
        return None, Outcome(status=Status.crash, feedback=f"no model in {rel}/ (no config.json)")
    return model, None


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
    holds_answers = True  # its held-out data is the answers (rrma/declare.py)
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

    def held_out(self) -> tuple[Path, ...]:
        """Every GSM8K split file and download cache (:func:`oracle.gsm8k_data.held_out_paths`)."""
        return held_out_paths(self.params.get("data"))

    def report_for(self, completions: Path) -> EvalReport:
        rows = read_completions(completions)
        pairs = match_completions(rows, self.problems(), source=str(completions))
        return grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)

    def _trial_completions(self, trial_dir: Path, rel: str) -> EvalReport:
        """Grade the completions file the trial holds, read without following a link."""
        try:
            data = files.read_bytes(trial_dir, rel, limit=COMPLETIONS_LIMIT)
        except FileNotFoundError:
            raise CompletionsError(f"{rel}: no such completions file in the workspace") from None
        except ValueError as exc:
            raise CompletionsError(str(exc)) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CompletionsError(f"{rel}: not UTF-8 text") from None
        pairs = match_completions(parse_completions(text, rel), self.problems(), source=rel)
        return grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)

    def evaluate(self, ctx: EvalContext) -> Outcome:
        started = time.monotonic()
        comp = self.params.get("completions")
        model = self.params.get("model")
        if comp is None and model is None:
            comp = "completions.jsonl"
        trial_dir = Path(ctx.trial_dir).absolute()
        try:
            if comp is not None:
                # a person's absolute path is read as given; the trial's own file never through a link
                report = (self.report_for(Path(comp)) if Path(str(comp)).is_absolute()
                          else self._trial_completions(trial_dir, str(comp)))
                log = ""
            else:
                readable: list[Path] = []
                if Path(str(model)).is_absolute():  # a person's model (links allowed: a hub cache snapshot)
                    model_dir, refused = _check_model(Path("/"), str(model), follow_links=True)
                    readable = _link_targets(Path(str(model)))
                else:
                    model_dir, refused = _check_model(trial_dir, str(model))
                if refused is not None:
                    refused.seconds = time.monotonic() - started
                    return refused
                assert model_dir is not None
                with _oracle_home(ctx) as home:
                    result, pairs = generate_in_child(
                        model_dir, self.problems(), backend=_param(self.params, "backend", "auto", str),
                        gen=dict(self.params.get("gen") or {}), answer_format=self.answer_format, budget=ctx.budget,
                        workdir=home, trial_guard=ctx.guard, hidden=self.held_out(), readable=readable,
                        progress=ctx.progress, cancel=ctx.cancel, system_prompt=self.params.get("system_prompt"),
                    )
                if result.status != Status.ok or not pairs:
                    status = Status.crash if result.status == Status.ok else result.status
                    return Outcome(status=status, feedback=f"generation failed: {result.reason}\n{result.tail}",
                                   log=result.output, seconds=time.monotonic() - started)
                report = grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)
                log = result.output
        except LinkRefused as exc:
            return Outcome(status=Status.rejected, feedback=f"refused: {exc}", seconds=time.monotonic() - started)
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
    directory / hub id handed to the recipe, or a model of the store by name: ``smollm2``), ``data``, ``download``, ``train_limit`` (train
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
    holds_answers = True  # its held-out data is the answers (rrma/declare.py)
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
        self._private_home: Path | None = None  # prepared without a run dir: a temporary directory of ours
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock", None)  # locks do not pickle; a copy in another process gets its own
        state["_private_home"] = None  # the original removes its private home; a copy never does
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def held_out(self) -> tuple[Path, ...]:
        """Every GSM8K split file and download cache (:func:`oracle.gsm8k_data.held_out_paths`).

        The oracle's own state (``<run>/gsm8k``: the recipe's train file and the base model) holds no
        held-out question: the dev and test questions stay in memory, and the copy the scorer reads
        is written to ``ctx.oracle_dir``, which the executor hides already.
        """
        return held_out_paths(self.params.get("data"))

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        with self._lock:
            # absolute: the recipe runs in its workspace, where a relative --runs path means something else
            return self._prepare(Path(run_dir).absolute() / "gsm8k").facts

    def _prepared(self) -> _RecipeState:
        """The prepared state; a caller that never called :meth:`prepare` gets one in a private
        temporary directory (removed by :meth:`close`), never next to a trial's workspace."""
        with self._lock:
            if self._state is None:
                self._private_home = home = Path(tempfile.mkdtemp(prefix="rrma-gsm8k-recipe-"))
                weakref.finalize(self, files.remove_tree, home)  # also without close()
                return self._prepare(home)
            return self._state

    def close(self) -> None:
        home, self._private_home = self._private_home, None
        if home is not None:
            files.remove_tree(home)
            self._state = None

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
        home = home.absolute()
        home.mkdir(parents=True, exist_ok=True)
        with (home / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            train_file = home / "train.jsonl"
            # written afresh each prepare (a new file renamed over the name: whatever was there, a link
            # included, is replaced, never written through); read-only to the recipe
            files.write_bytes(home, "train.jsonl", jsonl_bytes(train), mode=0o444)
            base = str(self.params.get("base_model", "tiny-random"))
            try:  # a model of the store by name (smollm2): its verified directory (rrma/models.py)
                base = model_path(base)
            except ModelStoreError as exc:
                raise OracleError(str(exc)) from None
            if base != "tiny-random" and Path(base).exists():
                base = str(Path(base).absolute())  # a local model directory, named the same from any cwd
            if base == "tiny-random":
                model_dir = home / "tiny-random-model"
                if not (model_dir / "config.json").exists():
                    from oracle.gsm8k_gen import build_tiny_model

                    build_tiny_model(home / "tiny-random-model.part", seed=0)
                    files.remove_tree(model_dir)
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
        state = self._prepared()
        trial_dir = Path(ctx.trial_dir).absolute()  # the recipe's cwd: every path it is given is absolute
        recipe = trial_dir / self.recipe
        if recipe.is_symlink() or not recipe.is_file():
            return Outcome(status=Status.invalid, feedback=f"{self.recipe} is missing from the workspace")
        try:
            out_dir = _inside(trial_dir, self.output_dir)
        except LinkRefused as exc:
            raise OracleError(f"oracle param 'output_dir' must be a plain relative path: {exc}") from None
        files.remove_tree(out_dir)
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
        # the recipe reads its train file (train minus dev) and base model, shown read-only though they live
        # in the run dir that is hidden from it; every GSM8K split file and cache is absent (held_out(): the
        # executor hides them already, hidden again here for a caller whose guard did not)
        guard = None
        if ctx.guard is not None:
            given = [p for p in (state.train_file, Path(state.base_model)) if p.exists()]
            guard = ctx.guard.hiding(*self.held_out()).protecting(*given)
        train = spawn(argv, cwd=trial_dir, budget=train_budget, env=env, on_line=on_line, cancel=ctx.cancel,
                      guard=guard)
        if train.status != Status.ok:
            return Outcome(status=train.status, feedback=f"recipe: {train.reason}\n{train.tail}", log=train.output,
                           seconds=time.monotonic() - started, metrics={"train_seconds": round(train.seconds, 2)})
        # the recipe's processes are gone: what it left is read as data, refused when it holds a link,
        # pickle weights or custom code
        model_dir, refused = _check_model(trial_dir, self.output_dir)
        if refused is not None:
            if refused.status == Status.crash:
                refused.feedback = (f"recipe exited 0 but wrote no model (no config.json) to {self.output_dir}/"
                                    f"\n{train.tail}")
            refused.log, refused.seconds = train.output, time.monotonic() - started
            return refused
        assert model_dir is not None
        remaining = ctx.budget.seconds - (time.monotonic() - started)
        eval_budget = Budget(seconds=max(1.0, min(self.eval_seconds, remaining)), memory_mb=self.eval_memory_mb,
                             num_cpus=ctx.budget.num_cpus, num_gpus=ctx.budget.num_gpus)
        with _oracle_home(ctx) as home:
            gen_result, pairs = generate_in_child(
                model_dir, state.heldout, backend=_param(self.params, "backend", "auto", str),
                gen=dict(self.params.get("gen") or {}), answer_format=self.answer_format, budget=eval_budget,
                workdir=home, trial_guard=ctx.guard, hidden=self.held_out(), progress=ctx.progress, cancel=ctx.cancel,
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
            # the oracle's record, in its own directory (never the trial's: a link planted there is not followed)
            files.write_bytes(home, "oracle_eval.json", json.dumps(
                {"metrics": metrics, "correct": report.correct_flags(), "idx": [q.idx for q in report.questions]}
            ).encode("utf-8"))
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

    Params: ``provider`` (openai | anthropic | local), ``model`` (required), ``base_url`` (else
    ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``), ``api_key_env`` (name of the variable
    holding the key; OPENAI_API_KEY / ANTHROPIC_API_KEY), ``prompt_file`` (system_prompt.txt),
    ``data``, ``download``, ``split`` (dev), ``limit`` (50), ``subset_seed``, ``mode``,
    ``answer_format``, ``max_tokens`` (512), ``temperature`` (0), ``concurrency`` (4),
    ``timeout_s`` (60), ``max_retries`` (2), ``max_prompt_chars`` (8000), ``stop`` (stop sequences sent
    to the endpoint, at most 4 as OpenAI allows; default ``["\\nQuestion:"]``: a few-shot prompt's next question).

    The user message is the question alone; only the system prompt is the agent's. A local
    OpenAI-compatible server (vLLM) needs no key: with a base URL and no key, ``EMPTY`` is sent.
    ``provider: local`` answers with a model on this machine instead (``model``: a model of the store by
    name, ``smollm2``, or a Hugging Face directory), through the transformers generator of
    :mod:`oracle.gsm8k_gen` (batched, CPU or GPU, loaded once per oracle), ``stop`` added to its stop
    sequences; no network, no key. Its trials run one at a time (one model in memory).
    """

    kind: ClassVar[str] = "gsm8k-prompt"
    holds_answers, needs_workspace = True, False  # answers held out; no workspace needed (rrma/declare.py)
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = _check_grading(self.params)
        self.provider = _param(self.params, "provider", "openai", str)
        if self.provider not in ("openai", "anthropic", "local"):
            raise OracleError(f"oracle param 'provider' must be openai, anthropic or local, got {self.provider!r}")
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
        self._generator: Any = None  # provider local: the loaded model (oracle.gsm8k_gen)
        self._generator_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_client_lock", None)  # neither the locks, the SDK client nor a loaded model pickles
        state.pop("_generator_lock", None)
        state["_client"] = None
        state["_generator"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()
        self._generator_lock = threading.Lock()

    def endpoint(self) -> _Endpoint:
        """Resolve model, URL and key from params and the environment, or raise OracleError."""
        openai = self.provider == "openai"
        model = self.params.get("model")
        base_url = self.params.get("base_url") or os.environ.get("OPENAI_BASE_URL" if openai else "ANTHROPIC_BASE_URL")
        key_env = self.params.get("api_key_env") or ("OPENAI_API_KEY" if openai else "ANTHROPIC_API_KEY")
        key = os.environ.get(str(key_env), "")
        if not model:
            raise OracleError("gsm8k-prompt needs oracle param 'model' (the chat model to prompt)")
        if self.provider == "local":
            try:  # a store name: its verified directory (ModelMissing names the pull command)
                return _Endpoint("local", str(model), model_path(str(model)), "")
            except ModelStoreError as exc:
                raise OracleError(str(exc)) from None
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

    def held_out(self) -> tuple[Path, ...]:
        """Every GSM8K split file and download cache: a coding agent writing the prompt must not read
        the dev answers it is scored on (:func:`oracle.gsm8k_data.held_out_paths`)."""
        return held_out_paths(self.params.get("data"))

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
        try:  # the trial's file, never read through a link (4 bytes a character at most in UTF-8)
            raw = files.read_bytes(Path(ctx.trial_dir).absolute(), self.prompt_file, limit=4 * self.max_prompt_chars)
            system_prompt = raw.decode("utf-8")
        except FileNotFoundError:
            return Outcome(status=Status.invalid, feedback=f"{self.prompt_file} is missing from the workspace")
        except LinkRefused as exc:
            return Outcome(status=Status.rejected, feedback=f"refused: {exc}")
        except UnicodeDecodeError:
            return Outcome(status=Status.invalid, feedback=f"{self.prompt_file} is not UTF-8 text")
        except ValueError:
            return Outcome(status=Status.invalid, feedback=(
                f"{self.prompt_file} has more than {4 * self.max_prompt_chars} bytes; the limit is "
                f"{self.max_prompt_chars} characters"))
        if len(system_prompt) > self.max_prompt_chars:
            return Outcome(status=Status.invalid, feedback=(
                f"{self.prompt_file} has {len(system_prompt)} characters; the limit is {self.max_prompt_chars}"))
        problems = self.problems()
        if self.provider == "local":
            return self._evaluate_local(ctx, system_prompt, problems, started)
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
                    # items/hits feed the loop's SPRT early abort (rrma/run/abort.py)
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

    def _evaluate_local(self, ctx: EvalContext, system_prompt: str, problems: list[Problem],
                        started: float) -> Outcome:
        """``provider: local``: the questions through the model on this machine, in batches."""
        from oracle.gsm8k_gen import GenConfig, GenerationError, make_generator

        with self._generator_lock:  # one model, one trial at a time
            if ctx.cancel.is_set():
                return Outcome(status=Status.aborted, feedback="cancelled: the run is stopping")
            try:
                if self._generator is None:
                    config = GenConfig(max_new_tokens=self.max_tokens, temperature=self.temperature,
                                       answer_format=self.answer_format, batch_size=8,
                                       stop=tuple(dict.fromkeys((*STOP_SEQUENCES, *self.stop))))
                    self._generator = make_generator("transformers", str(self.endpoint().base_url), config)
                self._generator.config.system_prompt = system_prompt

                def batch(done: int, total: int) -> None:
                    ctx.progress({"phase": "eval", "answered": done, "of": total, "frac": round(done / total, 4)})

                texts = [samples[0] for samples in self._generator.generate([p.question for p in problems],
                                                                             on_batch=batch)]
            except GenerationError as exc:
                return Outcome(status=Status.crash, feedback=f"the local model failed: {exc}",
                               seconds=time.monotonic() - started)
        report = grade_pairs(list(zip(problems, texts, strict=True)), mode=self.mode, answer_format=self.answer_format)
        metrics = report.metrics()
        metrics.update(tokens_in=0, tokens_out=0, endpoint_errors=0)
        return Outcome(status=Status.ok, score=metrics["pass_at_1"], metrics=metrics, feedback="\n".join(report.lines()),
                       seconds=time.monotonic() - started)

    def close(self) -> None:
        self._generator = None
        client, self._client = self._client, None
        if client is not None:
            # the SDK client closes its connection pool: a socket that is already gone raises OSError (nothing
            # to release); anything else is a bug the run's end records (the loop notes a failing close)
            with contextlib.suppress(OSError):
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
