"""The ``local`` backend: a real instruct model on this machine proposes edits, offline, no key, no server.

Why it exists: the ``policy`` backend runs a policy trained on its own prompt; an instruct model that has
never seen that prompt (SmolLM2-135M-Instruct, pulled once into the model store: ``rrma-tui models pull
smollm2``; docs/models.md) mostly answers it with prose. This backend is the policy backend (the same
loading, seeded sampling, parsing with :func:`rrma.train.prompt.parse_reply`, and the same recorded reply
turn: reply text, sampled token ids, their logprobs, format ``rrma-policy/1``) with what an untrained
instruct model needs, all recorded in the turn (``prompt: rrma-local/1``, ``grammar``, ``stop``):

* **the prompt** (:func:`instruct_messages`, recorded whole as ``messages``): the task and the reply
  format, the editable constants listed with the range the task's ``search_space`` gives each, the
  instruction to reply with nothing else, and one worked exchange on a made-up task (constants ``A``,
  ``B``, ``RATE``, which are not the task's) before the real state. A task without a search space gets the
  same with whole files (``` fences).
* **the reply grammar** (search-space tasks, ``params.grammar``): :class:`GrammarProcessor` masks every
  token that would take the reply outside what the parser reads (:class:`ReplyGrammar`). The model still
  chooses the constants and the values; the invariant is that a reply the grammar lets end always parses.
  The recorded logprobs are of the masked distribution (the one each token was drawn from).
* **defaults fit an untrained model**: ``device: auto`` (CUDA when torch sees a GPU, else the CPU),
  ``temperature: 0.7``, ``top_p: 0.95``, ``max_new_tokens: 64``, a stop at a blank line on a search-space
  task (``params.stop``; only matters with the grammar off), and the prompt cut to the model's context
  window (``max_position_embeddings`` less ``max_new_tokens``; the cut is recorded as
  ``prompt_truncated_tokens``). Every setting is an ``agents[].params`` entry of the task.

``agents[].model`` is a model of the store by name (``smollm2``) or a Hugging Face model directory (or
anything the policy backend takes). The valid rate on the demo, with and without the grammar, is measured
in docs/models.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from agents.policy import PARAMS, PolicyAgent, PolicyParams, parent_score
from rrma.contracts import AgentError, Context
from rrma.task import AgentConfig, TaskConfig
from rrma.train.prompt import NUMBER, constants, system_message, user_message

PROMPT = "rrma-local/1"  # which prompt the turn's messages follow (this module's), recorded beside them
STOP_CONSTANTS = ("\n\n",)

EXAMPLE_CONSTANTS_USER = "score now: 3.2 (lower is better)\nA = 1.0\nB = 4\nRATE = 0.01"
EXAMPLE_CONSTANTS_REPLY = "A = 0.4\nRATE = 0.02"
EXAMPLE_FILES_USER = "score now: 0.41 (higher is better)\n```notes.txt\nBe brief.\n```"
EXAMPLE_FILES_REPLY = "```notes.txt\nBe brief and check each step.\n```"


# ----------------------------------------------------------------------------- the reply grammar


MAX_VALUE_CHARS = 12  # a value the grammar lets the model write: 0.0001234567, -12345.6789: never a run of digits


def number_prefix(text: str) -> bool:
    """Whether ``text`` can still become a number the reply parser reads (:data:`rrma.train.prompt.NUMBER`)
    of at most :data:`MAX_VALUE_CHARS` characters."""
    return len(text) <= MAX_VALUE_CHARS and bool(NUMBER.match(text) or NUMBER.match(text + "0"))


def _choice_text(value: Any) -> str:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else f'"{value}"'


@dataclass(frozen=True)
class ReplyGrammar:
    """The replies :func:`rrma.train.prompt.parse_reply` reads on a task with a search space: one line
    ``LABEL = VALUE`` per changed constant, each constant once; a value is a number of at most
    :data:`MAX_VALUE_CHARS` characters (SmolLM2 otherwise writes 0.18888888... until its tokens run out), or
    for a ``choice`` constant one of its choices as the parser reads it. Text is checked as a prefix."""

    labels: tuple[str, ...]
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()  # label -> the value texts it may take (choice kind)

    @classmethod
    def of(cls, task: TaskConfig) -> ReplyGrammar:
        found = constants(task)
        choices = tuple((c.label, tuple(_choice_text(v) for v in task.search_space[c.key].choices or ()))
                        for c in found if task.search_space[c.key].kind == "choice")
        return cls(tuple(c.label for c in found), choices)

    def _value_open(self, label: str, value: str) -> bool:
        allowed = dict(self.choices).get(label)
        return number_prefix(value) if allowed is None else any(a.startswith(value) for a in allowed)

    def _value_whole(self, label: str, value: str) -> bool:
        allowed = dict(self.choices).get(label)
        return number_prefix(value) and bool(NUMBER.match(value)) if allowed is None else value in allowed

    def line_open(self, line: str, used: set[str]) -> bool:
        """``line`` (no newline) can still become a line of the grammar."""
        for label in self.labels:
            head = f"{label} = "
            if label not in used and (head.startswith(line) or (line.startswith(head)
                                                                and self._value_open(label, line[len(head):]))):
                return True
        return False

    def line_label(self, line: str, used: set[str]) -> str | None:
        """The label of ``line`` if it is a whole line of the grammar, else None."""
        for label in self.labels:
            head = f"{label} = "
            if label not in used and line.startswith(head) and self._value_whole(label, line[len(head):]):
                return label
        return None

    def _lines(self, lines: list[str]) -> set[str] | None:
        used: set[str] = set()
        for line in lines:
            label = self.line_label(line, used)
            if label is None:
                return None
            used.add(label)
        return used

    def prefix(self, text: str) -> bool:
        """``text`` can still become a reply of the grammar."""
        *done, last = text.split("\n")
        used = self._lines(done)
        return used is not None and self.line_open(last, used)

    def complete(self, text: str) -> bool:
        """``text`` is a whole reply (the end-of-sequence token may come now)."""
        body = text[:-1] if text.endswith("\n") else text
        return bool(body) and self._lines(body.split("\n")) is not None


class GrammarProcessor:
    """A logits processor that leaves only the tokens keeping the reply inside a :class:`ReplyGrammar`.

    Of the ``candidates`` likeliest tokens, those whose text extends the reply within the grammar keep
    their logits, and the end-of-sequence tokens keep theirs once the reply is whole; every other token
    gets -inf (all tokens are tried when none of the likeliest fits). The model still chooses which
    constants and which values; temperature and top-p apply after this mask, and the recorded logprobs are
    of the masked distribution (the one the token was drawn from). Fresh for each sample: its first call
    sees the prompt alone, so it knows where the reply starts."""

    def __init__(self, grammar: ReplyGrammar, texts: list[str], eos: list[int], candidates: int = 256) -> None:
        self.grammar = grammar
        self.texts = texts  # each token id's text (token_texts)
        self.eos = eos
        self.candidates = candidates
        self.start: int | None = None

    def _allowed(self, text: str, order: Iterable[int]) -> list[int]:
        allowed = [t for t in order if t not in self.eos and self.grammar.prefix(text + self.texts[t])]
        return allowed + self.eos if self.grammar.complete(text) else allowed

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.start is None:
            self.start = int(input_ids.shape[1])
        masked = torch.full_like(scores, float("-inf"))
        for row in range(scores.shape[0]):
            text = "".join(self.texts[t] for t in input_ids[row, self.start:].tolist())
            top = torch.topk(scores[row], min(self.candidates, scores.shape[1])).indices.tolist()
            allowed = self._allowed(text, top) or self._allowed(text, range(len(self.texts))) or list(self.eos)
            index = torch.tensor(allowed, device=scores.device)
            masked[row, index] = scores[row, index]
        return masked


def token_texts(tokenizer: Any) -> list[str]:
    """Each token id's text, decoded alone (a piece of a multi-byte character decodes to U+FFFD, which no
    reply of the grammar contains)."""
    return list(tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False))


# ----------------------------------------------------------------------------- the prompt


def _ranges(task: TaskConfig) -> list[str]:
    out = []
    for const in constants(task):
        space = task.search_space[const.key]
        kind = space.kind
        if kind in ("uniform", "log_uniform", "int") and space.low is not None and space.high is not None:
            what = {"uniform": "a number", "log_uniform": "a positive number", "int": "an integer"}[kind]
            out.append(f"{const.label}: {what} from {space.low:g} to {space.high:g}")
        elif kind == "choice" and space.choices:
            out.append(f"{const.label}: one of {', '.join(map(repr, space.choices))}")
        else:
            out.append(f"{const.label}")
    return out


def instruct_messages(task: TaskConfig, files: dict[str, str], score: float | None, editable: list[str], *,
                      example: bool = True) -> list[dict[str, str]]:
    """The prompt of an untrained instruct model: task, format, the constants' ranges, one worked exchange
    (unless ``example`` is off)."""
    system = system_message(task)
    if task.search_space:
        system += ("\nThe constants you may change:\n" + "\n".join(_ranges(task))
                   + "\nChange one or two of them. Reply with the lines NAME = value only: no explanation, no code.")
        example_user, example_reply = EXAMPLE_CONSTANTS_USER, EXAMPLE_CONSTANTS_REPLY
    else:
        system += "\nReply with the changed file only: no explanation before or after it."
        example_user, example_reply = EXAMPLE_FILES_USER, EXAMPLE_FILES_REPLY
    shots = [{"role": "user", "content": example_user}, {"role": "assistant", "content": example_reply}]
    return [{"role": "system", "content": system}, *(shots if example else []),
            {"role": "user", "content": user_message(task, files, score, editable)}]


class LocalParams(PolicyParams):
    """``agents[].params`` of the local backend: the policy's, its sampling defaults, and the reply's shape."""

    device: str = Field("auto", pattern=r"^(cpu|auto|cuda(:\d+)?)$")
    """Where the model runs: cpu, auto (cuda when torch sees one), cuda or cuda:N."""
    temperature: float = Field(0.7, ge=0)
    """Sampling temperature (0: greedy)."""
    top_p: float = Field(0.95, gt=0, le=1)
    """Nucleus sampling's mass."""
    stop: list[str] = Field(None)  # type: ignore[arg-type]
    """Strings that end a reply, each non-empty (default: a blank line when the task has a search space, else none)."""
    grammar: bool = Field(True, strict=True)
    """Constrain a reply to the task's constants (a task with a search space)."""
    example: bool = Field(True, strict=True)
    """Show an example reply in the prompt."""

    @field_validator("stop")
    @classmethod
    def _non_empty(cls, stop: list[str]) -> list[str]:
        if not all(stop):
            raise ValueError("each stop string must be non-empty")
        return stop


class LocalAgent(PolicyAgent):
    backend = "local"
    params_model = LocalParams
    params_known = (*PARAMS, "stop", "grammar", "example")
    defaults = {"device": "auto", "temperature": 0.7, "top_p": 0.95, "top_k": 0, "max_new_tokens": 64}

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        params = config.params
        stop = params.get("stop", list(STOP_CONSTANTS) if task.search_space else [])
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
            raise AgentError(f"agent {config.name}: params.stop must be a list of non-empty strings, not {stop!r}")
        for key in ("grammar", "example"):
            if not isinstance(params.get(key, True), bool):
                raise AgentError(f"agent {config.name}: params.{key} must be true or false, not {params[key]!r}")
        super().__init__(config, task, seed)
        self.stop = [str(s) for s in stop]
        self.example = bool(params.get("example", True))
        self.grammar = ReplyGrammar.of(task) if task.search_space and params.get("grammar", True) else None
        eos = self.model.generation_config.eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        self.eos = [int(e) for e in (eos if isinstance(eos, list) else [eos])]
        self.token_texts = token_texts(self.tokenizer) if self.grammar is not None else []
        window = getattr(self.model.config, "max_position_embeddings", None)
        self.context_tokens = int(window) if isinstance(window, int) and window > 0 else None
        if self.max_prompt_tokens is None and self.context_tokens is not None:
            self.max_prompt_tokens = max(1, self.context_tokens - self.max_new_tokens)

    def prompt(self, ctx: Context) -> tuple[list[dict[str, str]], dict[str, Any]]:
        prompt = instruct_messages(ctx.task, ctx.files, parent_score(ctx), ctx.editable, example=self.example)
        return prompt, {"prompt": PROMPT, "stop": self.stop, "grammar": self.grammar is not None}

    def processors(self) -> list[Any]:
        return [] if self.grammar is None else [GrammarProcessor(self.grammar, self.token_texts, self.eos)]

    def endpoint_info(self) -> dict[str, Any]:
        info = super().endpoint_info()
        info["sampling"] = {**info["sampling"], "stop": self.stop, "grammar": self.grammar is not None,
                            "example": self.example}
        info["prompt"] = PROMPT
        info["context_tokens"] = self.context_tokens
        return info


__all__ = ["PROMPT", "GrammarProcessor", "LocalAgent", "ReplyGrammar", "instruct_messages", "number_prefix",
           "token_texts"]
