"""The LLM agents' tool-use loop: one bounded conversation per attempt, the same for every provider.

Why it exists: :class:`LLMAgent` owns the loop so that the provider modules
(:mod:`agents.anthropic_agent`, :mod:`agents.openai_agent`) only translate a conversation to their
wire format (the abstract hooks ``start``, ``call``, ``add_reply``, ``add_user``, ``transient``).

Invariants (the package's, :mod:`agents.llm`): every model call, tool call and tool result is one
trace turn, redacted; a provider error leaves as a scrubbed :class:`~rrma.contracts.AgentError`;
once a cap is reached no further model call is made and ``propose`` returns ``None``.
"""

from __future__ import annotations

import os
import random
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.llm.costs import Usage, UsageMeter, price_for
from agents.llm.prompts import context_text, files_digest, files_text, system_text
from agents.llm.redaction import Redactor
from agents.llm.retries import RetryPolicy, Transient
from agents.llm.tools import ToolCall, ToolResult, ToolSession, ToolSpec, compile_edit_lines, tools_for
from agents.memory import memory_note, remember_outcome
from rrma.contracts import Agent, AgentError, Context, TrialSummary
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Proposal


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
