"""Foundation benchmark: run-log append throughput, harness overhead per trial, export rate.

Prints figures and ratios measured in the same run (machines are noisy; compare ratios):

* append throughput with 1 writer and with 8 writer processes (events/s), and their ratio;
* harness overhead per trial with the no-op oracle (ms per trial: proposal, validation,
  snapshot, cache lookup, events, promotion), also expressed in single-event appends;
* SQLite export rate (events/s) of the log the overhead run wrote, padded to ``--events``;
* the file-system guard's cost: ``run_limited`` of a Python program with and without the guard
  (ms per process and their ratio), or why the guard is off here.

Usage: ``python -m benches.perf.bench_foundation [--events 20000] [--trials 300]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

from rrma import fsguard
from rrma.export import export_runs
from rrma.fsguard import FsGuard
from rrma.loop import start_run
from rrma.sandbox import run_limited
from rrma.store import RunStore, verify_chain
from rrma.task import task_from_dict
from rrma.trial import Budget


def _writer(run_dir: str, count: int) -> None:
    store = RunStore(run_dir)
    for i in range(count):
        store.append("note", "harness", {"text": f"event {i}"})


def append_rate(root: Path, writers: int, per_writer: int) -> float:
    run_dir = root / f"append-{writers}"
    RunStore(run_dir, create=True)
    ctx = multiprocessing.get_context("fork")
    started = time.perf_counter()
    procs = [ctx.Process(target=_writer, args=(str(run_dir), per_writer)) for _ in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - started
    report = verify_chain(RunStore(run_dir))
    assert report.ok and report.events == writers * per_writer, report.errors[:3]
    return writers * per_writer / elapsed


def harness_overhead(root: Path, trials: int) -> tuple[float, Path]:
    ws = root / "task" / "workspace"
    ws.mkdir(parents=True)
    (ws / "x.py").write_text("A = 0.5  # a constant random search changes\n")
    task = task_from_dict({
        "name": "noop", "oracle": {"kind": "noop", "params": {"score": 1.0}},
        "workspace": {"source": "workspace", "editable": ["x.py"]},
        "budget": {"max_trials": trials, "max_concurrent": 1}, "noise": {"baseline_repeats": 1},
        "search_space": {"x.py:A": {"kind": "uniform", "low": 0.0, "high": 1.0}},
    }, base_dir=root / "task")
    started = time.perf_counter()
    result = start_run(task, root / "runs")
    elapsed = time.perf_counter() - started
    assert len(result.state.agent_trials()) == trials
    return elapsed / trials * 1000, result.run_dir


def export_rate(run_dir: Path, events: int, root: Path) -> tuple[float, int]:
    store = RunStore(run_dir)
    have = len(store.scan().events)
    for i in range(max(0, events - have)):  # pad with agent turns (what big runs are made of)
        store.append("agent.turn", "agent:rs", {"agent": "rs", "step": i, "role": "assistant",
                                                 "text": f"thinking about trial {i}: try a larger learning rate"})
    total = len(store.scan().events)
    started = time.perf_counter()
    export_runs([run_dir], root / "out.db")
    return total / (time.perf_counter() - started), total


def guard_cost(root: Path, runs: int) -> tuple[float, float] | str:
    """(ms per limited Python process without, with the guard) or the reason it is off."""
    reason = fsguard.unavailable_reason()
    if reason is not None:
        return reason
    work = root / "guard" / "trials" / "t1"
    work.mkdir(parents=True)
    guard = FsGuard.for_trial(work, protect=(root / "guard",))
    argv = [sys.executable, "-c", "pass"]
    out = []
    for g in (None, guard):
        run_limited(argv, cwd=work, budget=Budget(seconds=30), guard=g)  # warm caches
        t0 = time.perf_counter()
        for _ in range(runs):
            run_limited(argv, cwd=work, budget=Budget(seconds=30), guard=g)
        out.append((time.perf_counter() - t0) / runs * 1000)
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--per-writer", type=int, default=2000)
    parser.add_argument("--guard-runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        one = append_rate(root, 1, args.per_writer * 4)
        eight = append_rate(root, 8, args.per_writer)
        t0 = time.perf_counter()
        single = RunStore(root / "single", create=True)
        for i in range(2000):
            single.append("note", "harness", {"text": str(i)})
        append_ms = (time.perf_counter() - t0) / 2000 * 1000
        per_trial_ms, run_dir = harness_overhead(root, args.trials)
        rate, total = export_rate(run_dir, args.events, root)
        guard = guard_cost(root, args.guard_runs)
    print(f"append, 1 writer:            {one:10.0f} events/s")
    print(f"append, 8 writer processes:  {eight:10.0f} events/s  (ratio to 1 writer: {eight / one:.2f}x)")
    print(f"harness overhead, no-op oracle: {per_trial_ms:7.2f} ms/trial "
          f"(= {per_trial_ms / append_ms:.1f} single-event appends of {append_ms:.3f} ms)")
    print(f"export to SQLite:            {rate:10.0f} events/s  ({total} events)")
    if isinstance(guard, str):
        print(f"file-system guard:           off here ({guard})")
    else:
        print(f"limited process, no guard:   {guard[0]:10.1f} ms;  with the guard: {guard[1]:.1f} ms "
              f"(ratio {guard[1] / guard[0]:.2f}x)")


if __name__ == "__main__":
    main()
