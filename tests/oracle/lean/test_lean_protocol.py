"""Reading Lean's answers (oracle/lean/protocol.py): the real REPL transcripts in ``../shared``, the
hand-written ones in ``tests/fixtures/lean``, ``lean --json`` lines and ``#print axioms`` per supported
toolchain; the verdict logic fed real answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from lean_fixtures import FIXTURES, REPO, TRANSCRIPTS, needs_lean, needs_transcripts

from oracle.lean.protocol import (
    goals_from_messages,
    is_sorry_warning,
    parse_axioms,
    parse_cli_output,
    parse_repl_response,
    read_transcript,
    split_repl_requests,
    split_repl_responses,
)
from oracle.lean.transport import RecordedTransport, TranscriptMismatch
from oracle.lean.verdict import ALLOWED_AXIOMS, audit_from, verdict_from_messages

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


def test_cli_output_parser_normalizes_severity() -> None:
    out = (FIXTURES / "cli_error.jsonl").read_text(encoding="utf-8") + "lake: some build chatter\n"
    messages, other = parse_cli_output(out)
    assert [m.severity for m in messages] == ["warning", "error", "info", "info"]
    assert other == ["lake: some build chatter"]


# ----------------------------------------------------------------------------- holes of issue 13


@pytest.mark.parametrize("version", ["v4.30.0", "v4.33.0-rc2"])
def test_hole3_print_axioms_shape_per_supported_version(version: str) -> None:
    """One recorded shape per supported toolchain (lean_project pins v4.30.0, the shared transcripts
    are v4.33.0-rc2): the audit's `#check` and `#print axioms` answers parse as the oracle expects."""
    pairs = read_transcript(FIXTURES / f"print_axioms_{version}.in", FIXTURES / f"print_axioms_{version}.expected.out")
    audits = [audit_from(parse_repl_response(answer).messages, 1, 2) for _, answer in pairs]
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
