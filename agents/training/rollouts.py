"""Online rollouts scored through the normal loop: the bridge between a trainer and a research run.

The trainer (TRL's GRPO or SDPO trainer) samples replies; each reply becomes a proposal that the run's
ordinary loop validates, sandboxes, caches, scores with the oracle, audits and records, exactly as an
agent's would. The run's agents are :class:`BridgeAgent` instances (``max_concurrent`` of them, so that
many rollouts run at once): each ``propose`` takes the next queued rollout, records the policy's reply
turn and returns the proposal; ``observe`` hands the trial's summary back to the waiting trainer. The
trainer's own events (``train.*``) go into the same log through the loop (``emit``), so one run holds
the rollouts, their outcomes and the training curves, and ``rrma-tui verify`` checks them together.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.contracts import Agent, Context, TrialSummary
from rrma.log.events import TRAIN_ACTOR
from rrma.run.loop import ResearchLoop, RunResult, resume_run, start_run
from rrma.task import AgentConfig, TaskConfig
from rrma.train import prompt as policy_prompt
from rrma.trial import Proposal

BRIDGE_BACKEND = "trainer-rollouts"
POLL_S = 0.05


class RolloutError(Exception):
    """The run that scores the rollouts ended or failed before they were scored."""


@dataclass
class Rollout:
    proposal: Proposal
    turn: dict[str, Any]  # the policy's reply turn (format rrma-policy/1), recorded before the trial
    done: threading.Event = field(default_factory=threading.Event)
    summary: TrialSummary | None = None


@dataclass(frozen=True)
class PromptState:
    """What one group of rollouts is prompted with: the parent trial, its files and score, the messages."""

    parent: str
    files: dict[str, str]
    score: float | None
    messages: list[dict[str, str]]


class BridgeAgent(Agent):
    """An agent of the run whose proposals are the trainer's rollouts (one at a time per instance)."""

    backend = BRIDGE_BACKEND

    def __init__(self, config: AgentConfig, task: TaskConfig, jobs: queue.Queue[Rollout], closed: threading.Event,
                 seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.jobs = jobs
        self.closed = closed
        self.current: Rollout | None = None

    def propose(self, ctx: Context) -> Proposal | None:
        while not (self.closed.is_set() or ctx.stopping()):
            try:
                job = self.jobs.get(timeout=POLL_S)
            except queue.Empty:
                continue
            self.current = job
            ctx.record_turn(**job.turn)
            return job.proposal
        return None

    def observe(self, trial: TrialSummary) -> None:
        job, self.current = self.current, None
        if job is not None:
            job.summary = trial
            job.done.set()


class LoopBridge:
    """Runs (or resumes) a research run in a thread, with bridge agents, and scores rollouts through it."""

    def __init__(self, task: TaskConfig, *, runs_dir: Path | None = None, run_dir: Path | None = None,
                 run_id: str | None = None, seed: int | None = None, name: str = "policy") -> None:
        if (runs_dir is None) == (run_dir is None):
            raise ValueError("LoopBridge needs runs_dir (a new run) or run_dir (resume one), not both")
        self.task = task
        self.runs_dir, self.run_dir, self.run_id, self.seed = runs_dir, run_dir, run_id, seed
        self.jobs: queue.Queue[Rollout] = queue.Queue()
        self.closed = threading.Event()
        self.stop = threading.Event()
        workers = max(1, task.budget.max_concurrent)
        self.agents = [BridgeAgent(AgentConfig(name=name if workers == 1 else f"{name}-{i + 1}",
                                               backend=BRIDGE_BACKEND), task, self.jobs, self.closed)
                       for i in range(workers)]
        self.loop: ResearchLoop | None = None
        self.result: RunResult | None = None
        self.failure: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rrma-rollouts", daemon=True)

    # ------------------------------------------------------------------ the run's thread

    def _got_loop(self, loop: ResearchLoop) -> None:
        self.loop = loop
        self._ready.set()

    def _run(self) -> None:
        try:
            if self.run_dir is not None:
                self.result = resume_run(self.run_dir, agents=list(self.agents), on_loop=self._got_loop, stop=self.stop)
            else:
                assert self.runs_dir is not None
                self.result = start_run(self.task, self.runs_dir, seed=self.seed, run_id=self.run_id,
                                        agents=list(self.agents), on_loop=self._got_loop, stop=self.stop)
        except BaseException as exc:  # handed to the trainer's thread, which raises it
            self.failure = exc
        finally:
            self._ready.set()

    def start(self, timeout: float = 600.0) -> ResearchLoop:
        """Start the run and wait for its baseline (the reference of every reward)."""
        self._thread.start()
        self._ready.wait(timeout)
        loop = self._alive()
        deadline = time.monotonic() + timeout
        while loop.state.baseline_mean is None:
            self._alive()
            if loop.state.finish_reason is not None or time.monotonic() > deadline:
                raise RolloutError(f"the run ended before its baseline was measured ({loop.state.finish_reason})")
            time.sleep(POLL_S)
        return loop

    def _alive(self) -> ResearchLoop:
        if self.failure is not None:
            raise RolloutError(f"the run failed: {type(self.failure).__name__}: {self.failure}") from self.failure
        if self.loop is None:
            raise RolloutError("the run did not start")
        return self.loop

    @property
    def dir(self) -> Path:
        return self._alive().store.dir

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        self._alive().emit(kind, TRAIN_ACTOR, data)

    # ------------------------------------------------------------------ rollouts

    def prompt(self) -> PromptState:
        """The next group's prompt: the loop's default parent now (the best, or the baseline)."""
        loop = self._alive()
        with loop.lock:
            loop.sync()
            parent = loop.scheduler.default_parent()
            assert parent is not None, "training needs an edit task (not the per-theorem policy)"
            rec = loop.state.trials.get(parent)
            score = rec.score if rec is not None and rec.score is not None else loop.state.baseline_mean
        files = loop.files_of(parent)
        editable = list(self.task.workspace.editable)
        return PromptState(parent, files, score, policy_prompt.messages(self.task, files, score, editable))

    def score(self, rollouts: list[Rollout], timeout: float | None = None) -> list[Rollout]:
        """Queue the rollouts and wait until the loop has scored every one (RolloutError when the run ends)."""
        for job in rollouts:
            self.jobs.put(job)
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in rollouts:
            while not job.done.wait(POLL_S):
                loop = self._alive()
                if not self._thread.is_alive() or loop.state.finish_reason is not None:
                    raise RolloutError(f"the run ended ({loop.state.finish_reason or 'its thread stopped'}) "
                                       "before every rollout was scored")
                if deadline is not None and time.monotonic() > deadline:
                    raise RolloutError(f"rollouts not scored within {timeout:.0f} s")
        return rollouts

    def close(self, timeout: float = 120.0) -> RunResult | None:
        """No more rollouts: the bridge agents propose nothing, the run finishes; its result."""
        self.closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            self.stop.set()
            self._thread.join(timeout)
        return self.result
