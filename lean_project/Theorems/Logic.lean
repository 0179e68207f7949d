/-!
# Booleans and propositional logic

Small facts about `Bool` and about `Prop` connectives, provable in core Lean. Difficulty tags
(`-- difficulty: easy|medium|hard`) sit on the line above each theorem.
-/

namespace RRMA.Logic

/-- Exclusive or, by cases. -/
def xor' : Bool → Bool → Bool
  | true, b => !b
  | false, b => b

-- difficulty: easy
theorem and_swap (p q : Prop) (h : p ∧ q) : q ∧ p := by
  exact ⟨h.2, h.1⟩

-- difficulty: easy
theorem or_swap (p q : Prop) (h : p ∨ q) : q ∨ p := by
  cases h with
  | inl hp => exact Or.inr hp
  | inr hq => exact Or.inl hq

-- difficulty: easy
theorem imp_self' (p : Prop) : p → p := by
  intro hp
  exact hp

-- difficulty: easy
theorem modus_ponens (p q : Prop) (hp : p) (hpq : p → q) : q := by
  exact hpq hp

-- difficulty: easy
theorem bool_not_not (b : Bool) : (!(!b)) = b := by
  cases b <;> rfl

-- difficulty: easy
theorem bool_and_false (b : Bool) : (b && false) = false := by
  cases b <;> rfl

-- difficulty: easy
theorem bool_or_true (b : Bool) : (b || true) = true := by
  cases b <;> rfl

-- difficulty: easy
theorem xor_self (b : Bool) : xor' b b = false := by
  cases b <;> rfl

-- difficulty: medium
theorem imp_trans (p q r : Prop) (hpq : p → q) (hqr : q → r) : p → r := by
  intro hp
  exact hqr (hpq hp)

-- difficulty: medium
theorem and_or_distrib (p q r : Prop) : p ∧ (q ∨ r) ↔ (p ∧ q) ∨ (p ∧ r) := by
  constructor
  · intro ⟨hp, hqr⟩
    cases hqr with
    | inl hq => exact Or.inl ⟨hp, hq⟩
    | inr hr => exact Or.inr ⟨hp, hr⟩
  · intro h
    cases h with
    | inl hpq => exact ⟨hpq.1, Or.inl hpq.2⟩
    | inr hpr => exact ⟨hpr.1, Or.inr hpr.2⟩

-- difficulty: medium
theorem not_or_of_not_and_not (p q : Prop) (hp : ¬p) (hq : ¬q) : ¬(p ∨ q) := by
  intro h
  cases h with
  | inl h1 => exact hp h1
  | inr h2 => exact hq h2

-- difficulty: medium
theorem contrapositive (p q : Prop) (hpq : p → q) : ¬q → ¬p := by
  intro hnq hp
  exact hnq (hpq hp)

-- difficulty: medium
theorem bool_and_comm (a b : Bool) : (a && b) = (b && a) := by
  cases a <;> cases b <;> rfl

-- difficulty: medium
theorem xor_comm (a b : Bool) : xor' a b = xor' b a := by
  cases a <;> cases b <;> rfl

-- difficulty: medium
theorem exists_of_forall_nat (P : Nat → Prop) (h : ∀ n, P n) : ∃ n, P n := by
  exact ⟨0, h 0⟩

-- difficulty: hard
theorem not_not_intro (p : Prop) (hp : p) : ¬¬p := by
  intro hnp
  exact hnp hp

-- difficulty: hard
theorem xor_assoc (a b c : Bool) : xor' (xor' a b) c = xor' a (xor' b c) := by
  cases a <;> cases b <;> cases c <;> rfl

-- difficulty: hard
theorem forall_and_split (α : Type) (P Q : α → Prop) :
    (∀ x, P x ∧ Q x) ↔ (∀ x, P x) ∧ (∀ x, Q x) := by
  constructor
  · intro h
    exact ⟨fun x => (h x).1, fun x => (h x).2⟩
  · intro h x
    exact ⟨h.1 x, h.2 x⟩

-- difficulty: hard
theorem not_exists_iff (α : Type) (P : α → Prop) : (¬∃ x, P x) ↔ ∀ x, ¬P x := by
  constructor
  · intro h x hx
    exact h ⟨x, hx⟩
  · intro h ⟨x, hx⟩
    exact h x hx

end RRMA.Logic
