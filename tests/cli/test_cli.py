"""The CLI: exit codes, messages, and the rule that headless code never imports textual."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
FIXTURE = REPO / "tests" / "fixtures" / "logs" / "v1_demo"


def cli(*args: str, cwd: Path | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=ENV, cwd=cwd or REPO, capture_output=True,
                          text=True, timeout=timeout)


def _core_modules() -> list[str]:
    """Every module of the core packages (bench workspaces are agent files, not modules)."""
    out = []
    for package in ("rrma", "oracle", "agents", "benches"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if "workspace" in rel.parts or "__pycache__" in rel.parts:
                continue
            out.append(".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
    return out


def _cli_modules() -> list[str]:
    """The headless CLI's modules, and the console script's entry point (which imports the TUI only to open it)."""
    return ["cli", *(f"cli.{path.stem}" for path in sorted((REPO / "cli").glob("*.py")) if path.stem != "__init__"),
            "tui.main"]


def test_core_never_imports_textual() -> None:
    """Import every core module (and the CLI) in a fresh interpreter; none may pull in textual."""
    modules = [*_core_modules(), *_cli_modules()]
    assert "cli.main" in modules and "cli.runs" in modules
    assert len(modules) > 40
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    if any(m == 'textual' or m.startswith('textual.') for m in sys.modules):\n"
        "        print('textual imported by', name); sys.exit(1)\n"
        f"print('ok', {len(modules)})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok")


def test_headless_commands_of_the_console_script_never_load_textual(tmp_path: Path) -> None:
    """`rrma-tui ls` and `rrma-tui --headless bench --list` through the console script's entry point
    (tui.main:main, which hands the CLI its TUI opener) run to the end without importing textual."""
    code = ("import sys\nfrom tui.main import main\n"
            f"codes = [main(['ls', '--runs', {str(tmp_path)!r}]), main(['--headless', 'bench', '--list'])]\n"
            "loaded = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]\n"
            "print('codes', codes, 'textual modules', len(loaded))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    assert "codes [0, 0] textual modules 0" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_commands_that_show_the_tui_hand_a_request_to_the_opener(tmp_path: Path) -> None:
    """The CLI never imports the TUI: `rrma-tui RUN`, `run TASK` without --headless and `experiment show`
    hand a TuiRequest to the opener main was given (tui.main passes the one that starts the app)."""
    from cli.main import main
    from cli.output import TuiRequest

    asked: list[TuiRequest] = []

    def opener(request: TuiRequest) -> int:
        asked.append(request)
        return 0

    assert main([FIXTURE.name, "--runs", str(FIXTURE.parent), "--reviewer", "carol"], open_tui=opener) == 0
    assert asked[-1] == TuiRequest(FIXTURE.parent, FIXTURE.parent / FIXTURE.name, reviewer="carol")
    task = REPO / "benches" / "demo" / "task.yaml"
    assert main(["run", str(task), "--runs", str(tmp_path), "--trials", "3"], open_tui=opener) == 0
    child = asked[-1].start_args
    assert child is not None and child[:2] == ("run", str(task)) and "--headless" in child and "3" in child
    assert not list(tmp_path.iterdir())  # nothing ran here: the TUI's driver runs it
    from rrma.run.experiment import new_experiment, open_experiment, spec_from_dict

    spec, task_path = spec_from_dict({"name": "shown", "bench": "demo", "seeds": 1, "arms": {"a": {}}}, source="test")
    exp = open_experiment(new_experiment(spec, task_path, tmp_path / "experiments", exp_id="shown"))
    assert main(["experiment", "show", str(exp.dir)], open_tui=opener) == 0
    assert asked[-1] == TuiRequest(exp.runs_dir, experiment=exp.dir)
    assert len(asked) == 3


def test_without_an_opener_a_tui_command_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m cli.main RUN` (no TUI to open): one line, exit 2, instead of a traceback or an import of the UI."""
    from cli.main import main

    assert main([str(FIXTURE)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "add --headless" in lines[0]


def test_headless_bench_demo_end_to_end(tmp_path: Path) -> None:
    proc = cli("--headless", "bench", "demo", "--runs", str(tmp_path), "--trials", "6")
    assert proc.returncode == 0, proc.stderr
    for label in ("baseline ± σ", "best", "delta", "trials", "cache hits", "wall time", "fs guard"):
        assert label in proc.stdout
    from rrma.contain import disk

    assert ("kernel-enforced" in proc.stdout) == (disk.unavailable_reason() is None)  # the summary's disk row
    assert "new best" in proc.stdout  # progress lines
    [run] = list(tmp_path.iterdir())
    verify = cli("verify", str(run))
    assert verify.returncode == 0 and "chain intact" in verify.stdout
    listing = cli("ls", "--runs", str(tmp_path))
    assert run.name[:20] in listing.stdout.replace("…", "") or "demo" in listing.stdout
    show = cli("show", run.name, "--runs", str(tmp_path))
    assert show.returncode == 0 and "t0006" in show.stdout
    db = tmp_path / "out.db"
    exported = cli("export", str(run), "--sqlite", str(db))
    assert exported.returncode == 0 and "trials" in exported.stdout
    again = cli("export", str(run), "--sqlite", str(db))
    assert "unchanged, skipped" in again.stdout


def test_the_readmes_first_command_runs_where_it_is_typed(tmp_path: Path) -> None:
    """`rrma-tui --headless bench demo` exactly as the README gives it: no --runs, so runs go to ./runs,
    a relative path (an oracle that handed a relative trial path to its scorer, whose cwd is its own
    directory, failed every trial in a fresh clone while every test passed absolute paths)."""
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "bench", "demo", "--trials", "4"], env=ENV,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "baseline_failed" not in proc.stdout and "new best" in proc.stdout
    [run] = list((tmp_path / "runs").iterdir())
    assert subprocess.run([sys.executable, "-m", "cli.main", "verify", str(run)], env=ENV, cwd=tmp_path,
                          capture_output=True, timeout=60).returncode == 0


def test_a_run_without_the_sandbox_or_cgroups_says_so(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "bench", "demo", "--runs", str(tmp_path),
                           "--trials", "1"], env={**ENV, "RRMA_FS_GUARD": "off", "RRMA_CGROUPS": "off",
                                                   "RRMA_DISK_CAP": "off"}, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "trial sandbox off: turned off (RRMA_FS_GUARD=off)" in proc.stdout
    assert "trial limits by polling" in proc.stdout and "turned off (RRMA_CGROUPS=off)" in proc.stdout
    assert "trial disk budget watched (not kernel-enforced: turned off (RRMA_DISK_CAP=off))" in proc.stdout
    [run] = list(tmp_path.iterdir())
    versions = json.loads((run / "run.json").read_text())["versions"]
    assert versions["fs_guard"].startswith("off: turned off") and versions["limits"].startswith("polling")
    assert versions["disk"].startswith("watched (not kernel-enforced: turned off (RRMA_DISK_CAP=off))")


def test_bad_inputs_exit_2_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "task.yaml"
    bad.write_text("name: x\nbudget:\n  trial_seconds: nope\n")
    proc = cli("run", str(bad), "--headless")
    assert proc.returncode == 2 and "budget.trial_seconds" in proc.stderr
    proc = cli("--headless", "bench", "nonexistent")
    assert proc.returncode == 2 and "unknown bench 'nonexistent'" in proc.stderr
    proc = cli("verify", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    proc = cli("run", str(REPO / "benches/demo/task.yaml"), "--headless", "--set", "oops")
    assert proc.returncode == 2 and "expected KEY=VALUE" in proc.stderr
    proc = cli("run", str(REPO / "benches/demo/task.yaml"), "--headless", "--backend", "nonsense", "--runs", str(tmp_path))
    assert proc.returncode == 2 and "unknown agent backend 'nonsense'" in proc.stderr


def test_failed_baseline_exits_1(tmp_path: Path) -> None:
    proc = cli("run", str(REPO / "benches/demo/task.yaml"), "--headless", "--runs", str(tmp_path),
               "--set", 'oracle.params={"command": ["false"]}')
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "baseline" in proc.stderr


def test_verify_detects_tampering(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    assert cli("verify", str(run)).returncode == 0
    lines = (run / "events.jsonl").read_text().splitlines()
    obj = json.loads(lines[5])
    obj["ts"] = "2000-01-01T00:00:00Z"
    lines[5] = json.dumps(obj, separators=(",", ":"))
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    proc = cli("verify", str(run))
    assert proc.returncode == 1 and "hash mismatch" in proc.stdout
    shutil.copytree(FIXTURE, tmp_path / "run2")
    (tmp_path / "run2" / "results.tsv").write_text("edited by hand\n")
    proc = cli("verify", str(tmp_path / "run2"))
    assert proc.returncode == 1 and "results.tsv does not match" in proc.stdout


def test_review_command_and_help(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    proc = cli("review", str(run), "t0001", "approve", "--reviewer", "carol", "--note", "fine")
    assert proc.returncode == 0 and "approve t0001 by carol" in proc.stdout
    assert '"decision":"approve"' in (run / "events.jsonl").read_text()
    proc = cli("review", str(run), "t9999", "approve")
    assert proc.returncode == 2 and "no trial 't9999'" in proc.stderr
    helptext = cli("--help").stdout
    for command in ("bench", "run", "resume", "verify", "export", "ls", "show", "check", "review", "task-schema"):
        assert command in helptext
    schema = cli("task-schema")
    assert "budget.trial_seconds" in schema.stdout and "noise.min_sigmas" in schema.stdout
    listing = cli("bench", "--list")
    assert "demo" in listing.stdout


@pytest.mark.skipif(shutil.which("coqc") is None, reason="coqc not installed (apt-get install -y coq)")
def test_check_command_prints_a_json_verdict(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("intros n. induction n; simpl; auto.")
    cheat = tmp_path / "cheat.txt"
    cheat.write_text("Admitted.")
    source = str(REPO / "benches" / "coq" / "arith.v")
    proc = cli("check", "coq", source, "--theorem", "add_zero_right", "--proof-file", str(good))
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["accepted"] is True and verdict["reason"] == "accepted"
    proc = cli("check", "coq", source, "--theorem", "add_zero_right", "--proof-file", str(cheat))
    assert proc.returncode == 1 and json.loads(proc.stdout)["accepted"] is False
    proc = cli("check", "coq", source, "--theorem", "no_such_theorem", "--proof-file", str(good))
    assert proc.returncode == 2


@pytest.mark.skipif(shutil.which("lake") is not None, reason="Lean is installed: the missing-toolchain path cannot be shown")
def test_lean_without_a_toolchain_exits_2_with_the_install_hint(tmp_path: Path) -> None:
    proof = tmp_path / "p.txt"
    proof.write_text("by omega")
    source = str(REPO / "lean_project" / "Theorems" / "NatArith.lean")
    proc = cli("check", "lean", source, "--theorem", "zero_add_left", "--proof-file", str(proof))
    assert proc.returncode == 2
    bench = cli("--headless", "bench", "lean", "--runs", str(tmp_path / "runs"))
    assert bench.returncode == 2
    assert "elan" in bench.stdout + bench.stderr and "lean-toolchain" in bench.stdout + bench.stderr


def _one_clean_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The exit code is ``code`` and stderr is exactly one line, not a traceback."""
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rrma-tui: "), proc.stderr
    return lines[0]


DEMO = str(REPO / "benches" / "demo" / "task.yaml")


def test_bad_overrides_are_one_line_and_exit_2(tmp_path: Path) -> None:
    line = _one_clean_line(cli("run", DEMO, "--headless", "--runs", str(tmp_path), "--set", "name.first=1"), 2)
    assert "'name.first'" in line and "name is a str" in line
    line = _one_clean_line(cli("run", DEMO, "--headless", "--runs", str(tmp_path), "--set", "budget.max_trials=[1"), 2)
    assert "--set 'budget.max_trials=[1': the value is not valid YAML" in line
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # no run was started


def test_a_task_path_that_is_not_a_task_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    cases = {str(tmp_path): "is a directory", str(tmp_path / "absent.yaml"): "no such task file",
             str(empty): "the file is empty", str(binary): "not UTF-8 text", "/dev/null": "not a regular file"}
    for path, message in cases.items():
        for argv in (("--headless", "run", path), ("run", path, "--headless")):
            line = _one_clean_line(cli(*argv, "--runs", str(tmp_path / "runs")), 2)
            assert message in line, (path, line)
    assert not (tmp_path / "runs").exists()


def test_export_to_an_unusable_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    line = _one_clean_line(cli("export", str(FIXTURE), "--sqlite", "/nonexistent-dir/x.db"), 2)
    assert "directory /nonexistent-dir does not exist" in line
    line = _one_clean_line(cli("export", str(FIXTURE), "--sqlite", str(tmp_path)), 2)
    assert "is a directory" in line
    not_db = tmp_path / "notes.txt"
    not_db.write_text("not a database\n" * 100)
    line = _one_clean_line(cli("export", str(FIXTURE), "--sqlite", str(not_db)), 2)
    assert "cannot use it as an SQLite database" in line


def _demo_task_dir(tmp_path: Path) -> Path:
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir, ignore=shutil.ignore_patterns("__pycache__"))
    return task_dir


def test_a_workspace_with_a_binary_file_or_an_escaping_link_is_refused_before_the_run(tmp_path: Path) -> None:
    task_dir = _demo_task_dir(tmp_path)
    ws = task_dir / "workspace"
    (ws / "weights.bin").write_bytes(b"\x00\x01\xff")
    runs = tmp_path / "runs"
    line = _one_clean_line(cli("--headless", "run", str(task_dir / "task.yaml"), "--runs", str(runs)), 2)
    assert "workspace.source: weights.bin: not valid UTF-8 text" in line
    (ws / "weights.bin").unlink()
    (ws / "helper.py").symlink_to(REPO / "README.md")
    line = _one_clean_line(cli("--headless", "run", str(task_dir / "task.yaml"), "--runs", str(runs)), 2)
    assert "workspace.source: helper.py: symlink escapes the workspace" in line
    assert not runs.exists()  # refused before a run directory was made


DROPPER = '''from pathlib import Path

from oracle.command import CommandOracle


class BinaryDropper(CommandOracle):
    """Its prepare() writes a binary file into the workspace after the task was loaded."""

    def prepare(self, run_dir, workspace):
        (Path(workspace) / "data.bin").write_bytes(b"\\x00\\xff")
        return {}
'''


def test_an_error_during_the_run_is_recorded_as_error_and_exits_1(tmp_path: Path) -> None:
    """The workspace turns bad after the task loaded: run.finished says error (never done), with the
    message; the CLI prints that one line and exits 1."""
    task_dir = _demo_task_dir(tmp_path)
    (tmp_path / "dropper.py").write_text(DROPPER)
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "run", str(task_dir / "task.yaml"),
                           "--runs", str(runs), "--set", "oracle.kind=dropper:BinaryDropper"],
                          env={**ENV, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"}, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    line = _one_clean_line(proc, 1)
    assert "the run ended with an error: InvalidEdit: data.bin: not valid UTF-8 text" in line
    [run] = list(runs.iterdir())
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    [finished] = [e for e in events if e["kind"] == "run.finished"]
    assert finished["data"]["reason"] == "error"
    assert "data.bin: not valid UTF-8 text" in finished["data"]["summary"]["error"]
    assert any(e["kind"] == "note" and e["data"]["text"].startswith("run error: InvalidEdit") for e in events)
    assert cli("verify", str(run)).returncode == 0


NASTY = "prog.py:x: low [red]boom[/red] [/x] :thumbs_up:"


def test_messages_print_literally_without_markup_or_emoji(tmp_path: Path) -> None:
    """`prog.py:x: low` once printed as `prog.py❌ low`: user, agent and oracle text is printed as is."""
    line = _one_clean_line(cli("--headless", "run", str(tmp_path / f"{NASTY}.yaml")), 2)
    assert line == f"rrma-tui: {tmp_path / NASTY}.yaml: no such task file"


def test_progress_and_tables_print_agent_text_literally(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from cli.output import console
    from cli.runs import Progress
    from rrma.run.loop import start_run
    from rrma.task import load_task
    from rrma.trial import FileEdit, Proposal

    data = SimpleNamespace(score=None, delta_sigma=None, cached=True, feedback=f"crash: {NASTY}\nmore",
                           status="crash", trial_id="t0001")
    with console.capture() as captured:
        Progress(quiet=False)(SimpleNamespace(kind="trial.finished", data=data))
    assert f"t0001 ☠ crash     [cached] crash: {NASTY}\n" in captured.get()

    class Scripted:  # a hypothesis with markup and emoji codes (and an unmatched closing tag)
        name = "nasty"

        def __init__(self) -> None:
            self.config = load_task(DEMO).agents[0].model_copy(update={"name": "nasty"})
            self.sent = False

        def propose(self, ctx: object) -> Proposal | None:
            if self.sent:
                return None
            self.sent = True
            return Proposal(hypothesis=":x: [red]b[/] [/x]", edits=[
                FileEdit(path="objective.py", replacements=[("X = 0.0 ", "X = 1.0 ")])])

        def observe(self, summary: object) -> None:
            return None

        def close(self) -> None:
            return None

    task = load_task(DEMO, {"budget.max_trials": 1, "noise.baseline_repeats": 1})
    result = start_run(task, tmp_path, agents=[Scripted()])  # type: ignore[list-item]
    show = cli("show", str(result.run_dir))
    assert show.returncode == 0, show.stderr
    assert ":x: [red]b[/] [/x]" in show.stdout
