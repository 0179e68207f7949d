"""``rrma-tui verify``: is this run directory intact and self-consistent?

Checks, in order: the hash chain and gap-free seq of ``events.jsonl`` (every line's hash
recomputed; torn lines are reported as warnings because they hide nothing), that the log ends
where the head record (``head.json``) says the last append left it, that ``run.json`` is the
file whose sha256 the log recorded, that every event validates against its schema, that every
blob an event names exists and hashes to its name, and that the derived views
(``results.tsv``, ``blackboard.md``) equal what the events produce. With ``expect_head``, the
log's last event must also have that hash (a prefix of at least 8 hex digits).

Every event the fold does not count is an error naming its seq and kind (``RunState.refused``;
:mod:`rrma.log.state` says which: an outcome no run writes, a promotion rrma does not write (by an actor
other than the harness or a person, at a score the counted events do not give, past the review gate, or
not beating the best it names; the error names its writer), a baseline measurement or confirmation verdict
whose figures are not its repeats', a review whose ``supersedes`` names no earlier review of its trial, a
replayed signed review). Every signed review's SSH signature is
checked against the key it carries, and with an ``allowed_signers`` file against the reviewer's key
(:func:`rrma.log.review.check_review_signatures`; what that proves: :mod:`rrma.log.signing`): a bad
signature is an error either way, an unknown signer (no file) a warning.

Errors fail the check; warnings describe what a crash or an older rrma leaves and hide nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rrma.log.artifacts import ArtifactError, check_dir
from rrma.log.chain import VerifyReport, verify_chain
from rrma.log.codec import LogEvent
from rrma.log.layout import RUN_JSON
from rrma.log.review import check_review_signatures
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.view_files import render_blackboard, render_results

MIN_HEAD_PREFIX = 8


def normalize_head(expect: str) -> str:
    """The ``--expect-head`` value, lower-cased; ValueError unless it is 8 to 64 hex digits."""
    value = expect.strip().lower()
    if not MIN_HEAD_PREFIX <= len(value) <= 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(f"--expect-head {expect!r}: give the head hash or a prefix of at least "
                         f"{MIN_HEAD_PREFIX} hex digits")
    return value


def verify_run(run_dir: Path, expect_head: str | None = None, *, allowed_signers: Path | None = None) -> VerifyReport:
    expected = normalize_head(expect_head) if expect_head is not None else None
    store = RunStore(run_dir)
    report = verify_chain(store)
    if expected is not None:
        if report.head_hash.startswith(expected) and report.head_seq >= 0:
            report.checked.append(f"head is the expected {expected[:16]}")
        else:
            report.errors.append(f"the log's head is seq {report.head_seq} hash {report.head_hash}, not the "
                                 f"expected {expected}: the log is not the one whose head was recorded")
    scan = store.scan()
    state = RunState.fold(scan.events)
    _check_run_json(run_dir, scan.events, report)
    blobs: set[str] = set()
    for event in scan.events:
        data = event.data
        for attr in ("proposal_blob", "manifest_blob", "log_blob"):
            value = getattr(data, attr, None)
            if value:
                blobs.add(value)
        for edit in getattr(data, "edits", []) or []:
            if edit.blob:
                blobs.add(edit.blob)
        clipped = (data.model_extra or {}).get("clipped")  # the whole values an over-long event cut (events.py)
        for path, cut in clipped.items() if isinstance(clipped, dict) else ():
            digest = cut.get("blob") if isinstance(cut, dict) else None
            if isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
                blobs.add(digest)
            else:
                report.errors.append(f"seq {event.seq}: clipped.{path} names no blob (a sha256): the cut value is lost")
    blob_errors = len(report.errors)
    for digest in sorted(blobs):
        path = store.blob_dir / digest
        if not path.exists():
            report.errors.append(f"blob {digest[:12]}… named by the log is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            report.errors.append(f"blob {digest[:12]}… does not match its content hash (modified)")
    if blobs and len(report.errors) == blob_errors:
        report.checked.append(f"{len(blobs)} blobs intact")
    views_ok = True
    for name, expected_text in (("results.tsv", render_results(state)), ("blackboard.md", render_blackboard(state))):
        path = run_dir / name
        if not path.exists():
            views_ok = False
            (report.warnings if state.finish_reason is None else report.errors).append(
                f"{name} is missing (derived view; regenerated at the end of a run)")
        elif path.read_text(encoding="utf-8") != expected_text:
            views_ok = False
            msg = f"{name} does not match the events (a derived view must never be edited by hand)"
            (report.warnings if state.finish_reason is None else report.errors).append(
                msg + ("; the run is still going" if state.finish_reason is None else ""))
    if views_ok:
        report.checked.append("derived views match")
    artifacts = sorted({mark["artifact"] for mark in state.train_checkpoints})
    artifact_errors = len(report.errors)
    for digest in artifacts:  # checkpoints, adapters, models: content-addressed (rrma/log/artifacts.py)
        try:
            check_dir(run_dir, digest)
        except ArtifactError as exc:
            report.errors.append(str(exc).replace(f"{run_dir}: ", "", 1))
    if artifacts and len(report.errors) == artifact_errors:
        report.checked.append(f"{len(artifacts)} training artifacts intact")
    if state.finish_reason is None and state.started_ts:
        report.warnings.append("the run has no run.finished event: it is running or it crashed (`rrma-tui resume`)")
    for refused in state.refused:
        report.errors.append(f"seq {refused['seq']} ({refused['kind']}): {refused['why']}; not counted")
    if scan.events and not state.refused:
        report.checked.append("every event counts")
    signatures = check_review_signatures(state, scan.events, allowed_signers, run_dir=run_dir)
    report.errors += signatures.errors
    report.warnings += signatures.warnings
    report.checked += signatures.checked
    report.ok = not report.errors
    return report


def _check_run_json(run_dir: Path, events: list[LogEvent], report: VerifyReport) -> None:
    """run.json must be the file whose sha256 the log recorded last (run.started, or a later rewrite)."""
    recorded: str | None = None
    for event in events:
        value = getattr(event.data, "run_json_sha256", None)
        if isinstance(value, str) and value:
            recorded = value
    if recorded is None:
        return  # written by an older rrma: nothing recorded to compare with
    path = run_dir / RUN_JSON
    if not path.exists():
        report.errors.append(f"{RUN_JSON} is missing, but the log recorded its sha256 {recorded[:16]}")
        return
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    if found != recorded:
        report.errors.append(f"{RUN_JSON} has sha256 {found[:16]}, but the log recorded {recorded[:16]}: "
                             f"{RUN_JSON} was replaced or edited after the run started")
    else:
        report.checked.append(f"{RUN_JSON} matches the log")
