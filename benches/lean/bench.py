"""``rrma-tui --headless bench lean``: strip-and-rediscover on the Lean 4 suite (or ``--source FILE``).

Strips every theorem of ``lean_project/Theorems/*.lean`` (or of the user's files given with
``--source``; their imports must resolve in ``--project``, default ``lean_project``), checks
that Lean 4 is installed (exit 2 with the elan + ``lean-toolchain`` hint otherwise), builds the
Lake project (theorems and the REPL), then runs :func:`benches.proofs.run_proof_bench`: a
research-loop run under the per-theorem policy whose oracle is ``lean`` (:class:`oracle.lean.LeanOracle`:
a pool of warm ``lake exe repl`` sessions, ``lake env lean --json`` as the fallback) and whose agents
are the offline tactic-portfolio provers sharing one blackboard.
Also runnable alone: ``python -m benches.lean.bench --help``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benches.proofs import add_proof_arguments, run_proof_bench, standalone_main
from oracle.lean.checker import LeanChecker
from oracle.lean.project import DEFAULT_PROJECT
from oracle.proof_common import TheoremTask
from oracle.strip_lean import LeanSyntaxError, strip_lean_file, strip_project
from rrma.contracts import OracleError
from rrma.text import SafeConsole

HERE = Path(__file__).resolve().parent
console = SafeConsole(stderr=True, emoji=False)  # checker messages print literally and inert


def load_tasks(sources: list[Path] | None, project: Path = DEFAULT_PROJECT) -> list[TheoremTask]:
    """Every theorem of the given files and directories (default: the project's ``Theorems/*.lean``), in file order."""
    if not sources:
        return strip_project(project)
    tasks: list[TheoremTask] = []
    for source in sources:
        for path in sorted(source.rglob("*.lean")) if source.is_dir() else [source]:
            tasks.extend(strip_lean_file(path))
    return tasks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_proof_arguments(parser)
    parser.add_argument("--project", type=Path, default=None,
                        help=f"the Lake project Lean runs in (default {DEFAULT_PROJECT})")
    parser.add_argument("--mode", choices=["auto", "repl", "cli"], default=None,
                        help="REPL pool, `lake env lean --json` per check, or REPL with CLI fallback (default)")
    parser.add_argument("--pool-size", type=int, default=None, help="warm REPL sessions (default 1)")
    parser.add_argument("--no-build", action="store_true", default=None,
                        help="skip `lake build` (the project and the REPL are already built)")


def run(args: argparse.Namespace) -> int:
    project = Path(getattr(args, "project", None) or DEFAULT_PROJECT).resolve()
    sources = getattr(args, "source", None)
    try:
        tasks = load_tasks(sources, project)
    except (OSError, LeanSyntaxError) as exc:
        console.print(f"bench lean: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2
    if not tasks:
        console.print("bench lean: no named theorem or lemma found to strip", markup=False, highlight=False)
        return 2
    # Lean must be there and the project built before a run directory exists (exit 2 with the hint)
    checker = LeanChecker(project, mode=getattr(args, "mode", None) or "auto")
    try:
        checker.ensure_available()
        if not getattr(args, "no_build", None):
            checker.build()
    except OracleError as exc:
        console.print(f"bench lean: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2
    finally:
        checker.close()
    # the lean oracle strips the files itself (a Ray worker, `rrma-tui resume`) and runs Lean with them
    # (their original proofs) hidden; agents' processes see neither them nor any compiled form
    params: dict[str, object] = {"project": str(project), "mode": getattr(args, "mode", None) or "auto",
                                 "pool_size": getattr(args, "pool_size", None) or 1}
    if sources:
        params["sources"] = sorted({t.source_file for t in tasks})
    return run_proof_bench(args, tasks, "lean", oracle_kind="lean", oracle_params=params, base_dir=HERE)


def main(argv: list[str] | None = None) -> int:
    return standalone_main("python -m benches.lean.bench", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
