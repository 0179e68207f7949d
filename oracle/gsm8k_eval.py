"""The ``gsm8k-eval`` oracle: scores a completions file or a model on a GSM8K split.

Why it exists: to measure a model (or completions made elsewhere) the way the other GSM8K oracles
do, with the same scorer (:mod:`oracle.gsm8k_scoring`) and the same generation child
(:mod:`oracle.gsm8k_harness`). The family's invariants are in :mod:`oracle.gsm8k_tasks`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from oracle.gsm8k import (
    POLICY_VERSION,
)
from oracle.gsm8k_data import (
    DataError,
    Problem,
    held_out_paths,
    load_split,
    locate,
    subset,
)
from oracle.gsm8k_harness import (
    COMPLETIONS_LIMIT,
    check_grading,
    check_model,
    data_facts,
    generate_in_child,
    link_targets,
    oracle_home,
    oracle_param,
)
from oracle.gsm8k_scoring import (
    CompletionsError,
    EvalReport,
    grade_pairs,
    match_completions,
    parse_completions,
    read_completions,
)
from oracle.gsm8k_settings import Gsm8kEvalParams
from rrma.contain import files
from rrma.contain.files import LinkRefused
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.trial import Outcome, Status


class Gsm8kEvalOracle(Oracle):
    """Scores a completions file or a model on a GSM8K split.

    Params: ``completions`` (jsonl path, relative to the trial workspace or absolute) or
    ``model`` (a model directory); ``data`` (file or dir), ``download`` (bool), ``split``
    (test), ``limit``, ``subset_seed``, ``mode`` (lenient|strict), ``answer_format`` (hash),
    ``backend`` (auto|transformers|vllm), ``gen`` (GenConfig fields), ``system_prompt``.
    """

    holds_answers = True  # its held-out data is the answers (rrma/declare.py)
    kind: ClassVar[str] = "gsm8k-eval"
    params_model = Gsm8kEvalParams  # checked when a task is loaded (rrma/declare.py)
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = check_grading(self.params)
        self.split = oracle_param(self.params, "split", "test", str)
        self.limit = oracle_param(self.params, "limit", None, int)
        self.subset_seed = oracle_param(self.params, "subset_seed", None, int)
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
            facts["data"] = data_facts(path)
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
                    model_dir, refused = check_model(Path("/"), str(model), follow_links=True)
                    readable = link_targets(Path(str(model)))
                else:
                    model_dir, refused = check_model(trial_dir, str(model))
                if refused is not None:
                    refused.seconds = time.monotonic() - started
                    return refused
                assert model_dir is not None
                with oracle_home(ctx) as home:
                    result, pairs = generate_in_child(
                        model_dir, self.problems(), backend=oracle_param(self.params, "backend", "auto", str),
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
