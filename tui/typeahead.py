"""Keys typed ahead go where they are typed: held while a key's action moves the focus, then given to the new focus.

Textual forwards each key from the terminal to the widget focused *when the app reads it*, and a key's action
runs only when the key has bubbled back up to the app; ``Widget.focus()`` then moves the focus later still (a
callback queued behind the keys already read). So in a burst (a paste, a fast typist) every key after ``/`` was
already on its way to the table before the filter box took focus: ``/t0003`` opened the trace (``t``) and
``/alice⏎`` in the timeline opened a trial (issue 35). :class:`TypeAhead` keeps the order the person typed in:

- after any key has been handled by the app (its binding run or not), later keys are held until the keys
  forwarded before the hold began have come back up (or stopped on their way) and the callbacks that key's action
  queued (a ``focus()``, a screen pushed) have run; a screen pushed by it is waited for until it has resumed and
  focused the widget it asked for. Ending the hold sooner let a key typed after a paste (its Enter) overtake the
  paste's last keys, still climbing from a busy table: ``/t0003⏎`` filtered by ``t00`` on a loaded machine;
- a key that was forwarded to a widget which has since lost the focus reaches the app as a stale key: it is not
  matched against the bindings of the screen underneath but sent, in order, to the widget now focused;
- held keys are then dispatched again from the app, as if they had just been typed.

Keys typed one at a time never wait: nothing is in flight when they arrive.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from textual import events

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode
    from textual.screen import Screen
    from textual.timer import Timer

SCREEN_FOCUS_WAIT = 1.0  # seconds: the held keys go on after this even if a screen pushed never resumed
HOLD_WAIT = 5.0  # seconds: the held keys go on after this even if a key's way up never drained (a widget closed)
ROUTED_KEPT = 256  # keys remembered with the widget they were forwarded to (those stopped on the way never return)


def fresh(event: events.Key) -> events.Key:
    """A copy of ``event`` not yet forwarded, to be dispatched from the app again."""
    return events.Key(event.key, event.character)


class TypeAhead:
    """The app's key gate (see the module docstring); the app calls :meth:`arrived` and :meth:`handled`."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.held: list[tuple[events.Key, DOMNode | None]] = []  # (key, the widget it was forwarded to)
        self.holding = False
        self.routed: OrderedDict[int, tuple[events.Key, DOMNode]] = OrderedDict()  # id(key) -> (key, forwarded to)
        self._screen_wait: Screen[Any] | None = None  # a screen pushed by a key, whose focus is awaited
        self._timer: Timer | None = None
        self._hold = 0  # which hold the queued callbacks belong to (one ended by its timer must not end the next)

    def target(self) -> DOMNode:
        """Where the app forwards a key now (Textual's rule: the focused widget, else the screen)."""
        return self.app.focused or self.app.screen

    def arrived(self, event: events.Key) -> bool:
        """A key reached the app (fresh from the terminal, or bubbled back up); True if it was taken here."""
        if not event.is_forwarded:
            if self.holding:
                self.held.append((event, None))
                return True
            self.routed[id(event)] = (event, self.target())
            while len(self.routed) > ROUTED_KEPT:
                self.routed.popitem(last=False)
            return False
        sent = self.routed.pop(id(event), None)
        if sent is None or sent[0] is not event:
            return False  # not one the app forwarded (a key given again after a hold): its bindings apply
        if self.holding:
            self.held.append((event, sent[1]))  # typed after a key whose action has not finished
            return True
        if sent[1] is self.target():
            return False  # typed into the widget that still has the focus: its bindings apply
        # forwarded before the focus moved: it belongs to the widget focused now, not to the screen underneath
        self.app.call_later(self.app.on_event, fresh(event))
        return True

    def handled(self, screen_before: Screen[Any]) -> None:
        """The app has handled a key that bubbled up: hold later keys until that key's queued callbacks have run."""
        if self.holding:
            return
        self.holding = True
        self._hold += 1
        self._timer = self.app.set_timer(HOLD_WAIT, self.release)
        self._drain(self._in_flight(), self._hold, screen_before)

    def _in_flight(self) -> list[DOMNode]:
        """The widgets keys were forwarded to and have not come back from (or were stopped at), each once."""
        nodes: list[DOMNode] = []
        for _key, node in self.routed.values():
            if node.is_attached and node not in nodes:
                nodes.append(node)
        return nodes

    def _drain(self, nodes: list[DOMNode], hold: int, screen_before: Screen[Any]) -> None:
        """Settle once every key already queued at ``nodes`` has come back to the app or stopped on its way.

        A key climbs by being posted to each ancestor's queue in turn, and every queue runs in order, so a
        callback sent up the same way (the widget, each ancestor, the app) arrives behind all of them."""
        if not nodes:
            self.app.call_later(self._settle, screen_before, hold)
            return
        path = [nodes[0], *nodes[0].ancestors]  # the ancestors end with the app

        def step(at: int) -> None:
            while at < len(path):
                if path[at].call_later(step, at + 1):
                    return
                at += 1  # a widget closed meanwhile: its keys are gone, go on from its parent
            self._drain(nodes[1:], hold, screen_before)

        step(0)

    async def _settle(self, screen_before: Screen[Any], hold: int) -> None:
        if hold != self._hold or not self.holding:
            return  # its hold ended by the timer (a newer one may be on)
        screen = self.app.screen
        if screen is not screen_before and screen.focused is None:
            # a screen just pushed focuses a widget when it resumes (focus_moved), or never: its own queue says
            # when it has resumed (a callback behind its ScreenResume), then the app's queue runs the focus()
            # its on_mount asked for; the timer only covers a screen that goes before it ever resumes
            self._screen_wait = screen
            if self._timer is not None:
                self._timer.stop()
            self._timer = self.app.set_timer(SCREEN_FOCUS_WAIT, self.release)
            screen.call_later(self.app.call_later, self._screen_resumed, screen)
            return
        await self.release()

    async def _screen_resumed(self, screen: Screen[Any]) -> None:
        if self._screen_wait is screen:
            await self.release()

    async def focus_moved(self) -> None:
        """A widget took the focus: the screen awaited has focused its widget."""
        if self._screen_wait is not None and self._screen_wait is self.app.screen and self.app.focused is not None:
            await self.release()

    async def release(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._screen_wait = None
        held, self.held = self.held, []
        self.holding = False
        for n, (key, sent_to) in enumerate(held):
            if sent_to is not None and sent_to is not self.target():
                key = fresh(key)  # forwarded before the focus moved: typed for the widget focused now
            await self.app.on_event(key)  # as if it arrived now; it may start a hold again, which takes the rest
            if self.holding:
                self.held.extend(held[n + 1:])
                return
