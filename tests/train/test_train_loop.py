"""Training end to end (issue 23): GRPO and SDPO through the loop, resume after kill -9, the trained adapter as an agent.

Everything is real: research runs of the rl bench's task (the demo's bowl) whose rollouts are ordinary trials
(proposed by the bridge agents, sandboxed, scored by the oracle, logged), TRL's own GRPO and SDPO trainers on
the CPU, ``rrma-tui`` in subprocesses (``bench rl``; ``train grpo`` killed with SIGKILL) and in-process (``train
sft``, ``train resume`` and the bad-input lines, through ``cli.main.main``).

An untrained tiny model writes unparseable replies (every reward the same: no advantage, no update), so the
policy here is a tiny model (agents/training/tiny.py) fine-tuned for a few dozen full-model steps on the rl
prompt answered four ways (``X = 1.5``, ``X = -2.0``, ``Y = 0.5``, ``DEPTH = 3``): it samples a mix of valid,
different edits, whose oracle scores, and so rewards, differ within a group.

The two subprocesses (``bench rl`` and the ``train grpo`` to be killed) start when the module does and run
beside the in-process tests (each pays ~10 s importing torch and TRL; this machine has two cores). A thread
kills the trainer's process group in the step after its first checkpoint, once a rollout of that step is
proposed: the resumed session re-does that step, and the rollouts the crash cut short still count against the
run's budget (a task whose budget is smaller than the session's rollouts, as the demo's is for the defaults).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("trl")
pytest.importorskip("datasets")

from agents.training import online  # noqa: E402
from agents.training.command import Request, run_online  # noqa: E402
from agents.training.common import Settings, last_checkpoint, load_policy  # noqa: E402
from agents.training.tiny import build_tiny  # noqa: E402
from cli.main import main  # noqa: E402
from rrma.log.artifacts import ArtifactError  # noqa: E402
from rrma.log.reader import read_state  # noqa: E402
from rrma.log.state import RunState  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.log.verify import verify_run  # noqa: E402
from rrma.run.loop import start_run  # noqa: E402
from rrma.task import TaskConfig, load_task  # noqa: E402
from rrma.train.control import SHUFFLED_REWARD, check_steps, shuffle_order  # noqa: E402
from rrma.train.prompt import ReplyError, messages, parse_reply  # noqa: E402
from rrma.train.reward import RewardInputs, reward  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RL = REPO / "benches" / "rl" / "task.yaml"
DEMO = REPO / "benches" / "demo" / "task.yaml"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
# the reward the tests expect (set here, not read from the bench's YAML): the improvement over the baseline as a
# fraction of it, clipped to [-1, 1]; a reply that is not an edit, or a crash, -1; a repeat scored like any other
REWARD = {"reward.reference": "baseline", "reward.scale": "relative", "reward.clip": 1.0, "reward.invalid": -1.0,
          "reward.crash": -1.0, "reward.duplicate": None, "reward.novelty": 0.0, "reward.efficiency": 0.0,
          "reward.memory": 0.0}
ANSWERS = ["X = 1.5", "X = -2.0", "Y = 0.5", "DEPTH = 3"]
SMALL = {"vocab_size": 400, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
         "num_attention_heads": 2}
ONLINE: dict[str, Any] = {"steps": 2, "group": 4, "prompts": 1, "max_new_tokens": 24, "save_every": 1, "lr": 5e-4}
BENCH_ARGS = ["--steps", "2", "--group", "2", "--prompts", "1", "--sft-trials", "4", "--sft-steps", "2"]
KILLED_STEPS = 3  # a step after the one the kill cuts short: time for the watcher to see it
KILLED_ARGS = ["--model", "tiny", "--steps", str(KILLED_STEPS), "--group", "2", "--prompts", "1", "--save-every", "1",
               "--max-new-tokens", "8"]
REWARD_LINE = re.compile(r"^reward: first step mean (-?[\d.]+), last step mean (-?[\d.]+), gain ([+-][\d.]+), "
                         r"95% CI \[([+-][\d.]+), ([+-][\d.]+)\]$", re.MULTILINE)


def rl_task() -> TaskConfig:
    return load_task(RL, REWARD)


def workspace_files(task: TaskConfig) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(task.workspace_dir().iterdir()) if p.is_file()}


# ----------------------------------------------------------------------------- the processes beside the tests


class KillMidStep(threading.Thread):
    """Watches a trainer's run log; kills its process group (SIGKILL) in the step after its first checkpoint,
    once a rollout of that step is proposed (a crash that wastes rollouts, as a real one does)."""

    def __init__(self, proc: subprocess.Popen[bytes], events: Path, timeout: float = 240.0) -> None:
        super().__init__(name="kill-mid-step", daemon=True)
        self.proc, self.events, self.timeout = proc, events, timeout
        self.killed = False

    def due(self) -> bool:
        try:
            lines = self.events.read_text().splitlines()
        except OSError:
            return False
        checkpoint = False
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:  # a line being written
                continue
            if event["kind"] == "train.checkpoint" and event["data"].get("kind") == "checkpoint":
                checkpoint = True
            elif checkpoint and event["kind"] == "trial.proposed" and not event["data"].get("baseline"):
                return True
        return False

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self.due():
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.killed = True
                break
            time.sleep(0.02)
        self.proc.wait()


def spawn(args: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """``rrma-tui ARGS`` (the console script's entry point) in its own process group, its output to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tui.main", *args], cwd=cwd, env=ENV, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture(scope="module", autouse=True)
def beside(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Start the subprocesses of the selected tests that need them, so that they run beside the others."""
    selected = {item.name for item in request.session.items if getattr(item, "module", None) is request.module}
    found: dict[str, Any] = {}
    procs: list[subprocess.Popen[bytes]] = []
    if "test_bench_rl_end_to_end" in selected:
        where = tmp_path_factory.mktemp("bench")
        proc = spawn(["--headless", "--runs", str(where / "runs"), "bench", "rl", *BENCH_ARGS], where, where / "out")
        procs.append(proc)
        found["bench"] = (proc, where / "out", time.monotonic())
    if "test_the_trainer_resumes_after_kill_9" in selected:
        where = tmp_path_factory.mktemp("killed")
        runs = where / "runs"
        # the rl task with a budget of 1 trial: the session sizes it (as for any task whose budget is smaller)
        text = RL.read_text()
        assert "source: ../demo/workspace" in text and re.search(r"max_trials: \d+", text)
        text = text.replace("source: ../demo/workspace", f"source: {REPO / 'benches' / 'demo' / 'workspace'}")
        text = re.sub(r"max_trials: \d+", "max_trials: 1", text)
        (where / "task.yaml").write_text(text)
        proc = spawn(["--headless", "train", "grpo", str(where / "task.yaml"), *KILLED_ARGS, "--runs", str(runs),
                      "--run-id", "killed"], where, where / "out")
        procs.append(proc)
        watcher = KillMidStep(proc, runs / "killed" / "events.jsonl")
        watcher.start()
        found["killed"] = (watcher, runs, where / "out")
    yield found
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ----------------------------------------------------------------------------- the policy


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, torch_one_thread: None) -> Path:
    """A tiny model that answers the rl prompt with one of ANSWERS (about evenly), a full-model fine-tune."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    task = rl_task()
    files, editable = workspace_files(task), list(task.workspace.editable)
    prompt = messages(task, files, 7.42, editable)  # the baseline's loss is 7.42 or so (its noise is ~0.015)
    out = build_tiny([m["content"] for m in prompt] + ANSWERS, tmp_path_factory.mktemp("policy") / "tiny", seed=0,
                     **SMALL)
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    rows = [(prompt_ids + ids, [-100] * len(prompt_ids) + ids)
            for ids in (tokenizer(a + "<|end|>", add_special_tokens=False)["input_ids"] for a in ANSWERS)]
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in rows])
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-2)
    torch.manual_seed(0)
    model.train()
    for _ in range(60):  # a mixture of four answers: the loss floor is about log(4) / the answer's tokens
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert loss.item() < 0.8, loss.item()
    model.save_pretrained(out)
    return out


def train(method: str, policy: Path, runs: Path) -> tuple[Path, list[str]]:
    lines: list[str] = []
    settings = Settings(method=method, **ONLINE)
    run_dir = run_online(Request(method=method, runs_dir=runs, model=str(policy), settings=settings, task=rl_task()),
                         lines.append)
    return run_dir, lines


@pytest.fixture(scope="module")
def grpo_run(policy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train("grpo", policy, tmp_path_factory.mktemp("grpo") / "runs")[0]


# ----------------------------------------------------------------------------- what every online session must show


def adapter_weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def check_online_session(run_dir: Path, method: str, policy: Path) -> tuple[RunState, list[dict[str, Any]]]:
    """The session's steps, metrics, rollouts (ordinary trials of the run) and artifacts; its steps."""
    assert verify_run(run_dir).ok, verify_run(run_dir).errors
    state = read_state(run_dir)
    task = rl_task()
    files, editable = workspace_files(task), list(task.workspace.editable)
    (session,) = state.train_sessions
    assert session["method"] == method and session["base_model"] == str(policy) and session["resumed_from"] is None
    assert session["finished"]["reason"] == "done" and session["finished"]["steps"] == ONLINE["steps"]
    steps = state.train_steps
    assert [s["step"] for s in steps] == list(range(1, ONLINE["steps"] + 1))

    # every rollout is a trial of this run: proposed by a bridge agent, with the policy's reply turn, scored
    run_json = json.loads((run_dir / "run.json").read_text())
    bridges = {a["name"] for a in run_json["agents"] if a["backend"] == "trainer-rollouts"}
    assert len(bridges) == task.budget.max_concurrent
    turns: dict[str, list[dict[str, Any]]] = {}
    for event in RunStore(run_dir).scan().events:
        if event.kind == "agent.turn" and event.data.trial_id is not None:
            turns.setdefault(event.data.trial_id, []).append(event.data.model_dump())
    rollouts = [t for s in steps for t in s["trials"]]
    assert sorted(rollouts) == sorted(t.trial_id for t in state.agent_trials())  # each once, and nothing else
    for step in steps:
        assert len(step["trials"]) == len(step["rewards"]) == ONLINE["group"] * ONLINE["prompts"]
        for trial_id, given in zip(step["trials"], step["rewards"], strict=True):
            rec = state.trials[trial_id]
            assert rec.agent in bridges and rec.finished and rec.parent == state.baseline_ids[0]
            (turn,) = turns[trial_id]
            assert turn["role"] == "assistant" and turn["agent"] == rec.agent
            assert turn["args"]["format"] == "rrma-policy/1" and turn["args"]["messages"][0]["role"] == "system"
            assert len(turn["args"]["completion_ids"]) == turn["tokens_out"] <= ONLINE["max_new_tokens"]
            try:
                _, hypothesis = parse_reply(task, turn["text"], files, editable)
            except ReplyError as exc:
                assert rec.status == "invalid" and rec.hypothesis == f"unparseable reply: {exc}"
            else:
                assert rec.hypothesis == hypothesis and rec.status == "ok" and rec.score is not None
                assert rec.cached or rec.feedback.startswith("loss: ")  # the oracle's own line
            # the logged reward is the task's reward of the outcome the loop recorded
            expected = reward(RewardInputs(status=rec.status, score=rec.score, parent_score=state.baseline_mean,
                                           baseline=state.baseline_mean, sigma=state.sigma, floor=state.floor,
                                           cached=rec.cached, seconds=rec.seconds), task.reward,
                              direction="minimize").value
            assert given == pytest.approx(expected, abs=1e-5), (trial_id, rec.status, rec.score)

    # the metrics are finite numbers
    for step in steps:
        assert step["nonfinite"] == []
        for key in ("loss", "grad_norm", "lr", "reward_mean", "reward_std", "zero_variance_frac", "novelty_rate",
                    "seconds"):
            assert isinstance(step[key], float | int) and math.isfinite(step[key]), (key, step[key])
        assert all(v is None or math.isfinite(v) for v in step["extra"].values())
        assert step["reward_mean"] == pytest.approx(statistics.fmean(step["rewards"]), abs=1e-5)
        assert step["reward_std"] == pytest.approx(statistics.stdev(step["rewards"]), abs=1e-5)
    # the rewards of a group differ (or nothing would be learnt): the policy's replies are varied edits
    assert any(s["zero_variance_frac"] == 0.0 for s in steps), [s["rewards"] for s in steps]

    # a checkpoint per step and the final adapter, content-addressed artifacts of the run, on the policy
    marks = state.train_checkpoints
    assert [(m["step"], m["kind"]) for m in marks] == [(1, "checkpoint"), (2, "checkpoint"), (2, "adapter")]
    assert session["finished"]["artifact"] == marks[-1]["artifact"]
    assert last_checkpoint(run_dir, marks) == run_dir / marks[1]["path"]
    final = run_dir / marks[-1]["path"]
    assert json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"] == str(policy)
    # the parameters changed: LoRA's B starts at zero; after step 1 it is not, and step 2 changed it again
    first, last = adapter_weights(run_dir / marks[0]["path"]), adapter_weights(final)
    assert set(first) == set(last) and any(k.endswith("lora_B.weight") for k in last)
    assert any(last[k].abs().max() > 0 for k in last if k.endswith("lora_B.weight"))
    assert any(not torch.equal(first[k], last[k]) for k in last)
    return state, steps


# ----------------------------------------------------------------------------- 1. GRPO, 2. SDPO


def test_grpo_steps_train_the_policy_on_the_oracles_rewards(grpo_run: Path, policy: Path) -> None:
    state, steps = check_online_session(grpo_run, "grpo", policy)
    for step in steps:
        for key in ("kl", "entropy"):
            assert isinstance(step[key], float) and math.isfinite(step[key]), (key, step[key])
        assert step["tokens"] > 0
    assert steps[0]["kl"] == 0.0  # the adapter starts as the identity: the policy is the reference
    assert state.finish_reason == "agents_exhausted"  # the bridge agents stop when the trainer is done


def test_sdpo_steps_distil_the_oracles_feedback(policy: Path, tmp_path: Path) -> None:
    run_dir, lines = train("sdpo", policy, tmp_path / "runs")
    state, steps = check_online_session(run_dir, "sdpo", policy)
    assert [line.split(":")[0] for line in lines if line.startswith("sdpo step")] == ["sdpo step 1", "sdpo step 2"]
    for step in steps:
        extra = step["extra"]
        # the teacher was prompted with each rollout's oracle feedback (TRL counts the rollouts that had one)
        with_feedback = sum(1 for t in step["trials"] if state.trials[t].feedback) / len(step["trials"])
        assert with_feedback > 0
        assert extra["self_distillation/feedback_available_fraction"] == pytest.approx(with_feedback)
        assert extra["self_distillation/feedback_used_fraction"] == pytest.approx(with_feedback)
        assert extra["self_distillation/reprompt_sample_fraction"] > 0
        assert math.isfinite(extra["self_distillation/distillation_loss"])


# ----------------------------------------------------------------------------- the shuffled-reward control


def test_the_shuffled_reward_control_trains_on_each_steps_rewards_permuted(
        policy: Path, grpo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``control: shuffled-reward``: the trainer is handed each step's oracle rewards in the order drawn from the
    seed and the step (what the reward function returns to TRL, seen by a spy), and the log records it."""
    given: list[list[float]] = []
    honest = online.Scorer.__call__

    def spy(self: Any, *args: Any, **kwargs: Any) -> list[float]:
        values = honest(self, *args, **kwargs)
        given.append(list(values))
        return values

    monkeypatch.setattr(online.Scorer, "__call__", spy)
    settings = Settings(method="grpo", **{**ONLINE, "save_every": 10}, seed=3, control=SHUFFLED_REWARD)
    run_dir = run_online(Request(method="grpo", runs_dir=tmp_path / "runs", model=str(policy), settings=settings,
                                 task=rl_task()), lambda _: None)
    assert verify_run(run_dir).ok
    state = read_state(run_dir)
    assert state.train_sessions[0]["config"]["settings"]["control"] == SHUFFLED_REWARD
    steps = state.train_steps
    assert [s["step"] for s in steps] == [1, 2] and len(given) == 2
    assert check_steps(steps, SHUFFLED_REWARD, 3) == []
    for step, trained in zip(steps, given, strict=True):
        order = shuffle_order(len(step["rewards"]), 3, step["step"])
        assert order != sorted(order)  # seed 3 shuffles both steps
        assert step["control"]["order"] == order
        assert trained == pytest.approx([step["rewards"][j] for j in order], abs=1e-6)
        assert trained == pytest.approx(step["control"]["rewards_trained"], abs=1e-6)
    # the rewards of a rollout and the one it was trained on differ somewhere (or the control would be no control)
    assert any(t != pytest.approx(s["rewards"], abs=1e-6) for s, t in zip(steps, given, strict=True))
    # a session without the control trains on the rewards in the rollouts' order, and records no control
    plain = read_state(grpo_run).train_steps
    assert check_steps(plain, None, 0) == [] and all("control" not in s for s in plain)


# ----------------------------------------------------------------------------- 4. the adapter in the next run


@pytest.fixture(scope="module")
def adapter_run(grpo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo run whose one agent is the grpo session's final adapter (its train.finished artifact)."""
    finished = read_state(grpo_run).train_sessions[-1]["finished"]
    adapter = grpo_run / finished["path"]
    agents = [{"name": "trained", "backend": "policy", "model": str(adapter), "params": {"max_new_tokens": 24}}]
    task = load_task(DEMO, {"budget.max_trials": 4, "budget.trial_seconds": 10, "agents": agents})
    result = start_run(task, tmp_path_factory.mktemp("adapter") / "runs")
    assert result.ok, result.error
    return result.run_dir


def test_the_trained_adapter_proposes_in_a_following_run(adapter_run: Path, grpo_run: Path, policy: Path) -> None:
    assert verify_run(adapter_run).ok
    state = read_state(adapter_run)
    finished = read_state(grpo_run).train_sessions[-1]["finished"]
    (agent,) = json.loads((adapter_run / "run.json").read_text())["agents"]
    assert agent["kind"] == "adapter" and agent["base_model"] == str(policy)
    trials = state.agent_trials()
    assert len(trials) == 4 and {t.agent for t in trials} == {"trained"}
    turns: dict[str, list[dict[str, Any]]] = {}
    for event in RunStore(adapter_run).scan().events:
        if event.kind == "agent.turn" and event.data.trial_id is not None:
            turns.setdefault(event.data.trial_id, []).append(event.data.model_dump())
    task = load_task(DEMO)
    store = RunStore(adapter_run)
    scored = 0
    for trial in trials:  # each trial is the adapter's reply, recorded as generated
        (turn,) = turns[trial.trial_id]
        assert turn["agent"] == "trained" and turn["args"]["format"] == "rrma-policy/1"
        assert turn["model"].endswith(finished["artifact"])
        assert trial.parent is not None
        parent = state.trials[trial.parent]  # keep-revert: the best so far
        assert parent.manifest_blob is not None
        files = store.manifest_files(parent.manifest_blob)
        try:
            _, hypothesis = parse_reply(task, turn["text"], files, list(task.workspace.editable))
        except ReplyError:
            assert trial.status == "invalid"
        else:
            assert trial.hypothesis == hypothesis and trial.status == "ok"
            scored += 1
    assert scored > 0  # the trained policy writes edits the oracle scores


# ----------------------------------------------------------------------------- a changed checkpoint is caught


def test_a_changed_checkpoint_artifact_is_refused(grpo_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(grpo_run, run_dir)
    marks = read_state(run_dir).train_checkpoints
    found = last_checkpoint(run_dir, marks)
    assert found is not None and found == run_dir / marks[1]["path"]
    with (found / "adapter_model.safetensors").open("r+b") as fh:  # one byte of the weights, in place
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    with pytest.raises(ArtifactError, match=r"does not match its digest \(changed: adapter_model.safetensors\)"):
        last_checkpoint(run_dir, marks)
    shutil.rmtree(found)
    with pytest.raises(ArtifactError, match="is missing"):
        last_checkpoint(run_dir, marks)
    assert last_checkpoint(run_dir, [m for m in marks if m["kind"] != "checkpoint"]) is None


# ----------------------------------------------------------------------------- 6. train sft, and bad input


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--headless", *args])
    out = capsys.readouterr()
    return code, (out.out + out.err).strip()


def test_train_sft_on_a_demo_run_and_bad_input(adapter_run: Path, grpo_run: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    code, out = cli(capsys, "train", "sft", str(adapter_run), "--runs", str(runs), "--run-id", "sft", "--steps", "2",
                    "--batch", "4", "--lora-r", "4")
    assert code == 0, out
    run_dir = runs / "sft"
    assert verify_run(run_dir).ok
    state = read_state(run_dir)
    (session,) = state.train_sessions
    assert session["method"] == "sft" and session["dataset"]["runs"] == [str(adapter_run)]
    assert session["dataset"]["rows"] == sum(1 for t in read_state(adapter_run).agent_trials() if t.status == "ok")
    assert [s["step"] for s in state.train_steps] == [1, 2]
    for step in state.train_steps:
        assert step["nonfinite"] == [] and math.isfinite(step["loss"]) and math.isfinite(step["grad_norm"])
    finished = session["finished"]
    assert finished["reason"] == "done" and finished["steps"] == 2
    assert state.train_checkpoints[0]["kind"] == "model"  # the tiny model built here from the rows' texts
    model, tokenizer = load_policy(run_dir / finished["path"])
    # a tiny model built from scratch is trained whole (a LoRA adapter on a random model, never on lm_head,
    # cannot make any token likely), so the session says so and its final artifact is a model, not an adapter
    assert "every parameter is trained (no LoRA)" in out and session["config"]["settings"]["lora"] is False
    assert not hasattr(model, "peft_config") and state.train_checkpoints[-1]["kind"] == "model"
    ids = tokenizer("X = 1.5", return_tensors="pt")["input_ids"]
    assert torch.isfinite(model(input_ids=ids).logits).all()

    # bad input: exit 2 and one line that says what is wrong
    finished_run = str(grpo_run)
    for args, words in [
        (["train", "sft", str(tmp_path / "nowhere"), "--runs", str(runs)], ["not a run directory", "nowhere"]),
        (["train", "grpo", str(RL), "--group", "1", "--runs", str(runs)], ["--group 1", "at least 2"]),
        (["train", "resume", str(adapter_run), "--runs", str(runs)], ["no training session"]),
        (["train", "resume", finished_run, "--runs", str(runs)], ["finished (2 steps)", "nothing to resume"]),
        (["train", "resume", str(tmp_path / "nowhere"), "--runs", str(runs)], ["nowhere"]),
    ]:
        code, out = cli(capsys, *args)
        assert code == 2 and "\n" not in out and out.startswith("rrma-tui"), (args, code, out)
        for word in words:
            assert word in out, (args, out)
    assert sorted(p.name for p in runs.iterdir()) == ["sft"]  # nothing made by the bad commands


def test_bench_rl_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RRMA_MODELS", str(tmp_path / "empty-store"))  # a store with nothing pulled
    runs = tmp_path / "runs"
    for args, words in [
        (["--model", str(tmp_path / "nowhere")], ["--model", "nowhere", "neither tiny", "smollm2"]),
        (["--model", "smollm2"], ["smollm2 is not in the model store", "models pull smollm2"]),
        (["--steps", "1"], ["--steps 1", "two steps"]),
        (["--group", "1"], ["--group 1", "at least 2"]),
    ]:
        code, out = cli(capsys, "--runs", str(runs), "bench", "rl", *args)
        assert code == 2 and "\n" not in out and out.startswith("bench rl: "), (args, code, out)
        for word in words:
            assert word in out, (args, out)
    assert not runs.exists()  # nothing started


# ----------------------------------------------------------------------------- 3. kill -9, then resume


def test_the_trainer_resumes_after_kill_9(beside: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    watcher, runs, out = beside["killed"]
    watcher.join(300)
    assert watcher.killed, out.read_text()[-3000:]
    assert watcher.proc.returncode == -signal.SIGKILL
    run_dir = runs / "killed"
    before = read_state(run_dir)
    assert before.finish_reason is None and before.train_sessions[-1]["finished"] is None
    checkpoint = [m for m in before.train_checkpoints if m["kind"] == "checkpoint"][-1]
    cut_short = len(before.agent_trials()) - 2 * checkpoint["step"]
    assert cut_short > 0  # rollouts of the step after the checkpoint: lost to training, still in the budget

    code, said = cli(capsys, "train", "resume", str(run_dir), "--runs", str(runs))
    assert code == 0, said
    assert verify_run(run_dir).ok
    state = read_state(run_dir)
    assert len(state.train_sessions) == 2
    killed, resumed = state.train_sessions
    assert killed["finished"] is None and resumed["method"] == "grpo"
    assert resumed["resumed_from"] == checkpoint["step"] and resumed["base_model"] == killed["base_model"]
    assert resumed["finished"]["reason"] == "done" and resumed["finished"]["steps"] == KILLED_STEPS
    after = [s["step"] for s in state.train_steps if s["session"] == resumed["seq"]]
    assert after == list(range(checkpoint["step"] + 1, KILLED_STEPS + 1))  # the steps go on from the checkpoint
    assert len(state.agent_trials()) == KILLED_STEPS * 2 + cut_short
    for step in state.train_steps:
        assert step["nonfinite"] == [] and len(step["trials"]) == 2
        assert all(state.trials[t].finished for t in step["trials"])
    assert all(t.finished for t in state.trials.values())  # a rollout the kill cut short included
    assert state.finish_reason == "agents_exhausted"
    assert any(e.kind == "run.resumed" for e in RunStore(run_dir).scan().events)


# ----------------------------------------------------------------------------- 5. rrma-tui --headless bench rl


def test_bench_rl_end_to_end(beside: dict[str, Any]) -> None:
    proc, out, started = beside["bench"]
    proc.wait(timeout=max(1.0, 400 - (time.monotonic() - started)))
    text = out.read_text()
    assert proc.returncode == 0, text[-3000:]
    assert re.search(r"^verified\s+ok$", text, re.MULTILINE), text[-3000:]
    match = REWARD_LINE.search(text)
    assert match, text[-3000:]
    first, last, gain, low, high = map(float, match.groups())
    assert gain == pytest.approx(last - first, abs=2e-4) and low <= gain <= high
    run_dir = Path(re.search(r"^run dir\s+(\S+)$", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
    state = read_state(run_dir)
    steps = [s for s in state.train_steps if s["rewards"]]
    assert statistics.fmean(steps[0]["rewards"]) == pytest.approx(first, abs=1e-4)
    assert statistics.fmean(steps[-1]["rewards"]) == pytest.approx(last, abs=1e-4)
