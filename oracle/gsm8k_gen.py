"""Generation backends that turn GSM8K questions into completions, and a tiny local model.

Why it exists: the eval bench and the recipe oracle must evaluate a *model* the same way every
time: same prompt (the oracle's system prompt and answer-format instruction, the model's own
chat template when it has one), greedy decoding by default, batched. Two backends:

* ``transformers`` (CPU or GPU): always available; left-padded batches through ``generate``.
* ``vllm`` (GPU, the ``gpu`` extra): the same prompts through ``vllm.LLM``.

Heavy imports (torch, transformers, vllm, tokenizers) happen inside functions, so importing
this module costs nothing. :func:`build_tiny_model` writes a tiny randomly initialised Llama
with a byte-level tokenizer made locally (no hub download): tests and CPU smoke runs use it.

Invariant: generation settings come from :class:`GenConfig` (owned by the oracle), never from
the model directory's ``generation_config.json``: a recipe cannot change how its model is
decoded at evaluation time. A model directory is data, never code: :func:`check_model_dir` refuses
pickle weight files (unpickling runs whatever the pickle names), ``auto_map`` entries (custom model
or tokenizer code) and, for a directory an agent wrote, any symbolic link; both backends load with
``trust_remote_code=False`` and safetensors only. Generation stops at :data:`oracle.gsm8k.STOP_SEQUENCES` (lm-eval's
GSM8K stop sequences: a new ``Question:`` line, ``</s>``, ``<|im_end|>``...), and each completion
is cut at the first of them, so a base model that goes on with a made-up question is never graded
on that question's answer (both backends end at the same text).

Run as ``python -m oracle.gsm8k_gen --model DIR --questions Q.jsonl --out OUT.jsonl``: the
recipe oracle evaluates a trained model this way, in a child process under the trial budget.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from oracle.gsm8k import FORMAT_INSTRUCTIONS, STOP_SEQUENCES, truncate_at_stop

BACKENDS = ("auto", "transformers", "vllm")


class GenerationError(RuntimeError):
    """A model cannot be loaded or run by the chosen backend (the message says which and why)."""


class UnsafeModel(GenerationError):
    """A model directory the oracle will not load: pickle weights, custom code, or (written by an
    agent) a symbolic link."""


# weight and state files that are pickles (torch.save, pickle, joblib): loading one runs the code it names
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")
# configuration files that may name custom code through "auto_map" (only read with trust_remote_code)
CODE_CONFIGS = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json")
CONFIG_LIMIT = 16 << 20  # bytes read of one configuration file (a chat template can be long)


def check_model_dir(path: str | Path, *, follow_links: bool = False) -> list[str]:
    """Refuse a model directory that is not plain data; return its files (relative paths).

    Raises :class:`UnsafeModel` for a pickle weight file (:data:`PICKLE_SUFFIXES`), a configuration
    with ``auto_map`` (custom code), no ``*.safetensors`` weights, or a file that is neither a
    regular file nor a directory. Without ``follow_links`` (a directory an agent's program wrote)
    a symbolic link anywhere, the directory itself included, is refused and nothing is read
    through one (:mod:`rrma.contain.files`); with it (a person's own model, e.g. a hub cache
    snapshot made of links) links are read as the files they point to.
    """
    from rrma.contain import files

    root = Path(path)
    listing: list[tuple[str, int]] = []
    try:
        if follow_links:
            for dirpath, _dirs, names in os.walk(root, followlinks=True):
                for name in names:
                    full = Path(dirpath) / name
                    listing.append((full.relative_to(root).as_posix(), stat.S_IFMT(full.stat().st_mode)))
        else:  # an agent's program wrote it: no link followed, at most files.DEFAULT_MAX_ENTRIES entries
            listing = [(entry.path, entry.kind) for entry in files.walk_files(root)]
    except files.LinkRefused:
        raise UnsafeModel(f"model directory {root.name}/ is a symbolic link; the oracle reads no model "
                          "through a link") from None
    except files.TreeTooLarge as exc:
        raise UnsafeModel(f"model directory {root.name}/ holds {exc}; a model is a few files") from None
    except OSError as exc:
        raise GenerationError(f"cannot list the model directory {root.name}/: {exc.strerror or exc}") from None
    names = []
    for rel, kind in sorted(listing):
        if kind == stat.S_IFLNK:
            raise UnsafeModel(f"model file {rel} is a symbolic link; the oracle reads no model file through a link "
                              "(save real files)")
        if kind != stat.S_IFREG:
            raise UnsafeModel(f"model file {rel} is not a regular file")
        if rel.lower().endswith(PICKLE_SUFFIXES):
            raise UnsafeModel(f"model file {rel} is a pickle (loading it would run the code it names); save the "
                              "weights as safetensors (save_pretrained(..., safe_serialization=True)) and no "
                              f"{'/'.join(PICKLE_SUFFIXES)} files")
        names.append(rel)
    if not any(n.endswith(".safetensors") for n in names):
        raise UnsafeModel("the model directory holds no *.safetensors weights (the oracle loads safetensors only)")
    for rel in names:
        if Path(rel).name not in CODE_CONFIGS:
            continue
        try:
            raw = (root / rel).read_bytes() if follow_links else files.read_bytes(root, rel, limit=CONFIG_LIMIT)
            config = json.loads(raw)
        except (OSError, ValueError) as exc:
            raise GenerationError(f"model file {rel} is not readable JSON: {exc}") from None
        if isinstance(config, dict) and "auto_map" in config:
            raise UnsafeModel(f"model file {rel} has 'auto_map' (custom model or tokenizer code); the oracle "
                              "loads built-in architectures only (trust_remote_code=False)")
    return names


@dataclass
class GenConfig:
    """How completions are produced (owned by the oracle, part of its identity)."""

    max_new_tokens: int = 512
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    num_samples: int = 1  # completions per question (pass@k needs > 1 and temperature > 0)
    batch_size: int = 16
    seed: int = 0
    answer_format: str = "hash"
    system_prompt: str | None = None  # None: the answer-format instruction
    chat_template: bool | None = None  # None: use the tokenizer's template when it has one
    device: str = "auto"  # transformers: auto, cpu, cuda
    dtype: str = "auto"  # auto, float32, bfloat16, float16
    gpu_memory_utilization: float = 0.85  # vllm
    stop: tuple[str, ...] = STOP_SEQUENCES  # generation ends at the first of these (not part of the completion)

    def system_text(self) -> str:
        return self.system_prompt if self.system_prompt is not None else FORMAT_INSTRUCTIONS[self.answer_format]


def build_messages(question: str, system_prompt: str) -> list[dict[str, str]]:
    """The chat messages of one question (system prompt first when there is one)."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    messages.append({"role": "user", "content": question})
    return messages


def plain_prompt(question: str, system_prompt: str) -> str:
    """The prompt for a tokenizer without a chat template (base models)."""
    head = f"{system_prompt.strip()}\n\n" if system_prompt.strip() else ""
    return f"{head}Question: {question.strip()}\nAnswer:"


def render_prompts(tokenizer: Any, questions: Sequence[str], config: GenConfig) -> list[str]:
    """Prompts as text, through the tokenizer's chat template when it has one (or when forced)."""
    system = config.system_text()
    has_template = bool(getattr(tokenizer, "chat_template", None))
    use_chat = has_template if config.chat_template is None else config.chat_template
    if use_chat and not has_template:
        raise GenerationError("chat_template=True but the tokenizer has no chat template")
    if not use_chat:
        return [plain_prompt(q, system) for q in questions]
    return [
        tokenizer.apply_chat_template(build_messages(q, system), tokenize=False, add_generation_prompt=True)
        for q in questions
    ]


class Generator(Protocol):
    backend: str

    def generate(self, questions: Sequence[str], on_batch: Callable[[int, int], None] | None = None) -> list[list[str]]:
        """Completions per question (``num_samples`` each), in question order."""
        ...

    def close(self) -> None: ...


def vllm_available() -> bool:
    """vLLM is installed and a CUDA device is visible."""
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


class TransformersGenerator:
    """Batched ``model.generate`` with left padding; CPU or GPU."""

    backend = "transformers"

    def __init__(self, model_path: str | Path, config: GenConfig) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - transformers is a dev dependency
            raise GenerationError(f"the transformers backend needs torch and transformers: {exc}") from exc
        self.config = config
        self.torch = torch
        path = str(model_path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        except (OSError, ValueError) as exc:
            raise GenerationError(f"cannot load a tokenizer from {path}: {exc}") from exc
        device = config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype: Any = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16,
                      "float16": torch.float16}.get(config.dtype)
        if dtype is None:
            raise GenerationError(f"unknown dtype {config.dtype!r}; expected auto, float32, bfloat16 or float16")
        if dtype == "auto" and device == "cpu":
            dtype = torch.float32
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar between a headless command's lines
        try:
            self.model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=False,
                                                                   use_safetensors=True)
        except (OSError, ValueError) as exc:
            raise GenerationError(f"cannot load a causal LM from {path}: {exc}") from exc
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self.model.to(device)  # type: ignore[arg-type]  # the stubs of .to on a model are wrong
        self.model.eval()
        self.device = device
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"

    def generate(self, questions: Sequence[str], on_batch: Callable[[int, int], None] | None = None) -> list[list[str]]:
        torch = self.torch
        cfg = self.config
        prompts = render_prompts(self.tokenizer, questions, cfg)
        out: list[list[str]] = []
        torch.manual_seed(cfg.seed)
        sample = cfg.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": cfg.max_new_tokens,
            "do_sample": sample,
            "num_return_sequences": cfg.num_samples,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": self.tokenizer.eos_token_id,
        }
        if cfg.stop:  # each sequence of a batch stops at its own first stop string
            kwargs.update(stop_strings=list(cfg.stop), tokenizer=self.tokenizer)
        if sample:
            kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p)
        else:  # override whatever the model dir's generation_config.json says
            kwargs.update(temperature=None, top_p=None, top_k=None)
        for start in range(0, len(prompts), cfg.batch_size):
            batch = prompts[start : start + cfg.batch_size]
            enc = self.tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            with torch.inference_mode():
                seqs = self.model.generate(**enc, **kwargs)
            new = seqs[:, enc["input_ids"].shape[1] :]
            # the stop string itself (and a special token the decoder kept) is not part of the completion
            texts = [truncate_at_stop(t, cfg.stop) for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
            for i in range(len(batch)):
                out.append(texts[i * cfg.num_samples : (i + 1) * cfg.num_samples])
            if on_batch is not None:
                on_batch(len(out), len(prompts))
        return out

    def close(self) -> None:
        del self.model


class VLLMGenerator:
    """``vllm.LLM`` offline generation (GPU). Same prompts as the transformers backend."""

    backend = "vllm"

    def __init__(self, model_path: str | Path, config: GenConfig) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:
            raise GenerationError(
                f"the vllm backend needs vLLM (pip install 'rrma[gpu]') and a CUDA GPU: {exc}"
            ) from exc
        self.config = config
        self.llm = LLM(model=str(model_path), seed=config.seed, gpu_memory_utilization=config.gpu_memory_utilization,
                       dtype=config.dtype, trust_remote_code=False, load_format="safetensors")
        self.params = SamplingParams(
            n=config.num_samples,
            temperature=config.temperature,
            top_p=config.top_p if config.temperature > 0 else 1.0,
            max_tokens=config.max_new_tokens,
            seed=config.seed,
            stop=list(config.stop),  # vLLM leaves the stop string out of the text
        )

    def generate(self, questions: Sequence[str], on_batch: Callable[[int, int], None] | None = None) -> list[list[str]]:
        prompts = render_prompts(self.llm.get_tokenizer(), questions, self.config)
        results = self.llm.generate(prompts, self.params, use_tqdm=False)
        out = [[truncate_at_stop(o.text, self.config.stop) for o in r.outputs] for r in results]
        if on_batch is not None:
            on_batch(len(out), len(prompts))
        return out

    def close(self) -> None:
        del self.llm


def make_generator(backend: str, model_path: str | Path, config: GenConfig) -> Generator:
    """``auto`` picks vLLM when it is installed and a GPU is visible, else transformers."""
    if backend not in BACKENDS:
        raise GenerationError(f"unknown generation backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if not Path(model_path).exists():
        raise GenerationError(f"model directory {model_path} does not exist")
    check_model_dir(model_path, follow_links=True)  # pickles and custom code are refused for every model
    if backend == "auto":
        backend = "vllm" if vllm_available() else "transformers"
    if backend == "vllm":
        return VLLMGenerator(model_path, config)
    return TransformersGenerator(model_path, config)


# ----------------------------------------------------------------------------- tiny model

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_tokenizer(dest: Path) -> Any:
    """A byte-level tokenizer (256 byte symbols + pad/bos/eos) built locally and saved to ``dest``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(dest))
    return fast


def build_tiny_model(
    dest: Path | str,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 4096,
    seed: int = 0,
) -> Path:
    """Write a tiny randomly initialised Llama and its byte-level tokenizer to ``dest``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    dest = Path(dest)
    tokenizer = build_tokenizer(dest)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar in a headless run's output
    try:
        model.save_pretrained(str(dest))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return dest


# ----------------------------------------------------------------------------- CLI


def _read_questions(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("question"), str):
                    raise GenerationError(f"{path}:{lineno}: expected an object with a 'question' string")
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate GSM8K completions with a local model.")
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--questions", required=True, type=Path, help="jsonl with 'question' (and 'idx')")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--backend", default="auto", choices=BACKENDS)
    parser.add_argument("--max-new-tokens", type=int, default=GenConfig.max_new_tokens)
    parser.add_argument("--batch-size", type=int, default=GenConfig.batch_size)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--answer-format", default="hash", choices=sorted(FORMAT_INSTRUCTIONS))
    parser.add_argument("--system-prompt-file", type=Path, default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--stop", action="append", default=None,
                        help="a stop sequence (repeat for several; default: oracle.gsm8k.STOP_SEQUENCES)")
    parser.add_argument("--no-stop", action="store_true", help="no stop sequences (the model's end token only)")
    args = parser.parse_args(argv)
    config = GenConfig(
        max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, temperature=args.temperature,
        num_samples=args.num_samples, seed=args.seed, answer_format=args.answer_format, device=args.device,
        system_prompt=args.system_prompt_file.read_text(encoding="utf-8") if args.system_prompt_file else None,
        stop=() if args.no_stop else tuple(args.stop) if args.stop else STOP_SEQUENCES,
    )
    try:
        rows = _read_questions(args.questions)
        started = time.monotonic()
        gen = make_generator(args.backend, args.model, config)
        print(f"backend: {gen.backend}", flush=True)

        def report(done: int, total: int) -> None:
            print(f"generated: {done}/{total} ({time.monotonic() - started:.1f} s)", flush=True)

        completions = gen.generate([r["question"] for r in rows], on_batch=report)
    except GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for row, samples in zip(rows, completions, strict=True):
            for completion in samples:
                fh.write(json.dumps({"idx": row.get("idx"), "question": row["question"], "completion": completion}) + "\n")
    print(f"completions: {sum(len(s) for s in completions)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
