"""The GSM8K scorer: completions graded against gold answers, with the statistics promotion reads.

Why it exists: the three GSM8K oracles (:mod:`oracle.gsm8k_eval`, :mod:`oracle.gsm8k_recipe`,
:mod:`oracle.gsm8k_prompt`) and the eval bench score with one function, :func:`grade_pairs`, built
on the versioned policy of :mod:`oracle.gsm8k` and the statistics of :mod:`rrma.stats`; a
completions file (``{idx, completion}`` lines) is read and matched to the questions here.

Invariants: scores are pass@1 on a fixed, index-determined subset; :meth:`EvalReport.metrics`
carries the standard error, the strict-final-line and trailing-text rates and the failure taxonomy,
plus what the loop's promotion rule reads (rrma/run/promotion.py): ``score_se`` and the per-question
``item_scores`` with their ``items_key``, so that a gain is promoted only when a paired test
(McNemar on the questions) says it is real. A completions file that does not match the questions
one to one is a :class:`CompletionsError`, never a partial score.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle.gsm8k import (
    ANSWER_FORMATS,
    FAILURES,
    MODES,
    POLICY_VERSION,
    Grade,
    grade,
)
from oracle.gsm8k_data import (
    Problem,
    iter_json_lines,
    iter_json_objects,
    question_key,
)
from rrma.stats import Estimate, mean_pass_at_k, pass_at_1, taxonomy_counts


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
