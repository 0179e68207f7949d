"""Shared test helpers: paths to the repo, to ../shared, and small run builders."""

from __future__ import annotations

import os
import shutil
import subprocess
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


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo run with 4 agent trials, made once per test module by the real CLI."""
    runs = tmp_path_factory.mktemp("runs")
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "--headless", "bench", "demo", "--trials", "4", "--runs",
                           str(runs), "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = [p for p in runs.iterdir() if (p / "events.jsonl").exists()]
    return run


@pytest.fixture
def run(demo_run: Path, tmp_path: Path) -> Path:
    """A private copy of :func:`demo_run` that a test may tamper with."""
    copy = tmp_path / demo_run.name
    shutil.copytree(demo_run, copy)
    return copy
