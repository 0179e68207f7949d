"""The three methods (docs/training.md): ``sft`` on rows of runs, ``grpo`` and ``sdpo`` online through the loop.

Each is TRL's own trainer (``SFTTrainer``, ``GRPOTrainer``, the experimental ``SDPOTrainer``) with PEFT
LoRA where asked, plus what RRMA adds around it:

* every logged step becomes a ``train.step`` event in the training run's log (:class:`StepLog`), with the
  rollouts' trial ids and rewards for the online methods; every saved checkpoint becomes a
  content-addressed artifact of the run and a ``train.checkpoint`` event (:func:`rrma.train.artifacts.store_dir`);
* the online methods take their prompts from the run's state at each step (the parent the loop would
  build on) and their rewards from the oracle's outcomes in that run (rrma/train/reward.py), through
  :class:`~agents.training.rollouts.LoopBridge`;
* SDPO's teacher sees each rollout's oracle feedback as its privileged context (TRL's
  ``include_environment_feedback``), handed over after the rollout is scored;
* ``resume`` continues a killed session from its last checkpoint artifact (TRL's ``resume_from_checkpoint``).
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

from agents.training.rollouts import LoopBridge, PromptState, Rollout
from rrma.log.events import TRAIN_ACTOR
from rrma.train import prompt as policy_prompt
from rrma.train.artifacts import check_dir, store_dir
from rrma.train.control import CONTROLS
from rrma.train.control import record as control_record
from rrma.train.reward import diff_text, trial_reward
from rrma.trial import Proposal

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


# ----------------------------------------------------------------------------- sft


def assistant_marks(tokenizer: Any) -> bool:
    """Whether TRL can mask the assistant's tokens of a whole conversation with this tokenizer's chat template:
    it has ``{% generation %}`` markers, or TRL knows a marked version of it. SmolLM2's template has neither."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return False
    if has_generation_markers(template):
        return True
    try:
        get_training_chat_template(tokenizer)
    except ValueError:
        return False
    return True


def sft_example(messages: list[dict[str, Any]], marked: bool) -> dict[str, Any]:
    """One sft example: the whole conversation (loss on every assistant turn) where the template marks the
    assistant's tokens, else TRL's prompt-completion form (loss on the last turn, the proposal, and its end
    of turn): every message before the last is the prompt."""
    if marked:
        return {"messages": messages}
    if len(messages) < 2 or messages[-1].get("role") != "assistant":
        raise TrainingError("sft: a row that does not end with the assistant's reply, and a chat template that "
                            "cannot mark the assistant's tokens (no {% generation %} markers)")
    return {"prompt": messages[:-1], "completion": messages[-1:]}


def train_sft(rows: list[dict[str, Any]], model_path: Path, settings: Settings, session: Session,
              work: Path, resume: Path | None = None) -> Path:
    """Supervised fine-tuning on conversational rows; the trained model (or adapter) directory."""
    need_trl()
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not rows:
        raise TrainingError("sft: no rows to train on (see --select, and whether the runs have proposals)")
    model, tokenizer = load_policy(model_path, settings.device)
    marked = assistant_marks(tokenizer)
    data = Dataset.from_list([sft_example(r["messages"], marked) for r in rows])
    args = SFTConfig(**common_args(settings, work), num_train_epochs=settings.epochs, max_steps=settings.steps or -1,
                     per_device_train_batch_size=settings.batch, assistant_only_loss=marked, max_length=1024)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                         peft_config=lora_config(settings) if settings.lora else None,
                         callbacks=[step_callback(session)])
    quiet(trainer)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = work / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    return final


# ----------------------------------------------------------------------------- grpo / sdpo


class Scorer:
    """The reward function TRL calls: the replies become proposals, the loop scores them, rewards come back."""

    __name__ = "oracle"  # TRL names the reward column after its function

    def __init__(self, bridge: LoopBridge, session: Session, model_name: str, *, control: str | None = None,
                 seed: int = 0) -> None:
        if control not in (None, *CONTROLS):
            raise TrainingError(f"unknown control {control!r} (known: {', '.join(CONTROLS)})")
        self.bridge = bridge
        self.session = session
        self.model_name = model_name
        self.control, self.seed = control, seed
        self.trainer: Any = None  # the trainer whose steps these rewards are for (its global_step names the step)
        self.state: PromptState | None = None
        self.diffs: list[str] = []
        self.feedback: list[str | None] = []  # the last batch's oracle feedback (SDPO's privileged context)

    def __call__(self, prompts: list[Any], completions: list[Any], completion_ids: list[list[int]] | None = None,
                 **_: Any) -> list[float]:
        task = self.bridge.task
        state = self.state or self.bridge.prompt()
        editable = list(task.workspace.editable)
        jobs = []
        for index, completion in enumerate(completions):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            try:
                edits, hypothesis = policy_prompt.parse_reply(task, text, state.files, editable)
            except policy_prompt.ReplyError as exc:
                edits, hypothesis = [], f"unparseable reply: {exc}"
            ids = list(completion_ids[index]) if completion_ids is not None else []
            turn = {"role": "assistant", "text": text, "model": self.model_name, "tokens_out": len(ids),
                    "args": {"format": "rrma-policy/1", "messages": state.messages, "completion_ids": ids,
                             "logprobs": None}}
            jobs.append(Rollout(Proposal(hypothesis=hypothesis, edits=edits, parent=state.parent,
                                         meta={"rollout": index}), turn))
        self.bridge.score(jobs)
        loop = self.bridge._alive()
        values: list[float] = []
        self.feedback = []
        done: list[dict[str, Any]] = []
        seen_step: set[str] = set()
        for job in jobs:
            assert job.summary is not None
            with loop.lock:
                rec = loop.state.trials[job.summary.trial_id]
            files = loop.files_of(rec.trial_id) if rec.status not in ("invalid",) else state.files
            change = diff_text(state.files, files, editable)
            with loop.lock:
                given = trial_reward(rec, loop.state, task, parent_score=state.score, diff=change,
                                     earlier_diffs=self.diffs)
            novel = bool(change) and not rec.cached and change not in seen_step
            seen_step.add(change)
            self.diffs.append(change)
            values.append(given.value)
            self.feedback.append(rec.feedback or None)
            done.append({"trial": rec.trial_id, "reward": round(given.value, 6), "novel": novel,
                         "tokens": job.turn.get("tokens_out", 0)})
        self.session.pending = done
        self.state = None
        if self.control is not None:  # the trainer gets the step's oracle rewards in a recorded random order
            step = int(self.trainer.state.global_step) + 1 if self.trainer is not None else 1
            entry, values = control_record([r["reward"] for r in done], self.seed, step)
            self.session.pending_control = entry
        return values


def _live_prompts(base: type) -> type:
    """``base`` (a TRL trainer class) whose training batches are prompted with the run's state of the moment."""

    class LivePrompts(base):  # type: ignore[misc, valid-type]
        rrma_scorer: Scorer

        def _prepare_inputs(self, generation_batch: Any) -> Any:
            if self.model.training and isinstance(generation_batch, list):
                state = self.rrma_scorer.bridge.prompt()
                self.rrma_scorer.state = state
                for example in generation_batch:
                    example["prompt"] = state.messages
            return super()._prepare_inputs(generation_batch)

    LivePrompts.__name__ = f"Live{base.__name__}"
    return LivePrompts


def train_online(method: str, bridge: LoopBridge, model_path: Path, settings: Settings, session: Session,
                 work: Path, resume: Path | None = None) -> Path:
    """GRPO or SDPO with rollouts scored through the loop; the trained adapter (or model) directory."""
    need_trl()
    from datasets import Dataset

    model, tokenizer = load_policy(model_path, settings.device)
    session.group = settings.group
    scorer = Scorer(bridge, session, str(model_path), control=settings.control, seed=settings.seed)
    first = bridge.prompt()
    per_step = settings.group * settings.prompts
    data = Dataset.from_list([{"prompt": first.messages}] * max(per_step, settings.steps * settings.prompts))
    common = {**common_args(settings, work), "max_steps": settings.steps, "per_device_train_batch_size": per_step,
              "num_generations": settings.group, "max_completion_length": settings.max_new_tokens,
              "temperature": settings.temperature, "beta": settings.beta, "num_iterations": 1,
              "steps_per_generation": 1, "shuffle_dataset": False}
    peft = lora_config(settings) if settings.lora and not hasattr(model, "peft_config") else None
    if method == "grpo":
        from trl import GRPOConfig, GRPOTrainer

        args: Any = GRPOConfig(**common, scale_rewards="group", log_completions=False)
        cls = _live_prompts(GRPOTrainer)
    elif method == "sdpo":
        from trl.experimental.sdpo import SDPOConfig, SDPOTrainer

        args = SDPOConfig(**common, teacher_model_kind=settings.teacher, teacher_update_rate=settings.teacher_rate,
                          include_environment_feedback=True, success_reward_threshold=settings.success,
                          max_reprompt_len=1024)
        cls = _live_prompts(SDPOTrainer)
    else:
        raise TrainingError(f"unknown online method {method!r} (grpo or sdpo)")
    trainer = cls(model=model, reward_funcs=[scorer], args=args, train_dataset=data, processing_class=tokenizer,
                  peft_config=peft, callbacks=[step_callback(session)])
    trainer.rrma_scorer = scorer
    scorer.trainer = trainer
    quiet(trainer)
    if method == "sdpo":  # the teacher's privileged context: each rollout's oracle feedback, known once scored
        builder = trainer.teacher_context_builder
        build = builder.build

        def with_feedback(batch: Any, prompts: Any, rewards: Any, feedbacks: Any = None) -> Any:
            given = scorer.feedback if len(scorer.feedback) == len(prompts) else feedbacks
            return build(batch, prompts, rewards, feedbacks=given)

        builder.build = with_feedback
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = work / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    return final


def last_checkpoint(run_dir: Path, steps: list[dict[str, Any]]) -> Path | None:
    """The newest checkpoint artifact of the run's last session, checked against its digest (None: none)."""
    for mark in reversed(steps):
        if mark.get("kind") == "checkpoint":
            return check_dir(run_dir, mark["artifact"])
    return None


__all__ = ["TRAIN_ACTOR", "Session", "Settings", "TrainingError", "last_checkpoint", "load_policy", "train_online",
           "train_sft"]
