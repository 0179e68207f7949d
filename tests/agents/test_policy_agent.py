"""The ``policy`` backend (agents/policy.py): a trained model or LoRA adapter proposes edits in a real run.

A tiny model is built here (agents/training/tiny.py, tokenizer trained on the demo task's prompt and
replies); a LoRA adapter is trained on it for a few dozen steps to answer the demo prompt with
``X = 1.5``. The untrained model writes noise, which the loop records as invalid trials; the adapter's
reply becomes a trial the oracle scores. Every reply turn is checked against the contract the dataset
export reads (rrma-policy/1: the messages, the sampled ids, the sampler's logprob of each).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from agents.policy import FORMAT, find_policy, turn_seed  # noqa: E402
from agents.training.tiny import build_tiny  # noqa: E402
from rrma.contracts import AgentError, Context  # noqa: E402
from rrma.log.state import RunState  # noqa: E402
from rrma.log.store import RunStore  # noqa: E402
from rrma.log.verify import verify_run  # noqa: E402
from rrma.plugins import make_agent  # noqa: E402
from rrma.run.loop import start_run  # noqa: E402
from rrma.task import AgentConfig, TaskConfig, load_task  # noqa: E402
from rrma.train.artifacts import store_dir  # noqa: E402
from rrma.train.prompt import ReplyError, messages, parse_reply, reply_text  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
BASELINE = 7.39  # the demo's loss at its defaults (X=0, Y=0, LEARNING_RATE=0.1, DEPTH=2), near enough
ANSWER = "X = 1.5"
SMALL = {"vocab_size": 400, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
         "num_attention_heads": 2}


def demo(**overrides: Any) -> tuple[TaskConfig, dict[str, str], list[str]]:
    task = load_task(DEMO, overrides)
    files = {p.name: p.read_text() for p in sorted(task.workspace_dir().iterdir()) if p.is_file()}
    return task, files, list(task.workspace.editable)


def demo_context(task: TaskConfig, files: dict[str, str], turns: list[dict[str, Any]]) -> Context:
    return Context(task=task, agent_name="pol", parent_id="base-0", files=files, editable=list(task.workspace.editable),
                   baseline_score=BASELINE, record_turn=lambda **turn: turns.append(turn))


@pytest.fixture(scope="module", autouse=True)
def one_thread(torch_one_thread: None) -> None:
    """Every test of this module on one torch thread (tests/conftest.py)."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    task, files, editable = demo()
    after = dict(files, **{"objective.py": files["objective.py"].replace("X = 0.0", "X = 1.5")})
    texts = [m["content"] for score in (None, BASELINE) for m in messages(task, files, score, editable)]
    texts += [reply_text(task, files, after, editable), "DEPTH = 5\nY = -0.8", "LEARNING_RATE = 0.003"]
    return build_tiny(texts, tmp_path_factory.mktemp("policy") / "tiny", seed=0, **SMALL)


@pytest.fixture(scope="module")
def adapter(tiny: Path) -> Path:
    """A LoRA adapter on the tiny model, trained to answer the demo's prompt with ``X = 1.5``.

    Its targets include ``lm_head``: a randomly initialised model's output layer (weights ~0.02, after an
    RMS norm) cannot give any token a high probability, so LoRA on the inner layers alone stays near the
    uniform distribution (loss ~5 after 200 steps); a pretrained model has no such floor.
    """
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    task, files, editable = demo()
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(
        r=8, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"]))
    answer = tokenizer(ANSWER + "<|end|>", add_special_tokens=False)["input_ids"]
    rows = []
    for score in (BASELINE, None):
        text = tokenizer.apply_chat_template(messages(task, files, score, editable), add_generation_prompt=True,
                                             tokenize=False)
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        rows.append((torch.tensor([prompt + answer]), torch.tensor([[-100] * len(prompt) + answer])))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    for _ in range(200):  # until the answer is nearly certain (about 60 steps), so sampling at temperature 1 writes it
        loss = sum(model(input_ids=ids, labels=labels).loss for ids, labels in rows) / len(rows)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if loss.item() < 0.003:
            break
    assert loss.item() < 0.003
    out = tiny.parent / "adapter"
    model.save_pretrained(str(out), save_embedding_layers=False)  # the LoRA of lm_head only
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny)
    return out


def policy(model: Path, name: str = "pol", seed: int = 5, **params: Any) -> Any:
    task, _, _ = demo()
    return make_agent(AgentConfig(name=name, backend="policy", model=str(model), params=params), task, seed=seed)


def check_turn(turn: dict[str, Any], tokenizer: Any) -> None:
    """The reply turn the dataset export reads (docs/agents.md, A trained policy)."""
    args = turn["args"]
    assert turn["role"] == "assistant" and args["format"] == FORMAT
    assert set(args) == {"format", "messages", "completion_ids", "logprobs"}
    assert [m["role"] for m in args["messages"]] == ["system", "user"]
    ids, logprobs = args["completion_ids"], args["logprobs"]
    assert ids and all(isinstance(i, int) for i in ids) and len(logprobs) == len(ids) == turn["tokens_out"]
    assert all(math.isfinite(x) and x <= 0.0 for x in logprobs)
    assert tokenizer.decode(ids, skip_special_tokens=True) == turn["text"]


# ----------------------------------------------------------------------------- (a) one proposal


def test_the_policy_proposes_and_records_its_reply(tiny: Path) -> None:
    task, files, editable = demo()
    agent = policy(tiny)
    turns: list[dict[str, Any]] = []
    proposal = agent.propose(demo_context(task, files, turns))
    assert len(turns) == 1
    turn = turns[0]
    check_turn(turn, agent.tokenizer)
    prompt = messages(task, files, BASELINE, editable)
    assert turn["args"]["messages"] == prompt and turn["model"] == str(tiny.resolve())
    # the logprobs are the sampler's: at temperature 1 with no top-p/top-k, the model's own log-softmax
    text = agent.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    prompt_ids = agent.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert turn["tokens_in"] == len(prompt_ids)
    ids = turn["args"]["completion_ids"]
    with torch.no_grad():
        logits = agent.model(input_ids=torch.tensor([prompt_ids + ids])).logits[0]
    expected = torch.log_softmax(logits[len(prompt_ids) - 1:-1], dim=-1)[torch.arange(len(ids)), torch.tensor(ids)]
    assert torch.allclose(expected, torch.tensor(turn["args"]["logprobs"]), atol=1e-4)
    # the untrained model's reply is noise: whatever parse_reply says of it is what the proposal is
    try:
        edits, hypothesis = parse_reply(task, turn["text"], files, editable)
    except ReplyError as exc:
        assert proposal is not None and proposal.edits == []
        assert proposal.hypothesis == f"unparseable reply: {exc}"
    else:
        assert proposal is not None and (proposal.edits, proposal.hypothesis) == (edits, hypothesis)
    # reproducible from the agent's seed and its proposal count; the next proposal draws afresh
    again: list[dict[str, Any]] = []
    policy(tiny).propose(demo_context(task, files, again))
    assert again[0]["args"]["completion_ids"] == ids
    agent.propose(demo_context(task, files, turns))
    assert turns[1]["args"]["completion_ids"] != ids and turns[1]["step"] == 2
    assert proposal.meta == {"policy_seed": turn_seed(5, 1)}


def test_a_long_prompt_keeps_its_last_tokens(tiny: Path) -> None:
    task, files, _ = demo()
    agent = policy(tiny, max_prompt_tokens=16, max_new_tokens=3, temperature=0.5, top_p=0.9)
    turns: list[dict[str, Any]] = []
    agent.propose(demo_context(task, files, turns))
    assert turns[0]["tokens_in"] == 16 and turns[0]["args"]["prompt_truncated_tokens"] > 0
    assert 1 <= turns[0]["tokens_out"] <= 3
    info = agent.endpoint_info()
    assert info["sampling"]["temperature"] == 0.5 and info["kind"] == "model" and len(info["sha256"]) == 64


# ----------------------------------------------------------------------------- (b) an adapter in a run


def test_a_lora_adapter_proposes_in_a_run_that_verifies(tiny: Path, adapter: Path, tmp_path: Path) -> None:
    task, files, editable = demo()
    tuned, base = policy(adapter, "tuned"), policy(tiny, "base")
    assert tuned.found.kind == "adapter" and tuned.found.base == str(tiny)
    replies = []
    for agent in (tuned, base):  # the same seed and prompt: the adapter changed what the model writes
        turns: list[dict[str, Any]] = []
        agent.propose(demo_context(task, files, turns))
        replies.append(turns[0]["text"])
    assert replies[0] == ANSWER and replies[1] != ANSWER

    agents = [{"name": "tuned", "backend": "policy", "model": str(adapter)},
              {"name": "base", "backend": "policy", "model": str(tiny), "params": {"max_new_tokens": 24}}]
    run_task = load_task(DEMO, {"budget.max_trials": 6, "budget.trial_seconds": 5, "agents": agents})
    result = start_run(run_task, tmp_path / "runs")
    assert result.ok and verify_run(result.run_dir).ok
    state = result.state
    trials = state.agent_trials()
    assert {t.agent for t in trials} == {"tuned", "base"}
    replies_of: dict[str, list[dict[str, Any]]] = {}
    for event in RunStore(result.run_dir).scan().events:
        if event.kind == "agent.turn" and event.data.trial_id is not None:
            replies_of.setdefault(event.data.trial_id, []).append(event.data.model_dump())
    tokenizers = {"tuned": tuned.tokenizer, "base": base.tokenizer}
    for trial in trials:  # every trial has its reply turn; a reply out of format is an invalid trial
        (turn,) = replies_of[trial.trial_id]
        assert turn["agent"] == trial.agent
        check_turn(turn, tokenizers[trial.agent])
        try:
            parse_reply(run_task, turn["text"], files, editable)
        except ReplyError as exc:
            assert trial.status == "invalid" and trial.hypothesis == f"unparseable reply: {exc}"
            assert trial.feedback == "invalid edit: the proposal contains no edits"
        else:
            assert trial.status == "ok" and trial.score is not None
    scored = [t for t in trials if t.agent == "tuned" and t.status == "ok" and not t.cached]
    assert scored and scored[0].hypothesis == "X 0.0 -> 1.5" and state.baseline_mean is not None
    assert scored[0].score is not None and scored[0].score < state.baseline_mean
    assert scored[0].promoted
    assert any(t.agent == "base" and t.status == "invalid" for t in trials)
    recorded = {a["name"]: a for a in json.loads((result.run_dir / "run.json").read_text())["agents"]}
    assert recorded["tuned"]["kind"] == "adapter" and recorded["tuned"]["base_model"] == str(tiny)
    assert recorded["base"]["sampling"]["max_new_tokens"] == 24


# ----------------------------------------------------------------------------- (c) bad paths, one line each


def test_bad_paths_and_params_are_one_line_agent_errors(tiny: Path, tmp_path: Path) -> None:
    task, _, _ = demo()
    missing = tmp_path / "nowhere"
    a_file = tmp_path / "weights.bin"
    a_file.write_bytes(b"\0")
    empty = tmp_path / "empty"
    empty.mkdir()
    two = tmp_path / "two"
    for name in ("a", "b"):
        (two / name).mkdir(parents=True)
        (two / name / "config.json").write_text("{}")
    orphan = tmp_path / "orphan"
    orphan.mkdir()
    (orphan / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path / "gone")}))
    run = tmp_path / "run"
    RunStore(run, create=True)
    cases = [
        (missing, {}, [str(missing), "does not exist", "PEFT adapter directory"]),
        (a_file, {}, [str(a_file), "is a file"]),
        (empty, {}, [str(empty), "holds no policy", "adapter_config.json"]),
        (two, {}, [str(two), "several policies (a, b)"]),
        (orphan, {}, [str(orphan), "cannot load the adapter's base", str(tmp_path / "gone")]),
        (run, {}, [str(run), "no finished training session"]),
        (tiny, {"temprature": 0.5}, ["unknown params for backend policy: temprature"]),
        (tiny, {"temperature": "hot"}, ["params.temperature must be a number"]),
        (tiny, {"top_p": 0}, ["params.top_p must be > 0.0"]),
        (tiny, {"device": "tpu"}, ["params.device must be cpu, auto, cuda or cuda:N"]),
    ]
    if not torch.cuda.is_available():
        cases.append((tiny, {"device": "cuda"}, ["no CUDA device here", "use device: cpu"]))
    for path, params, words in cases:
        with pytest.raises(AgentError) as caught:
            make_agent(AgentConfig(name="pol", backend="policy", model=str(path), params=params), task)
        message = str(caught.value)
        assert "\n" not in message and message.startswith("agent pol: ")
        for word in words:
            assert word in message, (message, word)
    with pytest.raises(AgentError, match=r"needs agents\[\]\.model"):
        make_agent(AgentConfig(name="pol", backend="policy"), task)
    # a bad path stops the run before its directory exists
    bad = load_task(DEMO, {"agents": [{"name": "pol", "backend": "policy", "model": str(missing)}]})
    with pytest.raises(AgentError, match="does not exist"):
        start_run(bad, tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_folder_or_a_training_run_names_the_policy(tmp_path: Path) -> None:
    def model_dir(path: Path, adapter: bool = False) -> Path:
        path.mkdir(parents=True)
        if adapter:
            (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "some/base"}))
        else:
            (path / "config.json").write_text("{}")
        return path

    work = tmp_path / "work"
    model_dir(work / "checkpoint-2")
    model_dir(work / "checkpoint-10")
    assert find_policy(work).path == (work / "checkpoint-10").resolve()  # the last checkpoint, not the last name
    final = model_dir(work / "final", adapter=True)
    found = find_policy(work)
    assert (found.kind, found.path, found.base) == ("adapter", final.resolve(), "some/base")
    assert find_policy(final, base_model="/elsewhere").base == "/elsewhere"
    # a run whose training saved an adapter: its last train.finished artifact, checked against its digest
    run = tmp_path / "run"
    store = RunStore(run, create=True)
    digest, rel = store_dir(run, final)
    store.append("train.started", "trainer", {"method": "sft", "base_model": "tiny"})
    store.append("train.finished", "trainer", {"reason": "done", "steps": 3, "artifact": digest, "path": rel})
    assert RunState.fold(store.scan().events).train_sessions[-1]["finished"]["artifact"] == digest
    found = find_policy(run)
    assert found.path == (run / rel).resolve() and found.kind == "adapter" and "train.finished" in found.via
    (run / rel / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "other/base"}))
    with pytest.raises(ValueError, match="does not match its digest"):
        find_policy(run)
