"""The TUI's own settings (the theme), kept between sessions in a small JSON file.

Where: ``$RRMA_CONFIG_DIR/tui.json``, else ``$XDG_CONFIG_HOME/rrma/tui.json``, else
``~/.config/rrma/tui.json``. Nothing about a run lives here (runs keep everything in their own
directory). An unreadable or malformed file is ignored (defaults apply) and replaced on the next
save; a file that cannot be written costs only the persistence, never the session.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def settings_path() -> Path:
    base = os.environ.get("RRMA_CONFIG_DIR")
    if base:
        return Path(base) / "tui.json"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    root = Path(xdg) if xdg else Path.home() / ".config"
    return root / "rrma" / "tui.json"


def load_settings() -> dict[str, Any]:
    """The saved settings, or {} when there are none or they cannot be read."""
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_setting(key: str, value: Any) -> str | None:
    """Store one setting (atomic replace); returns why it could not be saved, or None."""
    path = settings_path()
    data = load_settings()
    data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tui.json.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None
