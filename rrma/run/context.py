"""Build what an agent sees from the run state (the context builder of DESIGN.md).

The loop calls :func:`build_context` before each proposal; the result is a
:class:`rrma.contracts.Context`, the one thing an agent reads.

History switches: with ``loop.history`` off (single-shot control arm) agents see only the task,
the baseline's score and noise, the parent's files and their own last result: not the current
best (its id, score or hypothesis), other agents' trials, the blackboard or the lineage; with
``loop.lineage`` off they do not see the parent's ancestry. Feedback is truncated so that a flood in one trial cannot crowd out the rest.
Steer notes (a person's ``agent.steer``, chosen by the loop for this agent) are passed through
whatever the history switches say: a person addressed them to this agent on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rrma.contracts import Context, TrialSummary
from rrma.log.state import RunState, TrialRecord
from rrma.task import TaskConfig
from rrma.text import clip_middle

FEEDBACK_CHARS = 1500


def summarize(state: RunState, rec: TrialRecord) -> TrialSummary:
    return TrialSummary(
        trial_id=rec.trial_id,
        parent=rec.parent,
        agent=rec.agent,
        status=rec.status,
        score=rec.score,
        delta_sigma=rec.delta_sigma,
        hypothesis=rec.hypothesis,
        feedback=clip_middle(rec.feedback, FEEDBACK_CHARS),
        cached=rec.cached,
        theorem=rec.theorem,
        metrics=dict(rec.metrics),
        params=dict(rec.meta),
        promoted=rec.promoted,
    )


def build_context(
    state: RunState,
    task: TaskConfig,
    *,
    agent_name: str,
    role: str | None,
    parent_id: str,
    files: dict[str, str],
    editable: list[str],
    trials_left: int,
    record_turn: Callable[..., None],
    post: Callable[..., None],
    files_of: Callable[[str], dict[str, str]],
    theorem: dict[str, Any] | None = None,
    steer: list[str] | None = None,
) -> Context:
    history = task.loop.history
    finished = [state.trials[t] for t in state.order if state.trials[t].finished and not state.trials[t].baseline]
    scored = [t for t in finished if t.score is not None and t.status == "ok"]
    sign = 1 if task.metric.direction == "minimize" else -1
    top = sorted(scored, key=lambda t: sign * float(t.score))[: task.loop.top_k]  # type: ignore[arg-type]
    own = [t for t in finished if t.agent == agent_name][-3:]
    best = state.best
    ctx = Context(
        task=task,
        agent_name=agent_name,
        parent_id=parent_id,
        files=dict(files),
        editable=list(editable),
        role=role,
        best=summarize(state, best) if best and history else None,  # a control arm is blind to the best
        baseline_score=state.baseline_mean,
        sigma=state.sigma,
        trials_left=trials_left,
        history=history,
        theorem=theorem,
        record_turn=record_turn,
        post=post,
        files_of=files_of,
        steer=list(steer or []),
        own=[summarize(state, t) for t in own[-1:]] if not history else [summarize(state, t) for t in own],
    )
    if history:
        ctx.top = [summarize(state, t) for t in top]
        ctx.recent = [summarize(state, t) for t in finished[-task.loop.recent_k:]] if task.loop.recent_k else []
        ctx.blackboard = [f"{p['agent']}: {p['text']}" for p in state.blackboard[-20:]]
        ctx.tried = {t.cache_key for t in state.trials.values() if t.cache_key}
        if task.loop.lineage:
            ctx.lineage = [summarize(state, t) for t in state.lineage(parent_id)]
    return ctx
