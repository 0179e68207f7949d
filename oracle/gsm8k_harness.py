"""What the GSM8K oracles do outside the agent's reach: check their params, run their own generation
in a limited child, and read what a trial wrote without following links.

Why it exists: the three GSM8K oracles (:mod:`oracle.gsm8k_eval`, :mod:`oracle.gsm8k_recipe`,
:mod:`oracle.gsm8k_prompt`) share these steps, and each is where an honest score could leak.

Invariants:

* :func:`generate_in_child` runs the oracle's own generation code (:mod:`oracle.gsm8k_gen`) in a
  child process with a small environment (no API keys, no data locations); the questions (never
  the answers) and its output live in the oracle's own directory (``ctx.oracle_dir``), or a private
  temporary one, removed once the completions are read back. With the sandbox on, the child runs
  under ``Policy.for_scorer``: the model read-only, only its scratch writable, no network.
* What an agent's program wrote is data, read without following links: :func:`path_inside` and
  :func:`check_model` refuse a path that is or goes through a symbolic link, and a model directory
  that is not safetensors with built-in code (:func:`oracle.gsm8k_gen.check_model_dir`).
* The harness never writes into a trial's directory: :func:`oracle_home` is where an evaluation
  writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from oracle.gsm8k import (
    ANSWER_FORMATS,
    MODES,
)
from oracle.gsm8k_data import (
    REPO_ROOT,
    Problem,
    file_sha256,
)
from oracle.gsm8k_scoring import match_completions, parse_completions
from rrma.contain import files
from rrma.contain.files import LinkRefused, link_free
from rrma.contain.sandbox import Policy, harness_python
from rrma.contain.spawn import ProcessResult, spawn
from rrma.contracts import EvalContext, OracleError
from rrma.trial import Budget, Outcome, Status


def oracle_param(params: dict[str, Any], key: str, default: Any, kind: type | tuple[type, ...]) -> Any:
    value = params.get(key, default)
    if value is not None and not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise OracleError(f"oracle param {key!r} must be {names}, got {value!r}")
    return value


def check_grading(params: dict[str, Any]) -> tuple[str, str]:
    mode = oracle_param(params, "mode", "lenient", str)
    fmt = oracle_param(params, "answer_format", "hash", str)
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


def child_env(extra: dict[str, str] | None = None, *, threads: int = 1) -> dict[str, str]:
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
        env = child_env(_scratch_env(scratch), threads=int(budget.num_cpus))
        result = spawn(argv, cwd=scratch, budget=budget, env=env, on_line=on_line, cancel=cancel, guard=guard)
        if result.status != Status.ok:
            return result, []
        try:
            text = files.read_bytes(scratch, "completions.jsonl", limit=COMPLETIONS_LIMIT).decode("utf-8")
        except (OSError, ValueError):
            return result, []
        rows = parse_completions(text, "generated completions")
        return result, match_completions(rows, problems, source="generated completions")


def path_inside(root: Path, rel: str) -> Path:
    """``root/rel`` for a relative path an agent's program may have built with links: no component may
    be a link (:func:`rrma.contain.files.link_free`; nothing of the trial runs while the oracle reads),
    nor may the path be absolute or climb out with ``..`` (LinkRefused)."""
    try:
        return link_free(root, rel)
    except LinkRefused as exc:
        raise LinkRefused(f"{exc}; the oracle reads nothing through a link") from None


def link_targets(model: Path) -> list[Path]:
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
def oracle_home(ctx: EvalContext) -> Iterator[Path]:
    """Where the oracle writes for one evaluation: ``ctx.oracle_dir`` (harness-only, never seen by
    the trial), or for a caller without one a private temporary directory, removed afterwards."""
    if ctx.oracle_dir is not None:
        yield Path(ctx.oracle_dir).absolute()
        return
    with tempfile.TemporaryDirectory(prefix="rrma-gsm8k-oracle-") as tmp:
        yield Path(tmp)


def check_model(root: Path, rel: str, *, follow_links: bool = False) -> tuple[Path | None, Outcome | None]:
    """The model directory ``root/rel`` an agent's program wrote (or, ``follow_links``, a person's
    model at the absolute path ``rel``), or the outcome that refuses it."""
    from oracle.gsm8k_gen import GenerationError, UnsafeModel, check_model_dir

    try:
        model = Path(rel) if follow_links else path_inside(root, rel)
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


def data_facts(path: Path) -> dict[str, Any]:
    return {"path": str(path), "sha256": file_sha256(path)}
