"""Contained processes start with a fresh, empty session keyring.

Why: the kernel keyring is not a namespace. A child inherits its parent's session keyring, and a
process that *possesses* a keyring (holds it as its session keyring) may read, update and add to
the keys in it: a trial sandboxed in every other way read a key from the harness's session
keyring, overwrote it and added its own (issue 20). The seccomp filter (:mod:`rrma.contain.seccomp`)
refuses every key system call inside the sandbox; this module also takes the keyring away, so a
process started without the sandbox (``RRMA_FS_GUARD=off``) holds nothing either.

How: session keyrings belong to a thread's credentials. :class:`ParentThread` starts the
process from a thread of its own that first joins a new anonymous session keyring
(``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``); the child inherits that thread's keyring, and
the harness's own threads keep theirs. The thread stays alive until the caller is done with the
child: a parent-death signal (bwrap's ``--die-with-parent``, ``setpriv --pdeathsig``) fires when
the *thread* that started the child ends, not the process, so a thread that returned at once
would kill every child it started. Where the kernel refuses key calls (a container whose own
seccomp profile blocks ``keyctl``), there is nothing to inherit access to either, and the start
goes ahead (:func:`join_fresh_in_thread` says which case holds).
"""

from __future__ import annotations

import ctypes
import functools
import platform
import subprocess
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280, "riscv64": 219}


@functools.cache
def _syscall() -> Callable[..., int] | None:
    number = _SYS_KEYCTL.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long

    def keyctl(*args: object) -> int:
        return int(fn(number, *args))

    return keyctl


def join_fresh() -> int:
    """Give the calling thread a new anonymous session keyring; its id, or -errno where refused."""
    keyctl = _syscall()
    if keyctl is None:
        return -38  # ENOSYS: no known keyctl number for this machine
    result = keyctl(KEYCTL_JOIN_SESSION_KEYRING, None)
    return result if result >= 0 else -ctypes.get_errno()


class ParentThread(Generic[T]):
    """Starts a process in a fresh session keyring and stays its parent until :meth:`release`.

    ``start`` (a ``subprocess.Popen`` call) runs in this thread after it joined a new anonymous
    session keyring; :meth:`begin` returns what it returned (or raises what it raised). Call
    :meth:`release` once the child has ended (or when giving up on it): only then does the thread
    end, and with it the child's parent-death signal.
    """

    def __init__(self, start: Callable[[], T], name: str = "rrma-spawn") -> None:
        self._start = start
        self._started = threading.Event()
        self._done = threading.Event()
        self._box: dict[str, object] = {}
        self._outlived: subprocess.Popen[bytes] | None = None  # a long-lived child this thread waits for
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        join_fresh()
        try:
            self._box["value"] = self._start()
        except BaseException as exc:  # re-raised in the caller's thread
            self._box["error"] = exc
            self._started.set()
            return
        self._started.set()
        self._done.wait()
        if self._outlived is not None:
            self._outlived.wait()  # thread-safe in Popen: the owner's poll() and wait() see the exit as well

    def begin(self) -> T:
        self._thread.start()
        self._started.wait()
        if "error" in self._box:
            raise self._box["error"]  # type: ignore[misc]
        return self._box["value"]  # type: ignore[return-value]

    def release(self) -> None:
        self._done.set()

    def outlive(self, proc: subprocess.Popen[bytes]) -> None:
        """Stay the parent of a long-lived ``proc`` until it ends (no :meth:`release` needed): this
        thread waits for it in the background, so it is reaped as soon as it exits."""
        self._outlived = proc
        self._done.set()


def join_fresh_in_thread() -> int:
    """:func:`join_fresh` in a throwaway thread (the caller's keyring is untouched): whether it works here."""
    box: dict[str, int] = {}
    thread = threading.Thread(target=lambda: box.update(result=join_fresh()), daemon=True)
    thread.start()
    thread.join()
    return box["result"]
