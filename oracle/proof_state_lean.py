"""Lean 4 proof states: the REPL's tactic mode, and LeanDojo for repositories a user has traced.

Why it exists: the proof search (:mod:`agents.proof_search`) needs Lean's goals after each tactic.

* :class:`LeanReplProofStates` drives the oracle's own REPL sessions (:class:`oracle.lean.ReplSession`
  over any :class:`~oracle.lean.ReplTransport`): the theorem's context is elaborated once per
  session (``{"cmd": context}`` -> env), the statement is closed by ``by sorry`` on that env and
  the REPL answers with the sorry's ``proofState``; then each tactic is
  ``{"tactic": T, "proofState": N}``, answered by ``{"proofState": M, "goals": [...],
  "proofStatus": ...}``. Proof states are persistent in the REPL, so going back to any explored
  state costs nothing. A tactic fails when the REPL answers ``{"message": "Lean error: ..."}``, when
  its answer carries an error message, or when its ``proofStatus`` says the proof now contains
  ``sorry`` (the REPL recovers from an elaboration error by inserting one). ``"Completed"`` (or no
  goals left) is a finished path.
* :class:`LeanDojoProofStates` is the same protocol over LeanDojo's ``Dojo``: ``run_tac`` on a
  ``TacticState`` gives a ``TacticState``, ``ProofFinished``, ``LeanError`` (``TacticError`` in
  older releases), ``ProofGivenUp`` or a timeout. It needs ``pip install lean-dojo`` (not a dependency of
  this project) and a repository LeanDojo has traced; it is imported only when used.

Every tactic passes the oracle's proof-body text rules (:func:`oracle.lean.proof_violation` on
``by`` + the tactic) before it is sent, so exploring never runs what the oracle refuses; the found
proof (``by`` and the tactics, one per line) is re-checked from scratch by the oracle.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from oracle.lean.project import DEFAULT_PROJECT
from oracle.lean.protocol import ReplProtocolError, ReplResponse, parse_repl_response
from oracle.lean.screen import proof_violation
from oracle.lean.session import ContextError, ReplSession
from oracle.lean.transport import PipeReplTransport, ReplError, ReplTransport
from oracle.lean_audit import lean_guard
from oracle.proof_common import Prover, TheoremTask
from oracle.proof_state import Outcome, ProofState, ProofStateError, TacticResult


def sorry_declaration(statement: str) -> str:
    """The statement closed by ``by sorry``: its sorry's proof state is the search's start."""
    stmt = statement.rstrip()
    return f"{stmt} by sorry" if stmt.endswith(":=") else f"{stmt} := by sorry"


def lean_proof_text(tactics: Sequence[str]) -> str:
    """``by`` and the tactics, one per line (a tactic's own later lines indented with it)."""
    lines = ["by"]
    for tactic in tactics:
        first, *rest = tactic.strip("\n").split("\n")
        lines.append("  " + first)
        lines.extend("  " + line for line in rest)
    return "\n".join(lines)


def screen_lean_tactic(tactic: str) -> str | None:
    """Why the oracle would refuse ``tactic`` inside a proof (None when it passes the text rules)."""
    if not tactic.strip():
        return "empty tactic"
    violation = proof_violation(lean_proof_text([tactic]))
    return violation.reason if violation is not None else None


def result_of(resp: ReplResponse, seconds: float) -> TacticResult:
    """A tactic-mode answer as a result (the proof state keeps its number as handle)."""
    if resp.error is not None:
        return TacticResult("error", message=resp.error.removeprefix("Lean error:").strip()[:300], seconds=seconds)
    errors = resp.errors
    if errors:
        return TacticResult("error", message=errors[0].text.splitlines()[0][:300] if errors[0].text else "error",
                            seconds=seconds)
    status = resp.proof_status or ""
    if "sorry" in status or resp.sorries:
        return TacticResult("error", message=f"the proof now contains sorry ({status or 'sorries'})", seconds=seconds)
    if resp.proof_state is None:
        return TacticResult("error", message="the REPL gave no proof state", seconds=seconds)
    if status == "Completed" or (not resp.goals and not status.startswith("Incomplete")):
        return TacticResult("proved", ProofState(resp.proof_state, ()), seconds=seconds)
    return TacticResult("progress", ProofState(resp.proof_state, tuple(resp.goals)), seconds=seconds)


class LeanReplProofStates:
    """Proof states through one warm Lean REPL (see the module docstring)."""

    prover: Prover = "lean"

    def __init__(self, project_dir: Path | str | None = None, *,
                 transport_factory: Callable[[], ReplTransport] | None = None, memory_mb: int = 4096,
                 header_timeout_s: float = 600.0, hidden: Sequence[Path] = ()) -> None:
        self.project_dir = Path(project_dir) if project_dir else DEFAULT_PROJECT
        # the agent's own REPL: sandboxed, with what the agent must never see (Context.hidden) hidden
        self.factory = transport_factory or (lambda: PipeReplTransport(
            cwd=self.project_dir, memory_mb=memory_mb, guard=lean_guard(self.project_dir, tuple(hidden))))
        self.header_timeout_s = header_timeout_s
        self.session: ReplSession | None = None
        self.tactic_runs = 0

    def _session(self) -> ReplSession:
        if self.session is None:
            try:
                self.session = ReplSession(self.factory())
            except ReplError as exc:
                raise ProofStateError(f"the Lean REPL did not start: {exc}") from exc
        return self.session

    def _drop(self) -> None:
        if self.session is not None:
            try:
                self.session.transport.close()
            finally:
                self.session = None

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        session = self._session()
        try:
            env = (session.header_env(task.context, task.source_file, max(timeout_s, self.header_timeout_s))
                   if task.context.strip() else None)
            resp = session.command(sorry_declaration(task.statement), env, timeout_s)
        except ContextError as exc:
            raise ProofStateError(str(exc)) from exc
        except (ReplError, ReplProtocolError) as exc:
            self._drop()
            raise ProofStateError(f"the Lean REPL failed: {exc}") from exc
        if resp.error is not None or resp.errors:
            why = resp.error or resp.errors[0].text
            raise ProofStateError(f"the statement of {task.name} does not elaborate: {why.splitlines()[0]}")
        if not resp.sorries or resp.sorries[0].proof_state is None:
            raise ProofStateError(f"the REPL gave no proof state for {task.name}")
        first = resp.sorries[0]
        return ProofState(first.proof_state, (first.goal,))

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        why = screen_lean_tactic(tactic)
        if why is not None:
            return TacticResult("rejected", message=why)
        started = time.monotonic()
        session = self._session()
        self.tactic_runs += 1
        try:
            raw = session.transport.send({"tactic": tactic, "proofState": state.handle}, timeout_s)
            session.commands += 1
            resp = parse_repl_response(raw)
        except ReplError as exc:
            self._drop()  # a timeout kills the REPL; the next start() begins a fresh one
            kind: Outcome = "timeout" if "within" in str(exc) or "timeout" in str(exc).lower() else "error"
            return TacticResult(kind, message=str(exc)[:300], seconds=time.monotonic() - started)
        except ReplProtocolError as exc:
            return TacticResult("error", message=str(exc)[:300], seconds=time.monotonic() - started)
        return result_of(resp, time.monotonic() - started)

    def proof_text(self, tactics: Sequence[str]) -> str:
        return lean_proof_text(tactics)

    def close(self) -> None:
        self._drop()


# ----------------------------------------------------------------------------- LeanDojo


class LeanDojoUnavailable(ProofStateError):
    """``lean_dojo`` is not installed (``pip install lean-dojo``)."""


def _goals_of_dojo_state(state: Any) -> tuple[str, ...]:
    goals = getattr(state, "goals", None)
    if goals:
        out = []
        for goal in goals:
            hyps = [f"{getattr(d, 'ident', '?')} : {getattr(d, 'lean_type', '')}" for d in getattr(goal, "assumptions", [])]
            out.append("\n".join([*hyps, f"⊢ {getattr(goal, 'conclusion', '')}"]))
        return tuple(out)
    pp = str(getattr(state, "pp", ""))
    return tuple(block.strip() for block in pp.split("\n\n") if block.strip())


class LeanDojoProofStates:
    """Proof states through LeanDojo (``Dojo``/``run_tac``) for a traced repository.

    ``repo``: a LeanDojo repository (a ``LeanGitRepo``, or ``(url_or_path, commit)``); a task's
    ``source_file`` (relative to the repository) and ``name`` name the theorem. ``dojo_module``
    replaces ``lean_dojo`` (tests). Each :meth:`start` enters a new ``Dojo`` (LeanDojo runs one
    theorem per Dojo); :meth:`close` leaves it.
    """

    prover: Prover = "lean"

    def __init__(self, repo: Any = None, *, dojo_module: Any = None, timeout_s: int = 600) -> None:
        if dojo_module is None:
            try:
                dojo_module = importlib.import_module("lean_dojo")
            except ImportError as exc:
                raise LeanDojoUnavailable("the LeanDojo backend needs `pip install lean-dojo` "
                                          f"and a traced repository: {exc}") from exc
        self.lean_dojo = dojo_module
        if isinstance(repo, (tuple, list)):
            repo = dojo_module.LeanGitRepo(*repo)
        self.repo = repo
        self.timeout_s = timeout_s
        self._context: Any = None
        self._dojo: Any = None

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        self.close()
        if self.repo is None:
            raise ProofStateError("the LeanDojo backend needs params.lean_project = a traced repository")
        if not task.source_file:  # a bench's theorem view names no file: it holds every original proof
            raise ProofStateError(f"LeanDojo needs the file of {task.name}, which an agent is not told (the "
                                  "file holds the original proofs; LeanDojo's traced repository does too)")
        theorem = self.lean_dojo.Theorem(self.repo, task.source_file, task.name)
        try:
            self._context = self.lean_dojo.Dojo(theorem, timeout=self.timeout_s)
            self._dojo, init = self._context.__enter__()
        except Exception as exc:  # DojoInitError and friends: LeanDojo could not open this theorem
            self._context = self._dojo = None
            raise ProofStateError(f"LeanDojo could not open {task.name}: {type(exc).__name__}: {exc}") from exc
        return ProofState(init, _goals_of_dojo_state(init))

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        why = screen_lean_tactic(tactic)
        if why is not None:
            return TacticResult("rejected", message=why)
        if self._dojo is None:
            return TacticResult("error", message="no theorem started")
        started = time.monotonic()
        try:
            res = self._dojo.run_tac(state.handle, tactic)
        except Exception as exc:  # a crashed or timed-out Dojo ends this theorem's search
            failed: Outcome = "timeout" if "Timeout" in type(exc).__name__ else "error"
            return TacticResult(failed, message=f"{type(exc).__name__}: {exc}"[:300], seconds=time.monotonic() - started)
        seconds = time.monotonic() - started
        kind = type(res).__name__
        if kind == "ProofFinished":
            return TacticResult("proved", ProofState(res, ()), seconds=seconds)
        if kind == "TacticState":
            return TacticResult("progress", ProofState(res, _goals_of_dojo_state(res)), seconds=seconds)
        if kind == "ProofGivenUp":
            return TacticResult("rejected", message="the proof gave up (sorry)", seconds=seconds)
        message = str(getattr(res, "error", res))[:300]
        return TacticResult("timeout" if "Timeout" in kind else "error", message=message, seconds=seconds)

    def proof_text(self, tactics: Sequence[str]) -> str:
        return lean_proof_text(tactics)

    def close(self) -> None:
        if self._context is not None:
            try:
                self._context.__exit__(None, None, None)
            finally:
                self._context = self._dojo = None


__all__ = ["LeanDojoProofStates", "LeanDojoUnavailable", "LeanReplProofStates", "lean_proof_text", "result_of",
           "screen_lean_tactic", "sorry_declaration"]
