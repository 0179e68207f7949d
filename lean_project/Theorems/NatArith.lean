/-!
# Natural-number arithmetic

Facts about `Nat` that need only Lean's core library. Every theorem carries a difficulty tag
(`-- difficulty: easy|medium|hard`) on the line above it, read by RRMA's stripper
(`oracle/strip_lean.py`), which replaces each proof by `sorry` and asks agents to find one.
-/

namespace RRMA.NatArith

/-- The sum `0 + 1 + ... + n`. -/
def sumTo : Nat → Nat
  | 0 => 0
  | n + 1 => (n + 1) + sumTo n

/-- Doubling by addition. -/
def double (n : Nat) : Nat := n + n

/-- `n` odd numbers `1 + 3 + ... + (2n - 1)`. -/
def sumOdd : Nat → Nat
  | 0 => 0
  | n + 1 => (2 * n + 1) + sumOdd n

-- difficulty: easy
theorem zero_add_left (n : Nat) : 0 + n = n := by
  simp

-- difficulty: easy
theorem add_comm_example (a b : Nat) : a + b = b + a := by
  exact Nat.add_comm a b

-- difficulty: easy
theorem two_mul_eq_add (n : Nat) : 2 * n = n + n := by
  omega

-- difficulty: easy
theorem succ_ne_zero_example (n : Nat) : n + 1 ≠ 0 := by
  omega

-- difficulty: easy
theorem lt_succ_example (n : Nat) : n < n + 1 := by
  omega

-- difficulty: easy
theorem double_eq_two_mul (n : Nat) : double n = 2 * n := by
  unfold double
  omega

-- difficulty: easy
theorem sumTo_zero : sumTo 0 = 0 := rfl

-- difficulty: easy
theorem sumTo_four : sumTo 4 = 10 := by
  decide

-- difficulty: medium
theorem add_right_cancel_example (a b c : Nat) (h : a + c = b + c) : a = b := by
  omega

-- difficulty: medium
theorem le_of_lt_succ_example {m n : Nat} (h : m < n + 1) : m ≤ n := by
  omega

-- difficulty: medium
theorem two_mul_sub_self (n : Nat) : 2 * n - n = n := by
  omega

-- difficulty: medium
theorem sumTo_succ (n : Nat) : sumTo (n + 1) = sumTo n + (n + 1) := by
  simp only [sumTo] <;> omega

-- difficulty: medium
theorem le_sumTo (n : Nat) : n ≤ sumTo n := by
  cases n with
  | zero => exact Nat.zero_le _
  | succ n =>
    simp only [sumTo] <;> omega

-- difficulty: medium
theorem double_add (a b : Nat) : double (a + b) = double a + double b := by
  simp only [double] <;> omega

-- difficulty: medium
theorem mod_two_cases (n : Nat) : n % 2 = 0 ∨ n % 2 = 1 := by
  omega

-- difficulty: hard
theorem sumTo_mono {m n : Nat} (h : m ≤ n) : sumTo m ≤ sumTo n := by
  induction n with
  | zero =>
    have hm : m = 0 := by omega
    subst hm
    exact Nat.le_refl _
  | succ n ih =>
    by_cases hmn : m = n + 1
    · subst hmn
      exact Nat.le_refl _
    · have hle : m ≤ n := by omega
      have := ih hle
      simp only [sumTo] <;> omega

-- difficulty: hard
theorem sumTo_formula (n : Nat) : 2 * sumTo n = n * (n + 1) := by
  induction n with
  | zero => rfl
  | succ n ih =>
    have ih' : 2 * sumTo n = n * n + n := by
      rw [ih, Nat.mul_add, Nat.mul_one]
    simp only [sumTo, Nat.add_mul, Nat.mul_add, Nat.one_mul, Nat.mul_one] <;> omega

-- difficulty: hard
theorem sumOdd_eq_square (n : Nat) : sumOdd n = n * n := by
  induction n with
  | zero => rfl
  | succ n ih =>
    simp only [sumOdd, Nat.add_mul, Nat.mul_add, Nat.one_mul, Nat.mul_one] <;> omega

end RRMA.NatArith
