"""The one spawn function: every process that runs or reads agent-controlled content starts here.

:func:`spawn` runs a command in its own session (so its own process group) and, where the kernel
offers it, its own cgroup (:mod:`rrma.contain.cgroups`): memory and process-count limits on the
whole tree, whatever it forks or detaches with ``setsid``, enforced by the kernel. A watchdog in
the harness enforces the wall clock and an output cap from outside, and reads the cgroup's
out-of-memory kills (or, without cgroups, polls the resident memory of the process group).
Whatever the program does (hang, fork, flood, allocate, segfault) it is killed as a unit (cgroup,
process group, never by name), and a labelled :class:`ProcessResult` comes back. The harness goes
on. With a :class:`~rrma.contain.sandbox.Policy` the program also runs in the bubblewrap sandbox
that policy declares (what it sees, writes and never sees), which dies with the harness. With
``live_output`` the output is also appended, as it arrives, to a fresh file only the harness
writes, for a view to follow (:mod:`rrma.contain.live`).
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import errno
import os
import resource
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rrma.contain import cgroups, disk, keyring, sandbox, seccomp
from rrma.contain import env as env_rule
from rrma.contain.cgroups import CgroupError, TrialCgroup
from rrma.contain.live import LiveWriter
from rrma.contain.sandbox import Policy
from rrma.trial import Budget, Status

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
HEAD_BYTES = 32 * 1024  # captured output: first and last 32 KiB are kept
TAIL_BYTES = 32 * 1024
TERM_GRACE_S = 1.0  # SIGTERM, then SIGKILL after this many seconds
DISK_POLL_S = 0.5  # how often the disk use of a running trial's writable directories is measured
# joins the cgroup(s) named in its arguments, then becomes the program: every process the program
# starts is born inside. Arguments: N, N cgroup.procs files, then the command.
CGROUP_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


# ----------------------------------------------------------------------------- limits


@dataclass
class ProcessResult:
    """What happened to one limited process (and its whole process group)."""

    status: Status  # ok, crash, timeout, oom, aborted
    returncode: int | None
    reason: str  # one line a person can act on: "exit code 1", "killed after 10.0 s wall clock"
    seconds: float
    peak_rss_mb: float
    output: str  # head and tail of stdout+stderr, or of stdout alone with stderr_apart (UTF-8, replacement on errors)
    output_bytes: int  # total bytes the program wrote, including what was not kept
    signal_name: str | None = None
    leftover_killed: int = 0  # processes of the group still alive after the leader exited
    guarded: bool = False  # ran in the bubblewrap sandbox of an Policy
    limits: str = "polling"  # how memory and processes were limited: "cgroup v1", "cgroup v2" or "polling"
    live_note: str | None = None  # why the live-output file was refused or stopped early (spawn's live_output)
    stderr: str = ""  # head and tail of stderr when spawn kept it apart (stderr_apart); else it is in output

    @property
    def tail(self) -> str:
        """The last ~40 lines of output: what feedback usually quotes."""
        return "\n".join(self.output.splitlines()[-40:])


def _live_processes() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, stat fields after the command name) of every live, non-zombie process, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # fields after the command name (which may contain spaces) start after the last ')'
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) > 2 and rest[0] != b"Z":
            yield int(entry), rest


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is ``pgid``."""
    return [pid for pid, rest in _live_processes() if int(rest[2]) == pgid]


TRIAL_TOKEN_ENV = "RRMA_TRIAL_TOKEN"  # set to a fresh random value in every limited process


def _token_members(token: str) -> list[int]:
    """Live (non-zombie) pids whose environment carries ``token``: the limited program's
    descendants, including any that left its process group with setsid()."""
    needle = f"{TRIAL_TOKEN_ENV}={token}".encode()
    found = []
    for pid, _ in _live_processes():
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def _rss_bytes(pids: Iterable[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * PAGE_SIZE
        except (OSError, IndexError, ValueError):
            continue
    return total


def group_rss_bytes(pgid: int) -> int:
    """Resident memory (bytes) of every live process in the process group ``pgid``, read from /proc."""
    return _rss_bytes(_group_members(pgid))


def _ancestors() -> set[int]:
    """This process and its ancestors (from /proc/<pid>/stat's parent field)."""
    out = set()
    pid = os.getpid()
    while pid > 0 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def stale_processes(workdir: Path | str) -> list[int]:
    """Live processes that may still belong to an earlier run of the trial in ``workdir``.

    Members of a cgroup made for that directory (by this harness or a dead one), and any process
    whose working directory lies inside it. A harness that was killed cannot have cleaned up; a
    resumed run must not start the trial again while one of these still writes there.
    """
    root = Path(workdir).resolve()
    found = set(cgroups.scope_members(root))
    ancestors = _ancestors()  # e.g. the shell a person ran `rrma-tui resume` from, cd'ed into the trial
    for pid, _ in _live_processes():
        if pid in ancestors or pid in found:
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            found.add(pid)
    return sorted(found)


_ACTIVE: set[int] = set()  # process groups of running limited commands (this process's own)
_ACTIVE_LOCK = threading.Lock()


def active_groups() -> list[int]:
    """Process groups of the limited commands running now in this process."""
    with _ACTIVE_LOCK:
        return sorted(_ACTIVE)


def kill_active_groups() -> int:
    """SIGKILL every process group this process started through spawn (a hard quit)."""
    with _ACTIVE_LOCK:
        groups = list(_ACTIVE)
    for pgid in groups:
        _killpg(pgid, signal.SIGKILL)
    return len(groups)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_own_group(proc: subprocess.Popen[Any], pgid: int, sig: int) -> None:
    """Send ``sig`` to the process group ``proc`` leads, only while that pgid is still ours.

    Once the leader has been reaped and the group is empty the kernel may hand the number to an
    unrelated process (pid_max is often 32768), so a late ``killpg`` could hit someone else's
    session: signal the group only while the leader is unreaped or members remain.
    """
    if proc.poll() is None or _group_members(pgid):
        _killpg(pgid, sig)


class _Capture:
    """Keeps the head and tail of a stream, counts bytes, feeds complete lines to a callback."""

    def __init__(self, on_line: Callable[[str], str | None] | None, max_line_chars: int = 65536) -> None:
        self.max_line_chars = max_line_chars  # a longer line reaches on_line cut to its last this many characters
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.total = 0
        self.on_line = on_line
        self.partial = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.abort_reason: str | None = None

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail and self.tail_len - len(self.tail[0]) >= TAIL_BYTES:
                self.tail_len -= len(self.tail.popleft())

    def feed_lines(self, raw: bytes) -> None:
        if self.on_line is None or self.abort_reason is not None:
            return
        text = self.partial + self.decoder.decode(raw)
        lines = text.split("\n")
        self.partial = lines.pop()[-self.max_line_chars:]
        for line in lines:
            reason = self.on_line(line.rstrip("\r"))
            if reason:
                self.abort_reason = reason
                return

    def text(self) -> str:
        head = bytes(self.head)
        tail = b"".join(self.tail)[-TAIL_BYTES:]
        kept = len(head) + len(tail)
        if self.total > kept:
            middle = f"\n[... {self.total - kept} bytes of output not kept ...]\n".encode()
            return (head + middle + tail).decode("utf-8", errors="replace")
        return (head + tail).decode("utf-8", errors="replace")


def _limits_refused(reason: str) -> ProcessResult:
    return ProcessResult(status=Status.crash, returncode=None, reason=reason, seconds=0.0, peak_rss_mb=0.0,
                         output=reason, output_bytes=0)


def _check_program(argv: list[str], cwd: Path | str) -> None:
    """A wrapped command would report a missing program as exit 127: keep the FileNotFoundError contract."""
    prog = argv[0]
    if not (Path(cwd, prog).is_file() if os.sep in prog else shutil.which(prog) is not None):
        raise FileNotFoundError(errno.ENOENT, "no such program", prog)


class SandboxRequired(RuntimeError):
    """A process's sandbox was required (``RRMA_FS_GUARD=require``) but cannot run here."""


@dataclass
class _Contained:
    """A command as it will start: ``argv`` (wrapped in bubblewrap when ``guarded``) and the seccomp
    program's descriptor the child inherits (closed by :meth:`close` once the child has started)."""

    argv: list[str]
    filter_fd: int | None = None
    guarded: bool = False

    def close(self) -> None:
        if self.filter_fd is not None:
            os.close(self.filter_fd)
            self.filter_fd = None


def _contained(argv: Sequence[str], cwd: Path | str, guard: Policy | None,
               scratch_bytes: int | None = None) -> _Contained:
    """``argv`` under ``guard``'s sandbox and seccomp filter where they can run here; bare where the
    guard is None or (mode ``auto``) bubblewrap cannot run. SandboxRequired where the sandbox or its
    filter is required (``RRMA_FS_GUARD=require`` or ``guard.required``) and cannot run.
    ``scratch_bytes``: the size of each private tmpfs (``/tmp``, ``/run``, home), or None (unsized)."""
    if guard is None:
        return _Contained(list(argv))
    required = guard.required or sandbox.mode() == "require"
    reason = sandbox.unavailable_reason()
    if reason is not None:
        if required:
            raise SandboxRequired(f"sandbox required ({sandbox.ENV_MODE}=require) but unavailable: {reason}")
        return _Contained(list(argv))
    no_filter = seccomp.unavailable_reason()
    if no_filter is not None and required:
        raise SandboxRequired(f"sandbox required ({sandbox.ENV_MODE}=require) but its seccomp filter is "
                              f"unavailable: {no_filter}")
    filter_fd = seccomp.program_fd() if no_filter is None else None
    return _Contained(guard.wrap(list(argv), cwd, seccomp_fd=filter_fd, scratch_bytes=scratch_bytes), filter_fd, True)


def _child_env(env: Mapping[str, str] | None, pass_env: Iterable[str], guard: Policy | None) -> dict[str, str]:
    """``env`` under the credential rule, passing the names the caller and the policy pass."""
    return env_rule.scrub(env, (*pass_env, *(guard.pass_env if guard is not None else ())))


def _launch(box: _Contained, cwd: Path | str, env: dict[str, str],
            **popen: Any) -> tuple[subprocess.Popen[bytes], keyring.ParentThread[subprocess.Popen[bytes]]]:
    """Start ``box`` from a parent thread in a fresh session keyring (:class:`rrma.contain.keyring.ParentThread`)."""
    fds = (box.filter_fd,) if box.filter_fd is not None else ()
    parent = keyring.ParentThread(lambda: subprocess.Popen(box.argv, cwd=str(cwd), env=env, pass_fds=fds, **popen))
    try:
        return parent.begin(), parent
    except BaseException:
        parent.release()
        raise
    finally:
        box.close()


def spawn(
    argv: list[str],
    *,
    cwd: Path | str,
    budget: Budget,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], str | None] | None = None,
    cancel: threading.Event | None = None,
    stdin_data: bytes | None = None,
    poll_s: float = 0.05,
    guard: Policy | None = None,
    secret_env: Mapping[str, str] | None = None,
    max_line_chars: int = 65536,
    pass_env: Iterable[str] = (),
    live_output: Path | None = None,
    stderr_apart: bool = False,
) -> ProcessResult:
    """Run ``argv`` in its own session under ``budget``; always returns, never raises for the
    program's behaviour (only for a command that cannot be started: FileNotFoundError).

    ``on_line`` sees each complete output line; returning a non-empty string aborts the run
    with that reason (status ``aborted``). ``cancel`` set from another thread aborts too.
    ``guard`` runs the program in the bubblewrap sandbox (see :mod:`rrma.contain.sandbox`) where that is
    possible here; ``RRMA_FS_GUARD=require`` makes an unguardable run a ``crash``. Memory and
    process counts are limited by a cgroup where possible (``RRMA_CGROUPS``, :mod:`rrma.contain.cgroups`).
    The environment is ``env`` (default: the harness's) under the one credential rule
    (:mod:`rrma.contain.env`): credential-named variables and URLs with passwords are removed, except the
    names in ``pass_env`` (a task passes them by name). ``secret_env`` is set after that: the one key
    a coding agent's process needs (agents/coding); trial programs never get one. The process starts
    with a fresh session keyring (:mod:`rrma.contain.keyring`) and, sandboxed, under the seccomp filter
    (:mod:`rrma.contain.seccomp`). ``max_line_chars`` bounds the line ``on_line`` sees (a longer one is
    cut to its end). ``live_output``: a path in a directory only the harness writes (never one the
    program can write or read); the output is appended there chunk by chunk while the program runs,
    up to ``budget.max_output_bytes`` (:class:`rrma.contain.live.LiveWriter`). A link or an existing
    file at that path is refused (``live_note`` says why) and the program runs all the same.
    ``stderr_apart``: stderr is read from a pipe of its own into ``ProcessResult.stderr`` (never seen by
    ``on_line``), and ``output`` holds stdout alone: what a scorer prints as its metric cannot be forged
    by agent text it echoes as a warning. Otherwise stderr is merged into ``output`` as written.

    Disk: a workspace mounted as a capped file system (:mod:`rrma.contain.disk`) is watched through its
    ``statvfs``; other writable directories are walked (:class:`_DiskWatch`). In the sandbox, ``/tmp``,
    ``/run`` and home are tmpfs capped at ``budget.disk_mb`` each where bubblewrap can size them (and
    ``RRMA_DISK_CAP`` is not ``off``). A program that ends for want of space in a capped file system
    (full, or ``No space left on device`` in its output) gets status ``disk``.
    """
    started = time.monotonic()
    if guard is not None and sandbox.unavailable_reason() is None:
        _check_program(argv, cwd)
    scratch_bytes = budget.disk_mb * 2**20 if disk.mode() != "off" and sandbox.sized_scratch() else None
    try:
        box = _contained(argv, cwd, guard, scratch_bytes)
    except SandboxRequired as exc:
        return _limits_refused(str(exc))
    guarded = box.guarded
    group: TrialCgroup | None = None
    no_cgroup = cgroups.unavailable_reason()
    if no_cgroup is None:
        layout, _ = cgroups.detect()
        assert layout is not None
        try:
            group = TrialCgroup.create(layout, memory_bytes=budget.memory_mb * 2**20, max_pids=budget.max_processes,
                                       label=cgroups.scope_tag(cwd))
        except CgroupError as exc:
            no_cgroup = str(exc)
    if group is None and cgroups.mode() == "require":
        box.close()
        return _limits_refused(f"cgroup limits required ({cgroups.ENV_MODE}=require) but unavailable: {no_cgroup}")
    if not guarded and shutil.which("setpriv") is not None:
        # without the sandbox's --die-with-parent: the program at least dies with this thread
        _check_program(argv, cwd)
        box.argv = ["setpriv", "--pdeathsig", "KILL", "--", *box.argv]
    if group is not None:
        _check_program(argv, cwd)
        files = group.procs_files()
        box.argv = ["/bin/sh", "-c", CGROUP_JOIN, "rrma-cgroup", str(len(files)), *files, *box.argv]
    token = secrets.token_hex(8)
    child_env = {**_child_env(env, pass_env, guard), **(secret_env or {}), TRIAL_TOKEN_ENV: token}
    live = LiveWriter(live_output, budget.max_output_bytes) if live_output is not None else None
    try:
        proc, parent = _launch(
            box, cwd, child_env,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr_apart else subprocess.STDOUT,
            start_new_session=True,  # own session => own process group, pgid == pid
            close_fds=True,
        )
    except BaseException:
        if group is not None:
            group.remove()
        if live is not None:
            live.close()
        raise
    pgid = proc.pid
    with _ACTIVE_LOCK:
        _ACTIVE.add(pgid)
    try:
        disk_paths = tuple(guard.writable) if guard is not None and guarded else (Path(cwd),)
        result = _supervise(proc, pgid, token, started, budget, on_line, cancel, stdin_data, poll_s, group, guarded,
                            max_line_chars, disk_paths, live, scratch_capped=guarded and scratch_bytes is not None)
        result.guarded = guarded
        if live is not None:
            result.live_note = live.refused or live.stopped
        result.limits = group.layout.describe().split(" (")[0] if group is not None else "polling"
        return result
    finally:
        parent.release()  # the child is gone: its parent thread may end (with its parent-death signal)
        if live is not None:
            live.close()  # drops its lock: the file no longer reads as live
        with _ACTIVE_LOCK:
            _ACTIVE.discard(pgid)
        if group is not None:
            group.remove()


def start(argv: Sequence[str], *, cwd: Path | str, guard: Policy | None, env: Mapping[str, str] | None = None,
          pass_env: Iterable[str] = (), **popen: Any) -> subprocess.Popen[bytes]:
    """Start a long-lived contained process (a warm ``coqtop``, a Lean REPL) on pipes; it is the caller's.

    Such a process answers many requests, so it cannot run under :func:`spawn` (which waits for its
    end); it gets spawn's containment instead: ``guard`` wrapped around it (bubblewrap under the
    seccomp filter), the credential rule for its environment, a fresh session keyring, and a parent
    thread that lives as long as the process (its ``--die-with-parent`` follows that thread, so a
    process started from a short-lived worker thread would otherwise die with it). ``guard`` None
    (``RRMA_FS_GUARD=off``): bare. Where bubblewrap cannot run, mode ``auto`` starts it bare and
    ``require`` (or ``guard.required``) raises :class:`SandboxRequired`. ``popen``: more
    ``subprocess.Popen`` arguments (pipes, ``start_new_session``).
    """
    proc, parent = _launch(_contained(argv, cwd, guard), cwd, _child_env(env, pass_env, guard), **popen)
    parent.outlive(proc)
    return proc


class _DiskWatch:
    """How much a running program holds in its writable directories, measured now and then.

    A trial could fill the disk the run log lives on. A workspace the executor mounted as a capped
    file system of its own (:mod:`rrma.contain.disk`) is bounded by the kernel; here its ``statvfs``
    is read at every poll (it counts unlinked open files and inodes too), and a full one ends the
    trial with status ``disk``. Any other writable directory is walked (no link followed, allocated
    blocks counted, hard links once) at most every :data:`DISK_POLL_S` seconds, and never more than
    a tenth of the time; past ``limit`` bytes the trial is killed with status ``disk``. That walk
    sees directory entries only: an unlinked open file, directory blocks and inodes escape it.
    (``/tmp``, ``/run`` and home inside the sandbox are memory, counted by the memory limit, and
    capped at the budget each where bubblewrap can size them.)
    """

    def __init__(self, paths: tuple[Path, ...], limit: int) -> None:
        found = [(p, disk.capped(p)) for p in paths]
        self.capped = [ws for _, ws in found if ws is not None]
        self.paths = tuple(p for p, ws in found if ws is None)
        self.limit = limit
        self.next = 0.0

    def usage(self) -> int:
        total = 0
        seen: set[tuple[int, int]] = set()
        stack = [str(p) for p in self.paths]
        while stack:
            top = stack.pop()
            try:
                entries = list(os.scandir(top))
            except OSError:
                continue
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
                if total > self.limit:
                    return total
        return total

    def full(self) -> str | None:
        """What is used up when a capped workspace is full now, or None."""
        for workspace in self.capped:
            why = workspace.full()
            if why is not None:
                return f"its {workspace.size_bytes / 2**20:.0f} MiB disk budget, a file system of that size, is used up ({why})"
        return None

    def check(self, now: float) -> str | None:
        full = self.full()
        if full is not None:
            return f"killed: the trial's workspace is full: {full}"
        if not self.paths or now < self.next:
            return None
        t0 = time.monotonic()
        used = self.usage()
        self.next = now + max(DISK_POLL_S, 10 * (time.monotonic() - t0))
        if used > self.limit:
            return (f"killed: more than {self.limit / 2**20:.0f} MiB written to the trial's directories "
                    f"(disk budget; {used / 2**20:.0f} MiB found)")
        return None


def _supervise(
    proc: subprocess.Popen[bytes],
    pgid: int,
    token: str,
    started: float,
    budget: Budget,
    on_line: Callable[[str], str | None] | None,
    cancel: threading.Event | None,
    stdin_data: bytes | None,
    poll_s: float,
    group: TrialCgroup | None = None,
    guarded: bool = False,
    max_line_chars: int = 65536,
    disk_paths: tuple[Path, ...] = (),
    live: LiveWriter | None = None,
    scratch_capped: bool = False,
) -> ProcessResult:
    with contextlib.suppress(OSError, ValueError):
        resource.prlimit(proc.pid, resource.RLIMIT_CORE, (0, 0))  # no core dumps on segfault
    capture = _Capture(on_line, max_line_chars)
    # stderr on a pipe of its own (spawn's stderr_apart): kept apart, never fed to on_line
    err_capture = _Capture(None) if proc.stderr is not None else None
    kill_status: list[tuple[Status, str]] = []
    term_sent: list[float] = []  # when SIGTERM went out; SIGKILL follows TERM_GRACE_S later
    kill_lock = threading.Lock()
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()

    def signal_all(sig: int) -> None:
        _killpg(pgid, sig)
        if group is not None:  # members that left the process group (setsid) are still in the cgroup
            for pid in group.members():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    def request_kill(status: Status, reason: str) -> None:
        with kill_lock:
            if kill_status:
                return
            kill_status.append((status, reason))
            term_sent.append(time.monotonic())
        signal_all(signal.SIGTERM)

    def written() -> int:
        return capture.total + (err_capture.total if err_capture is not None else 0)

    def reader(fd: int, into: _Capture) -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            into.feed(chunk)
            if live is not None:
                live.write(chunk)  # at once: a follower sees it on its next poll
            into.feed_lines(chunk)
            if into.abort_reason and not kill_status:
                request_kill(Status.aborted, into.abort_reason)
            if written() > budget.max_output_bytes and not kill_status:
                request_kill(
                    Status.crash,
                    f"output flood: more than {budget.max_output_bytes} bytes written; killed",
                )

    if stdin_data is not None and proc.stdin is not None:
        def writer() -> None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.write(stdin_data)
                proc.stdin.close()
        threading.Thread(target=writer, daemon=True).start()

    read_threads = [threading.Thread(target=reader, args=(out_fd, capture), name=f"capture-{pgid}", daemon=True)]
    if err_capture is not None:
        assert proc.stderr is not None
        read_threads.append(threading.Thread(target=reader, args=(proc.stderr.fileno(), err_capture),
                                             name=f"capture-err-{pgid}", daemon=True))
    for thread in read_threads:
        thread.start()
    limit_bytes = budget.memory_mb * 1024 * 1024
    peak = 0
    next_rss = 0.0
    disk_watch = _DiskWatch(disk_paths, budget.disk_mb * 2**20)

    def oom_reason() -> str:
        return (f"killed: memory over the {budget.memory_mb} MiB budget (the kernel's out-of-memory killer "
                "ended a process of the trial at its cgroup limit)")

    while proc.poll() is None:
        now = time.monotonic()
        elapsed = now - started
        if elapsed > budget.seconds and not kill_status:
            request_kill(Status.timeout, f"killed after {budget.seconds:g} s wall clock (budget)")
        if group is not None:
            # the kernel enforces the limit on the whole tree; a kill of any member ends the trial
            if group.oom_kills() and not kill_status:
                request_kill(Status.oom, oom_reason())
        elif now >= next_rss:
            rss = _rss_bytes(_group_members(pgid))
            peak = max(peak, rss)
            if rss > limit_bytes and not kill_status:
                request_kill(
                    Status.oom,
                    f"killed: resident memory {rss / 2**20:.0f} MiB over the {budget.memory_mb} MiB budget",
                )
            # the /proc scan costs ~1 ms; poll it densely at first, then every 0.1 s
            next_rss = now + (poll_s if elapsed < 2 else 0.1)
        if cancel is not None and cancel.is_set() and not kill_status:
            request_kill(Status.aborted, "cancelled: the run is stopping")
        if not kill_status:
            over = disk_watch.check(now)
            if over is not None:
                request_kill(Status.disk, over)
        # SIGKILL only from this loop, while the leader is unreaped and so still holds the pgid: a
        # delayed kill from a timer could hit a recycled pid (pid_max is often 32768)
        if term_sent and now - term_sent[0] >= TERM_GRACE_S:
            signal_all(signal.SIGKILL)
        # wait for the leader up to poll_s: an exit is seen at once, not at the next tick (a short trial
        # would otherwise always cost a whole poll interval)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=poll_s)
    returncode = proc.returncode
    if guarded and returncode is not None and 128 < returncode <= 128 + 64:
        returncode = -(returncode - 128)  # bwrap reports a child killed by signal N as 128 + N
    # the leader is gone; anything left in its group (forked children) is killed and awaited
    leftovers = _group_members(pgid)
    if leftovers:
        _killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
    if group is not None:
        # everything the program started, wherever it went (setsid, a dropped environment)
        oom_kills = group.oom_kills()
        peak = max(peak, group.peak_bytes())
        escaped = [pid for pid in group.members() if pid not in leftovers]
        group.kill()
        if oom_kills and not kill_status:
            kill_status.append((Status.oom, oom_reason()))
    else:
        # descendants that left the group (setsid) still carry the token: kill those too. (A
        # program can shed the token with a fresh environment: only a cgroup has no such gap.)
        escaped = [pid for pid in _token_members(token) if pid not in leftovers]
        for pid in escaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if escaped:
            deadline = time.monotonic() + 5
            while _token_members(token) and time.monotonic() < deadline:
                time.sleep(0.02)
    leftovers = [*leftovers, *escaped]
    for thread in read_threads:
        thread.join(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    seconds = time.monotonic() - started
    output = capture.text()
    sig_name = None
    if returncode is not None and returncode < 0:
        with contextlib.suppress(ValueError):
            sig_name = signal.Signals(-returncode).name
    errors = err_capture.text() if err_capture is not None else ""
    full = disk_watch.full() if not kill_status else None  # still full when the program ended
    if kill_status:
        status, reason = kill_status[0]
    elif full is not None:
        status, reason = Status.disk, f"the trial's workspace was full when it ended (exit code {returncode}): {full}"
    elif returncode == 0:
        status, reason = Status.ok, "exit code 0"
    elif sig_name == "SIGKILL":
        status, reason = Status.oom, "killed by SIGKILL from outside the harness (likely the kernel OOM killer)"
    elif sig_name is not None:
        status, reason = Status.crash, f"killed by signal {sig_name}"
    elif (disk_watch.capped or scratch_capped) and disk.hit_enospc(output + errors):
        status, reason = Status.disk, (f"out of disk: a write failed for want of space (No space left on device) in "
                                       f"a file system capped at the {budget.disk_mb} MiB disk budget (exit code "
                                       f"{returncode})")
    elif _looks_like_oom(output + errors):
        status, reason = Status.oom, f"out of memory (exit code {returncode})"
    else:
        status, reason = Status.crash, f"exit code {returncode}"
    return ProcessResult(
        status=status,
        returncode=returncode,
        reason=reason,
        seconds=seconds,
        peak_rss_mb=peak / 2**20,
        output=output,
        output_bytes=capture.total + (err_capture.total if err_capture is not None else 0),
        signal_name=sig_name,
        leftover_killed=len(leftovers),
        stderr=errors,
    )


OOM_MARKERS = ("MemoryError", "CUDA out of memory", "OutOfMemoryError", "std::bad_alloc", "Cannot allocate memory")


def _looks_like_oom(output: str) -> bool:
    tail = output[-4000:]
    return any(marker in tail for marker in OOM_MARKERS)
