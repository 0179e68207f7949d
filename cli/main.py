"""The ``rrma-tui`` command line: a thin layer over library functions.

Each command calls one library function and turns its named exceptions into a one-line message
and an exit code: 0 done, 1 the run (or check) failed, 2 bad input or a missing requirement.
Bad input is refused before anything is made: a ``--runs`` that is not a directory, a bad value of
``RRMA_FS_GUARD``, ``RRMA_TRIAL_NETWORK`` or ``RRMA_CGROUPS`` (checked before a command that runs
trials starts), a run whose files are not regular files or whose log is not UTF-8
(:func:`rrma.log.store.check_readable`; ``verify`` reports the bytes as an error instead).
Headless paths never import textual: the TUI is imported only when no ``--headless`` command
is given.

Nothing a run's agents, trials or task file wrote reaches the terminal as it is: :func:`plain` (one
line) and :func:`plain_lines` (where the output is multi-line by design) apply :mod:`rrma.text`, and
both consoles pass every segment they render through the same rule (:class:`SafeConsole`), so an
escape sequence or a bidi override in a hypothesis, a note, a trial log, a task name or an error
message that quotes them is printed inert, never obeyed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from rrma.contain import sandbox
from rrma.text import SafeConsole, printable, without_controls

BENCH_ROOT = Path(__file__).resolve().parent.parent / "benches"
COMMANDS = ("bench", "run", "resume", "verify", "export", "ls", "show", "check", "review", "task-schema",
            "stop", "pause", "continue", "post", "steer", "experiment")
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

# piped output (logs, CI) gets a wide console so tables do not wrap their first column. No emoji
# codes anywhere: `prog.py:x: low` in a message must not print as an emoji. Markup is only ever in
# this file's own literals; text from users, agents and oracles goes in as Text (see `plain`).
console = SafeConsole(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False, markup=False)
_LINE_BREAKS = re.compile(r"[\r\n]+")


def one_line(value: Any) -> str:
    """``value`` as one line of terminal-safe text: line breaks become spaces and every other control
    character (escape introducers, C1, bidi overrides) is removed (:func:`rrma.text.without_controls`)."""
    text = "" if value is None else str(value)
    return without_controls(_LINE_BREAKS.sub(" ", text))


def plain(value: Any) -> Text:
    """``value`` as literal, one-line, terminal-safe text: no Rich markup (``[red]``), no emoji codes
    (``:x:``), no control characters (:func:`one_line`). For anything a run or a task file wrote."""
    return Text(one_line(value))


def plain_lines(value: Any) -> Text:
    """Like :func:`plain` for text that is multi-line by design (a trial's output tail): newlines and
    tabs stay, every other control character goes (:func:`rrma.text.printable`)."""
    return Text(printable("" if value is None else str(value)))


class CliError(Exception):
    """Bad input or a missing requirement: printed as one line, exit code 2."""


# ----------------------------------------------------------------------------- parser


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--headless", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="run without the TUI (print progress and a summary)")
    parser.add_argument("--runs", type=Path, default=argparse.SUPPRESS if suppress else Path("runs"),
                        help="directory holding run directories (default: ./runs)")
    parser.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS if suppress else False,
                        help="print only the summary")
    parser.add_argument("--executor", choices=["local", "ray"], default=argparse.SUPPRESS if suppress else "local",
                        help="where trials run (ray needs the 'ray' extra)")
    parser.add_argument("--ray-address", default=default if not suppress else argparse.SUPPRESS,
                        help="Ray cluster address (default: $RAY_ADDRESS, else a local instance)")


def _loop_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=int, help="max agent trials (overrides budget.max_trials)")
    parser.add_argument("--agents", type=int, help="agent instances per configured agent (loop.agents_parallel)")
    parser.add_argument("--backend", help="switch every agent to this backend (random-search, anthropic, openai, "
                        "claude-code, codex, aider, command, ...)")
    parser.add_argument("--model", help="model name for LLM backends")
    parser.add_argument("--seed", type=int, help="run seed (default: the task's)")


def build_parser(bench_name: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``bench_name`` the bench's own options (its ``add_arguments``) join it."""
    parser = argparse.ArgumentParser(
        prog="rrma-tui",
        description="Research-loop multi-agent harness. Without a command: open the TUI on the runs directory "
        "(or on RUN). Every headless command is listed below; `rrma-tui COMMAND --help` for details.",
    )
    _common(parser, suppress=False)
    parser.add_argument("--reviewer", help="reviewer name for reviews (default: $RRMA_REVIEWER or $USER)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("bench", help="run a named bench to completion (see --list)")
    p.add_argument("name", nargs="?", help="bench name (demo, autoresearch, coq, lean, gsm8k-eval, ...)")
    p.add_argument("--list", action="store_true", help="list the benches")
    p.add_argument("--arms", nargs="+", metavar="'NAME: key=value ...'",
                   help="run an experiment instead of one run: each arm is NAME followed by task overrides "
                   "(e.g. 'history:' 'no-history: loop.history=false loop.lineage=false'); docs/experiments.md")
    p.add_argument("--seeds", type=int, metavar="N", help="experiment: seeds 0..N-1 for every arm (default 5)")
    p.add_argument("--dir", type=Path, default=Path("experiments"), help="experiment: where it is made (./experiments)")
    p.add_argument("--concurrency", type=int, help="experiment: cells at once (default: CPUs / trials per cell)")
    _loop_options(p)
    _common(p, suppress=True)
    if bench_name:
        _bench_arguments(bench_name, p)

    p = sub.add_parser("run", help="start a run from a task YAML")
    p.add_argument("task", type=Path, help="task YAML file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a task field, e.g. --set budget.max_trials=5 (value parsed as YAML)")
    _loop_options(p)
    _common(p, suppress=True)

    p = sub.add_parser("resume", help="continue a run after a crash or a stop")
    p.add_argument("run", type=Path)
    p.add_argument("--agents", type=int, help="agent instances per configured agent")
    _common(p, suppress=True)

    p = sub.add_parser("verify", help="check a run's hash chain, head record, run.json, blobs and derived views")
    p.add_argument("run", type=Path)
    p.add_argument("--expect-head", metavar="HASH",
                   help="fail unless the log's last event has this hash (or a prefix of at least 8 hex digits)")
    p.add_argument("--allowed-signers", type=Path, metavar="FILE",
                   help="ssh-keygen allowed_signers file to check signed reviews against "
                   "(default: $RRMA_ALLOWED_SIGNERS; never a file inside the run directory)")
    _common(p, suppress=True)

    p = sub.add_parser("export", help="export runs to SQLite (idempotent)")
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN")
    p.add_argument("--sqlite", type=Path, required=True, metavar="OUT.db")
    _common(p, suppress=True)

    p = sub.add_parser("ls", help="list runs with their best score")
    _common(p, suppress=True)

    p = sub.add_parser("show", help="print a run's summary and trials")
    p.add_argument("run", type=Path)
    _common(p, suppress=True)

    p = sub.add_parser("check", help="check one proof of one theorem; prints a JSON verdict")
    p.add_argument("prover", choices=["lean", "coq"])
    p.add_argument("file", type=Path, help="a .lean or .v file")
    p.add_argument("--theorem", required=True, help="name of the theorem in FILE")
    p.add_argument("--proof-file", required=True, type=Path, help="file holding the proof body")
    _common(p, suppress=True)

    p = sub.add_parser("review", help="approve, reject or flag a trial, or withdraw its latest review, from the "
                       "command line")
    p.add_argument("run", type=Path)
    p.add_argument("trial")
    p.add_argument("decision", choices=["approve", "reject", "flag", "withdraw"],
                   help="a new review supersedes the trial's latest one; withdraw leaves it unreviewed "
                   "(the old reviews stay in the log)")
    p.add_argument("--note", default="")
    p.add_argument("--reviewer", help="reviewer name (default: $RRMA_REVIEWER or $USER)")
    p.add_argument("--sign-key", type=Path, metavar="KEY",
                   help="sign the review with this SSH key, the reviewer name as principal "
                   "(default: $RRMA_SIGNING_KEY; see docs/foundation.md, Signed reviews)")
    _common(p, suppress=True)

    for name, what in (("stop", "stop a live run: no new trials, running ones finish, it ends as stopped"),
                       ("pause", "pause a live run: no new proposals until `continue`; running trials finish"),
                       ("continue", "lift a pause of a live run (`resume` restarts a run nobody drives)")):
        p = sub.add_parser(name, help=what)
        p.add_argument("run", type=Path)
        p.add_argument("--reason", default="", help="why (recorded with the order)")
        p.add_argument("--by", metavar="NAME", help="who orders it (default: --reviewer, $RRMA_REVIEWER or $USER)")
        _common(p, suppress=True)

    p = sub.add_parser("post", help="post to a run's blackboard as a person (human:NAME)")
    p.add_argument("run", type=Path)
    p.add_argument("text")
    p.add_argument("--trial", help="the trial the post is about")
    p.add_argument("--by", metavar="NAME", help="who posts (default: --reviewer, $RRMA_REVIEWER or $USER)")
    _common(p, suppress=True)

    p = sub.add_parser("steer", help="send a note that agents see in their next context")
    p.add_argument("run", type=Path)
    p.add_argument("text")
    p.add_argument("--agent", action="append", default=[], metavar="NAME",
                   help="the agent it is for (repeat for several; default: every agent)")
    p.add_argument("--by", metavar="NAME", help="who sends it (default: --reviewer, $RRMA_REVIEWER or $USER)")
    _common(p, suppress=True)

    p = sub.add_parser("task-schema", help="print every task YAML field with its type, default and meaning")
    _common(p, suppress=True)

    p = sub.add_parser("experiment", help="arms x seeds: run, resume, show or compare an experiment (docs/experiments.md)")
    exp = p.add_subparsers(dest="exp_command", metavar="ACTION", required=True)
    e = exp.add_parser("run", help="make an experiment from a YAML spec and run every cell")
    e.add_argument("spec", type=Path, help="experiment YAML (task or bench, seeds, set, arms)")
    e.add_argument("--dir", type=Path, default=Path("experiments"), help="where the experiment is made (./experiments)")
    e.add_argument("--id", help="the experiment's id (default: a timestamp and its name)")
    e.add_argument("--concurrency", type=int, help="cells at once (default: the spec's, else CPUs / trials per cell)")
    _common(e, suppress=True)
    e = exp.add_parser("resume", help="continue the cells that did not end (after Ctrl-C, a crash, a failure)")
    e.add_argument("exp_dir", type=Path, metavar="EXP")
    e.add_argument("--concurrency", type=int, help="cells at once")
    _common(e, suppress=True)
    e = exp.add_parser("show", help="per arm: final best with a bootstrap CI, curves, cost; the TUI unless --headless")
    e.add_argument("exp_dir", type=Path, metavar="EXP")
    e.add_argument("--json", action="store_true", help="the whole report as JSON (curves included)")
    _common(e, suppress=True)
    e = exp.add_parser("compare", help="paired tests between arms on their shared seeds")
    e.add_argument("exp_dir", type=Path, metavar="EXP")
    e.add_argument("arms", nargs="*", metavar="ARM", help="two arms (default: every pair)")
    _common(e, suppress=True)
    return parser


# ----------------------------------------------------------------------------- helpers


def resolve_run(path: Path, runs: Path, *, read_log: bool = True, check: bool = True) -> Path:
    """Accept a run directory path or a run id under --runs; RunUnreadable (exit 2) for a damaged one:
    a file of it that is not a regular file or, with ``read_log``, a log line that is not UTF-8.
    Without ``check`` (the TUI, whose reader shows a damaged run and says what is wrong) neither."""
    from rrma.log.store import check_readable

    for candidate in (path, runs / path):
        if (candidate / "events.jsonl").exists():
            if check:
                check_readable(candidate, log=read_log)
            return candidate
    raise CliError(f"{path}: not a run directory (no events.jsonl here or under {runs})")


TRIAL_COMMANDS = {None, "bench", "run", "resume", "check", "experiment"}  # they start trials or proof checks


def check_environment(args: argparse.Namespace) -> None:
    """Refuse, before anything is made, a --runs that is not a directory and (for the commands that
    run trials) a bad RRMA_FS_GUARD, RRMA_TRIAL_NETWORK or RRMA_CGROUPS, which the containment
    functions would only raise once a run directory exists."""
    runs = getattr(args, "runs", None)
    if runs is not None and runs.exists() and not runs.is_dir():
        raise CliError(f"--runs {runs}: not a directory (the directory that holds the run directories)")
    if args.command not in TRIAL_COMMANDS:
        return
    from rrma.contain import cgroups

    for check in (sandbox.mode, sandbox.network, cgroups.mode):
        try:
            check()
        except ValueError as exc:
            raise CliError(f"{exc} (environment)") from None


def _bench_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    folder = BENCH_ROOT / name.replace("-", "_")
    if (folder / "bench.py").exists():
        module = importlib.import_module(f"benches.{folder.name}.bench")
        add = getattr(module, "add_arguments", None)
        if add is not None:
            add(parser)


def bench_dir(name: str) -> Path:
    folder = BENCH_ROOT / name.replace("-", "_")
    if not folder.is_dir() or not ((folder / "bench.py").exists() or (folder / "task.yaml").exists()):
        raise CliError(f"unknown bench {name!r}; known: {', '.join(b for b, _ in list_benches())}")
    return folder


def list_benches() -> list[tuple[str, str]]:
    out = []
    for folder in sorted(BENCH_ROOT.iterdir()):
        if folder.is_dir() and ((folder / "bench.py").exists() or (folder / "task.yaml").exists()):
            desc = (folder / "DESCRIPTION").read_text().strip() if (folder / "DESCRIPTION").exists() else ""
            out.append((folder.name.replace("_", "-"), desc))
    return out


def apply_overrides(task: Any, args: argparse.Namespace) -> Any:
    from rrma.task import task_from_dict

    data = task.model_dump(mode="json")
    if getattr(args, "trials", None) is not None:
        data["budget"]["max_trials"] = args.trials
    if getattr(args, "agents", None) is not None:
        data["loop"]["agents_parallel"] = args.agents
    if getattr(args, "seed", None) is not None:
        data["seed"] = args.seed
    backend = getattr(args, "backend", None)
    model = getattr(args, "model", None)
    if backend or model:
        for agent in data["agents"]:
            if backend:
                agent["backend"] = backend
            if model:
                agent["model"] = model
    return task_from_dict(data, source=str(task.base_dir or "task"), base_dir=task.base_dir)


def make_executor_factory(args: argparse.Namespace) -> Any:
    if getattr(args, "executor", "local") != "ray":
        return None
    try:
        module = importlib.import_module("rrma.exec.ray")
    except ImportError as exc:
        raise CliError(f"--executor ray needs the ray extra: pip install 'rrma[ray]' ({exc})") from exc
    address = getattr(args, "ray_address", None) or os.environ.get("RAY_ADDRESS")
    if address:
        try:
            module.check_reachable(address)
        except module.RayExecutorError as exc:
            raise CliError(str(exc)) from exc

    def factory(oracle: Any, store: Any, task: Any) -> Any:
        try:
            return module.make_ray_executor(task, store, address)
        except module.RayExecutorError as exc:
            raise CliError(str(exc)) from exc

    return factory


class Progress:
    """Prints one line per finished trial (unless quiet) while a headless run goes on."""

    GLYPH = {"ok": "✓", "rejected": "✗", "invalid": "!", "crash": "☠", "timeout": "⏱", "oom": "M", "disk": "D", "aborted": "⏹"}

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()
        self.finished = 0

    def __call__(self, event: Any) -> None:
        if self.quiet:
            return
        kind = event.kind
        data = event.data
        elapsed = time.monotonic() - self.started
        if kind == "trial.finished":
            self.finished += 1
            score = "" if data.score is None else f"{data.score:.6g}"
            ds = "" if data.delta_sigma is None else f" ({data.delta_sigma:+.2f}σ)"
            cached = " [cached]" if data.cached else ""
            feedback = printable(data.feedback).strip()
            first = one_line(feedback.splitlines()[0])[:90] if feedback and data.status != "ok" else ""
            # the feedback is oracle/agent text: one line, literal, never markup, emoji codes or escapes
            console.print(Text.assemble((f"{elapsed:7.1f}s", "dim"), f" {one_line(data.trial_id):>8} "
                                        f"{self.GLYPH.get(data.status, '?')} {one_line(data.status):<8} "
                                        f"{score}{ds}{cached} {first}"),
                          soft_wrap=True)
        elif kind == "trial.promoted" and data.previous_best is not None:
            console.print(Text.assemble((f"{elapsed:7.1f}s", "dim"), " ",
                                        (f"new best {one_line(data.trial_id)}: {data.score:.6g}", "bold green")))
        elif kind == "run.control":  # an order from another process (rrma-tui stop|pause|continue, the TUI)
            why = f" ({one_line(data.reason)})" if data.reason else ""
            console.print(Text.assemble((f"{elapsed:7.1f}s", "dim"), " ",
                                        (f"{one_line(data.action)} by {one_line(data.by)}{why}", "bold yellow")),
                          soft_wrap=True)
        elif kind == "agent.steer":
            to = one_line(", ".join(data.to)) or "every agent"
            text = printable(data.text).strip()
            console.print(Text.assemble((f"{elapsed:7.1f}s", "dim"), f" steer note from {one_line(data.by)} to {to}: ",
                                        one_line(text.splitlines()[0])[:90] if text else ""), soft_wrap=True)
        elif kind == "baseline.measured":
            console.print(f"[dim]{elapsed:7.1f}s[/] baseline {data.mean:.6g} ± {data.sigma:.3g} (σ, n={len(data.scores)})"
                          f"; promotion needs {data.floor:.3g}")
        elif kind == "run.started":
            console.print(plain(f"run {data.run_id} ({data.task_name})"))
            guard = one_line(data.versions.get("fs_guard", ""))
            if guard.startswith("off"):
                console.print(Text(f"trial sandbox {guard}: trial programs can write outside their "
                                   "workspace (docs/foundation.md)", style="yellow"), soft_wrap=True)
            limits = one_line(data.versions.get("limits", ""))
            if limits.startswith("polling"):
                console.print(Text(f"trial limits by {limits}: a process that leaves the group and drops its "
                                   "environment escapes them (docs/foundation.md)", style="yellow"), soft_wrap=True)


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
    table.add_row("delta", f"{fmt(summary.get('delta'))} ({fmt(summary.get('delta_sigma'), '+.2f')} σ)")
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
    table.add_row("wall time", f"{summary.get('wall_seconds', 0):.1f} s")
    for label, key in (("fs guard", "fs_guard"), ("limits", "limits")):
        value = sandbox.recorded(run_dir, key)
        if value:
            table.add_row(label, plain(value))
    head_seq, head_hash = RunStore(run_dir).head()
    table.add_row("head", f"seq {head_seq} {head_hash[:16]}")
    table.add_row("run dir", plain(run_dir))
    console.print(table)


def run_interruptibly(work: Callable[[], Any], name: str, stop: threading.Event, *, stopping: str,
                      quitting: str) -> Any:
    """``work()`` in a thread of its own, with Ctrl-C handling; its result, or its exception re-raised.

    The first Ctrl-C prints ``stopping`` and sets ``stop`` (no new trials; running ones finish); the
    second kills every running trial's process group, shuts down a Ray instance this process
    started, prints ``quitting`` (``{killed}``: how many trials were killed) and exits 130. The run
    logs stay intact either way.
    """
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["r"] = work()
        except BaseException as exc:  # reported in the main thread
            result["e"] = exc

    presses: list[float] = []

    def on_sigint(signum: int, frame: Any) -> None:
        presses.append(time.monotonic())
        if len(presses) == 1:
            err.print(stopping)
            stop.set()
            return
        from rrma.contain.spawn import kill_active_groups

        killed = kill_active_groups()
        ray = sys.modules.get("ray")
        if ray is not None and getattr(ray, "is_initialized", lambda: False)():
            ray.shutdown()  # a local instance this process started must not outlive it
        err.print(quitting.format(killed=killed))
        os._exit(130)

    thread = threading.Thread(target=target, name=name)
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        thread.start()
        while thread.is_alive():
            thread.join(timeout=0.2)
    finally:
        signal.signal(signal.SIGINT, previous)
    if "e" in result:
        raise result["e"]
    return result["r"]


def run_loop_headless(task: Any, args: argparse.Namespace, *, resume_dir: Path | None = None) -> int:
    """Run (or resume) a task headless with Ctrl-C handling; prints progress and the summary."""
    from rrma.run.loop import resume_run, start_run

    stop = threading.Event()
    progress = Progress(bool(getattr(args, "quiet", False)))
    executor = make_executor_factory(args)

    def work() -> Any:
        if resume_dir is not None:
            return resume_run(resume_dir, stop=stop, on_event=progress, executor=executor,
                              agent_count=getattr(args, "agents", None))
        args.runs.mkdir(parents=True, exist_ok=True)
        return start_run(task, args.runs, stop=stop, on_event=progress, executor=executor)

    if resume_dir is None:
        try:  # before the thread: a --runs that cannot be made is bad input, not an error mid-run
            args.runs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliError(f"--runs {args.runs}: cannot make the directory ({exc.strerror or exc})") from None
    res = run_interruptibly(
        work, "research-loop", stop,
        stopping="stopping: no new trials; running trials finish within their budget (Ctrl-C again to quit now)",
        quitting="quitting now: killed {killed} running trial(s); the run log is intact (`rrma-tui resume` continues it)")
    if res.reason.startswith("already_finished"):
        console.print(plain(f"{res.run_dir}: {res.reason.split(':', 1)[1]} already; nothing to resume"))
        return EXIT_OK
    print_summary(res.run_dir, res.state, res.reason)
    if res.reason == "baseline_failed":
        # the note quotes the baseline's output tail: multi-line by design, each line made inert
        err.print(plain_lines(f"the baseline failed: {res.state.notes[-1] if res.state.notes else ''}"))
        return EXIT_FAILED
    if res.reason == "error":
        err.print(plain(f"rrma-tui: the run ended with an error: {getattr(res, 'error', None) or 'see the run notes'}"))
        return EXIT_FAILED
    return EXIT_OK


# ----------------------------------------------------------------------------- commands


def cmd_bench(args: argparse.Namespace) -> int:
    if args.list or not args.name:
        table = Table("bench", "what it is")
        for name, desc in list_benches():
            table.add_row(plain(name), plain(desc))
        console.print(table)
        return EXIT_OK if args.list else EXIT_BAD_INPUT
    folder = bench_dir(args.name)
    if getattr(args, "arms", None) or getattr(args, "seeds", None) is not None:
        return bench_experiment(args, folder)
    if (folder / "bench.py").exists():
        module = importlib.import_module(f"benches.{folder.name}.bench")
        return int(module.run(args))
    from rrma.task import load_task

    task = apply_overrides(load_task(folder / "task.yaml"), args)
    return run_loop_headless(task, args)


# ----------------------------------------------------------------------------- experiments


def bench_experiment(args: argparse.Namespace, folder: Path) -> int:
    """``bench NAME --arms ... --seeds N``: an experiment over the bench's task.yaml."""
    from rrma.run.experiment import (
        ExperimentError,
        new_experiment,
        open_experiment,
        parse_arm,
        spec_from_dict,
    )

    if not (folder / "task.yaml").exists():
        raise CliError(f"bench {args.name} has no task.yaml: --arms/--seeds need a task to override (use "
                       "`rrma-tui experiment run SPEC.yaml` with a task)")
    arms: dict[str, dict[str, Any]] = {}
    for text in args.arms or ["default:"]:
        try:
            name, overrides = parse_arm(text)
        except ExperimentError as exc:
            raise CliError(str(exc)) from exc
        if name in arms:
            raise CliError(f"--arms: arm {name!r} given twice")
        arms[name] = overrides
    common: dict[str, Any] = {}
    if args.trials is not None:
        common["budget.max_trials"] = args.trials
    if args.agents is not None:
        common["loop.agents_parallel"] = args.agents
    data: dict[str, Any] = {"name": f"{args.name}-arms", "bench": args.name, "seeds": args.seeds or 5,
                            "arms": arms, "set": common}
    if args.concurrency is not None:
        data["concurrency"] = args.concurrency
    if args.backend or args.model:
        raise CliError("--backend/--model with --arms: put the agents in an arm's overrides (agents: ...) or a spec file")
    if args.seed is not None:
        raise CliError("--seed with --arms: the experiment's seeds are --seeds N (0..N-1)")
    try:
        spec, task_path = spec_from_dict(data, source=f"bench {args.name} --arms")
        exp = open_experiment(new_experiment(spec, task_path, args.dir))
    except ExperimentError as exc:
        raise CliError(str(exc)) from exc
    return _run_experiment(exp, args)


def _experiment(args: argparse.Namespace) -> Any:
    from rrma.run.experiment import ExperimentError, open_experiment

    try:
        return open_experiment(args.exp_dir)
    except ExperimentError as exc:
        raise CliError(str(exc)) from exc


def cmd_experiment(args: argparse.Namespace) -> int:
    from rrma.run.experiment import ExperimentError, load_spec, new_experiment, open_experiment

    action = args.exp_command
    if action == "run":
        try:
            spec, task_path = load_spec(args.spec)
            exp = open_experiment(new_experiment(spec, task_path, args.dir, exp_id=args.id))
        except ExperimentError as exc:
            raise CliError(str(exc)) from exc
        return _run_experiment(exp, args)
    exp = _experiment(args)
    if action == "resume":
        return _run_experiment(exp, args)
    if action == "show":
        if not getattr(args, "headless", False) and not args.json:
            from tui.app import run_app

            return int(run_app(exp.runs_dir, None, reviewer=args.reviewer, experiment=exp.dir))
        return print_experiment(exp, as_json=args.json)
    if action == "compare":
        if args.arms and (len(args.arms) != 2 or any(a not in exp.spec.arms for a in args.arms)):
            raise CliError(f"compare takes two arms of {', '.join(exp.spec.arms)} (or none: every pair)")
        return print_comparisons(exp, tuple(args.arms) if args.arms else None)
    raise CliError(f"unknown experiment action {action!r}")


def _run_experiment(exp: Any, args: argparse.Namespace) -> int:
    """Run the cells with Ctrl-C handling (first: every cell stops; second: quit now), then the report."""
    from rrma.run.experiment import run_experiment

    stop = threading.Event()
    quiet = bool(getattr(args, "quiet", False))
    executor_name = getattr(args, "executor", "local")
    factory = make_executor_factory(args)
    started_ray: list[bool] = []
    if factory is not None:  # one Ray connection for every cell: no cell's executor may shut it down
        base, lock = factory, threading.Lock()

        def shared(oracle: Any, store: Any, task: Any) -> Any:
            with lock:
                made = base(oracle, store, task)
                if getattr(made, "owns_ray", False):
                    made.owns_ray = False
                    started_ray.append(True)
            return made

        factory = shared
    t0 = time.monotonic()

    def on_cell(cell: Any, what: str) -> None:
        if not quiet or what.startswith("failed"):
            console.print(Text.assemble((f"{time.monotonic() - t0:7.1f}s", "dim"),
                                        f" {one_line(cell.run_id):<24} {one_line(what)}"),
                          soft_wrap=True)

    def work() -> Any:
        return run_experiment(exp, executor=factory, executor_name=executor_name,
                              concurrency=getattr(args, "concurrency", None), stop=stop, on_cell=on_cell)

    console.print(plain(f"experiment {exp.id}: {len(exp.spec.arms)} arm(s) x {len(exp.spec.seed_list())} seed(s), "
                        f"{exp.dir}"))
    try:
        results = run_interruptibly(
            work, "experiment", stop,
            stopping=("stopping every cell: no new trials; running ones finish (Ctrl-C again to quit now; "
                      "`rrma-tui experiment resume` continues)"),
            quitting="quitting now: killed {killed} running trial(s); `rrma-tui experiment resume` continues")
    finally:
        if started_ray:
            import ray

            if ray.is_initialized():
                ray.shutdown()
    failed = [r for r in results if r.reason.startswith("failed") or r.reason in ("error", "baseline_failed")]
    print_experiment(exp)
    if stop.is_set():
        err.print(plain(f"stopped; `rrma-tui experiment resume {exp.dir}` continues the cells that did not end"))
    if failed:
        err.print(plain(f"rrma-tui: {len(failed)} cell(s) failed: "
                        + "; ".join(f"{r.cell.run_id}: {r.reason}" for r in failed[:3])))
        return EXIT_FAILED
    return EXIT_OK


def _fmt_ci(value: Any) -> str:
    if value is None:
        return "-"
    mean, low, high = value
    return f"{mean:.5g} [{low:.5g}, {high:.5g}]"


def print_experiment(exp: Any, *, as_json: bool = False) -> int:
    """The report of an experiment: per arm, then the paired comparisons."""
    import json

    from rrma.run.experiment import report, report_json

    rep = report(exp)
    if as_json:
        print(json.dumps(report_json(rep), indent=1, sort_keys=True))
        return EXIT_OK
    arrow = "lower is better" if rep.direction == "minimize" else "higher is better"
    table = Table(title=plain(f"{exp.id} · {rep.metric} ({arrow}) · final best, mean over seeds [95% bootstrap CI]"),
                  title_justify="left")
    for column in ("arm", "seeds done", "final best", "gain over baseline", "trials", "tokens", "USD", "compute s",
                   "wall s"):
        table.add_column(column)
    for arm in rep.arms:
        done = sum(1 for c in arm.cells if c.status in ("max_trials", "max_wall_time", "target", "agents_exhausted"))
        table.add_row(plain(arm.name), f"{done}/{len(arm.cells)}", _fmt_ci(arm.final), _fmt_ci(arm.improvement),
                      str(arm.trials), str(arm.tokens), f"{arm.cost_usd:.4f}", f"{arm.compute_seconds:.1f}",
                      f"{arm.wall_seconds:.1f}")
    console.print(table)
    curves = Table(title="best so far, mean over seeds, after n trials", title_justify="left")
    longest = max((len(a.mean_curve) for a in rep.arms), default=0)
    marks = sorted({n for n in (1, longest // 4, longest // 2, 3 * longest // 4, longest) if n >= 1})
    curves.add_column("arm")
    for n in marks:
        curves.add_column(f"n={n}")
    for arm in rep.arms:
        points = dict(arm.mean_curve)
        curves.add_row(plain(arm.name), *[f"{points[n]:.5g}" if n in points else "-" for n in marks])
    if marks:
        console.print(curves)
    print_comparisons(exp, None, rep=rep)
    return EXIT_OK


def print_comparisons(exp: Any, pair: tuple[str, str] | None, rep: Any = None) -> int:
    from rrma.run.experiment import compare_arms, report

    rep = rep or report(exp)
    sign = 1.0 if rep.direction == "maximize" else -1.0
    comparisons = rep.comparisons
    if pair is not None:
        a, b = pair
        comparisons = [compare_arms(rep.arm(a).cells, rep.arm(b).cells, sign, a, b)]
    table = Table(title="paired on shared seeds: B minus A, > 0 means B is better (paired bootstrap CI, exact "
                  "sign-flip p)", title_justify="left")
    for column in ("B vs A", "seeds", "mean Δ", "95% CI", "p", "B better / worse"):
        table.add_column(column)
    for c in comparisons:
        ci = "-" if c.ci_low is None else f"[{c.ci_low:+.4g}, {c.ci_high:+.4g}]"
        table.add_row(plain(f"{c.b} vs {c.a}"), str(len(c.seeds)), "-" if c.delta is None else f"{c.delta:+.4g}", ci,
                      "-" if c.p_value is None else f"{c.p_value:.3g}", f"{c.wins} / {c.losses}")
    console.print(table)
    if pair is not None:
        a, b = pair
        per_seed = Table("seed")
        for header in (plain(f"{a} final"), plain(f"{b} final"), "B - A (better > 0)"):
            per_seed.add_column(header)
        finals = {(c.cell.arm, c.cell.seed): c.final_best for arm in (a, b) for c in rep.arm(arm).cells}
        for seed in exp.spec.seed_list():
            fa, fb = finals.get((a, seed)), finals.get((b, seed))
            diff = "-" if fa is None or fb is None else f"{sign * (fb - fa):+.4g}"
            per_seed.add_row(str(seed), "-" if fa is None else f"{fa:.5g}", "-" if fb is None else f"{fb:.5g}", diff)
        console.print(per_seed)
    return EXIT_OK


def set_overrides(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as task overrides (each VALUE read as YAML); CliError names a bad one."""
    import yaml

    from rrma.task import read_yaml

    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--set {item!r}: expected KEY=VALUE")
        try:
            overrides[key] = read_yaml(value)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise CliError(f"--set {item!r}: the value is not valid YAML ({problem})") from None
    return overrides


def cmd_run(args: argparse.Namespace) -> int:

    from rrma.task import load_task

    task = apply_overrides(load_task(args.task, set_overrides(args.set)), args)
    if not args.headless:  # the TUI watches a headless driver of the same command (tui/driver.py)
        from tui.app import run_app

        child = ["run", str(args.task.resolve()), "--headless", "--quiet", "--runs", str(args.runs)]
        for item in args.set:
            child += ["--set", item]
        for flag in ("trials", "agents", "backend", "model", "seed", "executor", "ray_address"):
            value = getattr(args, flag, None)
            if value is not None and not (flag == "executor" and value == "local"):
                child += [f"--{flag.replace('_', '-')}", str(value)]
        return int(run_app(args.runs, None, reviewer=args.reviewer, start_args=child))
    return run_loop_headless(task, args)


def cmd_resume(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args.runs)
    return run_loop_headless(None, args, resume_dir=run_dir)


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

    dirs: list[Path] = []
    for p in args.run_dirs:  # an experiment directory stands for its cells' runs
        if (p / "experiment.json").is_file():
            exp = _experiment(argparse.Namespace(exp_dir=p))
            cells = [exp.run_dir(c) for c in exp.cells if (exp.run_dir(c) / "events.jsonl").exists()]
            for cell in cells:
                check_readable(cell)
            dirs += cells
        else:
            dirs.append(resolve_run(p, args.runs))
    started = time.monotonic()
    try:
        results = export_runs(dirs, args.sqlite)
    except ExportError as exc:
        raise CliError(str(exc)) from exc
    for res in results:
        what = "unchanged, skipped" if res.skipped else f"{res.events} events, {res.trials} trials"
        console.print(plain(f"{res.run_id}: {what}"))
    console.print(plain(f"wrote {args.sqlite} in {time.monotonic() - started:.2f} s"))
    return EXIT_OK


def _load_state(run_dir: Path) -> Any:
    from rrma.log.state import RunState
    from rrma.log.store import RunStore

    return RunState.fold(RunStore(run_dir).scan().events)


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
    console.print(table)
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
    for tid in state.order:
        t = state.trials[tid]
        signed = {True: " ✔signed", False: " (unsigned)", None: ""}[t.review_signed]
        mark = (" ★" if t.review_status == "approved" or t.baseline else " ☆") if tid == state.best_id else (
            " ↑" if t.promoted else "")  # the TUI's marks: best (approved), claim (not approved), former best
        extra = [plain(trial_checks(t))] if checks else []
        table.add_row(plain(tid + mark), plain(t.parent), plain(t.agent), plain(t.status),
                      "" if t.score is None else f"{t.score:.6g}",
                      "" if t.delta_sigma is None else f"{t.delta_sigma:+.2f}", plain(t.review_status + signed), *extra,
                      plain(t.hypothesis[:70]))  # agent text: literal, never markup
    console.print(table)
    return EXIT_OK


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
    try:
        module = importlib.import_module("oracle.check_cli")
    except ImportError as exc:
        raise CliError(f"proof checking is not available: {exc}") from exc
    return int(module.run_check(args.prover, args.file, args.theorem, args.proof_file))


def cmd_review(args: argparse.Namespace) -> int:
    from rrma.log.review import record_review
    from rrma.log.signing import SigningError, default_signing_key
    from rrma.log.store import RunStore

    key = args.sign_key or default_signing_key()
    try:
        event = record_review(RunStore(resolve_run(args.run, args.runs)), args.trial, args.decision, args.reviewer,
                              args.note, sign_key=key)
    except SigningError as exc:
        raise CliError(f"review not recorded: {exc}") from exc
    signed = f", signed with {event.data.key_fingerprint}" if event.data.signature else ""
    replaced = f", superseding seq {event.data.supersedes}" if event.data.supersedes is not None else ""
    console.print(plain(f"review recorded: seq {event.seq}, {args.decision} {args.trial} by {event.data.reviewer}"
                        f"{signed}{replaced}"))
    return EXIT_OK


def _person(args: argparse.Namespace) -> str | None:
    return getattr(args, "by", None) or getattr(args, "reviewer", None)


def cmd_control(args: argparse.Namespace) -> int:
    """``stop``, ``pause``, ``continue``: one run.control order for the live driver (rrma.log.control)."""
    from rrma.log.control import send_control

    sent = send_control(resolve_run(args.run, args.runs), args.command, _person(args), args.reason)
    console.print(plain(sent.message), soft_wrap=True)
    return EXIT_OK


def cmd_post(args: argparse.Namespace) -> int:
    from rrma.log.control import post_to_blackboard

    sent = post_to_blackboard(resolve_run(args.run, args.runs), args.text, _person(args), args.trial)
    console.print(plain(sent.message), soft_wrap=True)
    return EXIT_OK


def cmd_steer(args: argparse.Namespace) -> int:
    from rrma.log.control import send_steer

    sent = send_steer(resolve_run(args.run, args.runs), args.text, _person(args), args.agent)
    console.print(plain(sent.message), soft_wrap=True)
    return EXIT_OK


def cmd_task_schema(args: argparse.Namespace) -> int:
    from rrma.task import schema_table

    table = Table("field", "type", "default", "meaning")
    for row in schema_table():
        table.add_row(*row)
    console.print(table)
    return EXIT_OK


HANDLERS = {
    "bench": cmd_bench, "run": cmd_run, "resume": cmd_resume, "verify": cmd_verify, "export": cmd_export,
    "ls": cmd_ls, "show": cmd_show, "check": cmd_check, "review": cmd_review, "task-schema": cmd_task_schema,
    "stop": cmd_control, "pause": cmd_control, "continue": cmd_control, "post": cmd_post, "steer": cmd_steer,
    "experiment": cmd_experiment,
}


VALUE_OPTIONS = {"--runs", "--executor", "--ray-address", "--reviewer"}


def _positionals(argv: list[str]) -> list[int]:
    """Indices of the words before and at the command that are not options or option values."""
    out = []
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in VALUE_OPTIONS  # `--runs DIR`: DIR is the option's value
            continue
        out.append(i)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    words = _positionals(argv)
    bench_name = argv[words[1]] if len(words) > 1 and argv[words[0]] == "bench" else None
    parser = build_parser(bench_name)
    # `rrma-tui RUN` (a run dir, not a command) opens the TUI on that run
    open_run: Path | None = None
    if words and argv[words[0]] not in COMMANDS and "-h" not in argv and "--help" not in argv:
        open_run = Path(argv.pop(words[0]))
    args = parser.parse_args(argv)
    from rrma.contracts import AgentError, OracleError
    from rrma.log.control import ControlError, RunNotLive
    from rrma.log.review import ReviewError
    from rrma.log.store import LogDamaged, RunLocked, RunNotFound, RunUnreadable
    from rrma.run.experiment import ExperimentError
    from rrma.run.loop import RunFailed, error_line
    from rrma.task import TaskError

    try:
        check_environment(args)
        if args.command is None:
            if args.headless:
                parser.print_help()
                return EXIT_BAD_INPUT
            from tui.app import run_app

            run_dir = resolve_run(open_run, args.runs, check=False) if open_run is not None else None
            return int(run_app(args.runs, run_dir, reviewer=args.reviewer))
        if open_run is not None:
            raise CliError(f"unexpected argument {open_run}")
        return HANDLERS[args.command](args)
    except TaskError as exc:  # one line per problem found in the task file, by design
        err.print(Text("\n".join(one_line(line) for line in f"rrma-tui: {exc}".splitlines())))
        return EXIT_BAD_INPUT
    except (CliError, OracleError, AgentError, RunNotFound, ReviewError, RunLocked, ControlError,
            RunNotLive, ExperimentError, RunUnreadable) as exc:
        err.print(plain(f"rrma-tui: {exc}"))
        return EXIT_BAD_INPUT
    except RunFailed as exc:  # it can quote a trial's output tail: multi-line by design, made inert
        err.print(plain_lines(f"rrma-tui: run failed: {exc}"))
        return EXIT_FAILED
    except LogDamaged as exc:
        err.print(plain(f"rrma-tui: {exc}"))
        return EXIT_FAILED
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug or an environment failure: one line, not a traceback
        if os.environ.get("RRMA_DEBUG"):
            raise
        err.print(plain(f"rrma-tui: unexpected error: {error_line(exc)} (set RRMA_DEBUG=1 for the traceback)"))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

