"""Warm Lean REPL sessions and their pool.

A :class:`ReplSession` elaborates a theorem's context once (``{"cmd": context}`` -> env id; a longer
context from the same file reuses the longest cached prefix) and answers checks with
``{"cmd": declaration, "env": id}``. :class:`ReplPool` lends sessions from the shared
:class:`oracle.repl_pool.SessionPool`; invariant: a session is retired (its REPL closed, its slot
freed) after ``max_commands`` commands (REPLs grow) and after a timeout, a memory overrun or a
protocol error, so a check never runs in a REPL whose state is unknown.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oracle.lean.protocol import ReplResponse, parse_repl_response
from oracle.lean.transport import ReplError, ReplTimeout, ReplTransport
from oracle.repl_pool import PoolClosed, SessionPool


class ContextError(Exception):
    """The theorem's context (or its statement closed by sorry) does not elaborate."""


@dataclass
class _Header:
    env: int
    source: str


class ReplSession:
    """One warm REPL: cached context environments and reference signatures, a command count."""

    def __init__(self, transport: ReplTransport) -> None:
        self.transport = transport
        self.commands = 0
        self.headers: dict[str, _Header] = {}  # context text -> env id
        self.signatures: dict[tuple[int, str, str], str] = {}  # (header env, statement, name) -> #check

    def command(self, cmd: str, env: int | None, timeout_s: float) -> ReplResponse:
        request: dict[str, Any] = {"cmd": cmd}
        if env is not None:
            request["env"] = env
        self.commands += 1
        return parse_repl_response(self.transport.send(request, timeout_s))

    def header_env(self, context: str, source: str, timeout_s: float) -> int:
        """The env id after ``context``: cached, or built on the longest cached prefix of it."""
        cached = self.headers.get(context)
        if cached is not None:
            return cached.env
        base: tuple[str, _Header] | None = None
        for text, header in self.headers.items():
            if (header.source == source and text and context.startswith(text) and text.endswith("\n")
                    and (base is None or len(text) > len(base[0]))):
                base = (text, header)
        if base is not None:
            resp = self.command(context[len(base[0]):], base[1].env, timeout_s)
        else:
            resp = self.command(context, None, timeout_s)
        if resp.error is not None:
            raise ContextError(f"the REPL refused the context: {resp.error}")
        if resp.errors or resp.env is None:
            first = resp.errors[0] if resp.errors else None
            where = f" (context line {first.line})" if first and base is None else ""
            raise ContextError(f"the context does not elaborate{where}: {first.text if first else 'no env id'}")
        self.headers[context] = _Header(resp.env, source)
        return resp.env


def _close_quietly(session: ReplSession) -> None:
    """Close a retired REPL: one already gone (OSError) or refusing (ReplError) is dropped all the
    same, no reason to fail the caller; any other error is a bug in the transport and propagates."""
    with contextlib.suppress(ReplError, OSError):
        session.transport.close()


class ReplPool:
    """Up to ``size`` warm sessions (:class:`oracle.repl_pool.SessionPool`), each replaced after
    ``max_commands`` commands or on failure."""

    def __init__(self, factory: Callable[[], ReplTransport], *, size: int = 1, max_commands: int = 200) -> None:
        self.factory = factory
        self.max_commands = max_commands
        self.slots: SessionPool[ReplSession] = SessionPool(size, _close_quietly, name="REPL")
        self.discarded = 0  # sessions killed for a timeout, overrun, crash or the command cap
        self._count = threading.Lock()

    @property
    def size(self) -> int:
        return self.slots.size

    @property
    def started(self) -> int:
        """REPL processes started (restarts included)."""
        return self.slots.started

    def acquire(self, timeout_s: float | None = None) -> ReplSession:
        try:
            return self.slots.lease(lambda: ReplSession(self.factory()), timeout_s)
        except TimeoutError as exc:
            raise ReplTimeout(str(exc)) from exc
        except PoolClosed as exc:
            raise ReplError(str(exc)) from exc

    def release(self, session: ReplSession, *, broken: bool = False) -> None:
        if not (broken or session.commands >= self.max_commands or self.slots.closed):
            self.slots.release(session)  # kept warm (or closed by the pool, if it closed meanwhile)
            return
        try:
            _close_quietly(session)
        finally:
            with self._count:
                self.discarded += 1
            self.slots.release(None)

    def close(self) -> None:
        self.slots.close()
