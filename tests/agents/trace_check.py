"""Compare a run log's ``agent.turn`` trace with the messages a wire server actually exchanged.

The invariant checked: walking the exchanges in order, each failed attempt is one ``error``
turn naming the failure; each served reply is one ``assistant`` turn with the reply's text and
usage, followed, per tool call, by a ``tool_call`` turn (name and arguments as sent) and a
``tool_result`` turn; and the next request of the same conversation carries exactly those
results back to the model (same ids, same text, same error flags).
"""

from __future__ import annotations

import json
from typing import Any

from llm_wire import Exchange


def agent_turns(events: list[Any], agent: str) -> list[Any]:
    return [e.data for e in events if e.kind == "agent.turn" and e.data.agent == agent]


def _model_turns(turns: list[Any]) -> list[Any]:
    """Turns that correspond to the wire (system/user prompts are ours, not the model's)."""
    return [t for t in turns if t.role in ("assistant", "tool_call", "tool_result")
            or (t.role == "error" and ("retry" in t.text or "failed" in t.text))]


def check_anthropic(exchanges: list[Exchange], turns: list[Any]) -> int:
    """Assert the trace matches; returns the number of tool results checked against requests."""
    model_turns = _model_turns(turns)
    pos = 0
    checked = 0
    pending: list[tuple[str, str, bool]] = []  # (tool_use_id, result text, is_error) awaiting the next request
    for ex in exchanges:
        if pending and ex.body["messages"][-1]["role"] == "user" and len(ex.body["messages"]) > 1:
            sent = [b for b in ex.body["messages"][-1]["content"] if b.get("type") == "tool_result"]
            assert [(b["tool_use_id"], b["content"], b["is_error"]) for b in sent] == pending
            checked += len(sent)
            pending = []
        turn = model_turns[pos]
        pos += 1
        if ex.reply.status != 200 or ex.reply.stream_error is not None:
            assert turn.role == "error", turn
            expected = {429: "rate limited (429)", 529: "overloaded (529)"}.get(ex.reply.status, "")
            assert expected in turn.text or ex.reply.stream_error is not None, turn.text
            continue
        msg = ex.reply.message or {}
        assert turn.role == "assistant", turn
        assert turn.text == "".join(b["text"] for b in msg["content"] if b["type"] == "text")
        usage = msg["usage"]
        assert (turn.tokens_in, turn.tokens_out, turn.cache_read, turn.cache_write) == (
            usage["input_tokens"], usage["output_tokens"], usage["cache_read_input_tokens"],
            usage["cache_creation_input_tokens"])
        results: list[tuple[str, str, bool]] = []
        for index, block in enumerate(b for b in msg["content"] if b["type"] == "tool_use"):
            call, result = model_turns[pos], model_turns[pos + 1]
            pos += 2
            assert (call.role, call.tool) == ("tool_call", block["name"])
            if index in ex.reply.raw_json or ex.reply.raw_json:
                pass  # malformed JSON on the wire: the trace keeps the raw text
            else:
                assert call.args == block["input"]
            assert (result.role, result.tool) == ("tool_result", block["name"])
            results.append((block["id"], result.result, result.text == "error"))
            if block["name"] == "submit_trial" and result.text != "error":
                results = []
                break
        pending = results
    assert pos == len(model_turns), model_turns[pos:]
    return checked


def check_openai(exchanges: list[Exchange], turns: list[Any]) -> int:
    model_turns = _model_turns(turns)
    pos = 0
    checked = 0
    pending: list[tuple[str, str]] = []
    for ex in exchanges:
        if pending:
            tail = [m for m in ex.body["messages"][-len(pending):] if m["role"] == "tool"]
            assert [(m["tool_call_id"], m["content"]) for m in tail] == pending
            checked += len(tail)
            pending = []
        turn = model_turns[pos]
        pos += 1
        if ex.reply.status != 200:
            assert turn.role == "error", turn
            continue
        completion = ex.reply.message or {}
        message = completion["choices"][0]["message"]
        usage = completion["usage"]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        assert turn.role == "assistant", turn
        assert turn.text == (message.get("content") or "")
        assert (turn.tokens_in, turn.tokens_out, turn.cache_read) == (
            usage["prompt_tokens"] - cached, usage["completion_tokens"], cached)
        results = []
        for call in message.get("tool_calls") or []:
            call_turn, result = model_turns[pos], model_turns[pos + 1]
            pos += 2
            assert (call_turn.role, call_turn.tool) == ("tool_call", call["function"]["name"])
            try:
                assert call_turn.args == json.loads(call["function"]["arguments"])
            except json.JSONDecodeError:
                assert call_turn.args == {"raw": call["function"]["arguments"]}
            results.append((call["id"], result.result))
            if call["function"]["name"] == "submit_trial" and result.text != "error":
                results = []
                break
        pending = results
    assert pos == len(model_turns), model_turns[pos:]
    return checked
