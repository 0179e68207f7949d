/-!
# Lists

Facts about core `List` functions and about list functions defined here by recursion.
Difficulty tags (`-- difficulty: easy|medium|hard`) sit on the line above each theorem.
-/

namespace RRMA.Lists

/-- Sum of a list of naturals. -/
def sum : List Nat → Nat
  | [] => 0
  | x :: xs => x + sum xs

/-- Length, by hand. -/
def len {α : Type} : List α → Nat
  | [] => 0
  | _ :: xs => len xs + 1

/-- Reverse, by hand (quadratic, the textbook definition). -/
def rev {α : Type} : List α → List α
  | [] => []
  | x :: xs => rev xs ++ [x]

-- difficulty: easy
theorem sum_nil : sum [] = 0 := rfl

-- difficulty: easy
theorem sum_example : sum [1, 2, 3, 4] = 10 := by
  decide

-- difficulty: easy
theorem len_nil {α : Type} : len ([] : List α) = 0 := rfl

-- difficulty: easy
theorem append_nil_example {α : Type} (xs : List α) : xs ++ [] = xs := by
  simp

-- difficulty: easy
theorem length_cons_example {α : Type} (x : α) (xs : List α) :
    (x :: xs).length = xs.length + 1 := by
  simp

-- difficulty: easy
theorem map_id_example {α : Type} (xs : List α) : xs.map id = xs := by
  simp

-- difficulty: medium
theorem sum_append (xs ys : List Nat) : sum (xs ++ ys) = sum xs + sum ys := by
  induction xs with
  | nil => simp [sum]
  | cons x xs ih =>
    simp only [List.cons_append, sum, ih] <;> omega

-- difficulty: medium
theorem len_append {α : Type} (xs ys : List α) : len (xs ++ ys) = len xs + len ys := by
  induction xs with
  | nil => simp [len]
  | cons x xs ih =>
    simp only [List.cons_append, len, ih] <;> omega

-- difficulty: medium
theorem len_eq_length {α : Type} (xs : List α) : len xs = xs.length := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [len, ih]

-- difficulty: medium
theorem length_map_example {α β : Type} (f : α → β) (xs : List α) :
    (xs.map f).length = xs.length := by
  simp

-- difficulty: medium
theorem reverse_reverse_example {α : Type} (xs : List α) : xs.reverse.reverse = xs := by
  simp

-- difficulty: medium
theorem map_map_example {α β γ : Type} (f : α → β) (g : β → γ) (xs : List α) :
    (xs.map f).map g = xs.map (fun x => g (f x)) := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp only [List.map_cons, ih]

-- difficulty: medium
theorem sum_replicate (n k : Nat) : sum (List.replicate n k) = n * k := by
  induction n with
  | zero => simp [sum]
  | succ n ih =>
    simp only [List.replicate_succ, sum, ih, Nat.add_mul, Nat.one_mul] <;> omega

-- difficulty: hard
theorem rev_append {α : Type} (xs ys : List α) : rev (xs ++ ys) = rev ys ++ rev xs := by
  induction xs with
  | nil => simp [rev]
  | cons x xs ih => simp [rev, ih, List.append_assoc]

-- difficulty: hard
theorem rev_rev {α : Type} (xs : List α) : rev (rev xs) = xs := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [rev, rev_append, ih]

-- difficulty: hard
theorem rev_eq_reverse {α : Type} (xs : List α) : rev xs = xs.reverse := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [rev, ih]

-- difficulty: hard
theorem sum_rev (xs : List Nat) : sum (rev xs) = sum xs := by
  induction xs with
  | nil => rfl
  | cons x xs ih =>
    simp only [rev, sum_append, ih, sum] <;> omega

end RRMA.Lists
