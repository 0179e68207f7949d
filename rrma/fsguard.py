"""File-system guard for untrusted trial programs: a private mount namespace per process.

An agent's program (``train.py``, a GSM8K recipe, a command task's script) runs as the same user
as the harness, so without a guard it could rewrite the oracle's scoring code, the oracle's copy
of the metric, the run log or the outcome cache, or read held-out data, and fool the judge
without improving anything. :class:`FsGuard` describes what the program may not touch:

- ``read_only``: bind-mounted read-only (the harness's code, the Python installation, the run
  directory with its log, cache and the oracles' private state, the other trials);
- ``writable``: re-opened read-write inside those (the trial's own workspace);
- ``hidden``: files replaced by an empty file, directories by an empty read-only tmpfs (held-out
  data the program must not read).

It works through ``unshare --mount --pid --fork --mount-proc`` (util-linux) and ``mount`` in new
mount and PID namespaces, as root or, for other users, inside a user namespace
(``--map-root-user``). The namespaces die with the process; nothing changes outside them. The
process group, limits and labels of :func:`rrma.sandbox.run_limited` are unchanged: the program
(pid 1 inside) stays in ``unshare``'s process group, and ``unshare`` exits with its status or
re-raises the signal that killed it.

Where mount namespaces are not available (no util-linux, a container without CAP_SYS_ADMIN, user
namespaces disabled) the guard is off and :func:`unavailable_reason` says why; the environment
variable ``RRMA_FS_GUARD`` chooses: ``auto`` (default: guard when possible), ``off``, or
``require`` (a guarded trial that cannot be guarded fails as ``crash`` with that reason).
The guard limits the file system only: it is not a network or a privilege boundary.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_MODE = "RRMA_FS_GUARD"
MODES = ("auto", "off", "require")


def mode() -> str:
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_MODE}={value!r}: expected one of {', '.join(MODES)}")
    return value


def _existing(paths: Iterable[Path | str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        try:
            resolved = Path(p).resolve()
        except OSError:
            continue
        if resolved.exists() and resolved not in out:
            out.append(resolved)
    return out


def _outermost(paths: list[Path]) -> list[Path]:
    """Drop paths inside another path of the list (one read-only bind covers them)."""
    keep: list[Path] = []
    for p in sorted(paths, key=lambda q: len(q.parts)):
        if not any(p == k or k in p.parents for k in keep):
            keep.append(p)
    return keep


@functools.cache
def harness_paths() -> tuple[Path, ...]:
    """Where the harness's code and the interpreter live: what no trial may rewrite."""
    import rrma

    roots: list[Path | str] = [Path(rrma.__file__).resolve().parent.parent, sys.prefix, sys.base_prefix]
    paths = sysconfig.get_paths()
    roots += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    roots.append(Path(sys.executable).resolve().parent)
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        roots.append(user_site)
    # never the whole file system or a home directory: those would leave the trial nothing to write
    home = Path.home().resolve()
    return tuple(p for p in _outermost(_existing(roots)) if p != Path("/") and p != home)


def harness_python() -> list[str]:
    """The interpreter command for the oracle's own child processes (scoring, evaluation).

    A trial may create a user site-packages directory that did not exist (it lives in the home
    directory, which the guard leaves writable) and drop a ``.pth`` file there that would run in
    every later Python process; the oracle's children then start with ``-s`` (no user site).
    Where a user site exists the harness may depend on it, and the guard keeps it read-only.
    """
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and Path(user_site).is_dir():
        return [sys.executable]
    return [sys.executable, "-s"]


@dataclass(frozen=True)
class FsGuard:
    """What an untrusted process may not write (``read_only``) or read (``hidden``)."""

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    required: bool = False  # the run asked for RRMA_FS_GUARD=require: no guard here is a crash

    @classmethod
    def for_trial(cls, trial_dir: Path, protect: Sequence[Path] = (), *, required: bool = False) -> FsGuard:
        """The default guard of a trial: the harness and ``protect`` read-only, its workspace not."""
        return cls(read_only=(*harness_paths(), *(Path(p) for p in protect)), writable=(Path(trial_dir),),
                   required=required)

    def hiding(self, *paths: Path | str) -> FsGuard:
        return dataclasses.replace(self, hidden=(*self.hidden, *(Path(p) for p in paths)))

    def protecting(self, *paths: Path | str) -> FsGuard:
        return dataclasses.replace(self, read_only=(*self.read_only, *(Path(p) for p in paths)))

    def script(self) -> str:
        """The shell prelude run inside the new mount namespace, ending in ``exec "$@"``."""
        lines = ["set -e"]
        writable = _existing(self.writable)
        marks = [(p, "ro") for p in _existing(self.read_only) if p not in writable] + [(p, "rw") for p in writable]
        applied: list[tuple[Path, str]] = []
        # shallow to deep, so a read-only path inside a writable one inside a read-only one holds;
        # a mark that matches what its nearest marked ancestor already gives needs no mount
        for path, kind in sorted(marks, key=lambda m: len(m[0].parts)):
            above = [(q, k) for q, k in applied if q in path.parents]
            current = max(above, key=lambda a: len(a[0].parts))[1] if above else "rw"
            if kind == current:
                continue
            q = shlex.quote(str(path))
            lines.append(f"mount --rbind {q} {q}")
            lines.append(f"mount -o remount,bind,{kind} {q}")
            applied.append((path, kind))
        for p in _existing(self.hidden):
            q = shlex.quote(str(p))
            if p.is_dir():
                lines.append(f"mount -t tmpfs -o size=4k,mode=0555 rrma-hidden {q}")
            else:
                lines.append(f"mount --bind /dev/null {q}")
        # the working directory still points into the mounts as they were before: re-enter it by
        # path, or relative paths (``open("../events.jsonl", "a")``) would bypass the read-only binds
        lines.append('cd -- "$(pwd -P)"')
        lines.append('exec "$@"')
        return "\n".join(lines)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside a private mount namespace with this guard applied."""
        return [*_unshare_prefix(), "/bin/sh", "-c", self.script(), "rrma-fs-guard", *argv]


def _unshare_prefix() -> list[str]:
    # a PID namespace with its own /proc too: through /proc/<harness pid>/root or /cwd a program
    # could reach the harness's mounts, where nothing is read-only. The program runs as pid 1 of
    # the namespace: a SIGTERM from the harness is ignored unless it installs a handler (SIGKILL
    # follows after the grace period), and when it exits every process it left is killed, even
    # one that left the process group with setsid(). --kill-child: when the group kill reaches
    # unshare, its child (that pid 1) is killed too, and with it the whole namespace.
    prefix = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        prefix.append("--map-root-user")
    return [*prefix, "--"]


def unavailable_reason() -> str | None:
    """None when the guard works here; otherwise why not (``RRMA_FS_GUARD=off``, or the probe)."""
    if mode() == "off":
        return f"turned off ({ENV_MODE}=off)"
    return _probe()


@functools.cache
def _probe() -> str | None:
    """Why mount namespaces cannot guard a process here, or None (measured once per process).

    The probe runs a real guarded process and checks that a read-only path refuses a write,
    a writable one inside it accepts one, and a hidden file reads empty.
    """
    if sys.platform != "linux":
        return f"needs Linux mount namespaces (this is {sys.platform})"
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return f"`{tool}` (util-linux) is not on PATH"
    with tempfile.TemporaryDirectory(prefix="rrma-fsguard-probe-") as tmp:
        root = Path(tmp)
        (root / "ro" / "rw").mkdir(parents=True)
        (root / "ro" / "code.py").write_text("kept\n")
        (root / "secret.txt").write_text("secret\n")
        guard = FsGuard(read_only=(root / "ro",), writable=(root / "ro" / "rw",), hidden=(root / "secret.txt",))
        probe = ("echo changed > ro/code.py 2>/dev/null; echo ok > ro/rw/out.txt; cat secret.txt")
        try:
            proc = subprocess.run(guard.wrap(["/bin/sh", "-c", probe]), cwd=root, capture_output=True,
                                  text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`unshare --mount` could not run: {exc}"
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            return f"`unshare --mount` failed here (a container without CAP_SYS_ADMIN or user namespaces?): {err}"
        out = (root / "ro" / "rw" / "out.txt")
        if (root / "ro" / "code.py").read_text() != "kept\n" or not out.exists() or "secret" in proc.stdout:
            return "the probe found the guard ineffective (read-only, writable or hidden path not enforced)"
    return None


def describe() -> str:
    """One line for run.json and the docs: is the guard on here, and if not, why."""
    reason = unavailable_reason()
    return "on (private mount and PID namespaces per trial program)" if reason is None else f"off: {reason}"


def recorded(run_dir: Path) -> str | None:
    """What ``run.json`` of ``run_dir`` says about the guard (``versions.fs_guard``), if anything."""
    import json

    try:
        value = json.loads((Path(run_dir) / "run.json").read_text()).get("versions", {}).get("fs_guard")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None
