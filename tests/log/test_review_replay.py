"""Reviews that cannot be replayed or re-pointed, and signatures that are checked without allowed_signers.

Real runs (the demo bench, made once by the CLI and copied per test), real ssh-keygen keys, the real
CLI's exit codes. Each attack is shown twice: working where the defence is switched off (the fold's
rule, or the signature check, monkeypatched away in-process: the behaviour before the defence), and
refused with it on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rrma.log import review as review_module
from rrma.log import state as state_module
from rrma.log.events import canonical, compute_hash
from rrma.log.head import encode_head, read_head
from rrma.log.review import record_review
from rrma.log.signing import review_message, verify_review
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="ssh-keygen not on PATH (signed reviews need OpenSSH >= 8.2: "
                                       "apt-get install openssh-client)")

REPO = Path(__file__).resolve().parents[2]
ENV = {k: v for k, v in os.environ.items() if k not in ("RRMA_SIGNING_KEY", "RRMA_ALLOWED_SIGNERS")}
ENV["PYTHONPATH"] = str(REPO)


def verify_cli(run: Path, allowed: Path | None) -> subprocess.CompletedProcess[str]:
    extra = ["--allowed-signers", str(allowed)] if allowed is not None else []
    return subprocess.run([sys.executable, "-m", "cli.main", "verify", str(run), *extra], env=ENV, cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """alice (listed in allowed_signers) and mallory (not listed), ed25519 keys without a passphrase."""
    tmp = tmp_path_factory.mktemp("keys")
    for name in ("alice", "mallory"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name), "-C", name],
                       check=True, capture_output=True, timeout=30)
    kind, blob = (tmp / "alice.pub").read_text().split()[:2]
    (tmp / "allowed_signers").write_text(f"alice {kind} {blob}\n")
    return {"alice": tmp / "alice", "mallory": tmp / "mallory", "allowed": tmp / "allowed_signers"}


def no_fold_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defence off: the fold counts every review (as before rrma.log.state.ignored_review existed)."""
    monkeypatch.setattr(state_module, "ignored_review", lambda state, review: None)


def rewrap(signature: str, width: int) -> str:
    """The same SSH signature, its base64 body wrapped at another width (ssh-keygen still accepts it)."""
    lines = signature.strip().splitlines()
    body = "".join(lines[1:-1])
    return "\n".join([lines[0], *(body[i:i + width] for i in range(0, len(body), width)), lines[-1]]) + "\n"


def rewrite_last_line(run: Path, edit: Any) -> None:
    """Edit the last event, re-hash it and the head record: what an attacker with a shell can do."""
    log = run / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    obj = json.loads(lines[-1])
    edit(obj)
    obj["hash"] = compute_hash(obj)
    log.write_bytes(b"".join(lines[:-1]) + canonical(obj).encode() + b"\n")
    head = read_head(run)
    assert head is not None
    (run / "head.json").write_bytes(encode_head(obj["seq"], obj["hash"], log.stat().st_size, head.ts))


# ----------------------------------------------------------------------------- replayed signed reviews


@pytest.mark.parametrize("armor", [
    "identical",  # the signed review's data copied byte for byte into a new event
    "rewrapped",  # the same signature with its armor re-wrapped: another string, the same signed bytes
])
def test_a_replayed_signed_approval_fails_verify_and_is_not_in_force(run: Path, keys: dict[str, Path],
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      armor: str) -> None:
    store = RunStore(run)
    approval = record_review(store, "t0001", "approve", "alice", "checked", sign_key=keys["alice"])
    reject = record_review(store, "t0001", "reject", "bob", "overfits the seed")
    assert reject.data.supersedes == approval.seq
    # the attacker appends alice's approval again (validly chained: RunStore does the hashing)
    data = approval.data.model_dump(mode="json")
    if armor == "rewrapped":
        data["signature"] = rewrap(data["signature"], 60)
        assert data["signature"] != approval.data.signature
        run_id = RunState.fold(store.scan().events).run_id
        message = review_message(run_id, "t0001", "approve", "alice", "checked", approval.data.trial_finished)
        assert verify_review(keys["allowed"], "alice", message, data["signature"])[0]  # still a good signature
    replay = store.append("review", "human:alice", data)

    with monkeypatch.context() as off:  # the defence off: the replay puts the approval back in force
        no_fold_rule(off)
        state = RunState.fold(store.scan().events)
        assert state.trials["t0001"].review_status == "approved"
        report = verify_run(run, allowed_signers=keys["allowed"])
        assert report.ok, report.errors
        assert "2 signed reviews verified" in report.checked

    state = RunState.fold(store.scan().events)
    rec = state.trials["t0001"]
    assert rec.review_status == "rejected" and [r["seq"] for r in rec.reviews] == [approval.seq, reject.seq]
    ignored = next(r for r in state.reviews if r["seq"] == replay.seq)  # kept in the history, marked
    assert ignored["ignored"] is not None and "replayed signature" in ignored["ignored"]
    for allowed in (keys["allowed"], None):
        proc = verify_cli(run, allowed)
        assert proc.returncode == 1, proc.stdout
        assert (f"seq {replay.seq} (review): review seq {replay.seq} repeats the signed review seq {approval.seq} "
                "(approve t0001 by alice): a replayed signature; not counted") in proc.stdout
    # the reviewer's own next review supersedes the one in force, never the replay
    assert record_review(store, "t0001", "flag", "alice").data.supersedes == reject.seq


def test_a_second_real_review_with_the_same_words_is_not_a_replay(run: Path, keys: dict[str, Path]) -> None:
    """The control: approve, withdraw, approve again with the same note: each names the review it
    supersedes, so the signed bytes differ and all three count."""
    store = RunStore(run)
    for decision in ("approve", "withdraw", "approve"):
        record_review(store, "t0002", decision, "alice", "checked", sign_key=keys["alice"])
    state = RunState.fold(store.scan().events)
    assert not state.refused and len(state.trials["t0002"].reviews) == 3
    assert state.trials["t0002"].review_status == "approved"
    proc = verify_cli(run, keys["allowed"])
    assert proc.returncode == 0, proc.stdout
    assert "3 signed reviews verified" in proc.stdout and "every event counts" in proc.stdout


# ----------------------------------------------------------------------------- supersedes


# what an appended approval of t0001 claims to supersede (after: alice approves t0001, bob rejects it,
# carol flags t0002), and what verify says about it; the seqs are those of the three reviews
BAD_SUPERSEDES = [
    pytest.param(lambda a, b, c: 0, "seq 0, which is not an earlier review", id="not_a_review"),  # run.started
    pytest.param(lambda a, b, c: c, "which is not an earlier review of t0001", id="another_trials_review"),
    pytest.param(lambda a, b, c: c + 1, "which is not an earlier review of t0001", id="itself"),  # its own seq
    pytest.param(lambda a, b, c: c + 50, "which is not an earlier review of t0001", id="a_later_seq"),
]


@pytest.mark.parametrize(("target", "said"), BAD_SUPERSEDES)
def test_supersedes_must_name_an_earlier_review_of_the_same_trial(run: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  target: Any, said: str) -> None:
    store = RunStore(run)
    a = record_review(store, "t0001", "approve", "alice").seq
    b = record_review(store, "t0001", "reject", "bob").seq
    c = record_review(store, "t0002", "flag", "carol").seq
    bogus = target(a, b, c)
    forged = store.append("review", "human:mallory", {"trial_id": "t0001", "decision": "approve",
                                                      "reviewer": "mallory", "supersedes": bogus})
    with monkeypatch.context() as off:
        no_fold_rule(off)
        assert RunState.fold(store.scan().events).trials["t0001"].review_status == "approved"
        assert verify_run(run).ok  # before: verify never looked at supersedes
    state = RunState.fold(store.scan().events)
    assert state.trials["t0001"].review_status == "rejected"
    proc = verify_cli(run, None)
    assert proc.returncode == 1, proc.stdout
    assert f"seq {forged.seq} (review): review seq {forged.seq} supersedes seq {bogus}" in proc.stdout
    assert said in proc.stdout
    # the same approval naming the review in force is an ordinary review: it counts and verifies
    fixed = store.append("review", "human:mallory", {"trial_id": "t0001", "decision": "approve",
                                                     "reviewer": "mallory", "supersedes": b})
    state = RunState.fold(store.scan().events)
    assert state.trials["t0001"].reviews[-1]["seq"] == fixed.seq and state.trials["t0001"].review_status == "approved"
    assert [r["seq"] for r in state.refused] == [forged.seq]


# ----------------------------------------------------------------------------- bad signatures, no allowed_signers


def test_a_bad_signature_fails_verify_without_allowed_signers(run: Path, keys: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """alice signs an approval with the note 'ok as is'; the attacker makes it 'ok, ship it' and re-hashes
    the line and the head record. Only the signature can tell, and it can without any allowed_signers file."""
    store = RunStore(run)
    record_review(store, "t0001", "approve", "alice", "ok as is", sign_key=keys["alice"])

    def edit(obj: dict[str, Any]) -> None:
        obj["data"]["note"] = "ok, ship it"

    rewrite_last_line(run, edit)
    with monkeypatch.context() as off:  # before: with no file the signature was not looked at, only counted
        off.setattr(review_module, "signature_fingerprint", lambda message, signature: "SHA256:unchecked")
        report = verify_run(run)
        assert report.ok, report.errors
        assert any("1 signed review(s) not checked" in w for w in report.warnings)
    proc = verify_cli(run, None)
    assert proc.returncode == 1, proc.stdout
    assert "(approve t0001 by alice): bad signature: it does not verify against the key it names" in proc.stdout
    assert verify_cli(run, keys["allowed"]).returncode == 1


def test_garbage_in_the_signature_field_fails_verify_without_allowed_signers(run: Path) -> None:
    store = RunStore(run)
    finished = {tid: rec.finished_hash for tid, rec in RunState.fold(store.scan().events).trials.items()}
    store.append("review", "human:alice", {"trial_id": "t0001", "decision": "approve", "reviewer": "alice",
                                           "trial_finished": finished["t0001"],
                                           "signature": "-----BEGIN SSH SIGNATURE-----\nbm9wZQ==\n"
                                                        "-----END SSH SIGNATURE-----\n"})
    store.append("review", "human:bob", {"trial_id": "t0002", "decision": "approve", "reviewer": "bob",
                                         "trial_finished": finished["t0002"], "signature": "signed, bob ✍"})
    proc = verify_cli(run, None)
    assert proc.returncode == 1, proc.stdout
    assert "(approve t0001 by alice): bad signature" in proc.stdout
    assert "(approve t0002 by bob): bad signature" in proc.stdout and "not an armored SSH signature" in proc.stdout


def test_an_unknown_signer_is_only_a_warning_without_allowed_signers(run: Path, keys: dict[str, Path]) -> None:
    """mallory signs as alice with her own key: the signature is intact for the key it carries. Without a file
    nothing says whose key that is (a warning); with alice's allowed_signers it is an error."""
    record_review(RunStore(run), "t0001", "approve", "alice", sign_key=keys["mallory"])
    proc = verify_cli(run, None)
    assert proc.returncode == 0, proc.stdout
    assert "1 signed review(s) not checked against an allowed_signers file" in proc.stdout
    proc = verify_cli(run, keys["allowed"])
    assert proc.returncode == 1 and "(approve t0001 by alice): bad signature" in proc.stdout
