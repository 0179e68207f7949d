"""One huge line in a run log: ``rrma-tui show`` and ``export`` on it, this tree against an earlier commit.

    python benches/perf/bench_long_line.py [--mb 50] [--repeats 1] [--against HEAD~1] [--workdir DIR]

A demo run (random search, 12 trials) is copied four ways: as it is (``base``); with one ``--mb`` MB
agent turn appended as an rrma without the per-event cap wrote it, as the log's last line
(``legacy_last``: the end the append path and ``head()`` walk back over) and followed by one note
(``legacy_middle``); and with the same turn appended through this tree's writer (``capped``: its
text cut to a preview, the whole in a blob; rrma/log/events.py). Each run is then shown (``python -m
cli.main show RUN``) and exported to a fresh SQLite file (``export RUN --sqlite OUT``), whole
commands in fresh processes (Python start-up included), by this tree's code and by ``--against``'s
(``git archive`` of that commit, on ``PYTHONPATH``), interleaved so machine load hits both alike.

Prints ``key: value`` lines: seconds (best of ``--repeats``) per run, command and code, and the
ratio old/new. Asserts nothing: figures, not timed tests (docs/perf.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rrma.log.events import MAX_EVENT_BYTES, canonical, compute_hash  # noqa: E402
from rrma.log.head import encode_head  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.run.loop import start_run  # noqa: E402
from rrma.task import load_task  # noqa: E402


def append_legacy(run_dir: Path, text: str) -> None:
    """Append an agent turn of ``text`` as one line, as rrma wrote it before the cap (head record kept)."""
    seq, prev = RunStore(run_dir).head()
    ts = "2026-11-28T00:00:00.000000Z"
    fields: dict[str, Any] = {"v": 1, "seq": seq + 1, "ts": ts, "kind": "agent.turn",
              "actor": "agent:agent", "data": {"agent": "agent", "role": "assistant", "text": text}, "prev": prev}
    digest = fields["hash"] = compute_hash(fields)
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(canonical(fields).encode() + b"\n")
        size = fh.tell()
    (run_dir / "head.json").write_bytes(encode_head(seq + 1, digest, size, ts))


def build_runs(root: Path, mb: int) -> dict[str, Path]:
    task = load_task(ROOT / "benches" / "demo" / "task.yaml", {"budget.max_trials": 12})
    base = start_run(task, root / "made").run_dir
    text = "x" * (mb * 1_000_000)
    runs: dict[str, Path] = {}
    for name in ("base", "legacy_last", "legacy_middle", "capped"):
        runs[name] = root / "runs" / name
        shutil.copytree(base, runs[name])
    append_legacy(runs["legacy_last"], text)
    append_legacy(runs["legacy_middle"], text)
    RunStore(runs["legacy_middle"]).append("note", "harness", {"text": "after the long line"})
    RunStore(runs["capped"]).append("agent.turn", "agent:agent", {"agent": "agent", "role": "assistant", "text": text})
    return runs


def timed(code: Path, args: list[str], timeout: float) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli.main", *args], env=env, cwd=code, capture_output=True,
                          text=True, timeout=timeout, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        print(f"  ({code.name}: {' '.join(args[:1])} exited {proc.returncode}: {proc.stderr.strip()[-200:]})")
    return seconds


def checkout(rev: str, dest: Path) -> Path | None:
    """``rev``'s tree under ``dest`` (git archive), or None where git cannot give it."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        print(f"against {rev}: git archive failed: {archive.stderr.decode(errors='replace').strip()[:200]}")
        return None
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50, help="size of the long line's text (MB)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--against", default="HEAD~1", help="git revision of the old code ('' skips it)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one command may take")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rrma-long-line-") as tmp:
        root = args.workdir or Path(tmp)
        runs = build_runs(root, args.mb)
        for name, run_dir in runs.items():
            longest = max(len(line) for line in (run_dir / "events.jsonl").read_bytes().split(b"\n"))
            print(f"{name}_longest_line_bytes: {longest:,}  (cap {MAX_EVENT_BYTES:,})")
        codes = {"new": ROOT}
        if args.against:
            old = checkout(args.against, Path(tmp) / "old")
            if old is not None:
                codes["old"] = old
        best: dict[tuple[str, str, str], float] = {}
        for _ in range(args.repeats):
            for name, run_dir in runs.items():
                for command in ("show", "export"):
                    for label, code in codes.items():  # interleaved: load hits both alike
                        out = root / f"{name}-{label}.db"
                        out.unlink(missing_ok=True)
                        argv_ = ["show", str(run_dir)] if command == "show" else [
                            "export", str(run_dir), "--sqlite", str(out)]
                        seconds = timed(code, argv_, args.timeout)
                        key = (name, command, label)
                        best[key] = min(best.get(key, seconds), seconds)
        for name in runs:
            for command in ("show", "export"):
                new = best[(name, command, "new")]
                line = f"{name}_{command}_seconds: {new:.2f}"
                if (name, command, "old") in best:
                    old_s = best[(name, command, "old")]
                    line += f"  ({args.against}: {old_s:.2f}; ratio old/new {old_s / new:.1f}x)"
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
