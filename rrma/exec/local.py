"""Executors run ``oracle.evaluate`` for trials, concurrently, and always return an Outcome.

The executor protocol is small so that other engines (Ray, see ``rrma.exec.ray``) can sit
behind it: ``submit(job, on_progress) -> Future[Outcome]``, ``shutdown(cancel)`` and
``abort(trial_id, reason)`` (stop one running trial: the loop's early abort, rrma/run/abort.py). A
:class:`TrialJob` is plain, picklable data: the trial's files (parent snapshot plus the edit,
already validated), the proposal, the budget and what the oracle needs to know about the run.

Invariants: an executor never raises for anything a trial does. Untrusted programs run under
:func:`rrma.contain.spawn.spawn` inside the oracle (own process group, limits from outside);
an oracle that raises becomes a ``crash`` outcome with its traceback tail, and an oracle call
that overruns its budget by a grace period becomes ``timeout`` while the harness moves on.
Whatever tree a trial leaves in its workspace is removed without recursion and without raising
(:func:`rrma.contain.files.remove_tree`); what cannot be removed is named under
:data:`LEFTOVER_KEY` in the outcome's metrics, which the trial runner turns into a ``note``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rrma.contain import cgroups, disk, files
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import stale_processes
from rrma.contracts import EvalContext, Oracle
from rrma.log.layout import live_output_path
from rrma.trial import Budget, Outcome, Proposal, Status
from rrma.workspace import materialize

ProgressCallback = Callable[[dict[str, Any]], None]
# an oracle call may overrun its budget, and the set-up allowance its oracle declares
# (rrma.contracts.Oracle.setup_allowance_s), by this much before it is abandoned
ORACLE_GRACE_S = 30.0
LEFTOVER_KEY = "_rrma_leftover"  # outcome metrics: one line per trial folder the harness could not remove


@dataclass
class TrialJob:
    """Everything needed to evaluate one trial anywhere (picklable)."""

    trial_id: str
    files: dict[str, str]  # the trial's workspace, path -> text
    proposal: Proposal
    budget: Budget
    seed: int = 0
    is_baseline: bool = False
    best_score: float | None = None
    baseline_score: float | None = None
    sigma: float | None = None
    oracle_kind: str = ""
    oracle_params: dict[str, Any] = field(default_factory=dict)
    metric: str = "score"
    direction: str = "minimize"
    fs_guard: str = "auto"  # RRMA_FS_GUARD where the run was started (auto | off | require)
    network: bool = False  # RRMA_TRIAL_NETWORK=on where the run was started: trials share the host's network
    pass_env: tuple[str, ...] = ()  # credential-named variables the task passes to its programs by name (oracle.pass_env)
    keep_workspace: bool = False  # loop.keep_workspaces: leave the workspace on disk after the outcome
    disk_cap: str = "auto"  # RRMA_DISK_CAP where the run was started: the workspace's own capped file system (auto | off | require)


class Executor(Protocol):
    name: str

    def submit(self, job: TrialJob, on_progress: ProgressCallback) -> concurrent.futures.Future[Outcome]: ...

    def shutdown(self, cancel: bool = False) -> None: ...

    def abort(self, trial_id: str, reason: str) -> bool:
        """Stop one submitted trial (its outcome becomes ``aborted``); False when it is not running here."""
        ...


def crash_outcome(reason: str, started: float) -> Outcome:
    return Outcome(status=Status.crash, feedback=reason, log=reason, seconds=time.monotonic() - started)


def _remove_live(path: Path | None) -> None:
    """Remove a live-output file (unlink never follows a link: a planted one goes, its target stays)."""
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def evaluate_job(oracle: Oracle, job: TrialJob, trial_dir: Path, on_progress: ProgressCallback,
                 cancel: threading.Event, protect: Sequence[Path] = (), live_output: Path | None = None) -> Outcome:
    """Materialize the job's files in ``trial_dir`` and run the oracle; never raises.

    The oracle gets a sandbox policy (``ctx.guard``) for the programs the agent wrote: ``trial_dir``
    writable, the harness's code and the interpreter read-only, ``protect`` (the run dir), the
    oracle's :meth:`~rrma.contracts.Oracle.held_out` answers and the oracle's own directory
    (``ctx.oracle_dir``, a fresh sibling of ``trial_dir``) absent. ``live_output`` (``ctx.live_output``):
    where the trial's program's output is appended while it runs (:mod:`rrma.contain.live`), a path
    outside ``trial_dir`` that ``protect`` hides; a leftover there (a harness killed mid-trial) is
    removed before the oracle runs, and the file is removed when it returns: the log blob is the record.

    The trial's folders are removed with :func:`~rrma.contain.files.remove_tree` (any depth, never
    raising): a leftover of an earlier run of the trial that cannot be removed is moved aside, and
    what stays of this run's workspace is named under :data:`LEFTOVER_KEY`; the outcome stands.
    """
    started = time.monotonic()
    # absolute: oracles hand these paths to processes that run elsewhere (a scorer's cwd is its own
    # directory), where a relative `--runs` would point somewhere else
    trial_dir = Path(trial_dir).absolute()
    protect = tuple(Path(p).absolute() for p in protect)
    ran = False  # the oracle was called: the workspace is the trial's (never one a stale process still uses)
    leftovers: list[str] = []
    try:
        if os.path.lexists(trial_dir):  # a re-run after resume starts from a clean workspace
            stale = stale_processes(trial_dir)
            if stale:
                return crash_outcome(f"not run: {len(stale)} process(es) of an earlier run of this trial still run "
                                     f"in {trial_dir} (pids {', '.join(map(str, stale))}); kill them first", started)
            disk.unmount_leftover(trial_dir)  # a killed harness's capped workspace, still mounted
            cleared = files.clear(trial_dir)
            if not cleared.complete:
                leftovers.append("earlier run: " + cleared.note())
            cgroups.remove_empty_scopes(trial_dir)  # what a killed harness left for this trial
        disk.open_workspace(trial_dir, job.budget.disk_mb, job.disk_cap)  # its own capped file system, or the watch
        try:
            materialize(job.files, trial_dir)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            return Outcome(status=Status.disk, feedback=f"disk: the workspace's files do not fit its "
                           f"{job.budget.disk_mb} MiB disk budget ({exc.strerror})", seconds=time.monotonic() - started)
        cleared = files.clear(trial_dir.parent / "oracle")
        if not cleared.complete:
            leftovers.append("oracle folder: " + cleared.note())
        oracle_dir = files.fresh_dir(trial_dir.parent / "oracle")
        if live_output is not None:
            live_output = Path(live_output).absolute()
            _remove_live(live_output)  # spawn creates it afresh (O_EXCL): a leftover would be refused
        hidden = (*protect, oracle_dir, *oracle.held_out())
        ctx = EvalContext(
            trial_id=job.trial_id,
            trial_dir=trial_dir,
            proposal=job.proposal,
            budget=job.budget,
            seed=job.seed,
            is_baseline=job.is_baseline,
            best_score=job.best_score,
            baseline_score=job.baseline_score,
            sigma=job.sigma,
            progress=on_progress,
            cancel=cancel,
            guard=None if job.fs_guard == "off" else Policy.for_trial(trial_dir, hidden, network=job.network,
                                                                      required=job.fs_guard == "require",
                                                                      pass_env=job.pass_env),
            oracle_dir=oracle_dir,
            pass_env=tuple(job.pass_env),
            live_output=live_output,
        )
        ran = True
        outcome = oracle.evaluate(ctx)
        if outcome.seconds == 0.0:
            outcome.seconds = time.monotonic() - started
    except disk.DiskCapError as exc:  # a cap that is required, failed, or a foreign mount on the workspace
        outcome = crash_outcome(f"not run: {exc}", started)
    except Exception as exc:  # the oracle's bug must not take the harness down
        tail = "".join(traceback.format_exception(exc)[-6:])
        outcome = crash_outcome(f"oracle error: {type(exc).__name__}: {exc}\n{tail}", started)
    finally:
        disk.release(trial_dir, keep=job.keep_workspace)  # unmounted (kept: copied out first); never raises
        if ran:  # the program is gone (spawn returned); its output is in the outcome's log
            _remove_live(live_output)
    # the trial's files are in the blobs; what its program wrote there (checkpoints, data) would
    # otherwise pile up run after run (loop.keep_workspaces keeps it). Nothing of it runs any more:
    # every process a trial starts is gone when spawn returns.
    if ran and not job.keep_workspace:
        removal = files.remove_tree(trial_dir)
        if not removal.complete:
            leftovers.append(removal.note())
    metrics = {k: v for k, v in outcome.metrics.items() if k != LEFTOVER_KEY}  # only the executor writes it
    if leftovers:
        metrics[LEFTOVER_KEY] = leftovers
    outcome.metrics = metrics
    return outcome


class LocalExecutor:
    """Runs evaluations in a thread pool; the untrusted work happens in limited subprocesses."""

    name = "local"

    def __init__(self, oracle: Oracle, trials_dir: Path, max_workers: int = 1,
                 protect: Sequence[Path] | None = None) -> None:
        self.oracle = oracle
        self.trials_dir = trials_dir
        # read-only to trial programs: by default every trial dir (and the oracles' state kept there)
        self.protect = tuple(protect) if protect is not None else (trials_dir,)
        self.cancel = threading.Event()  # the run's: set on shutdown(cancel=True), before every trial's own
        self._cancels: dict[str, threading.Event] = {}  # trial id -> its cancel event (what the oracle watches)
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="trial")

    def submit(self, job: TrialJob, on_progress: ProgressCallback) -> concurrent.futures.Future[Outcome]:
        cancel = threading.Event()
        with self._lock:
            if self.cancel.is_set():
                cancel.set()
            self._cancels[job.trial_id] = cancel
        future = self._pool.submit(self._run, job, on_progress, cancel)
        future.add_done_callback(lambda _: self._forget(job.trial_id, cancel))
        return future

    def _forget(self, trial_id: str, cancel: threading.Event) -> None:
        with self._lock:
            if self._cancels.get(trial_id) is cancel:
                del self._cancels[trial_id]

    def _run(self, job: TrialJob, on_progress: ProgressCallback, cancel: threading.Event) -> Outcome:
        return evaluate_job(self.oracle, job, self.trials_dir / job.trial_id / "work", on_progress, cancel,
                            self.protect, live_output_path(self.trials_dir, job.trial_id))

    def abort(self, trial_id: str, reason: str) -> bool:
        with self._lock:
            cancel = self._cancels.get(trial_id)
        if cancel is None:
            return False
        cancel.set()  # the oracle's spawn kills the trial's process tree; the outcome is aborted
        return True

    def shutdown(self, cancel: bool = False) -> None:
        if cancel:
            with self._lock:
                self.cancel.set()
                for event in self._cancels.values():
                    event.set()
        self._pool.shutdown(wait=True, cancel_futures=cancel)


def wait_outcome(future: concurrent.futures.Future[Outcome], budget: Budget, setup_s: float = 0.0) -> Outcome:
    """Wait for a submitted trial; an oracle that hangs past budget + ``setup_s`` (the set-up allowance the
    oracle declares, :meth:`rrma.contracts.Oracle.setup_allowance_s`) + grace becomes a timeout."""
    limit = budget.seconds + max(0.0, setup_s) + ORACLE_GRACE_S
    started = time.monotonic()
    # executors that queue (Ray) mark when evaluation really begins: queue time and a worker's
    # first oracle set-up do not count against the trial's budget (capped at 10x the budget)
    began = getattr(future, "rrma_started", None)
    if began is not None:
        deadline = time.monotonic() + max(600.0, 10 * budget.seconds)
        while not began.wait(0.5) and not future.done() and time.monotonic() < deadline:
            pass
    try:
        return future.result(timeout=limit)
    except concurrent.futures.TimeoutError:
        future.cancel()
        return Outcome(
            status=Status.timeout,
            feedback=f"the oracle did not return within {limit:g} s (the budget {budget.seconds:g} s"
                     + (f", its set-up allowance {setup_s:g} s" if setup_s > 0 else "")
                     + f" and {ORACLE_GRACE_S:g} s of grace); abandoned",
            seconds=time.monotonic() - started,
        )
    except concurrent.futures.CancelledError:
        return Outcome(status=Status.aborted, feedback="cancelled: the run is stopping", seconds=0.0)
