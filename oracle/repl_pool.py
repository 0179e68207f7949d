"""One pool of warm prover sessions, shared by the Lean and the Coq checkers.

Why it exists: both proof oracles keep a few long-lived REPL processes warm (Lean's ``lake exe repl``,
Coq's ``coqtop -emacs``) and lend each to one check at a time. Counting the slots, waiting for a free
one, preferring a warm session to a new process, and ending what is left at :meth:`SessionPool.close`
are the same for both provers and written here once; what a session is, how one starts and when one
is worn out stay with each prover (:class:`oracle.lean.session.ReplPool`,
:class:`oracle.coq.warm.WarmCoqPool`).

Invariant: at most ``size`` sessions are live (lent or idle) at any time, and a lent slot always comes
back: the borrower gives back its session, or ``None`` when it ended the session itself or none
started, so a crash never leaks a slot. After :meth:`SessionPool.close` nothing more is lent, and a
session given back is ended rather than kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

S = TypeVar("S")


class PoolClosed(RuntimeError):
    """The pool was closed: it lends nothing more."""


class SessionPool(Generic[S]):
    """Up to ``size`` slots, each empty or holding a warm session; ``end`` ends a session for good.

    :meth:`acquire` lends the most recently used idle session, else an empty slot (``None``: the
    borrower starts a session there); :meth:`lease` does both and starts the session itself. Thread-safe.
    ``name`` is what the errors call a session ("REPL", "coqtop").
    """

    def __init__(self, size: int, end: Callable[[S], None], *, name: str = "session") -> None:
        if size < 1:
            raise ValueError(f"{name} pool size must be at least 1")
        self.size = size
        self.name = name
        self._end = end
        self._idle: list[S] = []
        self._live = 0  # slots lent out or holding an idle session
        self._cond = threading.Condition()
        self._closed = False
        self.started = 0  # sessions :meth:`lease` started (restarts included)

    @property
    def closed(self) -> bool:
        return self._closed

    def acquire(self, timeout_s: float | None = None) -> S | None:
        """An idle session, or ``None`` for an empty slot the caller now holds (it must give it back
        with :meth:`release`, its session or ``None``). Raises TimeoutError when no slot is free within
        ``timeout_s`` (None: wait as long as it takes), PoolClosed once the pool is closed."""
        with self._cond:
            end = None if timeout_s is None else time.monotonic() + timeout_s
            while not self._idle and self._live >= self.size and not self._closed:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no {self.name} session became free in time")
                self._cond.wait(left)
            if self._closed:
                raise PoolClosed(f"{self.name} pool is closed")
            if self._idle:
                return self._idle.pop()
            self._live += 1
            return None

    def lease(self, start: Callable[[], S], timeout_s: float | None = None) -> S:
        """An idle session, or one ``start`` starts in a free slot (the slot is given back if it raises)."""
        session = self.acquire(timeout_s)
        if session is not None:
            return session
        try:
            session = start()
        except BaseException:
            self.release(None)
            raise
        with self._cond:
            self.started += 1
        return session

    def release(self, session: S | None) -> None:
        """Give a slot back: with its session to keep warm, or ``None`` (the session was ended or never
        started). A session given back after :meth:`close` is ended; an error ending it propagates,
        after the slot is freed."""
        with self._cond:
            self._cond.notify()
            if session is not None and not self._closed:
                self._idle.append(session)
                return
            self._live -= 1
        if session is not None:
            self._end(session)

    def close(self) -> None:
        """Lend nothing more and end every idle session (those lent out are ended when given back)."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for session in idle:
            self._end(session)


__all__ = ["PoolClosed", "SessionPool"]
