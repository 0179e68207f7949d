"""TUI benchmark: open time of a 100,000-event run and update latency under live appends.

The measuring code drives the Textual app, so it lives in ``tui/bench.py`` (nothing under
``benches/`` imports the UI); this entry point runs it. Usage:
``python -m benches.perf.bench_tui [--workdir DIR] [--seconds 10]``.
"""

from __future__ import annotations

import runpy

if __name__ == "__main__":
    runpy.run_module("tui.bench", run_name="__main__", alter_sys=True)
