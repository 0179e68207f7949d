"""Capped workspaces that killed runs left mounted, detached when the next run starts beside them.

Why it exists: a trial's workspace is a file system of its own (rrma/contain/disk.py). A harness killed
with ``kill -9`` cannot unmount it, and only a ``resume`` of that run detached it: a run killed and never
resumed kept its loop device and file system mounted for as long as the machine stayed up. Now, each time
a run starts or resumes, the other runs of the same runs directory are looked at, and the workspace file
systems of those no process drives are detached.

Invariants: only a run whose driver lock (rrma/log/driver_lock.py) nobody holds is touched, and its lock is
held (exclusively, never written into) while its mounts go, so a run being resumed at that moment is left to
its own resume; only file systems this harness made are detached (:func:`rrma.contain.disk.leftovers_under`
checks each one's loop image); a mount this process still uses is never touched; a failure to detach one is
a warning, never a failed start.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from rrma.contain import disk
from rrma.log.layout import DRIVER_LOCK

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _idle(run_dir: Path) -> Iterator[bool]:
    """Whether no process drives ``run_dir``, holding its driver lock exclusively for the block when so."""
    try:
        fd = os.open(run_dir / DRIVER_LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        yield True  # never driven by an rrma that keeps the lock: nothing can be resuming it
        return
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # drops the lock


def sweep(runs_dir: Path, *, skip: Path | None = None) -> list[Path]:
    """Detach the workspace file systems left mounted under ``runs_dir`` by runs no process drives (not
    ``skip``, the caller's own run); returns the mount points detached."""
    if not Path(runs_dir).is_dir():
        return []
    try:
        points = disk.leftovers_under(Path(runs_dir))
    except OSError:
        return []
    by_run: dict[Path, list[Path]] = {}
    for point in points:  # RUN/trials/TRIAL/work
        if point.name == "work" and point.parent.parent.name == "trials" and disk.capped(point) is None:
            by_run.setdefault(point.parent.parent.parent, []).append(point)
    own = skip.resolve() if skip is not None else None
    done: list[Path] = []
    for run_dir, mounted in sorted(by_run.items()):
        if run_dir == own:
            continue
        with _idle(run_dir) as idle:
            if not idle:
                continue
            for point in mounted:
                try:
                    if disk.unmount_leftover(point):
                        done.append(point)
                except (OSError, disk.DiskCapError) as exc:
                    log.warning("could not detach the workspace a killed run left mounted at %s: %s", point, exc)
    if done:
        log.warning("detached %d workspace file system(s) that killed runs left mounted: %s", len(done),
                    ", ".join(sorted({p.parent.parent.parent.name for p in done})))
    return done
