"""The hash-chain check: :func:`verify_chain` over a log (or the lines after a mark), and :class:`ChainCheck`,
which keeps it between calls so each check re-verifies only the lines appended since the last one.

:func:`verify_chain` recomputes every line's hash, checks each ``prev`` and the gap-free ``seq``,
decodes every line with the log's one decoder (:mod:`rrma.log.codec`: an invalid event is an error)
and checks the end of the log against its head record (:func:`rrma.log.head.check_head`, the one
check of it). ``rrma-tui verify`` (rrma/log/verify.py) adds what the chain does not cover: run.json,
blobs, derived views, the fold's refusals, signatures.

An approval promotes a trial only while the run's log passes its chain and head checks
(:func:`rrma.log.review.unverified_outcome`). A live loop checks that for every approval it acts on,
inside its ledger's lock, and a person approving many trials of a finished run checks it per trial;
:func:`verify_chain` over the whole log costs about 3.6 s per 100,000 events each time
(docs/perf.md). :class:`ChainCheck` keeps where its last clean check ended (a :class:`ChainMark`: a
line boundary and the chain's state there) and the SHA-256 of the bytes before it.

Invariant: a check passes only when a full :func:`verify_chain` of the log as it is now
would find no error. The bytes already verified are hashed again first (about 1 GB/s, against 20 MB/s
for parsing and re-hashing line by line): if they changed in any way, the whole log is verified again.
Otherwise only the lines after the mark are verified, continuing the chain from there (the head
record is checked anew each time: it reads one line). Whenever the short check finds an error the
whole log is verified again, so every error reported (and its line number) is the full check's.

:func:`log_integrity` is what every view shows of it (the runs list, the dashboard's header, the timeline's badge
words): one :class:`LogIntegrity` per log, the whole chain for a log up to :data:`CHAIN_CHECK_BYTES` (a quarter of
a second), the head record alone above that (one line read: a cut or replaced end, not a line changed in the
middle; ``rrma-tui verify`` checks every line). A verdict that :attr:`LogIntegrity.fails` is one ``rrma-tui
verify`` reports as an error; a torn last line (a crash mid-write, sealed by the next resume) and a run written
before head records are said, not failed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rrma.log.codec import InvalidEvent, decode
from rrma.log.events import GENESIS, compute_hash
from rrma.log.head import HeadVerdict, check_head, read_head
from rrma.log.layout import EVENTS
from rrma.log.store import FIRST_LINE_MAX, RunStore
from rrma.log.tail import utf8_damage

READ = 4 * 1024 * 1024  # bytes hashed per read
CHAIN_CHECK_BYTES = 4 << 20  # a log up to this size has its whole chain checked by the views (about 0.25 s)


@dataclass
class VerifyReport:
    ok: bool
    events: int
    errors: list[str]
    warnings: list[str]
    head_seq: int = -1  # the log's last valid event (-1 and GENESIS when there is none)
    head_hash: str = GENESIS
    checked: list[str] = field(default_factory=list)  # what was checked and held (for the "ok" line)
    mark: ChainMark | None = None  # where the check ended: a later one may start there (``since``)
    head: HeadVerdict | None = None  # the end of the log against its head record (rrma/log/head.py)


@dataclass(frozen=True)
class ChainMark:
    """Where a chain check stopped: just past the last newline-terminated line, and the chain state there."""

    offset: int  # bytes of the log checked (a line boundary)
    prev: str  # the hash the next line's ``prev`` must be
    seq: int  # the next line's ``seq`` must be this plus one
    events: int  # valid events up to ``offset``
    head_record: bool  # run.started says the run keeps a head record


def verify_chain(store: RunStore, since: ChainMark | None = None) -> VerifyReport:
    """Recompute every hash and check the chain and seq, and the end of the log against ``head.json``.

    Errors: a line whose hash does not match its content, a ``prev`` that is not the previous
    valid line's hash, a ``seq`` that is not the previous plus one, an invalid event; a log whose
    last valid event is not the one the head record names (its end was cut off or replaced), or a
    missing head record where ``run.started`` says the run keeps one. Warnings: torn lines (a
    crash mid-write hides nothing), valid events after the head record (the writer died between
    the two writes), no head record in a run written before there was one.

    ``since``: the ``mark`` of an earlier check of this log; only the lines after it are checked (the
    caller vouches that the bytes before it are unchanged: :class:`rrma.log.chain.ChainCheck`).
    """
    errors: list[str] = []
    warnings: list[str] = []
    head = check_head(store.dir)  # before the scan: a live writer only moves the record forward
    record = head.record if head.state != "unreadable" else None
    if head.state == "unreadable":
        errors.append(head.detail)
    prev = GENESIS if since is None else since.prev
    expected_seq = 0 if since is None else since.seq + 1
    count = 0 if since is None else since.events
    last_seq = -1 if since is None else since.seq
    marker = False if since is None else since.head_record  # run.started says the run keeps a head record
    offset = 0 if since is None else since.offset
    number = 0  # line numbers: counted from the start of what is read
    mark = ChainMark(offset, prev, expected_seq - 1, count, marker)
    with open(store.events_path, "rb") as fh:
        fh.seek(offset)
        for raw in fh:
            line = raw.rstrip(b"\n")
            terminated = raw.endswith(b"\n")
            here = offset
            offset += len(raw)
            number += 1
            if not line.strip():
                continue
            damage = utf8_damage(line)
            if damage is not None:  # not a tear: these bytes were changed after rrma wrote the line
                errors.append(f"line {number} (byte {here + damage[0]}): {damage[1]}: the log is corrupt (the line "
                              "was changed after it was written); it is skipped and the check goes on")
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
            except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
                where = "final line" if not terminated else "line"
                warnings.append(
                    f"torn {where} at byte {here} ({len(line)} bytes, crash mid-write): skipped; "
                    + ("the chain continues after it" if terminated else "`rrma-tui resume` seals it")
                )
                continue
            try:
                decode(obj)
            except InvalidEvent as exc:
                errors.append(f"seq {obj.get('seq')} (byte {here}): {exc}")
            if obj.get("seq") != expected_seq:
                errors.append(f"byte {here}: seq {obj.get('seq')} where {expected_seq} was expected (gap or reorder)")
            if obj.get("prev") != prev:
                errors.append(f"seq {obj.get('seq')}: prev does not match the previous event's hash (chain broken)")
            try:
                digest = compute_hash(obj) if "prev" in obj else None
            except ValueError:  # NaN or Infinity in the line: not canonical JSON, so never a line rrma wrote
                digest = None
            if digest != obj.get("hash"):
                errors.append(f"seq {obj.get('seq')}: hash mismatch (the line was modified)")
            if obj.get("kind") == "run.started" and isinstance(obj.get("data"), dict):
                marker = marker or obj["data"].get("head_record") is True
            prev = obj.get("hash", prev)
            seq = obj.get("seq")
            expected_seq = (seq if isinstance(seq, int) else expected_seq) + 1
            if isinstance(seq, int):
                last_seq = seq
            count += 1
            if terminated:
                mark = ChainMark(offset, prev, expected_seq - 1, count, marker)
    report = VerifyReport(ok=False, events=count, errors=errors, warnings=warnings, head_seq=last_seq,
                          head_hash=prev if count else GENESIS, mark=mark, head=head)
    report.checked += ["chain intact", "seq gap-free"]
    if head.state in ("cut", "changed"):
        if not head.modified:  # an edited record line is this check's own "hash mismatch" above
            errors.append(head.detail)
    elif head.state == "ok" and record is not None:
        if last_seq > record.seq:
            try:
                now = read_head(store.dir)
            except ValueError:
                now = None
            if now is None or now.seq < last_seq or (now.seq == last_seq and now.hash != prev):
                said = f"seq {record.seq} (hash {record.hash[:16]}, log size {record.offset} bytes)"
                warnings.append(
                    f"the log has {last_seq - record.seq} valid event(s) after the head record's {said}: the "
                    "writer died between writing them and updating head.json (the next append updates it), "
                    "or something other than rrma appended them")
            else:
                report.checked.append(f"head record matches (seq {last_seq})")
        else:
            report.checked.append(f"head record matches (seq {record.seq})")
    elif head.state == "none" and marker:
        errors.append(f"head.json is missing, but run.started says this run keeps a head record: it was deleted, "
                      f"so a cut-off end of the log cannot be ruled out (the log ends at seq {last_seq})")
    elif head.state == "none" and count:
        warnings.append("no head record (head.json): the run was written by an older rrma, so a cut-off end of "
                        "the log cannot be detected")
    report.ok = not errors
    return report


class ChainCheck:
    """``verify_chain`` of one run's log, incremental across calls (see the module docstring). Not thread-safe."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.mark: ChainMark | None = None  # where the last clean check ended
        self._digest: hashlib._Hash | None = None  # SHA-256 state over the log's first mark.offset bytes
        self.full_checks = 0  # how many checks read the whole log (for tests and the benchmark)
        self.report: VerifyReport | None = None  # the last check's report (its head verdict, its warnings)

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
        self.report = report
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


# ----------------------------------------------------------------------------- what the views show

IntegrityVerdict = Literal["ok", "torn", "old", "cut", "changed", "broken", "missing", "unreadable"]
FAILING: frozenset[str] = frozenset({"cut", "changed", "broken", "missing", "unreadable"})


@dataclass(frozen=True)
class LogIntegrity:
    """What :func:`log_integrity` found of one log, for every view: a verdict, its few words, the finding."""

    verdict: IntegrityVerdict
    words: str  # a few words for a column or a header: "chain ok", "head ok", "tail cut", "chain broken"...
    finding: str = ""  # the whole finding in one sentence (what ``rrma-tui verify`` reports first)
    chain_checked: bool = False  # every line's hash was checked (not the head record alone)
    seq: int | None = None  # the head record's seq, when the log's end checked out against it

    @property
    def fails(self) -> bool:
        """``rrma-tui verify`` reports it as an error: the end was cut or replaced, a line was changed, the head
        record is damaged or was deleted."""
        return self.verdict in FAILING


def log_integrity(run_dir: Path | str, *, chain_bytes: int = CHAIN_CHECK_BYTES,
                  chain: ChainCheck | None = None) -> LogIntegrity:
    """The log's end against its head record (:func:`rrma.log.head.check_head`) and, for a log of at most
    ``chain_bytes``, its whole chain (:func:`verify_chain`; with ``chain``, that check kept between calls on the
    same log, so a growing log is checked from where the last clean check ended)."""
    run_dir = Path(run_dir)
    try:
        size = os.path.getsize(run_dir / EVENTS)
    except OSError as exc:
        return LogIntegrity("unreadable", "log unreadable", f"{run_dir / EVENTS}: {exc.strerror or exc}")
    if size <= chain_bytes:
        try:
            report = _chain_report(run_dir, chain)
        except OSError as exc:
            return LogIntegrity("unreadable", "log unreadable", f"{run_dir / EVENTS}: {exc.strerror or exc}")
        head = report.head or check_head(run_dir)
        if report.errors:
            if head.state == "cut":
                return LogIntegrity("cut", "tail cut", head.detail, True)
            if head.state == "changed" and not head.modified:
                return LogIntegrity("changed", "tail changed", head.detail, True)
            if head.state == "unreadable":
                return LogIntegrity("unreadable", "head unreadable", head.detail, True)
            if head.state == "none":
                return LogIntegrity("missing", "head missing", report.errors[0], True)
            return LogIntegrity("broken", "chain broken", report.errors[0], True)
        torn = next((w for w in report.warnings if w.startswith("torn final line")), None)
        if torn is not None:
            return LogIntegrity("torn", "torn line", torn, True)
        if head.state == "none":
            return LogIntegrity("old", "no head record", head.detail, True)
        return LogIntegrity("ok", "chain ok", f"every hash of the log and its head record check out "
                                             f"({report.events} events)", True,
                            head.record.seq if head.record is not None else None)
    head = check_head(run_dir)
    if head.state == "ok":
        if _torn_end(run_dir, size):
            return LogIntegrity("torn", "torn line", "the last line is incomplete (a crash mid-write): "
                                                     "`rrma-tui resume` seals it")
        return LogIntegrity("ok", "head ok", f"{head.detail} (a log this long has its end checked only: `rrma-tui "
                                             "verify` checks every line)",
                            seq=head.record.seq if head.record is not None else None)
    if head.state == "cut":
        return LogIntegrity("cut", "tail cut", head.detail)
    if head.state == "changed":
        return LogIntegrity("broken" if head.modified else "changed", "chain broken" if head.modified
                            else "tail changed", head.detail)
    if head.state == "unreadable":
        return LogIntegrity("unreadable", "head unreadable", head.detail)
    if _keeps_head_record(run_dir):
        return LogIntegrity("missing", "head missing", "head.json is missing, but run.started says this run keeps a "
                                                       "head record: it was deleted, so a cut-off end cannot be ruled out")
    return LogIntegrity("old", "no head record", head.detail)


def _chain_report(run_dir: Path, chain: ChainCheck | None) -> VerifyReport:
    if chain is not None:
        chain.errors()
        assert chain.report is not None
        return chain.report
    store = RunStore(run_dir)
    try:
        return verify_chain(store)
    finally:
        store.close()


def _torn_end(run_dir: Path, size: int) -> bool:
    """The log does not end with a newline (its last line is incomplete)."""
    if size == 0:
        return False
    with open(run_dir / EVENTS, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) != b"\n"


def _keeps_head_record(run_dir: Path) -> bool:
    """``run.started`` (the log's first line) says the run keeps a head record."""
    try:
        with open(run_dir / EVENTS, "rb") as fh:
            first = json.loads(fh.readline(FIRST_LINE_MAX))
    except (OSError, ValueError):
        return False
    data = first.get("data") if isinstance(first, dict) else None
    return isinstance(data, dict) and data.get("head_record") is True
