"""Agents: the backends behind the :class:`rrma.contracts.Agent` contract.

LLM backends, coding agents (agents/coding), offline baselines (random search, tactic portfolio,
replay) and proof search. The core finds them by name through :mod:`rrma.plugins` (imported
only when a task uses them), so the offline path never imports an SDK it does not need; an agent
that lives in another package is added with an ``rrma.agents`` entry point (docs/plugins.md).
:mod:`agents.memory` is the agents' own helper for remembering their outcomes.
"""
