"""The warm Coq checker: a pool of ``coqtop`` sessions (the pool shared with Lean,
:mod:`oracle.repl_pool`) that keep the task's context loaded.

Invariant: every check starts from the state right after the task's context (a ``BackTo`` to the
saved state id, which also reverts options), so one check cannot influence the next; a session is
restarted after ``max_checks`` checks, after a timeout, and whenever its state cannot be verified. In
warm mode, leaving proof mode before the last sentence is rejected, and every unit must advance
coqtop's state id exactly as the oracle's split predicts.
"""

from __future__ import annotations

import secrets
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle.coq.modules import loaded_libraries, module_refusal, session_args
from oracle.coq.reference import guard_command, reference_declaration
from oracle.coq.replies import (
    COQ_NAME,
    axiom_verdict,
    error_summary,
    located_constant,
    parse_assumptions,
    parse_goals,
)
from oracle.coq.sandboxing import CoqSandbox, find_coq_binary
from oracle.coq.screen import KERNEL_REFUSED, ProofRejected, ProofScript, rejected, screen_proof
from oracle.coq.session import CoqSession, CoqSessionError
from oracle.proof_common import Prover, TheoremTask, Verdict
from oracle.repl_pool import PoolClosed, SessionPool
from rrma.contain import files
from rrma.contracts import OracleError


@dataclass
class WarmCoqPool:
    """Warm checker: a pool of ``coqtop`` sessions keeping the task's context loaded.

    Same rules and verdicts as :class:`CoqChecker`; much faster per check because the context
    (imports, earlier lemmas) is loaded once per session and each check returns to it with
    ``BackTo``. Thread-safe: ``check`` may be called from several threads (one session each).

    A check's ``timeout_s`` is the proof's: it starts once the session is ready (coqtop started, the
    context and its ``Require``s loaded), so the wait for a free session, a session's start-up and the
    loading of the libraries never count against it. Those are bounded apart, by ``setup_seconds``
    together, so that on a loaded machine a short proof budget still checks proofs (before, a start-up
    slower than the budget timed out every check, and each timeout's restart paid the start-up again).
    """

    size: int = 1
    coqtop: str = "coqtop"
    allowed_axioms: tuple[str, ...] = ()
    memory_mb: int = 2048
    max_checks: int = 200  # restart a session after this many checks (bounded memory growth)
    coq_args: tuple[str, ...] = ()  # load paths for the user's libraries (as for coqc)
    sandbox: CoqSandbox = field(default_factory=CoqSandbox)  # what each coqtop process sees
    # a session's start-up plus its context's loading, bounded apart from the proof's seconds; the coq oracle
    # declares it (CoqOracle.setup_allowance_s), and the loop waits that much longer for an outcome. The
    # context holds the earlier theorems' real proofs: `setoid_ring/Ncring_polynom.v`'s take 25-38 s to load,
    # and at 20 s (before round nineteen) its later theorems' found proofs timed out here, and each timeout's
    # restart loaded it again
    setup_seconds: float = 120.0
    prover: Prover = field(default="coq", init=False, repr=False)
    restarts: int = 0

    def __post_init__(self) -> None:
        self.coqtop = find_coq_binary(self.coqtop)
        # ``size`` slots, sessions started lazily (:meth:`check`); a session given back after close is killed
        self.sessions: SessionPool[CoqSession] = SessionPool(self.size, CoqSession.kill, name="coqtop")
        self._lock = threading.Lock()
        # the sessions' scratch: harness-owned, shared by this pool's sessions only (coqtop writes nothing)
        self.scratch = Path(tempfile.mkdtemp(prefix="rrma-coqtop-"))

    def close(self) -> None:
        self.sessions.close()  # kills the idle sessions; one still checking is killed when given back
        files.remove_tree(self.scratch)  # any depth, never follows a link, never raises

    def _fresh(self, setup_deadline: float, args: tuple[str, ...] | None = None) -> CoqSession:
        with self._lock:
            self.restarts += 1
        if self.scratch.is_symlink() or not self.scratch.is_dir():  # removed by close(): a new one
            self.scratch = Path(tempfile.mkdtemp(prefix="rrma-coqtop-"))
        return CoqSession(self.coqtop, memory_mb=self.memory_mb, args=self.coq_args if args is None else args,
                          cwd=self.scratch, sandbox=self.sandbox,
                          start_timeout_s=max(0.0, setup_deadline - time.monotonic()))

    def _usable(self, session: CoqSession | None, task: TheoremTask, setup_deadline: float) -> CoqSession:
        """``session`` when it can judge ``task`` (alive, under its check count, started with the task's
        arguments); else a fresh one (the old one killed)."""
        args = self.session_args(task)
        if session is None or not session.alive or session.checks >= self.max_checks or session.args != args:
            if session is not None:
                session.kill()
            session = self._fresh(setup_deadline, args)
        return session

    def session_args(self, task: TheoremTask) -> tuple[str, ...]:
        """The coqtop arguments ``task`` is checked with (:func:`oracle.coq.modules.session_args`: without the
        prelude when it loads the target's own module, and as that module)."""
        return session_args(task, self.coq_args)

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        started = time.monotonic()
        try:
            script = screen_proof(proof)
        except ProofRejected as exc:
            return rejected(exc, started)
        try:
            session = self.sessions.acquire()  # an idle session, or None: a free slot to start one in
        except PoolClosed as exc:
            return Verdict(False, f"session error: {exc}", seconds=time.monotonic() - started)
        setup_deadline = time.monotonic() + self.setup_seconds  # start-up and context: not the proof's seconds
        try:
            session = self._usable(session, task, setup_deadline)
            verdict = self._run(session, task, script, started, timeout_s, setup_deadline)
            if verdict.reason.startswith(("timeout", "session")) or any(
                marker in verdict.reason for marker in ("Out of memory", "Stack overflow")
            ):
                session.kill()  # a session that hit a limit is never reused
                session = None
            return verdict
        except CoqSessionError as exc:
            if session is not None:
                session.kill()
            session = None
            return Verdict(False, f"session error: {exc}", seconds=time.monotonic() - started)
        finally:
            self.sessions.release(session)

    # ------------------------------------------------------------------ one check

    def _run(self, session: CoqSession, task: TheoremTask, script: ProofScript, started: float,
             timeout_s: float, setup_deadline: float) -> Verdict:
        session.checks += 1
        messages: list[dict[str, Any]] = []
        goals: list[str] = []

        def done(accepted: bool, reason: str, *, cheat: bool = False, axioms: list[str] | None = None) -> Verdict:
            return Verdict(accepted, reason, messages=messages, goals=goals, seconds=time.monotonic() - started,
                           cheat=cheat, axioms=axioms or [])

        clean = True
        loading = True
        try:
            session.load_context(task.context, setup_deadline)
            if task.module:
                if session.libraries is None:
                    session.libraries = loaded_libraries(session.send("Print Libraries.", setup_deadline).text)
                refusal = module_refusal(task, session.libraries)
                if refusal:
                    return done(False, refusal)
            loading = False
            deadline = time.monotonic() + timeout_s  # the proof's own seconds start here
            reference = f"rrma_ref_{secrets.token_hex(8)}"
            declaration = reference_declaration(task, reference)
            if not declaration:
                return done(False, f"the oracle cannot restate the statement of {task.name}")
            reply = session.send(declaration, deadline)
            if reply.errors or [n for n, _ in reply.prompts] != [reference, "Coq"]:
                return done(False, f"the statement does not check: {(reply.errors or ['no reference'])[0][:300]}")
            reply = session.send(task.statement + "\n" + script.opener, deadline)
            if reply.errors or reply.proof_name == "Coq":
                return done(False, f"the statement does not check: {(reply.errors or ['no proof opened'])[0][:300]}")
            proof_name, tip = reply.proof_name, reply.state
            goals = parse_goals(reply.text)
            for index, unit in enumerate(script.units):
                reply = session.send(script.unit_text(unit), deadline)
                line = script.line(unit)
                if reply.errors:
                    messages.append({"severity": "error", "line": line, "sentence": index,
                                     "text": reply.errors[0], "source": "proof"})
                    show = session.send("Show.", deadline)
                    goals = parse_goals(show.text)
                    return done(False, f"error at proof line {line}: {error_summary(reply.errors[0])}")
                # one unit is one sentence for Coq too: exactly one prompt, one new state (the sync
                # sentinel before it takes the other), still inside this theorem's proof
                if reply.proof_name == "Coq" or reply.prompts[-1:] != [(proof_name, tip + 2)] or len(reply.prompts) != 1:
                    ran = len(reply.prompts)
                    what = (f"ran as {ran} sentences in Coq" if ran != 1 else "left the theorem's proof"
                            if reply.proof_name != proof_name else "did not advance the proof by one state")
                    return done(False, f"the sentence at proof line {line} {what}: commands injected", cheat=True)
                tip = reply.state
                goals = parse_goals(reply.text) if ("goal" in reply.text or "No more goals" in reply.text) else goals
            reply = session.send("Qed.", deadline)
            if reply.errors or reply.proof_name != "Coq":
                text = (reply.errors or ["the proof is still open after Qed"])[0]
                messages.append({"severity": "error", "line": 0, "text": text, "source": "qed"})
                if "incomplete proof" in text:
                    goals = parse_goals(session.send("Show.", deadline).text)
                    return done(False, f"incomplete proof: {len(goals)} goal(s) remain")
                if script.skips_a_check:
                    return done(False, f"{KERNEL_REFUSED}: {' '.join(text.splitlines())[:160]}", cheat=True)
                return done(False, f"error at Qed: {' '.join(text.splitlines())[:200]}")
            goals = []
            reply = session.send(guard_command(task.name, reference), deadline)
            if reply.errors:
                messages.append({"severity": "error", "line": 0, "text": reply.errors[0], "source": "guard"})
                return done(False, f"{task.name} no longer proves its original statement: commands were "
                            "injected around the proof", cheat=True)
            reply = session.send(f"Print Assumptions {task.name}.", deadline)
            closed, axioms, problem = parse_assumptions(reply.text)
            refusal = module_refusal(task, loaded_libraries(session.send("Print Libraries.", deadline).text))
            if refusal:
                return done(False, refusal, cheat=True)
            ok, reason = axiom_verdict(closed, axioms, problem, self.allowed_axioms)
            return done(ok, reason, cheat=not ok, axioms=axioms)
        except TimeoutError:
            clean = False
            if loading:
                return done(False, f"timeout: the context did not load within {self.setup_seconds:g} s "
                            "(session restarted)")
            return done(False, f"timeout: no verdict after {timeout_s:g} s (session restarted)")
        except OracleError as exc:
            return done(False, str(exc))
        finally:
            if clean and session.alive:
                self._rewind(session)

    def locate(self, task: TheoremTask, names: Sequence[str], *, timeout_s: float = 30.0) -> dict[str, str]:
        """``Locate`` each of ``names`` right after ``task``'s context: name -> the constant's full name
        (:class:`oracle.coq.reference.OriginalAxioms` tells a functor parameter's fields by it). A name Coq
        does not place, or any failure, is left out."""
        names = [n for n in names if COQ_NAME.fullmatch(n)]
        if not names:
            return {}
        try:
            session = self.sessions.acquire()
        except PoolClosed:
            return {}
        deadline = time.monotonic() + self.setup_seconds + timeout_s
        try:
            session = self._usable(session, task, deadline)
            session.load_context(task.context, deadline)
            paths = {n: located_constant(session.send(f"Locate {n}.", deadline).text) for n in names}
            return {n: p for n, p in paths.items() if p}
        except (CoqSessionError, OracleError, TimeoutError):
            if session is not None:
                session.kill()
            session = None
            return {}
        finally:
            self.sessions.release(session)

    @staticmethod
    def _rewind(session: CoqSession) -> None:
        """Return to the state right after the context; kill the session if that cannot be verified."""
        try:
            session.send("Abort All.", time.monotonic() + 10)
            back = session.send(f"BackTo {session.context_state}.", time.monotonic() + 10)
        except (TimeoutError, CoqSessionError):
            session.kill()
            return
        if back.errors or back.proof_name != "Coq" or back.state != session.context_state:
            session.kill()
