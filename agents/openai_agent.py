"""The OpenAI-compatible backend: chat completions with function tools, through the ``openai`` SDK.

Why it exists: a vLLM server (``vllm serve MODEL --enable-auto-tool-choice --tool-call-parser
...``), or any endpoint speaking ``POST /v1/chat/completions``, can run the same agents as the
Anthropic backend, with the same tools and trace (:mod:`agents.llm.agent` owns the loop). This
module only speaks the wire format: ``tools`` of type ``function``, assistant ``tool_calls``
whose ``arguments`` are JSON text (invalid JSON goes back to the model as an error result), one
``role: tool`` message per result, streaming chunks with ``tool_calls`` deltas (with
``stream_options.include_usage`` so the last chunk carries the usage) or a whole completion.
Cached prompt tokens (``usage.prompt_tokens_details.cached_tokens``) are counted as cache reads.

Invariant: the SDK's retries are off; :class:`~agents.llm.agent.LLMAgent` retries 429, 5xx,
timeouts and connection errors itself and records each failed attempt as an ``agent.turn``.

Configuration: ``model`` (required), ``base_url`` (else ``OPENAI_BASE_URL``, else the public
API). The key comes from ``OPENAI_API_KEY`` (or ``params.api_key_env``); it is required for the
public API, and optional when a ``base_url`` names a self-hosted server (vLLM without
``--api-key``; set ``params.require_key: true`` to insist). ``temperature`` and ``max_tokens``
are sent as given (``params.max_tokens_field: max_completion_tokens`` for newer OpenAI models);
``params.seed`` is passed through for servers that honour it.
"""

from __future__ import annotations

from typing import Any

import openai

from agents.llm.agent import LLMAgent, ModelReply
from agents.llm.costs import Usage
from agents.llm.retries import Transient, parse_retry_after, transient_status
from agents.llm.settings import OpenAIParams
from agents.llm.tools import ToolCall, ToolResult, ToolSpec, parse_arguments
from rrma.contracts import AgentError
from rrma.task import AgentConfig, TaskConfig

NO_KEY = "EMPTY"  # what vLLM's docs pass when the server has no --api-key


class OpenAIAgent(LLMAgent):
    backend = "openai"
    params_model = OpenAIParams
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.max_tokens_field = str(self.params.get("max_tokens_field", "max_tokens"))
        if self.max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise AgentError(f"agent {self.name}: params.max_tokens_field must be max_tokens or max_completion_tokens")
        self.stream_usage = bool(self.params.get("stream_usage", True))
        try:
            self.client = openai.OpenAI(api_key=self.api_key or NO_KEY, base_url=self.base_url, max_retries=0,
                                        timeout=self.timeout_s)
        except Exception as exc:
            raise self.redactor.error(exc, f"agent {self.name}: cannot create the OpenAI client") from None

    def needs_key(self) -> bool:
        return self.base_url is None or bool(self.params.get("require_key", False))

    # -------------------------------------------------------------- conversation

    def start(self, instructions: str, task_text: str, files: str, context: str, tools: list[ToolSpec]) -> Any:
        return {
            "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                        "parameters": t.parameters}} for t in tools],
            "messages": [{"role": "system", "content": instructions + "\n" + task_text},
                         {"role": "user", "content": files + "\n\n" + context}],
        }

    def add_user(self, convo: Any, text: str) -> None:
        convo["messages"].append({"role": "user", "content": text})

    def add_reply(self, convo: Any, reply: ModelReply, results: list[ToolResult]) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.raw or "{}"}} for c in reply.calls]
        elif not reply.text:
            message["content"] = ""
        convo["messages"].append(message)
        for result in results:
            convo["messages"].append({"role": "tool", "tool_call_id": result.call.id, "content": result.text})

    # -------------------------------------------------------------- one call

    def _request(self, convo: Any) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "messages": convo["messages"], "tools": convo["tools"],
                                   "temperature": self.config.temperature,
                                   self.max_tokens_field: self.config.max_tokens}
        if "seed" in self.params:
            request["seed"] = int(self.params["seed"])
        return request

    def call(self, convo: Any) -> ModelReply:
        if self.stream:
            return self._call_streaming(convo)
        completion = self.client.chat.completions.create(**self._request(convo), stream=False)
        if not completion.choices:
            raise AgentError(f"agent {self.name}: the server returned a completion without choices")
        choice = completion.choices[0]
        message = choice.message
        calls = []
        for n, tc in enumerate(message.tool_calls or []):
            function = getattr(tc, "function", None)
            if function is None:
                continue
            raw = function.arguments or ""
            args, error = parse_arguments(raw)
            calls.append(ToolCall(tc.id or f"call_{n}", function.name, args, raw, error))
        return ModelReply(text=message.content or "", calls=calls, stop_reason=choice.finish_reason,
                          usage=_usage(completion.usage), model=str(completion.model or self.model))

    def _call_streaming(self, convo: Any) -> ModelReply:
        request = self._request(convo)
        if self.stream_usage:
            request["stream_options"] = {"include_usage": True}
        stream = self.client.chat.completions.create(**request, stream=True)
        text: list[str] = []
        partial: dict[int, dict[str, str]] = {}
        usage = Usage()
        stop_reason: str | None = None
        model = self.model
        try:
            for chunk in stream:
                if chunk.model:
                    model = str(chunk.model)
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                    for tc in (delta.tool_calls or []) if delta is not None else []:
                        entry = partial.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        if tc.id:
                            entry["id"] = tc.id
                        if tc.function is not None:
                            entry["name"] += tc.function.name or ""
                            entry["arguments"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        stop_reason = choice.finish_reason
        finally:
            stream.close()
        calls = []
        for index in sorted(partial):
            entry = partial[index]
            args, error = parse_arguments(entry["arguments"])
            calls.append(ToolCall(entry["id"] or f"call_{index}", entry["name"], args, entry["arguments"], error))
        return ModelReply(text="".join(text), calls=calls, stop_reason=stop_reason, usage=usage, model=model)

    # -------------------------------------------------------------- errors

    def transient(self, exc: Exception) -> Transient | None:
        return transient_error(exc)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:
            raise AgentError(self.redactor.text(f"closing the OpenAI client failed: {exc}")) from None


def transient_error(exc: Exception) -> Transient | None:
    """Whether an ``openai`` SDK error is worth retrying: timeouts, connection errors, 429, 408/409, 5xx."""
    if isinstance(exc, openai.APITimeoutError):
        return Transient("request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Transient("connection error")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers if exc.response is not None else None)
        return transient_status(status, retry_after)
    return None


def _usage(u: Any) -> Usage:
    if u is None:
        return Usage()
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return Usage(tokens_in=max(0, prompt - cached), tokens_out=int(getattr(u, "completion_tokens", 0) or 0),
                 cache_read=cached)
