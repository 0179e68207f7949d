/-!
# Small functional-programming facts

Function composition, `Option` mapping, binary trees and an accumulator-passing sum, all
defined here. Difficulty tags (`-- difficulty: easy|medium|hard`) sit above each theorem.
-/

namespace RRMA.Functional

/-- Binary trees with a natural number at each node. -/
inductive Tree where
  | leaf : Tree
  | node : Tree → Nat → Tree → Tree

namespace Tree

/-- Number of nodes. -/
def size : Tree → Nat
  | .leaf => 0
  | .node l _ r => size l + 1 + size r

/-- Swap left and right everywhere. -/
def mirror : Tree → Tree
  | .leaf => .leaf
  | .node l x r => .node (mirror r) x (mirror l)

/-- Sum of the labels. -/
def sum : Tree → Nat
  | .leaf => 0
  | .node l x r => sum l + x + sum r

/-- In-order traversal. -/
def toList : Tree → List Nat
  | .leaf => []
  | .node l x r => toList l ++ [x] ++ toList r

end Tree

/-- Composition, spelled out. -/
def compose {α β γ : Type} (g : β → γ) (f : α → β) : α → γ := fun x => g (f x)

/-- Apply a function twice. -/
def twice {α : Type} (f : α → α) : α → α := fun x => f (f x)

/-- `Option.map`, by cases. -/
def optMap {α β : Type} (f : α → β) : Option α → Option β
  | none => none
  | some a => some (f a)

/-- Sum with an accumulator (tail recursive). -/
def sumAcc : List Nat → Nat → Nat
  | [], acc => acc
  | x :: xs, acc => sumAcc xs (acc + x)

/-- Sum by plain recursion. -/
def sumList : List Nat → Nat
  | [] => 0
  | x :: xs => x + sumList xs

-- difficulty: easy
theorem compose_apply {α β γ : Type} (g : β → γ) (f : α → β) (x : α) :
    compose g f x = g (f x) := rfl

-- difficulty: easy
theorem twice_succ : twice (fun n => n + 1) 3 = 5 := rfl

-- difficulty: easy
theorem optMap_none {α β : Type} (f : α → β) : optMap f none = none := rfl

-- difficulty: easy
theorem size_leaf : Tree.size .leaf = 0 := rfl

-- difficulty: easy
theorem optMap_id {α : Type} (o : Option α) : optMap id o = o := by
  cases o <;> rfl

-- difficulty: medium
theorem compose_assoc {α β γ δ : Type} (h : γ → δ) (g : β → γ) (f : α → β) :
    compose h (compose g f) = compose (compose h g) f := rfl

-- difficulty: medium
theorem optMap_compose {α β γ : Type} (f : α → β) (g : β → γ) (o : Option α) :
    optMap g (optMap f o) = optMap (compose g f) o := by
  cases o <;> rfl

-- difficulty: medium
theorem twice_add_two (n : Nat) : twice (fun k => k + 2) n = n + 4 := by
  show n + 2 + 2 = n + 4
  omega

-- difficulty: medium
theorem size_mirror (t : Tree) : t.mirror.size = t.size := by
  induction t with
  | leaf => rfl
  | node l x r ihl ihr =>
    simp only [Tree.mirror, Tree.size, ihl, ihr] <;> omega

-- difficulty: medium
theorem sum_mirror (t : Tree) : t.mirror.sum = t.sum := by
  induction t with
  | leaf => rfl
  | node l x r ihl ihr =>
    simp only [Tree.mirror, Tree.sum, ihl, ihr] <;> omega

-- difficulty: hard
theorem mirror_mirror (t : Tree) : t.mirror.mirror = t := by
  induction t with
  | leaf => rfl
  | node l x r ihl ihr => simp only [Tree.mirror, ihl, ihr]

-- difficulty: hard
theorem length_toList (t : Tree) : t.toList.length = t.size := by
  induction t with
  | leaf => rfl
  | node l x r ihl ihr =>
    simp only [Tree.toList, Tree.size, List.length_append, List.length_singleton, ihl, ihr] <;> omega

-- difficulty: hard
theorem sumAcc_add (xs : List Nat) (a b : Nat) : sumAcc xs (a + b) = a + sumAcc xs b := by
  induction xs generalizing b with
  | nil => rfl
  | cons x xs ih =>
    simp only [sumAcc]
    rw [Nat.add_assoc]
    exact ih (b + x)

-- difficulty: hard
theorem sumAcc_correct (xs : List Nat) : sumAcc xs 0 = sumList xs := by
  induction xs with
  | nil => rfl
  | cons x xs ih =>
    have h := sumAcc_add xs x 0
    rw [Nat.add_zero] at h
    simp only [sumAcc, sumList, Nat.zero_add]
    rw [h, ih]

-- difficulty: hard
theorem toList_mirror (t : Tree) : t.mirror.toList = t.toList.reverse := by
  induction t with
  | leaf => rfl
  | node l x r ihl ihr => simp [Tree.mirror, Tree.toList, ihl, ihr]

end RRMA.Functional
