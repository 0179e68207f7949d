"""The Lean checker: one proof body of a stripped theorem in, a :class:`~oracle.proof_common.Verdict` out.

It applies the text rules (:mod:`oracle.lean.screen`), checks in a warm REPL session
(:mod:`oracle.lean.session`) or, without the REPL, with ``lake env lean --json FILE`` (one process
per check, under :func:`rrma.contain.spawn.spawn`), judges Lean's answers (:mod:`oracle.lean.verdict`)
and lets the kernel replay (:mod:`oracle.lean_audit`) have the last word on an acceptance.
Invariant: :meth:`LeanChecker.check` returns ``accepted=True`` only after every rule passed on answers
from Lean itself; every failure path (timeout, crash, unparsable answer) is a rejection.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from oracle.lean.project import DEFAULT_PROJECT, LeanNotInstalled, lean_missing
from oracle.lean.protocol import LeanMessage, ReplProtocolError, is_sorry_warning, parse_cli_output
from oracle.lean.screen import proof_violation
from oracle.lean.session import ContextError, ReplPool, ReplSession
from oracle.lean.transport import (
    PipeReplTransport,
    ReplError,
    ReplMemoryExceeded,
    ReplTimeout,
    ReplTransport,
    TranscriptMismatch,
)
from oracle.lean.verdict import (
    ALLOWED_AXIOMS,
    Audit,
    audit_commands,
    audit_from,
    proof_origin,
    verdict_from_messages,
)
from oracle.lean_audit import (
    REPLAY_EXE,
    REPLAY_MODES,
    ReplayError,
    audit_file_text,
    judge_replay,
    lean_guard,
    parse_replay_output,
    replay_binary,
)
from oracle.proof_common import Prover, TheoremTask, Verdict
from oracle.strip_lean import assemble, reference_declaration
from rrma.contain import files
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn
from rrma.contracts import OracleError
from rrma.trial import Budget, Status

CliRunner = Callable[[list[str], Path, float, int], tuple[str, int | None, str]]
"""(argv, cwd, timeout_s, memory_mb) -> (status, returncode, stdout): how a CLI check runs."""


def _run_cli(argv: list[str], cwd: Path, timeout_s: float, memory_mb: int,
             guard: Policy | None = None) -> tuple[str, int | None, str]:
    try:
        result = spawn(argv, cwd=cwd, budget=Budget(seconds=timeout_s, memory_mb=memory_mb), guard=guard)
    except FileNotFoundError as exc:
        raise LeanNotInstalled(cwd, [argv[0]]) from exc
    return str(result.status), result.returncode, result.output


class LeanChecker:
    """Check proof bodies of stripped theorems with Lean 4 (REPL pool, or ``lean --json``).

    ``mode``: ``"repl"``, ``"cli"`` or ``"auto"`` (REPL, falling back to the CLI when the REPL
    cannot start). ``transport_factory`` replaces the real REPL (tests); ``cli_runner`` replaces
    :func:`rrma.contain.spawn.spawn` for the CLI path. Limits: in REPL mode ``timeout_s`` of
    :meth:`check` covers the proof (declaration and audit); a theorem's context is elaborated
    once per session under ``header_timeout_s``. In CLI mode every check elaborates the whole
    file, so ``timeout_s`` covers it all. ``memory_mb`` caps the REPL's (or lean's) process group.
    """

    prover: Prover = "lean"

    def __init__(self, project_dir: Path | str = DEFAULT_PROJECT, *, mode: str = "auto", pool_size: int = 1,
                 max_commands: int = 200, memory_mb: int = 4096, header_timeout_s: float = 600.0,
                 transport_factory: Callable[[], ReplTransport] | None = None,
                 cli_runner: CliRunner | None = None,
                 allowed_axioms: Iterable[str] = ALLOWED_AXIOMS, replay: str = "auto",
                 replay_exe: Path | str | None = None, hidden: Sequence[Path] = ()) -> None:
        if mode not in ("auto", "repl", "cli"):
            raise ValueError(f"Lean checker mode must be auto, repl or cli, not {mode!r}")
        if replay not in REPLAY_MODES:
            raise ValueError(f"Lean checker replay must be one of {', '.join(REPLAY_MODES)}, not {replay!r}")
        self.replay = replay
        self.replay_exe = Path(replay_exe) if replay_exe else replay_binary(project_dir)
        self.hidden = tuple(Path(h) for h in hidden)
        self._replay_refs: dict[tuple[str, str, str], Path] = {}
        self._replay_dir: tempfile.TemporaryDirectory[str] | None = None
        self._replay_count = 0
        self.project_dir = Path(project_dir)
        self.mode = mode
        self.memory_mb = memory_mb
        self.header_timeout_s = header_timeout_s
        self.allowed_axioms = frozenset(allowed_axioms)
        self._injected = transport_factory is not None or cli_runner is not None
        factory = transport_factory or (lambda: PipeReplTransport(cwd=self.project_dir, memory_mb=memory_mb,
                                                                  guard=lean_guard(self.project_dir, self.hidden)))
        self.pool = ReplPool(factory, size=pool_size, max_commands=max_commands)
        self._custom_runner = cli_runner
        self._cli_signatures: dict[tuple[str, str, str], str] = {}
        self._repl_broken: str | None = None
        self._lock = threading.Lock()

    # -- setup

    def ensure_available(self) -> None:
        """Raise :class:`LeanNotInstalled` (elan + toolchain hint) when Lean is not on PATH."""
        if self._injected:
            return
        missing = lean_missing()
        if missing:
            raise LeanNotInstalled(self.project_dir, missing)

    def build(self, timeout_s: float = 1800.0) -> None:
        """``lake build`` the project (theorems and the REPL); raises OracleError with the tail."""
        self.ensure_available()
        # `lake exe repl` with stdin at EOF builds the REPL (a dependency) and exits at once
        for argv in (["lake", "build"], ["lake", "exe", "repl"]):
            status, code, out = _run_cli(argv, self.project_dir, timeout_s, max(self.memory_mb, 8192))
            if status != "ok" or code != 0:
                raise OracleError(f"`{' '.join(argv)}` failed in {self.project_dir} ({status}, exit {code}):\n"
                                  + "\n".join(out.splitlines()[-30:]))

    # -- checking

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        started = time.monotonic()
        violation = proof_violation(proof)
        if violation is not None:
            return Verdict(False, violation.reason, seconds=time.monotonic() - started, cheat=True)
        self.ensure_available()
        verdict: Verdict | None = None
        if self.mode == "repl" or (self.mode == "auto" and self._repl_broken is None):
            try:
                verdict = self._check_repl(task, proof, timeout_s, started)
            except _ReplUnavailable as exc:
                if self.mode == "repl":
                    return Verdict(False, f"lean repl unavailable: {exc}", seconds=time.monotonic() - started)
                with self._lock:
                    self._repl_broken = str(exc)  # auto mode: the CLI from now on
        if verdict is None:
            verdict = self._check_cli(task, proof, timeout_s, started)
        if verdict.accepted and self._replay_enabled():
            return self._replayed(task, proof, verdict, timeout_s, started)
        return verdict

    # -- the kernel replay (oracle/lean_audit.py)

    def cli_runner(self, argv: list[str], cwd: Path, timeout_s: float, memory_mb: int,
                   writable: Sequence[Path] = (), readable: Sequence[Path] = ()) -> tuple[str, int | None, str]:
        """Run one Lean command: the injected runner (tests), or under spawn in the sandbox that
        hides the stripped sources (``writable``: where it writes, e.g. its scratch directory;
        ``readable``: what else it reads, e.g. the compiled modules it replays)."""
        if self._custom_runner is not None:
            return self._custom_runner(argv, cwd, timeout_s, memory_mb)
        guard = lean_guard(self.project_dir, self.hidden, writable)
        if guard is not None and readable:
            guard = guard.protecting(*readable)
        return _run_cli(argv, cwd, timeout_s, memory_mb, guard=guard)

    def _replay_enabled(self) -> bool:
        return self.replay == "require" or (self.replay == "auto" and self.replay_exe.exists())

    def _compile(self, text: str, workdir: Path, stem: str, timeout_s: float) -> tuple[Path | None, str]:
        """Compile ``text`` to ``workdir/STEM.olean``. ``workdir`` is a fresh harness-owned folder that
        only this one Lean process may write: the harness writes the source first, never through a link."""
        files.write_bytes(workdir, f"{stem}.lean", text.encode("utf-8"))
        source = workdir / f"{stem}.lean"
        olean = workdir / f"{stem}.olean"
        status, code, out = self.cli_runner(["lake", "env", "lean", "-o", str(olean), str(source)],
                                            self.project_dir, timeout_s, self.memory_mb, (workdir,))
        if status != "ok" or code != 0 or not olean.exists():
            tail = " ".join(out.split())[-200:]
            return None, f"{status}, exit {code}: {tail}"
        return olean, ""

    def _replayed(self, task: TheoremTask, proof: str, verdict: Verdict, timeout_s: float,
                  started: float) -> Verdict:
        """Compile the checked file and the reference apart, replay both through the kernel in a
        third process (``rrma_replay``), and keep ``verdict`` only if the replay agrees."""
        def done(ok: bool, reason: str, cheat: bool = False) -> Verdict:
            return Verdict(ok, reason, verdict.messages, verdict.goals, time.monotonic() - started, cheat,
                           verdict.axioms if ok else [])

        if not self.replay_exe.exists():
            return done(False, f"not audited: the kernel replay tool is not built ({self.replay_exe}); run "
                               f"`lake build` in {self.project_dir}")
        with self._lock:
            if self._replay_dir is None:
                self._replay_dir = tempfile.TemporaryDirectory(prefix="rrma-lean-replay-")
        # the replay's scratch (harness-owned): refs/<digest>/ per reference and checks/<digest>-<n>/
        # per checked proof, each a fresh folder only its own compilation may write, so no Lean process
        # can plant a link where the harness writes next, nor touch a cached reference
        root = Path(self._replay_dir.name)
        limit = max(60.0, timeout_s * 4)  # whole-file compilations, outside the proof's own budget
        context = task.context if not task.context or task.context.endswith("\n") else task.context + "\n"
        key = (context, task.statement, task.name)
        reference = self._replay_refs.get(key)
        if reference is None:
            digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
            refdir = files.fresh_dir(root / "refs" / digest)
            reference, why = self._compile(context + reference_declaration(task.statement) + "\n", refdir,
                                           f"RrmaRef_{digest}", limit)
            if reference is None:
                return done(False, f"not audited: the reference did not compile for the kernel replay ({why})")
            self._replay_refs[key] = reference
        digest = hashlib.sha256(f"{key}\0{proof}".encode()).hexdigest()[:16]
        with self._lock:
            self._replay_count += 1
            checkdir = files.fresh_dir(root / "checks" / f"{digest}-{self._replay_count}")
        try:
            checked, why = self._compile(context + assemble(task.statement, proof) + "\n", checkdir,
                                         f"RrmaCheck_{digest}", limit)
            if checked is None:
                return done(False, f"not audited: the proof did not compile apart for the kernel replay ({why})")
            # the replay tool writes nothing: it reads both modules
            status, _code, out = self.cli_runner(["lake", "exe", REPLAY_EXE, str(checked), str(reference), task.name],
                                                 self.project_dir, limit, self.memory_mb, (),
                                                 (checkdir, reference.parent))
        finally:
            files.remove_tree(checkdir)  # any depth, never follows a link, never raises
        if status not in ("ok", "crash"):
            return done(False, f"not audited: the kernel replay ran over its limit ({status})")
        try:
            report = parse_replay_output(out)
        except ReplayError as exc:
            return done(False, f"not audited: {exc}")
        ok, reason, cheat = judge_replay(report, task.name, self.allowed_axioms)
        return done(ok, reason, cheat)

    def _check_repl(self, task: TheoremTask, proof: str, timeout_s: float, started: float) -> Verdict:
        try:
            session = self.pool.acquire()
        except ReplError as exc:
            raise _ReplUnavailable(str(exc)) from exc
        broken = False
        try:
            return self._check_in_session(session, task, proof, timeout_s, started)
        except ReplTimeout as exc:
            broken = True
            return Verdict(False, f"timeout: {exc} (REPL killed)", seconds=time.monotonic() - started)
        except ReplMemoryExceeded as exc:
            broken = True
            return Verdict(False, f"memory limit exceeded: {exc}", seconds=time.monotonic() - started)
        except ContextError as exc:
            return Verdict(False, f"context error: {exc}", seconds=time.monotonic() - started)
        except (ReplError, ReplProtocolError) as exc:
            broken = True
            if session.commands <= 1 and not isinstance(exc, TranscriptMismatch):
                raise _ReplUnavailable(str(exc)) from exc
            return Verdict(False, f"lean repl failed: {exc}", seconds=time.monotonic() - started)
        finally:
            self.pool.release(session, broken=broken)

    def _check_in_session(self, session: ReplSession, task: TheoremTask, proof: str, timeout_s: float,
                          started: float) -> Verdict:
        # The context and the reference statement are elaborated once per session under their own
        # (longer) limit: a heavy import must not eat the proof's budget or kill REPLs in a loop.
        header = session.header_env(task.context, task.source_file, self.header_timeout_s)
        key = (header, task.statement, task.name)
        expected = session.signatures.get(key)
        if expected is None:
            ref = reference_declaration(task.statement)
            resp = session.command(f"{ref}\n\n#check @{task.name}", header, self.header_timeout_s)
            check_line = ref.count("\n") + 3
            if resp.error is not None or resp.errors:
                why = resp.error or resp.errors[0].text
                raise ContextError(f"the statement of {task.name} does not elaborate: {why}")
            expected = next((m.text for m in resp.messages if m.severity == "info" and m.line == check_line), None)
            if expected is None:
                raise ContextError(f"#check @{task.name} printed nothing after the statement")
            session.signatures[key] = expected
        proof_started = time.monotonic()

        def left() -> float:  # the proof's own budget: its declaration plus the audit
            return max(0.5, timeout_s - (time.monotonic() - proof_started))

        declaration = assemble(task.statement, proof)
        origin = proof_origin(task.statement, declaration)
        resp = session.command(declaration, header, left())
        if resp.error is not None:
            return Verdict(False, f"lean repl error: {resp.error}", seconds=time.monotonic() - started)
        audit: Audit | None = None
        if not resp.errors and not resp.sorries and resp.env is not None:
            audit_resp = session.command(audit_commands(task.name), resp.env, left())
            if audit_resp.error is not None:
                audit = Audit(None, None, [LeanMessage("error", 0, 0, None, None, audit_resp.error)])
            else:
                audit = audit_from(audit_resp.messages, 1, 2)
        return verdict_from_messages(task, messages=resp.messages, sorries=resp.sorries, audit=audit,
                     expected_signature=expected, origin=origin, allowed_axioms=self.allowed_axioms,
                     started=started)

    def _cli_file(self, text: str, workdir: Path) -> Path:
        """Write ``text`` into the check's folder; Lean processes of this check write there too, so
        never through a link one of them planted (:func:`rrma.contain.files.write_bytes`)."""
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        files.write_bytes(workdir, f"RrmaCheck_{digest}.lean", text.encode("utf-8"))
        return workdir / f"RrmaCheck_{digest}.lean"

    def _check_cli(self, task: TheoremTask, proof: str, timeout_s: float, started: float) -> Verdict:
        """``lake env lean --json`` per check: the reference file (ours only) gives the expected
        ``#check``; the checked file (context + declaration, nothing after it) is compiled to an
        ``.olean``; the audit runs in a third file that imports that module, so nothing the proof
        prints can pose as the audit's answer."""
        def left() -> float:
            return max(0.5, timeout_s - (time.monotonic() - started))

        context = task.context if not task.context or task.context.endswith("\n") else task.context + "\n"
        ctx_lines = context.count("\n")
        with tempfile.TemporaryDirectory(prefix="rrma-lean-") as tmp:
            workdir = Path(tmp)
            key = (context, task.statement, task.name)
            expected = self._cli_signatures.get(key)
            if expected is None:
                ref = reference_declaration(task.statement)
                ref_text = f"{context}{ref}\n\n#check @{task.name}\n"
                status, _code, out = self.cli_runner(
                    ["lake", "env", "lean", "--json", str(self._cli_file(ref_text, workdir))],
                    self.project_dir, left(), self.memory_mb, (workdir,))
                if status != "ok" and status != "crash":
                    return self._limit_verdict(status, timeout_s, started)
                msgs, other = parse_cli_output(out)
                check_line = ctx_lines + ref.count("\n") + 3
                errs = [m for m in msgs if m.severity == "error"]
                if errs:
                    return Verdict(False, f"context error: line {errs[0].line}: {errs[0].text.splitlines()[0]}",
                                   [m.to_json() for m in errs], seconds=time.monotonic() - started)
                expected = next((m.text for m in msgs if m.severity == "info" and m.line == check_line), None)
                if expected is None:
                    tail = "\n".join(other[-5:])
                    return Verdict(False, f"context error: #check @{task.name} printed nothing. {tail}".strip(),
                                   seconds=time.monotonic() - started)
                self._cli_signatures[key] = expected
            declaration = assemble(task.statement, proof)
            origin = proof_origin(task.statement, declaration)
            checked = self._cli_file(f"{context}{declaration}\n", workdir)
            olean = checked.with_suffix(".olean")
            status, _code, out = self.cli_runner(
                ["lake", "env", "lean", "--json", "-o", str(olean), str(checked)],
                self.project_dir, left(), self.memory_mb, (workdir,))
            if status not in ("ok", "crash"):
                return self._limit_verdict(status, timeout_s, started)
            msgs, _other = parse_cli_output(out)
            ctx_errors = [m for m in msgs if m.line <= ctx_lines and m.severity == "error"]
            if ctx_errors:
                first = ctx_errors[0]
                return Verdict(False, f"context error: line {first.line}: {first.text.splitlines()[0]}",
                               [m.to_json() for m in ctx_errors], seconds=time.monotonic() - started)
            decl_msgs = [m for m in msgs if m.line > ctx_lines]
            audit: Audit | None = None
            clean = not any(m.severity == "error" for m in decl_msgs) and not any(is_sorry_warning(m) for m in decl_msgs)
            if clean and olean.exists():
                audit_file = workdir / f"Audit_{checked.stem}.lean"
                # written after the proof's own compilation ran in this folder: never through its links
                files.write_bytes(workdir, audit_file.name, audit_file_text(checked.stem, task.name).encode("utf-8"))
                status, _code, audit_out = self.cli_runner(
                    ["env", f"LEAN_PATH={workdir}{os.pathsep}{os.environ.get('LEAN_PATH', '')}".rstrip(os.pathsep),
                     "lake", "env", "lean", "--json", str(audit_file)],
                    self.project_dir, left(), self.memory_mb, (workdir,))
                if status not in ("ok", "crash"):
                    return self._limit_verdict(status, timeout_s, started)
                audit = audit_from(parse_cli_output(audit_out)[0], 2, 3)
        return verdict_from_messages(task, messages=decl_msgs, audit=audit, expected_signature=expected, origin=origin,
                     allowed_axioms=self.allowed_axioms, line_offset=ctx_lines, started=started)

    def _limit_verdict(self, status: str, timeout_s: float, started: float) -> Verdict:
        seconds = time.monotonic() - started
        if status == Status.timeout:
            return Verdict(False, f"timeout: lean ran over {timeout_s:g} s", seconds=seconds)
        if status == Status.oom:
            return Verdict(False, f"memory limit exceeded: lean went over {self.memory_mb} MiB", seconds=seconds)
        return Verdict(False, f"lean did not run: {status}", seconds=seconds)

    def close(self) -> None:
        self.pool.close()
        if self._replay_dir is not None:
            self._replay_dir.cleanup()
            self._replay_dir = None

    def __enter__(self) -> LeanChecker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _ReplUnavailable(Exception):
    """The REPL could not start or died on its first command (fall back to the CLI in auto mode)."""
