"""A pulled GGUF model made into a Hugging Face directory, once, so that later loads are plain and quick.

Why it exists: transformers reads a GGUF file (``from_pretrained(dir, gguf_file=...)``, with the ``gguf``
package) by dequantizing every tensor, which takes most of a minute on a CPU, and the model it gives
cannot be saved (``save_pretrained`` refuses a model "quantized with gguf"). The store
(rrma/models.py) calls :func:`convert_gguf` once per pulled file; it loads the GGUF, copies its weights
into a plain model of the same configuration (every key must match) and saves that as float32
``safetensors`` with the tokenizer and its chat template. Loading that directory takes seconds.

The weights are the GGUF's dequantized values (Q4_1 blocks as float32), not the upstream bf16 ones:
what runs is exactly what was pulled. Nothing is fetched (``HF_HUB_OFFLINE=1`` while it runs), no code
from the file runs (GGUF is data: tensors and metadata), and ``llama-cpp-python`` is never needed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

VERSION = "gguf-to-safetensors-f32/1"  # part of the converted copy's key: a new way of converting, a new copy
REQUIRES = ("torch", "transformers", "gguf", "accelerate")  # transformers needs accelerate to read a GGUF


class ConversionError(RuntimeError):
    """The GGUF could not be read or the converted model could not be written (the message says why)."""


def missing_requirements() -> list[str]:
    """The packages the conversion needs that are not installed (the ``local`` extra has them all)."""
    return [name for name in REQUIRES if importlib.util.find_spec(name) is None]


@contextmanager
def _offline() -> Iterator[None]:
    # offline, and without the GGUF reader's progress bar (tqdm) in a headless command's output
    settings = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def convert_gguf(gguf: Path, out: Path) -> dict[str, Any]:
    """Write the model in ``gguf`` to ``out`` as a float32 Hugging Face directory; return what made it."""
    missing = missing_requirements()
    if missing:
        raise ConversionError(f"converting a GGUF needs {', '.join(missing)}: pip install -e '.[local]'")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    gguf = Path(gguf).resolve()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with _offline():
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=str(gguf))
                quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=str(gguf),
                                                                 dtype=torch.float32)
            except Exception as exc:  # broad: the GGUF reader raises ValueError, KeyError, struct errors...
                raise ConversionError(f"transformers cannot read {gguf}: {type(exc).__name__}: "
                                      f"{' '.join(str(exc).split())[:300]}") from None
            config = quantized.config
            if hasattr(config, "quantization_config"):
                del config.quantization_config  # the copy is a plain float32 model
            plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            result = plain.load_state_dict(quantized.state_dict(), strict=True)
            if result.missing_keys or result.unexpected_keys:  # strict raises first; kept as the invariant
                raise ConversionError(f"weights do not match the configuration: {result}")
            if not getattr(tokenizer, "chat_template", None):
                raise ConversionError(f"{gguf} carries no chat template (tokenizer.chat_template)")
            out.mkdir(parents=True, exist_ok=True)
            plain.save_pretrained(str(out), safe_serialization=True)
            tokenizer.save_pretrained(str(out))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    parameters = sum(p.numel() for p in plain.parameters())
    return {"transformers": importlib.metadata.version("transformers"),
            "gguf": importlib.metadata.version("gguf"), "torch": torch.__version__,
            "architecture": type(plain).__name__, "parameters": int(parameters), "dtype": "float32"}


__all__ = ["REQUIRES", "VERSION", "ConversionError", "convert_gguf", "missing_requirements"]
