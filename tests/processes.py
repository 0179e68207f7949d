"""Finding a test's processes from outside: by a marker on their command line, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) host pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and b") Z" not in stat:
            found.append(int(entry))
    return found
