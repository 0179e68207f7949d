"""The system calls no contained process may make: a seccomp filter that bubblewrap loads.

Why: namespaces hide files and processes, but some kernel objects are not namespaced. The
kernel keyring is the sharp one: a trial that inherited the harness's session keyring could
read, overwrite or add the keys of the person running it (``keyctl``, ``add_key``,
``request_key``); ``ptrace`` and ``process_vm_readv`` reach other processes' memory wherever the
user may. The filter refuses those calls with ``EPERM`` (an error a well-behaved program can
report, never a kill), and kills a call made through a foreign system-call ABI (a 32-bit
``int 0x80`` ``keyctl`` on x86_64 would otherwise slip past numbers written for the native one).
The rest of :data:`REFUSED` are kernel-wide actions that a process without capabilities is
already refused; listing them makes the refusal independent of how the namespaces were set up.

The filter is compiled once per process by libseccomp, through its Python binding (Debian's
``python3-seccomp`` where the interpreter sees it, else PyPI's ``pyseccomp``: the same API), and
handed to bubblewrap as a file descriptor (``bwrap --seccomp FD``) so that it applies to the
program and to everything the program starts. A seccomp filter can never be removed.
"""

from __future__ import annotations

import errno
import functools
import os
from types import ModuleType

REFUSED: tuple[str, ...] = (
    # keys: every way to read, change or add a key of any keyring
    "keyctl", "add_key", "request_key",
    # other processes' memory and file descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # kernel interfaces a trial never needs
    "perf_event_open", "bpf", "userfaultfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fspick",
    "setns", "unshare", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "open_by_handle_at",
    "name_to_handle_at", "lookup_dcookie", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "iopl", "ioperm", "vhangup",
)


class SeccompUnavailable(RuntimeError):
    """libseccomp or its Python binding cannot be used here."""


def _binding() -> ModuleType:
    try:
        import seccomp  # type: ignore[import-not-found]  # Debian's python3-seccomp

        return seccomp  # type: ignore[no-any-return]
    except ImportError:
        pass
    try:
        import pyseccomp

        return pyseccomp
    except (ImportError, OSError) as exc:  # OSError: the binding is there, libseccomp.so.2 is not
        raise SeccompUnavailable(f"libseccomp's Python binding is not usable ({exc}); `pip install pyseccomp` "
                                 "and `apt-get install libseccomp2`") from None


@functools.cache
def program() -> bytes:
    """The compiled BPF program: the same bytes for every process this harness starts."""
    lib = _binding()
    try:
        flt = lib.SyscallFilter(defaction=lib.ALLOW)
        for name in REFUSED:
            try:
                flt.add_rule(lib.ERRNO(errno.EPERM), name)
            except (RuntimeError, ValueError, OSError):
                continue  # a call this architecture does not have (iopl on arm64): nothing to refuse
        fd = os.memfd_create("rrma-seccomp-build", os.MFD_CLOEXEC)
        with os.fdopen(fd, "w+b") as fh:
            flt.export_bpf(fh)
            fh.seek(0)
            data = fh.read()
    except (RuntimeError, ValueError, OSError) as exc:
        raise SeccompUnavailable(f"libseccomp could not compile the filter: {exc}") from None
    if not data or len(data) % 8:
        raise SeccompUnavailable(f"libseccomp produced a malformed filter ({len(data)} bytes)")
    return data


def unavailable_reason() -> str | None:
    """None when the filter can be built here, else why not."""
    try:
        program()
    except SeccompUnavailable as exc:
        return str(exc)
    return None


def program_fd() -> int:
    """A fresh, readable descriptor holding :func:`program` at offset 0 (bwrap reads it to the end,
    so each sandbox needs its own). Inheritable; the caller closes it once the child started."""
    fd = os.memfd_create("rrma-seccomp", 0)
    try:
        os.write(fd, program())
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
