"""The REPL transport and the session pool (oracle/lean/transport.py, oracle/lean/session.py,
oracle/repl_pool.py) with real processes: a fake REPL speaking the wire protocol, timeouts and memory
caps that kill the process group, restarts, concurrent checks."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest
from lean_fixtures import FIXTURES, REPO

from oracle.lean.checker import LeanChecker
from oracle.lean.session import ReplPool, ReplSession
from oracle.lean.transport import PipeReplTransport, ReplError

# ----------------------------------------------------------------------------- real processes


def fake_repl_checker(**kwargs) -> LeanChecker:
    argv = [sys.executable, str(FIXTURES / "fake_repl.py"), str(FIXTURES / "tiny_session")]
    memory_mb = kwargs.pop("memory_mb", 4096)
    return LeanChecker(mode="repl", memory_mb=memory_mb,
                       transport_factory=lambda: PipeReplTransport(argv, cwd=REPO, memory_mb=memory_mb), **kwargs)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_pipe_transport_speaks_the_repl_protocol(tiny) -> None:
    checker = fake_repl_checker()
    task = tiny["Tiny.double_two"]
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    rejected = checker.check(task, "Tiny.cheat.elim", timeout_s=20)
    assert rejected.reason == "axiom not allowed: Tiny.cheat"
    assert checker.pool.started == 1  # one warm process answered both checks
    session = checker.pool.acquire()
    assert isinstance(session.transport, PipeReplTransport)
    assert session.transport.noise == ["✔ [3/4] Built REPL.Main (fake build log)"]  # skipped, kept
    checker.pool.release(session)
    checker.close()


def test_timeout_kills_the_process_group_and_the_pool_restarts(tiny) -> None:
    task = tiny["Tiny.double_two"]
    checker = fake_repl_checker()
    session = checker.pool.acquire()
    transport = session.transport
    assert isinstance(transport, PipeReplTransport)
    checker.pool.release(session)
    started = time.monotonic()
    verdict = checker.check(task, "by\n  decide -- HANG_FOREVER", timeout_s=3)
    assert verdict.reason.startswith("timeout") and not verdict.accepted
    assert time.monotonic() - started < 15
    assert not _alive(transport.pid)
    assert checker.pool.discarded == 1
    deadline = time.monotonic() + 5  # the grandchild got SIGKILL; give the kernel a moment
    while time.monotonic() < deadline and _group_alive(transport.pgid):
        time.sleep(0.05)
    assert not _group_alive(transport.pgid)
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted  # a fresh REPL took over
    assert checker.pool.started == 2
    checker.close()


class _FailingClose:
    """A transport whose close raises ``error`` (what the pool does with a REPL that will not close)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        raise AssertionError("the pool tests send nothing")

    def close(self) -> None:
        raise self.error


@pytest.mark.parametrize("error", [
    ReplError("the REPL refused to close"),  # the transport's own failure
    BrokenPipeError(32, "Broken pipe"),  # a REPL already gone
])
def test_pool_drops_a_repl_that_fails_to_close(error: Exception) -> None:
    pool = ReplPool(lambda: _FailingClose(error), size=1)
    pool.release(pool.acquire(), broken=True)
    assert pool.discarded == 1
    pool.release(pool.acquire(timeout_s=1))  # the slot came back; the session goes idle
    pool.close()  # closing the idle one fails the same way, quietly


def test_pool_surfaces_a_transport_bug_and_still_frees_its_slot() -> None:
    pool = ReplPool(lambda: _FailingClose(TypeError("a bug in the transport")), size=1)
    with pytest.raises(TypeError, match="a bug in the transport"):
        pool.release(pool.acquire(), broken=True)
    assert pool.discarded == 1
    assert isinstance(pool.acquire(timeout_s=1), ReplSession)  # not stuck waiting for the lost slot


def _group_alive(pgid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _in_group(int(p), pgid) and _alive(int(p))]


def _in_group(pid: int, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[2]) == pgid
    except (OSError, ValueError, IndexError):
        return False


def test_memory_cap_kills_the_repl(tiny) -> None:
    checker = fake_repl_checker(memory_mb=150)
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide -- EAT_MEMORY", timeout_s=30)
    assert verdict.reason.startswith("memory limit exceeded") and not verdict.accepted
    assert checker.pool.discarded == 1
    checker.close()


def test_pool_restarts_after_max_commands(tiny) -> None:
    # one check is 4 commands on a fresh REPL (context, reference, declaration, audit)
    checker = fake_repl_checker(max_commands=4)
    task = tiny["Tiny.double_two"]
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    assert (checker.pool.started, checker.pool.discarded) == (2, 2)
    checker.close()


def test_pool_serves_concurrent_checks_from_separate_repls(tiny) -> None:
    """evaluate() may run on several threads: each thread gets its own warm REPL session."""
    from concurrent.futures import ThreadPoolExecutor

    task = tiny["Tiny.double_two"]
    with fake_repl_checker(pool_size=2) as checker:
        with ThreadPoolExecutor(max_workers=2) as ex:
            verdicts = list(ex.map(lambda p: checker.check(task, p, timeout_s=20),
                                   ["by\n  decide", "Tiny.cheat.elim", "by\n  simp [double]", "by\n  skip"]))
        assert [v.reason.split(":")[0] for v in verdicts] == [
            "accepted", "axiom not allowed", "accepted", "does not check"]
        assert checker.pool.started in (1, 2) and checker.pool.discarded == 0


def test_repl_that_dies_is_reported(tiny) -> None:
    checker = fake_repl_checker()
    task = tiny["Tiny.double_two"]
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    verdict = checker.check(task, "by\n  decide -- DIE_NOW", timeout_s=20)
    assert not verdict.accepted and verdict.reason.startswith("lean repl failed: REPL exited with code 3")
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    checker.close()
