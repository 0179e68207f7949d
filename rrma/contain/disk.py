"""A trial's disk budget, enforced by the kernel: its workspace is a file system of its own.

The disk budget used to be a watch that walked the workspace's directory entries now and then. A
trial that opened a file, unlinked it and ``posix_fallocate``\\ d 2 GiB took 2 GiB of the host's disk
(where the run log lives) and ended ``ok`` under a 16 MiB budget: unlinked open files, directory
blocks and inodes have no entry to walk. Where the harness can mount (root, loop devices, ``mkfs.ext4``),
each trial's workspace is now a fresh ext4 file system of exactly ``budget.trial_disk_mb``, in a
sparse image file loop-mounted (``nosuid``, ``nodev``) at the workspace before its files are
materialised. The kernel refuses every block and inode past it (``ENOSPC``), whatever holds them:
files, unlinked open files, directories, preallocations. The image is unlinked as soon as its loop
device holds it, so the host never gives it more than its size and nothing is left to clean up: the
space goes back when the file system is unmounted (at the end of the evaluation), or, for a harness
that was killed, when the leftover mount is found and detached before the trial's directory is used
again (:func:`unmount_leftover`). A workspace kept after its trial (``loop.keep_workspaces``) is
copied out to a plain directory at the same path before the unmount (``cp``: links stay links,
sparse files stay sparse, set-user-ID bits are dropped).

Invariants: a workspace this process mounted is registered (:func:`capped`) until :func:`release`
unmounts it, so :func:`rrma.contain.spawn.spawn` reads its ``statvfs`` (which does count unlinked open
files and inodes) instead of walking it, and labels a full one ``disk``; nothing here follows a link
a program planted (the image is made in the trial's own directory, which no trial program sees, with
``O_EXCL | O_NOFOLLOW``); a mount this module did not make is never unmounted.

``RRMA_DISK_CAP`` chooses: ``auto`` (default: a file system per workspace where mounting works
here, else the watch), ``off`` (the watch only, as before: the control of the attack tests), or
``require`` (a trial whose workspace cannot be capped does not run: ``crash`` with the reason).
:func:`describe` says in ``run.json`` which one a run got, and why.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import logging
import os
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ENV_MODE = "RRMA_DISK_CAP"
MODES = ("auto", "off", "require")
FS_TYPE = "ext4"
# no journal (nothing here outlives its trial), no reserve for online resizing, no blocks kept for
# root, 256-byte inodes (no year-2038 warning), inode tables left for the kernel to initialise lazily
MKFS_ARGS = ("-q", "-F", "-m", "0", "-I", "256", "-O", "^has_journal,^resize_inode",
             "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard")
# noinit_itable: no background zeroing of inode tables (it would write them all into the image);
# nobarrier: no cache flushes (each would fsync the image to the host's disk; the file system dies
# with its trial, so a crash loses nothing it needed)
MOUNT_OPTIONS = b"noinit_itable,nobarrier"
MS_NOSUID, MS_NODEV, MS_NOATIME = 2, 4, 1024
MNT_DETACH = 2
LOOP_CONTROL = "/dev/loop-control"
LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A  # Linux >= 5.8: attach and set the flags in one call
LO_FLAGS_AUTOCLEAR = 4  # the loop device lets go of its image when the file system on it is unmounted
LOOP_CONFIG_SIZE = 304  # struct loop_config: fd, block_size, struct loop_info64 (232 bytes), 8 reserved u64
LOOP_FLAGS_OFFSET = 60  # loop_config.info.lo_flags
LOOP_NAME_OFFSET = 64  # loop_config.info.lo_file_name[64]
PROBE_BYTES = 8 * 2**20  # the probe's own capped workspace
FULL_BYTES = 64 * 1024  # a capped workspace with less free space than this (or no free inode) is full
ENOSPC_MARKERS = ("No space left on device", "ENOSPC", "[Errno 28]")
IMAGE_SUFFIX = ".img"  # the image's name: .<workspace name>-<random>.img, beside the workspace


class DiskCapError(RuntimeError):
    """A workspace could not be given its own capped file system (or a leftover one removed)."""


def mode() -> str:
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_MODE}={value!r}: expected one of {', '.join(MODES)}")
    return value


@dataclass
class Workspace:
    """A mounted, capped workspace: where it is, its size, and the loop device that holds its image."""

    path: Path
    size_bytes: int
    device: str
    loop_fd: int  # held until the unmount: closing it lets the loop device go (the slow part, done apart)

    def free(self) -> tuple[int, int, int]:
        """(bytes in use, bytes free, inodes free) now, from the file system itself."""
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize, st.f_favail

    def full(self) -> str | None:
        """Why this workspace counts as full now (its budget is used up), or None."""
        try:
            used, free, inodes = self.free()
        except OSError:
            return None
        if inodes == 0:
            return f"no inode left ({used / 2**20:.0f} MiB in use)"
        if free < FULL_BYTES:
            return f"{used / 2**20:.0f} MiB in use, {free // 1024} KiB free"
        return None


log = logging.getLogger(__name__)
_MOUNTED: dict[Path, Workspace] = {}  # workspace path (resolved) -> its mount, made by this process
_LOCK = threading.Lock()
_libc = ctypes.CDLL(None, use_errno=True)


def _oserror(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def capped(path: Path | str) -> Workspace | None:
    """The capped workspace mounted at ``path`` by this process, if any."""
    if not _MOUNTED:
        return None
    with contextlib.suppress(OSError):
        key = Path(path).resolve()
        with _LOCK:
            return _MOUNTED.get(key)
    return None


def _mkfs() -> str | None:
    for candidate in (shutil.which("mkfs.ext4"), "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.lru_cache(maxsize=8)
def _template(size_bytes: int) -> tuple[tuple[int, bytes], ...]:
    """The data extents (offset, bytes) of a freshly made ext4 image of ``size_bytes``: a new workspace
    is that, written into a sparse file (~0.2 MiB for 4 GiB; copying it is ~100x cheaper than mkfs)."""
    mkfs = _mkfs()
    if mkfs is None:
        raise DiskCapError("mkfs.ext4 not found (e2fsprogs)")
    with tempfile.TemporaryDirectory(prefix="rrma-disk-") as tmp:
        image = Path(tmp) / "template.img"
        with open(image, "wb") as fh:
            fh.truncate(size_bytes)
        proc = subprocess.run([mkfs, *MKFS_ARGS, str(image)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise DiskCapError(f"mkfs.ext4 failed: {(proc.stderr.strip() or proc.stdout.strip())[-300:]}")
        extents: list[tuple[int, bytes]] = []
        fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
        try:
            offset = 0
            while offset < size_bytes:
                try:
                    start = os.lseek(fd, offset, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # no data past offset
                        break
                    raise
                end = os.lseek(fd, start, os.SEEK_HOLE)
                extents.append((start, os.pread(fd, end - start, start)))
                offset = end
        finally:
            os.close(fd)
    return tuple(extents)


def _attach(image_fd: int, name: str) -> tuple[str, int]:
    """A free loop device configured on ``image_fd`` (auto-clearing): its path and an open descriptor."""
    ctl = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + 10
        while True:
            number = fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)
            device = f"/dev/loop{number}"
            try:
                fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:  # devtmpfs has not made the node of a device just added
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
                continue
            config = bytearray(LOOP_CONFIG_SIZE)
            struct.pack_into("=II", config, 0, image_fd, 0)
            struct.pack_into("=I", config, LOOP_FLAGS_OFFSET, LO_FLAGS_AUTOCLEAR)
            encoded = name.encode()[:63]
            config[LOOP_NAME_OFFSET:LOOP_NAME_OFFSET + len(encoded)] = encoded
            try:
                fcntl.ioctl(fd, LOOP_CONFIGURE, bytes(config))
                return device, fd
            except OSError as exc:
                os.close(fd)
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:  # EBUSY: another thread took it
                    raise
    finally:
        os.close(ctl)


def mount(workdir: Path, size_bytes: int) -> Workspace:
    """Make ``workdir`` (created, empty) the mount point of a fresh ext4 file system of ``size_bytes``.

    Raises OSError (or :class:`DiskCapError`) when that cannot be done; nothing is left mounted then.
    """
    workdir = Path(workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        raise DiskCapError(f"{workdir} is not empty: a workspace is mounted on an empty directory")
    template = _template(size_bytes)
    image = workdir.parent / f".{workdir.name}-{secrets.token_hex(4)}{IMAGE_SUFFIX}"
    fd = os.open(image, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size_bytes)
        for offset, data in template:
            os.pwrite(fd, data, offset)
        device, loop_fd = _attach(fd, str(image))
    finally:
        os.close(fd)
        os.unlink(image)  # the loop device holds it now: its space goes back when the device lets go
    try:
        if _libc.mount(device.encode(), str(workdir).encode(), FS_TYPE.encode(), MS_NOSUID | MS_NODEV | MS_NOATIME,
                       MOUNT_OPTIONS) != 0:
            raise _oserror(f"mount {device} on {workdir}")
    except BaseException:
        os.close(loop_fd)
        raise
    workspace = Workspace(workdir.resolve(), size_bytes, device, loop_fd)
    try:
        os.rmdir(workdir / "lost+found")  # mkfs's; a workspace holds only the trial's files
    except BaseException:
        _unmount(workspace)
        raise
    with _LOCK:
        _MOUNTED[workspace.path] = workspace
    return workspace


def _unmount(workspace: Workspace) -> None:
    """Unmount (lazily when something still holds it), then let the loop device go in the background."""
    target = str(workspace.path).encode()
    try:
        if _libc.umount2(target, 0) != 0:
            if ctypes.get_errno() != errno.EBUSY or _libc.umount2(target, MNT_DETACH) != 0:
                raise _oserror(f"umount {workspace.path}")
    finally:
        # the device clears itself (and the host frees the image's blocks) when this last holder
        # closes: ~15-50 ms the trial's outcome need not wait for
        threading.Thread(target=os.close, args=(workspace.loop_fd,), name="rrma-disk-release", daemon=True).start()


def release(workdir: Path, *, keep: bool = False) -> None:
    """Unmount the capped workspace at ``workdir`` (nothing when there is none); with ``keep``, its
    files first go to a plain directory that takes its place (links copied as links, sparse files
    sparse, set-user-ID bits dropped). Never raises: it runs in an evaluation's cleanup, and what
    fails is logged (a mount left behind is found by :func:`unmount_leftover` the next time)."""
    with _LOCK:
        workspace = _MOUNTED.pop(Path(workdir).absolute().resolve(), None)
    if workspace is None:
        return
    staging: Path | None = None
    if keep:
        staging = workspace.path.parent / f".{workspace.path.name}-kept-{secrets.token_hex(4)}"
        copy = subprocess.run(["cp", "-R", "--no-dereference", "--preserve=timestamps,links", "--sparse=always",
                               "-T", str(workspace.path), str(staging)], capture_output=True, text=True)
        if copy.returncode != 0:  # what could be copied is kept all the same
            log.warning("keeping the workspace %s: cp failed: %s", workspace.path, copy.stderr.strip()[-300:])
    try:
        _unmount(workspace)
    except OSError as exc:
        log.warning("could not unmount the workspace %s: %s", workspace.path, exc)
        return
    if staging is not None and staging.is_dir():
        try:
            workspace.path.rmdir()  # the empty mount point
            staging.rename(workspace.path)
        except OSError as exc:
            log.warning("the kept workspace %s stays at %s: %s", workspace.path, staging, exc)


def open_workspace(workdir: Path, disk_mb: int, mode_name: str) -> Workspace | None:
    """Cap the workspace ``workdir`` (created here) at ``disk_mb`` MiB by the rule of ``mode_name``
    (``RRMA_DISK_CAP`` where the run started): its mount, or None when the watch applies (``off``, or
    ``auto`` where mounting does not work here). Raises :class:`DiskCapError` when the cap is required
    but impossible, or when mounting fails where it works (the run says its trials are capped)."""
    if mode_name not in MODES:
        raise DiskCapError(f"{ENV_MODE}={mode_name!r}: expected one of {', '.join(MODES)}")
    if mode_name == "off":
        return None
    reason = _probe()
    if reason is not None:
        if mode_name == "require":
            raise DiskCapError(f"a capped workspace is required ({ENV_MODE}=require) but unavailable: {reason}")
        return None
    try:
        return mount(workdir, disk_mb * 2**20)
    except (OSError, DiskCapError) as exc:
        raise DiskCapError(f"the workspace could not be given its {disk_mb} MiB file system: {exc}") from None


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline, backslash as octal escapes)."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _mounts_at(path: Path) -> list[str]:
    """The sources of the file systems mounted at ``path`` (bottom first), from /proc/self/mountinfo."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) > 4 and _unescape(fields[4]) == str(path):
                after = fields[fields.index("-") + 1 :] if "-" in fields else []
                found.append(after[1] if len(after) > 1 else "")
    return found


def _is_ours(source: str, path: Path) -> bool:
    """Whether ``source`` is a loop device whose image is one :func:`mount` made for ``path``."""
    if not source.startswith("/dev/loop"):
        return False
    try:
        backing = Path(f"/sys/block/{source[len('/dev/'):]}/loop/backing_file").read_text().strip()
    except OSError:
        return False
    backing = backing.removesuffix(" (deleted)")
    image = Path(backing)
    return (image.parent == path.parent and image.name.startswith(f".{path.name}-")
            and image.name.endswith(IMAGE_SUFFIX))


def unmount_leftover(workdir: Path) -> int:
    """Detach what an earlier harness (killed before its cleanup) left mounted at ``workdir``, so the
    directory can be removed and used again; returns how many mounts went. Only this module's own
    workspaces are detached: another file system there raises :class:`DiskCapError`."""
    workdir = Path(workdir).absolute()
    if capped(workdir) is not None:  # this process's own (an evaluation that never got to its cleanup)
        release(workdir)
    with contextlib.suppress(OSError):
        workdir = workdir.resolve()
    if not os.path.ismount(workdir):
        return 0
    removed = 0
    for source in reversed(_mounts_at(workdir)):
        if not _is_ours(source, workdir):
            raise DiskCapError(f"{workdir} has a file system mounted on it that rrma did not make "
                           f"({source or 'unknown source'}); unmount it first")
        if _libc.umount2(str(workdir).encode(), MNT_DETACH) != 0:
            raise _oserror(f"umount {workdir}")
        removed += 1
    return removed


def hit_enospc(output: str) -> bool:
    """Whether a program's output says a write failed for want of space (its last 4000 characters)."""
    tail = output[-4000:]
    return any(marker in tail for marker in ENOSPC_MARKERS)


@functools.cache
def _probe() -> str | None:
    """Why a capped workspace cannot be mounted here, or None (tried once per process, for real)."""
    if sys.platform != "linux":
        return f"needs Linux loop devices (this is {sys.platform})"
    if os.geteuid() != 0:
        return "mounting a file system per trial needs root"
    if _mkfs() is None:
        return "mkfs.ext4 is not installed (`apt-get install e2fsprogs`)"
    if not os.path.exists(LOOP_CONTROL):
        return f"no loop devices ({LOOP_CONTROL} is missing)"
    with tempfile.TemporaryDirectory(prefix="rrma-disk-probe-") as tmp:
        work = Path(tmp) / "work"
        try:
            mount(work, PROBE_BYTES)
        except (OSError, DiskCapError) as exc:
            return f"could not mount a capped workspace here: {exc}"
        try:  # the attack the cap is for, on a small scale: an unlinked file asks for twice the size
            fd = os.open(work / "probe", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.unlink(work / "probe")
            try:
                os.posix_fallocate(fd, 0, 2 * PROBE_BYTES)
                return "the probe found the cap ineffective (an unlinked file got more than the file system's size)"
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    return f"the probe could not test the cap: {exc}"
            finally:
                os.close(fd)
        finally:
            release(work)
    return None


def unavailable_reason() -> str | None:
    """None when trial workspaces get their own capped file system here; otherwise why not."""
    if mode() == "off":
        return f"turned off ({ENV_MODE}=off)"
    return _probe()


def describe() -> str:
    """One short line for run.json and the summary: how a trial's disk budget is enforced here (what each
    way counts is docs/foundation.md's "Disk")."""
    reason = unavailable_reason()
    if reason is None:
        return "kernel-enforced (a capped ext4 per workspace)"
    return f"watched (not kernel-enforced: {reason})"
