"""Bad input to the CLI: one line on stderr, exit code 2, nothing created, nothing lost.

Each case was reproduced on main first (issue 20): a run file that is a directory, ``--runs`` naming a
file, a bad containment variable, a task float of ``1e400``, a YAML alias bomb, ``ls`` of a missing
directory and a log line that is not UTF-8 each gave ``unexpected error`` (exit 1), exit 0, a hang or an
empty run directory. The CLI is driven in process (``cli.main.main``) where a case is quick, and as
``python -m cli.main`` where it could hang (the alias bomb) or needs a clean environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.main import main
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.view_files import write_views

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RRMA_")} | {"PYTHONPATH": str(REPO)}


# ----------------------------------------------------------------------------- helpers


def make_run(runs: Path, run_id: str = "r1", task_name: str = "tiny") -> Path:
    """A finished run written through RunStore as the loop writes one (run.json recorded in run.started,
    a baseline, one agent trial, run.finished, the derived views): every command accepts it."""
    store = RunStore(runs / run_id, create=True)
    task = {"name": task_name, "oracle": {"kind": "coq"}, "metric": {"name": "loss"}, "budget": {"max_trials": 1}}
    run_json = store.write_run_json({"task": task, "versions": {}})
    store.append("run.started", "harness", {"run_id": run_id, "task_name": task_name, "task": task, "seed": 0,
                                            "head_record": True, "run_json_sha256": run_json})
    for tid, parent, agent, score in (("base-0", None, "baseline", 1.0), ("t0001", "base-0", "rs", 0.5)):
        store.append("trial.proposed", "harness" if parent is None else f"agent:{agent}", {
            "trial_id": tid, "parent": parent, "agent": agent, "hypothesis": "try it",
            "proposal_blob": store.put_json_blob({"hypothesis": "try it", "edits": []}), "baseline": parent is None})
        store.append("trial.started", "harness", {"trial_id": tid})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "seconds": 0.1})
        if parent is None:
            store.append("baseline.measured", "harness", {"trial_ids": [tid], "scores": [score], "mean": score,
                                                          "sigma": 0.0, "floor": 0.0})
        store.append("trial.promoted", "harness", {"trial_id": tid, "score": score, "previous_best": parent,
                                                   "previous_score": None if parent is None else 1.0})
    store.append("run.finished", "harness", {"reason": "max_trials", "summary": {"trials": 1}})
    store.close()
    write_views(store.dir, RunState.fold(store.scan().events))
    return store.dir


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content hash ("dir" for directories): what 'nothing created,
    nothing lost' compares."""
    return {str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(code: int, err: str, *needles: str) -> str:
    """Assert exit 2 with exactly one line on stderr, a message and no traceback; return the line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("rrma-tui: ") and "unexpected error" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RRMA_DEBUG", raising=False)  # it would turn an unexpected error into a traceback
    for name in ("RRMA_FS_GUARD", "RRMA_CGROUPS", "RRMA_TRIAL_NETWORK", "RRMA_DISK_CAP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # default paths (./runs, ./experiments) land in the test's directory


def command_argv(command: str, run_dir: Path, runs: Path, tmp: Path) -> list[str]:
    return {"verify": ["verify", str(run_dir)], "show": ["show", str(run_dir)], "resume": ["resume", str(run_dir)],
            "export": ["export", str(run_dir), "--sqlite", str(tmp / "out.db")], "ls": ["ls", "--runs", str(runs)]}[command]


COMMANDS = ["verify", "show", "export", "resume", "ls"]


# ----------------------------------------------------------------------------- a run's files


def test_the_intact_run_passes_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control for the damaged copies below: the same run, intact, is accepted by each command."""
    runs = tmp_path / "runs"
    run_dir = make_run(runs)
    for command in COMMANDS:
        code, out, err = call(capsys, *command_argv(command, run_dir, runs, tmp_path))
        assert code == 0, (command, out, err)
    assert (tmp_path / "out.db").is_file()


@pytest.mark.parametrize("name", ["run.json", "events.jsonl", "head.json"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_run_file_that_is_a_directory_is_refused_in_one_line(name: str, command: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # on main: verify "unexpected error: IsADirectoryError" (exit 1) for all three; show, export, resume and
    # ls the same for events.jsonl; a head.json or run.json directory went unnoticed
    runs = tmp_path / "runs"
    good = make_run(runs, "good", task_name="healthy")
    run_dir = make_run(runs, "r1")
    path = run_dir / name
    path.unlink()
    path.mkdir()
    before = tree(tmp_path)
    code, out, err = call(capsys, *command_argv(command, run_dir, runs, tmp_path))
    refused(code, err, f"{name}: a directory, not a file", "damaged")
    assert tree(tmp_path) == before  # nothing created (no out.db, no lock file), nothing changed
    if command == "ls":  # the other run is still listed; this one as unreadable
        assert good.name in out and "healthy" in out
        assert "r1" in out and "unreadable" in out


# ----------------------------------------------------------------------------- --runs naming a file


RUNS_COMMANDS = [  # every command that takes --runs (on main: ls said "no runs" and exited 0; bench and run
    ["ls"],        # gave "unexpected error: FileExistsError" (exit 1))
    ["--headless"],
    ["--headless", "bench", "demo", "--trials", "1"],
    ["run", "--headless", str(DEMO / "task.yaml")],
    ["resume", "r1"],
    ["verify", "r1"],
    ["export", "r1", "--sqlite", "out.db"],
    ["show", "r1"],
    ["check", "coq", "x.v", "--theorem", "t", "--proof-file", "p.v"],
    ["review", "r1", "t0001", "approve", "--reviewer", "alice"],
    ["stop", "r1"],
    ["pause", "r1"],
    ["continue", "r1"],
    ["post", "r1", "hello"],
    ["steer", "r1", "hello"],
    ["task-schema"],
    ["experiment", "run", str(DEMO / "experiment.yaml")],
    ["experiment", "resume", "exp"],
    ["experiment", "show", "exp", "--headless"],
    ["experiment", "compare", "exp"],
]


@pytest.mark.parametrize("argv", RUNS_COMMANDS, ids=lambda argv: " ".join(a for a in argv if "/" not in a))
def test_runs_naming_a_file_is_refused_by_every_command(argv: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs-file"
    runs.write_text("not a directory\n")
    before = tree(tmp_path)
    code, _, err = call(capsys, *argv, "--runs", str(runs))
    refused(code, err, f"--runs {runs}: not a directory")
    assert tree(tmp_path) == before


def test_ls_of_a_missing_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert call(capsys, "ls", "--runs", str(empty))[0] == 0  # the control: an empty directory is fine
    code, _, err = call(capsys, "ls", "--runs", str(tmp_path / "missing"))  # on main: exit 0
    refused(code, err, "missing: no such directory")
    assert not (tmp_path / "missing").exists()


# ----------------------------------------------------------------------------- containment variables


@pytest.mark.parametrize("variable", ["RRMA_FS_GUARD", "RRMA_CGROUPS", "RRMA_TRIAL_NETWORK", "RRMA_DISK_CAP"])
@pytest.mark.parametrize("argv", [["--headless", "bench", "demo", "--trials", "1"],
                                  ["run", "--headless", str(DEMO / "task.yaml"), "--trials", "1"]],
                         ids=["bench", "run"])
def test_a_bad_containment_variable_is_refused_before_a_run_exists(variable: str, argv: list[str], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setenv(variable, "bogus")
    code, _, err = call(capsys, *argv, "--runs", str(runs))
    refused(code, err, f"{variable}='bogus'")
    assert not runs.exists()  # on main: an empty run directory was left behind


def test_without_the_upfront_check_a_bad_variable_leaves_a_run_directory(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The control: with the CLI's check turned off, the containment code raises only once the run
    directory exists (what main did), so the check above is what keeps it from being made."""
    import cli.main

    runs = tmp_path / "runs"
    monkeypatch.setenv("RRMA_FS_GUARD", "bogus")
    monkeypatch.setattr(cli.main, "check_environment", lambda args: None)
    code, _, err = call(capsys, "--headless", "bench", "demo", "--trials", "1", "--quiet", "--runs", str(runs))
    assert code != 0 and "RRMA_FS_GUARD" in err
    assert runs.is_dir() and any(runs.iterdir())


# ----------------------------------------------------------------------------- task files


def demo_task(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """A copy of the demo bench's task (and workspace) with one line of its YAML replaced."""
    shutil.copytree(DEMO / "workspace", tmp_path / "workspace")
    text = (DEMO / "task.yaml").read_text()
    assert old in text
    path = tmp_path / "task.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("old,new,field", [
    ("trial_seconds: 20", "trial_seconds: 1e400", "budget.trial_seconds"),  # on main: OverflowError mid-run
    ("trial_seconds: 20", "trial_seconds: .inf", "budget.trial_seconds"),
    ("max_wall_seconds: 300", "max_wall_seconds: .nan", "budget.max_wall_seconds"),
    ("min_sigmas: 2.0", "min_sigmas: .inf", "noise.min_sigmas"),
    ("trial_seconds: 20", "trial_seconds: 1.0e+300", "budget.trial_seconds"),  # finite, but past any wait
])
def test_a_task_float_that_is_not_finite_is_refused(old: str, new: str, field: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from rrma.task import load_task

    load_task(demo_task(tmp_path / "control"))  # the control: the file as it is loads
    path = demo_task(tmp_path, old, new)
    runs = tmp_path / "runs"
    code, _, err = call(capsys, "run", "--headless", str(path), "--runs", str(runs))
    refused(code, err, str(path), field)
    assert not runs.exists()


def alias_bomb(depth: int = 9) -> str:
    """A "billion laughs": each level a list of nine aliases of the one before (9**depth strings)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, depth + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", ["task", "experiment"])
def test_a_yaml_alias_bomb_is_refused_quickly_naming_the_file(kind: str, tmp_path: Path) -> None:
    # on main the task bomb was still being worked on after 30 s (killed by the timeout)
    if kind == "task":
        path = demo_task(tmp_path, "seed: 0", "seed: 0\n" + alias_bomb().replace("a9: &a9", "description: &a9"))
        argv = ["run", "--headless", str(path), "--runs", str(tmp_path / "runs")]
    else:
        path = tmp_path / "exp.yaml"
        path.write_text("name: x\nbench: demo\nseeds: 1\narms: {a: {}}\n" + alias_bomb().replace("a9:", "set:"))
        argv = ["experiment", "run", str(path), "--dir", str(tmp_path / "experiments")]
    before = tree(tmp_path)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cli.main", *argv], env=ENV, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert time.monotonic() - started < 20
    refused(proc.returncode, proc.stderr, str(path), "alias")
    assert tree(tmp_path) == before


def test_yaml_aliases_within_the_limit_still_load() -> None:
    """The control for the bomb: ordinary anchors and merge keys read as yaml.safe_load reads them,
    a recursive alias is refused (it could not be validated anyway)."""
    import yaml

    from rrma.task import YAMLTooLarge, read_yaml

    text = "base: &b {x: 1, y: [1, 2]}\nm:\n  <<: *b\n  z: 3\nl: [*b, *b]\n"
    assert read_yaml(text) == yaml.safe_load(text)
    assert read_yaml(alias_bomb(3)) == yaml.safe_load(alias_bomb(3))  # 9**3 strings: well within the limit
    with pytest.raises(YAMLTooLarge, match="alias bomb"):
        read_yaml(alias_bomb(6))  # 9**6 = 531441 strings
    with pytest.raises(YAMLTooLarge, match="recursive"):
        read_yaml("a: &a [1, *a]\n")


# ----------------------------------------------------------------------------- a log that is not UTF-8


def corrupt(run_dir: Path, line_index: int) -> tuple[int, int]:
    """Put a 0xff byte inside line ``line_index`` (0-based) of the log, as a disk or an editor could;
    return (line number, byte offset of the bad byte) as the messages should give them."""
    path = run_dir / "events.jsonl"
    lines = path.read_bytes().split(b"\n")
    at = lines[line_index].index(b'"kind"') + 2
    lines[line_index] = lines[line_index][:at] + b"\xff" + lines[line_index][at + 1:]  # same length
    path.write_bytes(b"\n".join(lines))
    return line_index + 1, sum(len(line) + 1 for line in lines[:line_index]) + at


def test_verify_reports_bytes_that_are_not_utf8_as_errors_and_goes_on(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "runs")
    assert call(capsys, "verify", str(run_dir))[0] == 0  # the control: intact, it verifies
    first = corrupt(run_dir, 3)
    second = corrupt(run_dir, 8)
    code, out, err = call(capsys, "verify", str(run_dir))  # on main: "unexpected error: UnicodeDecodeError"
    assert code == 1 and not err, err
    for number, offset in (first, second):  # both found: the check went on past the first
        assert f"error: line {number} (byte {offset}): byte 0xff is not UTF-8" in out, out
    assert "the log is corrupt" in out and "FAILED" in out


def test_ls_lists_the_other_runs_when_one_log_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    make_run(runs, "aaa", task_name="first")
    bad = make_run(runs, "bbb", task_name="second")
    make_run(runs, "ccc", task_name="third")
    number, offset = corrupt(bad, 5)
    code, out, err = call(capsys, "ls", "--runs", str(runs))  # on main: the whole listing failed (exit 1)
    refused(code, err, "bbb", f"line {number} (byte {offset})", "not UTF-8")
    assert "first" in out and "third" in out
    assert "bbb" in out and "unreadable" in out and "second" not in out


@pytest.mark.parametrize("command", ["show", "export", "resume"])
def test_show_export_resume_refuse_a_log_that_is_not_utf8(command: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run_dir = make_run(runs)
    number, offset = corrupt(run_dir, 4)
    before = tree(tmp_path)
    code, _, err = call(capsys, *command_argv(command, run_dir, runs, tmp_path))
    refused(code, err, f"line {number} (byte {offset})", "not UTF-8", "corrupt")
    assert tree(tmp_path) == before  # no out.db, no lock, the log as it was


def test_a_torn_last_line_cut_inside_a_character_is_not_corruption(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A crash mid-write can cut a multi-byte character at the end of the fragment: that is a tear
    (a warning, the run still reads), not bytes changed afterwards."""
    run_dir = make_run(tmp_path / "runs")
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(json.dumps({"seq": 99, "kind": "note", "data": {"text": "café"}}, ensure_ascii=False)
                 .encode()[:-4])  # ends with "caf" and the first byte of "é"
    code, out, _ = call(capsys, "verify", str(run_dir))
    assert code == 0 and "torn final line" in out and "not UTF-8" not in out, out
    assert call(capsys, "show", str(run_dir))[0] == 0
