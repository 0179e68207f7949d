"""A theorem's context runs as its own module (``coqtop -top M``; coqc: the file at its place under ``-Q``),
in the checker and in an agent's proof-state session alike (issue 33, round eight).

Out-of-sample 10's first run met ``Classes/CMorphisms.v``: run as ``Top``, its context stops at an obligation's
``transitivity`` ("The relation R is not a declared transitive relation"; the file compiles only as
``Coq.Classes.CMorphisms``), so 20 of its 28 theorems could not start, for the search or the checker.
Each test shows the failure with the switch (``modules.TOP_MODULE``) off and the fix with it on, with real Coq.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import oracle.coq.modules as modules
from oracle.coq import CoqOracle
from oracle.coq.sandboxing import coq_where
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofStateError
from rrma.contracts import EvalContext
from rrma.trial import Budget, Proposal

THEOREM = "symmetric_equiv_flip"  # the first theorem after the obligation that needs the module's own path


def _cmorphisms() -> Path | None:
    where = coq_where()
    if shutil.which("coqc") is None or shutil.which("coqtop") is None or where is None:
        return None
    path = where / "theories" / "Classes" / "CMorphisms.v"
    return path if path.is_file() else None


needs_cmorphisms = pytest.mark.skipif(_cmorphisms() is None, reason="needs coqc, coqtop and the Coq stdlib's sources")


def _oracle(tmp_path: Path, **params: Any) -> CoqOracle:
    oracle = CoqOracle({"sources": [str(_cmorphisms())], "theorems": [THEOREM], **params})
    oracle.prepare(tmp_path / "run", tmp_path)
    return oracle


def _check(oracle: CoqOracle, proof: str) -> dict[str, Any]:
    ctx = EvalContext(trial_id="t", trial_dir=Path("."), budget=Budget(seconds=60),
                      proposal=Proposal(hypothesis="h", proof=proof, theorem=THEOREM))
    return dict(oracle.evaluate(ctx).metrics)


@needs_cmorphisms
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("top", [True, False], ids=["as its module", "as Top"])
def test_the_checker_runs_the_context_as_its_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool,
                                                    top: bool) -> None:
    monkeypatch.setattr(modules, "TOP_MODULE", top)
    oracle = _oracle(tmp_path, warm=warm)
    try:
        assert oracle.tasks[THEOREM].module == "Coq.Classes.CMorphisms"
        verdict = _check(oracle, "firstorder.")  # the file's own proof
        if top:
            assert verdict["accepted"], verdict["reason"]
            named = _check(oracle, f"exact Coq.Classes.CMorphisms.{THEOREM}.")  # the original, by its full name
            assert not named["accepted"]
        else:
            assert not verdict["accepted"] and "context does not compile" in verdict["reason"], verdict["reason"]
    finally:
        oracle.close()


@needs_cmorphisms
@pytest.mark.parametrize("top", [True, False], ids=["as its module", "as Top"])
def test_an_agents_session_starts_where_the_checker_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         top: bool) -> None:
    """The agent's view names the module, and its proof-state session runs the (rediscover) context as it."""
    from oracle.proof_state_coq import CoqProofStates

    monkeypatch.setattr(modules, "TOP_MODULE", top)
    oracle = _oracle(tmp_path)
    try:
        view = next(v for v in oracle.theorems() if v["name"] == THEOREM)
        assert view["module"] == "Coq.Classes.CMorphisms" and "source_file" not in view
        assert view["setting"] == "rediscover" and "Admitted." in view["context"]  # the earlier proofs hidden
        task = TheoremTask(THEOREM, view["statement"], view["context"], "", prover="coq", module=view["module"])
    finally:
        oracle.close()
    states = CoqProofStates()
    try:
        if top:
            root = states.start(task, timeout_s=120)
            result = states.run_tactic(root, "firstorder.", timeout_s=20)
            assert result.outcome == "proved", result.message
        else:
            with pytest.raises(ProofStateError, match="declared transitive relation"):
                states.start(task, timeout_s=120)
    finally:
        states.close()
