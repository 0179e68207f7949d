"""The per-theorem policy (``loop.policy: per-theorem``): proof benches through the research loop.

Why it exists: a strip-and-rediscover bench is a list of theorems, each with a budget of its own
(``loop.attempts_per_theorem``, ``loop.theorem_seconds``). Running it through
:class:`~rrma.run.loop.ResearchLoop` gives it what every run has (the driver lock, orders, resume,
the outcome cache, Ray, the sandbox); this module is the one thing that differs: *which theorem
the next proposal is for, and who proposes it*. The theorem is part of the proposal's target
(``Proposal.theorem``); the oracle names the theorems (:class:`TheoremSource`).

Invariants:

* One theorem is current at a time, in the oracle's order. A theorem is **done** when a trial of an
  agent proved it (status ok), its attempts are used, its seconds are used, or every agent said it
  has nothing more for it; a done theorem never becomes current again.
* Everything that decides it is read from the log, so a resumed run goes on where the killed one
  was: attempts and proofs from the folded :class:`~rrma.log.state.RunState`'s trials, seconds and
  "out of ideas" from the harness's theorem marks (``note`` events with a ``theorem`` field,
  ``RunState.theorem_marks``): ``started`` when a theorem becomes current in a driver's session,
  ``done`` when it is done, ``out_of_ideas`` when an agent proposes nothing for it. A theorem's
  seconds are the spans from each ``started`` to its ``done``, less the time the run was paused
  (``run.control``: a pause holds every proposal); a span a killed or stopped session left open ends
  at the last trial event of that theorem in it. The count is rrma/log/theorems.py's (the views read the
  same one); this policy adds the budgets and the agents still taking turns.
* Agents take turns (round robin from the first agent on each theorem, one proposal in flight): each
  proposal sees the outcome of the one before, as the bench's own loop did. With ``loop.red_team`` a ``red-team`` pseudo-agent
  first submits one known cheat per theorem (the cheats in turn); its trial is not an attempt.
* An agent sees the theorem's public view only (:data:`AGENT_VIEW`: never the original proof nor
  the file that holds it), the trials of that theorem, the blackboard and the proofs already tried
  (with ``loop.isolated``: its own trials only, no blackboard); its own processes never read the
  run, the runs around it or the oracle's held-out answers (:func:`agent_hidden`).
* There is no baseline to measure (nothing scores before a proof) and nothing to promote: a trial
  scores 1.0 when its proof is accepted. The run ends ``completed`` when every theorem is done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rrma.contracts import TrialSummary
from rrma.log.state import RunState, TrialRecord
from rrma.log.theorems import RED_TEAM_AGENT, TheoremIndex, TheoremStatus
from rrma.run.context import clip_middle, summarize
from rrma.task import LoopConfig, RedTeamCheat
from rrma.trial import Proposal, Status

AGENT_VIEW = ("name", "statement", "context", "difficulty", "prover", "line", "noinit", "module",
              "setting")  # what an agent is told of a theorem (noinit: the theorem is checked without Coq's
# prelude; module: the logical name its context runs as, in the checker and in an agent's session; setting:
# rediscover or library, docs/proofs.md)
COMPLETED = "completed"  # the run's end reason once every theorem is done
FEEDBACK_CHARS = 4000  # of a trial's feedback in a prover's context: the checker's messages and goals
OWN_K, RECENT_K, BLACKBOARD_K = 5, 8, 60  # an agent's own trials, the theorem's latest, blackboard posts
TURN_POLL_S = 0.1  # how often an agent waiting for its turn looks at the stop flag again


@runtime_checkable
class TheoremSource(Protocol):
    """An oracle whose trials prove theorems: it names them, in order, once prepared."""

    def theorems(self) -> list[dict[str, Any]]:
        """One dict per theorem: at least ``name``; ``difficulty``, ``file`` (the basename of the file that
        holds it: summaries only) and the keys of :data:`AGENT_VIEW` where it has them."""
        ...


@dataclass(frozen=True)
class Theorem:
    name: str
    difficulty: str = "unknown"
    file: str = ""  # the basename of the file that holds it (per-file counts); never shown to an agent
    view: Mapping[str, Any] = field(default_factory=dict)  # what an agent is told (AGENT_VIEW keys)

    @classmethod
    def from_oracle(cls, item: Mapping[str, Any]) -> Theorem:
        name = str(item["name"])
        view = {key: item[key] for key in AGENT_VIEW if key in item}
        view["name"] = name
        return cls(name=name, difficulty=str(item.get("difficulty") or "unknown"),
                   file=Path(str(item.get("file") or "")).name, view=view)


@dataclass
class Turn:
    """One agent's turn: propose for ``theorem`` (or submit ``red_team``, the cheat, as the red team)."""

    theorem: Theorem
    agent: str
    attempts_left: int
    red_team: Proposal | None = None


class LogView(Protocol):
    """What the policy needs of the loop's hold on the log (rrma.run.ledger.RunLedger)."""

    lock: Any  # threading.RLock: the state is read and marks appended under it

    @property
    def state(self) -> RunState: ...

    def emit(self, kind: str, actor: str, data: dict[str, Any]) -> Any: ...


def red_team_proposal(theorem: Theorem, cheat: RedTeamCheat) -> Proposal:
    """The red team's trial of ``theorem``: the cheat, and (in ``meta``) what its rejection must say."""
    return Proposal(hypothesis=f"red team: a known cheat ({cheat.reason})", proof=cheat.proof, theorem=theorem.name,
                    meta={"red_team": {"proof": cheat.proof, "reason": cheat.reason}})


def held_out_for(oracle: Any, theorem: str | None) -> tuple[Path, ...]:
    """What an agent's processes must not read while it works on ``theorem``: the oracle's
    ``held_out_for(theorem)`` when it has one (a proof oracle over several files hides the theorem's
    own file whole and only the sources of the others, whose compiled modules the theorem's context
    may load), else its ``held_out()``."""
    narrow = getattr(oracle, "held_out_for", None)
    if theorem is not None and callable(narrow):
        return tuple(narrow(theorem))
    return tuple(oracle.held_out())


def agent_hidden(run_dir: Path, held_out: Sequence[Path] = ()) -> tuple[Path, ...]:
    """What no agent's own process (a coding agent's sandbox, a proof-search agent's prover) may read:
    this run's directory, the folder of runs around it (an earlier run's ``bench_report.json`` holds
    the originals too) unless the harness itself lives there or it is the home folder, and ``held_out``
    (the oracle's answers: the stripped files and their compiled forms)."""
    from rrma.contain.sandbox import harness_paths

    run_dir = Path(run_dir).resolve()
    hidden: list[Path] = [run_dir]
    runs_root = run_dir.parent
    if not any(runs_root == h or runs_root in h.parents for h in harness_paths()) and runs_root != Path.home():
        hidden.append(runs_root)
    for path in held_out:
        resolved = Path(path).resolve()
        if resolved not in hidden:
            hidden.append(resolved)
    return tuple(hidden)


class TheoremPolicy:
    """Which theorem is current, whose turn it is, what an agent sees, and the per-theorem summary.

    The queries (:meth:`status`, :meth:`current`, :meth:`summary`, :meth:`context_parts`) read a folded
    :class:`RunState` and nothing else. The turn gate (:meth:`take_turn`, :meth:`end_turn`,
    :meth:`leave`) is for the loop's agent threads; it appends the theorem marks through the log view
    under its lock, after the policy's own (lock order: the turn gate, then the log's lock).
    """

    def __init__(self, theorems: Sequence[Theorem], loop: LoopConfig, agents: Sequence[str],
                 clock: Callable[[], float] = time.time) -> None:
        if not theorems:
            raise ValueError("the per-theorem policy needs at least one theorem")
        names = [t.name for t in theorems]
        if len(set(names)) != len(names):
            raise ValueError(f"theorem names must be unique: {sorted({n for n in names if names.count(n) > 1})}")
        self.theorems = list(theorems)
        self.index = {t.name: i for i, t in enumerate(self.theorems)}
        self.loop = loop
        self.agents = list(agents)
        self.clock = clock  # epoch seconds, comparable with the log's ts
        self.active = set(self.agents)  # agents still taking turns (a retired agent leaves)
        self.finished = False  # every theorem is done
        self._cond = threading.Condition()
        self._holder: str | None = None
        self._next = 0  # the rotation: index in self.agents of the agent whose turn comes next
        self._cursor = 0  # theorems before it are done (done is for good)
        self.by_theorem = TheoremIndex()  # each theorem's trials and marks, indexed as the log grows

    # ------------------------------------------------------------------ reading the state

    def trials_of(self, state: RunState, name: str) -> list[TrialRecord]:
        """Every trial of theorem ``name`` (the red team's included), in proposal order."""
        return self.by_theorem.trials_of(state, name)

    def status(self, state: RunState, theorem: Theorem | str, now: float | None = None) -> TheoremStatus:
        """What the log says of ``theorem`` now (rrma/log/theorems.py), under this run's budgets and agents."""
        name = theorem if isinstance(theorem, str) else theorem.name
        return self.by_theorem.status(state, name, attempts_per_theorem=self.loop.attempts_per_theorem,
                                      theorem_seconds=self.loop.theorem_seconds,
                                      now=self.clock() if now is None else now, active=self.active)

    def current(self, state: RunState, now: float | None = None) -> tuple[Theorem, TheoremStatus] | None:
        """The first theorem that is not done, with its status (None: every theorem is done)."""
        while self._cursor < len(self.theorems):
            theorem = self.theorems[self._cursor]
            st = self.status(state, theorem, now)
            if st.done is None:
                return theorem, st
            self._cursor += 1
        return None

    def cheat_for(self, theorem: Theorem) -> RedTeamCheat | None:
        cheats = self.loop.red_team
        return cheats[self.index[theorem.name] % len(cheats)] if cheats else None

    # ------------------------------------------------------------------ turns (agent threads)

    def _advance(self, log: LogView) -> Turn | None:
        """Under the log's lock: mark the theorems that became done, start the next one, and say what
        comes first on it (the red team's trial, or an agent's turn: ``agent`` empty, the gate fills it)."""
        state = log.state
        while self._cursor < len(self.theorems):
            theorem = self.theorems[self._cursor]
            st = self.status(state, theorem)
            if st.done is not None:
                if st.open_span and not st.marked_done:
                    self._mark(log, theorem, "done", reason=st.done,
                               text=f"theorem {theorem.name}: done ({st.done}) after {st.attempts} attempt(s), "
                                    f"{st.seconds:.2f} s")
                self._cursor += 1
                continue
            cheat = self.cheat_for(theorem)
            if cheat is not None and st.red_team is None:
                return Turn(theorem, RED_TEAM_AGENT, 0, red_team_proposal(theorem, cheat))
            if st.started_seq is None or st.started_seq < state.driver_seq:
                self._next = 0  # every theorem starts with the first agent (the rotation is per theorem)
                self._mark(log, theorem, "started",
                           text=f"theorem {theorem.name} ({self._cursor + 1}/{len(self.theorems)}): started "
                                f"({st.attempts} attempt(s), {st.seconds:.2f} s used)")
                continue  # read it again with its span open
            return Turn(theorem, "", self.loop.attempts_per_theorem - st.attempts)
        return None

    def _mark(self, log: LogView, theorem: Theorem, mark: str, *, text: str, agent: str | None = None,
              reason: str | None = None) -> None:
        log.emit("note", "harness", {"text": text, "theorem": {"name": theorem.name, "mark": mark, "agent": agent,
                                                               "reason": reason}})

    def _whose_turn(self, out: set[str]) -> str | None:
        for step in range(len(self.agents)):
            agent = self.agents[(self._next + step) % len(self.agents)]
            if agent in self.active and agent not in out:
                return agent
        return None

    def take_turn(self, agent: str, log: LogView, stopping: Callable[[], bool]) -> Turn | None:
        """Wait for ``agent``'s turn; None when every theorem is done, the agent left, or ``stopping()``.

        The red team's trial of a theorem is handed to whichever agent comes first (it runs it for the
        red team, then takes its own turn). Call :meth:`end_turn` when the turn's trial is recorded.
        """
        with self._cond:
            while True:
                if stopping() or agent not in self.active or self.finished:
                    return None
                if self._holder is None:
                    with log.lock:
                        turn = self._advance(log)
                        out = self.status(log.state, turn.theorem).out if turn is not None else set()
                    if turn is None:
                        self.finished = True
                        self._cond.notify_all()
                        return None
                    if turn.red_team is not None or self._whose_turn(out) == agent:
                        self._holder = agent
                        if turn.red_team is None:
                            turn.agent = agent
                        return turn
                self._cond.wait(TURN_POLL_S)

    def end_turn(self, turn: Turn) -> None:
        """The turn's trial is in the log (or nothing was proposed): the next agent's turn."""
        with self._cond:
            if turn.red_team is None and turn.agent in self.agents:
                self._next = (self.agents.index(turn.agent) + 1) % len(self.agents)
            self._holder = None
            self._cond.notify_all()

    def out_of_ideas(self, turn: Turn, log: LogView) -> None:
        """``turn.agent`` proposed nothing for the theorem: it sits out the theorem's other turns."""
        self._mark(log, turn.theorem, "out_of_ideas", agent=turn.agent,
                   text=f"agent {turn.agent} has nothing more to propose for theorem {turn.theorem.name}")

    def leave(self, agent: str) -> None:
        """``agent`` takes no more turns (retired, or its thread ended)."""
        with self._cond:
            self.active.discard(agent)
            if self._holder == agent:
                self._holder = None
            self._cond.notify_all()

    # ------------------------------------------------------------------ what an agent sees

    def context_parts(self, state: RunState, agent: str, theorem: Theorem | None,
                      proof_of: Callable[[TrialRecord], str | None]) -> dict[str, Any]:
        """The fields of an agent's Context for ``theorem``: ``theorem`` (the public view), ``own``,
        ``recent``, ``blackboard``, ``tried`` (proof texts) and ``trials_left`` (attempts left).
        ``theorem`` None: the context of an agent's ``finish`` (no theorem, the blackboard only)."""
        isolated = self.loop.isolated
        if theorem is None:
            board = [] if isolated else [f"{p['agent']}: {p['text']}" for p in state.blackboard[-BLACKBOARD_K:]]
            return {"theorem": None, "own": [], "recent": [], "blackboard": board, "tried": set(), "trials_left": 0}
        trials = [r for r in self.trials_of(state, theorem.name) if r.agent != RED_TEAM_AGENT]
        shown = [r for r in trials if r.finished and (not isolated or r.agent == agent)]

        def summary(rec: TrialRecord) -> TrialSummary:
            return _with_feedback(summarize(state, rec), rec)

        tried = set() if isolated else {p for p in (proof_of(r) for r in trials) if p}
        return {
            "theorem": dict(theorem.view),
            "own": [summary(r) for r in shown if r.agent == agent][-OWN_K:],
            "recent": [summary(r) for r in shown[-RECENT_K:]],
            "blackboard": [] if isolated else [f"{p['agent']}: {p['text']}" for p in state.blackboard[-BLACKBOARD_K:]],
            "tried": tried,
            "trials_left": max(0, self.loop.attempts_per_theorem - len(trials)),
        }

    # ------------------------------------------------------------------ the summary

    def summary(self, state: RunState, now: float | None = None) -> dict[str, Any]:
        """The per-theorem part of ``run.finished``'s summary (the keys ``bench_report.json`` had)."""
        now = self.clock() if now is None else now
        theorems: dict[str, dict[str, Any]] = {}
        by_difficulty: dict[str, dict[str, Any]] = {}
        by_file: dict[str, dict[str, int]] = {}
        cheats_rejected = cheats_accepted = 0
        misjudged: list[str] = []
        for theorem in self.theorems:
            st = self.status(state, theorem, now)
            trials = self.trials_of(state, theorem.name)
            finished = [r for r in trials if r.agent != RED_TEAM_AGENT and r.finished]
            solver = state.trials[st.solved_by].agent if st.solved_by else None
            theorems[theorem.name] = {
                "solved": st.solved_by is not None, "attempts": st.attempts, "seconds": round(st.seconds, 3),
                "difficulty": theorem.difficulty, "file": theorem.file or "-", "solver": solver, "trial": st.solved_by,
                "done": st.done,
                "last_reason": str(finished[-1].metrics.get("reason", "") if finished else "")[:200]}
            row = by_difficulty.setdefault(theorem.difficulty, {"total": 0, "solved": 0, "attempts": 0, "seconds": 0.0})
            row["total"] += 1
            if st.solved_by is not None:
                row["solved"] += 1
                row["attempts"] += st.attempts
                row["seconds"] = round(row["seconds"] + st.seconds, 3)
            per_file = by_file.setdefault(theorem.file or "-", {"total": 0, "solved": 0})
            per_file["total"] += 1
            per_file["solved"] += int(st.solved_by is not None)
            for rec in trials:
                if not rec.finished or rec.status == Status.aborted.value:
                    continue
                if rec.agent == RED_TEAM_AGENT:
                    expected = dict(rec.meta.get("red_team") or {})
                    reason = str(rec.metrics.get("reason", rec.feedback.splitlines()[0] if rec.feedback else ""))
                    if rec.status == Status.ok.value:
                        cheats_accepted += 1
                    elif rec.metrics.get("cheat") and str(expected.get("reason", "")) in reason:
                        cheats_rejected += 1
                    else:  # rejected, but not as this cheat: the defence it tests did not speak
                        misjudged.append(f"{theorem.name}: {expected.get('proof', '')!r} -> {reason}")
                elif rec.metrics.get("cheat") and rec.status != Status.ok.value:
                    cheats_rejected += 1
        checked = [r for r in state.agent_trials() if r.finished and not r.cached and r.status != Status.aborted.value]
        solved = sum(1 for t in theorems.values() if t["solved"])
        return {
            "metric": "solved", "direction": "maximize", "best_score": solved, "solved": solved,
            "total": len(self.theorems), "by_difficulty": by_difficulty, "by_file": by_file,
            "cheats_rejected": cheats_rejected, "cheats_accepted": cheats_accepted, "red_team_misjudged": misjudged,
            "checks": len(checked), "check_seconds": round(sum(r.seconds for r in checked), 3),
            "theorems": theorems,
        }


def _with_feedback(summary: TrialSummary, rec: TrialRecord) -> TrialSummary:
    """A prover reads the checker's remaining goals from the feedback: keep more of it than the loop's default."""
    summary.feedback = clip_middle(rec.feedback, FEEDBACK_CHARS)
    return summary


def theorems_of(oracle: Any) -> list[Theorem]:
    """The prepared oracle's theorems; ValueError when it names none (it is not a theorem oracle)."""
    if not isinstance(oracle, TheoremSource):
        raise ValueError(f"the per-theorem policy needs an oracle that names its theorems (theorems()); "
                         f"{type(oracle).__name__} does not")
    found = [Theorem.from_oracle(item) for item in oracle.theorems()]
    if not found:
        raise ValueError("the oracle names no theorem to prove")
    return found
