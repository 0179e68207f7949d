"""The Ray executor: trials evaluated as Ray tasks on a cluster, behind the executor protocol.

Why it exists: one machine runs a handful of trials at a time; a Ray cluster (GPU nodes
included) runs many, while the run log stays on the driver. :class:`RayExecutor` has the same
protocol as :class:`rrma.exec.local.LocalExecutor` (``submit(job, on_progress) ->
Future[Outcome]``, ``shutdown(cancel)``) and the same outcome labels.

What travels: the trial's workspace snapshot (``job.files``, zlib-compressed JSON) and the
proposal go to the worker as plain data, with the oracle as the ``package.module:Class`` target
the driver resolved (:func:`rrma.plugins.find_oracle`): a worker imports that target directly, so
it needs no install metadata (entry points) for an oracle a plug-in package adds; the task's pristine workspace goes once per run
through the object store (``ray.put``) so a worker can run the oracle's ``prepare`` on its
node. On the worker each trial is materialized in a fresh temporary directory, evaluated by
:func:`rrma.exec.local.evaluate_job` (the oracle runs untrusted work under
:func:`rrma.contain.spawn.spawn`, so the same wall-clock, memory and output limits and the
same labels apply), and the directory is deleted. Progress samples stream back as they happen
(the task is a Ray generator), then the :class:`~rrma.trial.Outcome` with its log.

Invariants:

* Only the driver writes the run: workers never see the run directory. The driver calls
  ``on_progress`` in the order samples were produced and resolves the future exactly once.
  It also writes ``trials/<id>/executor.json`` (node, worker pid, queue and run seconds).
* A trial is never silently re-run (``max_retries=0``). A worker that dies mid-trial (killed,
  OOM-killed by Ray, node lost) becomes a ``crash`` outcome whose feedback starts with
  ``ray worker died mid-trial:`` and names the node, the worker pid and Ray's reason.
* A dead worker leaves no trial processes behind: spawn puts each trial program in its
  own session, out of reach of Ray's own clean-up, so each worker process starts a small
  reaper (double-forked, outside Ray's process tree) that waits for the worker to exit, then
  SIGKILLs the process groups the worker last listed in its ledger (a daemon thread mirrors
  spawn's live groups to a file every 0.1 s) and every process carrying the worker's
  ``RRMA_RAY_WORKER`` token in its environment, detaches the capped workspaces
  (:mod:`rrma.contain.disk`) still mounted under the worker's scratch directory, and deletes it.
* ``shutdown(cancel=True)`` cancels every outstanding Ray task (queued ones are dropped, running
  ones are force-killed, which the reaper cleans up); they resolve as ``aborted``. The executor
  calls ``ray.shutdown`` only when it started Ray itself.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
import ray.exceptions

from rrma.contain import disk, files
from rrma.contracts import Oracle
from rrma.exec.local import ProgressCallback, TrialJob, crash_outcome, evaluate_job
from rrma.plugins import find_oracle, make_oracle
from rrma.trial import Budget, Outcome, Proposal, Status
from rrma.workspace import materialize, read_tree

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]  # holds the rrma/ and oracle/ packages
CODE_PACKAGES = ("rrma", "oracle")  # what a worker imports to evaluate a trial (plus a plug-in oracle's package)
WORKER_TOKEN_ENV = "RRMA_RAY_WORKER"  # marks every process a worker's trials start
SHIP_CODE_ENV = "RRMA_RAY_SHIP_CODE"  # "1": upload rrma/ and oracle/ to the workers; "0": never
DIED_PREFIX = "ray worker died mid-trial"
MIB = 1024 * 1024


class RayExecutorError(RuntimeError):
    """Ray cannot run this task's trials (no cluster at the address, no node big enough)."""


# ----------------------------------------------------------------------------- wire format


def encode_job(job: TrialJob, oracle_target: str | None = None) -> dict[str, Any]:
    """A TrialJob as plain data; the workspace snapshot is zlib-compressed JSON bytes.

    ``oracle_target`` is the ``module:Class`` of ``job.oracle_kind`` (resolved here when None): the
    worker imports it as written, without looking the kind up (raises OracleError for an unknown kind).
    """
    return {
        "trial_id": job.trial_id,
        "files_z": zlib.compress(json.dumps(job.files, sort_keys=True).encode("utf-8"), 3),
        "proposal": job.proposal.model_dump(mode="json"),
        "budget": job.budget.model_dump(mode="json"),
        "seed": job.seed,
        "is_baseline": job.is_baseline,
        "best_score": job.best_score,
        "baseline_score": job.baseline_score,
        "sigma": job.sigma,
        "fs_guard": job.fs_guard,
        "network": job.network,
        "pass_env": list(job.pass_env),
        "keep_workspace": job.keep_workspace,
        "disk_cap": job.disk_cap,
        "oracle_kind": job.oracle_kind,
        "oracle_target": oracle_target or find_oracle(job.oracle_kind).target,
        "oracle_params": job.oracle_params,
        "metric": job.metric,
        "direction": job.direction,
    }


def decode_job(payload: dict[str, Any]) -> TrialJob:
    files = json.loads(zlib.decompress(payload["files_z"]).decode("utf-8"))
    rest = {k: v for k, v in payload.items() if k not in ("files_z", "proposal", "budget", "oracle_target")}
    rest["pass_env"] = tuple(rest.get("pass_env", ()))
    return TrialJob(files=files, proposal=Proposal.model_validate(payload["proposal"]),
                    budget=Budget.model_validate(payload["budget"]), **rest)


def pack_files(files: dict[str, str]) -> tuple[bytes, str]:
    """Compressed JSON of a workspace and its sha256 (the cache key of a prepared oracle)."""
    raw = json.dumps(files, sort_keys=True).encode("utf-8")
    return zlib.compress(raw, 3), hashlib.sha256(raw).hexdigest()


# ----------------------------------------------------------------------------- worker side

# Runs detached from the worker: waits for it to exit, then kills what its trials left behind.
_REAPER_SOURCE = r"""
import os, select, shutil, signal, sys, time
worker, worker_pgid, token, scratch = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
remover = sys.argv[5]  # rrma/contain/files.py: stdlib only, loaded by path (no site, no package import)
if os.fork():
    os._exit(0)
def alive():
    try:
        with open("/proc/%d/stat" % worker, "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"
try:
    fd = os.pidfd_open(worker)
except (AttributeError, OSError):
    fd = None
if fd is not None:
    select.select([fd], [], [])
else:
    while alive():
        time.sleep(0.5)
me, my_pgid = os.getpid(), os.getpgid(0)
try:
    with open(os.path.join(scratch, "active-groups"), "r") as fh:
        groups = [int(x) for x in fh.read().split()]
except (OSError, ValueError):
    groups = []
live_groups = set()  # a pgid with no member left may already be recycled: never signal those
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            with open("/proc/%s/stat" % entry, "rb") as fh:
                stat = fh.read()
            live_groups.add(int(stat[stat.rfind(b")") + 2:].split()[2]))
        except (OSError, ValueError, IndexError):
            pass
for pgid in groups:
    if pgid in live_groups and pgid not in (worker_pgid, my_pgid, 0, 1):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
needle = ("RRMA_RAY_WORKER=" + token).encode()
for _ in range(20):
    found = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if needle not in env:
            continue
        found += 1
        pid = int(entry)
        try:
            pgid = os.getpgid(pid)
            if pgid in (worker_pgid, my_pgid, 0, 1):
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    if not found:
        break
    time.sleep(0.1)
# the capped workspaces (rrma.contain.disk) of the trials the worker ran when it died: loop-mounted
# ext4 under its scratch/trials; detached (MNT_DETACH), so the remover can remove their mount points
import ctypes
libc = ctypes.CDLL(None)
def unescape(field):
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
try:
    with open("/proc/self/mountinfo") as fh:
        points = [unescape(line.split()[4]) for line in fh if line.split(" - ", 1)[-1].startswith("ext4 /dev/loop")]
except OSError:
    points = []
for point in sorted(points, key=len, reverse=True):
    if point.startswith(os.path.join(scratch, "trials") + os.sep):
        libc.umount2(point.encode(), 2)
try:  # a trial's tree of any depth (shutil.rmtree recurses: RecursionError past ~1000 levels)
    import importlib.util
    spec = importlib.util.spec_from_file_location("rrma_tree_remover", remover)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.remove_tree(scratch)
except Exception:
    shutil.rmtree(scratch, ignore_errors=True)
"""


@dataclass
class _WorkerState:
    """Per worker process: scratch dir, reaper token and prepared oracles (one per task)."""

    scratch: Path
    token: str
    oracles: dict[tuple[str, ...], Oracle] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def key(target: str, job: TrialJob, workspace_digest: str) -> tuple[str, ...]:
        params = json.dumps(job.oracle_params, sort_keys=True, default=str)
        return (target, params, job.metric, job.direction, workspace_digest)

    def has_oracle(self, target: str, job: TrialJob, workspace_digest: str) -> bool:
        with self.lock:
            return self.key(target, job, workspace_digest) in self.oracles

    def oracle_for(self, target: str, job: TrialJob, workspace_box: list[Any], workspace_digest: str) -> Oracle:
        """The job's oracle (``target``: its module:Class, resolved on the driver), built and prepared
        once per worker (on its node, shipped workspace)."""
        key = self.key(target, job, workspace_digest)
        with self.lock:
            cached = self.oracles.get(key)
            if cached is not None:
                return cached
            index = len(self.oracles)
            oracle = make_oracle(target, job.oracle_params, metric=job.metric, direction=job.direction)
            workspace = self.scratch / f"workspace-{workspace_digest[:16]}"
            if not workspace.exists():
                packed = ray.get(workspace_box[0])
                materialize(json.loads(zlib.decompress(packed).decode("utf-8")), workspace)
            run_dir = self.scratch / f"run-{index}"
            run_dir.mkdir(parents=True, exist_ok=True)
            oracle.prepare(run_dir, workspace)
            self.oracles[key] = oracle
            return oracle


_STATE: _WorkerState | None = None
_STATE_LOCK = threading.Lock()
LEDGER_INTERVAL_S = 0.1


def _active_groups() -> list[int]:
    """Process groups of the trial programs spawn is running in this process."""
    from rrma.contain.spawn import active_groups

    return active_groups()


def _keep_group_ledger(path: Path) -> None:
    """Mirror the live trial process groups into ``path`` for the reaper (worker daemon thread).

    The environment token misses trial programs whose oracle passes a filtered environment
    (autoresearch, gsm8k); the ledger does not, up to LEDGER_INTERVAL_S of lag.
    """
    last: list[int] | None = None
    while True:
        groups = _active_groups()
        if groups != last:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(" ".join(str(g) for g in groups), encoding="ascii")
            tmp.replace(path)
            last = groups
        time.sleep(LEDGER_INTERVAL_S)


def _worker_state() -> _WorkerState:
    """Create the worker's scratch dir and start its reaper (once per worker process)."""
    global _STATE
    with _STATE_LOCK:
        if _STATE is not None:
            return _STATE
        scratch = Path(tempfile.mkdtemp(prefix=f"rrma-ray-{os.getpid()}-"))
        (scratch / "trials").mkdir()
        token = f"{os.getpid()}-{os.urandom(8).hex()}"
        env = {k: v for k, v in os.environ.items() if k != WORKER_TOKEN_ENV}
        launcher = subprocess.Popen(
            [sys.executable, "-S", "-c", _REAPER_SOURCE, str(os.getpid()), str(os.getpgid(0)), token, str(scratch),
             files.__file__],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
        launcher.wait()  # the launcher forks the reaper and exits at once
        os.environ[WORKER_TOKEN_ENV] = token  # inherited by every trial process from now on
        threading.Thread(target=_keep_group_ledger, args=(scratch / "active-groups",), name="rrma-group-ledger",
                         daemon=True).start()
        _STATE = _WorkerState(scratch=scratch, token=token)
        atexit.register(_close_oracles, _STATE)
        return _STATE


def _close_oracles(state: _WorkerState) -> None:
    """On a worker's orderly exit: release the oracles' warm resources (REPL pools)."""
    for oracle in list(state.oracles.values()):
        try:
            oracle.close()
        except Exception as exc:  # a plug-in's close may raise anything; the other oracles must still close
            log.warning("closing oracle %s on worker exit failed: %s: %s", oracle.kind, type(exc).__name__, exc)


def _node_facts() -> dict[str, Any]:
    ctx = ray.get_runtime_context()
    return {"node_ip": ray.util.get_node_ip_address(), "node_id": ctx.get_node_id(), "pid": os.getpid(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}


def _trial_task(payload: dict[str, Any], workspace_box: list[Any], workspace_digest: str
                ) -> Iterator[tuple[str, Any]]:
    """Ray generator task: yields ("started", facts) when the oracle must first be set up on this
    worker, ("running", facts) when evaluation begins, ("progress", sample)*, then ("outcome",
    outcome as JSON). Never raises for anything the trial or oracle does."""
    facts = _node_facts()
    started = time.monotonic()
    state = _worker_state()
    job = decode_job(payload)
    target = payload["oracle_target"]
    if not state.has_oracle(target, job, workspace_digest):
        yield "started", facts  # set-up may take long: tell the driver the task is no longer queued
    try:
        oracle = state.oracle_for(target, job, workspace_box, workspace_digest)
    except Exception as exc:  # a node that lacks what the oracle needs: this trial crashes, the run goes on
        tail = "".join(traceback.format_exception(exc)[-4:])
        reason = f"oracle setup failed on ray node {facts['node_ip']}: {type(exc).__name__}: {exc}\n{tail}"
        yield "outcome", crash_outcome(reason, started).model_dump(mode="json")
        return
    yield "running", facts
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in job.trial_id)[:60]
    trial_root = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=state.scratch / "trials"))
    samples: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
    cancel = threading.Event()
    result: dict[str, Outcome] = {}

    def work() -> None:
        try:
            result["outcome"] = evaluate_job(oracle, job, trial_root / "work", lambda s: samples.put(dict(s)), cancel,
                                             protect=(state.scratch,))
        finally:
            samples.put(None)

    thread = threading.Thread(target=work, name=f"trial-{safe}", daemon=True)
    thread.start()
    try:
        while True:
            try:
                sample = samples.get(timeout=0.2)  # a timeout keeps the task interruptible (ray.cancel)
            except queue.Empty:
                continue
            if sample is None:
                break
            yield "progress", sample
        outcome = result.get("outcome") or crash_outcome("the evaluation thread ended without an outcome", started)
        yield "outcome", outcome.model_dump(mode="json")
    finally:
        cancel.set()  # a cancelled task stops its trial program (spawn watches this)
        thread.join(timeout=job.budget.seconds + 10)
        disk.release(trial_root / "work")  # a trial that outlived the join: its capped workspace goes (lazily)
        files.remove_tree(trial_root)  # the workspace's leftovers are named in the outcome; the rest is the oracle's


_remote_trial = ray.remote(max_retries=0)(_trial_task)


# ----------------------------------------------------------------------------- driver side


@dataclass
class _Submitted:
    """Driver-side record of one Ray trial task."""

    job: TrialJob
    generator: Any  # ray.ObjectRefGenerator
    future: concurrent.futures.Future[Outcome]
    on_progress: ProgressCallback
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None  # the worker picked the task up
    facts: dict[str, Any] = field(default_factory=dict)  # node_ip, node_id, pid of the worker
    cancel_reason: str | None = None  # set when the driver itself cancels the task


def code_runtime_env(ship_code: bool, plugin_packages: Sequence[Path] = ()) -> dict[str, Any]:
    """Runtime env that lets workers import rrma/ and oracle/ (the driver's exact code).

    Always puts the repository root on ``PYTHONPATH`` (enough when workers share this file
    system, e.g. a local instance); with ``ship_code`` the two packages, and the package
    directories of plug-in oracles (``plugin_packages``, :func:`plugin_package`), are uploaded as
    ``py_modules`` so remote nodes run the driver's code whether or not it is installed there.
    """
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env: dict[str, Any] = {"env_vars": {"PYTHONPATH": pythonpath}}
    if ship_code:
        env["py_modules"] = [str(REPO_ROOT / name) for name in CODE_PACKAGES] + [str(p) for p in plugin_packages]
    return env


def plugin_package(target: str) -> Path | None:
    """The directory of the top-level package that holds ``target`` (``package.module:Class``) when
    it is not one of rrma's own (:data:`CODE_PACKAGES`) and is a package directory; else None."""
    top = target.partition(":")[0].split(".")[0]
    if top in CODE_PACKAGES:
        return None
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None  # a single-file module: workers find it on PYTHONPATH or where it is installed
    return Path(next(iter(spec.submodule_search_locations)))


class RayExecutor:
    """Evaluates each trial as a Ray task with the trial budget's CPUs, GPUs and memory."""

    name = "ray"

    def __init__(
        self,
        *,
        workspace_files: dict[str, str] | None = None,
        trials_dir: Path | None = None,
        address: str | None = None,
        num_cpus: int | None = None,
        ship_code: bool | None = None,
        request_memory: bool = True,
        plugin_packages: Sequence[Path] = (),
    ) -> None:
        self.trials_dir = trials_dir
        self.address = address
        self.request_memory = request_memory
        self.owns_ray = False
        flag = os.environ.get(SHIP_CODE_ENV)
        if ship_code is None and flag in ("0", "1"):
            ship_code = flag == "1"
        # per-task runtime env; None when the job-level one (set at ray.init) already carries the code
        self.runtime_env: dict[str, Any] | None
        if not ray.is_initialized():
            self.runtime_env = code_runtime_env(address is not None if ship_code is None else ship_code,
                                                plugin_packages)
            self._connect(address, num_cpus, self.runtime_env)
            self.runtime_env = None  # workers of this job are prestarted with it
        else:  # someone else started Ray: ship the code per task
            if ship_code is None:
                ship_code = address is not None or len(self.alive_nodes()) > 1
            self.runtime_env = code_runtime_env(ship_code, plugin_packages)
        self._targets: dict[str, str] = {}  # oracle kind -> module:Class, resolved once on the driver
        packed, self.workspace_digest = pack_files(workspace_files or {})
        self.workspace_ref: Any = ray.put(packed)
        self._lock = threading.Lock()
        self._outstanding: dict[int, _Submitted] = {}
        self._threads: list[threading.Thread] = []
        self._closed = False

    # ------------------------------------------------------------------ cluster

    def _connect(self, address: str | None, num_cpus: int | None, runtime_env: dict[str, Any]) -> None:
        if address:
            check_reachable(address)
        try:
            if address:
                ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
            else:  # "local" always starts a fresh instance, even where RAY_ADDRESS is set
                ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                         log_to_driver=False, runtime_env=runtime_env)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            causes: list[str] = []
            cause = exc.__cause__ or exc.__context__
            while cause is not None and len(causes) < 3:
                causes.append(f"{type(cause).__name__}: {first_lines(str(cause), 1)[:300]}")
                cause = cause.__cause__ or cause.__context__
            hint = ""
            if any("Authentication" in c or "auth" in c.lower() for c in causes):
                hint = (" (the cluster uses token authentication: run with RAY_AUTH_MODE=token and the cluster's "
                        "token in ~/.ray/auth_token or $RAY_AUTH_TOKEN)")
            detail = "; caused by " + " <- ".join(causes) if causes else ""
            raise RayExecutorError(f"cannot connect to {where}: {exc}{detail}{hint}") from exc
        self.owns_ray = True

    @staticmethod
    def alive_nodes() -> list[dict[str, Any]]:
        return [n for n in ray.nodes() if n.get("Alive")]

    def resources_for(self, budget: Budget) -> dict[str, Any]:
        """Ray resource request of one trial."""
        request: dict[str, Any] = {"num_cpus": budget.num_cpus, "num_gpus": budget.num_gpus}
        if self.request_memory:
            request["memory"] = int(budget.memory_mb * MIB)
        return request

    def check_fits(self, budget: Budget, max_concurrent: int = 1) -> None:
        """Raise RayExecutorError if no live node can ever run one trial; warn if trials will queue."""
        need = {"CPU": budget.num_cpus, "GPU": budget.num_gpus,
                "memory": budget.memory_mb * MIB if self.request_memory else 0.0}
        nodes = self.alive_nodes()
        fits = [n for n in nodes if all(n.get("Resources", {}).get(k, 0.0) >= v for k, v in need.items() if v > 0)]
        if not fits:
            have = "; ".join(
                f"{n.get('NodeManagerAddress', '?')}: CPU {n['Resources'].get('CPU', 0):g}, "
                f"GPU {n['Resources'].get('GPU', 0):g}, memory {n['Resources'].get('memory', 0) / MIB:.0f} MiB"
                for n in nodes) or "no live nodes"
            raise RayExecutorError(
                f"no node of the Ray cluster can run one trial: it needs {budget.num_cpus:g} CPU, "
                f"{budget.num_gpus:g} GPU and {budget.memory_mb} MiB (budget.num_cpus, budget.num_gpus, "
                f"budget.trial_memory_mb); the cluster has {have}. Add a node with `ray start "
                f"--address=HEAD:6379 --num-gpus=N`, or lower the budget.")
        total = ray.cluster_resources()
        slots = min(int(total.get(k, 0.0) // v) for k, v in need.items() if v > 0)
        if slots < max_concurrent:
            log.warning("the Ray cluster runs at most %d trial(s) at once but budget.max_concurrent is %d: "
                        "trials will queue, and queue time counts against a trial's wall-clock grace",
                        slots, max_concurrent)

    # ------------------------------------------------------------------ protocol

    def submit(self, job: TrialJob, on_progress: ProgressCallback) -> concurrent.futures.Future[Outcome]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the ray executor is shut down")
        options = {**self.resources_for(job.budget), "max_retries": 0, "name": f"rrma-trial-{job.trial_id}"}
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        target = self._targets.get(job.oracle_kind)
        if target is None:  # resolved here, so the worker needs no install metadata (entry points)
            target = self._targets[job.oracle_kind] = find_oracle(job.oracle_kind).target
        generator = _remote_trial.options(**options).remote(encode_job(job, target), [self.workspace_ref],
                                                            self.workspace_digest)
        future: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
        # Set once the oracle begins evaluating on the worker (after queueing and oracle set-up).
        future.rrma_started = threading.Event()  # type: ignore[attr-defined]
        item = _Submitted(job=job, generator=generator, future=future, on_progress=on_progress)
        thread = threading.Thread(target=self._consume, args=(item,), name=f"ray-{job.trial_id}", daemon=True)
        with self._lock:
            self._outstanding[id(item)] = item
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        future.add_done_callback(lambda f: self._abandon(item) if f.cancelled() else None)
        thread.start()
        return future

    def shutdown(self, cancel: bool = False) -> None:
        with self._lock:
            self._closed = True
            outstanding = list(self._outstanding.values())
            threads = list(self._threads)
        if cancel:
            for item in outstanding:
                self._cancel(item, "cancelled: the run is stopping")
        for thread in threads:
            thread.join()
        self.workspace_ref = None  # the object store may drop the shipped workspace
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()

    def abort(self, trial_id: str, reason: str) -> bool:
        """Stop one trial (the loop's early abort): its Ray task is cancelled, its outcome is ``aborted``."""
        with self._lock:
            item = next((i for i in self._outstanding.values() if i.job.trial_id == trial_id), None)
        if item is None:
            return False
        self._cancel(item, reason)
        return True

    def outstanding(self) -> int:
        """Trials submitted and not yet resolved."""
        with self._lock:
            return len(self._outstanding)

    # ------------------------------------------------------------------ internals

    def _cancel(self, item: _Submitted, reason: str) -> None:
        """Cancel one Ray task: a queued one is dropped, a running one is killed (force)."""
        if item.cancel_reason is None:
            item.cancel_reason = reason
        # RayError: Ray is no longer connected (shut down) or refused the request; the task is then
        # gone or ends on its own, and its outcome still comes through _consume
        with contextlib.suppress(ray.exceptions.RayError):
            ray.cancel(item.generator, force=item.started is not None)

    def _abandon(self, item: _Submitted) -> None:
        """The harness gave up on this trial's future (it overran budget + grace): stop the task."""
        self._cancel(item, "abandoned: the oracle overran its budget and the harness moved on")

    def _consume(self, item: _Submitted) -> None:
        outcome: Outcome | None = None
        error: str | None = None
        try:
            for ref in item.generator:
                kind, data = ray.get(ref)
                if kind in ("started", "running") and item.started is None:
                    item.started = time.monotonic()
                    item.facts = dict(data)
                    if item.cancel_reason is not None:  # cancelled while queued, picked up anyway
                        self._cancel(item, item.cancel_reason)
                if kind == "running":
                    item.future.rrma_started.set()  # type: ignore[attr-defined]
                elif kind == "progress":
                    try:
                        item.on_progress(data)
                    except Exception as exc:
                        log.warning("progress callback of %s failed: %s", item.job.trial_id, exc)
                elif kind == "outcome":
                    outcome = Outcome.model_validate(data)
        except ray.exceptions.RayError as exc:
            error = f"{type(exc).__name__}: {first_lines(str(exc))}"
            outcome = self._error_outcome(item, exc)
        except Exception as exc:  # the harness must get an outcome whatever happens here
            error = f"{type(exc).__name__}: {exc}"
            outcome = crash_outcome(f"ray executor error: {error}", item.submitted)
        if outcome is None:
            outcome = self._error_outcome(item, None)
        self._record(item, outcome, error)
        with self._lock:
            self._outstanding.pop(id(item), None)
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            item.future.set_result(outcome)

    def _error_outcome(self, item: _Submitted, exc: BaseException | None) -> Outcome:
        """Map a Ray failure to an outcome: aborted if we cancelled it, else crash with the reason."""
        since = item.started or item.submitted
        seconds = time.monotonic() - since
        if item.cancel_reason is not None:
            return Outcome(status=Status.aborted, feedback=item.cancel_reason, seconds=seconds)
        where = ""
        if item.facts:
            where = f" (node {item.facts.get('node_ip')}, worker pid {item.facts.get('pid')})"
        if exc is None:
            why = "the task ended without an outcome"
            reason = f"{DIED_PREFIX}{where}: {why}"
        elif isinstance(exc, ray.exceptions.TaskCancelledError):
            reason = f"cancelled by Ray{where}: {first_lines(str(exc))}"
            return Outcome(status=Status.aborted, feedback=reason, log=reason, seconds=seconds)
        elif isinstance(exc, ray.exceptions.RuntimeEnvSetupError):
            reason = f"ray could not set up the worker's runtime env{where}: {first_lines(str(exc), 12)}"
        elif isinstance(exc, ray.exceptions.TaskUnschedulableError):
            reason = f"ray cannot schedule the trial: {first_lines(str(exc))}"
        elif isinstance(exc, ray.exceptions.RayTaskError):
            # an exception inside the task outside evaluate_job: e.g. the worker cannot import rrma
            reason = f"ray task failed{where}: {first_lines(str(exc), 12)}"
        else:  # WorkerCrashedError, NodeDiedError, OutOfMemoryError, ObjectLostError, OwnerDiedError...
            reason = f"{DIED_PREFIX}{where}: {type(exc).__name__}: {first_lines(str(exc))}"
        return Outcome(status=Status.crash, feedback=reason, log=reason, seconds=seconds)

    def _record(self, item: _Submitted, outcome: Outcome, error: str | None) -> None:
        """Write trials/<id>/executor.json on the driver: where and how long the trial ran."""
        if self.trials_dir is None:
            return
        now = time.monotonic()
        facts = {
            "executor": self.name,
            "trial_id": item.job.trial_id,
            **item.facts,
            "queued_seconds": round((item.started or now) - item.submitted, 4),
            "seconds": round(now - item.submitted, 4),
            "status": outcome.status.value,
            "cancel_reason": item.cancel_reason,
            "ray_error": error,
        }
        try:
            folder = self.trials_dir / item.job.trial_id
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "executor.json").write_text(json.dumps(facts, indent=2, default=str), encoding="utf-8")
        except OSError as exc:
            log.warning("cannot write executor.json of %s: %s", item.job.trial_id, exc)


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on a cluster address nothing listens on (ray.init would retry for minutes)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise RayExecutorError(f"Ray address {address!r}: expected HOST:PORT (e.g. head-node:6379), 'auto' or ray://HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RayExecutorError(
            f"cannot reach the Ray cluster at {address}: {exc}. Start the head with `ray start --head --port=6379` "
            "and pass its HOST:6379 with --ray-address (or $RAY_ADDRESS)") from exc


def first_lines(text: str, count: int = 4) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[:count])[:2000]


def make_ray_executor(task: Any, store: Any, address: str | None = None) -> RayExecutor:
    """The executor the CLI builds for ``--executor ray`` (``task``: TaskConfig, ``store``: RunStore).

    ``address`` (or ``$RAY_ADDRESS``) names a running cluster; without one a local instance is
    started with every CPU of this machine. Raises RayExecutorError when no node can run a trial.
    """
    address = address or os.environ.get("RAY_ADDRESS") or None
    workspace = task.workspace_dir()
    files = read_tree(workspace) if workspace.is_dir() else {}
    package = plugin_package(find_oracle(task.oracle.kind).target)
    executor = RayExecutor(workspace_files=files, trials_dir=store.trials_dir, address=address,
                           plugin_packages=[package] if package is not None else [])
    budget = Budget(seconds=task.budget.trial_seconds, memory_mb=task.budget.trial_memory_mb,
                    max_processes=task.budget.trial_max_processes,
                    max_output_bytes=task.budget.max_output_bytes, num_cpus=task.budget.num_cpus,
                    num_gpus=task.budget.num_gpus)
    try:
        executor.check_fits(budget, task.budget.max_concurrent)
    except RayExecutorError:
        executor.shutdown()
        raise
    return executor


__all__ = ["RayExecutor", "RayExecutorError", "code_runtime_env", "decode_job", "encode_job", "make_ray_executor",
           "plugin_package"]
