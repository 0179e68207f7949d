"""The CLI: exit codes, messages, and the rule that headless code never imports textual."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
FIXTURE = REPO / "tests" / "fixtures" / "logs" / "v1_demo"


def cli(*args: str, cwd: Path | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], env=ENV, cwd=cwd or REPO, capture_output=True,
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


def test_core_never_imports_textual() -> None:
    """Import every core module (and the CLI) in a fresh interpreter; none may pull in textual."""
    modules = [*_core_modules(), "tui.cli"]
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


def test_headless_bench_demo_end_to_end(tmp_path: Path) -> None:
    proc = cli("--headless", "bench", "demo", "--runs", str(tmp_path), "--trials", "6")
    assert proc.returncode == 0, proc.stderr
    for label in ("baseline ± σ", "best", "delta", "trials", "cache hits", "wall time", "fs guard"):
        assert label in proc.stdout
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


def test_a_run_without_the_fs_guard_says_so(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "--headless", "bench", "demo", "--runs", str(tmp_path),
                           "--trials", "1"], env={**ENV, "RRMA_FS_GUARD": "off"}, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "file-system guard off: turned off (RRMA_FS_GUARD=off)" in proc.stdout
    [run] = list(tmp_path.iterdir())
    assert json.loads((run / "run.json").read_text())["versions"]["fs_guard"].startswith("off: turned off")


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
