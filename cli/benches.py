"""The benches: where they are (``benches/NAME/`` with a ``bench.py`` or a ``task.yaml``), their own
options, and the ``bench`` command that runs one to completion (or, with ``--arms``/``--seeds``, an
experiment over its task).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from rich.table import Table

from cli.experiments import run_cells
from cli.options import apply_overrides
from cli.output import EXIT_BAD_INPUT, EXIT_OK, CliError, plain, print_table
from cli.runs import run_loop_headless

BENCH_ROOT = Path(__file__).resolve().parent.parent / "benches"


def bench_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    """The options of bench ``name`` (its ``add_arguments``), added to its ``bench`` parser."""
    folder = BENCH_ROOT / name.replace("-", "_")
    if (folder / "bench.py").exists():
        module = importlib.import_module(f"benches.{folder.name}.bench")
        add = getattr(module, "add_arguments", None)
        if add is not None:
            add(parser)


def bench_dir(name: str) -> Path:
    """The folder of bench ``name`` (``gsm8k-eval`` is ``benches/gsm8k_eval``); CliError for an unknown one."""
    folder = BENCH_ROOT / name.replace("-", "_")
    if not folder.is_dir() or not ((folder / "bench.py").exists() or (folder / "task.yaml").exists()):
        raise CliError(f"unknown bench {name!r}; known: {', '.join(b for b, _ in list_benches())}")
    return folder


def list_benches() -> list[tuple[str, str]]:
    """(name, its DESCRIPTION) for every bench."""
    out = []
    for folder in sorted(BENCH_ROOT.iterdir()):
        if folder.is_dir() and ((folder / "bench.py").exists() or (folder / "task.yaml").exists()):
            desc = (folder / "DESCRIPTION").read_text().strip() if (folder / "DESCRIPTION").exists() else ""
            out.append((folder.name.replace("_", "-"), desc))
    return out


def cmd_bench(args: argparse.Namespace) -> int:
    own_list = False  # a bench that lists its own items with --list (`bench coq --source F --list`)
    if args.list and args.name and (BENCH_ROOT / args.name.replace("-", "_") / "bench.py").exists():
        own_list = bool(getattr(importlib.import_module(f"benches.{args.name.replace('-', '_')}.bench"),
                                "LISTS_THEOREMS", False))
    if (args.list and not own_list) or not args.name:
        table = Table("bench", "what it is")
        for name, desc in list_benches():
            table.add_row(plain(name), plain(desc))
        print_table(table)
        return EXIT_OK if args.list else EXIT_BAD_INPUT
    folder = bench_dir(args.name)
    if getattr(args, "arms", None) or getattr(args, "seeds", None) is not None:
        return bench_experiment(args, folder)
    if (folder / "bench.py").exists():
        module = importlib.import_module(f"benches.{folder.name}.bench")
        return int(module.run(args))
    from rrma.task import load_task

    task = apply_overrides(load_task(folder / "task.yaml"), args)
    return run_loop_headless(task, args)


def bench_experiment(args: argparse.Namespace, folder: Path) -> int:
    """``bench NAME --arms ... --seeds N``: an experiment over the bench's task.yaml."""
    from rrma.run.experiment import (
        ExperimentError,
        new_experiment,
        open_experiment,
        parse_arm,
        spec_from_dict,
    )

    if not (folder / "task.yaml").exists():
        raise CliError(f"bench {args.name} has no task.yaml: --arms/--seeds need a task to override (use "
                       "`rrma-tui experiment run SPEC.yaml` with a task)")
    arms: dict[str, dict[str, Any]] = {}
    for text in args.arms or ["default:"]:
        try:
            name, overrides = parse_arm(text)
        except ExperimentError as exc:
            raise CliError(str(exc)) from exc
        if name in arms:
            raise CliError(f"--arms: arm {name!r} given twice")
        arms[name] = overrides
    common: dict[str, Any] = {}
    if args.trials is not None:
        common["budget.max_trials"] = args.trials
    if args.agents is not None:
        common["loop.agents_parallel"] = args.agents
    data: dict[str, Any] = {"name": f"{args.name}-arms", "bench": args.name, "seeds": args.seeds or 5,
                            "arms": arms, "set": common}
    if args.concurrency is not None:
        data["concurrency"] = args.concurrency
    if args.backend or args.model:
        raise CliError("--backend/--model with --arms: put the agents in an arm's overrides (agents: ...) or a spec file")
    if args.seed is not None:
        raise CliError("--seed with --arms: the experiment's seeds are --seeds N (0..N-1)")
    try:
        spec, task_path = spec_from_dict(data, source=f"bench {args.name} --arms")
        exp = open_experiment(new_experiment(spec, task_path, args.dir))
    except ExperimentError as exc:
        raise CliError(str(exc)) from exc
    return run_cells(exp, args)
