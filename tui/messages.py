"""What a screen asks of the app: open another screen, start or resume a run, record a review or a dismissal.

Screens never import one another. A screen posts one of these messages to itself; it bubbles to
the app, whose handlers (tui/app.py) push the screen asked for, start the driver or append the
review. Attributes go down (each screen is handed its session), messages come up. A screen on the
way may act on a message too: the review queue hides a trial once a :class:`ReviewDecided` for it
passes by, before the app writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from textual.message import Message

from tui.session import RunSession


@dataclass
class OpenRun(Message):
    """Open the dashboard of ``run_dir`` (from the runs list, a palette command or an experiment's cell)."""

    run_dir: Path


@dataclass
class StartRun(Message):
    """Start a run in a headless driver of this TUI (tui/driver.py) and open its dashboard once it begins."""

    args: list[str]  # rrma-tui arguments, checked by tui.driver.parse_start
    label: str  # what was asked ("demo --trials 5"), for messages


@dataclass
class ResumeRun(Message):
    """Drive ``run_dir``, which nobody drives, from a headless ``rrma-tui resume`` of this TUI."""

    run_dir: Path


@dataclass
class OpenTrial(Message):
    """Open one trial of the session's run."""

    session: RunSession
    trial_id: str
    order: list[str] | None = None  # the trials `[` and `]` step through (default: the run's order)
    queue: bool = False  # opened from the review queue: a decision moves on to the next trial left to review
    follow: bool = False  # follow whichever trial is running (the next one when it finishes)


@dataclass
class OpenTrace(Message):
    """Open the trace: every agent turn, or the steps of ``trial_id``."""

    session: RunSession
    trial_id: str | None = None
    # an audit finding's cited seqs: the trace opens on the first that is an agent turn (else the turn before
    # the first: a finding may cite a proposal or a blackboard post)
    cited: tuple[int, ...] = ()


@dataclass
class OpenLineage(Message):
    """Open the tree of trials with the best path."""

    session: RunSession


@dataclass
class OpenReview(Message):
    """Open the review queue."""

    session: RunSession


@dataclass
class OpenProofTree(Message):
    """Open the proof-search tree a trial's proposal carries."""

    trial_id: str
    theorem: str
    tree: dict[str, Any]


@dataclass
class OpenCompare(Message):
    """Compare ``trial_id`` with the current best, or with a trial the person picks."""

    session: RunSession
    trial_id: str
    against: Literal["best", "pick"]


@dataclass
class ReviewDecided(Message):
    """A person confirmed a review (its note asked by tui.dialogs.ask_review): the app appends it."""

    session: RunSession
    trial_id: str
    decision: str
    note: str


@dataclass
class ReviewsDecided(Message):
    """A person confirmed one decision for several trials at once (tui.dialogs.ask_bulk_review): the app appends
    one review per trial, each as a single review is appended, and reports the ones it could not write.

    ``planned``: (trial id, the seq of the review it supersedes as the confirmation showed it, None for a first
    review). A trial whose latest review is no longer that one changed since the person confirmed: not written."""

    session: RunSession
    decision: str
    note: str
    planned: list[tuple[str, int | None]]


@dataclass
class FindingDismissed(Message):
    """A person confirmed the dismissal of an audit finding, with a note (tui.dialogs.ask_dismissal): the app
    appends it (rrma.audit.auditor.dismiss_finding)."""

    session: RunSession
    trial_id: str
    finding_seq: int  # seq of the audit.finding event
    note: str


@dataclass
class OpenTraining(Message):
    """Open the training view of a run with training steps (tui/screens/training.py)."""

    session: RunSession


@dataclass
class OpenTimeline(Message):
    """Open the timeline: the run's orders and decisions, live, with a verify badge (tui/screens/timeline.py)."""

    session: RunSession


@dataclass
class OpenAnalysis(Message):
    """Open the analysis view (tui/screens/analysis.py): any recorded metric against trial order or wall time,
    parameter against score; ``trial_ids`` are the dashboard's filtered rows (None: every trial), ``label``
    says which filter made them."""

    session: RunSession
    trial_ids: list[str] | None = None
    label: str = ""


@dataclass
class OpenTheorems(Message):
    """Open a proof run's theorems view (tui/screens/theorems.py): per-theorem solved/unsolved, the
    cumulative-solved chart and the difficulty table."""

    session: RunSession


@dataclass
class OpenRunCompare(Message):
    """Compare two runs side by side (tui/screens/run_compare.py), picked in the runs list."""

    left: Path
    right: Path
