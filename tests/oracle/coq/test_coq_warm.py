"""The warm pool and its coqtop sessions (oracle/coq/warm.py, oracle/coq/session.py, over
oracle/repl_pool.py): checks isolated from each other, timeouts that restart the session and count the
proof's seconds only, long lines, a killed coqtop, a deadline held while coqtop reads nothing."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from needs import needs_coq

from oracle.coq.sandboxing import CoqSandbox
from oracle.coq.session import CoqSession, CoqSessionError
from oracle.coq.warm import WarmCoqPool
from oracle.proof_common import TheoremTask
from oracle.strip_coq import strip_coq_text


@needs_coq
def test_warm_checks_are_isolated(tasks: dict[str, TheoremTask]) -> None:
    pool = WarmCoqPool(max_checks=4)
    try:
        task = tasks["add_zero"]
        # the same theorem twice: the first check's Qed must not leave add_zero defined
        assert pool.check(task, "induction n; simpl; auto.").accepted
        assert pool.check(task, "induction n; simpl; auto.").accepted
        # a failure in the middle of a proof leaves nothing behind either
        assert not pool.check(task, "intros n. exact I.").accepted
        assert pool.check(task, "intros n. induction n; simpl; auto.").accepted
        assert pool.restarts == 1
        # after max_checks checks the session is replaced by a fresh one
        assert pool.check(tasks["double_two"], "reflexivity.").accepted
        assert pool.restarts == 2
        # switching files (contexts that do not extend each other) reloads the context
        other = strip_coq_text("Definition double (n : nat) := 2 * n.\nTheorem double_two : double 2 = 4.\n"
                               "Proof. reflexivity. Qed.\n")[0]
        assert pool.check(other, "reflexivity.").accepted
        assert pool.check(tasks["double_two"], "unfold double. reflexivity.").accepted
    finally:
        pool.close()


@needs_coq
def test_warm_timeout_restarts_the_session(tasks: dict[str, TheoremTask]) -> None:
    pool = WarmCoqPool()
    try:
        verdict = pool.check(tasks["double_two"], "let rec f := idtac; f in f.", timeout_s=2)
        assert not verdict.accepted and verdict.reason.startswith("timeout")
        assert pool.check(tasks["double_two"], "reflexivity.", timeout_s=30).accepted
        assert pool.restarts == 2
    finally:
        pool.close()


LOAD_DELAY_S = 3.0  # a context that takes this long to load: a big library, or a loaded machine


@pytest.fixture
def slow_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every context load takes LOAD_DELAY_S more before the real one (the delay stands for Coq's own work)."""
    load = CoqSession.load_context

    def slow(self: CoqSession, context: str, deadline: float) -> int:
        time.sleep(LOAD_DELAY_S)
        return load(self, context, deadline)

    monkeypatch.setattr(CoqSession, "load_context", slow)


@needs_coq
def test_warm_timeout_is_the_proofs_not_the_start_up(tasks: dict[str, TheoremTask], slow_context: None) -> None:
    """A check's timeout starts once the context is loaded: a context slower to load than the proof's
    budget (3 s against 2 s) still gets its proof checked (before, every such check timed out, and each
    timeout's restart paid the loading again), and a looping proof still times out on its own seconds."""
    pool = WarmCoqPool()
    try:
        verdict = pool.check(tasks["double_two"], "reflexivity.", timeout_s=2.0)
        assert verdict.accepted, verdict.reason
        looping = pool.check(tasks["double_two"], "let rec f := idtac; f in f.", timeout_s=2.0)
        assert looping.reason == "timeout: no verdict after 2 s (session restarted)", looping.reason
    finally:
        pool.close()


@needs_coq
def test_warm_start_up_is_bounded_apart(tasks: dict[str, TheoremTask], slow_context: None) -> None:
    """Start-up and loading have a bound of their own (``setup_seconds``): a context that does not load
    within it is a timeout that says so, however long the proof's budget."""
    pool = WarmCoqPool(setup_seconds=1.0)
    try:
        verdict = pool.check(tasks["double_two"], "reflexivity.", timeout_s=60.0)
        assert verdict.reason == "timeout: the context did not load within 1 s (session restarted)", verdict
        assert verdict.seconds < 30
    finally:
        pool.close()


@needs_coq
def test_warm_session_passes_lines_longer_than_a_pty_allows(warm: WarmCoqPool) -> None:
    """A pty cuts input lines at 4,096 bytes (why the session uses plain pipes): a 5,000-character
    name goes in on one line (the context, the statement) and comes back whole in the goal."""
    name = "long_" + "x" * 5000
    task = TheoremTask(name="long_t", statement=f"Theorem long_t : {name}.",
                       context=f"Definition {name} := True.\n", original_proof="exact I.", prover="coq")
    assert warm.check(task, "exact I.", timeout_s=60).accepted
    verdict = warm.check(task, "idtac.", timeout_s=60)
    assert verdict.reason == "incomplete proof: 1 goal(s) remain"
    assert verdict.goals == [f"|- {name}"]


@needs_coq
def test_warm_session_reports_a_killed_coqtop(tmp_path: Path) -> None:
    """coqtop killed in the middle of a sentence: the reply ends at once with CoqSessionError (not
    at the deadline), and the pool replaces a session that died while idle."""
    session = CoqSession("coqtop", cwd=tmp_path, sandbox=CoqSandbox())
    session.send("Goal True.", time.monotonic() + 30)
    threading.Timer(1.0, lambda: os.killpg(session.proc.pid, signal.SIGKILL)).start()
    started = time.monotonic()
    with pytest.raises(CoqSessionError, match="coqtop exited"):
        session.send("let rec f := idtac; f in f.", time.monotonic() + 30)
    assert time.monotonic() - started < 10 and not session.alive
    pool = WarmCoqPool()
    try:
        task = TheoremTask(name="t", statement="Theorem t : True.", context="", original_proof="exact I.",
                           prover="coq")
        assert pool.check(task, "exact I.").accepted
        idle = pool.sessions.acquire()
        assert idle is not None
        os.killpg(idle.proc.pid, signal.SIGKILL)
        idle.proc.wait(timeout=10)
        pool.sessions.release(idle)
        assert pool.check(task, "exact I.").accepted and pool.restarts == 2
    finally:
        pool.close()


@needs_coq
def test_warm_deadline_holds_while_coqtop_reads_no_input(tmp_path: Path) -> None:
    """coqtop busy in an endless tactic reads no more input: a chunk larger than the pipe (200 KiB)
    must not hold the caller past its deadline (the write runs beside the wait, not before it)."""
    session = CoqSession("coqtop", cwd=tmp_path, sandbox=CoqSandbox())
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            session.send("Goal True.\nlet rec f := idtac; f in f.\n" + "idtac.\n" * 30000, started + 2)
        assert time.monotonic() - started < 6
    finally:
        session.kill()


def test_the_coq_oracle_declares_its_checkers_set_up() -> None:
    """A warm check may spend its whole set-up bound loading the context (a file's earlier proofs: 25-38 s for
    `setoid_ring/Ncring_polynom.v`) and then its proof's seconds; the coq oracle declares that bound as its set-up
    allowance, which the loop's wait for an outcome adds to the budget and the grace (tests/exec: the wait), so no
    check is abandoned in it (round nineteen: at 20 s of set-up, five proofs found in that file timed out before their
    first step was checked). The cold checker's one bound is the check's: no allowance."""
    from oracle.coq.oracle import CoqOracle

    assert WarmCoqPool.setup_seconds > 30.0
    assert CoqOracle({}).setup_allowance_s() == WarmCoqPool.setup_seconds
    assert CoqOracle({"warm": False}).setup_allowance_s() == 0.0
    prepared = CoqOracle({})
    prepared.checker = WarmCoqPool(setup_seconds=7.0)  # what prepare() made
    assert prepared.setup_allowance_s() == 7.0
