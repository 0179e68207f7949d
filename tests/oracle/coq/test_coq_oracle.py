"""The ``coq`` oracle plug-in (oracle/coq/oracle.py) and ``rrma-tui check``: the install hint,
outcomes from verdicts, the check command's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coq_fixtures import SOURCE
from needs import needs_coq

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


# a file whose own foundations include an axiom, as Coq's classical reals rest on two (every Reals lemma,
# even Rplus_comm, relies on ClassicalDedekindReals.sig_forall_dec and functional_extensionality_dep)
WITH_AXIOM = ("Axiom ax : forall n : nat, n + 0 = n.\n"
              "Lemma uses : forall n, n + 0 = n.\nProof. exact ax. Qed.\n"
              "Lemma plain : 2 + 0 = 2.\nProof. reflexivity. Qed.\n")


@needs_coq
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_proof_may_rest_on_the_axioms_its_original_rests_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              rule: bool) -> None:
    """A proof relying on the axiom the original proof relies on is accepted (before: refused, and so was the
    original itself: no Reals theorem could be solved); the same axiom for a theorem whose original needs none
    is still refused, naming what the original relies on."""
    from oracle.coq.reference import OriginalAxioms

    if not rule:
        monkeypatch.setattr(OriginalAxioms, "judge", lambda self, checker, task, verdict, timeout_s: verdict)
    source = tmp_path / "ax.v"
    source.write_text(WITH_AXIOM)
    oracle = CoqOracle({"sources": [str(source)], "warm": True})
    oracle.prepare(tmp_path, tmp_path)
    try:
        def evaluate(theorem: str, proof: str) -> Outcome:
            return oracle.evaluate(EvalContext(trial_id="t1", trial_dir=tmp_path, budget=Budget(seconds=60),
                                               proposal=Proposal(theorem=theorem, proof=proof)))

        own = evaluate("uses", "intro n. apply ax.")
        borrowed = evaluate("plain", "apply ax.")
    finally:
        oracle.close()
    assert borrowed.status == Status.rejected and borrowed.metrics["cheat"]
    assert "relies on axiom(s) ax" in borrowed.metrics["reason"]
    if rule:
        assert own.status == Status.ok, own.metrics["reason"]
        assert own.metrics["reason"] == "accepted: relies on axiom(s) ax, as the original proof does"
        assert borrowed.metrics["reason"] == ("Print Assumptions not closed: relies on axiom(s) ax, which the original "
                                              "proof does not (it relies on no axiom)")
    else:
        assert own.status == Status.rejected and "relies on axiom(s) ax" in own.metrics["reason"]


@needs_coq
def test_a_classical_reals_theorem_is_solved_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real case: a Reals lemma. Its human proof and a search's proof both rest on the reals' axioms; `check
    coq` accepts both, naming them, and still refuses a proof that adds `classic`, which the original does not use."""
    source = tmp_path / "r.v"
    source.write_text("Require Import Reals Classical.\nOpen Scope R_scope.\n"
                      "Lemma rx : forall a b : R, a + b = b + a.\nProof. intros; ring. Qed.\n")
    proofs = {"human": "intros; ring.", "found": "exact Rplus_comm.",
              "classic": "intros a b. destruct (classic (a = b)); ring."}
    said = {}
    for key, text in proofs.items():
        (tmp_path / f"{key}.txt").write_text(text)
        code = run_check("coq", source, "rx", tmp_path / f"{key}.txt")
        said[key] = (code, json.loads(capsys.readouterr().out))
    for key in ("human", "found"):
        code, out = said[key]
        assert code == 0 and out["accepted"], out
        assert "ClassicalDedekindReals.sig_forall_dec" in out["reason"] and "as the original proof does" in out["reason"]
    code, out = said["classic"]
    assert code == 1 and not out["accepted"] and "classic" in out["axioms"], out
    assert out["reason"].startswith("Print Assumptions not closed: relies on axiom(s) classic, which the original"), out


# a functor: its parameter's fields are hypotheses of every theorem in it (Print Assumptions lists them as
# axioms, short-named); `own` is an axiom the file itself declares inside the functor
FUNCTOR = ("Module Type S.\nParameter t : Type.\nParameters z o : t.\nParameter le : t -> t -> Prop.\n"
           "Axiom le_z : le z z.\nAxiom le_o : le o o.\nEnd S.\n"
           "Module F (Import M : S).\nAxiom own : forall x y : t, le x y.\n"
           "Lemma either : le z z \\/ le o o.\nProof. left. apply le_z. Qed.\nEnd F.\n")


@needs_coq
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("rule", [True, False], ids=["rule on", "rule off"])
def test_a_proof_may_rest_on_any_field_of_the_open_functors_parameter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      warm: bool, rule: bool) -> None:
    """Inside `Module F (Import M : S)`, a proof using a field of `M` the original does not use (`le_o`) proves
    the same theorem of the functor: accepted with the rule (refused before it, as not the original's axiom). An
    axiom the file declares in the functor (`own`) is still refused: `Locate` names it by the file's path, not `M`'s."""
    import oracle.coq.reference as reference

    monkeypatch.setattr(reference, "PARAMETER_FIELDS", rule)
    source = tmp_path / "fun.v"
    source.write_text(FUNCTOR)
    oracle = CoqOracle({"sources": [str(source)], "warm": warm})
    oracle.prepare(tmp_path, tmp_path)
    try:
        def evaluate(proof: str) -> Outcome:
            return oracle.evaluate(EvalContext(trial_id="t1", trial_dir=tmp_path, budget=Budget(seconds=60),
                                               proposal=Proposal(theorem="either", proof=proof)))

        other_field = evaluate("right. apply le_o.")
        file_axiom = evaluate("left. apply own.")
        original = evaluate("left. apply le_z.")
    finally:
        oracle.close()
    assert original.status == Status.ok, original.metrics["reason"]
    assert file_axiom.status == Status.rejected and "relies on axiom(s) own" in file_axiom.metrics["reason"]
    if rule:
        assert other_field.status == Status.ok, other_field.metrics["reason"]
        said = other_field.metrics["reason"].split("(and on ")[1]
        assert said.endswith(", of the open functor's parameter)") and "le_o" in said and "own" not in said
    else:
        assert other_field.status == Status.rejected and "le_o, which the original proof does not" in \
            other_field.metrics["reason"]
