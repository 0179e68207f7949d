"""A coding agent's working copy after it exits, turned into the proposal's file edits.

Why it exists: a coding agent edits real files in a copy of its parent's workspace; the harness
needs a :class:`~rrma.trial.Proposal` the loop can validate and re-apply. :func:`diff_tree`
compares the copy with the parent's files without trusting anything in it:

* only regular files are read, never through a link (:mod:`rrma.contain.files`: a symlink, FIFO or
  device is never followed or opened, and a working root replaced by a link is refused), at most
  :data:`rrma.workspace.MAX_FILE_BYTES` of one;
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
from dataclasses import dataclass, field
from pathlib import Path

from rrma.contain import files
from rrma.trial import FileEdit
from rrma.workspace import MAX_FILE_BYTES, EditRules

SKIP_DIRS = ("__pycache__",)
MAX_CONTEXT_LINES = 3  # context lines added around a hunk to make its search text unique


@dataclass
class Entry:
    kind: str  # file | symlink | special | large
    data: bytes = b""


@dataclass
class TreeDiff:
    edits: list[FileEdit] = field(default_factory=list)
    new_ignored: list[str] = field(default_factory=list)  # new files outside the editable ones: scratch
    problems: list[str] = field(default_factory=list)  # what makes the copy unusable as a proposal


def scan(root: Path) -> dict[str, Entry]:
    """Every entry under ``root`` (relative POSIX path -> what it is), without following any link.

    The walk goes one component at a time with ``O_NOFOLLOW`` (:mod:`rrma.contain.files`): a link,
    a FIFO or a device is listed, never opened or entered, and a root that is itself a link (an agent
    that ran ``mv work work.orig; ln -s ~/.ssh work``) raises LinkRefused instead of being read.
    """
    out: dict[str, Entry] = {}
    for rel, kind in files.walk_files(root, skip_dirs=frozenset(SKIP_DIRS)):
        if kind == stat.S_IFLNK:
            out[rel] = Entry("symlink")
        elif kind != stat.S_IFREG:
            out[rel] = Entry("special")
        else:
            try:
                out[rel] = Entry("file", files.read_bytes(root, rel, limit=MAX_FILE_BYTES))
            except ValueError:
                out[rel] = Entry("large")
            except files.LinkRefused:  # replaced by a link between the listing and the read
                out[rel] = Entry("symlink")
    return out


def _ignored(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in patterns)


def diff_tree(base: dict[str, str], root: Path, rules: EditRules, ignore: list[str]) -> TreeDiff:
    """The edits that turn ``base`` (the parent's files) into the working copy at ``root``."""
    out = TreeDiff()
    try:
        current = scan(root)
    except files.LinkRefused as exc:
        out.problems.append(f"the working copy is not a plain directory any more ({exc}); nothing was read from it")
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
