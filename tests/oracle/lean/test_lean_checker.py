"""The Lean checker (oracle/lean/checker.py) end to end without Lean: recorded REPL sessions, the CLI
fallback through a fake ``lake``, the kernel replay, the holes of issue 13, and where Lean may read and
write."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from lean_fixtures import FIXTURES, REPO, recorded_checker

import oracle.lean.checker as checker_module
from oracle.lean.checker import LeanChecker
from oracle.lean.oracle import feedback_text
from oracle.lean.protocol import parse_repl_response, split_repl_responses
from oracle.lean.session import ReplSession
from oracle.lean.transport import PipeReplTransport, RecordedTransport, ReplError
from oracle.lean.verdict import ALLOWED_AXIOMS, verdict_from_messages


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


def install_fake_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_fixture: str) -> None:
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
    install_fake_lake(tmp_path, monkeypatch, fixture)
    checker = LeanChecker(REPO / "lean_project", mode="cli")
    verdict = checker.check(tiny["Tiny.double_two"], proof, timeout_s=30)
    assert verdict.accepted == accepted and verdict.reason.startswith(reason), verdict.reason
    if fixture == "cli_error.jsonl":
        assert verdict.goals == ["⊢ double 2 = 4"]
        assert verdict.messages[0]["line"] == 1 and verdict.messages[0]["proof_line"] == 1  # context lines removed


def test_auto_mode_falls_back_to_the_cli(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lake exe repl` that exits at once (REPL missing) -> `lake env lean --json` from then on."""
    install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
    checker = LeanChecker(REPO / "lean_project", mode="auto")
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
    assert verdict.accepted, verdict.reason
    assert checker._repl_broken is not None and "REPL exited" in checker._repl_broken
    checker.close()


def test_hole4_cli_audit_runs_in_its_own_file(tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the checked file prints what looks like a clean audit at the lines the old one-file audit read;
    # the audit file (importing the compiled module) says the proof depends on Tiny.cheat
    install_fake_lake(tmp_path, monkeypatch, "cli_forged.jsonl")
    checker = LeanChecker(REPO / "lean_project", mode="cli")
    verdict = checker.check(tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
    assert not verdict.accepted and verdict.cheat
    assert verdict.reason == "axiom not allowed: Tiny.cheat"


def _replay_checker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: str, **kwargs) -> LeanChecker:
    tmp_path.mkdir(exist_ok=True)
    install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
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
    install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
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
    install_fake_lake(tmp_path, monkeypatch, "cli_accept.jsonl")
    victim = tmp_path / "victim.txt"
    monkeypatch.setenv("FAKE_LAKE_PLANT", str(victim))

    def check() -> tuple[str, str]:
        victim.write_text("untouched\n")
        verdict = LeanChecker(REPO / "lean_project", mode="cli", replay="off").check(
            tiny["Tiny.double_two"], "by\n  decide", timeout_s=30)
        return verdict.reason, victim.read_text()

    assert check() == ("accepted", "untouched\n")
    # control: a harness that writes with a plain open() follows the link into the victim
    monkeypatch.setattr(checker_module.files, "write_bytes", lambda root, rel, data: Path(root, rel).write_bytes(data))
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
