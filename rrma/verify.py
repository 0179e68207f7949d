"""``rrma-tui verify``: is this run directory intact and self-consistent?

Checks, in order: the hash chain and gap-free seq of ``events.jsonl`` (every line's hash
recomputed; torn lines are reported as warnings because they hide nothing), that every event
validates against its schema, that every blob an event names exists and hashes to its name,
and that the derived views (``results.tsv``, ``blackboard.md``) equal what the events produce.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rrma.state import RunState, render_blackboard, render_results
from rrma.store import RunStore, VerifyReport, verify_chain


def verify_run(run_dir: Path) -> VerifyReport:
    store = RunStore(run_dir)
    report = verify_chain(store)
    scan = store.scan()
    state = RunState.fold(scan.events)
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
    for digest in sorted(blobs):
        path = store.blob_dir / digest
        if not path.exists():
            report.errors.append(f"blob {digest[:12]}… named by the log is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            report.errors.append(f"blob {digest[:12]}… does not match its content hash (modified)")
    for name, expected in (("results.tsv", render_results(state)), ("blackboard.md", render_blackboard(state))):
        path = run_dir / name
        if not path.exists():
            (report.warnings if state.finish_reason is None else report.errors).append(
                f"{name} is missing (derived view; regenerated at the end of a run)")
        elif path.read_text(encoding="utf-8") != expected:
            msg = f"{name} does not match the events (a derived view must never be edited by hand)"
            (report.warnings if state.finish_reason is None else report.errors).append(
                msg + ("; the run is still going" if state.finish_reason is None else ""))
    if state.finish_reason is None and state.started_ts:
        report.warnings.append("the run has no run.finished event: it is running or it crashed (`rrma-tui resume`)")
    report.ok = not report.errors
    return report
