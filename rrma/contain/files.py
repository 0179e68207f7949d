"""Reading and writing where a contained program could have planted links.

A trial's workspace, a coding agent's working copy and an oracle's output directory are written
by programs the harness does not trust. A program that leaves ``oracle_eval.json ->
../../../events.jsonl`` (or replaces its whole working root with ``work -> ~/.ssh``) turns the
harness's next ``open()`` into a write to the run log or a read of a private key, outside every
sandbox. The rule: **the harness never follows a link it did not make**. Every function here
walks a path one component at a time from a directory descriptor, with ``O_NOFOLLOW`` on each
step, so a symbolic link anywhere (the root included) is refused with :class:`LinkRefused`, never
followed; and what the harness writes goes to directories no contained program can write.

The same programs choose the *shape* of those trees: a directory chain thousands deep, a
million entries, sparse files of any apparent size, hard links to one file under many names,
folders chmod-ed unreadable. The two tree functions here hold whatever shape they get:

* :func:`remove_tree` deletes a tree iteratively (no recursion, at most two descriptors open,
  every step relative to a directory descriptor, so depth and ``PATH_MAX`` do not matter),
  restores write permission on the folders it must empty, never follows a link (a planted link
  goes, its target stays), and never raises: what it could not delete comes back as a
  :class:`Removal` the caller names in a note.
* :func:`walk_files` lists a tree iteratively with the same descriptors, counts every entry
  against a cap and reads only the files its caller asks for, each at most once however many
  hard links name it, against a cap of bytes; past a cap it stops with :class:`TreeTooLarge`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import NamedTuple

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
DEFAULT_MAX_ENTRIES = 10_000  # entries (files, folders, links) one walk of an agent-made tree looks at
_BATCH = 1024  # names taken from a folder at a time while it is emptied (memory stays flat in a huge folder)
_SHOWN = 240  # characters of a path a removal note shows (a chain 100,000 deep has a path 200,000 long)


class LinkRefused(OSError):
    """A path that goes through a symbolic link (or is not the kind of file expected)."""


class TreeTooLarge(Exception):
    """A walk stopped at a cap: more entries, or more bytes to read, than its caller allows."""

    def __init__(self, what: str, limit: int, seen: int) -> None:
        self.what = what  # "entries" or "bytes"
        self.limit = limit
        self.seen = seen  # how many were counted when the walk stopped (more than limit)
        super().__init__(f"more than {limit} {what} (stopped at {seen})")


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


def read_bytes(root: Path | str, rel: str | PurePosixPath, *, limit: int | None = None,
               truncate: bool = False) -> bytes:
    """The bytes of the regular file ``root/rel``; LinkRefused if any component is a link or the
    file is not a regular file; ValueError past ``limit`` bytes (with ``truncate``: its first
    ``limit`` bytes, the rest never read)."""
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
        if truncate:
            return data[:limit]
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


class TreeEntry(NamedTuple):
    """One entry :func:`walk_files` met (folders are entered, not listed)."""

    path: str  # relative POSIX path
    kind: int  # S_IFMT bits: stat.S_IFREG, stat.S_IFLNK (never followed), a fifo, socket or device
    size: int  # apparent size of a regular file in bytes (a sparse file counts whole), else 0
    inode: tuple[int, int]  # (st_dev, st_ino): the hard links of one file share it
    data: bytes | None = None  # the content, for a file the caller asked to read (None: not read)


@dataclass
class _Level:
    """A folder on the walk's path down: its identity and the names in it still to visit."""

    name: str
    ident: tuple[int, int]
    names: list[str] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)  # removal only: names that stay (their removal failed)
    listed: bool = False  # removal only: ``names`` held all that was left (no need to look again once done)


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _climb(fd: int, expected: tuple[int, int]) -> int:
    """The parent of the folder ``fd``, checked to be the folder the walk came down from; ``fd`` is
    closed when the parent is returned (and left to the caller when this raises).

    Going up by ``..`` keeps one descriptor open however deep a walk goes; the check makes a tree that
    was moved meanwhile end the walk (LinkRefused) instead of walking somewhere else.
    """
    up = os.open("..", _DIR_FLAGS, dir_fd=fd)
    try:
        same = _ident(os.fstat(up)) == expected
    except BaseException:
        os.close(up)
        raise
    if not same:
        os.close(up)
        raise LinkRefused("the tree was moved while the harness walked it; stopped")
    os.close(fd)
    return up


def _listing(fd: int, room: int, entries_cap: int, seen: int) -> list[str]:
    """The names in folder ``fd``, largest first (the walk pops the smallest); TreeTooLarge past ``room``."""
    names: list[str] = []
    with os.scandir(fd) as it:
        for entry in it:
            names.append(entry.name)
            if len(names) > room:
                raise TreeTooLarge("entries", entries_cap, seen + len(names))
    names.sort(reverse=True)
    return names


def walk_files(root: Path | str, *, skip_dirs: frozenset[str] = frozenset(),
               max_entries: int = DEFAULT_MAX_ENTRIES, read: Callable[[str, int], bool] | None = None,
               max_file_bytes: int | None = None, max_bytes: int | None = None) -> Iterator[TreeEntry]:
    """Every entry under ``root`` but folders, depth first in name order, no link followed, within caps.

    Links are reported (``kind`` ``S_IFLNK``), never entered; a root that is a link raises
    LinkRefused. The walk is iterative and holds one descriptor, going up by ``..`` (checked), so a
    chain of folders of any depth is walked like a flat one. Every name met (folders and the
    ``skip_dirs`` not entered included) counts against ``max_entries``; past it TreeTooLarge.

    A regular file is read only when ``read(path, size)`` says so and it is at most
    ``max_file_bytes`` (a larger one comes with ``data`` None: the caller sees its size). The bytes
    of every file handed back with data count against ``max_bytes`` (TreeTooLarge past it), and
    hard links to one file are read once: names do not multiply what is read, nor sparse files
    what is counted (their apparent size counts). An error reading a folder raises OSError.
    """
    fd = open_root(root)
    try:
        seen = 0
        delivered = 0
        contents: dict[tuple[int, int], bytes] = {}  # read files by inode: a hard link is not read again
        stack = [_Level("", _ident(os.fstat(fd)), _listing(fd, max_entries, max_entries, 0))]
        prefix: list[str] = []
        while stack:
            level = stack[-1]
            if not level.names:
                stack.pop()
                if stack:
                    fd = _climb(fd, stack[-1].ident)
                    prefix.pop()
                continue
            name = level.names.pop()
            seen += 1
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            kind = stat.S_IFMT(st.st_mode)
            if kind == stat.S_IFDIR:
                if name in skip_dirs:
                    continue
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                try:
                    names = _listing(sub, max_entries - seen, max_entries, seen)
                except BaseException:
                    os.close(sub)
                    raise
                os.close(fd)
                fd = sub
                stack.append(_Level(name, _ident(st), names))
                prefix.append(name + "/")
                continue
            rel = "".join(prefix) + name
            data = None
            size = st.st_size if kind == stat.S_IFREG else 0
            if (kind == stat.S_IFREG and read is not None and (max_file_bytes is None or size <= max_file_bytes)
                    and read(rel, size)):
                if max_bytes is not None and delivered + size > max_bytes:
                    raise TreeTooLarge("bytes", max_bytes, delivered + size)
                data = contents.get(_ident(st))
                if data is None:
                    data = _read_at(fd, name, st, rel)
                    contents[_ident(st)] = data
                delivered += len(data)
            yield TreeEntry(rel, kind, size, _ident(st), data)
    finally:
        os.close(fd)


def _read_at(dir_fd: int, name: str, st: os.stat_result, rel: str) -> bytes:
    """The regular file ``name`` in folder ``dir_fd``, the one ``st`` describes (never through a link)."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if _is_link(dir_fd, name):
            raise LinkRefused(f"{rel} became a symbolic link; not followed") from None
        raise exc
    with os.fdopen(fd, "rb") as fh:
        now = os.fstat(fh.fileno())
        if not stat.S_ISREG(now.st_mode) or _ident(now) != _ident(st):
            raise LinkRefused(f"{rel} was replaced while the harness read the tree")
        return fh.read(st.st_size)  # the size the caps were checked against, even if it grew since


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


@dataclass(frozen=True)
class Removal:
    """What :func:`remove_tree` could not delete: nothing (``complete``), or how much and the first of it."""

    path: str
    left: int = 0  # entries whose own removal failed (their folders, left non-empty, are not counted again)
    first: str = ""  # the first of them and why
    moved_to: str = ""  # where :func:`clear` moved the leftover so that the path could be used again

    @property
    def complete(self) -> bool:
        return self.left == 0

    def note(self) -> str:
        """One line naming the leftover (for a ``note`` event)."""
        where = f"; moved aside to {self.moved_to}" if self.moved_to else ""
        return (f"could not remove all of {self.path}: {self.left} entr{'y' if self.left == 1 else 'ies'} left "
                f"(first: {self.first}){where}")


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN // 2]}...{text[-_SHOWN // 2:]}"


class _Tally:
    """The failures of one removal: a count and the first, with its path relative to the tree."""

    def __init__(self) -> None:
        self.left = 0
        self.first = ""

    def fail(self, levels: list[_Level], name: str, why: str | OSError) -> None:
        self.left += 1
        if not self.first:
            rel = "/".join([*(lv.name for lv in levels[1:]), name]) or "."
            if isinstance(why, OSError):
                why = why.strerror or str(why)
            self.first = f"{_shown(rel)}: {why}"


def _open_emptiable(dir_fd: int, name: str, mode: int) -> int:
    """Folder ``name`` (``mode``: its lstat mode) opened, never through a link, with the owner's read,
    write and search bits set: an agent may have taken them from its own folders, and the harness
    must empty them."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        # only a folder gets here (the caller lstat-ed it); nothing of the tree runs any more to swap it
        os.chmod(name, 0o700, dir_fd=dir_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        mode = os.fstat(fd).st_mode
    if mode & 0o700 != 0o700:
        with contextlib.suppress(OSError):  # not ours: what cannot be deleted in it is reported
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    return fd


def _next_names(fd: int, failed: set[str]) -> list[str]:
    """Up to _BATCH names still in folder ``fd`` (those whose removal failed are passed over)."""
    names: list[str] = []
    with os.scandir(fd) as it:
        for entry in it:
            if entry.name not in failed:
                names.append(entry.name)
                if len(names) >= _BATCH:
                    break
    return names


def _empty(fd: int, tally: _Tally) -> None:
    """Delete everything in folder ``fd`` (closed when done): depth first with one descriptor, going
    up by a checked ``..``; a failure is tallied and the walk goes on with the next name."""
    try:
        levels = [_Level("", _ident(os.fstat(fd)))]
        while levels:
            level = levels[-1]
            if not level.names:
                # a folder whose last listing was whole is empty now but for what failed: nothing runs to add more
                level.names = [] if level.listed else _next_names(fd, level.failed)
                level.listed = len(level.names) < _BATCH
                if not level.names:
                    if len(levels) == 1:
                        return
                    done = levels.pop()
                    fd = _climb(fd, levels[-1].ident)
                    try:
                        os.rmdir(done.name, dir_fd=fd)
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        if not (done.failed and exc.errno == errno.ENOTEMPTY):  # else counted inside it
                            tally.fail(levels, done.name, exc)
                        levels[-1].failed.add(done.name)
                    continue
            name = level.names.pop()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    os.unlink(name, dir_fd=fd)  # a link goes, its target stays
                    continue
                if st.st_dev != level.ident[0]:
                    tally.fail(levels, name, "another file system is mounted there; not entered")
                    level.failed.add(name)
                    continue
                sub = _open_emptiable(fd, name, st.st_mode)
            except FileNotFoundError:
                continue
            except OSError as exc:
                tally.fail(levels, name, exc)
                level.failed.add(name)
                continue
            os.close(fd)
            fd = sub
            levels.append(_Level(name, _ident(st)))
    finally:
        os.close(fd)


def remove_tree(path: Path | str) -> Removal:
    """Delete ``path`` and everything under it without following any link, whatever its depth; never raises.

    ``path`` itself may be a folder, a file or a link (a link is removed, never followed). Links in
    the parents of ``path`` are the harness's own layout and are followed. Folders an agent made
    unwritable or unreadable get their owner's permissions back; what still cannot be deleted (a
    file the harness may not remove, a file system mounted inside) is left, counted and named in the
    returned :class:`Removal`. Iterative: a chain of folders 100,000 deep is no deeper for it than
    one, and no path longer than one name is ever handed to the kernel.
    """
    target = Path(path)
    tally = _Tally()
    try:
        parent = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return Removal(str(target))
    except OSError as exc:
        return Removal(str(target), 1, f"{target.parent}: {exc.strerror or exc}")
    try:
        st = os.stat(target.name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(target.name, dir_fd=parent)
        else:
            _empty(_open_emptiable(parent, target.name, st.st_mode), tally)
            try:
                os.rmdir(target.name, dir_fd=parent)
            except OSError as exc:
                if not (tally.left and exc.errno == errno.ENOTEMPTY):
                    tally.fail([], ".", exc)
    except FileNotFoundError:
        pass
    except Exception as exc:  # an OSError above, or a bug: the caller's run must go on either way
        tally.fail([], ".", exc if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}")
    finally:
        os.close(parent)
    return Removal(str(target), tally.left, tally.first)


def clear(path: Path | str) -> Removal:
    """``path`` removed (:func:`remove_tree`), or what could not be removed moved aside to a new name
    beside it (``moved_to``), so that ``path`` can be made afresh; never raises."""
    target = Path(path)
    removal = remove_tree(target)
    if removal.complete:
        return removal
    aside = target.with_name(f"{target.name}.leftover-{os.urandom(4).hex()}")
    try:
        os.rename(target, aside)
    except OSError:
        return removal
    return Removal(removal.path, removal.left, removal.first, moved_to=str(aside))


def fresh_dir(path: Path) -> Path:
    """``path`` as a new, empty directory the harness owns (whatever was there, link or tree, is
    removed without following links; a leftover that cannot be deleted is moved aside, and when even
    that fails, ``mkdir`` raises FileExistsError)."""
    clear(path)
    path.mkdir(parents=True)
    return path
