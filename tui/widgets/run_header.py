"""The run's three-line header (the dashboard's top): the run and its status, the best against the baseline
(or a proof run's theorems), the trial counts; and the header of a run that cannot be read.

Each part has a priority (tui.widgets.trial_text.fit_line): at any width each line keeps to one row and the
least important parts go first, nothing is cut in the middle. The dashboard redraws it on every live redraw
and once a second with no event (its ages and elapsed time move on).
"""

from __future__ import annotations

import textwrap

from rich.text import Text

from rrma.log.reader import TrialTally, age, human_duration, parse_ts
from rrma.log.state import RunState
from rrma.log.store import EVENTS, read_head
from rrma.task import is_self_reported
from tui.screens.base import RunSession
from tui.widgets.training import train_parts
from tui.widgets.trial_text import (
    BEST,
    CLAIM,
    HELD,
    MARKS,
    STATUS_GLYPH,
    Part,
    fit_line,
    fmt_score,
    is_claim,
    is_proof_run,
    theorem_progress,
)


def proof_parts(state: RunState) -> list[Part]:
    """A proof run's line 2 in place of the best: ``proofs: 2 of 3 theorems solved``, then the unsolved ones."""
    attempted, solved = theorem_progress(state)
    parts: list[Part] = [(Text.assemble(("proofs: ", "bold"), (f"{len(solved)} of {len(attempted)}", "bold green"),
                                        " theorems solved"), 0)]
    unsolved = [name for name in attempted if name not in solved]
    if unsolved:
        shown = ", ".join(unsolved[:5]) + (f", … {len(unsolved) - 5} more" if len(unsolved) > 5 else "")
        parts.append((Text(f"  unsolved: {shown}", "yellow"), 2))
    return parts


def header_text(session: RunSession, width: int | None = None) -> Text:
    """Three lines: the run and its status; the best against the baseline (marked ``self-reported``
    where the task's metric is printed by the trial's own program); the trial counts.

    With ``width`` (the header's cells) each line keeps to one row at any terminal size: less
    important parts (the run id, the head, per-status counts...) are dropped before the counts and
    the best's review state, and nothing is cut in the middle.
    """
    state = session.state
    now = session.clock()
    line1: list[Part] = [(Text(state.task_name or "(loading)", "bold"), 0),
                         (Text(f"  {state.run_id or session.run_dir.name}", "dim"), 5)]
    status = session.status()
    if state.finish_reason:
        status += f" ({state.finish_reason})"
    elif status == "stopped":
        status += " (no driver: R resumes)"
    line1.append((Text(f"  {status}", "green" if state.finish_reason else ("red" if status.startswith("stopped")
                                                                          else "yellow")), 0))
    if not state.finish_reason and state.stop_request is not None:
        line1.append((Text(f"  ⏹ stopping ({state.stop_request['by']})", "bold red"), 0))
    elif not state.finish_reason and state.paused_by is not None:
        line1.append((Text(f"  ⏸ paused by {state.paused_by['by']}", "bold yellow"), 0))
    # elapsed: to run.finished for a finished run, to now for a live one, to its last event for a run no
    # driver holds (status "stopped": its wall clock stopped with its driver, it does not count up forever)
    start = parse_ts(state.started_ts)
    end = (parse_ts(state.finished_ts) if state.finished_ts
           else parse_ts(state.last_ts) if status.startswith("stopped") else now)
    if start is not None and end is not None:
        line1.append((Text(f"  elapsed {human_duration((end - start).total_seconds())}"), 2))
    line1.append((Text(f"  {state.events:,} events"), 3))
    try:
        head = read_head(session.run_dir)  # head.json: one small file, the last event an append wrote
    except ValueError:
        line1.append((Text("  head record unreadable", "red"), 1))
    else:
        if head is not None:
            line1.append((Text(f"  head {head.seq} {head.hash[:16]}", "dim"), 4))
    if session.model is not None and session.model.torn:
        line1.append((Text(f"  {len(session.model.torn)} unreadable line(s)", "red"), 1))

    line2: list[Part] = []
    best = state.best
    if best is not None and best.score is not None:
        line2.append((Text.assemble(("best ", "bold"), (f"{best.trial_id} {fmt_score(best.score)}", "bold green")), 0))
        if state.baseline_mean is not None:  # names Δσ as every view means it: against the baseline, in its σ
            sigma = state.delta_sigma_of(best.score)
            vs = Text.assemble("  ", ("Δσ ", "dim"), (f"{sigma:+.1f}" if sigma is not None else "-", "bold"),
                               f" vs baseline {fmt_score(state.baseline_mean)}")
            line2.append((vs, 2))
            if state.sigma is not None:
                line2.append((Text(f" (σ {state.sigma:.3g})"), 3))
        if best.baseline:
            line2.append((Text("  (the baseline)", "dim"), 1))
        elif best.review_status == "approved":
            line2.append((Text(f"  {BEST} approved by {best.reviews[-1]['reviewer']}", "green"), 0))
        elif best.review_status == "unreviewed":
            line2.append((Text(f"  {CLAIM} unreviewed claim", "yellow"), 0))
        else:
            line2.append((Text(f"  {CLAIM} claim, {best.review_status} by {best.reviews[-1]['reviewer']}",
                               "yellow"), 0))
    elif is_proof_run(state):  # no best to beat: the theorems proved so far
        line2 += proof_parts(state)
    else:
        line2.append((Text("no best yet", "dim"), 0))
    if is_self_reported(state.task):  # the metric is what an agent-editable program printed: never dropped
        first, priority = line2[0]
        line2[0] = (Text.assemble(("self-reported ", "bold yellow"), first), priority)
    # kept by the model as it folds (only changed trials are recounted): this runs on every live redraw
    tally = session.model.trial_tally(is_claim) if session.model is not None else TrialTally()
    counts, to_review, claims = tally.counts, tally.to_review, tally.claims
    if claims:
        line2.append((Text(f"  {CLAIM} {claims} awaiting review (hitl)", "bold yellow"), 1))

    line3: list[Part] = [(Text(f"trials {sum(counts.values())}:"), 0)]
    for status_name in STATUS_GLYPH:
        if counts.get(status_name):
            char, style = STATUS_GLYPH[status_name]
            line3.append((Text(f" {char} {status_name} {counts[status_name]} ", style), 2))
    line3.append((Text(f"  to review {to_review}", "dim"), 0))
    line3 += audit_parts(state)
    line3 += train_parts(state)  # `train: step N, reward R (T)` in a training run
    if state.last_ts:
        line3.append((Text(f"  last event {age(state.last_ts, now)} ago", "dim"), 3))
    text = Text()
    for i, line in enumerate((line1, line2, line3)):
        if i:
            text.append("\n")
        text.append_text(fit_line(line, width))
    return text


def unreadable_header(session: RunSession, reason: str, width: int) -> Text:
    """The header of a run that cannot be read: its name, ``unreadable``, and why (the path it names left out:
    it is this run's log) on the two lines below, cut at the end of the second if longer (the notification and
    `rrma-tui ls` give it whole)."""
    why = reason.removeprefix(f"{session.run_dir / EVENTS}: ")
    lines = textwrap.wrap(why, max(20, width)) or [""]
    if len(lines) > 2:
        lines = [lines[0], textwrap.shorten(" ".join(lines[1:]), max(20, width), placeholder=" …")]
    return Text.assemble((session.run_dir.name, "bold"), ("  unreadable", "bold red"), "\n",
                         ("\n".join(lines), "red"), "\n" * (2 - len(lines)))


def audit_parts(state: RunState) -> list[Part]:
    """``audit: 2 high`` (high findings no reviewer has dismissed, on trials no person has reviewed) and how
    many trials they hold for review (``⚖ 1 held for review``); nothing when there are none. A pass over the
    findings only (few)."""
    high = state.unresolved_high()
    held = {f["trial_id"] for f in state.findings  # a dismissal does not lift a hold: only a review does
            if f["held"] and (rec := state.trials.get(f["trial_id"])) is not None and rec.held}
    if not high and not held:
        return []
    parts: list[Part] = [(Text(f"  audit: {high} high", "bold red"), 0)]
    if held:
        parts.append((Text(f", {HELD} {len(held)} held for review", MARKS["held"][1]), 1))
    return parts


