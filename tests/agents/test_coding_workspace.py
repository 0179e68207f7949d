"""A coding agent's working copy -> the proposal's edits (agents/coding/workspace.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.coding.workspace import diff_tree, file_edit, replacements
from rrma.trial import FileEdit
from rrma.workspace import EditRules, InvalidEdit, apply_edits, materialize

BASE = {"train.py": "LR = 0.1\nDEPTH = 2\nprint('x')\n", "data.py": "N = 1\n", "notes/readme.md": "hello\n"}
RULES = EditRules(["train.py", "*.cfg"], [])


def copy(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    materialize(BASE, work)
    return work


def test_an_untouched_copy_proposes_nothing(tmp_path: Path) -> None:
    diff = diff_tree(BASE, copy(tmp_path), RULES, [])
    assert (diff.edits, diff.new_ignored, diff.problems) == ([], [], [])


def test_edits_new_files_and_deletions(tmp_path: Path) -> None:
    work = copy(tmp_path)
    (work / "train.py").write_text("LR = 0.01\nDEPTH = 2\nprint('x')\n")  # editable: an edit (search/replace)
    (work / "data.py").write_text("N = 2\n")  # an existing, non-editable file: proposed, so the loop refuses it
    (work / "notes" / "readme.md").unlink()  # a deletion: proposed (refused by the loop: not editable)
    (work / "scratch.py").write_text("print('trying things')\n")  # new, outside editable: the agent's scratch
    (work / "new.cfg").write_text("a = 1\n")  # new and editable: proposed as a whole file
    (work / "__pycache__").mkdir()
    (work / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0\1")  # never looked at
    (work / ".aider.tags.cache.v4").mkdir()
    (work / ".aider.tags.cache.v4" / "cache.db").write_bytes(b"\0")  # the tool's own state: ignored by glob
    diff = diff_tree(BASE, work, RULES, [".aider*"])
    assert diff.edits == [
        FileEdit(path="data.py", replacements=[("N = 1\n", "N = 2\n")]),
        FileEdit(path="new.cfg", content="a = 1\n"),
        FileEdit(path="notes/readme.md", delete=True),
        FileEdit(path="train.py", replacements=[("LR = 0.1\n", "LR = 0.01\n")]),
    ]
    assert diff.new_ignored == ["scratch.py"] and diff.problems == []
    with pytest.raises(InvalidEdit, match=r"data\.py: not an editable file"):  # what the loop will say
        apply_edits(BASE, diff.edits, RULES)


def test_links_fifos_and_huge_files_are_never_read(tmp_path: Path) -> None:
    work = copy(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me\n")
    (work / "train.py").unlink()
    (work / "train.py").symlink_to(secret)  # an editable path turned into a link out of the copy
    os.mkfifo(work / "x.cfg")  # would block a reader forever
    (work / "data.py").write_bytes(b"#" * (4 * 1024 * 1024 + 1))  # over the 4 MiB limit of one file
    (work / "link-dir").symlink_to(tmp_path)  # a new link outside editable: scratch, never followed
    diff = diff_tree(BASE, work, RULES, [])
    assert sorted(diff.problems) == [
        "data.py: larger than 4194304 bytes; write the file itself",
        "train.py: a symbolic link; write the file itself",
        "x.cfg: not a regular file; write the file itself",
    ]
    assert diff.new_ignored == ["link-dir"]


@pytest.mark.parametrize("old, new, expected", [
    # one changed line: just that line
    ("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n", [("b = 2\n", "b = 5\n")]),
    # the changed line occurs twice: context is added until the search is unique
    ("x = 0\ny = 1\nx = 0\nz = 2\n", "x = 0\ny = 1\nx = 9\nz = 2\n", [("y = 1\nx = 0\nz = 2\n", "y = 1\nx = 9\nz = 2\n")]),
    # a pure insertion: anchored on its neighbours
    ("a\nb\nc\n", "a\nb\nnew\nc\n", [("b\nc\n", "b\nnew\nc\n")]),
    # two separate hunks: two pairs, applied in order
    ("a = 1\nkeep\nb = 2\n", "a = 7\nkeep\nb = 8\n", [("a = 1\n", "a = 7\n"), ("b = 2\n", "b = 8\n")]),
])
def test_replacements(old: str, new: str, expected: list[tuple[str, str]]) -> None:
    assert replacements(old, new) == expected
    assert apply_edits({"f": old}, [FileEdit(path="f", replacements=expected)], EditRules(["f"])) == {"f": new}


def test_whole_content_when_no_unique_search_exists() -> None:
    old = "x\nx\nx\nx\nx\nx\nx\nx\nx\n"  # identical lines: no context makes a search unique
    new = "x\nx\nx\nx\ny\nx\nx\nx\nx\n"
    assert replacements(old, new) is None
    assert file_edit("f", old, new) == FileEdit(path="f", content=new)
    assert file_edit("f", None, "new file\n") == FileEdit(path="f", content="new file\n")


def test_replacements_reapply_on_a_parent_that_moved() -> None:
    """Why edits are search/replace: another agent's promoted change elsewhere in the file survives."""
    old = "LR = 0.1\nDEPTH = 2\nWIDTH = 64\n"
    mine = file_edit("train.py", old, "LR = 0.01\nDEPTH = 2\nWIDTH = 64\n")
    moved = {"train.py": "LR = 0.1\nDEPTH = 2\nWIDTH = 128\n"}  # the best trial changed WIDTH meanwhile
    assert apply_edits(moved, [mine], RULES) == {"train.py": "LR = 0.01\nDEPTH = 2\nWIDTH = 128\n"}


def test_new_files_outside_editable_are_listed_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only editable files and the parent's own are opened; the agent's scratch is known by name and size."""
    from rrma.contain import files

    work = copy(tmp_path)
    (work / "scratch.bin").write_bytes(b"\0" * 1000)
    (work / "data.py").write_text("N = 2\n")  # the parent's, not editable: read, and proposed for the loop to refuse
    (work / "new.cfg").write_text("a = 1\n")
    reads: list[str] = []
    real_read = files._read_at

    def counted_read(fd: int, name: str, st: os.stat_result, rel: str) -> bytes:
        reads.append(rel)
        return real_read(fd, name, st, rel)

    monkeypatch.setattr(files, "_read_at", counted_read)
    diff = diff_tree(BASE, work, RULES, [])
    assert sorted(reads) == ["data.py", "new.cfg", "notes/readme.md", "train.py"]
    assert diff.new_ignored == ["scratch.bin"] and [e.path for e in diff.edits] == ["data.py", "new.cfg"]


def _scratch_files(work: Path) -> None:
    for i in range(60):
        (work / f"s{i}").touch()


def _sparse_editables(work: Path) -> None:
    for i in range(3):
        with open(work / f"big{i}.cfg", "wb") as fh:
            fh.truncate(4 * 2**20)


@pytest.mark.parametrize("setting, limits, make", [
    ("coding.scan_entries", {"max_entries": 50}, _scratch_files),  # more entries than the scan looks at
    ("coding.scan_bytes", {"max_bytes": 8 * 2**20}, _sparse_editables),  # 12 MiB of editable files to read
])
def test_a_copy_past_a_scan_cap_gives_one_problem_naming_the_cap(tmp_path: Path, setting: str, limits: dict[str, int],
                                                                 make: Callable[[Path], None]) -> None:
    work = copy(tmp_path)
    make(work)
    diff = diff_tree(BASE, work, RULES, [], **limits)
    assert diff.edits == [] and len(diff.problems) == 1
    assert setting in diff.problems[0] and "stopped at" in diff.problems[0], diff.problems
