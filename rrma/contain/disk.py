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

Cost: a file system is made with the kernel's new mount API (``fsopen``, ``fsmount``) as a *detached*
mount, a descriptor attached nowhere, and placed at the workspace by one ``move_mount``. A thread
keeps a few such file systems ready per (trials directory, size) (:class:`_Pool`), made between
trials (when a workspace is released); a trial's workspace is then one system call away, and its
unmount is a detach (``MNT_DETACH`` while a descriptor of this module holds the mount) whose slow
part (the file system's last write-back, the loop device letting go) that thread does later. A ready
file system is visible nowhere, is handed out once (taken under the pool's lock) and never returns
to a pool; one a process still held when it died or exited goes with its descriptors (the kernel
unmounts a detached mount on its last close), so a pool leaves nothing behind.

Invariants: a workspace this process mounted is registered (:func:`capped`) until :func:`release`
unmounts it, so :func:`rrma.contain.spawn.spawn` reads its ``statvfs`` (which does count unlinked open
files and inodes) instead of walking it, and labels a full one ``disk``; nothing here follows a link
a program planted (the image is made in the directory that holds the trials' directories, which no
trial program sees, with ``O_EXCL | O_NOFOLLOW``, and the workspace is a mount target only as a
directory opened ``O_NOFOLLOW``); a mount this module did not make is never unmounted; a file system
is a workspace once, never twice.

``RRMA_DISK_CAP`` chooses: ``auto`` (default: a file system per workspace where mounting works
here, else the watch), ``off`` (the watch only, as before: the control of the attack tests), or
``require`` (a trial whose workspace cannot be capped does not run: ``crash`` with the reason).
:func:`describe` says in ``run.json`` which one a run got, and why.
"""

from __future__ import annotations

import atexit
import collections
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
MOUNT_FLAGS = ("noinit_itable", "nobarrier")
MNT_DETACH = 2
# the new mount API (Linux >= 5.2; LOOP_CONFIGURE below already needs 5.8). These system call numbers
# are the same on every architecture (Linux numbers its new calls alike since 5.1; alpha aside)
SYS_MOVE_MOUNT, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 429, 430, 431, 432
FSOPEN_CLOEXEC = FSMOUNT_CLOEXEC = 1
FSCONFIG_SET_FLAG, FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE = 0, 1, 6
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOATIME = 0x2, 0x4, 0x10
MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40
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
# an image's name: .rrma-disk-<random>.img in the directory that holds the trials' directories (the
# workspace's grandparent, RUN/trials); before the pool it was .<workspace name>-<random>.img beside
# the workspace, which a leftover of an older harness may still have
IMAGE_PREFIX = ".rrma-disk-"
IMAGE_SUFFIX = ".img"
POOL_MAX = 4  # file systems a pool keeps ready at most (it starts at one, and grows when trials find it empty)
POOL_KEYS = 2  # pools kept (one per trials directory and size), the most recently used
POOL_IDLE_S = 120.0  # a pool nobody took from for this long lets its file systems go and its thread end


class DiskCapError(RuntimeError):
    """A workspace could not be given its own capped file system (or a leftover one removed)."""


def mode() -> str:
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_MODE}={value!r}: expected one of {', '.join(MODES)}")
    return value


@dataclass
class _Made:
    """A fresh capped file system, mounted nowhere yet: its mount's descriptor (closing it before the
    mount is placed unmounts it) and its loop device's (closing that lets the device go)."""

    mount_fd: int
    loop_fd: int
    device: str
    size_bytes: int


@dataclass
class Workspace:
    """A mounted, capped workspace: where it is, its size, and the descriptors that hold it."""

    path: Path
    size_bytes: int
    device: str
    loop_fd: int  # held until the unmount: closing it lets the loop device go (the slow part, done apart)
    mount_fd: int  # the mount itself: the unmount is a detach, and closing this ends the file system
    st_dev: int  # the file system's device number: what is mounted at ``path`` is checked to be this one
    pool: _Pool | None = None  # the pool whose thread ends it when it is released (and makes the next)

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
_libc.syscall.restype = ctypes.c_long


def _oserror(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _syscall(what: str, number: int, *args: object) -> int:
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        raise _oserror(what)
    return int(result)


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


def _fs_log(fs_fd: int) -> str:
    """What the kernel said about a failed file system context (its message log), or ''."""
    lines = []
    with contextlib.suppress(OSError):  # ENODATA: nothing (more) to read
        for _ in range(8):
            lines.append(os.read(fs_fd, 1024).decode(errors="replace").strip())
    return "; ".join(line for line in lines if line)


def _mount_detached(device: str) -> int:
    """An ext4 mount of ``device`` attached nowhere (``nosuid``, ``nodev``, ``noatime``): its descriptor."""
    fs_fd = _syscall("fsopen ext4", SYS_FSOPEN, ctypes.c_char_p(FS_TYPE.encode()), ctypes.c_uint(FSOPEN_CLOEXEC))
    try:
        try:
            _syscall("fsconfig source", SYS_FSCONFIG, ctypes.c_int(fs_fd), ctypes.c_uint(FSCONFIG_SET_STRING),
                     ctypes.c_char_p(b"source"), ctypes.c_char_p(device.encode()), ctypes.c_int(0))
            for flag in MOUNT_FLAGS:
                _syscall(f"fsconfig {flag}", SYS_FSCONFIG, ctypes.c_int(fs_fd), ctypes.c_uint(FSCONFIG_SET_FLAG),
                         ctypes.c_char_p(flag.encode()), None, ctypes.c_int(0))
            _syscall(f"mount {device}", SYS_FSCONFIG, ctypes.c_int(fs_fd), ctypes.c_uint(FSCONFIG_CMD_CREATE), None,
                     None, ctypes.c_int(0))
            return _syscall(f"fsmount {device}", SYS_FSMOUNT, ctypes.c_int(fs_fd), ctypes.c_uint(FSMOUNT_CLOEXEC),
                            ctypes.c_uint(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME))
        except OSError as exc:
            said = _fs_log(fs_fd)
            raise OSError(exc.errno, f"{exc.strerror}{f' ({said})' if said else ''}") from None
    finally:
        os.close(fs_fd)


def _make(image_dir: Path, size_bytes: int) -> _Made:
    """A fresh ext4 file system of ``size_bytes``, empty (no ``lost+found``) and mounted nowhere; its
    image, made in ``image_dir`` (``O_EXCL | O_NOFOLLOW``), is unlinked once its loop device holds it.
    Raises OSError (or :class:`DiskCapError`); nothing is left then."""
    template = _template(size_bytes)
    image = Path(image_dir) / f"{IMAGE_PREFIX}{secrets.token_hex(6)}{IMAGE_SUFFIX}"
    fd = os.open(image, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size_bytes)
        for offset, data in template:
            os.pwrite(fd, data, offset)
        device, loop_fd = _attach(fd, str(image))
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # a pool's sweep of a killed harness's images took it
            os.unlink(image)  # the loop device holds it now: its space goes back when the device lets go
    try:
        mount_fd = _mount_detached(device)
    except BaseException:
        os.close(loop_fd)
        raise
    made = _Made(mount_fd, loop_fd, device, size_bytes)
    try:
        os.rmdir("lost+found", dir_fd=mount_fd)  # mkfs's; a workspace holds only the trial's files
    except BaseException:
        _let_go(made.mount_fd, made.loop_fd)
        raise
    return made


def _let_go(mount_fd: int, loop_fd: int, *, wait: bool = False) -> None:
    """Close a file system's descriptors: its mount's (a detached mount's last one: the kernel unmounts
    it, writing back what is dirty), then its loop device's (the device clears itself and the host frees
    the image). That takes ~15-50 ms no trial need wait for: unless ``wait``, a thread of its own does it."""

    def close_both() -> None:
        os.close(mount_fd)
        os.close(loop_fd)

    if wait:
        close_both()
    else:
        threading.Thread(target=close_both, name="rrma-disk-release", daemon=True).start()


def _place(made: _Made, workdir: Path) -> Workspace:
    """Mount ``made`` at ``workdir`` (created; it must be an empty directory, not a link) and register it."""
    workdir = Path(workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    target = os.open(workdir, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.listdir(workdir):
            raise DiskCapError(f"{workdir} is not empty: a workspace is mounted on an empty directory")
        _syscall(f"move_mount {made.device} to {workdir}", SYS_MOVE_MOUNT, ctypes.c_int(made.mount_fd),
                 ctypes.c_char_p(b""), ctypes.c_int(target), ctypes.c_char_p(b""),
                 ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
    finally:
        os.close(target)
    workspace = Workspace(workdir.resolve(), made.size_bytes, made.device, made.loop_fd, made.mount_fd,
                          os.fstat(made.mount_fd).st_dev)
    with _LOCK:
        _MOUNTED[workspace.path] = workspace
    return workspace


def mount(workdir: Path, size_bytes: int) -> Workspace:
    """Make ``workdir`` (created, empty) the mount point of a fresh ext4 file system of ``size_bytes``,
    made now (its image in ``workdir``'s grandparent). Raises OSError (or :class:`DiskCapError`) when
    that cannot be done; nothing is left mounted then."""
    workdir = Path(workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    made = _make(workdir.parent.parent, size_bytes)
    try:
        return _place(made, workdir)
    except BaseException:
        _let_go(made.mount_fd, made.loop_fd)
        raise


class _Pool:
    """Capped file systems made ahead for one (trials directory, size), by a thread of its own.

    A trial takes one (:meth:`take`): under the lock, popped, so no two trials ever get the same one,
    and none ever comes back: a released workspace's descriptors come back only to be closed (by this
    thread, :meth:`retire`), which ends its file system. The thread makes the next file systems when a
    trial's workspace is released (and when a trial found none ready), not when one is taken: making one
    while a trial's sandbox starts slowed that start on a busy machine; between trials it costs the
    trials nothing. It keeps ``want`` ready: one at first, one more each time a trial found none (trials
    at once), up to :data:`POOL_MAX`. Nobody taking for :data:`POOL_IDLE_S`, a failure to make one, or
    :func:`close_pools` (also at exit) ends it, and what it held is let go. A process that dies holds
    them by descriptors only, and the kernel unmounts them as those close; an image file whose unlink a
    kill forestalled (between its creation and its loop device) is removed when a pool next starts for
    that directory.
    """

    def __init__(self, image_dir: Path, size_bytes: int) -> None:
        self.image_dir = image_dir
        self.size_bytes = size_bytes
        self.ready: collections.deque[_Made] = collections.deque()
        self.retired: list[tuple[int, int]] = []  # released workspaces' (mount, loop device) descriptors
        self.want = 1
        self.asked = True  # make up to ``want`` now (at the start, after a release, after a trial found none)
        self.taken = 0
        self.closed = False
        self.last_take = time.monotonic()
        self.cond = threading.Condition()
        self._sweep()
        self.thread = threading.Thread(target=self._work, name="rrma-disk-pool", daemon=True)
        self.thread.start()

    def _sweep(self) -> None:
        """Remove image files a killed harness left here (never a link's target: unlink does not follow)."""
        with contextlib.suppress(OSError):
            for name in os.listdir(self.image_dir):
                if name.startswith(IMAGE_PREFIX) and name.endswith(IMAGE_SUFFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(self.image_dir / name)

    def take(self) -> _Made | None:
        """A ready file system, never handed out before, or None (none ready: the thread makes more)."""
        with self.cond:
            if self.closed:
                return None
            self.last_take = time.monotonic()
            made = self.ready.popleft() if self.ready else None
            if made is None:
                if self.taken:  # trials at once (the first take only finds the pool starting)
                    self.want = min(POOL_MAX, self.want + 1)
                self.asked = True
                self.cond.notify_all()
            self.taken += 1
            return made

    def retire(self, mount_fd: int, loop_fd: int) -> None:
        """A released workspace's descriptors: the thread closes them (its file system ends), then makes
        the next trial's file system."""
        with self.cond:
            if not self.closed:
                self.retired.append((mount_fd, loop_fd))
                self.asked = True
                self.cond.notify_all()
                return
        _let_go(mount_fd, loop_fd)

    def close(self, *, wait: bool = True) -> None:
        """Stop making, and let go of what is ready or retired (its thread ends at its next look)."""
        with self.cond:
            self.closed = True
            held = [(made.mount_fd, made.loop_fd) for made in self.ready] + self.retired
            self.ready, self.retired = collections.deque(), []
            self.cond.notify_all()
        for mount_fd, loop_fd in held:
            _let_go(mount_fd, loop_fd, wait=wait)

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.closed and not self.retired and not (self.asked and len(self.ready) < self.want):
                    idle = time.monotonic() - self.last_take
                    if idle >= POOL_IDLE_S:
                        self.closed = True
                        break
                    self.cond.wait(POOL_IDLE_S - idle)
                if self.closed:
                    break
                make = self.asked and len(self.ready) < self.want
                retired = [] if make else self.retired[:1]
                del self.retired[:len(retired)]
            for mount_fd, loop_fd in retired:  # after the next file system: a trial may be waiting for that
                _let_go(mount_fd, loop_fd, wait=True)
            if not make:
                continue
            try:
                made = _make(self.image_dir, self.size_bytes)
            except (OSError, DiskCapError) as exc:  # the trial that finds the pool empty makes its own, and says why
                log.warning("the pool of capped workspaces in %s stops: %s", self.image_dir, exc)
                break
            with self.cond:
                if not self.closed:
                    self.ready.append(made)
                    self.asked = len(self.ready) < self.want
                    continue
            _let_go(made.mount_fd, made.loop_fd, wait=True)
            break
        self.close()


_POOLS: collections.OrderedDict[tuple[Path, int], _Pool] = collections.OrderedDict()
_POOLS_LOCK = threading.Lock()


def _pool_for(image_dir: Path, size_bytes: int) -> _Pool:
    """The pool for ``image_dir`` and ``size_bytes`` (started now if there is none); the least recently
    used past :data:`POOL_KEYS` are closed."""
    key = (image_dir, size_bytes)
    dropped = []
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool.closed:
            pool = _POOLS[key] = _Pool(image_dir, size_bytes)
        _POOLS.move_to_end(key)
        while len(_POOLS) > POOL_KEYS:
            dropped.append(_POOLS.popitem(last=False)[1])
    for old in dropped:
        old.close(wait=False)
    return pool


def close_pools() -> None:
    """Let go of every file system kept ready (registered at exit)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


def _forget_pools_in_child() -> None:
    """A forked child has copies of the pools' descriptors: it closes them (the parent's stay open) and
    starts with no pool, so that no file system is ever handed out by both."""
    global _POOLS_LOCK
    _POOLS_LOCK = threading.Lock()  # another thread may have held it at the fork
    for pool in _POOLS.values():
        pool.cond = threading.Condition()
        pool.closed = True  # a workspace of it released in the child is let go of directly
        for pair in [(made.mount_fd, made.loop_fd) for made in pool.ready] + pool.retired:
            for fd in pair:
                with contextlib.suppress(OSError):
                    os.close(fd)
    _POOLS.clear()


def release_all() -> int:
    """Detach every workspace this process mounted and has not released (how many): at exit, and on a
    second Ctrl-C (which kills the running trials and leaves by ``os._exit``, past ``atexit``). Without
    it such a workspace stays mounted in the run directory until that trial is evaluated again
    (``resume``) or someone unmounts it. The files go with the file system: a trial cut short keeps
    nothing (``loop.keep_workspaces`` keeps only what a released trial left). Never raises."""
    with _LOCK:
        held = list(_MOUNTED)
    for path in held:
        release(path)
    return len(held)


def _forget_mounts_in_child() -> None:
    """A forked child did not mount its parent's workspaces: it must not detach them when it exits."""
    _MOUNTED.clear()


atexit.register(close_pools)
atexit.register(release_all)  # atexit runs last-registered first: the workspaces go, then the pools
os.register_at_fork(after_in_child=_forget_pools_in_child)
os.register_at_fork(after_in_child=_forget_mounts_in_child)


def _still_ours(workspace: Workspace) -> bool:
    """Whether the file system at the workspace's path (the top one) is still its capped one."""
    return os.stat(workspace.path, follow_symlinks=False).st_dev == workspace.st_dev


def _unmount(workspace: Workspace) -> None:
    """Detach the workspace's mount (it stays whole while this module's descriptor holds it, so the
    detach waits for nothing); a thread then closes the descriptors, which ends the file system and
    lets the loop device go. What is mounted at the path is unmounted only if it is this file system."""
    target = str(workspace.path).encode()
    try:
        if not _still_ours(workspace):
            raise DiskCapError(f"{workspace.path} has another file system mounted over its capped one")
        if _libc.umount2(target, MNT_DETACH) != 0:
            raise _oserror(f"umount {workspace.path}")
    finally:
        if workspace.pool is not None:
            workspace.pool.retire(workspace.mount_fd, workspace.loop_fd)
        else:
            _let_go(workspace.mount_fd, workspace.loop_fd)


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
    except (OSError, DiskCapError) as exc:
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
    but impossible, or when mounting fails where it works (the run says its trials are capped).

    The file system comes from the pool of ``workdir``'s grandparent (the trials directory) and size
    when one is ready there, else it is made now; either way the pool then makes the next trial's."""
    if mode_name not in MODES:
        raise DiskCapError(f"{ENV_MODE}={mode_name!r}: expected one of {', '.join(MODES)}")
    if mode_name == "off":
        return None
    reason = _probe()
    if reason is not None:
        if mode_name == "require":
            raise DiskCapError(f"a capped workspace is required ({ENV_MODE}=require) but unavailable: {reason}")
        return None
    workdir = Path(workdir).absolute()
    size_bytes = disk_mb * 2**20
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        pool = _pool_for(workdir.parent.parent, size_bytes) if POOL_MAX > 0 else None
        made = pool.take() if pool is not None else None
        if made is None:
            made = _make(workdir.parent.parent, size_bytes)
        try:
            workspace = _place(made, workdir)
        except BaseException:
            _let_go(made.mount_fd, made.loop_fd)
            raise
        workspace.pool = pool
        return workspace
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
    """Whether ``source`` is a loop device whose image is one this module made for a workspace at ``path``
    (in its grandparent, or, made by an older harness, beside it)."""
    if not source.startswith("/dev/loop"):
        return False
    try:
        backing = Path(f"/sys/block/{source[len('/dev/'):]}/loop/backing_file").read_text().strip()
    except OSError:
        return False
    backing = backing.removesuffix(" (deleted)")
    image = Path(backing)
    if not image.name.endswith(IMAGE_SUFFIX):
        return False
    return ((image.parent == path.parent.parent and image.name.startswith(IMAGE_PREFIX))
            or (image.parent == path.parent and image.name.startswith(f".{path.name}-")))


def leftovers_under(root: Path) -> list[Path]:
    """The mount points under ``root`` (not ``root`` itself) holding a workspace file system this module made:
    what killed harnesses left mounted there, each mount point once, from /proc/self/mountinfo."""
    root = Path(root).absolute()
    with contextlib.suppress(OSError):
        root = root.resolve()
    prefix = str(root).rstrip("/") + "/"
    found: dict[Path, None] = {}
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) <= 4 or not _unescape(fields[4]).startswith(prefix):
                continue
            after = fields[fields.index("-") + 1 :] if "-" in fields else []
            point = Path(_unescape(fields[4]))
            if len(after) > 1 and _is_ours(after[1], point):
                found[point] = None
    return list(found)


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
        work = Path(tmp) / "trial" / "work"  # its image in tmp
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
