"""What an LLM agent's model calls cost, and the per-agent caps on tokens and dollars.

Why it exists: a run's cost cap (``budget_usd``) is only as good as the price it multiplies, so the
list prices live in one table (:data:`PRICES`, by model family, most specific prefix first) that an
agent's ``params.price`` overrides. :class:`UsageMeter` adds every call's tokens and cost.

Invariant: the caps are hard; once :meth:`UsageMeter.exhausted` names a reason, the loop makes no
further model call in this run (:mod:`agents.llm.agent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rrma.contracts import AgentError


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
