"""Shared test helpers (paths to the repo and ../shared, the pulled real model, small run builders) and two
session rules.

* The harness's own settings never leak in from the shell. Every ``RRMA_*`` variable except the
  suite's own inputs (``RRMA_SHARED``, ``RRMA_MODELS``, ``RRMA_LIVE_*``, ``RRMA_VLLM_*``) is removed from the
  environment when this file is imported, before any test module reads it: a developer's
  ``RRMA_FS_GUARD=off`` would otherwise turn every containment test into a silent skip. A test that
  needs a setting sets it itself (``monkeypatch.setenv``). The header of the run names what was removed.
* Under CI (``CI`` set to 1/true/yes/on; ``.ci/run`` sets it) the bubblewrap sandbox is part of the
  machine, so a test that skips because the sandbox is unavailable FAILS instead, with the reason.
  A test that skips for want of the sandbox must put ``sandbox.unavailable_reason()`` in its skip
  reason (every such skip does): that text is how the skip is recognised.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# where the test data and the pulled models are (rrma/models.py); opt-in live tests
SUITE_INPUTS = ("RRMA_SHARED", "RRMA_MODELS", "RRMA_LIVE_", "RRMA_VLLM_")
SCRUBBED = sorted(k for k in os.environ if k.startswith("RRMA_") and not k.startswith(SUITE_INPUTS))
for _name in SCRUBBED:
    del os.environ[_name]
# the proof search's library index (agents/library_tactics.py) defaults to the user's cache: the suite never
# reads one a developer built (a test that needs an index builds a small one and names it)
os.environ["RRMA_TACTIC_INDEX"] = str(Path(tempfile.gettempdir()) / "rrma-test-no-tactic-index")
# nor does `bench coq` build one into it before its first theorem (benches/coq/bench.py --library-index): a
# test that wants the build asks for it
os.environ["RRMA_LIBRARY_INDEX_BUILD"] = "0"
SHARED = Path(os.environ.get("RRMA_SHARED", REPO.parent / "shared")).resolve()
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
# Bytecode for the suite's subprocesses: with PYTHONDONTWRITEBYTECODE set (as on some CI images) every
# `python -m cli.main` a test starts compiles the whole CLI again (~0.6 s of a 0.9 s start here). The cache
# goes to a directory of this session (inherited by pytest-xdist's workers), never into the tree, and is
# removed at the end. Bytecode is checked against its source's mtime: what runs is the same code.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None and "PYTHONPYCACHEPREFIX" not in os.environ:
    os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE = tempfile.mkdtemp(prefix="rrma-test-pycache-")
    sys.dont_write_bytecode = False
    sys.pycache_prefix = _PYCACHE

from rrma.contain import sandbox  # noqa: E402  (after the scrub, which its mode() must not miss)

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")
_SANDBOX_REASON: list[str | None] = []  # measured once at the session's start (CI only), before a test patches it


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = globals().get("_PYCACHE")
    if cache and not hasattr(config, "workerinput"):  # the controller made it; the workers share it
        shutil.rmtree(cache, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before the terminal's header, which shows it
def pytest_sessionstart(session: pytest.Session) -> None:
    if IN_CI:
        _SANDBOX_REASON.append(sandbox.unavailable_reason())


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [f"removed from the environment for this session: {', '.join(SCRUBBED)}"] if SCRUBBED else []
    if _SANDBOX_REASON:
        reason = _SANDBOX_REASON[0]
        lines.append("CI: a skip for want of the sandbox is a failure; sandbox: "
                     + ("bubblewrap works" if reason is None else f"UNAVAILABLE: {reason}"))
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                         pytest.TestReport]:
    """Under CI, turn a skip whose reason is the sandbox's unavailability into a failure that says so."""
    report = yield
    if not (IN_CI and report.skipped) or hasattr(report, "wasxfail"):
        return report
    reason = _SANDBOX_REASON[0]
    said = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if reason is not None and reason in said:
        report.outcome = "failed"
        report.longrepr = (f"CI needs the bubblewrap sandbox, and it is unavailable here: {reason}\n"
                           f"(outside CI this test skips: {said})")
    return report


# tryfirst: pytest-xdist's worker reads the groups in its own collection hook (it appends ``@group`` to each
# test's id); a group marked after that hook is ignored, and every module is then spread over both workers
# (tests/test_suite_groups.py fails when that happens)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist (``--dist loadgroup``, the README's test command): a test module runs on one
    worker (its module-scoped fixtures are built once), and every test marked ``ray`` runs on one worker, one
    at a time (a second local Ray instance, or ``ray stop``, would disturb the other's; see
    tests/contain/test_containment_network.py's ray_head)."""
    for item in items:
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def in_ci() -> bool:
    """True under CI, where what the dev extra and .ci/run install must be present: a test fails without it."""
    return IN_CI


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The model store's verified SmolLM2-135M-Instruct directory (rrma/models.py; docs/models.md).

    Without it a test skips, naming the command that pulls it; under CI (``.ci/run`` pulls it before the
    suite) a missing model is a failure. A model that changed since its pull is an error everywhere."""
    from rrma.models import ModelMissing, resolve

    try:
        return resolve("smollm2").path
    except ModelMissing as exc:
        if IN_CI:
            pytest.fail(f"CI needs the real model (.ci/run pulls it before the suite): {exc}")
        pytest.skip(str(exc))


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED} (set RRMA_SHARED to its path)")
    return SHARED


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo run with 4 agent trials, made once per test module by the real CLI."""
    runs = tmp_path_factory.mktemp("runs")
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "bench", "demo", "--trials", "4", "--runs",
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


@pytest.fixture(scope="module")
def torch_one_thread() -> Generator[None, None, None]:
    """A tiny model runs fastest on one torch thread (two fight each other on a busy 2-core machine, and the
    other core is left to the trials' processes); the previous setting is restored after the module."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
