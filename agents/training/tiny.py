"""A tiny policy built here, with no download: a small Llama-shaped transformer and a tokenizer trained locally.

``rrma-tui --headless bench rl`` and the training tests use it on the CPU: a byte-level BPE tokenizer
(digits split one per token, so numbers are learnt digit by digit) trained on the texts the policy will
read and write, a chat template with the four roles, and a randomly initialised ``LlamaForCausalLM``
from a config (about 0.2 M parameters by default). Saved with ``save_pretrained``, it loads like any
Hugging Face model directory (``AutoModelForCausalLM.from_pretrained``), so the trainers, the
``policy`` agent backend and ``vllm serve`` treat it as they treat a real one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROLES = ("system", "user", "assistant", "tool")
END = "<|end|>"
SPECIAL = ["<pad>", "<unk>", "<s>", END, *(f"<|{role}|>" for role in ROLES)]
# TRL's assistant-only loss needs the {% generation %} markers around what the assistant wrote
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|assistant|>{% generation %}{{ m['content'] }}<|end|>{% endgeneration %}"
    "{% else %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
DEFAULTS: dict[str, Any] = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "max_position_embeddings": 1024}


def build_tokenizer(texts: Iterable[str], vocab_size: int = DEFAULTS["vocab_size"]) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` (any byte is still encodable), with the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts), trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token=END, pad_token="<pad>",
                                      unk_token="<unk>", additional_special_tokens=SPECIAL[4:])
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_tiny(texts: Iterable[str], out_dir: Path | str, *, seed: int = 0, **sizes: int) -> Path:
    """Train a tokenizer on ``texts``, initialise a tiny causal LM (``sizes`` override :data:`DEFAULTS`),
    and save both to ``out_dir`` (a Hugging Face model directory). Returns ``out_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    unknown = set(sizes) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown tiny-model size(s): {', '.join(sorted(unknown))} (known: {', '.join(DEFAULTS)})")
    dims = {**DEFAULTS, **sizes}
    tokenizer = build_tokenizer(texts, dims.pop("vocab_size"))
    config = LlamaConfig(vocab_size=len(tokenizer), num_key_value_heads=dims["num_attention_heads"],
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False, **dims)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "rrma-tiny.json").write_text(json.dumps({"seed": seed, **dims, "vocab_size": len(tokenizer)}, indent=1))
    return out
