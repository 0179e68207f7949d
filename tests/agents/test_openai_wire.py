"""The OpenAI-compatible agent drives a short demo-bench run through the real SDK and a local server.

The server speaks ``POST /v1/chat/completions`` (JSON and SSE chunks with ``tool_calls``
deltas), as vLLM does. The script covers a 429 then success, a 503, a tool call whose arguments
are not JSON, an unknown tool, tool round trips and two submitted trials; the run log's trace
must match the exchanged messages.
"""

from __future__ import annotations

from typing import Any

import pytest
from llm_fixtures import FAST, OPENAI_KEY, demo_task
from llm_wire import Reply, WireServer, o_call, o_completion, o_error
from trace_check import agent_turns, check_openai

from agents.openai_agent import OpenAIAgent
from rrma.contracts import AgentError
from rrma.log.store import RunStore
from rrma.run.loop import start_run

PATH = "/v1/chat/completions"


def script() -> list[Reply | dict[str, Any]]:
    return [
        o_error(429, "Rate limit reached for requests", "rate_limit_error"),
        o_completion("Reading first.", [o_call("read_file", {"path": "objective.py", "start_line": 12,
                                                             "end_line": 15})]),
        o_completion(None, [o_call("edit_file", '{"path": "objective.py", "content": "X = }'),  # not JSON
                            o_call("launch_rockets", {})]),  # no such tool
        o_completion(None, [o_call("edit_file", {"path": "objective.py", "replacements": [
            {"search": "DEPTH = 2", "replace": "DEPTH = 5"}]})], cached=1024),
        o_completion(None, [o_call("submit_trial", {"hypothesis": "DEPTH 5 is the integer optimum",
                                                    "expected_effect": "loss -0.9"})], cached=1024),
        o_error(503, "Service Unavailable"),
        o_completion(None, [o_call("edit_file", {"path": "objective.py", "replacements": [
            {"search": "X = 0.0", "replace": "X = 1.7"}]}),
            o_call("submit_trial", {"hypothesis": "X = 1.7", "expected_effect": "loss -2.9"})], cached=1024),
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_agent_full_run(wire: WireServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                               stream: bool) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    wire.script(PATH, script())
    task = demo_task([{"name": "qwen", "backend": "openai", "model": "qwen-test", "base_url": f"{wire.url}/v1",
                       "temperature": 0.3, "max_tokens": 512, "params": {**FAST, "stream": stream}}])
    result = start_run(task, tmp_path, run_id="openai-run")
    assert result.reason == "max_trials", result.state.notes
    assert wire.remaining(PATH) == 0
    t1, t2 = result.state.trials["t0001"], result.state.trials["t0002"]
    assert (t1.hypothesis, t1.status, t2.hypothesis, t2.status) == ("DEPTH 5 is the integer optimum", "ok",
                                                                    "X = 1.7", "ok")
    assert t2.score < t1.score < result.state.baseline_mean

    for ex in wire.exchanges:
        assert ex.headers["authorization"] == f"Bearer {OPENAI_KEY}"
        assert ex.body["temperature"] == 0.3 and ex.body["max_tokens"] == 512
        assert bool(ex.body.get("stream")) is stream
        if stream:
            assert ex.body["stream_options"] == {"include_usage": True}
        assert ex.body["messages"][0]["role"] == "system"
        assert [t["function"]["name"] for t in ex.body["tools"]][:4] == ["read_file", "edit_file", "run_checks",
                                                                          "submit_trial"]
    events = RunStore(result.run_dir).scan().events
    turns = agent_turns(events, "qwen")
    assert check_openai(wire.exchanges, turns) >= 4
    bad = [t for t in turns if t.role == "tool_result" and t.text == "error"]
    assert "not valid JSON" in bad[0].result and "unknown tool 'launch_rockets'" in bad[1].result
    errors = [t.text for t in turns if t.role == "error"]
    assert errors[0].startswith("rate limited (429)") and errors[1].startswith("server error (503)")
    assert all(t.cost_usd == 0 for t in turns)  # a self-hosted model is free unless params.price says otherwise


def test_self_hosted_server_needs_no_key(wire: WireServer) -> None:
    """vLLM without --api-key: no OPENAI_API_KEY is fine when a base_url is given."""
    task = demo_task([{"name": "v", "backend": "openai", "model": "m", "base_url": f"{wire.url}/v1"}])
    agent = OpenAIAgent(task.agents[0], task)
    assert agent.api_key is None


def test_public_endpoint_without_key_is_a_clear_error() -> None:
    task = demo_task([{"name": "v", "backend": "openai", "model": "gpt-4o"}])
    with pytest.raises(AgentError, match="no API key for backend openai: set OPENAI_API_KEY"):
        OpenAIAgent(task.agents[0], task)


def test_base_url_from_environment(wire: WireServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{wire.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    wire.script(PATH, [o_completion("GIVE-UP")])
    task = demo_task([{"name": "v", "backend": "openai", "model": "m", "params": FAST}], **{"budget.max_trials": 1})
    result = start_run(task, tmp_path, run_id="env")
    assert result.reason == "agents_exhausted" and len(wire.exchanges) == 1
