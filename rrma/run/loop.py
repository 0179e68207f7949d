"""The research loop: agents propose, the oracle judges, the policy keeps or discards.

One :class:`ResearchLoop` drives one run directory. Everything it knows it reads back from the
log: its :class:`~rrma.log.state.RunState` is folded from a :class:`~rrma.log.store.LogTail` on the
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
``Proposal.parent``, default the best), ``independent`` (always the baseline, the control arm).
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
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import secrets
import statistics
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents import make_agent
from agents.base import Agent, Context, TrialSummary
from agents.context import build_context, clip_middle, summarize
from oracle import make_oracle
from oracle.base import Oracle
from rrma.contain import cgroups, sandbox
from rrma.contain.spawn import stale_processes
from rrma.exec.local import Executor, LocalExecutor, TrialJob, wait_outcome
from rrma.log.review import promote_if_approved
from rrma.log.state import RunState, write_views
from rrma.log.store import DriverLock, RunLocked, RunStore
from rrma.run.abort import make_monitor
from rrma.run.cache import OutcomeCache, cache_key
from rrma.run.promotion import Decision, combine, decide
from rrma.task import AgentConfig, TaskConfig, task_from_dict
from rrma.trial import Budget, Outcome, Proposal, Status
from rrma.workspace import EditRules, InvalidEdit, apply_edits, read_tree

EventHook = Callable[[Any], None]
BASELINE_AGENT = "baseline"
FEEDBACK_LOG_CHARS = 8000  # trial.finished keeps this much feedback: its head (the verdict) and its tail
POLL_SECONDS = 0.2  # how often the agent phase folds the log (reviews, orders) and a paused agent looks again
STEER_IN_CONTEXT = 10  # the latest steer notes an agent's context carries
STALE_GRACE_S = 3.0  # resume waits this long for the processes of a killed harness's trials to end before refusing


class RunFailed(Exception):
    """The run cannot go on (its baseline failed, its oracle cannot start)."""


@dataclass
class RunResult:
    run_dir: Path
    reason: str
    state: RunState
    error: str | None = None  # the one-line message when reason is "error"

    @property
    def ok(self) -> bool:
        return self.reason not in ("baseline_failed", "error")


def error_line(exc: BaseException) -> str:
    """One line for an unexpected exception: its type, the first line of its message, where it was raised."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    msg = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        msg += f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"
    return msg


def new_run_id(task_name: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in task_name)[:40]
    return f"{stamp}-{safe}-{secrets.token_hex(2)}"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "platform": platform.platform(),
           "fs_guard": sandbox.describe(),  # whether trial programs run in the sandbox
           "limits": cgroups.describe()}  # cgroup limits on the whole trial, or polling
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
            agents.append(make_agent(cfg, task, seed=seed * 1000 + index * 100 + copy))
    return agents


class ResearchLoop:
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
        self.stop = stop or threading.Event()
        self.on_event = on_event
        self.oracle = oracle or make_oracle(task.oracle.kind, task.oracle.params, metric=task.metric.name,
                                            direction=task.metric.direction)
        self.executor = executor or LocalExecutor(self.oracle, store.trials_dir, task.budget.max_concurrent,
                                                  protect=(store.dir,))
        self.agents = agents if agents is not None else make_agents(task, seed)
        self.cache = cache or OutcomeCache(store.dir / "cache.sqlite")
        self.fs_guard = sandbox.mode()  # shipped with every job, so remote workers follow this run's choice
        self.trial_network = sandbox.network()  # likewise (default off: a worker's own setting never widens it)
        self.budget = Budget(
            seconds=task.budget.trial_seconds,
            memory_mb=task.budget.trial_memory_mb,
            max_processes=task.budget.trial_max_processes,
            max_output_bytes=task.budget.max_output_bytes,
            disk_mb=task.budget.trial_disk_mb,
            num_cpus=task.budget.num_cpus,
            num_gpus=task.budget.num_gpus,
        )
        self.lock = threading.RLock()  # guards state, counters and appends
        self.slots = threading.Semaphore(task.budget.max_concurrent)
        self.tail = store.tail(0)
        self.state = RunState()
        self.files_cache: OrderedDict[str, dict[str, str]] = OrderedDict()
        self.started = time.monotonic()
        self.reason: str | None = None
        self.error: str | None = None  # first unexpected exception (one line): the run ends as "error"
        self._reserved = 0  # trials taken from the budget (set when the agent phase starts)
        self._issued: set[str] = set()  # trial ids handed out
        self._steered: dict[str, int] = {}  # agent -> seq of the last steer note delivered to it
        self.oracle_identity = self.oracle.identity()
        self.rules = EditRules(task.workspace.editable, task.workspace.readonly)
        self.sync()
        self._acked = self.state.driver_seq  # orders up to here were for an earlier driver

    # ------------------------------------------------------------------ events and state

    def sync(self) -> list[Any]:
        """Fold everything appended since the last sync (ours and other processes')."""
        with self.lock:
            new = self.tail.poll()
            for event in new:
                self.state.apply(event)
                if self.on_event is not None:
                    self.on_event(event)
            return new

    def emit(self, kind: str, actor: str, data: dict[str, Any]) -> Any:
        with self.lock:
            event = self.store.append(kind, actor, data)
            self.sync()
            return event

    # ------------------------------------------------------------------ files

    def files_of(self, trial_id: str) -> dict[str, str]:
        with self.lock:
            cached = self.files_cache.get(trial_id)
            if cached is not None:
                self.files_cache.move_to_end(trial_id)
                return cached
            rec = self.state.trials.get(trial_id)
        if rec is None or rec.manifest_blob is None:
            raise KeyError(f"trial {trial_id} has no workspace snapshot")
        manifest = self.store.get_json_blob(rec.manifest_blob)
        files = {path: self.store.blob_text(digest) for path, digest in manifest.items()}
        with self.lock:
            self.files_cache[trial_id] = files
            while len(self.files_cache) > 64:
                self.files_cache.popitem(last=False)
        return files

    def snapshot(self, files: dict[str, str]) -> tuple[dict[str, str], str]:
        manifest = {path: self.store.put_blob(text) for path, text in sorted(files.items())}
        return manifest, self.store.put_json_blob(manifest)

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        try:
            self._resume_interrupted()
            if self.state.baseline_mean is None:
                self._baseline()
            else:
                self._resume_confirmations()
            if self.reason is None:
                self._agent_phase()
        except RunFailed as exc:
            self.reason = "baseline_failed"
            self.emit("note", "harness", {"text": f"run failed: {exc}"})
        except Exception as exc:  # a harness or workspace error: the run ends as "error", never "done"
            self._fail(exc)
        finally:
            if self.error is not None:
                self.reason = "error"
                self.emit("note", "harness", {"text": f"run error: {self.error}"})
            if self.reason is None:  # only a BaseException (KeyboardInterrupt, SystemExit) gets here
                self.reason = "interrupted"
            self.executor.shutdown(cancel=self._stopping() or self.reason == "error")
            self._finish()
            with contextlib.suppress(Exception):
                self.oracle.close()
            for agent in self.agents:
                with contextlib.suppress(Exception):
                    agent.close()
        return RunResult(self.store.dir, self.reason, self.state, self.error)

    def _fail(self, exc: BaseException) -> None:
        """Record an unexpected exception (the first one's message is kept); no new trials start."""
        with self.lock:
            if self.error is None:
                self.error = error_line(exc)
            self.reason = "error"

    def _guarded(self, target: Callable[..., Any]) -> Callable[..., None]:
        """``target`` for a worker thread: an exception there ends the run as "error" (not a stray traceback)."""
        def call(*args: Any) -> None:
            try:
                target(*args)
            except Exception as exc:
                self._fail(exc)
        return call

    def _finish(self) -> None:
        summary = run_summary(self.state, self.task, time.monotonic() - self.started)
        if self.error is not None:
            summary["error"] = self.error
        order = self.state.stop_request
        if self.reason == "stopped" and order is not None:
            summary.update(stopped_by=order["by"], stop_seq=order["seq"], stop_reason=order["reason"])
        self.emit("run.finished", "harness", {"reason": self.reason, "summary": summary})
        write_views(self.store.dir, self.state)
        self.store.fsync()

    def _resume_interrupted(self) -> None:
        """Re-evaluate trials a crashed harness proposed but never finished."""
        pending = [t for t in self.state.order if not self.state.trials[t].finished]
        for trial_id in pending:
            rec = self.state.trials[trial_id]
            if rec.baseline:
                continue  # _baseline() re-runs missing repeats
            proposal = Proposal.model_validate(self.store.get_json_blob(rec.proposal_blob)) if rec.proposal_blob else Proposal()
            self._evaluate(trial_id, proposal, self.files_of(trial_id), rec.seed)

    def _resume_confirmations(self) -> None:
        """Finish the confirmations a stopped or crashed run left without a verdict."""
        for trial_id in list(self.state.order):
            if self.reason is not None or self._stopping():
                return
            if self.state.trials[trial_id].awaiting_confirmation:
                self._confirm(trial_id)

    def _baseline(self) -> None:
        repeats = self.task.noise.baseline_repeats
        workspace = self.task.workspace_dir()
        files = read_tree(workspace) if workspace.is_dir() else {}
        manifest, manifest_blob = self.snapshot(files)
        key = cache_key(self.oracle_identity, manifest)
        proposal_blob = self.store.put_json_blob(Proposal(hypothesis="baseline").model_dump(mode="json"))
        threads = []
        for i in range(repeats):
            trial_id = f"base-{i}"
            rec = self.state.trials.get(trial_id)
            if rec is not None and rec.finished:
                continue
            seed = self.seed * 7919 + i
            if rec is None:
                self.emit("trial.proposed", f"agent:{BASELINE_AGENT}", {
                    "trial_id": trial_id, "parent": None, "agent": BASELINE_AGENT,
                    "hypothesis": f"baseline (repeat {i + 1}/{repeats})", "proposal_blob": proposal_blob,
                    "manifest_blob": manifest_blob, "baseline": True, "repeat": i, "seed": seed, "cache_key": key,
                })
            self.files_cache[trial_id] = files
            thread = threading.Thread(target=self._guarded(self._evaluate), name=f"baseline-{i}",
                                      args=(trial_id, Proposal(hypothesis="baseline"), files, seed, None, True))
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
        if self.error is not None:
            return  # run() records it
        ids = [f"base-{i}" for i in range(repeats)]
        recs = [self.state.trials[t] for t in ids]
        failed = [r for r in recs if r.status != Status.ok or r.score is None]
        if failed:
            first = failed[0]
            raise RunFailed(f"baseline {first.trial_id} ended {first.status}: {first.feedback[:2000]}")
        scores = [float(r.score) for r in recs if r.score is not None]
        mean = statistics.fmean(scores)
        sigma = statistics.stdev(scores) if len(scores) > 1 else 0.0
        floor = max(self.task.noise.min_sigmas * sigma, self.task.noise.min_delta)
        self.emit("baseline.measured", "harness",
                  {"trial_ids": ids, "scores": scores, "mean": mean, "sigma": sigma, "floor": floor})
        self.emit("trial.promoted", "harness", {"trial_id": "base-0", "score": mean, "previous_best": None,
                                                "previous_score": None, "delta": None, "delta_sigma": None})
        self.cache.put(key, Outcome(status=Status.ok, score=mean, feedback=f"baseline: {mean:.6g} ± {sigma:.3g}"),
                       "base-0", self.store.run_id)

    # ------------------------------------------------------------------ agents

    def _stopping(self) -> bool:
        """Ctrl-C or a stop order: no new trials, queued ones are not run."""
        return self.stop.is_set() or self.state.stop_request is not None

    def _stop_reason(self) -> str | None:
        if self.stop.is_set():
            return "interrupted"
        if self.state.stop_request is not None:
            return "stopped"
        if time.monotonic() - self.started > self.task.budget.max_wall_seconds:
            return "max_wall_time"
        target = self.task.metric.target
        best = self.state.best_history[-1][1] if self.state.best_history else None
        if target is not None and best is not None and self.task.better(best, target) >= 0:
            return "target"
        return None

    def _agent_phase(self) -> None:
        self._reserved = len(self.state.agent_trials())  # proposals so far count against max_trials
        threads = [threading.Thread(target=self._agent_worker, args=(agent,), name=f"agent-{agent.name}", daemon=True)
                   for agent in self.agents]
        for thread in threads:
            thread.start()
        while True:
            alive = [t for t in threads if t.is_alive()]
            if not alive:
                break
            alive[0].join(timeout=POLL_SECONDS)  # one wait per round: orders are seen within POLL_SECONDS
            self.sync()  # pick up reviews and orders written by other processes
            self._acknowledge_orders()
            self._check_reviews()
        with self.lock:
            if self.reason is None:
                proposed = len(self.state.agent_trials())
                self.reason = self._stop_reason() or ("max_trials" if proposed >= self.task.budget.max_trials
                                                      else "agents_exhausted")

    def _reserve(self) -> bool:
        """Take one trial from the budget (under the lock), or set the stop reason; waits while paused."""
        while True:
            with self.lock:
                if self.reason is not None:
                    return False
                reason = self._stop_reason()  # a paused run still ends at max_wall_seconds or on a stop
                if reason is not None:
                    self.reason = reason
                    return False
                if not self.state.paused:
                    if self._reserved < self.task.budget.max_trials:
                        self._reserved += 1
                        return True
                    if len(self.state.agent_trials()) >= self.task.budget.max_trials:
                        return False
                    # the budget is held by proposals still in the works: one that fails gives its trial back

            time.sleep(POLL_SECONDS / 2)  # the agent phase's thread folds the log meanwhile

    def _emit_proposed(self, actor: str, data: dict[str, Any]) -> None:
        """Record ``trial.proposed``, never while a pause is in force (a proposal in hand waits for continue).

        The check and the append happen under the lock after a fold, and a pause's note is written
        the same way, so no proposal follows that note in the log until the pause is lifted.
        """
        while True:
            with self.lock:
                self.sync()
                if not self.state.paused or self._stopping() or self.reason is not None:
                    self.emit("trial.proposed", actor, data)
                    return
            time.sleep(POLL_SECONDS / 2)

    def _acknowledge_orders(self) -> None:
        """A ``note`` for each order of the current driver's session once it is in force."""
        with self.lock:
            for order in [o for o in self.state.controls if o["seq"] > self._acked]:
                self._acked = order["seq"]
                said = f"{order['action']} by {order['by']} (seq {order['seq']})"
                if order["action"] == "stop":
                    text = f"{said}: no new trials; running trials finish, then the run ends as stopped"
                elif order["action"] == "pause":
                    text = f"{said}: paused, no new proposals until continue; running trials finish"
                else:
                    text = f"{said}: proposals go on" if not self.state.paused else f"{said}: still paused"
                if order["reason"]:
                    text += f" (reason: {order['reason']})"
                self.emit("note", "harness", {"text": text})

    def _agent_worker(self, agent: Agent) -> None:
        config = agent.config
        allowed = max(1, int(getattr(config, "max_failures", 1)))  # consecutive failed proposals before retiring it
        failures = 0
        while self._reserve():
            try:
                trial_id = self._next_id()  # known while the agent works, so its turns name it
                ctx = self._context(agent, config, trial_id)
                proposal = agent.propose(ctx)
            except Exception as exc:
                with self.lock:
                    self._reserved -= 1
                failures += 1
                self.emit("agent.turn", f"agent:{agent.name}", {"agent": agent.name, "role": "error",
                                                                "text": f"{type(exc).__name__}: {exc}"})
                if failures >= allowed:
                    self.emit("note", "harness", {"text": f"agent {agent.name} stopped after {failures} failed "
                                                          f"proposal(s) in a row (agents[].max_failures {allowed}): {exc}"})
                    return
                self.emit("note", "harness", {"text": f"agent {agent.name}: proposal failed ({failures} of "
                                                      f"{allowed} in a row before it is retired): {exc}"})
                continue
            failures = 0
            if proposal is None:
                with self.lock:
                    self._reserved -= 1
                self.emit("note", "harness", {"text": f"agent {agent.name} has nothing more to propose"})
                return
            try:
                summary = self.run_trial(agent.name, proposal, config, trial_id=trial_id)
            except Exception as exc:  # the harness failed, not the agent: the run ends as "error"
                self._fail(exc)
                return
            if summary is not None:
                try:
                    agent.observe(summary)
                except Exception as exc:
                    self.emit("note", "harness", {"text": f"agent {agent.name} observe() failed: {exc}"})

    def _context(self, agent: Agent, config: AgentConfig, trial_id: str | None = None) -> Context:
        with self.lock:
            parent = self._default_parent()
        files = self.files_of(parent)
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
            used = len(self.state.agent_trials())
            notes = self.state.steers_for(agent.name)
            fresh = [n for n in notes if n["seq"] > self._steered.get(agent.name, -1)]
            if notes:
                self._steered[agent.name] = notes[-1]["seq"]
            for note in fresh:  # delivered now: the agent's trace shows it where it first reached the agent
                record_turn(role="user", text=f"[steer from {note['by']}] {note['text']}",
                            args={"steer_seq": note["seq"]})
            ctx = build_context(
                self.state, self.task, agent_name=agent.name, role=config.role, parent_id=parent, files=files,
                editable=editable, trials_left=max(0, self.task.budget.max_trials - used),
                record_turn=record_turn, post=post, files_of=self.files_of,
                steer=[f"{n['by']}: {n['text']}" for n in notes[-STEER_IN_CONTEXT:]],
            )
            ctx.hidden = (self.store.dir, *self.oracle.held_out())  # from an agent's own processes (agents/coding)
            ctx.stopping = self._stopping
            return ctx

    def _default_parent(self) -> str:
        if self.task.loop.policy == "independent" or self.state.best_id is None:
            return "base-0"
        return self.state.best_id

    def _next_id(self) -> str:
        """A fresh trial id; ids handed out but not yet in the log are remembered (no duplicates)."""
        with self.lock:
            n = len(self.state.agent_trials()) + 1
            while f"t{n:04d}" in self.state.trials or f"t{n:04d}" in self._issued:
                n += 1
            trial_id = f"t{n:04d}"
            self._issued.add(trial_id)
            return trial_id

    # ------------------------------------------------------------------ one trial

    def run_trial(self, agent_name: str, proposal: Proposal, config: AgentConfig | None = None,
                  trial_id: str | None = None) -> TrialSummary | None:
        """Validate, record, evaluate (or reuse a cached outcome) and decide one proposal."""
        actor = f"agent:{agent_name}"
        with self.lock:
            parent = self._default_parent()
            if self.task.loop.policy == "tree" and proposal.parent:
                rec = self.state.trials.get(proposal.parent)
                if rec is not None and rec.status == Status.ok and rec.manifest_blob:
                    parent = proposal.parent
            trial_id = trial_id or self._next_id()
            seed = self.seed * 7919 + 1000 + len(self.state.order)
            proposal_blob = self.store.put_json_blob(proposal.model_dump(mode="json"))
            base = {"trial_id": trial_id, "parent": parent, "agent": agent_name, "hypothesis": proposal.hypothesis,
                    "expected_effect": proposal.expected_effect, "proposal_blob": proposal_blob,
                    "theorem": proposal.theorem, "seed": seed, "meta": proposal.meta}
        rules = self.rules
        if config is not None and config.editable:
            rules = EditRules(config.editable, self.task.workspace.readonly)
        try:
            parent_files = self.files_of(parent)
            if proposal.proof is not None and not proposal.edits:
                files = parent_files
            else:
                files = apply_edits(parent_files, proposal.edits, rules)
        except InvalidEdit as exc:
            edits = [{"path": str(e.path)[:300], "delete": e.delete} for e in proposal.edits]
            self._emit_proposed(actor, {**base, "edits": edits})
            self.emit("trial.finished", "harness", {"trial_id": trial_id, "status": Status.invalid.value,
                                                    "feedback": f"invalid edit: {exc}"})
            return self._summary(trial_id)
        manifest, manifest_blob = self.snapshot(files)
        key = cache_key(self.oracle_identity, manifest, proposal.proof, proposal.theorem)
        edits = [{"path": e.path, "blob": manifest.get(e.path), "delete": e.delete} for e in proposal.edits]
        self._emit_proposed(actor, {**base, "edits": edits, "manifest_blob": manifest_blob, "cache_key": key})
        with self.lock:
            self.files_cache[trial_id] = files
        hit = self.cache.get(key)
        self._evaluate(trial_id, proposal, files, seed, hit)
        with self.lock:
            waiting = self.state.trials[trial_id].awaiting_confirmation
        if waiting:
            self._confirm(trial_id)
        return self._summary(trial_id)

    def _evaluate(self, trial_id: str, proposal: Proposal, files: dict[str, str], seed: int,
                  hit: Any = None, baseline: bool = False) -> None:
        if hit is not None:
            outcome, source_trial, source_run = hit
            source = source_trial if source_run == self.store.run_id else f"{source_run}/{source_trial}"
            outcome = outcome.model_copy(update={
                "feedback": f"already tried: identical to {source} (no oracle time spent). Earlier result: "
                            f"{outcome.status.value}, score {outcome.score}. {outcome.feedback}",
                "seconds": 0.0,
            })
            self._record_outcome(trial_id, outcome, cached_from=source)
            return
        with self.slots:
            if self._stopping() and not baseline:
                self._record_outcome(trial_id, Outcome(status=Status.aborted, feedback="not run: the run is stopping"))
                return
            with self.lock:
                best = self.state.best_history[-1][1] if self.state.best_history else None
                job = TrialJob(
                    trial_id=trial_id, files=files, proposal=proposal, budget=self.budget, seed=seed,
                    is_baseline=baseline, best_score=best, baseline_score=self.state.baseline_mean,
                    sigma=self.state.sigma, oracle_kind=self.task.oracle.kind, oracle_params=self.task.oracle.params,
                    metric=self.task.metric.name, direction=self.task.metric.direction, fs_guard=self.fs_guard,
                    network=self.trial_network, pass_env=tuple(self.task.oracle.pass_env),
                    keep_workspace=self.task.loop.keep_workspaces,
                )
                repeat = self.state.trials[trial_id].confirms is not None
            # baseline and confirmation repeats are never stopped early: they measure, they do not compete
            monitor = None if baseline or repeat else make_monitor(self.task.loop.early_abort,
                                                                   direction=self.task.metric.direction, best=best)
            decided: dict[str, Any] = {}
            self.emit("trial.started", "harness", {"trial_id": trial_id, "executor": self.executor.name})

            def progress(sample: dict[str, Any]) -> None:
                self.emit("trial.progress", "oracle", {"trial_id": trial_id, "sample": sample})
                decision = monitor.observe(sample) if monitor is not None and not decided else None
                if decision is not None:
                    decided.update(decision)
                    abort = getattr(self.executor, "abort", None)
                    if abort is None or not abort(trial_id, "early abort: " + decision["text"]):
                        decided["not_stopped"] = "the executor could not stop the trial"

            outcome = wait_outcome(self.executor.submit(job, progress), self.budget)
            if decided and outcome.status == Status.aborted and not self._stopping():
                outcome = early_aborted(outcome, decided)
        self._record_outcome(trial_id, outcome)
        with self.lock:
            rec = self.state.trials.get(trial_id)
            key = rec.cache_key if rec is not None else None
        if key is not None and not baseline:
            self.cache.put(key, outcome, trial_id, self.store.run_id)

    def _record_outcome(self, trial_id: str, outcome: Outcome, cached_from: str | None = None) -> None:
        log_blob = self.store.put_blob(outcome.log) if outcome.log else None
        with self.lock:
            rec = self.state.trials[trial_id]
            best_score = self.state.best_history[-1][1] if self.state.best_history else None
            delta = delta_sigma = floor = None
            floor_source: str | None = None
            promote = False
            metrics = dict(outcome.metrics)
            early = metrics.pop(EARLY_ABORT_KEY, None)
            if outcome.scored and best_score is not None and not rec.baseline and rec.confirms is None:
                delta = self.task.better(float(outcome.score), best_score)  # type: ignore[arg-type]
                sigma = self.state.sigma or 0.0
                delta_sigma = delta / sigma if sigma > 0 else None
                verdict = self._decide(delta, metrics)
                floor, floor_source, promote = verdict.floor, verdict.label, verdict.promote
                if promote and self.task.loop.confirm > 0:
                    metrics["awaiting_confirmation"] = True  # _confirm() re-evaluates it, then decides
                    promote = False
                elif promote and self.task.loop.hitl:
                    metrics["awaiting_review"] = True
                    promote = False
            self.emit("trial.finished", "oracle" if cached_from is None else "harness", {
                "trial_id": trial_id, "status": outcome.status.value, "score": outcome.score, "metrics": metrics,
                "feedback": clip_middle(outcome.feedback, FEEDBACK_LOG_CHARS), "log_blob": log_blob, "seconds": round(outcome.seconds, 4),
                "cached": cached_from is not None, "cached_from": cached_from, "delta": delta,
                "delta_sigma": delta_sigma, "floor": floor, "floor_source": floor_source, "early_abort": early,
            })
            if promote:
                previous = self.state.best_id
                self.emit("trial.promoted", "harness", {
                    "trial_id": trial_id, "score": outcome.score, "previous_best": previous,
                    "previous_score": best_score, "delta": delta, "delta_sigma": delta_sigma,
                })

    def _decide(self, delta: float, candidate: dict[str, Any]) -> Decision:
        """Whether ``delta`` over the current best is enough for a candidate with these metrics (rrma/run/promotion.py)."""
        best = self.state.trials.get(self.state.best_id or "")
        return decide(delta, candidate, best.metrics if best is not None else None, self.state.floor, self.task.noise)

    # ------------------------------------------------------------------ confirmation (loop.confirm)

    def _confirm(self, trial_id: str) -> None:
        """Re-evaluate a would-be new best ``loop.confirm`` times with fresh seeds, then decide.

        The repeats are trials of their own (``t0007-r1``...; ``confirms`` names the original), run
        from the same files with new seeds and never from the outcome cache. The original is promoted,
        with the mean of the repeats as its score, only if that mean still beats the best by the floor:
        the original's own score was selected for being high (the winner's curse), so it is not part
        of the mean. A repeat stopped because the run is stopping leaves the verdict to the resume.
        """
        k = self.task.loop.confirm
        with self.lock:
            rec = self.state.trials[trial_id]
            ids = [f"{trial_id}-r{i + 1}" for i in range(k)]
            proposal_blob = rec.proposal_blob
        proposal = (Proposal.model_validate(self.store.get_json_blob(proposal_blob)) if proposal_blob
                    else Proposal(hypothesis=rec.hypothesis))
        files = self.files_of(trial_id)
        threads = []
        for i, rid in enumerate(ids):
            with self.lock:
                existing = self.state.trials.get(rid)
                if existing is not None and existing.finished and existing.status != Status.aborted.value:
                    continue
                # fresh and reproducible: from the original's place in the run, never a seed it already had
                seed = self.seed * 7919 + 3_000_000 + 1009 * self.state.order.index(trial_id) + i
                if existing is None:
                    self.emit("trial.proposed", "harness", {
                        "trial_id": rid, "parent": rec.parent, "agent": rec.agent,
                        "hypothesis": f"confirm {trial_id} (repeat {i + 1}/{k}, fresh seed): {rec.hypothesis}"[:2000],
                        "proposal_blob": proposal_blob or self.store.put_json_blob(proposal.model_dump(mode="json")),
                        "manifest_blob": rec.manifest_blob, "edits": [], "theorem": rec.theorem, "seed": seed,
                        "repeat": i + 1, "confirms": trial_id,
                    })
                else:
                    seed = existing.seed
                self.files_cache[rid] = files
            thread = threading.Thread(target=self._guarded(self._evaluate), name=f"confirm-{rid}",
                                      args=(rid, proposal, files, seed))
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
        with self.lock:
            repeats = [self.state.trials[rid] for rid in ids]
            if self.error is not None or (self._stopping() and any(r.status == Status.aborted.value for r in repeats)):
                return  # the run is ending: `rrma-tui resume` finishes the confirmation
            self._decide_confirmation(trial_id, repeats)

    def _decide_confirmation(self, trial_id: str, repeats: list[Any]) -> None:
        scores = [float(r.score) if r.status == Status.ok.value and r.score is not None else None for r in repeats]
        scored = [x for x in scores if x is not None]
        best_id = self.state.best_id
        best_score = self.state.best_history[-1][1] if self.state.best_history else None
        mean = statistics.fmean(scored) if scored else None
        delta = self.task.better(mean, best_score) if mean is not None and best_score is not None else None
        # the repeats' own items (averaged) face the best: never the original's, selected for being high
        verdict = self._decide(delta if delta is not None else 0.0, combine([r.metrics for r in repeats]))
        floor, source = verdict.floor, verdict.label
        failed = [r.trial_id for r, x in zip(repeats, scores, strict=True) if x is None]
        if failed:
            confirmed, reason = False, f"repeat(s) {', '.join(failed)} did not score"
        elif delta is None or mean is None:
            confirmed, reason = False, "nothing to compare with"
        elif verdict.promote:
            confirmed, reason = True, ""
        else:
            confirmed = False
            reason = (f"the mean of {len(scored)} repeats ({mean:.6g}) beats the best {best_id} ({best_score:.6g}) "
                      f"by {delta:.3g}: not enough (floor {floor:.3g}, {source})")
        hitl = confirmed and self.task.loop.hitl
        self.emit("trial.confirmed", "harness", {
            "trial_id": trial_id, "repeats": [r.trial_id for r in repeats], "scores": scores, "mean": mean,
            "best_trial": best_id, "best_score": best_score, "delta": delta, "floor": floor, "floor_source": source,
            "confirmed": confirmed, "awaiting_review": hitl, "reason": reason,
        })
        if confirmed and not hitl:
            sigma = self.state.sigma or 0.0
            self.emit("trial.promoted", "harness", {
                "trial_id": trial_id, "score": mean, "previous_best": best_id, "previous_score": best_score,
                "delta": delta, "delta_sigma": (delta / sigma) if (delta is not None and sigma > 0) else None,
                "confirmed_by": [r.trial_id for r in repeats],
            })

    def _check_reviews(self) -> None:
        if not self.task.loop.hitl:
            return
        with self.lock:
            for trial_id in list(self.state.order):
                rec = self.state.trials[trial_id]
                if rec.metrics.get("awaiting_review") and not rec.promoted and rec.review_status == "approved":
                    promote_if_approved(self.store, self.state, self.task, trial_id, emit=self.emit)

    def _summary(self, trial_id: str) -> TrialSummary:
        with self.lock:
            return summarize(self.state, self.state.trials[trial_id])


EARLY_ABORT_KEY = "_rrma_early_abort"  # carries the loop's decision from _evaluate to trial.finished


def early_aborted(outcome: Outcome, decision: dict[str, Any]) -> Outcome:
    """The outcome of a trial the loop stopped early: the decision is the feedback (the oracle's log is kept)."""
    metrics = {**outcome.metrics, "failure": "early-abort", EARLY_ABORT_KEY: decision}
    feedback = ("Stopped early: " + decision["text"] + ". The progress so far said this trial cannot beat the "
                "current best, so its slot went to the next proposal.\n" + outcome.feedback)
    return outcome.model_copy(update={"metrics": metrics, "feedback": feedback})


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
) -> RunResult:
    """Create a run directory for ``task`` under ``runs_dir`` and run it to the end.

    ``experiment`` (``{id, arm, seed}``) marks the run as one cell of an experiment (rrma/run/experiment.py);
    it is recorded in run.json and run.started.
    """
    seed = task.seed if seed is None else seed
    if agents is None:  # a missing key or backend fails here, before a run dir exists
        agents = make_agents(task, seed, agent_count)
    run_id = run_id or new_run_id(task.name)
    store = RunStore(Path(runs_dir) / run_id, create=True)
    try:
        lock = DriverLock(store.dir).acquire()  # held until the run ends: one driver per run
    except RunLocked:
        for agent in agents:
            with contextlib.suppress(Exception):
                agent.close()
        raise
    with lock:
        oracle = make_oracle(task.oracle.kind, task.oracle.params, metric=task.metric.name,
                             direction=task.metric.direction)
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
                                                "head_record": True, "agents": described, "experiment": experiment})
        return _drive(store, task, seed, oracle, executor, stop, on_event, agents, agent_count)


def _drive(store: RunStore, task: TaskConfig, seed: int, oracle: Oracle, executor: Any, stop: threading.Event | None,
           on_event: EventHook | None, agents: list[Agent] | None, agent_count: int | None) -> RunResult:
    cgroups.sweep_empty()  # the empty trial cgroups a killed harness left behind (any run's)
    try:
        if callable(executor) and not hasattr(executor, "submit"):
            executor = executor(oracle, store, task)
        if agents is None:
            agents = make_agents(task, seed, agent_count)
        loop = ResearchLoop(store, task, seed=seed, agents=agents, oracle=oracle, executor=executor, stop=stop,
                            on_event=on_event)
    except Exception as exc:
        # the run has started (or resumed) in the log: it must not be left looking as if it still runs
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        with contextlib.suppress(Exception):
            store.append_many([("note", "harness", {"text": f"run error before the loop started: {message}"}),
                               ("run.finished", "harness", {"reason": "error", "summary": {"error": message}})])
            write_views(store.dir, RunState.fold(store.scan().events))
        raise
    return loop.run()


def resume_run(
    run_dir: Path,
    *,
    stop: threading.Event | None = None,
    on_event: EventHook | None = None,
    executor: Any = None,
    agent_count: int | None = None,
) -> RunResult:
    """Continue a run after a crash or a stop; completed trials are kept, interrupted ones re-run.

    Raises :class:`~rrma.log.store.RunLocked` when another live process is driving the run.
    """
    store = RunStore(run_dir)
    with DriverLock(store.dir):  # before reading the state: a second driver would act on a stale fold
        return _resume(store, stop=stop, on_event=on_event, executor=executor, agent_count=agent_count)


def _resume(store: RunStore, *, stop: threading.Event | None, on_event: EventHook | None, executor: Any,
            agent_count: int | None) -> RunResult:
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
    if state.finish_reason is not None and state.finish_reason not in ("interrupted", "stopped") and not interrupted:
        used = len(state.agent_trials())
        if used >= task.budget.max_trials or state.finish_reason in ("target", "baseline_failed"):
            return RunResult(store.dir, f"already_finished:{state.finish_reason}", state)
    oracle = make_oracle(task.oracle.kind, task.oracle.params, metric=task.metric.name, direction=task.metric.direction)
    oracle.prepare(store.dir.absolute(), task.workspace_dir())
    seed = state.seed + 104729 * (state.resumes + 1)  # fresh agent randomness, reproducible
    agents = make_agents(task, seed, agent_count)
    store.append("run.resumed", "harness", {"reason": "resume", "torn_offsets": torn, "interrupted_trials": interrupted,
                                            "agents": [agent_info(a) for a in agents]})
    return _drive(store, task, state.seed, oracle, executor, stop, on_event, agents, agent_count)

