"""Fixtures for the LLM agent tests: the local wire-protocol server and demo-bench tasks."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llm_wire import WireServer

from rrma.task import TaskConfig, load_task

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
# The real environment, captured before _clean_env hides it from every test (live tests use it).
LIVE_ENV = {k: v for k, v in os.environ.items() if k.startswith(("ANTHROPIC_", "OPENAI_", "RRMA_"))}
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdefSECRETkey"
OPENAI_KEY = "sk-proj-test0123456789abcdefSECRETkey"


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


def demo_task(agents: list[dict[str, Any]], **overrides: Any) -> TaskConfig:
    """The demo bench, shortened: one baseline run, sequential trials, the given agents."""
    data: dict[str, Any] = {"budget.max_trials": 2, "noise.baseline_repeats": 1, "budget.max_concurrent": 1,
                            "agents": agents}
    data.update(overrides)
    return load_task(DEMO, data)


FAST = {"retry_base_s": 0.01, "retry_max_s": 0.05}  # backoff short enough for tests
