"""A small run with the scores a test names (awkward ones: -0.0500123, 123456.789...), written through RunStore.

make_run.py writes realistic runs with seeded scores near 2.4; the tests of how numbers are shown need
chosen ones. Each agent trial's workspace is one file, ``model.py``, of ``lines`` lines, a few of them changed
and long (wider than an 80-column pane), so two trials differ by a diff longer than a small screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from make_run import fake_clock, task_snapshot

from rrma.log.store import RunStore


def model_file(version: int, lines: int = 60) -> str:
    out = []
    for i in range(lines):
        if i % 3 == 0 and version:
            out.append(f"WEIGHT_{i} = {version * 0.125 + i:.3f}  # tuned by trial {version}: " + "x" * (70 + i % 7))
        else:
            out.append(f"WEIGHT_{i} = {i:.3f}")
    return "\n".join(out) + "\n"


def write_scored_run(runs: Path, run_id: str, scores: Sequence[float | None], *,
                     baseline: Sequence[float] = (1.0, 1.001, 0.999), direction: str = "maximize",
                     hypotheses: Sequence[str] | None = None, finished: bool = True, reason: str = "max_trials",
                     task: dict[str, Any] | None = None) -> Path:
    """Baseline repeats with ``baseline`` scores, then one agent trial per score (None: a crash), the best
    promoted along the way; run.finished (with ``reason``) unless ``finished`` is False. The task's
    max_trials is the number of scores."""
    run_dir = runs / run_id
    store = RunStore(run_dir, create=True)
    snapshot = task or task_snapshot("scored", hitl=False, max_trials=len(scores), agents=["ann"])
    snapshot["metric"] = {**snapshot.get("metric", {}), "direction": direction}
    sign = 1 if direction == "maximize" else -1
    with fake_clock():
        store.append("run.started", "harness", {"run_id": run_id, "task_name": "scored", "task": snapshot})
        base_manifest = store.put_json_blob({"model.py": store.put_blob(model_file(0))})
        ids = []
        for rep, score in enumerate(baseline):
            tid = f"base-{rep}"
            ids.append(tid)
            store.append_many([
                ("trial.proposed", "harness", {"trial_id": tid, "parent": None, "agent": "baseline",
                                               "hypothesis": "baseline", "baseline": True, "repeat": rep,
                                               "proposal_blob": store.put_json_blob({"edits": []}),
                                               "manifest_blob": base_manifest}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "seconds": 1.0}),
            ])
        mean = sum(baseline) / len(baseline)
        sigma = (sum((s - mean) ** 2 for s in baseline) / max(1, len(baseline) - 1)) ** 0.5
        store.append("baseline.measured", "harness", {"trial_ids": ids, "scores": list(baseline), "mean": mean,
                                                      "sigma": sigma, "floor": 2 * sigma})
        store.append("trial.promoted", "harness", {"trial_id": "base-0", "score": baseline[0], "previous_best": None,
                                                   "previous_score": None})
        best_id, best = "base-0", baseline[0]
        for i, score in enumerate(scores, start=1):
            tid = f"t{i:04d}"
            hypothesis = hypotheses[i - 1] if hypotheses else f"try number {i}"
            manifest = store.put_json_blob({"model.py": store.put_blob(model_file(i))})
            finished_data: dict[str, Any] = {"trial_id": tid, "status": "ok" if score is not None else "crash",
                                             "score": score, "seconds": 2.0}
            if score is not None:
                finished_data["delta"] = sign * (score - best)
                finished_data["delta_sigma"] = sign * (score - best) / sigma if sigma else None
            store.append_many([
                ("trial.proposed", "agent:ann", {"trial_id": tid, "parent": best_id, "agent": "ann",
                                                 "hypothesis": hypothesis,
                                                 "proposal_blob": store.put_json_blob({"hypothesis": hypothesis}),
                                                 "manifest_blob": manifest}),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", finished_data),
            ])
            if score is not None and sign * (score - best) > 2 * sigma:
                store.append("trial.promoted", "harness", {"trial_id": tid, "score": score, "previous_best": best_id,
                                                           "previous_score": best})
                best_id, best = tid, score
        if finished:
            store.append("run.finished", "harness", {"reason": reason, "summary": {"best": best_id}})
    store.close()
    return run_dir
