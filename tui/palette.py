"""Rich styles taken from the app's Textual theme, for text that Rich renderables draw.

CSS colours widgets, but a ``rich.text.Text`` or ``Syntax`` built in Python carries its own
styles, and fixed names (``"yellow"``, ``"ansi_dark"``) are unreadable on a light theme. A
:class:`Palette` holds the theme's ``$text-*`` colours (chosen by Textual to read well on the
theme's background) as Rich styles; screens build one with :func:`palette_of` and build a new
one when ``App.theme_changed_signal`` fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pygments.token import Token
from rich.style import Style
from rich.syntax import ANSISyntaxTheme, SyntaxTheme
from textual.app import App
from textual.color import Color, ColorParseError

Tone = Literal["primary", "secondary", "accent", "success", "warning", "error", "muted"]


@dataclass(frozen=True)
class Palette:
    """One theme's text colours as Rich styles (foreground only: the widget keeps its background)."""

    dark: bool
    primary: Style
    secondary: Style
    accent: Style
    success: Style
    warning: Style
    error: Style
    muted: Style  # the theme's muted foreground over its background, or ``dim`` where that is not a colour

    def tone(self, name: Tone) -> Style:
        style: Style = getattr(self, name)
        return style

    def syntax_theme(self) -> SyntaxTheme:
        """A Syntax theme in these colours with no background of its own (JSON, code, diffs)."""
        return ANSISyntaxTheme({
            Token.Comment: self.muted + Style(italic=True),
            Token.Keyword: self.accent,
            Token.Keyword.Constant: self.accent,
            Token.Name.Tag: self.primary,  # JSON keys
            Token.Name.Function: self.primary,
            Token.Name.Class: self.warning,
            Token.Literal.String: self.success,
            Token.Literal.Number: self.warning,
            Token.Operator: Style(),
            Token.Punctuation: self.muted,
            Token.Generic.Inserted: self.success,
            Token.Generic.Deleted: self.error,
            Token.Generic.Heading: self.primary + Style(bold=True),
            Token.Generic.Subheading: self.secondary,
            Token.Error: self.error,
        })


def _colour(value: str | None) -> Color | None:
    if not value:
        return None
    try:
        return Color.parse(value)
    except ColorParseError:
        return None


def palette_of(app: App[object]) -> Palette:
    """The palette of the app's current theme (``$text-primary`` … ``$text-error``, muted foreground)."""
    variables = app.get_css_variables()

    def style(name: str, fallback: str) -> Style:
        colour = _colour(variables.get(name))
        return Style(color=colour.rich_color) if colour is not None else Style.parse(fallback)

    muted = Style(dim=True)
    foreground, background = _colour(variables.get("foreground-muted")), _colour(variables.get("background"))
    if foreground is not None and background is not None and foreground.ansi is None and background.ansi is None:
        muted = Style(color=(background + foreground).rich_color)  # blend the translucent foreground
    return Palette(
        dark=app.current_theme.dark,
        primary=style("text-primary", "cyan"),
        secondary=style("text-secondary", "blue"),
        accent=style("text-accent", "magenta"),
        success=style("text-success", "green"),
        warning=style("text-warning", "yellow"),
        error=style("text-error", "red"),
        muted=muted,
    )
