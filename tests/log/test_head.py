"""The head record's one check (rrma/log/head.py ``check_head``): its verdict for each way a log's end can be,
each from a real log, and the same verdict from every reader that uses it.

Each case writes a run with the store (so ``head.json`` is the store's own), changes it as the case says
(a cut, a re-chained replacement, an edit in place, a deleted or garbled record, events past the record), and
checks the verdict; then that ``verify`` (rrma/log/chain.py) reports the same verdict and errors exactly when
the verdict is a fault, and that the store refuses to append over a cut or replaced end. Last, a scan of the
source: no module outside rrma/log judges the head record itself (the timeline once matched ``"cut off"`` in
verify's error text to decide its badge).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rrma.log.chain import verify_chain
from rrma.log.events import canonical, compute_hash
from rrma.log.head import HEAD_SIZE, check_head, read_head
from rrma.log.layout import EVENTS, HEAD
from rrma.log.store import LogDamaged, RunStore

REPO = Path(__file__).resolve().parents[2]


def written_run(root: Path) -> Path:
    """A run as rrma writes one: run.started (it keeps a head record), a trial, notes."""
    store = RunStore(root / "run", create=True)
    store.append("run.started", "harness", {"run_id": "run", "task_name": "t", "task": {}, "head_record": True})
    store.append("trial.proposed", "agent:a", {"trial_id": "t1", "parent": None, "agent": "a", "proposal_blob": "b" * 64})
    store.append("trial.finished", "oracle", {"trial_id": "t1", "status": "ok", "score": 1.5})
    for n in range(3):
        store.append("note", "harness", {"text": f"note {n}"})
    store.close()
    return store.dir


def lines(run: Path) -> list[bytes]:
    return (run / EVENTS).read_bytes().splitlines(keepends=True)


def cut_last(run: Path) -> None:
    (run / EVENTS).write_bytes(b"".join(lines(run)[:-1]))


def replace_rechained(run: Path) -> None:
    """The last note becomes another of the same length, validly chained (prev kept, hash recomputed)."""
    *before, last = lines(run)
    obj = json.loads(last)
    obj["data"]["text"] = obj["data"]["text"].replace("note", "NOTE")
    obj["hash"] = compute_hash(obj)
    (run / EVENTS).write_bytes(b"".join(before) + canonical(obj).encode() + b"\n")


def edit_in_place(run: Path) -> None:
    """The last note's text changed, its hash left as it was (what a careless forger does)."""
    data = (run / EVENTS).read_bytes()
    at = data.rindex(b"note 2")
    (run / EVENTS).write_bytes(data[:at] + b"note X" + data[at + 6:])


def shift_a_byte(run: Path) -> None:
    """A blank line inserted before the last event: every line is intact, but not where the record says."""
    *before, last = lines(run)
    (run / EVENTS).write_bytes(b"".join(before) + b"\n" + last)


def append_past_the_record(run: Path) -> None:
    """A valid event written after the record's, the record left as it was (a writer killed between its writes)."""
    record = (run / HEAD).read_bytes()
    store = RunStore(run)
    store.append("note", "harness", {"text": "written, then the writer died"})
    store.close()
    (run / HEAD).write_bytes(record)


def delete_record(run: Path) -> None:
    (run / HEAD).unlink()


def garble_record(run: Path) -> None:
    (run / HEAD).write_bytes(b"{not a record}".ljust(HEAD_SIZE - 1) + b"\n")


# (how the run is changed, the verdict, words of its detail, an edit in place, verify's error says it too)
CASES: dict[str, tuple[Callable[[Path], None] | None, str, str, bool]] = {
    "as written": (None, "ok", "head.json matches the log's event seq 5", False),
    "a valid event past the record": (append_past_the_record, "ok", "matches the log's event seq 5", False),
    "the last event cut off": (cut_last, "cut", "its last valid event is seq 4", False),
    "the last event replaced and re-chained": (replace_rechained, "changed", "the end of the log was replaced", False),
    "the last event edited in place": (edit_in_place, "changed", "does not match its content", True),
    "a byte inserted before the last event": (shift_a_byte, "changed", "replaced or rewritten", False),
    "head.json deleted": (delete_record, "none", "no head record", False),
    "head.json garbled": (garble_record, "unreadable", "the head record was damaged", False),
}


def changed_run(root: Path, case: str) -> Path:
    """A run written by the store, then changed as ``case`` says."""
    run = written_run(root)
    change = CASES[case][0]
    if change is not None:
        change(run)
    return run


@pytest.mark.parametrize("case", list(CASES))
def test_each_end_of_a_log_has_its_verdict(tmp_path: Path, case: str) -> None:
    _, state, words, modified = CASES[case]
    run = changed_run(tmp_path, case)
    verdict = check_head(run)
    assert (verdict.state, verdict.modified) == (state, modified), verdict
    assert words in verdict.detail
    assert (verdict.record is None) == (state in ("none", "unreadable"))


@pytest.mark.parametrize("case", list(CASES))
def test_verify_and_the_store_act_on_the_same_verdict(tmp_path: Path, case: str) -> None:
    _, state, _, modified = CASES[case]
    run = changed_run(tmp_path, case)
    report = verify_chain(RunStore(run))
    assert report.head == check_head(run)
    fault = state in ("cut", "changed", "unreadable") and not modified
    assert (report.head.detail in report.errors) == fault, report.errors  # an edit in place: the chain's own error
    if modified:
        assert any("hash mismatch" in e for e in report.errors)
    if state == "none":  # run.started says the run keeps one: its absence is an error of verify's own
        assert any("head.json is missing" in e for e in report.errors)
    store = RunStore(run)
    refuses = state in ("cut", "changed") and not modified
    if refuses:
        with pytest.raises(LogDamaged, match="refusing to append"):
            store.append("note", "harness", {"text": "this would rewrite the record over the damage"})
        assert check_head(run) == report.head  # nothing was written
    else:
        store.append("note", "harness", {"text": "appended"})
        record = read_head(run)
        assert record is not None and record.seq == store.head()[0]
    store.close()


def test_a_live_writer_does_not_make_a_verdict_wrong(tmp_path: Path) -> None:
    """The record is read first, then the line it names: appends in between only add lines after that one."""
    run = written_run(tmp_path)
    record = read_head(run)
    store = RunStore(run)
    for n in range(50):
        store.append("note", "harness", {"text": f"live {n}"})
        verdict = check_head(run)
        assert verdict.state == "ok" and verdict.record is not None and verdict.record.seq == record.seq + n + 1


# ----------------------------------------------------------------------------- no head check outside the core

OUTSIDE_THE_CORE_LOG = ("rrma", "cli", "tui", "agents", "oracle", "benches")
NAMES_THE_FILE = {  # modules that name head.json without reading it, and why
    "rrma/audit/scope.py": "the run's own files, kept from agents",
    "rrma/audit/judge.py": "the judge's prompt lists the run's own files",
    "benches/perf/bench_long_line.py": "writes a record as an older rrma did, for a legacy log",
}


def head_checks(root: Path) -> list[str]:
    """Each place outside rrma/log that could judge the head record itself: code (not a docstring) that matches
    a finding's words (``"cut off"``), names the record's file (``"head.json"``, the ``HEAD`` constant) outside
    :data:`NAMES_THE_FILE`, or reads it with ``read_head`` other than to show it (the run header)."""
    found: list[str] = []
    for package in OUTSIDE_THE_CORE_LOG:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("rrma/log/") or "/workspace/" in rel:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                          and node.body and isinstance(node.body[0], ast.Expr)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                    if "cut off" in node.value:
                        found.append(f"{rel}:{node.lineno}: matches {node.value!r}")
                    if "head.json" in node.value and rel not in NAMES_THE_FILE:
                        found.append(f"{rel}:{node.lineno}: names head.json")
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rrma.log"):
                    for alias in node.names:
                        if alias.name == "HEAD" and rel not in NAMES_THE_FILE:
                            found.append(f"{rel}:{node.lineno}: imports HEAD")
                        if alias.name == "read_head" and rel != "tui/widgets/run_header.py":
                            found.append(f"{rel}:{node.lineno}: reads the head record")
    return found


def test_no_module_outside_the_log_room_checks_the_head_record() -> None:
    assert head_checks(REPO) == []


def test_the_scan_finds_a_view_that_matches_verify_s_words(tmp_path: Path) -> None:
    """The badge as it was: verify's first error matched for "cut off", the record read by its file name."""
    widget = tmp_path / "tui" / "widgets" / "badge.py"
    widget.parent.mkdir(parents=True)
    widget.write_text('"""A badge: ``cut off`` in this docstring is words, not a check."""\n'
                      "from rrma.log.layout import EVENTS, HEAD\n"
                      "from rrma.log.head import read_head\n"
                      "def verdict(first: str) -> str:\n"
                      '    return "cut" if "cut off" in first else "changed"\n'
                      "def raw(run_dir):\n"
                      '    return (run_dir / "head.json").read_bytes()\n')
    assert [line.split(": ", 1)[1] for line in head_checks(tmp_path)] == [
        "imports HEAD", "reads the head record", "matches 'cut off'", "names head.json"]
