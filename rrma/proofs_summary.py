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
from rrma.run.theorems import RED_TEAM_AGENT, Theorem, TheoremPolicy
from rrma.task import LoopConfig

DIFFICULTY_ORDER = ("easy", "medium", "hard", "unknown")  # the table's rows in this order, others after
ALL = "all"  # the last row: every difficulty
ERROR_CHARS = 200  # of an unsolved theorem's last error

# A theorem's state: not started yet, being worked on (or left unfinished by a stopped run), proved, or done
# without a proof (the policy gave up on it: its attempts or seconds were used, or every agent was out of ideas)
QUEUED, OPEN, SOLVED, GIVEN_UP = "queued", "open", "solved", "given up"


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
    """The run's theorems in the oracle's order: the task's ``oracle.params.theorems`` (the benches name
    them), then any other the marks or trials name; each with its difficulty as the log records it (the
    finished run's summary, else the oracle's ``difficulty`` metric of a trial of it, else unknown)."""
    names: dict[str, None] = {}
    oracle = state.task.get("oracle") if isinstance(state.task, dict) else None
    params = oracle.get("params") if isinstance(oracle, dict) else None
    listed = params.get("theorems") if isinstance(params, dict) else None
    if isinstance(listed, list):
        names.update((str(n), None) for n in listed if isinstance(n, str | int))
    for mark in state.theorem_marks:
        names.setdefault(str(mark["name"]), None)
    difficulty: dict[str, str] = {}
    for tid in state.order:
        rec = state.trials[tid]
        if rec.theorem and not rec.baseline:
            names.setdefault(rec.theorem, None)
            level = rec.metrics.get("difficulty")
            if isinstance(level, str) and level and rec.theorem not in difficulty:
                difficulty[rec.theorem] = level
    recorded = state.summary.get("theorems") if isinstance(state.summary, dict) else None
    if isinstance(recorded, dict):
        for name, row in recorded.items():
            names.setdefault(str(name), None)
            if isinstance(row, dict) and isinstance(row.get("difficulty"), str):
                difficulty[str(name)] = row["difficulty"]
    return [Theorem(name, difficulty.get(name) or "unknown") for name in names]


def _loop_of(state: RunState) -> LoopConfig:
    try:
        return LoopConfig.model_validate(state.task.get("loop") or {})
    except ValueError:
        return LoopConfig.model_validate({"policy": "per-theorem"})


def _agents_of(state: RunState) -> list[str]:
    agents = state.task.get("agents") if isinstance(state.task, dict) else None
    names = [str(a.get("name")) for a in agents or [] if isinstance(a, dict) and a.get("name")]
    return [n for n in names if n != RED_TEAM_AGENT]


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
    policy = TheoremPolicy(theorems, _loop_of(state), _agents_of(state))
    summary = policy.summary(state, now)
    recorded_summary = state.summary if isinstance(state.summary, dict) else {}
    recorded = state.finish_reason is not None and isinstance(recorded_summary.get("by_difficulty"), dict)
    if recorded:
        summary = {**summary, **{k: recorded_summary[k] for k in ("by_difficulty", "solved", "total", "theorems")
                                 if k in recorded_summary}}
    numbers = {tid: n for n, tid in enumerate((r.trial_id for r in state.agent_trials()), start=1)}
    marked: set[str] = {str(m["name"]) for m in state.theorem_marks if m["mark"] == "started"}
    rows = []
    for theorem in theorems:
        st = policy.status(state, theorem, now)
        attempts, seconds, done = st.attempts, st.seconds, st.done
        kept = summary["theorems"].get(theorem.name) if recorded else None
        if isinstance(kept, dict):
            attempts = int(kept.get("attempts", attempts))
            seconds = float(kept.get("seconds", seconds))
            done = kept.get("done", done)
        agent_trials = [r for r in policy.trials_of(state, theorem.name) if r.agent != RED_TEAM_AGENT]
        finished = [r for r in agent_trials if r.finished]
        latest = finished or agent_trials
        last = latest[-1] if latest else None
        solver_rec = state.trials.get(st.solved_by) if st.solved_by else None
        if solver_rec is not None:
            state_word = SOLVED
        elif done is not None and (st.marked_done or st.started_seq is not None or attempts):
            state_word = GIVEN_UP
        elif theorem.name in marked or agent_trials:
            state_word = OPEN
        else:
            state_word = QUEUED
        rows.append(TheoremRow(
            name=theorem.name, difficulty=theorem.difficulty, state=state_word,
            done="solved" if solver_rec is not None else (done if state_word == GIVEN_UP else None),
            attempts=attempts, seconds=seconds, solved_by=st.solved_by,
            solver=solver_rec.agent if solver_rec is not None else None,
            solved_trial=numbers.get(st.solved_by) if st.solved_by else None,
            solved_at=_seconds_since_start(state, solver_rec.finished_ts) if solver_rec is not None else None,
            last_trial=last.trial_id if last is not None else None,
            last_error=short_error(finished[-1]) if finished and solver_rec is None else ""))
    return ProofFigures(rows, summary, recorded)


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
