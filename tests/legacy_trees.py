"""The harness's tree handling before issue 31, kept as the controls of the tests that attack it.

Then, trees an agent made were removed with ``shutil.rmtree(..., ignore_errors=True)`` (recursive:
past about a thousand levels it raises RecursionError, which ``ignore_errors`` does not cover), and
walked by a recursion with one descriptor and one Python frame per level that read every regular
file it met, up to 4 MiB each, whoever asked. :func:`legacy` puts both back in
:mod:`rrma.contain.files` for one test, so the test can show the attack working against them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rrma.contain import files


def recursive_remove(path: Path | str) -> files.Removal:
    """``shutil.rmtree(path, ignore_errors=True)``, as the executor's and the coding agent's cleanup did."""
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    else:
        shutil.rmtree(path, ignore_errors=True)
    return files.Removal(str(path))


def recursive_walk(root: Path | str, *, skip_dirs: frozenset[str] = frozenset(), max_file_bytes: int | None = None,
                   **_ignored: object) -> Iterator[files.TreeEntry]:
    """The old walk: recursive, sorted, no link followed, every regular file read (no caps, no choice)."""
    fd = files.open_root(root)
    try:
        yield from _walk(fd, "", skip_dirs, max_file_bytes)
    finally:
        os.close(fd)


def _walk(dir_fd: int, prefix: str, skip_dirs: frozenset[str], limit: int | None) -> Iterator[files.TreeEntry]:
    for name in sorted(os.listdir(dir_fd)):
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        kind = stat.S_IFMT(st.st_mode)
        if kind == stat.S_IFDIR:
            if name in skip_dirs:
                continue
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                yield from _walk(sub, f"{prefix}{name}/", skip_dirs, limit)
            finally:
                os.close(sub)
            continue
        data = None
        if kind == stat.S_IFREG and (limit is None or st.st_size <= limit):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read()
        yield files.TreeEntry(f"{prefix}{name}", kind, st.st_size if kind == stat.S_IFREG else 0,
                              (st.st_dev, st.st_ino), data)


def legacy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the old remover and walker in place of :func:`files.remove_tree` and :func:`files.walk_files`
    (every caller reaches them through the module, :func:`files.clear` and :func:`files.fresh_dir` too)."""
    monkeypatch.setattr(files, "remove_tree", recursive_remove)
    monkeypatch.setattr(files, "walk_files", recursive_walk)


def make_chain(root: Path, depth: int, *, leaf: Callable[[int], None] | None = None, name: str = "d") -> None:
    """A chain of ``depth`` folders under ``root``, made one level at a time from a descriptor (a path that
    long is past PATH_MAX); ``leaf(fd)`` may add something at the bottom."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        if leaf is not None:
            leaf(fd)
    finally:
        os.close(fd)


REMOVE_TREE = files.remove_tree  # as imported, before any control replaced it


def scrub(path: Path | str) -> None:
    """A test's cleanup of the chains it made: the harness's remover, then ``rm -rf`` (which walks without
    recursion) should that remover be broken; a chain left in pytest's temp folders would make pytest's
    own cleanup (shutil.rmtree) fail with RecursionError in later sessions."""
    REMOVE_TREE(path)
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--", str(path)], capture_output=True, timeout=600)
