"""The research loop's units alone: the scheduler, the pause gate on proposals (orders), the confirmation
verdict, and the seed table checked against the log of a real short run.

The scheduler and orders tests drive a real run log (RunStore on disk) through a RunLedger without an
oracle or agents; an order "from another process" is appended straight to the store, without the
driver's lock, as `rrma-tui pause` does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rrma.contracts import Agent, Context
from rrma.log.store import RunStore
from rrma.run import seeds
from rrma.run.confirm import confirmation_verdict
from rrma.run.ledger import RunLedger
from rrma.run.loop import make_agents, resume_run, start_run
from rrma.run.orders import Orders
from rrma.run.scheduler import Scheduler
from rrma.task import AgentConfig, TaskConfig, load_task, task_from_dict
from rrma.trial import FileEdit, Proposal

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
BY = "human:alice"


def demo_task(**overrides: Any) -> TaskConfig:
    return load_task(DEMO, overrides)


def units(tmp_path: Path, **overrides: Any) -> tuple[RunLedger, Scheduler, Orders]:
    ledger = RunLedger(RunStore(tmp_path / "run", create=True))
    task = demo_task(**overrides)
    scheduler = Scheduler(ledger, task)
    ledger.sync()
    return ledger, scheduler, Orders(ledger, scheduler, task)


def order(ledger: RunLedger, action: str) -> int:
    """A person's order, appended as another process would (no driver lock); returns its seq."""
    return int(ledger.store.append("run.control", BY, {"action": action, "by": BY, "reason": ""}).seq)


def proposed(trial_id: str, **extra: Any) -> dict[str, Any]:
    return {"trial_id": trial_id, "parent": "base-0", "agent": "a", "proposal_blob": "0" * 64, **extra}


def measured_baseline(ledger: RunLedger, score: float) -> None:
    ledger.emit("trial.proposed", "agent:baseline", {**proposed("base-0", baseline=True), "parent": None})
    ledger.emit("trial.finished", "oracle", {"trial_id": "base-0", "status": "ok", "score": score})
    ledger.emit("baseline.measured", "harness", {"trial_ids": ["base-0"], "scores": [score], "mean": score,
                                                 "sigma": 0.0, "floor": 0.0})
    ledger.emit("trial.promoted", "harness", {"trial_id": "base-0", "score": score, "previous_best": None,
                                              "previous_score": None})


def kinds(ledger: RunLedger) -> list[tuple[int, str, Any]]:
    return [(e.seq, e.kind, e.data) for e in ledger.store.scan().events]


def alive_after(thread: threading.Thread, seconds: float = 0.3) -> bool:
    thread.join(timeout=seconds)
    return thread.is_alive()


# ----------------------------------------------------------------------------- scheduler


def test_reserve_never_takes_more_than_max_trials_and_a_returned_trial_is_taken_again(tmp_path: Path) -> None:
    ledger, scheduler, _ = units(tmp_path, **{"budget.max_trials": 2})
    scheduler.start_agent_phase()
    assert scheduler.reserve() and scheduler.reserve()
    got: list[bool] = []
    third = threading.Thread(target=lambda: got.append(scheduler.reserve()))
    third.start()
    assert alive_after(third)  # both trials are held by proposals in the works: the third waits
    scheduler.give_back()  # one of them proposed nothing
    third.join(timeout=5)
    assert got == [True] and scheduler.reserved == 2
    for trial_id in ("t0001", "t0002"):
        ledger.emit("trial.proposed", "agent:a", proposed(trial_id))
    assert scheduler.reserve() is False  # the budget is spent in the log: no waiting
    assert scheduler.end_reason() == "max_trials"


def test_trials_already_in_the_log_count_against_the_budget(tmp_path: Path) -> None:
    ledger, scheduler, _ = units(tmp_path, **{"budget.max_trials": 2})
    ledger.emit("trial.proposed", "agent:a", proposed("t0001"))
    scheduler.start_agent_phase()  # a resumed run: one trial used
    assert scheduler.reserve()
    assert scheduler.next_id() == "t0002" and scheduler.next_id() == "t0003"  # handed out once each


def reserving_while_paused(ledger: RunLedger, scheduler: Scheduler) -> tuple[threading.Thread, list[bool]]:
    """A pause in force (folded), then an agent asking for a trial: the thread it waits in, and what it got."""
    scheduler.start_agent_phase()
    order(ledger, "pause")
    ledger.sync()
    got: list[bool] = []
    agent = threading.Thread(target=lambda: got.append(scheduler.reserve()))
    agent.start()
    return agent, got


def test_a_pause_holds_reservations_until_continue(tmp_path: Path) -> None:
    ledger, scheduler, _ = units(tmp_path, **{"budget.max_trials": 5})
    agent, got = reserving_while_paused(ledger, scheduler)
    assert alive_after(agent) and got == []
    order(ledger, "continue")
    ledger.sync()  # the agent phase's fold
    agent.join(timeout=5)
    assert got == [True]


# (setting, what happens, the reason the run ends with)
STOP_CASES = [
    ({}, "ctrl-c", "interrupted"),  # the driver's own stop event (Ctrl-C) comes first
    ({}, "stop order", "stopped"),  # a person's run.control stop
    ({"budget.max_wall_seconds": 60}, "61 s later", "max_wall_time"),  # the wall clock ran out
    ({"metric.target": 5.0}, "best 5.0", "target"),  # the best reached the target (minimize: 5.0 <= 5.0)
    ({"metric.target": 4.0}, "best 5.0", None),  # not yet
]


@pytest.mark.parametrize(("overrides", "event", "reason"), STOP_CASES)
def test_stop_reasons(tmp_path: Path, overrides: dict[str, Any], event: str, reason: str | None) -> None:
    ledger, scheduler, _ = units(tmp_path, **overrides)
    if event == "ctrl-c":
        scheduler.stop.set()
        order(ledger, "stop")
    elif event == "stop order":
        order(ledger, "stop")
    elif event == "best 5.0":
        measured_baseline(ledger, 5.0)
    elif event == "61 s later":
        scheduler.started -= 61
    ledger.sync()
    assert scheduler.stop_reason() == reason
    scheduler.start_agent_phase()
    if reason is None:
        assert scheduler.reserve() and scheduler.reason is None
    else:
        assert scheduler.reserve() is False and scheduler.reason == reason


def test_a_paused_run_still_ends_on_a_stop(tmp_path: Path) -> None:
    ledger, scheduler, _ = units(tmp_path)
    agent, got = reserving_while_paused(ledger, scheduler)
    assert alive_after(agent)
    order(ledger, "stop")
    ledger.sync()
    agent.join(timeout=5)
    assert got == [False] and scheduler.reason == "stopped"


def test_parents_follow_the_policy(tmp_path: Path) -> None:
    ledger, scheduler, _ = units(tmp_path, **{"loop.policy": "tree"})
    assert scheduler.default_parent() == "base-0"  # nothing measured yet
    measured_baseline(ledger, 5.0)
    ledger.emit("trial.proposed", "agent:a", proposed("t0001", manifest_blob="1" * 64))
    ledger.emit("trial.finished", "oracle", {"trial_id": "t0001", "status": "ok", "score": 4.0})
    ledger.emit("trial.proposed", "agent:a", proposed("t0002", manifest_blob="2" * 64))
    ledger.emit("trial.finished", "oracle", {"trial_id": "t0002", "status": "crash"})
    assert scheduler.parent_for(Proposal(parent="t0001")) == "t0001"  # tree: the one it names
    assert scheduler.parent_for(Proposal(parent="t0002")) == "base-0"  # a crashed trial is no parent
    assert scheduler.parent_for(Proposal(parent="t9999")) == "base-0"  # nor an unknown one


# ----------------------------------------------------------------------------- orders: the pause gate


def test_a_proposal_in_hand_waits_for_continue(tmp_path: Path) -> None:
    """An agent's proposal finished after the pause was acknowledged is recorded only after the continue."""
    ledger, _, orders = units(tmp_path)
    order(ledger, "pause")
    ledger.sync()
    orders.acknowledge()
    agent = threading.Thread(target=orders.emit_proposed, args=("agent:a", proposed("t0001")))
    agent.start()
    assert alive_after(agent)
    assert [k for _, k, _ in kinds(ledger)].count("trial.proposed") == 0
    continued = order(ledger, "continue")
    ledger.sync()
    orders.acknowledge()
    agent.join(timeout=5)
    log = kinds(ledger)
    notes = [(seq, data.text) for seq, kind, data in log if kind == "note"]
    assert notes[0][1].startswith(f"pause by {BY}") and notes[1][1].startswith(f"continue by {BY}")
    [(seq, _, _)] = [e for e in log if e[1] == "trial.proposed"]
    assert seq > continued


def test_a_pause_acknowledged_while_a_proposal_is_recorded_never_comes_before_it(tmp_path: Path) -> None:
    """The lock order: a pause lands (another process) after the proposer's fold and check; the agent
    phase folds it and wants to acknowledge it at once. The proposer still holds the ledger's lock, so
    the acknowledging note can only follow the proposal: no trial.proposed after a pause's note."""
    ledger, _, orders = units(tmp_path)
    real_emit = ledger.emit
    phases: list[threading.Thread] = []

    def agent_phase_round() -> None:
        ledger.sync()
        orders.acknowledge()

    def emit_while_a_pause_lands(kind: str, actor: str, data: dict[str, Any]) -> Any:
        if kind == "trial.proposed" and not phases:
            order(ledger, "pause")  # after the proposer's fold and check, before its append
            phase = threading.Thread(target=agent_phase_round)
            phases.append(phase)
            phase.start()
            phase.join(timeout=0.5)  # the agent phase gets every chance to write its note first
        return real_emit(kind, actor, data)

    ledger.emit = emit_while_a_pause_lands  # type: ignore[method-assign]
    orders.emit_proposed("agent:a", proposed("t0001"))
    phases[0].join(timeout=5)
    log = kinds(ledger)
    [ack] = [seq for seq, kind, data in log if kind == "note" and data.text.startswith(f"pause by {BY}")]
    assert [seq for seq, kind, _ in log if kind == "trial.proposed" and seq > ack] == []
    # and the gate holds from then on: the next proposal waits
    waiting = threading.Thread(target=orders.emit_proposed, args=("agent:a", proposed("t0002")))
    waiting.start()
    assert alive_after(waiting)
    order(ledger, "continue")
    agent_phase_round()
    waiting.join(timeout=5)
    assert not waiting.is_alive()


# ----------------------------------------------------------------------------- confirmation verdict


@dataclass
class FakeTrial:
    trial_id: str
    score: float | None
    status: str = "ok"
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeState:
    """What confirmation_verdict reads of a RunState: the best, its history, the floor and sigma."""

    best_id: str | None = "t0003"
    best_history: list[tuple[str, float]] = field(default_factory=lambda: [("base-0", 6.0), ("t0003", 5.0)])
    floor: float = 0.1
    sigma: float = 0.05
    trials: dict[str, FakeTrial] = field(default_factory=lambda: {"t0003": FakeTrial("t0003", 5.0)})


# (repeat scores (None: crashed), hitl, a best to beat, confirmed, promoted now, the reason says)
CONFIRM_CASES = [
    ([4.0, 4.2], False, True, True, True, ""),  # mean 4.1 beats 5.0 by 0.9 > floor 0.1
    ([4.95, 4.97], False, True, False, False, "not enough (floor 0.1, baseline)"),  # 0.04 < 0.1: winner's curse
    ([4.0, None], False, True, False, False, "t0007-r2 did not score"),  # a repeat that crashed decides alone
    ([4.0, 4.2], True, True, True, False, ""),  # confirmed, but a person approves it under loop.hitl
    ([4.0, 4.2], False, False, False, False, "nothing to compare with"),  # no best measured
]


@pytest.mark.parametrize(("scores", "hitl", "has_best", "confirmed", "promoted", "says"), CONFIRM_CASES)
def test_confirmation_verdict(scores: list[float | None], hitl: bool, has_best: bool, confirmed: bool,
                              promoted: bool, says: str) -> None:
    task = demo_task(**{"loop.confirm": 2, "loop.hitl": hitl})  # minimize
    state = FakeState() if has_best else FakeState(best_id=None, best_history=[])
    repeats = [FakeTrial(f"t0007-r{i + 1}", s, "ok" if s is not None else "crash") for i, s in enumerate(scores)]
    data, score = confirmation_verdict(state, task, "t0007", repeats)  # type: ignore[arg-type]
    assert data["confirmed"] is confirmed and (score is not None) is promoted
    assert says in data["reason"] and (says or data["reason"] == "")
    assert data["repeats"] == ["t0007-r1", "t0007-r2"] and data["awaiting_review"] is (confirmed and hitl)
    if score is not None:  # the mean of the repeats is the score, never the original's
        assert score == pytest.approx(4.1) and data["delta"] == pytest.approx(0.9) and data["best_trial"] == "t0003"
        # (the promotion's own figures are the one writer's: tests/run/test_promotion_rule.py)


# ----------------------------------------------------------------------------- seeds


def test_the_seed_table_is_what_a_real_run_records(tmp_path: Path) -> None:
    """A short real run (2 baseline repeats, 2 trials, the better one confirmed twice): every seed in its
    log is the one rrma/run/seeds.py derives."""
    assert (seeds.baseline_seed(7, 2), seeds.trial_seed(7, 5), seeds.confirmation_seed(7, 3, 1),
            seeds.agent_seed(7, 2, 1), seeds.resume_seed(7, 1)) == (
        7 * 7919 + 2, 7 * 7919 + 1000 + 5, 7 * 7919 + 3_000_000 + 1009 * 3 + 1, 7 * 1000 + 2 * 100 + 1,
        7 + 104729 * 2)
    edit = [FileEdit(path="objective.py", replacements=[("X = 0.0 ", "X = 1.5 ")])]
    agent = ScriptedAgent([Proposal(hypothesis="worse", edits=[FileEdit(path="objective.py",
                                                                        replacements=[("X = 0.0 ", "X = -3.0 ")])]),
                           Proposal(hypothesis="better", edits=edit)])
    task = demo_task(**{"noise.baseline_repeats": 2, "loop.confirm": 2, "budget.max_trials": 2, "seed": 11})
    result = start_run(task, tmp_path, agents=[agent])
    order = result.state.order
    recorded = {t.trial_id: t.seed for t in result.state.trials.values()}
    expected = {"base-0": seeds.baseline_seed(11, 0), "base-1": seeds.baseline_seed(11, 1),
                "t0001": seeds.trial_seed(11, order.index("t0001")),
                "t0002": seeds.trial_seed(11, order.index("t0002")),  # 3: after base-0, base-1, t0001
                **{f"t0002-r{i + 1}": seeds.confirmation_seed(11, order.index("t0002"), i) for i in range(2)}}
    assert recorded == expected and order.index("t0002") == 3


class ScriptedAgent(Agent):
    backend = "scripted"

    def __init__(self, proposals: list[Proposal], config: AgentConfig | None = None) -> None:
        super().__init__(config or AgentConfig(name="scripted", backend="scripted"), task_from_dict({"name": "x"}))
        self.queue = list(proposals)

    def propose(self, ctx: Context) -> Proposal | None:
        return self.queue.pop(0) if self.queue else None


def test_agents_are_built_and_rebuilt_on_resume_from_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[str, int]] = []

    def make_agent(config: AgentConfig, task: TaskConfig, *, seed: int) -> Agent:
        built.append((config.name, seed))
        return ScriptedAgent([], config)

    monkeypatch.setattr("rrma.run.loop.make_agent", make_agent)
    task = demo_task(**{"agents": [{"name": "a", "backend": "random-search"}, {"name": "b", "backend": "random-search"}],
                        "noise.baseline_repeats": 1, "seed": 3})
    make_agents(task, 3, count=2)
    assert built == [("a-1", seeds.agent_seed(3, 0, 0)), ("a-2", seeds.agent_seed(3, 0, 1)),
                     ("b-1", seeds.agent_seed(3, 1, 0)), ("b-2", seeds.agent_seed(3, 1, 1))]
    built.clear()
    first = start_run(task.model_copy(update={"loop": task.loop.model_copy(update={"agents_parallel": 1})}), tmp_path)
    assert first.reason == "agents_exhausted" and [s for _, s in built] == [3000, 3100]
    built.clear()
    resumed = resume_run(first.run_dir)
    assert resumed.reason == "agents_exhausted"
    assert [s for _, s in built] == [seeds.agent_seed(seeds.resume_seed(3, 0), i, 0) for i in range(2)]


class FailingClose(ScriptedAgent):
    closed: list[str] = []

    def close(self) -> None:
        FailingClose.closed.append(self.name)
        if self.name == "first":
            raise RuntimeError("socket already gone")


def test_a_failing_agent_close_is_a_note_and_the_other_agents_still_close(tmp_path: Path) -> None:
    """A plug-in's close() may raise anything: the run's end is recorded first, the failure becomes a note
    (it used to vanish in a suppress(Exception)), and the next agent still gets its close()."""
    FailingClose.closed.clear()
    agents: list[Agent] = [FailingClose([], AgentConfig(name=n, backend="scripted")) for n in ("first", "second")]
    result = start_run(demo_task(**{"noise.baseline_repeats": 1}), tmp_path, agents=agents)
    assert result.reason == "agents_exhausted" and FailingClose.closed == ["first", "second"]
    log = kinds(RunLedger(RunStore(result.run_dir)))
    assert [k for _, k, _ in log][-2:] == ["run.finished", "note"]
    assert log[-1][2].text.startswith("agent first close() failed after the run ended: RuntimeError: socket "
                                      "already gone (at test_run_units.py:")
