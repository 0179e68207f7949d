"""One driver per run: the lock the process that runs the loop holds on its run directory.

Invariant: at most one live process drives a run (appends its trials, decides its promotions). The
driver holds an exclusive ``flock`` on ``RUN/.driver.lock`` for its whole life and names itself in
``RUN/driver.json``; a second driver fails at once with :class:`RunLocked`. The kernel drops the lock
when the holder dies, even by SIGKILL, so a stale ``driver.json`` never blocks anyone: the lock is
the truth, the file only says who. (Appends from other processes, a person's review or order, take
the store's own append lock, rrma/log/store.py, not this one.)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from rrma.log.layout import DRIVER_JSON, DRIVER_LOCK
from rrma.log.store import write_atomic


class RunLocked(Exception):
    """Another live process is driving this run (it holds the run's driver lock)."""


class DriverLock:
    """The run's driver lock: held by the one process that runs the loop on this run directory.

    An exclusive, non-blocking ``flock`` on ``RUN/.driver.lock`` (the descriptor is close-on-exec,
    so trial programs do not inherit it) plus ``RUN/driver.json`` = {pid, host, started} naming
    the holder.
    """

    def __init__(self, run_dir: Path | str) -> None:
        self.dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> DriverLock:
        fd = os.open(self.dir / DRIVER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            for attempt in range(5):  # rrma.log.control.live_driver probes with a shared lock for microseconds
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == 4:
                        raise
                    time.sleep(0.02)
        except BlockingIOError:
            os.close(fd)
            raise RunLocked(f"{self.dir}: another process is driving this run ({self.holder()}); "
                            "wait for it to finish or stop it first") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")}
        write_atomic(self.dir / DRIVER_JSON, json.dumps(info) + "\n")
        return self

    def holder(self) -> str:
        """Who holds the lock, as driver.json says ("pid N on HOST since T")."""
        try:
            info = json.loads((self.dir / DRIVER_JSON).read_text())
            return f"pid {info['pid']} on {info['host']} since {info['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown: driver.json is missing or unreadable"

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            (self.dir / DRIVER_JSON).unlink()  # while still locked: no new holder has written it yet
        with contextlib.suppress(OSError):
            os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> DriverLock:
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc: object) -> None:
        self.release()
