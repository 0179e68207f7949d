"""Static checks are part of the suite: ruff over the repository, mypy over the packages.

Both run as ``python -m`` of this interpreter, so they run wherever the dev extra is installed,
whether or not its ``bin`` is on PATH; missing, they skip, except under CI, where they fail.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def needs(module: str, in_ci: bool) -> None:
    """Skip (fail under CI, which installs the dev extra) when ``module`` is not installed here."""
    if importlib.util.find_spec(module) is None:
        why = f"{module} is not installed for {sys.executable} (pip install -e '.[dev]')"
        if in_ci:
            pytest.fail(why)
        pytest.skip(why)


def test_ruff_is_clean(in_ci: bool) -> None:
    needs("ruff", in_ci)
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", ".", "--output-format", "concise"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean(in_ci: bool) -> None:
    needs("mypy", in_ci)
    proc = subprocess.run([sys.executable, "-m", "mypy", "rrma", "oracle", "agents", "cli", "tui", "benches"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
