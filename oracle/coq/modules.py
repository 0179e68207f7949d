"""The target's own module: a stripped theorem's original lives on in its file's compiled module
(``Coq.Init.Peano`` holds ``plus_n_Sm``).

A session that has that module loaded can reach the original by any name (short, qualified, through a
module alias or a notation), so the checker judges a theorem only in a session where the module is
*not* loaded: Coq's prelude is left out for a file the prelude loads (its context's own ``Require``s
load what it needs, as when the file was compiled), a preload that reaches the module is dropped for
that file, and ``Print Libraries`` is read after the context and again after the proof. Invariant:
:func:`module_refusal` names the refusal whenever the session's libraries include the task's module.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from oracle.coq.sandboxing import CoqNotFound, coq_where, find_coq_binary
from oracle.proof_common import TheoremTask

_LOADED = re.compile(r"Loaded library files:(?P<body>.*?)(?:\n\s*\n|<prompt>|\Z)", re.S)


def loaded_libraries(text: str) -> list[str]:
    """The module names a ``Print Libraries.`` reply lists (empty when it lists none: Coq then writes
    ``Loaded library files: none``, as after a ``-noinit`` preload that failed to load)."""
    match = _LOADED.search(text)
    if match is None or match.group("body").strip() == "none":
        return []
    return [line.strip() for line in match.group("body").splitlines() if re.fullmatch(r"\s*[\w'.]+\s*", line)]


def logical_module(source: Path | str, coq_args: Sequence[str] = ()) -> str:
    """The logical name a ``Require`` loads ``source`` by: ``Coq.X.Y`` under the standard library,
    ``A.B`` under ``user-contrib``, ``LP.X`` under a ``-Q``/``-R DIR LP`` folder; "" when none
    (a file outside every load path cannot be loaded, so its original cannot be reached)."""
    path = Path(source).resolve()
    roots: list[tuple[Path, str]] = []
    args = list(coq_args)
    for i, arg in enumerate(args):
        if arg in ("-Q", "-R") and i + 2 < len(args):
            roots.append((Path(args[i + 1]).resolve(), args[i + 2]))
    where = coq_where()
    if where is not None:
        roots += [(where / "theories", "Coq"), (where / "user-contrib", "")]
    for root, prefix in roots:
        if root == path.parent or root in path.parents:
            parts = [*(prefix.split(".") if prefix else []), *path.relative_to(root).with_suffix("").parts]
            return ".".join(parts)
    return ""


@functools.cache
def libraries_loaded_by(preamble: str, noinit: bool = False, coq_args: tuple[str, ...] = ()) -> frozenset[str]:
    """The modules a fresh ``coqtop`` has loaded after ``preamble`` (the prelude: ``preamble=""``);
    empty when Coq cannot tell (then nothing is assumed unreachable)."""
    try:
        coqtop = find_coq_binary("coqtop")
        out = subprocess.run([coqtop, "-q", *(["-noinit"] if noinit else []), *coq_args],
                             input=preamble + "\nPrint Libraries.\n", capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired, CoqNotFound):
        return frozenset()
    return frozenset(loaded_libraries(out.stdout))


def attach_modules(tasks: Sequence[TheoremTask], coq_args: Sequence[str] = ()) -> list[TheoremTask]:
    """``tasks`` with ``module`` (the source file's logical name) and ``noinit`` (check without the
    prelude, which loads that module) filled in."""
    prelude = libraries_loaded_by("", False, tuple(coq_args))
    out = []
    modules: dict[str, str] = {}
    for task in tasks:
        if task.source_file not in modules:
            modules[task.source_file] = logical_module(task.source_file, coq_args) if task.source_file else ""
        module = modules[task.source_file]
        out.append(replace(task, module=module, noinit=bool(module) and module in prelude))
    return out


# Coq names the module a session defines `Top` unless told (`coqtop -top M`); a stdlib file run under another name
# can fail where it compiled: `Classes/CMorphisms.v` compiles as `Coq.Classes.CMorphisms` only; as `Top` its
# obligations' `transitivity` fails ("The relation R is not a declared transitive relation") and 20 of its 28
# theorems could not start (round eight). As its own module, the session also cannot load the target's compiled
# module at all ("Cannot load a library with the same name as the current one"). A switch for tests: False runs
# every context as `Top` again
TOP_MODULE = True


def session_args(task: TheoremTask, coq_args: Sequence[str] = ()) -> tuple[str, ...]:
    """The ``coqtop`` arguments a theorem's context runs with, in the checker and in an agent's session alike:
    without the prelude when the prelude loads the target's module (:func:`attach_modules`), and as that
    module (``-top``) where it has a logical name."""
    top = ("-top", task.module) if TOP_MODULE and task.module else ()
    return (*(("-noinit",) if task.noinit else ()), *top, *coq_args)


def module_refusal(task: TheoremTask, loaded: Iterable[str]) -> str:
    """Why the checker will not judge ``task`` in a session that has ``loaded`` ("" when it may)."""
    if task.module and task.module in set(loaded):
        return (f"the checker's session has {task.module} loaded, which holds the original of {task.name}: "
                "refused (the target's own module must not be loaded)")
    return ""
