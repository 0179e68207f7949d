"""A local HTTP server speaking the Anthropic Messages and OpenAI chat-completions wire protocols.

Tests script it with the responses a model would give (in the real response format) and point
the real ``anthropic`` / ``openai`` clients at it through ``base_url``. A scripted *message*
is served as JSON, or as a server-sent-event stream when the request asks for ``stream: true``
(Anthropic: ``message_start``, ``content_block_start``, ``content_block_delta`` with
``text_delta`` / ``input_json_delta``, ``content_block_stop``, ``message_delta``,
``message_stop``; OpenAI: ``chat.completion.chunk`` objects with ``tool_calls`` deltas, a usage
chunk, then ``[DONE]``). Errors (429, 529, 401...) are served as the APIs send them. Every
request is recorded (path, headers, JSON body) together with what was served, so tests can
compare the run log with the messages actually exchanged.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# ----------------------------------------------------------------------------- scripted replies


@dataclass
class Reply:
    """One scripted response. ``message`` is a model reply in the provider's JSON format; when
    it is set, the server serves it as JSON or as SSE depending on the request's ``stream``."""

    message: dict[str, Any] | None = None
    status: int = 200
    body: dict[str, Any] | None = None  # an error body (or any JSON) served as is
    headers: dict[str, str] = field(default_factory=dict)
    raw_json: dict[int, str] = field(default_factory=dict)  # block index -> tool input JSON text to stream
    stream_error: dict[str, Any] | None = None  # Anthropic: an `error` event after message_start
    delay_s: float = 0.0  # wait this long before answering (client timeouts)

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "status": self.status, "body": self.body, "headers": self.headers,
                "raw_json": {str(k): v for k, v in self.raw_json.items()}, "stream_error": self.stream_error,
                "delay_s": self.delay_s}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reply:
        return cls(message=data.get("message"), status=int(data.get("status", 200)), body=data.get("body"),
                   headers=dict(data.get("headers") or {}),
                   raw_json={int(k): v for k, v in (data.get("raw_json") or {}).items()},
                   stream_error=data.get("stream_error"), delay_s=float(data.get("delay_s", 0.0)))


# ----------------------------------------------------------------------------- Anthropic format

_counter = {"n": 0}


def _next_id(prefix: str) -> str:
    _counter["n"] += 1
    return f"{prefix}{_counter['n']:04d}"


def a_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def a_tool(name: str, args: dict[str, Any], tool_id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id or _next_id("toolu_"), "name": name, "input": args}


def a_message(*blocks: dict[str, Any], stop: str | None = None, tokens_in: int = 1200, tokens_out: int = 80,
              cache_read: int = 0, cache_write: int = 0, model: str = "claude-sonnet-test",
              msg_id: str | None = None) -> dict[str, Any]:
    has_tool = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": msg_id or _next_id("msg_"), "type": "message", "role": "assistant", "model": model,
        "content": list(blocks), "stop_reason": stop or ("tool_use" if has_tool else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out, "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write},
    }


def a_error(status: int, kind: str, message: str, retry_after: float | None = None) -> Reply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Reply(status=status, body={"type": "error", "error": {"type": kind, "message": message}},
                 headers={**headers, "request-id": "req_test"})


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def anthropic_sse(reply: Reply, chunk: int = 11) -> list[tuple[str, dict[str, Any]]]:
    msg = reply.message or {}
    usage = msg.get("usage", {})
    start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}),
                                                ("ping", {"type": "ping"})]
    if reply.stream_error is not None:
        events.append(("error", {"type": "error", "error": reply.stream_error}))
        return events
    for index, block in enumerate(msg.get("content", [])):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            for piece in _pieces(block["text"], chunk):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "text_delta", "text": piece}}))
        elif block["type"] == "tool_use":
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            raw = reply.raw_json.get(index, json.dumps(block["input"]))
            for piece in _pieces(raw, chunk):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
                                     "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# ----------------------------------------------------------------------------- OpenAI format


def o_call(name: str, args: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id or _next_id("call_"), "type": "function", "function": {"name": name, "arguments": raw}}


def o_completion(text: str | None = None, calls: list[dict[str, Any]] | None = None, *, prompt: int = 1500,
                 completion: int = 90, cached: int = 0, model: str = "qwen-test",
                 finish: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": _next_id("chatcmpl-"), "object": "chat.completion", "created": 1767600000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish or ("tool_calls" if calls else "stop"),
                     "logprobs": None}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


def o_error(status: int, message: str, kind: str = "server_error") -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": kind, "param": None, "code": None}})


def openai_chunks(completion: dict[str, Any], include_usage: bool, chunk: int = 9) -> list[dict[str, Any]]:
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    choice = completion["choices"][0]
    message = choice["message"]
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    for piece in _pieces(message.get("content") or "", chunk) if message.get("content") else []:
        out.append({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [{
            "index": i, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}}]}}]})
        for piece in _pieces(call["function"]["arguments"], chunk):
            out.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [{
                "index": i, "function": {"arguments": piece}}]}}]})
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    if include_usage:
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


# ----------------------------------------------------------------------------- the server


@dataclass
class Exchange:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    reply: Reply
    streamed: bool


class WireServer:
    """Threaded HTTP server on 127.0.0.1 with a queue of scripted replies per path."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[Reply]] = {"/v1/messages": deque(), "/v1/chat/completions": deque()}
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                with server.lock:
                    queue = server.queues.get(self.path)
                    reply = queue.popleft() if queue else None
                    streamed = bool(body.get("stream")) and reply is not None and reply.status == 200
                    server.exchanges.append(Exchange(self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                                     reply or Reply(status=500), streamed))
                if reply is not None and reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self._answer(reply, body, streamed)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _answer(self, reply: Reply | None, body: dict[str, Any], streamed: bool) -> None:
                if reply is None:
                    self._json(500, {"type": "error", "error": {"type": "api_error",
                                                               "message": f"script exhausted for {self.path}"}}, {})
                elif reply.status != 200 or reply.message is None:
                    self._json(reply.status, reply.body or {}, reply.headers)
                elif streamed:
                    self._sse(reply, body)
                else:
                    self._json(200, reply.message, reply.headers)

            def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, reply: Reply, request: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                if self.path == "/v1/messages":
                    for event, data in anthropic_sse(reply):
                        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                else:
                    include = bool((request.get("stream_options") or {}).get("include_usage"))
                    for data in openai_chunks(reply.message or {}, include):
                        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="wire-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, path: str, replies: list[Reply | dict[str, Any]]) -> None:
        with self.lock:
            for reply in replies:
                self.queues[path].append(reply if isinstance(reply, Reply) else Reply(message=reply))

    def remaining(self, path: str) -> int:
        with self.lock:
            return len(self.queues[path])

    def __enter__(self) -> WireServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
