"""What an approval's promotion costs inside the loop's lock, on a big run: the chain check.

    python benches/perf/bench_promotion.py [--events 100000] [--approvals 6] [--between 1000]

An approval promotes a trial only while the run's log passes its hash-chain and head checks
(rrma/log/review.py ``unverified_outcome``); the live loop decides it holding its ledger's lock
(rrma/run/orders.py ``check_reviews``). Before, each approval ran :func:`rrma.log.store.verify_chain`
over the whole log; now the loop keeps one :class:`rrma.log.chain.ChainCheck`, which hashes the bytes it
verified before (to see they are unchanged) and verifies only the lines appended since.

The run: a finished maximize run written through the real RunStore (two baseline repeats, ``--approvals``
trials held for review, agent turns padding it to ``--events`` events), copied twice. Then, for each held
trial in turn, on each copy, ``--between`` more agent turns are appended (the run going on), a person
approves it, and :func:`rrma.run.promotion.promote_if_approved` is timed: on one copy with a fresh check
each time (the whole log, as before), on the other with one kept ``ChainCheck`` (as the loop now does),
interleaved so that machine load hits both alike. Printed: the median seconds per approval after the first (the
first is a full check either way), the full ``verify_chain`` alone, and the ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rrma.log.chain import ChainCheck, verify_chain  # noqa: E402
from rrma.log.review import record_review  # noqa: E402
from rrma.log.state import RunState  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.run.promotion import promote, promote_if_approved  # noqa: E402

TURN = "Reading train.py again: the warmup schedule looks like the place to try next. " * 3


def build_run(run_dir: Path, events: int, held: int) -> None:
    """A finished run of about ``events`` events with ``held`` trials awaiting review (each better than the last)."""
    store = RunStore(run_dir, create=True)
    task = {"name": "bench", "metric": {"name": "score", "direction": "maximize"}, "loop": {"hitl": True}}
    store.append("run.started", "harness", {"run_id": run_dir.name, "task_name": "bench", "task": task,
                                            "head_record": True})
    blob = store.put_json_blob({"hypothesis": "x"})
    log = store.put_blob("score: 0.5\n")
    for tid, score in (("base-0", 0.49), ("base-1", 0.51)):
        store.append("trial.proposed", "harness", {"trial_id": tid, "parent": None, "agent": "baseline",
                                                   "proposal_blob": blob, "baseline": True})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": score, "log_blob": log})
    store.append("baseline.measured", "harness", {"trial_ids": ["base-0", "base-1"], "scores": [0.49, 0.51],
                                                  "mean": 0.5, "sigma": 0.0141, "floor": 0.03})
    promote(lambda kind, actor, data: store.append(kind, actor, data), RunState.fold(store.scan().events),
            "base-0", 0.5)
    for i in range(held):
        tid = f"t{i + 1:04d}"
        store.append("trial.proposed", "agent:a", {"trial_id": tid, "parent": "base-0", "agent": "a",
                                                   "proposal_blob": blob})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": 0.6 + 0.1 * i,
                                                  "metrics": {"awaiting_review": True}, "log_blob": log})
    pad(store, events - len(store.scan().events) - 1)
    store.append("run.finished", "harness", {"reason": "max_trials", "summary": {}})
    store.close()


def pad(store: RunStore, count: int) -> None:
    turn = {"agent": "a", "role": "assistant", "text": TURN, "tokens_in": 900, "tokens_out": 120}
    for start in range(0, max(0, count), 5000):
        store.append_many([("agent.turn", "agent:a", turn)] * min(5000, count - start))


class Approvals:
    """A person approving the held trials of one copy of the run, one at a time, as the run goes on."""

    def __init__(self, run_dir: Path, chain: ChainCheck | None) -> None:
        self.store = RunStore(run_dir)
        self.tail = self.store.tail(0)
        self.state = RunState.fold(self.tail.poll(None))
        self.chain = chain  # None: a fresh, whole-log check per approval (as before)

    def approve(self, tid: str, between: int) -> float:
        """Append ``between`` agent turns, approve ``tid``; the seconds promote_if_approved took."""
        store, state = self.store, self.state
        pad(store, between)
        for event in self.tail.poll(None):
            state.apply(event)
        record_review(store, tid, "approve", "alice", state=state)  # applies the review to ``state``
        started = time.perf_counter()
        promoted = promote_if_approved(store, state, None, tid,
                                       lambda kind, actor, data: state.apply(store.append(kind, actor, data)),
                                       self.chain)
        seconds = time.perf_counter() - started
        self.tail.poll(None)  # the review and the promotion, already applied
        assert promoted and state.best_id == tid, (tid, state.notes[-1:])
        return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--approvals", type=int, default=6)
    parser.add_argument("--between", type=int, default=1000, help="agent turns appended before each approval")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rrma-promotion-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        build_run(root / "full", args.events, args.approvals)
        shutil.copytree(root / "full", root / "kept")
        size = (root / "full" / "events.jsonl").stat().st_size
        print(f"run: {args.events:,} events, {size / 2**20:.1f} MiB, built in {time.perf_counter() - t0:.1f} s")
        started = time.perf_counter()
        report = verify_chain(RunStore(root / "full"))
        whole = time.perf_counter() - started
        assert report.ok, report.errors[:3]
        print(f"verify_chain, whole log: {whole:.3f} s")
        full_run, kept_run = Approvals(root / "full", None), Approvals(root / "kept", ChainCheck(RunStore(root / "kept")))
        full, kept = [], []
        for i in range(args.approvals):  # interleaved, so that machine load hits both alike
            tid = f"t{i + 1:04d}"
            full.append(full_run.approve(tid, args.between))
            kept.append(kept_run.approve(tid, args.between))
        assert kept_run.chain is not None and kept_run.chain.full_checks == 1, "the kept check re-read the whole log"
        before, after = statistics.median(full[1:]), statistics.median(kept[1:])
        print(f"promote_if_approved, whole-log check each time (before): first {full[0]:.3f} s, then median "
              f"{before:.3f} s ({', '.join(f'{s:.3f}' for s in full[1:])})")
        print(f"promote_if_approved, kept ChainCheck (after):            first {kept[0]:.3f} s, then median "
              f"{after:.4f} s ({', '.join(f'{s:.4f}' for s in kept[1:])})")
        print(f"ratio after/before: {after / before:.3f}x ({before / after:.0f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
