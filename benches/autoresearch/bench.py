"""The autoresearch bench entry point: picks the CPU or GPU configuration, then runs the loop.

``rrma-tui --headless bench autoresearch`` imports this module. ``build_task(args)`` chooses
``task.yaml`` (CPU) or ``task_gpu.yaml`` (when torch sees CUDA, or ``--gpu``), applies
``--data`` / ``--time-budget`` / ``--early-abort`` and the CLI's common overrides (trials,
agents, backend, model, seed), and for the GPU configuration materializes a workspace whose
train.py carries the larger defaults listed under ``bench.train_overrides`` of task_gpu.yaml
(one train.py in the repository; the GPU copy differs only in those constant lines).
``run(args)`` runs it with :func:`rrma.run.loop.start_run` and prints a summary table (baseline ±
σ, best, delta in σ). Also runnable alone: ``python -m benches.autoresearch.bench --help``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from cli.options import apply_overrides
from rrma.contain import sandbox
from rrma.log.state import delta_sigma
from rrma.task import TaskConfig, TaskError, load_task, task_from_dict
from rrma.text import SafeConsole

HERE = Path(__file__).resolve().parent
console = SafeConsole(emoji=False)  # oracle and agent text prints literally and inert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help="corpus: stdlib (default, offline), a text file, or a parquet URL")
    device = parser.add_mutually_exclusive_group()
    device.add_argument("--gpu", dest="gpu", action="store_true", default=None, help="the GPU configuration")
    device.add_argument("--cpu", dest="gpu", action="store_false", help="the CPU configuration even with CUDA")
    parser.add_argument("--time-budget", type=float, help="seconds of training per trial (oracle.params.time_budget)")
    abort = parser.add_mutually_exclusive_group()
    abort.add_argument("--early-abort", dest="early_abort", action="store_true", default=None)
    abort.add_argument("--no-early-abort", dest="early_abort", action="store_false")


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def rewrite_constants(text: str, overrides: dict[str, Any]) -> str:
    """Set ``NAME = literal`` lines of train.py (comments kept); KeyError for a missing name."""
    for name, value in overrides.items():
        pattern = re.compile(rf"^({re.escape(name)} = )[^#\n]*?(\s*#.*)?$", re.M)
        literal = repr(value)

        def replace(m: re.Match[str], literal: str = literal) -> str:
            return f"{m.group(1)}{literal}{m.group(2) or ''}"

        text, n = pattern.subn(replace, text, count=1)
        if n != 1:
            raise KeyError(f"train.py has no top-level line '{name} = ...'")
    return text


def gpu_workspace(task: TaskConfig, runs: Path) -> Path:
    """A copy of the workspace whose train.py carries ``bench.train_overrides``."""
    src = task.workspace_dir()
    dest = runs / ".workspaces" / "autoresearch-gpu"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pt2"))
    train = dest / "train.py"
    train.write_text(rewrite_constants(train.read_text(), dict(task.bench.get("train_overrides", {}))))
    return dest


def build_task(args: argparse.Namespace) -> TaskConfig:
    gpu = getattr(args, "gpu", None)
    if gpu is None:
        gpu = cuda_available()
    path = HERE / ("task_gpu.yaml" if gpu else "task.yaml")
    task = load_task(path)
    data = task.model_dump(mode="json")
    params = data["oracle"]["params"]
    if getattr(args, "data", None):
        params["data"] = args.data
    if getattr(args, "time_budget", None) is not None:
        params["time_budget"] = args.time_budget
    if getattr(args, "early_abort", None) is not None:  # the loop's early abort (rrma/run/abort.py), never the oracle's
        data["loop"]["early_abort"]["rule"] = "power-law" if args.early_abort else "off"
    if gpu:
        data["workspace"]["source"] = str(gpu_workspace(task, Path(getattr(args, "runs", Path("runs")))))
    # the options every bench takes (--trials, --agents, --seed, --backend, --model): as for any task.yaml bench
    return apply_overrides(task_from_dict(data, source=str(path), base_dir=task.base_dir), args)


class _Printer:
    """One line per finished trial while the run goes on; its Δσ is every view's (rrma.log.state.delta_sigma:
    against the baseline, in units of its σ)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()
        self.baseline: tuple[float, float] | None = None  # (mean, σ) from baseline.measured
        self.direction = "minimize"

    def __call__(self, event: Any) -> None:
        if self.quiet:
            return
        at = time.monotonic() - self.started
        d = event.data
        if event.kind == "run.started":
            self.direction = str(d.task.get("metric", {}).get("direction", "minimize"))
        elif event.kind == "baseline.measured":
            self.baseline = (d.mean, d.sigma)
        if event.kind == "trial.finished":
            score = "" if d.score is None else f"{d.score:.4f}"
            sigmas = delta_sigma(d.score, *self.baseline, self.direction) if self.baseline and d.status == "ok" else None
            ds = "" if sigmas is None else f" (Δσ {sigmas:+.2f})"
            note = "" if d.status == "ok" else " " + (d.feedback.strip().splitlines() or [""])[0][:100]
            # the note is oracle feedback: literal, never markup or emoji codes
            console.print(Text.assemble((f"{at:7.1f}s", "dim"), f" {d.trial_id:>8} {d.status:<8} {score}{ds}{note}"),
                          soft_wrap=True)
        elif event.kind == "baseline.measured":
            console.print(f"[dim]{at:7.1f}s[/] baseline {d.mean:.4f} ± {d.sigma:.4f} (σ, n={len(d.scores)}); "
                          f"promotion needs {d.floor:.4f}; Δσ: against this baseline, in units of its σ", soft_wrap=True)
        elif event.kind == "trial.promoted" and d.previous_best is not None:
            console.print(f"[dim]{at:7.1f}s[/] [bold green]new best {d.trial_id}: {d.score:.4f}[/]")


def summary_table(result: Any, task: TaskConfig) -> Table:
    state = result.state
    s = state.summary or {}

    def fmt(value: Any, spec: str = ".4f") -> str:
        return "-" if value is None else format(value, spec)

    table = Table(title=f"autoresearch · {result.run_dir.name}", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("finished", result.reason)
    table.add_row("config", f"{task.oracle.params.get('time_budget')}s budget, data {task.oracle.params.get('data')}, "
                            f"early abort {task.loop.early_abort.rule}")
    table.add_row("baseline ± σ", f"{fmt(s.get('baseline'))} ± {fmt(s.get('sigma'))} val_bpb")
    table.add_row("best", f"{fmt(s.get('best_score'))} ({s.get('best_trial') or '-'})")
    table.add_row("delta", f"{fmt(s.get('delta'))} against the baseline (Δσ {fmt(s.get('delta_sigma'), '+.2f')})")
    by_status = s.get("by_status", {})
    table.add_row("trials", f"{s.get('trials', 0)}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    if s.get("early_aborts"):
        table.add_row("early aborts", f"{s['early_aborts']} (loop.early_abort: {task.loop.early_abort.rule})")
    seconds = [t.seconds for t in state.agent_trials() if t.status == "ok"]
    if seconds:
        table.add_row("seconds per scored trial", f"{statistics.fmean(seconds):.1f}")
    table.add_row("wall time", f"{s.get('wall_seconds', 0):.1f} s")
    for label, key in (("fs guard", "fs_guard"), ("limits", "limits"), ("disk", "disk")):
        value = sandbox.recorded(result.run_dir, key)
        if value:
            table.add_row(label, value)
    table.add_row("run dir", str(result.run_dir))
    return table


def run(args: argparse.Namespace) -> int:
    from rrma.run.loop import RunFailed, start_run

    try:
        task = build_task(args)
    except (TaskError, KeyError) as exc:
        console.print(Text(f"autoresearch: {exc}", style="red"))
        return 2
    runs = Path(getattr(args, "runs", Path("runs")))
    runs.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["result"] = start_run(task, runs, stop=stop, on_event=_Printer(bool(getattr(args, "quiet", False))))
        except BaseException as exc:  # reported in the main thread
            outcome["error"] = exc

    def on_sigint(signum: int, frame: Any) -> None:
        console.print("stopping: no new trials; running trials finish within their budget")
        stop.set()

    thread = threading.Thread(target=work, name="autoresearch-loop")
    previous = signal.signal(signal.SIGINT, on_sigint) if threading.current_thread() is threading.main_thread() else None
    try:
        thread.start()
        while thread.is_alive():
            thread.join(timeout=0.2)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, RunFailed):
            console.print(Text(f"autoresearch: the run failed: {error}", style="red"))
            return 1
        raise error
    result = outcome["result"]
    console.print(summary_table(result, task))
    if result.reason == "error":
        console.print(Text(f"autoresearch: the run ended with an error: {result.error}", style="red"))
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.autoresearch.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--trials", type=int)
    parser.add_argument("--agents", type=int)
    parser.add_argument("--backend")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--quiet", action="store_true")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
