(** Natural-number arithmetic in the style of Coq's Arith library. *)
Require Import Arith Lia.

(* difficulty: easy *)
Theorem add_zero_left : forall n : nat, 0 + n = n.
Proof. intros n. reflexivity. Qed.

(* difficulty: easy *)
Theorem add_zero_right : forall n : nat, n + 0 = n.
Proof.
  intros n. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: easy *)
Theorem add_succ_right : forall n m : nat, n + S m = S (n + m).
Proof.
  intros n m. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: medium *)
Theorem add_comm' : forall n m : nat, n + m = m + n.
Proof.
  intros n m. induction n as [| n IH].
  - simpl. rewrite add_zero_right. reflexivity.
  - simpl. rewrite IH. rewrite add_succ_right. reflexivity.
Qed.

(* difficulty: medium *)
Theorem add_assoc' : forall n m p : nat, n + (m + p) = n + m + p.
Proof.
  intros n m p. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: easy *)
Theorem mul_one_left : forall n : nat, 1 * n = n.
Proof. intros n. simpl. rewrite add_zero_right. reflexivity. Qed.

(* difficulty: easy *)
Theorem mul_zero_right : forall n : nat, n * 0 = 0.
Proof. intros n. induction n as [| n IH]; simpl; auto. Qed.

(* difficulty: medium *)
Theorem mul_one_right : forall n : nat, n * 1 = n.
Proof. intros n. induction n as [| n IH]; simpl; auto. Qed.

(* difficulty: easy *)
Theorem double_is_twice : forall n : nat, n + n = 2 * n.
Proof. intros n. lia. Qed.

(* difficulty: easy *)
Theorem le_succ_self : forall n : nat, n <= S n.
Proof. intros n. auto. Qed.

(* difficulty: easy *)
Theorem le_add_right' : forall n m : nat, n <= n + m.
Proof. intros n m. lia. Qed.

(* difficulty: easy *)
Theorem lt_irrefl' : forall n : nat, ~ n < n.
Proof. intros n. lia. Qed.

(* difficulty: medium *)
Theorem le_trans' : forall n m p : nat, n <= m -> m <= p -> n <= p.
Proof. intros n m p H1 H2. lia. Qed.

(* difficulty: easy *)
Theorem succ_inj' : forall n m : nat, S n = S m -> n = m.
Proof. intros n m H. injection H. auto. Qed.

(* difficulty: easy *)
Theorem succ_neq_zero : forall n : nat, S n <> 0.
Proof. intros n H. discriminate H. Qed.

(* difficulty: medium *)
Theorem sub_add_cancel : forall n m : nat, m <= n -> n - m + m = n.
Proof. intros n m H. lia. Qed.

(* difficulty: medium *)
Theorem max_comm' : forall n m : nat, max n m = max m n.
Proof. intros n m. lia. Qed.

(* difficulty: medium *)
Theorem mul_distr_left : forall n m p : nat, n * (m + p) = n * m + n * p.
Proof. intros n m p. lia. Qed.

(* difficulty: hard *)
Theorem square_expand : forall a b : nat, (a + b) * (a + b) = a * a + 2 * a * b + b * b.
Proof. intros a b. ring. Qed.

Fixpoint sum_to (n : nat) : nat :=
  match n with
  | 0 => 0
  | S k => S k + sum_to k
  end.

(* difficulty: hard *)
Theorem sum_to_formula : forall n : nat, 2 * sum_to n = n * (n + 1).
Proof.
  intros n. induction n as [| n IH].
  - reflexivity.
  - cbn [sum_to]. rewrite Nat.mul_add_distr_l, IH. ring.
Qed.

(* difficulty: medium *)
Theorem sum_to_ge : forall n : nat, n <= sum_to n.
Proof. intros n. destruct n as [| n]; simpl; lia. Qed.
