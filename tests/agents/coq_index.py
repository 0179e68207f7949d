"""A small Coq library compiled and indexed by the library k-NN (agents/library_tactics.py), for tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import agents.library_tactics as lt


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
