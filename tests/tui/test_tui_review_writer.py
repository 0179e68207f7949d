"""The TUI records reviews through rrma.log.review, as `rrma-tui review` does: from the run as the
views read it (its checkpoint plus the lines after it), signed with $RRMA_SIGNING_KEY where it is
set (the signature binds the trial's trial.finished hash), and a finished run's held claim is
promoted by the same rule either way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_tui_screens import events_of, make_app, open_dashboard
from tui_helpers import MessageLog, wait_until

from rrma.log.reader import RunReader
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.promotion import review_trial
from tui.app import RRMAApp
from tui.screens.trial import TrialScreen
from tui.widgets.line_table import LineTable


@pytest.fixture
def signer(tmp_path: Path) -> tuple[Path, Path]:
    """carol's SSH key and an allowed_signers file naming her (outside the run directory)."""
    key = tmp_path / "keys" / "carol"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key), "-C", "carol"], check=True,
                   capture_output=True, timeout=30)
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    allowed = tmp_path / "keys" / "allowed_signers"
    allowed.write_text(f"carol {kind} {blob}\n")
    return key, allowed


async def approve_the_claim(runs_dir: Path) -> RRMAApp.ReviewRecorded:
    """Approve the held claim t0012 from its trial view; the app's ReviewRecorded."""
    log = MessageLog()
    app = make_app(runs_dir)
    async with app.run_test(size=(120, 40), message_hook=log) as pilot:
        dash = await open_dashboard(pilot, app)
        dash.query_one("#trials", LineTable).move_to("t0012")
        await pilot.press("enter")
        assert isinstance(app.screen, TrialScreen)
        await pilot.press("y", *"held up", "enter")
        await wait_until(pilot, lambda: bool(log.of(RRMAApp.ReviewRecorded)))
    [recorded] = log.of(RRMAApp.ReviewRecorded)
    assert isinstance(recorded, RRMAApp.ReviewRecorded)
    return recorded


@pytest.mark.asyncio
async def test_a_review_from_the_tui_is_signed_with_the_reviewers_key(runs_dir: Path, run_dir: Path,
                                                                      signer: tuple[Path, Path],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    key, allowed = signer
    monkeypatch.setenv("RRMA_SIGNING_KEY", str(key))
    recorded = await approve_the_claim(runs_dir)
    assert recorded.promoted and recorded.trial_id == "t0012"
    events = events_of(run_dir)
    review = [e for e in events if e["kind"] == "review"][-1]
    finished = [e for e in events if e["kind"] == "trial.finished" and e["data"]["trial_id"] == "t0012"][-1]
    assert review["data"]["signature"] and review["data"]["trial_finished"] == finished["hash"]
    assert [e["data"]["trial_id"] for e in events if e["kind"] == "trial.promoted"][-1] == "t0012"
    report = verify_run(run_dir, allowed_signers=allowed)
    # the generated run has no derived views (results.tsv, blackboard.md); nothing else may be wrong
    assert [e for e in report.errors if "derived view" not in e] == []
    assert "1 signed review verified" in report.checked


@pytest.mark.asyncio
async def test_an_unsigned_review_says_it_promoted_the_claim(runs_dir: Path, run_dir: Path) -> None:
    recorded = await approve_the_claim(runs_dir)
    assert recorded.promoted and recorded.decision == "approve" and recorded.reviewer == "carol"
    review = [e for e in events_of(run_dir) if e["kind"] == "review"][-1]
    assert "signature" not in review["data"]


def test_a_state_without_the_outcomes_hash_cannot_sign_and_the_readers_state_records(run_dir: Path,
                                                                                      signer: tuple[Path, Path]) -> None:
    """A signature binds the trial's trial.finished hash: signing from a state folded without it would bind
    nothing, so review_trial refuses before writing. Unsigned, the reader's state (the TUI's, from its
    checkpoint) is enough, and it is brought up to date with the review and the promotion."""
    key, _ = signer
    before = len(events_of(run_dir))
    light = RunReader(run_dir, write_checkpoint=False, shared=False).load().state
    held = light.trials["t0012"].finished_hash
    light.trials["t0012"].finished_hash = None  # a fold that skipped the chain's hashes
    with pytest.raises(ValueError, match="full fold"):
        review_trial(RunStore(run_dir), "t0012", "approve", "carol", sign_key=key, state=light)
    assert len(events_of(run_dir)) == before
    light.trials["t0012"].finished_hash = held
    event = review_trial(RunStore(run_dir), "t0012", "approve", "carol", state=light)
    assert light.trials["t0012"].review_status == "approved" and light.trials["t0012"].promoted
    assert [e["seq"] for e in events_of(run_dir)][-2] == event.seq  # the review, then its promotion
