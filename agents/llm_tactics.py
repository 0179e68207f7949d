"""Tactic suggestions from a chat model, for the best-first proof search (``params.llm``).

Why it exists: a model can propose a tactic no rule reads off the goal. :class:`LLMTactics` asks an
LLM backend (``anthropic``, ``openai`` or ``module:Class``, made by :func:`rrma.plugins.make_agent`)
for tactics for the first goal; :func:`parse_tactic_lines` reads them out of its reply.

Invariants: at most ``max_calls`` model calls per theorem; a model error costs the state its
suggestions, never the search; every call is recorded as a trace turn (its reply, tokens, latency)
through the agent's ``record``. The tactics are candidates like any other: screened before they run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState
from rrma.contracts import AgentError
from rrma.task import AgentConfig, TaskConfig

_FENCE = re.compile(r"```[a-zA-Z0-9]*\n(?P<body>.*?)```", re.S)


def parse_tactic_lines(text: str, prover: str, limit: int = 8) -> list[str]:
    """Tactics from a model's reply: the lines of its first fenced block (or of the whole reply),
    numbering and bullets removed, one tactic per line."""
    m = _FENCE.search(text)
    body = m.group("body") if m else text
    out: list[str] = []
    for raw in body.splitlines():
        line = re.sub(r"^\s*(?:\d+[.)]\s+|[-*]\s+)", "", raw).strip().strip("`").strip()
        if not line or line.startswith(("#", "//", "(*", "--")):
            continue
        if prover == "coq" and not line.endswith("."):
            line += "."
        if line not in out:
            out.append(line)
        if len(out) >= limit:
            break
    return out


class LLMTactics:
    """Tactic suggestions from a chat model, through the existing LLM backends (no tools).

    One call per expanded state, at most ``max_calls`` per theorem; the reply's tactics are
    candidates like any other (the backend screens each before it runs). The conversation is
    recorded as trace turns by the search agent.
    """

    def __init__(self, backend: str, model: str | None, task: TaskConfig, name: str, *, max_calls: int = 4,
                 per_call: int = 6, record: Callable[..., None] | None = None) -> None:
        from agents.llm.agent import LLMAgent
        from rrma.plugins import make_agent

        agent = make_agent(AgentConfig(name=f"{name}-tactics", backend=backend, model=model,
                                       max_tokens=512, temperature=0.2), task)
        if not isinstance(agent, LLMAgent):
            raise AgentError(f"params.llm: backend {backend!r} is not a chat-model backend")
        self.model = agent
        self.max_calls = max_calls
        self.per_call = per_call
        self.calls: dict[str, int] = {}
        self.record = record

    def candidates(self, task: TheoremTask, state: ProofState) -> list[Candidate]:
        used = self.calls.get(task.name, 0)
        if used >= self.max_calls:
            return []
        self.calls[task.name] = used + 1
        prover = task.prover
        instructions = (f"You propose the next tactic of a {prover} proof. Reply with up to {self.per_call} "
                        "candidate tactics, most promising first, one per line, inside one fenced code block. "
                        "Each line is a single tactic that applies to the first goal; no explanations.")
        context = (f"Theorem: {task.statement.strip()}\n\nCurrent goals (first goal first):\n"
                   + "\n\n".join(state.goals[:3]))
        started = time.monotonic()
        try:
            convo = self.model.start(instructions, "", "", context, [])
            reply = self.model.call(convo)
        except Exception as exc:  # a model error costs this state its suggestions, not the search
            if self.record is not None:
                self.record(role="error", tool="llm-tactics", text=f"{type(exc).__name__}: {exc}"[:500])
            return []
        tactics = parse_tactic_lines(reply.text, prover, self.per_call)
        if self.record is not None:
            self.record(role="assistant", tool="llm-tactics", text=reply.text[:2000], model=reply.model,
                        tokens_in=reply.usage.tokens_in, tokens_out=reply.usage.tokens_out,
                        latency_s=round(time.monotonic() - started, 3), args={"goal": state.goals[0][:500]})
        return [Candidate(t, 0.4 + 0.05 * k, False, "llm") for k, t in enumerate(tactics)]

    def learn(self, task: TheoremTask, steps: Sequence[tuple[str, str]]) -> None:
        return None  # a chat model is not trained here
