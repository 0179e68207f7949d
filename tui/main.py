"""The ``rrma-tui`` console script: the headless CLI (``cli/``) with the TUI to open where a command asks.

The one place the two meet. ``cli/`` never imports ``tui/``: a command that shows the TUI returns a
:class:`cli.output.TuiRequest`, and :func:`open_tui` opens it. The Textual app is imported only
then, so ``rrma-tui --headless ...``, ``rrma-tui ls`` and every other headless command never load
textual (tests/cli/test_cli.py checks it).
"""

from __future__ import annotations

import sys

from cli.main import main as cli_main
from cli.output import TuiRequest


def open_tui(request: TuiRequest) -> int:
    """Show the TUI for ``request`` until the person quits; the exit code."""
    from tui.app import run_app

    return run_app(request.runs_dir, request.run_dir, request.reviewer,
                   list(request.start_args) if request.start_args is not None else None,
                   experiment=request.experiment)


def main(argv: list[str] | None = None) -> int:
    return cli_main(argv, open_tui=open_tui)


if __name__ == "__main__":
    sys.exit(main())
