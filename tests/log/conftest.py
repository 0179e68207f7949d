"""Fixtures for the log room's tests (rrma/log): the run generator the TUI's tests use (tests/tui/make_run.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tui"))  # make_run: realistic runs, written through RunStore
