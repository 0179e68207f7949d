"""Oracles: one module per oracle, all behind :class:`oracle.base.Oracle`.

``make_oracle(kind, params, ...)`` resolves a kind from the registry below (imported lazily, so
that a bench never pays for another bench's dependencies). A kind may also be given as
``"package.module:ClassName"`` for an oracle that lives outside this package.
"""

from __future__ import annotations

import importlib
from typing import Any

from oracle.base import EvalContext, Oracle, OracleError

REGISTRY: dict[str, str] = {
    "command": "oracle.command:CommandOracle",
    "noop": "oracle.command:NoopOracle",
    "autoresearch": "oracle.autoresearch:AutoresearchOracle",
    "lean": "oracle.lean:LeanOracle",
    "coq": "oracle.coq:CoqOracle",
    "gsm8k-eval": "oracle.gsm8k_tasks:Gsm8kEvalOracle",
    "gsm8k-recipe": "oracle.gsm8k_tasks:Gsm8kRecipeOracle",
    "gsm8k-prompt": "oracle.gsm8k_tasks:Gsm8kPromptOracle",
}


def resolve(kind: str) -> type[Oracle]:
    """Return the oracle class for ``kind`` or raise OracleError naming the known kinds."""
    target = REGISTRY.get(kind, kind if ":" in kind else None)
    if target is None:
        raise OracleError(f"unknown oracle kind {kind!r}; known kinds: {', '.join(sorted(REGISTRY))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise OracleError(f"oracle {kind!r} cannot be loaded: {exc}") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise OracleError(f"oracle {kind!r}: {module_name} has no {attr}")
    return cls


def make_oracle(kind: str, params: dict[str, Any], *, metric: str = "score", direction: str = "minimize") -> Oracle:
    return resolve(kind)(params, metric=metric, direction=direction)


__all__ = ["REGISTRY", "EvalContext", "Oracle", "OracleError", "make_oracle", "resolve"]
