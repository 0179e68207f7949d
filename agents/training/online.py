"""What GRPO and SDPO share: rollouts scored through the loop, prompts from the run's state of the moment.

:class:`Scorer` is the reward function TRL calls: the policy's replies become proposals, the loop runs
and scores them as trials (:class:`~agents.training.rollouts.LoopBridge`), and their rewards come from the
oracle's outcomes in that run (rrma/train/reward.py). :func:`train_online` builds the session around the
one TRL config and trainer class an algorithm's module gives it (:mod:`agents.training.grpo`,
:mod:`agents.training.sdpo`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.training.common import (
    Session,
    Settings,
    TrainingError,
    common_args,
    load_policy,
    lora_config,
    need_trl,
    quiet,
    step_callback,
)
from agents.training.rollouts import LoopBridge, PromptState, Rollout
from rrma.train import prompt as policy_prompt
from rrma.train.control import CONTROLS
from rrma.train.control import record as control_record
from rrma.train.reward import diff_text, trial_reward
from rrma.trial import Proposal

# an algorithm's TRL (config, trainer base class), made from the arguments every online method shares
TrainerFactory = Callable[[dict[str, Any], Settings], tuple[Any, type]]


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


def live_prompts(base: type) -> type:
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


def train_online(make_trainer: TrainerFactory, bridge: LoopBridge, model_path: Path, settings: Settings,
                 session: Session, work: Path, resume: Path | None = None,
                 *, prepare: Callable[[Any, Scorer], None] | None = None) -> Path:
    """An online session (its TRL config and trainer from ``make_trainer``; ``prepare`` adjusts
    the built trainer) with rollouts scored through the loop; the trained adapter (or model) directory."""
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
    args, base = make_trainer(common, settings)
    cls = live_prompts(base)
    trainer = cls(model=model, reward_funcs=[scorer], args=args, train_dataset=data, processing_class=tokenizer,
                  peft_config=peft, callbacks=[step_callback(session)])
    trainer.rrma_scorer = scorer
    scorer.trainer = trainer
    quiet(trainer)
    if prepare is not None:
        prepare(trainer, scorer)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    final = work / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    return final

