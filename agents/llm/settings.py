"""The LLM backends' params (``agents[].params``), as the anthropic and openai agents declare them (rrma/declare.py).

Why it exists: the loop's options are read in :mod:`agents.llm.agent` (and ``price`` in :mod:`agents.llm.costs`,
``edit_lines`` in :mod:`agents.llm.tools`), the wire options in each provider's module; one model here holds the
loop's, each provider extends it with its own, so a misspelt key (``max_step``) is refused when the task is loaded
instead of read by nobody. Invariant: each model takes exactly the keys its agent reads; the agent's own checks
when it is built stay (a task built in code, a recorded run), and ``api_key`` is never taken (below).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from rrma.declare import PluginSettings
from rrma.task import MAX_SEED
from rrma.workspace import MAX_FILE_BYTES


class PriceParams(PluginSettings):
    """``params.price``: USD per million tokens (a key left out costs 0)."""

    input: float = Field(0.0, ge=0)
    """Uncached input tokens."""
    output: float = Field(0.0, ge=0)
    """Output tokens."""
    cache_read: float = Field(0.0, ge=0)
    """Input tokens read from the prompt cache."""
    cache_write: float = Field(0.0, ge=0)
    """Input tokens written to the prompt cache."""


class LLMParams(PluginSettings):
    """The options of the tool-use loop every LLM backend runs (agents/llm/agent.py)."""

    max_steps: int = Field(12, ge=0, le=100_000)
    """Model calls per conversation."""
    attempts: int = Field(2, ge=0, le=1000)
    """Fresh conversations per proposal when one ends without a submission (0 counts as 1)."""
    stream: bool = Field(False, strict=True)
    """Stream responses (SSE) instead of one JSON reply."""
    retry_attempts: int = Field(6, ge=0, le=1000)
    """Tries per model call (rate limit, overload, timeout, 5xx; 0 counts as 1)."""
    retry_base_s: float = Field(1.0, ge=0)
    """First backoff (seconds); doubles each retry, with seeded jitter."""
    retry_max_s: float = Field(60.0, ge=0)
    """Backoff cap (seconds; a server's retry-after wins, capped by this)."""
    timeout_s: float = Field(600.0, gt=0)
    """Timeout of one request (seconds)."""
    max_file_chars: int = Field(60_000, ge=0, le=MAX_FILE_BYTES)
    """Characters of each file in the prompt (longer files: read_file ranges)."""
    memory: int = Field(8, ge=0, le=100_000)
    """Own earlier proposals kept in the summary (history runs)."""
    price: PriceParams | None = None
    """USD per million tokens, {input, output, cache_read, cache_write} (a key left out: 0), overriding the model's built-in list price (None: the list)."""
    api_key_env: str | None = None
    """The environment variable holding the key (default: the backend's, ANTHROPIC_API_KEY or OPENAI_API_KEY)."""
    api_key: Any = None
    """Never set it: refused when the agent is built, before a run directory exists, with its own message (a key in the task file would be copied into run.json and the log); set the backend's variable, or name one with api_key_env."""
    role_prompt: str | None = None
    """What the agent's role covers, shown to the model."""
    edit_lines: list[str] | None = None
    """Regular expressions: a specialist may change only lines matching one (None: any line)."""

    @field_validator("edit_lines")
    @classmethod
    def _patterns_compile(cls, value: list[str] | None) -> list[str] | None:
        for text in value or []:
            try:
                re.compile(text)
            except re.error as exc:
                raise ValueError(f"{text!r} is not a valid regular expression ({exc})") from None
        return value


class AnthropicParams(LLMParams):
    """``agents[].params`` of the anthropic backend: the loop's, and the Messages API's own."""

    cache: bool = Field(True, strict=True)
    """Mark the static parts of the prompt (and the newest turn) with cache_control breakpoints."""
    send_temperature: bool = Field(False, strict=True)
    """Send agents[].temperature (API version 2026-10-21 rejects sampling parameters; for proxies that still take it)."""
    anthropic_version: str | None = None
    """The anthropic-version header (default: the SDK's)."""


class OpenAIParams(LLMParams):
    """``agents[].params`` of the openai backend: the loop's, and chat completions' own."""

    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """The request field agents[].max_tokens is sent as (max_completion_tokens for newer OpenAI models)."""
    stream_usage: bool = Field(True, strict=True)
    """Ask for the usage chunk when streaming (a server that sends none leaves tokens and cost at 0: the caps cannot bite)."""
    require_key: bool = Field(False, strict=True)
    """Insist on a key even with a base_url (a vLLM server started with --api-key)."""
    seed: int = Field(None, ge=0, le=MAX_SEED)  # type: ignore[assignment]  # absent: not sent (the agent reads a given seed as an int)
    """Sent as the request's seed, for servers that honour it (default: not sent)."""
