"""Coding agents' output streams, line by line, as ``agent.turn`` payloads (the trace).

Why it exists: a coding agent (Claude Code, Codex CLI, aider, any command) reports its work on
stdout in its own format; the harness's trace, search and filters know one shape, the
``agent.turn`` event (:class:`rrma.log.events.AgentTurnData`). Each parser here turns one tool's
lines into those payloads as the lines arrive, so the TUI shows a running agent live.

Formats (recorded examples and their sources: tests/fixtures/coding_agents/README.md):

* ``claude-code``: ``claude -p --output-format stream-json --verbose``, one JSON object a line:
  ``system`` (subtype ``init``: session, model, tools, permission mode), ``assistant`` (an API
  message: ``text``, ``thinking`` and ``tool_use`` blocks, ``usage``), ``user`` (``tool_result``
  blocks with ``is_error``), ``result`` (subtype ``success`` or ``error_*``, ``num_turns``,
  ``total_cost_usd``, ``usage``).
* ``codex``: ``codex exec --json``: ``thread.started``, ``turn.started``, ``item.started`` /
  ``item.updated`` / ``item.completed`` (items ``agent_message``, ``reasoning``,
  ``command_execution`` with ``aggregated_output`` and ``exit_code``, ``file_change``,
  ``mcp_tool_call``, ``web_search``, ``todo_list``, ``error``), ``turn.completed`` (``usage``:
  input, cached input and output tokens; no cost), ``turn.failed``, ``error``.
* ``aider``: plain text from ``aider --message ... --no-pretty``: a banner, the model's reply
  (with its SEARCH/REPLACE blocks), ``Tokens: N sent, M received. Cost: $X message, $Y session.``
  after each model call, ``Applied edit to PATH`` per edited file, error lines.
* ``text``: any other program: its output as assistant text, in blocks. A line that is a JSON
  object with a ``role`` of the trace (``{"role": "tool_call", "tool": ..., "args": {...}}``)
  becomes that turn, so a wrapper can write a structured trace.

Invariants: no line is dropped. A line a parser does not understand (not JSON, an unknown
``type``, a field of the wrong shape) becomes a ``system`` turn holding the raw line (its
``args.unparsed`` names the format), so a new tool version or a crash message stays visible.
Tokens are recorded where the stream reports them; cost is recorded once, as the tool reports it
(Claude's ``total_cost_usd``, aider's per-message cost) or, where it reports none (Codex, a killed
run), estimated from the tokens at list prices (``args.cost_estimated``). ``cost_so_far`` is what
the cost cap is checked against while the program runs.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from typing import Any

from agents.llm.costs import FREE, Price, Usage, price_for
from rrma.run.context import clip_middle

Turn = dict[str, Any]  # keyword arguments of rrma.log.events.AgentTurnData (without agent, step)
ROLES = ("system", "user", "assistant", "tool_call", "tool_result", "error")
TEXT_CHARS = 20_000  # one text or result field of a turn; longer ones keep their head and tail
RAW_CHARS = 4_000  # one unparsed line


def clip(text: str, limit: int = TEXT_CHARS) -> str:
    return clip_middle(text, limit)


def clip_value(value: Any, limit: int = TEXT_CHARS) -> Any:
    """Every string inside a JSON-like value clipped like :func:`clip` (a tool call writing a whole file)."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        return {str(k): clip_value(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_value(v, limit) for v in value]
    return value


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class StreamParser(ABC):
    """One run's output, fed line by line; ``feed`` returns the turns each line makes."""

    format = "base"
    native_turn_cap = False  # the tool enforces the turn cap itself (the harness keeps a looser backstop)

    def __init__(self, price: Price = FREE, model: str | None = None) -> None:
        self.price = price
        self.model = model
        self.turns = 0  # what the turn cap counts (model calls or tool calls, per format)
        self.usage = Usage()
        self.billed_usd = 0.0  # cost written on turns so far
        self.unbilled_usd = 0.0  # estimated cost of tokens no turn has carried yet
        self.final_text = ""  # the agent's last message (its summary, maybe its hypothesis)
        self.failure: str | None = None  # the tool itself said the run failed
        self.raw_lines = 0  # lines kept raw (not understood)

    @property
    def cost_so_far(self) -> float:
        return self.billed_usd + self.unbilled_usd

    @abstractmethod
    def feed(self, line: str) -> list[Turn]:
        """The turns ``line`` makes (often none, for a line that only updates state)."""

    def finish(self) -> list[Turn]:
        """Turns still buffered when the program has ended; a cost no turn carried yet, estimated."""
        out = self._flush()
        if self.unbilled_usd > 0:
            out.append({"role": "system", "text": f"{self.format}: no cost reported for the last tokens; estimated "
                                                  f"${self.unbilled_usd:.4f} from the token counts at list prices",
                        "cost_usd": round(self.unbilled_usd, 8), "args": {"cost_estimated": True}})
            self.billed_usd += self.unbilled_usd
            self.unbilled_usd = 0.0
        return out

    def _flush(self) -> list[Turn]:
        return []

    # ------------------------------------------------------------------ helpers

    def raw(self, line: str, why: str = "") -> Turn:
        self.raw_lines += 1
        args: dict[str, Any] = {"unparsed": self.format}
        if why:
            args["why"] = why
        return {"role": "system", "text": clip(line, RAW_CHARS), "args": args}

    def _add_usage(self, usage: Usage) -> float:
        """Count ``usage``; return its estimated cost (also added to the unbilled total)."""
        self.usage.tokens_in += usage.tokens_in
        self.usage.tokens_out += usage.tokens_out
        self.usage.cache_read += usage.cache_read
        self.usage.cache_write += usage.cache_write
        cost = self.price.cost(usage)
        self.unbilled_usd += cost
        return cost

    def _bill(self, cost: float, estimate: float) -> None:
        """A turn carries ``cost`` for tokens whose estimate was ``estimate``."""
        self.unbilled_usd = max(0.0, self.unbilled_usd - estimate)
        self.billed_usd += cost

    def _parse_json(self, line: str) -> dict[str, Any] | None:
        try:
            value = json.loads(line)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


class JsonLinesStream(StreamParser):
    """A stream of one JSON object per line: blank lines make nothing, a line that is not a JSON
    object is kept raw, and each object goes to :meth:`event`."""

    def feed(self, line: str) -> list[Turn]:
        if not line.strip():
            return []
        obj = self._parse_json(line)
        if obj is None:
            return [self.raw(line, "not a JSON object")]
        return self.event(obj, line)

    @abstractmethod
    def event(self, obj: dict[str, Any], line: str) -> list[Turn]:
        """The turns one JSON object of the stream makes (``line``: its text, for keeping it raw)."""


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _result_text(content: Any) -> str:
    """A tool_result's content: a string, or a list of blocks (text kept, others named)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in _blocks(content):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(f"[{block.get('type', 'block')}]")
    return "\n".join(parts)


class ClaudeStream(JsonLinesStream):
    """``claude -p --output-format stream-json --verbose``."""

    format = "claude-code"
    native_turn_cap = True

    def __init__(self, price: Price = FREE, model: str | None = None) -> None:
        super().__init__(price, model)
        self.tool_names: dict[str, str] = {}  # tool_use id -> tool name (tool results name only the id)
        self.messages: set[str] = set()  # API message ids already counted (one message may span several lines)

    def event(self, obj: dict[str, Any], line: str) -> list[Turn]:
        kind = obj.get("type")
        if kind == "system":
            return [self._system(obj)]
        if kind == "assistant" and isinstance(obj.get("message"), dict):
            return self._assistant(obj)
        if kind == "user" and isinstance(obj.get("message"), dict):
            return self._user(obj["message"])
        if kind == "result":
            return [self._result(obj)]
        if kind == "stream_event":
            return []  # partial deltas (--include-partial-messages): the whole message follows as `assistant`
        return [self.raw(line, f"unknown type {kind!r}")]

    def _system(self, obj: dict[str, Any]) -> Turn:
        subtype = obj.get("subtype")
        if subtype == "init":
            if isinstance(obj.get("model"), str):
                self.model = obj["model"]
                if self.price == FREE:  # no model named in the task: price the one the session reports
                    self.price = price_for(self.model)
            keep = {k: obj[k] for k in ("subtype", "session_id", "model", "permissionMode", "tools", "cwd",
                                         "apiKeySource", "claude_code_version") if k in obj}
            tools = _list(obj.get("tools"))
            return {"role": "system", "args": keep,
                    "text": f"claude-code session {obj.get('session_id', '?')}: model {obj.get('model', '?')}, "
                            f"permission mode {obj.get('permissionMode', '?')}, {len(tools)} tools"}
        if subtype == "api_retry":  # Claude Code retrying a failed API call (seen from version 2.1)
            delay = _num(obj.get("retry_delay_ms"))
            return {"role": "error", "args": obj,
                    "text": f"claude-code: API call failed ({obj.get('error', '?')}, status {obj.get('error_status')}); "
                            f"retry {obj.get('attempt', '?')}/{obj.get('max_retries', '?')}"
                            + (f" in {delay / 1000:.1f} s" if delay is not None else "")}
        return {"role": "system", "text": f"claude-code system message ({subtype})", "args": obj}

    def _assistant(self, obj: dict[str, Any]) -> list[Turn]:
        msg = obj["message"]
        blocks = _blocks(msg.get("content"))
        texts: list[str] = []
        calls: list[Turn] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                texts.append("[thinking] " + block["thinking"])
            elif kind in ("tool_use", "server_tool_use"):
                name = str(block.get("name") or "?")
                if isinstance(block.get("id"), str):
                    self.tool_names[block["id"]] = name
                args = block.get("input")
                calls.append({"role": "tool_call", "tool": name, "args": args if isinstance(args, dict) else {"raw": args},
                              "text": ""})
            else:
                texts.append(f"[{kind} block] " + clip(json.dumps(block, ensure_ascii=False), RAW_CHARS))
        turn: Turn = {"role": "assistant", "text": clip("\n".join(texts)), "model": msg.get("model") or self.model,
                      "args": {"stop_reason": msg.get("stop_reason"), "tool_calls": [c["tool"] for c in calls]}}
        mid = msg.get("id") if isinstance(msg.get("id"), str) else None
        if mid is None or mid not in self.messages:  # usage repeats on every line of one message: count it once
            if mid is not None:
                self.messages.add(mid)
            self.turns += 1
            raw = msg.get("usage") if isinstance(msg.get("usage"), dict) else {}
            usage = Usage(_int(raw.get("input_tokens")), _int(raw.get("output_tokens")),
                          _int(raw.get("cache_read_input_tokens")), _int(raw.get("cache_creation_input_tokens")))
            self._add_usage(usage)
            turn.update(tokens_in=usage.tokens_in, tokens_out=usage.tokens_out, cache_read=usage.cache_read,
                        cache_write=usage.cache_write)
        error = obj.get("error")
        out = [turn] if texts or not calls or "tokens_in" in turn else []
        out += calls
        if error:
            out.append({"role": "error", "text": f"claude-code: API error {error}"})
        if texts:
            self.final_text = "\n".join(t for t in texts if not t.startswith("[thinking]"))
        return out

    def _user(self, msg: dict[str, Any]) -> list[Turn]:
        out: list[Turn] = []
        for block in _blocks(msg.get("content")):
            if block.get("type") == "tool_result":
                tool_id = block.get("tool_use_id")
                name = self.tool_names.get(tool_id, "?") if isinstance(tool_id, str) else "?"
                out.append({"role": "tool_result", "tool": name, "result": clip(_result_text(block.get("content"))),
                            "text": "error" if block.get("is_error") else ""})
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                out.append({"role": "user", "text": clip(block["text"])})
            else:
                out.append(self.raw(json.dumps(block, ensure_ascii=False), "unknown user block"))
        return out

    def _result(self, obj: dict[str, Any]) -> Turn:
        subtype = str(obj.get("subtype") or "?")
        failed = bool(obj.get("is_error")) or subtype != "success"
        reported = _num(obj.get("total_cost_usd"))
        cost = 0.0
        if reported is not None:  # the tool's own total for the session replaces the estimates
            cost = max(0.0, reported - self.billed_usd)
            self.billed_usd += cost
            self.unbilled_usd = 0.0
        text = obj.get("result") if isinstance(obj.get("result"), str) else ""
        if text:
            self.final_text = text
        errors = _list(obj.get("errors"))
        if failed:
            self.failure = f"claude-code ended with {subtype}" + (f": {'; '.join(map(str, errors))[:300]}" if errors
                                                                   else (f": {text[:300]}" if text else ""))
        keep = {k: obj[k] for k in ("subtype", "is_error", "num_turns", "total_cost_usd", "duration_ms",
                                     "duration_api_ms", "usage", "session_id", "permission_denials", "errors")
                if k in obj}
        summary = (f"result {subtype} after {obj.get('num_turns', '?')} turns"
                   + (f", ${reported:.4f} reported by claude-code" if reported is not None else ", no cost reported"))
        duration = _num(obj.get("duration_ms"))
        return {"role": "error" if failed else "system", "text": clip(summary + ("\n" + text if text else "")),
                "cost_usd": round(cost, 8), "latency_s": round(duration / 1000, 3) if duration else 0.0, "args": keep}


class CodexStream(JsonLinesStream):
    """``codex exec --json``."""

    format = "codex"
    TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")

    def __init__(self, price: Price = FREE, model: str | None = None) -> None:
        super().__init__(price, model)
        self.started: set[str] = set()  # item ids whose tool_call turn was recorded at item.started

    def event(self, obj: dict[str, Any], line: str) -> list[Turn]:
        kind = obj.get("type")
        if kind == "thread.started":
            return [{"role": "system", "text": f"codex thread {obj.get('thread_id', '?')}", "args": obj}]
        if kind == "turn.started":
            return []  # a turn's work arrives as items, its usage with turn.completed
        if kind == "turn.completed":
            return [self._usage(obj.get("usage"))]
        if kind == "turn.failed":
            error = obj.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            self.failure = f"codex turn failed: {message}"
            return [{"role": "error", "text": clip(f"codex turn failed: {message}"), "args": obj}]
        if kind == "error":
            return [{"role": "error", "text": clip(f"codex error: {obj.get('message', obj)}")}]
        if kind in ("item.started", "item.updated", "item.completed") and isinstance(obj.get("item"), dict):
            return self._item(kind, obj["item"], line)
        return [self.raw(line, f"unknown type {kind!r}")]

    def _usage(self, raw: Any) -> Turn:
        raw = raw if isinstance(raw, dict) else {}
        cached = _int(raw.get("cached_input_tokens"))
        usage = Usage(max(0, _int(raw.get("input_tokens")) - cached), _int(raw.get("output_tokens")), cached, 0)
        cost = self._add_usage(usage)
        self._bill(cost, cost)
        return {"role": "system", "text": "codex turn completed", "tokens_in": usage.tokens_in,
                "tokens_out": usage.tokens_out, "cache_read": usage.cache_read, "cost_usd": round(cost, 8),
                "model": self.model, "args": {"usage": raw, "cost_estimated": True}}

    def _call(self, item: dict[str, Any]) -> Turn:
        kind = item.get("type")
        if kind == "command_execution":
            return {"role": "tool_call", "tool": "shell", "args": {"command": item.get("command")}, "text": ""}
        if kind == "file_change":
            return {"role": "tool_call", "tool": "apply_patch", "args": {"changes": item.get("changes")}, "text": ""}
        if kind == "mcp_tool_call":
            arguments = item.get("arguments")
            return {"role": "tool_call", "tool": f"{item.get('server', '?')}/{item.get('tool', '?')}",
                    "args": arguments if isinstance(arguments, dict) else {"raw": arguments}, "text": ""}
        return {"role": "tool_call", "tool": "web_search", "args": {"query": item.get("query")}, "text": ""}

    def _item(self, event: str, item: dict[str, Any], line: str) -> list[Turn]:
        kind = item.get("type")
        item_id = str(item.get("id", ""))
        if event == "item.started":
            if kind in self.TOOL_ITEMS:
                self.started.add(item_id)
                return [self._call(item)]
            return []  # messages and plans are recorded when complete
        if event == "item.updated":
            return []  # progress of an item (a to-do list ticking, a command's output so far): its completion follows
        if kind == "agent_message":
            text = str(item.get("text", ""))
            self.final_text = text
            return [{"role": "assistant", "text": clip(text), "model": self.model, "args": {"item": kind}}]
        if kind in ("reasoning", "plan"):
            return [{"role": "assistant", "text": clip(f"[{kind}] {item.get('text', '')}"), "model": self.model,
                     "args": {"item": kind}}]
        if kind == "todo_list":
            items = _list(item.get("items"))
            lines = [f"[{'x' if i.get('completed') else ' '}] {i.get('text', '')}" for i in items if isinstance(i, dict)]
            return [{"role": "system", "text": "plan:\n" + "\n".join(lines), "args": {"item": kind}}]
        if kind == "error":
            return [{"role": "error", "text": clip(f"codex: {item.get('message', '')}")}]
        if kind not in self.TOOL_ITEMS:
            return [self.raw(line, f"unknown item type {kind!r}")]
        out = [] if item_id in self.started else [self._call(item)]
        self.started.discard(item_id)
        self.turns += 1
        status = item.get("status")
        failed = status in ("failed", "declined")
        if kind == "command_execution":
            code = item.get("exit_code")
            failed = failed or (isinstance(code, int) and code != 0)
            result = str(item.get("aggregated_output", ""))
            args: dict[str, Any] = {"exit_code": code, "status": status}
        elif kind == "file_change":
            changes = _list(item.get("changes"))
            result = "\n".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes if isinstance(c, dict))
            args = {"status": status}
        elif kind == "mcp_tool_call":
            res, err = item.get("result"), item.get("error")
            failed = failed or bool(err)
            result = (str(err.get("message", err)) if isinstance(err, dict) else str(err)) if err else \
                _result_text(res.get("content") if isinstance(res, dict) else res)
            args = {"status": status}
        else:
            result, args = "", {"status": status}
        out.append({"role": "tool_result", "tool": out[0]["tool"] if out else self._call(item)["tool"],
                    "result": clip(result), "text": "error" if failed else "", "args": args})
        return out


_AIDER_COUNT = r"([\d.,]+)\s*([kKmM]?)"
_AIDER_TOKENS = re.compile(r"^Tokens:\s")
_AIDER_SENT = re.compile(_AIDER_COUNT + r" sent\b")
_AIDER_RECEIVED = re.compile(_AIDER_COUNT + r" received\b")
_AIDER_CACHE_WRITE = re.compile(_AIDER_COUNT + r" cache write\b")
_AIDER_CACHE_HIT = re.compile(_AIDER_COUNT + r" cache hit\b")
_AIDER_COST = re.compile(r"Cost: \$([\d.]+) (?:message|request)")
_AIDER_APPLIED = re.compile(r"^(Applied|Did not apply) edit to (.+?)(?: \(--dry-run\))?$")
_AIDER_BANNER = re.compile(  # what aider says about itself before the first model call
    r"^(Aider v\S+|Main model:|Model:|Weak model:|Editor model:|Git repo:|Repo-map:|Added .+ to the chat\b"
    r"|Use /help|Detected dumb terminal|Analytics have been|Cost estimates may be|Newer aider version"
    r"|Can't initialize prompt toolkit|You can skip this check with|https://aider\.chat/)")
_AIDER_WARNING = re.compile(r"^(Warning: |Warning for |HTTPSConnectionPool\()")  # anywhere
_AIDER_ERROR = re.compile(
    r"^(The LLM did not conform to the edit format|Skipping edits to|Exception while updating files|"
    r"Unable to |litellm\.\w+|Error: |Traceback \(most recent call last\)|"
    r"\S+ failed to apply|Only \d+ reflections allowed)")


def _aider_count(match: re.Match[str] | None) -> int:
    if match is None:
        return 0
    number = float(match.group(1).replace(",", ""))
    scale = {"k": 1e3, "m": 1e6}.get(match.group(2).lower(), 1.0)
    return round(number * scale)


class AiderStream(StreamParser):
    """``aider --message ... --no-pretty --no-stream`` (plain text), read in blocks of lines.

    A block is the model's reply (``text``), aider's own banner and warnings (``system``) or an error
    with its continuation lines (aider wraps at 80 columns, and adds advice such as "Retrying in 0.5
    seconds..."). A reply becomes one ``assistant`` turn when its ``Tokens:`` line arrives.
    """

    format = "aider"

    def __init__(self, price: Price = FREE, model: str | None = None) -> None:
        super().__init__(price, model)
        self.kind: str | None = None  # text | system | error: the block being read
        self.lines: list[str] = []

    def feed(self, line: str) -> list[Turn]:
        stripped = line.strip()
        if _AIDER_TOKENS.match(stripped):
            text = "\n".join(self.lines).strip("\n") if self.kind == "text" else ""
            out = self._close() if self.kind != "text" else []
            self.kind, self.lines = None, []
            return out + self._tokens(stripped, text)
        applied = _AIDER_APPLIED.match(stripped)
        if applied:  # an edit is a result of the model call counted at its Tokens line
            return [*self._close(),
                    {"role": "tool_call", "tool": "edit", "args": {"path": applied.group(2)}, "text": ""},
                    {"role": "tool_result", "tool": "edit", "result": stripped,
                     "text": "" if applied.group(1) == "Applied" else "error"}]
        if _AIDER_ERROR.match(stripped):
            return self._start("error", stripped)
        if self.kind == "error":
            if stripped:
                self.lines.append(stripped)
                return []
            return self._close()
        if _AIDER_WARNING.match(stripped) or (self.turns == 0 and _AIDER_BANNER.match(stripped)):
            return self._start("system", stripped) if self.kind != "system" else self._add(stripped)
        if not stripped and self.kind != "text":
            return self._close()
        if self.kind != "text":
            return self._start("text", line)
        return self._add(line)

    def _add(self, line: str) -> list[Turn]:
        self.lines.append(line)
        return []

    def _start(self, kind: str, line: str) -> list[Turn]:
        out = self._close()
        self.kind, self.lines = kind, [line]
        return out

    def _close(self) -> list[Turn]:
        kind, lines = self.kind, self.lines
        self.kind, self.lines = None, []
        text = "\n".join(lines).strip("\n")
        if kind is None or not text.strip():
            return []
        if kind == "system":
            model = re.search(r"^(?:Main model|Model): (\S+)", text, re.M)
            if model and self.model is None:
                self.model = model.group(1)
            return [{"role": "system", "text": clip(text), "args": {"aider": "banner and warnings"}}]
        if kind == "error":
            return [{"role": "error", "text": clip(f"aider: {text}")}]
        self.final_text = text
        return [{"role": "assistant", "text": clip(text), "model": self.model,
                 "args": {"usage": "none reported (the reply ended without a Tokens line)"}}]

    def _tokens(self, line: str, text: str) -> list[Turn]:
        sent = _aider_count(_AIDER_SENT.search(line))
        write = _aider_count(_AIDER_CACHE_WRITE.search(line))
        hit = _aider_count(_AIDER_CACHE_HIT.search(line))
        usage = Usage(max(0, sent - write - hit), _aider_count(_AIDER_RECEIVED.search(line)), hit, write)
        estimate = self._add_usage(usage)
        cost_match = _AIDER_COST.search(line)
        reported = float(cost_match.group(1)) if cost_match else None
        cost = reported if reported is not None else estimate
        self._bill(cost, estimate)
        self.turns += 1
        if text:
            self.final_text = text
        return [{"role": "assistant", "text": clip(text), "tokens_in": usage.tokens_in, "tokens_out": usage.tokens_out,
                 "cache_read": usage.cache_read, "cache_write": usage.cache_write, "cost_usd": round(cost, 8),
                 "model": self.model, "args": {"usage_line": line, "cost_estimated": reported is None}}]

    def _flush(self) -> list[Turn]:
        return self._close()


class TextStream(StreamParser):
    """Any program: its output as assistant text in blocks; a JSON line with a trace ``role`` as that turn."""

    format = "text"
    BLOCK_LINES = 40
    FIELDS: dict[str, type | tuple[type, ...]] = {
        "text": str, "tool": str, "result": str, "args": dict, "tokens_in": int, "tokens_out": int,
        "cache_read": int, "cache_write": int, "cost_usd": (int, float), "latency_s": (int, float), "model": str}

    def __init__(self, price: Price = FREE, model: str | None = None) -> None:
        super().__init__(price, model)
        self.text: list[str] = []

    def feed(self, line: str) -> list[Turn]:
        obj = self._parse_json(line) if line.lstrip().startswith("{") else None
        if obj is not None and obj.get("role") in ROLES:
            return [*self._flush(), self._structured(obj, line)]
        self.text.append(line)
        if len(self.text) >= self.BLOCK_LINES:
            return self._flush()
        return []

    def _structured(self, obj: dict[str, Any], line: str) -> Turn:
        turn: Turn = {"role": obj["role"]}
        for name, kind in self.FIELDS.items():
            value = obj.get(name)
            if value is None:
                continue
            if not isinstance(value, kind) or isinstance(value, bool):
                return self.raw(line, f"field {name!r} has the wrong type")
            turn[name] = clip(value) if isinstance(value, str) and name in ("text", "result") else value
        if turn["role"] == "assistant":
            self.turns += 1
            if turn.get("text"):
                self.final_text = turn["text"]
        usage = Usage(_int(turn.get("tokens_in")), _int(turn.get("tokens_out")), _int(turn.get("cache_read")),
                      _int(turn.get("cache_write")))
        estimate = self._add_usage(usage)
        reported = _num(turn.get("cost_usd"))
        self._bill(reported if reported is not None else estimate, estimate)
        if reported is None and estimate:
            turn["cost_usd"] = round(estimate, 8)
        return turn

    def _flush(self) -> list[Turn]:
        text = "\n".join(self.text).strip("\n")
        self.text = []
        if not text.strip():
            return []
        self.final_text = text
        return [{"role": "assistant", "text": clip(text), "model": self.model}]


PARSERS: dict[str, type[StreamParser]] = {
    "claude-code": ClaudeStream, "codex": CodexStream, "aider": AiderStream, "text": TextStream}


def make_parser(fmt: str, price: Price = FREE, model: str | None = None) -> StreamParser:
    return PARSERS[fmt](price, model)
