"""The Anthropic backend: the Messages API with client-side tools, through the ``anthropic`` SDK.

Why it exists: to let Claude models take part in a run with exactly the tools and trace of every
other LLM agent (:mod:`agents.llm.agent` owns the loop). This module only speaks the wire format:
``system`` blocks, ``tools`` and the parent's files (the static parts, marked with
``cache_control`` so repeated proposals read them from the prompt cache; the newest turn is
marked too, so the calls within one proposal reuse the conversation so far), ``tool_use`` blocks out and ``tool_result`` blocks
back, streaming (``message_start`` / ``content_block_*`` with ``input_json_delta`` /
``message_delta``) or not, and the usage fields (``input_tokens``, ``output_tokens``,
``cache_read_input_tokens``, ``cache_creation_input_tokens``).

Invariant: the SDK's own retries are off (``max_retries=0``); :class:`~agents.llm.agent.LLMAgent`
retries rate limits (429), overload (529, or an ``overloaded_error`` event mid-stream), timeouts
and 5xx itself, so every failed attempt is a visible ``agent.turn`` of role ``error``.

Configuration: ``model`` (required), ``base_url`` (else ``ANTHROPIC_BASE_URL``, else the public
API), the key from ``ANTHROPIC_API_KEY`` (or the variable named by ``params.api_key_env``),
``max_tokens``. API version 2026-10-21 rejects sampling parameters, so ``temperature`` is sent
only with ``params.send_temperature: true`` (for proxies that still accept it).
``params.anthropic_version`` overrides the ``anthropic-version`` header; ``params.cache: false``
turns prompt caching off.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from agents.llm.agent import LLMAgent, ModelReply
from agents.llm.costs import Usage
from agents.llm.retries import Transient, parse_retry_after, transient_status
from agents.llm.settings import AnthropicParams
from agents.llm.tools import ToolCall, ToolResult, ToolSpec, parse_arguments
from rrma.contracts import AgentError
from rrma.task import AgentConfig, TaskConfig

EPHEMERAL = {"type": "ephemeral"}
TRANSIENT_ERROR_TYPES = {"overloaded_error": "overloaded", "rate_limit_error": "rate limited",
                         "api_error": "server error", "timeout_error": "timeout"}


class AnthropicAgent(LLMAgent):
    backend = "anthropic"
    params_model = AnthropicParams
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.cache = bool(self.params.get("cache", True))
        self.send_temperature = bool(self.params.get("send_temperature", False))
        headers = {}
        if self.params.get("anthropic_version"):
            headers["anthropic-version"] = str(self.params["anthropic_version"])
        try:
            self.client = anthropic.Anthropic(api_key=self.api_key, base_url=self.base_url, max_retries=0,
                                              timeout=self.timeout_s, default_headers=headers or None)
        except Exception as exc:  # the SDK validates credentials and the URL here
            raise self.redactor.error(exc, f"agent {self.name}: cannot create the Anthropic client") from None

    # -------------------------------------------------------------- conversation

    def start(self, instructions: str, task_text: str, files: str, context: str, tools: list[ToolSpec]) -> Any:
        cache = {"cache_control": EPHEMERAL} if self.cache else {}
        tool_params: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
        ]
        if tool_params:
            tool_params[-1].update(cache)
        return {
            "system": [{"type": "text", "text": instructions}, {"type": "text", "text": task_text, **cache}],
            "tools": tool_params,
            "messages": [{"role": "user", "content": [{"type": "text", "text": files, **cache},
                                                      {"type": "text", "text": context}]}],
        }

    def add_user(self, convo: Any, text: str) -> None:
        convo["messages"].append({"role": "user", "content": [{"type": "text", "text": text}]})

    def add_reply(self, convo: Any, reply: ModelReply, results: list[ToolResult]) -> None:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.calls:
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
        if not content:
            content.append({"type": "text", "text": "(no output)"})
        convo["messages"].append({"role": "assistant", "content": content})
        if results:
            convo["messages"].append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": r.call.id, "content": r.text, "is_error": r.is_error}
                for r in results
            ]})

    # -------------------------------------------------------------- one call

    def _request(self, convo: Any) -> dict[str, Any]:
        messages = convo["messages"]
        if self.cache and len(messages) > 1:
            # a 4th (and last allowed) breakpoint on the newest turn: later calls of this proposal
            # read the conversation so far from the cache. Marked on a copy so that only the
            # newest turn of each request carries it.
            last = messages[-1]
            blocks = [dict(b) for b in last["content"]]
            blocks[-1]["cache_control"] = EPHEMERAL
            messages = [*messages[:-1], {**last, "content": blocks}]
        request: dict[str, Any] = {
            "model": self.model, "max_tokens": self.config.max_tokens, "system": convo["system"],
            "tools": convo["tools"], "messages": messages,
        }
        if self.send_temperature:
            request["extra_body"] = {"temperature": self.config.temperature}
        return request

    def call(self, convo: Any) -> ModelReply:
        if self.stream:
            return self._call_streaming(convo)
        message = self.client.messages.create(**self._request(convo))
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)  # type: ignore[union-attr]
            elif kind == "tool_use":
                raw_input = getattr(block, "input", None)
                raw = json.dumps(raw_input, sort_keys=True, ensure_ascii=False)
                if isinstance(raw_input, dict):
                    calls.append(ToolCall(block.id, block.name, raw_input, raw))  # type: ignore[union-attr]
                else:
                    calls.append(ToolCall(block.id, block.name, {}, raw,  # type: ignore[union-attr]
                                          f"the input must be a JSON object, got {type(raw_input).__name__}"))
        return ModelReply(text="".join(texts), calls=calls, stop_reason=message.stop_reason,
                          usage=_usage(message.usage), model=str(message.model))

    def _call_streaming(self, convo: Any) -> ModelReply:
        blocks: dict[int, dict[str, Any]] = {}
        usage = Usage()
        stop_reason: str | None = None
        model = self.model
        stream = self.client.messages.create(**self._request(convo), stream=True)
        try:
            for event in stream:
                kind = event.type
                if kind == "message_start":
                    usage = _usage(event.message.usage)
                    model = str(event.message.model)
                elif kind == "content_block_start":
                    block = event.content_block
                    entry: dict[str, Any] = {"type": block.type, "text": "", "json": ""}
                    if block.type == "tool_use":
                        entry.update(id=block.id, name=block.name)
                    blocks[event.index] = entry
                elif kind == "content_block_delta":
                    entry = blocks.setdefault(event.index, {"type": "unknown", "text": "", "json": ""})
                    delta = event.delta
                    if delta.type == "text_delta":
                        entry["text"] += delta.text
                    elif delta.type == "input_json_delta":
                        entry["json"] += delta.partial_json
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason
                    u = event.usage
                    usage.tokens_out = u.output_tokens
                    if getattr(u, "input_tokens", None) is not None:
                        usage.tokens_in = int(u.input_tokens)
                    if getattr(u, "cache_read_input_tokens", None) is not None:
                        usage.cache_read = int(u.cache_read_input_tokens)
                    if getattr(u, "cache_creation_input_tokens", None) is not None:
                        usage.cache_write = int(u.cache_creation_input_tokens)
        finally:
            stream.close()
        texts = []
        calls = []
        for index in sorted(blocks):
            entry = blocks[index]
            if entry["type"] == "text":
                texts.append(entry["text"])
            elif entry["type"] == "tool_use":
                args, error = parse_arguments(entry["json"])
                calls.append(ToolCall(entry["id"], entry["name"], args, entry["json"], error))
        return ModelReply(text="".join(texts), calls=calls, stop_reason=stop_reason, usage=usage, model=model)

    # -------------------------------------------------------------- errors

    def transient(self, exc: Exception) -> Transient | None:
        return transient_error(exc)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception as exc:  # closing must not hide the run's real outcome
            raise AgentError(self.redactor.text(f"closing the Anthropic client failed: {exc}")) from None


def transient_error(exc: Exception) -> Transient | None:
    """Whether an ``anthropic`` SDK error is worth retrying: timeouts, connection errors, 429, 529/overloaded, 5xx."""
    if isinstance(exc, anthropic.APITimeoutError):
        return Transient("request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return Transient("connection error")
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers if exc.response is not None else None)
        error_type = _error_type(exc.body)
        if status == 200 and error_type in TRANSIENT_ERROR_TYPES:  # an `error` event inside a 200 stream
            return Transient(f"{TRANSIENT_ERROR_TYPES[error_type]} (error event in the stream)", retry_after)
        if status != 429 and (status == 529 or error_type == "overloaded_error"):
            return Transient(f"overloaded ({status})", retry_after)
        return transient_status(status, retry_after)
    return None


def _usage(u: Any) -> Usage:
    return Usage(tokens_in=int(getattr(u, "input_tokens", 0) or 0), tokens_out=int(getattr(u, "output_tokens", 0) or 0),
                 cache_read=int(getattr(u, "cache_read_input_tokens", 0) or 0),
                 cache_write=int(getattr(u, "cache_creation_input_tokens", 0) or 0))


def _error_type(body: Any) -> str | None:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("type"), str):
            return err["type"]
    return None
