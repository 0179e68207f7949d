"""``rrma-tui audit RUN``: the auditor's findings on a run's finished trials, on demand (docs/audit.md).

It calls :func:`rrma.audit.auditor.audit_run`, which folds the log, runs the rules (and the judge,
with ``--judge BACKEND --model M``) on every finished agent trial (or the ``--trial`` ones) and
appends the findings not in the log yet as ``audit.finding`` events: a second audit writes nothing
new. ``--dry-run`` writes nothing. ``--json`` prints one JSON object a line per finding
(:func:`rrma.audit.finding.finding_json`); without it, a table and a line of counts.
``--dismiss SEQ --note TEXT`` records a reviewer's dismissal of one finding (``audit.dismissed``);
a dismissal never promotes a held trial: a person's ``review ... approve`` does.

Exit codes as everywhere (:mod:`cli.output`): 0 when the audit ran (with findings or without), 2 on
bad input (no such run or trial, an unreadable log, a judge that cannot be made).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from cli.options import resolve_run
from cli.output import EXIT_OK, CliError, console, err, plain, print_table
from cli.reports import SEVERITY_STYLE

if TYPE_CHECKING:
    from rrma.audit.judge import ModelJudge


def add_audit_parser(sub: Any, common: Any) -> None:
    """The ``audit`` command's parser (cli/parser.py calls it; ``common`` adds the shared options)."""
    p = sub.add_parser("audit", help="audit a run's finished trials: rule (and optional judge) findings, written "
                       "to its log once (docs/audit.md)")
    p.add_argument("run", type=Path)
    p.add_argument("--trial", action="append", default=[], metavar="T",
                   help="audit only this trial (repeat for several; default: every finished agent trial)")
    p.add_argument("--judge", metavar="BACKEND",
                   help="also ask an LLM judge (anthropic, or openai: any OpenAI-compatible server such as vLLM "
                   "via $OPENAI_BASE_URL; off by default); needs --model")
    p.add_argument("--model", metavar="M", help="the judge's model")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line per finding (trial, kind, severity, source, explanation, evidence)")
    p.add_argument("--dry-run", action="store_true", help="print the findings; write nothing to the run's log")
    p.add_argument("--dismiss", type=int, metavar="SEQ",
                   help="dismiss the finding at this seq (the seq column) with --note; it does not promote")
    p.add_argument("--note", help="why the finding is dismissed (with --dismiss)")
    p.add_argument("--reviewer", help="who dismisses (default: $RRMA_REVIEWER or $USER)")
    common(p, suppress=True)


def make_judge(backend: str | None, model: str | None) -> ModelJudge | None:
    """The judge ``--judge BACKEND --model M`` names (rrma.plugins.make_judge), or None; CliError when it cannot be made."""
    if backend is None:
        if model is not None:
            raise CliError("--model names the judge's model: give --judge BACKEND too")
        return None
    if not model:
        raise CliError(f"--judge {backend} needs --model (the judge's model name)")
    from rrma.audit.judge import JudgeError
    from rrma.contracts import AgentError
    from rrma.plugins import make_judge as make

    try:
        return make(backend, model)
    except (JudgeError, AgentError) as exc:
        raise CliError(f"--judge {backend}: {exc}") from exc


def cmd_audit(args: argparse.Namespace) -> int:
    if args.dismiss is not None:
        return dismiss(args)
    if args.note is not None:
        raise CliError("--note goes with --dismiss SEQ")
    from rrma.audit.auditor import AuditError, audit_run

    run_dir = resolve_run(args.run, args.runs)  # no run, an unreadable log: exit 2
    judge = make_judge(args.judge, args.model)
    try:
        report = audit_run(run_dir, trials=args.trial or None, judge=judge, write=not args.dry_run)
    except AuditError as exc:
        raise CliError(str(exc)) from exc
    findings = sorted(report.findings, key=_order)
    if args.json:
        for finding in findings:
            print(json_line(finding), flush=False)
        judge_lines(judge, json_mode=True)
        return EXIT_OK
    held = _held(run_dir)
    print_findings(findings)
    wrote = "would write" if args.dry_run else "written"
    new = sum(1 for f in findings if f.get("seq") is None) if args.dry_run else report.written
    judge_lines(judge, json_mode=False)
    console.print(plain(f"{len(findings)} finding(s), {new} new {wrote}; {report.trials} trial(s) audited; "
                        f"{held} trial(s) held for review"), soft_wrap=True)
    return EXIT_OK


def judge_lines(judge: ModelJudge | None, *, json_mode: bool) -> None:
    """After an audit with ``--judge``: which judge ran, and its problems (a reply it could not read, a failed
    call after which it stopped, verdicts dropped for evidence not in the log). On stderr with ``--json``, so
    stdout stays one finding a line. The audit still ran: the rules' findings stand, the exit code is 0."""
    if judge is None:
        return
    out = err if json_mode else console
    describe = getattr(judge.complete, "describe", None)  # the built-in completers say their endpoint
    what = describe() if callable(describe) else f"{judge.backend} {judge.model}"
    dropped = list(judge.dropped)
    out.print(plain(f"judge: {what}, prompt {judge.prompt_version}, {judge.calls} call(s), {len(dropped)} "
                    f"verdict(s) dropped for evidence not in the log"), soft_wrap=True)
    for line in judge.summary():
        err.print(plain(f"rrma-tui: judge: {line}"))
    if not json_mode:
        for line in dropped[:10]:
            console.print(plain(f"  dropped: {line}"), soft_wrap=True)


def json_line(finding: dict[str, Any]) -> str:
    """One ``--json`` line. ASCII only: every control character and non-ASCII character an agent wrote is
    escaped (``\\u001b``), so the line is inert on a terminal and still the same JSON."""
    from rrma.audit.finding import finding_json

    return json.dumps(finding_json(finding), ensure_ascii=True, sort_keys=False)


def _order(finding: dict[str, Any]) -> tuple[int, int]:
    from rrma.log.state import SEVERITY_RANK

    seq = finding.get("seq")
    return (-SEVERITY_RANK.get(finding["severity"], 0), seq if isinstance(seq, int) else 1 << 60)


def _held(run_dir: Path) -> int:
    from rrma.log.reader import read_state

    return len(read_state(run_dir, turns=False).held_trials())


def cited(finding: dict[str, Any]) -> str:
    return ", ".join(str(e["seq"]) for e in finding.get("evidence") or [])


def print_findings(findings: list[dict[str, Any]]) -> None:
    """The findings as a table: seq (for --dismiss), trial, severity, kind, source, explanation, cited seqs."""
    if not findings:
        console.print("no findings")
        return
    table = Table("seq", "trial", "severity", "kind", "source", "explanation", "cites")
    for f in findings:
        severity = Text(f["severity"], style=SEVERITY_STYLE.get(f["severity"], ""))
        if f.get("held"):
            severity.append(" held", style="bold")
        explanation = plain(f["explanation"])
        if f.get("dismissed"):
            d = f["dismissed"]
            severity.append(" dismissed", style="dim")
            explanation.append_text(plain(f" (dismissed by {d['by']}: {d['note']})"))
        table.add_row("-" if f.get("seq") is None else str(f["seq"]), plain(f["trial_id"]), severity,
                      plain(f["kind"]), plain(f["source"]), explanation, cited(f))
    print_table(table)


def dismiss(args: argparse.Namespace) -> int:
    """``--dismiss SEQ --note TEXT``: an ``audit.dismissed`` event by the reviewer; it promotes nothing."""
    from rrma.audit.auditor import AuditError, dismiss_finding
    from rrma.log.review import default_reviewer
    from rrma.log.state import RunState
    from rrma.log.store import RunStore

    for flag, value in (("--judge", args.judge), ("--model", args.model), ("--trial", args.trial or None)):
        if value is not None:
            raise CliError(f"{flag} does not go with --dismiss")
    if args.json or args.dry_run:
        raise CliError("--json and --dry-run do not go with --dismiss")
    if args.note is None:
        raise CliError("--dismiss needs --note saying why the finding is wrong or does not matter")
    run_dir = resolve_run(args.run, args.runs)
    store = RunStore(run_dir)
    state = RunState.fold(store.scan().events)
    reviewer = args.reviewer or default_reviewer()
    try:
        event = dismiss_finding(store, state, args.dismiss, reviewer=reviewer, note=args.note)
    except AuditError as exc:
        raise CliError(str(exc)) from exc
    found = next(f for f in state.findings if f["seq"] == args.dismiss)
    console.print(plain(f"dismissal recorded: seq {event.seq}, finding seq {args.dismiss} ({found['kind']}, "
                        f"{found['severity']}) on {found['trial_id']} by {event.data.by}"), soft_wrap=True)
    rec = state.trials.get(found["trial_id"])
    if rec is not None and rec.metrics.get("awaiting_review") and not rec.promoted:
        console.print(plain(f"{found['trial_id']} still awaits a person's review (rrma-tui review RUN "
                            f"{found['trial_id']} approve|reject): a dismissal does not promote it"), soft_wrap=True)
    return EXIT_OK
