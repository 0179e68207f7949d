"""Fixtures for the LLM agent tests: the local wire-protocol server and a clean environment."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import llm_fixtures  # noqa: F401  (captures LIVE_ENV before any test cleans the environment)
from llm_wire import WireServer


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set exactly the variables they mean; a developer's real key never leaks in."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
