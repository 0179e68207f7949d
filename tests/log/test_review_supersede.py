"""Reviews are never edited: a new review supersedes the one in force, ``withdraw`` undoes it.

Real runs (the demo bench through the CLI), real SQLite export, real ssh-keygen for the signed case.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rrma.log.review import ReviewError, record_review
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.verify import verify_run

REPO = Path(__file__).resolve().parents[2]


def reviews_of(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line)["data"] for line in lines if json.loads(line)["kind"] == "review"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_a_second_review_supersedes_the_first_and_withdraw_leaves_it_unreviewed(run: Path) -> None:
    store = RunStore(run)
    first = record_review(store, "t0001", "approve", "alice", "looks right")
    assert first.data.supersedes is None
    second = record_review(store, "t0001", "reject", "bob", "overfits")
    assert second.data.supersedes == first.seq
    state = RunState.fold(store.scan().events)
    assert state.trials["t0001"].review_status == "rejected"
    third = record_review(store, "t0001", "withdraw", "bob", "my mistake")
    assert third.data.supersedes == second.seq
    state = RunState.fold(store.scan().events)
    rec = state.trials["t0001"]
    assert rec.review_status == "unreviewed"
    assert [r["decision"] for r in rec.reviews] == ["approve", "reject", "withdraw"]  # nothing was removed
    assert "t0001" in [t.trial_id for t in state.pending_review()]  # back in the review queue
    assert verify_run(run).ok
    # a first review and older logs carry no supersedes field at all (written as before)
    assert "supersedes" not in reviews_of(run)[0]


@pytest.mark.parametrize(("history", "message"), [
    ([], "t0002 has no review in force to withdraw"),  # nothing to withdraw
    (["flag", "withdraw"], "t0002 has no review in force to withdraw"),  # already withdrawn
])
def test_withdraw_needs_a_review_in_force(run: Path, history: list[str], message: str) -> None:
    store = RunStore(run)
    for decision in history:
        record_review(store, "t0002", decision, "alice")
    before = (run / "events.jsonl").read_bytes()
    with pytest.raises(ReviewError, match=message):
        record_review(store, "t0002", "withdraw", "alice")
    assert (run / "events.jsonl").read_bytes() == before


def test_cli_review_withdraw_and_the_export_keep_every_review(run: Path, tmp_path: Path) -> None:
    record_review(RunStore(run), "t0003", "approve", "carol", "ok")  # the review to withdraw (in-process: setup)
    withdrawn = cli("review", str(run), "t0003", "withdraw", "--reviewer", "carol")
    assert withdrawn.returncode == 0, withdrawn.stderr
    assert "withdraw t0003 by carol, superseding seq" in withdrawn.stdout
    again = cli("review", str(run), "t0003", "withdraw", "--reviewer", "carol")
    assert again.returncode == 2 and again.stderr.strip() == "rrma-tui: t0003 has no review in force to withdraw"
    db = tmp_path / "out.db"
    exported = cli("export", str(run), "--sqlite", str(db))
    assert exported.returncode == 0, exported.stderr
    rows = sqlite3.connect(db).execute("SELECT seq, decision, supersedes FROM reviews ORDER BY seq").fetchall()
    assert [(d, s is None) for _, d, s in rows] == [("approve", True), ("withdraw", False)]
    assert rows[1][2] == rows[0][0]


def test_an_export_made_before_supersedes_existed_gains_the_column(run: Path, tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    assert cli("export", str(run), "--sqlite", str(db)).returncode == 0
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE reviews DROP COLUMN supersedes")  # as a database written by the previous release
    con.execute("UPDATE runs SET last_hash = 'stale'")  # force a re-export
    con.commit()
    con.close()
    record_review(RunStore(run), "t0001", "flag", "dave")
    record_review(RunStore(run), "t0001", "approve", "dave")
    assert cli("export", str(run), "--sqlite", str(db)).returncode == 0
    rows = sqlite3.connect(db).execute("SELECT decision, supersedes FROM reviews ORDER BY seq").fetchall()
    assert rows[0] == ("flag", None) and rows[1][0] == "approve" and rows[1][1] is not None


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not on PATH (apt-get install openssh-client)")
def test_a_signed_review_binds_the_review_it_supersedes(run: Path, tmp_path: Path) -> None:
    key = tmp_path / "alice"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key), "-C", "alice"], check=True,
                   capture_output=True, timeout=30)
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice {kind} {blob}\n")
    store = RunStore(run)
    record_review(store, "t0004", "flag", "alice")
    signed = record_review(store, "t0004", "approve", "alice", "after a closer look", sign_key=key)
    assert signed.data.supersedes is not None and signed.data.signature
    assert verify_run(run, allowed_signers=allowed).ok
    # moving the signed approval onto another review (a forged supersedes) breaks its signature
    lines = (run / "events.jsonl").read_text().splitlines()
    from rrma.log.events import canonical, compute_hash

    out, prev = [], None
    for line in lines:
        obj = json.loads(line)
        if obj["kind"] == "review" and obj["data"].get("signature"):
            obj["data"]["supersedes"] = 1
        if prev is not None:
            obj["prev"] = prev
            obj["hash"] = compute_hash(obj)
        prev = obj["hash"]
        out.append(canonical(obj))
    (run / "events.jsonl").write_text("\n".join(out) + "\n")
    head = json.loads((run / "head.json").read_text())
    head.update(hash=prev, offset=(run / "events.jsonl").stat().st_size)
    (run / "head.json").write_text(json.dumps(head) + "\n")
    report = verify_run(run, allowed_signers=allowed)
    assert not report.ok and any("signature" in e for e in report.errors), report.errors
