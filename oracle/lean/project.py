"""Where Lean is and which project it checks in: the default Lake project, its pinned toolchain,
and the error that says how to install Lean when ``lake``/``lean`` are missing.

Why apart: the checker, the transports, the oracle and the benches all name the project and raise
:class:`LeanNotInstalled`; none of them should have to import the checker for that.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from rrma.contracts import OracleError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PROJECT = REPO_ROOT / "lean_project"
ELAN_URL = "https://github.com/leanprover/elan"


def toolchain_of(project_dir: Path | str) -> str:
    path = Path(project_dir) / "lean-toolchain"
    try:
        return path.read_text(encoding="utf-8").strip() or "(empty lean-toolchain)"
    except OSError:
        return f"(no lean-toolchain file in {project_dir})"


class LeanNotInstalled(OracleError):
    """Lean 4 (``lake``/``lean``) is not on PATH; the message says how to install it."""

    def __init__(self, project_dir: Path | str = DEFAULT_PROJECT, missing: Sequence[str] = ("lake", "lean")) -> None:
        self.project_dir = Path(project_dir)
        self.toolchain = toolchain_of(project_dir)
        super().__init__(
            f"Lean 4 is not installed here: {', '.join(f'`{m}`' for m in missing)} not found on PATH. "
            f"Install elan, the Lean toolchain manager ({ELAN_URL}: "
            "`curl https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh -sSf | sh`), "
            f"then run `lake build` in {self.project_dir}: elan installs the toolchain pinned in "
            f"{self.project_dir / 'lean-toolchain'} ({self.toolchain}) and lake builds the REPL."
        )


def lean_missing() -> list[str]:
    """The Lean executables not on PATH (empty when Lean looks usable)."""
    return [exe for exe in ("lake", "lean") if shutil.which(exe) is None]

