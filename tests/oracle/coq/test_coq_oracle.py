"""The ``coq`` oracle plug-in (oracle/coq/oracle.py) and ``rrma-tui check``: the install hint,
outcomes from verdicts, the check command's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coq_fixtures import SOURCE, needs_coq

from oracle.check_cli import run_check
from oracle.coq.cold import CoqChecker
from oracle.coq.oracle import CoqOracle
from oracle.coq.sandboxing import CoqNotFound, find_coq_binary
from rrma.contracts import EvalContext
from rrma.trial import Budget, Outcome, Proposal, Status


def test_missing_coq_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CoqNotFound, match="apt-get install coq"):
        find_coq_binary("coqc")
    with pytest.raises(CoqNotFound, match="apt-get install coq"):
        CoqChecker()


@needs_coq
def test_oracle_evaluate(tmp_path: Path) -> None:
    source = tmp_path / "ws" / "t.v"
    source.parent.mkdir()
    source.write_text(SOURCE)
    oracle = CoqOracle({"source": "t.v"})
    info = oracle.prepare(tmp_path, source.parent)
    assert info["theorems"] == 4 and info["coq"].startswith("8.")
    try:
        def evaluate(theorem: str | None, proof: str | None) -> Outcome:
            ctx = EvalContext(trial_id="t1", trial_dir=tmp_path, budget=Budget(seconds=60),
                              proposal=Proposal(theorem=theorem, proof=proof))
            return oracle.evaluate(ctx)

        good = evaluate("add_zero", "induction n; simpl; auto.")
        assert good.status == Status.ok and good.score == 1.0 and good.metrics["accepted"]
        cheat = evaluate("add_zero", "admit.")
        assert cheat.status == Status.rejected and cheat.metrics["cheat"] and "uses admit" in cheat.feedback
        assert evaluate("nope", "auto.").status == Status.invalid
        assert evaluate("add_zero", None).status == Status.invalid
    finally:
        oracle.close()


@needs_coq
def test_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "t.v"
    source.write_text(SOURCE)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Proof.\n  induction n; simpl; auto.\nQed.\n")
    bad.write_text("Axiom x : False. destruct x.\n")
    assert run_check("coq", source, "add_zero", good) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accepted"] is True and out["reason"] == "accepted" and out["messages"] == []
    assert run_check("coq", source, "add_zero", bad) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["accepted"] is False and "declares an axiom" in out["reason"]
    assert run_check("coq", source, "missing", good) == 2
    assert "'missing' names no theorem" in capsys.readouterr().err
    assert run_check("coq", tmp_path / "nope.v", "add_zero", good) == 2
    assert run_check("coq", source, "add_zero", tmp_path / "nope.txt") == 2
    broken = tmp_path / "broken.v"
    broken.write_text("Lemma l : True. (* unterminated\n")
    assert run_check("coq", broken, "l", good) == 2
    assert "unterminated comment" in capsys.readouterr().err
