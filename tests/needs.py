"""Skip markers for the tests that need a tool the machine may lack (one definition, used by every such test)."""

from __future__ import annotations

import shutil

import pytest

# Debian's `coq` package gives both; a test that drives `coqtop` may also compile with `coqc`
needs_coq = pytest.mark.skipif(shutil.which("coqc") is None or shutil.which("coqtop") is None,
                               reason="coqc/coqtop not on PATH (Debian: apt-get install coq)")
