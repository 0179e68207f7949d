"""The research loop: agents propose, the oracle judges, the policy keeps or discards.

One :class:`ResearchLoop` drives one run directory. Everything it knows it reads back from the
log: its :class:`~rrma.log.state.RunState` is folded from a :class:`~rrma.log.tail.LogTail` on the
run's own ``events.jsonl``, so events written by other processes (a reviewer's ``review`` in
the TUI) reach it the same way as its own, and a resumed run rebuilds exactly the state the
crashed one had.

Order of work: the oracle is prepared; the unmodified baseline is evaluated
``noise.baseline_repeats`` times with different seeds to estimate sigma; then N agent threads
propose while at most ``budget.max_concurrent`` trials evaluate. A trial is promoted only when
it beats the current best by ``max(min_sigmas * sigma, min_delta)`` (strictly better when that
floor is 0; rrma/run/promotion.py adds the oracle's own standard error or a paired test on per-item
scores where the oracle reports them). With ``loop.confirm: k`` such a would-be best is first
re-evaluated k times with fresh seeds (confirmation repeats: trials of their own, ``confirms`` set)
and promoted with the mean of those repeats only if that mean still clears the floor
(``trial.confirmed`` records the verdict). With ``loop.hitl`` on, it then waits for a person's
approval. With ``loop.early_abort`` a trial whose progress samples say it cannot beat the best is
stopped (rrma/run/abort.py) and the decision is recorded with its outcome.

Policies: ``keep-revert`` (parent = current best), ``tree`` (the agent names the parent with
``Proposal.parent``, default the best), ``independent`` (always the baseline, the control arm),
``per-theorem`` (proof benches: no baseline and no parent; the oracle's theorems one at a time, the
agents taking turns on the current one, rrma/run/theorems.py; the run ends ``completed`` when every
theorem is done).
The loop stops on max trials, max wall time, target reached, all agents out of ideas, or a stop
request (Ctrl-C: ``interrupted``; a ``run.control`` stop from ``rrma-tui stop`` or the TUI:
``stopped``): proposing ends at once, running trials finish within their budget, and
``run.finished`` records the reason.

Orders from people arrive through the log like reviews (rrma/log/control.py): the agent phase folds
the tail every 0.2 s, so a ``run.control`` written by any process reaches the driver whatever its
executor. ``pause`` holds new proposals (an agent waits before it proposes, and a proposal already
in hand is recorded only after ``continue``); the wall clock keeps running. Each order is
acknowledged with a ``note`` once it is in force, and no ``trial.proposed`` follows a pause's
note until the ``continue``. ``agent.steer`` notes reach the agents they name in their next
context and are recorded as a ``user`` turn in each one's trace when delivered.

The work is split by job, each unit testable alone (tests/run/test_run_units.py): ledger.py (the
folded log and its lock), scheduler.py (budget, stop reasons, parents, trial ids, the agent phase),
runner.py (the baseline and each trial: record, evaluate, decide), confirm.py (``loop.confirm``),
orders.py (stop, pause, continue, steer, approvals) and seeds.py (every seed a run derives). This
module wires them into :class:`ResearchLoop` and holds the entry points (:func:`start_run`,
:func:`resume_run`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import platform
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rrma.audit.auditor import Auditor
from rrma.contain import cgroups, disk, sandbox
from rrma.contain.spawn import stale_processes
from rrma.contracts import Agent, Context, Oracle, TrialSummary
from rrma.errors import error_line
from rrma.exec.local import Executor, LocalExecutor
from rrma.log.driver_lock import DriverLock, RunLocked
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.view_files import write_views
from rrma.plugins import make_agent, make_task_oracle, resolve_oracle
from rrma.run import leftovers, seeds
from rrma.run.cache import OutcomeCache
from rrma.run.confirm import Confirmation
from rrma.run.context import build_context
from rrma.run.ledger import EventHook, RunLedger
from rrma.run.orders import Orders
from rrma.run.runner import (  # re-exported (__all__): callers import them from here
    BASELINE_AGENT,
    EARLY_ABORT_KEY,
    FEEDBACK_LOG_CHARS,
    TrialRunner,
    early_aborted,
)
from rrma.run.scheduler import POLL_SECONDS, RunFailed, Scheduler
from rrma.run.theorems import (
    COMPLETED,
    RED_TEAM_AGENT,
    TheoremPolicy,
    Turn,
    agent_hidden,
    held_out_for,
    theorems_of,
)
from rrma.task import AgentConfig, TaskConfig, task_from_dict
from rrma.trial import Proposal

__all__ = [
    "BASELINE_AGENT", "EARLY_ABORT_KEY", "FEEDBACK_LOG_CHARS", "POLL_SECONDS", "ResearchLoop", "RunFailed",
    "RunResult", "agent_info", "early_aborted", "make_agents", "new_run_id", "resume_run",
    "run_summary", "start_run", "versions",
]

STEER_IN_CONTEXT = 10  # the latest steer notes an agent's context carries
STALE_GRACE_S = 3.0  # resume waits this long for the processes of a killed harness's trials to end before refusing


@dataclass
class RunResult:
    run_dir: Path
    reason: str
    state: RunState
    error: str | None = None  # the one-line message when reason is "error"

    @property
    def ok(self) -> bool:
        return self.reason not in ("baseline_failed", "error")


def new_run_id(task_name: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in task_name)[:40]
    return f"{stamp}-{safe}-{secrets.token_hex(2)}"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "platform": platform.platform(),
           "fs_guard": sandbox.describe(),  # whether trial programs run in the sandbox
           "limits": cgroups.describe(),  # cgroup limits on the whole trial, or polling
           "disk": disk.describe()}  # each workspace its own capped file system, or the watch
    for name in ("torch", "pydantic", "textual"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def agent_info(agent: Agent) -> dict[str, Any]:
    """What run.json records about one agent: name, backend, model, and for model backends the
    endpoint it calls and where that came from (``agents[].base_url``, ``OPENAI_BASE_URL``...)."""
    describe = getattr(agent, "endpoint_info", None)
    if callable(describe):
        return dict(describe())
    return {"name": agent.name, "backend": agent.config.backend, "model": agent.config.model}


def make_agents(task: TaskConfig, seed: int, count: int | None = None) -> list[Agent]:
    """Instantiate the task's agents; ``loop.agents_parallel`` (or ``count``) copies of each."""
    copies = count if count is not None else task.loop.agents_parallel
    agents = []
    for index, config in enumerate(task.agents):
        for copy in range(copies):
            cfg = config if copies == 1 else config.model_copy(update={"name": f"{config.name}-{copy + 1}"})
            agents.append(make_agent(cfg, task, seed=seeds.agent_seed(seed, index, copy)))
    return agents


class ResearchLoop:
    """One driver of one run directory: the units below, wired together.

    :class:`~rrma.run.ledger.RunLedger` (the folded log and its lock), :class:`~rrma.run.scheduler.Scheduler`
    (budget, stop reasons, parents, trial ids, the agent phase), :class:`~rrma.run.runner.TrialRunner`
    (the baseline and each trial), :class:`~rrma.run.confirm.Confirmation` (``loop.confirm``) and
    :class:`~rrma.run.orders.Orders` (stop, pause, continue, steer, approvals). Seeds: rrma/run/seeds.py.
    """

    def __init__(
        self,
        store: RunStore,
        task: TaskConfig,
        *,
        seed: int,
        agents: list[Agent] | None = None,
        oracle: Oracle | None = None,
        executor: Executor | None = None,
        stop: threading.Event | None = None,
        on_event: EventHook | None = None,
        cache: OutcomeCache | None = None,
    ) -> None:
        self.store = store
        self.task = task
        self.seed = seed
        self.on_event = on_event
        self.oracle = oracle or make_task_oracle(task)
        self.executor = executor or LocalExecutor(self.oracle, store.trials_dir, task.budget.max_concurrent,
                                                  protect=(store.dir,))
        self.agents = agents if agents is not None else make_agents(task, seed)
        self.cache = cache or OutcomeCache(store.dir / "cache.sqlite")
        self.oracle_identity = self.oracle.identity()
        self.ledger = RunLedger(store, on_event)
        # loop.audit: the auditor reads every event the ledger folds and checks each trial as it finishes
        self.auditor = Auditor(store, files_of=self.ledger.files_of) if task.loop.audit != "off" else None
        if self.auditor is not None:
            self.ledger.observers.append(self.auditor.observe)
        self.scheduler = Scheduler(self.ledger, task, stop)
        self.ledger.sync()
        self.orders = Orders(self.ledger, self.scheduler, task)  # after the fold: earlier drivers' orders are done
        self.runner = TrialRunner(self.ledger, self.scheduler, self.orders, task, seed=seed,
                                  oracle_identity=self.oracle_identity, executor=self.executor, cache=self.cache,
                                  fs_guard=sandbox.mode(), trial_network=sandbox.network(), auditor=self.auditor,
                                  setup_allowance=self.oracle.setup_allowance_s)
        self.confirmation = Confirmation(self.ledger, self.scheduler, self.runner, task, seed=seed)
        # loop.policy per-theorem: which theorem comes next and whose turn it is (rrma/run/theorems.py)
        self.theorems = (TheoremPolicy(theorems_of(self.oracle), task.loop, [a.name for a in self.agents])
                         if task.loop.policy == "per-theorem" else None)
        self._proofs: dict[str, str | None] = {}  # trial id -> its proof (the per-theorem context's `tried`)

    # ------------------------------------------------------------------ the units' state, for callers

    @property
    def state(self) -> RunState:
        return self.ledger.state

    @property
    def lock(self) -> threading.RLock:
        return self.ledger.lock

    @property
    def stop(self) -> threading.Event:
        return self.scheduler.stop

    @property
    def reason(self) -> str | None:
        return self.scheduler.reason

    @property
    def error(self) -> str | None:
        return self.scheduler.error

    def sync(self) -> list[Any]:
        """Fold everything appended since the last sync (ours and other processes')."""
        return self.ledger.sync()

    def emit(self, kind: str, actor: str, data: dict[str, Any]) -> Any:
        return self.ledger.emit(kind, actor, data)

    def files_of(self, trial_id: str) -> dict[str, str]:
        return self.ledger.files_of(trial_id)

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        scheduler = self.scheduler
        try:
            self.runner.resume_interrupted()
            if self.theorems is not None:
                self._no_baseline()
            elif self.state.baseline_mean is None:
                self.runner.baseline()
            else:
                self.confirmation.resume()
            if scheduler.reason is None:
                worker = self._agent_worker if self.theorems is None else self._theorem_worker
                scheduler.run_agents([(agent.name, functools.partial(worker, agent))
                                      for agent in self.agents], self._each_round)
        except RunFailed as exc:
            scheduler.reason = "baseline_failed"
            self.emit("note", "harness", {"text": f"run failed: {exc}"})
        except Exception as exc:  # a harness or workspace error: the run ends as "error", never "done"
            scheduler.fail(exc)
        finally:
            if scheduler.error is not None:
                scheduler.reason = "error"
                self.emit("note", "harness", {"text": f"run error: {scheduler.error}"})
            if scheduler.reason is None:  # only a BaseException (KeyboardInterrupt, SystemExit) gets here
                scheduler.reason = "interrupted"
            self.executor.shutdown(cancel=scheduler.stopping() or scheduler.reason == "error")
            self._finish()
            self._close("oracle", self.oracle.close)
            for agent in self.agents:
                self._close(f"agent {agent.name}", agent.close)
        return RunResult(self.store.dir, scheduler.reason, self.state, scheduler.error)

    def _close(self, what: str, close: Callable[[], None]) -> None:
        """Close a plug-in after ``run.finished``. Broad on purpose: a plug-in's close() may raise anything,
        and the oracle and every agent must still get theirs; the failure is recorded as a note."""
        try:
            close()
        except Exception as exc:
            self.emit("note", "harness", {"text": f"{what} close() failed after the run ended: {error_line(exc)}"})

    def _finish(self) -> None:
        summary = run_summary(self.state, self.task, time.monotonic() - self.scheduler.started)
        if self.theorems is not None:
            summary.update(self.theorems.summary(self.state))
        if self.scheduler.error is not None:
            summary["error"] = self.scheduler.error
        order = self.state.stop_request
        if self.scheduler.reason == "stopped" and order is not None:
            summary.update(stopped_by=order["by"], stop_seq=order["seq"], stop_reason=order["reason"])
        self.emit("run.finished", "harness", {"reason": self.scheduler.reason, "summary": summary})
        write_views(self.store.dir, self.state)
        self.store.fsync()

    # ------------------------------------------------------------------ agents

    def _each_round(self) -> None:
        """What the agent phase does every POLL_SECONDS after folding the log."""
        self.orders.acknowledge()
        self.orders.check_reviews()

    def _agent_worker(self, agent: Agent) -> None:
        failures = 0
        while self.scheduler.reserve():
            step, failures = self._propose_once(agent, failures)
            if step == "nothing":
                self.emit("note", "harness", {"text": f"agent {agent.name} has nothing more to propose"})
                return
            if step in ("retired", "error"):
                return

    def _propose_once(self, agent: Agent, failures: int, turn: Turn | None = None) -> tuple[str, int]:
        """One proposal of ``agent`` on a trial already reserved, run and observed.

        Returns (what happened, the agent's failed proposals in a row): ``ran``; ``nothing`` (it proposed
        nothing; the trial goes back to the budget); ``failed`` (its propose raised; retried later) or
        ``retired`` (``agents[].max_failures`` in a row); ``error`` (the harness failed: the run ends).
        Under the per-theorem policy ``turn`` names the theorem the proposal is for.
        """
        scheduler = self.scheduler
        config = agent.config
        allowed = max(1, int(getattr(config, "max_failures", 1)))  # consecutive failed proposals before retiring it
        try:
            trial_id = scheduler.next_id()  # known while the agent works, so its turns name it
            ctx = self._context(agent, config, trial_id, turn)
            proposal = agent.propose(ctx)
        except Exception as exc:
            scheduler.give_back()
            failures += 1
            self.emit("agent.turn", f"agent:{agent.name}", {"agent": agent.name, "role": "error",
                                                            "text": f"{type(exc).__name__}: {exc}"})
            if failures >= allowed:
                self.emit("note", "harness", {"text": f"agent {agent.name} stopped after {failures} failed "
                                                      f"proposal(s) in a row (agents[].max_failures {allowed}): {exc}"})
                return "retired", failures
            self.emit("note", "harness", {"text": f"agent {agent.name}: proposal failed ({failures} of "
                                                  f"{allowed} in a row before it is retired): {exc}"})
            return "failed", failures
        if proposal is None:
            scheduler.give_back()
            return "nothing", 0
        if turn is not None:  # the turn's theorem is the target, whatever the agent named
            proposal = proposal.model_copy(update={"theorem": turn.theorem.name})
        try:
            summary = self.run_trial(agent.name, proposal, config, trial_id=trial_id)
        except Exception as exc:  # the harness failed, not the agent: the run ends as "error"
            scheduler.fail(exc)
            return "error", 0
        if summary is not None:
            try:
                agent.observe(summary)
            except Exception as exc:
                self.emit("note", "harness", {"text": f"agent {agent.name} observe() failed: {exc}"})
        return "ran", 0

    # ------------------------------------------------------------------ the per-theorem policy

    def _no_baseline(self) -> None:
        """Per-theorem runs measure no baseline (nothing scores before a proof); the log says so once."""
        if not self.state.resumes:
            self.emit("note", "harness", {"text": "no baseline: under the per-theorem policy a trial scores 1.0 "
                                                  "when its proof of its theorem is accepted; nothing is promoted"})

    def _theorem_stop(self) -> bool:
        return self.scheduler.reason is not None or self.scheduler.stopping()

    def _theorem_worker(self, agent: Agent) -> None:
        """One agent's turns under the per-theorem policy (rrma/run/theorems.py): the proposal step of
        :meth:`_agent_worker`, one turn at a time; proposing nothing means "nothing more for this theorem"."""
        policy, scheduler = self.theorems, self.scheduler
        assert policy is not None
        failures = 0
        try:
            while (turn := policy.take_turn(agent.name, self.ledger, self._theorem_stop)) is not None:
                try:
                    if not scheduler.reserve():
                        return
                    if turn.red_team is not None:  # the red team's known cheat goes before the agents' turns
                        try:
                            self.run_trial(RED_TEAM_AGENT, turn.red_team)
                        except Exception as exc:  # the harness failed: the run ends as "error"
                            scheduler.fail(exc)
                            return
                        continue
                    step, failures = self._propose_once(agent, failures, turn)
                    if step == "nothing":
                        policy.out_of_ideas(turn, self.ledger)
                    elif step in ("retired", "error"):
                        return
                finally:
                    policy.end_turn(turn)
            if policy.finished:  # every theorem is done: the run is complete; agents post what they learnt
                with self.lock:
                    if scheduler.reason is None:
                        scheduler.reason = COMPLETED
                try:
                    agent.finish(self._context(agent, agent.config))
                except Exception as exc:
                    self.emit("note", "harness", {"text": f"agent {agent.name} finish() failed: {exc}"})
        finally:
            policy.leave(agent.name)

    def _proof_of(self, rec: Any) -> str | None:
        """The proof a trial proposed (read once from its proposal blob)."""
        if rec.trial_id not in self._proofs:
            proposal = self.store.get_json_blob(rec.proposal_blob) if rec.proposal_blob else {}
            self._proofs[rec.trial_id] = proposal.get("proof") if isinstance(proposal, dict) else None
        return self._proofs[rec.trial_id]

    # ------------------------------------------------------------------ what an agent sees

    def _context(self, agent: Agent, config: AgentConfig, trial_id: str | None = None,
                 turn: Turn | None = None) -> Context:
        parent: str | None = None
        files: dict[str, str] = {}
        if self.theorems is None:
            with self.lock:
                parent = self.scheduler.default_parent()
            files = self.files_of(parent) if parent is not None else {}
        editable = config.editable or self.task.workspace.editable

        def record_turn(**fields: Any) -> None:
            fields.setdefault("agent", agent.name)
            fields.setdefault("trial_id", trial_id)
            self.emit("agent.turn", f"agent:{agent.name}", fields)

        def post(text: str, trial_id: str | None = None, tags: list[str] | None = None) -> None:
            self.emit("blackboard.post", f"agent:{agent.name}",
                      {"agent": agent.name, "text": text, "trial_id": trial_id, "tags": tags or []})

        with self.lock:
            self.sync()  # the context is what the log says now: a steer note written a moment ago included
            used = self.state.agent_trial_count
            notes, fresh = self.orders.steers_for(agent.name)
            for note in fresh:  # delivered now: the agent's trace shows it where it first reached the agent
                record_turn(role="user", text=f"[steer from {note['by']}] {note['text']}",
                            args={"steer_seq": note["seq"]})
            steer = [f"{n['by']}: {n['text']}" for n in notes[-STEER_IN_CONTEXT:]]
            if self.theorems is not None:  # the turn's theorem, its trials, the blackboard (not isolated)
                parts = self.theorems.context_parts(self.state, agent.name, turn.theorem if turn else None,
                                                    self._proof_of)
                ctx = Context(task=self.task, agent_name=agent.name, parent_id=None, files={}, editable=[],
                              role=config.role, record_turn=record_turn, post=post, steer=steer, **parts)
                # from an agent's own processes: the run, the runs beside it (their reports), the answers
                ctx.hidden = agent_hidden(self.store.dir, held_out_for(self.oracle, turn.theorem.name if turn and
                                                                       turn.theorem else None))
            else:
                assert parent is not None
                ctx = build_context(
                    self.state, self.task, agent_name=agent.name, role=config.role, parent_id=parent, files=files,
                    editable=editable, trials_left=max(0, self.task.budget.max_trials - used),
                    record_turn=record_turn, post=post, files_of=self.files_of, steer=steer,
                )
                ctx.hidden = (self.store.dir, *self.oracle.held_out())  # from an agent's own processes (agents/coding)
            ctx.stopping = self.scheduler.stopping
            return ctx

    # ------------------------------------------------------------------ one trial

    def run_trial(self, agent_name: str, proposal: Proposal, config: AgentConfig | None = None,
                  trial_id: str | None = None) -> TrialSummary | None:
        """Validate, record, evaluate (or reuse a cached outcome) and decide one proposal; confirm a would-be best."""
        trial_id = self.runner.run_trial(agent_name, proposal, config, trial_id)
        with self.lock:
            waiting = self.state.trials[trial_id].awaiting_confirmation
        if waiting:
            self.confirmation.confirm(trial_id)
        return self.runner.summary(trial_id)


# ----------------------------------------------------------------------------- summary


def run_summary(state: RunState, task: TaskConfig, wall_seconds: float) -> dict[str, Any]:
    best = state.best
    best_score = state.best_history[-1][1] if state.best_history else None
    delta = delta_sigma = None
    if best_score is not None and state.baseline_mean is not None:
        delta = task.better(best_score, state.baseline_mean)
        delta_sigma = delta / state.sigma if state.sigma else None
    return {
        "baseline": state.baseline_mean,
        "sigma": state.sigma,
        "floor": state.floor,
        "best_trial": best.trial_id if best else None,
        "best_score": best_score,
        "delta": delta,
        "delta_sigma": delta_sigma,
        "direction": task.metric.direction,
        "metric": task.metric.name,
        "trials": len(state.agent_trials()),
        "by_status": state.counts(),
        "cache_hits": state.cache_hits(),
        "confirmation_repeats": len(state.confirmation_trials()),
        "confirmed": sum(1 for t in state.agent_trials() if t.confirmation is not None and t.confirmation["confirmed"]),
        "not_confirmed": sum(1 for t in state.agent_trials() if t.confirmation is not None and not t.confirmation["confirmed"]),
        "early_aborts": sum(1 for t in state.agent_trials() if t.early_abort is not None),
        "wall_seconds": round(wall_seconds, 3),
        "awaiting_review": sum(1 for t in state.agent_trials() if t.metrics.get("awaiting_review") and not t.promoted),
        "held_for_review": len(state.held_trials()),  # a high audit finding holds them until a person reviews them
        "audit_high": state.unresolved_high(),  # high audit findings not dismissed on trials nobody reviewed yet
    }


# ----------------------------------------------------------------------------- entry points


def start_run(
    task: TaskConfig,
    runs_dir: Path,
    *,
    seed: int | None = None,
    run_id: str | None = None,
    stop: threading.Event | None = None,
    on_event: EventHook | None = None,
    executor: Executor | Callable[[Oracle, RunStore, TaskConfig], Executor] | None = None,
    agents: list[Agent] | None = None,
    agent_count: int | None = None,
    experiment: dict[str, Any] | None = None,
    oracle: Oracle | None = None,
    on_loop: Callable[[ResearchLoop], None] | None = None,
) -> RunResult:
    """Create a run directory for ``task`` under ``runs_dir`` and run it to the end.

    ``experiment`` (``{id, arm, seed}``) marks the run as one cell of an experiment (rrma/run/experiment.py);
    it is recorded in run.json and run.started. ``oracle``: an oracle object to prepare and use instead
    of the task's (a test's, or a bench's own checker): it runs on the local executor only, as nothing
    can rebuild it from the task (a Ray worker, ``rrma-tui resume``). ``on_loop`` is called with the loop
    once it is built, before its first trial: a trainer that drives the run keeps it to write its own
    events into the same log (``loop.emit``; agents/training).
    """
    seed = task.seed if seed is None else seed
    resolve_oracle(task.oracle.kind)  # an unknown oracle kind (or one that cannot load) fails first, before a run dir
    if agents is None:  # a missing key or backend fails here, before a run dir exists
        agents = make_agents(task, seed, agent_count)
    run_id = run_id or new_run_id(task.name)
    store = RunStore(Path(runs_dir) / run_id, create=True)
    try:
        lock = DriverLock(store.dir).acquire()  # held until the run ends: one driver per run
    except RunLocked as exc:
        for agent in agents:
            try:
                agent.close()
            except Exception as close_exc:  # broad: a plug-in's close() may raise anything, and the caller
                # must see the RunLocked; the other agents still get closed, the failure rides on the error
                exc.add_note(f"agent {agent.name} close() failed too: {error_line(close_exc)}")
        raise
    with lock:
        leftovers.sweep(store.dir.parent, skip=store.dir)  # what runs killed beside it left mounted
        oracle = oracle or make_task_oracle(task)
        facts = oracle.prepare(store.dir.absolute(), task.workspace_dir())  # absolute: oracles hand it to processes
        found = versions()
        snapshot = task.snapshot()
        described = [agent_info(a) for a in agents]  # endpoints as resolved (OPENAI_BASE_URL...), never keys
        record: dict[str, Any] = {
            "run_id": run_id, "task": snapshot, "seed": seed, "versions": found, "agents": described,
            "oracle": {"identity": oracle.identity(), **facts}, "created": datetime.now(UTC).isoformat()}
        if experiment is not None:
            record["experiment"] = experiment
        run_json_sha256 = store.write_run_json(record)
        store.append("run.started", "harness", {"run_id": run_id, "task_name": task.name, "task": snapshot,
                                                "seed": seed, "versions": found, "run_json_sha256": run_json_sha256,
                                                "head_record": True, "agents": described, "experiment": experiment,
                                                "held_out": list(dict.fromkeys(str(p) for p in oracle.held_out())),
                                                "theorems": recorded_theorems(task, oracle)})
        return _drive(store, task, seed, oracle, executor, stop, on_event, agents, agent_count, on_loop)


def recorded_theorems(task: TaskConfig, oracle: Oracle) -> list[dict[str, str]] | None:
    """A per-theorem run's theorems as ``run.started`` records them (name and difficulty, in the oracle's order), so
    every view counts a proof run's progress against all of its theorems from its first event; None for any other
    run, or an oracle that names none (the loop then says why it cannot run)."""
    if task.loop.policy != "per-theorem":
        return None
    try:
        found = theorems_of(oracle)
    except ValueError:
        return None
    return [{"name": t.name, "difficulty": t.difficulty} for t in found]


def _drive(store: RunStore, task: TaskConfig, seed: int, oracle: Oracle, executor: Any, stop: threading.Event | None,
           on_event: EventHook | None, agents: list[Agent] | None, agent_count: int | None,
           on_loop: Callable[[ResearchLoop], None] | None = None) -> RunResult:
    cgroups.sweep_empty()  # the empty trial cgroups a killed harness left behind (any run's)
    try:
        if callable(executor) and not hasattr(executor, "submit"):
            executor = executor(oracle, store, task)
        if agents is None:
            agents = make_agents(task, seed, agent_count)
        loop = ResearchLoop(store, task, seed=seed, agents=agents, oracle=oracle, executor=executor, stop=stop,
                            on_event=on_event)
        if on_loop is not None:
            on_loop(loop)
    except Exception as exc:
        # the run has started (or resumed) in the log: it must not be left looking as if it still runs
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        try:
            store.append_many([("note", "harness", {"text": f"run error before the loop started: {message}"}),
                               ("run.finished", "harness", {"reason": "error", "summary": {"error": message}})])
            write_views(store.dir, RunState.fold(store.scan().events))
        except Exception as record_exc:  # broad: the caller must see the first error, whatever recording it
            # raised (a full disk, a log another process broke); the recording's failure rides on that error
            exc.add_note(f"recording the error in the run log failed too: {error_line(record_exc)}")
        raise
    return loop.run()


def resume_run(
    run_dir: Path,
    *,
    stop: threading.Event | None = None,
    on_event: EventHook | None = None,
    executor: Any = None,
    agent_count: int | None = None,
    agents: list[Agent] | None = None,
    on_loop: Callable[[ResearchLoop], None] | None = None,
) -> RunResult:
    """Continue a run after a crash or a stop; completed trials are kept, interrupted ones re-run.

    ``agents`` (instead of the task's) and ``on_loop``: as for :func:`start_run` (a trainer resuming the run
    its rollouts are scored in). Raises :class:`~rrma.log.store.RunLocked` when another live process is
    driving the run.
    """
    store = RunStore(run_dir)
    with DriverLock(store.dir):  # before reading the state: a second driver would act on a stale fold
        leftovers.sweep(store.dir.parent, skip=store.dir)  # its own leftovers: _resume, trial by trial
        return _resume(store, stop=stop, on_event=on_event, executor=executor, agent_count=agent_count,
                       agents=agents, on_loop=on_loop)


def _resume(store: RunStore, *, stop: threading.Event | None, on_event: EventHook | None, executor: Any,
            agent_count: int | None, agents: list[Agent] | None = None,
            on_loop: Callable[[ResearchLoop], None] | None = None) -> RunResult:
    run_dir = store.dir
    scan = store.scan()
    state = RunState.fold(scan.events)
    if not state.task:
        raise RunFailed(f"{run_dir}: the log has no run.started event; nothing to resume")
    base_dir = state.task.get("base_dir")
    task = task_from_dict({k: v for k, v in state.task.items() if k != "base_dir"}, source=f"{run_dir}/run.json",
                          base_dir=Path(base_dir) if base_dir else None)
    torn = [t.offset for t in scan.torn]
    interrupted = [t for t in state.order if not state.trials[t].finished]
    for trial_id in interrupted:
        # a harness killed mid-trial could not stop its trial's processes (the sandbox dies with it;
        # an unguarded program may not): never start the trial again while one still runs there
        workdir = store.trial_dir(trial_id) / "work"
        stale = stale_processes(workdir)
        deadline = time.monotonic() + STALE_GRACE_S
        while stale and time.monotonic() < deadline:  # a sandbox killed with its harness takes a moment to go
            time.sleep(0.05)
            stale = stale_processes(workdir)
        if stale:
            raise RunLocked(f"{run_dir}: trial {trial_id} of the run that was interrupted still has running "
                            f"process(es) {', '.join(map(str, stale))}; stop them (kill {' '.join(map(str, stale))})"
                            " and resume again")
        # its capped workspace, still mounted: its space goes back now, run again or not (a file system
        # rrma did not make there stays; the trial, if it runs again, is a crash that says so)
        with contextlib.suppress(disk.DiskCapError):
            disk.unmount_leftover(workdir)
    if state.nothing_to_resume() is not None:  # its budget or goal reached (the rule every view checks too)
        return RunResult(store.dir, f"already_finished:{state.finish_reason}", state)
    oracle = make_task_oracle(task)
    oracle.prepare(store.dir.absolute(), task.workspace_dir())
    seed = seeds.resume_seed(state.seed, state.resumes)  # fresh agent randomness, reproducible
    agents = agents if agents is not None else make_agents(task, seed, agent_count)
    store.append("run.resumed", "harness", {"reason": "resume", "torn_offsets": torn, "interrupted_trials": interrupted,
                                            "agents": [agent_info(a) for a in agents]})
    return _drive(store, task, state.seed, oracle, executor, stop, on_event, agents, agent_count, on_loop)

