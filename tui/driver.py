"""Runs the TUI starts: each is driven by a headless ``rrma-tui`` process of its own.

Why a process and not a thread of the TUI: a run must be able to outlive the window that started
it (quit and *detach*), a TUI crash must never take a run with it, and the TUI must drive its
own runs the same way it drives one started in another terminal or on a Ray cluster: through
orders in the run log (rrma/log/control.py). So ``n`` (and ``rrma-tui run TASK.yaml`` without
``--headless``) starts ``python -m cli.main --headless ...`` in a new session, its output in
``RUNS/.drivers/<pid>.log``, and the TUI opens the run once the child holds its driver lock
(``RUN/driver.json`` names the child's pid). A child that exits before that (a misconfigured
agent, a missing API key) left its one-line error as the last line of its log.

Nothing here imports textual: the app calls these from its workers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cli.benches import BENCH_ROOT, list_benches
from cli.options import apply_overrides, set_overrides
from cli.output import CliError
from cli.parser import build_parser
from rrma.log.layout import EVENTS

DRIVER_LOGS = ".drivers"  # under the runs directory: one output file per driver process started here
REPO = Path(__file__).resolve().parent.parent


class StartError(ValueError):
    """What was typed to start a run is not a task file or bench with valid options."""


@dataclass
class DriverProcess:
    """A headless driver this TUI started; ``run_dir`` is known once the child holds the run."""

    args: list[str]  # the rrma-tui arguments (after the program name)
    process: subprocess.Popen[bytes]
    log_path: Path
    label: str  # what was asked, for messages ("demo --trials 5", "resume RUN")
    run_dir: Path | None = None
    started: float = field(default_factory=time.monotonic)
    before: set[str] = field(default_factory=set)  # run directories that existed when it started

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def error_line(self) -> str:
        """The last non-empty line of the child's output (its one-line error when it failed), or a fallback."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 8192))
                lines = [line.strip() for line in fh.read().decode("utf-8", "replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        code = self.process.poll()
        if lines:
            return lines[-1]
        return f"the driver exited with code {code} and printed nothing" if code is not None else "no output yet"


def parse_start(text: str, runs_dir: Path, cwd: Path | None = None) -> tuple[list[str], str]:
    """What a person typed to start a run -> (rrma-tui arguments for a headless child, a label).

    ``text`` is a task YAML path or a bench name followed by the options ``rrma-tui run`` /
    ``rrma-tui bench NAME`` take (``--trials 5``, ``--set budget.max_trials=3``, ``--backend ...``).
    The options are checked with the CLI's own parser and a task file is loaded (so a bad file or
    override is refused here, with the CLI's message); the child is told ``--headless --quiet
    --runs RUNS_DIR``. Raises :class:`StartError`.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise StartError(f"cannot read that: {exc}") from None
    if not words:
        raise StartError("type a task YAML path or a bench name (with options: demo --trials 5)")
    if any(w == "--runs" or w.startswith("--runs=") for w in words):
        raise StartError(f"runs started here go under this TUI's runs directory ({runs_dir}); leave out --runs")
    first = words[0]
    path = Path(first).expanduser()
    if not path.is_absolute() and cwd is not None:
        path = cwd / path
    benches = [name for name, _ in list_benches()]
    if path.is_dir():
        raise StartError(f"{first} is a directory: give a task YAML file or a bench name ({', '.join(benches)})")
    if path.is_file():
        args = ["run", str(path), *words[1:]]
        label = " ".join(words)
    elif first in benches or first.replace("_", "-") in benches:
        args = ["bench", first, *words[1:]]
        label = " ".join(words)
    else:
        raise StartError(f"no task file or bench named {first!r}; benches: {', '.join(benches)}")
    args += ["--headless", "--quiet", "--runs", str(runs_dir)]
    parser = build_parser(args[1] if args[0] == "bench" else None)
    parsed = _parse_quietly(parser, args)
    if args[0] == "run":
        _check_task(parsed)
    else:
        folder = BENCH_ROOT / args[1].replace("-", "_")
        if (folder / "task.yaml").exists() and not (folder / "bench.py").exists():
            from rrma.task import TaskError, load_task

            try:
                apply_overrides(load_task(folder / "task.yaml"), parsed)
            except TaskError as exc:
                raise StartError(str(exc)) from None
    return args, label


def _parse_quietly(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    """argparse without its exit: the last line it would print (``error: ...``) becomes a StartError."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            return parser.parse_args(args)
    except SystemExit:
        lines = [line for line in captured.getvalue().splitlines() if line.strip()]
        message = lines[-1].split("error: ", 1)[-1] if lines else "not valid options"
        raise StartError(f"{' '.join(args[:2])}: {message}") from None


def _check_task(parsed: argparse.Namespace) -> None:
    from rrma.task import TaskError, load_task

    try:
        apply_overrides(load_task(parsed.task, set_overrides(getattr(parsed, "set", []) or [])), parsed)
    except (CliError, TaskError) as exc:
        raise StartError(str(exc)) from None
    except OSError as exc:
        raise StartError(f"{parsed.task}: {exc.strerror or exc}") from None


def launch(args: list[str], runs_dir: Path, label: str, *, cwd: Path | None = None) -> DriverProcess:
    """Start ``python -m cli.main ARGS`` in a session of its own (it outlives the TUI; Ctrl-C in the TUI's
    terminal does not reach it), its output in ``RUNS/.drivers/<pid>.log``."""
    logs = Path(runs_dir) / DRIVER_LOGS
    logs.mkdir(parents=True, exist_ok=True)
    before = _run_names(Path(runs_dir))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    pending = logs / f"starting-{os.getpid()}-{time.monotonic_ns()}.log"
    with open(pending, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=cwd, env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    log_path = logs / f"{process.pid}.log"
    try:
        os.replace(pending, log_path)  # the child keeps writing to the same file under its new name
    except OSError:
        log_path = pending
    return DriverProcess(args, process, log_path, label, before=before)


def _run_names(runs_dir: Path) -> set[str]:
    try:
        return {e.name for e in os.scandir(runs_dir) if e.is_dir() and Path(e.path, EVENTS).exists()}
    except OSError:
        return set()


def launch_resume(run_dir: Path, runs_dir: Path) -> DriverProcess:
    """Resume ``run_dir`` in a headless child (``rrma-tui resume RUN --quiet``)."""
    proc = launch(["resume", str(run_dir), "--quiet"], runs_dir, f"resume {run_dir.name}")
    proc.run_dir = run_dir
    return proc


def run_of(runs_dir: Path, pid: int, host: str | None = None) -> Path | None:
    """The run under ``runs_dir`` whose driver.json names process ``pid`` on this host, if any."""
    host = host or socket.gethostname()
    try:
        entries = list(os.scandir(runs_dir))
    except OSError:
        return None
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        try:
            info = json.loads(Path(entry.path, "driver.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and info.get("pid") == pid and info.get("host") == host \
                and Path(entry.path, EVENTS).exists():
            return Path(entry.path)
    return None


def wait_for_run(proc: DriverProcess, runs_dir: Path, cancelled: Callable[[], bool] = lambda: False,
                 timeout: float = 600.0, interval: float = 0.05) -> Path | None:
    """Wait until the child holds a run (its directory) or exits first (None); ``cancelled`` ends the wait."""
    if proc.run_dir is not None:
        return proc.run_dir
    deadline = time.monotonic() + timeout
    while not cancelled() and time.monotonic() < deadline:
        exited = not proc.alive()
        found = run_of(runs_dir, proc.pid)
        if found is not None:
            proc.run_dir = found
            return found
        if exited:
            # a run over before its driver.json was seen (the driver removes it when it ends): the one
            # run directory that appeared while it ran, if exactly one did
            new = sorted(_run_names(runs_dir) - proc.before)
            if len(new) == 1 and proc.process.returncode in (0, 1):
                proc.run_dir = runs_dir / new[0]
                return proc.run_dir
            return None
        time.sleep(interval)
    return None


def wait_for_exit(proc: DriverProcess, cancelled: Callable[[], bool], interval: float = 0.2) -> bool:
    """Wait until the child exits (True) or ``cancelled`` says stop waiting (False; the child goes on).

    A poll, not ``Popen.wait()``: the TUI waits in a worker thread, and a thread blocked in ``wait()``
    would hold the TUI's process open after it quits (the interpreter joins its worker threads at exit),
    which is what "detach" must not do: the driver is a process of its own, in a session of its own.
    """
    while proc.process.poll() is None:
        if cancelled():
            return False
        time.sleep(interval)
    return True
