"""What one contained trial process costs now, against the sandbox at an earlier revision.

Issue 20 made every contained process start with more: an allow-list view (many binds instead of
one), a seccomp filter passed to bubblewrap, a fresh session keyring from a parent thread, the
credential rule. This bench measures a ``python -c pass`` trial under bubblewrap + cgroup limits
with the code of this checkout and with the code at ``--against`` (default: the commit before that
work), in the same run: each side is a worker process of its own (``rrma`` imported from its own
tree; the old one is ``git archive``'d into a temporary folder), and the two are interleaved block
by block so that drift in the machine's speed hits both alike. It prints the median milliseconds per
trial process of each, the ratio new/old, and, per side, a raw ``subprocess.run`` made right after
each trial for reference (work a side leaves running in the background after a trial shows there).

With ``--workspace`` each trial of a side whose code has :mod:`rrma.contain.disk` also opens and
releases its workspace's capped file system (issue 31), as the executor does per trial: from the
pool made ahead where the code has one (each trial's file system is made while the one before runs),
or, with ``--no-pool``, made on the spot.

    python benches/perf/bench_sandbox.py [--against REV] [--blocks 8] [--per-block 10] [--workspace [--no-pool]]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEFORE_ISSUE_20 = "797823b"

WORKER = r"""
import json, sys, time, subprocess
from pathlib import Path
root, runs, with_workspace, pooled = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
work = root / "run" / "trials" / "t1" / "work"
work.mkdir(parents=True, exist_ok=True)
try:  # issue 31: the workspace is a capped file system of its own, opened and released per trial
    from rrma.contain import disk
    capped = with_workspace and disk.unavailable_reason() is None
    if not pooled and hasattr(disk, "POOL_MAX"):
        disk.POOL_MAX = 0
except ImportError:
    capped = False
try:  # the old layout first: an editable install would find the new room's modules from the old tree too
    from rrma.fsguard import FsGuard as Guard, unavailable_reason
    from rrma.sandbox import run_limited as run
except ImportError:
    from rrma.contain.sandbox import Policy as Guard, unavailable_reason
    from rrma.contain.spawn import spawn as run
from rrma.trial import Budget
assert unavailable_reason() is None, unavailable_reason()
guard = Guard.for_trial(work, (root / "run",))
argv = [sys.executable, "-c", "pass"]
out = {"sandbox": [], "raw": []}
for i in range(runs + 1):
    t0 = time.perf_counter()
    if capped:
        work.rmdir()
        disk.open_workspace(work, 4096, "auto")
    result = run(argv, cwd=work, budget=Budget(seconds=30), guard=guard, poll_s=0.005)
    if capped:
        disk.release(work)
    spent = time.perf_counter() - t0
    assert result.guarded and result.status == "ok", result
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=work, check=True)
    raw = time.perf_counter() - t0
    if i:  # the first round warms caches
        out["sandbox"].append(spent * 1000)
        out["raw"].append(raw * 1000)
print(json.dumps(out))
"""


def extract(rev: str, dest: Path) -> Path:
    """The ``rrma`` package as it was at ``rev``, under ``dest``."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "rrma"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    tar_path = dest / "old.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest / "tree", filter="data")
    return dest / "tree"


def block(tree: Path, scratch: Path, runs: int, with_workspace: bool, pooled: bool) -> dict[str, list[float]]:
    proc = subprocess.run([sys.executable, "-c", WORKER, str(scratch), str(runs), "1" if with_workspace else "0",
                           "1" if pooled else "0"],
                          cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"worker in {tree} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default=BEFORE_ISSUE_20, help="the revision to compare with")
    parser.add_argument("--blocks", type=int, default=8, help="alternating blocks per side")
    parser.add_argument("--per-block", type=int, default=10, help="trial processes per block")
    parser.add_argument("--workspace", action="store_true",
                        help="per trial, also make and unmount the workspace's capped file system (issue 31) "
                             "where the code has one and mounting works here")
    parser.add_argument("--no-pool", action="store_true",
                        help="with --workspace: make each file system on the spot, not ahead in the pool")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {"now": [], "before": [], "raw now": [], "raw before": []}
    with tempfile.TemporaryDirectory(prefix="rrma-bench-sandbox-") as tmp:
        root = Path(tmp)
        old_tree = extract(args.against, root)
        for i in range(args.blocks):
            for label, tree in (("now", ROOT), ("before", old_tree))[:: 1 if i % 2 == 0 else -1]:
                got = block(tree, root / f"{label}-{i}", args.per_block, args.workspace, not args.no_pool)
                samples[label] += got["sandbox"]
                samples[f"raw {label}"] += got["raw"]
    now, before, raw_now, raw_before = (statistics.median(samples[k]) for k in ("now", "before", "raw now", "raw before"))
    if args.workspace:
        how = "made on the spot" if args.no_pool else "from the pool made ahead, where the code has one"
        print(f"(with the workspace's capped file system opened and released per trial, where the code has one: {how})")
    print(f"trial process, bubblewrap + cgroup, this checkout: {now:7.1f} ms (median of {len(samples['now'])})")
    print(f"trial process, bubblewrap + cgroup, at {args.against}:  {before:7.1f} ms (median of {len(samples['before'])})")
    # the raw run follows each trial in the same worker: what a side leaves to do in the background after
    # a trial (the pool making the next file system, the last one let go) slows this one, not the trial
    print(f"raw subprocess.run right after each trial (reference): this checkout {raw_now:.1f} ms, "
          f"at {args.against} {raw_before:.1f} ms")
    print(f"sandbox cost ratio now / {args.against}: {now / before:.2f}x")


if __name__ == "__main__":
    main()
