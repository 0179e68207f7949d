(** Inductive types, recursive functions and booleans. *)
Require Import Arith Bool Lia.

Inductive tree : Type :=
  | Leaf : tree
  | Node : tree -> nat -> tree -> tree.

Fixpoint size (t : tree) : nat :=
  match t with
  | Leaf => 0
  | Node l _ r => size l + 1 + size r
  end.

Fixpoint mirror (t : tree) : tree :=
  match t with
  | Leaf => Leaf
  | Node l x r => Node (mirror r) x (mirror l)
  end.

(* difficulty: medium *)
Theorem mirror_involutive : forall t : tree, mirror (mirror t) = t.
Proof.
  intros t. induction t as [| l IHl x r IHr].
  - reflexivity.
  - simpl. rewrite IHl, IHr. reflexivity.
Qed.

(* difficulty: hard *)
Theorem mirror_size : forall t : tree, size (mirror t) = size t.
Proof.
  intros t. induction t as [| l IHl x r IHr].
  - reflexivity.
  - simpl. rewrite IHl, IHr. lia.
Qed.

Fixpoint evenb (n : nat) : bool :=
  match n with
  | 0 => true
  | 1 => false
  | S (S k) => evenb k
  end.

(* difficulty: easy *)
Example evenb_4 : evenb 4 = true.
Proof. reflexivity. Qed.

(* difficulty: hard *)
Theorem evenb_double : forall n : nat, evenb (n + n) = true.
Proof.
  intros n. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite Nat.add_succ_r. exact IH.
Qed.

(* difficulty: easy *)
Theorem negb_involutive' : forall b : bool, negb (negb b) = b.
Proof. intros b. destruct b; reflexivity. Qed.

(* difficulty: easy *)
Theorem andb_comm' : forall a b : bool, andb a b = andb b a.
Proof. intros a b. destruct a, b; reflexivity. Qed.

(* difficulty: easy *)
Theorem orb_true_left : forall b : bool, orb true b = true.
Proof. intros b. reflexivity. Qed.

(* difficulty: medium *)
Theorem andb_true_elim_left : forall a b : bool, andb a b = true -> a = true.
Proof. intros a b H. destruct a. reflexivity. simpl in H. discriminate H. Qed.

Fixpoint double (n : nat) : nat :=
  match n with
  | 0 => 0
  | S k => S (S (double k))
  end.

(* difficulty: medium *)
Theorem double_plus : forall n : nat, double n = n + n.
Proof.
  intros n. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite IH. lia.
Qed.

(* difficulty: hard *)
Theorem double_injective : forall n m : nat, double n = double m -> n = m.
Proof.
  intros n m H. rewrite !double_plus in H. lia.
Qed.

Fixpoint count_down (n : nat) : list nat :=
  match n with
  | 0 => nil
  | S k => n :: count_down k
  end.

(* difficulty: medium *)
Theorem count_down_length : forall n : nat, length (count_down n) = n.
Proof.
  intros n. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

Inductive le' : nat -> nat -> Prop :=
  | le'_refl : forall n, le' n n
  | le'_step : forall n m, le' n m -> le' n (S m).

(* difficulty: medium *)
Theorem le'_zero : forall n : nat, le' 0 n.
Proof.
  intros n. induction n as [| n IH].
  - apply le'_refl.
  - apply le'_step. exact IH.
Qed.

(* difficulty: hard *)
Theorem le'_sound : forall n m : nat, le' n m -> n <= m.
Proof. intros n m H. induction H; lia. Qed.

(* difficulty: easy *)
Theorem option_some_neq_none : forall (A : Type) (x : A), Some x <> None.
Proof. intros A x H. discriminate H. Qed.

(* difficulty: medium *)
Theorem pair_eq : forall (A B : Type) (a1 a2 : A) (b1 b2 : B), (a1, b1) = (a2, b2) -> a1 = a2.
Proof. intros A B a1 a2 b1 b2 H. injection H. intros _ Ha. exact Ha. Qed.
