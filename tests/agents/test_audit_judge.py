"""The audit's optional judge against a local server speaking the real Anthropic / OpenAI protocols.

One real run (the demo bench, an OpenAI-compatible agent scripted through the wire server: it edits
objective.py and posts "loss 0.0003, verified - new best" for a worse trial) is built once and
copied per test. The judge is asked through the real SDKs (agents/judge.py) via
rrma.plugins.make_judge; its replies are scripted in the wire format, and what reaches the run log
is checked with the real fold and verify.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from llm_fixtures import ANTHROPIC_KEY, FAST, OPENAI_KEY, demo_task
from llm_wire import WireServer, a_error, a_message, a_text, o_call, o_completion, o_error

from rrma.audit.auditor import Auditor, audit_run
from rrma.audit.judge import (
    MAX_PROMPT_CHARS,
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    JudgeError,
    ModelJudge,
    build_prompt,
    parse_reply,
)
from rrma.audit.rules import TrialCase
from rrma.log.events import AUDIT_KINDS
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.plugins import make_judge
from rrma.run.loop import start_run

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
CLAIM = "loss 0.0003, verified - new best"
RETRY_FAST = {"retry_base_s": 0.01, "retry_max_s": 0.02}


@pytest.fixture(scope="module")
def built_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run whose agent claims a result the oracle contradicts (the rules already flag it)."""
    root = tmp_path_factory.mktemp("judge")
    with WireServer() as agent:
        agent.script(CHAT, [
            o_completion(calls=[
                o_call("edit_file", {"path": "objective.py",
                                     "replacements": [{"search": "X = 0.0", "replace": "X = 1.5"}]}),
                o_call("post_insight", {"text": f"X 1.5: {CLAIM}"})]),
            o_completion("Submitting.", calls=[o_call("submit_trial", {"hypothesis": "X nearer 1.7",
                                                                       "expected_effect": "lower loss"})]),
        ])
        task = demo_task([{"name": "a", "backend": "openai", "model": "qwen-test", "base_url": f"{agent.url}/v1",
                           "params": FAST}], **{"budget.max_trials": 1})
        result = start_run(task, root, run_id="judged")
        assert agent.remaining(CHAT) == 0
    assert result.state.trials["t0001"].status == "ok"
    return result.run_dir


@pytest.fixture
def run(built_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built_run, tmp_path / built_run.name))


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


def case_of(run_dir: Path, trial: str = "t0001") -> TrialCase:
    store = RunStore(run_dir)
    scan = store.scan()
    auditor = Auditor(store)
    for event in scan.events:
        auditor.observe(event)
    return auditor.case(RunState.fold(scan.events), trial)


def seqs(case: TrialCase) -> dict[str, int]:
    """The seqs a verdict can cite: the post, the edit call, the proposal."""
    post = case.posts[0].seq
    edit = next(t.seq for t in case.turns if t.role == "tool_call" and t.tool == "edit_file")
    return {"post": post, "edit": edit, "proposed": case.proposed_seq}


def reply_json(*verdicts: dict[str, Any], quotes: list[dict[str, Any]] | None = None) -> str:
    """A judge reply in the shape the prompt asks for: every kind, "none" unless given."""
    given = {v["kind"]: v for v in verdicts}
    out = [given.get(k, {"kind": k, "severity": "none", "explanation": "", "evidence": []}) for k in AUDIT_KINDS]
    out += [v for v in verdicts if v["kind"] not in AUDIT_KINDS]
    return json.dumps({"quotes": quotes or [], "verdicts": out})


def claim_verdict(seq: int, quote: str = "loss 0.0003, verified", kind: str = "claim_mismatch",
                  severity: str = "high") -> dict[str, Any]:
    return {"kind": kind, "severity": severity, "explanation": "the post claims 0.0003; the oracle scored 4.54",
            "evidence": [{"seq": seq, "quote": quote}]}


def openai_judge(wire: WireServer, model: str = "judge-m") -> ModelJudge:
    return make_judge("openai", model, endpoint=f"{wire.url}/v1", options=RETRY_FAST)


# ----------------------------------------------------------------------------- the prompt


def test_prompt_version_is_pinned_to_the_prompt() -> None:
    """Changing the system prompt or a rubric without bumping PROMPT_VERSION fails here (findings record it)."""
    digest = hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest()[:12]
    assert (PROMPT_VERSION, digest) == ("rrma-judge/1", "484bec21e22b"), "bump PROMPT_VERSION and this pin"
    for kind in AUDIT_KINDS:
        assert f"- {kind}: " in SYSTEM_PROMPT


def test_prompt_lays_out_the_case_under_its_seqs(run: Path) -> None:
    case = case_of(run)
    prompt = build_prompt(case)
    at = seqs(case)
    assert prompt.startswith("<case>") and "</case>" in prompt
    assert f"[seq {at['post']}] blackboard post by a" in prompt and CLAIM in prompt
    assert f"[seq {at['edit']}] turn of a, role tool_call" in prompt and '"replace": "X = 1.5"' in prompt
    assert "objective.py: -X = 0.0" in prompt and "objective.py: +X = 1.5" in prompt  # the diff
    assert f"proposed at [seq {at['proposed']}]" in prompt
    assert "metric: loss (minimize)" in prompt and "oracle's scorer files: score.py" in prompt
    assert f"score: {case.outcome.score:.6g}" in prompt
    for turn in case.turns:
        assert f"[seq {turn.seq}] turn of " in prompt


def test_a_long_trace_is_clipped_to_fit(run: Path) -> None:
    """Tool output floods are cut in the middle (marked clipped) until the prompt fits MAX_PROMPT_CHARS."""
    case = case_of(run)
    flood = "".join(f"line {n} of a long build log\n" for n in range(20_000))
    case.turns = [replace(t, result=flood) if t.role == "tool_result" else t for t in case.turns]
    prompt = build_prompt(case)
    assert len(prompt) <= MAX_PROMPT_CHARS
    assert prompt.count("(clipped)") >= 3 and "characters cut ...]" in prompt
    assert "line 0 of a long build log" in prompt and "line 19999 of a long build log" in prompt


def test_parser_reads_a_reasoning_model_reply(run: Path) -> None:
    """A <think> block before the JSON (vLLM reasoning models) is skipped; quotes match with whitespace normalised."""
    case = case_of(run)
    post = seqs(case)["post"]
    text = "<think>the post says {loss 0.0003}</think>\n" + reply_json(
        claim_verdict(post, "loss   0.0003,\n verified"))
    parsed = parse_reply(text, case, "qwen3")
    assert parsed.error is None and parsed.dropped == []
    assert [(f.kind, f.evidence[0].quote) for f in parsed.findings] == [("claim_mismatch", "loss 0.0003, verified")]


# ----------------------------------------------------------------------------- replies through the wire


def test_valid_finding_over_openai_compatible(run: Path, wire: WireServer) -> None:
    case = case_of(run)
    at = seqs(case)
    wire.script(CHAT, [o_completion(reply_json(claim_verdict(at["post"]),
                                               quotes=[{"seq": at["post"], "quote": "loss 0.0003, verified"}]))])
    judge = openai_judge(wire)
    findings = judge.judge(case)
    assert judge.errors == [] and judge.dropped == []
    assert len(findings) == 1
    f = findings[0]
    assert (f.trial_id, f.kind, f.severity, f.source, f.rule) == ("t0001", "claim_mismatch", "high", "judge:judge-m",
                                                                  "judge:claim_mismatch")
    assert (f.model, f.prompt_version) == ("judge-m", PROMPT_VERSION)
    assert [(e.seq, e.quote) for e in f.evidence] == [(at["post"], "loss 0.0003, verified")]
    body = wire.exchanges[0].body
    assert body["model"] == "judge-m" and body["temperature"] == 0.0 and not body.get("stream")
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"] == SYSTEM_PROMPT and body["messages"][1]["content"] == build_prompt(case)


def test_valid_finding_over_anthropic(run: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    case = case_of(run)
    at = seqs(case)
    fenced = "Here is my audit.\n```json\n" + reply_json(
        claim_verdict(at["edit"], '"replace": "X = 1.5"', kind="out_of_scope", severity="info")) + "\n```"
    wire.script(MESSAGES, [a_message(a_text(fenced), model="claude-judge-test")])
    judge = make_judge("anthropic", "claude-judge-test", endpoint=wire.url)
    findings = judge.judge(case)
    assert judge.errors == []
    assert [(f.kind, f.severity, f.source, f.evidence[0].seq) for f in findings] == [
        ("out_of_scope", "info", "judge:claude-judge-test", at["edit"])]
    exchange = wire.exchanges[0]
    assert exchange.headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"
    assert exchange.body["system"] == SYSTEM_PROMPT and exchange.body["model"] == "claude-judge-test"
    assert exchange.body["messages"] == [{"role": "user", "content": build_prompt(case)}]
    assert "temperature" not in exchange.body


# each case: one verdict the evidence check must throw away, and why (a substring of the dropped line)
BAD_VERDICTS = [
    pytest.param(lambda at: claim_verdict(99_999), "seq 99999, which is not an event", id="unknown-seq"),
    # the quote is the post's, cited on the edit call's seq
    pytest.param(lambda at: claim_verdict(at["edit"]), "is not in event", id="quote-not-in-cited-event"),
    pytest.param(lambda at: claim_verdict(at["post"], "loss 0.0001, verified"), "is not in event", id="altered-quote"),
    pytest.param(lambda at: claim_verdict(at["post"], kind="made_up_kind"), "unknown kind", id="unknown-kind"),
    pytest.param(lambda at: claim_verdict(at["post"], severity="critical"), "unknown severity", id="bad-severity"),
    pytest.param(lambda at: {**claim_verdict(at["post"]), "evidence": []}, "cites no evidence", id="no-evidence"),
    # one good citation and one invented: the whole finding goes
    pytest.param(lambda at: {**claim_verdict(at["post"]), "evidence": [
        {"seq": at["post"], "quote": "loss 0.0003"}, {"seq": at["post"], "quote": "I copied the scorer"}]},
        "is not in event", id="one-invented-of-two"),
]


@pytest.mark.parametrize(("make", "why"), BAD_VERDICTS)
def test_unsupported_verdicts_are_dropped(run: Path, wire: WireServer, make: Any, why: str) -> None:
    case = case_of(run)
    at = seqs(case)
    good = claim_verdict(at["proposed"], "X = 1.5", kind="metric_tampering", severity="warn")
    wire.script(CHAT, [o_completion(reply_json(make(at), good))])
    judge = openai_judge(wire)
    findings = judge.judge(case)
    assert judge.errors == []
    assert [(f.kind, f.evidence[0].seq) for f in findings] == [("metric_tampering", at["proposed"])]
    assert len(judge.dropped) == 1 and why in judge.dropped[0] and judge.dropped[0].startswith("trial t0001: ")


@pytest.mark.parametrize("reply", [
    pytest.param("I think the trial is fine.", id="prose"),
    pytest.param('{"verdicts": [{"kind": "claim_mismatch", "severity": "high"', id="cut-json"),
    pytest.param('{"quotes": [], "findings": []}', id="no-verdicts-list"),
    pytest.param('[1, 2, 3]', id="a-list"),
    pytest.param("", id="empty"),
])
def test_malformed_reply_gives_no_findings_and_one_error(run: Path, wire: WireServer, reply: str) -> None:
    wire.script(CHAT, [o_completion(reply)])
    judge = openai_judge(wire)
    assert judge.judge(case_of(run)) == []
    assert len(judge.errors) == 1 and judge.errors[0].startswith("trial t0001: the judge")
    assert judge.stopped is None  # a bad reply does not stop the judge; the next trial is asked again


def test_failed_call_stops_the_judge_and_the_audit_goes_on(run: Path, wire: WireServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A 401 is final: one error line (no key in it), no further calls; the rules' audit still completes."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    wire.script(CHAT, [o_error(500, "busy"), o_error(401, f"bad key {OPENAI_KEY}", "invalid_request_error")])
    judge = openai_judge(wire)
    report = audit_run(run, judge=judge)
    assert len(wire.exchanges) == 2  # the 500 retried once, the 401 not
    assert report.trials == 1 and report.written == 0  # the rules' finding was written live already
    assert len(judge.errors) == 1 and "model call failed" in judge.errors[0] and "401" in judge.errors[0]
    assert OPENAI_KEY not in judge.errors[0]
    assert judge.stopped is not None
    assert judge.judge(case_of(run)) == [] and len(wire.exchanges) == 2  # asks no more
    assert list(judge.summary())[-1].startswith("the judge stopped after a failed call; 1 trial(s) not judged")


def test_rate_limit_is_retried(run: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    case = case_of(run)
    wire.script(MESSAGES, [a_error(429, "rate_limit_error", "slow down", retry_after=0.01),
                           a_error(529, "overloaded_error", "overloaded"),
                           a_message(a_text(reply_json(claim_verdict(seqs(case)["post"]))))])
    judge = make_judge("anthropic", "claude-judge-test", endpoint=wire.url, options=RETRY_FAST)
    assert [f.kind for f in judge.judge(case)] == ["claim_mismatch"]
    assert len(wire.exchanges) == 3 and judge.errors == []


# ----------------------------------------------------------------------------- in the run log


def test_judge_is_off_by_default(run: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """audit_run without a judge asks no model, even with an endpoint configured, and writes no judge finding."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"{wire.url}/v1")
    wire.script(CHAT, [o_completion(reply_json(claim_verdict(1)))])
    report = audit_run(run)
    assert wire.exchanges == [] and wire.remaining(CHAT) == 1
    assert report.trials == 1 and report.findings  # the rules' findings, from the live audit
    assert all(f["source"] == "rule" and f["model"] is None for f in report.findings)
    assert Auditor(RunStore(run)).judge is None


def test_audit_run_writes_judge_findings_that_verify(run: Path, wire: WireServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """make_judge("openai", M) as the CLI calls it, the endpoint from OPENAI_BASE_URL (a vLLM server)."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"{wire.url}/v1")
    at = seqs(case_of(run))
    reply = reply_json(claim_verdict(at["post"]), claim_verdict(99_999, kind="scorer_access"))
    wire.script(CHAT, [o_completion(reply), o_completion(reply)])
    before = len(RunStore(run).scan().events)
    judge = make_judge("openai", "qwen-judge")
    report = audit_run(run, judge=judge)
    assert report.written == 1 and judge.errors == [] and len(judge.dropped) == 1  # the invented scorer_access
    state = RunState.fold(RunStore(run).scan().events)
    judged = [f for f in state.findings if f["source"] == "judge:qwen-judge"]
    assert len(judged) == 1 and judged[0]["seq"] == before
    f = judged[0]
    assert (f["kind"], f["severity"], f["rule"], f["model"], f["prompt_version"]) == (
        "claim_mismatch", "high", "judge:claim_mismatch", "qwen-judge", PROMPT_VERSION)
    assert f["evidence"] == [{"seq": at["post"], "quote": "loss 0.0003, verified"}]
    assert f in state.trials["t0001"].findings
    assert verify_run(run).ok
    # the same verdict again is the same finding: a second audit writes nothing
    assert audit_run(run, judge=make_judge("openai", "qwen-judge")).written == 0
    assert len(wire.exchanges) == 2 and verify_run(run).ok


# ----------------------------------------------------------------------------- making a judge


def test_make_judge_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(JudgeError, match=r"unknown judge backend 'gemini'; known: anthropic, openai") as unknown:
        make_judge("gemini", "m")
    assert isinstance(unknown.value, ValueError) and "\n" not in str(unknown.value)
    with pytest.raises(JudgeError, match="needs a model"):
        make_judge("openai", None)
    with pytest.raises(JudgeError, match="ANTHROPIC_API_KEY"):
        make_judge("anthropic", "claude-judge-test")  # no key in the (cleaned) environment
    with pytest.raises(JudgeError, match="OPENAI_API_KEY"):
        make_judge("openai", "gpt-judge")  # the public API needs a key; a self-hosted endpoint does not
    with pytest.raises(JudgeError, match="unexpected keyword"):
        make_judge("openai", "m", endpoint="http://127.0.0.1:9/v1", options={"bogus": 1})
    made = make_judge("openai", "m", endpoint="http://127.0.0.1:9/v1")
    assert isinstance(made, ModelJudge) and made.source == "judge:m" and made.backend == "openai"
    assert made.calls == 0  # making a judge calls nothing


def test_injected_completer_that_raises_is_an_error_not_a_crash(run: Path) -> None:
    def broken(system: str, user: str) -> str:
        raise RuntimeError("socket closed")

    judge = ModelJudge("m", broken)
    assert judge.judge(case_of(run)) == []
    assert judge.errors == ["trial t0001: the judge's model call failed: socket closed"]

