"""Every key binding of every screen is on the help screen (``?``) or in the footer."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_screens import make_app, open_dashboard

from tui.dialogs import HelpScreen, binding_rows

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("keys", [
    [],  # runs list
    ["wait"],  # dashboard
    ["wait", "enter"],  # trial
    ["wait", "t"],  # trace
    ["wait", "v"],  # review
    ["wait", "l"],  # lineage
])
async def test_every_binding_is_in_the_footer_or_the_help_screen(runs_dir: Path, keys: list[str]) -> None:
    app = make_app(runs_dir, "demo-run" if keys else None)
    async with app.run_test(size=(120, 40)) as pilot:
        for key in keys:
            if key == "wait":
                await open_dashboard(pilot, app)
            else:
                await pilot.press(key)
        screen = app.screen
        expected = {b.binding.description for b in screen.active_bindings.values() if not b.binding.system}
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = {desc for _, desc in app.screen.rows}
        assert expected <= shown and "Quit" in shown and "Help" in shown
        assert sorted(binding_rows(screen)) == sorted(app.screen.rows)  # the same rows, the screen's own first
        await pilot.press("escape")
        assert app.screen is screen
