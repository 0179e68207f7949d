"""``rrma-tui --headless bench rl``: the loop closes on the CPU: a policy learns from the oracle's rewards.

Three runs under ``--runs``, all with the task of ``benches/rl/task.yaml`` (the demo's bowl; every proposal
builds on the baseline; reward = improvement over the baseline as a fraction of its loss, in [-1, 1]):

1. **source**: the offline random-search agent proposes ``--sft-trials`` edits (the warm-start data);
2. **sft**: the policy is fine-tuned on that run's scored proposals, so it writes edits in the reply format;
3. **grpo** (or ``--method sdpo``): ``--steps`` steps of ``--prompts`` x ``--group`` rollouts from the current
   policy, each a trial of the normal loop (sandboxed, cached, audited, logged), LoRA on the sft policy.

The policy (``--model``) is ``tiny`` (agents/training/tiny.py: built here, no download, trained whole by the
sft step), a model of the model store by name (``smollm2``: SmolLM2-135M-Instruct, LoRA in both steps), or a
model directory. Each kind has its own defaults (:data:`PROFILES`), chosen on the seeds docs/training.md names;
every option overrides its default. ``--control shuffled-reward`` runs the same session with each step's
rewards handed to the trainer in a random order (rrma/train/control.py): its gain must not be above 0.

The summary says where each run is, whether the training run verifies (and, for a control, that every step
was trained on its rewards in the recorded order), and the line ``reward: first step mean A, last step mean B,
gain B-A, 95% CI [lo, hi]`` (a bootstrap over the oracle's rewards of the rollouts of the first and last steps,
each resampled on its own).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.training.command import Request, run_online, run_sft
from agents.training.common import Settings, TrainingError, need_trl
from agents.training.rollouts import RolloutError
from rrma.log.reader import read_state
from rrma.log.verify import verify_run
from rrma.models import CATALOG, ModelStoreError, is_model_name, model_path
from rrma.run.loop import start_run
from rrma.stats import bootstrap_gain_ci
from rrma.task import TaskError, load_task
from rrma.text import SafeConsole
from rrma.train.control import CONTROLS, check_steps

HERE = Path(__file__).resolve().parent
console = SafeConsole(emoji=False, soft_wrap=True)  # paths and the reward line stay whole at any width


@dataclass(frozen=True)
class Profile:
    """The bench's defaults for one kind of policy (each has its option)."""

    sft_trials: int  # random-search proposals of the source run
    sft_steps: int
    sft_lr: float
    sft_batch: int
    sft_lora: bool  # False: every parameter (a model built from scratch)
    steps: int
    prompts: int
    group: int
    lr: float
    beta: float
    temperature: float
    max_new_tokens: int
    lora_r: int
    description: str | None = None  # the task's description in the prompt (None: the task's own)


PROFILES = {
    # a 0.14 M-parameter model built here: trained whole by sft; 30 x 8 x 8 rollouts (docs/training.md)
    "tiny": Profile(sft_trials=48, sft_steps=200, sft_lr=3e-3, sft_batch=16, sft_lora=False, steps=30, prompts=8,
                    group=8, lr=3e-3, beta=0.02, temperature=1.0, max_new_tokens=40, lora_r=16),
    # a pretrained model (SmolLM2-135M-Instruct): LoRA in both steps; sized for 40 minutes on 2 CPU cores
    "pretrained": Profile(sft_trials=48, sft_steps=16, sft_lr=1e-3, sft_batch=8, sft_lora=True, steps=16, prompts=4,
                          group=8, lr=1e-3, beta=0.0, temperature=1.0, max_new_tokens=24, lora_r=16,
                          # a short prompt (about 90 tokens with the state, not 140): each rollout is trained on
                          # its prompt and reply, so the prompt's length is most of a step's cost
                          description="Minimise loss by changing the constants of objective.py."),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # --model and --seed are the bench command's own options (rrma-tui bench --help)
    parser.add_argument("--method", choices=["grpo", "sdpo"], default="grpo", help="the online method (default grpo)")
    parser.add_argument("--control", choices=CONTROLS, default=None,
                        help="shuffled-reward: the same session with each step's rewards permuted before the trainer "
                             "sees them (its gain must not be above 0)")
    parser.add_argument("--steps", type=int, default=None, help="online steps (default: the model's profile)")
    parser.add_argument("--group", type=int, default=None, help="rollouts per prompt, G")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step")
    parser.add_argument("--sft-trials", type=int, default=None,
                        help="random-search proposals to warm-start on (default 48; 0 skips sft)")
    parser.add_argument("--sft-steps", type=int, default=None, help="sft optimizer steps")
    parser.add_argument("--sft-lr", type=float, default=None, help="sft learning rate")
    parser.add_argument("--lr", type=float, default=None, help="online learning rate")
    parser.add_argument("--beta", type=float, default=None, help="KL coefficient")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature of the rollouts")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="longest reply, in tokens")
    parser.add_argument("--lora-r", type=int, default=None, help="LoRA rank")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--task", type=Path, default=None,
                        help="the task to train on (default benches/rl/task.yaml; benches/rl/autoresearch_gpu.yaml "
                             "is a real one for a GPU)")


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False)


def resolve_model(name: str | None) -> tuple[str, str]:
    """(the policy to start from: ``tiny`` or a model directory, its profile) for ``--model``: ``tiny``, a
    model of the store by name (``smollm2``: its verified directory, rrma/models.py), or a model directory."""
    if name is None or name == "tiny":
        return "tiny", "tiny"
    if is_model_name(name):
        try:
            return model_path(name), "pretrained"
        except ModelStoreError as exc:  # not pulled yet, or changed since its pull
            raise TrainingError(str(exc)) from None
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.absolute()), "pretrained"
    raise TrainingError(f"--model {name}: neither tiny, a model of the store ({', '.join(sorted(CATALOG))}) "
                        "nor a model directory")


def settings_of(args: argparse.Namespace, profile: Profile) -> Profile:
    """The profile with each option the command line gave."""
    given = {field: getattr(args, field) for field in ("sft_trials", "sft_steps", "sft_lr", "steps", "prompts",
                                                      "group", "lr", "beta", "temperature", "max_new_tokens",
                                                      "lora_r")
             if getattr(args, field, None) is not None}
    return replace(profile, **given)


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
        model, kind = resolve_model(args.model)
        task = load_task(args.task or HERE / "task.yaml")
    except (TrainingError, TaskError) as exc:
        say(f"bench rl: {exc}")
        return 2
    chosen = settings_of(args, PROFILES[kind])
    if chosen.group < 2 or chosen.steps < 2 or chosen.prompts < 1:
        say(f"bench rl: --steps {chosen.steps}, --prompts {chosen.prompts}, --group {chosen.group}: a gain needs "
            "two steps, a group at least 2 rollouts")
        return 2
    if chosen.description is not None and args.task is None:  # the bench's own task, prompted in fewer tokens
        task = task.model_copy(update={"description": chosen.description})
    runs = Path(args.runs)
    seed = args.seed if args.seed is not None else task.seed
    say(f"bench rl: policy {model} ({kind}); seed {seed}; {chosen}")
    try:
        if chosen.sft_trials > 0:
            source_task = task.model_copy(update={"budget": task.budget.model_copy(
                update={"max_trials": chosen.sft_trials})})
            say(f"bench rl: 1/3 source run: random search, {chosen.sft_trials} proposals")
            source = start_run(source_task, runs, seed=seed)
            if not source.ok:
                say(f"bench rl: the source run ended with {source.reason}: {source.error or ''}")
                return 1
            say(f"bench rl: 2/3 sft on {source.run_dir}")
            sft = Settings(method="sft", steps=chosen.sft_steps, lr=chosen.sft_lr, batch=chosen.sft_batch,
                           lora=chosen.sft_lora, lora_r=chosen.lora_r, lora_alpha=2 * chosen.lora_r,
                           save_every=max(1, chosen.sft_steps // 4), seed=seed, device=args.device)
            sft_dir = run_sft(Request(method="sft", runs_dir=runs, model=model, settings=sft,
                                      data=(source.run_dir,), select="valid"), say)
            sft_state = read_state(sft_dir)
            model = str((sft_dir / sft_state.train_sessions[-1]["finished"]["path"]).absolute())
        say(f"bench rl: 3/3 {args.method}{' (control: ' + args.control + ')' if args.control else ''} from {model}")
        online = Settings(method=args.method, steps=chosen.steps, group=chosen.group, prompts=chosen.prompts,
                          lr=chosen.lr, beta=chosen.beta, temperature=chosen.temperature, lora_r=chosen.lora_r,
                          lora_alpha=2 * chosen.lora_r, save_every=10, seed=seed, device=args.device,
                          max_new_tokens=chosen.max_new_tokens, control=args.control,
                          success=0.0)  # sdpo: a rollout better than the baseline is a demonstration
        run_dir = run_online(Request(method=args.method, runs_dir=runs, model=model, settings=online, task=task), say)
    except (TrainingError, RolloutError) as exc:
        say(f"bench rl: {exc}")
        return 1
    state = read_state(run_dir)
    report = verify_run(run_dir)
    control_errors = check_steps(state.train_steps, args.control, seed)
    line, *_ = reward_line(state.train_steps)
    trials = state.agent_trials()
    scored = sum(1 for t in trials if t.status == "ok")
    say("")
    say(f"run dir      {run_dir}")
    say(f"verified     {'ok' if report.ok else 'FAILED: ' + '; '.join(report.errors[:3])}")
    if args.control:
        checked = sum(1 for s in state.train_steps if s.get("rewards"))
        say(f"control      {args.control}: " + ("FAILED: " + "; ".join(control_errors[:3]) if control_errors else
                                                 f"every one of {checked} steps trained on its oracle rewards in "
                                                 "the recorded order (checked)"))
    elif control_errors:
        say(f"control      FAILED: {'; '.join(control_errors[:3])}")
    say(f"rollouts     {len(trials)} trials, {scored} scored by the oracle, {len(trials) - scored} not")
    say(f"baseline     {state.baseline_mean:.6g}; best {state.best_history[-1][1] if state.best_history else '-'}")
    say(line)
    say(f"wall         {time.monotonic() - started:.0f} s")
    return 0 if report.ok and not control_errors else 1
