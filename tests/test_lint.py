"""Static checks are part of the suite: ruff over the repository, mypy over the packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed (pip install -e '.[dev]')")
def test_ruff_is_clean() -> None:
    proc = subprocess.run(["ruff", "check", ".", "--output-format", "concise"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    pytest.importorskip("mypy", reason="mypy not installed (pip install -e '.[dev]')")
    proc = subprocess.run([sys.executable, "-m", "mypy", "rrma", "oracle", "agents", "tui", "benches"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
