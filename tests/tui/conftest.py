"""Fixtures for the TUI tests: generated run directories (see make_run.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from make_run import make_run


@pytest.fixture(autouse=True)
def private_settings(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's TUI settings (the saved theme) live in a directory of its own, never the user's."""
    folder = tmp_path_factory.mktemp("rrma-config")
    monkeypatch.setenv("RRMA_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """A runs directory with one finished 12-trial run whose last improvement awaits review."""
    runs = tmp_path / "runs"
    make_run(runs, "demo-run", trials=12, hitl=True, pending_claims=1)
    return runs


@pytest.fixture
def run_dir(runs_dir: Path) -> Path:
    return runs_dir / "demo-run"
