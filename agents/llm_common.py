"""What the LLM backends share: tools, prompts, the tool-use loop, prices, retries, redaction.

An LLM agent runs a bounded tool-use conversation per proposal: the model reads files, makes
search/replace or whole-file edits into a *pending-edit buffer* (never the disk: the buffer
becomes the proposal's :class:`~rrma.trial.FileEdit` list), runs free pre-checks, reads and
posts to the blackboard, and ends by calling ``submit_trial``. The provider modules
(:mod:`agents.anthropic_agent`, :mod:`agents.openai_agent`) only translate that conversation to
their wire format; :class:`LLMAgent` owns the loop so both behave the same.

Invariants:

* Every model call, tool call and tool result is one ``agent.turn`` (through
  ``Context.record_turn``), with tokens, cache reads, latency and cost on model calls, so the
  run log is a complete trace of the conversation.
* Nothing that reaches a turn, a blackboard post or an exception message can contain an API
  key: every string goes through :class:`Redactor` first, and provider errors are re-raised as
  :class:`~rrma.contracts.AgentError` built from scrubbed text (``from None``: no chained request).
* Per-agent caps (``max_run_tokens``, ``budget_usd``) are hard: once reached, no further model
  call is made in this run and ``propose`` returns ``None``.
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import hashlib
import json
import os
import random
import re
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.memory import memory_note, remember_outcome
from rrma.contracts import Agent, AgentError, Context, TrialSummary
from rrma.run.context import clip_middle
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import FileEdit, Proposal
from rrma.workspace import EditRules, InvalidEdit, apply_edits, normalize_path

# ----------------------------------------------------------------------------- redaction

REDACTED = "[redacted]"
_SECRET_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),  # Anthropic keys
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI-style keys
    re.compile(r"(?i)(authorization\s*[:=]\s*['\"]?bearer\s+)[^\s'\",}]+"),
    re.compile(r"(?i)(x-api-key\s*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
    re.compile(r"(?i)(api[_-]?key\s*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
]


class Redactor:
    """Removes the configured secrets, and anything shaped like a key or auth header, from text."""

    def __init__(self, secrets: list[str | None] | None = None) -> None:
        self.secrets = sorted({s for s in (secrets or []) if s and len(s) >= 6}, key=len, reverse=True)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 6 and secret not in self.secrets:
            self.secrets = sorted([*self.secrets, secret], key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, REDACTED)
        for pattern in _SECRET_PATTERNS:
            value = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, value)
        return value

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {str(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def error(self, exc: BaseException, what: str) -> AgentError:
        """An AgentError carrying only the scrubbed, one-line description of ``exc``."""
        message = " ".join(str(exc).split())[:600]
        return AgentError(self.text(f"{what}: {type(exc).__name__}: {message}"))


# ----------------------------------------------------------------------------- prices

@dataclass(frozen=True)
class Price:
    """USD per million tokens. Approximate list prices; override per agent with params.price."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        return (usage.tokens_in * self.input + usage.tokens_out * self.output
                + usage.cache_read * self.cache_read + usage.cache_write * self.cache_write) / 1e6


def _anthropic(inp: float, out: float) -> Price:
    return Price(inp, out, round(inp * 0.1, 4), round(inp * 1.25, 4))


# Family prefixes, most specific first. Approximate (public list prices at the time of writing);
# a run's cost cap is only as good as this table, so set params.price for anything that matters.
PRICES: list[tuple[str, Price]] = [
    ("claude-opus-4-0", _anthropic(15.0, 75.0)),
    ("claude-opus-4-1", _anthropic(15.0, 75.0)),
    ("claude-opus-4-20250514", _anthropic(15.0, 75.0)),
    ("claude-opus", _anthropic(5.0, 25.0)),
    ("claude-sonnet", _anthropic(3.0, 15.0)),
    ("claude-haiku-3", _anthropic(0.8, 4.0)),
    ("claude-haiku", _anthropic(1.0, 5.0)),
    ("claude", _anthropic(3.0, 15.0)),  # unknown Claude family: priced like Sonnet
    ("gpt-4o-mini", Price(0.15, 0.6, 0.075, 0.0)),
    ("gpt-4o", Price(2.5, 10.0, 1.25, 0.0)),
    ("gpt-4.1-nano", Price(0.1, 0.4, 0.025, 0.0)),
    ("gpt-4.1-mini", Price(0.4, 1.6, 0.1, 0.0)),
    ("gpt-4.1", Price(2.0, 8.0, 0.5, 0.0)),
    ("o4-mini", Price(1.1, 4.4, 0.275, 0.0)),
    ("o3", Price(2.0, 8.0, 0.5, 0.0)),
]
FREE = Price(0.0, 0.0, 0.0, 0.0)  # self-hosted (vLLM) and unknown OpenAI-compatible models


def price_for(model: str, params: Mapping[str, Any] | None = None) -> Price:
    """The price of ``model``: ``params.price`` ({input, output, cache_read, cache_write}) wins."""
    override = (params or {}).get("price")
    if override is not None:
        if not isinstance(override, Mapping):
            raise AgentError("params.price must be a mapping {input, output, cache_read, cache_write} in USD/Mtok")
        try:
            return Price(**{k: float(override.get(k, 0.0)) for k in ("input", "output", "cache_read", "cache_write")})
        except (TypeError, ValueError) as exc:
            raise AgentError(f"params.price: {exc}") from None
    name = model.lower().split("/")[-1]
    for prefix, price in PRICES:
        if name.startswith(prefix):
            return price
    return FREE


# ----------------------------------------------------------------------------- usage and caps

@dataclass
class Usage:
    tokens_in: int = 0  # uncached input tokens
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.tokens_in + self.tokens_out + self.cache_read + self.cache_write


@dataclass
class UsageMeter:
    """Cumulative tokens and cost of one agent over the run, against its hard caps."""

    max_tokens: int | None = None
    max_usd: float | None = None
    tokens: int = 0
    usd: float = 0.0
    calls: int = 0

    def add(self, usage: Usage, cost: float) -> None:
        self.tokens += usage.total
        self.usd += cost
        self.calls += 1

    def exhausted(self) -> str | None:
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"token cap reached: {self.tokens} >= max_run_tokens {self.max_tokens}"
        if self.max_usd is not None and self.usd >= self.max_usd:
            return f"cost cap reached: ${self.usd:.4f} >= budget_usd ${self.max_usd:.4f}"
        return None


# ----------------------------------------------------------------------------- retries

@dataclass
class RetryPolicy:
    """Exponential backoff with seeded jitter; a server's retry-after wins (capped)."""

    attempts: int = 6  # total tries of one model call
    base_s: float = 1.0
    max_s: float = 60.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(self.max_s, retry_after)
        return min(self.max_s, self.base_s * (2 ** retry) * (0.5 + 0.5 * self.rng.random()))


@dataclass
class Transient:
    """A failed attempt that may succeed when retried."""

    reason: str  # e.g. "rate limited (429)"
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        return value / 1000.0 if name.endswith("-ms") else value
    return None


def transient_status(status: int, retry_after: float | None) -> Transient | None:
    """The HTTP statuses every provider retries: 429 (rate limit), 408, 409 and 5xx."""
    if status == 429:
        return Transient("rate limited (429)", retry_after)
    if status in (408, 409) or status >= 500:
        return Transient(f"server error ({status})", retry_after)
    return None


# ----------------------------------------------------------------------------- tools

@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


READ_FILE = ToolSpec(
    "read_file",
    "Read a workspace file of the parent trial, with your pending edits applied. Optional 1-based "
    "start_line/end_line select a range. trial_id reads that trial's snapshot instead (tree policy).",
    _schema({"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"},
             "trial_id": {"type": "string"}}, ["path"]),
)
EDIT_FILE = ToolSpec(
    "edit_file",
    "Edit one editable file in your pending proposal (nothing runs yet). Give either `content` (the "
    "whole new file) or `replacements`: a list of {search, replace} pairs applied in order, each "
    "`search` occurring exactly once in the current text.",
    _schema({"path": {"type": "string"}, "content": {"type": "string"},
             "replacements": {"type": "array", "items": _schema(
                 {"search": {"type": "string"}, "replace": {"type": "string"}}, ["search", "replace"])}},
            ["path"]),
)
RUN_CHECKS = ToolSpec(
    "run_checks",
    "Free pre-checks of the pending proposal (no oracle budget): edit rules, Python syntax of edited "
    ".py files, and for proof tasks the proof's basic syntax. Optional `proof` checks that text.",
    _schema({"proof": {"type": "string"}}, []),
)
SUBMIT_TRIAL = ToolSpec(
    "submit_trial",
    "Submit the pending edits (or, for proof tasks, `proof`) as one trial for the oracle to judge. "
    "This ends your turn. State the hypothesis and the effect you expect on the metric.",
    _schema({"hypothesis": {"type": "string"}, "expected_effect": {"type": "string"},
             "proof": {"type": "string"}, "theorem": {"type": "string"}}, ["hypothesis", "expected_effect"]),
)
READ_BLACKBOARD = ToolSpec(
    "read_blackboard",
    "Read the shared blackboard: insights other agents posted in this run (empty in a no-history run).",
    _schema({}, []),
)
POST_INSIGHT = ToolSpec(
    "post_insight",
    "Post a short insight to the shared blackboard for the other agents (what worked, what did not, why).",
    _schema({"text": {"type": "string"}, "trial_id": {"type": "string"}}, ["text"]),
)
REBASE_TO = ToolSpec(
    "rebase_to",
    "Tree policy: build your next proposal on another (successful) trial instead of the default parent. "
    "Discards your pending edits.",
    _schema({"trial_id": {"type": "string"}}, ["trial_id"]),
)


def tools_for(task: TaskConfig) -> list[ToolSpec]:
    tools = [READ_FILE, EDIT_FILE, RUN_CHECKS, SUBMIT_TRIAL, READ_BLACKBOARD, POST_INSIGHT]
    if task.loop.policy == "tree":
        tools.append(REBASE_TO)
    return tools


@dataclass
class ToolCall:
    """One tool call as the model made it. ``error`` is set when its arguments were unusable."""

    id: str
    name: str
    args: dict[str, Any]
    raw: str = ""  # the arguments as sent (JSON text), for the trace
    error: str | None = None


@dataclass
class ToolResult:
    call: ToolCall
    text: str
    is_error: bool = False


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """JSON arguments text -> (dict, error). Empty text means no arguments."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at column {exc.colno}): {raw[:200]}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


PROOF_FORBIDDEN = re.compile(r"\b(sorry|admit|Admitted|axiom|Axiom)\b")


def proof_syntax_problems(proof: str) -> list[str]:
    """Cheap structural checks of a proof body (the oracle does the real checking)."""
    problems = []
    if not proof.strip():
        problems.append("the proof is empty")
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in proof:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack[-1] != pairs[ch]:
                problems.append(f"unbalanced {ch!r}")
                break
            stack.pop()
    if stack and not problems:
        problems.append(f"unclosed {stack[-1]!r}")
    found = PROOF_FORBIDDEN.search(proof)
    if found:
        problems.append(f"uses {found.group(0)!r}, which the oracle rejects")
    return problems


class ToolSession:
    """Executes tool calls of one proposal against the context and a pending-edit buffer.

    The buffer maps path -> new text; ``edits`` remembers, per path, the search/replace pairs when
    the file was only ever edited that way (so the proposal re-applies cleanly to a moved parent),
    or ``None`` once a whole-file content was given.
    """

    def __init__(self, ctx: Context, task: TaskConfig, redactor: Redactor, max_read_chars: int = 60_000,
                 edit_lines: list[re.Pattern[str]] | None = None) -> None:
        self.ctx = ctx
        self.task = task
        self.redactor = redactor
        self.max_read_chars = max_read_chars
        self.base_files = dict(ctx.files)
        self.parent: str | None = ctx.parent_id
        self.rebased = False
        self.pending: dict[str, str] = {}
        self.replacements: dict[str, list[tuple[str, str]] | None] = {}
        self.proposal: Proposal | None = None
        self.rules = EditRules(list(ctx.editable), list(task.workspace.readonly))
        self.edit_lines = edit_lines or []  # a specialist's part of a file: changed lines must match one

    # -------------------------------------------------------------- helpers

    def files(self) -> dict[str, str]:
        return {**self.base_files, **self.pending}

    def execute(self, call: ToolCall) -> ToolResult:
        if call.error is not None:
            return ToolResult(call, f"error: {call.error}. Call {call.name} again with a JSON object of arguments.",
                              True)
        handler: Callable[[dict[str, Any]], str] | None = getattr(self, f"tool_{call.name}", None)
        known = [t.name for t in tools_for(self.task)]
        if handler is None or call.name not in known:
            return ToolResult(call, f"error: unknown tool {call.name!r}; the tools are: {', '.join(known)}", True)
        try:
            return ToolResult(call, handler(call.args))
        except ToolFailure as exc:
            return ToolResult(call, f"error: {exc}", True)

    # -------------------------------------------------------------- tools

    def tool_read_file(self, args: dict[str, Any]) -> str:
        path = _str_arg(args, "path")
        trial_id = args.get("trial_id")
        if trial_id:
            if not self.ctx.history:
                raise ToolFailure("other trials' files are not available in this (no-history) run")
            try:
                files = self.ctx.files_of(str(trial_id))
            except KeyError as exc:
                raise ToolFailure(str(exc).strip("'\"")) from None
        else:
            files = self.files()
        if path not in files:
            raise ToolFailure(f"no file {path!r}; files: {', '.join(sorted(files)) or '(none)'}")
        lines = files[path].splitlines(keepends=True)
        start = _int_arg(args, "start_line", 1)
        end = _int_arg(args, "end_line", len(lines))
        if start < 1 or end < start - 1:
            raise ToolFailure(f"bad line range {start}..{end} (the file has {len(lines)} lines)")
        text = "".join(lines[start - 1:end])
        if len(text) > self.max_read_chars:
            text = text[: self.max_read_chars] + f"\n[... truncated at {self.max_read_chars} characters; read a line range]"
        return f"{path} lines {start}-{min(end, len(lines))} of {len(lines)}:\n{text}"

    def tool_edit_file(self, args: dict[str, Any]) -> str:
        path = _str_arg(args, "path")
        content = args.get("content")
        raw_reps = args.get("replacements")
        if content is not None and raw_reps:
            raise ToolFailure("give either `content` or `replacements`, not both")
        if content is None and not raw_reps:
            raise ToolFailure("give `content` (the whole file) or a non-empty `replacements` list")
        if content is not None and not isinstance(content, str):
            raise ToolFailure("`content` must be a string")
        pairs: list[tuple[str, str]] = []
        if raw_reps:
            if not isinstance(raw_reps, list):
                raise ToolFailure("`replacements` must be a list of {search, replace} objects")
            for i, rep in enumerate(raw_reps):
                if not isinstance(rep, dict) or not isinstance(rep.get("search"), str) \
                        or not isinstance(rep.get("replace"), str):
                    raise ToolFailure(f"replacements[{i}] must be an object with string `search` and `replace`")
                pairs.append((rep["search"], rep["replace"]))
        edit = FileEdit(path=path, content=content, replacements=pairs)
        try:
            new_files = apply_edits(self.files(), [edit], self.rules)
        except InvalidEdit as exc:
            raise ToolFailure(str(exc)) from None
        norm = normalize_path(path)
        self._check_lines(norm, new_files[norm])
        self.pending[norm] = new_files[norm]
        previous = self.replacements.get(norm, [])
        self.replacements[norm] = None if content is not None or previous is None else [*previous, *pairs]
        if self.pending[norm] == self.base_files.get(norm):
            del self.pending[norm]
            self.replacements.pop(norm, None)
            return f"{norm}: the file is back to the parent's version (no pending change)"
        return f"{norm}: edit applied to the pending proposal ({len(self.pending[norm].splitlines())} lines now)"

    def _check_lines(self, path: str, new_text: str) -> None:
        """Refuse a change to any line outside the role's part (``params.edit_lines``)."""
        if not self.edit_lines:
            return
        old = self.base_files.get(path, "").splitlines()
        for line in difflib.ndiff(old, new_text.splitlines()):
            if line[:2] not in ("- ", "+ "):
                continue
            if not any(p.search(line[2:]) for p in self.edit_lines):
                allowed = ", ".join(p.pattern for p in self.edit_lines)
                verb = "remove" if line[0] == "-" else "write"
                raise ToolFailure(f"{path}: you may not {verb} the line {line[2:].strip()[:120]!r}: it is outside your "
                                  f"role's part of the task (changed lines must match one of: {allowed})")

    def tool_run_checks(self, args: dict[str, Any]) -> str:
        lines = []
        proof = args.get("proof")
        if proof is not None:
            problems = proof_syntax_problems(str(proof))
            lines.append("proof: " + ("looks well-formed" if not problems else "; ".join(problems)))
        if not self.pending and proof is None:
            return "no pending edits yet" + (" (for a proof task, pass `proof`)" if self.ctx.theorem else "")
        try:
            if self.pending:
                apply_edits(self.base_files, self.edits(), self.rules)
                lines.append(f"edit rules: ok ({', '.join(sorted(self.pending))})")
        except InvalidEdit as exc:
            lines.append(f"edit rules: {exc}")
        for path, text in sorted(self.pending.items()):
            if path.endswith(".py"):
                try:
                    ast.parse(text, filename=path)
                    lines.append(f"{path}: python syntax ok")
                except SyntaxError as exc:
                    lines.append(f"{path}: SyntaxError line {exc.lineno}: {exc.msg}")
        return "\n".join(lines)

    def tool_submit_trial(self, args: dict[str, Any]) -> str:
        hypothesis = _str_arg(args, "hypothesis")
        expected = str(args.get("expected_effect") or "")
        proof = args.get("proof")
        theorem = args.get("theorem") or (self.ctx.theorem or {}).get("name")
        if proof is None and not self.pending:
            raise ToolFailure("nothing to submit: make edits with edit_file first" +
                              (" (or pass `proof` for this proof task)" if self.ctx.theorem else ""))
        if proof is not None and not isinstance(proof, str):
            raise ToolFailure("`proof` must be a string")
        edits = self.edits()
        if edits:
            try:
                apply_edits(self.base_files, edits, self.rules)
            except InvalidEdit as exc:
                raise ToolFailure(f"the pending edits are not valid: {exc}") from None
        parent = self.parent if (self.rebased or self.task.loop.policy == "tree") else None
        self.proposal = Proposal(hypothesis=hypothesis, expected_effect=expected, edits=edits, proof=proof,
                                 theorem=str(theorem) if theorem else None, parent=parent)
        return "submitted; the oracle will judge it"

    def tool_read_blackboard(self, args: dict[str, Any]) -> str:
        if not self.ctx.blackboard:
            return "(the blackboard is empty)" if self.ctx.history else "(no blackboard in a no-history run)"
        return "\n".join(f"- {line}" for line in self.ctx.blackboard)

    def tool_post_insight(self, args: dict[str, Any]) -> str:
        text = _str_arg(args, "text").strip()
        if not text:
            raise ToolFailure("`text` is empty")
        trial_id = args.get("trial_id")
        self.ctx.post(self.redactor.text(text[:2000]), trial_id=str(trial_id) if trial_id else None, tags=["insight"])
        return "posted"

    def tool_rebase_to(self, args: dict[str, Any]) -> str:
        if self.task.loop.policy != "tree":
            raise ToolFailure("rebase_to is only available with the tree policy")
        trial_id = _str_arg(args, "trial_id")
        try:
            files = self.ctx.files_of(trial_id)
        except KeyError as exc:
            raise ToolFailure(str(exc).strip("'\"")) from None
        dropped = sorted(self.pending)
        self.base_files = dict(files)
        self.pending.clear()
        self.replacements.clear()
        self.parent = trial_id
        self.rebased = True
        note = f"; dropped pending edits of {', '.join(dropped)}" if dropped else ""
        return f"now building on {trial_id} ({len(files)} files){note}"

    # -------------------------------------------------------------- the proposal

    def edits(self) -> list[FileEdit]:
        out = []
        for path in sorted(self.pending):
            reps = self.replacements.get(path)
            if reps:
                out.append(FileEdit(path=path, replacements=reps))
            else:
                out.append(FileEdit(path=path, content=self.pending[path]))
        return out


class ToolFailure(Exception):
    """A tool call the model made cannot be carried out (the message goes back to the model)."""


def _str_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolFailure(f"argument `{name}` is required and must be a string")
    return value


def _int_arg(args: dict[str, Any], name: str, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolFailure(f"argument `{name}` must be an integer")
    return int(value)


def compile_edit_lines(agent: str, raw: Any) -> list[re.Pattern[str]]:
    """``params.edit_lines``: regexes; a specialist may change only lines matching one of them."""
    if raw is None:
        return []
    if isinstance(raw, str) or not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise AgentError(f"agent {agent}: params.edit_lines must be a list of regular expressions")
    patterns = []
    for text in raw:
        try:
            patterns.append(re.compile(text))
        except re.error as exc:
            raise AgentError(f"agent {agent}: params.edit_lines: {text!r} is not a valid regular expression "
                             f"({exc})") from None
    return patterns


# ----------------------------------------------------------------------------- prompts

ROLE_HINTS = {
    "optimizer": "the optimiser and its schedule: learning rate, warmup, decay, betas, weight decay, batch size",
    "optimiser": "the optimiser and its schedule: learning rate, warmup, decay, betas, weight decay, batch size",
    "architecture": "the model architecture: depth, width, heads, normalisation, activations, initialisation",
    "data": "the data pipeline: tokenisation, sequence length, sampling, augmentation, curriculum",
}

SYSTEM_PROMPT = """You are {agent}, a research agent in a loop of trials judged by a fixed oracle.
Each trial is your hypothesis plus an edit of the workspace; the oracle runs it and reports the
metric `{metric}` ({direction}; lower is better when minimizing). Only improvements larger than the
noise floor count. {metric_note}

How to work:
- Read what you need with read_file (the files are also in the first message).
- Make your change with edit_file (search/replace pairs, or the whole file). Edits go into a
  pending proposal; nothing runs until you submit.
- run_checks is free: use it to catch syntax errors before spending a trial.
- Finish by calling submit_trial with a one-line hypothesis and the effect you expect. One
  trial per turn; make it count. You have at most {max_steps} model calls for this trial.
- Use post_insight to share something the other agents should know (optional, short).
{tree}{role}
Editable files: {editable}
"""

TASK_PROMPT = """# Task: {name}
{description}
"""


def metric_note(task: TaskConfig) -> str:
    """The prompt's sentence on where the metric comes from: true for the task (``metric.source``)."""
    if task.metric.source == "self-reported":
        return (f"The metric is self-reported: it is the `{task.metric.name}: <number>` line printed by the program "
                "you edit, not computed by the oracle; every result is shown to the reviewer marked self-reported, "
                "and only a real improvement of the task counts.")
    return "You cannot change how the metric is computed."


def system_text(task: TaskConfig, ctx: Context, agent: str, max_steps: int, role_prompt: str | None,
                edit_lines: list[re.Pattern[str]] | None = None) -> tuple[str, str]:
    """(instructions, task text): both static over a run, so both are cached."""
    role = ""
    if ctx.role:
        hint = role_prompt or ROLE_HINTS.get(ctx.role.lower(), "")
        role = (f"\nYour role: the {ctx.role} specialist. Propose only changes within your role"
                + (f" ({hint})" if hint else "") + "; other agents cover the rest and share the blackboard.\n")
    if edit_lines:
        role += ("You may only change lines matching one of these patterns: "
                 + ", ".join(p.pattern for p in edit_lines) + "\n")
    tree = ("- Tree policy: you may branch from any successful trial with rebase_to(trial_id) before "
            "editing; by default you build on the current best.\n") if task.loop.policy == "tree" else ""
    instructions = SYSTEM_PROMPT.format(
        agent=agent, metric=task.metric.name, direction=task.metric.direction, max_steps=max_steps,
        tree=tree, role=role, editable=", ".join(ctx.editable) or "(none)", metric_note=metric_note(task),
    )
    return instructions, TASK_PROMPT.format(name=task.name, description=task.description.strip())


def files_text(ctx: Context, max_file_chars: int) -> str:
    """The parent's files: editable ones in full (capped), the rest listed."""
    rules = EditRules(list(ctx.editable), [])
    parts = [f"# Files of the parent trial {ctx.parent_id}"]
    listed = []
    for path in sorted(ctx.files):
        text = ctx.files[path]
        if rules.is_editable(path) or any(fnmatch.fnmatchcase(path, p) for p in ctx.editable):
            shown = text if len(text) <= max_file_chars else text[:max_file_chars] + "\n[... truncated; use read_file]"
            parts.append(f"## {path}\n```\n{shown}\n```")
        else:
            listed.append(f"{path} ({len(text)} chars)")
    if listed:
        parts.append("Other files (read-only, use read_file): " + ", ".join(listed))
    if ctx.theorem:
        parts.append("# Theorem\n" + json.dumps(ctx.theorem, indent=1, sort_keys=True))
    return "\n\n".join(parts)


def files_digest(ctx: Context) -> str:
    """What the trace records instead of the files block: paths with sizes and content hashes."""
    rows = [f"{p} ({len(t)} chars, sha256 {hashlib.sha256(t.encode()).hexdigest()[:12]})"
            for p, t in sorted(ctx.files.items())]
    return f"[files of {ctx.parent_id}: " + "; ".join(rows) + "]"


def _fmt(t: TrialSummary) -> str:
    line = t.line()
    if t.feedback.strip() and t.status != "ok":
        line += "\n    feedback: " + clip_middle(" ".join(t.feedback.strip().split()), 400)
    return line


def context_text(ctx: Context, memory: list[str]) -> str:
    """The per-proposal part of the first message: results so far (empty in a control arm)."""
    parts = []
    if ctx.baseline_score is not None:
        sigma = "" if ctx.sigma is None else f" ± {ctx.sigma:.3g} (noise sigma)"
        parts.append(f"Baseline {ctx.task.metric.name}: {ctx.baseline_score:.6g}{sigma}")
    if ctx.best is not None and ctx.history:  # a control arm (history off) never hears of the best
        parts.append(f"Current best: {ctx.best.line()}")
    if ctx.lineage:
        parts.append("Lineage of the parent (newest first):\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.lineage))
    if ctx.top:
        parts.append("Best trials:\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.top))
    if ctx.recent:
        parts.append("Recent trials:\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.recent))
    if ctx.own:
        parts.append("Your latest results:\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.own))
    if ctx.blackboard:
        parts.append("Blackboard:\n" + "\n".join(f"  - {b}" for b in ctx.blackboard[-10:]))
    if memory and ctx.history:
        parts.append("Your earlier proposals (summary):\n" + "\n".join(f"  {m}" for m in memory))
    if ctx.steer:
        parts.append("Notes from the people running this run (oldest first; follow them within the task's rules):\n"
                     + "\n".join(f"  - {clip_middle(n, 2000)}" for n in ctx.steer))
    parts.append(f"Trials left in the run: {ctx.trials_left}. Propose the next trial now.")
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- the agent loop

@dataclass
class ModelReply:
    text: str
    calls: list[ToolCall]
    stop_reason: str | None
    usage: Usage
    model: str
    latency_s: float = 0.0


NUDGE = ("You did not call a tool. Make your edit with edit_file and call submit_trial, "
         "or reply with the single word GIVE-UP if you have nothing worth trying.")


class LLMAgent(Agent):
    """The provider-independent tool-use loop; subclasses implement the wire format.

    Options (``params``): ``max_steps`` (model calls per conversation, 12), ``attempts`` (fresh
    conversations per proposal when one ends without a submission, 2), ``stream`` (bool, False),
    ``retry_attempts`` (6), ``retry_base_s`` (1.0), ``retry_max_s`` (60), ``timeout_s`` (600 per
    request), ``max_file_chars`` (60000 per file in the prompt), ``memory`` (earlier proposals kept
    in the summary, 8), ``price`` (USD/Mtok override), ``api_key_env`` (name of the environment
    variable holding the key), ``role_prompt`` (text describing the role), ``edit_lines`` (regexes:
    a specialist may change only lines matching one, e.g. its part of a shared train.py).
    """

    backend = "llm"
    key_env = "API_KEY"
    base_url_env = "BASE_URL"
    key_required = True

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        params = dict(config.params)
        if "api_key" in params:
            raise AgentError(f"agent {config.name}: do not put API keys in the task file (it is copied into the "
                             f"run log); set {self.key_env} in the environment, or name another variable with "
                             "params.api_key_env")
        if not config.model:
            raise AgentError(f"agent {config.name}: backend {self.backend} needs a model: set agents[].model in the "
                             "task file or pass --model")
        self.model: str = config.model
        self.params = params
        env_name = str(params.get("api_key_env") or self.key_env)
        self.api_key = os.environ.get(env_name) or None
        self.base_url = config.base_url or os.environ.get(self.base_url_env) or None
        # where the endpoint came from (recorded in run.json and run.started, never the key)
        self.base_url_from = ("agents[].base_url" if config.base_url else self.base_url_env if self.base_url
                              else "the SDK's default")
        self.redactor = Redactor([self.api_key])
        if self.api_key is None and self.needs_key():
            raise AgentError(f"agent {config.name}: no API key for backend {self.backend}: set {env_name} in the "
                             "environment (keys are never read from the task file)")
        self.max_steps = int(params.get("max_steps", 12))
        self.attempts = max(1, int(params.get("attempts", 2)))
        self.stream = bool(params.get("stream", False))
        self.timeout_s = float(params.get("timeout_s", 600.0))
        self.max_file_chars = int(params.get("max_file_chars", 60_000))
        self.memory_size = int(params.get("memory", 8))
        self.role_prompt = params.get("role_prompt")
        self.edit_lines = compile_edit_lines(config.name, params.get("edit_lines"))
        self.retry = RetryPolicy(attempts=max(1, int(params.get("retry_attempts", 6))),
                                 base_s=float(params.get("retry_base_s", 1.0)),
                                 max_s=float(params.get("retry_max_s", 60.0)), rng=random.Random(seed))
        self.price = price_for(self.model, params)
        self.meter = UsageMeter(config.max_run_tokens, config.budget_usd)
        self.memory: list[str] = []
        self.pending_memory: dict[str, str] = {}
        self.step = 0
        self.system_recorded = False
        self.stopped: str | None = None
        self.sleep: Callable[[float], None] = time.sleep

    def needs_key(self) -> bool:
        return self.key_required

    def endpoint_info(self) -> dict[str, Any]:
        """What run.json records about this agent: backend, model and the endpoint it calls (no key)."""
        client = getattr(self, "client", None)
        resolved = getattr(client, "base_url", None) if client is not None else None  # the SDK's resolved URL
        endpoint = self.redactor.text(str(resolved if resolved is not None else self.base_url or ""))
        return {"name": self.name, "backend": self.backend, "model": self.model, "endpoint": endpoint or None,
                "endpoint_from": self.base_url_from}

    # -------------------------------------------------------------- provider hooks

    @abstractmethod
    def start(self, instructions: str, task_text: str, files: str, context: str, tools: list[ToolSpec]) -> Any:
        """A new conversation (provider-specific message list)."""
        ...

    @abstractmethod
    def call(self, convo: Any) -> ModelReply:
        """One model call on ``convo`` (raises the provider's exceptions)."""
        ...

    @abstractmethod
    def add_reply(self, convo: Any, reply: ModelReply, results: list[ToolResult]) -> None:
        """Append the assistant reply and the tool results to ``convo``."""
        ...

    @abstractmethod
    def add_user(self, convo: Any, text: str) -> None:
        ...

    @abstractmethod
    def transient(self, exc: Exception) -> Transient | None:
        """Whether ``exc`` is worth retrying (rate limit, overload, timeout, 5xx)."""
        ...

    # -------------------------------------------------------------- trace

    def turn(self, ctx: Context, role: str, **fields: Any) -> None:
        self.step += 1
        clean = {k: self.redactor.value(v) for k, v in fields.items()}
        ctx.record_turn(step=self.step, role=role, model=self.model, **clean)

    # -------------------------------------------------------------- the loop

    def propose(self, ctx: Context) -> Proposal | None:
        """Up to ``attempts`` fresh conversations; ``None`` only when the model gives up or a cap is hit."""
        if self.stopped:
            return None
        if not ctx.history:
            self.memory = []  # control arm: single-shot, nothing carried between proposals
        tools = tools_for(self.task)
        instructions, task_text = system_text(self.task, ctx, self.name, self.max_steps, self.role_prompt,
                                              self.edit_lines)
        files = files_text(ctx, self.max_file_chars)
        context = context_text(ctx, self.memory[-self.memory_size:] if self.memory_size else [])
        if not self.system_recorded:
            # the tools' JSON schemas, once (OpenAI's function format): the dataset export's `tools` column
            schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                         "parameters": t.parameters}} for t in tools]
            self.turn(ctx, "system", text=instructions + "\n" + task_text,
                      args={"tools": [t.name for t in tools], "tool_schemas": schemas})
            self.system_recorded = True
        for attempt in range(self.attempts):
            again = f"[attempt {attempt + 1}/{self.attempts}: starting over]\n" if attempt else ""
            self.turn(ctx, "user", text=again + files_digest(ctx) + "\n\n" + context)
            outcome = self._converse(ctx, self.start(instructions, task_text, files, context, tools))
            if isinstance(outcome, Proposal):
                self._remember(outcome)
                return outcome
            if outcome == "stop":
                return None
        return None

    def _converse(self, ctx: Context, convo: Any) -> Proposal | str:
        """One bounded conversation: a Proposal, "stop" (gave up, cap reached) or "retry"."""
        session = ToolSession(ctx, self.task, self.redactor, self.max_file_chars, self.edit_lines)
        nudged = 0
        for _ in range(self.max_steps):
            reason = self.meter.exhausted()
            if reason:
                self.stopped = reason
                self.turn(ctx, "error", text=f"stopping: {reason}")
                return "stop"
            reply = self._call_with_retries(ctx, convo)
            cost = self.price.cost(reply.usage)
            self.meter.add(reply.usage, cost)
            self.turn(ctx, "assistant", text=reply.text, tokens_in=reply.usage.tokens_in,
                      tokens_out=reply.usage.tokens_out, cache_read=reply.usage.cache_read,
                      cache_write=reply.usage.cache_write, latency_s=round(reply.latency_s, 4),
                      cost_usd=round(cost, 8), args={"stop_reason": reply.stop_reason,
                                                     "tool_calls": [c.name for c in reply.calls]})
            if not reply.calls:
                if "GIVE-UP" in reply.text:
                    self.turn(ctx, "error", text="the model gave up without submitting a trial")
                    return "stop"
                if nudged >= 2:
                    self.turn(ctx, "error", text="the model did not call a tool after 2 reminders")
                    return "retry"
                nudged += 1
                self.add_reply(convo, reply, [])
                self.add_user(convo, NUDGE)
                self.turn(ctx, "user", text=NUDGE)
                continue
            results = []
            for call in reply.calls:
                self.turn(ctx, "tool_call", tool=call.name, args=call.args if call.error is None else {"raw": call.raw},
                          text=call.error or "")
                result = session.execute(call)
                self.turn(ctx, "tool_result", tool=call.name, result=result.text,
                          text="error" if result.is_error else "")
                results.append(result)
                if session.proposal is not None:
                    return session.proposal
            self.add_reply(convo, reply, results)
        self.turn(ctx, "error", text=f"no trial submitted after {self.max_steps} model calls")
        return "retry"

    def _call_with_retries(self, ctx: Context, convo: Any) -> ModelReply:
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                reply = self.call(convo)
            except AgentError:
                raise
            except Exception as exc:
                transient = self.transient(exc)
                last = attempt + 1 >= self.retry.attempts
                if transient is None or last:
                    what = f"agent {self.name}: model call failed"
                    if transient is not None:
                        what += f" after {self.retry.attempts} attempts"
                    error = self.redactor.error(exc, what)
                    self.turn(ctx, "error", text=str(error), latency_s=round(time.monotonic() - started, 4))
                    raise error from None
                delay = self.retry.delay(attempt, transient.retry_after)
                self.turn(ctx, "error", text=f"{transient.reason}; retry {attempt + 1}/{self.retry.attempts - 1} "
                                             f"in {delay:.2f}s", latency_s=round(time.monotonic() - started, 4))
                self.sleep(delay)
                attempt += 1
                continue
            reply.latency_s = time.monotonic() - started
            return reply

    def _remember(self, proposal: Proposal) -> None:
        self.pending_memory[proposal.hypothesis] = memory_note(proposal)

    def observe(self, trial: TrialSummary) -> None:
        remember_outcome(self.memory, self.pending_memory, trial)
