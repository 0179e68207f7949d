"""Fixtures for the Coq oracle's tests (oracle/coq/): the stripped theorems, a warm pool and a cold
checker per test module; the shared helpers (coq_fixtures.py) importable from every test module here."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from coq_fixtures import HOLES_SOURCE, SOURCE

from oracle.coq.cold import CoqChecker
from oracle.coq.warm import WarmCoqPool
from oracle.proof_common import TheoremTask
from oracle.strip_coq import strip_coq_text


@pytest.fixture(scope="module")
def tasks() -> dict[str, TheoremTask]:
    return {t.name: t for t in strip_coq_text(SOURCE, source_file="cheats.v")}


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmCoqPool]:
    if shutil.which("coqtop") is None:
        pytest.skip("coqtop not on PATH (Debian: apt-get install coq)")
    pool = WarmCoqPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def cold() -> CoqChecker:
    if shutil.which("coqc") is None:
        pytest.skip("coqc not on PATH (Debian: apt-get install coq)")
    return CoqChecker()


@pytest.fixture(scope="module")
def holes() -> dict[str, TheoremTask]:
    return {t.name: t for t in strip_coq_text(HOLES_SOURCE, source_file="holes.v")}
