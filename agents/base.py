"""TEMPORARY (issue 21): the agent contract moved to :mod:`rrma.contracts`; this shim goes as soon as
rrma/run/loop.py (being split) imports from there. Import from rrma.contracts."""

from rrma.contracts import Agent, AgentError, Context, TrialSummary

__all__ = ["Agent", "AgentError", "Context", "TrialSummary"]
