(** Propositional and first-order logic in the style of Coq's Logic library. *)

(* difficulty: easy *)
Theorem and_comm' : forall P Q : Prop, P /\ Q -> Q /\ P.
Proof. intros P Q [HP HQ]. split; assumption. Qed.

(* difficulty: easy *)
Theorem or_comm' : forall P Q : Prop, P \/ Q -> Q \/ P.
Proof. intros P Q [HP | HQ]. right. exact HP. left. exact HQ. Qed.

(* difficulty: easy *)
Theorem modus_ponens : forall P Q : Prop, P -> (P -> Q) -> Q.
Proof. intros P Q HP HPQ. apply HPQ. exact HP. Qed.

(* difficulty: easy *)
Theorem imp_trans : forall P Q R : Prop, (P -> Q) -> (Q -> R) -> P -> R.
Proof. intros P Q R HPQ HQR HP. apply HQR. apply HPQ. exact HP. Qed.

(* difficulty: easy *)
Theorem contrapositive : forall P Q : Prop, (P -> Q) -> ~ Q -> ~ P.
Proof. intros P Q HPQ HNQ HP. apply HNQ. apply HPQ. exact HP. Qed.

(* difficulty: easy *)
Theorem double_neg_intro : forall P : Prop, P -> ~ ~ P.
Proof. intros P HP HNP. apply HNP. exact HP. Qed.

(* difficulty: medium *)
Theorem de_morgan_not_or : forall P Q : Prop, ~ (P \/ Q) <-> ~ P /\ ~ Q.
Proof.
  intros P Q. split.
  - intros H. split; intros HP; apply H; [left | right]; exact HP.
  - intros [HNP HNQ] [HP | HQ]; contradiction.
Qed.

(* difficulty: medium *)
Theorem and_or_distr : forall P Q R : Prop, P /\ (Q \/ R) <-> (P /\ Q) \/ (P /\ R).
Proof.
  intros P Q R. split.
  - intros [HP [HQ | HR]]; [left | right]; split; assumption.
  - intros [[HP HQ] | [HP HR]]; split; auto.
Qed.

(* difficulty: easy *)
Theorem false_elim' : forall P : Prop, False -> P.
Proof. intros P H. destruct H. Qed.

(* difficulty: easy *)
Theorem not_false : ~ False.
Proof. intros H. exact H. Qed.

(* difficulty: medium *)
Theorem ex_and_left : forall (A : Type) (P Q : A -> Prop),
  (exists x, P x /\ Q x) -> exists x, P x.
Proof. intros A P Q [x [HP HQ]]. exists x. exact HP. Qed.

(* difficulty: medium *)
Theorem forall_and_split : forall (A : Type) (P Q : A -> Prop),
  (forall x, P x /\ Q x) -> (forall x, P x) /\ (forall x, Q x).
Proof. intros A P Q H. split; intros x; apply H. Qed.

(* difficulty: medium *)
Theorem not_exists_forall_not : forall (A : Type) (P : A -> Prop),
  ~ (exists x, P x) -> forall x, ~ P x.
Proof. intros A P H x HP. apply H. exists x. exact HP. Qed.

(* difficulty: easy *)
Theorem iff_refl' : forall P : Prop, P <-> P.
Proof. intros P. split; intros H; exact H. Qed.

(* difficulty: medium *)
Theorem iff_trans' : forall P Q R : Prop, (P <-> Q) -> (Q <-> R) -> (P <-> R).
Proof. intros P Q R [HPQ HQP] [HQR HRQ]. split; intros H; auto. Qed.

(* difficulty: easy *)
Theorem eq_sym' : forall (A : Type) (x y : A), x = y -> y = x.
Proof. intros A x y H. rewrite H. reflexivity. Qed.

(* difficulty: medium *)
Theorem eq_trans' : forall (A : Type) (x y z : A), x = y -> y = z -> x = z.
Proof. intros A x y z H1 H2. rewrite H1. exact H2. Qed.

(* difficulty: medium *)
Theorem f_equal' : forall (A B : Type) (f : A -> B) (x y : A), x = y -> f x = f y.
Proof. intros A B f x y H. rewrite H. reflexivity. Qed.

(* difficulty: hard *)
Theorem excluded_middle_irrefutable : forall P : Prop, ~ ~ (P \/ ~ P).
Proof. intros P H. apply H. right. intros HP. apply H. left. exact HP. Qed.

(* difficulty: hard *)
Theorem peirce_double_neg : forall P Q : Prop, ~ ~ (((P -> Q) -> P) -> P).
Proof.
  intros P Q H. apply H. intros HPQP. apply HPQP. intros HP.
  exfalso. apply H. intros _. exact HP.
Qed.
