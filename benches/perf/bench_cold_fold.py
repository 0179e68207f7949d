"""The reader's cold fold on its own: this tree's code against an earlier commit's, on one run log.

    python benches/perf/bench_cold_fold.py [--events 20000] [--rounds 6] [--folds 3] [--against 607f3df^2]
                                           [--workdir DIR]

Why it exists: when the log room was split (issue 34) every reader began decoding through one codec
(rrma/log/codec.py) and the cold fold, a run opened with no checkpoint (every line decoded and folded by
:meth:`rrma.log.state.RunState.apply`), got 5-15% slower; ``bench_tui`` measures it among a dozen figures
and runs the two trees one after the other, so a change of load reads as a ratio. This runs only the
fold, and the turn index after it, alternating the trees round by round.

``--against`` defaults to 607f3df^2: main just before the merge of the split (607f3df's first parent is
the split branch itself, which already decodes through the codec).

The run is written once by the test fixture generator (tests/tui/make_run.py, as the driver writes one;
reused from ``--workdir``). Each round starts a fresh process per tree (``PYTHONPATH`` on this tree or on
a ``git archive`` of ``--against``), which folds the run ``--folds`` times with ``RunReader(run,
use_checkpoint=False, write_checkpoint=False).load()`` and indexes its turns once, and reports the best
of its folds. The order of the trees alternates between rounds.

Prints ``key: value`` lines: each tree's best and median fold over the rounds and the turn index, in
wall seconds and in the process's CPU seconds (``time.process_time``: less moved by other work on a
shared machine), and the ratios this/REV. Asserts nothing: figures, not timed tests (docs/perf.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
from pathlib import Path
from rrma.log.reader import RunReader
run, folds = Path(sys.argv[1]), int(sys.argv[2])
times, cpu = [], []
for _ in range(folds):
    started, started_cpu = time.perf_counter(), time.process_time()
    model = RunReader(run, use_checkpoint=False, write_checkpoint=False, shared=False).load()
    times.append(time.perf_counter() - started)
    cpu.append(time.process_time() - started_cpu)
started, started_cpu = time.perf_counter(), time.process_time()
index = model.index_turns()
indexed, indexed_cpu = time.perf_counter() - started, time.process_time() - started_cpu
print(json.dumps({"fold": min(times), "fold_cpu": min(cpu), "index": indexed, "index_cpu": indexed_cpu,
                  "events": model.state.events, "torn": len(model.torn)}))
"""


def ensure_run(workdir: Path, events: int) -> Path:
    """The run (about ``events`` lines), written once by the fixture generator; reused when already there."""
    run_dir = workdir / f"cold-{events}"
    if not (run_dir / "events.jsonl").exists():
        spec = importlib.util.spec_from_file_location("make_run", ROOT / "tests" / "tui" / "make_run.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        tool_turns = 7 if events > 5000 else 1
        per_trial = 6.5 + 2 * tool_turns
        module.make_run(workdir, run_dir.name, trials=max(4, int(events / per_trial)), tool_turns=tool_turns,
                        batch=50, checkpoint=False)
    return run_dir


def checkout(rev: str, dest: Path) -> Path:
    """``rev``'s tree under ``dest`` (git archive)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def fold_in(code: Path, run_dir: Path, folds: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(run_dir), str(folds)], env=env, cwd=code,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=20000, help="about how many lines the run has")
    parser.add_argument("--rounds", type=int, default=6, help="fresh processes per tree, alternating")
    parser.add_argument("--folds", type=int, default=3, help="folds per process (its best is kept)")
    parser.add_argument("--against", default="607f3df^2", help="git revision of the old code ('' skips it)")
    parser.add_argument("--workdir", type=Path, help="keep the run here (default: a temporary directory)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rrma-cold-fold-") as tmp:
        workdir = args.workdir or Path(tmp) / "runs"
        workdir.mkdir(parents=True, exist_ok=True)
        run_dir = ensure_run(workdir, args.events)
        size = (run_dir / "events.jsonl").stat().st_size
        codes = {"this": ROOT}
        if args.against:
            codes[args.against] = checkout(args.against, Path(tmp) / "old")
        print(f"run: {run_dir} ({size:,} bytes)")
        print(f"load_average_before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        results: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
        for i in range(args.rounds):
            order = list(codes.items()) if i % 2 == 0 else list(reversed(codes.items()))
            for label, code in order:
                results[label].append(fold_in(code, run_dir, args.folds))
        print(f"load_average_after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for label, rows in results.items():
            print(f"{label}: events {int(rows[0]['events'])}, torn {int(rows[0]['torn'])}")
            for what in ("fold", "fold_cpu", "index", "index_cpu"):
                values = [r[what] for r in rows]
                print(f"  {label}_{what}_s: best {min(values):.3f}, median {statistics.median(values):.3f}")
        if args.against:
            new, old = results["this"], results[args.against]
            for what in ("fold", "fold_cpu", "index", "index_cpu"):
                best = min(r[what] for r in new) / min(r[what] for r in old)
                med = statistics.median(r[what] for r in new) / statistics.median(r[what] for r in old)
                paired = statistics.median(n[what] / o[what] for n, o in zip(new, old, strict=True))
                print(f"ratio_{what}_this_over_{args.against}: best {best:.3f}, median {med:.3f}, "
                      f"per round (median) {paired:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
