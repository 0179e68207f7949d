"""The ``rrma-tui`` argument parser: every command and option, and where the command is in ``argv``.

``rrma-tui bench NAME`` adds the bench's own options (its ``add_arguments``) to the parser, so
``--help`` and bad-option messages name them; ``rrma-tui RUN`` (a word that is not a command)
opens the TUI on that run, so :func:`positionals` tells the words from option values.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.audit import add_audit_parser
from cli.benches import bench_arguments
from cli.models import add_models_parser
from cli.train import add_train_parser

COMMANDS = ("bench", "run", "resume", "verify", "export", "ls", "show", "check", "review", "task-schema",
            "stop", "pause", "continue", "post", "steer", "experiment", "audit", "train", "models")
VALUE_OPTIONS = {"--runs", "--executor", "--ray-address", "--reviewer"}


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
    parser.add_argument("--backend", help="switch every agent to this backend (random-search, anthropic, openai, local, "
                        "claude-code, codex, aider, command, ...)")
    parser.add_argument("--model", help="model name for LLM backends; for local and policy a model of the store by "
                        "name (smollm2: rrma-tui models pull) or a directory")
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
    p.add_argument("--list", action="store_true", help="list the benches (with a bench that has items of its own, e.g. coq: list its theorems)")
    p.add_argument("--arms", nargs="+", metavar="'NAME: key=value ...'",
                   help="run an experiment instead of one run: each arm is NAME followed by task overrides "
                   "(e.g. 'history:' 'no-history: loop.history=false loop.lineage=false'); docs/experiments.md")
    p.add_argument("--seeds", type=int, metavar="N", help="experiment: seeds 0..N-1 for every arm (default 5)")
    p.add_argument("--dir", type=Path, default=Path("experiments"), help="experiment: where it is made (./experiments)")
    p.add_argument("--concurrency", type=int, help="experiment: cells at once (default: CPUs / trials per cell)")
    _loop_options(p)
    _common(p, suppress=True)
    if bench_name:
        bench_arguments(bench_name, p)

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

    p = sub.add_parser("export", help="export runs to SQLite (idempotent), or as a training dataset (--dataset)",
                       description="Export runs to SQLite (--sqlite, idempotent; docs/foundation.md), or their "
                       "agent proposals as a training dataset (--dataset: one row per proposal in TRL's "
                       "conversational format, with its reward; docs/training.md, The dataset). Trials a person "
                       "rejected and trials with an open high audit finding are left out unless asked for.")
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN")
    p.add_argument("--sqlite", type=Path, metavar="OUT.db", help="the SQLite database to write (or update)")
    p.add_argument("--dataset", type=Path, metavar="OUT",
                   help="write a training dataset: OUT.jsonl as JSON lines (datasets.load_dataset('json', "
                   "data_files=OUT)), any other OUT as a Hugging Face dataset directory (datasets.load_from_disk)")
    p.add_argument("--include-rejected", action="store_true",
                   help="--dataset: keep the trials a person rejected (approved is false in their rows)")
    p.add_argument("--include-flagged", action="store_true",
                   help="--dataset: keep the trials with an open high audit finding (see their audit column)")
    _common(p, suppress=True)

    p = sub.add_parser("ls", help="list runs with their best score")
    _common(p, suppress=True)

    p = sub.add_parser("show", help="print a run's summary and trials")
    p.add_argument("run", type=Path)
    _common(p, suppress=True)

    add_audit_parser(sub, _common)
    add_train_parser(sub, _common)
    add_models_parser(sub, _common)

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


def positionals(argv: list[str]) -> list[int]:
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
