"""The suite's own grouping holds: under ``-n 2 --dist loadgroup`` (the README's test command) each test
module runs on one worker, so its module-scoped fixtures (a source run and two training sessions of a real
model, a ``bench rl`` subprocess started beside the tests) are built once, and the ``ray`` tests run one at a
time. tests/conftest.py marks the groups; pytest-xdist reads them only if the marks come first."""

from __future__ import annotations

import os

import pytest


@pytest.mark.ray  # a test of each kind: the ray group and a module group
def test_a_ray_test_runs_in_the_ray_group(request: pytest.FixtureRequest) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not request.config.getvalue("loadgroup"):
        pytest.skip("only under pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@ray"), request.node.nodeid


def test_a_module_runs_in_its_own_group(request: pytest.FixtureRequest) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not request.config.getvalue("loadgroup"):
        pytest.skip("only under pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_suite_groups.py"), request.node.nodeid
