"""Where Coq is and what a Coq checker may read: the installation and its load paths, the stripped
files (every original proof) and their compiled forms, and the sandbox every ``coqc``/``coqtop``
process of a checker runs in.

Invariant: a checker's process sees the Coq installation and its load paths read-only, its own
harness-owned scratch read-write, nothing of what :func:`checker_hidden` lists, and no network
(unless ``RRMA_FS_GUARD=off``); agents' processes see none of :func:`answer_paths`.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rrma.contain import sandbox
from rrma.contain.sandbox import Policy
from rrma.contracts import OracleError

INSTALL_HINT = "install Coq (Debian/Ubuntu: `apt-get install coq`; the project tests against coqc 8.16)"


class CoqNotFound(OracleError):
    """``coqc``/``coqtop`` is not on PATH (install Debian's ``coq`` package)."""


def find_coq_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise CoqNotFound(f"{name} not found on PATH: {INSTALL_HINT}")
    return path


def coq_version(coqc: str = "coqc") -> str:
    out = subprocess.run([find_coq_binary(coqc), "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"version (\S+)", out.stdout)
    return match.group(1) if match else out.stdout.strip()


# ----------------------------------------------------------------------------- what Coq may read

# what coqc makes next to a .v file: the proofs (.vo; .vos/.vok are their quick-compile forms) and
# the names and positions of everything in it (.glob); coq_makefile adds a hidden .NAME.aux
COMPILED_SUFFIXES = (".vo", ".vos", ".vok", ".glob")
OBJECT_SUFFIXES = (".vo", ".vos", ".vok")  # what a `Require` loads


def compiled_forms(source: Path | str) -> list[Path]:
    """The files coqc and coq_makefile make from ``source`` (existing or not)."""
    path = Path(source)
    stem = path.with_suffix("")
    return [*(stem.with_suffix(s) for s in COMPILED_SUFFIXES), path.parent / f".{stem.name}.aux"]


def answer_paths(sources: Iterable[Path | str]) -> tuple[Path, ...]:
    """The answers of a Coq strip-and-rediscover task: each stripped ``.v`` (every original proof)
    and its compiled forms, those that exist. No agent's process may read them (``held_out``)."""
    found: list[Path] = []
    for source in sources:
        path = Path(source).resolve()
        for candidate in (path, *compiled_forms(path)):
            if candidate.exists() and candidate not in found:
                found.append(candidate)
    return tuple(found)


@functools.cache
def coq_installation(coqc: str = "coqc") -> tuple[Path, ...]:
    """Where Coq lives: the standard library (``coqc -where``), the core plugins (``COQCORELIB``)
    and the folders of the ``coqc``/``coqtop`` binaries. A checker's sandbox shows them read-only."""
    found: list[Path] = []
    exe = shutil.which(coqc)
    if exe is None:
        return ()
    for name in (coqc, "coqtop"):
        binary = shutil.which(name)
        if binary:
            found += [Path(binary).parent, Path(binary).resolve().parent]
    try:
        where = subprocess.run([exe, "-where"], capture_output=True, text=True, timeout=30).stdout.strip()
        config = subprocess.run([exe, "-config"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        where, config = "", ""
    if where:
        found.append(Path(where))
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key in ("COQLIB", "COQCORELIB") and value.strip():
            found.append(Path(value.strip()))
    return tuple(dict.fromkeys(p.resolve() for p in found if p.exists()))


def coq_where() -> Path | None:
    """The folder ``coqc -where`` names (it holds ``theories`` and ``user-contrib``); None without Coq."""
    return next((p for p in coq_installation() if (p / "theories").is_dir()), None)


def load_path_dirs(coq_args: Sequence[str]) -> tuple[Path, ...]:
    """The folders that ``-Q DIR LP``, ``-R DIR LP`` and ``-I DIR`` in ``coq_args`` give Coq."""
    dirs: list[Path] = []
    args = list(coq_args)
    for i, arg in enumerate(args):
        if arg in ("-Q", "-R", "-I") and i + 1 < len(args):
            dirs.append(Path(args[i + 1]).resolve())
    return tuple(dirs)


def checker_hidden(sources: Iterable[Path | str], coq_args: Sequence[str] = ()) -> tuple[Path, ...]:
    """What a Coq *checker* must not read: each stripped ``.v`` and its ``.glob``/``.aux`` always; its
    ``.vo``/``.vos``/``.vok`` too unless the file lies under a load path the checker gives Coq (the
    standard library, a ``-Q``/``-R``/``-I`` folder), where a context's ``Require`` may need them.

    The tension: a stripped standard-library file's ``.vo`` stays readable to the checker (other
    modules load it), and agents' sandboxes hide it (:func:`answer_paths`)."""
    loadable = (*coq_installation(), *load_path_dirs(coq_args))
    hidden: list[Path] = []
    for path in answer_paths(sources):
        if path.suffix in OBJECT_SUFFIXES and any(d == path.parent or d in path.parents for d in loadable):
            continue
        hidden.append(path)
    return tuple(hidden)


@dataclass(frozen=True)
class CoqSandbox:
    """The sandbox every ``coqc``/``coqtop`` process of a checker runs in.

    A process that runs an agent's proof text sees the Coq installation and its load paths
    read-only, its own scratch directory (harness-owned, never a trial's workspace) read-write,
    nothing of ``hidden`` (the stripped sources: every original proof) nor the user's keys, and no
    network. ``RRMA_FS_GUARD=off`` turns it off; ``require`` (or ``required``) makes a checker that
    cannot be sandboxed refuse to run rather than run bare. ``coqc`` runs under spawn with
    :meth:`policy`; a warm ``coqtop`` is started with it by :func:`rrma.contain.spawn.start`.
    """

    hidden: tuple[Path, ...] = ()
    coq_args: tuple[str, ...] = ()
    required: bool = False

    def policy(self, scratch: Path | str) -> Policy | None:
        """The policy of one process whose scratch is ``scratch``; None when the sandbox is off."""
        if sandbox.mode() == "off":
            return None
        scratch = Path(scratch)
        return Policy(read_only=(*coq_installation(), *load_path_dirs(self.coq_args), scratch),
                      writable=(scratch,), hidden=self.hidden,
                      required=self.required, network=False)
