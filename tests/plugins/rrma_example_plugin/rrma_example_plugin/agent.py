"""The example agent: each proposal adds one ``idea N`` line to ``notes.txt`` of its parent.

It stops (``None``) after ``params.proposals`` proposals (default 3). It writes nothing itself:
the edit travels in the proposal, as the agent contract asks.
"""

from __future__ import annotations

from rrma.contracts import Agent, Context, FileEdit, Proposal
from rrma.task import AgentConfig, TaskConfig
from rrma_example_plugin import NOTES


class IdeaAppendAgent(Agent):
    backend = "example-append"

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
