"""Signed reviews with real ssh-keygen keys: signing, verify, tampering, and the signed-approval gate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rrma.contracts import Agent, Context
from rrma.log.chain import verify_chain
from rrma.log.events import canonical, compute_hash
from rrma.log.head import encode_head
from rrma.log.signing import KeyNeedsPassphrase, review_message, sign_review, verify_review
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.run.loop import start_run
from rrma.run.promotion import review_trial
from rrma.task import AgentConfig, TaskError, load_task, task_from_dict
from rrma.trial import FileEdit, Proposal

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="ssh-keygen not on PATH (signed reviews need OpenSSH >= 8.2: "
                                       "apt-get install openssh-client)")

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
ENV = {k: v for k, v in os.environ.items() if k not in ("RRMA_SIGNING_KEY", "RRMA_ALLOWED_SIGNERS")}
ENV["PYTHONPATH"] = str(REPO)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=env or ENV, cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def keygen(path: Path, comment: str, passphrase: str = "") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path), "-C", comment],
                   check=True, capture_output=True, timeout=30)
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """alice (listed in allowed_signers as principal alice) and mallory (not listed)."""
    tmp = tmp_path_factory.mktemp("keys")
    alice = keygen(tmp / "alice", "alice")
    mallory = keygen(tmp / "mallory", "mallory")
    allowed = tmp / "allowed_signers"
    kind, blob = alice.with_suffix(".pub").read_text().split()[:2]
    allowed.write_text(f"alice {kind} {blob}\n")
    return {"alice": alice, "mallory": mallory, "allowed": allowed}


def lines_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]


def rewrite_and_rechain(run_dir: Path, edit: Any) -> None:
    """What an attacker with write access does: edit lines, then recompute every hash and prev after
    the first change (and the head record, when the run has one), so the chain itself verifies."""
    fields = lines_of(run_dir)
    prev = fields[0]["prev"]
    out = []
    for obj in fields:
        edit(obj)
        obj["prev"] = prev
        obj["hash"] = compute_hash(obj)
        prev = obj["hash"]
        out.append(canonical(obj))
    log = run_dir / "events.jsonl"
    log.write_text("\n".join(out) + "\n", encoding="utf-8")
    head = run_dir / "head.json"
    if head.exists():
        record = json.loads(head.read_text())
        record.update(seq=fields[-1]["seq"], hash=prev, offset=log.stat().st_size)
        head.write_bytes(encode_head(record["seq"], record["hash"], record["offset"], record["ts"]))


def review(run_dir: Path, trial_id: str, reviewer: str, note: str = "", sign_key: Path | None = None) -> None:
    """An approval recorded in-process, as `rrma-tui review RUN T approve --reviewer R [--sign-key K]` records
    it (the same review_trial; the CLI's own review is tested above): setup for the tests that attack it."""
    review_trial(RunStore(run_dir), trial_id, "approve", reviewer, note, sign_key=sign_key)


def verify(run_dir: Path, allowed: Path | None) -> subprocess.CompletedProcess[str]:
    return cli("verify", str(run_dir), *(["--allowed-signers", str(allowed)] if allowed else []))


# ----------------------------------------------------------------------------- signing primitives


def test_sign_and_verify_roundtrip_binds_every_field(keys: dict[str, Path]) -> None:
    message = review_message("run-1", "t0001", "approve", "alice", "looks right", "ab" * 32)
    signature = sign_review(keys["alice"], message)
    assert signature.startswith("-----BEGIN SSH SIGNATURE-----")
    ok, detail = verify_review(keys["allowed"], "alice", message, signature)
    assert ok and "alice" in detail
    for changed in (review_message("run-2", "t0001", "approve", "alice", "looks right", "ab" * 32),
                    review_message("run-1", "t0002", "approve", "alice", "looks right", "ab" * 32),
                    review_message("run-1", "t0001", "reject", "alice", "looks right", "ab" * 32),
                    review_message("run-1", "t0001", "approve", "alice", "looks wrong", "ab" * 32),
                    review_message("run-1", "t0001", "approve", "alice", "looks right", "cd" * 32)):
        assert not verify_review(keys["allowed"], "alice", changed, signature)[0]
    assert not verify_review(keys["allowed"], "bob", message, signature)[0]  # not alice's principal


def test_a_key_with_a_passphrase_fails_at_once_instead_of_prompting(tmp_path: Path, run: Path) -> None:
    locked = keygen(tmp_path / "locked", "alice", passphrase="secret phrase")
    started = time.monotonic()
    with pytest.raises(KeyNeedsPassphrase, match="ssh-add"):
        sign_review(locked, b"message")
    assert time.monotonic() - started < 20
    before = (run / "events.jsonl").read_bytes()
    proc = cli("review", str(run), "t0001", "approve", "--reviewer", "alice", "--sign-key", str(locked))
    assert proc.returncode == 2 and "passphrase" in proc.stderr and "review not recorded" in proc.stderr
    assert (run / "events.jsonl").read_bytes() == before  # nothing written


# ----------------------------------------------------------------------------- CLI: review, show, verify


def test_signed_approval_verifies_and_shows_as_signed(run: Path, keys: dict[str, Path]) -> None:
    proc = cli("review", str(run), "t0001", "approve", "--reviewer", "alice", "--note", "checked",
               "--sign-key", str(keys["alice"]))
    assert proc.returncode == 0, proc.stderr
    assert "signed with SHA256:" in proc.stdout
    review = lines_of(run)[-1]
    assert review["kind"] == "review" and review["data"]["signature"].startswith("-----BEGIN SSH SIGNATURE")
    finished = [e for e in lines_of(run) if e["kind"] == "trial.finished" and e["data"]["trial_id"] == "t0001"][-1]
    assert review["data"]["trial_finished"] == finished["hash"]
    ok = verify(run, keys["allowed"])
    assert ok.returncode == 0, ok.stdout
    assert "1 signed review verified" in ok.stdout
    # the env variable is the default; without any file the signature is a warning, not an error
    env_ok = cli("verify", str(run), env={**ENV, "RRMA_ALLOWED_SIGNERS": str(keys["allowed"])})
    assert env_ok.returncode == 0 and "1 signed review verified" in env_ok.stdout
    unchecked = verify(run, None)
    assert unchecked.returncode == 0 and "1 signed review(s) not checked" in unchecked.stdout
    show = cli("show", str(run))
    assert "approved ✔signed" in show.stdout


def test_unsigned_review_is_shown_as_unsigned_and_verifies(run: Path, keys: dict[str, Path]) -> None:
    proc = cli("review", str(run), "t0002", "approve", "--reviewer", "carol")
    assert proc.returncode == 0, proc.stderr
    # written exactly as before signing existed
    assert lines_of(run)[-1]["data"] == {"trial_id": "t0002", "decision": "approve", "reviewer": "carol", "note": ""}
    assert "approved (unsigned)" in cli("show", str(run)).stdout
    ok = verify(run, keys["allowed"])
    assert ok.returncode == 0, ok.stdout
    assert "1 unsigned review" in ok.stdout and "verified" not in ok.stdout


def test_rechaining_alone_keeps_the_run_valid(run: Path, keys: dict[str, Path]) -> None:
    """The control for the tamper tests: an edit outside what is signed (the review's ``ts``), with
    every later hash re-chained by the attacker's helper, leaves nothing for verify to find."""
    review(run, "t0001", "alice", sign_key=keys["alice"])
    old_head = lines_of(run)[-1]["hash"]

    def edit(obj: dict[str, Any]) -> None:
        if obj["kind"] == "review":
            obj["ts"] = "2001-01-01T00:00:00.000000Z"

    rewrite_and_rechain(run, edit)
    assert lines_of(run)[-1]["hash"] != old_head
    proc = verify(run, keys["allowed"])
    assert proc.returncode == 0, proc.stdout
    assert "1 signed review verified" in proc.stdout


def test_an_edited_note_in_a_rechained_log_is_a_bad_signature(run: Path, keys: dict[str, Path]) -> None:
    review(run, "t0001", "alice", note="ok as is", sign_key=keys["alice"])

    def edit(obj: dict[str, Any]) -> None:
        if obj["kind"] == "review":
            obj["data"]["note"] = "ok as is; also ship the other one"

    rewrite_and_rechain(run, edit)
    assert verify_chain(RunStore(run)).ok  # the chain and the head record hold: only the signature can tell
    proc = verify(run, keys["allowed"])
    assert proc.returncode == 1
    assert "approve t0001 by alice): bad signature" in proc.stdout
    # no allowed_signers file is needed to see it: the signature does not verify against the key it carries
    bare = verify(run, None)
    assert bare.returncode == 1, bare.stdout
    assert "approve t0001 by alice): bad signature: it does not verify against the key it names" in bare.stdout


def test_an_edited_outcome_breaks_the_signature_bound_to_it(run: Path, keys: dict[str, Path]) -> None:
    review(run, "t0001", "alice", sign_key=keys["alice"])

    def edit(obj: dict[str, Any]) -> None:
        if obj["kind"] == "trial.finished" and obj["data"]["trial_id"] == "t0001":
            obj["data"]["feedback"] = obj["data"]["feedback"] + " (edited)"

    rewrite_and_rechain(run, edit)
    proc = verify(run, keys["allowed"])
    assert proc.returncode == 1 and "the outcome changed after it was signed" in proc.stdout


def test_a_signature_moved_to_another_trial_does_not_verify(run: Path, keys: dict[str, Path]) -> None:
    review(run, "t0001", "alice", sign_key=keys["alice"])
    review(run, "t0002", "alice")
    finished = {e["data"]["trial_id"]: e["hash"] for e in lines_of(run) if e["kind"] == "trial.finished"}
    signed = next(e["data"] for e in lines_of(run) if e["kind"] == "review" and e["data"].get("signature"))

    def edit(obj: dict[str, Any]) -> None:
        if obj["kind"] == "review" and obj["data"]["trial_id"] == "t0002":
            obj["data"].update(signature=signed["signature"], key_fingerprint=signed["key_fingerprint"],
                               trial_finished=finished["t0002"])

    rewrite_and_rechain(run, edit)
    proc = verify(run, keys["allowed"])
    assert proc.returncode == 1
    assert "approve t0002 by alice): bad signature" in proc.stdout and "1 signed review verified" not in proc.stdout


def test_a_key_not_in_allowed_signers_is_an_error(run: Path, keys: dict[str, Path]) -> None:
    # mallory signs as alice, and as herself: neither is vouched for by allowed_signers
    review(run, "t0001", "alice", sign_key=keys["mallory"])
    review(run, "t0002", "mallory", sign_key=keys["mallory"])
    proc = verify(run, keys["allowed"])
    assert proc.returncode == 1
    assert "approve t0001 by alice): bad signature" in proc.stdout
    assert "approve t0002 by mallory): bad signature" in proc.stdout


def test_allowed_signers_inside_the_run_directory_is_refused(run: Path, keys: dict[str, Path]) -> None:
    review(run, "t0001", "alice", sign_key=keys["alice"])
    inside = run / "allowed_signers"
    shutil.copy(keys["allowed"], inside)
    proc = verify(run, inside)
    assert proc.returncode == 1 and "inside the run directory" in proc.stdout
    assert verify(run, run / "nope").returncode == 2


# ----------------------------------------------------------------------------- the signed-approval gate


class ScriptedAgent(Agent):
    """Proposes a fixed list of proposals; then calls ``then`` (with the context) and stops."""

    backend = "scripted"

    def __init__(self, proposals: list[Proposal], then: Any = None) -> None:
        super().__init__(AgentConfig(name="scripted", backend="scripted"), task_from_dict({"name": "x"}))
        self.queue = list(proposals)
        self.then = then

    def propose(self, ctx: Context) -> Proposal | None:
        if self.queue:
            return self.queue.pop(0)
        if self.then is not None:
            self.then()
        return None


def better_x() -> Proposal:
    """A clear improvement on the demo baseline (a would-be new best under the hitl gate)."""
    return Proposal(hypothesis="X=1.7", edits=[FileEdit(path="objective.py", replacements=[("X = 0.0 ", "X = 1.7 ")])])


def gated_task(allowed: Path, require: bool = True) -> Any:
    return load_task(DEMO, {"loop.hitl": True, "loop.require_signed_approval": require,
                            "loop.allowed_signers": str(allowed), "budget.max_trials": 2})


def test_task_fields_are_validated(keys: dict[str, Path]) -> None:
    with pytest.raises(TaskError, match="require_signed_approval needs allowed_signers"):
        load_task(DEMO, {"loop.hitl": True, "loop.require_signed_approval": True})
    with pytest.raises(TaskError, match="require_signed_approval needs hitl"):
        load_task(DEMO, {"loop.require_signed_approval": True, "loop.allowed_signers": str(keys["allowed"])})
    with pytest.raises(TaskError, match=r"loop\.allowed_signers: file .* does not exist"):
        load_task(DEMO, {"loop.hitl": True, "loop.require_signed_approval": True, "loop.allowed_signers": "nope"})
    task = gated_task(keys["allowed"])
    assert task.allowed_signers_path() == keys["allowed"].resolve()


def test_finished_run_unsigned_approval_does_not_promote_a_signed_one_does(tmp_path: Path, keys: dict[str, Path]) -> None:
    result = start_run(gated_task(keys["allowed"]), tmp_path, agents=[ScriptedAgent([better_x()])])
    store = RunStore(result.run_dir)
    assert result.state.trials["t0001"].metrics.get("awaiting_review") and result.state.best_id == "base-0"

    unsigned = review_trial(store, "t0001", "approve", "alice", "fine")
    state = RunState.fold(store.scan().events)
    assert state.best_id == "base-0" and not state.trials["t0001"].promoted
    assert any(n.startswith(f"review seq {unsigned.seq}:") and "it is unsigned" in n for n in state.notes)

    forged = review_trial(store, "t0001", "approve", "alice", "fine", sign_key=keys["mallory"])
    state = RunState.fold(store.scan().events)
    assert state.best_id == "base-0"
    assert any(n.startswith(f"review seq {forged.seq}:") and "does not verify" in n for n in state.notes)

    review_trial(store, "t0001", "approve", "alice", "fine", sign_key=keys["alice"])
    state = RunState.fold(store.scan().events)
    assert state.best_id == "t0001" and state.trials["t0001"].promoted
    promoted = [e for e in store.scan().events if e.kind == "trial.promoted"][-1]
    assert promoted.actor == "human:alice" and promoted.data.approved_by == "alice"
    # the mallory-signed approval is in the log too: verify names it
    proc = verify(result.run_dir, keys["allowed"])
    assert proc.returncode == 1 and "bad signature" in proc.stdout


def test_without_the_requirement_an_unsigned_approval_still_promotes(tmp_path: Path, keys: dict[str, Path]) -> None:
    result = start_run(gated_task(keys["allowed"], require=False), tmp_path, agents=[ScriptedAgent([better_x()])])
    store = RunStore(result.run_dir)
    review_trial(store, "t0001", "approve", "alice")
    assert RunState.fold(store.scan().events).best_id == "t0001"


def test_live_loop_refuses_an_unsigned_approval_once_and_promotes_a_signed_one(tmp_path: Path,
                                                                                 keys: dict[str, Path]) -> None:
    """A reviewer writes to a running run's log; the loop's own sync applies the same rule."""
    seen: dict[str, Any] = {}

    def review_while_running() -> None:
        [run_dir] = [p for p in tmp_path.iterdir() if (p / "events.jsonl").exists()]
        store = RunStore(run_dir)
        seen["unsigned"] = review_trial(store, "t0001", "approve", "alice").seq
        time.sleep(1.5)  # several of the loop's syncs (every 0.2 s) see the same unsigned approval
        review_trial(store, "t0001", "approve", "alice", sign_key=keys["alice"])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not RunState.fold(store.scan().events).trials["t0001"].promoted:
            time.sleep(0.1)

    agent = ScriptedAgent([better_x()], then=review_while_running)
    result = start_run(gated_task(keys["allowed"]), tmp_path, agents=[agent], stop=threading.Event())
    state = RunState.fold(RunStore(result.run_dir).scan().events)
    assert state.best_id == "t0001" and state.trials["t0001"].promoted
    refusals = [n for n in state.notes if n.startswith(f"review seq {seen['unsigned']}:")]
    assert len(refusals) == 1 and "it is unsigned" in refusals[0]
    assert verify(result.run_dir, keys["allowed"]).returncode == 0
