"""The trial sandbox: bubblewrap, with no privilege over its own mounts.

An agent's program (``train.py``, a GSM8K recipe, a command task's script) is untrusted: left
alone it could rewrite the oracle's scoring code, the oracle's copy of the metric, the run log or
the outcome cache, or read held-out data, and fool the judge without improving anything. The
harness often runs as root, so a private mount namespace alone is no defence: a root program
keeps ``CAP_SYS_ADMIN`` there and can ``umount`` or ``mount -o remount,rw`` whatever was made
read-only. Every agent-written program therefore runs under bubblewrap (``bwrap``, the tool
Flatpak uses) with:

- **no capabilities** (``--cap-drop ALL``) in a new **user namespace** that may not create
  another (``--disable-userns``): it cannot mount, unmount or remount anything, and the mounts it
  inherits are locked;
- new **PID, IPC and UTS namespaces** with their own ``/proc``: the harness and other trials are
  invisible (no ``/proc/<harness>/root``, no ``kill`` of the harness), and when the program's
  tree ends, everything it left behind ends with it;
- ``--die-with-parent``: if the harness dies (even ``kill -9``), the sandbox is killed;
- a file system that **binds only what the program needs**: the whole host read-only, a private
  empty ``/tmp``, a minimal ``/dev``; the trial's workspace (``writable``) read-write; the
  harness's code and interpreter (``read_only``) visible read-only even where they live under a
  hidden tree; the run directory, the other trials and held-out data (``hidden``) replaced by
  empty read-only directories or empty files;
- **no network** but a loopback of its own (``--unshare-net``) unless ``RRMA_TRIAL_NETWORK=on``: a
  program that shares the host's network can reach this host's services, and some of those run
  code for whoever asks (a Ray cluster's job API runs a shell command outside any sandbox, with
  the token in ``~/.ray`` or with none; the attack is a test in ``tests/test_containment_network.py``);
- a private, empty ``/run``: the Unix sockets of the host's services (Docker, D-Bus, agents) live
  there, and connecting to a socket needs neither the network nor write access to its mount.

What it does not contain: the network when ``RRMA_TRIAL_NETWORK=on``; the host's
files are readable (read-only) except the user's keys and tokens (:data:`SECRET_PATHS`), and the
program runs as uid 0 mapped to the harness's user, so it reads what that user can read; disk
space and CPU time are bounded only by the wall clock. Memory and process
counts are limited by :mod:`rrma.contain.cgroups`.

``RRMA_FS_GUARD`` chooses: ``auto`` (default: sandbox when bubblewrap works here), ``off``, or
``require`` (a guarded trial that cannot be sandboxed fails as ``crash`` with the reason). Where it
cannot run (no ``bwrap``, user namespaces disabled) :func:`unavailable_reason` says why, and
``run.json`` and the run summary say the guard was off.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
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
ENV_NETWORK = "RRMA_TRIAL_NETWORK"
BWRAP = "bwrap"
SCRATCH = Path("/tmp")  # private, empty and writable inside the sandbox
# where a host's services keep their Unix sockets (Docker's API, D-Bus, PostgreSQL, systemd, the
# per-user runtime dirs with ssh-agent and gpg-agent; /var/run links here): private and empty too,
# since connecting to a socket needs no write access to the mount it lives on
SERVICE_SOCKETS = Path("/run")
RESOLV_CONF = Path("/etc/resolv.conf")  # with the network on, its target is shown even under /run
# device nodes a GPU program needs; bound only where they exist (everything else in /dev is new)
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")


def mode() -> str:
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_MODE}={value!r}: expected one of {', '.join(MODES)}")
    return value


def network() -> bool:
    """Whether trial programs share the host's network (``RRMA_TRIAL_NETWORK``, default off: a
    network namespace with only its own loopback)."""
    value = os.environ.get(ENV_NETWORK, "off").strip().lower() or "off"
    if value not in ("on", "off"):
        raise ValueError(f"{ENV_NETWORK}={value!r}: expected on or off")
    return value == "on"


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
    """Where the harness's code and the interpreter live: visible to trials, never writable."""
    import rrma

    roots: list[Path | str] = [Path(rrma.__file__).resolve().parent.parent, sys.prefix, sys.base_prefix]
    paths = sysconfig.get_paths()
    roots += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    roots.append(Path(sys.executable).resolve().parent)
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        roots.append(user_site)
    home = Path.home().resolve()
    return tuple(p for p in _outermost(_existing(roots)) if p != Path("/") and p != home)


# where keys and tokens live in a home directory: hidden from trials (the rest of home stays readable)
SECRET_PATHS = (".ssh", ".gnupg", ".aws", ".azure", ".netrc", ".git-credentials", ".docker/config.json",
                ".config/gcloud", ".config/gh", ".config/rrma", ".cache/huggingface/token", ".kube",
                ".ray")  # ~/.ray/auth_token: Ray's cluster token (its job API runs any command)
ENV_RAY_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"  # where Ray looks for that token instead, if set
ENV_SIGNING_KEY = "RRMA_SIGNING_KEY"  # a reviewer's key (rrma.signing) may live anywhere


def secret_paths() -> tuple[Path, ...]:
    """Key and token files of the harness's user that exist here: trials never see them.

    A reviewer signs reviews with an SSH key; a trial that could read it could sign approvals.
    """
    home = Path.home()
    found = [home / rel for rel in SECRET_PATHS]
    for var in (ENV_SIGNING_KEY, ENV_RAY_TOKEN_PATH):
        path = os.environ.get(var)
        if path:
            found.append(Path(path).expanduser())
    return tuple(_existing(found))


def harness_python() -> list[str]:
    """The interpreter command for the oracle's own child processes (scoring, evaluation).

    Those run outside the sandbox. Without one (``RRMA_FS_GUARD=off``) a trial could create a user
    site-packages directory in the home directory and drop a ``.pth`` file there that would run in
    every later Python process; the oracle's children then start with ``-s`` (no user site).
    Where a user site exists the harness may depend on it, and the sandbox keeps it read-only.
    """
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and Path(user_site).is_dir():
        return [sys.executable]
    return [sys.executable, "-s"]


@dataclass(frozen=True)
class Policy:
    """What an untrusted process may write (``writable``), see (``read_only``) and not see (``hidden``).

    Everything else on the host is visible read-only; ``/tmp`` is private scratch.
    """

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    required: bool = False  # the run asked for RRMA_FS_GUARD=require: no sandbox here is a crash
    network: bool | None = None  # None: RRMA_TRIAL_NETWORK decides (trials); True: always shared (a coding agent's API)

    @classmethod
    def for_trial(cls, trial_dir: Path, protect: Sequence[Path] = (), *, required: bool = False,
                  network: bool | None = None) -> Policy:
        """A trial's guard: its workspace writable; ``protect`` (the run dir) and the user's keys hidden;
        the harness read-only; the network as the run chose (``network``; None: ``RRMA_TRIAL_NETWORK`` here)."""
        return cls(read_only=harness_paths(), writable=(Path(trial_dir),),
                   hidden=(*(Path(p) for p in protect), *secret_paths()), required=required, network=network)

    @classmethod
    def for_scorer(cls, readable: Sequence[Path], writable: Sequence[Path] = (), hidden: Sequence[Path] = (), *,
                   required: bool = False) -> Policy:
        """An oracle's scoring process that reads a trial's artifacts as data: the harness and
        ``readable`` (the trial's files, the oracle's data) read-only, only ``writable`` (the oracle's
        own scratch) writable, ``hidden`` and the user's keys absent, and no network, ever."""
        return cls(read_only=(*harness_paths(), *(Path(p) for p in readable)), writable=tuple(Path(p) for p in writable),
                   hidden=(*(Path(p) for p in hidden), *secret_paths()), required=required, network=False)

    def hiding(self, *paths: Path | str) -> Policy:
        return dataclasses.replace(self, hidden=(*self.hidden, *(Path(p) for p in paths)))

    def protecting(self, *paths: Path | str) -> Policy:
        """Also show ``paths`` read-only (even inside a hidden tree, e.g. the oracle's frozen files)."""
        return dataclasses.replace(self, read_only=(*self.read_only, *(Path(p) for p in paths)))

    def mounts(self) -> list[str]:
        """bwrap's file-system arguments, outermost first, so nested marks hold at every level."""
        writable = _existing(self.writable)
        hidden = _existing(self.hidden)
        marks: dict[Path, str] = {}
        for p in _existing(self.read_only):
            marks[p] = "ro"
        for p in writable:
            marks[p] = "rw"
        for p in hidden:
            marks[p] = "hide"
        marks.setdefault(SCRATCH, "scratch")
        if SERVICE_SOCKETS.is_dir() and not SERVICE_SOCKETS.is_symlink():
            marks.setdefault(SERVICE_SOCKETS, "scratch")
        args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for pattern in GPU_DEVICES:
            for dev in sorted(glob.glob(pattern)):
                args += ["--dev-bind", dev, dev]
        applied: list[tuple[Path, str]] = []
        remount: list[str] = []
        for path, kind in sorted(marks.items(), key=lambda m: (len(m[0].parts), str(m[0]))):
            above = [(q, k) for q, k in applied if q in path.parents]
            current = max(above, key=lambda a: len(a[0].parts))[1] if above else "ro"
            q = str(path)
            if kind == "ro":
                if current == "ro":
                    continue
                args += ["--ro-bind", q, q]
            elif kind == "rw":
                if current == "rw":
                    continue
                args += ["--bind", q, q]
            elif kind == "scratch":
                args += ["--tmpfs", q]
            elif current == "hide":
                continue  # already invisible (and read-only)
            elif path.is_dir():  # hide a directory: an empty one, made read-only once all binds are in
                args += ["--tmpfs", q]
                remount += ["--remount-ro", q]
            else:
                args += ["--dev-bind", "/dev/null", q]  # reads empty, writes vanish (a plain bind is nodev)
            applied.append((path, kind))
        return args + remount

    def wrap(self, argv: Sequence[str], cwd: Path | str) -> list[str]:
        """``argv`` run in the sandbox, in ``cwd``."""
        ns = ["--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
              "--unshare-cgroup-try"]
        guard = self
        if not (network() if self.network is None else self.network):
            ns.append("--unshare-net")
        else:  # name lookups: /etc/resolv.conf often points into /run (systemd-resolved), which is private
            resolv = RESOLV_CONF.resolve()
            if SERVICE_SOCKETS in resolv.parents:
                guard = self.protecting(resolv)
        return [BWRAP, "--die-with-parent", *ns, "--cap-drop", "ALL", *guard.mounts(),
                "--chdir", str(Path(cwd).resolve()), "--", *argv]


def unavailable_reason() -> str | None:
    """None when the sandbox works here; otherwise why not (``RRMA_FS_GUARD=off``, or the probe)."""
    if mode() == "off":
        return f"turned off ({ENV_MODE}=off)"
    return _probe()


PROBE = """
set +e
echo changed > ro/code.py 2>/dev/null
echo ok > ro/rw/out.txt
cat secret.txt
grep '^CapEff' /proc/self/status
umount -l ro 2>/dev/null && echo UNMOUNTED
exit 0
"""


@functools.cache
def _probe() -> str | None:
    """Why bubblewrap cannot sandbox a process here, or None (measured once per process).

    The probe runs a real sandboxed process and checks that a read-only path refuses a write, a
    writable one inside it accepts one, a hidden file reads empty, and the process holds no
    capability and cannot unmount.
    """
    if sys.platform != "linux":
        return f"needs Linux namespaces (this is {sys.platform})"
    if shutil.which(BWRAP) is None:
        return "bubblewrap is not installed (`apt-get install bubblewrap`)"
    with tempfile.TemporaryDirectory(prefix="rrma-fsguard-probe-") as tmp:
        root = Path(tmp)
        (root / "ro" / "rw").mkdir(parents=True)
        (root / "ro" / "code.py").write_text("kept\n")
        (root / "secret.txt").write_text("secret\n")
        guard = Policy(read_only=(root / "ro",), writable=(root / "ro" / "rw",), hidden=(root / "secret.txt",))
        try:
            proc = subprocess.run(guard.wrap(["/bin/sh", "-c", PROBE], root), cwd=root, capture_output=True,
                                  text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap could not run: {exc}"
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            return f"bwrap failed here (user namespaces disabled?): {err}"
        out = root / "ro" / "rw" / "out.txt"
        if (root / "ro" / "code.py").read_text() != "kept\n" or not out.exists() or "secret" in proc.stdout:
            return "the probe found the sandbox ineffective (read-only, writable or hidden path not enforced)"
        if "CapEff:\t0000000000000000" not in proc.stdout or "UNMOUNTED" in proc.stdout:
            return "the probe found the sandbox kept capabilities (it could unmount its read-only paths)"
    return None


def describe() -> str:
    """One line for run.json and the summary: is the sandbox on here, and if not, why."""
    reason = unavailable_reason()
    if reason is not None:
        return f"off: {reason}"
    net = "shared network (RRMA_TRIAL_NETWORK=on)" if network() else "no network"
    return f"on (bubblewrap: no capabilities, user/PID/mount namespaces, {net})"


def recorded(run_dir: Path, key: str = "fs_guard") -> str | None:
    """What ``run.json`` of ``run_dir`` says about the sandbox (``versions.fs_guard``) or another
    containment fact (``limits``: cgroups or polling), if anything."""
    import json

    try:
        value = json.loads((Path(run_dir) / "run.json").read_text()).get("versions", {}).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None
