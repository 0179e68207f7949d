"""The hash-chain check, kept between calls: each check re-verifies only the lines appended since the last one.

An approval promotes a trial only while the run's log passes its chain and head checks
(:func:`rrma.log.review.unverified_outcome`). A live loop checks that for every approval it acts on,
inside its ledger's lock, and a person approving many trials of a finished run checks it per trial;
:func:`rrma.log.store.verify_chain` over the whole log costs about 3.6 s per 100,000 events each time
(docs/perf.md). :class:`ChainCheck` keeps where its last clean check ended (a
:class:`~rrma.log.store.ChainMark`: a line boundary and the chain's state there) and the SHA-256 of the
bytes before it.

Invariant: a check passes only when a full :func:`~rrma.log.store.verify_chain` of the log as it is now
would find no error. The bytes already verified are hashed again first (about 1 GB/s, against 20 MB/s
for parsing and re-hashing line by line): if they changed in any way, the whole log is verified again.
Otherwise only the lines after the mark are verified, continuing the chain and the head-record check
from there. Whenever the short check finds an error the whole log is verified again, so every error
reported (and its line number) is the full check's.
"""

from __future__ import annotations

import hashlib
import os

from rrma.log.store import ChainMark, RunStore, VerifyReport, verify_chain

READ = 4 * 1024 * 1024  # bytes hashed per read


class ChainCheck:
    """``verify_chain`` of one run's log, incremental across calls (see the module docstring). Not thread-safe."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.mark: ChainMark | None = None  # where the last clean check ended
        self._digest: hashlib._Hash | None = None  # SHA-256 state over the log's first mark.offset bytes
        self.full_checks = 0  # how many checks read the whole log (for tests and the benchmark)

    def errors(self) -> list[str]:
        """The errors ``verify_chain`` finds in the log now (empty: the chain and its head record hold)."""
        report = None
        if self.mark is not None and self._prefix_intact():
            report = verify_chain(self.store, since=self.mark)
        if report is None or report.errors:
            self.full_checks += 1
            self._digest = None
            report = verify_chain(self.store)
        self._keep(report)
        return list(report.errors)

    def _prefix_intact(self) -> bool:
        """The bytes before the mark hash as they did (a log only grows: an edit, a cut or a swap changes them)."""
        assert self.mark is not None and self._digest is not None
        digest = hashlib.sha256()
        if self._read_into(digest, 0, self.mark.offset) != self.mark.offset:
            return False
        return digest.digest() == self._digest.digest()

    def _keep(self, report: VerifyReport) -> None:
        """Remember where a clean check ended (and the hash of the bytes before it); forget after an error."""
        mark = report.mark
        if report.errors or mark is None:
            self.mark, self._digest = None, None
            return
        kept = self._digest if self.mark is not None else None
        start = self.mark.offset if self.mark is not None and kept is not None else 0
        digest = kept.copy() if kept is not None else hashlib.sha256()
        if self._read_into(digest, start, mark.offset) != mark.offset - start:
            self.mark, self._digest = None, None
            return
        self.mark, self._digest = mark, digest

    def _read_into(self, digest: hashlib._Hash, start: int, end: int) -> int:
        """Hash the log's bytes [start, end) into ``digest``; the number of bytes read (fewer: the log is shorter)."""
        done = 0
        try:
            fd = os.open(self.store.events_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return -1
        try:
            while start + done < end:
                block = os.pread(fd, min(READ, end - start - done), start + done)
                if not block:
                    break
                digest.update(block)
                done += len(block)
        finally:
            os.close(fd)
        return done
