"""The ``gsm8k-prompt`` oracle: scores the agents' system prompt on a fixed dev subset.

Why it exists: to let agents improve a system prompt (``system_prompt.txt``) for a chat endpoint
(OpenAI-compatible, Anthropic) or a local model, while the oracle owns the questions, the decoding
settings, the user message (the question alone) and the verifier (:mod:`oracle.gsm8k_scoring`).
The family's invariants are in :mod:`oracle.gsm8k_tasks`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from oracle.gsm8k import (
    POLICY_VERSION,
    STOP_SEQUENCES,
    grade,
    truncate_at_stop,
)
from oracle.gsm8k_data import (
    DataError,
    Problem,
    held_out_paths,
    load_split,
    subset,
)
from oracle.gsm8k_harness import check_grading, oracle_param
from oracle.gsm8k_scoring import grade_pairs
from oracle.gsm8k_settings import Gsm8kPromptParams
from rrma.contain import files
from rrma.contain.files import LinkRefused
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.models import ModelStoreError, model_path
from rrma.trial import Outcome, Status


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True


@dataclass
class _Endpoint:
    provider: str
    model: str
    base_url: str | None
    api_key: str


class Gsm8kPromptOracle(Oracle):
    """Scores the agents' system prompt on a fixed dev subset through a chat endpoint.

    Params: ``provider`` (openai | anthropic | local), ``model`` (required), ``base_url`` (else
    ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``), ``api_key_env`` (name of the variable
    holding the key; OPENAI_API_KEY / ANTHROPIC_API_KEY), ``prompt_file`` (system_prompt.txt),
    ``data``, ``download``, ``split`` (dev), ``limit`` (50), ``subset_seed``, ``mode``,
    ``answer_format``, ``max_tokens`` (512), ``temperature`` (0), ``concurrency`` (4),
    ``timeout_s`` (60), ``max_retries`` (2), ``max_prompt_chars`` (8000), ``stop`` (stop sequences sent
    to the endpoint, at most 4 as OpenAI allows; default ``["\\nQuestion:"]``: a few-shot prompt's next question).

    The user message is the question alone; only the system prompt is the agent's. A local
    OpenAI-compatible server (vLLM) needs no key: with a base URL and no key, ``EMPTY`` is sent.
    ``provider: local`` answers with a model on this machine instead (``model``: a model of the store by
    name, ``smollm2``, or a Hugging Face directory), through the transformers generator of
    :mod:`oracle.gsm8k_gen` (batched, CPU or GPU, loaded once per oracle), ``stop`` added to its stop
    sequences; no network, no key. Its trials run one at a time (one model in memory).
    """

    holds_answers, needs_workspace = True, False  # answers held out; no workspace needed (rrma/declare.py)
    kind: ClassVar[str] = "gsm8k-prompt"
    params_model = Gsm8kPromptParams  # checked when a task is loaded (rrma/declare.py)
    version: ClassVar[str] = f"1+{POLICY_VERSION}"

    def __init__(self, params: dict[str, Any], *, metric: str = "pass_at_1", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.mode, self.answer_format = check_grading(self.params)
        self.provider = oracle_param(self.params, "provider", "openai", str)
        if self.provider not in ("openai", "anthropic", "local"):
            raise OracleError(f"oracle param 'provider' must be openai, anthropic or local, got {self.provider!r}")
        self.prompt_file = oracle_param(self.params, "prompt_file", "system_prompt.txt", str)
        self.split = oracle_param(self.params, "split", "dev", str)
        self.limit = oracle_param(self.params, "limit", 50, int)
        self.concurrency = max(1, oracle_param(self.params, "concurrency", 4, int))
        self.max_tokens = oracle_param(self.params, "max_tokens", 512, int)
        self.temperature = float(oracle_param(self.params, "temperature", 0.0, (int, float)))
        self.max_prompt_chars = oracle_param(self.params, "max_prompt_chars", 8000, int)
        stop = oracle_param(self.params, "stop", ["\nQuestion:"], list)
        if not all(isinstance(x, str) and x.strip() for x in stop) or len(stop) > 4:
            raise OracleError(f"oracle param 'stop' must be a list of at most 4 non-blank strings, got {stop!r}")
        self.stop: list[str] = list(stop)
        self._problems: list[Problem] | None = None
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._generator: Any = None  # provider local: the loaded model (oracle.gsm8k_gen)
        self._generator_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_client_lock", None)  # neither the locks, the SDK client nor a loaded model pickles
        state.pop("_generator_lock", None)
        state["_client"] = None
        state["_generator"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client_lock = threading.Lock()
        self._generator_lock = threading.Lock()

    def endpoint(self) -> _Endpoint:
        """Resolve model, URL and key from params and the environment, or raise OracleError."""
        openai = self.provider == "openai"
        model = self.params.get("model")
        base_url = self.params.get("base_url") or os.environ.get("OPENAI_BASE_URL" if openai else "ANTHROPIC_BASE_URL")
        key_env = self.params.get("api_key_env") or ("OPENAI_API_KEY" if openai else "ANTHROPIC_API_KEY")
        key = os.environ.get(str(key_env), "")
        if not model:
            raise OracleError("gsm8k-prompt needs oracle param 'model' (the chat model to prompt)")
        if self.provider == "local":
            try:  # a store name: its verified directory (ModelMissing names the pull command)
                return _Endpoint("local", str(model), model_path(str(model)), "")
            except ModelStoreError as exc:
                raise OracleError(str(exc)) from None
        if not key and not (openai and base_url):
            where = "set OPENAI_BASE_URL (or params.base_url) for a local OpenAI-compatible server, or " if openai else ""
            raise OracleError(
                f"gsm8k-prompt ({self.provider}) has no endpoint: {where}set {key_env} to an API key"
            )
        return _Endpoint(self.provider, str(model), base_url, key or "EMPTY")

    def problems(self) -> list[Problem]:
        if self._problems is None:
            try:
                problems = load_split(self.split, self.params.get("data"), download=bool(self.params.get("download")))
            except DataError as exc:
                raise OracleError(str(exc)) from None
            self._problems = subset(problems, self.limit, oracle_param(self.params, "subset_seed", None, int))
        return self._problems

    def held_out(self) -> tuple[Path, ...]:
        """Every GSM8K split file and download cache: a coding agent writing the prompt must not read
        the dev answers it is scored on (:func:`oracle.gsm8k_data.held_out_paths`)."""
        return held_out_paths(self.params.get("data"))

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        ep = self.endpoint()
        problems = self.problems()
        return {"policy": POLICY_VERSION, "provider": ep.provider, "model": ep.model, "base_url": ep.base_url,
                "split": self.split, "questions": len(problems), "indices_head": [p.idx for p in problems[:10]]}

    def _make_client(self, ep: _Endpoint) -> Any:
        timeout = float(oracle_param(self.params, "timeout_s", 60.0, (int, float)))
        retries = int(oracle_param(self.params, "max_retries", 2, int))
        if ep.provider == "openai":
            import openai

            return openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, timeout=timeout, max_retries=retries)
        import anthropic

        return anthropic.Anthropic(base_url=ep.base_url, api_key=ep.api_key, timeout=timeout, max_retries=retries)

    def ask(self, system_prompt: str, question: str) -> tuple[str, int, int]:
        """One chat call: (completion text, input tokens, output tokens)."""
        ep = self.endpoint()
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client(ep)
            client = self._client
        if ep.provider == "openai":
            messages = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
            messages.append({"role": "user", "content": question})
            stop: dict[str, Any] = {"stop": self.stop} if self.stop else {}
            resp = client.chat.completions.create(model=ep.model, messages=messages, max_tokens=self.max_tokens,
                                                  temperature=self.temperature, **stop)
            text = truncate_at_stop(resp.choices[0].message.content or "", self.stop)
            usage = resp.usage
            return text, getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0
        kwargs: dict[str, Any] = {"system": system_prompt} if system_prompt.strip() else {}
        if _accepts(client.messages.create, "temperature"):  # recent SDKs dropped the parameter
            kwargs["temperature"] = self.temperature
        if self.stop:
            kwargs["stop_sequences"] = self.stop
        resp = client.messages.create(model=ep.model, max_tokens=self.max_tokens,
                                      messages=[{"role": "user", "content": question}], **kwargs)
        text = truncate_at_stop("".join(getattr(block, "text", "") for block in resp.content), self.stop)
        return text, resp.usage.input_tokens, resp.usage.output_tokens

    def evaluate(self, ctx: EvalContext) -> Outcome:
        started = time.monotonic()
        try:  # the trial's file, never read through a link (4 bytes a character at most in UTF-8)
            raw = files.read_bytes(Path(ctx.trial_dir).absolute(), self.prompt_file, limit=4 * self.max_prompt_chars)
            system_prompt = raw.decode("utf-8")
        except FileNotFoundError:
            return Outcome(status=Status.invalid, feedback=f"{self.prompt_file} is missing from the workspace")
        except LinkRefused as exc:
            return Outcome(status=Status.rejected, feedback=f"refused: {exc}")
        except UnicodeDecodeError:
            return Outcome(status=Status.invalid, feedback=f"{self.prompt_file} is not UTF-8 text")
        except ValueError:
            return Outcome(status=Status.invalid, feedback=(
                f"{self.prompt_file} has more than {4 * self.max_prompt_chars} bytes; the limit is "
                f"{self.max_prompt_chars} characters"))
        if len(system_prompt) > self.max_prompt_chars:
            return Outcome(status=Status.invalid, feedback=(
                f"{self.prompt_file} has {len(system_prompt)} characters; the limit is {self.max_prompt_chars}"))
        problems = self.problems()
        if self.provider == "local":
            return self._evaluate_local(ctx, system_prompt, problems, started)
        completions: list[str | None] = [None] * len(problems)
        errors: list[str] = []
        tokens = [0, 0]
        done = [0, 0]  # answered (a failed call counts: it is graded as no answer), correct
        lock = threading.Lock()
        every = max(1, len(problems) // 50)  # at most ~50 progress samples a trial

        def one(i: int) -> None:
            if ctx.cancel.is_set():
                return
            try:
                text, tin, tout = self.ask(system_prompt, problems[i].question)
            except Exception as exc:  # SDK errors (connection, status, timeout): counted, reported below
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                text, tin, tout = "", 0, 0
            else:
                with lock:
                    completions[i] = text
            hit = grade(text, problems[i].gold, self.mode, answer_format=self.answer_format).correct
            with lock:
                tokens[0] += tin
                tokens[1] += tout
                done[0] += 1
                done[1] += hit
                if done[0] % every == 0 or done[0] == len(problems):
                    # items/hits feed the loop's SPRT early abort (rrma/run/abort.py)
                    ctx.progress({"phase": "eval", "answered": done[0], "of": len(problems), "items": done[0],
                                  "hits": done[1], "frac": round(done[0] / len(problems), 4)})

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            list(pool.map(one, range(len(problems))))
        seconds = time.monotonic() - started
        if ctx.cancel.is_set():
            return Outcome(status=Status.aborted, feedback="cancelled: the run is stopping", seconds=seconds)
        if errors and len(errors) * 2 > len(problems):
            return Outcome(status=Status.crash, seconds=seconds,
                           feedback=f"{len(errors)}/{len(problems)} endpoint calls failed; first: {errors[0]}")
        # a failed call counts as an empty completion (no_answer), so the score never skips questions
        pairs = [(p, c if c is not None else "") for p, c in zip(problems, completions, strict=True)]
        report = grade_pairs(pairs, mode=self.mode, answer_format=self.answer_format)
        metrics = report.metrics()
        metrics.update(tokens_in=tokens[0], tokens_out=tokens[1], endpoint_errors=len(errors))
        lines = report.lines()
        if errors:
            lines.append(f"endpoint_errors: {len(errors)} (first: {errors[0]})")
        return Outcome(status=Status.ok, score=metrics["pass_at_1"], metrics=metrics, feedback="\n".join(lines),
                       seconds=seconds)

    def _evaluate_local(self, ctx: EvalContext, system_prompt: str, problems: list[Problem],
                        started: float) -> Outcome:
        """``provider: local``: the questions through the model on this machine, in batches."""
        from oracle.gsm8k_gen import GenConfig, GenerationError, make_generator

        with self._generator_lock:  # one model, one trial at a time
            if ctx.cancel.is_set():
                return Outcome(status=Status.aborted, feedback="cancelled: the run is stopping")
            try:
                if self._generator is None:
                    config = GenConfig(max_new_tokens=self.max_tokens, temperature=self.temperature,
                                       answer_format=self.answer_format, batch_size=8,
                                       stop=tuple(dict.fromkeys((*STOP_SEQUENCES, *self.stop))))
                    self._generator = make_generator("transformers", str(self.endpoint().base_url), config)
                self._generator.config.system_prompt = system_prompt

                def batch(done: int, total: int) -> None:
                    ctx.progress({"phase": "eval", "answered": done, "of": total, "frac": round(done / total, 4)})

                texts = [samples[0] for samples in self._generator.generate([p.question for p in problems],
                                                                             on_batch=batch)]
            except GenerationError as exc:
                return Outcome(status=Status.crash, feedback=f"the local model failed: {exc}",
                               seconds=time.monotonic() - started)
        report = grade_pairs(list(zip(problems, texts, strict=True)), mode=self.mode, answer_format=self.answer_format)
        metrics = report.metrics()
        metrics.update(tokens_in=0, tokens_out=0, endpoint_errors=0)
        return Outcome(status=Status.ok, score=metrics["pass_at_1"], metrics=metrics, feedback="\n".join(report.lines()),
                       seconds=time.monotonic() - started)

    def close(self) -> None:
        self._generator = None
        client, self._client = self._client, None
        if client is not None:
            # the SDK client closes its connection pool: a socket that is already gone raises OSError (nothing
            # to release); anything else is a bug the run's end records (the loop notes a failing close)
            with contextlib.suppress(OSError):
                client.close()
