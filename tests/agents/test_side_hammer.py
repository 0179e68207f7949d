"""CoqHammer's ``hammer`` beside the search, on the second core (agents/side_hammer.py, issue 33 round seven).

With a scripted prover: a proof the side pass finds is the search's answer only once it replays in the
search's own session and the source does not veto it; the search waits for the side pass when it runs
out of candidates first, and takes its proof as soon as it is there. With real Coq, CoqHammer's plugin
and eprover: a theorem the search alone cannot prove (no candidates) is proved by the side pass's
reconstruction, replayed in the search's session, and the side session has loaded exactly the
libraries the search's has.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence

import pytest
from scripted_prover import ScriptedStates

from agents import side_hammer
from agents.best_first import SIDE_SOURCE, Node, SearchBudget, TacticSource, best_first_search
from agents.side_hammer import SideHammer, SideOutcome, reconstruction
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState, TacticResult

TASK = TheoremTask("t", "Lemma t : True.", "", "", prover="coq")


class Table(TacticSource):
    def __init__(self, cands: list[Candidate], veto: str | None = None) -> None:
        self.cands, self.veto = cands, veto

    def candidates(self, node: Node) -> list[Candidate]:
        return [] if node.depth >= 2 else list(self.cands)

    def validate(self, tactics: Sequence[str]) -> str | None:
        return self.veto


class Side:
    """A side pass whose proof appears once the search's clock reaches ``at``; wait() moves the clock there."""

    def __init__(self, states: ScriptedStates, tactics: tuple[str, ...], at: float = 0.0) -> None:
        self.states, self.found, self.at = states, tactics, at
        self.begun: list[float] = []
        self.stopped = False

    def begin(self, task: TheoremTask, deadline: float) -> Run:
        self.begun.append(deadline)
        return Run(self)

    def wait(self, until: float) -> None:
        self.states.now = max(self.states.now, min(until, self.at))

    def stop(self) -> None:
        self.stopped = True


class Run:
    def __init__(self, side: Side) -> None:
        self.side, self.ended = side, "running"

    @property
    def tactics(self) -> tuple[str, ...] | None:
        return self.side.found if self.side.states.now >= self.side.at else None


REPLAYS = {"intros.": ("progress", 0.1), "hauto use: lemma_a.": ("proved", 0.5)}


def _search(states: ScriptedStates, source: TacticSource, side: Side | None) -> object:
    return best_first_search(states, TASK, lambda root: source, SearchBudget(seconds=25, max_checks=1000),
                             clock=states.clock, side=side)


def test_the_side_pass_proof_is_taken_once_it_replays_here() -> None:
    states = ScriptedStates(REPLAYS)
    off = _search(states, Table([]), None)
    assert off.proof is None and off.reason == "exhausted"  # type: ignore[attr-defined]
    states = ScriptedStates(REPLAYS)
    side = Side(states, ("intros.", "hauto use: lemma_a."), at=12.0)
    on = _search(states, Table([]), side)
    assert on.proof == "intros.\nhauto use: lemma_a."  # type: ignore[attr-defined]
    assert on.proof_sources == (SIDE_SOURCE, SIDE_SOURCE)  # type: ignore[attr-defined]
    assert on.by_source[SIDE_SOURCE][0] == 2  # type: ignore[attr-defined]
    assert side.begun == [25 - 3.0]  # started with the search, to end before its budget
    assert states.now >= 12.0  # the search, out of candidates at once, waited for it


def test_a_side_proof_that_does_not_replay_or_is_vetoed_is_not_taken() -> None:
    states = ScriptedStates(REPLAYS)
    missing = _search(states, Table([]), Side(states, ("intros.", "hauto use: the_original.")))
    assert missing.proof is None and "did not replay" in missing.last_error  # type: ignore[attr-defined]
    assert missing.side.endswith("not taken: hauto use: the_original. did not replay")  # type: ignore[attr-defined]
    assert [t for _, t in states.ran].count("hauto use: the_original.") == 1  # replayed once, not at every step
    states = ScriptedStates(REPLAYS)
    vetoed = _search(states, Table([], veto="uses an axiom"), Side(states, ("intros.", "hauto use: lemma_a.")))
    assert vetoed.proof is None and "vetoed: uses an axiom" in vetoed.last_error  # type: ignore[attr-defined]


def test_the_search_takes_the_side_proof_as_soon_as_it_is_there() -> None:
    slow = [Candidate(f"slow{k}.", 0.1) for k in range(200)]
    effects = {**REPLAYS, **{c.tactic: ("progress", 1.0) for c in slow}}
    states = ScriptedStates(effects)
    side = Side(states, ("intros.", "hauto use: lemma_a."), at=5.0)
    result = _search(states, Table(slow), side)
    assert result.proof == "intros.\nhauto use: lemma_a."  # type: ignore[attr-defined]
    assert side.stopped  # the search told it it is over
    assert states.now < 8.0  # not at the end of the budget
    states = ScriptedStates(effects)
    alone = _search(states, Table(slow), None)
    assert alone.proof is None and states.now >= 25.0  # type: ignore[attr-defined]


def test_reconstruction_reads_the_tactic_hammer_prints() -> None:
    notes = "Reconstructing the proof...\nTactic srun eauto succeeded.\nReplace the hammer tactic with:\n\tsrun eauto use: app_nil_end.\n"
    assert reconstruction(notes) == "srun (eauto) use: app_nil_end."  # the form that parses (test below)
    assert reconstruction("Replace the hammer tactic with: sfirstorder \n\nNo more goals.") == "sfirstorder."
    assert reconstruction("Hammer failed: ATPs failed to find a proof.") is None


def _hammer_tactics() -> bool:
    from oracle.coq.sandboxing import coq_where

    where = coq_where()
    return shutil.which("coqtop") is not None and where is not None \
        and (where / "user-contrib" / "Hammer" / "Tactics" / "Tactics.vo").is_file()


@pytest.mark.skipif(not _hammer_tactics(), reason="needs coqtop and CoqHammer's tactics (libcoq-hammer)")
def test_an_srun_reconstruction_replays_in_a_session_with_coqhammers_tactics(monkeypatch: pytest.MonkeyPatch) -> None:
    """``hammer`` prints ``srun eauto use: ... unfold: ...``, which Coq's grammar does not read (round seven dropped
    two such proofs); with the tactic in parentheses the same reconstruction closes the goal."""
    from oracle.proof_state_coq import CoqProofStates

    notes = "Replace the hammer tactic with:\n\tsrun eauto use: Nat.add_0_r unfold: Nat.add.\n"
    task = TheoremTask("add_0", "Lemma add_0 : forall n : nat, n + 0 = n.", "Require Import Arith.\n", "",
                       prover="coq")
    states = CoqProofStates(preload="From Hammer Require Import Tactics.\n")
    try:
        root = states.start(task, timeout_s=60)
        intros = states.run_tactic(root, "intros.", timeout_s=10)
        assert intros.outcome == "progress" and intros.state is not None
        outcomes = {}
        for on in (False, True):
            monkeypatch.setattr(side_hammer, "PARENTHESISE_SRUN", on)
            tactic = reconstruction(notes)
            assert tactic is not None
            outcomes[on] = states.run_tactic(intros.state, tactic, timeout_s=20)
        assert outcomes[False].outcome == "error" and "Syntax error" in outcomes[False].message
        assert outcomes[True].outcome == "proved", outcomes[True].message
    finally:
        states.close()


needs_hammer = pytest.mark.skipif(shutil.which("coqtop") is None or not side_hammer.available(),
                                  reason="needs coqtop, CoqHammer's plugin (libcoq-hammer) and eprover")


@needs_hammer
def test_a_real_hammer_beside_proves_what_the_search_alone_does_not() -> None:
    from oracle.proof_state_coq import CoqProofStates

    preload = "From Hammer Require Import Tactics.\n"
    task = TheoremTask("rev_app_len", "Lemma rev_app_len : forall l m : list nat, "
                       "length (rev (l ++ m)) = length m + length l.", "Require Import List.\n", "", prover="coq")
    states = CoqProofStates(preload=preload)
    # limits well above the bench's: the suite runs beside other work, and eprover's limit is CPU time
    side = SideHammer(lambda: CoqProofStates(preload=side_hammer.preload(20, 20) + preload, nice=side_hammer.NICE,
                                             memory_mb=side_hammer.MEMORY_MB), states.loaded_libraries)
    try:
        alone = best_first_search(states, task, lambda root: Table([]), SearchBudget(seconds=90))
        assert alone.proof is None
        found = best_first_search(states, task, lambda root: Table([]), SearchBudget(seconds=90), side=side)
        assert found.proof is not None and "use:" in found.proof, (found.side, found.last_error)
        assert found.proof_sources[-1] == SIDE_SOURCE
        assert side._states is not None
        assert set(side._states.loaded_libraries()) == set(states.loaded_libraries())  # nothing more to draw on
    finally:
        side.close()
        states.close()


@needs_hammer
@pytest.mark.parametrize("before", [True, False], ids=["before-the-context", "after-the-context"])
def test_the_side_session_starts_on_a_theorem_inside_a_section(before: bool) -> None:
    """The side session's plugin (``Declare ML Module``) must run before the context: Coq refuses it inside
    a section. (Round nine moved the oracle's preload after the context; the side session's stays before.)"""
    from oracle.proof_state import ProofStateError
    from oracle.proof_state_coq import CoqProofStates

    task = TheoremTask("in_section", "Lemma in_section : forall x : A, x = x.",
                       "Section S.\nVariable A : Type.\n", "", prover="coq")
    plugin = side_hammer.preload(5, 5)
    states = CoqProofStates(preload=plugin if before else "", memory_mb=side_hammer.MEMORY_MB)
    if not before:
        task = TheoremTask(task.name, task.statement, task.context + plugin, "", prover="coq")
    try:
        if before:
            assert states.start(task, timeout_s=120).goals
        else:
            with pytest.raises(ProofStateError, match="section"):
                states.start(task, timeout_s=120)
    finally:
        states.close()


def test_a_busy_side_pass_skips_the_next_theorem() -> None:
    import threading

    release = threading.Event()

    class Hung:
        def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
            release.wait(10)
            raise RuntimeError("stopped")

        def close(self) -> None:
            release.set()

    side = SideHammer(Hung, lambda: [side_hammer.TACTICS_MODULE])
    first = side.begin(TASK, time.monotonic() + 5)
    assert isinstance(first, SideOutcome) and side.begin(TASK, time.monotonic() + 5) is None
    assert side.skipped == 1
    side.close()
    assert side.done() and first.ended.startswith("error: RuntimeError")


class SideStates:
    """The side session's stand-in: it has loaded ``libraries``; ``hammer`` prints ``reconstruction``."""

    def __init__(self, libraries: list[str], reconstruction: str) -> None:
        self.libraries, self.reconstruction = libraries, reconstruction

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        return ProofState((), ("|- goal",))

    def loaded_libraries(self) -> list[str]:
        return self.libraries

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        if tactic == "hammer.":
            return TacticResult("proved", ProofState(("hammer.",), ()), seconds=1.0,
                                notes=f"Replace the hammer tactic with:\n\t{self.reconstruction}\n")
        return TacticResult("error", message="nothing to introduce")

    def close(self) -> None:
        return None


def _side_run(side: SideHammer) -> SideOutcome:
    run = side.begin(TASK, time.monotonic() + 20)
    assert run is not None
    side.wait(time.monotonic() + 10)
    return run


def test_hammer_runs_only_where_the_side_session_loads_what_the_search_s_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stripped module, loaded in the side session only, is what `hammer` found for PreOmega's
    `rem_bound_pos_neg` (`srun eauto use: PreOmega.Z.rem_bound_pos_neg`): the side pass must not run there."""
    main = [side_hammer.TACTICS_MODULE, "Coq.ZArith.BinInt"]
    more = SideStates([*main, "Coq.omega.PreOmega"], "srun eauto use: PreOmega.Z.rem_bound_pos_neg.")
    monkeypatch.setattr(side_hammer, "SAME_LIBRARIES", False)
    assert _side_run(SideHammer(lambda: more, lambda: main)).tactics == ("srun (eauto) use: PreOmega.Z.rem_bound_pos_neg.",)
    monkeypatch.setattr(side_hammer, "SAME_LIBRARIES", True)
    refused = _side_run(SideHammer(lambda: more, lambda: main))
    assert refused.tactics is None and "loads 1 modules the search's does not" in refused.ended
    same = _side_run(SideHammer(lambda: SideStates(main, "sfirstorder."), lambda: main))
    assert same.tactics == ("sfirstorder.",)
    without = SideHammer(lambda: SideStates(main, "sfirstorder."), lambda: ["Coq.ZArith.BinInt"])
    skipped = without.begin(TASK, time.monotonic() + 20)
    assert skipped is not None and skipped.tactics is None and "does not load CoqHammer's tactics" in skipped.ended


@needs_hammer
def test_stopping_a_running_hammer_keeps_the_side_session_warm() -> None:
    """The search ended first: the running `hammer` is interrupted (its ATPs killed), the call ends at
    once, and the same session takes the next theorem."""
    from oracle.proof_state_coq import CoqProofStates

    preload = "From Hammer Require Import Tactics.\n"
    states = CoqProofStates(preload=preload)
    side = SideHammer(lambda: CoqProofStates(preload=side_hammer.preload(20, 20) + preload, nice=side_hammer.NICE,
                                             memory_mb=side_hammer.MEMORY_MB), states.loaded_libraries)
    false = TheoremTask("no", "Lemma no : forall x y : nat, x * y = x + y.", "Require Import Arith List.\n", "", prover="coq")
    true = TheoremTask("yes", "Lemma yes : forall l : list nat, l ++ nil = l.", "Require Import Arith List.\n", "",
                       prover="coq")
    try:
        states.start(false)
        run = side.begin(false, time.monotonic() + 90)
        assert run is not None
        time.sleep(6)
        assert not side.done()  # eprover is at work on a false statement
        session = side._states.session
        stopped = time.monotonic()
        side.stop()
        assert side.done() and time.monotonic() - stopped < 5, run.ended
        assert run.tactics is None and run.ended == "stopped: the search ended first", run.ended
        assert session.alive and side._states.session is session  # the same coqtop, warm
        from oracle.coq.session import _comm, _descendants

        assert not [p for p in _descendants(session.proc.pid) if _comm(p) == "eprover"]  # its ATPs are gone
        states.start(true)
        again = side.begin(true, time.monotonic() + 90)
        side.wait(time.monotonic() + 95)
        assert again is not None and again.tactics is not None, again.ended if again else None
    finally:
        side.close()
        states.close()


def test_a_side_session_that_cannot_be_made_says_so_on_every_later_theorem() -> None:
    def no_session() -> SideStates:
        raise RuntimeError("coqtop is gone")

    side = SideHammer(no_session, lambda: [side_hammer.TACTICS_MODULE])
    first = _side_run(side)
    assert first.ended == "error: RuntimeError: coqtop is gone" and side.broken
    later = side.begin(TASK, time.monotonic() + 20)
    assert later is not None and later.tactics is None and later.ended.startswith("skipped: no side session: error")
