"""CoqHammer's ``hammer`` on the second core, beside the proof search (issue 33, round seven).

The search (:mod:`agents.best_first`) drives one ``coqtop``: one core. The bench's budget is 30 s of
wall time per theorem on two cores, so the second one idled. :class:`SideHammer` gives it to
CoqHammer's full ``hammer`` (premise selection, the ATP Debian's ``eprover``, then reconstruction):
a second session with the theorem's own context, at a lower priority (so the search keeps its
core), runs ``intros. hammer.`` while the search runs. When it succeeds,
the search stops and replays the reconstruction ``hammer`` prints (``Replace the hammer tactic with:
...``; it needs no ATP) in its own session, where it must close the goal and pass the source's
checks like any tactic; then the oracle checks it as any proof.

The side session loads CoqHammer's tactics and the plugin's ML module, then the theorem's context.
It runs only where the search's session has those tactics loaded too (the bench drops them for a
file they would load itself), and stops before ``hammer`` when its session has loaded any module the
search's has not: the names ``hammer``'s premise selection sees are the context's. A reconstruction
naming what the search's session lacks fails that replay and is dropped.

One ``hammer`` runs at a time. When the search ends first, the call is interrupted (SIGINT to the
side's coqtop, SIGKILL to the ATPs it started), so the session stays warm for the next theorem (the
plugin's first call in a session spends 8-11 s fetching and indexing the library); a theorem that
starts while a call still runs gets no side pass (``skipped``).
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from oracle.coq.sandboxing import coq_where
from oracle.proof_common import TheoremTask

# CoqHammer's tactics (the reconstructions need them) and the plugin's ML module, before the context (Coq refuses
# `Declare ML Module` inside a section, and the module needs the tactics' ML library loaded first); the .v of
# `From Hammer Require Import Hammer` loads nothing more. Its only ATP here is eprover, the others are off
PLUGIN = ('From Hammer Require Import Tactics.\nDeclare ML Module "coq-hammer.plugin".\n'
          "Unset Hammer Vampire.\nUnset Hammer CVC4.\nUnset Hammer Z3.\n"
          "Set Hammer ATPLimit {atp}.\nSet Hammer ReconstrLimit {reconstruct}.\n")
TACTICS_MODULE = "Hammer.Tactics.Tactics"  # the reconstruction tactics: the search's session must have them
NICE = 10
SAME_LIBRARIES = True  # a switch for tests: False lets `hammer` run in a session that loaded more than the search's
ATP_SECONDS = 12  # `Set Hammer ATPLimit`: eprover's time (the search's budget is 25 s, the first call's setup 8-11 s)
RECONSTRUCT_SECONDS = 5  # `Set Hammer ReconstrLimit` (CoqHammer's default)
STOP_SECONDS = 2.0  # how long an interrupted call may take to end before its session is closed
MEMORY_MB = 4096  # the side session's address space: at the search's 2 GiB, `hammer` ran coqtop out of memory
_REPLACE = re.compile(r"Replace the hammer tactic with:\s*(?P<tac>.+?)(?:\n\s*\n|$)", re.S)
# `srun T opts` as the plugin prints it (`srun eauto use: l unfold: c`) does not parse, with the plugin loaded or not:
# the grammar reads `eauto use` as one tactic and fails at the colon. `srun (T) opts` parses wherever CoqHammer's
# tactics are loaded (the search's session and the checker)
_SRUN = re.compile(r"^srun\s+(?P<tac>[A-Za-z_][\w'.]*)(?=\s|\.$)")
PARENTHESISE_SRUN = True  # a switch for tests: False replays the printed text (round seven: a syntax error)


def available() -> bool:
    """Whether the plugin (Debian's ``libcoq-hammer``) and its ATP ``eprover`` are installed."""
    where = coq_where()
    return (where is not None and (where / "user-contrib" / "Hammer" / "Plugin" / "hammer_plugin.cmxs").is_file()
            and shutil.which("eprover") is not None)


def preload(atp_seconds: int, reconstruct_seconds: int) -> str:
    """The sentences the side session runs before each context (the tactics, the plugin, its limits)."""
    return PLUGIN.format(atp=max(1, atp_seconds), reconstruct=max(1, reconstruct_seconds))


def reconstruction(notes: str) -> str | None:
    """The tactic ``hammer`` said to replace it with, one sentence; None when it printed none."""
    m = _REPLACE.search(notes)
    if m is None:
        return None
    tactic = " ".join(m.group("tac").split())
    if PARENTHESISE_SRUN:
        tactic = _SRUN.sub(r"srun (\g<tac>)", tactic)
    return tactic if tactic.endswith(".") else tactic + "."


@dataclass
class SideOutcome:
    """One side pass: the tactics from the statement (``intros.`` and the reconstruction) when it
    found a proof, how it ended, its seconds."""

    tactics: tuple[str, ...] | None = None
    ended: str = "running"
    seconds: float = 0.0


class ThreadPass:
    """A pass beside the search that runs in a thread (this module's ``hammer``, :mod:`agents.side_search`'s
    second search): whether it has ended, and waiting for it."""

    _thread: threading.Thread | None = None

    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def wait(self, until: float) -> None:
        """Wait for the running call, at most until ``until`` (monotonic)."""
        if self._thread is not None:
            self._thread.join(max(0.0, until - time.monotonic()))


class SideHammer(ThreadPass):
    """``hammer`` on each theorem in a second prover session (see the module docstring).

    ``make_states``: builds that session (a ``CoqProofStates`` with :func:`preload` and a lower
    priority), once, on first use; ``main_libraries``: the modules the search's session has loaded
    for the theorem (read when the side pass begins, after the search's start)."""

    def __init__(self, make_states: Callable[[], Any], main_libraries: Callable[[], Iterable[str]]) -> None:
        self._make = make_states
        self._main_libraries = main_libraries  # what the search's session has loaded for this theorem
        self._states: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()  # stop() asked the running call to end
        self.broken = ""  # why the side session cannot run (then no side pass is started again)
        self.skipped = 0  # theorems that began while a call still ran

    def begin(self, task: TheoremTask, deadline: float) -> SideOutcome | None:
        """Start ``hammer`` on ``task`` to end by ``deadline`` (monotonic); None when the previous
        call still runs (the search says "skipped: busy")."""
        if self.broken:
            return SideOutcome(ended=f"skipped: no side session: {self.broken}"[:300])
        if self._thread is not None and self._thread.is_alive():
            self.skipped += 1
            return None
        loaded = frozenset(self._main_libraries())
        if TACTICS_MODULE not in loaded:  # its reconstructions would not run where the proof is checked
            return SideOutcome(ended="skipped: the search's session does not load CoqHammer's tactics")
        outcome = SideOutcome()
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, args=(task, deadline, outcome, loaded),
                                        name=f"side-hammer-{task.name}", daemon=True)
        self._thread.start()
        return outcome

    def _run(self, task: TheoremTask, deadline: float, outcome: SideOutcome, loaded: frozenset[str]) -> None:
        started = time.monotonic()
        try:
            if self._states is None:
                self._states = self._make()
            states = self._states
            root = states.start(task, timeout_s=max(5.0, deadline - time.monotonic()))
            extra = sorted(set(states.loaded_libraries()) - loaded)
            if extra and SAME_LIBRARIES:  # `hammer` could draw on what the checker does not load (the stripped module)
                outcome.ended = f"skipped: the side session loads {len(extra)} modules the search's does not: {extra[:3]}"
                return
            intro = states.run_tactic(root, "intros.", 2.0)
            node, prefix = (intro.state, ("intros.",)) if intro.outcome == "progress" else (root, ())
            left = deadline - time.monotonic()
            if left < 2.0:
                outcome.ended = "no time left after the statement"
                return
            result = states.run_tactic(node, "hammer.", left)
            replay = reconstruction(result.notes or "") if result.outcome == "proved" else None
            if replay is None:
                outcome.ended = f"{result.outcome}: {result.message or 'no reconstruction printed'}"[:300]
                return
            outcome.tactics = (*prefix, replay)
            outcome.ended = "found"
        except Exception as exc:  # the side pass must never take the search down: say why
            outcome.ended = f"error: {type(exc).__name__}: {exc}"[:300]
            if self._states is None:  # no session could be made: none will be
                self.broken = outcome.ended
        finally:
            if self._stopping.is_set() and self._states is not None:
                self._states.settle()  # the interrupt may have come after `hammer` ended
                if outcome.tactics is None and outcome.ended.startswith(("error", "timeout")):
                    outcome.ended = "stopped: the search ended first"
            outcome.seconds = time.monotonic() - started

    def stop(self) -> None:
        """The search is over: end the running call now (the session stays warm for the next theorem)."""
        if self._thread is not None and self._thread.is_alive() and self._states is not None:
            self._stopping.set()
            interrupt = getattr(self._states, "interrupt", None)
            if interrupt is not None:
                interrupt()
            self._thread.join(STOP_SECONDS)
            if self._thread.is_alive():  # the interrupt came between two sentences and coqtop dropped the
                self._states.close()     # rest of the input: end that session, the next theorem starts another
                self._thread.join(5.0)

    def close(self) -> None:
        """Stop the side session (a call in progress ends with it)."""
        if self._states is not None:
            self._states.close()
            self._states = None
        if self._thread is not None:
            self._thread.join(10.0)
