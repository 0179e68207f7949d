"""Shared helpers of the coding-agent tests: the fake CLIs on PATH, sentinel keys, short demo tasks.

The fakes (tests/agents/fakes/) are real executables; the backends find them on PATH exactly as
they would find the real ``claude``, ``codex`` and ``aider``. They start with ``#!/usr/bin/env
python3``, so :func:`fakes_first` also puts :data:`PYTHON_DIR` on PATH: ``python3`` there is the
interpreter running the tests, whatever the shell's PATH starts with (a pyenv shim, a shell script
that needs pyenv's own tree, cannot run in the sandbox; an activated virtualenv can). The key values
are sentinels: a test sets one, runs, and greps the run directory and the export for it.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rrma.log.store import RunStore
from rrma.task import TaskConfig, load_task

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "agents" / "fakes"
FIXTURES = REPO / "tests" / "fixtures" / "coding_agents"
DEMO = REPO / "benches" / "demo" / "task.yaml"
ANTHROPIC_SENTINEL = "sk-ant-sentinel-CODINGAGENT-0123456789abcdef"
CODEX_SENTINEL = "sk-proj-sentinelCODEX0123456789abcdefXYZ"
OTHER_SENTINEL = "other-secret-value-never-passed-0123456789"
# every variable these tests set or the backends read: cleared before each test
VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "RRMA_AGENT_COMMAND",
             "RRMA_FAKE_SCENARIOS", "FAKE_OTHER_API_KEY", "FAKE_ATTACK_RUN_DIR", "FAKE_ATTACK_HELD_OUT",
             "FAKE_ATTACK_SOURCE")
BACKEND_KEYS = {"claude-code": ("ANTHROPIC_API_KEY", ANTHROPIC_SENTINEL), "codex": ("CODEX_API_KEY", CODEX_SENTINEL),
                "aider": ("ANTHROPIC_API_KEY", ANTHROPIC_SENTINEL), "command": ("ANTHROPIC_API_KEY", ANTHROPIC_SENTINEL)}
FAKE_COMMAND = f"{FAKES / 'fake-agent'} {{prompt_file}}"


def _interpreter_dir() -> Path:
    """A folder of this process whose ``python3`` and ``python`` run ``sys.executable`` (removed at exit)."""
    folder = Path(tempfile.mkdtemp(prefix="rrma-test-python-"))
    for name in ("python3", "python"):
        launcher = folder / name
        launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        launcher.chmod(0o755)
    atexit.register(shutil.rmtree, folder, True)
    return folder


PYTHON_DIR = _interpreter_dir()  # the sandbox shows it (the folder of the fakes' interpreter) and sys.prefix


def fakes_first(path: str | None) -> str:
    """``path`` (a PATH value) with the fakes and :data:`PYTHON_DIR` in front."""
    return os.pathsep.join([str(FAKES), str(PYTHON_DIR), path or os.defpath])


def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("RRMA_FAKE_SCENARIOS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", fakes_first(os.environ.get("PATH")))


def coding_agent(backend: str, name: str = "coder", **fields: Any) -> dict[str, Any]:
    """One agent of ``backend`` with test-sized budgets (fields override; ``coding`` merges)."""
    coding = {"seconds": 30, "attempts": 1, **fields.pop("coding", {})}
    # the fakes play recorded streams from tests/fixtures, which the sandbox does not show unless asked
    # (a real tool brings its own install, found from its executable)
    coding.setdefault("read_only", [str(FIXTURES)])
    if backend == "command":
        coding.setdefault("command", [str(FAKES / "fake-agent"), "{prompt_file}"])
        coding.setdefault("key_env", "ANTHROPIC_API_KEY")
    agent: dict[str, Any] = {"name": name, "backend": backend, "coding": coding, **fields}
    if backend == "codex":
        agent.setdefault("params", {"price": {"input": 1.25, "output": 10.0, "cache_read": 0.125}})
    return agent


def demo_task(agents: list[dict[str, Any]], **overrides: Any) -> TaskConfig:
    """The demo bench, shortened: one baseline run, sequential trials, the given agents."""
    data: dict[str, Any] = {"budget.max_trials": 2, "noise.baseline_repeats": 1, "budget.max_concurrent": 1,
                            "agents": agents}
    data.update(overrides)
    return load_task(DEMO, data)


def turns(run_dir: Path, agent: str | None = None) -> list[Any]:
    events = RunStore(run_dir).scan().events
    return [e.data for e in events if e.kind == "agent.turn" and (agent is None or e.data.agent == agent)]


def events(run_dir: Path, kind: str) -> list[Any]:
    return [e for e in RunStore(run_dir).scan().events if e.kind == kind]


def leaks(root: Path, secret: str) -> list[str]:
    """Files under ``root`` holding ``secret`` or a recognisable 16-character piece of it."""
    pieces = {secret.encode(), secret[:16].encode(), secret[-16:].encode()}
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path}: {piece.decode()!r}" for piece in pieces if piece in data]
    return found


def proposal(run_dir: Path, trial_id: str) -> dict[str, Any]:
    store = RunStore(run_dir)
    rec = next(e for e in store.scan().events if e.kind == "trial.proposed" and e.data.trial_id == trial_id)
    return dict(json.loads(store.blob_text(rec.data.proposal_blob)))


def scratch_dirs(agent: str) -> list[Path]:
    """Working copies of ``agent`` left in the temp directory (each run must remove its own)."""
    import tempfile

    return sorted(Path(tempfile.gettempdir()).glob(f"rrma-agent-{agent}-*"))
