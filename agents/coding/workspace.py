"""A coding agent's working copy after it exits, turned into the proposal's file edits.

Why it exists: a coding agent edits real files in a copy of its parent's workspace; the harness
needs a :class:`~rrma.trial.Proposal` the loop can validate and re-apply. :func:`diff_tree`
compares the copy with the parent's files without trusting anything in it:

* only regular files are read, never through a link (:mod:`rrma.contain.files`: a symlink, FIFO or
  device is never followed or opened, and a working root replaced by a link is refused), at most
  :data:`rrma.workspace.MAX_FILE_BYTES` of one;
* only the files that can matter are read: the editable ones and the parent's own files; any other
  file is listed by name and size, never opened (400 sparse files of 4 GiB cost nothing). One scan
  looks at no more than ``coding.scan_entries`` entries and reads no more than ``coding.scan_bytes``
  bytes (a file's apparent size counts, and hard links to one file are read once); past either the
  copy cannot be proposed and the agent's trace says which cap and the counts;
* a change to an editable file is an edit; a change to, or the deletion of, any other file of the
  parent is an edit too, which the loop then refuses as today (the trial is ``invalid`` and the
  agent reads why); a *new* file outside ``workspace.editable`` is the agent's scratch (a test
  script, notes) and is left out, listed in the trace;
* a modified file is proposed as search/replace pairs (:func:`file_edit`) when they rebuild it
  exactly, so the edit still applies if another agent moved the parent meanwhile (as the LLM
  agents' replacements do); otherwise as its whole new content.
"""

from __future__ import annotations

import difflib
import fnmatch
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rrma.contain import files
from rrma.trial import FileEdit
from rrma.workspace import MAX_FILE_BYTES, MAX_SCAN_BYTES, MAX_SCAN_ENTRIES, EditRules

SKIP_DIRS = ("__pycache__",)
MAX_CONTEXT_LINES = 3  # context lines added around a hunk to make its search text unique


@dataclass
class Entry:
    kind: str  # file | symlink | special | large (wanted, over MAX_FILE_BYTES) | unread (not wanted)
    data: bytes = b""
    size: int = 0  # apparent bytes of a regular file


@dataclass
class TreeDiff:
    edits: list[FileEdit] = field(default_factory=list)
    new_ignored: list[str] = field(default_factory=list)  # new files outside the editable ones: scratch
    problems: list[str] = field(default_factory=list)  # what makes the copy unusable as a proposal


CAP_SETTINGS = {"entries": "coding.scan_entries", "bytes": "coding.scan_bytes"}


def scan(root: Path, wanted: Callable[[str], bool] = lambda _: True, *, max_entries: int = MAX_SCAN_ENTRIES,
         max_bytes: int = MAX_SCAN_BYTES) -> dict[str, Entry]:
    """Every entry under ``root`` (relative POSIX path -> what it is), without following any link.

    The walk goes one component at a time with ``O_NOFOLLOW`` (:func:`rrma.contain.files.walk_files`):
    a link, a FIFO or a device is listed, never opened or entered, and a root that is itself a link (an
    agent that ran ``mv work work.orig; ln -s ~/.ssh work``) raises LinkRefused instead of being read.
    Only regular files ``wanted(path)`` accepts are read (others come as ``unread`` with their size);
    past ``max_entries`` entries or ``max_bytes`` bytes to read it raises TreeTooLarge.
    """
    out: dict[str, Entry] = {}
    for entry in files.walk_files(root, skip_dirs=frozenset(SKIP_DIRS), max_entries=max_entries,
                                  read=lambda rel, _size: wanted(rel), max_file_bytes=MAX_FILE_BYTES,
                                  max_bytes=max_bytes):
        if entry.kind == stat.S_IFLNK:
            out[entry.path] = Entry("symlink")
        elif entry.kind != stat.S_IFREG:
            out[entry.path] = Entry("special")
        elif entry.data is not None:
            out[entry.path] = Entry("file", entry.data, entry.size)
        else:
            out[entry.path] = Entry("large" if wanted(entry.path) else "unread", size=entry.size)
    return out


def _ignored(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in patterns)


def diff_tree(base: dict[str, str], root: Path, rules: EditRules, ignore: list[str], *,
              max_entries: int = MAX_SCAN_ENTRIES, max_bytes: int = MAX_SCAN_BYTES) -> TreeDiff:
    """The edits that turn ``base`` (the parent's files) into the working copy at ``root``.

    Read are the editable files and the parent's own (a changed one becomes an edit the loop refuses);
    a new file outside ``rules``' editable ones is the agent's scratch, listed by name, never read.
    """
    out = TreeDiff()

    def wanted(path: str) -> bool:
        return not _ignored(path, ignore) and (path in base or rules.is_editable(path))

    try:
        current = scan(root, wanted, max_entries=max_entries, max_bytes=max_bytes)
    except files.LinkRefused as exc:
        out.problems.append(f"the working copy is not a plain directory any more ({exc}); nothing was read from it")
        return out
    except files.TreeTooLarge as exc:
        what = "entries (files, folders and links" if exc.what == "entries" else "bytes to read (editable files and the parent's"
        out.problems.append(f"the working copy holds more than {exc.limit} {what}; {CAP_SETTINGS[exc.what]}): the "
                            f"scan stopped at {exc.seen}, nothing was proposed from it")
        return out
    except OSError as exc:
        out.problems.append(f"the working copy cannot be read ({exc.strerror or exc}); nothing was proposed from it")
        return out
    for path in sorted(set(base) | set(current)):
        if _ignored(path, ignore):
            continue
        old = base.get(path)
        entry = current.get(path)
        editable = rules.is_editable(path)
        if entry is None:
            out.edits.append(FileEdit(path=path, delete=True))
            continue
        if old is None and not editable:
            out.new_ignored.append(path)
            continue
        if entry.kind != "file":
            what = {"symlink": "a symbolic link", "special": "not a regular file",
                    "large": f"larger than {MAX_FILE_BYTES} bytes"}[entry.kind]
            out.problems.append(f"{path}: {what}; write the file itself")
            continue
        text = entry.data.decode("utf-8", errors="replace")
        if text != old:
            out.edits.append(file_edit(path, old, text))
    return out


def file_edit(path: str, old: str | None, new: str) -> FileEdit:
    """``new`` as search/replace pairs on ``old`` when they rebuild it exactly, else as the whole content."""
    if old is None or not old or not new:
        return FileEdit(path=path, content=new)
    pairs = replacements(old, new)
    if pairs is not None:
        return FileEdit(path=path, replacements=pairs)
    return FileEdit(path=path, content=new)


def replacements(old: str, new: str) -> list[tuple[str, str]] | None:
    """Search/replace pairs, one per changed hunk, each search occurring once where it is applied;
    None when that cannot be done (then the whole file is proposed)."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    pairs: list[tuple[str, str]] = []
    text = old
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for extra in range(MAX_CONTEXT_LINES + 1):
            lo, hi = max(0, i1 - extra), min(len(a), i2 + extra)
            search = "".join(a[lo:hi])
            if search and text.count(search) == 1:
                replace = "".join(a[lo:i1]) + "".join(b[j1:j2]) + "".join(a[i2:hi])
                break
        else:
            return None
        pairs.append((search, replace))
        text = text.replace(search, replace, 1)
    return pairs if pairs and text == new else None
