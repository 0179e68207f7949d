"""Local vs Ray executor overhead on the no-op oracle, measured in the same run.

    python benches/perf/bench_executors.py [--trials 200] [--sequential 100] [--concurrency 2]
                                           [--loop-trials 40] [--num-cpus N]

The no-op oracle (``oracle.command:NoopOracle``) returns at once, so what is timed is the
executor itself: shipping a :class:`~rrma.exec.local.TrialJob`, materializing its files,
running ``evaluate_job`` and bringing the outcome back. Two executors, same jobs:

* ``local``: :class:`rrma.exec.local.LocalExecutor` (thread pool, trial dir on this disk);
* ``ray``: :class:`rrma.exec.ray.RayExecutor` on a local Ray instance it starts itself
  (``num_cpus`` = this machine's CPUs unless ``--num-cpus``), as ``--executor ray`` does.

Measures, after a warm-up that starts the workers (Ray start-up and the first, cold trial are
reported separately):

* sequential: one trial at a time; the mean latency is the per-trial overhead (ms);
* throughput: ``--trials`` trials with ``--concurrency`` in flight (as the loop's
  ``budget.max_concurrent`` does): trials/s;
* loop: ``--loop-trials`` agent trials through the full research loop (events, blobs, cache,
  one edit per trial) with each executor: trials/s (0 skips it);
* Ray scaling: ``--scaling-trials`` trials per slot that each sleep ``--sleep`` seconds (so two
  cores suffice) with 1, 2 and 4 in flight (``--slots``): trials/s, efficiency = rate / (slots x
  the one-slot rate) and the gain per added slot = (rate - previous level's rate) / (added slots x
  the one-slot rate); 1.0 is perfect scaling.

Prints ``key: value`` lines and the ratios ``ray_over_local_*`` (overhead: >1 means Ray costs
more; throughput: <1 means Ray is slower). Exits 1 if any trial does not come back ``ok``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rrma.contracts import Agent, Context  # noqa: E402
from rrma.exec.local import Executor, LocalExecutor, TrialJob  # noqa: E402
from rrma.plugins import make_oracle  # noqa: E402
from rrma.run.loop import start_run  # noqa: E402
from rrma.task import TaskConfig, task_from_dict  # noqa: E402
from rrma.trial import Budget, FileEdit, Proposal, Status  # noqa: E402

FILES = {"objective.py": "X = 0.0\n", "data/notes.txt": "a small read-only file\n" * 20}


def job(index: int, sleep: float = 0.0) -> TrialJob:
    params: dict[str, Any] = {"score": 1.0, "sleep": sleep} if sleep else {"score": 1.0}
    return TrialJob(trial_id=f"b{index:05d}", files={**FILES, "objective.py": f"X = {index}\n"},
                    proposal=Proposal(hypothesis=f"x={index}"), budget=Budget(seconds=30, memory_mb=256),
                    seed=index, oracle_kind="noop", oracle_params=params, metric="score")


def ignore(_: dict[str, Any]) -> None:
    return None


def run_one(executor: Executor, index: int) -> float:
    started = time.perf_counter()
    outcome = executor.submit(job(index), ignore).result(timeout=120)
    if outcome.status != Status.ok:
        raise SystemExit(f"{executor.name}: trial {index} ended {outcome.status}: {outcome.feedback[:300]}")
    return time.perf_counter() - started


def sequential(executor: Executor, count: int, offset: int) -> list[float]:
    return [run_one(executor, offset + i) for i in range(count)]


def throughput(executor: Executor, count: int, concurrency: int, offset: int, sleep: float = 0.0) -> float:
    """Trials per second with at most ``concurrency`` in flight (each sleeping ``sleep`` seconds)."""
    slots = threading.Semaphore(concurrency)
    failures: list[str] = []
    futures = []
    started = time.perf_counter()
    for i in range(count):
        slots.acquire()
        future = executor.submit(job(offset + i, sleep), ignore)

        def release(f: Any) -> None:
            slots.release()
            if f.result().status != Status.ok:
                failures.append(f.result().feedback[:300])

        future.add_done_callback(release)
        futures.append(future)
    for future in futures:
        future.result(timeout=120)
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{executor.name}: {len(failures)} trial(s) failed: {failures[0]}")
    return count / elapsed


class EditAgent(Agent):
    """Proposes ``objective.py: X = i`` for i = 1, 2, ...: every trial is new (no cache hits)."""

    backend = "bench-edit"

    def __init__(self, task: TaskConfig, count: int) -> None:
        super().__init__(task.agents[0], task, 0)
        self.left = count

    def propose(self, ctx: Context) -> Proposal | None:
        if self.left <= 0:
            return None
        self.left -= 1
        return Proposal(hypothesis=f"x {self.left}",
                        edits=[FileEdit(path="objective.py", content=f"X = {self.left + 1}\n")])


def loop_task(base: Path, trials: int, concurrency: int) -> TaskConfig:
    workspace = base / "workspace"
    for rel, text in FILES.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    return task_from_dict({
        "name": "bench-executors",
        "oracle": {"kind": "noop", "params": {"score": 1.0}},
        "workspace": {"source": "workspace", "editable": ["objective.py"]},
        "metric": {"name": "score", "direction": "minimize"},
        "budget": {"trial_seconds": 30, "trial_memory_mb": 256, "max_trials": trials, "max_concurrent": concurrency},
        "noise": {"baseline_repeats": 1, "min_delta": 0.1},
        "agents": [{"name": "edit", "backend": "replay", "params": {"source": "unused"}}],
    }, source="bench", base_dir=base)


def loop_rate(task: TaskConfig, runs: Path, name: str, executor: Callable[..., Any] | None) -> float:
    trials = task.budget.max_trials
    started = time.perf_counter()
    result = start_run(task, runs, run_id=name, agents=[EditAgent(task, trials)], executor=executor)
    elapsed = time.perf_counter() - started
    counts = result.state.counts()
    if counts.get("ok", 0) != trials:
        raise SystemExit(f"loop on {name}: expected {trials} ok trials, got {counts} ({result.reason})")
    return trials / elapsed


class Borrowed:
    """Lends a running executor to one loop run without letting the loop shut it down."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.name = inner.name

    def submit(self, job: TrialJob, on_progress: Callable[[dict[str, Any]], None]) -> Any:
        return self.inner.submit(job, on_progress)

    def shutdown(self, cancel: bool = False) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="trials of the throughput measure")
    parser.add_argument("--sequential", type=int, default=100, help="trials of the latency measure")
    parser.add_argument("--concurrency", type=int, default=2, help="trials in flight (budget.max_concurrent)")
    parser.add_argument("--loop-trials", type=int, default=40, help="agent trials through the full loop (0: skip)")
    parser.add_argument("--num-cpus", type=int, default=None,
                        help="CPUs of the local Ray instance (default: this machine's, at least the largest --slots)")
    parser.add_argument("--slots", type=int, nargs="*", default=[1, 2, 4],
                        help="Ray scaling: trials in flight, each sleeping --sleep seconds (none: skip)")
    parser.add_argument("--sleep", type=float, default=0.5, help="Ray scaling: seconds each trial sleeps")
    parser.add_argument("--scaling-trials", type=int, default=8, help="Ray scaling: trials per slot at each level")
    args = parser.parse_args(argv)
    try:
        from rrma.exec.ray import RayExecutor
    except ImportError as exc:
        print(f"ray is not installed (pip install 'rrma[ray]'): {exc}", file=sys.stderr)
        return 2

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rrma-bench-exec-") as tmp:
        base = Path(tmp)
        task = loop_task(base, args.loop_trials, args.concurrency)
        warm = max(4, args.concurrency * 2)

        local = LocalExecutor(make_oracle("noop", {"score": 1.0}), base / "local-trials", args.concurrency)
        sequential(local, warm, 0)
        lat = sequential(local, args.sequential, 10_000)
        figures["local_overhead_ms"] = 1000 * statistics.fmean(lat)
        figures["local_overhead_median_ms"] = 1000 * statistics.median(lat)
        figures["local_trials_per_s"] = throughput(local, args.trials, args.concurrency, 20_000)
        local.shutdown()
        if args.loop_trials:
            figures["local_loop_trials_per_s"] = loop_rate(task, base / "runs", "local", None)

        started = time.perf_counter()
        cpus = args.num_cpus or max([os.cpu_count() or 1, *args.slots])  # sleeping trials need slots, not cores
        ray_executor = RayExecutor(workspace_files=dict(FILES), trials_dir=base / "ray-trials", num_cpus=cpus)
        figures["ray_startup_s"] = time.perf_counter() - started
        figures["ray_first_trial_s"] = run_one(ray_executor, 0)  # cold: worker start and oracle set-up
        throughput(ray_executor, warm, args.concurrency, 1)  # start every worker the measures will use
        lat = sequential(ray_executor, args.sequential, 10_000)
        figures["ray_overhead_ms"] = 1000 * statistics.fmean(lat)
        figures["ray_overhead_median_ms"] = 1000 * statistics.median(lat)
        figures["ray_trials_per_s"] = throughput(ray_executor, args.trials, args.concurrency, 20_000)
        if args.loop_trials:
            lend = Borrowed(ray_executor)
            figures["ray_loop_trials_per_s"] = loop_rate(task, base / "runs", "ray", lambda o, s, t: lend)
        if args.slots:  # scaling: the same sleeping trials with 1, 2, 4 in flight
            # every worker started: sleeping trials hold their slot, so each level's workers exist before it is timed
            throughput(ray_executor, 2 * max(args.slots), max(args.slots), 30_000, args.sleep)
            one = None
            before: tuple[int, float] | None = None
            for k, slots in enumerate(args.slots):
                rate = throughput(ray_executor, slots * args.scaling_trials, slots, 40_000 + 1000 * k, args.sleep)
                one = one if one is not None else rate / slots
                figures[f"ray_sleep_{slots}_slots_trials_per_s"] = rate
                figures[f"ray_sleep_{slots}_slots_efficiency"] = rate / (slots * one)  # 1.0: perfect scaling
                if before is not None:  # what each slot added since the previous level gave, against one slot's rate
                    figures[f"ray_sleep_{slots}_slots_gain_per_added_slot"] = (rate - before[1]) / ((slots - before[0]) * one)
                before = (slots, rate)
            ideal = 1 / args.sleep
            figures["ray_sleep_1_slot_vs_ideal"] = figures[f"ray_sleep_{args.slots[0]}_slots_trials_per_s"] / (args.slots[0] * ideal)
        ray_executor.shutdown()

    figures["ray_over_local_overhead"] = figures["ray_overhead_ms"] / figures["local_overhead_ms"]
    figures["ray_over_local_overhead_median"] = figures["ray_overhead_median_ms"] / figures["local_overhead_median_ms"]
    figures["ray_over_local_trials_per_s"] = figures["ray_trials_per_s"] / figures["local_trials_per_s"]
    if args.loop_trials:
        figures["ray_over_local_loop_trials_per_s"] = figures["ray_loop_trials_per_s"] / figures["local_loop_trials_per_s"]
    print(f"# no-op oracle; sequential={args.sequential} trials, throughput={args.trials} trials at "
          f"concurrency {args.concurrency}, loop={args.loop_trials} trials; Ray scaling: {args.scaling_trials} "
          f"trials per slot sleeping {args.sleep} s at {args.slots} slots (efficiency = rate / (slots x rate at "
          f"{args.slots[0] if args.slots else '-'} slot per slot))")
    for key, value in figures.items():
        print(f"{key}: {value:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
