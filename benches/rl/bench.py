"""``rrma-tui --headless bench rl``: the loop closes on the CPU: a tiny policy learns from the oracle's rewards.

Three runs under ``--runs``, all with the task of ``benches/rl/task.yaml`` (the demo's bowl; every proposal
builds on the baseline; reward = improvement over the baseline as a fraction of its loss, in [-1, 1]):

1. **source**: the offline random-search agent proposes ``--sft-trials`` edits (the warm-start data);
2. **sft**: a tiny policy (agents/training/tiny.py: built here, no download) is fine-tuned on that run's
   scored proposals, so it writes edits in the reply format;
3. **grpo** (or ``--method sdpo``): ``--steps`` steps of ``--prompts`` x ``--group`` rollouts from the current
   policy, each a trial of the normal loop (sandboxed, cached, audited, logged), LoRA on the sft model.

The summary says where each run is, whether the training run verifies, and the line
``reward: first step mean A, last step mean B, gain B-A, 95% CI [lo, hi]`` (a bootstrap over the rewards of
the proposals of the first and last steps, each resampled on its own). ``--model PATH`` starts from your
model instead of the tiny one (no sft step unless ``--sft-trials`` is given); ``--device cuda`` trains on a GPU.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from agents.training.command import Request, run_online, run_sft
from agents.training.rollouts import RolloutError
from agents.training.trainers import Settings, TrainingError, need_trl
from rrma.log.reader import read_state
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.stats import bootstrap_gain_ci
from rrma.task import TaskError, load_task
from rrma.text import SafeConsole

HERE = Path(__file__).resolve().parent
console = SafeConsole(emoji=False, soft_wrap=True)  # paths and the reward line stay whole at any width


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", choices=["grpo", "sdpo"], default="grpo", help="the online method (default grpo)")
    parser.add_argument("--steps", type=int, default=30, help="online steps (default 30)")
    parser.add_argument("--group", type=int, default=8, help="rollouts per prompt, G (default 8)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step (default 8)")
    parser.add_argument("--sft-trials", type=int, default=None,
                        help="random-search proposals to warm-start on (default 48; 0 skips sft)")
    parser.add_argument("--sft-steps", type=int, default=200, help="sft optimizer steps (default 200)")
    parser.add_argument("--lr", type=float, default=None, help="online learning rate (default 3e-3)")
    parser.add_argument("--beta", type=float, default=0.02, help="KL coefficient (default 0.02)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--task", type=Path, default=None,
                        help="the task to train on (default benches/rl/task.yaml; benches/rl/autoresearch_gpu.yaml "
                             "is a real one for a GPU)")


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


def reward_line(steps: list[dict[str, Any]]) -> tuple[str, float, float, float]:
    """The summary's reward line from the training run's train.step events (the first and last steps)."""
    online = [s for s in steps if s.get("rewards")]
    if len(online) < 2:
        raise TrainingError("fewer than two online steps with rewards: no gain to report")
    by_step: dict[int, dict[str, Any]] = {}
    for step in online:  # after a resume a step may be logged twice: the latest counts
        by_step[step["step"]] = step
    first, last = by_step[min(by_step)], by_step[max(by_step)]
    a, b = first["rewards"], last["rewards"]
    gain, low, high = bootstrap_gain_ci(a, b)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    return (f"reward: first step mean {mean_a:.4f}, last step mean {mean_b:.4f}, gain {gain:+.4f}, "
            f"95% CI [{low:+.4f}, {high:+.4f}]", gain, low, high)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        need_trl()
    except TrainingError as exc:
        say(f"bench rl: {exc}")
        return 2
    try:
        task = load_task(args.task or HERE / "task.yaml")
    except TaskError as exc:
        say(f"bench rl: {exc}")
        return 2
    runs = Path(args.runs)
    seed = args.seed if args.seed is not None else task.seed
    sft_trials = args.sft_trials if args.sft_trials is not None else (0 if args.model else 48)
    model = args.model or "tiny"
    try:
        if sft_trials > 0:
            source_task = task.model_copy(update={"budget": task.budget.model_copy(update={"max_trials": sft_trials})})
            say(f"bench rl: 1/3 source run: random search, {sft_trials} proposals")
            source = start_run(source_task, runs, seed=seed)
            if not source.ok:
                say(f"bench rl: the source run ended with {source.reason}: {source.error or ''}")
                return 1
            say(f"bench rl: 2/3 sft on {source.run_dir}")
            sft = Settings(method="sft", steps=args.sft_steps, lr=3e-3, batch=16, lora=False, save_every=50,
                           seed=seed, device=args.device)
            sft_dir = run_sft(Request(method="sft", runs_dir=runs, model=model, settings=sft,
                                      data=(source.run_dir,), select="valid"), say)
            sft_state = read_state(sft_dir)
            model = str((sft_dir / sft_state.train_sessions[-1]["finished"]["path"]).absolute())
        say(f"bench rl: 3/3 {args.method} from {model}")
        online = Settings(method=args.method, steps=args.steps, group=args.group, prompts=args.prompts,
                          lr=args.lr if args.lr is not None else 3e-3, beta=args.beta, save_every=10, seed=seed,
                          device=args.device, max_new_tokens=40,
                          success=0.0)  # sdpo: a rollout better than the baseline is a demonstration
        run_dir = run_online(Request(method=args.method, runs_dir=runs, model=model, settings=online, task=task), say)
    except (TrainingError, RolloutError) as exc:
        say(f"bench rl: {exc}")
        return 1
    state = read_state(run_dir)
    report = verify_run(run_dir)
    line, *_ = reward_line(state.train_steps)
    trials = state.agent_trials()
    scored = sum(1 for t in trials if t.status == "ok")
    say("")
    say(f"run dir      {run_dir}")
    say(f"verified     {'ok' if report.ok else 'FAILED: ' + '; '.join(report.errors[:3])}")
    say(f"rollouts     {len(trials)} trials, {scored} scored by the oracle, {len(trials) - scored} not")
    say(f"baseline     {state.baseline_mean:.6g}; best {state.best_history[-1][1] if state.best_history else '-'}")
    say(line)
    say(f"wall         {time.monotonic() - started:.0f} s")
    return 0 if report.ok else 1
