"""``python -m benches.coq.tactic_forms``: what the original proofs of the measured files are made of, by tactic form,
read from the files of the sets already run and never from the last set drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

from benches.coq import tactic_forms


@pytest.mark.parametrize(("sentence", "form"), [
    ("apply in_app_or in H.", "apply _ in H"),
    ("try (apply H in H0).", "apply _ in H"),  # a wrapper and its brackets
    ("- rewrite Rabs_right in H11; auto.", "rewrite _ in H"),  # a bullet, then the first tactic
    ("now rewrite H in *.", "rewrite _ in H"),
    ("simpl in H.", "simpl _ in H"),
    ("destruct (Rle_dec x y) as [H|H].", "destruct (term)"),
    ("elim (H eps H1); intros N H2.", "elim (term)"),
    ("apply Rle_trans with y.", "apply _ with"),
    ("apply (H a).", "apply (term)"),
    ("assert (H: x = y) by lia.", "assert .. by"),
    ("assert (H: x = y).", "assert"),
    ("pose proof (H a) as Ha.", "pose proof"),
    ("2: apply H.", "apply"),  # a goal selector
    ("apply H; intros x Hin.", "apply"),  # `in` of a later tactic
    ("induction l as [|a l IHl]; simpl; auto.", "induction"),
    ("rewrite H.", "rewrite"),
])
def test_a_sentence_is_read_as_its_first_tactics_form(sentence: str, form: str) -> None:
    assert tactic_forms.tactic_form(sentence) == form


def test_a_form_counts_once_per_theorem_and_every_use() -> None:
    theorems, uses, count = tactic_forms.tally([
        "Proof. intros. apply H in H0. apply H in H1. assumption. Qed.",
        "Proof. intros x. destruct (le_dec x 0). auto. auto. Qed.",
    ])
    assert count == 2
    assert theorems["intros"] == 2 and uses["intros"] == 2
    assert theorems["apply _ in H"] == 1 and uses["apply _ in H"] == 2
    assert theorems["auto"] == 1 and uses["auto"] == 2
    assert theorems["destruct (term)"] == 1


def test_the_last_set_drawn_is_not_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """By default every set but the last one drawn (kept for its blind run); ``--through N`` names the last read."""
    (tmp_path / "A.v").write_text("Lemma a : True.\nProof. exact I. Qed.\n")
    (tmp_path / "B.v").write_text("Lemma b : True.\nProof. apply I. Qed.\n")
    (tmp_path / "C.v").write_text("Lemma c : True.\nProof. intros. apply (I). Qed.\n")
    sets = [("tuning", [("A.v", 1)]), ("out-of-sample 1", [("B.v", 1)]), ("out-of-sample 2", [("C.v", 1)])]
    monkeypatch.setattr(tactic_forms, "theories", lambda: tmp_path)
    monkeypatch.setattr(tactic_forms, "drawn_sets", lambda root: sets)
    assert tactic_forms.measured_files(tmp_path, None) == (["A.v", "B.v"], ["tuning", "out-of-sample 1"])
    assert tactic_forms.measured_files(tmp_path, 1) == (["A.v", "B.v"], ["tuning", "out-of-sample 1"])
    assert tactic_forms.measured_files(tmp_path, 2)[0] == ["A.v", "B.v", "C.v"]
    assert tactic_forms.main([]) == 0
    out = capsys.readouterr().out
    assert "2 files of 2 sets (tuning .. out-of-sample 1), 2 original proofs" in out
    assert "exact" in out and " apply" in out and "apply (term)" not in out  # C.v's proof is not read
