"""Fixtures shared by the oracle tests."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="module")
def coqc(in_ci: bool) -> str:
    """The path of ``coqc``: under CI (which installs Coq) its absence fails the test, elsewhere it skips."""
    found = shutil.which("coqc")
    if found is None:
        if in_ci:
            pytest.fail("CI installs Coq (apt-get install coq), but coqc is not on PATH")
        pytest.skip("coqc is not on PATH (Debian: apt-get install coq)")
    return found
