"""The run's three-line header (the dashboard's top): the run and its status, the best against the baseline
(or a proof run's theorems), the trial counts; and the header of a run that cannot be read.

Each part has a priority (tui.widgets.trial_text.fit_line): at any width each line keeps to one row and the
least important parts go first, nothing is cut in the middle. The dashboard redraws it on every live redraw
and once a second with no event (its ages and elapsed time move on).

The budget used, against what the task's snapshot (``run.started``) says the driver enforces: agent trials of
``budget.max_trials`` (counted as the loop counts them: baseline and confirmation repeats not counted), the wall
clock of ``budget.max_wall_seconds`` (which each driver counts from its own start: after a resume, from the
resume) and the agents' model cost of their summed ``agents[].budget_usd`` caps (each agent's meter, too, starts
again with each driver). A proof run's budgets are per theorem (``loop.attempts_per_theorem``,
``loop.theorem_seconds``; rrma/run/theorems.py): its header shows the current theorem's attempts and seconds
of those, counted as the policy counts them (rrma/log/theorems.py), not a run-wide "of max" the bench derived from them.
"""

from __future__ import annotations

import textwrap
import weakref
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rich.text import Text

from rrma.log.chain import LogIntegrity
from rrma.log.events import parse_ts
from rrma.log.head import read_head
from rrma.log.layout import EVENTS
from rrma.log.reader import TrialTally
from rrma.log.state import RunState
from rrma.log.theorems import ProofProgress, TheoremIndex, TheoremStatus, proof_progress
from rrma.log.theorems import current_theorem as theorem_now
from rrma.task import MAX_SECONDS, LoopConfig, is_self_reported
from tui.durations import age, human_duration
from tui.session import RunSession
from tui.widgets.training import train_parts
from tui.widgets.trial_text import (
    BEST,
    CLAIM,
    HELD,
    MARKS,
    STATUS_GLYPH,
    Part,
    fit_line,
    fmt_age,
    fmt_score,
    is_claim,
    is_proof_run,
)


def run_now(session: RunSession, status: str | None = None) -> datetime:
    """The time the run's clocks read now: the session's clock for a live run; ``run.finished``'s time for a
    finished one; its last event's for a run no driver holds (status ``stopped``: its clock stopped with its
    driver). Elapsed time, the wall budget and a running trial's age all count to it, so none of them counts
    up forever in a run that is not running. ``status``: :meth:`RunSession.status`, when the caller has it."""
    state = session.state
    if state.finished_ts:
        end = parse_ts(state.finished_ts)
    elif (status if status is not None else session.status()).startswith("stopped"):
        end = parse_ts(state.last_ts)
    else:
        end = None
    return end if end is not None else session.clock()


def fmt_limit(seconds: float) -> str:
    """A wall-clock limit as a task sets it: ``60m``, ``90m``, ``2h``, ``45s``, ``1h30m``."""
    if seconds < 60:
        return f"{seconds:g}s"
    s = int(seconds)
    if s % 60 == 0 and s < 6000:
        return f"{s // 60}m"
    if s % 3600 == 0:
        return f"{s // 3600}h"
    return human_duration(s)


def fmt_usd(value: float) -> str:
    """``$0.42``, ``$1,234``; a cost under a cent in two significant digits (``$0.0042``), never as ``$0.00``."""
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 0.01 or value == 0:
        return f"${value:.2f}"
    return f"${value:.2g}"


def _budget(state: RunState) -> dict[str, Any]:
    budget = state.task.get("budget") if isinstance(state.task, dict) else None
    return budget if isinstance(budget, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def max_trials(state: RunState) -> int | None:
    """The run's ``budget.max_trials`` as its task snapshot records it (None: not recorded)."""
    value = _budget(state).get("max_trials")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def elapsed_part(state: RunState, now: datetime) -> Text | None:
    """``elapsed 3m12s of 60m``: the run's wall clock (to ``run_now``) of ``budget.max_wall_seconds``. The driver
    counts that limit from its own start, so after a resume: ``elapsed 2h05m, 3m12s of 60m since resume``.
    No ``of``: a limit not recorded, or as large as the schema allows (the proof benches': their budgets are per
    theorem). None before ``run.started``."""
    start = parse_ts(state.started_ts)
    if start is None:
        return None
    text = Text(f"  elapsed {human_duration((now - start).total_seconds())}")
    limit = _number(_budget(state).get("max_wall_seconds"))
    if limit is None or limit >= MAX_SECONDS:
        return text
    driver = parse_ts(state.driver_ts) if state.resumes else start
    if driver is None:
        return text
    used = human_duration((now - driver).total_seconds())
    text.append(f" of {fmt_limit(limit)}" if not state.resumes else f", {used} of {fmt_limit(limit)} since resume",
                "bold" if (now - driver).total_seconds() >= limit else "")
    return text


def agent_caps(state: RunState) -> tuple[float, int, int]:
    """(the summed ``agents[].budget_usd`` caps of the run's agents, how many agents have a cap, how many
    agents). The agents are those ``run.started`` lists (``loop.agents_parallel`` copies named ``NAME-k``, each
    with its own cap), else the task's agents times ``agents_parallel``."""
    configs = state.task.get("agents") if isinstance(state.task, dict) else None
    caps: dict[str, float | None] = {}
    for config in configs if isinstance(configs, list) else []:
        if isinstance(config, dict) and isinstance(config.get("name"), str):
            caps[config["name"]] = _number(config.get("budget_usd"))
    names = [i.get("name") if isinstance(i, dict) else getattr(i, "name", None) for i in state.agents_info]
    if not names or not all(isinstance(n, str) for n in names):
        loop = state.task.get("loop") if isinstance(state.task, dict) else None
        copies = loop.get("agents_parallel", 1) if isinstance(loop, dict) else 1
        names = [name for name in caps for _ in range(copies if isinstance(copies, int) and copies > 0 else 1)]
    total, capped = 0.0, 0
    for name in names:
        cap = caps[name] if name in caps else caps.get(str(name).rpartition("-")[0])
        if cap is not None:
            total, capped = total + cap, capped + 1
    return total, capped, len(names)


def cost_parts(state: RunState) -> list[Part]:
    """``cost $0.42 of $5.00`` (every agent capped), ``cost $0.42`` and ``(caps $5.00 on 1 of 2 agents)``
    (some), ``cost $0.42`` (none); a resumed run's caps are each driver's (``cap $5.00 a session``). Nothing
    when no agent has a cost and none has a cap (agents that call no model)."""
    cost = sum(agent.cost_usd for agent in state.agents.values())
    cap, capped, agents = agent_caps(state)
    if not cost and not capped:
        return []
    text = Text(f"  cost {fmt_usd(cost)}")
    if capped and capped == agents:
        text.append(f" of {fmt_usd(cap)}" if not state.resumes else f" (cap {fmt_usd(cap)} a session)",
                    "bold" if cost >= cap and not state.resumes else "")
        return [(text, 2)]
    parts: list[Part] = [(text, 2)]
    if capped:
        parts.append((Text(f" (caps {fmt_usd(cap)} on {capped} of {agents} agents)", "dim"), 4))
    return parts


# per session: the model indexed and each theorem's trials and marks in it (a pass over the new trials only)
_THEOREMS: weakref.WeakKeyDictionary[RunSession, tuple[RunState, TheoremIndex]] = weakref.WeakKeyDictionary()


def theorem_index(session: RunSession) -> TheoremIndex:
    """The session's index of each theorem's trials and marks, kept as its model grows (afresh after a reload)."""
    cached = _THEOREMS.get(session)
    if cached is None or cached[0] is not session.state:
        cached = _THEOREMS[session] = (session.state, TheoremIndex())
    return cached[1]


def current_theorem(session: RunSession, now: datetime) -> tuple[TheoremStatus, LoopConfig] | None:
    """The theorem a proof run that has not finished works on (rrma/log/theorems.py :func:`current_theorem`) and
    its status as the log counts it for the per-theorem policy (attempts, seconds, to ``now``); None in a finished
    run, or before the first theorem starts."""
    state = session.state
    name = theorem_now(state)
    if name is None:
        return None
    try:
        loop = LoopConfig.model_validate(state.task.get("loop") or {})
    except ValueError:
        return None
    status = theorem_index(session).status(state, name, attempts_per_theorem=loop.attempts_per_theorem,
                                           theorem_seconds=loop.theorem_seconds, now=now.timestamp())
    return status, loop


def theorem_budget_parts(session: RunSession, now: datetime) -> list[Part]:
    """``▶ pair_eq: 3 of 40 attempts, 12s of 30s``: the current theorem and its budget used (a live proof run)."""
    found = current_theorem(session, now)
    if found is None:
        return []
    st, loop = found
    return [(Text.assemble("  ", (f"{CURRENT} {st.name}", "bold"), f": {st.attempts} of {loop.attempts_per_theorem} "
                                                                  "attempts"), 1),
            (Text(f", {human_duration(st.seconds)} of {fmt_limit(loop.theorem_seconds)}"), 2)]


CURRENT = "▶"  # marks the theorem a proof run works on now


def progress_parts(progress: ProofProgress | Mapping[str, Any], *, current: bool = True) -> list[Part]:
    """``9/30 solved · 1 open · 20 queued · 0 given up`` (and ``▶ pair_eq``, the theorem worked on now): a proof
    run's progress against all of its theorems, as rrma/log/theorems.py counts it (a runs-list row keeps it as a
    dict; its cell drops the least needed parts where narrow). Every count is always there (a zero too): a reader compares them across runs."""
    p = progress if isinstance(progress, ProofProgress) else ProofProgress(**progress)
    parts: list[Part] = [(Text(f"{p.solved}/{p.total} solved", "bold green"), 0),
                         (Text(f" · {p.open} open", "yellow" if p.open else ""), 2),
                         (Text(f" · {p.queued} queued", "dim" if not p.queued else ""), 3),
                         (Text(f" · {p.given_up} given up", "red" if p.given_up else ""), 3)]
    if current and p.current:
        parts.append((Text(f" {CURRENT} {p.current}", "bold"), 1))
    return parts


def proof_parts(session: RunSession, now: datetime) -> list[Part]:
    """A proof run's line 2 in place of the best: ``proofs: 9/30 solved · 1 open · 20 queued · 0 given up``, against
    all of its theorems (rrma/log/theorems.py: what the theorems view and the summary count), then the current
    theorem and its budget used (``▶ pair_eq: 3 of 40 attempts, 12s of 30s``)."""
    progress = proof_progress(session.state, now.timestamp(), theorem_index(session))
    if progress is None:
        return [(Text("proofs: no theorem named yet", "dim"), 0)]
    parts = progress_parts(progress, current=False)
    first, priority = parts[0]
    parts[0] = (Text.assemble(("proofs: ", "bold"), first), priority)
    return parts + theorem_budget_parts(session, now)


def integrity_parts(integrity: LogIntegrity | None) -> list[Part]:
    """Whether the log verifies (rrma/log/chain.py :func:`log_integrity`, the runs list's rule too): ``✘ log: tail
    cut`` where ``rrma-tui verify`` reports an error (never dropped), ``⚠ torn line`` (a crash mid-write); nothing
    while it verifies (the head part says where it ends) or before the first check."""
    if integrity is None:
        return []
    if integrity.fails:
        return [(Text(f"  ✘ log: {integrity.words}", "bold red"), 0)]
    if integrity.verdict == "torn":
        return [(Text(f"  ⚠ {integrity.words}", "yellow"), 1)]
    return []


def header_text(session: RunSession, width: int | None = None, integrity: LogIntegrity | None = None) -> Text:
    """Three lines: the run and its status (and whether its log verifies: ``integrity``, the dashboard's last
    check); the best against the baseline (marked ``self-reported`` where the task's metric is printed by the
    trial's own program); the trial counts.

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
        status += " (no driver)" if integrity is not None and integrity.fails else " (no driver: R resumes)"
    line1.append((Text(f"  {status}", "green" if state.finish_reason else ("red" if status.startswith("stopped")
                                                                          else "yellow")), 0))
    line1 += integrity_parts(integrity)
    if not state.finish_reason and state.stop_request is not None:
        line1.append((Text(f"  ⏹ stopping ({state.stop_request['by']})", "bold red"), 0))
    elif not state.finish_reason and state.paused_by is not None:
        line1.append((Text(f"  ⏸ paused by {state.paused_by['by']}", "bold yellow"), 0))
    # elapsed (of the wall budget): to run.finished for a finished run, to now for a live one, to its last event
    # for a run no driver holds (status "stopped": its wall clock stopped with its driver, it does not count up
    # forever); then the agents' model cost (of their caps)
    end = run_now(session, status)
    elapsed = elapsed_part(state, end)
    if elapsed is not None:
        line1.append((elapsed, 1))
    line1 += cost_parts(state)
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
    elif is_proof_run(state):  # no best to beat: the theorems proved so far, the current one's budget used
        line2 += proof_parts(session, end)
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

    # the agent trials the tally counts are those the loop counts against budget.max_trials (baseline and
    # confirmation repeats not counted); a proof run's budgets are per theorem (line 2), not this derived total
    limit = None if is_proof_run(state) else max_trials(state)
    used = sum(counts.values())
    line3: list[Part] = [(Text(f"trials {used}:" if limit is None else f"trials {used} of {limit}:",
                               "bold" if limit is not None and used >= limit else ""), 0)]
    for status_name in STATUS_GLYPH:
        if counts.get(status_name):
            char, style = STATUS_GLYPH[status_name]
            if status_name == "running":  # the oldest one's age: the table's sec column is left out at 80 columns
                oldest = oldest_running(state, counts[status_name], end)
                line3.append((Text(f" {char} running {counts[status_name]}"
                                   + (f" ({fmt_age(oldest)})" if oldest is not None else "") + " ", style), 1))
            else:
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


def oldest_running(state: RunState, running: int, now: datetime) -> float | None:
    """Seconds the longest-running of the ``running`` running trials has run (since its trial.started), None if
    none has started. The newest trials first: running ones are among the last proposed (at most
    budget.max_concurrent of them), so a long run is not walked on every redraw."""
    oldest: float | None = None
    for tid in reversed(state.order):
        rec = state.trials[tid]
        if rec.status != "running" or rec.baseline:
            continue
        started = parse_ts(rec.started_ts) if rec.started_ts else None
        if started is not None:
            seconds = (now - started).total_seconds()
            oldest = seconds if oldest is None else max(oldest, seconds)
        running -= 1
        if running <= 0:
            break
    return oldest


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


