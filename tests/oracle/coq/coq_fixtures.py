"""What the Coq oracle's tests share: the bench's suite of ``.v`` files, the skip mark for a missing
Coq, and the source files the checkers are tested on (a user file with axioms and admitted lemmas,
and the red-team holes of issue 13)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SUITE = sorted((REPO / "benches" / "coq").glob("*.v"))


SOURCE = """Require Import Arith.
(* The user's own file may hold axioms and admitted lemmas: proofs must not rely on them. *)
Axiom magic : forall P : Prop, P.
Lemma admitted_helper : 2 + 2 = 5.
Admitted.
Definition double (n : nat) := n + n.

(* difficulty: easy *)
Theorem double_two : double 2 = 4.
Proof. reflexivity. Qed.

(* difficulty: medium *)
Theorem add_zero : forall n : nat, n + 0 = n.
Proof. induction n; simpl; auto. Qed.

(* difficulty: easy *)
Theorem and_swap : forall P Q : Prop, P /\\ Q -> Q /\\ P.
Proof. intros P Q [HP HQ]. split; assumption. Qed.
"""


# Each hole of issue 13 is run against the real coqc/coqtop on these theorems.
HOLES_SOURCE = """Require Import Classical.
(* a false statement: only a cheat can close it *)
Theorem t_bad : forall a b : nat, a + b = a * b.
Proof. Admitted.
Theorem em_t : forall P : Prop, P \\/ ~ P.
Proof. exact classic. Qed.
Theorem two : True /\\ True.
Proof. split; [exact I .. ]. Qed.
"""
