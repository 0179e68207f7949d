"""Trials in sandboxes: edit validation (a table, one comment per case) and process limits."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from rrma.contain.spawn import _group_members, spawn
from rrma.trial import Budget, FileEdit, Status
from rrma.workspace import EditRules, InvalidEdit, apply_edits, materialize, normalize_path, read_tree

RULES = EditRules(editable=["train.py", "src/*.py"], readonly=["prepare.py", "src/fixed.py"])
FILES = {"train.py": "LR = 0.1\nSTEPS = 10\n", "prepare.py": "def evaluate(): ...\n", "src/model.py": "x = 1\n"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (FileEdit(path="/etc/passwd", content="x"), "is absolute"),  # absolute path
        (FileEdit(path="../outside.py", content="x"), "leaves the workspace"),  # traversal
        (FileEdit(path="src/../../x.py", content="x"), "leaves the workspace"),  # traversal in the middle
        (FileEdit(path="prepare.py", content="x"), "read-only file"),  # the metric's file
        (FileEdit(path="src/fixed.py", content="x"), "read-only file"),  # read-only wins over the editable glob
        (FileEdit(path="notes.txt", content="x"), "not an editable file"),  # outside the editable globs
        (FileEdit(path="train.py", content="a\x00b"), "NUL bytes"),  # binary garbage
        (FileEdit(path="train.py", content="ok\x07\x08\x1b"), "control characters"),  # binary garbage
        (FileEdit(path="train.py", content="x" * (5 * 1024 * 1024)), "byte limit"),  # huge file
        (FileEdit(path="train.py", replacements=[("NOPE", "x")]), "was not found"),  # search text missing
        (FileEdit(path="train.py", replacements=[("", "x")]), "is empty"),  # empty search
        (FileEdit(path="train.py", replacements=[("0", "1")]), "occurs 2 times"),  # ambiguous search
        (FileEdit(path="train.py", content="x", replacements=[("LR", "y")]), "not both"),  # both forms
        (FileEdit(path="src/new.py", replacements=[("a", "b")]), "does not exist"),  # replace in a missing file
        (FileEdit(path="src\\model.py", content="x"), "backslash"),  # windows separators
        (FileEdit(path="", content="x"), "empty"),  # no path
    ],
)
def test_invalid_edits(edit: FileEdit, message: str) -> None:
    with pytest.raises(InvalidEdit, match=message):
        apply_edits(FILES, [edit], RULES)


def test_valid_edits() -> None:
    out = apply_edits(FILES, [FileEdit(path="train.py", replacements=[("LR = 0.1", "LR = 0.3")]),
                              FileEdit(path="./src/new.py", content="y = 2\n")], RULES)
    assert out["train.py"] == "LR = 0.3\nSTEPS = 10\n"
    assert out["src/new.py"] == "y = 2\n"
    assert FILES["train.py"] == "LR = 0.1\nSTEPS = 10\n"  # the parent is untouched
    with pytest.raises(InvalidEdit, match="no edits"):
        apply_edits(FILES, [], RULES)
    assert normalize_path("src//model.py") == "src/model.py"


def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("x = 1\n")
    (ws / "evil.py").symlink_to("/etc/hostname")
    with pytest.raises(InvalidEdit, match="symlink escapes"):
        read_tree(ws)
    dest = tmp_path / "trial"
    dest.mkdir()
    (dest / "src").symlink_to(tmp_path)  # a planted link inside the trial dir
    with pytest.raises(InvalidEdit, match="outside the trial workspace"):
        materialize({"src/x.py": "1"}, dest)


BUDGET = Budget(seconds=2.0, memory_mb=300, max_output_bytes=4 * 1024 * 1024)


def _run(code: str, budget: Budget = BUDGET, **kw):  # type: ignore[no-untyped-def]
    return spawn([sys.executable, "-c", code], cwd=".", budget=budget, **kw)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, waiting for init to reap it) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def _assert_group_gone(pid_file: Path) -> None:
    assert pid_file.exists(), "the child never started"
    for pid in [int(p) for p in pid_file.read_text().split()]:
        assert not _alive(pid), f"child {pid} survived"


def test_sleep_forever_is_a_timeout() -> None:
    started = time.monotonic()
    result = _run("import time; time.sleep(1000)")
    assert result.status == Status.timeout
    assert "wall clock" in result.reason
    assert time.monotonic() - started < BUDGET.seconds + 4


def test_forked_child_is_killed_with_its_parent(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = (f"import os, time\npid = os.fork()\nif pid == 0:\n    open({str(pids)!r}, 'a').write(str(os.getpid()) + ' ')\n"
            "    time.sleep(1000)\nelse:\n    time.sleep(1000)")
    result = _run(code)
    assert result.status == Status.timeout
    time.sleep(0.2)
    _assert_group_gone(pids)


def test_orphaned_child_is_reaped_after_a_clean_exit(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = (f"import os, time\nif os.fork() == 0:\n    open({str(pids)!r}, 'a').write(str(os.getpid()))\n"
            "    time.sleep(1000)\nelse:\n    time.sleep(0.3)\n    print('done')")
    result = _run(code)
    assert result.status == Status.ok and result.leftover_killed == 1
    time.sleep(0.2)
    _assert_group_gone(pids)


def test_a_child_that_leaves_the_process_group_is_killed_too(tmp_path: Path) -> None:
    """setsid() takes a child out of the group killpg reaches; the run's token in its environment
    still finds it (unguarded here: the fs guard's PID namespace would catch it anyway)."""
    pids = tmp_path / "pids"
    code = (f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    open({str(pids)!r}, 'a').write(str(os.getpid()))\n"
            "    time.sleep(1000)\nelse:\n    time.sleep(0.5)\n    print('done')")
    started = time.monotonic()
    result = _run(code)
    assert result.status == Status.ok and result.leftover_killed == 1
    assert time.monotonic() - started < 5  # the escaped child held the output pipe; it was not waited out
    time.sleep(0.2)
    _assert_group_gone(pids)


def test_unbounded_memory_is_oom() -> None:
    result = _run("x = []\nwhile True:\n    x.append(b'x' * 20_000_000)", Budget(seconds=20, memory_mb=200))
    assert result.status == Status.oom
    assert "200 MiB" in result.reason


def test_printing_a_gigabyte_is_capped_and_killed() -> None:
    code = "import sys\nchunk = 'y' * 1_000_000 + '\\n'\nfor _ in range(1000):\n    sys.stdout.write(chunk)"
    result = _run(code, Budget(seconds=30, memory_mb=500, max_output_bytes=8 * 1024 * 1024))
    assert result.status == Status.crash
    assert "output flood" in result.reason
    assert len(result.output) < 100_000  # only head and tail are kept
    assert "bytes of output not kept" in result.output


def test_segfault_is_a_crash() -> None:
    result = _run("import ctypes; ctypes.string_at(0)")
    assert result.status == Status.crash and result.signal_name == "SIGSEGV"


def test_memory_error_is_oom() -> None:
    result = _run("raise MemoryError('boom')")
    assert result.status == Status.oom


def test_exit_code_and_output() -> None:
    result = _run("print('loss: 1.5'); raise SystemExit(3)")
    assert result.status == Status.crash and result.reason == "exit code 3"
    assert "loss: 1.5" in result.output


def test_on_line_can_abort() -> None:
    code = "import time\nfor i in range(100):\n    print(f'step {i}', flush=True)\n    time.sleep(0.05)"
    seen: list[str] = []

    def watch(line: str) -> str | None:
        seen.append(line)
        return "enough" if line == "step 3" else None

    result = _run(code, Budget(seconds=20), on_line=watch)
    assert result.status == Status.aborted and result.reason == "enough"
    assert seen[:4] == ["step 0", "step 1", "step 2", "step 3"]


def test_group_scan_sees_own_process() -> None:
    assert os.getpid() in _group_members(os.getpgid(0))
