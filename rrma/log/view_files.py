"""The two files a run directory keeps for people beside its log: ``results.tsv`` and ``blackboard.md``.

Why it exists: they are views of the fold (:class:`~rrma.log.state.RunState`), rewritten whole after each change
by whoever drives the run, and checked by ``verify`` (rrma/log/verify.py renders them again and compares). The
log is the record; these are derived, so nothing reads them back.
"""

from __future__ import annotations

from pathlib import Path

from rrma.log.state import RunState
from rrma.log.store import write_atomic

RESULTS_HEADER = ["trial", "parent", "agent", "status", "score", "delta", "seconds", "description"]


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def render_results(state: RunState) -> str:
    """results.tsv: one row per finished trial (baseline repeats included), tab-separated."""
    lines = ["\t".join(RESULTS_HEADER)]
    for tid in state.order:
        rec = state.trials[tid]
        if not rec.finished:
            continue
        desc = rec.hypothesis.replace("\t", " ").replace("\n", " ").strip()
        if rec.baseline:
            desc = desc or "baseline"
        lines.append(
            "\t".join([
                rec.trial_id, rec.parent or "", rec.agent, rec.status, _fmt(rec.score), _fmt(rec.delta),
                f"{rec.seconds:.3f}", desc[:300],
            ])
        )
    return "\n".join(lines) + "\n"


def render_blackboard(state: RunState) -> str:
    out = [f"# Blackboard: {state.run_id} ({state.task_name})", ""]
    if state.baseline_mean is not None:
        out.append(f"Baseline: {state.baseline_mean:.6g} ± {state.sigma or 0:.3g} (σ); promotion floor {state.floor or 0:.3g}")
        out.append("")
    for post in state.blackboard:
        ref = f" [{post['trial_id']}]" if post.get("trial_id") else ""
        out.append(f"- **{post['agent']}**{ref} ({post['ts']}): {post['text']}")
    return "\n".join(out) + "\n"


def write_views(run_dir: Path, state: RunState) -> None:
    write_atomic(run_dir / "results.tsv", render_results(state))
    write_atomic(run_dir / "blackboard.md", render_blackboard(state))
