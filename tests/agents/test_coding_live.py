"""The real coding agents (Claude Code, Codex CLI, aider), when they are installed.

``test_live_coding_agent`` costs money and needs the network, so it runs only with
``RRMA_LIVE_TESTS=1``, the tool on ``PATH`` and its key in the environment; the skip reason says
which of those is missing. One trial, at most $0.10 and 8 turns. What is checked is what the
fakes cannot prove: the real tool runs inside the sandbox with its key, its real stream becomes a
trace with tokens and tool results, and the key is nowhere in the run directory.

``test_installed_tool_starts_in_the_sandbox`` needs only the tool on ``PATH`` (no key, no network,
no money: a made-up key): the installed version accepts the preset's exact command line, starts
inside the sandbox and speaks the stream format the parser reads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from coding_fixtures import FAKES, demo_task, leaks, turns

from rrma.run.loop import start_run

# captured at import, before the autouse fixtures clean the environment
LIVE = {k: v for k, v in os.environ.items() if k in ("RRMA_LIVE_TESTS", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                                      "CODEX_API_KEY", "RRMA_LIVE_CLAUDE_MODEL",
                                                      "RRMA_LIVE_CODEX_MODEL", "RRMA_LIVE_AIDER_MODEL")}
TOOLS = {  # backend: (program, key variables (any), default model, model variable)
    "claude-code": ("claude", ("ANTHROPIC_API_KEY",), "claude-haiku-4-5", "RRMA_LIVE_CLAUDE_MODEL"),
    "codex": ("codex", ("CODEX_API_KEY", "OPENAI_API_KEY"), "gpt-5-codex-mini", "RRMA_LIVE_CODEX_MODEL"),
    "aider": ("aider", ("ANTHROPIC_API_KEY",), "anthropic/claude-haiku-4-5", "RRMA_LIVE_AIDER_MODEL"),
}


def missing(backend: str) -> list[str]:
    program, keys, _, _ = TOOLS[backend]
    out = []
    if LIVE.get("RRMA_LIVE_TESTS") != "1":
        out.append("RRMA_LIVE_TESTS=1 is not set")
    found = shutil.which(program)
    if found is None:
        out.append(f"`{program}` is not on PATH")
    elif Path(found).resolve().parent == FAKES:
        out.append(f"`{program}` on PATH is the fake of tests/agents/fakes")
    if not any(LIVE.get(k) for k in keys):
        out.append(f"{' or '.join(keys)} is not set")
    return out


def skip_reason(backend: str) -> str:
    return f"live {backend} test (spends up to $0.10): " + "; ".join(missing(backend))


@pytest.mark.slow
@pytest.mark.parametrize("backend", [
    pytest.param(b, marks=pytest.mark.skipif(bool(missing(b)), reason=skip_reason(b))) for b in TOOLS])
def test_live_coding_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    for name, value in LIVE.items():
        monkeypatch.setenv(name, value)
    _, keys, model, model_var = TOOLS[backend]
    agent = {"name": "live", "backend": backend, "model": LIVE.get(model_var, model), "budget_usd": 0.10,
             "coding": {"max_turns": 8, "seconds": 300, "attempts": 1}}
    if backend == "codex":
        agent["params"] = {"price": {"input": 1.25, "output": 10.0, "cache_read": 0.125}}
    result = start_run(demo_task([agent], **{"budget.max_trials": 1}), tmp_path, run_id=f"live-{backend}")
    trace = turns(result.run_dir, "live")
    assert any(t.role == "assistant" and (t.tokens_in or t.tokens_out or t.text) for t in trace)
    assert sum(t.tokens_in + t.tokens_out + t.cache_read for t in trace) > 0
    assert any(t.role == "tool_result" and t.result for t in trace)  # the tool's own tool results, in the trace
    for key in (LIVE[k] for k in keys if LIVE.get(k)):
        assert leaks(result.run_dir, key) == []


BOGUS = {"claude-code": ("ANTHROPIC_API_KEY", "sk-ant-bogus-0123456789abcdefLIVE"),
         "codex": ("CODEX_API_KEY", "sk-proj-bogus0123456789abcdefLIVE"),
         "aider": ("ANTHROPIC_API_KEY", "sk-ant-bogus-0123456789abcdefLIVE")}
FIRST = {"claude-code": "claude-code session ", "codex": "codex thread ", "aider": "Aider v"}


def installed(backend: str) -> str | None:
    found = shutil.which(TOOLS[backend][0])
    return found if found and Path(found).resolve().parent != FAKES else None


@pytest.mark.slow
@pytest.mark.parametrize("backend", [
    pytest.param(b, marks=pytest.mark.skipif(installed(b) is None, reason=f"`{TOOLS[b][0]}` (the real {b}) is not on "
                                                                           "PATH")) for b in TOOLS])
def test_installed_tool_starts_in_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    variable, key = BOGUS[backend]
    monkeypatch.setenv(variable, key)
    agent = {"name": "real", "backend": backend, "model": TOOLS[backend][2],
             "coding": {"seconds": 30 if backend == "aider" else 8, "attempts": 1, "max_turns": 2}}  # aider imports slowly
    result = start_run(demo_task([agent], **{"budget.max_trials": 1}), tmp_path, run_id=f"installed-{backend}")
    trace = turns(result.run_dir, "real")
    said = "\n".join(t.text for t in trace)
    assert FIRST[backend] in said, said[-3000:]  # the tool started and spoke its format
    for refusal in ("unknown option", "unexpected argument", "unrecognized arguments", "Usage:", "bwrap:"):
        assert refusal not in said, said[-3000:]
    assert leaks(result.run_dir, key) == []
