"""``rrma-tui --headless bench coq``: strip-and-rediscover on the Coq suite (or ``--source FILE``).

Strips every theorem of ``benches/coq/*.v`` (or of the user's files given with ``--source``),
then runs :func:`benches.proofs.run_proof_bench`: a research-loop run under the per-theorem policy
whose oracle is ``coq`` (:class:`oracle.coq.CoqOracle`: the warm coqtop pool; ``--cold`` uses one
``coqc`` per check) and whose agent is, by default, the proof-state search (``--agent search``, with
CoqHammer's tactics where ``libcoq-hammer`` is installed; ``--agent portfolio``: the offline
tactic-portfolio provers sharing one blackboard).
Coq's processes run sandboxed without the stripped files; agents' processes see neither those nor
their compiled forms. Exit 2 when Coq is missing or a file cannot be parsed. Also runnable alone:
``python -m benches.coq.bench --help``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from benches.proofs import AGENT_BACKENDS, add_proof_arguments, run_proof_bench, standalone_main
from oracle.coq.sandboxing import coq_where, find_coq_binary
from oracle.proof_common import DEFAULT_SETTING, SETTINGS, TheoremTask, theorem_keys
from oracle.strip_coq import CoqSyntaxError, Skipped, strip_coq_file_with_notes
from rrma.contracts import OracleError
from rrma.text import SafeConsole

HERE = Path(__file__).resolve().parent
SUITE = ("arith.v", "lists.v", "logic.v", "induction.v")
HAMMER_PRELOAD = "From Hammer Require Import Tactics.\n"
# with --hammer-seconds: the plugin too (`hammer` calls the ATPs; the proof keeps its reconstruction)
HAMMER_PLUGIN_PRELOAD = "From Hammer Require Import Hammer.\n"
DEFAULT_AGENT = "search"  # without --agent or --backend: the proof-state search (benches.proofs.AGENT_BACKENDS)
SEARCH_BACKEND = AGENT_BACKENDS["search"][0]  # the agent --hammer's settings are for (proof-search)
BUILD_ENV = "RRMA_LIBRARY_INDEX_BUILD"  # "0": --library-index defaults to off (the suite sets it: tests/conftest.py)
console = SafeConsole(stderr=True, emoji=False)  # checker messages print literally and inert


def hammer_installed() -> bool:
    """Whether CoqHammer's tactics are installed where Coq finds them (Debian's ``libcoq-hammer``:
    ``$(coqc -where)/user-contrib/Hammer/Tactics/Tactics.vo``)."""
    where = coq_where()
    return where is not None and (where / "user-contrib" / "Hammer" / "Tactics" / "Tactics.vo").is_file()


def suite_files() -> list[Path]:
    return [HERE / name for name in SUITE]


SHOW_SKIPPED = 5  # skipped theorems named one per line on stderr; the rest are counted


def load_tasks_with_notes(sources: list[Path] | None) -> tuple[list[TheoremTask], list[Skipped]]:
    """Every readable theorem of the given files and directories (default: the bench suite), in
    file order, and a note for each theorem the stripper skipped (its proof cannot be read exactly).

    Raises CoqSyntaxError for a file that cannot be read or cut into sentences, and for a file
    named on its own in which not one theorem can be read (in a directory, such a file only adds notes).
    """
    tasks: list[TheoremTask] = []
    skipped: list[Skipped] = []
    for source in sources or suite_files():
        walked = source.is_dir()
        for path in sorted(source.rglob("*.v")) if walked else [source]:
            found, notes = strip_coq_file_with_notes(path)
            if notes and not found and not walked:
                first = notes[0]
                raise CoqSyntaxError(f"{path}: no theorem can be read ({len(notes)} skipped; line {first.line}: "
                                     f"{first.keyword} {first.name} {first.reason})")
            tasks.extend(found)
            skipped.extend(notes)
    return tasks, skipped


def load_tasks(sources: list[Path] | None, *, say: Callable[[str], None] | None = None) -> list[TheoremTask]:
    """:func:`load_tasks_with_notes`, telling ``say`` (default: a line on stderr) about the skipped
    theorems: the first :data:`SHOW_SKIPPED` one per line, then how many more."""
    tasks, skipped = load_tasks_with_notes(sources)
    tell = say or (lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True))
    for note in skipped[:SHOW_SKIPPED]:
        tell(f"bench coq: {note}")
    if len(skipped) > SHOW_SKIPPED:
        tell(f"bench coq: {len(skipped) - SHOW_SKIPPED} more theorems skipped ({len(skipped)} in all, "
             f"{len(tasks)} read)")
    return tasks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_proof_arguments(parser)
    parser.add_argument("--cold", action="store_true", default=None,
                        help="check with one coqc process per proof instead of the warm coqtop pool")
    parser.add_argument("--setting", choices=list(SETTINGS), default=None,
                        help=f"what an agent sees (default {DEFAULT_SETTING}): rediscover (earlier theorems' "
                             "statements, no human proof of the file) or library (the file before the theorem "
                             "as written, earlier proofs included: Tactician's setting)")
    parser.add_argument("--hammer", action=argparse.BooleanOptionalAction, default=None,
                        help=f"load CoqHammer's tactics after every theorem's context, before its statement "
                             f"({HAMMER_PRELOAD.strip()!r}, Debian's libcoq-hammer) and let the search agent try "
                             "sauto/hauto (default: on for the search agent when CoqHammer is installed; --no-hammer "
                             "turns it off)")
    parser.add_argument("--library-index", action=argparse.BooleanOptionalAction, default=None,
                        help="before the first theorem, index the human proofs of the stdlib files the sources "
                             "load (never the sources) where the search agent's library index lacks them "
                             "(agents/library_tactics.py; a few seconds a module, once per machine) (default: on "
                             f"for the search agent; {BUILD_ENV}=0 makes the default off)")
    parser.add_argument("--hammer-seconds", type=float, default=None,
                        help="with --hammer: keep this many seconds of each search for one call of CoqHammer's "
                             "`hammer` (the ATPs, eprover) on the statement; the proof keeps the reconstruction "
                             "it prints (default 0: off)")


def run(args: argparse.Namespace) -> int:
    try:
        find_coq_binary("coqc")  # before a run directory exists: exit 2 with the install hint
        tasks = load_tasks(getattr(args, "source", None))
    except (CoqSyntaxError, OracleError) as exc:
        console.print(f"bench coq: {exc}", markup=False, highlight=False)
        return 2
    if getattr(args, "list", None):
        return list_theorems(tasks)
    if not getattr(args, "agent", None) and not getattr(args, "backend", None):
        args.agent = [DEFAULT_AGENT]  # the prover, not the portfolio: docs/proofs.md (the figures use it)
    if getattr(args, "hammer", None) is None:
        args.hammer = "search" in (getattr(args, "agent", None) or []) and hammer_installed()
    # the coq oracle strips these files itself (on a Ray worker too, and when `rrma-tui resume` rebuilds
    # it): Coq's processes never read them, agents' processes see neither them nor their compiled forms
    sources = sorted({t.source_file for t in tasks})
    params: dict[str, object] = {"sources": sources,
                                 "warm": not getattr(args, "cold", False),
                                 "setting": getattr(args, "setting", None) or DEFAULT_SETTING}
    hammer_seconds = float(getattr(args, "hammer_seconds", None) or 0.0)
    if hammer_seconds < 0:
        console.print("bench coq: --hammer-seconds must not be negative", markup=False, highlight=False)
        return 2
    if getattr(args, "hammer", None):
        # the oracle rebuilds each theorem from its context, so it loads the tactics it checks with
        params["preload"] = HAMMER_PLUGIN_PRELOAD if hammer_seconds else HAMMER_PRELOAD
        # only the search agent takes them (benches.proofs.agent_params); the portfolio has no use for them
        given = dict(getattr(args, "backend_params", None) or {})
        given[SEARCH_BACKEND] = {**given.get(SEARCH_BACKEND, {}), "hammer": True,
                                 **({"hammer_seconds": hammer_seconds} if hammer_seconds else {})}
        args.backend_params = given
    if not prepare_library(args, [Path(f) for f in sources if f], str(params.get("preload", ""))):
        return 2
    if getattr(args, "red_team", None) is None:
        args.red_team = True  # the Coq bench always shows that known cheats are rejected
    if not getattr(args, "quiet", False):
        console.print(describe_prover(args, params["setting"]), markup=False, highlight=False)
    return run_proof_bench(args, tasks, "coq", oracle_kind="coq", oracle_params=params, base_dir=HERE)


def prepare_library(args: argparse.Namespace, sources: list[Path], preload: str) -> bool:
    """``--library-index``: index the sources' dependencies the search agent's index lacks, saying
    how many and how long; False (after one line) when that failed."""
    from agents.library_tactics import prepare

    chosen = getattr(args, "library_index", None)
    given = dict((getattr(args, "backend_params", None) or {}).get(SEARCH_BACKEND, {}))
    if chosen is None:
        chosen = ("search" in (getattr(args, "agent", None) or []) and os.environ.get(BUILD_ENV, "1") != "0"
                  and bool(given.get("library_tactics", True)))
    if not chosen:
        return True
    quiet = bool(getattr(args, "quiet", False))
    root = Path(str(given["library_index"])) if given.get("library_index") else None

    def say(line: str) -> None:
        if not quiet:
            console.print(f"library index: {line}", markup=False, highlight=False)

    try:
        done = prepare(sources, preload=preload, root=root, say=say)
    except (OSError, subprocess.SubprocessError, CoqSyntaxError) as exc:
        console.print(f"bench coq: the library index could not be built: {exc} (--no-library-index runs "
                      "without it)", markup=False, highlight=False)
        return False
    if not quiet:
        console.print(f"library index: {done.files} modules the sources load, {done.built} indexed now "
                      f"({done.seconds} s), {done.files - done.built} up to date", markup=False, highlight=False)
    return True


def describe_prover(args: argparse.Namespace, setting: object) -> str:
    """The line a bench starts with: which agent proves, whether CoqHammer's tactics are on, the setting."""
    kinds = list(getattr(args, "agent", None) or [])
    agents = " and ".join(kinds) if kinds else f"--backend {getattr(args, 'backend', '')}"
    if "search" not in kinds:
        hammer = ""
    elif getattr(args, "hammer", None):
        hammer = " with CoqHammer's tactics (--no-hammer: without)"
    else:
        hammer = " without CoqHammer's tactics" + ("" if hammer_installed() else " (not installed: libcoq-hammer)")
    return f"bench coq: agent {agents}{hammer}, {setting} setting"


LISTS_THEOREMS = True  # `bench coq --list` lists the theorems (cli/benches.py), not the benches


def list_theorems(tasks: list[TheoremTask]) -> int:
    """``--list``: one line per theorem (the name a run and ``--only`` know it by, file:line,
    difficulty), then the count per file; nothing is proved."""
    per_file: dict[str, int] = {}
    for key, task in zip(theorem_keys(tasks), tasks, strict=True):
        where = f"{Path(task.source_file).name}:{task.line}"
        print(f"{key}\t{where}\t{task.difficulty}")
        per_file[Path(task.source_file).name] = per_file.get(Path(task.source_file).name, 0) + 1
    for name, count in per_file.items():
        print(f"file {name}: {count} theorems")
    print(f"theorems: {len(tasks)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return standalone_main("python -m benches.coq.bench", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
