"""The seam between the Lean oracle and a REPL process: :class:`ReplTransport` sends one request and
returns its answer.

:class:`PipeReplTransport` runs ``lake exe repl`` in its own process group over pipes (one JSON
request, then a blank line; the answer is pretty-printed JSON ended by a blank line), with a wall-clock
deadline and a resident-memory cap of the whole group checked from outside; :class:`RecordedTransport`
answers from transcripts, so the whole code path runs in tests without Lean. Invariant: a timeout, a
memory overrun or a dead process kills the whole group and raises a :class:`ReplError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from oracle.lean.project import DEFAULT_PROJECT
from oracle.lean.protocol import ReplProtocolError, read_transcript
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import SandboxRequired, group_rss_bytes, signal_own_group, start


class ReplError(RuntimeError):
    """The REPL process failed: exited, answered garbage, or the transcript ran out."""


class ReplTimeout(ReplError):
    """No answer within the deadline (the process group has been killed)."""


class ReplMemoryExceeded(ReplError):
    """The REPL's process group went over its resident-memory cap (it has been killed)."""


class TranscriptMismatch(ReplError):
    """A recorded transport was asked something its transcript does not hold."""


class ReplTransport(Protocol):
    """One REPL process (or a recording of one): send a request, get its answer."""

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...

    def close(self) -> None:
        """End the REPL; may raise ReplError or OSError (a REPL already gone), nothing else."""
        ...


def _canonical(request: dict[str, Any]) -> str:
    return json.dumps(request, sort_keys=True, ensure_ascii=False)


class RecordedTransport:
    """Answers from a transcript: each recorded request, matched exactly, yields its answer.

    A request that was recorded several times yields its answers in order. Anything else raises
    :class:`TranscriptMismatch` naming the request, so a test fails when the oracle sends
    something its fixture does not document.
    """

    def __init__(self, pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        self._answers: dict[str, deque[dict[str, Any]]] = {}
        for request, response in pairs:
            self._answers.setdefault(_canonical(request), deque()).append(response)
        self.sent: list[dict[str, Any]] = []
        self.closed = False

    @classmethod
    def from_files(cls, *stems: Path) -> RecordedTransport:
        pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for stem in stems:
            pairs.extend(read_transcript(stem.with_suffix(".in"), stem.with_suffix(".expected.out")))
        return cls(pairs)

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.closed:
            raise ReplError("recorded transport is closed")
        self.sent.append(request)
        queue = self._answers.get(_canonical(request))
        if not queue:
            raise TranscriptMismatch(f"no recorded answer for request {_canonical(request)[:400]}")
        return queue.popleft()

    def close(self) -> None:
        self.closed = True


class PipeReplTransport:
    """A real REPL process (``lake exe repl`` by default) driven over pipes.

    The process runs in its own session (process group); a timeout or memory overrun kills the
    whole group (SIGTERM, then SIGKILL) and raises. stderr goes to a temporary file so a chatty
    REPL can never block on a full pipe; its tail is quoted when the process dies.
    """

    def __init__(self, argv: Sequence[str] = ("lake", "exe", "repl"), *, cwd: Path | str = DEFAULT_PROJECT,
                 env: dict[str, str] | None = None, memory_mb: int | None = 4096,
                 poll_s: float = 0.05, guard: Policy | None = None) -> None:
        # in the sandbox (``guard``) the REPL cannot read the stripped sources (their original proofs),
        # write outside its project's .lake, nor reach the network. Long-lived, so not under spawn:
        # rrma.contain.spawn.start contains it the same way (mode auto runs it bare where bubblewrap cannot run,
        # require refuses); its environment holds no credential
        self.argv = list(argv)
        self.memory_mb = memory_mb
        self.poll_s = poll_s
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = start(
                self.argv, cwd=cwd, guard=guard, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, start_new_session=True, bufsize=0,
            )
        except SandboxRequired as exc:
            self._stderr.close()
            raise ReplError(f"the Lean REPL's {exc}") from exc
        except OSError as exc:
            self._stderr.close()
            raise ReplError(f"cannot start {' '.join(self.argv)} in {cwd}: {exc}") from exc
        self.pgid = self.proc.pid
        self._buffer = b""
        self.noise: list[str] = []  # non-JSON stdout lines (build logs), for diagnostics
        self.closed = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode("utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.closed:
            raise ReplError("REPL transport is closed")
        payload = (json.dumps(request, ensure_ascii=False) + "\n\n").encode("utf-8")
        deadline = time.monotonic() + timeout_s
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            code = self.proc.poll()
            self.close()
            raise ReplError(f"REPL is not running (exit code {code}): {self._stderr_tail() or exc}") from exc
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        next_mem_check = 0.0
        while True:
            answer = self._take_answer()
            if answer is not None:
                return answer
            now = time.monotonic()
            if now >= deadline:
                self.close()
                raise ReplTimeout(f"no answer from the REPL within {timeout_s:.3g} s")
            if self.memory_mb is not None and now >= next_mem_check:
                next_mem_check = now + 0.25
                rss = group_rss_bytes(self.pgid) / 2**20
                if rss > self.memory_mb:
                    self.close()
                    raise ReplMemoryExceeded(f"REPL used {rss:.0f} MiB, over its {self.memory_mb} MiB limit")
            ready, _, _ = select.select([fd], [], [], min(self.poll_s, max(0.0, deadline - now)))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.proc.wait(timeout=5)
                    self.close()
                    raise ReplError(f"REPL exited with code {code}: {self._stderr_tail()}")
                self._buffer += chunk

    def _take_answer(self) -> dict[str, Any] | None:
        """Pop one complete answer (JSON followed by a blank line) from the buffer, if there is one.

        Lines before the answer's opening ``{`` (e.g. lake's build log when ``lake exe repl``
        first builds the REPL) are kept in :attr:`noise`, not parsed.
        """
        start = 0
        while True:
            idx = self._buffer.find(b"\n\n", start)
            if idx < 0:
                return None
            lines = self._buffer[:idx].decode("utf-8", errors="replace").split("\n")
            first = next((k for k, line in enumerate(lines) if line.startswith("{")), None)
            if first is None:  # only noise so far
                self.noise.extend(line for line in lines if line.strip())
                self._buffer = self._buffer[idx + 2:]
                start = 0
                continue
            try:
                obj = json.loads("\n".join(lines[first:]))
            except json.JSONDecodeError:
                start = idx + 2  # a blank line cannot occur inside the JSON; wait for more
                continue
            self.noise.extend(line for line in lines[:first] if line.strip())
            self._buffer = self._buffer[idx + 2:]
            if not isinstance(obj, dict):
                raise ReplProtocolError(f"REPL answered a non-object: {lines[first][:200]}")
            return obj

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        for sig, wait_s in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
            signal_own_group(self.proc, self.pgid, sig)
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        signal_own_group(self.proc, self.pgid, signal.SIGKILL)  # leftovers, if the leader exited first
        with contextlib.suppress(OSError):
            self._stderr.close()
