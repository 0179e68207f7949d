"""The coding agents' stream parsers on the recorded formats (tests/fixtures/coding_agents/).

Pure logic: each fixture is rendered as its fake would print it (template variables filled,
directive lines left out) and fed to the parser line by line. What is checked is what the trace
will hold: the roles in order, every tool result matched to its call, tokens counted once per
API message, cost as the tool reported it (or estimated, and marked so), failures, and that no
line is dropped (not understood means kept raw).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from coding_fixtures import FIXTURES

from agents.coding.streams import (
    TEXT_CHARS,
    AiderStream,
    ClaudeStream,
    CodexStream,
    StreamParser,
    TextStream,
    clip_value,
    make_parser,
)
from agents.llm.costs import Price, price_for

VARS = {"cwd": "/work", "session": "s-1", "model": "claude-sonnet-4-5-20250929", "permission_mode": "bypassPermissions",
        "read_output": "     1\tX = 0.0", "run_output": "step: 2\nloss: 7.4", "path": "objective.py", "old": "X = 0.0",
        "new": "X = 1.7", "name": "X", "value": "1.7", "post_output": "posted", "n": "1", "attack_report": "{}",
        "key": "k", "key_sha256": "0", "rebase_output": "ok", "rebase_to": "t0001", "prompt_bytes": "10", "program": "objective.py"}


def render(tool: str, scenario: str) -> list[str]:
    text = tool in ("aider", "fake-agent")
    path = FIXTURES / tool / f"{scenario}.{'txt' if text else 'jsonl'}"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#fake ") or line.startswith('{"_fake"'):
            continue
        out.append(re.sub(r"\{\{(\w+)\}\}", lambda m: VARS[m.group(1)] if text else json.dumps(VARS[m.group(1)])[1:-1],
                          line))
    return out


def feed(parser: StreamParser, lines: list[str], finish: bool = True) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        out += parser.feed(line)
    return out + (parser.finish() if finish else [])


def shape(turns: list[dict[str, Any]]) -> list[str]:
    return [t["role"] + (f":{t['tool']}" if t.get("tool") else "") for t in turns]


SONNET = price_for("claude-sonnet-4-5")


def test_claude_code_edit_session() -> None:
    parser = ClaudeStream()
    turns = feed(parser, render("claude-code", "edit"))
    assert shape(turns) == [
        "system",  # init: session, model, tools, permission mode
        "assistant", "tool_call:Read",  # one API message printed as two lines (text, then tool_use)
        "tool_result:Read",
        "assistant", "tool_call:Bash", "tool_result:Bash",
        "assistant", "tool_call:Edit", "tool_result:Edit",
        "assistant", "tool_call:Bash", "tool_result:Bash",
        "assistant", "tool_call:Bash", "tool_result:Bash",  # rrma-post
        "assistant",  # the final message
        "system",  # result: success, the reported cost
    ]
    assert turns[2]["args"] == {"file_path": "/work/objective.py"}
    assert turns[3]["result"] == "     1\tX = 0.0"  # a tool result is in the trace (researchRalph's viewer dropped these)
    assert turns[8]["args"]["new_string"] == "X = 1.7"
    # tokens once per API message: msg_01Hb... is on two lines with the same usage
    assert parser.usage.tokens_in == 4 + 6 + 6 + 6 + 6 + 4 and parser.turns == 6
    assert turns[-1]["cost_usd"] == pytest.approx(0.0623415) and parser.cost_so_far == pytest.approx(0.0623415)
    assert sum(t.get("cost_usd", 0) for t in turns) == pytest.approx(0.0623415)  # the cost is recorded once
    assert parser.failure is None and "HYPOTHESIS: X = 1.7" in parser.final_text
    assert parser.raw_lines == 0


def test_claude_code_garbage_is_kept_raw() -> None:
    parser = ClaudeStream()
    turns = feed(parser, render("claude-code", "garbage"))
    raw = [t for t in turns if (t.get("args") or {}).get("unparsed") == "claude-code"]
    reasons = [t["args"]["why"] for t in raw]
    assert reasons == ["not a JSON object",  # a node warning
                       "not a JSON object",  # [1, 2, 3]: JSON, but not an object
                       "unknown type 'telemetry_flush'",
                       "not a JSON object",  # a line cut in the middle
                       "unknown user block"]  # an image block in a user message
    assert raw[0]["text"].startswith("(node:4242) ExperimentalWarning")
    assert "tool_result:Edit" in shape(turns) and parser.failure is None  # the rest still parses


def test_claude_code_failures_and_a_killed_run() -> None:
    no_key = ClaudeStream()
    turns = feed(no_key, render("claude-code", "no_key"))
    assert turns[-1]["role"] == "error" and "Invalid API key" in turns[-1]["text"]
    assert no_key.failure is not None and "Invalid API key" in no_key.failure
    # killed mid-run (a hang): no result line, so no reported cost; the tokens' cost is estimated, and marked
    hung = ClaudeStream(SONNET)
    turns = feed(hung, render("claude-code", "hang"))
    assert shape(turns) == ["system", "assistant", "system"]
    expected = (4 * 3.0 + 30 * 15.0 + 12143 * 0.3 + 1200 * 3.75) / 1e6
    assert turns[-1]["cost_usd"] == pytest.approx(expected) and turns[-1]["args"] == {"cost_estimated": True}
    # the price comes from the model the session reports when the task named none
    unnamed = ClaudeStream()
    feed(unnamed, render("claude-code", "hang"), finish=False)
    assert unnamed.cost_so_far == pytest.approx(expected)


def test_claude_code_turn_cap_result_is_a_failure() -> None:
    parser = ClaudeStream()
    feed(parser, [*render("claude-code", "chatty")[:1],
                  json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 4,
                              "total_cost_usd": 0.01, "errors": []})])
    assert parser.failure == "claude-code ended with error_max_turns"


def test_codex_session() -> None:
    parser = CodexStream(Price(1.25, 10.0, 0.125, 0.0), "gpt-5-codex")
    turns = feed(parser, render("codex", "edit"))
    assert shape(turns) == [
        "system",  # thread.started
        "assistant",  # reasoning
        "tool_call:shell", "tool_result:shell",  # cat objective.py (item.started, then item.completed)
        "tool_call:apply_patch", "tool_result:apply_patch",  # file_change: only a completed item
        "tool_call:shell", "tool_result:shell",  # python3 objective.py
        "tool_call:shell", "tool_result:shell",  # rrma-post
        "system",  # todo_list
        "assistant",  # agent_message
        "system",  # turn.completed: usage
    ]
    assert turns[2]["args"] == {"command": "bash -lc 'cat objective.py'"}
    assert turns[7]["result"] == "step: 2\nloss: 7.4" and turns[7]["args"]["exit_code"] == 0
    usage = turns[-1]
    assert (usage["tokens_in"], usage["cache_read"], usage["tokens_out"]) == (24763 - 24448, 24448, 122)
    assert usage["cost_usd"] == pytest.approx((315 * 1.25 + 24448 * 0.125 + 122 * 10.0) / 1e6)
    assert usage["args"]["cost_estimated"] is True  # codex reports tokens, never a cost
    assert parser.turns == 4 and parser.failure is None  # tool items: what the harness's turn cap counts


@pytest.mark.parametrize("line, role, why", [
    # an item type this parser does not know: kept raw
    ('{"type":"item.completed","item":{"id":"i","type":"collab_tool_call","tool":"spawn_agent"}}', "system",
     "unknown item type 'collab_tool_call'"),
    # an event type it does not know
    ('{"type":"token_count","input_tokens":5}', "system", "unknown type 'token_count'"),
    # a command that failed: the result is flagged as an error
    ('{"type":"item.completed","item":{"id":"i","type":"command_execution","command":"false","aggregated_output":"",'
     '"exit_code":1,"status":"failed"}}', "tool_result", None),
])
def test_codex_edge_lines(line: str, role: str, why: str | None) -> None:
    turns = CodexStream().feed(line)
    assert turns[-1]["role"] == role
    if why:
        assert turns[-1]["args"]["why"] == why
    else:
        assert turns[-1]["text"] == "error"


def test_codex_failure() -> None:
    parser = CodexStream()
    turns = feed(parser, render("codex", "crash"))
    assert shape(turns) == ["system", "error", "error"]
    assert parser.failure == "codex turn failed: exceeded retry limit, last status: 429 Too Many Requests"


def test_aider_session() -> None:
    parser = AiderStream(SONNET, "anthropic/claude-sonnet-4-5")
    turns = feed(parser, render("aider", "edit"))
    assert shape(turns) == ["system", "assistant", "tool_call:edit", "tool_result:edit"]
    banner, reply = turns[0], turns[1]
    assert banner["text"].startswith("Aider v0.86.1") and "Added objective.py to the chat." in banner["text"]
    assert "<<<<<<< SEARCH\nX = 0.0\n=======\nX = 1.7\n>>>>>>> REPLACE" in reply["text"]
    # "2.6k sent, 1.4k cache write, 212 received": sent includes the cache write
    assert (reply["tokens_in"], reply["cache_write"], reply["tokens_out"]) == (1200, 1400, 212)
    assert reply["cost_usd"] == pytest.approx(0.0094) and reply["args"]["cost_estimated"] is False
    assert turns[3]["result"] == "Applied edit to objective.py"
    assert parser.turns == 1 and "HYPOTHESIS: X = 1.7" in parser.final_text


@pytest.mark.parametrize("line, tokens", [
    ("Tokens: 3.0k sent, 42 received. Cost: $0.0063 message, $0.0063 session.", (3000, 0, 0, 42, 0.0063)),
    ("Tokens: 12,450 sent, 3,200 received. Cost: $0.052 message, $0.187 session.", (12450, 0, 0, 3200, 0.052)),
    # older aider said "request" where newer says "message"
    ("Tokens: 1,024 sent, 77 received. Cost: $0.01 request, $0.02 session.", (1024, 0, 0, 77, 0.01)),
    # no cost (a model aider has no price for): estimated from the tokens, here at price 0
    ("Tokens: 2.1k sent, 1.5k cache hit, 300 received.", (600, 1500, 0, 300, 0.0)),
])
def test_aider_usage_lines(line: str, tokens: tuple[int, int, int, int, float]) -> None:
    turn = AiderStream().feed(line)[-1]
    assert (turn["tokens_in"], turn["cache_read"], turn["cache_write"], turn["tokens_out"]) == tokens[:4]
    assert turn["cost_usd"] == pytest.approx(tokens[4])


def test_aider_errors() -> None:
    parser = AiderStream()
    turns = feed(parser, render("aider", "no_key"))
    assert shape(turns) == ["system", "error"]
    assert turns[1]["text"].startswith("aider: litellm.AuthenticationError")
    assert turns[1]["text"].endswith("not able to authenticate you. Check your API key.")  # its advice, same turn


# ----------------------------------------------------------------------------- recorded from the real tools
# offline.* were recorded here from Claude Code 2.1.197, Codex CLI 0.169.0 and aider 0.86.2 run with the
# presets' exact command lines and no network (see the fixtures' README).


def test_real_claude_code_offline() -> None:
    parser = ClaudeStream()
    turns = feed(parser, render("claude-code", "offline"), finish=False)
    assert shape(turns) == ["system", "error", "error", "error"]
    assert turns[0]["args"]["claude_code_version"] == "2.1.197" and turns[0]["args"]["model"] == "claude-opus-4-8[1m]"
    assert turns[1]["text"] == "claude-code: API call failed (unknown, status None); retry 1/10 in 0.6 s"
    assert parser.raw_lines == 0


def test_real_codex_offline() -> None:
    parser = CodexStream()
    turns = feed(parser, render("codex", "offline"), finish=False)
    assert shape(turns) == ["system", "error", "error", "error", "error", "error", "error"]
    assert turns[1]["text"].startswith("codex: Model metadata for `gpt-5-codex` not found")  # an error item
    assert turns[2]["text"].startswith("codex error: Reconnecting... 2/5")  # an error event (not fatal)
    assert parser.failure is None  # only turn.failed ends a turn


def test_real_aider_offline() -> None:
    parser = AiderStream()
    turns = feed(parser, render("aider", "offline"))
    assert shape(turns) == ["system", "system", "system", "error", "error", "error", "error"]  # 4 retries recorded
    assert turns[0]["text"] == "Analytics have been permanently disabled.\nWarning: Input is not a terminal (fd=0)."
    banner = turns[1]["text"].splitlines()
    assert banner[0].startswith("HTTPSConnectionPool(") and banner[1:] == [
        "Aider v0.86.2", "Model: anthropic/claude-haiku-4-5 with diff edit format, infinite output", "Git repo: none",
        "Repo-map: disabled", "Added objective.py to the chat."]
    assert parser.model == "anthropic/claude-haiku-4-5"
    assert turns[3]["text"] == ("aider: litellm.InternalServerError: AnthropicException - [Errno -2] Name or service not\n"
                                "known. Handle with `litellm.InternalServerError`.\n"
                                "The API provider's servers are down or overloaded.\nRetrying in 0.2 seconds...")


def test_text_stream_blocks_and_structured_lines() -> None:
    parser = TextStream()
    turns = feed(parser, render("fake-agent", "edit"))
    assert shape(turns) == ["assistant", "tool_call:edit", "tool_result:edit", "assistant", "assistant"]
    assert turns[0]["text"] == "fake-agent: read 10 bytes of instructions\nchanging objective.py: X = 0.0 -> X = 1.7"
    assert turns[3]["cost_usd"] == 0.0042 and parser.cost_so_far == pytest.approx(0.0042)
    wrong = parser.feed('{"role": "assistant", "tokens_in": "many"}')
    assert wrong[-1]["args"] == {"unparsed": "text", "why": "field 'tokens_in' has the wrong type"}
    many = feed(TextStream(), [f"line {i}" for i in range(100)])
    assert [len(t["text"].splitlines()) for t in many] == [40, 40, 20]


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "aider", "text"])
def test_every_format_keeps_lines_it_cannot_read(fmt: str) -> None:
    parser = make_parser(fmt)
    out = feed(parser, ["\x1b[31mgarbage\x1b[0m \ufffd", '{"type": "x-future-event", "v": 2}'])
    texts = " ".join(t.get("text", "") for t in out)
    assert "garbage" in texts and "x-future-event" in texts


def test_long_values_keep_their_head_and_tail() -> None:
    big = "head " + "x" * 100_000 + " tail"
    clipped = clip_value({"file_path": "a.py", "content": big, "nested": [big]})
    assert clipped["file_path"] == "a.py"
    for text in (clipped["content"], clipped["nested"][0]):
        assert len(text) <= TEXT_CHARS and text.startswith("head ") and text.endswith(" tail") and "characters cut" in text
