"""Orders and notes from a person to a run: stop, pause, continue; blackboard posts; steer notes.

Why it exists: a run is driven by one process (the one holding ``RUN/.driver.lock``: a headless
``rrma-tui`` in another terminal, the TUI's loop worker, a driver whose trials run on a Ray
cluster). The one channel every driver reads is its own log: the loop folds a tail of
``events.jsonl`` every 0.2 s (rrma/run/loop.py). So an order is an event appended by whoever sends
it, in the chain like a review, and the loop obeys it on its next fold; no signal, socket or pid
is involved, and the executor does not matter.

Events (rrma/log/events.py), actor ``human:<name>``:

* ``run.control`` ``{action, by, reason}``. ``stop``: what Ctrl-C's first press does (no new
  proposals; running trials finish within their budget; a proposal already made is recorded as
  ``aborted``), and ``run.finished`` records ``stopped`` with ``stopped_by``/``stop_seq`` in its
  summary (Ctrl-C stays ``interrupted``). ``pause``: agents make no new proposal until
  ``continue`` (running trials finish; the wall clock keeps running, so a paused run still ends
  at ``budget.max_wall_seconds``). ``continue``: proposals go on. The loop writes a ``note`` when
  an order is in force. Orders bind the driver that is running when they are written: the next
  ``rrma-tui resume`` starts unpaused.
* ``blackboard.post`` ``{agent: "human:<name>", text}``: a post like an agent's; agents with
  history see it in their blackboard.
* ``agent.steer`` ``{text, by, to}``: a note to the agents named in ``to`` (empty: all). Each
  addressed agent has it in ``Context.steer`` from its next proposal on (the latest 10), and the
  loop records its delivery as a ``user`` turn in that agent's trace.

Invariant: an order is written only while a driver holds the run (:func:`live_driver`), so it is
never left in a log that nobody will read; posts and steer notes may be written to a run at rest
(the next resume reads them), and for a run at rest the derived views are rewritten at once.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rrma.log.codec import InvalidEvent, decode_line
from rrma.log.driver_lock import DriverLock
from rrma.log.layout import DRIVER_LOCK, EVENTS
from rrma.log.state import RunState
from rrma.log.store import RunNotFound, RunStore, iter_event_lines
from rrma.log.view_files import write_views

ACTIONS = ("stop", "pause", "continue")
MAX_TEXT = 4000  # characters of a post or steer note


class RunNotLive(Exception):
    """No process drives the run (nobody holds its driver lock), or it has finished: an order would go unread."""


class ControlError(ValueError):
    """The order or note is not valid for this run (unknown action, empty text, unknown agent)."""


@dataclass
class Sent:
    """What a send did: the event appended (None when there was nothing to do) and one line saying so."""

    event: Any
    message: str


def live_driver(run_dir: Path | str) -> str | None:
    """Who drives the run ("pid N on HOST since T"), or None when no process holds its driver lock.

    Probes the lock with a shared non-blocking ``flock`` and drops it at once; a driver starting
    in that instant retries its own lock briefly (:class:`rrma.log.store.DriverLock`), so the probe
    never makes it fail.
    """
    path = Path(run_dir) / DRIVER_LOCK
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # never driven by an rrma that keeps the lock
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return DriverLock(run_dir).holder()
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _nothing_to_resume(run_dir: Path) -> str | None:
    """RunState.nothing_to_resume of the whole run (run_facts folds its run.* events only, not its trials)."""
    from rrma.log.reader import read_state

    return read_state(run_dir, turns=False).nothing_to_resume()


def run_facts(run_dir: Path | str) -> tuple[RunState, set[str]]:
    """The run's lifecycle and orders (its ``run.*`` events folded) and the names of its agents.

    Reads every line but parses only ``run.*`` events, so it stays fast on a log of a million
    events; agent names come from ``agent:<name>`` actors and the task's agent list.
    """
    path = Path(run_dir) / EVENTS
    if not path.is_file():
        raise RunNotFound(f"{run_dir}: not a run directory (no {EVENTS})")
    state = RunState()
    agents: set[str] = set()
    for _offset, line in iter_event_lines(path):
        if line.startswith(b'{"actor":"agent:'):
            end = line.find(b'"', 16)
            if end > 16:
                agents.add(line[16:end].decode("utf-8", "replace"))
        if b'"kind":"run.' not in line:
            continue
        try:
            event = decode_line(line)
        except InvalidEvent:
            continue  # torn or unreadable: verify reports it; it cannot be an order
        if event.kind.startswith("run."):
            state.apply(event)
    return state, agents | agent_names(state)


def agent_names(state: RunState) -> set[str]:
    """The agents of a run: those in its folded state and those its task configures (with their copies)."""
    names = set(state.agents)
    copies = int((state.task.get("loop") or {}).get("agents_parallel", 1) or 1)
    for config in state.task.get("agents") or []:
        name = str(config.get("name", "")) if isinstance(config, dict) else ""
        if name:
            names.update([name] if copies == 1 else [f"{name}-{i + 1}" for i in range(copies)])
    names.discard("baseline")
    return names


def _actor(by: str | None) -> str:
    from rrma.log.review import default_reviewer

    name = (by or default_reviewer()).strip()
    if not name or any(c.isspace() for c in name):
        raise ControlError(f"a person's name has no spaces and is not empty, not {name!r}")
    return f"human:{name}"


def _text(text: str, what: str) -> str:
    text = text.strip()
    if not text:
        raise ControlError(f"the {what} is empty")
    if len(text) > MAX_TEXT:
        raise ControlError(f"the {what} has {len(text)} characters; at most {MAX_TEXT}")
    return text


def send_control(run_dir: Path | str, action: str, by: str | None = None, reason: str = "") -> Sent:
    """Append a ``run.control`` order for the live driver; nothing when it is already in force.

    Raises :class:`RunNotLive` when no driver holds the run or the run has finished, and
    :class:`ControlError` for an unknown action.
    """
    if action not in ACTIONS:
        raise ControlError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    actor = _actor(by)
    run_dir = Path(run_dir)
    state, _agents = run_facts(run_dir)
    driver = live_driver(run_dir)
    if driver is None:
        if not state.started_ts:
            why = "it never started"
        elif state.finish_reason is None:
            why = f"no process is driving it (its driver ended without finishing it); `rrma-tui resume {run_dir}` continues it"
        elif (done := _nothing_to_resume(run_dir)) is None:
            why = f"it finished ({state.finish_reason}); `rrma-tui resume {run_dir}` continues it"
        else:
            why = f"it finished ({state.finish_reason}): {done}, so there is nothing to resume"
        raise RunNotLive(f"{run_dir}: the run is not live: {why}")
    if state.finish_reason is not None:
        raise RunNotLive(f"{run_dir}: the run has finished ({state.finish_reason}); nothing to {action}")
    if action == "stop" and state.stop_request is not None:
        return Sent(None, f"a stop is already in force (seq {state.stop_request['seq']} by "
                          f"{state.stop_request['by']}); the run ends when its running trials finish")
    if action == "pause" and state.paused_by is not None:
        return Sent(None, f"already paused (seq {state.paused_by['seq']} by {state.paused_by['by']}); "
                          "`rrma-tui continue` lifts it")
    if action == "continue" and state.paused_by is None:
        return Sent(None, "not paused; nothing to continue")
    store = RunStore(run_dir)
    try:
        event = store.append("run.control", actor, {"action": action, "by": actor, "reason": reason.strip()})
    finally:
        store.close()
    effect = {"stop": "no new trials; running trials finish, then it ends as stopped",
              "pause": "no new proposals until continue; running trials finish",
              "continue": "proposals go on"}[action]
    return Sent(event, f"{action} sent (seq {event.seq}) to the driver, {driver}: {effect}")


def _rewrite_views_at_rest(store: RunStore) -> None:
    """A run nobody drives keeps its derived views in step with the log (verify compares them)."""
    if live_driver(store.dir) is None:
        write_views(store.dir, RunState.fold(store.scan().events))


def post_to_blackboard(run_dir: Path | str, text: str, by: str | None = None, trial_id: str | None = None) -> Sent:
    """Append a person's ``blackboard.post`` (live or at rest)."""
    actor = _actor(by)
    text = _text(text, "post")
    store = RunStore(run_dir)
    try:
        event = store.append("blackboard.post", actor, {"agent": actor, "text": text, "trial_id": trial_id,
                                                        "tags": ["human"]})
        _rewrite_views_at_rest(store)
    finally:
        store.close()
    return Sent(event, f"posted to the blackboard (seq {event.seq}) as {actor}")


def send_steer(run_dir: Path | str, text: str, by: str | None = None, to: list[str] | None = None) -> Sent:
    """Append an ``agent.steer`` note to the agents ``to`` (None or []: all of them).

    Raises :class:`ControlError` for an agent the run does not have.
    """
    actor = _actor(by)
    text = _text(text, "note")
    run_dir = Path(run_dir)
    state, agents = run_facts(run_dir)
    targets = sorted({name.strip() for name in (to or []) if name.strip()})
    unknown = [name for name in targets if agents and name not in agents]
    if unknown:
        raise ControlError(f"no agent {', '.join(map(repr, unknown))} in this run; its agents: {', '.join(sorted(agents))}")
    store = RunStore(run_dir)
    try:
        event = store.append("agent.steer", actor, {"text": text, "by": actor, "to": targets})
    finally:
        store.close()
    who = ", ".join(targets) if targets else "every agent"
    if live_driver(run_dir) is None:
        done = _nothing_to_resume(run_dir) if state.finish_reason else None
        if done is not None:
            return Sent(event, f"steer note recorded (seq {event.seq}) for {who}; no live driver, and no agent will "
                               f"see it: the run finished ({state.finish_reason}: {done}; nothing to resume)")
        return Sent(event, f"steer note recorded (seq {event.seq}) for {who}; no live driver: they see it when the "
                           "run is resumed")
    return Sent(event, f"steer note sent (seq {event.seq}) to {who}: in their context from their next proposal")
