"""Experiments, arms x seeds (rrma/run/experiment.py): spec checks, a real grid on the demo bench,
resume, the report (bootstrap CI, paired tests, cost), the ``experiments`` export table, the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rrma.run.experiment import (
    ExperimentError,
    cell_done,
    cell_state,
    export_experiment,
    load_spec,
    new_experiment,
    open_experiment,
    parse_arm,
    report,
    report_json,
    run_experiment,
    spec_from_dict,
)

REPO = Path(__file__).resolve().parents[2]
SMALL = {"budget.max_trials": 3, "noise.baseline_repeats": 1, "budget.max_concurrent": 1}


def spec(**extra: object) -> dict[str, object]:
    return {"name": "t", "bench": "demo", "seeds": 2, "set": SMALL,
            "arms": {"history": {}, "control": {"loop.history": False, "loop.lineage": False,
                                                "loop.policy": "independent"}}, **extra}


@pytest.mark.parametrize(("data", "message"), [
    (spec(arms={"a": {"loop.nonsense": 1}}), "arm a: "),
    (spec(arms={}), "at least one arm"),
    (spec(seeds=0), "between 1 and 1000"),
    (spec(bench="nope"), "bench 'nope' has no task.yaml"),
    (spec(task="x.yaml"), "exactly one of task"),
    (spec(typo=1), "unknown field"),
    (spec(arms={"-bad": {}}), "arm name"),
])
def test_a_bad_spec_is_a_clean_error_before_any_run(data: dict[str, object], message: str) -> None:
    with pytest.raises(ExperimentError, match=message.replace("(", r"\(")):
        spec_from_dict(data)


def test_parse_arm_reads_yaml_values() -> None:
    assert parse_arm("no-history: loop.history=false budget.max_trials=4") == (
        "no-history", {"loop.history": False, "budget.max_trials": 4})
    assert parse_arm("plain:") == ("plain", {})
    with pytest.raises(ExperimentError, match="not key=value"):
        parse_arm("a: loop.history")


def test_the_shipped_demo_experiment_loads() -> None:
    loaded, task_path = load_spec(REPO / "benches" / "demo" / "experiment.yaml")
    assert set(loaded.arms) == {"history", "control"} and loaded.seed_list() == [0, 1, 2, 3, 4]
    assert task_path.name == "task.yaml"


def test_a_grid_runs_reports_resumes_and_exports(tmp_path: Path) -> None:
    loaded, task_path = spec_from_dict(spec())
    exp = open_experiment(new_experiment(loaded, task_path, tmp_path, exp_id="e1"))
    with pytest.raises(ExperimentError, match="already there"):
        new_experiment(loaded, task_path, tmp_path, exp_id="e1")
    results = run_experiment(exp, concurrency=2)
    assert [(r.cell.run_id, r.reason) for r in results] == [
        ("history-s0", "max_trials"), ("history-s1", "max_trials"), ("control-s0", "max_trials"),
        ("control-s1", "max_trials")]
    run_json = json.loads((exp.run_dir(exp.cells[2]) / "run.json").read_text())
    assert run_json["experiment"] == {"id": "e1", "arm": "control", "seed": 0}
    assert run_json["task"]["loop"]["history"] is False and run_json["seed"] == 0
    # the same seed in both arms: the same baseline (the arms differ only by their overrides)
    states = {c.run_id: cell_state(exp, c) for c in exp.cells}
    assert all(cell_done(s) for s in states.values())
    assert states["history-s0"].baseline_mean == states["control-s0"].baseline_mean  # type: ignore[union-attr]

    rep = report(exp)
    assert rep.metric == "loss" and rep.direction == "minimize"
    for arm in rep.arms:
        assert arm.trials == 6 and len(arm.cells) == 2 and arm.final is not None
        mean, low, high = arm.final
        assert low <= mean <= high
        assert arm.compute_seconds > 0 and arm.tokens == 0 and arm.cost_usd == 0
        assert [n for n, _ in arm.mean_curve] == [1, 2, 3]
        assert all(b2 <= b1 for (_, b1), (_, b2) in zip(arm.mean_curve, arm.mean_curve[1:], strict=False))
    (comp,) = rep.comparisons
    assert comp.seeds == [0, 1] and comp.wins + comp.losses <= 2 and comp.p_value is not None
    assert json.loads(json.dumps(report_json(rep)))["comparisons"][0]["seeds"] == [0, 1]

    # resume: every cell ended by itself, nothing runs again
    again = run_experiment(exp)
    assert {r.reason for r in again} == {"already done"}

    db = tmp_path / "e.db"
    export_experiment(exp, db)
    export_experiment(exp, db)  # idempotent
    con = sqlite3.connect(db)
    rows = con.execute("SELECT arm, seed, run_id, finish_reason FROM experiments ORDER BY arm, seed").fetchall()
    assert rows == [("control", 0, "control-s0", "max_trials"), ("control", 1, "control-s1", "max_trials"),
                    ("history", 0, "history-s0", "max_trials"), ("history", 1, "history-s1", "max_trials")]
    assert con.execute("SELECT count(*) FROM experiment_arms").fetchone() == (2,)
    assert con.execute("SELECT count(DISTINCT experiment_id) FROM runs").fetchone() == (1,)


def test_a_stopped_experiment_is_resumed_cell_by_cell(tmp_path: Path) -> None:
    loaded, task_path = spec_from_dict(spec(seeds=1, arms={"only": {}}))
    exp = open_experiment(new_experiment(loaded, task_path, tmp_path, exp_id="e2"))
    stop = threading.Event()
    stop.set()  # stopped before it began: no cell starts
    assert run_experiment(exp, stop=stop) == []
    assert cell_state(exp, exp.cells[0]) is None
    (result,) = run_experiment(exp)
    assert result.reason == "max_trials"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, check=False)


def test_cli_bench_arms_show_and_compare(tmp_path: Path) -> None:
    proc = cli("--headless", "bench", "demo", "--arms", "history:", "control: loop.history=false loop.lineage=false",
               "--seeds", "2", "--trials", "3", "--dir", str(tmp_path / "x"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (exp_dir,) = (tmp_path / "x").iterdir()
    assert "history vs control" in proc.stdout or "control vs history" in proc.stdout
    shown = cli("--headless", "experiment", "show", str(exp_dir), "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [a["name"] for a in data["arms"]] == ["history", "control"]
    compared = cli("--headless", "experiment", "compare", str(exp_dir), "history", "control", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "control vs history" in compared.stdout or "history vs control" in compared.stdout
    bad = cli("--headless", "experiment", "compare", str(exp_dir), "history", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "compare takes two arms of history, control" in bad.stderr
