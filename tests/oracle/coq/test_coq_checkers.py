"""The cold and warm Coq checkers (oracle/coq/cold.py, oracle/coq/warm.py) against the real
coqc/coqtop, each test in both modes: cheating proofs rejected with the right reason, genuine proofs
accepted, the reference and guard (oracle/coq/reference.py), the second line of defence behind the
screen, and the holes found by red-teaming."""

from __future__ import annotations

import dataclasses

import pytest
from coq_fixtures import SUITE
from needs import needs_coq

import oracle.coq.cold as cold_module
import oracle.coq.warm as warm_module
from oracle.coq.cold import CoqChecker
from oracle.coq.reference import guard_command, reference_declaration
from oracle.coq.screen import ProofScript
from oracle.coq.warm import WarmCoqPool
from oracle.proof_common import TheoremTask
from oracle.strip_coq import Sentence, split_sentences, strip_coq_file


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize(
    ("theorem", "proof", "reason"),
    [
        ("double_two", "apply magic.", "relies on axiom(s) magic"),
        ("double_two", "exfalso. pose proof admitted_helper as H. discriminate H.", "relies on axiom(s) admitted_helper"),
    ],
)
def test_print_assumptions_must_be_closed(request: pytest.FixtureRequest, tasks: dict[str, TheoremTask],
                                           mode: str, theorem: str, proof: str, reason: str) -> None:
    checker = request.getfixturevalue(mode)
    verdict = checker.check(tasks[theorem], proof, timeout_s=60)
    assert not verdict.accepted
    assert verdict.cheat
    assert reason in verdict.reason


GENUINE = [
    ("double_two", "reflexivity."),
    ("double_two", "Proof. unfold double. simpl. reflexivity. Qed."),
    ("double_two", "vm_compute. reflexivity."),  # vm_compute is allowed (kernel-checked VM cast)
    ("add_zero", "intros n. induction n as [| n IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity."),
    ("add_zero", "intros n; induction n; [ reflexivity | simpl; rewrite IHn; reflexivity ]."),
    ("and_swap", "intros P Q H. destruct H as [HP HQ]. split.\n{ exact HQ. }\n{ exact HP. }"),
    ("and_swap", "(* a comment. with periods. *) tauto."),
]


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_genuine_proofs_are_accepted(request: pytest.FixtureRequest, tasks: dict[str, TheoremTask], mode: str) -> None:
    checker = request.getfixturevalue(mode)
    for theorem, proof in GENUINE:
        verdict = checker.check(tasks[theorem], proof, timeout_s=60)
        assert verdict.accepted, (theorem, proof, verdict.reason, verdict.messages)
        assert verdict.reason == "accepted" and not verdict.cheat


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_failed_proofs_report_positions_and_goals(request: pytest.FixtureRequest, tasks: dict[str, TheoremTask],
                                                  mode: str) -> None:
    checker = request.getfixturevalue(mode)
    incomplete = checker.check(tasks["add_zero"], "intros n.\ninduction n; simpl.\nreflexivity.", timeout_s=60)
    assert not incomplete.accepted and not incomplete.cheat
    assert incomplete.reason == "incomplete proof: 1 goal(s) remain"
    assert incomplete.goals == ["n : nat; IHn : n + 0 = n |- S (n + 0) = S n"]
    wrong = checker.check(tasks["add_zero"], "intros n.\n\nexact I.", timeout_s=60)
    assert not wrong.accepted
    assert wrong.reason.startswith("error at proof line 3:")
    assert wrong.messages[0]["line"] == 3 and wrong.messages[0]["source"] == "proof"
    if mode == "warm":  # the warm checker also gives the goals before the failing sentence
        assert wrong.goals == ["n : nat |- n + 0 = n"]


@needs_coq
def test_original_proofs_check_warm_three_per_file(warm: WarmCoqPool) -> None:
    for path in SUITE:
        for task in strip_coq_file(path)[:3]:
            verdict = warm.check(task, task.original_proof, timeout_s=60)
            assert verdict.accepted, (task.name, verdict.reason)


@needs_coq
@pytest.mark.slow  # ~15 s idle, more on a loaded machine: Print Assumptions walks lia's library proofs
def test_every_original_proof_of_the_suite_checks_warm(warm: WarmCoqPool) -> None:
    tasks = [t for path in SUITE for t in strip_coq_file(path)]
    assert len(tasks) >= 60
    bad = []
    for task in tasks:
        verdict = warm.check(task, task.original_proof, timeout_s=60)
        if not verdict.accepted:
            bad.append((task.name, verdict.reason))
    assert bad == []


@needs_coq
def test_original_proofs_check_cold_one_per_file(cold: CoqChecker) -> None:
    for path in SUITE:
        task = strip_coq_file(path)[-1]  # the last theorem has the longest context
        verdict = cold.check(task, task.original_proof, timeout_s=60)
        assert verdict.accepted, (task.name, verdict.reason)


@needs_coq
def test_cold_timeout(cold: CoqChecker, tasks: dict[str, TheoremTask]) -> None:
    verdict = cold.check(tasks["double_two"], "let rec f := idtac; f in f.", timeout_s=2)
    assert not verdict.accepted and verdict.reason.startswith("timeout")


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_context_that_does_not_compile(request: pytest.FixtureRequest, mode: str) -> None:
    checker = request.getfixturevalue(mode)
    task = TheoremTask(name="t", statement="Theorem t : True.", context="Definition x : nat := true.\n",
                       original_proof="exact I.", prover="coq")
    verdict = checker.check(task, "exact I.", timeout_s=60)
    assert not verdict.accepted and not verdict.cheat
    assert verdict.reason.startswith("the context does not compile")


def _unscreened(proof: str) -> ProofScript:
    """A ProofScript built without the lexical rules: simulates a cheat the screen missed."""
    sentences = split_sentences(proof)
    return ProofScript(opener="Proof.", units=sentences, body=proof)


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize(
    "proof",
    [
        # abort the real theorem and prove a different statement under the same name
        "Abort. Theorem double_two : True. Proof. exact I.",
        # admit the real theorem, then open an unrelated proof for our Qed to close
        "Admitted. Goal True. exact I.",
    ],
)
def test_second_line_of_defence_behind_the_screen(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                                                  tasks: dict[str, TheoremTask], mode: str, proof: str) -> None:
    for module in (cold_module, warm_module):
        monkeypatch.setattr(module, "screen_proof", _unscreened)
    checker = request.getfixturevalue(mode)
    verdict = checker.check(tasks["double_two"], proof, timeout_s=60)
    assert not verdict.accepted
    assert verdict.cheat, verdict.reason


# ----------------------------------------------------------------------------- holes found by red-teaming
# Each test below is one hole of issue 13, run against the real coqc/coqtop.


def _one_unit(proof: str) -> ProofScript:
    """The whole text as ONE unit: what a lexer that disagreed with Coq would hand the warm path."""
    return ProofScript(opener="Proof.", units=[Sentence(0, len(proof), proof)], body=proof)


@needs_coq
@pytest.mark.parametrize(
    "proof",
    [
        "Abort. Theorem t_bad : True. Proof. exact I.",  # several sentences for Coq, one unit for us
        "intros a b. Abort. Goal True. exact I.",
    ],
)
def test_hole5_warm_units_must_advance_exactly_one_state(monkeypatch: pytest.MonkeyPatch, warm: WarmCoqPool,
                                                          holes: dict[str, TheoremTask], proof: str) -> None:
    monkeypatch.setattr(warm_module, "screen_proof", _one_unit)
    verdict = warm.check(holes["t_bad"], proof, timeout_s=60)
    assert not verdict.accepted and verdict.cheat
    assert "sentences in Coq" in verdict.reason or "left the theorem's proof" in verdict.reason


# the statement is re-opened under the same name after a notation makes `+` mean `*`: a guard
# lemma restated after the proof parses under that notation and would accept it
NOTATION_ATTACK = ('Abort. Notation "x + y" := (Nat.mul x y). '
                   "Theorem t_bad : forall a b : nat, a + b = a * b. Proof. intros; reflexivity.")


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_hole5_reference_statement_is_parsed_before_the_proof(request: pytest.FixtureRequest,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             holes: dict[str, TheoremTask], mode: str) -> None:
    for module in (cold_module, warm_module):
        monkeypatch.setattr(module, "screen_proof", _unscreened)
    verdict = request.getfixturevalue(mode).check(holes["t_bad"], NOTATION_ATTACK, timeout_s=60)
    assert not verdict.accepted and verdict.cheat, verdict.reason


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_hole5_reference_guard_alone_catches_a_changed_statement(monkeypatch: pytest.MonkeyPatch, mode: str,
                                                                  holes: dict[str, TheoremTask]) -> None:
    """The guard compares kernel terms: a checked constant whose type differs from the reference
    fails it. A changed statement really goes through the checker: the theorem is checked as
    ``two : True`` while the reference restates the original ``True /\\ True``. Every other rule
    passes (``exact I.`` proves ``True``), so the guard alone must refuse it."""
    original = holes["two"]
    changed = dataclasses.replace(original, statement="Theorem two : True.")
    restate = reference_declaration
    for module in (cold_module, warm_module):
        monkeypatch.setattr(module, "reference_declaration", lambda task, name: restate(original, name))
    checker: CoqChecker | WarmCoqPool = CoqChecker() if mode == "cold" else WarmCoqPool()
    try:
        verdict = checker.check(changed, "exact I.", timeout_s=60)
        assert not verdict.accepted and verdict.cheat, verdict.reason
        assert verdict.reason == "two no longer proves its original statement: commands were injected around the proof"
        assert [m["source"] for m in verdict.messages] == ["guard"]
        # the same checker accepts a genuine proof of the original statement (the guard passes)
        good = checker.check(original, "split; exact I.", timeout_s=60)
        assert good.accepted, good.reason
    finally:
        checker.close()
    script = guard_command("two", "rrma_ref_x")
    assert "constr_eq" in script and "@two" in script and "@rrma_ref_x" in script
    assert restate(original, "rrma_ref_x").startswith("Lemma rrma_ref_x : True /\\ True.")


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_hole7_allowed_axioms_agree_cold_and_warm(mode: str, holes: dict[str, TheoremTask]) -> None:
    allowed: CoqChecker | WarmCoqPool = (CoqChecker(allowed_axioms=("classic",)) if mode == "cold"
                                         else WarmCoqPool(allowed_axioms=("classic",)))
    strict: CoqChecker | WarmCoqPool = CoqChecker() if mode == "cold" else WarmCoqPool()
    try:
        ok = allowed.check(holes["em_t"], "intros. apply classic.", timeout_s=60)
        assert ok.accepted and ok.axioms == ["classic"], ok
        no = strict.check(holes["em_t"], "intros. apply classic.", timeout_s=60)
        assert not no.accepted and no.cheat and "relies on axiom(s) classic" in no.reason
    finally:
        allowed.close()
        strict.close()


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize(
    "proof",
    [
        "split; [exact I .. ].",  # hole 8: used to swallow the sync sentinel and time out warm
        "Time split. Show. Timeout 5 exact I. Show Proof. exact I.",  # hole 9: genuine, not cheats
        "Proof with (exact I). split...",
    ],
)
def test_hole8_9_genuine_proofs_accepted(request: pytest.FixtureRequest, holes: dict[str, TheoremTask],
                                         mode: str, proof: str) -> None:
    verdict = request.getfixturevalue(mode).check(holes["two"], proof, timeout_s=20)
    assert verdict.accepted and not verdict.cheat, verdict.reason
    assert verdict.seconds < 15  # not the timeout the old lexer burnt


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_unchecked_cast_refused_by_the_kernel_is_a_cheat(request: pytest.FixtureRequest,
                                                        holes: dict[str, TheoremTask], mode: str) -> None:
    proof = "change_no_check (forall a b : nat, a * b = a * b). intros; reflexivity."
    verdict = request.getfixturevalue(mode).check(holes["t_bad"], proof, timeout_s=60)
    assert not verdict.accepted and verdict.cheat
    assert verdict.reason.startswith("the kernel refused the proof term at Qed")


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_bench_red_team_cheats_are_all_rejected_as_cheats(request: pytest.FixtureRequest,
                                                         holes: dict[str, TheoremTask], mode: str) -> None:
    """hole 9: the bench's red team includes cheats that pass the lexical screen and reach Coq's
    own checks (the kernel at Qed); every one is rejected, counted as a cheat, and the verdict names
    that very cheat (a rejection for another reason would say nothing about the defence)."""
    from benches.proofs import RED_TEAM

    checker = request.getfixturevalue(mode)
    wrong = []
    for cheat in RED_TEAM["coq"]:
        verdict = checker.check(holes["t_bad"], cheat.proof, timeout_s=60)
        if verdict.accepted or not verdict.cheat or cheat.names not in verdict.reason:
            wrong.append((cheat.proof, cheat.names, verdict.accepted, verdict.cheat, verdict.reason))
    assert wrong == []
    assert any("_no_check" in c.proof and c.names.startswith("the kernel refused") for c in RED_TEAM["coq"])


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize("name", ["a", "b"])
def test_a_theorem_named_like_the_guards_own_variables_is_judged(mode: str, name: str) -> None:
    """The guard binds two Ltac names (`a`, `b`) to the two types it compares. A theorem with one of those
    names was read as the Ltac variable, so every proof of it was refused as "commands were injected".
    Now a right proof of `a`/`b` is accepted and a changed statement under that name is still refused."""
    from oracle.coq.reference import reference_declaration as restate

    original = TheoremTask(name, f"Theorem {name} : 1 + 1 = 2.", "", "reflexivity.", prover="coq")
    changed = dataclasses.replace(original, statement=f"Theorem {name} : 2 = 2.")
    checker: CoqChecker | WarmCoqPool = CoqChecker() if mode == "cold" else WarmCoqPool()
    try:
        good = checker.check(original, "reflexivity.", timeout_s=60)
        assert good.accepted, good.reason
        module = cold_module if mode == "cold" else warm_module
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(module, "reference_declaration", lambda task, ref: restate(original, ref))
            bad = checker.check(changed, "reflexivity.", timeout_s=60)
        assert not bad.accepted and bad.cheat
        assert bad.reason == f"{name} no longer proves its original statement: commands were injected around the proof"
    finally:
        checker.close()
