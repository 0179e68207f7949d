"""The ``policy`` backend: a trained policy (a model or a LoRA adapter) proposes edits as text, locally.

Why it exists: ``rrma-tui train`` leaves a model or a PEFT adapter as an artifact of a run; this backend
puts it to work in the next research run, through transformers on the CPU or a GPU (the vLLM route is
the ``openai`` backend against ``vllm serve BASE --enable-lora --lora-modules NAME=DIR``; docs/agents.md).

What it does for one proposal: the prompt is the one the policy was trained on
(:func:`rrma.train.prompt.messages`: the task and reply format, the parent's score and editable text),
rendered with the tokenizer's chat template (``add_generation_prompt``); one completion is sampled with
a seed derived from the agent's seed and its proposal count (:func:`turn_seed`: the same run seed gives
the same replies); the reply is parsed with :func:`rrma.train.prompt.parse_reply`. A reply that is not in
the format becomes a proposal with no edits and the hypothesis ``unparseable reply: <why>``, which the
loop records as an invalid trial: that is the outcome, and the reward, a policy gets for it.

The reply turn it records is the contract with the dataset export (rrma/train): role ``assistant``, the
text exactly as generated (special tokens skipped), ``args = {"format": "rrma-policy/1", "messages":
[system, user], "completion_ids": [...], "logprobs": [...]}`` where ``completion_ids`` are the sampled
token ids (the end-of-sequence token included when it was sampled) and ``logprobs`` the sampler's
log-probability of each, from ``generate(output_scores=True)`` via ``compute_transition_scores``: the
distribution the token was drawn from, after temperature and top-p/top-k.

Configuration (``agents[]``): ``model`` is a model of the model store by name (``smollm2``: rrma/models.py,
pulled once with ``rrma-tui models pull``, verified before it loads), a Hugging Face model directory
(``config.json``), a PEFT adapter
directory (``adapter_config.json``; its base from ``base_model_name_or_path``, or ``params.base_model``;
either may be a store name),
a run directory whose training session saved one (its last ``train.finished`` artifact, checked against its
digest), or a directory holding one of these (``final/``, a single one, else the highest ``checkpoint-N``).
``params``: ``device`` (cpu; ``auto``: cuda when torch sees one; ``cuda``/``cuda:N`` when asked and available), ``dtype`` (float32 on the CPU,
auto on a GPU), ``temperature`` (1.0; 0 = greedy), ``top_p`` (1.0), ``top_k`` (0 = off),
``max_new_tokens`` (64), ``max_prompt_tokens`` (none: longer prompts keep their last tokens), ``base_model``.
``agents[].temperature`` and ``max_tokens`` (the LLM backends' settings) are not read. Sampling uses
these settings only, never a model directory's ``generation_config.json`` defaults, so a policy samples
as it was trained. Everything is checked and the weights are loaded when the agent is made, so a bad path,
a missing GPU or unreadable weights stop the run before its directory exists.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rrma.contracts import Agent, AgentError, Context, PluginSettings
from rrma.models import is_model_name, model_path, resolve
from rrma.run.scheduler import BASELINE_PARENT
from rrma.task import AgentConfig, TaskConfig
from rrma.train.prompt import ReplyError, messages, parse_reply
from rrma.trial import Proposal

FORMAT = "rrma-policy/1"
PARAMS = ("device", "dtype", "temperature", "top_p", "top_k", "max_new_tokens", "max_prompt_tokens", "base_model")
DTYPES = ("auto", "float32", "bfloat16", "float16")
SEED_STRIDE = 100_003  # a prime: the seeds of two agents' proposals meet only after 100003 proposals
FINGERPRINT_MAX_BYTES = 1 << 30  # weights larger than this are named by path only (hashing them takes minutes)
EXPECTED = ("a Hugging Face model directory (config.json and weights), a PEFT adapter directory "
            "(adapter_config.json), a run directory whose training saved one (rrma-tui train), "
            "or a directory holding one of these")
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# one generation at a time per process: the seed is set on torch's global generator for each sample
_SAMPLING = threading.Lock()


@dataclass(frozen=True)
class PolicyDir:
    """Where a policy's weights are: a model directory or an adapter directory (with its base)."""

    kind: str  # "model" | "adapter"
    path: Path
    base: str | None = None  # adapters: the base model (a directory or a hub name)
    via: str = "agents[].model"  # how it was found (a run's train.finished, a folder's final/ ...)


@dataclass(frozen=True)
class Sample:
    """One sampled reply and what the sampler knew about it."""

    text: str
    completion_ids: list[int]
    logprobs: list[float]
    prompt_tokens: int
    truncated: int  # prompt tokens dropped from the front (max_prompt_tokens)
    seconds: float


# ----------------------------------------------------------------------------- finding the weights


def _kind(folder: Path) -> str | None:
    if (folder / "adapter_config.json").is_file():
        return "adapter"
    if (folder / "config.json").is_file():
        return "model"
    return None


def _adapter_base(folder: Path, override: str | None) -> str:
    if override:
        return model_path(str(override))
    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}/adapter_config.json cannot be read: {exc}") from None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not base:
        raise ValueError(f"{folder}/adapter_config.json names no base_model_name_or_path (set params.base_model)")
    base = model_path(str(base))  # a catalog name (smollm2): the store's verified directory
    beside = (folder / base).resolve()
    if not Path(base).is_dir() and beside.is_dir():  # a base recorded relative to the adapter
        return str(beside)
    return base


def _from_run(folder: Path) -> tuple[Path, str] | None:
    """The last trained policy a run's training saved: (artifact dir, how), or None when it trained none."""
    from rrma.log.artifacts import ArtifactError, check_dir
    from rrma.log.state import RunState
    from rrma.log.store import RunStore

    try:
        state = RunState.fold(RunStore(folder).scan().events)
    except Exception as exc:  # broad: a damaged log raises whatever its reader raises; one line names it
        raise ValueError(f"{folder} looks like a run directory but its log cannot be read: "
                         f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    for session in reversed(state.train_sessions):
        finished = session.get("finished") or {}
        if finished.get("artifact"):
            try:
                return check_dir(folder, finished["artifact"]), f"the run's last train.finished ({session['method']})"
            except ArtifactError as exc:
                raise ValueError(str(exc)) from None
    return None


def find_policy(path: str | Path, base_model: str | None = None) -> PolicyDir:
    """Resolve ``agents[].model`` to the weights to load (ValueError naming the path and what it should hold)."""
    folder = Path(path).expanduser()
    if not folder.exists():
        raise ValueError(f"{folder} does not exist; agents[].model must be {EXPECTED}")
    if not folder.is_dir():
        raise ValueError(f"{folder} is a file, not a directory; agents[].model must be {EXPECTED}")
    via = "agents[].model"
    kind = _kind(folder)
    if kind is None and (folder / "events.jsonl").is_file():
        found = _from_run(folder)
        if found is None:
            raise ValueError(f"{folder} is a run directory whose log has no finished training session with a saved "
                             f"policy; agents[].model must be {EXPECTED}")
        folder, via = found
        kind = _kind(folder)
    if kind is None:
        inside = sorted(p for p in folder.iterdir() if p.is_dir() and _kind(p) is not None)
        steps = {p: int(m.group(1)) for p in inside if (m := _CHECKPOINT.match(p.name))}
        if (folder / "final").is_dir() and _kind(folder / "final") is not None:
            folder, via = folder / "final", f"{folder}/final"
        elif len(inside) == 1:
            folder, via = inside[0], f"the one policy in {folder}"
        elif inside and len(steps) == len(inside):
            folder = max(steps, key=lambda p: steps[p])
            via = f"the last checkpoint in {folder.parent}"
        elif inside:
            raise ValueError(f"{folder} holds several policies ({', '.join(p.name for p in inside)}); "
                             "name one of them in agents[].model")
        else:
            raise ValueError(f"{folder} holds no policy; agents[].model must be {EXPECTED}")
        kind = _kind(folder)
    assert kind is not None
    if kind == "adapter":
        return PolicyDir("adapter", folder.resolve(), _adapter_base(folder, base_model), via)
    return PolicyDir("model", folder.resolve(), None, via)


def fingerprint(folder: Path) -> str | None:
    """sha256 over the folder's files (path and content), or None when they are too large to hash quickly."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if sum(p.stat().st_size for p in files) > FINGERPRINT_MAX_BYTES:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# ----------------------------------------------------------------------------- sampling


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of the agent's ``turn``-th proposal (1-based): reproducible, distinct per turn."""
    return (seed * SEED_STRIDE + turn) % (2 ** 63)


def sample(model: Any, tokenizer: Any, prompt: list[dict[str, str]], *, seed: int, temperature: float = 1.0,
           top_p: float = 1.0, top_k: int = 0, max_new_tokens: int = 64, max_prompt_tokens: int | None = None,
           device: str = "cpu", stop: list[str] | None = None, processors: list[Any] | None = None) -> Sample:
    """One completion of ``prompt`` (chat messages) with the sampler's logprob of each generated token.

    ``stop``: strings that end the generation once generated (kept in the reply and its ids: nothing is cut).
    ``processors``: logits processors (fresh for this sample) applied before temperature and top-p/top-k: the
    local backend's grammar; the scores they leave are the distribution the recorded logprobs come from."""
    import torch
    from transformers import GenerationConfig

    text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    truncated = 0
    if max_prompt_tokens is not None and ids.shape[1] > max_prompt_tokens:
        truncated = int(ids.shape[1] - max_prompt_tokens)
        ids = ids[:, -max_prompt_tokens:]
    ids = ids.to(device)
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if isinstance(eos, list) else eos)
    greedy = temperature <= 0
    # every sampling setting explicit: generate() fills the ones left unset from the model directory's
    # generation_config.json (an instruct model's temperature 0.7, top_p 0.8, repetition_penalty 1.05...)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=not greedy, eos_token_id=eos, pad_token_id=pad,
                              repetition_penalty=1.0, output_scores=True, return_dict_in_generate=True,
                              **({} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": top_k}),
                              **({"stop_strings": list(stop)} if stop else {}))
    started = time.monotonic()
    devices = [torch.device(device).index or 0] if device.startswith("cuda") else []
    with _SAMPLING, torch.random.fork_rng(devices=devices), torch.inference_mode():
        torch.manual_seed(seed)
        extra: dict[str, Any] = {"tokenizer": tokenizer} if stop else {}
        if processors:
            from transformers import LogitsProcessorList

            extra["logits_processor"] = LogitsProcessorList(processors)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config, **extra)
        scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    completion = [int(t) for t in out.sequences[0, ids.shape[1]:].tolist()]
    logprobs = [float(x) for x in scores[0, : len(completion)].tolist()]
    reply = tokenizer.decode(completion, skip_special_tokens=True)
    return Sample(reply, completion, logprobs, int(ids.shape[1]), truncated, time.monotonic() - started)


def parent_score(ctx: Context) -> float | None:
    """The score the prompt shows for the parent: its own, as the trainer's rollouts are prompted.

    The parent's own score is in the context when the agent may see it (the best, the lineage, the
    top, recent or own trials). The baseline (``base-0``) not shown there (``loop.lineage`` off) falls back
    to the baseline's mean, as the trainer does for a parent without a score; a parent the context hides
    (a control arm's best) is ``unknown`` in the prompt: a control arm is not told the best's score.
    """
    for summary in [*([ctx.best] if ctx.best else []), *ctx.lineage, *ctx.top, *ctx.recent, *ctx.own]:
        if summary.trial_id == ctx.parent_id and summary.score is not None:
            return summary.score
    if ctx.parent_id == BASELINE_PARENT:
        return ctx.baseline_score
    return None


# ----------------------------------------------------------------------------- the agent


def _number(name: str, params: dict[str, Any], key: str, default: Any, kind: type, low: float,
            low_open: bool = False, high: float | None = None) -> Any:
    value = params.get(key, default)
    if value is None:
        return None
    try:
        number = kind(value)
        if isinstance(value, bool) or (kind is int and float(value) != number):
            raise ValueError
    except (TypeError, ValueError):
        raise AgentError(f"agent {name}: params.{key} must be {'an integer' if kind is int else 'a number'}, "
                         f"not {value!r}") from None
    if (number <= low if low_open else number < low) or (high is not None and number > high):
        bound = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if high is not None else "")
        raise AgentError(f"agent {name}: params.{key} must be {bound}, not {value!r}")
    return number


class PolicyParams(PluginSettings):
    """``agents[].params`` of the policy backend (checked when the task is loaded: rrma/declare.py; the agent
    checks them again when it is built, with the same bounds)."""

    device: str = Field("cpu", pattern=r"^(cpu|auto|cuda(:\d+)?)$")
    """Where the model runs: cpu, auto (cuda when torch sees one), cuda or cuda:N."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(None)  # type: ignore[arg-type]
    """The weights' dtype (default: float32 on cpu, auto elsewhere)."""
    temperature: float = Field(1.0, ge=0)
    """Sampling temperature (0: greedy)."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling's mass."""
    top_k: int = Field(0, ge=0, le=1_000_000)
    """Sample from the k likeliest tokens (0: all)."""
    max_new_tokens: int = Field(64, ge=1, le=1_000_000)
    """Tokens of one reply."""
    max_prompt_tokens: int | None = Field(None, ge=1, le=100_000_000)
    """Longest prompt, in tokens (the prompt is cut to fit; None: no limit)."""
    base_model: str | None = None
    """The base model of a LoRA adapter (default: the one its adapter_config.json names)."""


class PolicyAgent(Agent):
    """A model proposes edits as text (the reply format of :mod:`rrma.train.prompt`), sampled locally.

    A subclass changes what differs (agents/local.py: an untrained instruct model) through the class
    attributes below and :meth:`prompt`; loading, sampling and the recorded turn stay this class's."""

    backend = "policy"
    params_model = PolicyParams
    params_known: tuple[str, ...] = PARAMS
    # the params' defaults: ``device`` "cpu" (or "auto": cuda when present), the sampling settings
    defaults: dict[str, Any] = {"device": "cpu", "temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 64}

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        params = dict(config.params)
        name = config.name
        backend = self.backend
        unknown = sorted(set(params) - set(self.params_known))
        if unknown:
            raise AgentError(f"agent {name}: unknown params for backend {backend}: {', '.join(unknown)} "
                             f"(known: {', '.join(self.params_known)})")
        if task.loop.policy == "per-theorem":
            raise AgentError(f"agent {name}: the {backend} backend writes edits; a per-theorem (proof) task "
                             "is not one it can work on")
        if not config.model:
            raise AgentError(f"agent {name}: backend {backend} needs agents[].model (or --model): {EXPECTED}")
        given = self.defaults | params
        self.temperature = float(_number(name, given, "temperature", 1.0, float, 0.0))
        self.top_p = float(_number(name, given, "top_p", 1.0, float, 0.0, low_open=True, high=1.0))
        self.top_k = int(_number(name, given, "top_k", 0, int, 0))
        self.max_new_tokens = int(_number(name, given, "max_new_tokens", 64, int, 1))
        self.max_prompt_tokens: int | None = _number(name, params, "max_prompt_tokens", None, int, 1)
        self.device = self._device(str(given.get("device", "cpu")))
        dtype = str(params.get("dtype", "float32" if self.device == "cpu" else "auto"))
        if dtype not in DTYPES:
            raise AgentError(f"agent {name}: params.dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        self.dtype = dtype
        try:
            self.stored = resolve(config.model) if is_model_name(config.model) else None
            where = str(self.stored.path) if self.stored is not None else config.model
            self.found = find_policy(where, params.get("base_model"))
        except ValueError as exc:  # ModelStoreError too: a model not pulled, or changed since its pull
            raise AgentError(f"agent {name}: {exc}") from None
        self.model, self.tokenizer = self._load()
        self.model_name = str(self.found.path)
        # a store model was just verified file by file: its digest names it (no second hashing)
        self.fingerprint = self.stored.digest if self.stored is not None else fingerprint(self.found.path)
        self.turns = 0
        self.stop: list[str] = []  # strings that end a reply (the local backend's blank line)

    def _device(self, device: str) -> str:
        if device == "cpu":
            return device
        if device == "auto":  # the local backend's default: a GPU when torch sees one
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        if not re.fullmatch(r"cuda(:\d+)?", device):
            raise AgentError(f"agent {self.name}: params.device must be cpu, auto, cuda or cuda:N, not {device!r}")
        import torch

        if not torch.cuda.is_available():
            raise AgentError(f"agent {self.name}: params.device {device}: no CUDA device here "
                             "(torch.cuda.is_available() is false); use device: cpu")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise AgentError(f"agent {self.name}: params.device {device}: only {torch.cuda.device_count()} "
                             "CUDA device(s) here")
        return device

    def _load(self) -> tuple[Any, Any]:
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar in a headless run's output
        try:
            return self._load_weights()
        finally:
            if bars:
                hf_logging.enable_progress_bar()

    def _load_weights(self) -> tuple[Any, Any]:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        found = self.found
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        dtype_key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
        dtype: Any = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
        load: dict[str, Any] = {dtype_key: dtype}
        if self.device != "cpu":  # straight onto the GPU: a large model never sits whole in host memory
            load["device_map"] = self.device
        where = f"{found.path} (found as {found.via})" if found.via != "agents[].model" else str(found.path)
        model: Any
        try:
            if found.kind == "adapter":
                from peft import PeftModel

                assert found.base is not None
                tokenizer_dir = found.path if (found.path / "tokenizer_config.json").is_file() else found.base
                tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
                base = AutoModelForCausalLM.from_pretrained(found.base, **load)
                model = PeftModel.from_pretrained(base, str(found.path), is_trainable=False)
            else:
                tokenizer = AutoTokenizer.from_pretrained(str(found.path))
                model = AutoModelForCausalLM.from_pretrained(str(found.path), **load)
            model.to(self.device)
            model.eval()
        except Exception as exc:  # broad: from_pretrained raises OSError, ValueError, KeyError, safetensors errors...
            what = f"the adapter's base {found.base!r} or the adapter" if found.kind == "adapter" else "the model"
            message = " ".join(str(exc).split())[:400]
            raise AgentError(f"agent {self.name}: cannot load {what} at {where}: {type(exc).__name__}: "
                             f"{message}") from None
        if not getattr(tokenizer, "chat_template", None):
            raise AgentError(f"agent {self.name}: the tokenizer of {where} has no chat template; the policy is "
                             "prompted with one (save the tokenizer with its chat_template)")
        return model, tokenizer

    def endpoint_info(self) -> dict[str, Any]:
        """What run.json records about this agent: the weights it runs (path, kind, base, digest) and how it samples."""
        return {"name": self.name, "backend": self.backend, "model": self.config.model, "endpoint": None,
                "path": str(self.found.path), "kind": self.found.kind, "base_model": self.found.base,
                "found_as": self.found.via, "sha256": self.fingerprint,
                "store": None if self.stored is None else {"name": self.stored.name,
                                                           "gguf_sha256": self.stored.spec.sha256}, "device": self.device, "dtype": self.dtype,
                "sampling": {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                             "max_new_tokens": self.max_new_tokens, "max_prompt_tokens": self.max_prompt_tokens}}

    def prompt(self, ctx: Context) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The messages of this proposal's prompt, and what the reply turn records about them beyond that."""
        return messages(ctx.task, ctx.files, parent_score(ctx), ctx.editable), {}

    def processors(self) -> list[Any]:
        """Logits processors for the next sample (none: the policy samples from its own distribution)."""
        return []

    def propose(self, ctx: Context) -> Proposal | None:
        self.turns += 1
        prompt, about = self.prompt(ctx)
        seed = turn_seed(self.seed, self.turns)
        got = sample(self.model, self.tokenizer, prompt, seed=seed, temperature=self.temperature, top_p=self.top_p,
                     top_k=self.top_k, max_new_tokens=self.max_new_tokens, max_prompt_tokens=self.max_prompt_tokens,
                     device=self.device, stop=self.stop, processors=self.processors())
        args: dict[str, Any] = {"format": FORMAT, "messages": prompt, "completion_ids": got.completion_ids,
                                "logprobs": got.logprobs, **about}
        if got.truncated:
            args["prompt_truncated_tokens"] = got.truncated
        ctx.record_turn(step=self.turns, role="assistant", text=got.text, args=args, tokens_in=got.prompt_tokens,
                        tokens_out=len(got.completion_ids), latency_s=round(got.seconds, 4), model=self.model_name)
        try:
            edits, hypothesis = parse_reply(ctx.task, got.text, ctx.files, ctx.editable)
        except ReplyError as exc:
            return Proposal(hypothesis=f"unparseable reply: {exc}", meta={"policy_seed": seed})
        return Proposal(hypothesis=hypothesis, edits=edits, meta={"policy_seed": seed})

    def close(self) -> None:
        model = getattr(self, "model", None)
        self.model = None
        if model is not None and self.device.startswith("cuda"):
            import torch

            del model
            torch.cuda.empty_cache()


__all__ = ["FORMAT", "PolicyAgent", "PolicyDir", "Sample", "find_policy", "parent_score", "sample", "turn_seed"]
