"""SQLite export throughput on a 20,000-event run, against an earlier export in the same run.

    python benches/perf/bench_export.py [--events 20000] [--repeats 3] [--against HEAD]

A demo run (random search, 12 trials) is padded with agent turns to ``--events`` events (what big
runs are made of), then exported to a fresh SQLite file by :func:`rrma.log.export.export_runs`
(best of ``--repeats``), then again unchanged (skipped by its last hash) and after one more event (every row of the run
replaced in the same file). ``--against REV`` loads ``rrma/log/export.py`` as it was at git revision ``REV`` (the
old path) and times it on the same log, interleaved with the new one, so machine load hits both
alike; the ratio is what to read on a shared machine. ``--against ''`` skips it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benches.perf import module_at  # noqa: E402
from benches.perf.bench_foundation import export_rate  # noqa: E402
from rrma.log.export import export_runs  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.run.loop import start_run  # noqa: E402
from rrma.task import load_task  # noqa: E402


def old_export(rev: str, root: Path) -> ModuleType | None:
    """``rrma/log/export.py`` at git revision ``rev`` as a module (None where git cannot show it)."""
    return module_at(rev, "rrma/log/export.py", root)


def timed(export: Any, run_dir: Path, out: Path) -> float:
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    export([run_dir], out)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", default="HEAD", help="git revision of the old export path ('' skips it)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rrma-export-") as tmp:
        root = Path(tmp)
        task = load_task(ROOT / "benches" / "demo" / "task.yaml", {"budget.max_trials": 12})
        run_dir = start_run(task, root / "runs").run_dir
        _, total = export_rate(run_dir, args.events, root)  # pads the log (and warms the caches)
        assert len(RunStore(run_dir).scan().events) == total
        old = old_export(args.against, root) if args.against else None
        new_s: list[float] = []
        old_s: list[float] = []
        for _ in range(args.repeats):  # interleaved: load hits both alike
            new_s.append(timed(export_runs, run_dir, root / "new.db"))
            if old is not None:
                old_s.append(timed(old.export_runs, run_dir, root / "old.db"))
        started = time.perf_counter()
        export_runs([run_dir], root / "new.db")  # unchanged: skipped by its last hash
        unchanged = time.perf_counter() - started
        RunStore(run_dir).append("note", "harness", {"text": "one more event"})
        started = time.perf_counter()
        export_runs([run_dir], root / "new.db")  # grown by one event: every row of the run replaced
        grown = time.perf_counter() - started
        print(f"events: {total}")
        print(f"export_new_events_per_s: {total / min(new_s):,.0f}  (best of {args.repeats})")
        print(f"re_export_unchanged_seconds: {unchanged:.4f}  (skipped: its last hash is recorded)")
        print(f"re_export_grown_events_per_s: {(total + 1) / grown:,.0f}  (the run's rows replaced in the same file)")
        if old_s:
            print(f"export_old_events_per_s ({args.against}): {total / min(old_s):,.0f}")
            print(f"ratio_new_over_old: {min(old_s) / min(new_s):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
