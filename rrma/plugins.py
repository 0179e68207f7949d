"""One resolver: oracles and agents found by name, built in or installed by another package.

Why it exists: the core runs oracles and agents it does not import. A task names them
(``oracle.kind``, ``agents[].backend``); this module turns the name into a class, importing
the class's module only then, so a run never pays for another bench's dependencies and
``rrma/`` never imports a plug-in package at import time.

A name is looked up in this order:

1. ``package.module:Class`` (any name with a colon) is imported as written. This form needs no
   install metadata: the Ray executor resolves a name on the driver and ships this form to its
   workers (:func:`find_oracle`'s ``target``).
2. The built-in table (:data:`BUILTIN_ORACLES`, :data:`BUILTIN_AGENTS`): the oracles of
   ``oracle/`` and the agents of ``agents/``, as ``module:Class`` strings.
3. Entry points of installed distributions, groups ``rrma.oracles`` and ``rrma.agents``
   (``[project.entry-points."rrma.oracles"] NAME = "package.module:Class"``; docs/plugins.md).

Rules: a plug-in cannot take a built-in's name, and two distributions cannot declare the same
name with different targets: resolving such a name is an :class:`~rrma.contracts.OracleError`
(or :class:`~rrma.contracts.AgentError`) naming both sides; every other name still resolves.
An unknown name is an error naming every known name (built in and installed). A plug-in whose
module fails to import (whatever it raises) is an error naming its distribution and the cause.
What a resolved class makes must be an :class:`~rrma.contracts.Oracle` (or an
:class:`~rrma.contracts.Agent`): :func:`make_oracle` and :func:`make_agent` check it.

Two commands' implementations live in plug-in packages and are reached by name the same way, so the
CLI imports neither: ``rrma-tui train`` (:func:`trainer_command`) and the model store's conversion of a
pulled GGUF (:func:`model_converter`, for ``rrma-tui models pull``).

The audit judge's backends (:data:`BUILTIN_JUDGES`, entry point group ``rrma.judges``) resolve the
same way, to a function making a ``complete(system, user) -> str`` callable; :func:`make_judge`
wraps it in :class:`~rrma.audit.judge.ModelJudge`, and every failure is a
:class:`~rrma.audit.judge.JudgeError` (a ValueError).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from rrma.audit.judge import JudgeError, ModelJudge
from rrma.contracts import Agent, AgentError, Oracle, OracleError
from rrma.task import AgentConfig, TaskConfig

ORACLE_GROUP = "rrma.oracles"
AGENT_GROUP = "rrma.agents"
JUDGE_GROUP = "rrma.judges"

BUILTIN_ORACLES: dict[str, str] = {
    "command": "oracle.command:CommandOracle",
    "noop": "oracle.command:NoopOracle",
    "autoresearch": "oracle.autoresearch:AutoresearchOracle",
    "lean": "oracle.lean:LeanOracle",
    "coq": "oracle.coq:CoqOracle",
    "gsm8k-eval": "oracle.gsm8k_tasks:Gsm8kEvalOracle",
    "gsm8k-recipe": "oracle.gsm8k_tasks:Gsm8kRecipeOracle",
    "gsm8k-prompt": "oracle.gsm8k_tasks:Gsm8kPromptOracle",
}

BUILTIN_AGENTS: dict[str, str] = {
    "random-search": "agents.random_search:RandomSearchAgent",
    "replay": "agents.replay:ReplayAgent",
    "tactic-portfolio": "agents.tactic_portfolio:TacticPortfolioAgent",
    "proof-search": "agents.proof_search:ProofSearchAgent",
    "anthropic": "agents.anthropic_agent:AnthropicAgent",
    "openai": "agents.openai_agent:OpenAIAgent",
    "policy": "agents.policy:PolicyAgent",  # a trained policy (model or LoRA adapter) through transformers
    "local": "agents.local:LocalAgent",  # an untrained instruct model of the model store (smollm2), offline
    # coding agents: an external program in a sandboxed copy of the parent's workspace (agents/coding)
    "claude-code": "agents.coding.agent:ClaudeCodeAgent",
    "codex": "agents.coding.agent:CodexAgent",
    "aider": "agents.coding.agent:AiderAgent",
    "command": "agents.coding.agent:CommandAgent",
}

# `rrma-tui train` (agents/training, the `train` extra: TRL, PEFT); the CLI reaches it through trainer_command()
TRAINER_COMMAND = "agents.training.command:cli_main"

# `rrma-tui models pull` (rrma/models.py): a pulled GGUF made into a Hugging Face directory (the local extra)
MODEL_CONVERTER = "agents.convert"

# the audit judge's backends: a function (model, *, endpoint=None, **options) -> complete(system, user) -> str
BUILTIN_JUDGES: dict[str, str] = {
    "anthropic": "agents.judge:anthropic_completer",
    "openai": "agents.judge:openai_completer",  # any OpenAI-compatible endpoint: OpenAI, vLLM (OPENAI_BASE_URL)
}


@dataclass(frozen=True)
class Plugin:
    """Where a name points: the ``module:Class`` target and who declared it."""

    name: str
    target: str  # "package.module:Class"
    source: str  # "built in", "distribution NAME VERSION", or "module:Class form"


@dataclass(frozen=True)
class _Family:
    """What differs between oracles and agents: the words, the table, the group, the base class."""

    noun: str  # "oracle kind", "agent backend"
    builtin: dict[str, str]
    group: str
    base: type
    error: type[Exception]


_ORACLES = _Family("oracle kind", BUILTIN_ORACLES, ORACLE_GROUP, Oracle, OracleError)
_AGENTS = _Family("agent backend", BUILTIN_AGENTS, AGENT_GROUP, Agent, AgentError)
_JUDGES = _Family("judge backend", BUILTIN_JUDGES, JUDGE_GROUP, object, JudgeError)


def _distribution(point: EntryPoint) -> str:
    dist = point.dist
    return f"distribution {dist.name} {dist.version}" if dist is not None else "an installed distribution"


def _installed(family: _Family) -> dict[str, list[Plugin]]:
    """Entry points of ``family.group``, by name (one distinct target per entry; several on a clash)."""
    found: dict[str, list[Plugin]] = {}
    for point in entry_points(group=family.group):
        plugins = found.setdefault(point.name, [])
        if all(p.target != point.value for p in plugins):
            plugins.append(Plugin(point.name, point.value, _distribution(point)))
    return found


def _known(family: _Family) -> list[str]:
    return sorted(set(family.builtin) | set(_installed(family)))


def _find(family: _Family, name: str) -> Plugin:
    if ":" in name:
        return Plugin(name, name, "module:Class form")
    installed = _installed(family).get(name, [])
    builtin = family.builtin.get(name)
    if builtin is not None:
        others = [p for p in installed if p.target != builtin]
        if others:
            raise family.error(
                f"{family.noun} {name!r} is built in ({builtin}) and also declared by "
                + "; ".join(f"{p.source} ({p.target})" for p in others)
                + f": a plug-in cannot replace a built-in; rename its {family.group} entry point "
                "or name the class as module:Class")
        return Plugin(name, builtin, "built in")
    if len(installed) > 1:
        raise family.error(f"{family.noun} {name!r} is declared by several installed distributions: "
                           + "; ".join(f"{p.source} ({p.target})" for p in installed)
                           + "; uninstall one or name the class as module:Class")
    if not installed:
        raise family.error(f"unknown {family.noun} {name!r}; known: {', '.join(_known(family))} "
                           f"(or package.module:Class; installed packages add names under the "
                           f"{family.group} entry point group)")
    return installed[0]


def _load(family: _Family, plugin: Plugin) -> type[Any]:
    module_name, colon, attr = plugin.target.partition(":")
    where = f"{family.noun} {plugin.name!r} ({plugin.source}, {plugin.target})"
    if not colon or not module_name or not attr:
        raise family.error(f"{where}: expected package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plug-in's import may raise anything; it is a setup problem named here
        raise family.error(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise family.error(f"{where}: module {module_name} has no {attr}")
    if not callable(found):
        raise family.error(f"{where}: {attr} is not a class")
    return found


def _built(family: _Family, name: str, made: Any) -> Any:
    """``made`` if it honours the contract (an instance of the family's base class)."""
    if not isinstance(made, family.base):
        raise family.error(f"{family.noun} {name!r} made a {type(made).__name__}, not an "
                           f"rrma.contracts.{family.base.__name__}")
    return made


def find_oracle(kind: str) -> Plugin:
    """Where oracle ``kind`` points, without importing it (OracleError when unknown or clashing)."""
    return _find(_ORACLES, kind)


def find_agent(backend: str) -> Plugin:
    """Where agent ``backend`` points, without importing it (AgentError when unknown or clashing)."""
    return _find(_AGENTS, backend)


def known_oracles() -> list[str]:
    """Every oracle kind: built in and installed."""
    return _known(_ORACLES)


def known_agents() -> list[str]:
    """Every agent backend: built in and installed."""
    return _known(_AGENTS)


def resolve_oracle(kind: str) -> type[Oracle]:
    """The oracle class for ``kind``, imported now (OracleError naming the problem otherwise)."""
    return _load(_ORACLES, find_oracle(kind))


def resolve_agent(backend: str) -> type[Agent]:
    """The agent class for ``backend``, imported now (AgentError naming the problem otherwise)."""
    return _load(_AGENTS, find_agent(backend))


def make_oracle(kind: str, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> Oracle:
    """An oracle of ``kind`` with ``params`` (a task's ``oracle.params``)."""
    made: Oracle = _built(_ORACLES, kind, resolve_oracle(kind)(params, metric=metric, direction=direction))
    return made


def make_task_oracle(task: TaskConfig) -> Oracle:
    """The oracle a task names (``oracle.kind``, ``oracle.params``, ``metric.name``, ``metric.direction``)."""
    return make_oracle(task.oracle.kind, task.oracle.params, metric=task.metric.name,
                       direction=task.metric.direction)


def make_agent(config: AgentConfig, task: TaskConfig, seed: int = 0) -> Agent:
    """The agent ``config`` names (``backend``), for ``task``."""
    made: Agent = _built(_AGENTS, config.backend, resolve_agent(config.backend)(config, task, seed))
    return made


def find_judge(backend: str) -> Plugin:
    """Where judge ``backend`` points, without importing it (JudgeError when unknown or clashing)."""
    return _find(_JUDGES, backend)


def known_judges() -> list[str]:
    """Every judge backend: built in and installed."""
    return _known(_JUDGES)


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
    factory = _load(_JUDGES, plugin)
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


def trainer_command() -> Callable[[Any], int]:
    """``rrma-tui train``'s implementation (:data:`TRAINER_COMMAND`), imported now; AgentError when the
    ``train`` extra (TRL, PEFT, transformers, datasets) is not installed."""
    module, _, name = TRAINER_COMMAND.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise AgentError(f"rrma-tui train needs the train extra ({exc}); install it: pip install -e '.[train]'") from exc
    return cast(Callable[[Any], int], found)


def model_converter() -> tuple[Callable[[Any, Any], dict[str, Any]], str]:
    """The model store's converter (:data:`MODEL_CONVERTER`'s ``convert_gguf``) and its version, imported now;
    AgentError naming what to install when the ``local`` extra (transformers, gguf, accelerate) is missing."""
    module = importlib.import_module(MODEL_CONVERTER)
    missing = module.missing_requirements()
    if missing:
        raise AgentError(f"converting a pulled model needs {', '.join(missing)}: pip install -e '.[local]'")
    return cast(Callable[[Any, Any], dict[str, Any]], module.convert_gguf), str(module.VERSION)
