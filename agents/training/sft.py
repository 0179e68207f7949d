"""Supervised fine-tuning on rows of runs (``rrma-tui train sft``; docs/training.md): TRL's ``SFTTrainer``.

The rows are conversations (rrma/train/dataset.py); the loss is on the assistant's tokens where the
tokenizer's chat template can mark them, else on the last turn (the proposal) alone (:func:`sft_example`).
"""

from __future__ import annotations

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

