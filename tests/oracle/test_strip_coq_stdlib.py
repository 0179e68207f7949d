"""The Coq stripper on real files: every ``.v`` file of the installed standard library strips, a
``Proof term.`` theorem is read with its exact proof and that proof checks with the real checker,
and a theorem the stripper cannot read is skipped with a note while its neighbours are kept.

The standard library is found with ``coqc -where`` (Debian's coq package puts it under
``/usr/lib/ocaml/coq/theories``). Without coqc the tests that need it skip, saying so; under CI
(where Coq is installed) a missing coqc fails them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benches.coq.bench import load_tasks, load_tasks_with_notes
from oracle.coq import CoqSandbox, ProofRejected, WarmCoqPool, checker_hidden, make_coq_checker, screen_proof
from oracle.proof_common import ProofChecker, TheoremTask
from oracle.strip_coq import (
    CoqSyntaxError,
    proof_term,
    strip_coq_file_with_notes,
    strip_coq_text,
    strip_coq_text_with_notes,
)

BODY_NOTE = "has a body (:=), not a proof"  # `Example e : T := t.`: a definition, the one kind the stdlib skips


def _coq_missing(in_ci: bool, reason: str) -> None:
    if in_ci:
        pytest.fail(f"CI installs Coq (apt-get install coq), but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def theories(in_ci: bool) -> Path:
    """``$(coqc -where)/theories``: the installed Coq standard library's sources."""
    coqc = shutil.which("coqc")
    if coqc is None:
        _coq_missing(in_ci, "coqc is not on PATH (Debian: apt-get install coq), so there is no standard library to strip")
    assert coqc is not None
    where = subprocess.run([coqc, "-where"], capture_output=True, text=True, timeout=60).stdout.strip()
    root = Path(where) / "theories"
    if not root.is_dir():
        _coq_missing(in_ci, f"`coqc -where` says {where!r}, which has no theories/ folder of .v sources")
    return root


def _check_boundaries(text: str, task: TheoremTask) -> None:
    """context + statement + original_proof is the file up to the proof's end (blanks between)."""
    assert text.startswith(task.context), task.name
    decl_end = len(task.context) + len(task.statement)
    assert text.startswith(task.statement, len(task.context)), task.name
    proof_start = text.find(task.original_proof, decl_end)
    assert proof_start >= 0 and text[decl_end:proof_start].strip() == "", task.name


def test_every_standard_library_file_strips(theories: Path) -> None:
    started = time.monotonic()
    files = sorted(theories.rglob("*.v"))
    tasks: list[TheoremTask] = []
    notes = []
    for path in files:
        found, skipped = strip_coq_file_with_notes(path)  # raises on nothing: no file is refused whole
        text = path.read_text(encoding="utf-8")
        for task in found:
            _check_boundaries(text, task)
        tasks.extend(found)
        notes.extend(skipped)
    seconds = time.monotonic() - started
    by_term = [t for t in tasks if proof_term(" ".join(t.original_proof.split())) is not None]
    print(f"\n{len(files)} files, {len(tasks)} theorems ({len(by_term)} proved by `Proof term.`), "
          f"{len(notes)} skipped, {seconds:.1f} s")
    assert len(files) > 500 and len(tasks) > 10000
    # Debian's Coq 8.16 stdlib has over a hundred `Proof term.` theorems (31 files were refused whole
    # before they were read); the only declarations left unread are Examples with a body
    assert len(by_term) > 100
    assert all(note.reason == BODY_NOTE and note.keyword == "Example" for note in notes), [str(n) for n in notes]
    assert all(note.name and note.line > 0 and note.source_file.endswith(".v") for note in notes)


def test_zeven_reads_proof_term_theorems(theories: Path) -> None:
    path = theories / "ZArith" / "Zeven.v"
    tasks, notes = strip_coq_file_with_notes(path)
    assert notes == []
    by_name = {t.name: t for t in tasks}
    even = by_name["Zeven_ex_iff"]
    assert even.statement == "Theorem Zeven_ex_iff n : Zeven n <-> exists m, n = 2*m."
    assert even.original_proof == "Proof (Zeven_equiv n)."
    assert by_name["Zodd_ex_iff"].original_proof == "Proof (Zodd_equiv n)."
    # the theorem after a `Proof term.` one is read on its own, with its own tactic proof
    names = [t.name for t in tasks]
    after = by_name[names[names.index("Zodd_ex_iff") + 1]]
    assert after.original_proof.startswith("Proof") and after.original_proof.endswith(("Qed.", "Defined."))
    text = path.read_text(encoding="utf-8")
    for task in tasks:
        _check_boundaries(text, task)


@pytest.mark.parametrize(
    ("code", "term"),
    [
        ("Proof (Zeven_equiv n).", "(Zeven_equiv n)"),
        ("Proof eq_sym (Z.compare_antisym n m).", "eq_sym (Z.compare_antisym n m)"),
        ("Proof(I).", "(I)"),
        ("Proof fun x =>\n  f x x.", "fun x =>\n  f x x"),
        ("Proof.", None),
        ("Proof  .", None),  # `Proof (* a comment *).` once the comment is gone
        ("Proof using x y.", None),
        ("Proof with auto.", None),
        ("Proof using.", None),
        ("Proof I...", None),  # Coq refuses an ellipsis here
        ("Proofs foo.", None),
        ("exact I.", None),
    ],
)
def test_proof_term(code: str, term: str | None) -> None:
    assert proof_term(code) == term


UNREADABLE = """Require Import Arith.
Lemma good_one : 1 + 1 = 2.
Proof. reflexivity. Qed.

Lemma broken : True.
Proof. exact I.

Theorem good_two : forall n, n + 0 = n.
Proof (fun n => eq_sym (plus_n_O n)).
Example inline : 2 = 2 := eq_refl.
Example good_three : 3 = 3. reflexivity. Qed.
"""


def test_an_unreadable_theorem_is_skipped_with_a_note_between_two_good_ones() -> None:
    tasks, notes = strip_coq_text_with_notes(UNREADABLE, source_file="mixed.v")
    assert [t.name for t in tasks] == ["good_one", "good_two", "good_three"]
    assert tasks[1].original_proof == "Proof (fun n => eq_sym (plus_n_O n))."
    assert tasks[1].line == 8
    for task in tasks:
        _check_boundaries(UNREADABLE, task)
    assert [(n.name, n.keyword, n.line) for n in notes] == [("broken", "Lemma", 5), ("inline", "Example", 10)]
    assert str(notes[0]) == ("mixed.v:5: Lemma broken skipped: has no Qed/Defined/Admitted/Abort before the "
                             "next declaration (line 8)")
    assert notes[1].reason == BODY_NOTE
    # the strict reading, for callers that want a whole file or nothing, still refuses it
    with pytest.raises(CoqSyntaxError, match=r"mixed\.v:5: Lemma broken has no Qed"):
        strip_coq_text(UNREADABLE, source_file="mixed.v")


@pytest.mark.parametrize(
    ("between", "reason"),
    [
        # a command Coq refuses inside a proof: the proof was not where the stripper looked
        ("Section S.", "meets a Section command before its Qed (line 3)"),
        ("Goal True.", "meets a Goal command before its Qed (line 3)"),
        ("End M.", "meets a End command before its Qed (line 3)"),
        ("Local Module N.", "meets a Local Module command before its Qed (line 3)"),
        # `Proof term.` ends a proof; after the first sentence it cannot be the theorem's whole proof
        ("Proof I.", "meets a Proof term sentence after its first one (line 3)"),
    ],
)
def test_doubtful_boundaries_skip_the_theorem(between: str, reason: str) -> None:
    text = f"Lemma a : True.\nProof.\n{between}\nexact I. Qed.\nLemma b : True. Proof. exact I. Qed.\n"
    tasks, notes = strip_coq_text_with_notes(text)
    assert [t.name for t in tasks] == ["b"]
    assert [(n.name, n.reason) for n in notes] == [("a", reason)]


def test_an_example_with_a_let_is_read_when_a_proof_follows() -> None:
    tasks, notes = strip_coq_text_with_notes("Example e : let x := 1 in x = 1.\nProof. reflexivity. Qed.\n")
    assert [t.name for t in tasks] == ["e"] and notes == []
    tasks, notes = strip_coq_text_with_notes("Example e : let x := 1 in x = 1.\nreflexivity. Qed.\n")
    assert tasks == [] and [n.reason for n in notes] == [BODY_NOTE]  # in doubt: skipped


def test_load_tasks_reports_skipped_theorems(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.v"
    mixed.write_text(UNREADABLE, encoding="utf-8")
    said: list[str] = []
    tasks = load_tasks([mixed], say=said.append)
    assert [t.name for t in tasks] == ["good_one", "good_two", "good_three"]
    assert said == [f"bench coq: {mixed}:5: Lemma broken skipped: has no Qed/Defined/Admitted/Abort before the "
                    "next declaration (line 8)",
                    f"bench coq: {mixed}:10: Example inline skipped: {BODY_NOTE}"]
    # many notes: the first few one per line, then a count
    many = tmp_path / "many.v"
    many.write_text("".join(f"Example e{i} : {i} = {i} := eq_refl.\n" for i in range(9))
                    + "Lemma ok : True. Proof. exact I. Qed.\n", encoding="utf-8")
    said.clear()
    assert [t.name for t in load_tasks([many], say=said.append)] == ["ok"]
    assert len(said) == 6 and said[-1] == "bench coq: 4 more theorems skipped (9 in all, 1 read)"


def test_load_tasks_refuses_a_named_file_with_nothing_readable(tmp_path: Path) -> None:
    empty = tmp_path / "none.v"
    empty.write_text("Example a := 1.\nLemma b : True.\n", encoding="utf-8")
    with pytest.raises(CoqSyntaxError, match=r"none\.v: no theorem can be read \(2 skipped; line 1: Example a has a body"):
        load_tasks_with_notes([empty])
    # in a directory, the same file only adds notes; the other files' theorems are read
    (tmp_path / "good.v").write_text("Lemma g : True. Proof. exact I. Qed.\n", encoding="utf-8")
    tasks, notes = load_tasks_with_notes([tmp_path])
    assert [t.name for t in tasks] == ["g"] and [n.name for n in notes] == ["a", "b"]


# ----------------------------------------------------------------- the real checker on `Proof term.` theorems


def test_the_checker_runs_a_proof_term_as_exact_and_screens_it_like_any_tactic() -> None:
    script = screen_proof("(* the whole proof *)\nProof (Zeven_equiv n).")
    assert script.opener == "Proof." and [script.unit_text(u) for u in script.units] == ["exact ((Zeven_equiv n))."]
    assert script.line(script.units[0]) == 2
    for cheat, reason in [("Proof (ltac:(admit)).", "uses admit"),
                          ("Proof ltac:(native_compute; exact I).", "uses native_compute"),
                          ("Proof I. Lemma x : False. Admitted.", "injects a second Proof command")]:
        with pytest.raises(ProofRejected, match=reason) as caught:
            screen_proof(cheat)
        assert caught.value.cheat, cheat



@pytest.fixture(scope="module")
def zeven(theories: Path) -> dict[str, TheoremTask]:
    tasks, _ = strip_coq_file_with_notes(theories / "ZArith" / "Zeven.v")
    return {t.name: t for t in tasks}


@pytest.fixture(scope="module", params=["cold", "warm"])
def checker(request: pytest.FixtureRequest, theories: Path) -> Iterator[ProofChecker]:
    if shutil.which("coqtop") is None:
        _coq_missing(False, "coqtop is not on PATH (Debian: apt-get install coq)")
    source = theories / "ZArith" / "Zeven.v"
    # as the bench does: Coq's processes never read the stripped file
    made = make_coq_checker(warm=request.param == "warm", sandbox=CoqSandbox(hidden=checker_hidden([source])))
    yield made
    made.close()


def test_proof_term_originals_check_with_the_real_checker(zeven: dict[str, TheoremTask],
                                                          checker: ProofChecker) -> None:
    for name in ("Zeven_ex_iff", "Zodd_ex_iff"):
        task = zeven[name]
        verdict = checker.check(task, task.original_proof, timeout_s=120)
        assert verdict.accepted, (name, verdict.reason, verdict.messages)
        assert not verdict.cheat
    if isinstance(checker, WarmCoqPool):
        return
    # the wrong term is refused by Coq (a failed proof, not a cheat)
    wrong = checker.check(zeven["Zeven_ex_iff"], "Proof (Zodd_equiv n).", timeout_s=120)
    assert not wrong.accepted and not wrong.cheat, wrong.reason
