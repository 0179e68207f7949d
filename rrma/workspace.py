"""Trial workspaces: the only way an agent's edit reaches the files a trial runs.

A trial's files are its parent's snapshot (a manifest of content-addressed blobs) plus the
proposed edit. :func:`apply_edits` is the only way an edit reaches a workspace, and it refuses
anything outside the task's editable files: absolute paths, ``..`` traversal, symlink escapes,
binary garbage, read-only files. Refusals raise :class:`InvalidEdit` with a precise message; the
trial becomes ``invalid``. :func:`read_tree` and :func:`materialize` read and write a workspace
on disk without following links a program planted there (:mod:`rrma.contain.files`).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rrma.contain.files import DEFAULT_MAX_ENTRIES
from rrma.trial import FileEdit

MAX_FILE_BYTES = 4 * 1024 * 1024  # one edited file may not exceed 4 MiB
MAX_SCAN_ENTRIES = DEFAULT_MAX_ENTRIES  # entries one scan of a coding agent's working copy looks at (coding.scan_entries)
MAX_SCAN_BYTES = 8 * MAX_FILE_BYTES  # bytes one scan of a working copy reads, 32 MiB (coding.scan_bytes)

class InvalidEdit(ValueError):
    """An edit that may not be applied: it names the file and says exactly why."""


@dataclass
class EditRules:
    """Which workspace files an edit may touch (globs relative to the workspace root)."""

    editable: list[str]
    readonly: list[str] = field(default_factory=list)

    def is_editable(self, path: str) -> bool:
        if any(fnmatch.fnmatchcase(path, pat) for pat in self.readonly):
            return False
        return any(fnmatch.fnmatchcase(path, pat) for pat in self.editable)


def normalize_path(raw: str) -> str:
    """Return the canonical relative POSIX path of an edit target or raise InvalidEdit."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidEdit("edit path is empty")
    if "\x00" in raw:
        raise InvalidEdit(f"edit path {raw!r} contains a NUL byte")
    if "\\" in raw:
        raise InvalidEdit(f"edit path {raw!r} contains a backslash; use forward slashes")
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise InvalidEdit(f"edit path {raw!r} is absolute; paths are relative to the workspace")
    parts = raw.split("/")
    if ".." in parts:
        raise InvalidEdit(f"edit path {raw!r} leaves the workspace ('..' is not allowed)")
    norm = posixpath.normpath(raw)
    if norm in (".", "") or norm.startswith("../"):
        raise InvalidEdit(f"edit path {raw!r} does not name a file inside the workspace")
    return norm


def check_text(path: str, data: str | bytes) -> str:
    """Refuse binary garbage: NUL bytes, undecodable UTF-8, control characters, huge files."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidEdit(f"{path}: not valid UTF-8 text (byte {exc.start})") from exc
    if "\x00" in data:
        raise InvalidEdit(f"{path}: contains NUL bytes (binary content is not allowed)")
    if len(data.encode("utf-8")) > MAX_FILE_BYTES:
        raise InvalidEdit(f"{path}: {len(data.encode())} bytes is over the {MAX_FILE_BYTES} byte limit")
    bad = sum(1 for ch in data if ord(ch) < 32 and ch not in "\n\r\t\f")
    if bad:
        raise InvalidEdit(f"{path}: contains {bad} control characters (binary content is not allowed)")
    return data


def apply_edits(files: Mapping[str, str], edits: list[FileEdit], rules: EditRules) -> dict[str, str]:
    """Apply ``edits`` to ``files`` (path -> text) and return the new mapping.

    Raises InvalidEdit (naming the file and the reason) for anything not allowed. ``files`` is
    not modified. Paths are checked lexically here; :func:`materialize` refuses symlink escapes
    on disk.
    """
    if not edits:
        raise InvalidEdit("the proposal contains no edits")
    out = dict(files)
    for edit in edits:
        path = normalize_path(edit.path)
        if not rules.is_editable(path):
            if any(fnmatch.fnmatchcase(path, pat) for pat in rules.readonly):
                raise InvalidEdit(f"{path}: read-only file (editable: {', '.join(rules.editable)})")
            raise InvalidEdit(f"{path}: not an editable file of this task (editable: {', '.join(rules.editable)})")
        if edit.delete:
            if path not in out:
                raise InvalidEdit(f"{path}: cannot delete a file that does not exist")
            del out[path]
            continue
        if edit.content is not None and edit.replacements:
            raise InvalidEdit(f"{path}: give either the whole content or replacements, not both")
        if edit.content is not None:
            out[path] = check_text(path, edit.content)
            continue
        if not edit.replacements:
            raise InvalidEdit(f"{path}: edit has neither content nor replacements")
        if path not in out:
            raise InvalidEdit(f"{path}: search/replace on a file that does not exist")
        text = out[path]
        for i, (search, replace) in enumerate(edit.replacements):
            count = text.count(search) if search else 0
            if count != 1:
                what = "is empty" if not search else ("was not found" if count == 0 else f"occurs {count} times")
                raise InvalidEdit(f"{path}: replacement {i + 1}: the search text {what} (it must occur exactly once)")
            text = text.replace(search, replace, 1)
        out[path] = check_text(path, text)
    return out


def read_tree(root: Path) -> dict[str, str]:
    """Read a workspace directory into path -> text; refuses symlinks that leave it."""
    root = root.resolve()
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(root):
                raise InvalidEdit(f"{path.relative_to(root)}: symlink escapes the workspace (to {target})")
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel.split("/"):
            continue
        files[rel] = check_text(rel, path.read_bytes())
    return files


def materialize(files: Mapping[str, str], dest: Path) -> None:
    """Write ``files`` under ``dest`` (created fresh); refuses any path resolving outside it."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    for rel, text in files.items():
        target = (root / normalize_path(rel)).resolve()
        if not target.is_relative_to(root):
            raise InvalidEdit(f"{rel}: resolves outside the trial workspace (symlink escape)")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            raise InvalidEdit(f"{rel}: is a symlink in the trial workspace")
        target.write_text(text, encoding="utf-8")


# ----------------------------------------------------------------------------- module-level constants as text


def assignment_pattern(name: str) -> re.Pattern[str]:
    """A module-level ``NAME = <literal>`` line (an optional annotation and trailing comment kept apart): how
    the random-search agent and the trained policy's replies read and rewrite a task's search-space constants."""
    return re.compile(rf"^(?P<lhs>{re.escape(name)}\s*(?::\s*[A-Za-z_][\w\[\], ]*)?=\s*)(?P<value>[^#\n]*?)"
                      r"(?P<rest>\s*(?:#.*)?)$", re.MULTILINE)


def read_constant(text: str, name: str) -> str | None:
    """The literal assigned to ``name`` (stripped), or None when ``text`` has no such line."""
    match = assignment_pattern(name).search(text)
    return match.group("value").strip() if match else None


def write_constant(text: str, name: str, literal: str) -> str:
    """``text`` with ``name``'s literal replaced by ``literal`` (KeyError when there is no such line)."""
    match = assignment_pattern(name).search(text)
    if match is None:
        raise KeyError(name)
    return text[: match.start("value")] + literal + text[match.end("value"):]
