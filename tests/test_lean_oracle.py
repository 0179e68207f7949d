"""The Lean 4 oracle: text rules, REPL/CLI answer parsing, verdicts, transports and the pool.

Three layers, so the oracle is tested where Lean cannot be installed:
* rules that need no Lean (the proof-body text rules) are tested directly;
* the verdict logic runs on Lean's answers: the real REPL transcripts in ``../shared`` (parser)
  and hand-written transcripts in ``tests/fixtures/lean`` (the full oracle code path through
  :class:`RecordedTransport`, a fake REPL process speaking the wire protocol, a fake ``lake``);
* real-Lean tests run when ``lake`` is on PATH and are skipped otherwise, with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oracle.lean import (
    ALLOWED_AXIOMS,
    LeanChecker,
    LeanNotInstalled,
    LeanOracle,
    PipeReplTransport,
    RecordedTransport,
    ReplError,
    ReplPool,
    ReplSession,
    TranscriptMismatch,
    feedback_text,
    goals_from_messages,
    is_sorry_warning,
    parse_axioms,
    parse_cli_output,
    parse_repl_response,
    proof_violation,
    read_transcript,
    split_repl_requests,
    split_repl_responses,
    verdict_from_messages,
)
from oracle.strip_lean import strip_lean_file, strip_project
from rrma.contracts import EvalContext, OracleError
from rrma.trial import Budget, Proposal, Status

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "lean"
SHARED = Path(os.environ["RRMA_SHARED"]) if os.environ.get("RRMA_SHARED") else REPO / ".." / "shared"
TRANSCRIPTS = SHARED.resolve() / "lean-repl-transcripts"
needs_transcripts = pytest.mark.skipif(
    not TRANSCRIPTS.is_dir(),
    reason=f"shared Lean REPL transcripts not found at {TRANSCRIPTS} (set RRMA_SHARED to the shared folder)",
)
HAVE_LEAN = shutil.which("lake") is not None and shutil.which("lean") is not None
needs_lean = pytest.mark.skipif(
    not HAVE_LEAN,
    reason="Lean 4 is not installed (no `lake`/`lean` on PATH): install elan and run `lake build` in lean_project",
)


@pytest.fixture(scope="module")
def tiny():
    return {t.name: t for t in strip_lean_file(FIXTURES / "Tiny.lean")}


def recorded_checker(*stems: str, **kwargs) -> LeanChecker:
    """A checker whose every REPL session replays the given hand-written transcripts."""
    return LeanChecker(mode="repl", transport_factory=lambda: RecordedTransport.from_files(
        *(FIXTURES / s for s in stems)), **kwargs)


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


# ----------------------------------------------------------------------------- real REPL transcripts


def _shared_pairs(name: str):
    return read_transcript(TRANSCRIPTS / f"{name}.in", TRANSCRIPTS / f"{name}.expected.out")


@needs_transcripts
def test_every_shared_transcript_parses() -> None:
    stems = sorted(p.name[: -len(".expected.out")] for p in TRANSCRIPTS.glob("*.expected.out"))
    assert len(stems) >= 40
    answers = 0
    for stem in stems:
        responses = split_repl_responses((TRANSCRIPTS / f"{stem}.expected.out").read_text(encoding="utf-8"))
        requests = split_repl_requests((TRANSCRIPTS / f"{stem}.in").read_text(encoding="utf-8"))
        assert len(requests) == len(responses), stem
        for obj in responses:
            resp = parse_repl_response(obj)
            answers += 1
            # every answer is one of: an env, a proof state, or the REPL's own error
            assert resp.env is not None or resp.proof_state is not None or resp.error is not None, (stem, obj)
    assert answers >= 100


@needs_transcripts
def test_requests_are_joined_like_the_repl_reads_them() -> None:
    # a raw line break inside a JSON string is dropped: Lean saw `bysorry`
    (request, response), _ = _shared_pairs("invalid_line_break")
    assert request == {"cmd": "theorem foo : 1 = 1 := bysorry"}
    assert parse_repl_response(response).errors[0].text == "Unknown identifier `bysorry`"


@needs_transcripts
def test_messages_severities_positions_and_sorries() -> None:
    pairs = _shared_pairs("app_type_mismatch")
    first = parse_repl_response(pairs[0][1])
    assert first.env == 0 and first.errors[0].text == "(kernel) declaration has metavariables '_example'"
    assert (first.errors[0].line, first.errors[0].column, first.errors[0].end_column) == (1, 0, 7)
    second = parse_repl_response(pairs[1][1])
    assert second.sorries[0].goal == "⊢ 1 = 0" and second.sorries[0].proof_state == 0
    assert (second.sorries[0].line, second.sorries[0].column) == (1, 19)
    assert is_sorry_warning(second.messages[0])  # "declaration uses `sorry`" (backticks)
    tactic = parse_repl_response(pairs[2][1])
    assert tactic.proof_status == "Incomplete: open goals remain" and tactic.proof_state == 1
    assert tactic.goals == ["case zero\n⊢ 0 = 0", "case succ\nn✝ : Nat\n⊢ n✝ + 1 = 0"]
    info = parse_repl_response(_shared_pairs("def_eval")[1][1])
    assert info.messages[0].severity == "info" and info.messages[0].text == "rfl : f = f"


@needs_transcripts
def test_repl_errors_traces_and_tactic_positions() -> None:
    assert parse_repl_response(_shared_pairs("unknown_environment")[0][1]).error == "Unknown environment."
    assert parse_repl_response(_shared_pairs("unknown_proof_state")[1][1]).error == "Unknown proof state."
    traces = parse_repl_response(_shared_pairs("trace_simp")[6][1])
    assert traces.proof_status == "Completed" and len(traces.traces) == 2
    tactic_err = parse_repl_response(_shared_pairs("invalid_tactic")[1][1])
    assert tactic_err.errors[0].line == 0  # tactic-mode messages carry no real position
    tactics = parse_repl_response(_shared_pairs("all_tactics")[0][1]).tactics
    assert [t["tactic"] for t in tactics] == ["have t := 37", "exact t"]


@needs_transcripts
def test_unsolved_goals_are_extracted_from_real_errors() -> None:
    incomplete = parse_repl_response(_shared_pairs("incomplete")[1][1])
    assert goals_from_messages(incomplete.messages) == [
        "case pos\nx : Bool\nh✝ : x = true\n⊢ Nat", "case neg\nx : Bool\nh✝ : ¬x = true\n⊢ Nat"]
    have = parse_repl_response(_shared_pairs("have_by_sorry")[0][1])
    assert goals_from_messages(have.messages) == ["x : Int\nh : x = 1\n⊢ x = x"]


@needs_transcripts
@pytest.mark.parametrize(("stem", "index", "reason"), [
    # real answers fed to the verdict logic as the answer to an agent's declaration
    ("term_sorry", 0, "uses sorry"),  # sorries + "declaration uses `sorry`"
    ("tactic_sorry", 0, "uses sorry"),
    ("have_by_sorry", 0, "does not check: unsolved goals"),  # error wins over the sorry
    ("no_goal_sorry_2", 0, "does not check: No goals to be solved"),
    ("app_type_mismatch", 0, "does not check: (kernel) declaration has metavariables '_example'"),
    ("invalid_line_break", 1, "does not check: Unknown identifier `byrfl`"),
    ("line_breaks", 2, "not audited"),  # a clean answer still needs the audit
])
def test_verdicts_from_real_answers(tiny, stem: str, index: int, reason: str) -> None:
    resp = parse_repl_response(_shared_pairs(stem)[index][1])
    verdict = verdict_from_messages(tiny["Tiny.double_two"], messages=resp.messages, sorries=resp.sorries, audit=None,
                    expected_signature="x", origin=(1, 37))
    assert not verdict.accepted and verdict.reason.startswith(reason)


@needs_transcripts
def test_recorded_transport_replays_real_transcripts() -> None:
    pairs = _shared_pairs("proof_step")
    transport = RecordedTransport(pairs)
    for request, response in pairs:
        assert transport.send(request, 1.0) == response
    with pytest.raises(TranscriptMismatch):
        transport.send({"cmd": "def g := 1"}, 1.0)


# ----------------------------------------------------------------------------- hand-written answers


def test_axiom_lists_and_wordings() -> None:
    assert parse_axioms("'foo' does not depend on any axioms") == []
    assert parse_axioms("'foo' depends on axioms: [propext, Classical.choice, Quot.sound]") == [
        "propext", "Classical.choice", "Quot.sound"]
    assert parse_axioms("'foo'' depends on axioms: [sorryAx]") == ["sorryAx"]  # a primed name
    assert parse_axioms("foo : Nat") is None
    responses = split_repl_responses((FIXTURES / "old_wording.expected.out").read_text(encoding="utf-8"))
    old = [parse_repl_response(r) for r in responses]
    assert is_sorry_warning(old[0].messages[0]) and is_sorry_warning(old[1].messages[0])
    assert parse_axioms(old[2].messages[0].text) == ["propext", "Classical.choice", "Quot.sound", "Lean.trustCompiler"]
    assert ALLOWED_AXIOMS == {"propext", "Classical.choice", "Quot.sound"}


def test_old_sorry_wording_without_sorries_field_is_rejected(tiny) -> None:
    responses = split_repl_responses((FIXTURES / "old_wording.expected.out").read_text(encoding="utf-8"))
    resp = parse_repl_response(responses[1])  # only the warning, no `sorries` field
    verdict = verdict_from_messages(tiny["Tiny.double_two"], messages=resp.messages, audit=None, expected_signature="x",
                    origin=(1, 37))
    assert (verdict.accepted, verdict.reason, verdict.cheat) == (False, "uses sorry", True)


TINY_CASES = [
    # (proof body, accepted, reason prefix, cheat) - answers in tiny_session.expected.out
    ("by\n  decide", True, "accepted", False),
    ("by\n  simp [double]", True, "accepted", False),  # propext is allowed
    ("Tiny.cheat.elim", False, "axiom not allowed: Tiny.cheat", True),  # an axiom of the context
    ("by\n  have _h := helper_sorry\n  decide", False, "uses sorry (sorryAx", True),  # sorry via a helper
    ("by\n  have _h := native_fact\n  decide", False, "native evaluation not allowed: Lean.ofReduceBool", True),
    ("by\n  have _h2 := native_fact\n  decide", False,
     "native evaluation not allowed: Tiny.native_fact._native.native_decide.ax_1_1", True),
    ("by\n  skip", False, "does not check: unsolved goals", False),
    ("by\n  decide -- the audit below reports another type (hand-written case)", False, "statement changed", True),
    ("by\n  rfl", False, "not audited: no #print axioms answer", False),  # fails closed
]


@pytest.mark.parametrize(("proof", "accepted", "reason", "cheat"), TINY_CASES)
def test_full_oracle_path_on_recorded_repl(tiny, proof: str, accepted: bool, reason: str, cheat: bool) -> None:
    transports: list[RecordedTransport] = []

    def factory() -> RecordedTransport:
        transports.append(RecordedTransport.from_files(FIXTURES / "tiny_session"))
        return transports[-1]

    checker = LeanChecker(mode="repl", transport_factory=factory)
    verdict = checker.check(tiny["Tiny.double_two"], proof)
    assert (verdict.accepted, verdict.cheat) == (accepted, cheat), verdict.reason
    assert verdict.reason.startswith(reason)
    sent = transports[0].sent
    # context once (no env), the reference on env 0, the declaration on env 0, the audit on its env
    assert sent[0] == {"cmd": tiny["Tiny.double_two"].context}
    assert sent[1] == {"cmd": "theorem double_two : double 2 = 4 := sorry\n\n#check @Tiny.double_two", "env": 0}
    assert sent[2] == {"cmd": f"theorem double_two : double 2 = 4 := {proof}", "env": 0}
    if len(sent) > 3:
        assert sent[3]["cmd"] == "#check @Tiny.double_two\n#print axioms Tiny.double_two"
    checker.close()


def test_session_reuses_header_and_reference(tiny) -> None:
    transport = RecordedTransport.from_files(FIXTURES / "tiny_session")
    checker = LeanChecker(mode="repl", transport_factory=lambda: transport)
    task = tiny["Tiny.double_two"]
    results = [checker.check(task, p) for p, *_ in TINY_CASES]
    assert [v.accepted for v in results] == [c[1] for c in TINY_CASES]
    cmds = [r["cmd"] for r in transport.sent]
    assert cmds.count(task.context) == 1  # the header is elaborated once and reused
    assert sum(c.endswith(":= sorry\n\n#check @Tiny.double_two") for c in cmds) == 1
    assert checker.pool.started == 1 and checker.pool.discarded == 0
    wrong = results[6]
    assert wrong.goals == ["⊢ double 2 = 4"]
    assert wrong.messages[0]["proof_line"] == 1 and wrong.messages[0]["proof_column"] == 0
    text = feedback_text(wrong)
    assert text.startswith("proof rejected: does not check: unsolved goals")
    assert "error at proof line 1, column 0" in text and "remaining goals:\n⊢ double 2 = 4" in text
    checker.close()


def test_header_prefix_reuse_for_later_theorems() -> None:
    """A longer context from the same file is elaborated on top of the cached shorter one."""
    session = ReplSession(RecordedTransport([
        ({"cmd": "def a := 1\n"}, {"env": 0}),
        ({"cmd": "def b := 2\n", "env": 0}, {"env": 1}),
        ({"cmd": "def a := 1\ndef b := 2\n"}, {"env": 2}),
    ]))
    assert session.header_env("def a := 1\n", "F.lean", 1.0) == 0
    assert session.header_env("def a := 1\ndef b := 2\n", "F.lean", 1.0) == 1
    assert session.header_env("def a := 1\ndef b := 2\n", "G.lean", 1.0) == 1  # exact text: cached
    assert session.commands == 2


def test_context_errors_are_reported_not_blamed_on_the_proof(tiny) -> None:
    task = tiny["Tiny.double_two"]
    transport = RecordedTransport([({"cmd": task.context}, {"messages": [
        {"severity": "error", "pos": {"line": 5, "column": 30}, "endPos": {"line": 5, "column": 31},
         "data": "unknown identifier 'n'"}], "env": 0})])
    verdict = LeanChecker(mode="repl", transport_factory=lambda: transport).check(task, "by decide")
    assert not verdict.accepted and not verdict.cheat
    assert verdict.reason == "context error: the context does not elaborate (context line 5): unknown identifier 'n'"


def test_lean_oracle_evaluate_maps_verdicts_to_outcomes(tiny, tmp_path: Path) -> None:
    oracle = LeanOracle({"source": str(FIXTURES / "Tiny.lean")})
    oracle.checker = recorded_checker("tiny_session")

    def run(theorem: str | None, proof: str | None):
        ctx = EvalContext(trial_id="t1", trial_dir=tmp_path, budget=Budget(seconds=5),
                          proposal=Proposal(theorem=theorem, proof=proof))
        return oracle.evaluate(ctx)

    ok = run("Tiny.double_two", "by\n  decide")
    assert ok.status == Status.ok and ok.score == 1.0 and ok.metrics["difficulty"] == "easy"
    assert json.loads(ok.log)["accepted"] is True
    cheat = run("Tiny.double_two", "Tiny.cheat.elim")
    assert cheat.status == Status.rejected and cheat.score is None and cheat.metrics["cheat"] is True
    assert "axiom not allowed: Tiny.cheat" in cheat.feedback
    assert run("Tiny.nope", "by decide").status == Status.invalid
    assert run("Tiny.double_two", None).status == Status.invalid
    assert oracle.kind == "lean" and set(oracle.tasks) == {"Tiny.helper_sorry", "Tiny.native_fact", "Tiny.double_two"}
    oracle.close()


# ----------------------------------------------------------------------------- real processes


def fake_repl_checker(**kwargs) -> LeanChecker:
    argv = [sys.executable, str(FIXTURES / "fake_repl.py"), str(FIXTURES / "tiny_session")]
    memory_mb = kwargs.pop("memory_mb", 4096)
    return LeanChecker(mode="repl", memory_mb=memory_mb,
                       transport_factory=lambda: PipeReplTransport(argv, cwd=REPO, memory_mb=memory_mb), **kwargs)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_pipe_transport_speaks_the_repl_protocol(tiny) -> None:
    checker = fake_repl_checker()
    task = tiny["Tiny.double_two"]
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    rejected = checker.check(task, "Tiny.cheat.elim", timeout_s=20)
    assert rejected.reason == "axiom not allowed: Tiny.cheat"
    assert checker.pool.started == 1  # one warm process answered both checks
    session = checker.pool.acquire()
    assert isinstance(session.transport, PipeReplTransport)
    assert session.transport.noise == ["✔ [3/4] Built REPL.Main (fake build log)"]  # skipped, kept
    checker.pool.release(session)
    checker.close()


def test_timeout_kills_the_process_group_and_the_pool_restarts(tiny) -> None:
    task = tiny["Tiny.double_two"]
    checker = fake_repl_checker()
    session = checker.pool.acquire()
    transport = session.transport
    assert isinstance(transport, PipeReplTransport)
    checker.pool.release(session)
    started = time.monotonic()
    verdict = checker.check(task, "by\n  decide -- HANG_FOREVER", timeout_s=3)
    assert verdict.reason.startswith("timeout") and not verdict.accepted
    assert time.monotonic() - started < 15
    assert not _alive(transport.pid)
    assert checker.pool.discarded == 1
    deadline = time.monotonic() + 5  # the grandchild got SIGKILL; give the kernel a moment
    while time.monotonic() < deadline and _group_alive(transport.pgid):
        time.sleep(0.05)
    assert not _group_alive(transport.pgid)
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted  # a fresh REPL took over
    assert checker.pool.started == 2
    checker.close()


class _FailingClose:
    """A transport whose close raises ``error`` (what the pool does with a REPL that will not close)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        raise AssertionError("the pool tests send nothing")

    def close(self) -> None:
        raise self.error


@pytest.mark.parametrize("error", [
    ReplError("the REPL refused to close"),  # the transport's own failure
    BrokenPipeError(32, "Broken pipe"),  # a REPL already gone
])
def test_pool_drops_a_repl_that_fails_to_close(error: Exception) -> None:
    pool = ReplPool(lambda: _FailingClose(error), size=1)
    pool.release(pool.acquire(), broken=True)
    assert pool.discarded == 1
    pool.release(pool.acquire(timeout_s=1))  # the slot came back; the session goes idle
    pool.close()  # closing the idle one fails the same way, quietly


def test_pool_surfaces_a_transport_bug_and_still_frees_its_slot() -> None:
    pool = ReplPool(lambda: _FailingClose(TypeError("a bug in the transport")), size=1)
    with pytest.raises(TypeError, match="a bug in the transport"):
        pool.release(pool.acquire(), broken=True)
    assert pool.discarded == 1
    assert isinstance(pool.acquire(timeout_s=1), ReplSession)  # not stuck waiting for the lost slot


def _group_alive(pgid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _in_group(int(p), pgid) and _alive(int(p))]


def _in_group(pid: int, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[2]) == pgid
    except (OSError, ValueError, IndexError):
        return False


def test_memory_cap_kills_the_repl(tiny) -> None:
    checker = fake_repl_checker(memory_mb=150)
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide -- EAT_MEMORY", timeout_s=30)
    assert verdict.reason.startswith("memory limit exceeded") and not verdict.accepted
    assert checker.pool.discarded == 1
    checker.close()


def test_pool_restarts_after_max_commands(tiny) -> None:
    # one check is 4 commands on a fresh REPL (context, reference, declaration, audit)
    checker = fake_repl_checker(max_commands=4)
    task = tiny["Tiny.double_two"]
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    assert (checker.pool.started, checker.pool.discarded) == (2, 2)
    checker.close()


def test_pool_serves_concurrent_checks_from_separate_repls(tiny) -> None:
    """evaluate() may run on several threads: each thread gets its own warm REPL session."""
    from concurrent.futures import ThreadPoolExecutor

    task = tiny["Tiny.double_two"]
    with fake_repl_checker(pool_size=2) as checker:
        with ThreadPoolExecutor(max_workers=2) as ex:
            verdicts = list(ex.map(lambda p: checker.check(task, p, timeout_s=20),
                                   ["by\n  decide", "Tiny.cheat.elim", "by\n  simp [double]", "by\n  skip"]))
        assert [v.reason.split(":")[0] for v in verdicts] == [
            "accepted", "axiom not allowed", "accepted", "does not check"]
        assert checker.pool.started in (1, 2) and checker.pool.discarded == 0


def test_repl_that_dies_is_reported(tiny) -> None:
    checker = fake_repl_checker()
    task = tiny["Tiny.double_two"]
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    verdict = checker.check(task, "by\n  decide -- DIE_NOW", timeout_s=20)
    assert not verdict.accepted and verdict.reason.startswith("lean repl failed: REPL exited with code 3")
    assert checker.check(task, "by\n  decide", timeout_s=20).accepted
    checker.close()


def _install_fake_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_fixture: str) -> None:
    """`lake`/`lean` stand-ins first on PATH. The fake and its fixtures are copied next to them: the
    checker's sandbox shows the toolchain's folder, not the repository's tests."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copytree(FIXTURES, bindir / "fixtures")
    for exe, script in (("lake", bindir / "fixtures" / "fake_lake.py"), ("lean", None)):
        target = bindir / exe
        body = f'exec "{sys.executable}" "{script}" "$@"\n' if script else "exit 0\n"
        target.write_text("#!/bin/sh\n" + body, encoding="utf-8")
        target.chmod(target.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_LEAN_CHECK", check_fixture)


@pytest.mark.parametrize(("fixture", "proof", "accepted", "reason"), [
    ("cli_accept.jsonl", "by\n  decide", True, "accepted"),
    ("cli_sorry_old.jsonl", "by\n  have _h := helper_sorry\n  decide", False, "uses sorry (sorryAx"),
    ("cli_native.jsonl", "by\n  have _h := native_fact\n  decide", False,
     "native evaluation not allowed: Lean.ofReduceBool"),
    ("cli_error.jsonl", "by\n  skip", False, "does not check: unsolved goals"),
])
def test_cli_fallback_with_lean_json_output(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            fixture: str, proof: str, accepted: bool, reason: str) -> None:
    _install_fake_lake(tmp_path, monkeypatch, fixture)
    checker = LeanChecker(REPO / "lean_project", mode="cli")
    verdict = checker.check(tiny["Tiny.double_two"], proof, timeout_s=30)
    assert verdict.accepted == accepted and verdict.reason.startswith(reason), verdict.reason
    if fixture == "cli_error.jsonl":
        assert verdict.goals == ["⊢ double 2 = 4"]
        assert verdict.messages[0]["line"] == 1 and verdict.messages[0]["proof_line"] == 1  # context lines removed


def test_auto_mode_falls_back_to_the_cli(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lake exe repl` that exits at once (REPL missing) -> `lake env lean --json` from then on."""
    _install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
    checker = LeanChecker(REPO / "lean_project", mode="auto")
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
    assert verdict.accepted, verdict.reason
    assert checker._repl_broken is not None and "REPL exited" in checker._repl_broken
    checker.close()


def test_cli_output_parser_normalizes_severity() -> None:
    out = (FIXTURES / "cli_error.jsonl").read_text(encoding="utf-8") + "lake: some build chatter\n"
    messages, other = parse_cli_output(out)
    assert [m.severity for m in messages] == ["warning", "error", "info", "info"]
    assert other == ["lake: some build chatter"]


# ----------------------------------------------------------------------------- without Lean


def test_lean_modules_never_import_textual() -> None:
    code = ("import sys, oracle.lean, oracle.strip_lean, benches.lean.bench; "
            "assert 'textual' not in sys.modules, 'textual imported'")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_missing_lean_raises_with_elan_and_toolchain_hint(tiny, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    checker = LeanChecker(REPO / "lean_project")
    with pytest.raises(LeanNotInstalled) as info:
        checker.check(tiny["Tiny.double_two"], "by decide")
    toolchain = (REPO / "lean_project" / "lean-toolchain").read_text(encoding="utf-8").strip()
    assert "elan" in str(info.value) and toolchain in str(info.value) and "lean-toolchain" in str(info.value)
    # a cheat is still rejected by the text rules without Lean
    assert checker.check(tiny["Tiny.double_two"], "sorry").reason.startswith("forbidden in proof (sorry)")


def test_bench_lean_exits_2_with_the_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from benches.lean import bench

    monkeypatch.setenv("PATH", str(tmp_path))
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    assert bench.run(args) == 2
    err = capsys.readouterr().err
    assert "elan" in err and "lean-toolchain" in err
    args = parser.parse_args(["--source", str(tmp_path / "missing.lean")])
    assert bench.run(args) == 2
    assert "does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------------------- real Lean


@needs_lean
@pytest.mark.lean
@pytest.mark.slow
def test_real_lean_accepts_original_proofs_and_rejects_cheats() -> None:
    tasks = {t.name: t for t in strip_project(REPO / "lean_project")}
    checker = LeanChecker(REPO / "lean_project")
    checker.build()
    try:
        for name in ("RRMA.NatArith.two_mul_eq_add", "RRMA.Lists.rev_rev", "RRMA.Logic.and_or_distrib"):
            verdict = checker.check(tasks[name], tasks[name].original_proof, timeout_s=120)
            assert verdict.accepted, (name, verdict.reason, verdict.messages)
        task = tasks["RRMA.NatArith.two_mul_eq_add"]
        for proof, reason in [("by sorry", "forbidden"), ("by\n  skip", "does not check"),
                              ("by native_decide", "forbidden")]:
            verdict = checker.check(task, proof, timeout_s=120)
            assert not verdict.accepted and verdict.reason.startswith(reason), verdict.reason
    finally:
        checker.close()


@needs_lean
@pytest.mark.lean
@pytest.mark.slow
def test_real_lean_accepts_every_original_proof() -> None:
    checker = LeanChecker(REPO / "lean_project")
    checker.build()
    try:
        failed = [(t.name, v.reason) for t in strip_project(REPO / "lean_project")
                  if not (v := checker.check(t, t.original_proof, timeout_s=120)).accepted]
    finally:
        checker.close()
    assert failed == []


@needs_lean
@pytest.mark.lean
@pytest.mark.slow
def test_real_lean_audit_catches_a_context_axiom(tmp_path: Path) -> None:
    src = tmp_path / "Cheat.lean"
    src.write_text("axiom cheat : False\n\ntheorem t : 1 = 2 := by\n  exact absurd rfl (by decide)\n",
                   encoding="utf-8")
    task = strip_lean_file(src)[0]
    checker = LeanChecker(REPO / "lean_project")
    checker.build()
    try:
        verdict = checker.check(task, "cheat.elim", timeout_s=120)
        assert not verdict.accepted and verdict.reason == "axiom not allowed: cheat", verdict.reason
        assert checker.check(task, "by\n  have h := (propext (Iff.refl True))\n  exact cheat.elim",
                             timeout_s=120).reason.startswith("axiom not allowed")
    finally:
        checker.close()


# ----------------------------------------------------------------------------- the bench driver


def test_bench_driver_runs_a_stripped_file_through_the_recorded_repl(tiny, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """benches.proofs.run_proof_bench through the loop with the Lean checker (the recorded REPL, through
    benches.proofs.CheckerOracle): agents, red team, run dir, exit 0."""
    from benches.lean import bench
    from benches.proofs import run_proof_bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--only", "Tiny.double_two", "--attempts", "6", "--red-team"])
    args.runs, args.agents, args.backend, args.model, args.seed, args.quiet = tmp_path, 1, None, None, 0, True
    checker = recorded_checker("tiny_bench")
    tasks = strip_lean_file(FIXTURES / "Tiny.lean")
    assert run_proof_bench(args, tasks, "lean", oracle_kind="lean", oracle_params={}, checker=checker) == 0
    checker.close()
    (run_dir,) = tmp_path.iterdir()
    report = json.loads((run_dir / "bench_report.json").read_text(encoding="utf-8"))
    assert report["solved"] == 1 and report["cheats_accepted"] == 0 and report["cheats_rejected"] >= 1
    assert report["proofs"]["Tiny.double_two"] in ("by rfl", "by decide")
    assert "bench lean: 1/1 solved" in capsys.readouterr().out


def test_lean_oracle_names_its_theorems_and_keeps_a_selection(tmp_path: Path) -> None:
    """What the per-theorem policy reads (no Lean needed: the files are stripped, not checked)."""
    source = FIXTURES / "Tiny.lean"
    every = [t.name for t in strip_lean_file(source)]
    assert len(every) >= 2
    oracle = LeanOracle({"sources": [str(source)], "theorems": [every[1], every[0]]})
    views = oracle.theorems()
    assert [v["name"] for v in views] == [every[1], every[0]]
    assert all(v["file"] == "Tiny.lean" and "source_file" not in v and "original_proof" not in v for v in views)
    assert str(FIXTURES) not in json.dumps(views)
    with pytest.raises(OracleError, match=r"not in the files: Tiny\.nope"):
        LeanOracle({"sources": [str(source)], "theorems": ["Tiny.nope"]}).theorems()


# ----------------------------------------------------------------------------- holes of issue 13


@pytest.mark.parametrize("version", ["v4.30.0", "v4.33.0-rc2"])
def test_hole3_print_axioms_shape_per_supported_version(version: str) -> None:
    """One recorded shape per supported toolchain (lean_project pins v4.30.0, the shared transcripts
    are v4.33.0-rc2): the audit's `#check` and `#print axioms` answers parse as the oracle expects."""
    from oracle.lean import _audit_from

    pairs = read_transcript(FIXTURES / f"print_axioms_{version}.in", FIXTURES / f"print_axioms_{version}.expected.out")
    audits = [_audit_from(parse_repl_response(answer).messages, 1, 2) for _, answer in pairs]
    assert audits[0].signature == "Tiny.double_two : double 2 = 4"
    assert audits[0].axioms == []
    assert audits[1].axioms == ["propext", "Classical.choice", "Quot.sound"]  # a name ending in a prime
    assert audits[2].axioms == ["sorryAx"]
    native = audits[3].axioms
    assert native is not None and all(a not in ALLOWED_AXIOMS for a in native)
    for audit in audits:
        assert audit.errors == []
    toolchain = (REPO / "lean_project" / "lean-toolchain").read_text(encoding="utf-8").strip()
    assert (FIXTURES / f"print_axioms_{toolchain.split(':')[-1]}.in").is_file(), "no shape for the pinned toolchain"


@needs_lean
def test_hole3_print_axioms_shape_matches_the_installed_lean(tmp_path: Path) -> None:
    out = subprocess.run(["lean", "--version"], capture_output=True, text=True, timeout=60).stdout
    version = "v" + out.split("version ", 1)[1].split()[0].rstrip(",")
    fixture = FIXTURES / f"print_axioms_{version}.in"
    if not fixture.is_file():
        pytest.fail(f"no recorded #print axioms shape for the installed Lean {version}: add {fixture.name}")
    src = tmp_path / "A.lean"
    src.write_text("theorem t : 1 = 1 := rfl\n#print axioms t\n", encoding="utf-8")
    messages, _ = parse_cli_output(subprocess.run(["lean", "--json", str(src)], capture_output=True, text=True,
                                                  timeout=300).stdout)
    assert [parse_axioms(m.text) for m in messages if m.severity == "info"] == [[]]


def test_hole4_cli_audit_runs_in_its_own_file(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the checked file prints what looks like a clean audit at the lines the old one-file audit read;
    # the audit file (importing the compiled module) says the proof depends on Tiny.cheat
    _install_fake_lake(tmp_path, monkeypatch, "cli_forged.jsonl")
    checker = LeanChecker(REPO / "lean_project", mode="cli")
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
    assert not verdict.accepted and verdict.cheat
    assert verdict.reason == "axiom not allowed: Tiny.cheat"


def _replay_checker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: str, **kwargs) -> LeanChecker:
    tmp_path.mkdir(exist_ok=True)
    _install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
    monkeypatch.setenv("FAKE_REPLAY", report)
    built = tmp_path / "rrma_replay"
    built.write_text("stand-in: the replay tool is built\n", encoding="utf-8")
    return recorded_checker("tiny_session", replay="require", replay_exe=built, **kwargs)


@pytest.mark.parametrize(("report", "accepted", "reason", "cheat"), [
    ("replay_ok.json", True, "accepted", False),
    # a constant added with the kernel check off (debug.skipKernelTC from a smuggled metaprogram):
    # the REPL's #check and #print axioms looked clean, the kernel refuses it on replay
    ("replay_kernel.json", False, "kernel replay failed: (kernel) declaration type mismatch", True),
    ("replay_type.json", False, "kernel replay: Tiny.double_two does not have the original statement's type", True),
    ("replay_axiom.json", False, "kernel replay: axiom not allowed: Tiny.cheat", True),
])
def test_hole1_kernel_replay_has_the_last_word(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: str,
                                               accepted: bool, reason: str, cheat: bool) -> None:
    checker = _replay_checker(tmp_path, monkeypatch, report)
    try:
        verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
    finally:
        checker.close()
    assert (verdict.accepted, verdict.cheat) == (accepted, cheat), verdict.reason
    assert verdict.reason.startswith(reason), verdict.reason


def test_hole1_required_replay_fails_closed_without_the_tool(tiny, tmp_path: Path) -> None:
    checker = recorded_checker("tiny_session", replay="require", replay_exe=tmp_path / "not-built")
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
    assert not verdict.accepted and verdict.reason.startswith("not audited: the kernel replay tool is not built")
    auto = recorded_checker("tiny_session", replay="auto", replay_exe=tmp_path / "not-built")
    assert auto.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30).accepted  # auto: only when built


@pytest.mark.parametrize(("text", "problem"), [
    ("", "no replay report"),
    ('{"rrma_replay": 1, "theorem": "T"}', "missing a field"),
    ('{"rrma_replay": 1, "theorem": "T", "replayed": 1, "kind": "theorem", "type_matches": true, "axioms": "x"}',
     "not a list"),
    ('{"rrma_replay": 2, "theorem": "T"}', "no replay report"),  # another tool's JSON is not a report
])
def test_replay_output_parser_fails_closed(text: str, problem: str) -> None:
    from oracle.lean_audit import ReplayError, parse_replay_output

    with pytest.raises(ReplayError, match=problem):
        parse_replay_output(text)


def test_replay_judge_names_the_theorem() -> None:
    from oracle.lean_audit import ReplayReport, judge_replay

    good = ReplayReport("T", 3, "theorem", True, ["propext"])
    assert judge_replay(good, "T", ALLOWED_AXIOMS) == (True, "accepted", False)
    assert judge_replay(good, "U", ALLOWED_AXIOMS)[0] is False  # a report about another constant
    assert judge_replay(ReplayReport("T", 3, "def", True, []), "T", ALLOWED_AXIOMS)[1].endswith("not a theorem")
    assert not judge_replay(ReplayReport("T", 0, "theorem", True, []), "T", ALLOWED_AXIOMS)[0]


def test_hole2_sources_to_hide(tmp_path: Path) -> None:
    from oracle.lean_audit import hidden_source_paths

    project = tmp_path / "proj"
    (project / "Theorems").mkdir(parents=True)
    build = project / ".lake" / "build" / "lib" / "lean" / "Theorems"
    build.mkdir(parents=True)
    for stem in ("A", "B"):
        (project / "Theorems" / f"{stem}.lean").write_text("theorem t : True := trivial\n", encoding="utf-8")
        (build / f"{stem}.olean").write_bytes(b"olean")
    hidden = hidden_source_paths(project, [project / "Theorems" / "A.lean", project / "Theorems" / "B.lean"],
                                 contexts=["import Theorems.B\n"])
    assert project / "Theorems" / "A.lean" in hidden and build / "A.olean" in hidden
    assert project / "Theorems" / "B.lean" in hidden  # the source with its proofs: always
    assert build / "B.olean" not in hidden  # a context imports it: Lean needs the compiled module


def test_hole2_lean_cannot_read_the_stripped_source(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake `lean` (a real process) reads the stripped file, as `include_str` would: in the
    sandbox it sees an empty file; without it, the original proofs (the control)."""
    from rrma.contain import sandbox

    if sandbox.unavailable_reason() is not None:
        pytest.skip(f"the bubblewrap sandbox cannot run here: {sandbox.unavailable_reason()}")
    project = tmp_path / "proj"  # the checker's sandbox shows its project: the stripped file lives there
    shutil.copytree(REPO / "lean_project", project)
    source = project / "Theorems" / "Stripped.lean"
    source.write_text((FIXTURES / "Tiny.lean").read_text(encoding="utf-8"), encoding="utf-8")
    _install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
    monkeypatch.setenv("FAKE_LAKE_PROBE", str(source))
    original = "by native_decide"  # a proof only the stripped source holds

    def probe(hidden: list[Path]) -> str:
        checker = LeanChecker(project, mode="cli", hidden=hidden, replay="off")
        verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=60)
        assert verdict.accepted, verdict.reason
        return json.dumps(verdict.to_json())

    assert original in probe([])  # control: readable when nothing is hidden
    seen = probe([source])
    assert "probe: " in seen and original not in seen


# ----------------------------------------------------------------------------- where Lean writes
# fake_lake.py with $FAKE_LAKE_PLANT acts as a hostile checked file: while it compiles it plants a
# link where the harness writes next, and overwrites every cached reference module it can reach.


def test_a_link_planted_in_the_check_folder_is_replaced_not_followed(tiny, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI fallback: the harness writes the audit file into the folder where the checked file was
    just compiled; the link planted there (Audit_<stem>.lean -> victim) is replaced, never followed."""
    import oracle.lean as lean_module

    _install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
    victim = tmp_path / "victim.txt"
    monkeypatch.setenv("FAKE_LAKE_PLANT", str(victim))

    def check() -> tuple[str, str]:
        victim.write_text("untouched\n")
        verdict = LeanChecker(REPO / "lean_project", mode="cli", replay="off").check(
            tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
        return verdict.reason, victim.read_text()

    assert check() == ("accepted", "untouched\n")
    # control: a harness that writes with a plain open() follows the link into the victim
    monkeypatch.setattr(lean_module.files, "write_bytes", lambda root, rel, data: Path(root, rel).write_bytes(data))
    assert check()[1].startswith("import RrmaCheck_")


def test_the_checked_compilation_cannot_touch_the_cached_reference(tiny, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel replay: the reference module is compiled once and cached; the checked file's own
    compilation (a hostile one overwrites every RrmaRef_*.olean it reaches with `forged`, which makes
    the fake replay tool accept any statement) writes only its own folder, so the replay still
    finds the changed statement."""
    from rrma.contain import sandbox

    if sandbox.unavailable_reason() is not None:
        pytest.skip(f"the bubblewrap sandbox cannot run here: {sandbox.unavailable_reason()}")
    monkeypatch.setenv("FAKE_LAKE_PLANT", str(tmp_path / "victim.txt"))

    def check() -> str:
        checker = _replay_checker(tmp_path / sandbox.mode(), monkeypatch, "replay_type.json")
        try:
            return checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30).reason
        finally:
            checker.close()

    assert check() == "kernel replay: Tiny.double_two does not have the original statement's type"
    monkeypatch.setenv("RRMA_FS_GUARD", "off")  # control: unsandboxed, the checked compilation forges the reference
    assert check() == "accepted"


def test_lean_processes_are_always_sandboxed_and_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Lean process of a checker gets the guard (not only when something is hidden): no network,
    the project read-only; off only with RRMA_FS_GUARD=off; a long-lived REPL that cannot be sandboxed
    refuses to start under require instead of running bare."""
    from oracle.lean_audit import lean_guard
    from rrma.contain import sandbox

    project = REPO / "lean_project"
    monkeypatch.setenv("RRMA_FS_GUARD", "auto")
    guard = lean_guard(project, [])
    assert guard is not None and guard.network is False and project.resolve() in guard.read_only
    assert guard.writable == ((project / ".lake").resolve(),) or not (project / ".lake").is_dir()
    monkeypatch.setenv("RRMA_FS_GUARD", "off")
    assert lean_guard(project, []) is None
    monkeypatch.setenv("RRMA_FS_GUARD", "require")
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "bubblewrap is not installed (test)")
    required = lean_guard(project, [])
    assert required is not None and required.required
    with pytest.raises(ReplError, match="sandbox required"):
        PipeReplTransport([sys.executable, "-c", "pass"], cwd=project, guard=required)
