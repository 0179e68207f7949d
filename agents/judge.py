"""The audit judge's model calls: one completion, (system, user) -> reply text, over the LLM backends.

Why it exists: the judge (rrma/audit/judge.py, :class:`~rrma.audit.judge.ModelJudge`) is core code
and imports no plug-in; it is handed a ``complete`` callable. This module makes that callable for
the backends the agents already speak, with the agents' own key handling, endpoint resolution,
retry policy and redaction (:mod:`agents.llm`, :mod:`agents.anthropic_agent`,
:mod:`agents.openai_agent`): ``rrma.plugins.make_judge("anthropic" | "openai", model)`` resolves
:func:`anthropic_completer` or :func:`openai_completer` by name.

Configuration, as for the agents: the endpoint is ``endpoint`` (``make_judge(..., endpoint=URL)``),
else ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` (a vLLM server: ``http://host:8000/v1``), else the
SDK's public API. The key comes from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` (or the variable
named by ``api_key_env``), never from a file or an argument; an OpenAI-compatible endpoint other
than the public API needs no key (vLLM without ``--api-key``). The OpenAI request asks for
``temperature`` 0; the Anthropic one sends no sampling parameters (see agents/anthropic_agent.py).

Invariants: the SDKs' own retries are off; a rate limit, overload, timeout, connection error or 5xx
is retried here with the agents' backoff (:class:`~agents.llm.retries.RetryPolicy`), anything else
raises at once. What is raised is an :class:`~rrma.contracts.AgentError` whose text went through
the :class:`~agents.llm.redaction.Redactor`: no key reaches an error line or the run log.
"""

from __future__ import annotations

import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import anthropic
import openai

from agents import anthropic_agent, openai_agent
from agents.llm.redaction import Redactor
from agents.llm.retries import RetryPolicy, Transient
from rrma.contracts import AgentError


class JudgeCompleter(ABC):
    """A ``complete(system, user) -> str`` callable for one model on one endpoint, with retries."""

    backend = ""
    key_env = ""
    base_url_env = ""

    def __init__(self, model: str, *, endpoint: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 300.0, max_tokens: int = 4096, retry_attempts: int = 4, retry_base_s: float = 1.0,
                 retry_max_s: float = 30.0, seed: int = 0) -> None:
        if not model:
            raise AgentError(f"judge backend {self.backend} needs a model")
        self.model = model
        self.key_env = api_key_env or self.key_env
        self.api_key = os.environ.get(self.key_env) or None
        self.endpoint = endpoint or os.environ.get(self.base_url_env) or None
        self.endpoint_from = "the endpoint given" if endpoint else self.base_url_env if self.endpoint else "the SDK's default"
        self.redactor = Redactor([self.api_key])
        if self.api_key is None and self.needs_key():
            raise AgentError(f"judge backend {self.backend}: no API key: set {self.key_env} in the environment "
                             f"(or point {self.base_url_env} at a server that needs none)")
        self.timeout_s = float(timeout_s)
        self.max_tokens = int(max_tokens)
        self.retry = RetryPolicy(attempts=max(1, int(retry_attempts)), base_s=float(retry_base_s),
                                 max_s=float(retry_max_s), rng=random.Random(seed))
        self.sleep: Callable[[float], None] = time.sleep
        self.calls = 0  # model calls made, failed attempts included
        self.retries: list[str] = []  # why each retry happened

    def needs_key(self) -> bool:
        return True

    def describe(self) -> str:
        """The backend, model and endpoint (no key), for a line saying which judge ran."""
        return self.redactor.text(f"{self.backend} {self.model} at {self.endpoint or 'the public API'}")

    @abstractmethod
    def _call(self, system: str, user: str) -> str: ...

    @abstractmethod
    def _transient(self, exc: Exception) -> Transient | None: ...

    def __call__(self, system: str, user: str) -> str:
        attempt = 0
        while True:
            self.calls += 1
            try:
                return self._call(system, user)
            except AgentError:
                raise
            except Exception as exc:  # the SDK's errors: sorted into retried and final below
                transient = self._transient(exc)
                if transient is None or attempt + 1 >= self.retry.attempts:
                    what = f"judge {self.backend} {self.model}: model call failed"
                    if transient is not None:
                        what += f" after {self.retry.attempts} attempts"
                    raise self.redactor.error(exc, what) from None
                delay = self.retry.delay(attempt, transient.retry_after)
                self.retries.append(f"{transient.reason}; retry {attempt + 1} in {delay:.2f}s")
                self.sleep(delay)
                attempt += 1

    def close(self) -> None:
        client: Any = getattr(self, "client", None)
        if client is not None:
            client.close()


class AnthropicCompleter(JudgeCompleter):
    backend = anthropic_agent.AnthropicAgent.backend
    key_env = anthropic_agent.AnthropicAgent.key_env
    base_url_env = anthropic_agent.AnthropicAgent.base_url_env

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        try:
            self.client = anthropic.Anthropic(api_key=self.api_key, base_url=self.endpoint, max_retries=0,
                                              timeout=self.timeout_s)
        except Exception as exc:  # the SDK validates credentials and the URL here
            raise self.redactor.error(exc, "judge anthropic: cannot create the Anthropic client") from None

    def _call(self, system: str, user: str) -> str:
        message = self.client.messages.create(model=self.model, max_tokens=self.max_tokens, system=system,
                                              messages=[{"role": "user", "content": user}])
        return "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", None) == "text")

    def _transient(self, exc: Exception) -> Transient | None:
        return anthropic_agent.transient_error(exc)


class OpenAICompleter(JudgeCompleter):
    backend = openai_agent.OpenAIAgent.backend
    key_env = openai_agent.OpenAIAgent.key_env
    base_url_env = openai_agent.OpenAIAgent.base_url_env

    def __init__(self, model: str, *, max_tokens_field: str = "max_tokens", **options: Any) -> None:
        super().__init__(model, **options)
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise AgentError("judge openai: max_tokens_field must be max_tokens or max_completion_tokens")
        self.max_tokens_field = max_tokens_field
        try:
            self.client = openai.OpenAI(api_key=self.api_key or openai_agent.NO_KEY, base_url=self.endpoint,
                                        max_retries=0, timeout=self.timeout_s)
        except Exception as exc:
            raise self.redactor.error(exc, "judge openai: cannot create the OpenAI client") from None

    def needs_key(self) -> bool:
        return self.endpoint is None  # the public API; a self-hosted server (vLLM) may have no key

    def _call(self, system: str, user: str) -> str:
        request: dict[str, Any] = {"model": self.model, "temperature": 0.0, self.max_tokens_field: self.max_tokens,
                                   "messages": [{"role": "system", "content": system},
                                                {"role": "user", "content": user}]}
        completion = self.client.chat.completions.create(**request, stream=False)
        if not completion.choices:
            raise AgentError(f"judge openai {self.model}: the server returned a completion without choices")
        return completion.choices[0].message.content or ""

    def _transient(self, exc: Exception) -> Transient | None:
        return openai_agent.transient_error(exc)


def anthropic_completer(model: str, *, endpoint: str | None = None, **options: Any) -> AnthropicCompleter:
    """The Anthropic Messages API as a judge completer (``rrma.plugins.make_judge("anthropic", model)``)."""
    return AnthropicCompleter(model, endpoint=endpoint, **options)


def openai_completer(model: str, *, endpoint: str | None = None, **options: Any) -> OpenAICompleter:
    """An OpenAI-compatible chat-completions endpoint (OpenAI, vLLM) as a judge completer."""
    return OpenAICompleter(model, endpoint=endpoint, **options)
