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

``--transports ROUNDS`` instead compares two transports of the warm session on the same checks,
interleaved (thread, pexpect, thread, pexpect, ...; a fresh pool each round): the shipped
:class:`oracle.coq.CoqSession` (a reader thread on the pipe) and :class:`PexpectCoqSession`
(``pexpect.popen_spawn.PopenSpawn``: pipes, no pty). PopenSpawn starts its own ``Popen`` and has
no ``pass_fds``, so the seccomp program's descriptor cannot reach bubblewrap: its coqtop runs in
the same bubblewrap sandbox, keyring and environment but *without* the seccomp filter. Set
``RRMA_FS_GUARD=off`` for a like-for-like comparison (both bare). Prints per round the wall
seconds, the median check and the harness's own CPU seconds (``time.process_time``) of each, the
median round trip of a trivial command (``Check 0.``, 200 times on one session: the transport
alone) and the pexpect/thread ratios (min/median/max over rounds).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benches.coq.bench import load_tasks  # noqa: E402
from oracle.coq import (  # noqa: E402
    _PROMPT,
    _PROMPT_FIELDS,
    CoqChecker,
    CoqSandbox,
    CoqSession,
    CoqSessionError,
    Reply,
    WarmCoqPool,
    _clean,
    _errors_of,
    _limit_memory,
    coq_version,
)
from oracle.proof_common import TheoremTask  # noqa: E402
from rrma.contain import keyring, sandbox  # noqa: E402
from rrma.contain.spawn import _child_env  # noqa: E402


class PexpectCoqSession(CoqSession):
    """:class:`CoqSession`'s protocol driven through ``pexpect.popen_spawn.PopenSpawn`` (for comparison).

    Started like the shipped session (a keyring parent thread, the credential rule, the bubblewrap
    policy, ``RLIMIT_AS``, its own session) except for the seccomp filter, which PopenSpawn cannot
    pass to bubblewrap (it has no ``pass_fds`` and closes every other descriptor).
    """

    def __init__(self, coqtop: str, *, memory_mb: int = 2048, start_timeout_s: float = 30.0,
                 args: tuple[str, ...] = (), cwd: Path | str | None = None,
                 sandbox_: CoqSandbox | None = None, searchwindowsize: int | None = 16384) -> None:
        import pexpect
        from pexpect.popen_spawn import PopenSpawn

        self._pexpect = pexpect
        where = str(cwd if cwd is not None else os.getcwd())
        policy = sandbox_.policy(where) if sandbox_ is not None else None
        argv = [coqtop, "-emacs", "-q", *args]
        if policy is not None and sandbox.unavailable_reason() is None:
            argv = policy.wrap(argv, where)  # no seccomp_fd: PopenSpawn would close it
        limits = _limit_memory(memory_mb)

        def pre() -> None:
            os.setsid()
            limits()

        env = _child_env(None, (), policy)
        parent: keyring.ParentThread[Any] = keyring.ParentThread(
            lambda: PopenSpawn(argv, cwd=where, env=env, preexec_fn=pre, searchwindowsize=searchwindowsize))
        self.child = parent.begin()
        self.proc = self.child.proc
        parent.outlive(self.proc)
        self.eof = False
        self.token = os.urandom(6).hex()
        self.counter = 0
        self.checks = 0
        self.context: str | None = None
        try:
            self.child.expect(b"</prompt>", timeout=start_timeout_s)
        except (pexpect.TIMEOUT, pexpect.EOF) as exc:
            self.kill()
            raise CoqSessionError(f"coqtop did not start: {self.child.before[-500:]!r}") from exc
        text = (self.child.before + self.child.after).decode("utf-8", errors="replace")
        prompts = _PROMPT.findall(text + "</prompt>")
        match = _PROMPT_FIELDS.match(prompts[-1]) if prompts else None
        self.initial_state = int(match.group(2)) if match else 1
        self.context_state = self.initial_state

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.eof

    def send(self, chunk: str, deadline: float) -> Reply:
        if not self.alive:
            raise CoqSessionError("coqtop session is not running")
        self.counter += 1
        sentinel = f"rrma_sync_{self.token}_{self.counter}"
        self.child.send((chunk.rstrip("\n") + "\n" + f"Fail Check {sentinel}.\n").encode("utf-8"))
        pattern = re.compile(re.escape(sentinel).encode() + rb".*?<prompt>(.*?)</prompt>", re.S)
        try:
            self.child.expect(pattern, timeout=max(0.0, deadline - time.monotonic()))
        except self._pexpect.TIMEOUT as exc:
            raise TimeoutError from exc
        except self._pexpect.EOF as exc:
            self.eof = True
            raise CoqSessionError(f"coqtop exited: {self.child.before[-300:]!r}") from exc
        text = self.child.before.decode("utf-8", errors="replace")
        text = text[: text.rfind("The command has indeed failed")] if "The command has indeed failed" in text else text
        prompts = [(f.group(1), int(f.group(2))) for p in _PROMPT.findall(text)
                   if (f := _PROMPT_FIELDS.match(p)) is not None]
        name, state = prompts[-1] if prompts else ("Coq", -1)
        body = _clean(text)
        return Reply(text=body, errors=_errors_of(body), proof_name=name, state=state, prompts=prompts)


class PexpectPool(WarmCoqPool):
    """:class:`WarmCoqPool` whose sessions are :class:`PexpectCoqSession`."""

    def _fresh(self) -> CoqSession:
        with self._lock:
            self.restarts += 1
        return PexpectCoqSession(self.coqtop, memory_mb=self.memory_mb, args=self.coq_args, cwd=self.scratch,
                                 sandbox_=self.sandbox)


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


def ping(session: CoqSession, count: int) -> tuple[float, float]:
    """(median seconds, harness CPU seconds) of ``count`` round trips of a trivial command."""
    each: list[float] = []
    cpu0 = time.process_time()
    for _ in range(count):
        t0 = time.perf_counter()
        session.send("Check 0.", time.monotonic() + 30)
        each.append(time.perf_counter() - t0)
    return statistics.median(each), time.process_time() - cpu0


def compare_transports(tasks: list[TheoremTask], repeat: int, rounds: int, pings: int = 200) -> int:
    """Thread vs PopenSpawn sessions, interleaved over ``rounds`` rounds (the order alternates);
    exit 1 if a genuine proof is rejected."""
    ratios: dict[str, list[float]] = {"wall": [], "median_check": [], "cpu": [], "ping": [], "ping_cpu": []}
    bad = 0
    scratch = Path(tempfile.mkdtemp(prefix="rrma-bench-coqtop-"))
    box = CoqSandbox()
    kinds: list[tuple[str, type[WarmCoqPool], type[CoqSession]]] = [
        ("thread", WarmCoqPool, CoqSession), ("pexpect", PexpectPool, PexpectCoqSession)]
    try:
        for r in range(rounds):
            row: dict[str, tuple[float, float, float, float, float]] = {}
            for name, pool_kind, session_kind in kinds if r % 2 == 0 else kinds[::-1]:
                pool = pool_kind()
                cpu0 = time.process_time()
                try:
                    wall, each, rejected = measure(pool, tasks, repeat)
                finally:
                    pool.close()
                cpu = time.process_time() - cpu0
                bad += rejected
                if session_kind is CoqSession:
                    session = CoqSession("coqtop", cwd=scratch, sandbox=box)
                else:
                    session = PexpectCoqSession("coqtop", cwd=scratch, sandbox_=box)
                try:
                    ping_s, ping_cpu = ping(session, pings)
                finally:
                    session.kill()
                row[name] = (wall, statistics.median(each), cpu, ping_s, ping_cpu)
            t, p = row["thread"], row["pexpect"]
            print(f"round {r + 1} ({'thread' if r % 2 == 0 else 'pexpect'} first): "
                  f"thread wall {t[0]:.2f} s, median check {t[1] * 1000:.1f} ms, cpu {t[2]:.2f} s, "
                  f"ping {t[3] * 1000:.2f} ms (cpu {t[4]:.2f} s) | "
                  f"pexpect wall {p[0]:.2f} s, median check {p[1] * 1000:.1f} ms, cpu {p[2]:.2f} s, "
                  f"ping {p[3] * 1000:.2f} ms (cpu {p[4]:.2f} s)")
            for i, key in enumerate(ratios):
                ratios[key].append(p[i] / t[i])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for key, values in ratios.items():
        print(f"pexpect_over_thread_{key}: min {min(values):.3f} median {statistics.median(values):.3f} "
              f"max {max(values):.3f}")
    if bad:
        print(f"error: {bad} warm checks rejected a genuine proof", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=24, help="theorems to check (default 24)")
    parser.add_argument("--repeat", type=int, default=2, help="checks per theorem (default 2)")
    parser.add_argument("--pool", type=int, default=1, help="warm sessions (default 1; checks run sequentially)")
    parser.add_argument("--transports", type=int, default=0, metavar="ROUNDS",
                        help="compare the thread and PopenSpawn sessions over ROUNDS interleaved rounds instead")
    args = parser.parse_args(argv)
    tasks = pick(load_tasks(None), args.limit)
    n = len(tasks) * args.repeat
    print(f"coq: {coq_version()}")
    print(f"theorems: {len(tasks)}  checks_per_mode: {n}")
    if args.transports:
        print(f"sandbox: {sandbox.mode()}")
        return compare_transports(tasks, args.repeat, args.transports)

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
