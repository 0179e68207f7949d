(** Polymorphic lists in the style of Coq's List library. *)
Require Import List Arith Lia.
Import ListNotations.

Section Lists.
Variable A : Type.

(* difficulty: easy *)
Theorem app_nil_left' : forall l : list A, [] ++ l = l.
Proof. intros l. reflexivity. Qed.

(* difficulty: easy *)
Theorem app_nil_right' : forall l : list A, l ++ [] = l.
Proof.
  intros l. induction l as [| x l IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: medium *)
Theorem app_assoc' : forall l1 l2 l3 : list A, l1 ++ (l2 ++ l3) = (l1 ++ l2) ++ l3.
Proof.
  intros l1 l2 l3. induction l1 as [| x l1 IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: medium *)
Theorem length_app' : forall l1 l2 : list A, length (l1 ++ l2) = length l1 + length l2.
Proof.
  intros l1 l2. induction l1 as [| x l1 IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: easy *)
Theorem cons_not_nil : forall (x : A) (l : list A), x :: l <> [].
Proof. intros x l H. discriminate H. Qed.

(* difficulty: easy *)
Theorem length_cons' : forall (x : A) (l : list A), length (x :: l) = S (length l).
Proof. intros x l. reflexivity. Qed.

(* difficulty: medium *)
Theorem rev_length' : forall l : list A, length (rev l) = length l.
Proof.
  intros l. induction l as [| x l IH].
  - reflexivity.
  - simpl. rewrite length_app'. simpl. rewrite IH. lia.
Qed.

(* difficulty: medium *)
Theorem rev_app_distr' : forall l1 l2 : list A, rev (l1 ++ l2) = rev l2 ++ rev l1.
Proof.
  intros l1 l2. induction l1 as [| x l1 IH].
  - simpl. rewrite app_nil_right'. reflexivity.
  - simpl. rewrite IH. rewrite app_assoc'. reflexivity.
Qed.

(* difficulty: hard *)
Theorem rev_involutive' : forall l : list A, rev (rev l) = l.
Proof.
  intros l. induction l as [| x l IH].
  - reflexivity.
  - simpl. rewrite rev_app_distr'. simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: medium *)
Theorem map_length' : forall (B : Type) (f : A -> B) (l : list A), length (map f l) = length l.
Proof.
  intros B f l. induction l as [| x l IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: medium *)
Theorem map_app' : forall (B : Type) (f : A -> B) (l1 l2 : list A),
  map f (l1 ++ l2) = map f l1 ++ map f l2.
Proof.
  intros B f l1 l2. induction l1 as [| x l1 IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

(* difficulty: easy *)
Theorem in_cons_head : forall (x : A) (l : list A), In x (x :: l).
Proof. intros x l. simpl. left. reflexivity. Qed.

(* difficulty: medium *)
Theorem in_app_left : forall (x : A) (l1 l2 : list A), In x l1 -> In x (l1 ++ l2).
Proof. intros x l1 l2 H. apply in_or_app. left. exact H. Qed.

(* difficulty: hard *)
Theorem in_rev' : forall (x : A) (l : list A), In x l -> In x (rev l).
Proof.
  intros x l H. induction l as [| y l IH].
  - contradiction.
  - simpl. apply in_or_app. destruct H as [H | H].
    + right. simpl. left. exact H.
    + left. apply IH. exact H.
Qed.

(* difficulty: medium *)
Theorem map_id' : forall l : list A, map (fun x => x) l = l.
Proof.
  intros l. induction l as [| x l IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.

End Lists.

Fixpoint sum_list (l : list nat) : nat :=
  match l with
  | [] => 0
  | x :: t => x + sum_list t
  end.

(* difficulty: medium *)
Theorem sum_list_app : forall l1 l2 : list nat, sum_list (l1 ++ l2) = sum_list l1 + sum_list l2.
Proof.
  intros l1 l2. induction l1 as [| x l1 IH].
  - reflexivity.
  - simpl. rewrite IH. lia.
Qed.

(* difficulty: hard *)
Theorem sum_list_rev : forall l : list nat, sum_list (rev l) = sum_list l.
Proof.
  intros l. induction l as [| x l IH].
  - reflexivity.
  - simpl. rewrite sum_list_app. simpl. rewrite IH. lia.
Qed.

(* difficulty: easy *)
Example sum_list_example : sum_list [1; 2; 3; 4] = 10.
Proof. reflexivity. Qed.

(* difficulty: medium *)
Theorem repeat_length' : forall (x : nat) (n : nat), length (repeat x n) = n.
Proof.
  intros x n. induction n as [| n IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.
