"""Outcome cache: a duplicate proposal costs no oracle time.

Key = sha256 of the oracle's identity (kind, version, params, metric) plus the resulting
workspace (path -> content hash) plus the proof and theorem for proof oracles. The value is the
earlier Outcome and the trial that produced it. Stored in SQLite (WAL mode, busy timeout), so
it survives restarts and is safe with several writers (threads or processes); the first writer
of a key wins (``INSERT OR IGNORE``), later identical proposals read that result.

Outcomes that depend on the moment rather than the content are not cached: ``aborted`` (early
abort depends on the best at that time, and cancellations).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from rrma.trial import Outcome, Status

UNCACHED = {Status.aborted}


def cache_key(oracle_identity: str, manifest: dict[str, str], proof: str | None = None,
              theorem: str | None = None) -> str:
    """``manifest`` maps path -> sha256 of the content."""
    body = json.dumps({"oracle": oracle_identity, "files": manifest, "proof": proof, "theorem": theorem},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class OutcomeCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS outcomes (key TEXT PRIMARY KEY, outcome TEXT NOT NULL, "
                "trial_id TEXT NOT NULL, run_id TEXT NOT NULL, created REAL NOT NULL)"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: no fsync per insert; a cache may lose its last entries on power loss, never its integrity
            self._local.conn = conn
        return conn

    def get(self, key: str) -> tuple[Outcome, str, str] | None:
        """(outcome, trial id, run id) of the first evaluation with this key, or None."""
        row = self._conn().execute("SELECT outcome, trial_id, run_id FROM outcomes WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return Outcome.model_validate_json(row[0]), row[1], row[2]

    def put(self, key: str, outcome: Outcome, trial_id: str, run_id: str) -> bool:
        """Store an outcome unless one is there already; returns True if this call stored it."""
        if outcome.status in UNCACHED:
            return False
        stored = outcome.model_copy(update={"log": outcome.log[-4000:]})
        cur = self._conn().execute(
            "INSERT OR IGNORE INTO outcomes (key, outcome, trial_id, run_id, created) VALUES (?, ?, ?, ?, ?)",
            (key, stored.model_dump_json(), trial_id, run_id, time.time()),
        )
        return cur.rowcount == 1

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM outcomes").fetchone()[0])
