"""The ``gsm8k-recipe`` oracle: runs the agents' training recipe, then scores the model it wrote.

Why it exists: to let agents improve a training recipe (``recipe.py``) while the oracle alone owns
the data it trains on and the questions it is scored on.

Invariants: the recipe gets only the ``train-pool`` split (train minus dev, minus any held-out
question: :func:`oracle.gsm8k_data.assert_disjoint` is checked), read-only; it runs in its own
process group under the trial budget; the oracle then evaluates the model directory it wrote in a
*separate* child with the oracle's own generation code (:func:`oracle.gsm8k_harness.generate_in_child`),
on held-out questions written to the oracle's own directory. The family's invariants are in
:mod:`oracle.gsm8k_tasks`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from oracle.gsm8k import (
    POLICY_VERSION,
)
from oracle.gsm8k_data import (
    DataError,
    Problem,
    assert_disjoint,
    file_sha256,
    held_out_paths,
    jsonl_bytes,
    load_split,
    remove_overlap,
    subset,
)
from oracle.gsm8k_harness import (
    check_grading,
    check_model,
    child_env,
    generate_in_child,
    oracle_home,
    oracle_param,
    path_inside,
)
from oracle.gsm8k_scoring import grade_pairs
from oracle.gsm8k_settings import Gsm8kRecipeParams
from rrma.contain import files
from rrma.contain.files import LinkRefused
from rrma.contain.spawn import spawn
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.models import ModelStoreError, model_path
from rrma.trial import Budget, Outcome, Status


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

    holds_answers = True  # its held-out data is the answers (rrma/declare.py)
    kind: ClassVar[str] = "gsm8k-recipe"
    params_model = Gsm8kRecipeParams  # checked when a task is loaded (rrma/declare.py)
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = check_grading(self.params)
        self.eval_split = oracle_param(self.params, "eval_split", "dev", str)
        if self.eval_split not in ("dev", "test"):
            raise OracleError(f"oracle param 'eval_split' must be dev or test (held out), got {self.eval_split!r}")
        self.eval_limit = oracle_param(self.params, "eval_limit", 200, int)
        self.train_limit = oracle_param(self.params, "train_limit", None, int)
        self.recipe = oracle_param(self.params, "recipe", "recipe.py", str)
        self.recipe_args = [str(a) for a in oracle_param(self.params, "recipe_args", [], list)]
        self.output_dir = oracle_param(self.params, "output_dir", "model_out", str)
        self.eval_seconds = float(oracle_param(self.params, "eval_seconds", 1800.0, (int, float)))
        self.eval_memory_mb = int(oracle_param(self.params, "eval_memory_mb", 8192, int))
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
        heldout = subset(heldout_all, self.eval_limit, oracle_param(self.params, "eval_subset_seed", None, int))
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
            out_dir = path_inside(trial_dir, self.output_dir)
        except LinkRefused as exc:
            raise OracleError(f"oracle param 'output_dir' must be a plain relative path: {exc}") from None
        files.remove_tree(out_dir)
        argv = [sys.executable, str(recipe), "--base-model", state.base_model, "--train-data", str(state.train_file),
                "--output-dir", str(out_dir), "--seed", str(ctx.seed), *self.recipe_args]
        hub_offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"} if Path(state.base_model).exists() else {}
        env = child_env({"RRMA_SEED": str(ctx.seed), **hub_offline}, threads=int(ctx.budget.num_cpus))

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
        model_dir, refused = check_model(trial_dir, self.output_dir)
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
        with oracle_home(ctx) as home:
            gen_result, pairs = generate_in_child(
                model_dir, state.heldout, backend=oracle_param(self.params, "backend", "auto", str),
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
