"""What an LLM agent's model reads: the instructions, the task, the files and the results so far.

Why it exists: both providers send the same text, and the trace records it. :func:`system_text` is
static over a run (so the providers cache it); :func:`files_text` and :func:`context_text` are built
per proposal; :func:`files_digest` is what the trace records instead of the files block.

Invariant: a control arm (``history`` off) hears nothing of other trials: no best, no blackboard,
no memory of its own earlier proposals.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re

from rrma.contracts import Context, TrialSummary
from rrma.run.context import clip_middle
from rrma.task import TaskConfig
from rrma.workspace import EditRules

ROLE_HINTS = {
    "optimizer": "the optimiser and its schedule: learning rate, warmup, decay, betas, weight decay, batch size",
    "optimiser": "the optimiser and its schedule: learning rate, warmup, decay, betas, weight decay, batch size",
    "architecture": "the model architecture: depth, width, heads, normalisation, activations, initialisation",
    "data": "the data pipeline: tokenisation, sequence length, sampling, augmentation, curriculum",
}

SYSTEM_PROMPT = """You are {agent}, a research agent in a loop of trials judged by a fixed oracle.
Each trial is your hypothesis plus an edit of the workspace; the oracle runs it and reports the
metric `{metric}` ({direction}; lower is better when minimizing). Only improvements larger than the
noise floor count. {metric_note}

How to work:
- Read what you need with read_file (the files are also in the first message).
- Make your change with edit_file (search/replace pairs, or the whole file). Edits go into a
  pending proposal; nothing runs until you submit.
- run_checks is free: use it to catch syntax errors before spending a trial.
- Finish by calling submit_trial with a one-line hypothesis and the effect you expect. One
  trial per turn; make it count. You have at most {max_steps} model calls for this trial.
- Use post_insight to share something the other agents should know (optional, short).
{tree}{role}
Editable files: {editable}
"""

TASK_PROMPT = """# Task: {name}
{description}
"""


def metric_note(task: TaskConfig) -> str:
    """The prompt's sentence on where the metric comes from: true for the task (``metric.source``)."""
    if task.metric.source == "self-reported":
        return (f"The metric is self-reported: it is the `{task.metric.name}: <number>` line printed by the program "
                "you edit, not computed by the oracle; every result is shown to the reviewer marked self-reported, "
                "and only a real improvement of the task counts.")
    return "You cannot change how the metric is computed."


def system_text(task: TaskConfig, ctx: Context, agent: str, max_steps: int, role_prompt: str | None,
                edit_lines: list[re.Pattern[str]] | None = None) -> tuple[str, str]:
    """(instructions, task text): both static over a run, so both are cached."""
    role = ""
    if ctx.role:
        hint = role_prompt or ROLE_HINTS.get(ctx.role.lower(), "")
        role = (f"\nYour role: the {ctx.role} specialist. Propose only changes within your role"
                + (f" ({hint})" if hint else "") + "; other agents cover the rest and share the blackboard.\n")
    if edit_lines:
        role += ("You may only change lines matching one of these patterns: "
                 + ", ".join(p.pattern for p in edit_lines) + "\n")
    tree = ("- Tree policy: you may branch from any successful trial with rebase_to(trial_id) before "
            "editing; by default you build on the current best.\n") if task.loop.policy == "tree" else ""
    instructions = SYSTEM_PROMPT.format(
        agent=agent, metric=task.metric.name, direction=task.metric.direction, max_steps=max_steps,
        tree=tree, role=role, editable=", ".join(ctx.editable) or "(none)", metric_note=metric_note(task),
    )
    return instructions, TASK_PROMPT.format(name=task.name, description=task.description.strip())


def files_text(ctx: Context, max_file_chars: int) -> str:
    """The parent's files: editable ones in full (capped), the rest listed."""
    rules = EditRules(list(ctx.editable), [])
    parts = [f"# Files of the parent trial {ctx.parent_id}"]
    listed = []
    for path in sorted(ctx.files):
        text = ctx.files[path]
        if rules.is_editable(path) or any(fnmatch.fnmatchcase(path, p) for p in ctx.editable):
            shown = text if len(text) <= max_file_chars else text[:max_file_chars] + "\n[... truncated; use read_file]"
            parts.append(f"## {path}\n```\n{shown}\n```")
        else:
            listed.append(f"{path} ({len(text)} chars)")
    if listed:
        parts.append("Other files (read-only, use read_file): " + ", ".join(listed))
    if ctx.theorem:
        parts.append("# Theorem\n" + json.dumps(ctx.theorem, indent=1, sort_keys=True))
    return "\n\n".join(parts)


def files_digest(ctx: Context) -> str:
    """What the trace records instead of the files block: paths with sizes and content hashes."""
    rows = [f"{p} ({len(t)} chars, sha256 {hashlib.sha256(t.encode()).hexdigest()[:12]})"
            for p, t in sorted(ctx.files.items())]
    return f"[files of {ctx.parent_id}: " + "; ".join(rows) + "]"


def _fmt(t: TrialSummary) -> str:
    line = t.line()
    if t.feedback.strip() and t.status != "ok":
        line += "\n    feedback: " + clip_middle(" ".join(t.feedback.strip().split()), 400)
    return line


def context_text(ctx: Context, memory: list[str]) -> str:
    """The per-proposal part of the first message: results so far (empty in a control arm)."""
    parts = []
    if ctx.baseline_score is not None:
        sigma = "" if ctx.sigma is None else f" ± {ctx.sigma:.3g} (noise sigma)"
        parts.append(f"Baseline {ctx.task.metric.name}: {ctx.baseline_score:.6g}{sigma}")
    if ctx.best is not None and ctx.history:  # a control arm (history off) never hears of the best
        parts.append(f"Current best: {ctx.best.line()}")
    if ctx.lineage:
        parts.append("Lineage of the parent (newest first):\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.lineage))
    if ctx.top:
        parts.append("Best trials:\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.top))
    if ctx.recent:
        parts.append("Recent trials:\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.recent))
    if ctx.own:
        parts.append("Your latest results:\n" + "\n".join(f"  {_fmt(t)}" for t in ctx.own))
    if ctx.blackboard:
        parts.append("Blackboard:\n" + "\n".join(f"  - {b}" for b in ctx.blackboard[-10:]))
    if memory and ctx.history:
        parts.append("Your earlier proposals (summary):\n" + "\n".join(f"  {m}" for m in memory))
    if ctx.steer:
        parts.append("Notes from the people running this run (oldest first; follow them within the task's rules):\n"
                     + "\n".join(f"  - {clip_middle(n, 2000)}" for n in ctx.steer))
    parts.append(f"Trials left in the run: {ctx.trials_left}. Propose the next trial now.")
    return "\n\n".join(parts)
