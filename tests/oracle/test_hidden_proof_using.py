"""The rediscover view declares the section variables each hidden proof used (round nine's sweep).

A theorem proved inside a Section keeps, once the Section closes, only the section variables its proof
used; ``Admitted.`` has no proof term, so Coq keeps them all and the theorem's closed type changes. A
later sentence that uses it outside the Section (a kept definition, a module's signature check at its
``End``) then fails in the view, and every theorem after it cannot start: about a dozen stdlib files
(FSets, MSets, Sorting, setoid_ring, ssr) had such a point. The view puts the proof's own ``Proof
using`` sentence, or the one Coq suggests for the original (``Set Suggest Proof Using``, one ``coqc``
run per file; ``Proof using Type.`` for a ``Defined`` proof, for which Coq suggests none), before
``Admitted.`` (``oracle.strip_coq.DECLARE_PROOF_USING``). Also here: a module header with ``<: S with Module E := X``
opens a module, and the cold checker, which must close every open module for ``coqc``, cuts the
signature constraint of the modules it closes early (``unsealed_context``): 12 stdlib files had a
theorem before their module's last field.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import oracle.strip_coq as strip_module
from benches.coq.bench import load_tasks
from oracle.coq.cold import CoqChecker, closing_scopes
from oracle.coq.oracle import public_contexts
from oracle.coq.sandboxing import coq_where
from oracle.proof_common import TheoremTask
from oracle.strip_coq import hidden_contexts, open_scopes, proof_using_suggestions, strip_coq_text

# `pick` is proved in a Section with two type variables and uses only `A`; `first` (kept: it is a
# Definition) applies it to a nat outside the Section, which typechecks only if `pick` did not keep `B`
SECTIONED = """Section S.
Variables A B : Type.
Hypothesis inhabited : A.
Lemma pick : forall x : A, x = x.
Proof. reflexivity. Qed.
Lemma witness : A.
Proof. exact inhabited. Qed.
End S.
Definition first := pick nat 0.
Lemma later : forall n : nat, n = n.
Proof. intros n. exact (pick nat n). Qed.
"""


def _compiles(coqc: str, tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "View.v").write_text(source, encoding="utf-8")
    return subprocess.run([coqc, "-q", "View.v"], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def _last(tmp_path: Path, name: str, text: str) -> tuple[list[TheoremTask], TheoremTask]:
    """The tasks of ``text`` written as ``name``, and the last one."""
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    tasks = load_tasks([source], say=lambda line: None)
    return tasks, tasks[-1]


def test_suggestions_are_read_in_order_with_the_exact_choice_first() -> None:
    output = ("The proof of pick should start with one of the following commands:\nProof using . \n"
              "Proof using Type. \nThe proof of M.witness should start with one of the following commands:\n"
              "Proof using inhabited. \nProof using Type*. \n")
    assert proof_using_suggestions(output) == [("pick", "Proof using."), ("witness", "Proof using inhabited.")]
    assert proof_using_suggestions("no suggestion here") == []


def test_a_proofs_own_proof_using_stays_and_nothing_else_of_it() -> None:
    text = "Section S.\nVariable A : Type.\nLemma l : forall x : A, x = x.\nProof using A. SECRET. Qed.\nEnd S.\n"
    hidden = hidden_contexts(text, [len(text)])[0]
    assert "Proof using A.\nAdmitted." in hidden and "SECRET" not in hidden


def test_suggestions_go_to_the_theorem_of_that_name_in_file_order() -> None:
    tasks = strip_coq_text(SECTIONED)
    view = hidden_contexts(SECTIONED, [len(tasks[-1].context)],
                           [("witness", "Proof using inhabited."), ("pick", "Proof using.")])[0]
    # `witness` comes after `pick`: its suggestion is matched first, and `pick`'s (printed later) finds no
    # theorem of that name after it, so it is not used
    assert "Proof using inhabited.\nAdmitted." in view and "Proof using.\n" not in view


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "bare-admitted"])
def test_a_later_use_outside_the_section_compiles_only_with_the_declaration(
        coqc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: bool) -> None:
    monkeypatch.setattr(strip_module, "DECLARE_PROOF_USING", declared)
    tasks, later = _last(tmp_path, "Sectioned.v", SECTIONED)
    view = public_contexts(tasks, CoqChecker().proof_using)[id(later)]
    if declared:
        assert "Proof using.\nAdmitted." in view and "Proof using inhabited.\nAdmitted." in view
    else:
        assert "Proof using" not in view
    assert "reflexivity" not in view and "exact inhabited" not in view
    result = _compiles(coqc, tmp_path, view + later.statement + "\nAdmitted.\n")
    assert (result.returncode == 0) is declared, result.stdout + result.stderr
    if not declared:
        # `pick` kept `B : Type` as its second argument, where `first` gives 0
        assert 'The term "0" has type "nat" while it is expected to have type "Type"' in result.stderr


# Coq suggests nothing for a `Defined` proof; `sym` uses x and y only, as its statement
DEFINED = """Section S.
Variables (A : Type) (x y z : A).
Theorem sym : x = y -> y = x.
Proof. destruct 1. reflexivity. Defined.
Lemma other : x = x.
Proof. reflexivity. Qed.
End S.
Definition flip (a b : nat) (e : a = b) : b = a := sym nat a b e.
Lemma later : 1 = 1.
Proof. reflexivity. Qed.
"""


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "bare-admitted"])
def test_a_defined_proof_in_a_section_declares_its_statements_variables(
        coqc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: bool) -> None:
    monkeypatch.setattr(strip_module, "DECLARE_PROOF_USING", declared)
    tasks, later = _last(tmp_path, "Defined.v", DEFINED)
    suggestions = CoqChecker().proof_using(later)
    assert [name for name, _ in suggestions] == ["other"]  # none for `sym`
    view = public_contexts(tasks, lambda task: suggestions)[id(later)]
    assert ("Proof using Type.\nAdmitted." in view) is declared
    result = _compiles(coqc, tmp_path, view + later.statement + "\nAdmitted.\n")
    assert (result.returncode == 0) is declared, result.stdout + result.stderr


@pytest.mark.slow  # compiles Sorting/Permutation.v three times (a few seconds each)
@pytest.mark.parametrize("declared", [True, False], ids=["declared", "bare-admitted"])
def test_the_last_theorem_of_permutation_v_starts_only_with_the_declaration(
        coqc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: bool) -> None:
    where = coq_where()
    if where is None or not (where / "theories" / "Sorting" / "Permutation.v").is_file():
        pytest.skip("the Coq standard library's sources are not installed")
    monkeypatch.setattr(strip_module, "DECLARE_PROOF_USING", declared)
    tasks = load_tasks([where / "theories" / "Sorting" / "Permutation.v"], say=lambda line: None)
    last = tasks[-1]
    view = public_contexts(tasks, CoqChecker().proof_using)[id(last)]
    # the view runs as the file's own module, as the agent's session does: Sorting/Permutation.v under -Q . Coq
    (tmp_path / "Sorting").mkdir()
    (tmp_path / "Sorting" / "Permutation.v").write_text(
        view + last.statement + "\nAdmitted.\n" + closing_scopes(last), encoding="utf-8")
    result = subprocess.run([coqc, "-q", "-Q", ".", "Coq", "Sorting/Permutation.v"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert (result.returncode == 0) is declared, result.stdout + result.stderr


def test_a_module_header_with_a_with_clause_opens_the_module() -> None:
    context = ("Module Make_ord (X : OrderedType) (D : OrderedType) <:\nSord with Module Data := D\n"
               "        with Module MapS.E := X.\nModule Data := D.\nDefinition t := nat.\n")
    assert open_scopes(context) == ["Make_ord"]
    assert open_scopes("Module M : S with Definition t := nat := F X.\n") == []
    assert open_scopes("Module N := F X.\nModule P <: S.\n") == ["P"]


def test_unsealing_cuts_only_the_constraint_of_a_module_still_open() -> None:
    context = ("Module Type S.\nEnd S.\nModule Done <: S.\nEnd Done.\n"
               "Module Make (X : T) (* the map *) <:\n  S with Module E := X.\nDefinition t := nat.\n")
    unsealed = strip_module.unsealed_context(context)
    assert unsealed == ("Module Type S.\nEnd S.\nModule Done <: S.\nEnd Done.\n"
                        "Module Make (X : T).\n\nDefinition t := nat.\n")
    assert unsealed.count("\n") == context.count("\n") and open_scopes(unsealed) == ["Make"]
    assert strip_module.unsealed_context("Module M : S.\nSection A.\n") == "Module M.\nSection A.\n"


# `early` is proved inside M before M defines the fields its signature asks for
SEALED = """Module Type S.
Parameter t : Type.
Parameter x : t.
End S.
Module M <: S.
Definition t := nat.
Lemma early : 0 = 0.
Proof. reflexivity. Qed.
Definition x := 0.
End M.
"""


@pytest.mark.parametrize("unsealed", [True, False], ids=["unsealed", "constraint-kept"])
def test_the_cold_checker_checks_a_theorem_before_its_modules_last_field(
        coqc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unsealed: bool) -> None:
    import oracle.coq.cold as cold_module

    if not unsealed:
        monkeypatch.setattr(cold_module, "unsealed_context", lambda context: context)
    source = tmp_path / "Sealed.v"
    source.write_text(SEALED, encoding="utf-8")
    task = load_tasks([source], say=lambda line: None)[0]
    verdict = CoqChecker().check(task, "reflexivity.")
    assert verdict.accepted is unsealed, verdict
    if not unsealed:  # closing M failed its signature check, and an honest proof read as a cheat
        assert any("The field x is missing" in str(m) for m in verdict.messages) and verdict.cheat, verdict
