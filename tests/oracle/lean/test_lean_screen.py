"""The Lean oracle's text rules (oracle/lean/screen.py): every cheat in the proof body is refused
before Lean runs, and genuine proofs (keywords in comments, strings, field names) pass."""

from __future__ import annotations

import pytest
from lean_fixtures import REPO, recorded_checker

from oracle.lean.checker import LeanChecker
from oracle.lean.screen import proof_violation
from oracle.lean.transport import RecordedTransport
from oracle.strip_lean import strip_project

# ----------------------------------------------------------------------------- text rules

CHEATS = [
    # (proof body, rule named in the reason) - each must be rejected before Lean runs
    ("sorry", "sorry"),
    ("by\n  sorry", "sorry"),
    ("by admit", "sorry"),
    ("by stop", "sorry"),  # `stop` admits every remaining goal
    ("by exact sorryAx _ false", "sorry"),
    ("theorem double_two : True := trivial", "declaration keyword"),  # a changed statement
    ("by\n  simp\n\naxiom cheat : False", "declaration keyword"),  # a new axiom after the proof
    ("by decide\ntheorem double_two' : 1 = 2 := by simp", "declaration keyword"),  # injected theorem
    ("by decide\nend Tiny\ntheorem x : False := sorry", "command keyword"),  # closes the namespace
    ("by\n  set_option debug.skipKernelTC true in\n  decide", "set_option"),  # kernel-skipping option
    ("by exact (debug.skipKernelTC)", "kernel-skipping option"),
    ("by native_decide", "native evaluation"),
    ("by decide +native", "native evaluation"),
    ("by decide (config := { native := true })", "native evaluation"),
    ("by exact Lean.ofReduceBool _ _ rfl", "native evaluation"),
    ("by exact (Lean.trustCompiler)", "native evaluation"),
    ("by exact Tiny.native_fact._native.native_decide.ax_1_1", "native evaluation"),
    ("by decide\n#print axioms Tiny.double_two", "# command"),
    ("by decide\n#exit", "# command"),
    ("by\n  attribute [local simp] Nat.add_comm in simp", "attribute"),
    ("@[implemented_by foo] def", "attribute"),
    ("by\n  open Classical in\n  decide", None),  # hole 9: a scoped `open ... in` is genuine, not a cheat
    ("by\n  open Classical\n  decide", "open ... in"),  # a bare `open` is still a command
    ("by run_tac pure ()", "meta-programming"),
    ("by exact (by_elab pure ())", "meta-programming"),
    ("by decide\nmacro \"x\" : tactic => `(tactic| rfl)", "macro"),
    ("by decide\nelab \"x\" : tactic => pure ()", "elab"),
    ("by decide\nsyntax \"x\" : tactic", "syntax"),
    ("by exact unsafe_thing", None),  # a plain identifier containing `unsafe` is not the keyword
    ("by decide\nunsafe def f : Nat := 0", "unsafe"),
    ("by decide\npartial def f : Nat → Nat := f", "partial"),
    ("by decide /- never closed", "unterminated comment or string"),  # would swallow the audit
    ('by trace "never closed', "unterminated comment or string"),
    ("by decide\x00", "control character"),
    ("   \n ", "empty proof"),
    # ---- holes of issue 13 (found by red-teaming the text rules)
    # 1: the holes of an interpolated string are code, not string
    ('by\n  let s := s!"{by_elab pure ()}"\n  rfl', "meta-programming"),
    ('by\n  have h : True := (fun _ => trivial) m!"{run_tac pure ()}"\n  decide', "meta-programming"),
    ('by\n  exact "{" sorry "}"', "sorry"),  # quotes pair up differently once holes exist
    ('by\n  trace s!"{a "} -- " run_tac "}" }"\n  decide', "meta-programming"),  # a `--` inside a hole
    # 1: `//` is Subtype's token: `//-` does not open a comment that would hide what follows
    ("by\n  have := { x : Nat //- 1 = 1 }\n  run_tac pure ()\n  -/ rfl", "meta-programming"),
    # 2: elaborators that read files (the stripped source holds the original proofs)
    ('by exact include_str "/work/lean_project/Theorems/Lists.lean"', "reads a file"),
    ('by\n  have := include_bytes "Theorems/Lists.lean"\n  rfl', "reads a file"),
    # 3: «quoted» names are names
    ("by exact «sorryAx» _ false", "sorry"),
    ("by exact Lean.«ofReduceBool» _ _ rfl", "native evaluation"),
    ("by exact «Tiny».native_fact.«_native».native_decide.ax_1_1", "native evaluation"),
    # 3: more command keywords
    ("by decide\nunif_hint (n : Nat) where n =?= 0 |- n + 0 =?= 0", "command keyword"),
    ("by decide\nbinder_predicate x \" > \" y:term => `($x > $y)", "command keyword"),
    ("by decide\nseal Tiny.double", "command keyword"),
    ("by decide\nunseal Tiny.double", "command keyword"),
    # 9: genuine scoped options and namespaces pass
    ("by\n  set_option maxHeartbeats 400000 in\n  decide", None),
    ("by\n  open Nat in simp [succ_le_succ]", None),
    ("by\n  open scoped Classical in exact em _", None),
    ("by\n  set_option maxRecDepth 2000 in decide", None),
    ("by\n  set_option debug.skipKernelTC true in decide", "set_option"),
    ('by\n  simp -- a comment about "{braces}" and sorry', None),  # comments stay comments
]


@pytest.mark.parametrize(("proof", "rule"), CHEATS)
def test_cheating_proof_texts_are_rejected(proof: str, rule: str | None) -> None:
    violation = proof_violation(proof)
    if rule is None:
        assert violation is None
    else:
        assert violation is not None and violation.rule == rule, violation


def test_bench_red_team_cheats_are_rejected_for_their_own_reason(tiny) -> None:
    """Every cheat the Lean bench's red team submits is rejected as a cheat by the checker, and the
    verdict names that cheat (not merely exit code or `accepted` false)."""
    from benches.proofs import RED_TEAM

    checker = recorded_checker("tiny_session")
    wrong = []
    for cheat in RED_TEAM["lean"]:
        verdict = checker.check(tiny["Tiny.double_two"], cheat.proof, timeout_s=20)
        if verdict.accepted or not verdict.cheat or cheat.names not in verdict.reason:
            wrong.append((cheat.proof, cheat.names, verdict.reason))
    checker.close()
    assert wrong == []
    assert len({c.names for c in RED_TEAM["lean"]}) >= 5  # more than one kind of cheat


GENUINE_TEXTS = [
    "by\n  -- this theorem is easy: no sorry, no axiom\n  decide",  # keywords inside comments
    "by exact my_theorem_helper",  # identifier containing a keyword
    'by\n  have h : "sorry".length = 5 := rfl\n  simp',  # keyword inside a string
    "by exact Alternative.failure",  # contains "native" but is not native evaluation
    "by exact native_fact",  # a user lemma *named* native_fact: the axiom audit judges it
    "by\n  have : #[1, 2].size = 2 := rfl\n  omega",  # `#[` is an array literal, not a command
    "by\n  have : ('#' : Char) ≠ 'a' := by decide\n  exact h'",  # char literals and primes
    "by simp [Nat.add_comm] /- theorem axiom sorry -/",
    "fun n => n.end_pos",  # `.end_pos` is a field, not `end`
    "by\n  induction n with\n  | zero => rfl\n  | succ n ih => simp [ih]",
]


@pytest.mark.parametrize("proof", GENUINE_TEXTS)
def test_legitimate_proof_texts_pass_the_text_rules(proof: str) -> None:
    assert proof_violation(proof) is None


def test_every_original_proof_passes_the_text_rules() -> None:
    tasks = strip_project(REPO / "lean_project")
    assert len(tasks) >= 60
    assert [t.name for t in tasks if proof_violation(t.original_proof) is not None] == []


def test_violation_reason_names_token_and_line() -> None:
    v = proof_violation("by\n  simp\n  native_decide")
    assert v is not None and v.reason == "forbidden in proof (native evaluation): `native_decide` at proof line 3"


def test_text_rules_reject_before_lean_runs(tiny) -> None:
    transport = RecordedTransport([])  # any REPL request would be a TranscriptMismatch
    checker = LeanChecker(mode="repl", transport_factory=lambda: transport)
    verdict = checker.check(tiny["Tiny.double_two"], "by native_decide")
    assert not verdict.accepted and verdict.cheat and "native evaluation" in verdict.reason
    assert transport.sent == []
