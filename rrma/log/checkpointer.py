"""The driver keeps its run's checkpoint current, so the first open of a run it wrote is fast.

A view opens a run from its checkpoint (rrma/log/checkpoint.py: the folded state and the turn index
at a line boundary of the log, used only while the log still holds the bytes it was taken from)
plus the lines after it. When only the TUI wrote checkpoints, the first open of a big run folded
every line (5 s or more at a million events). Now the process that writes the run keeps one:

* :meth:`Checkpointer.observe` after the log grew (the research loop calls it from ``sync``, for
  its own events and those of other processes): constant time on the caller's thread; once the
  log has grown by ``max(step_bytes, growth * covered)`` past the last checkpoint (and is at
  least ``min_bytes`` long), a background thread writes a new one;
* :meth:`Checkpointer.flush` at ``run.finished``: the checkpoint then covers the whole log (it
  waits for the write).

Invariants: the writing is the views' own: :class:`~rrma.log.reader.RunReader` loads the run from
the checkpoint there is (or the whole log) plus the lines after it, indexes the turns and writes
the file whole (a temporary file, then ``os.replace``), so a reader sees the old checkpoint or the
new one, and the driver's checkpoint is the same kind of file, checked the same way, as one a TUI
writes. Nothing is kept between writes (no second copy of the state in the driver). A checkpoint
is a cache: nothing that goes wrong while writing one fails the run (the reason is kept in
``error``), and a failed write is not retried until the log has grown another step.

Cost: each write reads the previous checkpoint and the lines since, so it costs about what an
open costs (about 3 s at a million events on a 2-core machine, in a background thread); the
geometric schedule keeps the total over a run to a small multiple of one write at its final
size, and the lines a reader must fold after the checkpoint to ``growth`` of the log at most.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from rrma.log.checkpoint import CHECKPOINT_MIN_BYTES, checkpoint_offset
from rrma.log.layout import EVENTS
from rrma.log.reader import RunReader

STEP_BYTES = 4 * 1024 * 1024  # the least growth of the log worth a new checkpoint
GROWTH = 0.125  # ... or this fraction of what the last one covers, whichever is more
WRITE_TIMEOUT_S = 600.0


class Checkpointer:
    """Keeps ``RUN``'s checkpoint current while its driver appends (see the module docstring)."""

    def __init__(self, run_dir: Path | str, *, min_bytes: int | None = None, step_bytes: int | None = None,
                 growth: float | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.min_bytes = CHECKPOINT_MIN_BYTES if min_bytes is None else min_bytes  # (module values when None)
        self.step_bytes = STEP_BYTES if step_bytes is None else step_bytes
        self.growth = GROWTH if growth is None else growth
        self.covered = -1  # log bytes the newest checkpoint covers (-1: not looked yet)
        self.writes = 0  # checkpoints written here
        self.written: Path | None = None  # where the last one went
        self.error = ""  # why the last attempt wrote nothing ("" when it did)
        self._next = max(self.min_bytes, self.step_bytes)  # the log size at which a write is due
        self._lock = threading.Lock()  # guards _thread
        self._writing = threading.Lock()
        self._thread: threading.Thread | None = None

    def _step(self, covered: int) -> int:
        return max(self.step_bytes, int(covered * self.growth), 1)

    def observe(self, size: int | None = None) -> None:
        """The log is now ``size`` bytes (None: look). Starts a write in the background if one is due."""
        if size is None:
            try:
                size = os.stat(self.run_dir / EVENTS).st_size
            except OSError:
                return
        if size < self._next:
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._write, args=(False,), name="rrma-checkpoint-driver",
                                            daemon=True)
            self._thread.start()

    def flush(self, timeout: float = WRITE_TIMEOUT_S) -> Path | None:
        """Bring the checkpoint up to the end of the log (when the log is at least ``min_bytes``); waits.

        For the end of a run. Returns where the checkpoint is (None: none was written here).
        """
        self.wait(timeout)
        self._write(True, timeout)
        return self.written

    def wait(self, timeout: float = WRITE_TIMEOUT_S) -> None:
        """Wait for a background write under way (if any)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _write(self, final: bool, timeout: float = WRITE_TIMEOUT_S) -> None:
        with self._writing:  # one write at a time (a flush may meet a background write)
            base = self._attempt(final, timeout)
            # the next write is due a step past what is covered now (past this attempt when it wrote nothing)
            self._next = max(self.min_bytes, base + self._step(base))

    def _attempt(self, final: bool, timeout: float) -> int:
        """Write a checkpoint if one is due; the log size the next step counts from."""
        size = 0
        try:
            size = os.stat(self.run_dir / EVENTS).st_size
            if size < self.min_bytes:  # a small log folds faster than a checkpoint loads
                return 0
            if self.covered < 0:  # a resumed run may have one already
                self.covered = checkpoint_offset(self.run_dir)
            if size <= self.covered or (not final and size - self.covered < self._step(self.covered)):
                return self.covered
            reader = RunReader(self.run_dir, checkpoint_min_bytes=self.min_bytes, refresh_bytes=1,
                               shared=False)
            model = reader.load()
            status = model.checkpoint
            if not status.due:  # the checkpoint found covers every complete line already
                self.covered = max(self.covered, status.offset)
                return self.covered
            model.attach_index(model.index_turns())
            written = status.wait(timeout)
            if written is None:
                self.error = status.error or f"the checkpoint was not written within {timeout:g} s"
                return size
            self.written, self.covered, self.error = written, model.offset, ""
            self.writes += 1
            return self.covered
        except Exception as exc:  # a cache: whatever goes wrong here, the run goes on (the reason is kept)
            self.error = f"{type(exc).__name__}: {exc}"
            return size
