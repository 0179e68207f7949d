"""What the three training methods share (docs/training.md): their settings, the session's log, the policy.

:class:`Settings` is one session's settings, recorded in ``train.started`` and read back by a resume;
:func:`step_callback` turns every logged step and saved checkpoint into ``train.step`` and
``train.checkpoint`` events (a checkpoint is a content-addressed artifact of the run:
:func:`rrma.train.artifacts.store_dir`); :func:`load_policy` reads a model or a PEFT adapter directory;
:func:`lora_config` and :func:`common_args` are the PEFT and ``TrainingArguments`` settings every method
starts from. Each method has its own module, as TRL keeps one config and one trainer per algorithm:
:mod:`agents.training.sft`, :mod:`agents.training.grpo`, :mod:`agents.training.sdpo` (the online two share
:mod:`agents.training.online`, the rollouts scored through the loop).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.log.artifacts import check_dir
from rrma.train.artifacts import store_dir

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
STEP_KEYS = {"loss": "loss", "reward": "reward_mean", "reward_std": "reward_std", "kl": "kl", "entropy": "entropy",
             "grad_norm": "grad_norm", "frac_reward_zero_std": "zero_variance_frac", "learning_rate": "lr",
             "step_time": "seconds",
             # SDPO logs the same three figures under its own names (its reward_std is also over the batch)
             "self_distillation/reward_mean": "reward_mean", "self_distillation/reward_std": "reward_std",
             "self_distillation/flat_group_fraction": "zero_variance_frac"}


class TrainingError(Exception):
    """Training cannot start or go on (a missing package, a bad model path, a run that ended)."""


def need_trl() -> None:
    """TRL, PEFT, transformers and datasets are the ``train`` extra: a clear error where one is missing.
    Their progress bars are turned off: a session prints one line per step of its own."""
    missing = []
    for name in ("trl", "peft", "transformers", "datasets", "accelerate"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise TrainingError(f"training needs {', '.join(missing)}: pip install -e '.[train]'")
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    # transformers 5 renamed gradient checkpointing; TRL and PEFT still use the old name, once per step
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)


@dataclass
class Settings:
    """One session's settings (recorded in train.started's config; a resume reads them back)."""

    method: str
    steps: int = 30
    lr: float = 5e-4
    group: int = 8  # grpo/sdpo: rollouts per prompt (G)
    prompts: int = 2  # grpo/sdpo: prompts per step
    beta: float = 0.04  # KL coefficient to the reference policy
    temperature: float = 1.0
    max_new_tokens: int = 48
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    save_every: int = 5
    epochs: float = 3.0  # sft
    batch: int = 8  # sft
    seed: int = 0
    device: str = "cpu"
    teacher: str = "ema"  # sdpo: ema | base
    teacher_rate: float = 0.05  # sdpo: EMA rate
    success: float = 0.5  # sdpo: a rollout with at least this reward is a demonstration for its group
    control: str | None = None  # grpo/sdpo: "shuffled-reward" trains on each step's rewards permuted (rrma/train/control.py)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def finite(value: Any) -> tuple[float | None, bool]:
    """(value as a float or None, whether it was a non-finite number)."""
    if value is None:
        return None, False
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None, False
    return (number, False) if math.isfinite(number) else (None, True)


# ----------------------------------------------------------------------------- the log of a session


@dataclass
class Session:
    """Where a session writes: ``emit(kind, data)`` into its run's log, artifacts into its run dir."""

    run_dir: Path
    emit: Callable[[str, dict[str, Any]], None]
    method: str
    pending: list[dict[str, Any]] = field(default_factory=list)  # the online step's rollouts, for its train.step
    pending_control: dict[str, Any] | None = None  # the step's control record (the order its rewards were given in)
    group: int = 0  # rollouts per prompt (online): a step's zero-variance groups when the trainer logs none

    def checkpoint(self, step: int, src: Path, kind: str) -> tuple[str, str]:
        digest, rel = store_dir(self.run_dir, src)
        self.emit("train.checkpoint", {"step": step, "kind": kind, "artifact": digest, "path": rel})
        return digest, rel


def step_callback(session: Session) -> Any:
    """A TrainerCallback that writes each logged step and each saved checkpoint into the run's log."""
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.tokens = 0.0
            self.started = time.monotonic()

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
            if not logs or "train_runtime" in logs or "loss" not in logs:
                return
            data: dict[str, Any] = {"method": session.method, "step": int(state.global_step)}
            nonfinite: list[str] = []
            extra: dict[str, float | None] = {}
            for key, value in logs.items():
                number, bad = finite(value)
                name = STEP_KEYS.get(key)
                if bad:
                    nonfinite.append(name or key)
                if name is not None:
                    data[name] = number
                elif (key not in ("num_tokens", "epoch") and number is not None) or bad:
                    extra[key] = number
            tokens, _bad = finite(logs.get("num_tokens"))
            if tokens is not None:
                data["tokens"], self.tokens = int(tokens - self.tokens), tokens
            if data.get("seconds") is None:
                data["seconds"] = round(time.monotonic() - self.started, 3)
            self.started = time.monotonic()
            if session.pending:
                done = session.pending
                data["trials"] = [r["trial"] for r in done]
                data["rewards"] = rewards = [r["reward"] for r in done]
                data["novelty_rate"] = sum(1 for r in done if r["novel"]) / len(done)
                if data.get("reward_mean") is None:  # a trainer that does not log it: from the rollouts
                    mean = sum(rewards) / len(rewards)
                    data["reward_mean"] = mean
                    data["reward_std"] = math.sqrt(sum((r - mean) ** 2 for r in rewards) / max(1, len(rewards) - 1))
                if data.get("zero_variance_frac") is None and session.group > 1:
                    groups = [rewards[i:i + session.group] for i in range(0, len(rewards), session.group)]
                    data["zero_variance_frac"] = sum(1 for g in groups if max(g) == min(g)) / len(groups)
                if data.get("tokens") is None:
                    data["tokens"] = sum(int(r.get("tokens", 0)) for r in done)
                if session.pending_control is not None:
                    data["control"] = session.pending_control
                session.pending, session.pending_control = [], None
            data["extra"], data["nonfinite"] = extra, nonfinite
            session.emit("train.step", data)

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                session.checkpoint(int(state.global_step), folder, "checkpoint")

    return StepLog()


def quiet(trainer: Any) -> None:
    """No log dicts printed by TRL: the session prints its own line per step (agents/training/command.py)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


# ----------------------------------------------------------------------------- the policy


def load_policy(path: str | Path, device: str = "cpu", *, trainable_adapter: bool = True) -> tuple[Any, Any]:
    """(model, tokenizer) of a model directory or a PEFT adapter directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(path)
    if not folder.is_dir():
        raise TrainingError(f"{folder}: no such model directory")
    if (folder / "adapter_config.json").exists():
        from peft import PeftModel

        base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
        if not base or not Path(base).is_dir():
            raise TrainingError(f"{folder}: the adapter's base model {base!r} is not a directory here")
        tokenizer = AutoTokenizer.from_pretrained(folder if (folder / "tokenizer_config.json").exists() else base)
        model: Any = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), folder,
                                               is_trainable=trainable_adapter)
    elif (folder / "config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
    else:
        raise TrainingError(f"{folder}: neither a model directory (config.json) nor an adapter (adapter_config.json)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device), tokenizer


def lora_config(settings: Settings) -> Any:
    """LoRA on every linear layer but the output one (PEFT's "all-linear"; TRL's GRPO refuses one on lm_head,
    whose weight it reads directly): a policy trained from scratch needs its output layer trained first (sft
    without LoRA), or the adapter cannot make any token likely."""
    from peft import LoraConfig

    return LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, target_modules="all-linear",
                      lora_dropout=0.0, task_type="CAUSAL_LM")


def common_args(settings: Settings, out: Path) -> dict[str, Any]:
    return {"output_dir": str(out), "learning_rate": settings.lr, "logging_steps": 1, "report_to": [],
            "save_strategy": "steps", "save_steps": max(1, settings.save_every), "save_total_limit": 2,
            "seed": settings.seed, "use_cpu": settings.device == "cpu", "bf16": False, "fp16": False,
            "disable_tqdm": True, "remove_unused_columns": False, "dataloader_num_workers": 0}



def last_checkpoint(run_dir: Path, steps: list[dict[str, Any]]) -> Path | None:
    """The newest checkpoint artifact of the run's last session, checked against its digest (None: none)."""
    for mark in reversed(steps):
        if mark.get("kind") == "checkpoint":
            return check_dir(run_dir, mark["artifact"])
    return None

