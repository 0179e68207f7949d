"""The Ray executor on a real local Ray instance (``ray.init(num_cpus=2)``, no mocks).

What must hold: the demo bench replayed through Ray gives the same trial statuses and scores as
through the local executor; a hanging trial is killed by the worker-side sandbox and labelled
``timeout``; a Ray worker SIGKILLed mid-trial becomes a ``crash`` outcome with the reason, its
trial program is reaped, and the run goes on; cancelling drops queued tasks and stops running
ones. One module-scoped Ray instance keeps the module around a minute on two cores.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (the optional 'ray' extra: pip install 'rrma[ray]')")

from rrma.contain import sandbox  # noqa: E402
from rrma.contracts import Agent, Context, EvalContext, Oracle  # noqa: E402
from rrma.exec.local import TrialJob, wait_outcome  # noqa: E402
from rrma.exec.ray import (  # noqa: E402
    DIED_PREFIX,
    WORKER_TOKEN_ENV,
    RayExecutor,
    RayExecutorError,
    decode_job,
    encode_job,
    make_ray_executor,
)
from rrma.log.state import RunState  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.plugins import known_oracles  # noqa: E402
from rrma.run.loop import start_run  # noqa: E402
from rrma.task import TaskConfig, load_task, task_from_dict  # noqa: E402
from rrma.trial import Budget, FileEdit, Outcome, Proposal, Status  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"


pytestmark = pytest.mark.ray  # one local Ray instance at a time (tests/conftest.py's xdist groups)


@pytest.fixture(scope="module")
def ray_instance() -> Any:
    if ray.is_initialized():
        ray.shutdown()
    # address="local": a fresh instance even if a cluster runs on this machine or RAY_ADDRESS is set
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def workspaces_of(worker: int) -> list[str]:
    """Mount points under the scratch directory of Ray worker ``worker`` (capped trial workspaces)."""
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if f"/rrma-ray-{worker}-" in line.split()[4]]


def outcomes(run_dir: Path) -> dict[str, tuple[str, float | None]]:
    state = RunState.fold(RunStore(run_dir).scan().events)
    return {tid: (str(state.trials[tid].status), state.trials[tid].score) for tid in state.order}


# ----------------------------------------------------------------------------- wire format


def test_job_round_trips_through_the_wire_format() -> None:
    job = TrialJob(trial_id="t0007", files={"a.py": "X = 1\n", "d/b.txt": "ü\n"},
                   proposal=Proposal(hypothesis="h", edits=[FileEdit(path="a.py", content="X = 2\n")]),
                   budget=Budget(seconds=3, memory_mb=64, num_gpus=0.5), seed=11, best_score=1.5,
                   oracle_kind="command", oracle_params={"command": "true"}, metric="loss", direction="minimize",
                   fs_guard="require", network=True)
    payload = encode_job(job)
    assert isinstance(payload["files_z"], bytes)  # the snapshot travels compressed
    assert decode_job(payload) == job


# ----------------------------------------------------------------------------- equivalence


def replay_task(task: TaskConfig, source: Path) -> TaskConfig:
    data = {k: v for k, v in task.snapshot().items() if k != "base_dir"}
    data["agents"] = [{"name": "rs", "backend": "replay", "params": {"source": str(source)}}]
    return task_from_dict(data, source="replay", base_dir=task.base_dir)


def test_demo_bench_gives_the_same_statuses_and_scores_as_local(ray_instance: Any, tmp_path: Path) -> None:
    task = load_task(DEMO, {"budget.max_trials": 8, "noise.baseline_repeats": 2})
    recorded = start_run(task, tmp_path, run_id="recorded")  # random search, local executor
    assert recorded.ok, recorded.reason
    replay = replay_task(task, recorded.run_dir)
    local = start_run(replay, tmp_path, run_id="local")
    on_ray = start_run(replay, tmp_path, run_id="ray", executor=lambda oracle, store, t: make_ray_executor(t, store))
    assert local.ok and on_ray.ok, (local.reason, on_ray.reason)

    expected, got = outcomes(local.run_dir), outcomes(on_ray.run_dir)
    assert len(expected) == 2 + 8  # baseline repeats + replayed trials: the comparison is not vacuous
    assert sum(1 for status, score in expected.values() if status == "ok" and score is not None) >= 5
    assert got == expected  # exact: the demo objective is seeded by RRMA_SEED, derived from trial order
    assert outcomes(recorded.run_dir) == expected

    events = RunStore(on_ray.run_dir).scan().events
    assert {e.data.executor for e in events if e.kind == "trial.started"} == {"ray"}
    facts = (on_ray.run_dir / "trials" / "t0001" / "executor.json").read_text()
    assert '"executor": "ray"' in facts and '"node_ip"' in facts


# ----------------------------------------------------------------------------- limits


def pid_job(trial_id: str, piddir: Path, seconds: float, memory_mb: int = 256) -> TrialJob:
    """A trial whose program records its pid and its parent's (the Ray worker) and then hangs."""
    program = ("import os, pathlib, time\n"
               "d = pathlib.Path(os.environ['PIDDIR'])\n"
               "(d / (str(os.getpid()) + '.tmp')).write_text(f'{os.getpid()} {os.getppid()}')\n"
               "(d / (str(os.getpid()) + '.tmp')).rename(d / (str(os.getpid()) + '.pid'))\n"
               "time.sleep(600)\n")
    # fs_guard off: these tests follow the program's pid from outside, and under the guard it is
    # pid 1 of its own PID namespace (test_guarded_trial_on_a_worker covers the guard on Ray)
    return TrialJob(trial_id=trial_id, files={"hang.py": program}, proposal=Proposal(hypothesis="hang"),
                    budget=Budget(seconds=seconds, memory_mb=memory_mb), oracle_kind="command",
                    oracle_params={"command": ["{python}", "hang.py"], "env": {"PIDDIR": str(piddir)}},
                    metric="loss", fs_guard="off")


def recorded_pids(piddir: Path) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in p.read_text().split()) for p in sorted(piddir.glob("*.pid"))]  # type: ignore[misc]


def test_hanging_trial_is_killed_and_labelled_timeout(ray_instance: Any, tmp_path: Path) -> None:
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    job = pid_job("hang", tmp_path, seconds=2)
    started = time.monotonic()
    outcome = wait_outcome(executor.submit(job, lambda sample: None), job.budget)
    elapsed = time.monotonic() - started
    executor.shutdown()
    assert outcome.status == Status.timeout
    assert "wall clock" in outcome.feedback
    assert elapsed < 20  # killed at its 2 s budget (plus worker start), not at the driver's grace
    [(pid, worker)] = recorded_pids(tmp_path)
    assert not alive(pid)  # its process group was killed on the worker
    assert alive(worker)  # the worker itself survives a trial's timeout


class ScriptedAgent(Agent):
    """Proposes a fixed list of whole-file edits of trial.py, then stops."""

    backend = "scripted"

    def __init__(self, task: TaskConfig, bodies: list[str]) -> None:
        super().__init__(task.agents[0], task, 0)
        self.bodies = list(bodies)

    def propose(self, ctx: Context) -> Proposal | None:
        if not self.bodies:
            return None
        body = self.bodies.pop(0)
        return Proposal(hypothesis=body.splitlines()[0], edits=[FileEdit(path="trial.py", content=body)])


TRIAL_PY = """# mode {mode}
import os, pathlib, time
if "{mode}" == "hang":
    d = pathlib.Path(os.environ["PIDDIR"])
    (d / "hang.tmp").write_text(f"{{os.getpid()}} {{os.getppid()}}")
    (d / "hang.tmp").rename(d / "hang.pid")
    time.sleep(600)
print("loss: {loss}")
"""


def test_worker_killed_mid_trial_becomes_crash_and_the_run_goes_on(ray_instance: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.ENV_MODE, "off")  # the run ships it with each job: pids stay comparable
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "trial.py").write_text(TRIAL_PY.format(mode="base", loss=5.0))
    piddir = tmp_path / "pids"
    piddir.mkdir()
    task = task_from_dict({
        "name": "worker-death",
        "oracle": {"kind": "command", "params": {"command": ["{python}", "trial.py"], "env": {"PIDDIR": str(piddir)}}},
        "workspace": {"source": "ws", "editable": ["trial.py"]},
        "metric": {"name": "loss", "direction": "minimize"},
        "budget": {"trial_seconds": 60, "trial_memory_mb": 256, "max_trials": 3, "max_concurrent": 1},
        "noise": {"baseline_repeats": 1, "min_delta": 0.01},
        "agents": [{"name": "scripted", "backend": "replay", "params": {"source": "unused"}}],
    }, source="test", base_dir=tmp_path)
    agent = ScriptedAgent(task, [TRIAL_PY.format(mode="hang", loss=1.0), TRIAL_PY.format(mode="a", loss=4.0),
                                 TRIAL_PY.format(mode="b", loss=3.0)])
    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(r=start_run(
        task, tmp_path / "runs", run_id="run", agents=[agent],
        executor=lambda oracle, store, t: make_ray_executor(t, store))))
    runner.start()
    wait_for(lambda: (piddir / "hang.pid").exists(), 60, "the hanging trial to start")
    trial_pid, worker_pid = (int(x) for x in (piddir / "hang.pid").read_text().split())
    cmdline = Path(f"/proc/{worker_pid}/cmdline").read_bytes().decode(errors="replace")
    assert "ray::" in cmdline or "default_worker" in cmdline, f"parent {worker_pid} is not a Ray worker: {cmdline!r}"
    os.kill(worker_pid, signal.SIGKILL)
    runner.join(timeout=90)
    assert not runner.is_alive()
    run = result["r"]
    assert run.ok, run.reason
    got = outcomes(run.run_dir)
    assert got["t0001"][0] == "crash"
    assert got["t0002"] == ("ok", 4.0) and got["t0003"] == ("ok", 3.0)  # the run went on
    state = RunState.fold(RunStore(run.run_dir).scan().events)
    feedback = state.trials["t0001"].feedback
    assert feedback.startswith(DIED_PREFIX) and f"worker pid {worker_pid}" in feedback
    assert "WorkerCrashedError" in feedback or "died" in feedback.lower()
    wait_for(lambda: not alive(trial_pid), 10, f"the reaper to kill the orphaned trial program {trial_pid}")


GUARD_REASON = sandbox.unavailable_reason()


@pytest.mark.skipif(GUARD_REASON is not None, reason=f"file-system guard unavailable here: {GUARD_REASON}")
def test_guarded_trial_on_a_worker(ray_instance: Any, tmp_path: Path) -> None:
    """A trial on a Ray worker runs in the sandbox: its own PID namespace, the worker's scratch
    (prepared oracles, other trials) absent (an empty read-only directory)."""
    program = ("import errno, os, pathlib\n"
               "print('pid', os.getpid())\n"
               "try:\n"
               "    open(pathlib.Path.cwd().parent.parent / 'forged.txt', 'w')\n"
               "    print('scratch writable')\n"
               "except OSError as exc:\n"
               "    print('scratch', errno.errorcode[exc.errno])\n"
               "print('loss: 1.0')\n")
    job = TrialJob(trial_id="guarded", files={"probe.py": program}, proposal=Proposal(hypothesis="probe"),
                   budget=Budget(seconds=30, memory_mb=256), oracle_kind="command",
                   oracle_params={"command": ["{python}", "probe.py"]}, metric="loss")
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    outcome = wait_outcome(executor.submit(job, lambda sample: None), job.budget)
    executor.shutdown()
    assert outcome.status == Status.ok and outcome.score == 1.0, outcome.feedback
    # its own PID namespace: bubblewrap's init is pid 1 there, the program pid 2
    assert "pid 2\n" in outcome.log and "scratch EROFS" in outcome.log


class CleanEnvOracle(Oracle):
    """Runs a sleeper under spawn with a minimal environment (as autoresearch and gsm8k do),
    so the worker's environment token does not reach it: only the group ledger can reap it."""

    kind = "clean-env-test"

    def evaluate(self, ctx: EvalContext) -> Outcome:
        from rrma.contain.spawn import spawn

        code = ("import os, pathlib, time\n"
                "d = pathlib.Path(os.environ['PIDDIR'])\n"
                "work = os.getcwd()\n"
                "for _ in range(3000):\n"  # a chain too deep for a recursive cleanup (issue 31)
                "    os.mkdir('d')\n"
                "    os.chdir('d')\n"
                "(d / 'clean.tmp').write_text(f'{os.getpid()} {os.getppid()} {work}')\n"
                "(d / 'clean.tmp').rename(d / 'clean.pid')\n"
                "time.sleep(600)\n")
        env = {"PATH": os.environ.get("PATH", ""), "PIDDIR": str(self.params["piddir"])}
        result = spawn([sys.executable, "-c", code], cwd=ctx.trial_dir, budget=ctx.budget, env=env)
        return Outcome(status=result.status, feedback=result.reason)


def test_worker_death_reaps_a_trial_started_with_a_filtered_environment(ray_instance: Any, tmp_path: Path) -> None:
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    job = TrialJob(trial_id="clean", files={}, proposal=Proposal(), budget=Budget(seconds=120, memory_mb=256),
                   oracle_kind="tests.exec.test_executor_ray:CleanEnvOracle", oracle_params={"piddir": str(tmp_path)},
                   metric="loss")
    future = executor.submit(job, lambda sample: None)
    wait_for(lambda: (tmp_path / "clean.pid").exists(), 60, "the trial program to start")
    pids, work = (tmp_path / "clean.pid").read_text().rsplit(" ", 1)
    trial_pid, worker_pid = (int(x) for x in pids.split())
    scratch = Path(work).parents[2]  # the worker's scratch: scratch/trials/<trial>/work
    assert scratch.name.startswith(f"rrma-ray-{worker_pid}-"), scratch
    assert WORKER_TOKEN_ENV.encode() not in Path(f"/proc/{trial_pid}/environ").read_bytes()
    time.sleep(0.3)  # > the ledger interval: the worker has listed the trial's group
    os.kill(worker_pid, signal.SIGKILL)
    outcome = future.result(timeout=60)
    executor.shutdown()
    assert outcome.status == Status.crash and outcome.feedback.startswith(DIED_PREFIX)
    wait_for(lambda: not alive(trial_pid), 10, f"the reaper to kill trial program {trial_pid} (from the ledger)")
    # the trial's capped workspace (rrma/contain/disk.py), mounted when the worker died: the reaper detaches it
    wait_for(lambda: not workspaces_of(worker_pid), 10, f"the reaper to unmount {workspaces_of(worker_pid)}")
    # and then removes the worker's scratch, the trial's chain 3000 deep included (rrma.contain.files.remove_tree)
    wait_for(lambda: not scratch.exists(), 120, f"the reaper to remove {scratch}")


# ----------------------------------------------------------------------------- cancellation


def test_shutdown_cancel_drops_queued_and_stops_running_trials(ray_instance: Any, tmp_path: Path) -> None:
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    jobs = [pid_job(f"c{i}", tmp_path, seconds=120) for i in range(4)]
    futures = [executor.submit(job, lambda sample: None) for job in jobs]  # 2 CPUs: two run, two queue
    wait_for(lambda: len(recorded_pids(tmp_path)) >= 2, 60, "two trials to start")
    time.sleep(0.5)
    assert len(recorded_pids(tmp_path)) == 2  # the others are queued in Ray, not running
    started = time.monotonic()
    executor.shutdown(cancel=True)
    assert time.monotonic() - started < 30
    results = [f.result(timeout=0) for f in futures]
    assert [o.status for o in results] == [Status.aborted] * 4
    assert all("the run is stopping" in o.feedback for o in results)
    for pid, _worker in recorded_pids(tmp_path):
        wait_for(lambda pid=pid: not alive(pid), 10, f"running trial program {pid} to be killed")
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(jobs[0], lambda sample: None)


def test_abandoned_future_cancels_its_ray_task(ray_instance: Any, tmp_path: Path) -> None:
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    future = executor.submit(pid_job("abandon", tmp_path, seconds=120), lambda sample: None)
    wait_for(lambda: len(recorded_pids(tmp_path)) == 1, 60, "the trial to start")
    assert future.cancel()  # what wait_outcome does when an oracle overruns budget + grace
    wait_for(lambda: executor.outstanding() == 0, 30, "the Ray task to be cancelled")
    [(pid, worker)] = recorded_pids(tmp_path)
    wait_for(lambda: not alive(pid), 10, f"trial program {pid} to be killed")
    wait_for(lambda: not workspaces_of(worker), 10, f"its worker's reaper to unmount {workspaces_of(worker)}")
    executor.shutdown()


# ----------------------------------------------------------------------------- a cluster address

HEAD = """import ray, sys
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # stays up until the test closes stdin
"""


@pytest.mark.slow
def test_cli_runs_the_demo_against_a_cluster_address(tmp_path: Path) -> None:
    """`--executor ray --ray-address HOST:PORT` from another process: the code ships as py_modules."""
    head = subprocess.Popen([sys.executable, "-c", HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert head.stdout is not None
        address = head.stdout.readline().strip()
        assert ":" in address, "the Ray head process did not start"
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(PYTHONPATH=str(REPO), RAY_AUTH_MODE="token")  # a client presents the head's token
        proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "bench", "demo", "--runs",
                               str(tmp_path / "runs"), "--executor", "ray", "--ray-address", address, "--trials", "3",
                               "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        assert "py_modules" in proc.stderr or "Pushing file package" in proc.stderr or "_ray_pkg_" in proc.stderr
        [run_dir] = list((tmp_path / "runs").iterdir())
        got = outcomes(run_dir)
        assert len(got) == 6 and all(status == "ok" and score is not None for status, score in got.values())
        assert (run_dir / "trials" / "t0003" / "executor.json").exists()
    finally:
        if head.stdin is not None:
            head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.terminate()
            head.wait(timeout=30)


# ----------------------------------------------------------------------------- set-up errors


def test_a_budget_no_node_can_hold_is_a_clear_error(ray_instance: Any) -> None:
    executor = RayExecutor()
    try:
        with pytest.raises(RayExecutorError, match=r"needs 1 CPU, 2 GPU .*budget.num_gpus"):
            executor.check_fits(Budget(num_gpus=2))
        executor.check_fits(Budget(num_cpus=1, memory_mb=256), max_concurrent=1)  # fits: no error
    finally:
        executor.shutdown()


def test_progress_samples_stream_back_in_order(ray_instance: Any, tmp_path: Path) -> None:
    job = TrialJob(trial_id="prog", files={}, proposal=Proposal(), budget=Budget(seconds=30, memory_mb=256),
                   oracle_kind="tests.exec.test_executor_ray:ProgressOracle", metric="loss")
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    samples: list[dict[str, Any]] = []
    outcome = wait_outcome(executor.submit(job, samples.append), job.budget)
    executor.shutdown()
    assert outcome.status == Status.ok and outcome.score == 0.25
    assert [s["step"] for s in samples] == [0, 1, 2, 3, 4]
    assert samples[0]["worker_token"] and samples[0]["worker_pid"] != os.getpid()  # ran in a Ray worker


class ProgressOracle(Oracle):
    """Reports five progress samples from inside the Ray worker, then a fixed score."""

    kind = "progress-test"

    def evaluate(self, ctx: EvalContext) -> Outcome:
        for step in range(5):
            ctx.progress({"step": step, "loss": 1.0 / (step + 1), "worker_pid": os.getpid(),
                          "worker_token": os.environ.get(WORKER_TOKEN_ENV, "")})
        return Outcome(status=Status.ok, score=0.25, feedback="progress test")


# ----------------------------------------------------------------------------- plug-ins

PLUGIN_CODE = REPO / "tests" / "plugins" / "rrma_example_plugin" / "rrma_example_plugin"


def test_a_plugin_oracle_runs_on_a_worker_without_its_install_metadata(ray_instance: Any, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver finds the plug-in by its entry point (a .dist-info on its sys.path); the workers get
    its code on PYTHONPATH but no metadata, so they can only import the module:Class the driver sent."""
    code, site = tmp_path / "code", tmp_path / "site"
    shutil.copytree(PLUGIN_CODE, code / "rrma_example_plugin")
    info = site / "rrma_example_plugin-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rrma-example-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[rrma.oracles]\nexample-count = rrma_example_plugin.oracle:IdeaCountOracle\n")
    monkeypatch.syspath_prepend(str(site))  # the driver's metadata
    monkeypatch.setenv("PYTHONPATH", str(code))  # what reaches the workers (code_runtime_env)
    executor = RayExecutor(trials_dir=tmp_path / "trials")
    job = TrialJob(trial_id="plug", files={"notes.txt": "idea a\nidea b\nnot an idea\n"},
                   proposal=Proposal(hypothesis="two ideas"), budget=Budget(seconds=30, memory_mb=256),
                   oracle_kind="example-count", metric="ideas", direction="maximize")
    try:
        outcome = wait_outcome(executor.submit(job, lambda sample: None), job.budget)
        on_worker = ray.get(ray.remote(known_oracles).options(runtime_env=executor.runtime_env).remote(), timeout=60)
    finally:
        executor.shutdown()
    assert outcome.status == Status.ok and outcome.score == 2.0, outcome.feedback
    assert outcome.metrics == {"ideas": 2, "scored_by": "rrma_example_plugin"}
    # control: a worker of the same runtime env cannot look the name up; the driver can
    assert "command" in on_worker and "example-count" not in on_worker
    assert "example-count" in known_oracles()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
