"""For the proof-search tests: a small Coq library compiled and indexed by the library k-NN
(agents/library_tactics.py), and a real-coqtop search by the rules alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import agents.library_tactics as lt
from agents.best_first import SearchBudget, SearchResult, best_first_search
from agents.coq_tactics import CoqTactics
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState


def compiled_and_indexed(factory: pytest.TempPathFactory, name: str, sources: dict[str, str],
                         indexed: list[str]) -> tuple[Path, tuple[str, ...], Path, list[Path]]:
    """``sources`` (file name -> text) written to a fresh folder bound to the logical path ``Lib``, the first
    one compiled, and ``indexed`` indexed into another fresh folder: (sources, coq args, index, entries
    written). Skips the test without ``coqc``."""
    if shutil.which("coqc") is None:
        pytest.skip("coqc not on PATH (Debian: apt-get install coq)")
    src = factory.mktemp(name)
    for file, text in sources.items():
        (src / file).write_text(text)
    args = ("-Q", str(src), "Lib")
    subprocess.run(["coqc", *args, str(src / next(iter(sources)))], check=True, capture_output=True, timeout=120)
    index = factory.mktemp(f"{name}-index")
    return src, args, index, lt.build([src / file for file in indexed], root=index, coq_args=args)


def rules_search(task: TheoremTask, max_checks: int, seconds: float = 60) -> tuple[SearchResult, list[CoqTactics]]:
    """A real-coqtop search of ``task`` by the rules alone (no library, no portfolio), and the sources it made."""
    from oracle.proof_state_coq import CoqProofStates

    states = CoqProofStates()
    made: list[CoqTactics] = []

    def source(root: ProofState) -> CoqTactics:
        made.append(CoqTactics(states, task, root, library=False, portfolio=False, setting="rediscover"))
        return made[-1]

    try:
        return best_first_search(states, task, source, SearchBudget(seconds=seconds, max_checks=max_checks),
                                 tree_limit=100_000), made
    finally:
        states.close()
