"""Outcome cache: content-keyed, survives restarts, safe with concurrent writer processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from rrma.run.cache import OutcomeCache, cache_key
from rrma.trial import Outcome, Status


def _put_many(path: str, worker: int) -> None:
    cache = OutcomeCache(Path(path))
    for i in range(200):
        key = cache_key("oracle@1", {"train.py": f"{i % 50}"})
        cache.put(key, Outcome(status=Status.ok, score=float(i % 50)), f"w{worker}-{i}", "run")


def test_key_depends_on_oracle_files_and_proof() -> None:
    base = cache_key("command@1:abc", {"a.py": "1"})
    assert base == cache_key("command@1:abc", {"a.py": "1"})
    assert base != cache_key("command@1:abd", {"a.py": "1"})  # other oracle params
    assert base != cache_key("command@1:abc", {"a.py": "2"})  # other content
    assert base != cache_key("command@1:abc", {"a.py": "1"}, proof="simp")  # proofs count
    assert cache_key("lean", {}, "simp", "t1") != cache_key("lean", {}, "simp", "t2")  # and which theorem


def test_survives_restart_and_first_writer_wins(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    cache = OutcomeCache(path)
    key = cache_key("x", {"f": "1"})
    assert cache.put(key, Outcome(status=Status.ok, score=1.0, log="L" * 10000), "t0001", "r1")
    assert not cache.put(key, Outcome(status=Status.ok, score=2.0), "t0002", "r1")
    again = OutcomeCache(path)
    outcome, trial, run = again.get(key)  # type: ignore[misc]
    assert (outcome.score, trial, run) == (1.0, "t0001", "r1")
    assert len(outcome.log) == 4000  # logs are trimmed in the cache (full logs live in blobs)
    assert not again.put(cache_key("x", {"f": "2"}), Outcome(status=Status.aborted), "t3", "r1")  # not cached


def test_concurrent_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    OutcomeCache(path)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_put_many, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = OutcomeCache(path)
    assert len(cache) == 50
    for i in range(50):
        hit = cache.get(cache_key("oracle@1", {"train.py": str(i)}))
        assert hit is not None and hit[0].score == float(i)
