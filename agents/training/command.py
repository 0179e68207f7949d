"""``rrma-tui train``: sft on runs' rows, grpo/sdpo through the loop, resume after a crash (docs/training.md).

Every session is a run directory under ``--runs``. An online session (grpo, sdpo) is a research run whose
agents are the trainer's rollouts, so its log holds the trials, their outcomes, the audit's findings and
the ``train.*`` events together. An sft session is a run with no trials: ``run.started`` (the first
source run's task), the ``train.*`` events, ``run.finished``. Either opens in the TUI, verifies with
``rrma-tui verify`` and resumes with ``rrma-tui train resume RUN`` from its last checkpoint artifact.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.training.common import Session, Settings, TrainingError, last_checkpoint, need_trl
from agents.training.grpo import train_grpo
from agents.training.rollouts import LoopBridge, RolloutError
from agents.training.sdpo import train_sdpo
from agents.training.sft import train_sft
from rrma.log.driver_lock import DriverLock
from rrma.log.events import TRAIN_ACTOR
from rrma.log.reader import read_state
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.view_files import write_views
from rrma.models import ModelStoreError, model_path
from rrma.run.loop import new_run_id, versions
from rrma.task import TaskConfig, task_from_dict
from rrma.train.artifacts import store_dir

Print = Callable[[str], None]
SELECT = ("valid", "improving", "approved", "all")
ONLINE = {"grpo": train_grpo, "sdpo": train_sdpo}  # the online methods, one module each


@dataclass
class Request:
    """What ``rrma-tui train METHOD`` was asked (the CLI's options, typed)."""

    method: str  # sft | grpo | sdpo
    runs_dir: Path
    model: str  # a model dir, an adapter dir, or "tiny" (built here from the rows' or the task's texts)
    settings: Settings
    task: TaskConfig | None = None  # grpo/sdpo
    data: tuple[Path, ...] = ()  # sft: the runs whose rows it trains on
    select: str = "valid"  # sft: which rows
    run_id: str | None = None


def select_rows(rows: list[dict[str, Any]], select: str) -> list[dict[str, Any]]:
    """sft's rejection sampling: valid (the oracle scored it), improving (reward > 0), approved, or all."""
    if select == "valid":
        return [r for r in rows if r.get("status") == "ok"]
    if select == "improving":
        return [r for r in rows if r.get("status") == "ok" and (r.get("reward") or 0.0) > 0]
    if select == "approved":
        return [r for r in rows if r.get("approved") is True]
    if select == "all":
        return list(rows)
    raise TrainingError(f"--select {select!r}: one of {', '.join(SELECT)}")


def texts_of(rows: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content") or "") for r in rows for m in r.get("messages") or []]


def tiny_from(texts: list[str], run_dir: Path, emit: Callable[[str, dict[str, Any]], None], seed: int) -> Path:
    """Build the tiny policy from ``texts``, store it as the run's model artifact, return its directory."""
    from agents.training.tiny import build_tiny

    need_trl()
    scratch = run_dir / "train" / "tiny"
    build_tiny(texts, scratch, seed=seed)
    digest, rel = store_dir(run_dir, scratch)
    emit("train.checkpoint", {"step": 0, "kind": "model", "artifact": digest, "path": rel})
    return (run_dir / rel).absolute()


# ----------------------------------------------------------------------------- a run with no trials (sft)


class TrainingRun:
    """A run directory for an sft session: the store, its driver lock, one lock for the trainer's appends."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.driver = DriverLock(store.dir).acquire()

    @classmethod
    def create(cls, task_snapshot: dict[str, Any], runs_dir: Path, run_id: str | None, seed: int) -> TrainingRun:
        run_id = run_id or new_run_id(f"{task_snapshot.get('name', 'task')}-sft")
        store = RunStore(Path(runs_dir) / run_id, create=True)
        run = cls(store)
        found = versions()
        sha = store.write_run_json({"run_id": run_id, "task": task_snapshot, "seed": seed, "versions": found,
                                    "agents": [], "oracle": {}, "created": datetime.now(UTC).isoformat()})
        store.append("run.started", "harness", {"run_id": run_id, "task_name": task_snapshot.get("name", ""),
                                                "task": task_snapshot, "seed": seed, "versions": found,
                                                "run_json_sha256": sha, "head_record": True, "agents": [],
                                                "experiment": None, "held_out": []})
        return run

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        with self.lock:
            self.store.append(kind, TRAIN_ACTOR, data)

    def finish(self, reason: str, summary: dict[str, Any]) -> RunState:
        self.store.append("run.finished", "harness", {"reason": reason, "summary": summary})
        state = RunState.fold(self.store.scan().events)
        write_views(self.store.dir, state)
        self.store.fsync()
        self.driver.release()
        return state


# ----------------------------------------------------------------------------- the methods


def run_sft(req: Request, say: Print, *, resume_run: Path | None = None) -> Path:
    """Train on the rows of ``req.data``; returns the run directory."""
    from rrma.train.dataset import dataset_rows

    rows = select_rows(dataset_rows(list(req.data)), req.select)
    if not rows:
        raise TrainingError(f"sft: no rows selected ({req.select}) in {', '.join(map(str, req.data))}")
    first = read_state(req.data[0])
    if resume_run is None:
        run = TrainingRun.create(first.task, req.runs_dir, req.run_id, req.settings.seed)
        resumed = None
        checkpoint = None
    else:
        run = TrainingRun(RunStore(resume_run))
        run.store.append("run.resumed", "harness", {"reason": "resume", "torn_offsets": [], "interrupted_trials": [],
                                                    "agents": []})
        checkpoint = last_checkpoint(resume_run, read_state(resume_run).train_checkpoints)
        resumed = _step_of(checkpoint)
    say(f"sft: {len(rows)} rows ({req.select}) from {len(req.data)} run(s) -> {run.store.dir}")
    model = Path(req.model) if req.model != "tiny" else None
    if model is None:
        model = tiny_from(texts_of(rows), run.store.dir, run.emit, req.settings.seed)
        if req.settings.lora:  # a LoRA adapter on a random model cannot make any token likely (no lm_head)
            req.settings.lora = False
            say("sft: the tiny policy is built here from scratch: every parameter is trained (no LoRA)")
    heads = {str(p): read_state(p).last_seq for p in req.data}
    run.emit("train.started", {"method": "sft", "base_model": str(model), "config": _config(req, model),
                               "dataset": {"runs": [str(p) for p in req.data], "rows": len(rows), "select": req.select,
                                           "last_seq": heads},
                               "resumed_from": resumed})
    session = Session(run.store.dir, _printing(run.emit, say, "sft"), "sft")
    try:
        final = train_sft(rows, model, req.settings, session, run.store.dir / "train" / "work", resume=checkpoint)
    except BaseException as exc:
        run.emit("train.finished", {"reason": "error", "steps": _steps(run.store.dir), "summary": {"error": str(exc)}})
        run.finish("error", {"error": f"{type(exc).__name__}: {exc}"})
        raise
    kind = "adapter" if (final / "adapter_config.json").exists() else "model"
    digest, rel = session.checkpoint(_steps(run.store.dir), final, kind)
    run.emit("train.finished", {"reason": "done", "steps": _steps(run.store.dir), "artifact": digest, "path": rel})
    run.finish("done", {"trained": rel})
    say(f"sft: done; {kind} {run.store.dir / rel}")
    return run.store.dir


def run_online(req: Request, say: Print, *, resume_run: Path | None = None) -> Path:
    """GRPO or SDPO with rollouts scored through a research run; returns the run directory."""
    assert req.task is not None
    task = req.task
    # the trainer ends the run, never the budget: twice the session's rollouts leaves room for a resume, which
    # re-does the steps after the last checkpoint (the rollouts cut short by the crash count too)
    need = 2 * req.settings.steps * req.settings.group * req.settings.prompts
    if resume_run is None:
        budget = task.budget.model_copy(update={"max_trials": max(task.budget.max_trials, need),
                                                "max_wall_seconds": max(task.budget.max_wall_seconds or 0, 86400)})
        task = task.model_copy(update={"budget": budget})
        bridge = LoopBridge(task, runs_dir=req.runs_dir, run_id=req.run_id or new_run_id(f"{task.name}-{req.method}"),
                            seed=req.settings.seed)
    else:
        bridge = LoopBridge(task, run_dir=resume_run)
    try:
        loop = bridge.start()
        run_dir = loop.store.dir
        say(f"{req.method}: baseline {loop.state.baseline_mean:.6g} (sigma {loop.state.sigma or 0:.3g}); "
            f"{req.settings.steps} steps x {req.settings.prompts} prompt(s) x {req.settings.group} rollouts -> {run_dir}")
        checkpoint = None
        model = Path(req.model) if req.model != "tiny" else None
        if resume_run is not None:
            state = read_state(run_dir)
            checkpoint = last_checkpoint(run_dir, state.train_checkpoints)
        if model is None:
            from rrma.train.prompt import messages

            texts = [m["content"] for m in messages(task, bridge.prompt().files, loop.state.baseline_mean,
                                                    list(task.workspace.editable))]
            model = tiny_from(texts, run_dir, bridge.emit, req.settings.seed)
            if req.settings.lora:  # LoRA (never on lm_head, TRL's rule) cannot train a random model
                req.settings.lora = False
                say(f"{req.method}: the tiny policy is built here from scratch: every parameter is trained (no LoRA); "
                    "warm-start it with `rrma-tui train sft` first for a policy that writes edits")
        bridge.emit("train.started", {"method": req.method, "base_model": str(model), "config": _config(req, model),
                                      "resumed_from": _step_of(checkpoint)})
        session = Session(run_dir, _printing(bridge.emit, say, req.method), req.method)
        try:
            train = ONLINE.get(req.method)
            if train is None:
                raise TrainingError(f"unknown online method {req.method!r} (grpo or sdpo)")
            final = train(bridge, model, req.settings, session, run_dir / "train" / "work", resume=checkpoint)
        except (RolloutError, TrainingError) as exc:
            bridge.emit("train.finished", {"reason": "error", "steps": _steps(run_dir), "summary": {"error": str(exc)}})
            raise
        kind = "adapter" if (final / "adapter_config.json").exists() else "model"
        digest, rel = session.checkpoint(_steps(run_dir), final, kind)
        bridge.emit("train.finished", {"reason": "done", "steps": _steps(run_dir), "artifact": digest, "path": rel})
        say(f"{req.method}: done; {kind} {run_dir / rel}")
    finally:
        result = bridge.close()
    if result is not None and not result.ok:
        raise TrainingError(f"the run ended with {result.reason}: {result.error or ''}")
    return run_dir


def resume(run_dir: Path, runs_dir: Path, say: Print) -> Path:
    """Continue the last training session of ``run_dir`` from its last checkpoint."""
    state = read_state(run_dir)
    if not state.train_sessions:
        raise TrainingError(f"{run_dir}: no training session in this run (nothing to resume)")
    session = state.train_sessions[-1]
    if session["finished"] is not None and session["finished"]["reason"] == "done":
        raise TrainingError(f"{run_dir}: its last training session finished ({session['finished']['steps']} steps); "
                            "nothing to resume")
    config = dict(session["config"])
    settings = Settings(**{k: v for k, v in config.get("settings", {}).items() if k in Settings.__dataclass_fields__})
    base_dir = state.task.get("base_dir")
    task = task_from_dict({k: v for k, v in state.task.items() if k != "base_dir"}, source=f"{run_dir}/run.json",
                          base_dir=Path(base_dir) if base_dir else None)
    req = Request(method=session["method"], runs_dir=runs_dir, model=session["base_model"], settings=settings,
                  task=task, data=tuple(Path(p) for p in (session.get("dataset") or {}).get("runs", [])),
                  select=(session.get("dataset") or {}).get("select", "valid"))
    say(f"resuming {req.method} in {run_dir}")
    if req.method == "sft":
        return run_sft(req, say, resume_run=run_dir)
    return run_online(req, say, resume_run=run_dir)


# ----------------------------------------------------------------------------- small parts


def _config(req: Request, model: Path) -> dict[str, Any]:
    return {"settings": req.settings.as_dict(), "model": str(model), "pid": os.getpid()}


def _step_of(checkpoint: Path | None) -> int | None:
    if checkpoint is None:
        return None
    import json

    try:
        return int(json.loads((checkpoint / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError) as exc:
        raise TrainingError(f"{checkpoint}: not a trainer checkpoint ({exc})") from exc


def _steps(run_dir: Path) -> int:
    steps = read_state(run_dir).train_steps
    return max((s["step"] for s in steps), default=0)


def _printing(emit: Callable[[str, dict[str, Any]], None], say: Print, method: str) -> Callable[[str, dict[str, Any]], None]:
    """``emit`` that also prints one progress line per step."""

    def both(kind: str, data: dict[str, Any]) -> None:
        emit(kind, data)
        if kind == "train.step" and (method != "sft" or data["step"] == 1 or data["step"] % 10 == 0):
            say(progress_line(method, data))

    return both


def progress_line(method: str, data: dict[str, Any]) -> str:
    def num(key: str, fmt: str = ".3g") -> str:
        value = data.get(key)
        return "-" if value is None else format(value, fmt)

    line = f"{method} step {data['step']}: loss {num('loss')}"
    if data.get("reward_mean") is not None:
        line += (f"  reward {num('reward_mean')} ± {num('reward_std')}  kl {num('kl')}  entropy {num('entropy')}"
                 f"  zero-var {num('zero_variance_frac', '.0%')}  novel {num('novelty_rate', '.0%')}")
    elif data.get("entropy") is not None:
        line += f"  entropy {num('entropy')}"
    return line + f"  ({num('seconds', '.1f')} s)"


# ----------------------------------------------------------------------------- rrma-tui train


def cli_main(args: Any) -> int:
    """``rrma-tui train METHOD ...`` (cli/train.py parses it): 0 done, 2 bad input, 1 the training failed."""
    from rrma.text import SafeConsole

    console = SafeConsole(emoji=False, soft_wrap=True)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    runs = Path(getattr(args, "runs", None) or "runs")
    try:
        if args.train_method == "resume":
            resume(args.run, runs, say)
            return 0
        method = args.train_method
        try:  # a store model by name (smollm2) trains from its verified directory (rrma/models.py)
            args.model = model_path(args.model)
        except ModelStoreError as exc:
            raise TrainingError(str(exc)) from None
        settings = Settings(method=method, steps=args.steps, lora=not args.no_lora, lora_r=args.lora_r,
                            lora_alpha=2 * args.lora_r, save_every=args.save_every, device=args.device, seed=args.seed)
        if method == "sft":
            settings.lr = args.lr if args.lr is not None else 1e-3
            settings.epochs, settings.batch = args.epochs, args.batch
            missing = [str(p) for p in args.data if not (Path(p) / "events.jsonl").exists()]
            if missing:
                raise TrainingError(f"not a run directory (no events.jsonl): {', '.join(missing)}")
            run_sft(Request(method="sft", runs_dir=runs, model=args.model, settings=settings, data=tuple(args.data),
                            select=args.select, run_id=args.run_id), say)
            return 0
        settings.lr = args.lr if args.lr is not None else 5e-4
        settings.group, settings.prompts, settings.beta = args.group, args.prompts, args.beta
        settings.temperature, settings.max_new_tokens = args.temperature, args.max_new_tokens
        settings.control = args.control
        if method == "sdpo":
            settings.teacher, settings.success = args.teacher, args.success
        if settings.group < 2:
            raise TrainingError(f"--group {settings.group}: a group needs at least 2 rollouts (advantages are "
                                "relative to the group)")
        run_online(Request(method=method, runs_dir=runs, model=args.model, settings=settings,
                           task=load_training_task(args.task), run_id=args.run_id), say)
        return 0
    except TrainingError as exc:
        say(f"rrma-tui train: {exc}")
        return 2
    except RolloutError as exc:
        say(f"rrma-tui train: {exc}")
        return 1


def load_training_task(name: str) -> TaskConfig:
    """A task YAML path, or a bench's task (benches/NAME/task.yaml)."""
    from rrma.task import TaskError, load_task

    path = Path(name)
    if not path.exists():
        bench = Path(__file__).resolve().parents[2] / "benches" / name.replace("-", "_") / "task.yaml"
        if not bench.exists():
            raise TrainingError(f"{name}: neither a task YAML nor a bench with a task.yaml")
        path = bench
    try:
        task = load_task(path)
    except TaskError as exc:
        raise TrainingError(str(exc)) from exc
    if task.loop.policy == "per-theorem":
        raise TrainingError(f"{name}: the per-theorem policy has no edit to train on (a proof bench); use an edit task")
    if not task.workspace.editable:
        raise TrainingError(f"{name}: the task has no editable files")
    return task
