"""A proof run's figures from its log: per theorem, per difficulty, and the theorems solved over time.

Why it exists: ``bench coq|lean`` prints a table per difficulty at the end of a run (solved, total,
rate, attempts per solved theorem, seconds per solved theorem) and the TUI's theorems view shows the
same table for any proof run, live or finished. Both take the figures from here, so they cannot
drift apart: :func:`difficulty_rows` turns a summary's ``by_difficulty`` (what
:meth:`~rrma.run.theorems.TheoremPolicy.summary` writes into ``run.finished``) into the rows and their
cells; :func:`proof_figures` reads a folded :class:`~rrma.log.state.RunState` (of a live run too)
into one row per theorem and that summary, counting as the per-theorem policy counts (attempts,
seconds, why a theorem is done: rrma/run/theorems.py); :func:`solved_curve` is the cumulative count
of theorems solved by trial and by wall time.

Pure functions of the state: nothing here reads files or imports a view or a plug-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rrma.log.events import parse_ts
from rrma.log.state import RunState, TrialRecord
from rrma.log.theorems import (  # the theorems' states are counted there, once, for every view
    GIVEN_UP,
    OPEN,
    QUEUED,
    SOLVED,
    ProofProgress,
    agents_of,
    current_theorem,
    listed_theorems,
    loop_of,
    theorem_states,
)
from rrma.run.theorems import RED_TEAM_AGENT, Theorem, TheoremPolicy

__all__ = ["ALL", "DIFFICULTY_COLUMNS", "DIFFICULTY_ORDER", "ERROR_CHARS", "GIVEN_UP", "OPEN", "QUEUED", "SOLVED",
           "DifficultyRow", "ProofFigures", "SolvedPoint", "TheoremRow", "difficulty_rows", "proof_figures",
           "run_theorems", "short_error", "solved_curve"]

DIFFICULTY_ORDER = ("easy", "medium", "hard", "unknown")  # the table's rows in this order, others after
ALL = "all"  # the last row: every difficulty
ERROR_CHARS = 200  # of an unsolved theorem's last error


@dataclass(frozen=True)
class DifficultyRow:
    """One row of the difficulty table: ``attempts`` and ``seconds`` are those of the solved theorems."""

    difficulty: str
    solved: int
    total: int
    attempts: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.solved / max(1, self.total)

    @property
    def attempts_per_solved(self) -> float | None:
        return self.attempts / self.solved if self.solved else None

    @property
    def seconds_per_solved(self) -> float | None:
        return self.seconds / self.solved if self.solved else None

    def cells(self) -> list[str]:
        """difficulty, solved, total, rate, attempts/solved, s/solved, as the bench prints them."""
        aps, sps = self.attempts_per_solved, self.seconds_per_solved
        return [self.difficulty, str(self.solved), str(self.total), f"{self.rate:.0%}",
                f"{aps:.1f}" if aps is not None else "-", f"{sps:.2f}" if sps is not None else "-"]


DIFFICULTY_COLUMNS = ("difficulty", "solved", "total", "rate", "attempts/solved", "s/solved")


def difficulty_rows(summary: Mapping[str, Any]) -> list[DifficultyRow]:
    """The rows of the difficulty table of a summary (``by_difficulty``, ``solved``, ``total``): one per
    difficulty (easy, medium, hard, unknown, then any other), then :data:`ALL`."""
    by_difficulty = dict(summary.get("by_difficulty") or {})
    ordered = sorted(by_difficulty.items(),
                     key=lambda kv: DIFFICULTY_ORDER.index(kv[0]) if kv[0] in DIFFICULTY_ORDER else 9)
    rows = [DifficultyRow(str(level), int(row["solved"]), int(row["total"]), int(row["attempts"]),
                          float(row["seconds"])) for level, row in ordered]
    rows.append(DifficultyRow(ALL, int(summary.get("solved", 0)), int(summary.get("total", 0)),
                              sum(r.attempts for r in rows), sum(r.seconds for r in rows)))
    return rows


@dataclass(frozen=True)
class TheoremRow:
    """What the log says of one theorem of a proof run."""

    name: str
    difficulty: str
    state: str  # QUEUED | OPEN | SOLVED | GIVEN_UP
    done: str | None  # why it is done (solved, attempts, seconds, out_of_ideas), None while not done
    attempts: int  # agent trials of it (the red team's not counted)
    seconds: float  # its time as the policy counts it (spans from its `started` marks)
    solved_by: str | None  # the first trial that proved it
    solver: str | None  # that trial's agent
    solved_trial: int | None  # that trial's number among the run's agent trials (the chart's x), from 1
    solved_at: float | None  # seconds from the run's start to that trial's end
    last_trial: str | None  # its latest agent trial (a finished one if any)
    last_error: str  # an unsolved theorem's last finished attempt: the first line of its feedback (raw text)


@dataclass(frozen=True)
class ProofFigures:
    theorems: list[TheoremRow]
    summary: dict[str, Any]  # the policy's summary (by_difficulty, solved, total, theorems, ...)
    recorded: bool  # the figures are the run's own recorded summary (a finished run), not counted here
    progress: ProofProgress  # the theorems' states counted (rrma/log/theorems.py: the header's and the list's too)

    @property
    def difficulty(self) -> list[DifficultyRow]:
        return difficulty_rows(self.summary)


@dataclass(frozen=True)
class SolvedPoint:
    """A theorem proved: the ``trial``-th agent trial, ``seconds`` after the run started; ``solved`` so far."""

    trial: int
    seconds: float
    solved: int
    trial_id: str
    theorem: str


def _seconds_since_start(state: RunState, ts: str | None) -> float | None:
    start, end = parse_ts(state.started_ts), parse_ts(ts or "")
    return None if start is None or end is None else max(0.0, (end - start).total_seconds())


def run_theorems(state: RunState) -> list[Theorem]:
    """The run's theorems in the oracle's order, each with its difficulty (rrma/log/theorems.py
    :func:`~rrma.log.theorems.listed_theorems`: what ``run.started`` recorded, in an older log what the task,
    the marks, the trials and the summary name)."""
    return [Theorem(name, difficulty) for name, difficulty in listed_theorems(state)]


def short_error(rec: TrialRecord) -> str:
    """The first line of a failed attempt's feedback, without the oracle's ``REJECTED:`` word (raw: a view
    filters it); the oracle's ``reason`` metric where the feedback is empty."""
    for line in (rec.feedback or "").splitlines():
        line = line.strip()
        if line:
            head, sep, rest = line.partition(": ")
            text = rest if sep and head.isupper() and head.isalpha() else line
            return text[:ERROR_CHARS]
    reason = rec.metrics.get("reason")
    return str(reason)[:ERROR_CHARS] if reason else rec.status


def proof_figures(state: RunState, now: float | None = None) -> ProofFigures | None:
    """Every theorem of a proof run and its summary, from the folded log; None when the run names no theorem.

    ``now`` (epoch seconds): where the current theorem's open span ends in a live run (default: the
    policy's clock). A finished run's recorded summary gives the per-difficulty figures and each
    theorem's attempts, seconds and why it is done (what the bench printed); a live one's are counted here
    as the policy counts them."""
    theorems = run_theorems(state)
    if not theorems:
        return None
    policy = TheoremPolicy(theorems, loop_of(state), agents_of(state))
    clock = policy.clock() if now is None else now
    summary = policy.summary(state, clock)
    recorded_summary = state.summary if isinstance(state.summary, dict) else {}
    recorded = state.finish_reason is not None and isinstance(recorded_summary.get("by_difficulty"), dict)
    if recorded:
        summary = {**summary, **{k: recorded_summary[k] for k in ("by_difficulty", "solved", "total", "theorems")
                                 if k in recorded_summary}}
    numbers = {tid: n for n, tid in enumerate((r.trial_id for r in state.agent_trials()), start=1)}
    states = theorem_states(state, clock, policy.by_theorem)  # the one rule of each theorem's state
    rows = []
    for th in states:
        st = th.status
        agent_trials = [r for r in policy.trials_of(state, th.name) if r.agent != RED_TEAM_AGENT]
        finished = [r for r in agent_trials if r.finished]
        latest = finished or agent_trials
        last = latest[-1] if latest else None
        solver_rec = state.trials.get(st.solved_by) if st.solved_by else None
        rows.append(TheoremRow(
            name=th.name, difficulty=th.difficulty, state=th.state, done=th.done,
            attempts=th.attempts, seconds=th.seconds, solved_by=st.solved_by,
            solver=solver_rec.agent if solver_rec is not None else None,
            solved_trial=numbers.get(st.solved_by) if st.solved_by else None,
            solved_at=_seconds_since_start(state, solver_rec.finished_ts) if solver_rec is not None else None,
            last_trial=last.trial_id if last is not None else None,
            last_error=short_error(finished[-1]) if finished and solver_rec is None else ""))
    progress = ProofProgress.of(states, current_theorem(state))
    return ProofFigures(rows, summary, recorded, progress)


def solved_curve(state: RunState) -> list[SolvedPoint]:
    """Each first proof of a theorem, in the order of the run's agent trials (the red team's included, as the
    dashboard numbers them): the cumulative count of theorems solved, by trial number and by wall time."""
    solved: set[str] = set()
    points: list[SolvedPoint] = []
    for n, rec in enumerate(state.agent_trials(), start=1):
        if rec.theorem and rec.status == "ok" and rec.agent != RED_TEAM_AGENT and rec.theorem not in solved:
            solved.add(rec.theorem)
            points.append(SolvedPoint(n, _seconds_since_start(state, rec.finished_ts) or 0.0, len(solved),
                                      rec.trial_id, rec.theorem))
    return points
