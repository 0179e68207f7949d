"""The per-theorem policy alone (rrma/run/theorems.py): which theorem is current, when one is done, whose
turn it is and what an agent sees, read from a folded RunState built from events with chosen times."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from rrma.log.events import Event
from rrma.log.state import RunState
from rrma.run.theorems import RED_TEAM_AGENT, Theorem, TheoremPolicy, agent_hidden, theorems_of
from rrma.task import LoopConfig

_EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
T0 = 1_700_000_000.0


def _ts(seconds: float) -> str:
    return datetime.fromtimestamp(T0 + seconds, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Log:
    """The policy's view of a ledger: a RunState, its lock, and appends stamped by a clock we move."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.state = RunState()
        self.now = 0.0  # seconds after T0
        self.seq = -1

    def clock(self) -> float:
        return T0 + self.now

    def emit(self, kind: str, actor: str, data: dict[str, Any]) -> Any:
        self.seq += 1
        event = _EVENTS.validate_python({"v": 1, "seq": self.seq, "ts": _ts(self.now), "kind": kind, "actor": actor,
                                         "data": data, "prev": "0" * 64, "hash": "0" * 64})
        self.state.apply(event)
        return event

    def start(self, resumed: bool = False) -> None:
        if resumed:
            self.emit("run.resumed", "harness", {"reason": "resume"})
        else:
            self.emit("run.started", "harness", {"run_id": "r", "task_name": "t", "task": {}})

    def trial(self, trial_id: str, theorem: str, agent: str, status: str = "rejected", meta: Any = None,
              **metrics: Any) -> None:
        self.emit("trial.proposed", f"agent:{agent}", {"trial_id": trial_id, "parent": None, "agent": agent,
                                                        "proposal_blob": "b" * 64, "theorem": theorem,
                                                        "meta": meta or {}})
        self.emit("trial.finished", "oracle", {"trial_id": trial_id, "status": status,
                                               "score": 1.0 if status == "ok" else None, "metrics": metrics,
                                               "feedback": "REJECTED: " + str(metrics.get("reason", ""))})


THEOREMS = [Theorem("a", "easy", "f.v", {"name": "a", "statement": "Theorem a : True."}),
            Theorem("b", "hard", "g.v", {"name": "b", "statement": "Theorem b : True."}),
            Theorem("c", "easy", "g.v", {"name": "c", "statement": "Theorem c : True."})]


def _policy(log: Log, agents: tuple[str, ...] = ("p1", "p2"), **loop: Any) -> TheoremPolicy:
    settings = {"policy": "per-theorem", "attempts_per_theorem": 3, "theorem_seconds": 30.0, **loop}
    return TheoremPolicy(THEOREMS, LoopConfig.model_validate(settings), agents, clock=log.clock)


def _never() -> bool:
    return False


def _take(policy: TheoremPolicy, log: Log, agent: str) -> Any:
    """``agent``'s turn, which must come at once (a wait of 2 s fails the test instead of hanging it)."""
    deadline = time.monotonic() + 2.0
    turn = policy.take_turn(agent, log, lambda: time.monotonic() > deadline)
    assert turn is not None, f"not {agent}'s turn"
    return turn


@pytest.mark.parametrize(("case", "done"), [
    ("solved", "solved"),  # an agent's trial was accepted
    ("attempts", "attempts"),  # three agent trials, none accepted
    ("out", "out_of_ideas"),  # both agents said they have nothing more for it
    ("one_out", None),  # one agent out: the other still has turns
    ("red_team_accepted", None),  # a cheat the oracle accepted proves nothing: not solved, not an attempt
])
def test_when_a_theorem_is_done(case: str, done: str | None) -> None:
    log = Log()
    log.start()
    policy = _policy(log)
    assert policy.current(log.state)[0].name == "a"  # type: ignore[index]
    if case == "solved":
        log.trial("t1", "a", "p1", "ok", accepted=True)
    elif case == "attempts":
        for i in range(3):
            log.trial(f"t{i}", "a", "p1", reason="incomplete proof")
    elif case in ("out", "one_out"):
        for agent in ("p1", "p2")[: 2 if case == "out" else 1]:
            log.emit("note", "harness", {"text": "x", "theorem": {"name": "a", "mark": "out_of_ideas", "agent": agent}})
    elif case == "red_team_accepted":
        log.trial("t1", "a", RED_TEAM_AGENT, "ok")
    st = policy.status(log.state, "a")
    assert st.done == done
    assert st.attempts == {"attempts": 3, "solved": 1}.get(case, 0)
    assert policy.current(log.state)[0].name == ("b" if done else "a")  # type: ignore[index]


def test_a_mark_only_the_harness_writes_counts() -> None:
    """A note by anyone else that looks like a mark (a person's `rrma-tui` note) changes nothing."""
    log = Log()
    log.start()
    for agent in ("p1", "p2"):
        log.emit("note", "human:eve", {"text": "x", "theorem": {"name": "a", "mark": "out_of_ideas", "agent": agent}})
        log.emit("note", "agent:p1", {"text": "x", "theorem": {"name": "a", "mark": "done", "reason": "solved"}})
    assert _policy(log).status(log.state, "a").done is None


def test_seconds_are_read_from_the_log_across_a_kill_and_a_resume() -> None:
    log = Log()
    log.start()
    policy = _policy(log, theorem_seconds=20.0)
    turn = _take(policy, log, "p1")  # marks `a` started at 0 s
    assert turn.theorem.name == "a" and log.state.theorem_marks[-1]["mark"] == "started"
    log.now = 4.0
    log.trial("t1", "a", "p1", reason="no")
    policy.end_turn(turn)
    log.now = 12.0  # the live span counts to now
    assert policy.status(log.state, "a").seconds == pytest.approx(12.0)
    # kill -9 at 12 s: the log ends with t1 at 4 s. A new driver resumes 1000 s later
    log.now = 1000.0
    log.start(resumed=True)
    fresh = _policy(log, theorem_seconds=20.0)
    assert fresh.status(log.state, "a").seconds == pytest.approx(4.0)  # the dead session's span ends at its last trial
    turn = _take(fresh, log, "p1")  # `a` is started again in this session
    assert turn.theorem.name == "a" and turn.attempts_left == 2
    log.now = 1010.0
    assert fresh.status(log.state, "a").seconds == pytest.approx(14.0)
    fresh.end_turn(turn)
    log.now = 1016.5  # 4 + 16.5 >= 20: out of time; the next turn marks it done and starts `b` (p1 first)
    turn = _take(fresh, log, "p1")
    assert turn.theorem.name == "b"
    done = [m for m in log.state.theorem_marks if m["mark"] == "done"]
    assert [(m["name"], m["reason"]) for m in done] == [("a", "seconds")]
    assert fresh.status(log.state, "a").seconds == pytest.approx(20.5)  # frozen at its done mark


def test_a_pause_does_not_count_against_the_theorems_seconds() -> None:
    """A person's pause holds every proposal: before, its time counted as the current theorem's, and a long
    pause gave the theorem up (`done (seconds)`) on the first turn after continue."""
    log = Log()
    log.start()
    policy = _policy(log, theorem_seconds=20.0)
    turn = _take(policy, log, "p1")  # `a` started at 0 s
    log.now = 5.0
    log.trial("t1", "a", "p1", reason="no")
    policy.end_turn(turn)
    log.emit("run.control", "human:carol", {"action": "pause", "by": "human:carol"})
    log.now = 65.0  # paused for a minute: three times the theorem's seconds
    assert policy.status(log.state, "a").seconds == pytest.approx(5.0)  # a pause in force: not counted
    log.emit("run.control", "human:carol", {"action": "continue", "by": "human:carol"})
    log.now = 70.0
    assert policy.status(log.state, "a").seconds == pytest.approx(10.0)
    turn = _take(policy, log, "p2")
    assert turn.theorem.name == "a"  # still current: 10 of its 20 s used
    # a pause that a dead driver left in force ends where the next driver starts (it starts unpaused)
    policy.end_turn(turn)
    log.emit("run.control", "human:carol", {"action": "pause", "by": "human:carol"})
    log.now = 100.0
    log.start(resumed=True)
    fresh = _policy(log, theorem_seconds=20.0)
    turn = _take(fresh, log, "p1")  # `a` started again at 100 s
    log.now = 104.0
    # the dead session's span ends at its last trial (5 s), and the new one has run 4 s: the old pause, which
    # the new driver's start ended, takes nothing from them
    assert fresh.status(log.state, "a").seconds == pytest.approx(5.0 + 4.0)


def test_zero_seconds_leaves_no_attempt() -> None:
    log = Log()
    log.start()
    policy = _policy(log, theorem_seconds=0.0)
    assert policy.take_turn("p1", log, _never) is None  # every theorem is out of time as soon as it starts
    assert policy.finished
    assert [m["mark"] for m in log.state.theorem_marks] == ["started", "done"] * 3


def test_turns_go_round_and_skip_an_agent_out_of_ideas() -> None:
    log = Log()
    log.start()
    policy = _policy(log, agents=("p1", "p2", "p3"))
    turn = _take(policy, log, "p1")
    waited: list[bool] = []

    def impatient() -> bool:  # p2 may not take a turn while p1 holds one: it gives up after one wait
        waited.append(True)
        return len(waited) > 1

    assert policy.take_turn("p2", log, impatient) is None
    log.trial("t1", "a", "p1")
    policy.end_turn(turn)
    turn = _take(policy, log, "p2")
    policy.out_of_ideas(turn, log)
    policy.end_turn(turn)
    turn = _take(policy, log, "p3")
    log.trial("t2", "a", "p3")
    policy.end_turn(turn)
    turn = _take(policy, log, "p1")  # p2 is out for `a`: after p1, p3 again
    log.trial("t3", "a", "p1")
    policy.end_turn(turn)
    # three attempts used: `b` is next, the rotation starts again from p1, and p2 has turns again
    turn = _take(policy, log, "p1")
    assert turn.theorem.name == "b" and turn.attempts_left == 3
    policy.end_turn(turn)
    assert _take(policy, log, "p2").theorem.name == "b"


def test_red_team_goes_first_once_per_theorem_and_is_not_an_attempt() -> None:
    log = Log()
    log.start()
    cheats = [{"proof": "admit.", "reason": "uses admit"}, {"proof": "Admitted.", "reason": "uses Admitted"}]
    policy = _policy(log, red_team=cheats)
    turn = _take(policy, log, "p2")  # whoever comes first runs the red team's trial
    assert turn.red_team is not None and turn.red_team.proof == "admit." and turn.red_team.theorem == "a"
    assert log.state.theorem_marks == []  # a's clock starts after the red team
    log.trial("r1", "a", RED_TEAM_AGENT, meta=turn.red_team.meta, cheat=True,
              reason="uses admit (leaves the goal unproved)")
    policy.end_turn(turn)
    turn = _take(policy, log, "p1")
    assert turn.red_team is None and turn.attempts_left == 3
    log.trial("t1", "a", "p1", "ok")
    policy.end_turn(turn)
    turn = _take(policy, log, "p2")
    assert turn.red_team is not None and turn.red_team.proof == "Admitted." and turn.red_team.theorem == "b"
    log.trial("r2", "b", RED_TEAM_AGENT, meta=turn.red_team.meta, cheat=True, reason="rejected: timeout")  # rejected, for another reason
    policy.end_turn(turn)
    summary = policy.summary(log.state)
    assert summary["cheats_rejected"] == 1 and summary["cheats_accepted"] == 0
    assert summary["red_team_misjudged"] == ["b: 'Admitted.' -> rejected: timeout"]
    assert summary["theorems"]["a"]["attempts"] == 1 and summary["solved"] == 1
    assert summary["by_file"] == {"f.v": {"total": 1, "solved": 1}, "g.v": {"total": 2, "solved": 0}}


def test_what_an_agent_sees() -> None:
    log = Log()
    log.start()
    log.emit("blackboard.post", "agent:p2", {"agent": "p2", "text": "tactic `auto.` closed theorem z"})
    policy = _policy(log)
    log.trial("r1", "a", RED_TEAM_AGENT, cheat=True, reason="uses admit")
    log.trial("t1", "a", "p1", reason="incomplete proof", goals=1)
    log.trial("t2", "a", "p2", reason="bad tactic")
    log.trial("t3", "b", "p1", reason="elsewhere")
    proofs = {"t1": "auto.", "t2": "lia.", "r1": "admit."}
    parts = policy.context_parts(log.state, "p1", THEOREMS[0], lambda rec: proofs.get(rec.trial_id))
    assert parts["theorem"] == {"name": "a", "statement": "Theorem a : True."}
    assert [t.trial_id for t in parts["own"]] == ["t1"] and [t.trial_id for t in parts["recent"]] == ["t1", "t2"]
    assert parts["tried"] == {"auto.", "lia."}  # the red team's cheat is nobody's idea to avoid
    assert parts["blackboard"] == ["p2: tactic `auto.` closed theorem z"] and parts["trials_left"] == 1
    isolated = _policy(log, isolated=True).context_parts(log.state, "p1", THEOREMS[0], lambda rec: proofs.get(rec.trial_id))
    assert [t.trial_id for t in isolated["recent"]] == ["t1"]
    assert isolated["blackboard"] == [] and isolated["tried"] == set()


def test_hidden_paths_and_a_non_theorem_oracle(tmp_path: Any) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    answers = tmp_path / "answers.v"
    answers.write_text("x")
    assert agent_hidden(run_dir, [answers]) == (run_dir.resolve(), run_dir.parent.resolve(), answers.resolve())
    with pytest.raises(ValueError, match="names its theorems"):
        theorems_of(object())


@pytest.mark.parametrize(("loop", "message"), [
    ({"isolated": True}, "loop.isolated: only the per-theorem policy uses it"),  # a setting the run would not use
    ({"policy": "tree", "red_team": [{"proof": "admit.", "reason": "admit"}]}, "loop.red_team: only the per-theorem"),
    ({"policy": "per-theorem", "confirm": 2}, "loop.confirm: the per-theorem policy promotes nothing"),
    ({"policy": "per-theorem", "hitl": True}, "loop.hitl: the per-theorem policy promotes nothing"),
    ({"policy": "per-theorem", "red_team": [{"proof": "admit.", "reason": ""}]}, "at least 1 character"),
    ({"policy": "per-theorem", "attempts_per_theorem": 0}, "greater than or equal to 1"),
])
def test_per_theorem_settings_are_checked(loop: dict[str, Any], message: str) -> None:
    from rrma.task import TaskError, task_from_dict

    with pytest.raises(TaskError, match=re.escape(message)):
        task_from_dict({"name": "t", "loop": loop})


@pytest.mark.parametrize("loop", [{}, {"policy": "per-theorem", "theorem_seconds": 5, "isolated": True,
                                       "red_team": [{"proof": "admit.", "reason": "uses admit"}]}])
def test_a_run_json_snapshot_loads_again(loop: dict[str, Any]) -> None:
    """`rrma-tui resume` rebuilds the task from its snapshot, which names every field (defaults included)."""
    from rrma.task import task_from_dict

    task = task_from_dict({"name": "t", "loop": loop})
    again = task_from_dict({k: v for k, v in task.snapshot().items() if k != "base_dir"})
    assert again.loop == task.loop


def test_the_agent_trial_count_is_the_length_of_agent_trials() -> None:
    """The loop reads RunState.agent_trial_count per trial (agent_trials() walks every trial: 11 ms at 10k)."""
    log = Log()
    log.start()
    base = {"parent": None, "proposal_blob": "b" * 64}
    log.emit("trial.proposed", "agent:baseline", {**base, "trial_id": "base-0", "agent": "baseline", "baseline": True})
    log.trial("t0001", "a", "p1")
    log.emit("trial.proposed", "harness", {**base, "trial_id": "t0001-r1", "agent": "p1", "confirms": "t0001"})
    log.emit("trial.proposed", "agent:p1", {**base, "trial_id": "t0001", "agent": "p1"})  # the same id again: no new trial
    log.trial("t0002", "a", "p2")
    assert log.state.agent_trial_count == len(log.state.agent_trials()) == 2
