"""A running program's output, followed live: the file :func:`rrma.contain.spawn.spawn` appends to.

While a trial's program runs, spawn captures its output in memory (head and tail) and the log blob
is written only when the trial ends. With ``live_output`` spawn also appends every chunk it reads
to one file, as it arrives, so a view can ``tail -f`` it (the trial view of ``rrma-tui``). The
harness alone writes that file; the rules keep it so:

* **Where**: a directory only the harness writes and no trial sees (the executor puts it at
  ``RUN/trials/<id>/live.log``, :func:`rrma.log.store.live_output_path`: beside the trial's
  workspace ``work/``, inside the run directory the sandbox hides).
* **How it is opened**: ``O_CREAT|O_EXCL|O_NOFOLLOW`` in a directory opened without following a
  link (:func:`rrma.contain.files.open_root`). A link planted at the path (dangling or not), an
  existing file or a directory there is refused with a reason (:attr:`LiveWriter.refused`), nothing
  is written through it, and the program runs all the same (its output is still captured).
* **How much**: at most ``cap`` bytes (spawn passes the budget's ``max_output_bytes``, past which
  the flood rule kills the program anyway); a write error (a full disk) stops the writing, never
  the program.
* **Is it live**: the writer holds an exclusive ``flock`` on the file while the program runs and
  drops it when spawn returns; the kernel drops it when the harness dies (even by ``kill -9``).
  :func:`read_live_output` reports ``live`` only while that lock is held, so a file left by a
  finished program or a dead harness never looks live.

The file is not the record: the trial's log blob is. The executor removes the file when the
trial's evaluation ends (and a leftover of a killed harness before the trial runs again).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rrma.contain.files import LinkRefused, open_root

LOCK_TRIES = 20  # a reader's probe holds the lock for microseconds; a writer that never gets it writes unlocked


class LiveWriter:
    """Appends a program's output to a fresh file (see the module docstring). Thread-safe: the
    reader thread writes, spawn closes."""

    def __init__(self, path: Path | str, cap: int) -> None:
        self.path = Path(path)
        self.cap = cap
        self.written = 0
        self.refused: str | None = None  # why nothing is written (the path was refused), or None
        self.stopped: str | None = None  # why the writing stopped early (the cap, a write error)
        self._lock = threading.Lock()
        self._fd: int | None = None
        try:
            self._fd = self._create()
        except OSError as exc:
            self.refused = f"live output not written: {self._why(exc)}"

    def _create(self) -> int:
        parent = open_root(self.path.parent)  # the directory itself must not be a link
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_APPEND
            fd = os.open(self.path.name, flags, 0o644, dir_fd=parent)
        finally:
            os.close(parent)
        for attempt in range(LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:  # a reader probing at this instant: try again
                time.sleep(0.001 * (attempt + 1))
        return fd

    def _why(self, exc: OSError) -> str:
        path = self.path
        if isinstance(exc, LinkRefused):  # the directory it would be in is a link
            return str(exc)
        if os.path.islink(path):
            return f"{path} is a symbolic link (to {os.readlink(path)}); not followed"
        if exc.errno == errno.EEXIST:
            kind = "a directory" if path.is_dir() else "a file"
            return f"{path} exists already ({kind}); only a fresh file is written"
        return f"{path}: {exc.strerror or exc}"

    def write(self, chunk: bytes) -> None:
        """Append ``chunk`` (up to the cap) at once: no buffering, a reader sees it on its next poll."""
        with self._lock:
            if self._fd is None or not chunk:
                return
            room = self.cap - self.written
            data = memoryview(chunk)[:max(room, 0)]
            try:
                while data:
                    n = os.write(self._fd, data)
                    self.written += n
                    data = data[n:]
            except OSError as exc:
                self._stop(f"live output stopped after {self.written} bytes: {exc.strerror or exc}")
                return
            if len(chunk) > room:
                self._stop(f"live output stopped at its cap of {self.cap} bytes")

    def _stop(self, reason: str) -> None:
        self.stopped = reason
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # drops the lock: the file no longer reads as live
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close()


@dataclass
class LiveOutput:
    """What a reader found at a live-output path."""

    size: int  # bytes in the file
    text: str  # its last ``tail_bytes`` bytes, decoded (replacement on errors), starting at a line
    live: bool  # a running program's writer holds it now


def read_live_output(path: Path | str, tail_bytes: int = 64 * 1024) -> LiveOutput | None:
    """The end of the live-output file at ``path``; None when there is none (or it is not a plain
    file: a link is never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        try:  # the writer holds LOCK_EX while the program runs: a shared lock is refused then
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            live = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            live = True
        size = st.st_size
        start = max(0, size - tail_bytes)
        data = os.pread(fd, size - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start > 0:  # the first line is cut: start at the next whole one
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else data
    return LiveOutput(size=size, text=data.decode("utf-8", errors="replace"), live=live)
