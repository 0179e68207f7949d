"""The real model in the loop: SmolLM2-135M-Instruct from the model store, through the ``local`` backend.

One model is loaded for the module (from the store's converted directory, named by its path: a local
Hugging Face directory works as the catalog name does). On it: the load itself, one greedy generation,
one LoRA optimizer step, and the prompt the backend records. Then a real run of the demo with
``--backend local --model smollm2`` (the model named through the store, loaded by the run's own process):
at least one of its proposals is a valid edit the oracle scores, and the run verifies.

Without the model these tests skip, naming ``rrma-tui models pull smollm2``; under CI they fail
(tests/conftest.py, ``smollm2_dir``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agents.local import PROMPT, instruct_messages  # noqa: E402
from agents.policy import FORMAT, sample  # noqa: E402
from rrma.contracts import Context  # noqa: E402
from rrma.log.state import RunState  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.models import resolve  # noqa: E402
from rrma.plugins import make_agent  # noqa: E402
from rrma.task import AgentConfig, load_task  # noqa: E402
from rrma.train.prompt import ReplyError, parse_reply  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
BASELINE = 7.39
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RRMA_") or k == "RRMA_MODELS"} | {
    "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module", autouse=True)
def one_thread(torch_one_thread: None) -> None:
    """One torch thread (tests/conftest.py): two fight each other on a busy 2-core machine."""


@pytest.fixture(scope="module")
def agent(smollm2_dir: Path) -> Any:
    """The local backend on the store's directory, given by its path, on the CPU."""
    task = load_task(DEMO)
    config = AgentConfig(name="smol", backend="local", model=str(smollm2_dir), params={"device": "cpu"})
    return make_agent(config, task, seed=0)


def test_the_model_loads_from_the_converted_copy(agent: Any, smollm2_dir: Path) -> None:
    model, tokenizer = agent.model, agent.tokenizer
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008  # 134.5M, the embeddings tied to the head
    assert agent.found.path == smollm2_dir.resolve() and agent.device == "cpu"
    text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n")  # its own chat template
    # the context window, and the prompt cut to fit it with room for the reply
    assert agent.context_tokens == 8192 and agent.max_prompt_tokens == 8192 - agent.max_new_tokens
    info = agent.endpoint_info()
    assert info["backend"] == "local" and info["prompt"] == PROMPT and info["sampling"]["stop"] == ["\n\n"]
    assert info["sampling"]["temperature"] == 0.7 and len(info["sha256"]) == 64


def test_one_greedy_generation(agent: Any) -> None:
    got = sample(agent.model, agent.tokenizer, [{"role": "user", "content": "What is 3 + 4? Reply with the number."}],
                 seed=0, temperature=0.0, max_new_tokens=12)
    assert "7" in got.text
    assert got.completion_ids and len(got.logprobs) == len(got.completion_ids)
    assert all(math.isfinite(x) and x <= 1e-6 for x in got.logprobs)
    assert agent.tokenizer.decode(got.completion_ids, skip_special_tokens=True) == got.text


def test_one_lora_step_changes_the_adapter_only(agent: Any) -> None:
    from peft import LoraConfig, get_peft_model

    tokenizer = agent.tokenizer
    model = get_peft_model(copy.deepcopy(agent.model), LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                                   target_modules=["q_proj", "v_proj"],
                                                                   task_type="CAUSAL_LM"))
    lora = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert lora and all("lora_" in n for n in lora)
    before = {n: p.detach().clone() for n, p in lora.items()}
    frozen = model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight.detach().clone()
    ids = torch.tensor([tokenizer("X = 1.5\nDEPTH = 5", add_special_tokens=False)["input_ids"]])
    optimizer = torch.optim.AdamW(lora.values(), lr=1e-3)
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    assert math.isfinite(loss.item())
    changed = [n for n, p in lora.items() if not torch.equal(before[n], p.detach())]
    assert any("lora_B" in n for n in changed) and any("lora_A" in n for n in changed)
    assert torch.equal(frozen, model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight)


def test_the_prompt_and_the_recorded_turn(agent: Any) -> None:
    task = load_task(DEMO)
    files = {p.name: p.read_text() for p in sorted(task.workspace_dir().iterdir()) if p.is_file()}
    turns: list[dict[str, Any]] = []
    ctx = Context(task=task, agent_name="smol", parent_id="base-0", files=files, editable=["objective.py"],
                  baseline_score=BASELINE, record_turn=lambda **turn: turns.append(turn))
    proposal = agent.propose(ctx)
    [turn] = turns
    args = turn["args"]
    assert args["format"] == FORMAT and args["prompt"] == PROMPT and args["stop"] == ["\n\n"]
    assert args["messages"] == instruct_messages(task, files, BASELINE, ["objective.py"])
    assert [m["role"] for m in args["messages"]] == ["system", "user", "assistant", "user"]
    assert "X: a number from -3 to 3" in args["messages"][0]["content"]  # the search space's ranges
    assert len(args["completion_ids"]) == len(args["logprobs"]) == turn["tokens_out"] <= 48
    assert "prompt_truncated_tokens" not in args  # the demo's prompt is far inside the window
    try:
        edits, hypothesis = parse_reply(task, turn["text"], files, ["objective.py"])
    except ReplyError as exc:
        assert proposal is not None and proposal.edits == [] and proposal.hypothesis == f"unparseable reply: {exc}"
    else:
        assert proposal is not None and (proposal.edits, proposal.hypothesis) == (edits, hypothesis)


def test_a_demo_run_with_the_local_model_proposes_a_valid_edit_and_verifies(tmp_path: Path, smollm2_dir: Path) -> None:
    """The model named through the store, in a run of its own process: at least one valid model-proposed trial.

    Seed 0 and 6 proposals, as the issue's check; docs/models.md has the valid rate over many proposals
    (the chance that 6 proposals are all invalid at that rate is given there)."""
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "run", str(DEMO), "--backend", "local",
                           "--model", "smollm2", "--trials", "6", "--seed", "0", "--runs", str(runs), "--quiet",
                           "--set", "budget.max_wall_seconds=3600", "--set", "budget.trial_seconds=120"],
                          cwd=REPO, capture_output=True, text=True, timeout=1500,
                          env=ENV | {"RRMA_MODELS": str(smollm2_dir.parents[1])})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [run] = [p for p in runs.iterdir() if (p / "events.jsonl").exists()]
    verify = subprocess.run([sys.executable, "-m", "cli.main", "verify", str(run)], cwd=REPO, capture_output=True,
                            text=True, timeout=300, env=ENV)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    state = RunState.fold(RunStore(run).scan().events)
    trials = state.agent_trials()
    assert len(trials) == 6
    valid = [t for t in trials if t.status == "ok"]
    assert valid, [t.hypothesis for t in trials]
    assert all(not t.hypothesis.startswith("unparseable reply") for t in valid)
    [info] = json.loads((run / "run.json").read_text())["agents"]  # what run.json says the agent ran
    assert info["backend"] == "local" and info["model"] == "smollm2" and info["path"] == str(smollm2_dir)
    assert info["store"] == {"name": "smollm2", "gguf_sha256": resolve("smollm2").spec.sha256}
    turns = [e.data for e in RunStore(run).scan().events if e.kind == "agent.turn"]
    assert len(turns) == 6 and all(t.args and t.args["prompt"] == PROMPT for t in turns)


def test_the_local_model_answers_for_the_gsm8k_prompt_oracle(tmp_path: Path, smollm2_dir: Path) -> None:
    """``provider: local``: the prompt bench's questions answered by the model on this machine, offline."""
    from oracle.gsm8k_gen import render_prompts
    from rrma.contracts import EvalContext
    from rrma.plugins import make_oracle
    from rrma.trial import Budget, Proposal, Status

    oracle = make_oracle("gsm8k-prompt", {"provider": "local", "model": str(smollm2_dir), "limit": 2,
                                          "data": str(REPO / "tests" / "fixtures" / "gsm8k"), "max_tokens": 48},
                         metric="pass_at_1", direction="maximize")
    facts = oracle.prepare(tmp_path, tmp_path)
    assert facts["provider"] == "local" and facts["base_url"] == str(smollm2_dir) and facts["questions"] == 2
    trial = tmp_path / "t1"
    trial.mkdir()
    prompt = "Solve the problem. End with a line '#### <number>'."
    (trial / "system_prompt.txt").write_text(prompt)
    out = oracle.evaluate(EvalContext(trial_id="t1", trial_dir=trial, proposal=Proposal(),
                                      budget=Budget(seconds=600, memory_mb=4096)))
    assert out.status == Status.ok and out.score is not None and 0.0 <= out.score <= 1.0, out.feedback
    assert sum(out.metrics["failures"].values()) == 2  # every question graded: correct or a failure kind
    rendered = render_prompts(oracle._generator.tokenizer, ["How many?"], oracle._generator.config)[0]
    assert prompt in rendered and rendered.startswith("<|im_start|>system\n")  # the agent's prompt, its template
    oracle.close()
