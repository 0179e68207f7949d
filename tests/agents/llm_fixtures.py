"""Shared values and helpers of the LLM agent tests (imported by name; `conftest` is ambiguous
when several test folders have one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rrma.task import TaskConfig, load_task

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
# The real environment, captured at import, before _clean_env hides it from every test (live tests use it).
LIVE_ENV = {k: v for k, v in os.environ.items() if k.startswith(("ANTHROPIC_", "OPENAI_", "RRMA_"))}
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdefSECRETkey"
OPENAI_KEY = "sk-proj-test0123456789abcdefSECRETkey"
FAST = {"retry_base_s": 0.01, "retry_max_s": 0.05}  # backoff short enough for tests


def demo_task(agents: list[dict[str, Any]], **overrides: Any) -> TaskConfig:
    """The demo bench, shortened: one baseline run, sequential trials, the given agents."""
    data: dict[str, Any] = {"budget.max_trials": 2, "noise.baseline_repeats": 1, "budget.max_concurrent": 1,
                            "agents": agents}
    data.update(overrides)
    return load_task(DEMO, data)
