"""The same agents against the real services, when a person asks for it (skipped otherwise).

These cost money or need a GPU server, so they run only when explicitly enabled:

* Anthropic: ``RRMA_LIVE_TESTS=1`` and ``ANTHROPIC_API_KEY`` (model: ``RRMA_LIVE_ANTHROPIC_MODEL``,
  default claude-haiku-4-5; cost capped at $0.05 per run).
* vLLM / OpenAI-compatible: ``RRMA_VLLM_BASE_URL`` (e.g. http://127.0.0.1:8000/v1) and
  ``RRMA_VLLM_MODEL`` (the served model name; start the server with
  ``--enable-auto-tool-choice --tool-call-parser <parser>``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_fixtures import LIVE_ENV, demo_task
from test_key_never_logged import leaks
from trace_check import agent_turns

from rrma.log.store import RunStore
from rrma.run.loop import start_run


def _check(result: Any, agent: str, secret: str | None) -> None:
    turns = agent_turns(RunStore(result.run_dir).scan().events, agent)
    assistants = [t for t in turns if t.role == "assistant"]
    assert assistants and all(t.tokens_out > 0 for t in assistants)
    if secret:
        assert leaks(result.run_dir, secret) == []


@pytest.mark.slow
@pytest.mark.skipif(not (LIVE_ENV.get("RRMA_LIVE_TESTS") == "1" and LIVE_ENV.get("ANTHROPIC_API_KEY")),
                    reason="live Anthropic test: set RRMA_LIVE_TESTS=1 and ANTHROPIC_API_KEY (spends up to $0.05)")
def test_live_anthropic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in LIVE_ENV.items():
        monkeypatch.setenv(name, value)
    model = LIVE_ENV.get("RRMA_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5")
    task = demo_task([{"name": "live", "backend": "anthropic", "model": model, "budget_usd": 0.05,
                       "max_tokens": 1024, "params": {"max_steps": 6}}], **{"budget.max_trials": 1})
    result = start_run(task, tmp_path, run_id="live-anthropic")
    _check(result, "live", LIVE_ENV.get("ANTHROPIC_API_KEY"))


@pytest.mark.slow
@pytest.mark.skipif(not (LIVE_ENV.get("RRMA_VLLM_BASE_URL") and LIVE_ENV.get("RRMA_VLLM_MODEL")),
                    reason="live vLLM test: set RRMA_VLLM_BASE_URL and RRMA_VLLM_MODEL to a running `vllm serve`")
def test_live_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if LIVE_ENV.get("OPENAI_API_KEY"):
        monkeypatch.setenv("OPENAI_API_KEY", LIVE_ENV["OPENAI_API_KEY"])
    task = demo_task([{"name": "live", "backend": "openai", "model": LIVE_ENV["RRMA_VLLM_MODEL"],
                       "base_url": LIVE_ENV["RRMA_VLLM_BASE_URL"], "max_tokens": 1024, "temperature": 0.2,
                       "params": {"max_steps": 6}}], **{"budget.max_trials": 1})
    result = start_run(task, tmp_path, run_id="live-vllm")
    _check(result, "live", LIVE_ENV.get("OPENAI_API_KEY"))
