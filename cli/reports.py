"""The commands that read runs and report: ``verify``, ``export``, ``ls``, ``show`` (and the run
summary a headless run ends with), ``task-schema``, and ``check`` (one proof of one theorem).

Everything they print that a run wrote goes through :func:`cli.output.plain`: one line, inert.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from cli.options import resolve_run
from cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, CliError, console, err, plain, print_table
from rrma.contain import sandbox

SEVERITY_STYLE = {"high": "bold red", "warn": "yellow", "info": "dim"}


def print_summary(run_dir: Path, state: Any, reason: str) -> None:
    """The run's summary; best, delta and reviews come from the folded log, so a promotion made after
    run.finished (an approval with ``rrma-tui review``) shows, not the summary frozen at the end."""
    from rrma.log.store import RunStore

    summary = dict(state.summary or {})
    if state.best_history:
        best_score = state.best_history[-1][1]
        summary["best_trial"], summary["best_score"] = state.best_id, best_score
        if state.baseline_mean is not None:
            summary["delta"] = state.better(best_score, state.baseline_mean)
            summary["delta_sigma"] = state.delta_sigma_of(best_score)
    summary["awaiting_review"] = sum(1 for t in state.agent_trials()
                                     if t.metrics.get("awaiting_review") and not t.promoted)
    summary["held_for_review"] = len(state.held_trials())  # as folded now: a review or dismissal since counts
    summary["audit_high"] = state.unresolved_high()
    table = Table(title=plain(f"{state.task_name} · {run_dir.name}"), show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")

    def fmt(value: Any, spec: str = ".6g") -> str:
        return "-" if value is None else format(value, spec)

    table.add_row("finished", plain(reason))
    if summary.get("error"):
        table.add_row("error", plain(summary["error"]))
    from rrma.task import is_self_reported

    self_reported = is_self_reported(state.task)  # results an agent-editable program printed itself
    mark = " · self-reported" if self_reported else ""
    table.add_row("metric", plain(f"{summary.get('metric', '')} ({summary.get('direction', '')})"))
    if self_reported:
        table.add_row("metric source", Text("self-reported: printed by the trial's own program, which agents edit; "
                                            "no oracle computed it", style="bold yellow"))
    table.add_row("baseline ± σ", f"{fmt(summary.get('baseline'))} ± {fmt(summary.get('sigma'), '.3g')}")
    table.add_row("best", plain(f"{fmt(summary.get('best_score'))} ({summary.get('best_trial') or '-'}){mark}"))
    table.add_row("delta", f"{fmt(summary.get('delta'))} against the baseline (Δσ {fmt(summary.get('delta_sigma'), '+.2f')})")
    by_status = summary.get("by_status", {})
    table.add_row("trials", f"{summary.get('trials', 0)}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    table.add_row("cache hits", str(summary.get("cache_hits", 0)))
    repeats = state.confirmation_trials()
    if repeats:  # loop.confirm: would-be bests re-evaluated with fresh seeds
        verdicts = [t.confirmation for t in state.agent_trials() if t.confirmation is not None]
        held = sum(1 for v in verdicts if v["confirmed"])
        table.add_row("confirmed", f"{held} of {len(verdicts)} would-be bests ({len(repeats)} repeat trials)")
    aborted_early = sum(1 for t in state.agent_trials() if t.early_abort is not None)
    if aborted_early:
        table.add_row("early aborts", str(aborted_early))
    if state.experiment:
        exp = state.experiment
        table.add_row("experiment", plain(f"{exp.get('id')}: arm {exp.get('arm')}, seed {exp.get('seed')}"))
    for agent in state.agents_info:
        if agent.get("endpoint") or agent.get("model"):
            where = f" at {agent['endpoint']} (from {agent.get('endpoint_from')})" if agent.get("endpoint") else ""
            table.add_row(plain(f"agent {agent.get('name')}"), plain(f"{agent.get('backend')} {agent.get('model') or ''}{where}"))
    if summary.get("awaiting_review"):
        table.add_row("awaiting review", str(summary["awaiting_review"]))
    if summary.get("held_for_review"):  # a high audit finding holds their promotion (docs/audit.md)
        table.add_row(Text("held for review", style="bold red"),
                      f"{summary['held_for_review']} (a high audit finding; `rrma-tui review RUN TRIAL approve` "
                      "promotes one)")
    if state.findings:
        table.add_row("audit findings", f"{len(state.findings)}, {summary['audit_high']} high unresolved "
                      "(`rrma-tui audit RUN`)")
    table.add_row("wall time", f"{summary.get('wall_seconds', 0):.1f} s")
    for label, key in (("fs guard", "fs_guard"), ("limits", "limits"), ("disk", "disk")):
        value = sandbox.recorded(run_dir, key)
        if value:
            table.add_row(label, plain(value))
    head_seq, head_hash = RunStore(run_dir).head()
    table.add_row("head", f"seq {head_seq} {head_hash[:16]}")
    table.add_row("run dir", plain(run_dir))
    print_table(table)


def cmd_verify(args: argparse.Namespace) -> int:
    from rrma.log.verify import normalize_head, verify_run

    run_dir = resolve_run(args.run, args.runs, read_log=False)  # bytes that are not UTF-8: reported below
    if args.expect_head is not None:
        try:
            normalize_head(args.expect_head)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    from rrma.log.signing import default_allowed_signers

    allowed_signers = args.allowed_signers or default_allowed_signers()
    if allowed_signers is not None and not allowed_signers.is_file():
        raise CliError(f"--allowed-signers {allowed_signers}: no such file")
    report = verify_run(run_dir, expect_head=args.expect_head, allowed_signers=allowed_signers)
    for line in report.warnings:  # they can quote the log (a seq, a kind, a reviewer): one line each, inert
        console.print(Text.assemble(("warning", "yellow"), ": ", plain(line)), soft_wrap=True)
    for line in report.errors:
        console.print(Text.assemble(("error", "red"), ": ", plain(line)), soft_wrap=True)
    if report.ok:
        console.print(Text.assemble(("ok", "green"), ": ", plain(f"{report.events} events, {', '.join(report.checked)}")),
                      soft_wrap=True)
        console.print(plain(f"head: seq {report.head_seq} {report.head_hash}"), soft_wrap=True)
        return EXIT_OK
    console.print(f"[red]FAILED[/]: {len(report.errors)} problem(s) in {report.events} events")
    return EXIT_FAILED


def cmd_export(args: argparse.Namespace) -> int:
    from rrma.log.export import ExportError, export_runs
    from rrma.log.store import check_readable
    from rrma.run.experiment import open_experiment

    if args.sqlite is None and args.dataset is None:
        raise CliError("export: give --sqlite OUT.db, --dataset OUT, or both")
    if args.dataset is None and (args.include_rejected or args.include_flagged):
        raise CliError("export: --include-rejected and --include-flagged go with --dataset")
    if args.dataset is not None and not args.dataset.parent.is_dir():
        raise CliError(f"--dataset {args.dataset}: its directory {args.dataset.parent} does not exist")
    dirs: list[Path] = []
    for p in args.run_dirs:  # an experiment directory stands for its cells' runs
        if (p / "experiment.json").is_file():
            exp = open_experiment(p)  # ExperimentError: one line, exit 2 (cli.main)
            cells = [exp.run_dir(c) for c in exp.cells if (exp.run_dir(c) / "events.jsonl").exists()]
            for cell in cells:
                check_readable(cell)
            dirs += cells
        else:
            dirs.append(resolve_run(p, args.runs))
    if args.sqlite is not None:
        started = time.monotonic()
        try:
            results = export_runs(dirs, args.sqlite)
        except ExportError as exc:
            raise CliError(str(exc)) from exc
        for res in results:
            what = "unchanged, skipped" if res.skipped else f"{res.events} events, {res.trials} trials"
            console.print(plain(f"{res.run_id}: {what}"))
        console.print(plain(f"wrote {args.sqlite} in {time.monotonic() - started:.2f} s"))
    if args.dataset is not None:
        export_dataset(dirs, args.dataset, include_rejected=args.include_rejected,
                       include_flagged=args.include_flagged)
    return EXIT_OK


def export_dataset(dirs: list[Path], out: Path, *, include_rejected: bool, include_flagged: bool) -> None:
    """``export --dataset``: one line, the rows written, the rows left out and why, and OUT (docs/training.md)."""
    from rrma.train.dataset import DatasetError, collect, write_dataset

    try:
        found = collect(dirs, include_rejected=include_rejected, include_flagged=include_flagged)
        what = write_dataset(found.rows, out)
    except (DatasetError, OSError) as exc:
        raise CliError(f"--dataset: {exc}") from exc
    left = sum(found.excluded.values())
    why = ", ".join(f"{count} {reason}" for reason, count in sorted(found.excluded.items()))
    console.print(plain(f"dataset: {len(found.rows)} rows written, {left} excluded{f' ({why})' if why else ''}: "
                        f"{out} ({what})"), soft_wrap=True)


def _load_state(run_dir: Path) -> Any:
    """The run as every view reads it (the TUI too): its checkpoint plus the lines after it, else a fold of
    the log. ``show`` and ``ls`` print no per-agent turn totals, so the turns are not indexed."""
    from rrma.log.reader import read_state

    return read_state(run_dir, turns=False)


def cmd_ls(args: argparse.Namespace) -> int:
    """List the runs under --runs. A run that cannot be read (rrma.log.store.check_readable) is listed as
    unreadable, named with its reason on stderr, and makes the exit code 2; the others are listed."""
    from rrma.log.store import RunUnreadable, check_readable

    runs: Path = args.runs
    if not runs.is_dir():
        raise CliError(f"--runs {runs}: no such directory")
    table = Table("run", "task", "status", "trials", "baseline", "best", "Δσ")
    unreadable: list[str] = []
    for run_dir in sorted(p for p in runs.iterdir() if (p / "events.jsonl").exists()):
        try:
            check_readable(run_dir)
            state = _load_state(run_dir)
        except (RunUnreadable, OSError) as exc:
            unreadable.append(f"rrma-tui: {exc}")
            table.add_row(plain(run_dir.name), "-", Text("unreadable", style="red"), "-", "-", "-", "-")
            continue
        best = state.best_history[-1][1] if state.best_history else None
        ds = state.delta_sigma_of(best)
        table.add_row(plain(run_dir.name), plain(state.task_name), plain(state.finish_reason or state.status),
                      str(len(state.agent_trials())),
                      "-" if state.baseline_mean is None else f"{state.baseline_mean:.6g}",
                      "-" if best is None else f"{best:.6g}", "-" if ds is None else f"{ds:+.2f}")
    print_table(table)
    for line in unreadable:
        err.print(plain(line))
    return EXIT_BAD_INPUT if unreadable else EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from rrma.log.store import RunStore
    from rrma.task import is_self_reported

    run_dir = resolve_run(args.run, args.runs)
    state = _load_state(run_dir)
    if state.summary:
        print_summary(run_dir, state, state.finish_reason or "running")
    else:
        console.print(plain(f"{run_dir.name}: {state.status}, {len(state.agent_trials())} trials so far"
                            + (" (self-reported metric)" if is_self_reported(state.task) else "")))
    head_seq, head_hash = RunStore(run_dir).head()
    console.print(f"head: seq {head_seq} {head_hash}  (rrma-tui verify RUN --expect-head HASH checks it later)",
                  soft_wrap=True)
    checks = any(t.confirms or t.confirmation or t.early_abort or t.metrics.get("awaiting_confirmation")
                 for t in state.trials.values())
    score = "score (self-reported)" if is_self_reported(state.task) else "score"
    columns = ["trial", "parent", "agent", "status", score, "Δσ", "review", *(["checks"] if checks else []),
               "hypothesis"]
    table = Table(*columns)
    console.print(sigma_legend(state), soft_wrap=True)
    for tid in state.order:
        t = state.trials[tid]
        signed = {True: " ✔signed", False: " (unsigned)", None: ""}[t.review_signed]
        mark = (" ★" if t.review_status == "approved" or t.baseline else " ☆") if tid == state.best_id else (
            " ↑" if t.promoted else "")  # the TUI's marks: best (approved), claim (not approved), former best
        extra = [plain(trial_checks(t))] if checks else []
        table.add_row(plain(tid + mark), plain(t.parent), plain(t.agent), plain(t.status),
                      "" if t.score is None else f"{t.score:.6g}", delta_sigma_cell(state, t),
                      plain(t.review_status + signed + (" · held for review" if t.held else "")), *extra,
                      plain(t.hypothesis[:70]))  # agent text: literal, never markup
    print_table(table)
    print_orders(state)
    print_findings(state)
    return EXIT_OK


def order_lines(state: Any) -> list[str]:
    """What people told the run, oldest first: each pause, continue and stop (run.control), steer note and a
    person's blackboard post, with its seq, time, who and why (the reason, the note, the post)."""
    items: list[tuple[int, str]] = []
    for order in state.controls:
        why = f": {order['reason']}" if order.get("reason") else " (no reason given)"
        items.append((order["seq"], f"{order['action']} by {order['by']}{why}"))
    for steer in state.steers:
        to = ", ".join(steer["to"]) or "every agent"
        items.append((steer["seq"], f"steer by {steer['by']} to {to}: {steer['text']}"))
    for post in state.blackboard:
        if str(post["agent"]).startswith("human:"):
            items.append((post["seq"], f"post by {post['agent']}: {post['text']}"))
    ts = {o["seq"]: o["ts"] for o in (*state.controls, *state.steers, *state.blackboard)}
    return [f"seq {seq} {str(ts[seq])[:19].replace('T', ' ')}  {' '.join(text.split())}" for seq, text in sorted(items)]


def print_orders(state: Any) -> None:
    """``show``: the orders and notes people gave the run (:func:`order_lines`), one line each, inert."""
    lines = order_lines(state)
    console.print(Text("orders (pause, continue, stop, steer notes, posts by people)", style="bold")
                  if lines else Text("orders: none (no pause, stop, steer note or post by a person)", style="dim"))
    for line in lines:
        console.print(plain(f"  {line}"), soft_wrap=True)


def sigma_legend(state: Any) -> str:
    """What Δσ means here, as every view means it (RunState.delta_sigma_of): the line above show's table."""
    if state.baseline_mean is None:
        return "Δσ: against the baseline, in units of its σ (no baseline measured yet)"
    return (f"Δσ: against the baseline ({state.baseline_mean:.6g}), in units of its σ ({state.sigma or 0:.3g}); "
            "+ is better")


def delta_sigma_cell(state: Any, t: Any) -> str:
    """A trial's Δσ (against the baseline, in its σ) for a scored trial; empty otherwise."""
    sigmas = state.delta_sigma_of(t.score) if t.status == "ok" else None
    return "" if sigmas is None else f"{sigmas:+.2f}"


def print_findings(state: Any) -> None:
    """``show``: the audit findings, trial by trial, one line each (most severe first), and the held trials."""
    from rrma.log.state import SEVERITY_RANK

    if not state.findings:
        return
    console.print(Text("audit findings", style="bold"))
    for tid in state.order:
        t = state.trials[tid]
        if not t.findings:
            continue
        ranked = sorted(t.findings, key=lambda f: (f["dismissed"] is not None, -SEVERITY_RANK[f["severity"]], f["seq"]))
        for f in ranked:
            cites = ", ".join(str(e["seq"]) for e in f["evidence"])
            line = Text.assemble(plain(f"{tid} "), (f"{f['severity']:<4}", SEVERITY_STYLE.get(f["severity"], "")),
                                 plain(f" {f['kind']} (seq {f['seq']}, {f['source']}): {f['explanation']}"
                                       + (f" [cites {cites}]" if cites else "")))
            if f["dismissed"] is not None:
                d = f["dismissed"]
                line.append_text(plain(f" · dismissed by {d['by']}: {d['note']}"))
            if f["held"] and t.held:
                line.append(" · held for review", style="bold red")
            console.print(line, soft_wrap=True)


def trial_checks(t: Any) -> str:
    """A trial's confirmation verdict, repeat origin or early abort, in a few words (show's "checks" column)."""
    if t.confirms:
        return f"repeat of {t.confirms}"
    c = t.confirmation
    if c is not None:
        mean = "-" if c["mean"] is None else f"{c['mean']:.6g}"
        if c["confirmed"]:
            return f"confirmed by {', '.join(c['repeats'])} (mean {mean})"
        return f"not confirmed (mean {mean}): {c['reason']}"
    if t.metrics.get("awaiting_confirmation"):
        return "awaiting confirmation"
    if t.early_abort is not None:
        e = t.early_abort
        where = f"look {e['look']}" if e.get("look") else f"{e.get('items')} items"
        return f"early abort: {e.get('rule')} at {where}"
    return ""


def cmd_check(args: argparse.Namespace) -> int:
    from rrma.contracts import AgentError
    from rrma.plugins import proof_checker

    try:
        run_check = proof_checker()
    except AgentError as exc:
        raise CliError(str(exc)) from exc
    return int(run_check(args.prover, args.file, args.theorem, args.proof_file))


def cmd_task_schema(args: argparse.Namespace) -> int:
    """The task's fields, then what each plug-in declares (its params and sections) and each oracle's capabilities."""
    from rrma.task_schema import oracle_capabilities, plugin_schema_table, schema_table

    table = Table("field", "type", "default", "meaning")
    for row in schema_table():
        table.add_row(*row)
    print_table(table)
    plugins = Table("plug-in", "field", "type", "default", "meaning", title="plug-in settings (docs/plugins.md)")
    for plugin_row in plugin_schema_table():
        plugins.add_row(*plugin_row)
    print_table(plugins)
    caps = Table("oracle kind", "needs_workspace", "holds_answers", title="oracle capabilities")
    for kind, found in oracle_capabilities():
        caps.add_row(kind, str(found["needs_workspace"]), str(found["holds_answers"]))
    print_table(caps)
    return EXIT_OK
