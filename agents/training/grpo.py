"""GRPO through the loop (``rrma-tui train grpo``; docs/training.md): TRL's ``GRPOConfig`` and ``GRPOTrainer``.

Each step samples ``group`` replies per prompt, the loop scores them as trials, and the advantages are the
rewards scaled within each group; the session around it is :func:`agents.training.online.train_online`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.training.common import Session, Settings
from agents.training.online import train_online
from agents.training.rollouts import LoopBridge


def grpo_trainer(common: dict[str, Any], settings: Settings) -> tuple[Any, type]:
    """TRL's GRPO config (rewards scaled per group) and trainer class."""
    from trl import GRPOConfig, GRPOTrainer

    return GRPOConfig(**common, scale_rewards="group", log_completions=False), GRPOTrainer


def train_grpo(bridge: LoopBridge, model_path: Path, settings: Settings, session: Session, work: Path,
               resume: Path | None = None) -> Path:
    """GRPO with rollouts scored through the loop; the trained adapter (or model) directory."""
    return train_online(grpo_trainer, bridge, model_path, settings, session, work, resume)
