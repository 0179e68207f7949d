"""Replay agent: re-proposes the proposals of a recorded run, in their original order.

``params.source`` names the recorded run directory. Each ``trial.proposed`` event (baseline
repeats excluded) is read back with its proposal blob, so the new run gets byte-identical edits.
With ``params.agent`` set, only that agent's proposals are replayed. This is how two executors
or two versions of an oracle are compared on the same proposals, and how a crashed run's ideas
are re-used without a model.
"""

from __future__ import annotations

from pathlib import Path

from rrma.contracts import Agent, AgentError, Context, PluginSettings
from rrma.log.store import RunNotFound, RunStore
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Proposal


def recorded_proposals(run_dir: Path, agent: str | None = None) -> list[Proposal]:
    store = RunStore(run_dir)
    proposals = []
    for event in store.scan().events:
        if event.kind != "trial.proposed" or event.data.baseline:
            continue
        if agent is not None and event.data.agent != agent:
            continue
        proposals.append(Proposal.model_validate(store.get_json_blob(event.data.proposal_blob)))
    return proposals


class ReplayParams(PluginSettings):
    """``agents[].params`` of the replay backend (checked when the task is loaded: rrma/declare.py)."""

    source: str | None = None
    """The recorded run directory whose proposals are replayed (required: the agent refuses to start without it)."""
    agent: str | None = None
    """Replay only this agent's proposals (default: every agent's, in log order)."""


class ReplayAgent(Agent):
    backend = "replay"
    params_model = ReplayParams

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        source = config.params.get("source")
        if not source:
            raise AgentError(f"agent {config.name}: the replay backend needs params.source (a run directory)")
        try:
            self.queue = recorded_proposals(Path(source), config.params.get("agent"))
        except RunNotFound as exc:
            raise AgentError(f"agent {config.name}: {exc}") from exc
        self.position = 0

    def propose(self, ctx: Context) -> Proposal | None:
        if self.position >= len(self.queue):
            return None
        proposal = self.queue[self.position]
        self.position += 1
        ctx.record_turn(role="assistant", text=f"replay {self.position}/{len(self.queue)}: {proposal.hypothesis}")
        return proposal
