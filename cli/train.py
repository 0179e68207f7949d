"""``rrma-tui train``: the research agent learns from the loop's rewards (docs/training.md).

The parser lives here; the work is the ``train`` extra's (agents/training/command.py, reached by name
through :func:`rrma.plugins.trainer_command`, so the CLI imports no plug-in and no model library).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.output import CliError
from rrma.train.control import CONTROLS

SELECT = ("valid", "improving", "approved", "all")


def _train_options(p: argparse.ArgumentParser, online: bool) -> None:
    p.add_argument("--model", default="tiny",
                   help="the policy: a Hugging Face model directory, a LoRA adapter directory, or `tiny` (a small "
                        "model built here from the task's texts; default)")
    p.add_argument("--steps", type=int, default=30 if online else 0,
                   help="optimizer steps (default: 30 online; sft: the epochs decide)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 5e-4 online, 1e-3 sft)")
    p.add_argument("--no-lora", action="store_true", help="train every parameter instead of a LoRA adapter")
    p.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default 16)")
    p.add_argument("--save-every", type=int, default=5, help="checkpoint every N steps (default 5)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--run-id", help="the training run's directory name (default: a new id)")
    if online:
        p.add_argument("task", help="a task YAML, or a bench name (benches/NAME/task.yaml)")
        p.add_argument("--group", type=int, default=8, help="rollouts per prompt, G (default 8)")
        p.add_argument("--prompts", type=int, default=2, help="prompts per step (default 2)")
        p.add_argument("--beta", type=float, default=0.04, help="KL coefficient to the reference (default 0.04)")
        p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
        p.add_argument("--max-new-tokens", type=int, default=48, help="longest reply in tokens (default 48)")
        p.add_argument("--control", choices=CONTROLS, default=None,
                       help="shuffled-reward: train on each step's rewards in a random order (recorded in each "
                            "train.step): the control that shows a gain comes from the oracle")
    else:
        p.add_argument("data", nargs="+", type=Path, metavar="RUN", help="runs whose proposals are the rows")
        p.add_argument("--select", choices=SELECT, default="valid",
                       help="rows to train on: valid (scored by the oracle; default), improving (reward > 0), "
                            "approved (by a person), all")
        p.add_argument("--epochs", type=float, default=3.0, help="passes over the rows (default 3)")
        p.add_argument("--batch", type=int, default=8, help="rows per step (default 8)")


def add_train_parser(sub: Any, common: Any) -> None:
    """``train`` and its methods; ``common`` adds the global options (``--runs``...) to each."""
    p = sub.add_parser("train", help="train the research agent on the loop's rewards: sft, grpo, sdpo, resume "
                                     "(the train extra; docs/training.md)")
    methods = p.add_subparsers(dest="train_method", metavar="METHOD")
    _train_options(methods.add_parser("sft", help="supervised fine-tuning on the proposals of runs (rejection "
                                                  "sampling: --select)"), online=False)
    _train_options(methods.add_parser("grpo", help="online GRPO: G rollouts per prompt, scored by the oracle "
                                                   "through the normal loop"), online=True)
    sd = methods.add_parser("sdpo", help="online SDPO: GRPO's rollouts, the policy conditioned on the oracle's "
                                         "feedback as its own teacher")
    _train_options(sd, online=True)
    sd.add_argument("--teacher", choices=["ema", "base"], default="ema", help="the teacher: an EMA of the policy "
                    "(default) or the frozen base")
    sd.add_argument("--success", type=float, default=0.5, help="a rollout with at least this reward is a "
                    "demonstration for its group (default 0.5)")
    r = methods.add_parser("resume", help="continue a killed training session from its last checkpoint")
    r.add_argument("run", type=Path, help="the training run's directory")
    for parser in methods.choices.values():
        common(parser, True)


def cmd_train(args: argparse.Namespace) -> int:
    from rrma.contracts import AgentError
    from rrma.plugins import trainer_command

    if not getattr(args, "train_method", None):
        raise CliError("train: name a method: sft, grpo, sdpo or resume (rrma-tui train --help)")
    try:
        command = trainer_command()
    except AgentError as exc:
        raise CliError(str(exc)) from exc
    return int(command(args))
