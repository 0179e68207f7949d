"""The plug-in registry: a name (``oracle.kind``, ``agents[].backend``, a command) to its class, and what it declares.

Why it exists: the core runs oracles, agents and two commands' implementations it does not import. This
module turns a name into the class (or function) it names, importing the class's module only then, so a run
never pays for another bench's dependencies and ``rrma/`` never imports a plug-in package at import time.
It imports nothing of the project but :mod:`rrma.declare`, so the task table (rrma/task.py) can ask it
what a task's plug-ins declare (:func:`oracle_class`, :func:`section_owners`); building plug-ins, with the
contracts' checks, is :mod:`rrma.plugins`.

A name is looked up in this order:

1. ``package.module:Class`` (any name with a colon) is imported as written. This form needs no
   install metadata: the Ray executor resolves a name on the driver and ships this form to its
   workers (:func:`find_oracle`'s ``target``).
2. The built-in table (:data:`BUILTIN_ORACLES`, :data:`BUILTIN_AGENTS`, :data:`BUILTIN_COMMANDS`): the
   oracles of ``oracle/``, the agents of ``agents/`` and the commands they implement, as ``module:Class``
   strings. The table is the one place where the core names them.
3. Entry points of installed distributions, groups ``rrma.oracles``, ``rrma.agents`` and ``rrma.commands``
   (``[project.entry-points."rrma.oracles"] NAME = "package.module:Class"``; docs/plugins.md).

Rules: a plug-in cannot take a built-in's name, and two distributions cannot declare the same
name with different targets: resolving such a name is an :class:`OracleError` (or :class:`AgentError`)
naming both sides; every other name still resolves. An unknown name is an error naming every known name
(built in and installed). A plug-in whose module fails to import (whatever it raises) is an error naming
its distribution and the cause.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pydantic import BaseModel

from rrma.declare import Declares, OracleDeclares


class OracleError(Exception):
    """The oracle cannot run at all here (missing toolchain, bad params, unknown kind): a setup problem."""


class AgentError(Exception):
    """An agent cannot run (missing key, unknown backend, exhausted budget): a setup problem."""


ORACLE_GROUP = "rrma.oracles"
AGENT_GROUP = "rrma.agents"
COMMAND_GROUP = "rrma.commands"
JUDGE_GROUP = "rrma.judges"

BUILTIN_ORACLES: dict[str, str] = {
    "command": "oracle.command:CommandOracle",
    "noop": "oracle.command:NoopOracle",
    "autoresearch": "oracle.autoresearch:AutoresearchOracle",
    "lean": "oracle.lean:LeanOracle",
    "coq": "oracle.coq:CoqOracle",
    "gsm8k-eval": "oracle.gsm8k_eval:Gsm8kEvalOracle",
    "gsm8k-recipe": "oracle.gsm8k_recipe:Gsm8kRecipeOracle",
    "gsm8k-prompt": "oracle.gsm8k_prompt:Gsm8kPromptOracle",
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

# The implementations of commands the CLI runs but does not import (module:function):
# train: `rrma-tui train` (agents/training, the `train` extra: TRL, PEFT);
# check: `rrma-tui check {lean,coq}`, one proof of one theorem, one JSON verdict (oracle/check_cli.py);
# convert-model: `rrma-tui models pull`'s conversion of a pulled GGUF into a Hugging Face directory (the local extra)
BUILTIN_COMMANDS: dict[str, str] = {
    "train": "agents.training.command:cli_main",
    "check": "oracle.check_cli:run_check",
    "convert-model": "agents.convert:convert_gguf",
}


@dataclass(frozen=True)
class Plugin:
    """Where a name points: the ``module:Class`` target and who declared it."""

    name: str
    target: str  # "package.module:Class"
    source: str  # "built in", "distribution NAME VERSION", or "module:Class form"


@dataclass(frozen=True)
class Family:
    """What differs between oracles, agents, commands and judges: the words, the table, the group, the error."""

    noun: str  # "oracle kind", "agent backend"
    builtin: dict[str, str]
    group: str
    error: type[Exception]


ORACLES = Family("oracle kind", BUILTIN_ORACLES, ORACLE_GROUP, OracleError)
AGENTS = Family("agent backend", BUILTIN_AGENTS, AGENT_GROUP, AgentError)
COMMANDS = Family("command", BUILTIN_COMMANDS, COMMAND_GROUP, AgentError)


def _distribution(point: EntryPoint) -> str:
    dist = point.dist
    return f"distribution {dist.name} {dist.version}" if dist is not None else "an installed distribution"


# What the installed distributions declare, per group, as of the folders on sys.path then: (the folders and
# their modification times, the entry points by name). Reading every distribution's metadata costs 10-20 ms in
# a large environment and a task's load, each run's start and each trial's audit look names up; the folders'
# times say when it must be read again (installing or removing a distribution adds or removes a folder in
# one), as importlib.metadata's own listing of a folder is kept until that folder changes.
_SCANNED: dict[str, tuple[tuple[tuple[str, int], ...], dict[str, list[Plugin]]]] = {}


def _search_path() -> tuple[tuple[str, int], ...]:
    """Each folder on ``sys.path`` (absolute: ``""`` is the working directory) with its modification time
    (-1 when it is not there)."""
    stamped = []
    for entry in sys.path:
        folder = os.path.abspath(entry or ".")
        try:
            stamped.append((folder, os.stat(folder).st_mtime_ns))
        except OSError:
            stamped.append((folder, -1))
    return tuple(stamped)


def installed_plugins(family: Family) -> dict[str, list[Plugin]]:
    """Entry points of ``family.group``, by name (one distinct target per entry; several on a clash). Read again
    only when a folder on ``sys.path`` has changed since the last read (:data:`_SCANNED`)."""
    where = _search_path()
    scanned = _SCANNED.get(family.group)
    if scanned is None or scanned[0] != where:
        found: dict[str, list[Plugin]] = {}
        for point in entry_points(group=family.group):
            plugins = found.setdefault(point.name, [])
            if all(p.target != point.value for p in plugins):
                plugins.append(Plugin(point.name, point.value, _distribution(point)))
        scanned = _SCANNED[family.group] = (where, found)
    return {name: list(plugins) for name, plugins in scanned[1].items()}


def known(family: Family) -> list[str]:
    return sorted(set(family.builtin) | set(installed_plugins(family)))


def find(family: Family, name: str) -> Plugin:
    if ":" in name:
        return Plugin(name, name, "module:Class form")
    installed = installed_plugins(family).get(name, [])
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
        raise family.error(f"unknown {family.noun} {name!r}; known: {', '.join(known(family))} "
                           f"(or package.module:Class; installed packages add names under the "
                           f"{family.group} entry point group)")
    return installed[0]


def load(family: Family, plugin: Plugin) -> type[Any]:
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


def find_oracle(kind: str) -> Plugin:
    """Where oracle ``kind`` points, without importing it (OracleError when unknown or clashing)."""
    return find(ORACLES, kind)


def find_agent(backend: str) -> Plugin:
    """Where agent ``backend`` points, without importing it (AgentError when unknown or clashing)."""
    return find(AGENTS, backend)


def known_oracles() -> list[str]:
    """Every oracle kind: built in and installed."""
    return known(ORACLES)


def known_agents() -> list[str]:
    """Every agent backend: built in and installed."""
    return known(AGENTS)


def resolve_oracle(kind: str) -> type[Any]:
    """The oracle class for ``kind``, imported now (OracleError naming the problem otherwise)."""
    return load(ORACLES, find_oracle(kind))


def resolve_agent(backend: str) -> type[Any]:
    """The agent class for ``backend``, imported now (AgentError naming the problem otherwise)."""
    return load(AGENTS, find_agent(backend))


def resolve_command(name: str) -> Any:
    """The function implementing command ``name`` (:data:`BUILTIN_COMMANDS`), imported now (AgentError
    naming the problem otherwise; its ``__cause__`` is the import's own error)."""
    return load(COMMANDS, find(COMMANDS, name))


# ----------------------------------------------------------------------------- what plug-ins declare


def oracle_class(kind: str) -> type[OracleDeclares] | None:
    """The oracle class ``kind`` names, for what it declares; None when the name does not resolve here (the
    run's start reports why) or names something that declares nothing (not an Oracle)."""
    try:
        found = resolve_oracle(kind)
    except OracleError:
        return None
    return found if isinstance(found, type) and issubclass(found, OracleDeclares) else None


def agent_class(backend: str) -> type[Declares] | None:
    """The agent class ``backend`` names, for what it declares; None as for :func:`oracle_class`."""
    try:
        found = resolve_agent(backend)
    except AgentError:
        return None
    return found if isinstance(found, type) and issubclass(found, Declares) else None


def declared(family: Family) -> Iterator[tuple[str, type[Declares]]]:
    """(name, class) of each plug-in of ``family`` that resolves here, in name order, importing each as it
    goes (a plug-in that fails to import is left out: naming it in a task reports why)."""
    for name in known(family):
        cls = oracle_class(name) if family is ORACLES else agent_class(name)
        if cls is not None:
            yield name, cls


def section_owners(family: Family, section: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """(name, model) of each plug-in of ``family`` that declares ``section``, lazily (asked only about a key the
    task's own plug-in does not declare; a caller that stops early imports no more plug-ins)."""
    for name, cls in declared(family):
        if section in cls.sections:
            yield name, cls.sections[section]


__all__ = [
    "AGENTS",
    "AGENT_GROUP",
    "BUILTIN_AGENTS",
    "BUILTIN_COMMANDS",
    "BUILTIN_ORACLES",
    "COMMANDS",
    "COMMAND_GROUP",
    "JUDGE_GROUP",
    "ORACLES",
    "ORACLE_GROUP",
    "AgentError",
    "Family",
    "OracleError",
    "Plugin",
    "agent_class",
    "declared",
    "find",
    "find_agent",
    "find_oracle",
    "known",
    "known_agents",
    "known_oracles",
    "load",
    "oracle_class",
    "resolve_agent",
    "resolve_command",
    "resolve_oracle",
    "section_owners",
]
