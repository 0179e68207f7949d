"""The Coq oracle's lexical screen (oracle/coq/screen.py): cheats refused with a precise reason
before Coq runs, malformed proofs refused as non-cheats, sentences split as Coq splits them."""

from __future__ import annotations

import pytest

from oracle.coq.screen import ProofRejected, screen_proof
from oracle.strip_coq import split_sentences

# (theorem, proof, expected reason fragment): every one must be rejected with cheat=True.
CHEATS = [
    ("double_two", "Admitted.", "uses Admitted"),
    ("double_two", "admit.", "uses admit"),
    ("double_two", "Proof. admit. Qed.", "uses admit"),
    ("add_zero", "intros n. assert (H : n + 0 = n) by admit. exact H.", "uses admit"),
    ("double_two", "give_up.", "uses give_up"),
    ("double_two", "Axiom cheat : forall P : Prop, P. apply cheat.", "declares an axiom (Axiom)"),
    ("double_two", "Parameter p : False. destruct p.", "declares an axiom (Parameter)"),
    ("double_two", "Conjecture c : False. destruct c.", "declares an axiom (Conjecture)"),
    ("double_two", "Hypothesis h : False. destruct h.", "declares an axiom (Hypothesis)"),
    # the agent tries to restate the theorem (a changed statement)
    ("double_two", "Theorem double_two : True. Proof. exact I. Qed.", "new Theorem declaration"),
    ("double_two", "reflexivity. Qed. Theorem other : 1 = 1. Proof. reflexivity.", "ends the proof with Qed"),
    ("double_two", "reflexivity. Defined. Lemma x : True. exact I.", "ends the proof with Defined"),
    ("double_two", "Abort.", "aborts the proof"),
    ("double_two", "Abort All.", "aborts the proof"),
    ("double_two", "Unset Guard Checking. reflexivity.", "kernel-skipping option (Unset Guard Checking)"),
    ("double_two", "Unset Positivity Checking. reflexivity.", "kernel-skipping option (Unset Positivity Checking)"),
    ("double_two", "Local Unset Universe Checking. reflexivity.", "kernel-skipping option (Unset Universe Checking)"),
    ("double_two", "Set Printing All. reflexivity.", "changes an option"),
    ("double_two", "native_compute. reflexivity.", "uses native_compute"),
    ("double_two", "Lemma helper : False. Admitted. destruct helper.", "new Lemma declaration"),
    ("double_two", "Require Import Classical. reflexivity.", "imports a library inside the proof (Require)"),
    ("add_zero", "From Coq Require Import Lia. lia.", "imports a library inside the proof (From)"),
    ("double_two", "Import Nat. reflexivity.", "imports a library inside the proof (Import)"),
    ("double_two", 'Declare ML Module "ltac_plugin". reflexivity.', "loads an ML plugin (Declare ML Module)"),
    ("double_two", "Ltac t := reflexivity. t.", "new Ltac declaration"),
    ("double_two", "Definition four := 4. reflexivity.", "new Definition declaration"),
    ("double_two", "#[local] Axiom cheat : False. destruct cheat.", "attributed command"),
    ("double_two", "Reset Initial. reflexivity.", "vernacular command (Reset)"),
    ("double_two", "Fail reflexivity. reflexivity.", "vernacular command (Fail)"),
    ("double_two", "Proof. Proof. reflexivity.", "second Proof command"),
    ("double_two", "- { reflexivity. } Qed. Check 1.", "ends the proof with Qed"),
]


@pytest.mark.parametrize(("theorem", "proof", "reason"), CHEATS, ids=[c[1][:40] for c in CHEATS])
def test_screen_rejects_cheats_before_coq_runs(theorem: str, proof: str, reason: str) -> None:
    with pytest.raises(ProofRejected) as info:
        screen_proof(proof)
    assert reason in info.value.reason
    assert info.value.cheat


@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        ("", "empty proof"),
        ("Proof. Qed.", "empty proof"),
        ("reflexivity. (* never closed", "unterminated comment"),
        ('idtac "open. reflexivity.', "unterminated string"),
        ("reflexivity.\x00", "control or unusual space character"),
        ("reflexivity.\u00a0auto.", "control or unusual space character"),
        ("intros; auto", "does not end with '.'"),
    ],
)
def test_screen_rejects_malformed_proofs_as_non_cheats(proof: str, reason: str) -> None:
    with pytest.raises(ProofRejected) as info:
        screen_proof(proof)
    assert reason in info.value.reason
    assert not info.value.cheat


def test_screen_normalizes_opener_and_closer() -> None:
    script = screen_proof("Proof.\n  intros n.\n  - auto.\n  { lia. }\nQed.")
    assert script.opener == "Proof."
    assert [script.unit_text(u) for u in script.units] == ["intros n.", "-", "auto.", "{", "lia.", "}"]
    assert script.line(script.units[2]) == 3  # positions refer to the agent's own text
    assert screen_proof("Proof using. auto. Defined.").opener == "Proof using."
    assert screen_proof("all: auto. Unshelve. 2: lia.").units  # selectors and Unshelve are fine


@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        ("Proof with admit. auto.", "uses admit"),
        ("Proof with give_up. split...", "uses give_up"),
        ("Proof with native_compute. auto.", "uses native_compute"),
        ("Proof using with (try admit). auto.", "uses admit"),
        ("Proof with Abort. auto.", "aborts the proof"),
    ],
)
def test_hole6_proof_with_tactic_is_screened(proof: str, reason: str) -> None:
    with pytest.raises(ProofRejected) as info:
        screen_proof(proof)
    assert reason in info.value.reason and info.value.cheat


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("split; [exact I .. ]. auto.", ["split; [exact I .. ].", "auto."]),  # `..` is a token, not an end
        ("split... auto.", ["split...", "auto."]),  # the ellipsis of `Proof with` ends a sentence
        ("t.. u.", ["t.. u."]),
    ],
)
def test_hole8_dots_split_as_coq_does(text: str, codes: list[str]) -> None:
    assert [s.code for s in split_sentences(text)] == codes


def test_hole8_four_dots_are_refused() -> None:
    with pytest.raises(ProofRejected, match="4 dots"):
        screen_proof("split.... auto.")
