"""The ``rrma-tui`` command line: a thin layer over library functions.

Each command calls one library function and turns its named exceptions into a one-line message
and an exit code (:mod:`cli.output`): 0 done, 1 the run (or check) failed, 2 bad input or a
missing requirement, checked before anything is made (:mod:`cli.options`). The commands live by
job: runs (:mod:`cli.runs`), benches (:mod:`cli.benches`), experiments (:mod:`cli.experiments`),
reading and reporting runs (:mod:`cli.reports`), a person's reviews and orders (:mod:`cli.orders`), the
auditor on demand (:mod:`cli.audit`).

This package never imports the TUI (``tui/`` imports it, never the other way): without a command,
``rrma-tui run`` without ``--headless`` and ``experiment show`` return a :class:`TuiRequest`, which
:func:`main` hands to the ``open_tui`` it was given. The console script (``tui/main.py``) gives the
one that starts the Textual app; ``python -m cli.main`` has none and says so. So a headless command
never loads textual.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rich.text import Text

from cli.audit import cmd_audit
from cli.benches import cmd_bench
from cli.experiments import cmd_experiment
from cli.models import cmd_models
from cli.options import check_environment, resolve_run
from cli.orders import cmd_control, cmd_post, cmd_review, cmd_steer
from cli.output import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    CliError,
    OpenTui,
    TuiRequest,
    err,
    one_line,
    plain,
    plain_lines,
)
from cli.parser import COMMANDS, build_parser, positionals
from cli.reports import cmd_check, cmd_export, cmd_ls, cmd_show, cmd_task_schema, cmd_verify
from cli.runs import cmd_resume, cmd_run
from cli.train import cmd_train

HANDLERS: dict[str, Callable[[argparse.Namespace], int | TuiRequest]] = {
    "bench": cmd_bench, "run": cmd_run, "resume": cmd_resume, "verify": cmd_verify, "export": cmd_export,
    "ls": cmd_ls, "show": cmd_show, "check": cmd_check, "review": cmd_review, "task-schema": cmd_task_schema,
    "stop": cmd_control, "pause": cmd_control, "continue": cmd_control, "post": cmd_post, "steer": cmd_steer,
    "experiment": cmd_experiment, "audit": cmd_audit, "train": cmd_train, "models": cmd_models,
}


def show(request: TuiRequest, open_tui: OpenTui | None) -> int:
    """Open the TUI for ``request``; without an opener (``python -m cli.main``), CliError: add --headless."""
    if open_tui is None:
        raise CliError("this command shows the TUI, which the headless CLI (python -m cli.main) does not load: "
                       "run it as rrma-tui, or add --headless")
    return int(open_tui(request))


def main(argv: list[str] | None = None, open_tui: OpenTui | None = None) -> int:
    """Run one ``rrma-tui`` command; ``open_tui`` shows the TUI for the commands that ask for it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    words = positionals(argv)
    bench_name = argv[words[1]] if len(words) > 1 and argv[words[0]] == "bench" else None
    parser = build_parser(bench_name)
    # `rrma-tui RUN` (a run dir, not a command) opens the TUI on that run
    open_run: Path | None = None
    if words and argv[words[0]] not in COMMANDS and "-h" not in argv and "--help" not in argv:
        open_run = Path(argv.pop(words[0]))
    args = parser.parse_args(argv)
    from rrma.contracts import AgentError, OracleError
    from rrma.errors import error_line
    from rrma.log.control import ControlError, RunNotLive
    from rrma.log.driver_lock import RunLocked
    from rrma.log.review import ReviewError
    from rrma.log.store import LogDamaged, RunNotFound, RunUnreadable
    from rrma.models import ModelStoreError
    from rrma.run.experiment import ExperimentError
    from rrma.run.loop import RunFailed
    from rrma.task import TaskError

    try:
        check_environment(args)
        if args.command is None:
            if args.headless:
                parser.print_help()
                return EXIT_BAD_INPUT
            run_dir = resolve_run(open_run, args.runs, check=False) if open_run is not None else None
            return show(TuiRequest(args.runs, run_dir, reviewer=args.reviewer), open_tui)
        if open_run is not None:
            raise CliError(f"unexpected argument {open_run}")
        result = HANDLERS[args.command](args)
        return show(result, open_tui) if isinstance(result, TuiRequest) else result
    except TaskError as exc:  # one line per problem found in the task file, by design
        err.print(Text("\n".join(one_line(line) for line in f"rrma-tui: {exc}".splitlines())))
        return EXIT_BAD_INPUT
    except (CliError, OracleError, AgentError, RunNotFound, ReviewError, RunLocked, ControlError,
            RunNotLive, ExperimentError, RunUnreadable, ModelStoreError) as exc:
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
