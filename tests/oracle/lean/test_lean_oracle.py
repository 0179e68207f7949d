"""The ``lean`` oracle plug-in (oracle/lean/oracle.py) and the Lean bench: outcomes from verdicts, the
theorem list, the install hint without Lean, and the real-Lean tests (skipped where Lean is missing)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lean_fixtures import FIXTURES, REPO, needs_lean, recorded_checker

from oracle.lean.checker import LeanChecker
from oracle.lean.oracle import LeanOracle
from oracle.lean.project import LeanNotInstalled
from oracle.strip_lean import strip_lean_file, strip_project
from rrma.contracts import EvalContext, OracleError
from rrma.trial import Budget, Proposal, Status


def test_lean_oracle_evaluate_maps_verdicts_to_outcomes(tiny, tmp_path: Path) -> None:
    oracle = LeanOracle({"source": str(FIXTURES / "Tiny.lean")})
    oracle.checker = recorded_checker("tiny_session")

    def run(theorem: str | None, proof: str | None):
        ctx = EvalContext(trial_id="t1", trial_dir=tmp_path, budget=Budget(seconds=5),
                          proposal=Proposal(theorem=theorem, proof=proof))
        return oracle.evaluate(ctx)

    ok = run("Tiny.double_two", "by\n  decide")
    assert ok.status == Status.ok and ok.score == 1.0 and ok.metrics["difficulty"] == "easy"
    assert json.loads(ok.log)["accepted"] is True
    cheat = run("Tiny.double_two", "Tiny.cheat.elim")
    assert cheat.status == Status.rejected and cheat.score is None and cheat.metrics["cheat"] is True
    assert "axiom not allowed: Tiny.cheat" in cheat.feedback
    assert run("Tiny.nope", "by decide").status == Status.invalid
    assert run("Tiny.double_two", None).status == Status.invalid
    assert oracle.kind == "lean" and set(oracle.tasks) == {"Tiny.helper_sorry", "Tiny.native_fact", "Tiny.double_two"}
    oracle.close()


# ----------------------------------------------------------------------------- without Lean


def test_lean_modules_never_import_textual() -> None:
    code = ("import sys, oracle.lean, oracle.strip_lean, benches.lean.bench; "
            "assert 'textual' not in sys.modules, 'textual imported'")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_missing_lean_raises_with_elan_and_toolchain_hint(tiny, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    checker = LeanChecker(REPO / "lean_project")
    with pytest.raises(LeanNotInstalled) as info:
        checker.check(tiny["Tiny.double_two"], "by decide")
    toolchain = (REPO / "lean_project" / "lean-toolchain").read_text(encoding="utf-8").strip()
    assert "elan" in str(info.value) and toolchain in str(info.value) and "lean-toolchain" in str(info.value)
    # a cheat is still rejected by the text rules without Lean
    assert checker.check(tiny["Tiny.double_two"], "sorry").reason.startswith("forbidden in proof (sorry)")


def test_bench_lean_exits_2_with_the_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from benches.lean import bench

    monkeypatch.setenv("PATH", str(tmp_path))
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    assert bench.run(args) == 2
    err = capsys.readouterr().err
    assert "elan" in err and "lean-toolchain" in err
    args = parser.parse_args(["--source", str(tmp_path / "missing.lean")])
    assert bench.run(args) == 2
    assert "does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------------------- real Lean


@needs_lean
@pytest.mark.lean
@pytest.mark.slow
def test_real_lean_accepts_original_proofs_and_rejects_cheats() -> None:
    tasks = {t.name: t for t in strip_project(REPO / "lean_project")}
    checker = LeanChecker(REPO / "lean_project")
    checker.build()
    try:
        for name in ("RRMA.NatArith.two_mul_eq_add", "RRMA.Lists.rev_rev", "RRMA.Logic.and_or_distrib"):
            verdict = checker.check(tasks[name], tasks[name].original_proof, timeout_s=120)
            assert verdict.accepted, (name, verdict.reason, verdict.messages)
        task = tasks["RRMA.NatArith.two_mul_eq_add"]
        for proof, reason in [("by sorry", "forbidden"), ("by\n  skip", "does not check"),
                              ("by native_decide", "forbidden")]:
            verdict = checker.check(task, proof, timeout_s=120)
            assert not verdict.accepted and verdict.reason.startswith(reason), verdict.reason
    finally:
        checker.close()


@needs_lean
@pytest.mark.lean
@pytest.mark.slow
def test_real_lean_accepts_every_original_proof() -> None:
    checker = LeanChecker(REPO / "lean_project")
    checker.build()
    try:
        failed = [(t.name, v.reason) for t in strip_project(REPO / "lean_project")
                  if not (v := checker.check(t, t.original_proof, timeout_s=120)).accepted]
    finally:
        checker.close()
    assert failed == []


@needs_lean
@pytest.mark.lean
@pytest.mark.slow
def test_real_lean_audit_catches_a_context_axiom(tmp_path: Path) -> None:
    src = tmp_path / "Cheat.lean"
    src.write_text("axiom cheat : False\n\ntheorem t : 1 = 2 := by\n  exact absurd rfl (by decide)\n",
                   encoding="utf-8")
    task = strip_lean_file(src)[0]
    checker = LeanChecker(REPO / "lean_project")
    checker.build()
    try:
        verdict = checker.check(task, "cheat.elim", timeout_s=120)
        assert not verdict.accepted and verdict.reason == "axiom not allowed: cheat", verdict.reason
        assert checker.check(task, "by\n  have h := (propext (Iff.refl True))\n  exact cheat.elim",
                             timeout_s=120).reason.startswith("axiom not allowed")
    finally:
        checker.close()


# ----------------------------------------------------------------------------- the bench driver


def test_bench_driver_runs_a_stripped_file_through_the_recorded_repl(tiny, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """benches.proofs.run_proof_bench through the loop with the Lean checker (the recorded REPL, through
    benches.proofs.CheckerOracle): agents, red team, run dir, exit 0."""
    from benches.lean import bench
    from benches.proofs import run_proof_bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--only", "Tiny.double_two", "--attempts", "6", "--red-team"])
    args.runs, args.agents, args.backend, args.model, args.seed, args.quiet = tmp_path, 1, None, None, 0, True
    checker = recorded_checker("tiny_bench")
    tasks = strip_lean_file(FIXTURES / "Tiny.lean")
    assert run_proof_bench(args, tasks, "lean", oracle_kind="lean", oracle_params={}, checker=checker) == 0
    checker.close()
    (run_dir,) = tmp_path.iterdir()
    report = json.loads((run_dir / "bench_report.json").read_text(encoding="utf-8"))
    assert report["solved"] == 1 and report["cheats_accepted"] == 0 and report["cheats_rejected"] >= 1
    assert report["proofs"]["Tiny.double_two"] in ("by rfl", "by decide")
    assert "bench lean: 1/1 solved" in capsys.readouterr().out


def test_lean_oracle_names_its_theorems_and_keeps_a_selection(tmp_path: Path) -> None:
    """What the per-theorem policy reads (no Lean needed: the files are stripped, not checked)."""
    source = FIXTURES / "Tiny.lean"
    every = [t.name for t in strip_lean_file(source)]
    assert len(every) >= 2
    oracle = LeanOracle({"sources": [str(source)], "theorems": [every[1], every[0]]})
    views = oracle.theorems()
    assert [v["name"] for v in views] == [every[1], every[0]]
    assert all(v["file"] == "Tiny.lean" and "source_file" not in v and "original_proof" not in v for v in views)
    assert str(FIXTURES) not in json.dumps(views)
    with pytest.raises(OracleError, match=r"not in the files: Tiny\.nope"):
        LeanOracle({"sources": [str(source)], "theorems": ["Tiny.nope"]}).theorems()


def test_the_lean_oracle_declares_the_repl_header_as_its_set_up() -> None:
    """A REPL session loads the file's imports once under its own bound (``header_timeout_s``) before a check's
    seconds start: the oracle declares it, so the loop does not abandon a first check in it; the CLI has none."""
    oracle = LeanOracle({"source": str(FIXTURES / "Tiny.lean")})
    assert oracle.setup_allowance_s() == oracle.checker.header_timeout_s > 60.0
    assert LeanOracle({"source": str(FIXTURES / "Tiny.lean"), "mode": "cli"}).setup_allowance_s() == 0.0
