"""The Coq oracle against the real coqc/coqtop: cheating proofs rejected with the right reason,
genuine proofs accepted, cold and warm checkers agreeing, warm-pool isolation and limits."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import oracle.coq as coq_module
from oracle.check_cli import run_check
from oracle.coq import (
    CoqChecker,
    CoqNotFound,
    CoqOracle,
    ProofRejected,
    ProofScript,
    WarmCoqPool,
    find_coq_binary,
    parse_assumptions,
    parse_goals,
    screen_proof,
)
from oracle.proof_common import TheoremTask
from oracle.strip_coq import Sentence, split_sentences, strip_coq_file, strip_coq_text
from rrma.contain import seccomp
from rrma.contracts import EvalContext
from rrma.trial import Budget, Outcome, Proposal, Status

REPO = Path(__file__).resolve().parent.parent
SUITE = sorted((REPO / "benches" / "coq").glob("*.v"))

needs_coq = pytest.mark.skipif(
    shutil.which("coqc") is None or shutil.which("coqtop") is None,
    reason="coqc/coqtop not on PATH (Debian: apt-get install coq)",
)

SOURCE = """Require Import Arith.
(* The user's own file may hold axioms and admitted lemmas: proofs must not rely on them. *)
Axiom magic : forall P : Prop, P.
Lemma admitted_helper : 2 + 2 = 5.
Admitted.
Definition double (n : nat) := n + n.

(* difficulty: easy *)
Theorem double_two : double 2 = 4.
Proof. reflexivity. Qed.

(* difficulty: medium *)
Theorem add_zero : forall n : nat, n + 0 = n.
Proof. induction n; simpl; auto. Qed.

(* difficulty: easy *)
Theorem and_swap : forall P Q : Prop, P /\\ Q -> Q /\\ P.
Proof. intros P Q [HP HQ]. split; assumption. Qed.
"""


@pytest.fixture(scope="module")
def tasks() -> dict[str, TheoremTask]:
    return {t.name: t for t in strip_coq_text(SOURCE, source_file="cheats.v")}


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmCoqPool]:
    if shutil.which("coqtop") is None:
        pytest.skip("coqtop not on PATH (Debian: apt-get install coq)")
    pool = WarmCoqPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def cold() -> CoqChecker:
    if shutil.which("coqc") is None:
        pytest.skip("coqc not on PATH (Debian: apt-get install coq)")
    return CoqChecker()


# (theorem, proof, expected reason fragment): every one must be rejected with cheat=True.
CHEATS = [
    ("double_two", "Admitted.", "uses Admitted"),
    ("double_two", "admit.", "uses admit"),
    ("double_two", "Proof. admit. Qed.", "uses admit"),
    ("add_zero", "intros n. assert (H : n + 0 = n) by admit. exact H.", "uses admit"),
    ("double_two", "give_up.", "uses give_up"),
    ("double_two", "Axiom cheat : forall P : Prop, P. apply cheat.", "declares an axiom (Axiom)"),
    ("double_two", "Parameter p : False. destruct p.", "declares an axiom (Parameter)"),
    ("double_two", "Conjecture c : False. destruct c.", "declares an axiom (Conjecture)"),
    ("double_two", "Hypothesis h : False. destruct h.", "declares an axiom (Hypothesis)"),
    # the agent tries to restate the theorem (a changed statement)
    ("double_two", "Theorem double_two : True. Proof. exact I. Qed.", "new Theorem declaration"),
    ("double_two", "reflexivity. Qed. Theorem other : 1 = 1. Proof. reflexivity.", "ends the proof with Qed"),
    ("double_two", "reflexivity. Defined. Lemma x : True. exact I.", "ends the proof with Defined"),
    ("double_two", "Abort.", "aborts the proof"),
    ("double_two", "Abort All.", "aborts the proof"),
    ("double_two", "Unset Guard Checking. reflexivity.", "kernel-skipping option (Unset Guard Checking)"),
    ("double_two", "Unset Positivity Checking. reflexivity.", "kernel-skipping option (Unset Positivity Checking)"),
    ("double_two", "Local Unset Universe Checking. reflexivity.", "kernel-skipping option (Unset Universe Checking)"),
    ("double_two", "Set Printing All. reflexivity.", "changes an option"),
    ("double_two", "native_compute. reflexivity.", "uses native_compute"),
    ("double_two", "Lemma helper : False. Admitted. destruct helper.", "new Lemma declaration"),
    ("double_two", "Require Import Classical. reflexivity.", "imports a library inside the proof (Require)"),
    ("add_zero", "From Coq Require Import Lia. lia.", "imports a library inside the proof (From)"),
    ("double_two", "Import Nat. reflexivity.", "imports a library inside the proof (Import)"),
    ("double_two", 'Declare ML Module "ltac_plugin". reflexivity.', "loads an ML plugin (Declare ML Module)"),
    ("double_two", "Ltac t := reflexivity. t.", "new Ltac declaration"),
    ("double_two", "Definition four := 4. reflexivity.", "new Definition declaration"),
    ("double_two", "#[local] Axiom cheat : False. destruct cheat.", "attributed command"),
    ("double_two", "Reset Initial. reflexivity.", "vernacular command (Reset)"),
    ("double_two", "Fail reflexivity. reflexivity.", "vernacular command (Fail)"),
    ("double_two", "Proof. Proof. reflexivity.", "second Proof command"),
    ("double_two", "- { reflexivity. } Qed. Check 1.", "ends the proof with Qed"),
]


@pytest.mark.parametrize(("theorem", "proof", "reason"), CHEATS, ids=[c[1][:40] for c in CHEATS])
def test_screen_rejects_cheats_before_coq_runs(theorem: str, proof: str, reason: str) -> None:
    with pytest.raises(ProofRejected) as info:
        screen_proof(proof)
    assert reason in info.value.reason
    assert info.value.cheat


@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        ("", "empty proof"),
        ("Proof. Qed.", "empty proof"),
        ("reflexivity. (* never closed", "unterminated comment"),
        ('idtac "open. reflexivity.', "unterminated string"),
        ("reflexivity.\x00", "control or unusual space character"),
        ("reflexivity.\u00a0auto.", "control or unusual space character"),
        ("intros; auto", "does not end with '.'"),
    ],
)
def test_screen_rejects_malformed_proofs_as_non_cheats(proof: str, reason: str) -> None:
    with pytest.raises(ProofRejected) as info:
        screen_proof(proof)
    assert reason in info.value.reason
    assert not info.value.cheat


def test_screen_normalizes_opener_and_closer() -> None:
    script = screen_proof("Proof.\n  intros n.\n  - auto.\n  { lia. }\nQed.")
    assert script.opener == "Proof."
    assert [script.unit_text(u) for u in script.units] == ["intros n.", "-", "auto.", "{", "lia.", "}"]
    assert script.line(script.units[2]) == 3  # positions refer to the agent's own text
    assert screen_proof("Proof using. auto. Defined.").opener == "Proof using."
    assert screen_proof("all: auto. Unshelve. 2: lia.").units  # selectors and Unshelve are fine


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
def test_warm_checks_are_isolated(tasks: dict[str, TheoremTask]) -> None:
    pool = WarmCoqPool(max_checks=4)
    try:
        task = tasks["add_zero"]
        # the same theorem twice: the first check's Qed must not leave add_zero defined
        assert pool.check(task, "induction n; simpl; auto.").accepted
        assert pool.check(task, "induction n; simpl; auto.").accepted
        # a failure in the middle of a proof leaves nothing behind either
        assert not pool.check(task, "intros n. exact I.").accepted
        assert pool.check(task, "intros n. induction n; simpl; auto.").accepted
        assert pool.restarts == 1
        # after max_checks checks the session is replaced by a fresh one
        assert pool.check(tasks["double_two"], "reflexivity.").accepted
        assert pool.restarts == 2
        # switching files (contexts that do not extend each other) reloads the context
        other = strip_coq_text("Definition double (n : nat) := 2 * n.\nTheorem double_two : double 2 = 4.\n"
                               "Proof. reflexivity. Qed.\n")[0]
        assert pool.check(other, "reflexivity.").accepted
        assert pool.check(tasks["double_two"], "unfold double. reflexivity.").accepted
    finally:
        pool.close()


@needs_coq
def test_warm_timeout_restarts_the_session(tasks: dict[str, TheoremTask]) -> None:
    pool = WarmCoqPool()
    try:
        verdict = pool.check(tasks["double_two"], "let rec f := idtac; f in f.", timeout_s=2)
        assert not verdict.accepted and verdict.reason.startswith("timeout")
        assert pool.check(tasks["double_two"], "reflexivity.", timeout_s=30).accepted
        assert pool.restarts == 2
    finally:
        pool.close()


LOAD_DELAY_S = 3.0  # a context that takes this long to load: a big library, or a loaded machine


@pytest.fixture
def slow_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every context load takes LOAD_DELAY_S more before the real one (the delay stands for Coq's own work)."""
    load = coq_module.CoqSession.load_context

    def slow(self: coq_module.CoqSession, context: str, deadline: float) -> int:
        time.sleep(LOAD_DELAY_S)
        return load(self, context, deadline)

    monkeypatch.setattr(coq_module.CoqSession, "load_context", slow)


@needs_coq
def test_warm_timeout_is_the_proofs_not_the_start_up(tasks: dict[str, TheoremTask], slow_context: None) -> None:
    """A check's timeout starts once the context is loaded: a context slower to load than the proof's
    budget (3 s against 2 s) still gets its proof checked (before, every such check timed out, and each
    timeout's restart paid the loading again), and a looping proof still times out on its own seconds."""
    pool = WarmCoqPool()
    try:
        verdict = pool.check(tasks["double_two"], "reflexivity.", timeout_s=2.0)
        assert verdict.accepted, verdict.reason
        looping = pool.check(tasks["double_two"], "let rec f := idtac; f in f.", timeout_s=2.0)
        assert looping.reason == "timeout: no verdict after 2 s (session restarted)", looping.reason
    finally:
        pool.close()


@needs_coq
def test_warm_start_up_is_bounded_apart(tasks: dict[str, TheoremTask], slow_context: None) -> None:
    """Start-up and loading have a bound of their own (``setup_seconds``): a context that does not load
    within it is a timeout that says so, however long the proof's budget."""
    pool = WarmCoqPool(setup_seconds=1.0)
    try:
        verdict = pool.check(tasks["double_two"], "reflexivity.", timeout_s=60.0)
        assert verdict.reason == "timeout: the context did not load within 1 s (session restarted)", verdict
        assert verdict.seconds < 30
    finally:
        pool.close()


@needs_coq
def test_warm_session_passes_lines_longer_than_a_pty_allows(warm: WarmCoqPool) -> None:
    """A pty cuts input lines at 4,096 bytes (why the session uses plain pipes): a 5,000-character
    name goes in on one line (the context, the statement) and comes back whole in the goal."""
    name = "long_" + "x" * 5000
    task = TheoremTask(name="long_t", statement=f"Theorem long_t : {name}.",
                       context=f"Definition {name} := True.\n", original_proof="exact I.", prover="coq")
    assert warm.check(task, "exact I.", timeout_s=60).accepted
    verdict = warm.check(task, "idtac.", timeout_s=60)
    assert verdict.reason == "incomplete proof: 1 goal(s) remain"
    assert verdict.goals == [f"|- {name}"]


@needs_coq
def test_warm_session_reports_a_killed_coqtop(tmp_path: Path) -> None:
    """coqtop killed in the middle of a sentence: the reply ends at once with CoqSessionError (not
    at the deadline), and the pool replaces a session that died while idle."""
    session = coq_module.CoqSession("coqtop", cwd=tmp_path, sandbox=coq_module.CoqSandbox())
    session.send("Goal True.", time.monotonic() + 30)
    threading.Timer(1.0, lambda: os.killpg(session.proc.pid, signal.SIGKILL)).start()
    started = time.monotonic()
    with pytest.raises(coq_module.CoqSessionError, match="coqtop exited"):
        session.send("let rec f := idtac; f in f.", time.monotonic() + 30)
    assert time.monotonic() - started < 10 and not session.alive
    pool = WarmCoqPool()
    try:
        task = TheoremTask(name="t", statement="Theorem t : True.", context="", original_proof="exact I.",
                           prover="coq")
        assert pool.check(task, "exact I.").accepted
        idle = pool._idle.get()
        assert idle is not None
        os.killpg(idle.proc.pid, signal.SIGKILL)
        idle.proc.wait(timeout=10)
        pool._idle.put(idle)
        assert pool.check(task, "exact I.").accepted and pool.restarts == 2
    finally:
        pool.close()


@needs_coq
def test_warm_deadline_holds_while_coqtop_reads_no_input(tmp_path: Path) -> None:
    """coqtop busy in an endless tactic reads no more input: a chunk larger than the pipe (200 KiB)
    must not hold the caller past its deadline (the write runs beside the wait, not before it)."""
    session = coq_module.CoqSession("coqtop", cwd=tmp_path, sandbox=coq_module.CoqSandbox())
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            session.send("Goal True.\nlet rec f := idtac; f in f.\n" + "idtac.\n" * 30000, started + 2)
        assert time.monotonic() - started < 6
    finally:
        session.kill()


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


def test_missing_coq_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CoqNotFound, match="apt-get install coq"):
        find_coq_binary("coqc")
    with pytest.raises(CoqNotFound, match="apt-get install coq"):
        CoqChecker()


@pytest.mark.parametrize(
    ("output", "closed", "axioms"),
    [
        ("Closed under the global context\n", True, []),
        # section variables are hypotheses of the statement, not axioms
        ("Section Variables:\nA\n: Type\n", True, []),
        ("Axioms:\nmagic : forall P : Prop, P\n", False, ["magic"]),
        ("Axioms:\nClassical_Prop.classic\n  : forall P : Prop, P \\/ ~ P\nfoo : False\n", False,
         ["Classical_Prop.classic", "foo"]),
    ],
)
def test_parse_assumptions(output: str, closed: bool, axioms: list[str]) -> None:
    got_closed, got_axioms, _ = parse_assumptions(output)
    assert (got_closed, got_axioms) == (closed, axioms)


def test_parse_goals_from_coq_display() -> None:
    text = ("2 goals (ID 8)\n  \n  n : nat\n  H : n > 0\n  ============================\n  n + 0 = n\n\n"
            "goal 2 (ID 9) is:\n S n = S n\n")
    assert parse_goals(text) == ["n : nat; H : n > 0 |- n + 0 = n", "|- S n = S n"]
    assert parse_goals("No more goals.\n") == []


@needs_coq
def test_oracle_evaluate(tmp_path: Path) -> None:
    source = tmp_path / "ws" / "t.v"
    source.parent.mkdir()
    source.write_text(SOURCE)
    oracle = CoqOracle({"source": "t.v"})
    info = oracle.prepare(tmp_path, source.parent)
    assert info["theorems"] == 4 and info["coq"].startswith("8.")
    try:
        def evaluate(theorem: str | None, proof: str | None) -> Outcome:
            ctx = EvalContext(trial_id="t1", trial_dir=tmp_path, budget=Budget(seconds=60),
                              proposal=Proposal(theorem=theorem, proof=proof))
            return oracle.evaluate(ctx)

        good = evaluate("add_zero", "induction n; simpl; auto.")
        assert good.status == Status.ok and good.score == 1.0 and good.metrics["accepted"]
        cheat = evaluate("add_zero", "admit.")
        assert cheat.status == Status.rejected and cheat.metrics["cheat"] and "uses admit" in cheat.feedback
        assert evaluate("nope", "auto.").status == Status.invalid
        assert evaluate("add_zero", None).status == Status.invalid
    finally:
        oracle.close()


@needs_coq
def test_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "t.v"
    source.write_text(SOURCE)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Proof.\n  induction n; simpl; auto.\nQed.\n")
    bad.write_text("Axiom x : False. destruct x.\n")
    assert run_check("coq", source, "add_zero", good) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accepted"] is True and out["reason"] == "accepted" and out["messages"] == []
    assert run_check("coq", source, "add_zero", bad) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["accepted"] is False and "declares an axiom" in out["reason"]
    assert run_check("coq", source, "missing", good) == 2
    assert "'missing' names no theorem" in capsys.readouterr().err
    assert run_check("coq", tmp_path / "nope.v", "add_zero", good) == 2
    assert run_check("coq", source, "add_zero", tmp_path / "nope.txt") == 2
    broken = tmp_path / "broken.v"
    broken.write_text("Lemma l : True. (* unterminated\n")
    assert run_check("coq", broken, "l", good) == 2
    assert "unterminated comment" in capsys.readouterr().err


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
    monkeypatch.setattr(coq_module, "screen_proof", _unscreened)
    checker = request.getfixturevalue(mode)
    verdict = checker.check(tasks["double_two"], proof, timeout_s=60)
    assert not verdict.accepted
    assert verdict.cheat, verdict.reason


# ----------------------------------------------------------------------------- holes found by red-teaming
# Each test below is one hole of issue 13, run against the real coqc/coqtop.

HOLES_SOURCE = """Require Import Classical.
(* a false statement: only a cheat can close it *)
Theorem t_bad : forall a b : nat, a + b = a * b.
Proof. Admitted.
Theorem em_t : forall P : Prop, P \\/ ~ P.
Proof. exact classic. Qed.
Theorem two : True /\\ True.
Proof. split; [exact I .. ]. Qed.
"""


@pytest.fixture(scope="module")
def holes() -> dict[str, TheoremTask]:
    return {t.name: t for t in strip_coq_text(HOLES_SOURCE, source_file="holes.v")}


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
    monkeypatch.setattr(coq_module, "screen_proof", _one_unit)
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
    monkeypatch.setattr(coq_module, "screen_proof", _unscreened)
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
    restate = coq_module.reference_declaration
    monkeypatch.setattr(coq_module, "reference_declaration", lambda task, name: restate(original, name))
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
    script = coq_module.guard_command("two", "rrma_ref_x")
    assert "constr_eq" in script and "@two" in script and "@rrma_ref_x" in script
    assert restate(original, "rrma_ref_x").startswith("Lemma rrma_ref_x : True /\\ True.")


@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        ("Proof with admit. auto.", "uses admit"),
        ("Proof with give_up. split...", "uses give_up"),
        ("Proof with native_compute. auto.", "uses native_compute"),
        ("Proof using with (try admit). auto.", "uses admit"),
        ("Proof with Abort. auto.", "aborts the proof"),
    ],
)
def test_hole6_proof_with_tactic_is_screened(proof: str, reason: str) -> None:
    with pytest.raises(ProofRejected) as info:
        screen_proof(proof)
    assert reason in info.value.reason and info.value.cheat


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


def test_hole7_prompt_line_is_not_an_axiom() -> None:
    reply = ("Axioms:\nClassical_Prop.classic : forall P : Prop, P \\/ ~ P\n\n"
             "<prompt>Coq < 31 || 0 < </prompt>")
    assert parse_assumptions(reply) == (False, ["Classical_Prop.classic"], "")
    assert parse_assumptions("Closed under the global context\n<prompt>Coq < 9 || 0 < </prompt>")[0]


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("split; [exact I .. ]. auto.", ["split; [exact I .. ].", "auto."]),  # `..` is a token, not an end
        ("split... auto.", ["split...", "auto."]),  # the ellipsis of `Proof with` ends a sentence
        ("t.. u.", ["t.. u."]),
    ],
)
def test_hole8_dots_split_as_coq_does(text: str, codes: list[str]) -> None:
    assert [s.code for s in split_sentences(text)] == codes


def test_hole8_four_dots_are_refused() -> None:
    with pytest.raises(ProofRejected, match="4 dots"):
        screen_proof("split.... auto.")


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


# ----------------------------------------------------------------------------- the checker's sandbox
# The context of a theorem is the harness's text, so here it stands in for whatever could make Coq
# open a file (Load, Redirect): what the checking process can read and write is what is tested.

SANDBOX_OFF = coq_module.sandbox.unavailable_reason()
needs_sandbox = pytest.mark.skipif(SANDBOX_OFF is not None, reason=f"bubblewrap cannot run here: {SANDBOX_OFF}")


def _library(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """A user library folder given to Coq with -Q (so the checker's sandbox shows it) holding a
    stripped file whose definition is the 'answer'."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "Stripped.v").write_text("Definition leaked := 42.\n")
    return lib, ("-Q", str(lib), "Lib")


def _checker(mode: str, box: coq_module.CoqSandbox) -> CoqChecker | WarmCoqPool:
    return CoqChecker(coq_args=box.coq_args, sandbox=box) if mode == "cold" else WarmCoqPool(
        coq_args=box.coq_args, sandbox=box)


@needs_coq
@needs_sandbox
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_coq_cannot_read_the_stripped_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    lib, args = _library(tmp_path)
    source = lib / "Stripped.v"
    task = TheoremTask(name="t", statement="Theorem t : leaked = 42.", context=f'Load "{source}".\n',
                       original_proof="reflexivity.", prover="coq")

    def check(hidden: tuple[Path, ...]) -> str:
        checker = _checker(mode, coq_module.CoqSandbox(hidden=hidden, coq_args=args))
        try:
            return checker.check(task, "reflexivity.", timeout_s=60).reason
        finally:
            checker.close()

    assert check(()) == "accepted"  # control: the library folder is shown, the file readable
    assert coq_module.checker_hidden([source], args) == (source.resolve(),)
    hidden = check(coq_module.checker_hidden([source], args))
    assert hidden.startswith(("the context does not compile", "the statement does not check")), hidden
    monkeypatch.setenv("RRMA_FS_GUARD", "off")  # control: no sandbox, nothing hidden
    assert check(coq_module.checker_hidden([source], args)) == "accepted"


@needs_coq
@needs_sandbox
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_coq_writes_only_its_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    lib, args = _library(tmp_path)
    target = lib / "planted"
    task = TheoremTask(name="t", statement="Theorem t : True.", context=f'Redirect "{target}" Check 0.\n',
                       original_proof="exact I.", prover="coq")

    def check() -> str:
        checker = _checker(mode, coq_module.CoqSandbox(coq_args=args))
        try:
            return checker.check(task, "exact I.", timeout_s=60).reason
        finally:
            checker.close()

    refused = check()
    assert refused.startswith("the context does not compile") and not target.with_suffix(".out").exists(), refused
    monkeypatch.setenv("RRMA_FS_GUARD", "off")  # control: without the sandbox the same context writes there
    assert check() == "accepted" and target.with_suffix(".out").exists()


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").iterdir():
            children = [int(c) for c in (task / "children").read_text().split()]
            found += children
            todo += children
    return found


@needs_coq
@needs_sandbox
def test_warm_coqtop_runs_in_the_sandbox_without_network(holes: dict[str, TheoremTask],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The long-lived coqtop gets spawn's containment: its own network namespace, the seccomp filter
    (where it can be built), no credential in its environment, the pool's scratch as its folder."""
    monkeypatch.setenv("RRMA_TEST_API_KEY", "sk-not-for-coqtop")
    pool = WarmCoqPool()
    try:
        assert pool.check(holes["two"], "split; exact I.", timeout_s=60).accepted
        session = pool._idle.get_nowait()
        assert session is not None
        pool._idle.put(session)
        coqtops = [p for p in _descendants(session.proc.pid)
                   if Path(f"/proc/{p}/exe").resolve().name.startswith("coqtop")]
        assert coqtops, "no coqtop under the session's process"
        own = os.readlink("/proc/self/ns/net")
        assert all(os.readlink(f"/proc/{p}/ns/net") != own for p in coqtops)  # a network namespace of its own
        assert Path(f"/proc/{coqtops[0]}/cwd").resolve() == pool.scratch.resolve()
        environ = Path(f"/proc/{coqtops[0]}/environ").read_bytes()
        assert b"PATH=" in environ and b"sk-not-for-coqtop" not in environ
        if seccomp.unavailable_reason() is None:
            assert "Seccomp:\t2" in Path(f"/proc/{coqtops[0]}/status").read_text()
        policy = pool.sandbox.policy(pool.scratch)
        assert policy is not None and policy.network is False and policy.writable == (pool.scratch,)
    finally:
        pool.close()
    assert not pool.scratch.exists()


@needs_coq
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_required_sandbox_that_cannot_run_refuses_to_check(monkeypatch: pytest.MonkeyPatch, mode: str,
                                                            holes: dict[str, TheoremTask]) -> None:
    """RRMA_FS_GUARD=require where bubblewrap cannot run: Coq never runs bare, the check is refused."""
    monkeypatch.setenv("RRMA_FS_GUARD", "require")
    monkeypatch.setattr(coq_module.sandbox, "unavailable_reason", lambda: "bubblewrap is not installed (test)")
    checker = _checker(mode, coq_module.CoqSandbox(required=True))
    try:
        verdict = checker.check(holes["two"], "split; exact I.", timeout_s=60)
    finally:
        checker.close()
    assert not verdict.accepted and "bubblewrap is not installed (test)" in verdict.reason, verdict.reason
    assert verdict.reason.startswith("coqc did not run" if mode == "cold" else "session error")
