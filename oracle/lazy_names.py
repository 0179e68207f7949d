"""A package's names, each imported from its own module on first use (PEP 562 ``__getattr__``).

The proof oracles' packages (``oracle.lean``, ``oracle.coq``) keep every name other code uses reachable at
the package (``oracle.coq.CoqOracle``) without importing a module of theirs up front: a sibling import
(``from oracle.coq.cold import ...``) runs the package's ``__init__`` first, and an ``__init__`` that
imported its modules would run back into a module still being imported (an import circle).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any],
               homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are ``namespace``): ``homes`` maps
    each name to the module of the package that defines it; a name is imported on first use and kept."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *homes})

    return getattr_, dir_
