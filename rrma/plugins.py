"""Plug-ins built: oracles, agents and audit judges made by name, each checked against its contract.

Why it exists: the core runs oracles and agents it does not import. :mod:`rrma.registry` turns a name
(``oracle.kind``, ``agents[].backend``) into a class, importing its module only then; this module builds
one, and checks that what the class made honours the contract: an :class:`~rrma.contracts.Oracle` (or an
:class:`~rrma.contracts.Agent`), else an :class:`~rrma.contracts.OracleError` (or
:class:`~rrma.contracts.AgentError`). The names, the lookup order and the clash rules are the registry's
(docs/plugins.md); they are re-exported here, where the rest of the project has always found them.

Two commands' implementations live in plug-in packages and are reached through the registry by name
(:data:`rrma.registry.BUILTIN_COMMANDS`), so neither the core nor the CLI imports them: ``rrma-tui
train`` (:func:`trainer_command`), ``rrma-tui check`` (:func:`proof_checker`) and the model store's
conversion of a pulled GGUF (:func:`model_converter`, for ``rrma-tui models pull``).

The audit judge's backends (:data:`BUILTIN_JUDGES`, entry point group ``rrma.judges``) resolve the
same way, to a function making a ``complete(system, user) -> str`` callable; :func:`make_judge`
wraps it in :class:`~rrma.audit.judge.ModelJudge`, and every failure is a
:class:`~rrma.audit.judge.JudgeError` (a ValueError).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, cast

from rrma.audit.judge import JudgeError, ModelJudge
from rrma.contracts import Agent, AgentError, Oracle
from rrma.registry import (
    AGENT_GROUP,
    AGENTS,
    BUILTIN_AGENTS,
    BUILTIN_ORACLES,
    COMMANDS,
    JUDGE_GROUP,
    ORACLE_GROUP,
    ORACLES,
    Family,
    Plugin,
    find,
    find_agent,
    find_oracle,
    known,
    known_agents,
    known_oracles,
    load,
    resolve_agent,
    resolve_oracle,
)
from rrma.task import AgentConfig, TaskConfig

# the audit judge's backends: a function (model, *, endpoint=None, **options) -> complete(system, user) -> str
BUILTIN_JUDGES: dict[str, str] = {
    "anthropic": "agents.judge:anthropic_completer",
    "openai": "agents.judge:openai_completer",  # any OpenAI-compatible endpoint: OpenAI, vLLM (OPENAI_BASE_URL)
}

_JUDGES = Family("judge backend", BUILTIN_JUDGES, JUDGE_GROUP, JudgeError)


def _built(family: Family, base: type, name: str, made: Any) -> Any:
    """``made`` if it honours the contract (an instance of the family's base class)."""
    if not isinstance(made, base):
        raise family.error(f"{family.noun} {name!r} made a {type(made).__name__}, not an "
                           f"rrma.contracts.{base.__name__}")
    return made


def make_oracle(kind: str, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> Oracle:
    """An oracle of ``kind`` with ``params`` (a task's ``oracle.params``)."""
    made: Oracle = _built(ORACLES, Oracle, kind, resolve_oracle(kind)(params, metric=metric, direction=direction))
    return made


def make_task_oracle(task: TaskConfig) -> Oracle:
    """The oracle a task names (``oracle.kind``, ``oracle.params``, ``metric.name``, ``metric.direction``)."""
    return make_oracle(task.oracle.kind, task.oracle.params, metric=task.metric.name,
                       direction=task.metric.direction)


def make_agent(config: AgentConfig, task: TaskConfig, seed: int = 0) -> Agent:
    """The agent ``config`` names (``backend``), for ``task``."""
    made: Agent = _built(AGENTS, Agent, config.backend, resolve_agent(config.backend)(config, task, seed))
    return made


def find_judge(backend: str) -> Plugin:
    """Where judge ``backend`` points, without importing it (JudgeError when unknown or clashing)."""
    return find(_JUDGES, backend)


def known_judges() -> list[str]:
    """Every judge backend: built in and installed."""
    return known(_JUDGES)


def make_judge(backend: str, model: str | None, *, endpoint: str | None = None,
               options: dict[str, Any] | None = None) -> ModelJudge:
    """The audit judge (rrma/audit/judge.py) asking ``model`` on ``backend``; off unless a caller makes one.

    ``endpoint`` overrides the backend's URL (else ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``);
    ``options`` go to the backend's completer (timeout_s, max_tokens, retry_attempts, ...). Every
    failure to make it (unknown backend, no model, no key, a bad option) is a :class:`JudgeError`.
    """
    plugin = find_judge(backend)
    if not model:
        raise JudgeError(f"judge backend {backend!r} needs a model (--model M)")
    factory = load(_JUDGES, plugin)
    try:
        complete = factory(model, endpoint=endpoint, **(options or {}))
    except JudgeError:
        raise
    except (AgentError, ValueError, TypeError) as exc:
        raise JudgeError(f"judge backend {backend!r}: {exc}") from exc
    if not callable(complete):
        raise JudgeError(f"judge backend {backend!r} ({plugin.target}) made a {type(complete).__name__}, "
                         "not a complete(system, user) -> str callable")
    return ModelJudge(model, complete, backend=backend)


__all__ = [
    "AGENT_GROUP",
    "BUILTIN_AGENTS",
    "BUILTIN_JUDGES",
    "BUILTIN_ORACLES",
    "JUDGE_GROUP",
    "ORACLE_GROUP",
    "JudgeError",
    "Plugin",
    "find_agent",
    "find_judge",
    "find_oracle",
    "known_agents",
    "known_judges",
    "known_oracles",
    "make_agent",
    "make_judge",
    "make_oracle",
    "make_task_oracle",
    "resolve_agent",
    "resolve_oracle",
]


def _command(name: str, extra: str) -> Any:
    """Command ``name``'s implementation through the registry; AgentError naming what to install when its
    module (or one it needs) is missing."""
    try:
        return load(COMMANDS, find(COMMANDS, name))
    except AgentError as exc:
        if isinstance(exc.__cause__, ImportError):
            raise AgentError(extra.format(exc=exc.__cause__)) from exc
        raise


def trainer_command() -> Callable[[Any], int]:
    """``rrma-tui train``'s implementation, imported now; AgentError when the ``train`` extra (TRL, PEFT,
    transformers, datasets) is not installed."""
    found = _command("train", "rrma-tui train needs the train extra ({exc}); install it: pip install -e '.[train]'")
    return cast(Callable[[Any], int], found)


def proof_checker() -> Callable[[str, Any, str, Any], int]:
    """``rrma-tui check``'s implementation (one proof of one theorem, one JSON verdict), imported now;
    AgentError when it cannot be loaded here."""
    found = _command("check", "proof checking is not available: {exc}")
    return cast(Callable[[str, Any, str, Any], int], found)


def model_converter() -> tuple[Callable[[Any, Any], dict[str, Any]], str]:
    """The model store's converter (``convert_gguf``) and its version, imported now; AgentError naming what to
    install when the ``local`` extra (transformers, gguf, accelerate) is missing."""
    convert = load(COMMANDS, find(COMMANDS, "convert-model"))
    module = sys.modules[convert.__module__]
    missing = module.missing_requirements()
    if missing:
        raise AgentError(f"converting a pulled model needs {', '.join(missing)}: pip install -e '.[local]'")
    return cast(Callable[[Any, Any], dict[str, Any]], convert), str(module.VERSION)
