"""Screens reach one another through messages the app handles (tui/messages.py), never by import:
no screen module imports another (base.py is what they share), and neither the dialogs nor the
messages import a screen. Imports inside functions count (the old screens imported each other
lazily, which is how a 10-file circle through the CLI hid)."""

from __future__ import annotations

import ast
from pathlib import Path

TUI = Path(__file__).resolve().parents[2] / "tui"
SHARED = {"tui.screens.base"}  # what every screen may import


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(TUI.parent).with_suffix("").parts)


def imported(source: str, module: str) -> set[str]:
    """Every module ``module`` (with this ``source``) imports, at the top or inside a function, absolute or relative."""
    package = module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def screen_imports(source: str, module: str) -> list[str]:
    """The screen modules (other than base.py and itself) that ``module`` imports."""
    return sorted(name for name in imported(source, module)
                  if name.startswith("tui.screens.") and name not in SHARED and name != module
                  and name.count(".") == 2)


def test_no_screen_imports_another_screen() -> None:
    screens = [p for p in sorted((TUI / "screens").glob("*.py")) if p.name not in ("__init__.py", "base.py")]
    assert len(screens) >= 9
    found = {p.name: screen_imports(p.read_text(), module_of(p)) for p in screens}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_dialogs_and_messages_import_no_screen() -> None:
    for module in ("dialogs.py", "messages.py"):
        assert screen_imports((TUI / module).read_text(), f"tui.{module[:-3]}") == [], module


def test_the_checker_sees_a_screen_import_inside_a_function() -> None:
    """The control: a lazy import of another screen, as dashboard.py had, and a relative one are found."""
    source = ("from tui.screens.base import RunScreen\n\n\ndef go():\n"
              "    from tui.screens.trial import TrialScreen\n    from .lineage import LineageScreen\n")
    assert screen_imports(source, "tui.screens.dashboard") == ["tui.screens.lineage", "tui.screens.trial"]
