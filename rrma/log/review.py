"""Human review: approve, reject or flag a trial, or withdraw one's review; what an approval must pass to promote.

A review is an event like any other (``review``, actor ``human:<name>``), so it is in the chain,
the export and every reader. With the task's ``loop.hitl`` gate on, the loop marks a would-be
new best ``awaiting_review`` instead of promoting it; an approval then promotes it when it still
beats the current best by the noise floor. This module writes the review (:func:`record_review`)
and says whether an approval may promote (:func:`unverified_outcome`, :func:`unverified_approval`);
the promotion itself is the run room's (:func:`rrma.run.promotion.promote_if_approved`, called by the
live loop, and by :func:`rrma.run.promotion.review_trial` for a run whose loop is gone: the CLI's
``review`` and the TUI write reviews through it). The log room never imports the run room.

A review can be signed with the reviewer's SSH key (``sign_key``; :mod:`rrma.log.signing` says what
that proves). With ``loop.require_signed_approval`` only an approval whose signature verifies
against ``loop.allowed_signers`` promotes; any other approval is kept in the log but promotes
nothing, and the run says why in a ``note`` event (once per review).

An approval promotes only an outcome that verifies: the fold already leaves out an outcome no run
writes (:func:`rrma.log.state.refused_outcome`), and :func:`unverified_outcome` also refuses when the
trial's blobs are missing or altered or the log fails its chain and head checks.

Reviews are never edited: a new review of a trial supersedes its latest one (``supersedes`` names
that review's seq; the latest counted decision is the one in force; a review naming no earlier
review of its trial, or replaying a signed one, does not count: :func:`rrma.log.state.ignored_review`)
and ``withdraw`` undoes it, leaving the trial unreviewed again. Both keep the old review in the log. A promotion is a fact of the
log too: withdrawing or rejecting an approval after it promoted a trial does not demote it (the
dashboard then shows the best as not approved).
"""

from __future__ import annotations

import getpass
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.log.chain import ChainCheck, verify_chain
from rrma.log.reader import read_state
from rrma.log.signing import (
    BadSignature,
    SigningError,
    message_for_review,
    review_message,
    sign_review,
    signature_fingerprint,
    verify_review,
)
from rrma.log.state import RunState, TrialRecord
from rrma.log.store import RunStore
from rrma.task import TaskConfig, task_path

DECISIONS = ("approve", "reject", "flag", "withdraw")


class ReviewError(ValueError):
    """The review names an unknown trial or decision."""


def default_reviewer() -> str:
    """The reviewer's name: $RRMA_REVIEWER, else $USER, else the login name."""
    name = os.environ.get("RRMA_REVIEWER") or os.environ.get("USER")
    if not name:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "reviewer"
    return name


def signed_approval_policy(state: RunState, task: TaskConfig | None) -> tuple[bool, Path | None]:
    """(loop.require_signed_approval, loop.allowed_signers resolved) from the task, else the run's snapshot."""
    if task is not None:
        return task.loop.require_signed_approval, task.allowed_signers_path()
    loop = state.task.get("loop") or {}
    value = loop.get("allowed_signers")
    base = state.task.get("base_dir")
    return bool(loop.get("require_signed_approval")), (task_path(Path(base) if base else None, value) if value else None)


def unverified_outcome(store: RunStore, rec: TrialRecord, chain: ChainCheck | None = None) -> str | None:
    """Why the outcome an approval would promote does not verify; None when it does.

    The fold already refuses a ``trial.finished`` that no run writes (:func:`rrma.log.state.refused_outcome`).
    What it cannot see is checked here, as ``rrma-tui verify`` checks it: the log's hash chain and head
    record (a line edited in place still folds), and the blobs the trial's events name (its proposal,
    workspace manifest, edits and oracle log) exist and hash to their names. ``chain``: the caller's
    :class:`~rrma.log.chain.ChainCheck` of this log, kept between approvals so each checks only the lines
    appended since the last (None: the whole log is checked).
    """
    blobs = [rec.proposal_blob, rec.manifest_blob, rec.log_blob, *(e.get("blob") for e in rec.edits)]
    for digest in (b for b in blobs if b):
        path = store.blob_dir / digest
        try:
            intact = hashlib.sha256(path.read_bytes()).hexdigest() == digest
        except OSError:
            return f"blob {digest[:12]}… named by its events is missing (`rrma-tui verify` fails)"
        if not intact:
            return f"blob {digest[:12]}… named by its events does not match its content hash (`rrma-tui verify` fails)"
    errors = chain.errors() if chain is not None else verify_chain(store).errors
    if errors:
        return f"the run's log fails verify: {errors[0]}"
    return None


def unverified_approval(state: RunState, review: dict[str, Any], allowed_signers: Path | None) -> str | None:
    """Why a folded approval does not count as signed by its reviewer; None when its signature verifies."""
    if not review.get("signed"):
        return "it is unsigned"
    if allowed_signers is None:
        return "no loop.allowed_signers file to check its signature against"
    try:
        ok, detail = verify_review(allowed_signers, review["reviewer"], message_for_review(state.run_id, review),
                                   review["signature"])
    except SigningError as exc:
        return f"its signature could not be checked ({exc})"
    return None if ok else f"its signature does not verify against {allowed_signers} ({detail})"


def superseded_review(state: RunState, trial_id: str, decision: str) -> int | None:
    """The seq of the trial's review that a new ``decision`` replaces (its latest), or None for a first review.

    Raises :class:`ReviewError` for a withdrawal with nothing in force to withdraw.
    """
    rec = state.trials.get(trial_id)
    latest = rec.reviews[-1] if rec is not None and rec.reviews else None
    if decision == "withdraw" and (latest is None or latest["decision"] == "withdraw"):
        raise ReviewError(f"{trial_id} has no review in force to withdraw")
    return int(latest["seq"]) if latest is not None else None


def review_data(state: RunState, trial_id: str, decision: str, reviewer: str, note: str = "",
                sign_key: Path | str | None = None) -> dict[str, Any]:
    """The data of a review event, naming the review it supersedes; with ``sign_key``, signed over the
    trial's current outcome (and the superseded review)."""
    supersedes = superseded_review(state, trial_id, decision)
    data: dict[str, Any] = {"trial_id": trial_id, "decision": decision, "reviewer": reviewer, "note": note}
    if supersedes is not None:
        data["supersedes"] = supersedes
    if sign_key is not None:
        rec = state.trials.get(trial_id)
        finished = rec.finished_hash if rec is not None else None
        message = review_message(state.run_id, trial_id, decision, reviewer, note, finished, supersedes)
        signature = sign_review(sign_key, message)
        data.update(signature=signature, key_fingerprint=signature_fingerprint(message, signature),
                    trial_finished=finished)
    return data


def record_review(store: RunStore, trial_id: str, decision: str, reviewer: str | None = None, note: str = "",
                  sign_key: Path | str | None = None, *, state: RunState | None = None) -> Any:
    """Append a review event, signed with ``sign_key`` if given. Signing problems raise
    :class:`rrma.log.signing.SigningError` before anything is written. It promotes nothing: a live loop
    promotes an approved trial on its next sync, and :func:`rrma.run.promotion.review_trial` (what the CLI and
    the TUI call) promotes it here when the loop is gone.

    ``state``: the run as the caller folded it just now (the TUI's model); without it the run is read as
    every view reads it (:func:`rrma.log.reader.read_state`: the checkpoint plus the lines after it). It is
    brought up to date with the review. A signature binds the trial's ``trial.finished`` hash, which both
    folds keep: signing with a state that lacks it is refused (ValueError).
    """
    if decision not in DECISIONS:
        raise ReviewError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    run = state if state is not None else read_state(store.dir, turns=False)  # turns: no part of a review
    rec = run.trials.get(trial_id)
    if rec is None:
        raise ReviewError(f"{store.dir}: no trial {trial_id!r} in this run")
    if sign_key is not None and rec.finished and rec.finished_hash is None:
        raise ValueError(f"signing a review of {trial_id} needs a full fold of the log (trial.finished hashes)")
    reviewer = reviewer or default_reviewer()
    event = store.append("review", f"human:{reviewer}", review_data(run, trial_id, decision, reviewer, note, sign_key))
    run.apply(event)
    return event


@dataclass
class ReviewSignatures:
    """What :func:`check_review_signatures` found: counts, and lines for verify's report."""

    verified: int = 0
    unsigned: int = 0
    unchecked: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


def check_review_signatures(state: RunState, events: Iterable[Any], allowed_signers: Path | None,
                            run_dir: Path | None = None) -> ReviewSignatures:
    """Check every signed review of a folded run (for ``verify``), against ``allowed_signers`` when given.

    Errors: a signature that does not verify over the review as the log has it now (run id, trial,
    decision, reviewer, note, supersedes, and the trial's ``trial.finished`` hash at that point of the
    chain): without ``allowed_signers`` against the public key the signature carries, with it for the
    reviewer's key in the file; a review signed over another ``trial.finished`` than the log's; and an
    allowed_signers file inside the run directory (whatever can write the run could write it) or
    missing. Without a file, an intact signature is a warning (its signer is unknown); so is one
    that cannot be checked at all (no ssh-keygen). Unsigned reviews are only counted.
    """
    out = ReviewSignatures()
    signed = [r for r in state.reviews if r.get("signed")]
    out.unsigned = len(state.reviews) - len(signed)
    if out.unsigned:
        out.checked.append(f"{out.unsigned} unsigned review{'s' if out.unsigned != 1 else ''}")
    if not signed:
        return out
    claimed = {e.seq: e.data.trial_finished for e in events if e.kind == "review"}
    problem = None
    if allowed_signers is not None:
        if run_dir is not None and allowed_signers.resolve().is_relative_to(run_dir.resolve()):
            problem = (f"allowed_signers {allowed_signers} is inside the run directory: whatever can write the run "
                       "can write it, so it vouches for nobody; keep it outside")
        elif not allowed_signers.is_file():
            problem = f"allowed_signers {allowed_signers}: no such file"
    if problem is not None:
        out.errors.append(problem)
    trusted = allowed_signers if allowed_signers is not None and problem is None else None
    intact = 0  # signatures that verify against the key they carry (no allowed_signers to name the signer)
    for review in signed:
        what = f"review seq {review['seq']} ({review['decision']} {review['trial_id']} by {review['reviewer']})"
        bound = claimed.get(review["seq"])
        if bound != review.get("trial_finished"):
            out.errors.append(f"{what}: signed over trial.finished {str(bound)[:12]}… but the log's is "
                              f"{str(review.get('trial_finished'))[:12]}… (the outcome changed after it was signed)")
            continue
        message = message_for_review(state.run_id, review)
        fingerprint = review.get("key_fingerprint")
        try:
            if trusted is not None:
                ok, detail = verify_review(trusted, review["reviewer"], message, review["signature"])
            else:
                detail = signature_fingerprint(message, review["signature"])
                ok = True
        except BadSignature as exc:
            out.errors.append(f"{what}: bad signature: it does not verify against the key it names ({exc})")
            continue
        except SigningError as exc:
            (out.errors if trusted is not None else out.warnings).append(f"cannot check review signatures: {exc}")
            out.unchecked = len(signed) - out.verified - intact
            break
        if not ok:
            out.errors.append(f"{what}: bad signature: it does not verify for {review['reviewer']} against "
                              f"{trusted} ({detail})")
            continue
        if trusted is not None:
            out.verified += 1
        else:
            intact += 1
        if fingerprint and fingerprint not in detail:
            out.warnings.append(f"{what}: the signature verifies but its key_fingerprint field ({fingerprint}) "
                                "names another key (the field is not signed)")
    if trusted is None and intact:
        out.unchecked = intact
        out.warnings.append(f"{intact} signed review(s) not checked against an allowed_signers file "
                            "(--allowed-signers FILE or $RRMA_ALLOWED_SIGNERS): each signature is intact for the key "
                            "it carries, but whose key that is was not checked")
    if out.verified:
        out.checked.append(f"{out.verified} signed review{'s' if out.verified != 1 else ''} verified")
    return out
