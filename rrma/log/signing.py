"""Signed reviews: an SSH signature that binds a person's decision to the outcome it decides on.

Why this exists: a ``review`` event names its reviewer, but the run log is a file. Anyone who can
write it can append a review naming any reviewer, or edit one and recompute every later hash so
the chain still verifies. A signed review also carries an SSH signature made with the reviewer's
own key, the way git signs commits with SSH keys (``ssh-keygen -Y sign`` / ``-Y verify``, in the
namespace :data:`NAMESPACE`), over :func:`review_message`: canonical JSON of the run id, the trial
id, the decision, the reviewer, the note, the hash of the trial's ``trial.finished`` event and, for a
review that replaces another, the seq of the review it ``supersedes``.

What a signature that verifies (:func:`verify_review`, against an ``allowed_signers`` file the
checker trusts, never one inside the run directory) guarantees: the holder of a key listed for
that reviewer made exactly this decision, with exactly this note, on exactly this trial of exactly
this run, after exactly this outcome. Through the hash chain the ``trial.finished`` hash commits
to that event and every event before it, so editing the review, moving the signature to another
trial or run, or changing (or re-running) the outcome makes the check fail. What it does not
guarantee: that the person looked carefully, that the key was not stolen, when the signature was
made (the event's ``ts`` is not signed), or that no review was deleted from the log.

Two checks need no allowed_signers file. A signature verifies, or not, against the public key it
carries (:func:`signature_fingerprint`): one that does not is bad whoever holds that key, so
``verify`` fails on it; one that does only says that some key signed these bytes (a warning: the
signer is unknown). And the signed bytes never legitimately recur: a real second review of a trial
names the review it supersedes, which is signed. So the same signed review appended again (a replay,
to put an approval back in force after a rejection) is an error, and the fold does not count it
(:func:`rrma.log.state.ignored_review`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rrma.log.events import canonical

NAMESPACE = "rrma-review"
"""The ssh-keygen signature namespace: a signature made for another purpose (git, files) never verifies here."""
TIMEOUT_S = 30.0
"""ssh-keygen gets this long; it never waits for a passphrase (no terminal, no askpass)."""

_FINGERPRINT = re.compile(r"key (\S+:\S+)")


class SigningError(RuntimeError):
    """Signing or checking a review signature could not be done (tool, key or file unusable)."""


class SshKeygenMissing(SigningError):
    """ssh-keygen (OpenSSH 8.2 or newer) is not installed or not on PATH."""


class KeyNeedsPassphrase(SigningError):
    """The signing key is passphrase-protected and not in ssh-agent; nothing here can prompt for it."""


class BadSignature(SigningError):
    """The signature does not verify over the message against the public key it names (forged, edited, moved)."""


def default_signing_key() -> Path | None:
    """The key ``$RRMA_SIGNING_KEY`` names (``~`` expanded), else None."""
    value = os.environ.get("RRMA_SIGNING_KEY", "").strip()
    return Path(value).expanduser() if value else None


def default_allowed_signers() -> Path | None:
    """The allowed_signers file ``$RRMA_ALLOWED_SIGNERS`` names (``~`` expanded), else None."""
    value = os.environ.get("RRMA_ALLOWED_SIGNERS", "").strip()
    return Path(value).expanduser() if value else None


def review_message(run_id: str, trial_id: str, decision: str, reviewer: str, note: str,
                   trial_finished: str | None, supersedes: int | None = None) -> bytes:
    """The signed bytes: canonical JSON binding the decision to the outcome it decides on (and to the
    review it supersedes, when it names one: a review that supersedes nothing signs the same bytes as before)."""
    fields: dict[str, Any] = {
        "run_id": run_id, "trial_id": trial_id, "decision": decision, "reviewer": reviewer, "note": note,
        "trial_finished": trial_finished,
    }
    if supersedes is not None:
        fields["supersedes"] = supersedes
    return canonical(fields).encode("utf-8")


def message_for_review(run_id: str, review: Mapping[str, Any]) -> bytes:
    """:func:`review_message` of a folded review (``RunState.reviews``): its ``trial_finished`` is the log's."""
    return review_message(run_id, review["trial_id"], review["decision"], review["reviewer"], review["note"],
                          review.get("trial_finished"), review.get("supersedes"))


def _ssh_keygen() -> str:
    exe = shutil.which("ssh-keygen")
    if exe is None:
        raise SshKeygenMissing("ssh-keygen not found on PATH: signed reviews need OpenSSH 8.2 or newer "
                               "(apt-get install openssh-client)")
    return exe


def _run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ssh-keygen detached from any terminal, so a passphrase prompt fails instead of waiting."""
    env = {**os.environ, "SSH_ASKPASS_REQUIRE": "never"}
    try:
        return subprocess.run([_ssh_keygen(), *args], input=stdin if stdin is not None else b"",
                              capture_output=True, timeout=TIMEOUT_S, env=env, start_new_session=True, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SigningError(f"ssh-keygen {args[0]} {args[1]} did not finish in {TIMEOUT_S:.0f} s") from exc
    except OSError as exc:
        raise SigningError(f"could not run ssh-keygen: {exc}") from exc


def _one_line(raw: bytes) -> str:
    text = re.sub(r"Enter passphrase[^:]*: ", "", raw.decode("utf-8", "replace"))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("Signing data on")]
    return "; ".join(lines) or "(no output)"


def sign_review(key_path: Path | str, message: bytes) -> str:
    """Sign ``message`` with the SSH key at ``key_path``; return the armored SSHSIG text.

    ``key_path`` is a private key file, or a public key whose private half is in ssh-agent.
    A key that needs a passphrase (and is not in the agent) raises :class:`KeyNeedsPassphrase`.
    """
    key = Path(key_path).expanduser()
    if not key.is_file():
        raise SigningError(f"{key}: no such signing key file")
    with tempfile.TemporaryDirectory(prefix="rrma-sign-") as tmp:
        msg = Path(tmp) / "review"
        msg.write_bytes(message)
        proc = _run(["-Y", "sign", "-n", NAMESPACE, "-f", str(key), str(msg)])
        sig = msg.with_name("review.sig")
        if proc.returncode != 0 or not sig.is_file():
            detail = _one_line(proc.stderr + proc.stdout)
            if "passphrase" in detail:
                raise KeyNeedsPassphrase(f"{key}: the key needs a passphrase and nothing can prompt for it here; "
                                         f"add it to ssh-agent (ssh-add {key}) and pass it (or its .pub) again")
            raise SigningError(f"ssh-keygen could not sign with {key}: {detail}")
        return sig.read_text(encoding="ascii")


def signature_fingerprint(message: bytes, signature: str) -> str:
    """The fingerprint (``SHA256:...``) of the key that made ``signature`` over ``message``.

    Checks the signature itself (``ssh-keygen -Y check-novalidate``: it verifies over ``message``
    with the public key the signature carries, in this namespace) but not who may sign: that is
    :func:`verify_review`'s job. A signature that does not verify raises :class:`BadSignature`;
    one that cannot be checked (no ssh-keygen, timeout) raises :class:`SigningError`.
    """
    with tempfile.TemporaryDirectory(prefix="rrma-sig-") as tmp:
        sig = Path(tmp) / "review.sig"
        try:
            sig.write_text(signature, encoding="ascii")
        except UnicodeEncodeError:
            raise BadSignature("the signature is not an armored SSH signature") from None
        proc = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], stdin=message)
    out = _one_line(proc.stdout + proc.stderr)
    found = _FINGERPRINT.search(out)
    if proc.returncode != 0 or found is None:
        raise BadSignature(f"the signature does not check out: {out}")
    return found.group(1)


def verify_review(allowed_signers: Path | str, principal: str, message: bytes, signature: str) -> tuple[bool, str]:
    """Does ``signature`` over ``message`` verify for ``principal`` in ``allowed_signers``? (ok, ssh-keygen's word).

    Raises :class:`SigningError` only when the check cannot be made (no ssh-keygen, no file, timeout);
    a signature that is malformed, made by another key or over other bytes is ``(False, why)``.
    """
    allowed = Path(allowed_signers).expanduser()
    if not allowed.is_file():
        raise SigningError(f"{allowed}: no such allowed_signers file")
    with tempfile.TemporaryDirectory(prefix="rrma-verify-") as tmp:
        sig = Path(tmp) / "review.sig"
        try:
            sig.write_text(signature, encoding="ascii")
        except UnicodeEncodeError:
            return False, "the signature is not an armored SSH signature"
        proc = _run(["-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE, "-s", str(sig)],
                    stdin=message)
    return proc.returncode == 0, _one_line(proc.stdout + proc.stderr)
