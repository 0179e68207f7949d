"""Kernel-enforced limits for one trial: a control group per limited process tree.

Polling the resident memory of a process group (the fallback in :mod:`rrma.contain.spawn`) misses
every process that leaves the group (``setsid()``), and a process that sheds its environment
cannot be found by a token either. A cgroup has no such gap: the program is placed in it before
it runs, every process it forks stays in it whatever it does (leaving needs privilege the
sandbox drops), the kernel enforces ``memory`` and ``pids`` limits on the whole tree, counts
out-of-memory kills, and the harness kills the tree as a unit.

Two layouts are supported, chosen once per process by :func:`detect`:

* **cgroup v2** with delegation: the unified hierarchy at ``/sys/fs/cgroup`` where this process's
  own cgroup is writable and offers the ``memory`` and ``pids`` controllers to its children
  (``cgroup.subtree_control``). Limits: ``memory.max``, ``memory.swap.max``, ``pids.max``; kills
  counted in ``memory.events`` (``oom_kill``); the tree is killed through ``cgroup.kill``.
* **cgroup v1** when root: the ``memory`` and ``pids`` hierarchies, a child of this process's
  own cgroup in each. Limits: ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``
  where swap is accounted), ``pids.max``; kills counted in ``memory.oom_control``; the tree is
  killed by signalling every member until none is left (``pids.max`` bounds a fork bomb).

``RRMA_CGROUPS`` chooses: ``auto`` (default: use cgroups when one of the layouts works here),
``off`` (poll), or ``require`` (a limited run that cannot get a cgroup fails as ``crash``).
Where neither layout works, :func:`unavailable_reason` says why and the run records that limits
were polled.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ENV_MODE = "RRMA_CGROUPS"
MODES = ("auto", "off", "require")
ROOT = Path("/sys/fs/cgroup")
PREFIX = "rrma-"


class CgroupError(OSError):
    """A trial's cgroup could not be created, limited or removed."""


def mode() -> str:
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_MODE}={value!r}: expected one of {', '.join(MODES)}")
    return value


def _own_paths() -> dict[str, str]:
    """Controller (or '' for the unified hierarchy) -> this process's cgroup path, from /proc."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


@dataclass(frozen=True)
class Layout:
    """Where trial cgroups are made: ``version`` 1 or 2 and the parent directory per controller."""

    version: int
    parents: tuple[tuple[str, Path], ...]  # (controller, parent dir); v2 has one entry ("unified")

    def describe(self) -> str:
        return f"cgroup v{self.version} (memory and pids limits on the whole trial)"


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _v2_layout(own: dict[str, str]) -> tuple[Layout | None, str]:
    if not (ROOT / "cgroup.controllers").exists() or "" not in own:
        return None, "no cgroup v2 hierarchy at /sys/fs/cgroup"
    parent = ROOT / own[""].lstrip("/")
    if not _writable_dir(parent):
        return None, f"cgroup v2: {parent} is not writable (no delegation)"
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        available = (parent / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return None, f"cgroup v2: {exc}"
    missing = [c for c in ("memory", "pids") if c not in enabled]
    if missing and all(c in available for c in missing):
        # a cgroup with processes of its own cannot enable controllers for children
        # (the "no internal processes" rule); try, and report what the kernel says
        try:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
            missing = []
        except OSError as exc:
            return None, f"cgroup v2: cannot enable {', '.join(missing)} for children of {parent} ({exc.strerror})"
    if missing:
        return None, f"cgroup v2: controllers {', '.join(missing)} not delegated to {parent}"
    return Layout(2, (("unified", parent),)), ""


def _v1_layout(own: dict[str, str]) -> tuple[Layout | None, str]:
    parents = []
    for controller in ("memory", "pids"):
        mount = ROOT / controller
        if controller not in own or not (mount / "cgroup.procs").exists():
            return None, f"no cgroup v1 {controller} hierarchy at {mount}"
        parent = mount / own[controller].lstrip("/")
        if not _writable_dir(parent):
            return None, f"cgroup v1: {parent} is not writable (needs root)"
        parents.append((controller, parent))
    return Layout(1, tuple(parents)), ""


@functools.cache
def detect() -> tuple[Layout | None, str]:
    """The layout usable here, or (None, why not). Measured once per process."""
    import sys

    if sys.platform != "linux":
        return None, f"cgroups need Linux (this is {sys.platform})"
    own = _own_paths()
    v2, why2 = _v2_layout(own)
    if v2 is not None and _works(v2):
        return v2, ""
    v1, why1 = _v1_layout(own)
    if v1 is not None and _works(v1):
        return v1, ""
    return None, "; ".join(w for w in (why2, why1) if w) or "no usable cgroup hierarchy"


def _works(layout: Layout) -> bool:
    try:
        group = TrialCgroup.create(layout, memory_bytes=64 * 2**20, max_pids=16, label="probe")
    except CgroupError:
        return False
    group.remove()
    return True


def unavailable_reason() -> str | None:
    """None when trial cgroups work here; otherwise why not (``RRMA_CGROUPS=off`` or the probe)."""
    if mode() == "off":
        return f"turned off ({ENV_MODE}=off)"
    layout, why = detect()
    return None if layout is not None else why


def describe() -> str:
    """One line for run.json and the summary: which limits a trial runs under here."""
    reason = unavailable_reason()
    if reason is None:
        layout, _ = detect()
        assert layout is not None
        return layout.describe()
    return f"polling (resident memory of the process group, every 0.1 s): {reason}"


def scope_tag(workdir: Path | str) -> str:
    """A short stable tag for a trial's working directory: its cgroups are named after it."""
    return hashlib.sha256(str(Path(workdir).resolve()).encode()).hexdigest()[:16]


@dataclass
class TrialCgroup:
    """One trial's cgroup(s): one directory per hierarchy, the same name in each."""

    layout: Layout
    dirs: tuple[Path, ...]

    @classmethod
    def create(cls, layout: Layout, *, memory_bytes: int, max_pids: int, label: str) -> TrialCgroup:
        name = f"{PREFIX}{label}-{secrets.token_hex(4)}"
        made: list[Path] = []
        try:
            for _, parent in layout.parents:
                path = parent / name
                path.mkdir()
                made.append(path)
            group = cls(layout, tuple(made))
            group._limit(memory_bytes, max_pids)
            return group
        except OSError as exc:
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise CgroupError(exc.errno, f"cannot set up trial cgroup {name}: {exc.strerror or exc}") from exc

    def _file(self, controller: str, name: str) -> Path:
        if self.layout.version == 2:
            return self.dirs[0] / name
        index = [c for c, _ in self.layout.parents].index(controller)
        return self.dirs[index] / name

    def _limit(self, memory_bytes: int, max_pids: int) -> None:
        if self.layout.version == 2:
            (self.dirs[0] / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # absent without swap accounting
                (self.dirs[0] / "memory.swap.max").write_text("0")
            (self.dirs[0] / "pids.max").write_text(str(max_pids))
            return
        mem = self._file("memory", "memory.limit_in_bytes")
        mem.write_text(str(memory_bytes))
        memsw = self._file("memory", "memory.memsw.limit_in_bytes")
        if memsw.exists():  # memory + swap: a trial cannot swap its way past the limit
            with contextlib.suppress(OSError):
                memsw.write_text(str(memory_bytes))
        self._file("pids", "pids.max").write_text(str(max_pids))

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid to, to join this cgroup."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def members(self) -> list[int]:
        pids: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return sorted(pids)

    def oom_kills(self) -> int:
        """How many processes of the trial the kernel killed for memory so far."""
        path = self._file("memory", "memory.events" if self.layout.version == 2 else "memory.oom_control")
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def memory_bytes(self) -> int:
        """Memory charged to the trial now (anonymous memory, page cache and tmpfs it wrote)."""
        name = "memory.current" if self.layout.version == 2 else "memory.usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int(self._file("memory", name).read_text())
        return 0

    def peak_bytes(self) -> int:
        name = "memory.peak" if self.layout.version == 2 else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int(self._file("memory", name).read_text())
        return self.memory_bytes()

    def kill(self, timeout_s: float = 5.0) -> int:
        """SIGKILL every member until none is left (or ``timeout_s``); returns how many were seen."""
        seen: set[int] = set()
        if self.layout.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + timeout_s
        pause = 0.0005  # a process that has just exited leaves its cgroup within a millisecond or so: look
        while True:      # again soon, then back off (every trial ends here, so this is on its critical path)
            pids = self.members()
            if not pids or time.monotonic() > deadline:
                break
            seen.update(pids)
            for pid in pids:  # members are ours: a pid stays a member until it is reaped
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        return len(seen)

    def remove(self) -> None:
        """Kill what is left and remove the directories (a cgroup with members cannot go)."""
        self.kill()
        for d in self.dirs:
            pause, waited = 0.0005, 0.0
            while waited < 1.0:  # EBUSY while the kernel still counts an exiting member
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(pause)
                    waited += pause
                    pause = min(pause * 2, 0.02)


def _scope_dirs(tag: str) -> Iterator[Path]:
    layout, _ = detect()
    if layout is None:
        return
    for _, parent in layout.parents:
        with contextlib.suppress(OSError):
            yield from parent.glob(f"{PREFIX}{tag}-*")


def scope_members(workdir: Path | str) -> list[int]:
    """Live processes in any cgroup made for ``workdir`` (this harness's or an earlier one's)."""
    pids: set[int] = set()
    for d in _scope_dirs(scope_tag(workdir)):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
    return sorted(pids)


def remove_empty_scopes(workdir: Path | str) -> int:
    """Remove the cgroups an earlier harness left for ``workdir`` once they are empty; how many went."""
    removed = 0
    for d in _scope_dirs(scope_tag(workdir)):
        with contextlib.suppress(OSError):
            d.rmdir()
            removed += 1
    return removed


SWEEP_MIN_AGE_S = 60.0  # an empty trial cgroup this old belongs to no live harness (one lives empty for ms)


def sweep_empty(min_age_s: float = SWEEP_MIN_AGE_S) -> int:
    """Remove every empty trial cgroup (``rrma-*``) older than ``min_age_s`` seconds; how many went.

    A harness killed with SIGKILL cannot remove the cgroups of its running trials; the kernel empties
    them when the trials die (with their harness), and they stay behind as empty directories. A live
    harness's cgroup is empty only between its creation and the trial joining it, or between the
    trial's end and its removal (milliseconds), so an empty one a minute old is a leftover. The
    kernel refuses to remove a cgroup that has members (EBUSY), whatever this function believes.
    """
    layout, _ = detect()
    if layout is None or mode() == "off":
        return 0
    removed = 0
    now = time.time()
    for _, parent in layout.parents:
        with contextlib.suppress(OSError):
            for d in parent.glob(f"{PREFIX}*"):
                try:
                    if now - d.stat().st_mtime < min_age_s or (d / "cgroup.procs").read_text().strip():
                        continue
                    d.rmdir()
                    removed += 1
                except OSError:
                    continue
    return removed
