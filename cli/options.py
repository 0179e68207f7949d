"""What the options name, checked before anything is made: a run (a path or an id under ``--runs``),
task overrides (``--set``, ``--trials``, ``--backend`` ...), the executor, the environment.

Bad input is refused here with a :class:`cli.output.CliError` (exit 2): a ``--runs`` that is not a
directory, a bad value of ``RRMA_FS_GUARD``, ``RRMA_TRIAL_NETWORK``, ``RRMA_CGROUPS`` or ``RRMA_DISK_CAP`` (checked
before a command that runs trials starts), a run whose files are not regular files or whose log is
not UTF-8 (:func:`rrma.log.store.check_readable`; ``verify`` reports the bytes as an error instead).
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path
from typing import Any

from cli.output import CliError
from rrma.contain import sandbox


def resolve_run(path: Path, runs: Path, *, read_log: bool = True, check: bool = True) -> Path:
    """Accept a run directory path or a run id under --runs; RunUnreadable (exit 2) for a damaged one:
    a file of it that is not a regular file or, with ``read_log``, a log line that is not UTF-8.
    Without ``check`` (the TUI, whose reader shows a damaged run and says what is wrong) neither."""
    from rrma.log.store import check_readable

    for candidate in (path, runs / path):
        if (candidate / "events.jsonl").exists():
            if check:
                check_readable(candidate, log=read_log)
            return candidate
    raise CliError(f"{path}: not a run directory (no events.jsonl here or under {runs})")


TRIAL_COMMANDS = {None, "bench", "run", "resume", "check", "experiment"}  # they start trials or proof checks


def check_environment(args: argparse.Namespace) -> None:
    """Refuse, before anything is made, a --runs that is not a directory and (for the commands that
    run trials) a bad RRMA_FS_GUARD, RRMA_TRIAL_NETWORK, RRMA_CGROUPS or RRMA_DISK_CAP, which the containment
    functions would only raise once a run directory exists."""
    runs = getattr(args, "runs", None)
    if runs is not None and runs.exists() and not runs.is_dir():
        raise CliError(f"--runs {runs}: not a directory (the directory that holds the run directories)")
    if args.command not in TRIAL_COMMANDS:
        return
    from rrma.contain import cgroups, disk

    for check in (sandbox.mode, sandbox.network, cgroups.mode, disk.mode):
        try:
            check()
        except ValueError as exc:
            raise CliError(f"{exc} (environment)") from None


def set_overrides(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as task overrides (each VALUE read as YAML); CliError names a bad one."""
    import yaml

    from rrma.task import read_yaml

    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--set {item!r}: expected KEY=VALUE")
        try:
            overrides[key] = read_yaml(value)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise CliError(f"--set {item!r}: the value is not valid YAML ({problem})") from None
    return overrides


def apply_overrides(task: Any, args: argparse.Namespace) -> Any:
    from rrma.task import task_from_dict

    data = task.model_dump(mode="json")
    given = []  # the options applied, named in a validation error (the task file itself was valid)
    if getattr(args, "trials", None) is not None:
        data["budget"]["max_trials"] = args.trials
        given.append(f"--trials {args.trials}")
    if getattr(args, "agents", None) is not None:
        data["loop"]["agents_parallel"] = args.agents
        given.append(f"--agents {args.agents}")
    if getattr(args, "seed", None) is not None:
        data["seed"] = args.seed
        given.append(f"--seed {args.seed}")
    backend = getattr(args, "backend", None)
    model = getattr(args, "model", None)
    if backend or model:
        for agent in data["agents"]:
            if backend:
                agent["backend"] = backend
            if model:
                agent["model"] = model
    source = str(task.base_dir or "task") + (f" with {', '.join(given)}" if given else "")
    return task_from_dict(data, source=source, base_dir=task.base_dir)


def make_executor_factory(args: argparse.Namespace) -> Any:
    if getattr(args, "executor", "local") != "ray":
        return None
    try:
        module = importlib.import_module("rrma.exec.ray")
    except ImportError as exc:
        raise CliError(f"--executor ray needs the ray extra: pip install 'rrma[ray]' ({exc})") from exc
    address = getattr(args, "ray_address", None) or os.environ.get("RAY_ADDRESS")
    if address:
        try:
            module.check_reachable(address)
        except module.RayExecutorError as exc:
            raise CliError(str(exc)) from exc

    def factory(oracle: Any, store: Any, task: Any) -> Any:
        try:
            return module.make_ray_executor(task, store, address)
        except module.RayExecutorError as exc:
            raise CliError(str(exc)) from exc

    return factory


