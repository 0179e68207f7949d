"""Experiments from the command line (docs/experiments.md): arms x seeds made from a spec (``experiment
run``) or a bench (``bench NAME --arms``), their cells run with Ctrl-C handling, and the report: per
arm the final best with a bootstrap CI and the curves, then paired comparisons between arms.

``experiment show`` without ``--headless`` (or ``--json``) shows the arms in the TUI: the command
returns a :class:`cli.output.TuiRequest` for it.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from rich.table import Table
from rich.text import Text

from cli.options import make_executor_factory
from cli.output import EXIT_FAILED, EXIT_OK, CliError, TuiRequest, console, err, one_line, plain, print_table
from cli.runs import run_interruptibly


def _experiment(args: argparse.Namespace) -> Any:
    """The experiment ``args.exp_dir`` names; CliError when it is not one."""
    from rrma.run.experiment import ExperimentError, open_experiment

    try:
        return open_experiment(args.exp_dir)
    except ExperimentError as exc:
        raise CliError(str(exc)) from exc


def cmd_experiment(args: argparse.Namespace) -> int | TuiRequest:
    from rrma.run.experiment import ExperimentError, load_spec, new_experiment, open_experiment

    action = args.exp_command
    if action == "run":
        try:
            spec, task_path = load_spec(args.spec)
            exp = open_experiment(new_experiment(spec, task_path, args.dir, exp_id=args.id))
        except ExperimentError as exc:
            raise CliError(str(exc)) from exc
        return run_cells(exp, args)
    exp = _experiment(args)
    if action == "resume":
        return run_cells(exp, args)
    if action == "show":
        if not getattr(args, "headless", False) and not args.json:
            return TuiRequest(exp.runs_dir, reviewer=args.reviewer, experiment=exp.dir)
        return print_experiment(exp, as_json=args.json)
    if action == "compare":
        if args.arms and (len(args.arms) != 2 or any(a not in exp.spec.arms for a in args.arms)):
            raise CliError(f"compare takes two arms of {', '.join(exp.spec.arms)} (or none: every pair)")
        return print_comparisons(exp, tuple(args.arms) if args.arms else None)
    raise CliError(f"unknown experiment action {action!r}")


def run_cells(exp: Any, args: argparse.Namespace) -> int:
    """Run the cells with Ctrl-C handling (first: every cell stops; second: quit now), then the report."""
    from rrma.run.experiment import run_experiment

    stop = threading.Event()
    quiet = bool(getattr(args, "quiet", False))
    executor_name = getattr(args, "executor", "local")
    factory = make_executor_factory(args)
    started_ray: list[bool] = []
    if factory is not None:  # one Ray connection for every cell: no cell's executor may shut it down
        base, lock = factory, threading.Lock()

        def shared(oracle: Any, store: Any, task: Any) -> Any:
            with lock:
                made = base(oracle, store, task)
                if getattr(made, "owns_ray", False):
                    made.owns_ray = False
                    started_ray.append(True)
            return made

        factory = shared
    t0 = time.monotonic()

    def on_cell(cell: Any, what: str) -> None:
        if not quiet or what.startswith("failed"):
            console.print(Text.assemble((f"{time.monotonic() - t0:7.1f}s", "dim"),
                                        f" {one_line(cell.run_id):<24} {one_line(what)}"),
                          soft_wrap=True)

    def work() -> Any:
        return run_experiment(exp, executor=factory, executor_name=executor_name,
                              concurrency=getattr(args, "concurrency", None), stop=stop, on_cell=on_cell)

    console.print(plain(f"experiment {exp.id}: {len(exp.spec.arms)} arm(s) x {len(exp.spec.seed_list())} seed(s), "
                        f"{exp.dir}"))
    try:
        results = run_interruptibly(
            work, "experiment", stop,
            stopping=("stopping every cell: no new trials; running ones finish (Ctrl-C again to quit now; "
                      "`rrma-tui experiment resume` continues)"),
            quitting="quitting now: killed {killed} running trial(s); `rrma-tui experiment resume` continues")
    finally:
        if started_ray:
            import ray

            if ray.is_initialized():
                ray.shutdown()
    failed = [r for r in results if r.reason.startswith("failed") or r.reason in ("error", "baseline_failed")]
    print_experiment(exp)
    if stop.is_set():
        err.print(plain(f"stopped; `rrma-tui experiment resume {exp.dir}` continues the cells that did not end"))
    if failed:
        err.print(plain(f"rrma-tui: {len(failed)} cell(s) failed: "
                        + "; ".join(f"{r.cell.run_id}: {r.reason}" for r in failed[:3])))
        return EXIT_FAILED
    return EXIT_OK


def _fmt_ci(value: Any) -> str:
    if value is None:
        return "-"
    mean, low, high = value
    return f"{mean:.5g} [{low:.5g}, {high:.5g}]"


def print_experiment(exp: Any, *, as_json: bool = False) -> int:
    """The report of an experiment: per arm, then the paired comparisons."""
    import json

    from rrma.run.experiment import report, report_json

    rep = report(exp)
    if as_json:
        print(json.dumps(report_json(rep), indent=1, sort_keys=True))
        return EXIT_OK
    arrow = "lower is better" if rep.direction == "minimize" else "higher is better"
    table = Table(title=plain(f"{exp.id} · {rep.metric} ({arrow}) · final best, mean over seeds [95% bootstrap CI]"),
                  title_justify="left")
    for column in ("arm", "seeds done", "final best", "gain over baseline", "trials", "tokens", "USD", "compute s",
                   "wall s"):
        table.add_column(column)
    for arm in rep.arms:
        done = sum(1 for c in arm.cells if c.status in ("max_trials", "max_wall_time", "target", "agents_exhausted", "completed"))
        table.add_row(plain(arm.name), f"{done}/{len(arm.cells)}", _fmt_ci(arm.final), _fmt_ci(arm.improvement),
                      str(arm.trials), str(arm.tokens), f"{arm.cost_usd:.4f}", f"{arm.compute_seconds:.1f}",
                      f"{arm.wall_seconds:.1f}")
    print_table(table)
    curves = Table(title="best so far, mean over seeds, after n trials", title_justify="left")
    longest = max((len(a.mean_curve) for a in rep.arms), default=0)
    marks = sorted({n for n in (1, longest // 4, longest // 2, 3 * longest // 4, longest) if n >= 1})
    curves.add_column("arm")
    for n in marks:
        curves.add_column(f"n={n}")
    for arm in rep.arms:
        points = dict(arm.mean_curve)
        curves.add_row(plain(arm.name), *[f"{points[n]:.5g}" if n in points else "-" for n in marks])
    if marks:
        print_table(curves)
    print_comparisons(exp, None, rep=rep)
    return EXIT_OK


def print_comparisons(exp: Any, pair: tuple[str, str] | None, rep: Any = None) -> int:
    from rrma.run.experiment import compare_arms, report

    rep = rep or report(exp)
    sign = 1.0 if rep.direction == "maximize" else -1.0
    comparisons = rep.comparisons
    if pair is not None:
        a, b = pair
        comparisons = [compare_arms(rep.arm(a).cells, rep.arm(b).cells, sign, a, b)]
    table = Table(title="paired on shared seeds: B minus A, > 0 means B is better (paired bootstrap CI, exact "
                  "sign-flip p)", title_justify="left")
    for column in ("B vs A", "seeds", "mean Δ", "95% CI", "p", "B better / worse"):
        table.add_column(column)
    for c in comparisons:
        ci = "-" if c.ci_low is None else f"[{c.ci_low:+.4g}, {c.ci_high:+.4g}]"
        table.add_row(plain(f"{c.b} vs {c.a}"), str(len(c.seeds)), "-" if c.delta is None else f"{c.delta:+.4g}", ci,
                      "-" if c.p_value is None else f"{c.p_value:.3g}", f"{c.wins} / {c.losses}")
    print_table(table)
    if pair is not None:
        a, b = pair
        per_seed = Table("seed")
        for header in (plain(f"{a} final"), plain(f"{b} final"), "B - A (better > 0)"):
            per_seed.add_column(header)
        finals = {(c.cell.arm, c.cell.seed): c.final_best for arm in (a, b) for c in rep.arm(arm).cells}
        for seed in exp.spec.seed_list():
            fa, fb = finals.get((a, seed)), finals.get((b, seed))
            diff = "-" if fa is None or fb is None else f"{sign * (fb - fa):+.4g}"
            per_seed.add_row(str(seed), "-" if fa is None else f"{fa:.5g}", "-" if fb is None else f"{fb:.5g}", diff)
        print_table(per_seed)
    return EXIT_OK
