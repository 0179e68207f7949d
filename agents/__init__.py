"""Agents: the protocol (``agents.base``), the context builder, and the backends.

Backends are resolved lazily by name so that the offline path never imports an SDK it does
not need. A backend may also be given as ``"package.module:ClassName"``.
"""

from __future__ import annotations

import importlib

from agents.base import Agent, AgentError, Context, TrialSummary
from rrma.task import AgentConfig, TaskConfig

REGISTRY: dict[str, str] = {
    "random-search": "agents.random_search:RandomSearchAgent",
    "replay": "agents.replay:ReplayAgent",
    "tactic-portfolio": "agents.tactic_portfolio:TacticPortfolioAgent",
    "proof-search": "agents.proof_search:ProofSearchAgent",
    "anthropic": "agents.anthropic_agent:AnthropicAgent",
    "openai": "agents.openai_agent:OpenAIAgent",
    # coding agents: an external program in a sandboxed copy of the parent's workspace (agents/coding)
    "claude-code": "agents.coding.agent:ClaudeCodeAgent",
    "codex": "agents.coding.agent:CodexAgent",
    "aider": "agents.coding.agent:AiderAgent",
    "command": "agents.coding.agent:CommandAgent",
}


def resolve(backend: str) -> type[Agent]:
    target = REGISTRY.get(backend, backend if ":" in backend else None)
    if target is None:
        raise AgentError(f"unknown agent backend {backend!r}; known: {', '.join(sorted(REGISTRY))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentError(f"agent backend {backend!r} cannot be loaded: {exc}") from exc
    return getattr(module, attr)


def make_agent(config: AgentConfig, task: TaskConfig, seed: int = 0) -> Agent:
    return resolve(config.backend)(config, task, seed)


__all__ = ["REGISTRY", "Agent", "AgentError", "Context", "TrialSummary", "make_agent", "resolve"]
