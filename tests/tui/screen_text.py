"""What a Pilot app's screen shows, as text: the lines a terminal would show (modals over their screen)."""

from __future__ import annotations

import re

from textual.app import App

BOX = re.compile(r"[│╭╮╰╯─█▀▄▊▎▔▁]")


def screen_lines(app: App[object]) -> list[str]:
    """Every row of the screen as drawn now (the compositor's strips: what the terminal gets)."""
    return ["".join(segment.text for segment in strip) for strip in app.screen._compositor.render_strips()]


def screen_cells(app: App[object]) -> tuple[tuple[tuple[str, str], ...], ...]:
    """:func:`screen_lines` with each segment's style: two frames that differ only in colour differ here."""
    return tuple(tuple((segment.text, str(segment.style)) for segment in strip)
                 for strip in app.screen._compositor.render_strips())


def flat(lines: list[str]) -> str:
    """The lines joined as one text, box drawing and runs of spaces removed: a wrapped sentence reads whole."""
    return " ".join(" ".join(BOX.sub(" ", line).split()) for line in lines).strip()
