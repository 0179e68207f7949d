"""Pure logic shared by the LLM backends: redaction, prices, retries, argument parsing, the tools."""

from __future__ import annotations

import random
from typing import Any

import pytest
from llm_fixtures import ANTHROPIC_KEY, demo_task

from agents.anthropic_agent import AnthropicAgent
from agents.llm.costs import Price, Usage, UsageMeter, price_for
from agents.llm.redaction import REDACTED, Redactor
from agents.llm.retries import RetryPolicy, parse_retry_after
from agents.llm.tools import ToolCall, ToolSession, compile_edit_lines, parse_arguments, proof_syntax_problems
from rrma.contracts import AgentError, Context
from rrma.trial import FileEdit

SECRET = "sk-ant-api03-abcdefghijklmnop"


@pytest.mark.parametrize(("text", "expected"), [
    (f"key {SECRET} here", f"key {REDACTED} here"),  # the configured secret itself
    ("Authorization: Bearer abc.def-123", f"Authorization: Bearer {REDACTED}"),  # any bearer header
    ('{"x-api-key": "plainsecret99"}', f'{{"x-api-key": "{REDACTED}"}}'),  # a JSON-ish header dump
    ("sk-ant-otherkey-0123456789", REDACTED),  # shaped like an Anthropic key, not configured
    ("sk-proj-ABCDEFGHIJKLMNOPQRST", REDACTED),  # shaped like an OpenAI key
    ("api_key_env names the variable", "api_key_env names the variable"),  # prose is left alone
    ("loss: 1.25 after 3 steps", "loss: 1.25 after 3 steps"),  # ordinary text untouched
])
def test_redactor_text(text: str, expected: str) -> None:
    assert Redactor([SECRET, None, "abc"]).text(text) == expected


def test_redactor_scrubs_nested_values() -> None:
    value = {"args": [{"content": f"token={SECRET}"}], "n": 3}
    assert Redactor([SECRET]).value(value) == {"args": [{"content": f"token={REDACTED}"}], "n": 3}


@pytest.mark.parametrize(("model", "params", "expected"), [
    ("claude-opus-4-1-20250805", None, Price(15.0, 75.0, 1.5, 18.75)),  # old Opus list price
    ("claude-opus-4-6", None, Price(5.0, 25.0, 0.5, 6.25)),  # newer Opus
    ("claude-sonnet-4-5", None, Price(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", None, Price(1.0, 5.0, 0.1, 1.25)),
    ("claude-mythos-5", None, Price(3.0, 15.0, 0.3, 3.75)),  # unknown Claude family: priced like Sonnet
    ("gpt-4o-mini-2024-07-18", None, Price(0.15, 0.6, 0.075, 0.0)),  # most specific prefix wins over gpt-4o
    ("Qwen/Qwen2.5-Coder-7B-Instruct", None, Price(0.0, 0.0, 0.0, 0.0)),  # self-hosted: free
    ("anything", {"price": {"input": 2, "output": 4}}, Price(2.0, 4.0, 0.0, 0.0)),  # params override
])
def test_price_for(model: str, params: dict[str, Any] | None, expected: Price) -> None:
    assert price_for(model, params) == expected


def test_bad_price_override_is_an_agent_error() -> None:
    with pytest.raises(AgentError, match=r"params\.price"):
        price_for("m", {"price": {"input": "lots"}})


def test_cost_and_meter() -> None:
    usage = Usage(tokens_in=1_000_000, tokens_out=100_000, cache_read=2_000_000, cache_write=0)
    assert Price(3.0, 15.0, 0.3, 3.75).cost(usage) == pytest.approx(3.0 + 1.5 + 0.6)
    meter = UsageMeter(max_tokens=None, max_usd=5.0)
    meter.add(usage, 5.1)
    assert meter.exhausted() == "cost cap reached: $5.1000 >= budget_usd $5.0000"


@pytest.mark.parametrize(("raw", "args", "error"), [
    ('{"path": "a.py"}', {"path": "a.py"}, None),
    ("", {}, None),  # a tool without arguments
    ('{"path": "a.py"', {}, "not valid JSON"),  # truncated
    ("[1, 2]", {}, "must be a JSON object"),
])
def test_parse_arguments(raw: str, args: dict[str, Any], error: str | None) -> None:
    got_args, got_error = parse_arguments(raw)
    assert got_args == args
    assert (got_error is None) if error is None else (error in (got_error or ""))


@pytest.mark.parametrize(("proof", "problem"), [
    ("intros. simpl. reflexivity.", None),
    ("exact (fun x => (x, x))", None),
    ("apply (f x", "unclosed '('"),
    ("exact x)", "unbalanced ')'"),
    ("intros. admit.", "uses 'admit'"),
    ("sorry", "uses 'sorry'"),
    ("   ", "the proof is empty"),
])
def test_proof_syntax(proof: str, problem: str | None) -> None:
    problems = proof_syntax_problems(proof)
    assert problems == [] if problem is None else any(problem in p for p in problems)


def test_retry_delays() -> None:
    policy = RetryPolicy(attempts=5, base_s=1.0, max_s=10.0, rng=random.Random(1))
    assert policy.delay(0, 3.0) == 3.0  # the server's retry-after wins
    assert policy.delay(0, 120.0) == 10.0  # ... capped
    for retry in range(4):
        assert 0.5 * 2 ** retry <= policy.delay(retry, None) <= min(10.0, 2 ** retry)
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None


# ----------------------------------------------------------------------------- the tool session


def session(policy: str = "keep-revert", files_of: Any = None, edit_lines: list[str] | None = None) -> ToolSession:
    task = demo_task([{"name": "a"}], **{"loop.policy": policy, "workspace.readonly": ["data/*"]})
    ctx = Context(task=task, agent_name="a", parent_id="base-0",
                  files={"objective.py": "X = 0.0\nY = 0.0\n", "data/train.txt": "abc\n"}, editable=["*.py", "data/*"])
    if files_of is not None:
        ctx.files_of = files_of
    return ToolSession(ctx, task, Redactor([]), edit_lines=compile_edit_lines("a", edit_lines))


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(id="t", name=name, args=args)


def test_replacements_are_kept_as_replacements() -> None:
    s = session()
    s.execute(call("edit_file", path="objective.py", replacements=[{"search": "X = 0.0", "replace": "X = 1.0"}]))
    s.execute(call("edit_file", path="./objective.py", replacements=[{"search": "Y = 0.0", "replace": "Y = 2.0"}]))
    assert s.edits() == [FileEdit(path="objective.py", replacements=[("X = 0.0", "X = 1.0"), ("Y = 0.0", "Y = 2.0")])]
    s.execute(call("edit_file", path="objective.py", content="X = 5\n"))
    assert s.edits() == [FileEdit(path="objective.py", content="X = 5\n")]  # a whole file wins from then on


@pytest.mark.parametrize(("args", "message"), [
    ({"path": "data/train.txt", "content": "x"}, "read-only file"),
    ({"path": "../escape.py", "content": "x"}, "leaves the workspace"),
    ({"path": "objective.py", "replacements": [{"search": "Z = 1", "replace": "Z = 2"}]}, "objective.py"),
    ({"path": "objective.py"}, "give `content`"),
    ({"path": "objective.py", "content": "a", "replacements": [{"search": "X", "replace": "Y"}]}, "not both"),
])
def test_edit_file_refusals(args: dict[str, Any], message: str) -> None:
    result = session().execute(call("edit_file", **args))
    assert result.is_error and message in result.text


def test_read_submit_and_revert() -> None:
    s = session()
    assert s.execute(call("read_file", path="objective.py", start_line=2)).text.endswith("Y = 0.0\n")
    assert "nothing to submit" in s.execute(call("submit_trial", hypothesis="h", expected_effect="e")).text
    s.execute(call("edit_file", path="objective.py", content="X = 1.0\nY = 0.0\n"))
    assert "python syntax ok" in s.execute(call("run_checks")).text
    back = s.execute(call("edit_file", path="objective.py", content="X = 0.0\nY = 0.0\n"))
    assert "back to the parent's version" in back.text and s.edits() == []
    s.execute(call("edit_file", path="objective.py", content="X = (\n"))
    assert "SyntaxError line 1" in s.execute(call("run_checks")).text
    assert s.execute(call("submit_trial", hypothesis="h", expected_effect="e")).text.startswith("submitted")
    assert s.proposal is not None and s.proposal.parent is None  # keep-revert: the loop picks the parent


def test_rebase_is_tree_only() -> None:
    assert "unknown tool 'rebase_to'" in session().execute(call("rebase_to", trial_id="t1")).text  # not offered
    s = session("tree", files_of=lambda tid: {"objective.py": f"X = 9.0  # {tid}\nY = 0.0\n"})
    s.execute(call("edit_file", path="objective.py", content="X = 1\n"))
    assert "dropped pending edits of objective.py" in s.execute(call("rebase_to", trial_id="t0007")).text
    s.execute(call("edit_file", path="objective.py", replacements=[{"search": "X = 9.0", "replace": "X = 8.0"}]))
    s.execute(call("submit_trial", hypothesis="h", expected_effect="e"))
    assert s.proposal is not None and s.proposal.parent == "t0007"


def test_keys_are_not_accepted_from_the_task_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    task = demo_task([{"name": "a", "backend": "anthropic", "model": "m", "params": {"api_key": "sk-ant-x"}}])
    with pytest.raises(AgentError, match="do not put API keys in the task file"):
        AnthropicAgent(task.agents[0], task)
    task = demo_task([{"name": "a", "backend": "anthropic"}])
    with pytest.raises(AgentError, match="needs a model"):
        AnthropicAgent(task.agents[0], task)


def test_key_from_a_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_B_KEY", "sk-ant-team-b-0123456789")
    task = demo_task([{"name": "a", "backend": "anthropic", "model": "m", "params": {"api_key_env": "TEAM_B_KEY"}}])
    agent = AnthropicAgent(task.agents[0], task)
    assert agent.api_key == "sk-ant-team-b-0123456789"
    assert agent.redactor.text("echo sk-ant-team-b-0123456789") == f"echo {REDACTED}"


def test_edit_lines_restrict_a_specialist_to_its_part_of_a_file() -> None:
    s = session(edit_lines=[r"^X\b"])
    ok = s.execute(call("edit_file", path="objective.py", replacements=[{"search": "X = 0.0", "replace": "X = 2.0"}]))
    assert not ok.is_error
    refused = s.execute(call("edit_file", path="objective.py", content="X = 2.0\nY = 1.0\n"))
    assert refused.is_error and "may not remove the line 'Y = 0.0'" in refused.text
    assert s.edits() == [FileEdit(path="objective.py", replacements=[("X = 0.0", "X = 2.0")])]  # unchanged by it


@pytest.mark.parametrize(("raw", "message"), [
    ("^X", "must be a list"),  # a bare string, not a list
    (["(unclosed"], "not a valid regular expression"),
])
def test_bad_edit_lines(raw: Any, message: str) -> None:
    with pytest.raises(AgentError, match=message):
        compile_edit_lines("a", raw)
