"""The example agent: each proposal adds one ``idea N`` line to ``notes.txt`` of its parent.

It stops (``None``) after ``params.proposals`` proposals (default 3). It writes nothing itself:
the edit travels in the proposal, as the agent contract asks. It declares its params
(:class:`IdeaParams`), so a task that asks for 0 proposals is refused when it is loaded, naming the field.
"""

from __future__ import annotations

from pydantic import Field

from rrma.contracts import Agent, Context, FileEdit, PluginSettings, Proposal
from rrma.task import AgentConfig, TaskConfig
from rrma_example_plugin import NOTES


class IdeaParams(PluginSettings):
    """``agents[].params`` of the example agent."""

    proposals: int = Field(3, ge=1, le=1000)
    """How many ideas it adds before it stops."""


class IdeaAppendAgent(Agent):
    backend = "example-append"
    params_model = IdeaParams

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.left = int(config.params.get("proposals", 3))

    def propose(self, ctx: Context) -> Proposal | None:
        if self.left <= 0:
            return None
        self.left -= 1
        text = ctx.files.get(NOTES, "")
        count = sum(1 for line in text.splitlines() if line.startswith("idea"))
        line = f"idea {count + 1} from {self.name}\n"
        body = text if not text or text.endswith("\n") else text + "\n"
        return Proposal(hypothesis=f"example-append: add idea {count + 1}", edits=[FileEdit(path=NOTES, content=body + line)])
