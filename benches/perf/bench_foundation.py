"""Foundation benchmark: run-log append throughput, harness overhead per trial, export rate.

Prints figures and ratios measured in the same run (machines are noisy; compare ratios):

* append throughput with 1 writer and with 8 writer processes (events/s), and their ratio;
* the cost of rewriting the head record (``head.json``) after every append: one writer with and
  without it, interleaved, best of three;
* harness overhead per trial with the no-op oracle (ms per trial: proposal, validation,
  snapshot, cache lookup, events, promotion), also expressed in single-event appends;
* the loop's own path for one event (``RunLedger.emit``: append, tail, fold, the checkpoint's
  check), CPU microseconds per event, median of five rounds;
* SQLite export rate (events/s) of the log the overhead run wrote, padded to ``--events``;
* the trial sandbox's cost: ``spawn`` of ``python -c pass`` with no sandbox, with cgroup
  limits only, and in bubblewrap with cgroup limits (median ms per process, ratio to no
  sandbox), plus a raw ``subprocess.run`` for reference; modes that cannot run here are left out.

Usage: ``python -m benches.perf.bench_foundation [--events 20000] [--trials 300]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rrma.contain import cgroups, sandbox
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn
from rrma.log.chain import verify_chain
from rrma.log.export import export_runs
from rrma.log.store import RunStore
from rrma.run.ledger import RunLedger
from rrma.run.loop import start_run
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


class _NoHeadStore(RunStore):
    """The store as it was before the head record (the baseline of its cost)."""

    def _write_head(self, seq: int, digest: str, size: int) -> None:
        return None


def head_record_cost(root: Path, count: int, rounds: int = 3) -> tuple[float, float]:
    """(events/s with, without the head record): one writer, interleaved rounds, best of each."""
    best = {True: 0.0, False: 0.0}
    for r in range(rounds):
        for with_head in (True, False):
            store = (RunStore if with_head else _NoHeadStore)(root / f"head-{with_head}-{r}", create=True)
            t0 = time.perf_counter()
            for i in range(count):
                store.append("note", "harness", {"text": f"event {i}"})
            best[with_head] = max(best[with_head], count / (time.perf_counter() - t0))
    return best[True], best[False]


def ledger_emit_cost(root: Path, count: int, rounds: int = 5) -> float:
    """CPU µs per event of the loop's append path (RunLedger.emit), median of ``rounds`` fresh runs."""
    costs = []
    for r in range(rounds):
        store = RunStore(root / f"ledger-{r}", create=True)
        ledger = RunLedger(store)
        t0 = time.process_time()
        for i in range(count):
            if i % 3:
                ledger.emit("agent.turn", "agent:a", {"agent": "a", "role": "assistant", "text": f"thinking {i} " * 20})
            else:
                ledger.emit("note", "harness", {"text": f"event {i}"})
        costs.append((time.process_time() - t0) / count * 1e6)
        store.close()
    return statistics.median(costs)


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


SANDBOX_MODES = (  # (label, guarded, cgroups): what a trial process runs under
    ("no sandbox", False, False),
    ("cgroup limits only", False, True),
    ("bubblewrap + cgroup", True, True),
)


def sandbox_cost(root: Path, runs: int) -> dict[str, float]:
    """ms per ``python -c pass`` trial process under each of SANDBOX_MODES that works here.

    The modes are interleaved run by run so that drift in the machine's speed hits all alike; the
    figure is the median. ``raw subprocess`` (no spawn at all) is the floor for reference.
    """
    import os
    import statistics
    import subprocess

    work = root / "guard" / "trials" / "t1" / "work"
    work.mkdir(parents=True)
    guard = Policy.for_trial(work, protect=(root / "guard",))
    argv = [sys.executable, "-c", "pass"]
    modes = [m for m in SANDBOX_MODES
             if (not m[1] or sandbox.unavailable_reason() is None) and (not m[2] or cgroups.unavailable_reason() is None)]
    samples: dict[str, list[float]] = {"raw subprocess": [], **{m[0]: [] for m in modes}}
    saved = os.environ.get(cgroups.ENV_MODE)
    try:
        for i in range(runs + 1):
            t0 = time.perf_counter()
            subprocess.run(argv, cwd=work, check=True)
            if i:
                samples["raw subprocess"].append(time.perf_counter() - t0)
            for label, guarded, limited in modes:
                os.environ[cgroups.ENV_MODE] = "auto" if limited else "off"
                t0 = time.perf_counter()
                result = spawn(argv, cwd=work, budget=Budget(seconds=30), guard=guard if guarded else None,
                                     poll_s=0.005)
                if i:  # the first round warms caches
                    samples[label].append(time.perf_counter() - t0)
                assert result.guarded == guarded and result.limits.startswith("cgroup") == limited, result
    finally:
        if saved is None:
            os.environ.pop(cgroups.ENV_MODE, None)
        else:
            os.environ[cgroups.ENV_MODE] = saved
    return {label: statistics.median(v) * 1000 for label, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--per-writer", type=int, default=2000)
    parser.add_argument("--guard-runs", type=int, default=40)
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
        with_head, without_head = head_record_cost(root, args.per_writer * 2)
        emit_us = ledger_emit_cost(root, 3000)
        per_trial_ms, run_dir = harness_overhead(root, args.trials)
        rate, total = export_rate(run_dir, args.events, root)
        costs = sandbox_cost(root, args.guard_runs)
    print(f"append, 1 writer:            {one:10.0f} events/s")
    print(f"append, 1 writer in-process: {with_head:10.0f} events/s  (without the head record {without_head:.0f}: "
          f"{with_head / without_head:.2f}x)")
    print(f"append, 8 writer processes:  {eight:10.0f} events/s  (ratio to 1 writer: {eight / one:.2f}x)")
    print(f"harness overhead, no-op oracle: {per_trial_ms:7.2f} ms/trial "
          f"(= {per_trial_ms / append_ms:.1f} single-event appends of {append_ms:.3f} ms)")
    print(f"loop append path (RunLedger.emit): {emit_us:6.1f} µs CPU per event")
    print(f"export to SQLite:            {rate:10.0f} events/s  ({total} events)")
    base = costs["no sandbox"]
    for label, ms in costs.items():
        print(f"trial process ({label + '):':<22} {ms:7.1f} ms  (ratio to no sandbox: {ms / base:.2f}x)")
    if "bubblewrap + cgroup" in costs and "cgroup limits only" in costs:
        print(f"bubblewrap on top of cgroup limits: {costs['bubblewrap + cgroup'] / costs['cgroup limits only']:.2f}x")
    if len(costs) < len(SANDBOX_MODES) + 1:
        print(f"sandbox here: {sandbox.describe()}; limits: {cgroups.describe()}")

if __name__ == "__main__":
    main()
