"""Audits of an accepted Lean proof that the elaborating process cannot fake, and what Lean may read.

Why it exists: the Lean oracle's first audit (``#check`` and ``#print axioms`` on the environment
the proof produced) runs in the same REPL, or the same ``lean`` process, that elaborated the
agent's text. A metaprogram that got past the text rules could have added a constant with the
kernel check turned off (``debug.skipKernelTC``), and then both commands look clean; in the
one-file CLI fallback, messages found by line number could even be printed by the proof itself.
So an accepted proof is audited again elsewhere:

* **Kernel replay** (:class:`KernelReplay`, lean4checker/SafeVerify-style): the checked file
  (context + proof) and the reference file (context + statement closed by ``sorry``) are each
  compiled to ``.olean`` by ``lake env lean -o`` (processes of their own), then
  ``lake exe rrma_replay CHECK.olean REF.olean NAME`` (``lean_project/RrmaReplay.lean``) adds
  every constant of both modules again through the kernel, compares the checked theorem with the
  reference one (kind, type, universe parameters) and collects its axioms in the replayed
  environment. Its one-line JSON report is parsed by :func:`parse_replay_output` and judged by
  :func:`judge_replay` (allow-list of axioms; anything missing or malformed fails closed).
* **Separate audit file** (:func:`audit_file_text`, for the CLI fallback): the audit commands run
  in a file of their own that imports the compiled check module, so nothing the proof printed is
  ever read as the audit's answer.

And what the checking processes may read (:func:`hidden_source_paths`, :func:`lean_guard`): the
stripped files hold the original proofs, so every Lean process of a checker runs in the bubblewrap
sandbox (:mod:`rrma.contain.sandbox`) with no network, writing only the project's ``.lake`` and its
own scratch, with those sources, and the compiled modules no context imports, hidden (an
``include_str`` that slipped past the rules would read an empty file). Agents' own processes see
none of them, imported or not (:func:`answer_paths`, the oracle's ``held_out``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rrma.contain import sandbox

REPLAY_EXE = "rrma_replay"
REPLAY_MODES = ("auto", "require", "off")


class ReplayError(ValueError):
    """The replay tool's output is not a report (missing, not JSON, wrong fields)."""


@dataclass(frozen=True)
class ReplayReport:
    """What ``rrma_replay`` found (see ``lean_project/RrmaReplay.lean``)."""

    theorem: str
    replayed: int  # constants of the checked module added again through the kernel
    kind: str  # "theorem", "def", ..., "missing", "error"
    type_matches: bool
    axioms: list[str] = field(default_factory=list)
    error: str | None = None


def parse_replay_output(stdout: str) -> ReplayReport:
    """The last line of ``stdout`` that is a replay report; raises :class:`ReplayError`."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or obj.get("rrma_replay") != 1:
            continue
        try:
            axioms = obj["axioms"]
            if not isinstance(axioms, list) or not all(isinstance(a, str) for a in axioms):
                raise ReplayError(f"replay report: axioms is not a list of names: {axioms!r:.200}")
            error = obj.get("error")
            return ReplayReport(theorem=str(obj["theorem"]), replayed=int(obj["replayed"]), kind=str(obj["kind"]),
                                type_matches=obj["type_matches"] is True, axioms=list(axioms),
                                error=None if error is None else str(error))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplayError(f"replay report is missing a field: {exc}: {line[:300]}") from exc
    raise ReplayError(f"no replay report in the output: {stdout.strip()[-300:]!r}")


def judge_replay(report: ReplayReport, name: str, allowed_axioms: Iterable[str]) -> tuple[bool, str, bool]:
    """(accepted, reason, cheat) for a replay report about theorem ``name``."""
    allowed = frozenset(allowed_axioms)
    if report.theorem != name:
        return False, f"kernel replay answered about {report.theorem}, not {name}", False
    if report.error is not None:
        text = report.error.splitlines()[0][:200] if report.error else "error"
        kernel = "kernel" in report.error or "unsafe" in report.error
        return False, f"kernel replay failed: {text}", kernel
    if report.replayed < 1:
        return False, "kernel replay replayed nothing", False
    if report.kind != "theorem":
        return False, f"kernel replay: {name} is a {report.kind}, not a theorem", True
    if not report.type_matches:
        return False, f"kernel replay: {name} does not have the original statement's type", True
    if "sorryAx" in report.axioms:
        return False, "kernel replay: uses sorry (sorryAx among its axioms)", True
    bad = [a for a in report.axioms if a not in allowed]
    if bad:
        return False, f"kernel replay: axiom not allowed: {', '.join(bad)}", True
    return True, "accepted", False


def audit_file_text(module: str, name: str) -> str:
    """The CLI fallback's audit, a file of its own: ``#check`` on line 2, ``#print axioms`` on line 3."""
    return f"import {module}\n#check @{name}\n#print axioms {name}\n"


def replay_binary(project_dir: Path | str) -> Path:
    """Where ``lake build`` puts the replay tool."""
    return Path(project_dir) / ".lake" / "build" / "bin" / REPLAY_EXE


BUILD_SUFFIXES = (".olean", ".ilean", ".c", ".trace", ".hash", ".olean.hash", ".ilean.hash")


def _compiled_forms(project: Path, path: Path) -> tuple[str, list[Path]]:
    """(module name, the existing build files of ``path`` in ``project``'s Lake build tree)."""
    try:
        relative = path.relative_to(project).with_suffix("")
    except ValueError:
        return "", []
    found = [build / relative.with_suffix(suffix)
             for build in (project / ".lake" / "build" / "lib" / "lean", project / ".lake" / "build" / "ir")
             for suffix in BUILD_SUFFIXES]
    return ".".join(relative.parts), [p for p in found if p.exists()]


def hidden_source_paths(project_dir: Path | str, source_files: Iterable[str | Path],
                        contexts: Sequence[str] = ()) -> list[Path]:
    """The files Lean must not read while checking: each stripped source, and its compiled module
    (``.olean``, ``.ilean``, ...) unless some context imports that module."""
    project = Path(project_dir).resolve()
    imports = {m.group(1) for ctx in contexts for m in re.finditer(r"^\s*import\s+([\w.]+)", ctx, re.M)}
    hidden: list[Path] = []
    for source in source_files:
        path = Path(source).resolve()
        if not path.is_file():
            continue
        hidden.append(path)
        module, compiled = _compiled_forms(project, path)
        if module not in imports:
            hidden += compiled
    return hidden


def answer_paths(project_dir: Path | str, source_files: Iterable[str | Path]) -> tuple[Path, ...]:
    """What no agent's process may read: each stripped source and *all* its compiled forms, even a
    module some context imports (the checker's sandbox shows that one to Lean; agents' do not)."""
    project = Path(project_dir).resolve()
    found: list[Path] = []
    for source in source_files:
        path = Path(source).resolve()
        if path.is_file():
            found += [path, *_compiled_forms(project, path)[1]]
    return tuple(dict.fromkeys(found))


def elan_home() -> Path:
    """Where elan keeps the toolchains (``$ELAN_HOME``, default ``~/.elan``): ``lake``/``lean`` on PATH
    are elan's proxies, which run the project's pinned toolchain from there."""
    return Path(os.environ.get("ELAN_HOME") or Path.home() / ".elan")


def lean_guard(project_dir: Path | str, hidden: Sequence[Path], writable: Sequence[Path] = ()) -> sandbox.Policy | None:
    """The sandbox every Lean process of a checker (REPL, ``lake env lean``, the replay) runs in:
    the toolchain, the harness and the project read-only, the project's ``.lake`` and ``writable``
    (the checker's own scratch) writable, ``hidden`` and the user's keys absent, no network. None
    only when the sandbox is turned off (``RRMA_FS_GUARD=off``); where it cannot run here, spawn
    (and :class:`oracle.lean.PipeReplTransport`) run bare in mode ``auto`` and refuse in ``require``."""
    if sandbox.mode() == "off":
        return None
    project = Path(project_dir).resolve()
    lake = project / ".lake"
    # the toolchain (elan's `lake`/`lean` proxies and what they run) stays visible even where it lives
    # under the private /tmp
    tools = tuple(Path(exe).resolve().parent for exe in (shutil.which("lake"), shutil.which("lean")) if exe)
    home = elan_home()
    return sandbox.Policy(read_only=(*tools, *((home,) if home.is_dir() else ()), project,
                                     *writable),
                          writable=(*((lake,) if lake.is_dir() else ()), *writable),
                          hidden=tuple(hidden), required=sandbox.mode() == "require",
                          network=False)


__all__ = [
    "REPLAY_EXE",
    "REPLAY_MODES",
    "ReplayError",
    "ReplayReport",
    "answer_paths",
    "audit_file_text",
    "elan_home",
    "hidden_source_paths",
    "judge_replay",
    "lean_guard",
    "parse_replay_output",
    "replay_binary",
]
