"""The example oracle: the score is the number of lines of ``notes.txt`` that start with ``idea``.

The oracle computes the score itself from the trial's file, read as data without following
links (:func:`rrma.contain.files.read_bytes`); it runs no program the agent wrote, so it needs
no sandbox. Deterministic: the same file always gets the same score.
"""

from __future__ import annotations

from rrma.contain.files import LinkRefused, read_bytes
from rrma.contracts import EvalContext, Oracle, Outcome, Status
from rrma_example_plugin import NOTES, SCORED_BY

LIMIT = 1 << 20  # bytes of notes.txt read at most


class IdeaCountOracle(Oracle):
    kind = "example-count"
    version = "1"

    def evaluate(self, ctx: EvalContext) -> Outcome:
        try:
            text = read_bytes(ctx.trial_dir, NOTES, limit=LIMIT).decode("utf-8", errors="replace")
        except (OSError, LinkRefused, ValueError) as exc:
            return Outcome(status=Status.rejected, feedback=f"{NOTES} cannot be read: {exc}")
        ideas = sum(1 for line in text.splitlines() if line.startswith("idea"))
        return Outcome(status=Status.ok, score=float(ideas), metrics={self.metric: ideas, "scored_by": SCORED_BY},
                       feedback=f"{ideas} ideas in {NOTES} (counted by {SCORED_BY})")
