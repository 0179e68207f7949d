"""The sandbox policy: what a contained process sees, writes and never sees, and its bubblewrap form.

An agent's program (``train.py``, a GSM8K recipe, a command task's script), a coding agent and an
oracle's scoring process that reads an agent's artifact are untrusted: left alone they could
rewrite the oracle's scoring code, the run log or the outcome cache, read the answers they must
rediscover, or reach a credential. The harness often runs as root, so a private mount namespace
alone is no defence: a root program keeps ``CAP_SYS_ADMIN`` there and can ``umount`` or
``mount -o remount,rw`` whatever was made read-only. A :class:`Policy` declares what one process
may see (``read_only``), write (``writable``) and never see (``hidden``), and whether it shares
the host's network; :meth:`Policy.wrap` turns it into a bubblewrap (``bwrap``, the tool Flatpak
uses) command with:

- **no capabilities** (``--cap-drop ALL``) in a new **user namespace** that may not create
  another (``--disable-userns``): it cannot mount, unmount or remount anything, and the mounts it
  inherits are locked;
- new **PID, IPC and UTS namespaces** with their own ``/proc``: the harness and other trials are
  invisible (no ``/proc/<harness>/root``, no ``kill`` of the harness), and when the program's
  tree ends, everything it left behind ends with it; ``--die-with-parent``: if the harness dies
  (even ``kill -9``), the sandbox is killed;
- **an allow-list view of the file system**: an empty root with only the system directories
  (``/usr``, ``/etc`` less its secrets, the ``/lib*`` links, Flatpak's subset of ``/sys``), the
  interpreter and the harness's own packages read-only (:func:`harness_paths`), and what the
  policy names; a private empty ``/tmp``, ``/run`` and home directory (tmpfs, each capped at the
  disk budget where :func:`rrma.contain.spawn.spawn` passes ``scratch_bytes``); a minimal ``/dev``; the
  ``hidden`` paths (the run directory, the other trials, the oracle's answers, the user's keys)
  replaced by empty read-only directories or empty files wherever a visible tree contains them.
  The rest of the host (``/home``, ``/root``, ``/srv``, ``/opt``, ``/var``, ``/work``, ...) is not
  there at all. ``/proc/keys`` reads empty;
- **a seccomp filter** (:mod:`rrma.contain.seccomp`): key, ptrace and kernel-wide calls refused;
- **no network** but a loopback of its own (``--unshare-net``) unless the policy shares it
  (``RRMA_TRIAL_NETWORK=on`` for trials; a coding agent must reach its API): a program that shares
  the host's network can reach this host's services, and some of those run code for whoever asks
  (a Ray cluster's job API runs a shell command outside any sandbox; tests/contain/test_containment_network.py).

:func:`rrma.contain.spawn.spawn` adds the rest: limits (cgroups), a fresh session keyring
(:mod:`rrma.contain.keyring`) and the credential rule for the environment (:mod:`rrma.contain.env`).

What it does not contain: the network where shared; what the system directories hold (the
program runs as uid 0 mapped to the harness's user and reads what that user can read there);
CPU time beyond the wall clock.

``RRMA_FS_GUARD`` chooses: ``auto`` (default: sandbox when bubblewrap works here), ``off``, or
``require`` (a guarded trial that cannot be sandboxed fails as ``crash`` with the reason). Where it
cannot run (no ``bwrap``, user namespaces disabled) :func:`unavailable_reason` says why, and
``run.json`` and the run summary say the sandbox was off.
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
# the system: programs, libraries and configuration, read-only (top-level links such as /bin ->
# usr/bin are recreated as links)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# the parts of /sys a program (and a GPU library) reads, as Flatpak shows them
SYSTEM_SYS = ("/sys/block", "/sys/bus", "/sys/class", "/sys/dev", "/sys/devices")
# secrets of the host under /etc: password hashes, host keys, private TLS keys, stored credentials
ETC_SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "ssh", "ssl/private", "sudoers", "sudoers.d",
               "security/opasswd", "krb5.keytab", "NetworkManager/system-connections", "wireguard", "openvpn",
               "docker", "containers/auth.json", "rrma")
# kernel tables in /proc that name other keys and key users of the host: read empty
PROC_HIDDEN = ("/proc/keys", "/proc/key-users")
# the harness's own top-level packages: visible read-only (and nothing else of its checkout: not .git,
# not tests, not a ./runs directory inside it)
HARNESS_PACKAGES = ("rrma", "oracle", "agents", "benches", "cli", "tui")


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
    """Where the harness's packages and the interpreter live: visible to contained processes, never
    writable. Only the packages themselves (not the checkout around them: no ``.git``, no tests)."""
    import importlib.util

    roots: list[Path | str] = [sys.prefix, sys.base_prefix]
    for name in HARNESS_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            roots += list(spec.submodule_search_locations or [])
    paths = sysconfig.get_paths()
    roots += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    roots.append(Path(sys.executable).resolve().parent)
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        roots.append(user_site)
    home = Path.home().resolve()
    return tuple(p for p in _outermost(_existing(roots)) if p != Path("/") and p != home)


# where keys and tokens live in a home directory: hidden wherever home is shown (a contained process's
# home is an empty private directory; these matter where a policy shows part of it)
SECRET_PATHS = (".ssh", ".gnupg", ".aws", ".azure", ".netrc", ".git-credentials", ".docker/config.json",
                ".config/gcloud", ".config/gh", ".config/rrma", ".cache/huggingface/token", ".kube",
                ".ray")  # ~/.ray/auth_token: Ray's cluster token (its job API runs any command)
ENV_RAY_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"  # where Ray looks for that token instead, if set
ENV_SIGNING_KEY = "RRMA_SIGNING_KEY"  # a reviewer's key (rrma.log.signing) may live anywhere


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
    """What a contained process may write (``writable``), see (``read_only``) and never see (``hidden``).

    On top of the system directories and the harness's packages (:func:`harness_paths`), which every
    policy shows read-only; nothing else of the host is there. ``/tmp``, ``/run`` and the home
    directory are private and empty. A path in ``hidden`` wins over one in ``read_only``, and the
    user's keys (:func:`secret_paths`) are hidden by every policy.
    """

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    required: bool = False  # the run asked for RRMA_FS_GUARD=require: no sandbox here is a crash
    network: bool | None = None  # None: RRMA_TRIAL_NETWORK decides (trials); True: always shared (a coding agent's API)
    pass_env: tuple[str, ...] = ()  # credential-named variables this process still receives, by name (rrma.contain.env)

    @classmethod
    def for_trial(cls, trial_dir: Path, protect: Sequence[Path] = (), *, required: bool = False,
                  network: bool | None = None, pass_env: Sequence[str] = ()) -> Policy:
        """A trial's guard: its workspace writable; ``protect`` (the run dir) and the user's keys hidden;
        the harness read-only; the network as the run chose (``network``; None: ``RRMA_TRIAL_NETWORK`` here)."""
        return cls(writable=(Path(trial_dir),), hidden=tuple(Path(p) for p in protect), required=required,
                   network=network, pass_env=tuple(pass_env))

    @classmethod
    def for_scorer(cls, readable: Sequence[Path], writable: Sequence[Path] = (), hidden: Sequence[Path] = (), *,
                   required: bool = False) -> Policy:
        """An oracle's scoring process that reads a trial's artifacts as data: the harness and
        ``readable`` (the trial's files, the oracle's data) read-only, only ``writable`` (the oracle's
        own scratch) writable, ``hidden`` and the user's keys absent, and no network, ever."""
        return cls(read_only=tuple(Path(p) for p in readable), writable=tuple(Path(p) for p in writable),
                   hidden=tuple(Path(p) for p in hidden), required=required, network=False)

    def hiding(self, *paths: Path | str) -> Policy:
        return dataclasses.replace(self, hidden=(*self.hidden, *(Path(p) for p in paths)))

    def protecting(self, *paths: Path | str) -> Policy:
        """Also show ``paths`` read-only (even inside a hidden tree, e.g. the oracle's frozen files)."""
        return dataclasses.replace(self, read_only=(*self.read_only, *(Path(p) for p in paths)))

    def mounts(self, scratch_bytes: int | None = None) -> list[str]:
        """bwrap's file-system arguments, outermost first, so nested marks hold at every level; each
        private tmpfs (``/tmp``, ``/run``, home) at most ``scratch_bytes`` big where that is given."""
        marks: dict[Path, str] = {}
        links: list[str] = []
        for name in SYSTEM_DIRS:
            path = Path(name)
            if path.is_symlink():  # merged /usr: /bin -> usr/bin stays a link to the bound /usr
                links += ["--symlink", os.readlink(path), name]
            elif path.is_dir():
                marks[path] = "ro"
        for p in _existing(SYSTEM_SYS):
            marks.setdefault(p, "ro")
        for p in _existing([*harness_paths(), *self.read_only]):
            marks[p] = "ro"
        for p in _existing(self.writable):
            marks[p] = "rw"
        for p in _existing([*(Path("/etc") / rel for rel in ETC_SECRETS), *secret_paths(), *self.hidden]):
            marks[p] = "hide"
        marks.setdefault(SCRATCH, "scratch")
        if SERVICE_SOCKETS.is_dir() and not SERVICE_SOCKETS.is_symlink():
            marks.setdefault(SERVICE_SOCKETS, "scratch")
        home = Path.home().resolve()
        if home != Path("/") and home.is_dir():
            marks.setdefault(home, "scratch")  # an empty private home: ~/.cache and friends work, show nothing
        args = [*links, "--dev", "/dev", "--proc", "/proc"]
        for name in PROC_HIDDEN:
            args += ["--dev-bind", "/dev/null", name]
        for pattern in GPU_DEVICES:
            for dev in sorted(glob.glob(pattern)):
                args += ["--dev-bind", dev, dev]
        applied: list[tuple[Path, str]] = []
        remount: list[str] = []
        for path, kind in sorted(marks.items(), key=lambda m: (len(m[0].parts), str(m[0]))):
            above = [(q, k) for q, k in applied if q in path.parents]
            # what the path is before this mark: as its nearest marked ancestor left it, else absent
            current = max(above, key=lambda a: len(a[0].parts))[1] if above else "absent"
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
                args += [*(["--size", str(scratch_bytes)] if scratch_bytes is not None else []), "--tmpfs", q]
            elif current in ("hide", "absent"):
                continue  # not there to begin with (the root is read-only: so are the directories made in it)
            elif path.is_dir():  # hide a directory: an empty one, made read-only once all binds are in
                args += ["--tmpfs", q]
                remount += ["--remount-ro", q]
            else:
                args += ["--dev-bind", "/dev/null", q]  # reads empty, writes vanish (a plain bind is nodev)
            applied.append((path, kind))
        return [*args, *remount, "--remount-ro", "/"]

    def wrap(self, argv: Sequence[str], cwd: Path | str, *, seccomp_fd: int | None = None,
             scratch_bytes: int | None = None) -> list[str]:
        """``argv`` run in the sandbox, in ``cwd``; with ``seccomp_fd`` (:func:`rrma.contain.seccomp.program_fd`,
        inherited by the child) under the seccomp filter. :func:`rrma.contain.spawn.spawn` passes one, and
        ``scratch_bytes`` (the disk budget: each private tmpfs is at most that big) where
        :func:`sized_scratch` says bubblewrap can size them."""
        ns = ["--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
              "--unshare-cgroup-try"]
        guard = self
        if not (network() if self.network is None else self.network):
            ns.append("--unshare-net")
        else:  # name lookups: /etc/resolv.conf often points into /run (systemd-resolved), which is private
            resolv = RESOLV_CONF.resolve()
            if SERVICE_SOCKETS in resolv.parents:
                guard = self.protecting(resolv)
        seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        return [BWRAP, "--die-with-parent", *ns, "--cap-drop", "ALL", *guard.mounts(scratch_bytes), *seccomp,
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


@functools.cache
def sized_scratch() -> bool:
    """Whether this bubblewrap can cap the size of a tmpfs (``--size``, bubblewrap 0.7 and later)."""
    try:
        proc = subprocess.run([BWRAP, "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in proc.stdout + proc.stderr


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
