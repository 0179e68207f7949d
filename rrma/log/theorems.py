"""What the log says of each theorem of a proof run: its attempts, its seconds, its proof, whether it is done.

Why it exists: the per-theorem policy (rrma/run/theorems.py) picks the current theorem from this count, and
the views show a live proof run's budget ("3 of 40 attempts, 12s of 30s") from the same count, read from
the folded :class:`~rrma.log.state.RunState` alone: the loop and a view cannot disagree, and a view needs
nothing of the loop to read it.

The rules (rrma/run/theorems.py's module docstring says why):

* A theorem's attempts are its agents' trials, in proposal order; the red team's trial, a baseline and a
  confirmation are not attempts. The first agent trial with status ok proves it.
* Its seconds are the spans from each ``started`` theorem mark to the ``done`` after it, less the time the
  run was paused (``run.control``). A span that no ``done`` closed ends at the last trial event of that
  theorem in it (its session was killed or stopped), unless the live driver began it: then it runs to now.
* It is done for the first reason that holds: a ``done`` mark (its reason), proved, attempts used, seconds
  used, or every active agent out of ideas for it.

:class:`TheoremIndex` keeps each theorem's trials and marks as the log grows (both lists only grow, so
each call indexes the new entries alone).

A proof run's progress is counted here once, against all of its theorems, for every view (the dashboard's
header, the runs list, the theorems view, ``bench``'s summary):

* The theorems are those ``run.started`` records (the prepared oracle's, in its order, with their difficulty:
  :func:`listed_theorems`), so a run that has started one theorem of thirty says ``1/30``, not ``1/1``, and a
  theorem not started yet has its difficulty (not ``unknown``). An older log that did not record them names them
  from the task's ``oracle.params.theorems``, the marks, the trials and a finished run's summary.
* Each is in one state (:func:`theorem_states`): ``solved`` (an agent's trial proved it), ``given up`` (done
  unproved: its attempts or seconds used, every agent out of ideas), ``open`` (started, not done: worked on now,
  or left unfinished by a stopped run), ``queued`` (not started). A finished run's recorded summary gives each
  theorem's attempts, seconds and why it is done (what ``bench`` printed).
* The current theorem is the one a run not finished works on: its latest ``started`` mark with no ``done``
  after it (:func:`current_theorem`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rrma.log.state import RunState, TrialRecord
from rrma.task import LoopConfig
from rrma.trial import Status

RED_TEAM_AGENT = "red-team"  # the pseudo-agent that submits loop.red_team's known cheats
UNKNOWN = "unknown"  # the difficulty of a theorem the log does not rate

# A theorem's state: not started yet, being worked on (or left unfinished by a stopped run), proved, or done
# without a proof (the policy gave up on it: its attempts or seconds were used, or every agent was out of ideas)
QUEUED, OPEN, SOLVED, GIVEN_UP = "queued", "open", "solved", "given up"


@dataclass
class TheoremStatus:
    """What the log says of one theorem now."""

    name: str
    attempts: int = 0  # agent trials proposed for it (the red team's not counted)
    seconds: float = 0.0
    solved_by: str | None = None  # the first trial that proved it
    out: set[str] = field(default_factory=set)  # agents out of ideas for it
    done: str | None = None  # solved | attempts | seconds | out_of_ideas (None: not done)
    marked_done: bool = False  # a `done` mark is in the log
    started_seq: int | None = None  # seq of its latest `started` mark
    open_span: bool = False  # its latest `started` mark has no `done` after it
    red_team: str | None = None  # its red-team trial


def epoch(ts: str) -> float:
    """An event's ``ts`` in epoch seconds (0.0 for none)."""
    return datetime.fromisoformat(ts).timestamp() if ts else 0.0


def pause_intervals(state: RunState, now: float) -> list[tuple[float, float]]:
    """(from, to) epoch seconds of each pause of the run (``run.control`` pause to continue). A pause still in
    force runs to ``now``; one a later driver's start ended (a driver starts unpaused) runs to that start."""
    out: list[tuple[float, float]] = []
    opened: dict[str, Any] | None = None
    for order in state.controls:
        if order["action"] == "pause" and opened is None:
            opened = order
        elif order["action"] == "continue" and opened is not None:
            out.append((epoch(opened["ts"]), epoch(order["ts"])))
            opened = None
    if opened is not None:
        ended = state.driver_ts and state.driver_seq > opened["seq"]
        out.append((epoch(opened["ts"]), epoch(state.driver_ts) if ended else now))
    return out


def overlap(a: float, b: float, intervals: Sequence[tuple[float, float]]) -> float:
    """Seconds of [a, b] that fall in ``intervals`` (disjoint)."""
    return sum(max(0.0, min(b, hi) - max(a, lo)) for lo, hi in intervals)


class TheoremIndex:
    """Each theorem's trials and marks, indexed as the log grows; :meth:`status` counts one theorem."""

    def __init__(self) -> None:
        self._trials: dict[str, list[str]] = {}  # theorem -> its trial ids, in order
        self._marks: dict[str, list[dict[str, Any]]] = {}
        self._seen_trials = 0
        self._seen_marks = 0

    def _index(self, state: RunState) -> None:
        """Index the trials and marks appended since the last call (both lists only grow)."""
        for trial_id in state.order[self._seen_trials:]:
            rec = state.trials[trial_id]
            if rec.theorem is not None and not rec.baseline and rec.confirms is None:
                self._trials.setdefault(rec.theorem, []).append(trial_id)
        self._seen_trials = len(state.order)
        for mark in state.theorem_marks[self._seen_marks:]:
            self._marks.setdefault(mark["name"], []).append(mark)
        self._seen_marks = len(state.theorem_marks)

    def trials_of(self, state: RunState, name: str) -> list[TrialRecord]:
        """Every trial of theorem ``name`` (the red team's included), in proposal order."""
        self._index(state)
        return [state.trials[t] for t in self._trials.get(name, [])]

    def status(self, state: RunState, name: str, *, attempts_per_theorem: int, theorem_seconds: float, now: float,
               active: Collection[str] = ()) -> TheoremStatus:
        """What the log says of theorem ``name`` at ``now`` (epoch seconds), under its budgets; ``active``: the
        agents still taking turns (all of them out of ideas is done; none given: that reason never applies)."""
        trials = self.trials_of(state, name)
        st = TheoremStatus(name)
        agent_trials = []
        for rec in trials:
            if rec.agent == RED_TEAM_AGENT:
                st.red_team = st.red_team or rec.trial_id
                continue
            agent_trials.append(rec)
            if st.solved_by is None and rec.status == Status.ok.value:
                st.solved_by = rec.trial_id
        st.attempts = len(agent_trials)
        spans: list[tuple[float, float]] = []  # (from, to) epoch seconds the theorem was current
        start: dict[str, Any] | None = None
        done_reason: str | None = None
        for mark in self._marks.get(name, []):
            if mark["mark"] == "out_of_ideas" and mark.get("agent"):
                st.out.add(str(mark["agent"]))
            elif mark["mark"] == "started":
                if start is not None:  # a session that ended without a `done`: its span ends at its last trial event
                    spans.append((epoch(start["ts"]), self._span_end(agent_trials, start, mark["seq"])))
                start = mark
                st.started_seq = mark["seq"]
            elif mark["mark"] == "done":
                if start is not None:
                    spans.append((epoch(start["ts"]), epoch(mark["ts"])))
                start = None
                st.marked_done = True
                done_reason = done_reason or str(mark.get("reason") or "done")
        if start is not None:
            st.open_span = True
            if start["seq"] > state.driver_seq and state.finish_reason is None:  # begun by this live driver: it runs now
                spans.append((epoch(start["ts"]), max(now, epoch(start["ts"]))))
            else:
                spans.append((epoch(start["ts"]), self._span_end(agent_trials, start, None)))
        # a pause holds every proposal (run.control): its time is not the theorem's
        pauses = pause_intervals(state, now) if state.controls else []
        st.seconds = max(0.0, sum(b - a - overlap(a, b, pauses) for a, b in spans))
        if done_reason is not None:
            st.done = done_reason
        elif st.solved_by is not None:
            st.done = "solved"
        elif st.attempts >= attempts_per_theorem:
            st.done = "attempts"
        elif st.started_seq is not None and st.seconds >= theorem_seconds:
            st.done = "seconds"
        elif active and set(active) <= st.out:
            st.done = "out_of_ideas"
        return st

    @staticmethod
    def _span_end(trials: list[TrialRecord], start: dict[str, Any], before_seq: int | None) -> float:
        """The last trial event of a span that no `done` closed (its session was killed or stopped)."""
        end = epoch(start["ts"])
        for rec in trials:
            if rec.proposed_seq > start["seq"] and (before_seq is None or rec.proposed_seq < before_seq):
                end = max(end, epoch(rec.proposed_ts), epoch(rec.finished_ts))
        return end


# ----------------------------------------------------------------------------- a proof run's progress


def listed_theorems(state: RunState) -> list[tuple[str, str]]:
    """(name, difficulty) of every theorem of the run, in the oracle's order (the module docstring says whence)."""
    names: dict[str, None] = {}
    difficulty: dict[str, str] = {}
    for item in state.theorems or []:
        name = str(item.get("name", ""))
        if name:
            names.setdefault(name, None)
            level = item.get("difficulty")
            if isinstance(level, str) and level:
                difficulty[name] = level
    if state.theorems is None:  # an older log: what the task, the marks, the trials and the summary name
        oracle = state.task.get("oracle") if isinstance(state.task, dict) else None
        params = oracle.get("params") if isinstance(oracle, dict) else None
        listed = params.get("theorems") if isinstance(params, dict) else None
        if isinstance(listed, list):
            names.update((str(n), None) for n in listed if isinstance(n, str | int))
        for mark in state.theorem_marks:
            names.setdefault(str(mark["name"]), None)
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
    return [(name, difficulty.get(name) or UNKNOWN) for name in names]


def loop_of(state: RunState) -> LoopConfig:
    """The run's loop settings as its task snapshot records them (the per-theorem defaults if unreadable)."""
    try:
        return LoopConfig.model_validate(state.task.get("loop") or {})
    except ValueError:
        return LoopConfig.model_validate({"policy": "per-theorem"})


def agents_of(state: RunState) -> list[str]:
    """The run's agents that prove (the task's, the red team left out): all of them out of ideas is done."""
    agents = state.task.get("agents") if isinstance(state.task, dict) else None
    names = [str(a.get("name")) for a in agents or [] if isinstance(a, dict) and a.get("name")]
    return [n for n in names if n != RED_TEAM_AGENT]


@dataclass(frozen=True)
class TheoremState:
    """One theorem of a proof run and its state, as every view shows it."""

    name: str
    difficulty: str
    state: str  # QUEUED | OPEN | SOLVED | GIVEN_UP
    done: str | None  # why it is done (solved, attempts, seconds, out_of_ideas), None while not done
    attempts: int  # the recorded summary's for a finished run, else counted (TheoremStatus)
    seconds: float
    status: TheoremStatus  # what the log says of it now (its trials, proof, marks)


def theorem_states(state: RunState, now: float, index: TheoremIndex | None = None) -> list[TheoremState]:
    """Every theorem of the run (:func:`listed_theorems`) and its state at ``now`` (epoch seconds), under the
    task's budgets; ``index``: one kept between calls on the same state (a pass over the new trials only)."""
    index = index if index is not None else TheoremIndex()
    loop, active = loop_of(state), set(agents_of(state))
    recorded_summary = state.summary if isinstance(state.summary, dict) else {}
    recorded = recorded_summary.get("theorems") if state.finish_reason is not None else None
    kept_rows: Mapping[str, Any] = recorded if isinstance(recorded, dict) else {}
    started = {str(m["name"]) for m in state.theorem_marks if m["mark"] == "started"}
    out = []
    for name, difficulty in listed_theorems(state):
        st = index.status(state, name, attempts_per_theorem=loop.attempts_per_theorem,
                          theorem_seconds=loop.theorem_seconds, now=now, active=active)
        attempts, seconds, done = st.attempts, st.seconds, st.done
        kept = kept_rows.get(name)
        if isinstance(kept, dict):
            attempts = int(kept.get("attempts", attempts))
            seconds = float(kept.get("seconds", seconds))
            done = kept.get("done", done)
        if st.solved_by is not None:
            word, why = SOLVED, "solved"
        elif done is not None and (st.marked_done or st.started_seq is not None or attempts):
            word, why = GIVEN_UP, str(done)
        elif name in started or st.attempts:
            word, why = OPEN, None
        else:
            word, why = QUEUED, None
        out.append(TheoremState(name, difficulty, word, why, attempts, seconds, st))
    return out


def current_theorem(state: RunState) -> str | None:
    """The theorem a run that has not finished works on: its latest ``started`` mark with no ``done`` after it
    (None in a finished run, or before the first theorem starts). Walks the marks from the newest."""
    if state.finish_reason or not state.theorem_marks:
        return None
    done: set[str] = set()
    for mark in reversed(state.theorem_marks):
        if mark["mark"] == "done":
            done.add(mark["name"])
        elif mark["mark"] == "started" and mark["name"] not in done:
            return str(mark["name"])
    return None


@dataclass(frozen=True)
class ProofProgress:
    """A proof run's progress against all of its theorems: ``9/30 solved · 1 open · 20 queued · 0 given up``."""

    total: int
    solved: int
    open: int
    queued: int
    given_up: int
    current: str | None = None  # the theorem worked on now (current_theorem)

    @classmethod
    def of(cls, states: Sequence[TheoremState], current: str | None) -> ProofProgress:
        count = {word: 0 for word in (SOLVED, OPEN, QUEUED, GIVEN_UP)}
        for st in states:
            count[st.state] += 1
        return cls(len(states), count[SOLVED], count[OPEN], count[QUEUED], count[GIVEN_UP], current)

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "solved": self.solved, "open": self.open, "queued": self.queued,
                "given_up": self.given_up, "current": self.current}


def proof_progress(state: RunState, now: float, index: TheoremIndex | None = None) -> ProofProgress | None:
    """The run's :class:`ProofProgress` at ``now`` (epoch seconds); None when it names no theorem."""
    states = theorem_states(state, now, index)
    return ProofProgress.of(states, current_theorem(state)) if states else None
