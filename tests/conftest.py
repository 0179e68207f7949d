"""Shared test helpers: paths to the repo, to ../shared, and small run builders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("RRMA_SHARED", REPO.parent / "shared")).resolve()
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED} (set RRMA_SHARED to its path)")
    return SHARED
