"""The Anthropic agent drives a short demo-bench run through the real SDK and a local wire server.

The server speaks the Messages API (JSON and SSE); the script covers a 429 then success, a 529
overload, a malformed tool call, tool_use/tool_result round trips and two submitted trials. The
run log's trace must match the exchanged messages exactly (see trace_check).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from llm_fixtures import ANTHROPIC_KEY, FAST, demo_task
from llm_wire import Reply, WireServer, a_error, a_message, a_text, a_tool
from trace_check import agent_turns, check_anthropic

from rrma.log.store import RunStore
from rrma.run.loop import start_run

PATH = "/v1/messages"
HYP1 = "X = 1.7 sits at the bowl's minimum along x"
HYP2 = "Y = -0.8 sits at the minimum along y"


def script(stream: bool) -> list[Reply | dict[str, Any]]:
    malformed: Reply | dict[str, Any]
    if stream:  # truncated input JSON inside the SSE stream
        malformed = Reply(message=a_message(a_tool("edit_file", {"path": "objective.py"})),
                          raw_json={0: '{"path": "objective.py", "replacements": [{"search": '})
    else:  # well-formed JSON, wrong shape: no `path`, content not a string
        malformed = a_message(a_tool("edit_file", {"file": "objective.py", "content": 3}))
    replies: list[Reply | dict[str, Any]] = [
        a_error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                retry_after=0),
        a_message(a_text("I will read the objective first."), a_tool("read_file", {"path": "objective.py"}),
                  cache_write=900),
        malformed,
        a_message(a_text("X should move to the minimum."),
                  a_tool("edit_file", {"path": "objective.py",
                                       "replacements": [{"search": "X = 0.0", "replace": "X = 1.7"}]}),
                  a_tool("run_checks", {}), cache_read=900),
        a_message(a_tool("submit_trial", {"hypothesis": HYP1, "expected_effect": "loss drops by about 2.9"}),
                  cache_read=900),
        a_error(529, "overloaded_error", "Overloaded"),
    ]
    if stream:  # an overload reported inside a 200 stream, as an `error` event
        replies.append(Reply(message=a_message(a_text("never finished")),
                             stream_error={"type": "overloaded_error", "message": "Overloaded"}))
    replies += [
        a_message(a_tool("read_blackboard", {}),
                  a_tool("post_insight", {"text": "X at 1.7 removed most of the loss"}),
                  a_tool("edit_file", {"path": "objective.py",
                                       "replacements": [{"search": "Y = 0.0", "replace": "Y = -0.8"}]}),
                  cache_read=900),
        a_message(a_text("Submitting."), a_tool("submit_trial", {"hypothesis": HYP2, "expected_effect": "loss -1.3"}),
                  cache_read=900),
    ]
    return replies


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_agent_full_run(wire: WireServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                  stream: bool) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    wire.script(PATH, script(stream))
    task = demo_task([{"name": "claude", "backend": "anthropic", "model": "claude-sonnet-test",
                       "base_url": wire.url, "max_tokens": 1024, "params": {**FAST, "stream": stream}}])
    result = start_run(task, tmp_path, run_id="anthropic-run")
    assert result.reason == "max_trials", result.state.notes
    assert wire.remaining(PATH) == 0

    # the trials: both submitted, both scored, the first one promoted
    trials = [result.state.trials[t] for t in ("t0001", "t0002")]
    assert [t.hypothesis for t in trials] == [HYP1, HYP2]
    assert [t.status for t in trials] == ["ok", "ok"]
    assert trials[0].promoted and trials[1].parent == "t0001"
    assert trials[1].score < trials[0].score < result.state.baseline_mean

    # the wire: every request authenticated, streamed as asked, static parts cached
    exchanges = wire.exchanges
    assert len(exchanges) == len(script(stream))
    for ex in exchanges:
        assert ex.headers["authorization"] == f"Bearer {ANTHROPIC_KEY}"
        assert bool(ex.body.get("stream")) is stream
        assert ex.body["model"] == "claude-sonnet-test" and ex.body["max_tokens"] == 1024
        assert "temperature" not in ex.body  # API 2026-10-21 rejects sampling parameters
        assert ex.body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert ex.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert ex.body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
        assert json.dumps(ex.body).count('"cache_control"') <= 4  # the API allows four breakpoints
        if len(ex.body["messages"]) > 1:  # follow-ups also cache the conversation so far
            assert ex.body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert {t["name"] for t in ex.body["tools"]} == {"read_file", "edit_file", "run_checks", "submit_trial",
                                                         "read_blackboard", "post_insight"}
    first_of_second = next(ex for ex in exchanges[5:] if len(ex.body["messages"]) == 1)
    assert "Current best: t0001" in first_of_second.body["messages"][0]["content"][1]["text"]

    # the trace equals the conversation
    events = RunStore(result.run_dir).scan().events
    turns = agent_turns(events, "claude")
    assert check_anthropic(exchanges, turns) >= 6
    results = [t for t in turns if t.role == "tool_result"]
    assert results[0].result.startswith("objective.py lines 1-")  # read_file
    assert results[1].text == "error" and ("path" in results[1].result or "JSON" in results[1].result)
    assert "python syntax ok" in results[3].result  # run_checks
    assistants = [t for t in turns if t.role == "assistant"]
    assert all(t.cost_usd > 0 and t.latency_s >= 0 and t.model == "claude-sonnet-test" for t in assistants)
    assert sum(t.cache_read for t in assistants) == 900 * 4
    posts = [e.data for e in events if e.kind == "blackboard.post"]
    assert [p.text for p in posts] == ["X at 1.7 removed most of the loss"]
    proposed = [e.data for e in events if e.kind == "trial.proposed" and not e.data.baseline]
    assert [p.agent for p in proposed] == ["claude", "claude"]


def test_malformed_stream_json_is_reported_to_the_model(wire: WireServer, tmp_path: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool call whose streamed JSON does not parse comes back as an is_error tool_result."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    wire.script(PATH, [
        Reply(message=a_message(a_tool("read_file", {"path": "x"})), raw_json={0: '{"path": objective.py}'}),
        a_message(a_tool("submit_trial", {"hypothesis": "nothing", "expected_effect": "none"})),
        a_message(a_text("GIVE-UP")),
    ])
    task = demo_task([{"name": "c", "backend": "anthropic", "model": "claude-haiku-test", "base_url": wire.url,
                       "params": {**FAST, "stream": True}}], **{"budget.max_trials": 1})
    result = start_run(task, tmp_path, run_id="malformed")
    assert result.reason == "agents_exhausted"
    second = wire.exchanges[1].body["messages"]
    block = second[-1]["content"][0]
    assert block["type"] == "tool_result" and block["is_error"] is True
    assert "not valid JSON" in block["content"]
    assert second[-2]["content"][0] == {"type": "tool_use", "id": second[-2]["content"][0]["id"],
                                         "name": "read_file", "input": {}}
    third = wire.exchanges[2].body["messages"][-1]["content"][0]
    assert third["is_error"] and "nothing to submit" in third["content"]
