"""TUI benchmark: open time of a long run (cold, and from its checkpoint) and update latency under live appends.

The measuring code drives the Textual app, so it lives in ``tui/bench.py`` (nothing under
``benches/`` imports the UI); this entry point runs it. Usage:
``python benches/perf/bench_tui.py [--events 1000000] [--workdir DIR] [--seconds 10]``
(``--workdir`` keeps the generated runs for the next time: a million events take a minute to write).
"""

from __future__ import annotations

import runpy

if __name__ == "__main__":
    runpy.run_module("tui.bench", run_name="__main__", alter_sys=True)
