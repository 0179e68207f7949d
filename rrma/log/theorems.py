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
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rrma.log.state import RunState, TrialRecord
from rrma.trial import Status

RED_TEAM_AGENT = "red-team"  # the pseudo-agent that submits loop.red_team's known cheats


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


def _epoch(ts: str) -> float:
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
            out.append((_epoch(opened["ts"]), _epoch(order["ts"])))
            opened = None
    if opened is not None:
        ended = state.driver_ts and state.driver_seq > opened["seq"]
        out.append((_epoch(opened["ts"]), _epoch(state.driver_ts) if ended else now))
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
                    spans.append((_epoch(start["ts"]), self._span_end(agent_trials, start, mark["seq"])))
                start = mark
                st.started_seq = mark["seq"]
            elif mark["mark"] == "done":
                if start is not None:
                    spans.append((_epoch(start["ts"]), _epoch(mark["ts"])))
                start = None
                st.marked_done = True
                done_reason = done_reason or str(mark.get("reason") or "done")
        if start is not None:
            st.open_span = True
            if start["seq"] > state.driver_seq and state.finish_reason is None:  # begun by this live driver: it runs now
                spans.append((_epoch(start["ts"]), max(now, _epoch(start["ts"]))))
            else:
                spans.append((_epoch(start["ts"]), self._span_end(agent_trials, start, None)))
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
        end = _epoch(start["ts"])
        for rec in trials:
            if rec.proposed_seq > start["seq"] and (before_seq is None or rec.proposed_seq < before_seq):
                end = max(end, _epoch(rec.proposed_ts), _epoch(rec.finished_ts))
        return end
