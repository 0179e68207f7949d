"""GSM8K training recipe: the file the agents edit.

Called by the gsm8k-recipe oracle as

    python recipe.py --base-model B --train-data TRAIN.jsonl --output-dir OUT --seed S

It must write a causal LM (config, safetensors weights, tokenizer) to OUT: the oracle refuses a
model directory holding a pickle (*.bin, *.pt, *.pth, *.pkl), custom code (auto_map) or a
symbolic link. The oracle then evaluates OUT
on held-out questions with its own prompt, decoding and verifier: nothing in this file can
change how the model is scored. TRAIN.jsonl holds only training problems
({"idx", "question", "answer"}); the held-out questions are never given to this script.

Baseline: GRPO (TRL) with the GSM8K verifier as the reward. Lines starting with
"progress: " followed by JSON are shown live in the run as training curves.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

# ----------------------------------------------------------------------------- knobs
LEARNING_RATE = 1e-6
MAX_STEPS = 200
BATCH_SIZE = 8  # completions per device step (a multiple of NUM_GENERATIONS)
NUM_GENERATIONS = 8  # completions per prompt (the GRPO group)
MAX_COMPLETION_LENGTH = 256  # tokens
TEMPERATURE = 1.0
BETA = 0.0  # KL coefficient
FORMAT_BONUS = 0.1  # extra reward when the last line is a clean '#### N'
TRAIN_EXAMPLES = 2000  # training problems used (shuffled with the seed)
SYSTEM_PROMPT = "Solve the problem step by step. End with a final line of the form '#### <number>'."


def load_rows(path: Path, limit: int, seed: int) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    random.Random(seed).shuffle(rows)
    return rows[:limit]


def completion_text(completion: object) -> str:
    """TRL passes plain strings or, for chat prompts, a list of messages."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


def gsm8k_reward(completions: list[object], answer: list[str], **_: object) -> list[float]:
    from oracle.gsm8k import grade  # the project's verifier, on PYTHONPATH

    rewards = []
    for completion, gold in zip(completions, answer, strict=True):
        g = grade(completion_text(completion), gold)
        rewards.append(float(g.correct) + (FORMAT_BONUS if g.strict_final_line else 0.0))
    return rewards


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-model", required=True)
    parser.add_argument("--train-data", required=True, type=Path)
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS)
    parser.add_argument("--max-completion-length", type=int, default=MAX_COMPLETION_LENGTH)
    args = parser.parse_args()

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if args.max_steps <= 0:  # no training: the base model is the result
        model = AutoModelForCausalLM.from_pretrained(args.base_model)
        model.save_pretrained(args.output_dir)
        tokenizer.save_pretrained(args.output_dir)
        print("progress: " + json.dumps({"step": 0}), flush=True)
        return

    from trl import GRPOConfig, GRPOTrainer

    rows = load_rows(args.train_data, TRAIN_EXAMPLES, args.seed)
    dataset = Dataset.from_list([
        {"prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": r["question"]}],
         "answer": r["answer"]}
        for r in rows
    ])

    class Progress(TrainerCallback):
        def on_log(self, args_, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
            sample = {"step": state.global_step}
            for key, value in (logs or {}).items():
                if isinstance(value, int | float):
                    sample[key.replace("/", "_")] = value
            print("progress: " + json.dumps(sample), flush=True)

    cuda = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=str(args.output_dir) + ".trainer",
        learning_rate=LEARNING_RATE,
        max_steps=args.max_steps,
        per_device_train_batch_size=max(BATCH_SIZE // NUM_GENERATIONS, 1) * NUM_GENERATIONS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=args.max_completion_length,
        temperature=TEMPERATURE,
        beta=BETA,
        seed=args.seed,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=args.base_model,
        reward_funcs=[gsm8k_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Progress()],
    )
    trainer.train()
    trainer.save_model(str(args.output_dir))
    tokenizer.save_pretrained(str(args.output_dir))
    # save_model also pickles the training arguments there; the oracle refuses any pickle in OUT
    (Path(args.output_dir) / "training_args.bin").unlink(missing_ok=True)
    shutil.rmtree(config.output_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
