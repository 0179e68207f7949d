"""Reading and writing where a contained program could have planted links.

A trial's workspace, a coding agent's working copy and an oracle's output directory are written
by programs the harness does not trust. A program that leaves ``oracle_eval.json ->
../../../events.jsonl`` (or replaces its whole working root with ``work -> ~/.ssh``) turns the
harness's next ``open()`` into a write to the run log or a read of a private key, outside every
sandbox. The rule: **the harness never follows a link it did not make**. Every function here
walks a path one component at a time from a directory descriptor, with ``O_NOFOLLOW`` on each
step, so a symbolic link anywhere (the root included) is refused with :class:`LinkRefused`, never
followed; and what the harness writes goes to directories no contained program can write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkRefused(OSError):
    """A path that goes through a symbolic link (or is not the kind of file expected)."""


def _parts(rel: str | PurePosixPath) -> list[str]:
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if not parts or parts[0] == "/" or ".." in parts:
        raise LinkRefused(f"{rel}: not a plain relative path inside the directory")
    return parts


def open_root(root: Path | str) -> int:
    """A descriptor of the directory ``root`` itself, refusing a root that is a link.

    Links in the parents of ``root`` are the harness's own layout (e.g. /tmp on some systems) and
    are followed; the last component, which a contained program could have replaced, is not.
    """
    path = Path(root)
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.open(path.name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if os.path.islink(path):
            raise LinkRefused(f"{path} is a symbolic link (to {os.readlink(path)}); not followed") from None
        raise exc
    finally:
        os.close(parent)


def _walk_to_parent(root_fd: int, parts: list[str], rel: str | PurePosixPath, *, create: bool = False) -> int:
    fd = os.dup(root_fd)
    try:
        for name in parts[:-1]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if _is_link(fd, name):
                    raise LinkRefused(f"{rel}: {name} is a symbolic link; not followed") from None
                raise exc
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_bytes(root: Path | str, rel: str | PurePosixPath, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``root/rel``; LinkRefused if any component is a link or the
    file is not a regular file; ValueError past ``limit`` bytes."""
    parts = _parts(rel)
    root_fd = open_root(root)
    try:
        parent = _walk_to_parent(root_fd, parts, rel)
    finally:
        os.close(root_fd)
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=parent)
        except OSError as exc:
            if _is_link(parent, parts[-1]):
                raise LinkRefused(f"{rel} is a symbolic link; not followed") from None
            raise exc
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise LinkRefused(f"{rel} is not a regular file")
        data = fh.read(limit + 1 if limit is not None else -1)
    if limit is not None and len(data) > limit:
        raise ValueError(f"{rel}: more than {limit} bytes")
    return data


def write_bytes(root: Path | str, rel: str | PurePosixPath, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``root/rel`` as a new file (created directories included), never through a link.

    Whatever was at the name is replaced (an existing link is removed, not followed): the new
    content goes to a fresh temporary name in the same directory and is renamed over it.
    """
    parts = _parts(rel)
    root_fd = open_root(root)
    try:
        parent = _walk_to_parent(root_fd, parts, rel, create=True)
    finally:
        os.close(root_fd)
    try:
        tmp = f".{parts[-1]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.rename(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def walk_files(root: Path | str, *, skip_dirs: frozenset[str] = frozenset()) -> Iterator[tuple[str, int]]:
    """(relative POSIX path, kind) of every entry under ``root``, depth first, sorted, no link followed.

    ``kind`` is ``stat.S_IFREG`` for regular files and ``stat.S_IFLNK`` for links (reported, never
    entered); other kinds (fifos, sockets, devices) come as their ``S_IFMT`` bits. A root that is a
    link raises LinkRefused.
    """
    root_fd = open_root(root)
    try:
        yield from _walk(root_fd, "", skip_dirs)
    finally:
        os.close(root_fd)


def _walk(dir_fd: int, prefix: str, skip_dirs: frozenset[str]) -> Iterator[tuple[str, int]]:
    for name in sorted(os.listdir(dir_fd)):
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        rel = f"{prefix}{name}"
        kind = stat.S_IFMT(st.st_mode)
        if kind == stat.S_IFDIR:
            if name in skip_dirs:
                continue
            sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                yield from _walk(sub, rel + "/", skip_dirs)
            finally:
                os.close(sub)
        else:
            yield rel, kind


def link_free(root: Path | str, rel: str | PurePosixPath) -> Path:
    """``root/rel``, checked to go through no link on any existing component, ``root`` included (LinkRefused).

    For handing a path a contained program wrote to another process (a model directory to a
    scorer): valid while nothing the program started still runs (:func:`rrma.contain.spawn.spawn`
    ensures that when it returns). Reads by the harness itself should use :func:`read_bytes`.
    """
    parts = _parts(rel)
    fd = open_root(root)
    try:
        inner = _walk_to_parent(fd, [*parts, ""], rel)  # every part a real directory, or the last a file
        os.close(inner)
    except FileNotFoundError:
        pass  # a part that does not exist (yet) is no link, and the parts before it were walked without one
    except NotADirectoryError:
        inner = _walk_to_parent(fd, parts, rel)
        try:
            if _is_link(inner, parts[-1]):
                raise LinkRefused(f"{rel} is a symbolic link; not followed") from None
        finally:
            os.close(inner)
    finally:
        os.close(fd)
    return Path(root) / PurePosixPath(*parts)


def fresh_dir(path: Path) -> Path:
    """``path`` as a new, empty directory the harness owns (whatever was there, link or tree, is
    removed without following links)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)  # rmtree never follows links inside the tree
    path.mkdir(parents=True)
    return path
