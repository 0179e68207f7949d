"""Loop-level early abort (rrma/run/abort.py, ``loop.early_abort``): the monitors, and the loop stopping
a trial of the command oracle whose streamed progress says it cannot beat the best."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rrma.run.abort import TrialMonitor, make_monitor
from rrma.run.loop import start_run
from rrma.task import EarlyAbortConfig, TaskError, load_task

PROGRAM = '''import json, time
ACC = 0.5
N = 200
hits = 0
for i in range(1, N + 1):
    hits = int(ACC * i)
    if i % 10 == 0:
        print("progress: " + json.dumps({"items": i, "hits": hits, "of": N}), flush=True)
        time.sleep(0.01)
print(f"accuracy: {hits / N}")
'''


def test_sprt_stops_a_worse_stream_and_lets_a_better_one_finish() -> None:
    config = EarlyAbortConfig(rule="sprt")
    worse = TrialMonitor(config, direction="maximize", best=0.6)
    decisions = [worse.observe({"items": i, "hits": int(0.3 * i)}) for i in range(10, 201, 10)]
    stopped = [d for d in decisions if d is not None]
    assert len(stopped) == 1 and stopped[0]["rule"] == "sprt" and "SPRT after" in stopped[0]["text"]
    better = TrialMonitor(config, direction="maximize", best=0.6)
    assert all(better.observe({"items": i, "hits": int(0.7 * i)}) is None for i in range(10, 201, 10))


def test_a_certain_loss_is_stopped_at_once() -> None:
    monitor = TrialMonitor(EarlyAbortConfig(rule="sprt"), direction="maximize", best=0.9)
    decision = monitor.observe({"items": 20, "hits": 0, "of": 100})
    assert decision is not None and decision["certain"] and "at most 0.8" in decision["text"]


def test_power_law_stops_a_flat_curve_above_the_best() -> None:
    config = EarlyAbortConfig(rule="power-law")
    monitor = TrialMonitor(config, direction="minimize", best=1.0)
    decision = None
    for i in range(1, 81):
        t = i / 100
        decision = monitor.observe({"frac": t, "score_est": 3.0 + 0.5 * t ** -0.5}) or decision
        if decision:
            break
    assert decision is not None and decision["rule"] == "power-law" and decision["abort"]


def test_no_monitor_when_off_or_without_a_best() -> None:
    assert make_monitor(EarlyAbortConfig(), direction="minimize", best=1.0) is None
    assert make_monitor(EarlyAbortConfig(rule="sprt"), direction="minimize", best=None) is None
    with pytest.raises(ValueError, match="looks must be increasing"):
        EarlyAbortConfig(rule="power-law", looks=[0.5, 0.2])


def test_bad_early_abort_config_is_a_task_error(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="early_abort"):
        load_task(task_yaml(tmp_path), {"loop.early_abort.rule": "sometimes"})


def task_yaml(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "score.py").write_text(PROGRAM)
    path = tmp_path / "task.yaml"
    path.write_text(f"""
name: stream
oracle: {{kind: command, params: {{command: ["{{python}}", "score.py"]}}}}
workspace: {{source: {ws}, editable: [score.py]}}
metric: {{name: accuracy, direction: maximize, source: self-reported}}
budget: {{trial_seconds: 20, max_trials: 8, max_concurrent: 1}}
noise: {{baseline_repeats: 1}}
agents: [{{name: rs, backend: random-search}}]
search_space: {{"score.py:ACC": {{kind: uniform, low: 0.0, high: 1.0}}}}
seed: 3
""")
    return path


def _acc(files: dict[str, Any]) -> float:
    for line in files["score.py"].splitlines():
        if line.startswith("ACC ="):
            return float(line.split("=", 1)[1])
    raise AssertionError("no ACC")


def test_the_loop_stops_trials_that_cannot_win_and_records_why(tmp_path: Path) -> None:
    task = load_task(task_yaml(tmp_path), {"loop.early_abort.rule": "sprt"})
    result = start_run(task, tmp_path / "runs", run_id="abort")
    state = result.state
    assert result.reason == "max_trials"
    stopped = [t for t in state.agent_trials() if t.early_abort is not None]
    assert stopped, [(t.trial_id, t.status, t.score) for t in state.agent_trials()]
    from rrma.log.store import RunStore

    store = RunStore(result.run_dir)
    for t in stopped:
        assert t.status == "aborted" and t.metrics.get("failure") == "early-abort"
        assert t.early_abort["rule"] == "sprt" and t.early_abort["text"]
        assert t.feedback.startswith("Stopped early: ")
        files = {k: store.blob_text(v) for k, v in store.get_json_blob(t.manifest_blob).items()}  # type: ignore[arg-type]
        assert _acc(files) < float(t.early_abort["best"])  # never a trial that would have won
    assert state.best is not None and state.best.early_abort is None
    assert sum(1 for t in state.agent_trials() if t.early_abort is None) >= 1
