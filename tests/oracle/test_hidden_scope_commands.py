"""The rediscover view keeps the commands of a hidden proof whose effect outlives it.

A human proof may open or close a scope or declare a notation; the statements after it are parsed in
the state it leaves. ``hidden_contexts`` replaces the proof by ``Admitted.`` and keeps those commands
after it (``KEEP_PROOF_COMMANDS``), never a tactic, nor a ``Hint`` or ``Ltac`` (proof code). Without them a later statement can fail
to parse, as ``Qred_opp`` of the standard library's ``QArith/Qreduction.v`` did (Z_scope closed inside
the proof of ``Qred_correct`` stayed open in the view).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import oracle.strip_coq as strip_module
from benches.coq.bench import load_tasks
from oracle.coq.oracle import public_contexts
from oracle.coq.sandboxing import coq_where
from oracle.strip_coq import hidden_contexts, hide_proofs, proof_commands, strip_coq_text

# Z_scope is open when `first` starts; its proof closes it, and `later` only parses with it closed
# (`n * 1` in Z_scope is a Z, and n a nat)
SCOPED = """Require Import ZArith.
Open Scope Z_scope.
Lemma first : forall n : nat, (n + 0)%nat = n.
Proof.
  intros n. Close Scope Z_scope.
  rewrite <- plus_n_O. reflexivity.
Qed.
Lemma later (n : nat) : n * 1 = n.
Proof. rewrite Nat.mul_1_r. reflexivity. Qed.
"""

MIXED_PROOF = ("Proof. intros. Open Scope Z_scope. simpl. Local Close Scope Z_scope. "
               "Hint Resolve foo : core. auto. Qed.")


def _compiles(coqc: str, tmp_path: Path, source: str, name: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"{name}.v"
    path.write_text(source, encoding="utf-8")
    return subprocess.run([coqc, path.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _later_view(text: str) -> tuple[str, str]:
    tasks = strip_coq_text(text)
    later = tasks[-1]
    return hidden_contexts(text, [len(t.context) for t in tasks])[-1], later.statement


def test_proof_commands_keep_only_lasting_commands_in_order() -> None:
    assert proof_commands(MIXED_PROOF) == ["Open Scope Z_scope.", "Local Close Scope Z_scope."]


@pytest.mark.parametrize("sentence", [
    "Global Arguments f _ : simpl never.", "Existing Instances a b.", "Existing Instance a.",
    "Typeclasses Opaque f.", "Set Printing All.", "Unset Printing Notations.", "Opaque f.",
    "Transparent f.", "Export Set Implicit Arguments.", "Notation \"'x'\" := 1.", "Infix \"+++\" := f (at level 50).",
    "Reserved Notation \"x ++++ y\" (at level 50).", "Delimit Scope s_scope with s.", "Bind Scope s_scope with T.",
    "Declare Scope s_scope.", "Create HintDb db.",
])
def test_whitelisted_commands_are_kept(sentence: str) -> None:
    assert proof_commands(f"Proof. auto. {sentence} Qed.") == [sentence]


@pytest.mark.parametrize("sentence", [
    "set (x := 1).", "exact Settle.", "apply Notation_lemma.", "unfold Opaque_f.", "Hints.", "Check Z.",
    "Proof.", "Qed.", "Search Z.add.", "- simpl.", "#[export] Hint Unfold f : core.", "Ltac t := auto.",
    "Tactic Notation \"t\" := auto.", "Hint Resolve foo : core.",  # proof code: hidden with the proof
])
def test_proof_steps_are_not_kept(sentence: str) -> None:
    assert proof_commands(f"Proof. {sentence} Qed.") == []


def test_hidden_view_shows_the_commands_and_no_other_proof_text() -> None:
    text = ("Lemma foo : True.\nProof. exact I. Qed.\nLemma bar : True.\n"
            "Proof. intros. Open Scope Z_scope. simpl. Local Close Scope Z_scope. "
            "Hint Resolve foo (* SECRET *) : core. auto. Qed.\nLemma baz : True.\n")
    hidden = hide_proofs(text)
    assert hidden == ("Lemma foo : True.\nAdmitted.\nLemma bar : True.\nAdmitted.\nOpen Scope Z_scope.\n"
                      "Local Close Scope Z_scope.\nLemma baz : True.\n")
    assert "SECRET" not in hidden


def test_switch_off_restores_the_bare_admitted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strip_module, "KEEP_PROOF_COMMANDS", False)
    context, _ = _later_view(SCOPED)
    assert "Close Scope" not in context and context.endswith("Admitted.\n")


def test_later_statement_parses_only_with_the_kept_close_scope(
        coqc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _compiles(coqc, tmp_path, SCOPED, "Original").returncode == 0
    context, statement = _later_view(SCOPED)
    assert "intros n" not in context and "rewrite" not in context
    kept = _compiles(coqc, tmp_path, context + statement + "\nAdmitted.\n", "Kept")
    assert kept.returncode == 0, kept.stderr
    # what the task itself holds (the checker's and the library setting's context) is the original text
    assert strip_coq_text(SCOPED)[-1].context == SCOPED[: SCOPED.index("Lemma later")]

    monkeypatch.setattr(strip_module, "KEEP_PROOF_COMMANDS", False)
    context, statement = _later_view(SCOPED)
    bare = _compiles(coqc, tmp_path, context + statement + "\nAdmitted.\n", "Bare")
    assert bare.returncode != 0 and "has type \"nat\" while it is expected to have type \"Z\"" in bare.stderr


def test_qred_opp_starts_in_the_stdlib_rediscover_view(
        coqc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = coq_where()
    source = where / "theories" / "QArith" / "Qreduction.v" if where is not None else None
    if source is None or not source.is_file():
        pytest.skip(f"{source} is not installed")
    tasks = load_tasks([source], say=lambda line: None)
    task = next(t for t in tasks if t.name == "Qred_opp")
    assert source.read_text(encoding="utf-8").startswith(task.context + task.statement)
    view = public_contexts(tasks)[id(task)]
    assert "Close Scope Z_scope." in view and "Qred_correct" in view
    fixed = _compiles(coqc, tmp_path, view + task.statement + "\nAdmitted.\n", "Fixed")
    assert fixed.returncode == 0, fixed.stderr

    monkeypatch.setattr(strip_module, "KEEP_PROOF_COMMANDS", False)
    bare = public_contexts(tasks)[id(task)]
    broken = _compiles(coqc, tmp_path, bare + task.statement + "\nAdmitted.\n", "Broken")
    assert broken.returncode != 0 and "expected to have type \"Z\"" in broken.stderr
