"""How trials, scores and reviews read on screen: glyphs, number formats, diffs, lineage.

One place for these so the dashboard, trial view, review queue and lineage tree show a trial
the same way. Everything here is a pure function of a RunState (plus blobs for diffs).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

from rrma.log.events import parse_ts
from rrma.log.reader import LiveFold
from rrma.log.state import REVIEW_STATUS, SEVERITY_RANK, RunState, TrialRecord

STATUS_GLYPH: dict[str, tuple[str, str]] = {
    "proposed": ("·", "dim"),
    "running": ("▸", "yellow"),
    "ok": ("✓", "green"),
    "rejected": ("✗", "red"),
    "invalid": ("⊘", "magenta"),
    "crash": ("✖", "red"),
    "timeout": ("◷", "yellow"),
    "oom": ("≋", "red"),
    "disk": ("▤", "red"),
    "aborted": ("■", "dim"),
}

# One symbol per meaning, everywhere (dashboard, trial view, review queue, lineage, header):
MARKS: dict[str, tuple[str, str]] = {
    "best": ("★", "bold green"),  # the current best, approved by a person (or the baseline)
    "claim": ("☆", "bold yellow"),  # a best or would-be best no person has approved (the hitl gate holds one)
    "promoted": ("↑", "green"),  # was the best once, improved on since
    "approved": ("✔", "green"),  # review in force: approve
    "rejected": ("✘", "red"),  # review in force: reject (a person's; the oracle's rejection is the status ✗)
    "flagged": ("⚑", "yellow"),  # review in force: flag
    "held": ("⚖", "bold red"),  # a high audit finding holds a would-be best's promotion until a person reviews it
}
BEST, CLAIM, HELD = MARKS["best"][0], MARKS["claim"][0], MARKS["held"][0]
SEVERITY_STYLE = {"high": "bold red", "warn": "yellow", "info": "dim"}  # audit findings (rrma/audit)
REVIEW_GLYPH = {status: (f"{MARKS[status][0]} {status}", MARKS[status][1]) for status in ("approved", "rejected", "flagged")}
REVIEW_GLYPH["unreviewed"] = ("", "")


Part = tuple[Text, int]  # a piece of a header line and its priority (0: always shown; higher goes first)


def fit_line(parts: list[Part], width: int | None) -> Text:
    """Join the parts of one header line; past ``width`` cells, drop the least important parts whole.

    A part is never cut in the middle (a number half shown reads as another number); what does not
    fit is left out, lowest priority first, then right to left.
    """
    keep = list(parts)
    if width is not None:
        while sum(p[0].cell_len for p in keep) > width:
            droppable = [i for i, p in enumerate(keep) if p[1] > 0]
            if not droppable:
                break
            worst = max(droppable, key=lambda i: (keep[i][1], i))
            del keep[worst]
    text = Text()
    for piece, _ in keep:
        text.append_text(piece)
    if width is not None and text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


def glyph(status: str) -> Text:
    char, style = STATUS_GLYPH.get(status, ("?", ""))
    return Text(char, style=style)


SIGMA_LEGEND = "Δσ: against the baseline, in units of its σ"  # the one meaning of Δσ (RunState.delta_sigma_of)
SCORE_CELLS = 8  # the trials table's score column (the dashboard); fmt_score fits a score into it
SIGMA_CELLS = 7  # its Δσ column
SECONDS_CELLS = 5  # its sec column (a finished trial's seconds, a running one's age)


def _compact_exponent(text: str) -> str:
    """``1.2346e+05`` -> ``1.2346e5``, ``1e-07`` -> ``1e-7``: the same number in fewer cells."""
    mantissa, sep, exponent = text.partition("e")
    if not sep:
        return text
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def fit_number(value: float, width: int | None, *, digits: int = 5, sign: bool = False, suffix: str = "") -> str:
    """``value`` in at most ``width`` cells (``suffix`` included): fewer significant digits, then a short
    exponent, never an ellipsis (a number cut at its edge reads as another number). Without ``width``,
    ``digits`` significant digits. What cannot fit even with one digit is as short as it gets."""
    plus = "+" if sign else ""
    text = f"{value:{plus}.{digits}g}" + suffix
    if width is None or len(text) <= width:
        return text
    for fewer in range(digits, 0, -1):
        text = _compact_exponent(f"{value:{plus}.{fewer}g}") + suffix
        if len(text) <= width:
            break
    return text


def fmt_score(value: float | None, width: int | None = None) -> str:
    """Five significant digits; with ``width``, as many as fit in ``width`` cells (a table column)."""
    return "-" if value is None else fit_number(value, width)


def fmt_sigma(value: float | None, width: int | None = None) -> str:
    """``+9.4σ``; whole sigmas from 100 on (``+1498σ``), so a big effect fits its column uncut; with ``width``,
    a larger one in fewer digits (``+1.2e5σ``)."""
    if value is None:
        return ""
    text = f"{value:+.0f}σ" if abs(value) >= 100 else f"{value:+.1f}σ"
    if width is None or len(text) <= width or not math.isfinite(value):
        return text
    return fit_number(value, width, digits=3, sign=True, suffix="σ")


def is_proof_run(state: RunState) -> bool:
    """A run whose trials prove theorems (a proof oracle's: each trial names its theorem). Looks at the last
    few trials only, as it runs on every redraw of a run of any size."""
    return any(state.trials[tid].theorem for tid in state.order[-8:] if tid in state.trials)


def is_claim(rec: TrialRecord) -> bool:
    """A would-be best held back by the hitl gate, not yet promoted (one an audit finding holds is ``held``)."""
    return bool(rec.metrics.get("awaiting_review")) and not rec.promoted and not rec.held


def marker_name(state: RunState, rec: TrialRecord) -> str | None:
    """best | held | claim | promoted | None: where a trial stands in the run's search for the best."""
    if rec.trial_id == state.best_id:
        return "best" if rec.review_status == "approved" or rec.baseline else "claim"
    if rec.held:
        return "held"
    if is_claim(rec):
        return "claim"
    if rec.promoted:
        return "promoted"
    return None


def best_marker(state: RunState, rec: TrialRecord) -> Text:
    """★ approved best, ☆ a claim (the unapproved best, or a would-be best the hitl gate holds), ↑ a former best."""
    name = marker_name(state, rec)
    return Text(*MARKS[name]) if name is not None else Text(" ")


def fmt_seconds(value: float, width: int | None = SECONDS_CELLS) -> str:
    """A finished trial's seconds: ``41.5``; whole seconds from 1000 on (``1234``), so it fits its column uncut;
    past that, fewer digits (``1.2e5``)."""
    text = f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"
    return text if width is None or len(text) <= width else fit_number(value, width, digits=3)


def fmt_age(seconds: float) -> str:
    """A running trial's age in at most five cells, to the second while it reads so: ``7s``, ``3m12s``, ``14m``,
    ``1h02m``, ``11h``, ``3d04h`` (``human_duration`` in fewer cells: the trials table's ``sec`` column)."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 36000:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s < 86400:
        return f"{s // 3600}h"
    days = s // 86400
    return f"{days}d{s % 86400 // 3600:02d}h" if days < 10 else f"{days}d"


def running_age(rec: TrialRecord, now: datetime | None) -> float | None:
    """Seconds a running trial has run at ``now`` (since its latest ``trial.started``); None: not running, no
    clock, or no start recorded."""
    if now is None or rec.status != "running" or not rec.started_ts:
        return None
    started = parse_ts(rec.started_ts)
    return None if started is None else max(0.0, (now - started).total_seconds())


def seconds_cell(rec: TrialRecord, now: datetime | None) -> str | Text:
    """The ``sec`` cell: a finished trial's seconds; a running one's age at ``now`` (yellow, as its status glyph,
    ticking while the dashboard shows it); nothing for a proposed one (it has not started)."""
    if rec.finished:
        return fmt_seconds(rec.seconds)
    age = running_age(rec, now)
    return Text(fmt_age(age), STATUS_GLYPH["running"][1]) if age is not None else ""


SPARK = "▁▂▃▄▅▆▇█"
PROGRESS_PREFERRED = ("score_est", "loss", "score")  # the metric a progress sparkline draws, when the samples have it
PROGRESS_AXES = ("step", "elapsed", "frac")  # where a sample is, not how it is doing


def sparkline(values: list[float], width: int) -> str:
    """The last ``width`` values as block characters, the lowest ``▁`` and the highest ``█`` (all equal: ``▄``)."""
    shown = [v for v in values if math.isfinite(v)][-width:] if width > 0 else []
    if not shown:
        return ""
    low, high = min(shown), max(shown)
    if high == low:
        return SPARK[3] * len(shown)
    return "".join(SPARK[round((v - low) / (high - low) * (len(SPARK) - 1))] for v in shown)


def progress_series(samples: list[dict[str, Any]]) -> tuple[str, list[float]] | None:
    """The metric of a running trial's progress samples worth drawing (``score_est``, else ``loss``, ``score``,
    else the first other number the samples carry) and its values in order; None: no sample has a number."""
    def numbers(key: str) -> list[float]:
        return [float(s[key]) for s in samples
                if isinstance(s.get(key), int | float) and not isinstance(s.get(key), bool)]

    keys = [k for k in PROGRESS_PREFERRED if numbers(k)]
    if not keys:
        keys = [k for s in samples for k in s if k not in PROGRESS_AXES and numbers(k)][:1]
    return (keys[0], numbers(keys[0])) if keys else None


def trial_cells(state: RunState, rec: TrialRecord, now: datetime | None = None) -> list[str | Text]:
    """id, parent, agent, status, score, Δσ vs baseline, seconds, review, hypothesis.

    ``now``: the time a running trial's age is counted to (the dashboard gives its clock, stopped where the
    run's clock stops: :func:`tui.widgets.run_header.run_now`); None: a running trial's ``sec`` is empty."""
    ident = Text.assemble(best_marker(state, rec), rec.trial_id)
    review = REVIEW_GLYPH.get(rec.review_status, ("", ""))
    return [
        ident,
        rec.parent or "-",
        rec.agent,
        glyph(rec.status),
        fmt_score(rec.score, SCORE_CELLS),
        fmt_sigma(state.delta_sigma_of(rec.score) if rec.status == "ok" else None, SIGMA_CELLS),
        seconds_cell(rec, now),
        Text(review[0], review[1]) if rec.review_status != "unreviewed" else (
            Text(f"{HELD} held", MARKS["held"][1]) if rec.held else Text("awaiting", "yellow") if is_claim(rec) else ""),
        rec.hypothesis.replace("\n", " "),
    ]


def lineage_text(state: RunState, trial_id: str, limit: int = 12) -> Text:
    """The trial, its parent, … back to the baseline; a path longer than ``limit`` skips its middle."""
    path = state.lineage(trial_id)
    skipped = len(path) - limit if len(path) > limit else 0
    if skipped:
        path = [*path[: limit - 1], path[-1]]
    text = Text()
    for i, rec in enumerate(path):
        if i:
            text.append(" ← ", "dim")
        if skipped and i == len(path) - 1:
            text.append(f"… {skipped} more ← ", "dim")
        text.append(rec.trial_id, "bold" if i == 0 else "")
        text.append(f" {fmt_score(rec.score)}", "dim")
    return text


def trial_diff(model: LiveFold, rec: TrialRecord) -> str:
    """Unified diff of the trial's workspace against its parent's (from the manifests)."""
    parent = model.state.trials.get(rec.parent) if rec.parent else None
    mine = model.files_of(rec)
    theirs = model.files_of(parent) if parent is not None else {}
    if not mine and rec.edits:  # no manifest: show the edited files whole
        mine = {e["path"]: model.blob_text(e.get("blob")) or "" for e in rec.edits}
    chunks: list[str] = []
    for path in sorted(set(mine) | set(theirs)):
        old, new = theirs.get(path), mine.get(path)
        if old == new:
            continue
        chunks.extend(difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
            fromfile=f"a/{path}" if old is not None else "/dev/null",
            tofile=f"b/{path}" if new is not None else "/dev/null", n=2,
        ))
    return "".join(chunks)


def proposal_of(model: LiveFold, rec: TrialRecord) -> dict[str, Any]:
    text = model.blob_text(rec.proposal_blob)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def change_renderable(model: LiveFold, rec: TrialRecord) -> RenderableType:
    """The proof (proof oracles) or the diff against the parent, syntax-highlighted."""
    proposal = proposal_of(model, rec)
    proof = proposal.get("proof")
    if proof:
        lexer = "lean" if "lean" in str(model.state.task.get("oracle", {}).get("kind", "")) else "coq"
        return Group(Text(f"proof of {rec.theorem or proposal.get('theorem') or '?'}", "bold"),
                     Syntax(str(proof), lexer, theme="ansi_dark", word_wrap=True))
    if rec.baseline:
        return Text("baseline: the unmodified workspace", "dim")
    diff = trial_diff(model, rec)
    if not diff:
        return Text("no change against the parent", "dim")
    return Syntax(diff, "diff", theme="ansi_dark", word_wrap=True)


def proof_path_steps(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The found proof of a recorded search tree (``meta["search_tree"]``, written by agents/proof_search.py; a
    view reads it as data, never through the agent's code), step by step: for each node on the proof path its
    tactic (the one that led there), its goal hash and its goals (clipped), root first.

    For a person stepping through the goals of a trial before approving it (the TUI, ``show``)."""
    nodes = tree.get("nodes") or []
    goals = tree.get("goals") or {}
    steps = []
    for k in tree.get("proof") or []:
        if not 0 <= k < len(nodes):
            break
        _parent, tactic, depth, count, key = nodes[k]
        steps.append({"node": k, "tactic": tactic, "depth": depth, "goal_count": count, "key": key,
                      "goals": list(goals.get(key, []))})
    return steps


def search_renderable(model: LiveFold, rec: TrialRecord) -> RenderableType | None:
    """The goals along a proof found by the search agent (agents/proof_search.py), root first:
    what a person steps through before approving. None when the trial's proposal holds no search tree."""
    tree = (proposal_of(model, rec).get("meta") or {}).get("search_tree")
    if not isinstance(tree, dict):
        return None
    used, budget = tree.get("used") or {}, tree.get("budget") or {}
    text = Text.assemble(
        (f"{tree.get('result', '?')}", "bold"),
        f" after {used.get('checks', '?')} tactic runs in {used.get('seconds', '?')} s",
        (f" (budget {budget.get('checks', '?')} runs, {budget.get('seconds', '?')} s); ", "dim"),
        (f"tree: {len(tree.get('nodes') or [])} states, {len(tree.get('tries') or [])} tries kept", "dim"),
    )
    if tree.get("dropped_tries"):
        text.append(f", {tree['dropped_tries']} not kept", "dim")
    try:
        steps = proof_path_steps(tree)
    except (TypeError, ValueError):  # a tree written by another version: say so, never crash the view
        return Group(text, Text("(the proof path of this tree cannot be read)", "dim"))
    lines = Text()
    for i, step in enumerate(steps):
        tactic = step["tactic"] or "(the statement)"
        goals = step["goals"]
        count = step["goal_count"]
        lines.append(f"{i:>3} ", "dim")
        lines.append(str(tactic), "bold cyan" if step["tactic"] else "bold")
        lines.append(f"  → {count} goal(s)" if count else "  → no goals: proved", "dim" if count else "green")
        lines.append(f"  [{str(step['key'])[:10]}]\n", "dim")
        for goal in goals:
            for line in str(goal).splitlines() or [""]:
                lines.append(f"      {line}\n")
        if count > len(goals):
            lines.append(f"      … {count - len(goals)} more goal(s)\n", "dim")
    if not steps:
        lines.append("no proof path in the tree", "dim")
    return Group(text, lines)


def log_tail(model: LiveFold, rec: TrialRecord, lines: int = 20) -> str:
    text = model.blob_text(rec.log_blob)
    if text is None:
        return "(no log)"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:]) or "(empty log)"


def reviews_text(rec: TrialRecord) -> Text:
    text = Text()
    if rec.held:
        text.append(f"{HELD} held for review: a high audit finding holds this would-be new best until a person "
                    "reviews it (approve promotes it)\n", MARKS["held"][1])
    if is_claim(rec):
        text.append(f"{CLAIM} awaiting review: a would-be new best held by the hitl gate\n", "bold yellow")
    if not rec.reviews:
        text.append("no reviews yet", "dim")
    for review in rec.reviews:
        status = REVIEW_STATUS[review["decision"]]
        label, style = REVIEW_GLYPH[status] if status != "unreviewed" else ("↶ withdrawn", "dim")
        superseded = review is not rec.reviews[-1]
        text.append(f"{label}", f"{style} strike" if superseded else style)
        text.append(f" by {review['reviewer']} at {review['ts'][:19].replace('T', ' ')} (seq {review['seq']})")
        if superseded:
            text.append(" superseded", "dim")
        if review.get("signed"):  # a signature is present; `rrma-tui verify --allowed-signers` checks it
            text.append(f" ✔signed ({review.get('key_fingerprint') or 'key unknown'})", "green")
        else:
            text.append(" (unsigned)", "dim")
        if review.get("note"):
            text.append(f": {review['note']}", "italic")
        text.append("\n")
    return text


# ----------------------------------------------------------------------------- audit findings (rrma/audit)


def audit_cell(rec: TrialRecord) -> Text:
    """How many open findings the trial has of each severity, most severe first (``1 high · 2 warn``); empty: none."""
    text = Text()
    for n, (level, count) in enumerate(rec.open_finding_counts):
        if n:
            text.append(" · ", "dim")
        text.append(f"{count} {level}", SEVERITY_STYLE[level])
    return text


def audit_cell_width(recs: Iterable[TrialRecord]) -> int:
    """The cells the widest :func:`audit_cell` of ``recs`` takes (at least the header's, ``audit``)."""
    return max([len("audit"), *(len(audit_cell(rec).plain) for rec in recs if rec.findings)])


def ordered_findings(rec: TrialRecord) -> list[dict[str, Any]]:
    """The trial's findings as the trial view lists them: open ones most severe first, then the dismissed."""
    return sorted(rec.findings, key=lambda f: (f["dismissed"] is not None, -SEVERITY_RANK[f["severity"]], f["seq"]))


def finding_cells(finding: dict[str, Any]) -> list[str | Text]:
    """severity, kind, source, cited seqs, explanation (one row of the trial view's findings)."""
    dismissed = finding["dismissed"] is not None
    severity = Text(finding["severity"], "dim strike" if dismissed else SEVERITY_STYLE[finding["severity"]])
    cites = ",".join(str(e["seq"]) for e in finding["evidence"]) or "-"
    explanation = Text(" ".join(str(finding["explanation"]).split()))
    if dismissed:
        explanation = Text.assemble(("dismissed · ", "dim"), (explanation.plain, "dim"))
    return [severity, finding["kind"], finding["source"], cites, explanation]


def findings_text(rec: TrialRecord) -> Text:
    """Every finding of the trial in full: what, why, the cited events with their quotes, any dismissal."""
    text = Text()
    for i, finding in enumerate(ordered_findings(rec)):
        if i:
            text.append("\n")
        dismissal = finding["dismissed"]
        style = "dim" if dismissal is not None else SEVERITY_STYLE[finding["severity"]]
        text.append(f"{finding['severity']} {finding['kind']}", f"{style} strike" if dismissal is not None else style)
        source = finding["source"] + (f" ({finding['rule']})" if finding.get("rule") else "")
        text.append(f"  {source}  seq {finding['seq']}", "dim")
        if finding.get("held"):
            text.append(f"  {HELD} held the promotion", MARKS["held"][1] if dismissal is None else "dim")
        text.append(f"\n  {finding['explanation']}\n")
        for evidence in finding["evidence"]:
            text.append(f"  seq {evidence['seq']}", "bold")
            text.append(f": {evidence['quote']}\n" if evidence.get("quote") else "\n", "italic")
        if dismissal is not None:
            text.append(f"  dismissed by {dismissal['by']} at {str(dismissal['ts'])[:19].replace('T', ' ')} "
                        f"(seq {dismissal['seq']})", "green")
            text.append(f": {dismissal['note']}\n" if dismissal.get("note") else "\n", "italic")
    return text
