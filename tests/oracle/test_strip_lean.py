"""The Lean stripper: the bench's 69 theorems, and the syntax any user file may throw at it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from oracle.strip_lean import (
    LeanSyntaxError,
    assemble,
    mask_lean,
    reference_declaration,
    sorried_source,
    strip_lean_file,
    strip_lean_source,
    strip_project,
)

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "lean_project"


@pytest.fixture(scope="module")
def project_tasks():
    return strip_project(PROJECT)


def test_project_has_enough_tagged_theorems(project_tasks) -> None:
    assert len(project_tasks) >= 60
    levels = Counter(t.difficulty for t in project_tasks)
    assert set(levels) == {"easy", "medium", "hard"}, levels  # every theorem is tagged
    assert min(levels.values()) >= 10
    files = {Path(t.source_file).name for t in project_tasks}
    assert files == {"NatArith.lean", "Logic.lean", "Lists.lean", "Functional.lean"}
    assert len({t.name for t in project_tasks}) == len(project_tasks)


def test_project_tasks_rebuild_their_source(project_tasks) -> None:
    """context + statement is a prefix of the file and the original proof follows it."""
    for t in project_tasks:
        src = Path(t.source_file).read_text(encoding="utf-8")
        assert src.startswith(t.context + t.statement), t.name
        assert src[len(t.context) + len(t.statement):].lstrip().startswith(t.original_proof), t.name
        assert t.statement.startswith("theorem ") and t.statement.endswith(":="), t.name
        assert t.original_proof and "sorry" not in t.original_proof
        assert src.count("\n", 0, len(t.context)) + 1 == t.line
        assert t.prover == "lean"
        # the difficulty tag is the last comment before the declaration
        assert t.context.rstrip().endswith(f"-- difficulty: {t.difficulty}"), t.name


def test_project_contexts_hold_earlier_definitions_and_lemmas(project_tasks) -> None:
    by_name = {t.name: t for t in project_tasks}
    rev_rev = by_name["RRMA.Lists.rev_rev"]
    assert "def rev" in rev_rev.context and "theorem rev_append" in rev_rev.context
    assert "theorem rev_rev" not in rev_rev.context
    assert rev_rev.context.count("namespace RRMA.Lists") == 1 and "end RRMA.Lists" not in rev_rev.context
    # namespaces qualify names; the nested `namespace Tree ... end Tree` is closed again
    assert "RRMA.Functional.size_mirror" in by_name
    assert by_name["RRMA.NatArith.sumTo_formula"].difficulty == "hard"
    assert by_name["RRMA.NatArith.zero_add_left"].original_proof == "by\n  simp"
    assert by_name["RRMA.Functional.compose_apply"].original_proof == "rfl"
    # the public view never carries the original proof
    assert "original_proof" not in rev_rev.public()


def test_sorried_source_replaces_every_proof() -> None:
    path = PROJECT / "Theorems" / "Lists.lean"
    text = path.read_text(encoding="utf-8")
    stripped = sorried_source(text)
    tasks = strip_lean_file(path)
    assert stripped.count(":= sorry") == len(tasks)
    assert "induction" not in stripped and "def rev" in stripped
    again = strip_lean_source(stripped)
    assert [t.name for t in again] == [t.name for t in tasks]
    assert all(t.original_proof == "sorry" for t in again)


def test_assemble_and_reference() -> None:
    assert assemble("theorem a : 1 = 1 :=", "rfl") == "theorem a : 1 = 1 := rfl"
    assert assemble("theorem a : 1 = 1 :=", "\nby\n  rfl\n") == "theorem a : 1 = 1 := by\n  rfl"
    assert assemble("theorem f : ∀ n : Nat, n = n", "| 0 => rfl\n  | _ => rfl") == (
        "theorem f : ∀ n : Nat, n = n\n| 0 => rfl\n  | _ => rfl")
    assert reference_declaration("theorem a : 1 = 1 :=") == "theorem a : 1 = 1 := sorry"
    assert reference_declaration("theorem f : ∀ n : Nat, n = n") == "theorem f : ∀ n : Nat, n = n := sorry"


def _one(src: str):
    tasks = strip_lean_source(src)
    assert len(tasks) == 1, [t.name for t in tasks]
    return tasks[0]


TRICKY = [
    # (source, name, statement, original proof) - one case per syntax feature
    # doc comment, attribute and modifier belong to the statement
    ("/-- doc with theorem and := inside -/\n@[simp] protected theorem Foo.a : 1 = 1 := rfl\n",
     "Foo.a", "/-- doc with theorem and := inside -/\n@[simp] protected theorem Foo.a : 1 = 1 :=", "rfl"),
    # `:=` inside binders (default value) and inside a string/comment of the statement is skipped
    ('theorem b (x : Nat := 3) (s : String := ":=") : x = x := -- c :=\n  rfl\n',
     "b", 'theorem b (x : Nat := 3) (s : String := ":=") : x = x :=', "-- c :=\n  rfl"),
    # equation-style proof: the statement stops before the first `|`
    ("theorem c : ∀ n : Nat, n + 0 = n\n  | 0 => rfl\n  | n + 1 => rfl\n",
     "c", "theorem c : ∀ n : Nat, n + 0 = n", "| 0 => rfl\n  | n + 1 => rfl"),
    # `set_option ... in` and `open ... in` prefixes stay with the theorem
    ("set_option maxHeartbeats 400 in\nopen Nat in\ntheorem d : 2 = 2 := by\n  open Nat in rfl\n",
     "d", "set_option maxHeartbeats 400 in\nopen Nat in\ntheorem d : 2 = 2 :=", "by\n  open Nat in rfl"),
    # `lemma` counts; `_root_` escapes the namespace
    ("namespace A\nlemma _root_.e : True := trivial\nend A\n", "e", "lemma _root_.e : True :=", "trivial"),
    # a nested comment mentioning theorem and a string with a fake declaration are not commands
    ('/- outer /- theorem fake : False := sorry -/ still -/\ntheorem f : "theorem g" = "theorem g" := rfl\n',
     "f", 'theorem f : "theorem g" = "theorem g" :=', "rfl"),
    # `where` helpers and `termination_by` belong to the proof
    ("theorem g (n : Nat) : n = n := aux n\nwhere aux (m : Nat) : m = m := rfl\n",
     "g", "theorem g (n : Nat) : n = n :=", "aux n\nwhere aux (m : Nat) : m = m := rfl"),
    # identifiers with primes, `?`, char literals and guillemets do not confuse the lexer
    ("theorem h' : ('\"' : Char) = '\"' ∧ «my -- name» = 1 := ⟨rfl, rfl⟩\n",
     "h'", "theorem h' : ('\"' : Char) = '\"' ∧ «my -- name» = 1 :=", "⟨rfl, rfl⟩"),
]


@pytest.mark.parametrize(("src", "name", "statement", "proof"), TRICKY)
def test_tricky_syntax(src: str, name: str, statement: str, proof: str) -> None:
    task = _one(src)
    assert (task.name, task.statement, task.original_proof) == (name, statement, proof)
    assert src.startswith(task.context + task.statement)


def test_namespaces_sections_and_indented_commands() -> None:
    src = (
        "import Foo\nopen Nat\n\nnamespace A.B\n  section S\n  variable (n : Nat)\n"
        "  theorem one : n = n := by\n    rfl\n  end S\n\n  theorem two : True := trivial\nend A.B\n"
        "theorem three : True := trivial\n"
    )
    tasks = strip_lean_source(src)
    assert [t.name for t in tasks] == ["A.B.one", "A.B.two", "three"]
    assert tasks[0].original_proof == "by\n    rfl"
    assert tasks[0].context.endswith("  variable (n : Nat)\n  ")
    assert tasks[1].context.startswith("import Foo\nopen Nat\n")


def test_examples_defs_and_mutual_blocks_are_skipped() -> None:
    src = (
        "def f : Nat := 1\nexample : f = 1 := rfl\ninstance : Inhabited Nat := ⟨0⟩\n"
        "mutual\ntheorem m1 : True := trivial\ntheorem m2 : True := trivial\nend\n"
        "theorem kept : f = 1 := rfl\n"
    )
    assert [t.name for t in strip_lean_source(src)] == ["kept"]


def test_difficulty_tags() -> None:
    src = (
        "-- difficulty: Hard\ntheorem a : True := trivial\n\n"
        "/-- Easy one. difficulty: easy -/\ntheorem b : True := trivial\n\n"
        "-- difficulty: impossible\ntheorem c : True := trivial\n\n"
        "theorem d : True := trivial\n"
    )
    assert [t.difficulty for t in strip_lean_source(src)] == ["hard", "easy", "unknown", "unknown"]


def test_mask_keeps_offsets_and_blanks_comments_and_literals() -> None:
    src = 'theorem x : "a -- b" = s!"{y}" := by -- sorry\n  /- admit /- nested -/ -/ exact \'c\'\n'
    masked = mask_lean(src)
    assert len(masked.code) == len(src) and masked.code.count("\n") == src.count("\n")
    assert "sorry" not in masked.code and "admit" not in masked.code and "a -- b" not in masked.code
    assert "theorem x" in masked.code and "exact" in masked.code
    assert [c.kind for c in masked.comments] == ["line", "block"]


@pytest.mark.parametrize(("src", "line"), [
    ("theorem a : True := by\n  /- never closed\n", 2),  # unterminated block comment
    ('theorem a : "x = 1 := rfl\n', 1),  # unterminated string
    ("theorem a : «x = 1 := rfl\n", 1),  # unterminated «name»
])
def test_unterminated_tokens_are_errors_with_a_line(src: str, line: int) -> None:
    with pytest.raises(LeanSyntaxError) as info:
        strip_lean_source(src)
    assert info.value.line == line and f"line {line}" in str(info.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        strip_lean_file(tmp_path / "missing.lean")
    bad = tmp_path / "bad.lean"
    bad.write_text("theorem a : True := by\n  /- oops\n", encoding="utf-8")
    with pytest.raises(LeanSyntaxError, match=r"bad\.lean"):
        strip_lean_file(bad)
    latin = tmp_path / "latin.lean"
    latin.write_bytes(b"theorem caf\xe9 : True := trivial\n")
    with pytest.raises(LeanSyntaxError, match="not UTF-8"):
        strip_lean_file(latin)
    empty = tmp_path / "empty.lean"
    empty.write_text("def f := 1\n", encoding="utf-8")
    assert strip_lean_file(empty) == []
    with pytest.raises(FileNotFoundError, match="no Theorems"):
        strip_project(tmp_path)
