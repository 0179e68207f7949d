"""What the Lean oracle's tests share: where the fixtures and the shared REPL transcripts are, the
skip marks for a missing Lean or missing transcripts, and a checker that replays hand-written transcripts.

The oracle is tested where Lean cannot be installed, in three layers: rules that need no Lean are tested
directly; the verdict logic runs on Lean's answers (the real REPL transcripts in ``../shared`` and the
hand-written ones in ``tests/fixtures/lean``, through :class:`RecordedTransport`, a fake REPL process
speaking the wire protocol, a fake ``lake``); real-Lean tests run when ``lake`` is on PATH and are
skipped otherwise, with the reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from oracle.lean.checker import LeanChecker
from oracle.lean.transport import RecordedTransport

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "lean"
SHARED = Path(os.environ["RRMA_SHARED"]) if os.environ.get("RRMA_SHARED") else REPO / ".." / "shared"
TRANSCRIPTS = SHARED.resolve() / "lean-repl-transcripts"
needs_transcripts = pytest.mark.skipif(
    not TRANSCRIPTS.is_dir(),
    reason=f"shared Lean REPL transcripts not found at {TRANSCRIPTS} (set RRMA_SHARED to the shared folder)",
)
HAVE_LEAN = shutil.which("lake") is not None and shutil.which("lean") is not None
needs_lean = pytest.mark.skipif(
    not HAVE_LEAN,
    reason="Lean 4 is not installed (no `lake`/`lean` on PATH): install elan and run `lake build` in lean_project",
)


def recorded_checker(*stems: str, **kwargs: Any) -> LeanChecker:
    """A checker whose every REPL session replays the given hand-written transcripts."""
    return LeanChecker(mode="repl", transport_factory=lambda: RecordedTransport.from_files(
        *(FIXTURES / s for s in stems)), **kwargs)
