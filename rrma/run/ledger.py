"""The driver's hold on its run log: one lock, the state folded from the log, appends, file snapshots.

Every unit of the loop (scheduler, trial runner, confirmation, orders) reads and writes the run
through one :class:`RunLedger`. Its invariant: :attr:`RunLedger.state` is exactly the fold of the
log up to the last :meth:`~RunLedger.sync`, and an append (:meth:`~RunLedger.emit`) folds at once,
under :attr:`~RunLedger.lock`. A check of the state and the append that depends on it therefore
happen under the same lock (orders.py relies on this to keep a pause from letting a proposal
through). Events other processes append (a reviewer's review, a person's order) reach the state at
the next sync, the same way as the driver's own; the ``on_event`` hook (the headless progress lines) is
called only for the events the fold counts (a refused one, such as a forged promotion, is ``verify``'s
to report). As the log grows the ledger has the run's
checkpoint kept current (:class:`rrma.log.checkpointer.Checkpointer`, in the background), and at
``run.finished`` brought up to the end of the log, so a view opens even a huge run at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rrma.log.checkpointer import Checkpointer
from rrma.log.state import RunState
from rrma.log.store import RunStore

EventHook = Callable[[Any], None]
FILES_CACHED = 64  # workspace snapshots kept in memory (least recently used goes first)


class RunLedger:
    """The folded state of one run's log and the only way the loop appends to it."""

    def __init__(self, store: RunStore, on_event: EventHook | None = None) -> None:
        self.store = store
        self.on_event = on_event
        self.observers: list[EventHook] = []  # the driver's own readers of every folded event (the live audit)
        self.lock = threading.RLock()  # guards state, counters and appends
        self.tail = store.tail(0)
        self.state = RunState()
        self.checkpointer = Checkpointer(store.dir)
        self.files_cache: OrderedDict[str, dict[str, str]] = OrderedDict()

    def sync(self) -> list[Any]:
        """Fold everything appended since the last sync (ours and other processes')."""
        with self.lock:
            new = self.tail.poll()
            for event in new:
                refused = len(self.state.refused)
                self.state.apply(event)
                for observe in self.observers:
                    observe(event)
                if self.on_event is not None and len(self.state.refused) == refused:
                    self.on_event(event)  # what the fold counts: a forged promotion is no "new best" line
            if new:
                self.checkpointer.observe(self.tail.offset)
            return new

    def emit(self, kind: str, actor: str, data: dict[str, Any]) -> Any:
        """Append one event and fold it (with anything other processes appended before it)."""
        with self.lock:
            event = self.store.append(kind, actor, data)
            self.sync()
        if kind == "run.finished":  # outside the lock: the checkpoint then covers the whole log
            self.checkpointer.flush()
        return event

    def files_of(self, trial_id: str) -> dict[str, str]:
        """The workspace files of a trial (path -> text), from its manifest in the blob store."""
        with self.lock:
            cached = self.files_cache.get(trial_id)
            if cached is not None:
                self.files_cache.move_to_end(trial_id)
                return cached
            rec = self.state.trials.get(trial_id)
        if rec is None or rec.manifest_blob is None:
            raise KeyError(f"trial {trial_id} has no workspace snapshot")
        files = self.store.manifest_files(rec.manifest_blob)
        with self.lock:
            self.files_cache[trial_id] = files
            while len(self.files_cache) > FILES_CACHED:
                self.files_cache.popitem(last=False)
        return files

    def remember_files(self, trial_id: str, files: dict[str, str]) -> None:
        """Keep a trial's files in memory (they are in the blob store already)."""
        with self.lock:
            self.files_cache[trial_id] = files

    def snapshot(self, files: dict[str, str]) -> tuple[dict[str, str], str]:
        """Store the files as blobs: (path -> blob digest, the manifest's own blob digest)."""
        manifest = {path: self.store.put_blob(text) for path, text in sorted(files.items())}
        return manifest, self.store.put_json_blob(manifest)

    def best_score(self) -> float | None:
        """The current best's score (None before the baseline is measured)."""
        with self.lock:
            return self.state.best_history[-1][1] if self.state.best_history else None
