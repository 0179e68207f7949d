"""One warm ``coqtop -emacs`` session, driven sentence by sentence over pipes.

Each chunk is followed by a sentinel command carrying a random token, whose echo marks the end of the
chunk's output; the prompt before it gives the state id and whether a proof is open. Memory is capped
with ``RLIMIT_AS``; the process runs in the checker's sandbox. Invariant: a reply is returned only
once its sentinel was seen; a dead or silent coqtop raises (:class:`CoqSessionError`, TimeoutError).
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle.coq.replies import PROMPT, PROMPT_FIELDS, clean_reply, errors_of
from oracle.coq.sandboxing import CoqSandbox
from rrma.contain.spawn import SandboxRequired, signal_own_group, start
from rrma.contracts import OracleError


class CoqSessionError(RuntimeError):
    """A warm ``coqtop`` session died or lost synchronisation; it is restarted."""


# ----------------------------------------------------------------------------- warm sessions


def _limit_memory(memory_mb: int, nice: int = 0) -> Any:
    def apply() -> None:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nice > 0:  # a lower priority, inherited by what coqtop starts (CoqHammer's ATPs)
            os.nice(nice)

    return apply


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, parents before children (Linux's ``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop(0)
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                kids = [int(k) for k in Path(f"/proc/{parent}/task/{tid}/children").read_text().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


@dataclass
class Reply:
    """What ``coqtop`` printed for one chunk: cleaned text, errors, and the prompt after it."""

    text: str
    errors: list[str]
    proof_name: str  # "Coq" when not in proof mode
    state: int  # state id after the chunk (for BackTo)
    prompts: list[tuple[str, int]] = field(default_factory=list)  # (proof name, state id) per sentence run


class CoqSession:
    """One ``coqtop -emacs`` process on pipes; a reader thread drains its output continuously.

    Every chunk is followed by a sentinel (``Fail Check rrma_sync_<random>_<n>.``) whose echo
    marks the end of the chunk's output; the prompt before it gives the state id and whether a
    proof is open. Not thread-safe: the pool hands a session to one check at a time.

    Why not pexpect: its pty (``pexpect.spawn``) cuts input lines at 4,096 bytes and echoes
    input, which corrupts long contexts. Its pipe variant (``pexpect.popen_spawn.PopenSpawn``)
    starts its own ``Popen`` with no ``pass_fds``, so the seccomp filter's descriptor cannot reach
    bubblewrap (which then refuses to start); it writes before it waits, so a chunk larger than the
    pipe overruns the deadline while coqtop reads nothing (a 2 s deadline fired after 11-16 s); its
    ``expect`` polls every 0.1 ms, 2.5-3.3x this reader's CPU; and it was 1.05-1.23x slower per
    bench run (docs/proofs.md). Here the write runs in its own thread beside the wait, the buffer
    keeps at most ``MAX_BUFFER`` bytes of a flood, and the reader sleeps until coqtop writes.
    """

    MAX_BUFFER = 8 * 2**20

    def __init__(self, coqtop: str, *, memory_mb: int = 2048, start_timeout_s: float = 30.0,
                 args: tuple[str, ...] = (), cwd: Path | str | None = None,
                 sandbox: CoqSandbox | None = None, nice: int = 0) -> None:
        # long-lived, so not under spawn: started contained (`sandbox`'s policy, `cwd` its scratch)
        if sandbox is not None and cwd is None:
            raise ValueError("a sandboxed coqtop session needs its scratch directory (cwd)")
        try:
            self.proc = start(
                [coqtop, "-emacs", "-q", *args],
                cwd=cwd if cwd is not None else os.getcwd(),
                guard=sandbox.policy(cwd) if sandbox is not None and cwd is not None else None,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_limit_memory(memory_mb, nice),
            )
        except SandboxRequired as exc:
            raise CoqSessionError(f"the Coq checker's {exc}") from exc
        self.args = tuple(args)
        self.libraries: list[str] | None = None  # Print Libraries after the context (cached per context)
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.eof = False
        self.token = secrets.token_hex(6)
        self.counter = 0
        self.checks = 0
        self.context: str | None = None
        self.context_state = 0
        threading.Thread(target=self._read, name=f"coqtop-{self.proc.pid}", daemon=True).start()
        self.initial_state = self._wait_initial(start_timeout_s)
        self.context_state = self.initial_state

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self.cond:
                if not chunk:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buf.extend(chunk)
                if len(self.buf) > self.MAX_BUFFER:  # output flood: keep the tail only
                    del self.buf[: len(self.buf) - self.MAX_BUFFER]
                self.cond.notify_all()

    def _wait_initial(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while b"</prompt>" not in self.buf:
                if self.eof or not self.cond.wait(timeout=max(0.0, deadline - time.monotonic())):
                    if time.monotonic() >= deadline or self.eof:
                        self.kill()
                        raise CoqSessionError(f"coqtop did not start: {bytes(self.buf[-500:]).decode(errors='replace')}")
            text = self.buf.decode("utf-8", errors="replace")
            self.buf.clear()
        prompts = PROMPT.findall(text)
        match = PROMPT_FIELDS.match(prompts[-1]) if prompts else None
        return int(match.group(2)) if match else 1

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.eof

    def kill(self) -> None:
        signal_own_group(self.proc, self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def interrupt(self) -> bool:
        """Stop the command coqtop runs now and keep the session: SIGKILL to what coqtop started
        (CoqHammer's ATPs and workers), SIGINT to coqtop (inside the sandbox: the first ``coqtop``
        below this process), which answers that command with ``User interrupt.``. False when no
        coqtop was found (the session is not running)."""
        if not self.alive:
            return False
        tree = _descendants(self.proc.pid)
        coqtop = next((p for p in [self.proc.pid, *tree] if _comm(p) == "coqtop"), None)
        if coqtop is None:
            return False
        for pid in reversed(_descendants(coqtop)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(coqtop, signal.SIGINT)
        return True

    def send(self, chunk: str, deadline: float) -> Reply:
        """Send ``chunk`` (whole sentences) and return its reply; raises TimeoutError at the deadline."""
        if not self.alive:
            raise CoqSessionError("coqtop session is not running")
        self.counter += 1
        sentinel = f"rrma_sync_{self.token}_{self.counter}"
        data = (chunk.rstrip("\n") + "\n" + f"Fail Check {sentinel}.\n").encode("utf-8")
        stdin = self.proc.stdin
        assert stdin is not None

        def write() -> None:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(data)
                stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        pattern = re.compile(re.escape(sentinel).encode() + rb".*?<prompt>(.*?)</prompt>", re.S)
        with self.cond:
            while True:
                match = pattern.search(self.buf)
                if match is not None:
                    raw = bytes(self.buf[: match.start()])
                    del self.buf[: match.end()]
                    break
                if self.eof:
                    raise CoqSessionError(f"coqtop exited: {bytes(self.buf[-300:]).decode(errors='replace')}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self.cond.wait(timeout=min(remaining, 1.0))
        text = raw.decode("utf-8", errors="replace")
        # the sentinel's own "The command has indeed failed with message:" line ends the chunk
        text = text[: text.rfind("The command has indeed failed")] if "The command has indeed failed" in text else text
        prompts = [(f.group(1), int(f.group(2))) for p in PROMPT.findall(text)
                   if (f := PROMPT_FIELDS.match(p)) is not None]
        name, state = prompts[-1] if prompts else ("Coq", -1)
        body = clean_reply(text)
        errors = errors_of(body)
        return Reply(text=body, errors=errors, proof_name=name, state=state, prompts=prompts)

    def load_context(self, context: str, deadline: float) -> int:
        """Bring the session to the state right after ``context`` and return its state id.

        A context that extends the one loaded is sent as its new part only; any other goes back to
        the initial state first. Raises OracleError when the context does not compile.
        """
        if self.context == context:
            return self.context_state
        if self.context is not None and context.startswith(self.context):
            delta, base = context[len(self.context) :], self.context_state
        else:
            delta, base = context, self.initial_state
        reply = self.send(f"BackTo {base}.", deadline)
        if reply.errors:
            raise CoqSessionError(f"BackTo failed: {reply.errors[0]}")
        state = base
        if delta.strip():
            reply = self.send(delta, deadline)
            if reply.errors:
                self.context = None
                raise OracleError(f"the context does not compile: {reply.errors[0][:300]}")
            if reply.state >= 0:  # a chunk of comments only executes nothing and prints no prompt
                state = reply.state
        self.context, self.context_state = context, state
        self.libraries = None
        return state
