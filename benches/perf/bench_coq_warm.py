"""Warm vs cold Coq checks per second on the Coq suite, measured in the same run.

    python benches/perf/bench_coq_warm.py [--limit 24] [--repeat 2] [--pool 1]

The same checks are run twice: *cold* (:class:`oracle.coq.CoqChecker`, one ``coqc`` process per
check on a freshly written file: context + statement + proof + ``Print Assumptions``) and *warm*
(:class:`oracle.coq.WarmCoqPool`, ``coqtop`` sessions that keep the context loaded and return to
it with ``BackTo`` after every check). The checks are the original proofs of the first
``--limit`` theorems of ``benches/coq/*.v`` (spread over the four files), each checked
``--repeat`` times in a row, as an agent's successive attempts on one theorem would be. Warm
timings include starting the sessions and loading each file's context. Both modes must accept
every proof (the figures are meaningless otherwise; the script exits 1 if not).

Prints ``key: value`` lines: cold_checks_per_s, warm_checks_per_s, warm_over_cold (the ratio of
throughputs), plus the median seconds per check of each mode and their ratio. Both modes pay the
same ``Print Assumptions`` cost, which dominates for ``lia`` proofs (Coq 8.16 re-reads the opaque
proofs of the arithmetic library on every call), so the throughput ratio is lower than the
median-check ratio.

The warm sessions' transport (a reader thread on plain pipes) was compared with pexpect's
``PopenSpawn`` by this script's ``--transports`` at commit 78a6a29 (run it from there); the figures
and why pexpect is not used are in docs/proofs.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benches.coq.bench import load_tasks  # noqa: E402
from oracle.coq.cold import CoqChecker  # noqa: E402
from oracle.coq.sandboxing import coq_version  # noqa: E402
from oracle.coq.warm import WarmCoqPool  # noqa: E402
from oracle.proof_common import TheoremTask  # noqa: E402


def pick(tasks: list[TheoremTask], limit: int) -> list[TheoremTask]:
    """Up to ``limit`` tasks, taken round-robin from each source file, kept in file order."""
    by_file: dict[str, list[TheoremTask]] = {}
    for task in tasks:
        by_file.setdefault(task.source_file, []).append(task)
    chosen: list[TheoremTask] = []
    rank = 0
    while len(chosen) < limit and any(rank < len(v) for v in by_file.values()):
        for items in by_file.values():
            if rank < len(items) and len(chosen) < limit:
                chosen.append(items[rank])
        rank += 1
    order = {id(t): i for i, t in enumerate(tasks)}
    return sorted(chosen, key=lambda t: order[id(t)])


def measure(checker: CoqChecker | WarmCoqPool, tasks: list[TheoremTask], repeat: int) -> tuple[float, list[float], int]:
    """(wall seconds, per-check seconds, rejected count) of checking every task ``repeat`` times."""
    per_check: list[float] = []
    rejected = 0
    started = time.perf_counter()
    for task in tasks:
        for _ in range(repeat):
            t0 = time.perf_counter()
            verdict = checker.check(task, task.original_proof, timeout_s=60)
            per_check.append(time.perf_counter() - t0)
            if not verdict.accepted:
                rejected += 1
                print(f"  rejected {task.name}: {verdict.reason}", file=sys.stderr)
    return time.perf_counter() - started, per_check, rejected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=24, help="theorems to check (default 24)")
    parser.add_argument("--repeat", type=int, default=2, help="checks per theorem (default 2)")
    parser.add_argument("--pool", type=int, default=1, help="warm sessions (default 1; checks run sequentially)")
    args = parser.parse_args(argv)
    tasks = pick(load_tasks(None), args.limit)
    n = len(tasks) * args.repeat
    print(f"coq: {coq_version()}")
    print(f"theorems: {len(tasks)}  checks_per_mode: {n}")

    cold_wall, cold_each, cold_bad = measure(CoqChecker(), tasks, args.repeat)
    pool = WarmCoqPool(size=args.pool)
    try:
        warm_wall, warm_each, warm_bad = measure(pool, tasks, args.repeat)
    finally:
        pool.close()
    cold_rate, warm_rate = n / cold_wall, n / warm_wall
    print(f"cold_checks_per_s: {cold_rate:.2f}")
    print(f"warm_checks_per_s: {warm_rate:.2f}")
    print(f"cold_median_s_per_check: {statistics.median(cold_each):.4f}")
    print(f"warm_median_s_per_check: {statistics.median(warm_each):.4f}")
    print(f"warm_session_starts: {pool.restarts}")
    print(f"warm_over_cold: {warm_rate / cold_rate:.1f}x")
    print(f"warm_over_cold_median_check: {statistics.median(cold_each) / statistics.median(warm_each):.1f}x")
    if cold_bad or warm_bad:
        print(f"error: {cold_bad} cold and {warm_bad} warm checks rejected a genuine proof", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
