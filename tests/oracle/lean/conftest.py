"""Fixtures for the Lean oracle's tests (oracle/lean/): the stripped Tiny.lean fixture; the shared
helpers (lean_fixtures.py) importable from every test module here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from lean_fixtures import FIXTURES

from oracle.proof_common import TheoremTask
from oracle.strip_lean import strip_lean_file


@pytest.fixture(scope="module")
def tiny() -> dict[str, TheoremTask]:
    return {t.name: t for t in strip_lean_file(FIXTURES / "Tiny.lean")}
