"""The Coq checker's sandbox (oracle/coq/sandboxing.py): what coqc and coqtop may read and write, no
network, and a required sandbox that cannot run refuses to check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from needs import needs_coq

from oracle.coq.cold import CoqChecker
from oracle.coq.sandboxing import CoqSandbox, checker_hidden
from oracle.coq.warm import WarmCoqPool
from oracle.proof_common import TheoremTask
from rrma.contain import sandbox, seccomp

# ----------------------------------------------------------------------------- the checker's sandbox
# The context of a theorem is the harness's text, so here it stands in for whatever could make Coq
# open a file (Load, Redirect): what the checking process can read and write is what is tested.

SANDBOX_OFF = sandbox.unavailable_reason()
needs_sandbox = pytest.mark.skipif(SANDBOX_OFF is not None, reason=f"bubblewrap cannot run here: {SANDBOX_OFF}")


def _library(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """A user library folder given to Coq with -Q (so the checker's sandbox shows it) holding a
    stripped file whose definition is the 'answer'."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "Stripped.v").write_text("Definition leaked := 42.\n")
    return lib, ("-Q", str(lib), "Lib")


def _checker(mode: str, box: CoqSandbox) -> CoqChecker | WarmCoqPool:
    return CoqChecker(coq_args=box.coq_args, sandbox=box) if mode == "cold" else WarmCoqPool(
        coq_args=box.coq_args, sandbox=box)


@needs_coq
@needs_sandbox
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_coq_cannot_read_the_stripped_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    lib, args = _library(tmp_path)
    source = lib / "Stripped.v"
    task = TheoremTask(name="t", statement="Theorem t : leaked = 42.", context=f'Load "{source}".\n',
                       original_proof="reflexivity.", prover="coq")

    def check(hidden: tuple[Path, ...]) -> str:
        checker = _checker(mode, CoqSandbox(hidden=hidden, coq_args=args))
        try:
            return checker.check(task, "reflexivity.", timeout_s=60).reason
        finally:
            checker.close()

    assert check(()) == "accepted"  # control: the library folder is shown, the file readable
    assert checker_hidden([source], args) == (source.resolve(),)
    hidden = check(checker_hidden([source], args))
    assert hidden.startswith(("the context does not compile", "the statement does not check")), hidden
    monkeypatch.setenv("RRMA_FS_GUARD", "off")  # control: no sandbox, nothing hidden
    assert check(checker_hidden([source], args)) == "accepted"


@needs_coq
@needs_sandbox
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_coq_writes_only_its_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    lib, args = _library(tmp_path)
    target = lib / "planted"
    task = TheoremTask(name="t", statement="Theorem t : True.", context=f'Redirect "{target}" Check 0.\n',
                       original_proof="exact I.", prover="coq")

    def check() -> str:
        checker = _checker(mode, CoqSandbox(coq_args=args))
        try:
            return checker.check(task, "exact I.", timeout_s=60).reason
        finally:
            checker.close()

    refused = check()
    assert refused.startswith("the context does not compile") and not target.with_suffix(".out").exists(), refused
    monkeypatch.setenv("RRMA_FS_GUARD", "off")  # control: without the sandbox the same context writes there
    assert check() == "accepted" and target.with_suffix(".out").exists()


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").iterdir():
            children = [int(c) for c in (task / "children").read_text().split()]
            found += children
            todo += children
    return found


@needs_coq
@needs_sandbox
def test_warm_coqtop_runs_in_the_sandbox_without_network(holes: dict[str, TheoremTask],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The long-lived coqtop gets spawn's containment: its own network namespace, the seccomp filter
    (where it can be built), no credential in its environment, the pool's scratch as its folder."""
    monkeypatch.setenv("RRMA_TEST_API_KEY", "sk-not-for-coqtop")
    pool = WarmCoqPool()
    try:
        assert pool.check(holes["two"], "split; exact I.", timeout_s=60).accepted
        session = pool.sessions.acquire(timeout_s=0)
        assert session is not None
        pool.sessions.release(session)
        coqtops = [p for p in _descendants(session.proc.pid)
                   if Path(f"/proc/{p}/exe").resolve().name.startswith("coqtop")]
        assert coqtops, "no coqtop under the session's process"
        own = os.readlink("/proc/self/ns/net")
        assert all(os.readlink(f"/proc/{p}/ns/net") != own for p in coqtops)  # a network namespace of its own
        assert Path(f"/proc/{coqtops[0]}/cwd").resolve() == pool.scratch.resolve()
        environ = Path(f"/proc/{coqtops[0]}/environ").read_bytes()
        assert b"PATH=" in environ and b"sk-not-for-coqtop" not in environ
        if seccomp.unavailable_reason() is None:
            assert "Seccomp:\t2" in Path(f"/proc/{coqtops[0]}/status").read_text()
        policy = pool.sandbox.policy(pool.scratch)
        assert policy is not None and policy.network is False and policy.writable == (pool.scratch,)
    finally:
        pool.close()
    assert not pool.scratch.exists()


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_required_sandbox_that_cannot_run_refuses_to_check(monkeypatch: pytest.MonkeyPatch, mode: str,
                                                            holes: dict[str, TheoremTask]) -> None:
    """RRMA_FS_GUARD=require where bubblewrap cannot run: Coq never runs bare, the check is refused."""
    monkeypatch.setenv("RRMA_FS_GUARD", "require")
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "bubblewrap is not installed (test)")
    checker = _checker(mode, CoqSandbox(required=True))
    try:
        verdict = checker.check(holes["two"], "split; exact I.", timeout_s=60)
    finally:
        checker.close()
    assert not verdict.accepted and "bubblewrap is not installed (test)" in verdict.reason, verdict.reason
    assert verdict.reason.startswith("coqc did not run" if mode == "cold" else "session error")
