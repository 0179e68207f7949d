"""Helpers for the TUI tests: a fixed clock, a message recorder, waiting on a condition, plain text."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from screen_text import screen_cells
from textual.message import Message
from textual.pilot import Pilot

NOW = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)  # three hours after the fixture runs start


def fixed_clock() -> datetime:
    return NOW


class MessageLog:
    """Collects every message the app processes (run_test's message_hook)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def __call__(self, message: Message) -> None:
        self.messages.append(message)

    def of(self, kind: type[Message]) -> list[Message]:
        return [m for m in self.messages if isinstance(m, kind)]


async def wait_until(pilot: Pilot[object], predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let the app process messages until ``predicate()`` holds (fails the test after ``timeout``)."""
    loop_time = 0.0
    while not predicate():
        if loop_time > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.02)
        loop_time += 0.02


async def settle(pilot: Pilot[object], quiet: float = 0.3, timeout: float = 10.0) -> None:
    """Let the app draw until its screen (every cell's text and style) has not changed for ``quiet`` seconds, or
    ``timeout`` passed: what a snapshot is taken of. A fixed pause was not enough on a loaded machine (a chart
    caught before it was redrawn at its final width, one column off)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    last, since = screen_cells(pilot.app), loop.time()
    while loop.time() < end:
        await pilot.pause(0.05)
        now = screen_cells(pilot.app)
        if now != last:
            last, since = now, loop.time()
        elif loop.time() - since >= quiet:
            return


WaitUntil = Callable[[Pilot[object], Callable[[], bool]], Awaitable[None]]


def plain(renderable: object, width: int = 120) -> str:
    """What a rich renderable (a Static's content) reads as, without styles."""
    from rich.console import Console

    console = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(renderable)
    return console.export_text()
