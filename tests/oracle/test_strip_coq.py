"""The Coq stripper: lexer rules, declarations, difficulty tags, and the bench suite itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from oracle.strip_coq import (
    CoqSyntaxError,
    open_scopes,
    split_sentences,
    strip_coq_file,
    strip_coq_text,
    stripped_source,
)

REPO = Path(__file__).resolve().parents[2]
SUITE = sorted((REPO / "benches" / "coq").glob("*.v"))


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        # plain sentences; the last one ends at end of input
        ("intros n. auto.", ["intros n.", "auto."]),
        # a qualified name and a decimal-like token do not end a sentence
        ("rewrite Nat.add_comm. exact 1.5.", ["rewrite Nat.add_comm.", "exact 1.5."]),
        # nested comments are dropped from code and never end a sentence
        ("auto (* a. (* b. *) c. *). lia.", ["auto  .", "lia."]),
        # a '*)' inside a string inside a comment does not close the comment
        ('(* "*)" still comment. *) idtac.', ["idtac."]),
        # a string with an escaped quote and a period-space inside
        ('idtac "a "" b. c". auto.', ['idtac "a "" b. c".', "auto."]),
        # as in Coq, bullets and braces at a sentence start are sentences of their own
        ("- auto.\n++ { lia. }", ["-", "auto.", "++", "{", "lia.", "}"]),
        # a goal selector keeps its brace; a '-' inside a term is not a bullet
        ("2: { exact (3 - 1). }", ["2: { exact (3 - 1).", "}"]),
        # tabs, CR and form feed are blanks
        ("auto.\tlia.\r\nexact I.\fdone.", ["auto.", "lia.", "exact I.", "done."]),
    ],
)
def test_split_sentences(text: str, codes: list[str]) -> None:
    assert [s.code for s in split_sentences(text)] == codes


def test_trailing_fragment_is_marked_unterminated() -> None:
    sents = split_sentences("auto. lia")
    assert [s.terminated for s in sents] == [True, False]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("auto. (* never closed", "unterminated comment"),
        ('idtac "never closed. auto.', "unterminated string"),
        ("(* (* nested *) still open", "unterminated comment"),
    ],
)
def test_unterminated_comment_or_string_is_an_error(text: str, where: str) -> None:
    with pytest.raises(CoqSyntaxError, match=where):
        split_sentences(text)


SAMPLE = """Require Import Arith.
(* a comment mentioning Theorem fake : False. and "a string *) here" *)
Definition two := 2.

(* difficulty: easy *)
Theorem two_eq : two = 2.
Proof. reflexivity. Qed.

(* difficulty: HARD *)
#[local] Lemma plus_zero : forall n, n + 0 = n.
Proof.
  induction n; simpl; auto.
Defined.

Example ex1 : 1 + 1 = 2. reflexivity. Qed.

Fact dropped : 1 = 1. Proof. Abort.

(* difficulty: brutal *)
Corollary open_one : 2 = 2.
Proof. Admitted.

Remark r1 : True. Proof. exact I. Qed.
Proposition p1 : True. Proof. exact I. Qed.
Property q1 : True. Proof. exact I. Qed.
"""


def test_strip_finds_every_declaration_kind() -> None:
    tasks = strip_coq_text(SAMPLE, source_file="sample.v")
    assert [t.name for t in tasks] == ["two_eq", "plus_zero", "ex1", "open_one", "r1", "p1", "q1"]
    # difficulty from the tag just before; case-insensitive; unknown levels become "unknown"
    assert [t.difficulty for t in tasks[:4]] == ["easy", "hard", "unknown", "unknown"]
    assert all(t.prover == "coq" and t.source_file == "sample.v" for t in tasks)


def test_strip_keeps_statement_context_and_hidden_proof() -> None:
    tasks = {t.name: t for t in strip_coq_text(SAMPLE)}
    two = tasks["two_eq"]
    assert two.statement == "Theorem two_eq : two = 2."
    assert two.original_proof == "Proof. reflexivity. Qed."
    assert two.context.startswith("Require Import Arith.") and "Definition two" in two.context
    assert two.line == 6
    plus = tasks["plus_zero"]
    assert plus.statement.startswith("#[local] Lemma plus_zero")
    assert plus.original_proof.endswith("Defined.")
    # the proof of a declaration without Proof. is the tactic script up to Qed.
    assert tasks["ex1"].original_proof == "reflexivity. Qed."
    # an Admitted theorem is an open problem: a task whose hidden proof is the admitted script
    assert tasks["open_one"].original_proof == "Proof. Admitted."
    # earlier proofs stay in later contexts (earlier lemmas stay usable)
    assert "induction n; simpl; auto." in tasks["r1"].context
    assert "original_proof" not in two.public()


def test_context_statement_proof_is_a_prefix_of_the_file() -> None:
    for task in strip_coq_text(SAMPLE):
        prefix = task.context + task.statement
        assert SAMPLE.startswith(prefix)
        assert SAMPLE[len(prefix) :].lstrip().startswith(task.original_proof)


def test_stripped_source_replaces_proofs_by_admitted() -> None:
    out = stripped_source(SAMPLE)
    assert "reflexivity. Qed." not in out
    assert out.count("Admitted.") == 7  # six replaced proofs + the original Admitted one
    assert "Fact dropped : 1 = 1. Proof. Abort." in out  # aborted declarations are untouched


def test_missing_proof_end_is_reported_with_line() -> None:
    with pytest.raises(CoqSyntaxError, match=r"x\.v:2: Lemma broken has no Qed"):
        strip_coq_text("Definition a := 1.\nLemma broken : True.\nProof. exact I.\n", source_file="x.v")


def test_open_scopes() -> None:
    ctx = "Section A.\nVariable x : nat.\nModule M.\nModule N := M.\nEnd M.\nModule Type T.\n"
    assert open_scopes(ctx) == ["A", "T"]
    assert open_scopes("Section A. End A.") == []


def test_strip_file_errors(tmp_path: Path) -> None:
    with pytest.raises(CoqSyntaxError, match="no such file"):
        strip_coq_file(tmp_path / "missing.v")
    bad = tmp_path / "bad.v"
    bad.write_bytes(b"\xff\xfe Theorem")
    with pytest.raises(CoqSyntaxError, match="not UTF-8"):
        strip_coq_file(bad)


def test_bench_suite_has_sixty_tagged_theorems() -> None:
    tasks = [t for path in SUITE for t in strip_coq_file(path)]
    assert len(SUITE) >= 4
    assert len(tasks) >= 60
    assert all(t.difficulty in ("easy", "medium", "hard") for t in tasks), [t.name for t in tasks if t.difficulty == "unknown"]
    levels = {t.difficulty for t in tasks}
    assert levels == {"easy", "medium", "hard"}
    assert len({t.name for t in tasks}) == len(tasks)
