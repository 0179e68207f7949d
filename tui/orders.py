"""Orders from the TUI to a run's driver: stop, pause or continue, resume here, a blackboard post, a steer note.

Each asks first (:class:`tui.dialogs.OrderScreen`: Enter writes, Esc cancels) and only then writes, through
rrma.log.control, in a thread worker of the screen that asked (group ``control``). A refusal (the driver
ended meanwhile, a bad note, an unwritable log) fails that worker, and the app's one failure handler shows it
("order not sent"); what was written comes back to the screen as :class:`OrderDone`. An order needs a live
driver; a post is kept in the log of a run at rest too, and a steer note unless no agent will ever read it.
Resuming starts no driver here: it posts :class:`tui.messages.ResumeRun`, which the app answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message
from textual.screen import Screen

from rrma.log.control import agent_names, live_driver, post_to_blackboard, send_control, send_steer
from rrma.log.state import RunState
from tui.dialogs import OrderInput, OrderScreen
from tui.messages import ResumeRun
from tui.session import RunSession


@dataclass
class OrderDone(Message):
    """What a write asked from a screen did, in one line to show: an order, post or steer note written (or found
    already in force); the dashboard's export says so too."""

    text: str


def at_rest(state: RunState) -> str:
    """Why no driver takes orders, and whether R resumes the run (never suggested when there is nothing to
    resume: its budget or goal is reached; RunState.nothing_to_resume)."""
    done = state.nothing_to_resume()
    if done is not None:
        return f"the run has finished ({state.finish_reason}): {done}, so there is nothing to resume"
    if state.finish_reason:
        return f"the run has finished ({state.finish_reason}); R resumes it (`rrma-tui resume RUN`)"
    return "no process is driving this run; R resumes it (`rrma-tui resume RUN`)"


def takes_orders(screen: Screen[Any], session: RunSession) -> bool:
    """Whether a driver holds the run; says why not in a notification."""
    if session.state.finish_reason or live_driver(session.run_dir) is None:
        screen.notify(at_rest(session.state), severity="warning")
        return False
    return True


def ask_stop(screen: Screen[Any], session: RunSession) -> None:
    if not takes_orders(screen, session):
        return
    if session.state.stop_request is not None:
        screen.notify(f"a stop is already in force (by {session.state.stop_request['by']})")
        return

    def confirmed(answer: OrderInput | None) -> None:
        if answer is not None:
            write_order(screen, session, "stop", answer)

    screen.app.push_screen(OrderScreen(
        f"Stop run {session.run_dir.name}?",
        "No new trials; running trials finish within their budget, then the run ends as stopped "
        "(`rrma-tui resume` continues it later).", "reason (optional)"), confirmed)


def ask_pause(screen: Screen[Any], session: RunSession) -> None:
    if not takes_orders(screen, session):
        return
    action = "continue" if session.state.paused else "pause"
    detail = ("Agents go on proposing." if action == "continue" else
              "Agents make no new proposal until you continue (w again); running trials finish; "
              "the wall clock keeps running.")

    def confirmed(answer: OrderInput | None) -> None:
        if answer is not None:
            write_order(screen, session, action, answer)

    screen.app.push_screen(OrderScreen(f"{action.capitalize()} run {session.run_dir.name}?", detail,
                                       "reason (optional)"), confirmed)


def ask_resume(screen: Screen[Any], session: RunSession) -> None:
    """Drive a run nobody drives (stopped, interrupted, crashed) from a headless child of this TUI."""
    state = session.state
    driver = live_driver(session.run_dir)
    if driver is not None:
        screen.notify(f"the run is live: {driver} drives it" + ("; w continues a paused run" if state.paused else ""))
        return
    if state.nothing_to_resume() is not None:
        screen.notify(at_rest(state), severity="warning")
        return

    def confirmed(answer: OrderInput | None) -> None:
        if answer is not None:
            screen.post_message(ResumeRun(session.run_dir))

    what = f"ended as {state.finish_reason}" if state.finish_reason else "has no live driver (its process is gone)"
    screen.app.push_screen(OrderScreen(
        f"Resume run {session.run_dir.name}?",
        f"The run {what}. A headless `rrma-tui resume` started by this TUI drives it from here: completed "
        "trials are kept, interrupted ones run again. `q` asks whether to stop it or leave it running.",
        "Enter resumes, Esc cancels"), confirmed)


def ask_post(screen: Screen[Any], session: RunSession) -> None:
    def confirmed(answer: OrderInput | None) -> None:
        if answer is not None:
            write_order(screen, session, "post", answer)

    live = not session.state.finish_reason and live_driver(session.run_dir) is not None
    detail = ("Every agent with history sees blackboard posts in its context." if live else
              f"The post is kept in the run's log; {at_rest(session.state)}.")
    screen.app.push_screen(OrderScreen(f"Post to the blackboard as human:{session.reviewer}", detail,
                                       "what to post", required=True), confirmed)


def ask_steer(screen: Screen[Any], session: RunSession, to: str) -> None:
    """Ask for a steer note, addressed to ``to`` at first (the agent the table is filtered to, or "": every agent)."""
    if session.state.nothing_to_resume() is not None:  # no agent will ever read it
        screen.notify(f"no steer note: {at_rest(session.state)}", severity="warning")
        return

    def confirmed(answer: OrderInput | None) -> None:
        if answer is not None:
            write_order(screen, session, "steer", answer)

    screen.app.push_screen(OrderScreen(
        f"Steer note from human:{session.reviewer}",
        "The agents it is for see it in their context from their next proposal on; it shows in their trace.",
        "the note", required=True, agents=sorted(agent_names(session.state)), to=to),
        confirmed)


def write_order(screen: Screen[Any], session: RunSession, what: str, answer: OrderInput) -> None:
    """Append the order or note in a worker of ``screen``, which is told :class:`OrderDone` once it is written."""
    run_dir, who = session.run_dir, session.reviewer

    def write() -> None:
        if what == "post":
            sent = post_to_blackboard(run_dir, answer.text, who)
        elif what == "steer":
            sent = send_steer(run_dir, answer.text, who, answer.to)
        else:
            sent = send_control(run_dir, what, who, answer.text)
        screen.post_message(OrderDone(sent.message))

    screen.run_worker(write, name="write_order", group="control", thread=True, exit_on_error=False)
