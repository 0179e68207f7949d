"""SDPO through the loop (``rrma-tui train sdpo``; docs/training.md): TRL's experimental ``SDPOConfig`` and
``SDPOTrainer``.

The teacher (an EMA of the policy, or the base model) sees each rollout's oracle feedback as its privileged
context (TRL's ``include_environment_feedback``): the feedback is known only once the loop has scored the
rollout, so :func:`with_oracle_feedback` hands it to the trainer's context builder after each scoring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.training.common import Session, Settings
from agents.training.online import Scorer, train_online
from agents.training.rollouts import LoopBridge


def sdpo_trainer(common: dict[str, Any], settings: Settings) -> tuple[Any, type]:
    """TRL's SDPO config (teacher kind and rate, the success threshold, feedback on) and trainer class."""
    from trl.experimental.sdpo import SDPOConfig, SDPOTrainer

    args = SDPOConfig(**common, teacher_model_kind=settings.teacher, teacher_update_rate=settings.teacher_rate,
                      include_environment_feedback=True, success_reward_threshold=settings.success,
                      max_reprompt_len=1024)
    return args, SDPOTrainer


def with_oracle_feedback(trainer: Any, scorer: Scorer) -> None:
    """The teacher's privileged context: each rollout's oracle feedback, known once scored."""
    builder = trainer.teacher_context_builder
    build = builder.build

    def with_feedback(batch: Any, prompts: Any, rewards: Any, feedbacks: Any = None) -> Any:
        given = scorer.feedback if len(scorer.feedback) == len(prompts) else feedbacks
        return build(batch, prompts, rewards, feedbacks=given)

    builder.build = with_feedback


def train_sdpo(bridge: LoopBridge, model_path: Path, settings: Settings, session: Session, work: Path,
               resume: Path | None = None) -> Path:
    """SDPO with rollouts scored through the loop; the trained adapter (or model) directory."""
    return train_online(sdpo_trainer, bridge, model_path, settings, session, work, resume,
                        prepare=with_oracle_feedback)
