"""The research loop end to end: demo bench, policies, cache, invalid edits, hitl, kill -9 + resume."""

from __future__ import annotations

import json
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

from rrma.contracts import Agent, Context
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.log.view_files import render_results
from rrma.run.loop import resume_run, start_run
from rrma.run.promotion import review_trial
from rrma.task import AgentConfig, TaskConfig, load_task, task_from_dict
from rrma.trial import FileEdit, Proposal

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"


def demo_task(**overrides: Any) -> TaskConfig:
    return load_task(DEMO, overrides)


class ScriptedAgent(Agent):
    """Proposes a fixed list of proposals, then stops."""

    backend = "scripted"

    def __init__(self, proposals: list[Proposal], name: str = "scripted") -> None:
        super().__init__(AgentConfig(name=name, backend="scripted"), task_from_dict({"name": "x"}))
        self.queue = list(proposals)
        self.contexts: list[Context] = []

    def propose(self, ctx: Context) -> Proposal | None:
        self.contexts.append(ctx)
        return self.queue.pop(0) if self.queue else None


def set_x(value: float, hypothesis: str = "") -> Proposal:
    return Proposal(hypothesis=hypothesis or f"X={value}",
                    edits=[FileEdit(path="objective.py", replacements=[("X = 0.0 ", f"X = {value} ")])])


def test_demo_bench_beats_baseline_and_verifies(tmp_path: Path) -> None:
    result = start_run(demo_task(), tmp_path)
    state = result.state
    assert result.reason == "max_trials"
    summary = state.summary
    assert summary["trials"] == 24
    assert summary["best_score"] < summary["baseline"] - 2 * summary["sigma"]  # beats baseline beyond 2σ
    assert summary["delta_sigma"] > 2
    assert verify_run(result.run_dir).ok
    results = (result.run_dir / "results.tsv").read_text()
    assert results == render_results(state)
    assert len(results.strip().splitlines()) == 1 + 3 + 24  # header, baseline repeats, trials
    assert (result.run_dir / "blackboard.md").read_text().count("new best") >= 1
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert run_json["task"]["name"] == "demo" and run_json["versions"]["python"]


def test_duplicate_proposal_is_served_from_the_cache(tmp_path: Path) -> None:
    agent = ScriptedAgent([set_x(-3.0), set_x(-3.0, "the same edit again")])  # worse: parent stays base-0
    result = start_run(demo_task(**{"budget.max_trials": 5}), tmp_path, agents=[agent])
    t1, t2 = result.state.trials["t0001"], result.state.trials["t0002"]
    assert not t1.cached and t2.cached and t2.cached_from == "t0001"
    assert t2.score == t1.score and t2.seconds == 0.0
    assert "already tried: identical to t0001" in t2.feedback
    assert result.state.summary["cache_hits"] == 1
    assert result.reason == "agents_exhausted"
    # the agent saw the first trial's outcome in its context before proposing again
    assert [t.trial_id for t in agent.contexts[1].recent] == ["t0001"]


def test_invalid_edits_are_labelled_and_the_run_goes_on(tmp_path: Path) -> None:
    agent = ScriptedAgent([
        Proposal(hypothesis="escape", edits=[FileEdit(path="../../etc/passwd", content="x")]),
        Proposal(hypothesis="binary", edits=[FileEdit(path="objective.py", content="\x00\x01")]),
        Proposal(hypothesis="not editable", edits=[FileEdit(path="other.py", content="print(1)")]),
        set_x(1.7),
    ])
    result = start_run(demo_task(), tmp_path, agents=[agent])
    trials = result.state.trials
    assert [trials[f"t000{i}"].status for i in range(1, 5)] == ["invalid", "invalid", "invalid", "ok"]
    assert "leaves the workspace" in trials["t0001"].feedback
    assert "NUL bytes" in trials["t0002"].feedback
    assert "not an editable file" in trials["t0003"].feedback
    assert trials["t0004"].promoted
    assert not (tmp_path / "etc").exists()


def test_crashing_and_hanging_trials_are_labelled(tmp_path: Path) -> None:
    agent = ScriptedAgent([
        Proposal(hypothesis="syntax error", edits=[FileEdit(path="objective.py", replacements=[("X = 0.0 ", "X = = ")])]),
        Proposal(hypothesis="hang", edits=[FileEdit(path="objective.py", replacements=[("import math\n", "import math, time\ntime.sleep(100)\n")])]),
        Proposal(hypothesis="no metric", edits=[FileEdit(path="objective.py", replacements=[('print(f"loss: {loss:.6f}")', "print('nothing')")])]),
    ])
    # the program's own printed metric (no scorer): a program that prints none is a crash
    task = demo_task(**{"budget.trial_seconds": 2, "oracle.scorer": {}, "metric.source": "self-reported"})
    result = start_run(task, tmp_path, agents=[agent])
    trials = result.state.trials
    assert trials["t0001"].status == "crash" and "SyntaxError" in trials["t0001"].feedback
    assert trials["t0002"].status == "timeout" and "wall clock" in trials["t0002"].feedback
    assert trials["t0003"].status == "crash" and "no `loss: <number>` line" in trials["t0003"].feedback
    assert verify_run(result.run_dir).ok


def test_independent_policy_always_starts_from_the_baseline(tmp_path: Path) -> None:
    task = demo_task(**{"loop.policy": "independent", "loop.history": False, "budget.max_trials": 6})
    result = start_run(task, tmp_path)
    parents = {t.parent for t in result.state.agent_trials()}
    assert parents == {"base-0"}


def test_tree_policy_lets_the_agent_pick_the_parent(tmp_path: Path) -> None:
    first = set_x(1.0)
    second = Proposal(hypothesis="branch from baseline", parent="base-0",
                      edits=[FileEdit(path="objective.py", replacements=[("Y = 0.0 ", "Y = -0.8 ")])])
    agent = ScriptedAgent([first, second])
    result = start_run(demo_task(**{"loop.policy": "tree"}), tmp_path, agents=[agent])
    assert result.state.trials["t0001"].parent == "base-0"
    assert result.state.trials["t0002"].parent == "base-0"  # not the best (t0001)
    assert [t.trial_id for t in result.state.lineage("t0002")] == ["t0002", "base-0"]


def test_hitl_gate_waits_for_approval(tmp_path: Path) -> None:
    agent = ScriptedAgent([set_x(1.7)])
    result = start_run(demo_task(**{"loop.hitl": True}), tmp_path, agents=[agent])
    trial = result.state.trials["t0001"]
    assert trial.metrics.get("awaiting_review") and not trial.promoted
    assert result.state.best_id == "base-0"
    store = RunStore(result.run_dir)
    review_trial(store, "t0001", "approve", "alice", "checked the diff")
    state = RunState.fold(store.scan().events)
    assert state.best_id == "t0001"
    promoted = [e for e in store.scan().events if e.kind == "trial.promoted"][-1]
    assert promoted.actor == "human:alice" and promoted.data.approved_by == "alice"


def test_graceful_stop_records_interrupted(tmp_path: Path) -> None:
    stop = threading.Event()
    seen: list[str] = []

    def on_event(event: Any) -> None:
        seen.append(event.kind)
        if event.kind == "trial.finished" and event.data.trial_id == "t0002":
            stop.set()

    result = start_run(demo_task(), tmp_path, stop=stop, on_event=on_event)
    assert result.reason == "interrupted"
    assert 2 <= len(result.state.agent_trials()) < 24
    assert all(t.finished for t in result.state.trials.values())
    assert seen[-1] == "run.finished"


def test_kill_minus_9_then_resume(tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text().replace("import math\n", "import math\nimport time\ntime.sleep(0.25)\n"))
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "cli.main", "--headless", "run", str(task_dir / "task.yaml"), "--runs", str(runs),
           "--set", "budget.max_trials=8", "--set", "budget.max_concurrent=1", "--quiet"]  # killed with 5 to go
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    log = None
    while time.monotonic() < deadline:
        logs = list(runs.glob("*/events.jsonl")) if runs.exists() else []
        if logs and logs[0].read_text().count('"kind":"trial.finished"') >= 6:
            log = logs[0]
            break
        time.sleep(0.05)
    assert log is not None, "the run never got going"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    before = RunState.fold(RunStore(log.parent).scan().events)
    done_before = {t.trial_id: t.score for t in before.trials.values() if t.finished}
    assert before.finish_reason is None and len(done_before) >= 6
    resumed = subprocess.run([sys.executable, "-m", "cli.main", "resume", str(log.parent), "--quiet"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    after = RunState.fold(RunStore(log.parent).scan().events)
    assert after.finish_reason == "max_trials"
    assert len(after.agent_trials()) == 8 and all(t.finished for t in after.trials.values())
    for trial_id, score in done_before.items():  # completed trials are kept as they were
        assert after.trials[trial_id].score == score
    assert after.resumes == 1
    # a workspace the killed harness had mounted (its own capped file system, rrma/contain/disk.py) is gone
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    assert not [m for m in mounts if m.startswith(str(runs))], mounts
    report = verify_run(log.parent)
    assert report.ok, report.errors
    verify = subprocess.run([sys.executable, "-m", "cli.main", "verify", str(log.parent)], env=env,
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0 and "chain intact" in verify.stdout


KILLED_AFTER_AN_INVALID_PROPOSAL = """
import os, sys
from pathlib import Path
from rrma.run import orders
from rrma.run.loop import start_run
from rrma.task import load_task
from tests.run.test_loop import DEMO, ScriptedAgent
from rrma.trial import FileEdit, Proposal

emit = orders.Orders.emit_proposed
def emit_then_die(self, actor, data):
    emit(self, actor, data)
    if data.get("manifest_blob") is None and not data.get("baseline"):
        os._exit(9)  # the harness dies between an invalid edit's trial.proposed and its trial.finished
orders.Orders.emit_proposed = emit_then_die
bad = Proposal(hypothesis="rewrite the scorer", edits=[FileEdit(path="score.py", content="print('loss: 0')")])
start_run(load_task(DEMO, {"budget.max_trials": 2}), Path(sys.argv[1]), run_id="run", agents=[ScriptedAgent([bad])])
"""


def test_resume_after_a_kill_between_an_invalid_edit_and_its_outcome(tmp_path: Path) -> None:
    """A refused edit is recorded with no files; a harness killed before its trial.finished must not make the
    resume fail on it (it looked for the trial's files to run it again): the refusal is recorded again."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    died = subprocess.run([sys.executable, "-c", KILLED_AFTER_AN_INVALID_PROPOSAL, str(tmp_path)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert died.returncode == 9, died.stderr
    run_dir = tmp_path / "run"
    before = RunState.fold(RunStore(run_dir).scan().events)
    (pending,) = [t for t in before.agent_trials() if not t.finished]
    assert pending.agent == "scripted" and pending.manifest_blob is None
    result = resume_run(run_dir)
    assert result.ok, result.error
    after = result.state.trials[pending.trial_id]
    assert after.status == "invalid" and after.feedback.startswith("invalid edit: ") and "score.py" in after.feedback
    assert len(result.state.agent_trials()) == 2 and all(t.finished for t in result.state.trials.values())
    assert verify_run(run_dir).ok


def test_replay_agent_reproduces_a_run(tmp_path: Path) -> None:
    first = start_run(demo_task(**{"budget.max_trials": 8}), tmp_path / "a")
    replay = demo_task(**{"budget.max_trials": 8, "agents": [{"name": "rs", "backend": "replay",
                                                            "params": {"source": str(first.run_dir)}}]})
    second = start_run(replay, tmp_path / "b")
    a = [(t.trial_id, t.status, t.score, t.hypothesis) for t in first.state.agent_trials()]
    b = [(t.trial_id, t.status, t.score, t.hypothesis) for t in second.state.agent_trials()]
    assert a == b


def test_baseline_failure_fails_the_run(tmp_path: Path) -> None:
    task = demo_task(**{"oracle.params": {"command": ["{python}", "-c", "raise SystemExit(2)"]}})
    result = start_run(task, tmp_path)
    assert result.reason == "baseline_failed" and not result.ok
    assert any("baseline base-" in n for n in result.state.notes)


def _demo_copy(tmp_path: Path) -> Path:
    task_dir = tmp_path / "task"
    shutil.copytree(REPO / "benches" / "demo", task_dir, ignore=shutil.ignore_patterns("__pycache__"))
    return task_dir


def _run_finished(run_dir: Path) -> Any:
    return [e for e in RunStore(run_dir).scan().events if e.kind == "run.finished"][-1]


@pytest.mark.parametrize("bad", ["binary", "symlink-out"])
def test_a_workspace_that_turns_bad_after_loading_ends_the_run_as_error(tmp_path: Path, bad: str) -> None:
    """load_task refuses such a workspace; one that changes after loading ends the run as "error"
    with the message in run.finished (it used to end "done", with a traceback in the caller)."""
    task_dir = _demo_copy(tmp_path)
    task = load_task(task_dir / "task.yaml", {"noise.baseline_repeats": 1, "budget.max_trials": 2})
    ws = task_dir / "workspace"
    if bad == "binary":
        (ws / "data.bin").write_bytes(b"\x00\xff")
        expected = "InvalidEdit: data.bin: not valid UTF-8 text"
    else:
        (ws / "link.py").symlink_to(REPO / "README.md")
        expected = "InvalidEdit: link.py: symlink escapes the workspace"
    result = start_run(task, tmp_path / "runs")
    assert result.reason == "error" and not result.ok
    assert result.error is not None and result.error.startswith(expected)
    finished = _run_finished(result.run_dir)
    assert finished.data.reason == "error" and finished.data.summary["error"] == result.error
    assert f"run error: {result.error}" in result.state.notes
    assert result.state.agent_trials() == []
    assert verify_run(result.run_dir).ok


def test_a_harness_error_in_an_agent_thread_ends_the_run_as_error(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception while running a trial stops the run with reason "error", not a stray
    thread traceback and a run that says agents_exhausted or max_trials."""
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr("rrma.run.runner.apply_edits", broken)
    agent = ScriptedAgent([set_x(1.0), set_x(2.0)])
    result = start_run(demo_task(**{"noise.baseline_repeats": 1, "budget.max_trials": 2}), tmp_path, agents=[agent])
    assert result.reason == "error"
    assert result.error is not None and result.error.startswith("RuntimeError: disk on fire (at test_loop.py:")
    assert "\n" not in result.error
    assert _run_finished(result.run_dir).data.reason == "error"
    assert len(agent.contexts) == 1  # no further proposals after the error


def test_a_harness_error_in_a_baseline_thread_ends_the_run_as_error(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def lost(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("executor lost")

    monkeypatch.setattr("rrma.run.runner.wait_outcome", lost)
    result = start_run(demo_task(**{"noise.baseline_repeats": 2}), tmp_path, agents=[ScriptedAgent([set_x(1.0)])])
    assert result.reason == "error" and result.error is not None
    assert result.error.startswith("ConnectionError: executor lost")
    assert _run_finished(result.run_dir).data.summary["error"] == result.error


@pytest.mark.parametrize("declared", [0.0, 42.0], ids=["none", "declared"])
def test_the_wait_for_an_outcome_covers_the_set_up_its_oracle_declares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       declared: float) -> None:
    """Every trial's wait (the baseline's repeats and the agents' trials) is given the oracle's declared set-up
    allowance (Oracle.setup_allowance_s), asked at the trial, on top of the budget and the grace."""
    import rrma.run.runner as runner
    from rrma.plugins import make_task_oracle

    task = demo_task(**{"noise.baseline_repeats": 2})
    oracle = make_task_oracle(task)
    if declared:
        monkeypatch.setattr(oracle, "setup_allowance_s", lambda: declared)
    real, seen = runner.wait_outcome, []

    def recording(future: Any, budget: Any, setup_s: float = 0.0) -> Any:
        seen.append(setup_s)
        return real(future, budget, setup_s)

    monkeypatch.setattr(runner, "wait_outcome", recording)
    result = start_run(task, tmp_path, agents=[ScriptedAgent([set_x(1.0)])], oracle=oracle)
    assert result.reason != "error", result.error
    assert len(seen) == 3 and seen == [declared] * 3


FLOOD = """import sys
src = open("objective.py").read()
if "X = 1.5 " in src:  # this trial floods: one endless line, no newline
    while True:
        sys.stdout.write("y" * 5000)
exec(src)
"""


def test_an_output_flood_keeps_its_reason_through_every_cut(tmp_path: Path) -> None:
    """A real flooding program: the feedback in the log and what the agent sees both still say why it
    was killed (the log keeps 8000 characters, the agent's view 1500, an LLM's history line 400)."""
    from agents.llm.prompts import _fmt

    reason = "output flood: more than 300000 bytes written; killed"
    task = demo_task(**{"budget.max_trials": 2, "noise.baseline_repeats": 1, "budget.max_output_bytes": 300000,
                        "oracle.params": {"command": ["{python}", "-c", FLOOD]}})
    agent = ScriptedAgent([set_x(1.5, "flood"), set_x(-1.0)])
    result = start_run(task, tmp_path, agents=[agent])
    flood = result.state.trials["t0001"]
    assert flood.status == "crash"
    assert len(flood.feedback) <= 8000 and reason in flood.feedback
    assert flood.feedback.rstrip().endswith(f"(crash: {reason}) ---")  # the verdict closes it too
    [seen] = agent.contexts[1].recent
    assert seen.trial_id == "t0001" and reason in seen.feedback and len(seen.feedback) <= 1500
    assert reason in _fmt(seen)
    assert result.state.trials["t0002"].status == "ok"


def test_an_error_after_run_started_but_before_the_loop_finishes_the_run_as_error(tmp_path: Path) -> None:
    """An executor that cannot be built (a Ray cluster that went away) must not leave a run that
    looks as if it still runs: the log ends with run.finished `error` and still verifies."""
    def no_cluster(oracle: Any, store: Any, task: Any) -> Any:
        raise RuntimeError("the cluster went away\nsecond line")

    with pytest.raises(RuntimeError, match="the cluster went away"):
        start_run(load_task(DEMO, {"budget.max_trials": 1}), tmp_path, executor=no_cluster)
    (run_dir,) = list(tmp_path.iterdir())
    state = RunState.fold(RunStore(run_dir).events())
    assert state.finish_reason == "error"
    assert state.summary["error"] == "RuntimeError: the cluster went away"
    report = verify_run(run_dir)
    assert report.ok, report.errors


class PathRecordingOracle:
    """An oracle that records the paths the harness hands it (kind ``test_loop:PathRecordingOracle``)."""

    seen: list[Path] = []

    def __new__(cls, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> Any:
        from rrma.contracts import Oracle
        from rrma.trial import Outcome, Status

        class Recording(Oracle):
            kind = "path-recording"

            def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
                cls.seen.append(run_dir)
                return {}

            def evaluate(self, ctx: Any) -> Outcome:
                cls.seen.append(ctx.trial_dir)
                return Outcome(status=Status.ok, score=1.0)

        return Recording(params, metric=metric, direction=direction)


def test_oracles_get_absolute_paths_under_a_relative_runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--runs runs` (the default ./runs) is relative; an oracle hands its run dir and the trial's workspace
    to processes with a cwd of their own (autoresearch's data step, a scorer), where a relative path points
    elsewhere: the README's own commands failed in a fresh clone. The harness gives oracles absolute paths."""
    monkeypatch.chdir(tmp_path)
    PathRecordingOracle.seen.clear()
    task = demo_task(**{"oracle.kind": "test_loop:PathRecordingOracle", "oracle.params": {}, "oracle.scorer": {},
                        "metric.source": "self-reported", "budget.max_trials": 0, "noise.baseline_repeats": 1})
    result = start_run(task, Path("runs"))
    assert result.reason != "baseline_failed", result.state.notes
    assert len(PathRecordingOracle.seen) == 2 and all(p.is_absolute() for p in PathRecordingOracle.seen), \
        PathRecordingOracle.seen
