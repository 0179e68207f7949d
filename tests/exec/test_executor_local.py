"""The local executor's wait for an outcome: budget, the oracle's declared set-up allowance, then the grace."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

import rrma.exec.local as local
from rrma.trial import Budget, Outcome, Status


def later(seconds: float) -> concurrent.futures.Future[Outcome]:
    """A future an oracle completes with an ok outcome ``seconds`` from now."""
    future: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    threading.Timer(seconds, lambda: future.set_result(Outcome(status=Status.ok, score=1.0, seconds=seconds))).start()
    return future


@pytest.mark.parametrize("setup_s", [0.0, 3.0], ids=["no-allowance", "allowance"])
def test_an_oracle_is_abandoned_after_budget_allowance_and_grace(monkeypatch: pytest.MonkeyPatch,
                                                                 setup_s: float) -> None:
    """An evaluation that returns 1 s after its 0.1 s budget: abandoned at budget + 0.2 s of grace when its oracle
    declares no set-up allowance (a hung oracle is let go soon), waited for when it declares 3 s."""
    monkeypatch.setattr(local, "ORACLE_GRACE_S", 0.2)
    outcome = local.wait_outcome(later(1.0), Budget(seconds=0.1), setup_s)
    if setup_s:
        assert outcome.status == Status.ok and outcome.score == 1.0, outcome.feedback
    else:
        assert outcome.status == Status.timeout
        assert outcome.feedback == ("the oracle did not return within 0.3 s (the budget 0.1 s and 0.2 s of grace); "
                                    "abandoned")


def test_the_abandonment_message_names_the_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "ORACLE_GRACE_S", 0.1)
    outcome = local.wait_outcome(later(5.0), Budget(seconds=0.1), 0.2)
    assert outcome.status == Status.timeout
    assert "0.4 s (the budget 0.1 s, its set-up allowance 0.2 s and 0.1 s of grace)" in outcome.feedback

