"""The compare view's diff engine (rrma/diff.py) against difflib's own unified diff, same input, same run.

    python benches/perf/bench_diff.py [--lines 10000] [--repeats 3]

The input is two files of ``--lines`` lines with every third line changed (thousands of small hunks:
the case where difflib's SequenceMatcher spends seconds). Prints ``key: value`` lines: the best of
``--repeats`` seconds for each and the ratio difflib/engine. Asserts nothing: figures, not timed tests
(docs/perf.md); tests/core/test_diff.py checks that the engine's diff is right on the same input.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rrma.diff import unified_lines  # noqa: E402


def best_of(repeats: int, work: object) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    a = [f"row {i} = {i * 7 % 1000}" for i in range(args.lines)]
    b = [f"row {i} = {i * 7 % 1000 + (i % 3 == 0)}" for i in range(args.lines)]
    engine = best_of(args.repeats, lambda: list(unified_lines(a, b, "x", "y")))
    plain = best_of(args.repeats, lambda: list(difflib.unified_diff(a, b, "x", "y", lineterm="")))
    print(f"lines: {args.lines}")
    print(f"engine_s: {engine:.3f}")
    print(f"difflib_s: {plain:.3f}")
    print(f"ratio_difflib_over_engine: {plain / engine:.1f}")


if __name__ == "__main__":
    main()
