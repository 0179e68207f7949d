"""The GSM8K oracles' params, as they declare them (rrma/declare.py): checked when a task is loaded.

Why it exists: a misspelt key of ``oracle.params`` (``eval_limt: 50``) was read by nobody and the run went on
with the default. Each GSM8K oracle (:mod:`oracle.gsm8k_eval`, :mod:`oracle.gsm8k_recipe`,
:mod:`oracle.gsm8k_prompt`) declares one of the models here as its ``params_model``, so the task's load
refuses a key the oracle does not read, naming the field. Invariant: each model takes exactly the keys its
oracle reads, with the types and choices the oracle's own checks (:func:`oracle.gsm8k_harness.oracle_param`,
:func:`~oracle.gsm8k_harness.check_grading`) accept; those checks stay, for an oracle built from a dict.
Counts are strict integers and names strict strings, as the oracle's ``isinstance`` checks are.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal

from pydantic import Field, field_validator

from rrma.declare import PluginSettings

Split = Literal["train", "test", "dev", "train-pool"]  # oracle.gsm8k_data.SPLITS
Mode = Literal["lenient", "strict"]  # oracle.gsm8k.MODES
AnswerFormat = Literal["hash", "boxed", "answer_tag", "answer_is"]  # oracle.gsm8k.ANSWER_FORMATS
Backend = Literal["auto", "transformers", "vllm"]  # oracle.gsm8k_gen.BACKENDS


class Gsm8kCommonParams(PluginSettings):
    """What every GSM8K oracle reads: where the data is, and how an answer is graded."""

    data: str | None = None
    """A GSM8K split file or a directory of them (default: RRMA_SHARED's copy)."""
    download: bool = False
    """Download the splits when no local copy is found."""
    mode: Mode = "lenient"
    """How an answer is graded: lenient (the last number) or strict (the answer format only)."""
    answer_format: AnswerFormat = "hash"
    """The answer format completions are asked for and graded by."""


class Gsm8kGenerating(Gsm8kCommonParams):
    """What the oracles that generate with a model of their own read (gsm8k-eval's model, gsm8k-recipe's)."""

    backend: Backend = "auto"
    """The generation backend of the oracle's own evaluation."""
    gen: dict[str, Any] = Field(default_factory=dict)
    """Generation settings (oracle.gsm8k_gen.GenConfig's fields: max_new_tokens, temperature, num_samples, ...)."""

    @field_validator("gen")
    @classmethod
    def _known_gen(cls, gen: dict[str, Any]) -> dict[str, Any]:
        from oracle.gsm8k_gen import GenConfig  # light: no torch import at module level

        known = {f.name for f in fields(GenConfig)}
        unknown = sorted(set(gen) - known)
        if unknown:
            raise ValueError(f"unknown settings {unknown}; known: {', '.join(sorted(known))}")
        return gen


class Gsm8kEvalParams(Gsm8kGenerating):
    """``oracle.params`` of the gsm8k-eval oracle: grade a completions file, or a model it runs itself."""

    completions: str | None = None
    """The completions (jsonl), relative to the trial's workspace or absolute (default completions.jsonl when no model)."""
    model: str | None = None
    """A model directory the oracle generates with (relative to the trial's workspace or absolute)."""
    split: Split = "test"
    """The split graded."""
    limit: int | None = Field(None, strict=True, ge=0, le=1_000_000)
    """Grade only this many questions (None: all)."""
    subset_seed: int | None = Field(None, strict=True, ge=0, le=4_294_967_295)
    """Seed of the subset's draw (None: the first questions)."""
    system_prompt: str | None = None
    """The system prompt of the model's generation (None: the answer format's instruction)."""


class Gsm8kRecipeParams(Gsm8kGenerating):
    """``oracle.params`` of the gsm8k-recipe oracle: run the agents' training recipe, grade the model it writes."""

    base_model: str = "tiny-random"
    """The model the recipe starts from: tiny-random, a model directory or hub id, or a model of the store by name."""
    train_limit: int | None = Field(None, strict=True, ge=0, le=1_000_000)
    """Train problems given to the recipe (None: all of train-pool)."""
    eval_split: Literal["dev", "test"] = "dev"
    """The held-out split the model is graded on."""
    eval_limit: int | None = Field(200, strict=True, ge=0, le=1_000_000)
    """Held-out questions graded (None: all)."""
    eval_subset_seed: int | None = Field(None, strict=True, ge=0, le=4_294_967_295)
    """Seed of the graded subset's draw (None: the first questions)."""
    eval_seconds: float = Field(1800.0, strict=True)
    """Part of the trial's wall clock kept for the evaluation (the recipe gets the rest)."""
    eval_memory_mb: int = Field(8192, strict=True, ge=1, le=16_777_216)
    """Memory limit of the evaluation (MB)."""
    recipe: str = "recipe.py"
    """The recipe program, in the trial's workspace."""
    recipe_args: list[Any] = Field(default_factory=list)
    """Extra arguments of the recipe."""
    output_dir: str = "model_out"
    """The directory the recipe writes its model to, in the trial's workspace."""


class Gsm8kPromptParams(Gsm8kCommonParams):
    """``oracle.params`` of the gsm8k-prompt oracle: grade the agents' system prompt through a chat endpoint."""

    provider: Literal["openai", "anthropic", "local"] = "openai"
    """Who answers: an OpenAI-compatible endpoint, Anthropic, or a model on this machine."""
    model: str | None = None
    """The chat model (required to run; local: a model of the store by name or a directory)."""
    base_url: str | None = None
    """The endpoint (default OPENAI_BASE_URL / ANTHROPIC_BASE_URL)."""
    api_key_env: str | None = None
    """The variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY)."""
    prompt_file: str = "system_prompt.txt"
    """The file holding the agents' system prompt, in the workspace."""
    split: Split = "dev"
    """The split graded."""
    limit: int | None = Field(50, strict=True, ge=0, le=1_000_000)
    """Questions graded (None: all)."""
    subset_seed: int | None = Field(None, strict=True, ge=0, le=4_294_967_295)
    """Seed of the subset's draw (None: the first questions)."""
    max_tokens: int = Field(512, strict=True, ge=1, le=1_000_000)
    """Tokens of one answer."""
    temperature: float = Field(0.0, strict=True)
    """Sampling temperature (0: greedy)."""
    concurrency: int = Field(4, strict=True, le=1024)
    """Questions asked at once (at least 1)."""
    timeout_s: float = Field(60.0, strict=True)
    """Seconds of one request."""
    max_retries: int = Field(2, strict=True, ge=0, le=100)
    """Retries of a failed request."""
    max_prompt_chars: int = Field(8000, strict=True, ge=1, le=100_000_000)
    """Longest system prompt graded (characters)."""
    stop: list[str] = Field(default_factory=lambda: ["\nQuestion:"], max_length=4)
    """Stop sequences (at most 4, each non-blank)."""

    @field_validator("stop")
    @classmethod
    def _non_blank(cls, stop: list[str]) -> list[str]:
        if not all(x.strip() for x in stop):
            raise ValueError("each stop sequence must be non-blank")
        return stop


__all__ = ["Gsm8kCommonParams", "Gsm8kEvalParams", "Gsm8kGenerating", "Gsm8kPromptParams", "Gsm8kRecipeParams"]
