"""Write realistic run directories through RunStore, for the TUI's tests and benchmark.

A generated run looks like one the research loop writes: ``run.started`` with a task snapshot,
baseline repeats and ``baseline.measured``, then per agent trial the agent's trace
(``agent.turn``: assistant text, tool calls and their results), ``trial.proposed`` with edit
blobs and a workspace manifest, ``trial.started``, ``trial.progress``, ``trial.finished`` with a
score, feedback and a log blob, ``trial.promoted`` for improvements, blackboard posts, and
``run.finished``. Everything is seeded; timestamps come from a fake clock (a fixed start,
a few seconds per event), so the same arguments give byte-identical logs, which snapshot tests
need. Like the loop's driver, the writer keeps the run's checkpoint current as it appends and
at ``run.finished`` (rrma.log.checkpointer.Checkpointer: a log of a few MiB or more gets one).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import rrma.log.events
from rrma.log.store import RunStore

try:
    from rrma.log.checkpointer import Checkpointer
except ImportError:  # an earlier tree's reader (benches/perf/bench_tui.py --against REV): the module's old name
    from rrma.log.checkpoint import Checkpointer  # type: ignore[no-redef]

START = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)

TRAIN_PY = '''"""Tiny training script: the file agents edit."""

LEARNING_RATE = {lr}
BATCH_SIZE = {bs}
WARMUP_STEPS = {warmup}
WEIGHT_DECAY = {wd}


def train(steps: int = 1000) -> float:
    loss = 3.0
    for step in range(steps):
        lr = LEARNING_RATE * min(1.0, (step + 1) / max(1, WARMUP_STEPS))
        loss -= lr * 0.01 * loss / (1 + WEIGHT_DECAY * step)
    return loss


if __name__ == "__main__":
    print(f"val_loss: {{train():.4f}}")
'''

EVAL_PY = '''"""The fixed evaluation: agents may read it, never edit it."""
from train import train

print("val_loss:", round(train(), 4))
'''

HYPOTHESES = [
    "raise the learning rate: the loss curve is still falling steeply at the end",
    "lower the learning rate to reduce the late-training noise",
    "longer warmup should stabilise the first hundred steps",
    "double the batch size for a smoother gradient estimate",
    "weight decay looks too strong for a model this small",
    "shorter warmup: the schedule wastes the early steps",
    "combine the best learning rate with a smaller batch",
]

FAILURES = {
    "crash": ("Traceback (most recent call last):\n  File \"train.py\", line 12\nZeroDivisionError: division by zero", "the script crashed: ZeroDivisionError in train()"),
    "timeout": ("step 900/1000 ...", "killed after the 60 s wall-clock budget"),
    "oom": ("allocating activations ...", "resident memory exceeded 2048 MiB; killed"),
    "invalid": ("", "edit refused: eval.py is read-only"),
}


@contextlib.contextmanager
def fake_clock(start: datetime = START, step_s: float = 3.0) -> Iterator[None]:
    """Make rrma.log.events.now_iso return start, start+step, ... (deterministic event timestamps)."""
    original = rrma.log.events.now_iso
    state = {"t": start}

    def fake() -> str:
        now = state["t"]
        state["t"] = now + timedelta(seconds=step_s)
        return now.isoformat(timespec="microseconds").replace("+00:00", "Z")

    rrma.log.events.now_iso = fake  # type: ignore[assignment]
    try:
        yield
    finally:
        rrma.log.events.now_iso = original  # type: ignore[assignment]


def task_snapshot(name: str, *, hitl: bool, max_trials: int, agents: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Minimise the validation loss of train.py by editing its constants.",
        "oracle": {"kind": "command", "params": {"command": ["python", "eval.py"]}},
        "workspace": {"source": "workspace", "editable": ["train.py"], "readonly": ["eval.py"]},
        "metric": {"name": "val_loss", "direction": "minimize", "target": None},
        "budget": {"trial_seconds": 60.0, "trial_memory_mb": 2048, "max_trials": max_trials},
        "noise": {"baseline_repeats": 3, "min_sigmas": 2.0, "min_delta": 0.0},
        "loop": {"policy": "keep-revert", "hitl": hitl},
        "agents": [{"name": a, "backend": "anthropic", "model": "claude-sonnet-4"} for a in agents],
        "seed": 0,
    }


def _params(rng: random.Random, base: dict[str, Any] | None = None) -> dict[str, Any]:
    if base is None:
        return {"lr": 0.01, "bs": 32, "warmup": 100, "wd": 0.01}
    p = dict(base)
    key = rng.choice(["lr", "bs", "warmup", "wd"])
    if key == "lr":
        p["lr"] = round(p["lr"] * rng.choice([0.5, 0.8, 1.25, 2.0]), 6)
    elif key == "bs":
        p["bs"] = rng.choice([16, 32, 64, 128])
    elif key == "warmup":
        p["warmup"] = rng.choice([10, 50, 100, 200, 400])
    else:
        p["wd"] = round(p["wd"] * rng.choice([0.1, 0.5, 2.0]), 6)
    return p


def make_run(
    runs_dir: Path,
    run_id: str = "demo-run",
    *,
    trials: int = 12,
    agents: tuple[str, ...] = ("alice", "bob"),
    tool_turns: int = 1,
    seed: int = 0,
    finished: bool = True,
    hitl: bool = False,
    pending_claims: int = 0,
    batch: int = 1,
    checkpoint: bool = True,
) -> Path:
    """Write a run under ``runs_dir/run_id`` and return its directory.

    ``tool_turns``: tool call/result pairs per trial in the trace (events per trial is about
    6 + 2*tool_turns). ``pending_claims``: with ``hitl``, the last this-many improvements are
    left ``awaiting_review`` instead of promoted. ``batch``: trials per ``append_many`` (speed).
    ``checkpoint``: keep the checkpoint current as the driver does (observe each append, flush at the
    end of a finished run; a log under CHECKPOINT_MIN_BYTES gets none).
    """
    rng = random.Random(seed)
    run_dir = runs_dir / run_id
    store = RunStore(run_dir, create=True)
    keeper = Checkpointer(run_dir) if checkpoint else None
    agent_list = list(agents)
    with fake_clock():
        store.append("run.started", "harness", {
            "run_id": run_id, "task_name": "tiny-train",
            "task": task_snapshot("tiny-train", hitl=hitl, max_trials=trials, agents=agent_list),
            "seed": seed, "versions": {"python": "3.11.7", "rrma": "0.1.0"},
        })
        base_params = _params(rng)
        base_files = {"train.py": TRAIN_PY.format(**base_params), "eval.py": EVAL_PY}
        base_manifest = {path: store.put_blob(text) for path, text in base_files.items()}
        manifest_blob = store.put_json_blob(base_manifest)
        baseline_ids, baseline_scores = [], []
        for rep in range(3):
            tid = f"base-{rep}"
            base_score = round(2.400 + rng.gauss(0, 0.004), 5)
            store.append_many([
                ("trial.proposed", "harness", {
                    "trial_id": tid, "parent": None, "agent": "baseline", "hypothesis": "baseline",
                    "proposal_blob": store.put_json_blob({"hypothesis": "baseline", "edits": []}),
                    "manifest_blob": manifest_blob, "baseline": True, "repeat": rep, "seed": rep,
                }),
                ("trial.started", "harness", {"trial_id": tid}),
                ("trial.finished", "oracle", {
                    "trial_id": tid, "status": "ok", "score": base_score, "feedback": f"val_loss: {base_score}",
                    "log_blob": store.put_blob(f"val_loss: {base_score}\n"), "seconds": 41.5 + rep,
                }),
            ])
            baseline_ids.append(tid)
            baseline_scores.append(base_score)
        mean = sum(baseline_scores) / 3
        sigma = (sum((s - mean) ** 2 for s in baseline_scores) / 2) ** 0.5
        floor = 2.0 * sigma
        store.append("baseline.measured", "harness", {
            "trial_ids": baseline_ids, "scores": baseline_scores, "mean": mean, "sigma": sigma, "floor": floor,
        })
        store.append("trial.promoted", "harness", {
            "trial_id": "base-0", "score": baseline_scores[0], "previous_best": None, "previous_score": None,
        })

        best_id, best_score, best_params = "base-0", baseline_scores[0], base_params
        manifests = {"base-0": base_manifest}
        params_of = {"base-0": base_params}
        improvements_left = trials  # how many more improvements may still be promoted
        pending: list[tuple[str, str, Any]] = []
        n_claims = pending_claims if hitl else 0
        score: float | None
        for i in range(trials):
            agent = agent_list[i % len(agent_list)]
            tid = f"t{i + 1:04d}"
            step = i // len(agent_list)
            hyp = rng.choice(HYPOTHESES)
            p = _params(rng, best_params)
            files = {"train.py": TRAIN_PY.format(**p), "eval.py": EVAL_PY}
            content_blob = store.put_blob(files["train.py"])
            manifest = dict(manifests[best_id], **{"train.py": content_blob})
            manifests[tid] = manifest
            params_of[tid] = p
            actor = f"agent:{agent}"
            turn = {"agent": agent, "step": step, "model": "claude-sonnet-4"}
            pending.append(("agent.turn", actor, dict(turn, role="assistant", tokens_in=1800 + 10 * i, tokens_out=240,
                                                   latency_s=2.5, cost_usd=0.009,
                                                   text=f"The best so far is {best_id} at {best_score:.4f}. Plan: {hyp}.")))
            for k in range(tool_turns):
                pending.append(("agent.turn", actor, dict(turn, role="tool_call", tool="read_file",
                                                       args={"path": "train.py" if k % 2 == 0 else "eval.py"},
                                                       text="")))
                pending.append(("agent.turn", actor, dict(turn, role="tool_result", tool="read_file",
                                                       result=(files["train.py"] if k % 2 == 0 else EVAL_PY)[:400])))
            pending.append(("agent.turn", actor, dict(turn, role="assistant", trial_id=tid,
                                                   text=f"Proposing {tid}: {hyp}.", tokens_out=120)))
            proposal = {"hypothesis": hyp, "expected_effect": "lower val_loss",
                        "edits": [{"path": "train.py", "content": files["train.py"]}], "meta": p}
            pending.append(("trial.proposed", actor, {
                "trial_id": tid, "parent": best_id, "agent": agent, "hypothesis": hyp,
                "expected_effect": "lower val_loss", "proposal_blob": store.put_json_blob(proposal),
                "edits": [{"path": "train.py", "blob": content_blob}],
                "manifest_blob": store.put_json_blob(manifest), "seed": i,
            }))
            pending.append(("trial.started", "harness", {"trial_id": tid, "worker": f"local-{i % 2}"}))
            pending.append(("trial.progress", "oracle", {"trial_id": tid, "sample": {"step": 500, "loss": 2.61}}))
            delta: float | None
            roll = rng.random()
            status = "ok" if roll < 0.72 else ("crash" if roll < 0.82 else ("timeout" if roll < 0.88 else ("oom" if roll < 0.93 else ("invalid" if roll < 0.97 else "rejected"))))
            claim = i >= trials - n_claims  # hitl: an improvement left awaiting review
            if claim:
                status = "ok"
            better = claim or (rng.random() < 0.35 and status == "ok" and improvements_left > 0)
            if status == "ok":
                if better:
                    score = round(best_score - floor * rng.uniform(1.2, 3.0), 5)
                else:
                    score = round(best_score + abs(rng.gauss(0.01, 0.02)), 5)
                delta = best_score - score
                log = f"step 500 loss 2.61\nstep 1000 loss {score}\nval_loss: {score}\n"
                feedback = f"val_loss: {score} ({'better' if delta > 0 else 'worse'} than {best_id} by {abs(delta):.4f})"
                metrics: dict[str, Any] = {"val_loss": score}
            elif status == "rejected":
                score, delta, log = None, None, "val_loss: nan\n"
                feedback = "rejected: the metric is NaN"
                metrics = {}
            else:
                score, delta = None, None
                log, feedback = FAILURES[status]
                metrics = {}
            if claim:
                metrics["awaiting_review"] = True
            pending.append(("trial.finished", "oracle", {
                "trial_id": tid, "status": status, "score": score, "metrics": metrics, "feedback": feedback,
                "log_blob": store.put_blob(log), "seconds": round(rng.uniform(20, 60), 2),
                "delta": delta, "delta_sigma": (delta / sigma if (delta is not None and sigma) else None),
            }))
            if better and not claim and score is not None and delta is not None:
                pending.append(("trial.promoted", "harness", {
                    "trial_id": tid, "score": score, "previous_best": best_id, "previous_score": best_score,
                    "delta": delta, "delta_sigma": delta / sigma if sigma else None,
                }))
                best_id, best_score, best_params = tid, score, p
                improvements_left -= 1
            if i % 4 == 3:
                pending.append(("blackboard.post", actor, {
                    "agent": agent, "trial_id": tid, "tags": ["insight"],
                    "text": f"{tid}: {'helped' if better else 'did not help'} ({hyp})",
                }))
            if len(pending) >= 1 and (i + 1) % batch == 0:
                store.append_many(pending)
                pending = []
                if keeper is not None:
                    keeper.observe()
        if pending:
            store.append_many(pending)
        if finished:
            store.append("run.finished", "harness", {"reason": "max_trials", "summary": {"best": best_id, "best_score": best_score}})
    store.close()
    if keeper is not None:
        if finished:
            keeper.flush()
        else:
            keeper.wait()  # a run left running keeps what its driver last wrote
    return run_dir


def approve(run_dir: Path, trial_id: str, reviewer: str = "carol", decision: str = "approve", note: str = "") -> None:
    """Append a review event (what the TUI writes), under the fake clock."""
    store = RunStore(run_dir)
    with fake_clock(START + timedelta(days=1)):
        store.append("review", f"human:{reviewer}", {"trial_id": trial_id, "decision": decision, "reviewer": reviewer, "note": note})
    store.close()


if __name__ == "__main__":  # python tests/tui/make_run.py RUNS_DIR [TRIALS]
    import sys

    out = make_run(Path(sys.argv[1]), trials=int(sys.argv[2]) if len(sys.argv) > 2 else 12)
    print(out)
