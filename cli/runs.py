"""Runs from the command line: start one from a task YAML (``run``), continue one (``resume``), and
drive it headless with a line per finished trial, Ctrl-C handling and the summary at the end.

``rrma-tui run TASK.yaml`` without ``--headless`` shows the TUI, which watches a headless driver
of the same command (tui/driver.py): the command returns a :class:`cli.output.TuiRequest` for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from cli.options import apply_overrides, make_executor_factory, resolve_run, set_overrides
from cli.output import EXIT_FAILED, EXIT_OK, CliError, TuiRequest, console, err, one_line, plain, plain_lines
from cli.reports import print_summary
from rrma.text import printable


class Progress:
    """Prints one line per finished trial (unless quiet) while a headless run goes on.

    Its Δσ is the one every view shows (rrma.log.state.delta_sigma: against the baseline, in units of the
    baseline's σ), from the run.started and baseline.measured it is given (a resumed run's driver hands it the
    log from the start), and the baseline's line says so."""

    GLYPH = {"ok": "✓", "rejected": "✗", "invalid": "!", "crash": "☠", "timeout": "⏱", "oom": "M", "disk": "D", "aborted": "⏹"}

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()
        self.finished = 0
        self.direction = "minimize"
        self.baseline: tuple[float, float] | None = None  # (mean, σ)

    def delta_sigma(self, score: float | None) -> float | None:
        from rrma.log.state import delta_sigma

        return None if self.baseline is None else delta_sigma(score, *self.baseline, self.direction)

    def __call__(self, event: Any) -> None:
        if self.quiet:
            return
        kind = event.kind
        if kind == "run.started":
            self.direction = str(event.data.task.get("metric", {}).get("direction", "minimize"))
        elif kind == "baseline.measured":
            self.baseline = (event.data.mean, event.data.sigma)
        data = event.data
        elapsed = time.monotonic() - self.started
        if kind == "trial.finished":
            self.finished += 1
            score = "" if data.score is None else f"{data.score:.6g}"
            sigmas = self.delta_sigma(data.score) if data.status == "ok" else None
            ds = "" if sigmas is None else f" (Δσ {sigmas:+.2f})"
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
                          f"; promotion needs {data.floor:.3g}", soft_wrap=True)
            console.print(Text.assemble((f"{elapsed:7.1f}s", "dim"), " Δσ: against this baseline, in units of its σ "
                                        "(+ is better)"), soft_wrap=True)
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
            space = one_line(data.versions.get("disk", ""))
            if space.startswith("watched"):
                console.print(Text(f"trial disk budget {space} (docs/foundation.md)", style="yellow"), soft_wrap=True)


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
        from rrma.contain.disk import release_all

        release_all()  # the killed trials' capped workspaces: os._exit below skips atexit
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


def cmd_run(args: argparse.Namespace) -> int | TuiRequest:
    """Start a run of a task YAML: headless here, or (without ``--headless``) in a driver the TUI watches."""
    from rrma.task import load_task

    task = apply_overrides(load_task(args.task, set_overrides(args.set)), args)
    if not args.headless:  # the TUI watches a headless driver of the same command (tui/driver.py)
        child = ["run", str(args.task.resolve()), "--headless", "--quiet", "--runs", str(args.runs)]
        for item in args.set:
            child += ["--set", item]
        for flag in ("trials", "agents", "backend", "model", "seed", "executor", "ray_address"):
            value = getattr(args, flag, None)
            if value is not None and not (flag == "executor" and value == "local"):
                child += [f"--{flag.replace('_', '-')}", str(value)]
        return TuiRequest(args.runs, reviewer=args.reviewer, start_args=tuple(child))
    return run_loop_headless(task, args)


def cmd_resume(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args.runs)
    return run_loop_headless(None, args, resume_dir=run_dir)
