"""A run directory's files: the one place that names which file holds what.

``RUN/events.jsonl`` is the run's only truth (rrma/log/store.py); the rest is kept beside it: the
head record (rrma/log/head.py), the append lock and the driver lock (rrma/log/driver_lock.py),
``run.json`` (the resolved run, whose sha256 the log records), the blobs and each trial's
directory. Every reader and writer takes the names from here, so no two rooms can disagree on
where a file is.
"""

from __future__ import annotations

from pathlib import Path

EVENTS = "events.jsonl"  # the append-only, hash-chained log
LOCK = ".events.lock"  # flock'ed by each append
RUN_JSON = "run.json"
HEAD = "head.json"  # the head record: where the last append left the log (rrma/log/head.py)
DRIVER_LOCK = ".driver.lock"  # held by the one process that drives the run (rrma/log/driver_lock.py)
DRIVER_JSON = "driver.json"  # who holds it
BLOBS = "blobs"  # content-addressed: blobs/<sha256>
TRIALS = "trials"  # RUN/trials/<id>/: a trial's workspace (work/), its oracle's directory, its live output
LIVE_OUTPUT = "live.log"


def live_output_path(trials_dir: Path | str, trial_id: str) -> Path:
    """Where a running trial's program output is appended while it runs: ``TRIALS/<id>/live.log``.

    The one rule the local executor (which passes it to spawn, rrma.contain.live) and the views (which
    follow it: ``rrma-tui``'s trial view) share. Beside the trial's workspace, never in it: inside the
    run directory, which the sandbox hides from every trial program. Not the record (the log blob is);
    the executor removes it when the trial's evaluation ends.
    """
    return Path(trials_dir) / trial_id / LIVE_OUTPUT
