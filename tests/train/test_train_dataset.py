"""``rrma-tui export RUN --dataset OUT``: real runs become rows TRL trains on (issue 23, docs/training.md).

Three real runs of the demo bench, made once for the module through the research loop: the offline
random-search agent (with a task reward that uses every term), an LLM agent with tools (the LLM
agents' real tool-use loop with scripted model replies, so its system turn records its tool schemas
and its tool calls are in the log as any LLM agent writes them), and a scripted stand-in of the
trained policy that records its reply turn in the ``rrma-policy/1`` format. The export is read back with
``datasets`` and one real ``SFTTrainer`` step runs on it (a tiny model built here, on the CPU).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from agents.llm.agent import LLMAgent, ModelReply
from agents.llm.costs import Usage
from agents.llm.tools import ToolCall
from cli.main import main
from rrma.audit.auditor import dismiss_finding
from rrma.audit.finding import Finding
from rrma.contracts import Agent, Context
from rrma.log.review import record_review
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.run.loop import start_run
from rrma.task import AgentConfig, load_task
from rrma.train import prompt as policy_prompt
from rrma.train.dataset import COLUMNS, DatasetError, collect, dataset_rows, write_dataset
from rrma.train.reward import RewardInputs, diff_text, reward
from rrma.trial import Proposal

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
REWARD = {"reward.scale": "relative", "reward.novelty": 0.3, "reward.efficiency": 0.05, "reward.clip": 0.5}
POLICY_REPLIES = ["X = 1.5", "Y = -0.5\nDEPTH = 4"]


class PolicyStandIn(Agent):
    """Proposes what a policy would write, recording its reply turn as the policy backend does."""

    backend = "test-policy"

    def __init__(self) -> None:
        task = load_task(DEMO)
        super().__init__(task.agents[0].model_copy(update={"name": "policy"}), task)
        self.replies = list(POLICY_REPLIES)

    def propose(self, ctx: Context) -> Proposal | None:
        if not self.replies:
            return None
        text = self.replies.pop(0)
        score = ctx.lineage[0].score if ctx.lineage else ctx.baseline_score
        messages = policy_prompt.messages(ctx.task, ctx.files, score, ctx.editable)
        edits, hypothesis = policy_prompt.parse_reply(ctx.task, text, ctx.files, ctx.editable)
        ids = [7 + i for i in range(len(text))]
        ctx.record_turn(role="assistant", text=text, model="tiny", tokens_out=len(ids),
                        args={"format": "rrma-policy/1", "messages": messages, "completion_ids": ids,
                              "logprobs": [-0.25 - i / 100 for i in range(len(ids))]})
        return Proposal(hypothesis=hypothesis, edits=edits)


class ScriptedLLM(LLMAgent):
    """The LLM agents' own tool-use loop (agents/llm/agent.py) with the model's replies scripted here: what it
    records (its system turn with the tool schemas, each reply, call and result) is what any LLM agent records."""

    backend = "scripted-llm"
    key_required = False

    def __init__(self, replies: list[ModelReply]) -> None:
        task = load_task(DEMO)
        super().__init__(AgentConfig(name="llm", backend="anthropic", model="scripted", params={"attempts": 1}), task)
        self.replies = replies

    def start(self, instructions: str, task_text: str, files: str, context: str, tools: list[Any]) -> list[Any]:
        return []

    def call(self, convo: Any) -> ModelReply:
        return self.replies.pop(0)

    def add_reply(self, convo: Any, reply: ModelReply, results: list[Any]) -> None:
        convo.append((reply, results))

    def add_user(self, convo: Any, text: str) -> None:
        convo.append(text)

    def transient(self, exc: Exception) -> None:
        return None


def call(name: str, args: dict[str, Any]) -> ToolCall:
    call.count += 1  # type: ignore[attr-defined]
    return ToolCall(id=f"call_{call.count}", name=name, args=args)  # type: ignore[attr-defined]


call.count = 0  # type: ignore[attr-defined]


def reply(text: str, *calls: ToolCall) -> ModelReply:
    return ModelReply(text=text, calls=list(calls), stop_reason="tool_use", usage=Usage(100, 20), model="scripted")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three runs: random search ("demo"), an LLM agent with tools ("tools"), the policy ("policy")."""
    base = tmp_path_factory.mktemp("runs")
    quick = {"noise.baseline_repeats": 1, "budget.max_concurrent": 1}
    demo = start_run(load_task(DEMO, {**quick, **REWARD, "budget.max_trials": 6, "budget.max_concurrent": 2}), base,
                     run_id="demo")
    policy = start_run(load_task(DEMO, {**quick, "budget.max_trials": 2}), base, run_id="policy",
                       agents=[PolicyStandIn()])
    llm = ScriptedLLM([
        reply("Reading it first.", call("read_file", {"path": "objective.py", "start_line": 11, "end_line": 12})),
        reply("", call("edit_file", {"path": "objective.py", "replacements": [{"search": "X = 0.0",
                                                                               "replace": "X = 1.7"}]}),
              call("run_checks", {})),
        reply("", call("submit_trial", {"hypothesis": "X 1.7", "expected_effect": "lower loss"})),
    ])
    tools = start_run(load_task(DEMO, {**quick, "budget.max_trials": 1}), base, run_id="tools", agents=[llm])
    for result in (demo, policy, tools):
        assert result.state.finish_reason is not None and result.state.agent_trials()
    return {"demo": demo.run_dir, "policy": policy.run_dir, "tools": tools.run_dir}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def fold(run: Path) -> RunState:
    return RunState.fold(RunStore(run).scan().events)


def expected_rewards(run: Path) -> dict[str, float]:
    """Each agent trial's reward computed here from the validated log (RunStore.scan) and the blob store."""
    from rrma.task import task_from_dict

    state, store = fold(run), RunStore(run)
    task = task_from_dict(state.task)

    def files(trial: str | None) -> dict[str, str]:
        rec = state.trials.get(trial) if trial else None
        if rec is None or rec.manifest_blob is None:
            return {}
        manifest = store.get_json_blob(rec.manifest_blob)
        return {path: store.blob_text(digest) for path, digest in manifest.items()}

    out: dict[str, float] = {}
    earlier: list[str] = []
    for rec in state.agent_trials():
        parent = state.trials.get(rec.parent) if rec.parent else None
        parent_score = parent.score if parent is not None and parent.score is not None else state.baseline_mean
        change = diff_text(files(rec.parent), files(rec.trial_id) if rec.manifest_blob else files(rec.parent),
                           task.workspace.editable)
        out[rec.trial_id] = reward(
            RewardInputs(status=rec.status, score=rec.score, parent_score=parent_score, baseline=state.baseline_mean,
                         sigma=state.sigma, floor=state.floor, cached=rec.cached, seconds=rec.seconds,
                         peak_rss_mb=rec.metrics.get("peak_rss_mb"), diff=change),
            task.reward, direction=task.metric.direction, trial_seconds=task.budget.trial_seconds,
            trial_memory_mb=task.budget.trial_memory_mb, earlier_diffs=earlier).value
        earlier.append(change)
    return out


# ----------------------------------------------------------------------------- the export, read by datasets and TRL


def test_the_export_loads_with_datasets_and_sft_trainer_takes_a_step(runs: dict[str, Path], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trials.jsonl"
    code, said, err = cli(capsys, "export", str(runs["demo"]), str(runs["tools"]), str(runs["policy"]),
                          "--dataset", str(out))
    assert code == 0, err
    assert said.count("\n") == 1 and said.startswith("dataset: 9 rows written, 0 excluded: ") and str(out) in said

    from datasets import load_dataset

    data = load_dataset("json", data_files=str(out), split="train")
    assert set(data.column_names) == set(COLUMNS) and len(data) == 9
    assert all(isinstance(r, float) and math.isfinite(r) for r in data["reward"])
    by_trial = {(row["run"], row["trial"]): row for row in data}

    # random search: the policy's prompt from the parent's files, the change as the policy's reply
    demo = by_trial[("demo", "t0001")]
    roles = [m["role"] for m in demo["messages"]]
    assert roles == ["system", "user", "assistant"] and demo["tools"] is None
    assert "loss now: " in demo["messages"][1]["content"] and "X = 0.0" in demo["messages"][1]["content"]
    assert demo["group"] == "demo:base-0" and demo["completion_ids"] is None and demo["status"] == "ok"
    state = fold(runs["demo"])
    task = load_task(DEMO)
    files = RunStore(runs["demo"]).manifest_files(state.trials["base-0"].manifest_blob or "")
    edits, _ = policy_prompt.parse_reply(task, demo["messages"][2]["content"], files, ["objective.py"])
    after = RunStore(runs["demo"]).manifest_files(state.trials["t0001"].manifest_blob or "")
    assert {e.path: e.content for e in edits} == {"objective.py": after["objective.py"]}  # the reply makes the trial
    assert demo["privileged_context"] == state.trials["t0001"].feedback and demo["privileged_context"]

    # the LLM agent: its tool calls and results before the final reply, its tool schemas
    llm = by_trial[("tools", "t0001")]
    assert [m["role"] for m in llm["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool",
                                                    "assistant", "tool", "assistant"]
    first, second = llm["messages"][2], llm["messages"][4]
    assert first["content"] == "Reading it first."
    assert [c["function"]["name"] for c in first["tool_calls"]] == ["read_file"]
    assert json.loads(first["tool_calls"][0]["function"]["arguments"]) == {"path": "objective.py", "start_line": 11,
                                                                          "end_line": 12}
    assert [c["function"]["name"] for c in second["tool_calls"]] == ["edit_file", "run_checks"]
    assert llm["messages"][3]["name"] == "read_file" and "X = 0.0" in llm["messages"][3]["content"]
    assert llm["messages"][-1]["content"] == "X = 1.7" and llm["messages"][-1]["tool_calls"] is None
    schemas = json.loads(llm["tools"])
    assert {s["function"]["name"] for s in schemas} >= {"read_file", "edit_file", "submit_trial"}
    assert all(s["type"] == "function" and s["function"]["parameters"]["type"] == "object" for s in schemas)

    # the policy: exactly what it was prompted with and what it wrote, with its token ids and logprobs
    turns = [e.data for e in RunStore(runs["policy"]).scan().events if e.kind == "agent.turn"]
    for trial, turn in zip(("t0001", "t0002"), turns, strict=True):
        row = by_trial[("policy", trial)]
        assert [{"role": m["role"], "content": m["content"]} for m in row["messages"]] == [
            *turn.args["messages"], {"role": "assistant", "content": turn.text}]
        assert row["completion_ids"] == turn.args["completion_ids"] and row["logprobs"] == turn.args["logprobs"]
    assert [by_trial[("policy", t)]["messages"][-1]["content"] for t in ("t0001", "t0002")] == POLICY_REPLIES

    # one real SFT step on the export, with a tiny model built here
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from agents.training.tiny import build_tiny

    model_dir = build_tiny([m["content"] for row in data for m in row["messages"]], tmp_path / "tiny")
    trainer = SFTTrainer(model=str(model_dir), train_dataset=data,
                         processing_class=AutoTokenizer.from_pretrained(model_dir),
                         args=SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=4,
                                        use_cpu=True, report_to=[], save_strategy="no", logging_steps=1,
                                        max_length=512, dataloader_num_workers=0))
    model = trainer.model
    assert model is not None
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    result = trainer.train()
    assert trainer.state.global_step == 1 and math.isfinite(result.training_loss)
    assert any(not p.detach().equal(before[n]) for n, p in model.named_parameters())  # the step trained it


def test_a_directory_export_is_a_hugging_face_dataset_with_the_same_rows(runs: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    from datasets import load_dataset, load_from_disk

    rows = dataset_rows([runs["tools"], runs["demo"]])
    assert write_dataset(rows, tmp_path / "rows.jsonl") == "JSON lines"
    assert "Hugging Face" in write_dataset(rows, tmp_path / "rows")
    on_disk = load_from_disk(str(tmp_path / "rows"))
    from_json = load_dataset("json", data_files=str(tmp_path / "rows.jsonl"), split="train")
    assert on_disk.to_list() == from_json.to_list() == rows
    again = dataset_rows([runs["tools"], runs["demo"]])
    assert write_dataset(again, tmp_path / "rows").startswith("a Hugging Face")  # an earlier dataset is replaced
    assert load_from_disk(str(tmp_path / "rows")).to_list() == rows
    empty = tmp_path / "empty"
    write_dataset([], empty)
    assert set(load_from_disk(str(empty)).column_names) == set(COLUMNS)  # the schema even with no row
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="neither empty nor a dataset"):
        write_dataset(rows, tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


# ----------------------------------------------------------------------------- review and audit


def test_rejected_and_high_flagged_trials_are_left_out_unless_asked_and_rewards_are_the_functions(
        runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "demo"
    shutil.copytree(runs["demo"], run)
    store = RunStore(run)
    record_review(store, "t0002", "reject", reviewer="alice", note="not a real gain")
    record_review(store, "t0004", "approve", reviewer="alice")
    seq = fold(run).trials["t0003"].proposed_seq
    store.append("audit.finding", "auditor", Finding(trial_id="t0003", kind="metric_tampering", severity="high",
                                                     explanation="planted", rule="test").data())
    dismissed = store.append("audit.finding", "auditor", Finding(
        trial_id="t0005", kind="copied", severity="high", explanation="planted, then dismissed", rule="test2").data())
    dismiss_finding(store, fold(run), dismissed.seq, reviewer="bob", note="a false alarm")
    store.append("audit.finding", "auditor", Finding(trial_id="t0006", kind="noise_only", severity="warn",
                                                     explanation="planted", rule="test3").data())
    assert seq > 0

    default = collect([run])
    assert sorted(r["trial"] for r in default.rows) == ["t0001", "t0004", "t0005", "t0006"]
    assert default.excluded == {"rejected by a person": 1, "high audit finding": 1}
    rows = {r["trial"]: r for r in default.rows}
    assert rows["t0004"]["approved"] is True and rows["t0001"]["approved"] is None
    assert rows["t0005"]["audit"] is None  # dismissed: not open
    assert rows["t0006"]["audit"] == {"kinds": ["noise_only"], "severity": "warn"}

    everything = {r["trial"]: r for r in collect([run], include_rejected=True, include_flagged=True).rows}
    assert sorted(everything) == [f"t000{i}" for i in range(1, 7)]
    assert everything["t0002"]["approved"] is False
    assert everything["t0003"]["audit"] == {"kinds": ["metric_tampering"], "severity": "high"}
    assert {r["trial"] for r in collect([run], include_rejected=True).rows} == set(everything) - {"t0003"}
    assert {r["trial"] for r in collect([run], include_flagged=True).rows} == set(everything) - {"t0002"}

    # the rewards are rrma/train/reward.py's for these outcomes (the relative scale, the clip, time and novelty)
    want = expected_rewards(run)
    assert {t: r["reward"] for t, r in everything.items()} == pytest.approx(want, rel=0, abs=1e-12)
    assert len({round(v, 9) for v in want.values()}) > 2  # not all one clipped value
    assert all("novelty" in r["reward_why"] and "time" in r["reward_why"] for r in everything.values()
               if r["status"] == "ok" and not r["reward_why"].startswith("a repeat"))
    assert all(r["head"] == store.head()[1] for r in everything.values())

    # the same through the CLI: one line with the counts, and the flags bring the rows back
    out = tmp_path / "rows.jsonl"
    code, said, _ = cli(capsys, "export", str(run), "--dataset", str(out))
    assert code == 0 and said == (f"dataset: 4 rows written, 2 excluded (1 high audit finding, 1 rejected by a "
                                  f"person): {out} (JSON lines)\n")
    assert [json.loads(line)["trial"] for line in out.read_text().splitlines()] == ["t0001", "t0004", "t0005", "t0006"]
    code, said, _ = cli(capsys, "export", str(run), "--dataset", str(out), "--include-rejected", "--include-flagged")
    assert code == 0 and said.startswith("dataset: 6 rows written, 0 excluded: ")
    assert len(out.read_text().splitlines()) == 6


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_one_line_and_exit_2(runs: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs["policy"], run)
    cases: list[tuple[list[str], str]] = [
        (["export", str(tmp_path / "nope"), "--dataset", str(tmp_path / "o.jsonl")], "not a run directory"),
        (["export", str(run), "--dataset", str(tmp_path / "missing" / "o.jsonl")], "does not exist"),
        (["export", str(run)], "give --sqlite OUT.db, --dataset OUT, or both"),
        (["export", str(run), "--sqlite", str(tmp_path / "o.db"), "--include-rejected"], "go with --dataset"),
        (["export", str(run), "--dataset", str(tmp_path)], "neither empty nor a dataset"),
    ]
    (tmp_path / "o.jsonl").mkdir()
    cases.append((["export", str(run), "--dataset", str(tmp_path / "o.jsonl")], "a directory, not a file"))
    for argv, message in cases:
        code, out, err = cli(capsys, "--runs", str(tmp_path), *argv)
        assert code == 2, (argv, out, err)
        assert err.count("\n") == 1 and message in err and err.startswith("rrma-tui: "), (argv, err)
    with open(run / "events.jsonl", "ab") as fh:  # a line that is not UTF-8: the run cannot be read as one
        fh.write(b'{"seq": 99, "kind": "note", "data": {"text": "\xff\xfe"}}\n')
    code, _, err = cli(capsys, "export", str(run), "--dataset", str(tmp_path / "x.jsonl"))
    assert code == 2 and err.count("\n") == 1 and "UTF-8" in err
    assert not (tmp_path / "x.jsonl").exists()


def test_sqlite_and_dataset_together(runs: dict[str, Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    db, out = tmp_path / "runs.db", tmp_path / "rows.jsonl"
    code, said, err = cli(capsys, "export", str(runs["policy"]), "--sqlite", str(db), "--dataset", str(out))
    assert code == 0, err
    lines = said.splitlines()
    assert lines[0].startswith("policy: ") and lines[1].startswith(f"wrote {db}") and lines[2].startswith("dataset: 2")
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from trials where run_id = 'policy' and baseline = 0").fetchone() == (2,)


def _row_keys(rows: list[dict[str, Any]]) -> set[frozenset[str]]:
    return {frozenset(r) for r in rows} | {frozenset(m) for r in rows for m in r["messages"]}


def test_every_row_and_message_has_the_same_keys(runs: dict[str, Path]) -> None:
    rows = dataset_rows(list(runs.values()))
    assert _row_keys(rows) == {frozenset(COLUMNS), frozenset({"role", "content", "tool_calls", "name"})}


def test_a_log_from_before_the_reward_section_exports_with_the_defaults() -> None:
    fixture = REPO / "tests" / "fixtures" / "logs" / "v1_demo"
    files = sorted(p.name for p in fixture.rglob("*"))
    rows = dataset_rows([fixture])
    assert [r["trial"] for r in rows] == ["t0001", "t0002", "t0003"]
    assert {r["trial"]: r["reward"] for r in rows} == pytest.approx(expected_rewards(fixture), rel=0, abs=1e-12)
    assert [r["reward"] for r in rows] == [5.0, 5.0, -5.0]  # the default clip of improvements in sigmas
    assert all(r["head"] == RunStore(fixture).head()[1] for r in rows)
    assert sorted(p.name for p in fixture.rglob("*")) == files  # the export writes nothing into the run
