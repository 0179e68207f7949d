"""GSM8K data, generation and the three oracles (gsm8k-eval, gsm8k-recipe, gsm8k-prompt).

Real parts run for real: a tiny random Llama and byte-level tokenizer built locally (no hub),
transformers generation on the CPU, the recipe as a limited child process, TRL GRPO for two
steps (slow), and the prompt oracle against a local HTTP server speaking the real OpenAI and
Anthropic JSON. Data: the shared GSM8K copy when present, else tests/fixtures/gsm8k.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from oracle.gsm8k_data import (
    DataError,
    Problem,
    SplitLeak,
    assert_disjoint,
    load_jsonl,
    load_split,
    question_key,
    subset,
)
from oracle.gsm8k_scoring import CompletionsError, match_completions, read_completions
from rrma.contain import sandbox
from rrma.contain.sandbox import Policy
from rrma.contracts import EvalContext, OracleError
from rrma.plugins import make_oracle
from rrma.trial import Budget, Proposal, Status

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "gsm8k"
SHARED = Path(os.environ.get("RRMA_SHARED", REPO.parent / "shared")) / "gsm8k"
HAS_SHARED = (SHARED / "test.jsonl").is_file()
RECIPE = REPO / "benches" / "gsm8k_recipe" / "workspace" / "recipe.py"


def ctx_for(trial_dir: Path, *, seconds: float = 120, memory_mb: int = 4096, **kw: Any) -> EvalContext:
    trial_dir.mkdir(parents=True, exist_ok=True)
    return EvalContext(trial_id=trial_dir.name, trial_dir=trial_dir, proposal=Proposal(),
                       budget=Budget(seconds=seconds, memory_mb=memory_mb), **kw)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from oracle.gsm8k_gen import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


# ----------------------------------------------------------------------------- data


def test_fixture_splits_are_disjoint_and_dev_is_carved_from_train() -> None:
    train = load_split("train", FIXTURE)
    dev = load_split("dev", FIXTURE)
    pool = load_split("train-pool", FIXTURE)
    test = load_split("test", FIXTURE)
    assert len(dev) + len(pool) == len(train) and len(dev) == len(train) // 2  # dev is capped at half
    assert {p.idx for p in dev}.isdisjoint(p.idx for p in pool)
    assert_disjoint(pool, [*dev, *test])
    assert load_split("dev", FIXTURE) == dev  # by index, deterministic


@pytest.mark.skipif(not HAS_SHARED, reason=f"needs the shared GSM8K copy at {SHARED}")
def test_real_splits_sizes_and_no_leak() -> None:
    assert len(load_split("test")) == 1319
    dev, pool = load_split("dev"), load_split("train-pool")
    assert (len(dev), len(pool)) == (500, 7473 - 500)
    assert_disjoint(pool, [*dev, *load_split("test")])


def test_split_guard_refuses_a_held_out_question() -> None:
    test = load_split("test", FIXTURE)
    leaked = [*load_split("train-pool", FIXTURE),
              Problem(999, "  " + test[3].question.upper() + " ", test[3].answer, "train")]
    with pytest.raises(SplitLeak, match=r"1 training problem\(s\) are held-out questions, e\.g\. train\[999\] == test\[3\]"):
        assert_disjoint(leaked, test)


def test_subsets_are_deterministic_by_index() -> None:
    problems = load_split("train", FIXTURE)
    assert [p.idx for p in subset(problems, 5)] == [0, 1, 2, 3, 4]
    seeded = subset(problems, 5, seed=3)
    assert seeded == subset(problems, 5, seed=3)
    assert [p.idx for p in seeded] == sorted(p.idx for p in seeded)
    with pytest.raises(DataError, match="at least 1"):
        subset(problems, 0)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json}\n", r"bad\.jsonl:1: not valid JSON", id="bad_json"),  # names file and line
        pytest.param('{"question": "q"}\n', r":1: field 'answer' is missing", id="missing_field"),
        pytest.param('{"question": "q", "answer": "42"}\n', r":1: answer has no '#### <number>'", id="no_hash"),
        pytest.param("[1, 2]\n", r":1: expected a JSON object, got list", id="not_object"),
        pytest.param("\n\n", r"contains no problems", id="empty"),
    ],
)
def test_bad_data_files_get_precise_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        load_jsonl(path)


def test_missing_data_path_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"GSM8K test data not found at .*nowhere/test\.jsonl"):
        load_split("test", tmp_path / "nowhere")


# ----------------------------------------------------------------------------- completions files


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_completions_match_by_idx_or_question(tmp_path: Path) -> None:
    test = load_split("test", FIXTURE)
    path = _write(tmp_path / "c.jsonl", [
        {"idx": 0, "completion": test[0].answer},
        {"question": " " + test[1].question.lower(), "completion": "#### 0"},  # matched on normalised text
    ])
    pairs = match_completions(read_completions(path), test)
    assert [(p.idx, c) for p, c in pairs] == [(0, test[0].answer), (1, "#### 0")]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        pytest.param([{"idx": 0}], r":1: field 'completion' is missing", id="no_completion"),
        pytest.param([{"completion": "x"}], r":1: needs an integer 'idx' or a 'question'", id="no_key"),
        pytest.param([{"idx": 5000, "completion": "x"}], r":1: idx 5000 is not a question of this split", id="bad_idx"),
        pytest.param([{"question": "Who?", "completion": "x"}], r":1: question not found", id="unknown_question"),
        pytest.param([{"idx": 0, "question": "Who?", "completion": "x"}], r"idx 0 and its question text disagree",
                     id="idx_question_disagree"),
    ],
)
def test_bad_completions_get_precise_errors(tmp_path: Path, rows: list[dict[str, Any]], message: str) -> None:
    path = _write(tmp_path / "c.jsonl", rows)
    with pytest.raises(CompletionsError, match=message):
        match_completions(read_completions(path), load_split("test", FIXTURE), source=str(path))


# ----------------------------------------------------------------------------- gsm8k-eval


def test_eval_oracle_scores_a_completions_file(tmp_path: Path) -> None:
    test = load_split("test", FIXTURE)
    rows = [{"idx": p.idx, "completion": p.answer if p.idx % 2 == 0 else "#### 0"} for p in test]
    trial = tmp_path / "t1"
    trial.mkdir()
    _write(trial / "completions.jsonl", rows)
    oracle = make_oracle("gsm8k-eval", {"data": str(FIXTURE)}, metric="pass_at_1", direction="maximize")
    facts = oracle.prepare(tmp_path, trial)
    assert facts["questions"] == len(test) and facts["data"]["sha256"]
    out = oracle.evaluate(ctx_for(trial))
    right = sum(1 for p in test if p.idx % 2 == 0)
    assert out.status == Status.ok
    assert out.score == pytest.approx(right / len(test), abs=1e-6)
    assert out.metrics["failures"]["wrong_value"] == len(test) - right
    assert out.metrics["strict_final_line"] == 1.0
    assert "pass@1: " in out.feedback and "failures: correct=" in out.feedback


def test_eval_oracle_refuses_a_bad_file_as_invalid(tmp_path: Path) -> None:
    trial = tmp_path / "t1"
    trial.mkdir()
    (trial / "completions.jsonl").write_text('{"idx": 0}\n')
    out = make_oracle("gsm8k-eval", {"data": str(FIXTURE)}).evaluate(ctx_for(trial))
    assert out.status == Status.invalid and "field 'completion' is missing" in out.feedback


def test_eval_oracle_bad_params_are_setup_errors() -> None:
    with pytest.raises(OracleError, match="'mode' must be one of lenient, strict"):
        make_oracle("gsm8k-eval", {"mode": "fuzzy"})
    with pytest.raises(OracleError, match="'limit' must be int"):
        make_oracle("gsm8k-eval", {"limit": "ten"})


def _bench_cmd(*args: str) -> list[str]:
    return [sys.executable, str(REPO / "benches" / "gsm8k_eval" / "bench.py"), *args]


def test_eval_bench_grades_every_gold_solution(tmp_path: Path) -> None:
    """The gold solutions of the test split as completions: 1319/1319 (fixture: all of them)."""
    data = [] if HAS_SHARED else ["--data", str(FIXTURE)]
    problems = load_split("test", None if HAS_SHARED else FIXTURE)
    path = _write(tmp_path / "gold.jsonl", [{"idx": p.idx, "completion": p.answer} for p in problems])
    proc = subprocess.run(_bench_cmd("--completions", str(path), "--json", *data), capture_output=True, text=True,
                          cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    n = len(problems)
    assert (metrics["questions"], metrics["pass_at_1"], metrics["strict_final_line"]) == (n, 1.0, 1.0)
    assert metrics["failures"] == {"correct": n, "no_answer": 0, "format_only": 0, "wrong_value": 0,
                                   "multiple_answers": 0, "conflicting_answers": 0}
    if HAS_SHARED:
        assert n == 1319


def test_eval_bench_prints_tables_and_compares_two_runs(tmp_path: Path) -> None:
    problems = load_split("test", FIXTURE)
    good = _write(tmp_path / "good.jsonl", [{"idx": p.idx, "completion": p.answer} for p in problems])
    bad = _write(tmp_path / "bad.jsonl", [{"question": p.question, "completion": "I do not know"} for p in problems])
    proc = subprocess.run(_bench_cmd("--completions", str(bad), "--compare", str(good), "--data", str(FIXTURE)),
                          capture_output=True, text=True, cwd=REPO, check=False, env={**os.environ, "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "pass@1 ± SE" in out and "0.0000 ± 0.0000" in out
    assert "no_answer" in out and "paired comparison" in out and "mcnemar_p" in out
    # 25 discordant pairs all one way: exact McNemar p = 2 / 2^25
    assert f"{2 / 2**25:.4f}" in out


def test_rrma_tui_headless_bench_gsm8k_eval(tmp_path: Path) -> None:
    """The same bench through the project CLI: `rrma-tui --headless bench gsm8k-eval --completions FILE`."""
    if importlib.util.find_spec("cli.main") is None:
        pytest.skip("cli/main.py (the rrma-tui CLI) is not present in this checkout")
    problems = load_split("test", FIXTURE)
    path = _write(tmp_path / "c.jsonl", [{"idx": p.idx, "completion": f"The answer is {p.gold}."} for p in problems])
    cmd = [sys.executable, "-m", "cli.main", "--headless", "bench", "gsm8k-eval", "--completions", str(path),
           "--data", str(FIXTURE), "--mode", "strict", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    # right values in the wrong format: strict mode calls every one of them format_only
    assert metrics["pass_at_1"] == 0.0 and metrics["failures"]["format_only"] == len(problems)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([], "give --completions FILE", id="nothing_to_score"),  # exit 2 with a usage line
        pytest.param(["--completions", "/nonexistent.jsonl"], "no such completions file", id="missing_file"),
    ],
)
def test_eval_bench_bad_input_exits_2(args: list[str], message: str) -> None:
    proc = subprocess.run(_bench_cmd(*args, "--data", str(FIXTURE)), capture_output=True, text=True, cwd=REPO,
                          check=False)
    assert proc.returncode == 2 and message in proc.stderr


# ----------------------------------------------------------------------------- generation


def test_transformers_backend_generates_greedily_with_the_chat_template(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    from oracle.gsm8k_gen import GenConfig, make_generator, render_prompts

    questions = [p.question for p in load_split("test", FIXTURE)[:3]]
    config = GenConfig(max_new_tokens=6, batch_size=2)
    prompts = render_prompts(AutoTokenizer.from_pretrained(tiny_model), questions, config)
    assert prompts[0].startswith("<|system|>\nSolve the problem step by step.") and prompts[0].endswith("<|assistant|>\n")
    gen = make_generator("transformers", tiny_model, config)
    first = gen.generate(questions)
    assert [len(s) for s in first] == [1, 1, 1] and all(isinstance(s[0], str) for s in first)
    assert gen.generate(questions) == first  # greedy: deterministic
    sampled = make_generator("transformers", tiny_model, GenConfig(max_new_tokens=4, num_samples=3, temperature=1.0))
    assert [len(s) for s in sampled.generate(questions[:2])] == [3, 3]


def test_transformers_backend_stops_at_the_stop_sequences(tiny_model: Path) -> None:
    """lm-eval style stop sequences: generation ends at the first one and the completion is the text
    before it (a base model going on with a made-up question is never graded on it)."""
    from oracle.gsm8k_gen import GenConfig, make_generator

    questions = [p.question for p in load_split("test", FIXTURE)[:2]]
    sampled = {"max_new_tokens": 24, "temperature": 1.0, "seed": 3}  # seeded: the same tokens until a stop
    free = make_generator("transformers", tiny_model, GenConfig(stop=(), **sampled)).generate(questions)  # type: ignore[arg-type]
    text = free[0][0]
    # a piece of what the random model wrote, first seen at i >= 3 (so the cut leaves a prefix)
    stop = next(text[i : i + 2] for i in range(3, len(text) - 2) if text[i : i + 2] not in text[: i + 1])
    stopped = make_generator("transformers", tiny_model, GenConfig(stop=(stop,), **sampled)).generate(questions)  # type: ignore[arg-type]
    assert stopped[0][0] == text[: text.index(stop)] and len(stopped[0][0]) >= 3  # cut before the stop string
    assert GenConfig().stop[0] == "\nQuestion:"


def test_generation_errors_are_specific(tmp_path: Path) -> None:
    from oracle.gsm8k_gen import GenConfig, GenerationError, make_generator

    with pytest.raises(GenerationError, match="does not exist"):
        make_generator("transformers", tmp_path / "missing", GenConfig())
    with pytest.raises(GenerationError, match="unknown generation backend 'tgi'"):
        make_generator("tgi", tmp_path, GenConfig())


@pytest.mark.gpu
def test_vllm_backend_on_a_gpu(tiny_model: Path) -> None:
    from oracle.gsm8k_gen import GenConfig, make_generator, vllm_available

    if not vllm_available():
        pytest.skip("needs vLLM installed and a CUDA GPU (pip install 'rrma[gpu]')")
    questions = [p.question for p in load_split("test", FIXTURE)[:4]]
    out = make_generator("vllm", tiny_model, GenConfig(max_new_tokens=8)).generate(questions)
    hf = make_generator("transformers", tiny_model, GenConfig(max_new_tokens=8)).generate(questions)
    assert [len(s) for s in out] == [1, 1, 1, 1]
    assert sum(a == b for a, b in zip(out, hf, strict=True)) >= 2  # greedy on both; kernels may differ


@pytest.mark.slow  # two child processes importing torch: ~10 s on an idle core
def test_eval_oracle_scores_a_model_in_a_child_process(tmp_path: Path, tiny_model: Path) -> None:
    oracle = make_oracle("gsm8k-eval", {"data": str(FIXTURE), "model": str(tiny_model), "limit": 4,
                                        "backend": "transformers", "gen": {"max_new_tokens": 8}})
    seen: list[dict[str, Any]] = []
    out = oracle.evaluate(ctx_for(tmp_path / "t1", progress=seen.append))
    assert out.status == Status.ok, out.feedback
    assert out.metrics["completions"] == 4 and out.score is not None
    assert seen and seen[-1] == {"phase": "eval", "generated": 4, "of": 4}


# ----------------------------------------------------------------------------- gsm8k-recipe

COPY_RECIPE = """
import argparse, shutil, sys
p = argparse.ArgumentParser()
for flag in ("--base-model", "--train-data", "--output-dir", "--seed"):
    p.add_argument(flag)
a = p.parse_args()
rows = open(a.train_data).read().splitlines()
print('progress: {"step": 1, "loss": 0.5, "train_rows": %d}' % len(rows), flush=True)
shutil.copytree(a.base_model, a.output_dir)
# trying to game the score: none of this is read by the oracle
print("pass_at_1: 1.0")
open("completions.jsonl", "w").write("")
open("oracle_eval.json", "w").write('{"metrics": {"pass_at_1": 1.0}}')
"""


EVAL_S = 100  # seconds of each recipe trial's budget kept for the oracle's evaluation


def _recipe_oracle(**params: Any) -> Any:
    base = {"data": str(FIXTURE), "eval_limit": 5, "backend": "transformers", "gen": {"max_new_tokens": 8},
            "eval_seconds": EVAL_S}
    return make_oracle("gsm8k-recipe", {**base, **params}, metric="pass_at_1", direction="maximize")


def _trial(root: Path, name: str, recipe: str) -> Path:
    trial = root / "trials" / name
    trial.mkdir(parents=True)
    (trial / "recipe.py").write_text(recipe)
    return trial


@pytest.mark.slow  # recipe child + evaluation child importing torch: ~10 s on an idle core
def test_recipe_oracle_owns_the_evaluation(tmp_path: Path) -> None:
    oracle = _recipe_oracle()
    facts = oracle.prepare(tmp_path, tmp_path)
    assert facts["eval_split"] == "dev" and facts["eval_questions"] == 5
    train_file = tmp_path / "gsm8k" / "train.jsonl"
    given = [json.loads(line) for line in train_file.read_text().splitlines()]
    held = {question_key(p.question) for p in [*load_split("dev", FIXTURE), *load_split("test", FIXTURE)]}
    assert given and not any(question_key(r["question"]) in held for r in given)  # the split guard
    seen: list[dict[str, Any]] = []
    oracle_dir = tmp_path / "oracle-t1"
    oracle_dir.mkdir()
    out = oracle.evaluate(ctx_for(_trial(tmp_path, "t1", COPY_RECIPE), seconds=EVAL_S + 60, progress=seen.append,
                                  oracle_dir=oracle_dir))
    assert out.status == Status.ok, out.feedback
    # the untrained random model gets nothing right whatever the recipe printed or wrote
    assert out.score == 0.0 and out.metrics["completions"] == 5
    assert {"phase": "train", "step": 1, "loss": 0.5, "train_rows": len(given)} in seen
    # the oracle's record is in its own directory; the recipe's forged one is left as it wrote it
    assert json.loads((oracle_dir / "oracle_eval.json").read_text())["metrics"]["pass_at_1"] == 0.0
    assert json.loads((tmp_path / "trials" / "t1" / "oracle_eval.json").read_text())["metrics"]["pass_at_1"] == 1.0
    # the questions the scorer read and the completions it wrote were in the oracle's directory, and are gone
    assert sorted(p.name for p in oracle_dir.iterdir()) == ["oracle_eval.json"]


PEEKING_RECIPE = COPY_RECIPE + """
import errno, os
def peek(name, path, mode):
    try:
        with open(path, mode) as fh:
            print("PEEK", name, len(fh.read()) if "r" == mode else "writable", flush=True)
    except OSError as exc:
        print("PEEK", name, errno.errorcode[exc.errno], flush=True)
try:
    print("PEEK data_dir", len(os.listdir(DATA)), flush=True)
except OSError as exc:
    print("PEEK data_dir", errno.errorcode[exc.errno], flush=True)
peek("test_split", os.path.join(DATA, "test.jsonl"), "r")
peek("train_file", a.train_data, "a")
"""


@pytest.mark.slow
@pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                    reason=f"file-system guard unavailable here: {sandbox.unavailable_reason()}")
def test_guarded_recipe_cannot_read_held_out_data_or_rewrite_its_train_file(tmp_path: Path) -> None:
    oracle = _recipe_oracle()
    oracle.prepare(tmp_path, tmp_path)
    trial = _trial(tmp_path, "t1", PEEKING_RECIPE.replace("DATA", repr(str(FIXTURE))))
    ctx = ctx_for(trial, seconds=EVAL_S + 60, guard=Policy.for_trial(trial, protect=(tmp_path / "gsm8k",)))
    out = oracle.evaluate(ctx)
    assert out.status == Status.ok, out.feedback
    seen = [line.split()[1:] for line in out.log.splitlines() if line.startswith("PEEK")]
    # the data directory is an empty tmpfs to the recipe (or, where the sandbox shows only what it names,
    # not there at all); the train file it was given is read-only (mode 0444, and with no capability
    # root cannot override that: EACCES before EROFS)
    assert seen[0] in (["data_dir", "0"], ["data_dir", "ENOENT"]) and seen[1] == ["test_split", "ENOENT"]
    assert seen[2][0] == "train_file" and seen[2][1] in ("EACCES", "EROFS")
    assert (FIXTURE / "test.jsonl").is_file() and out.score == 0.0  # the oracle still evaluated on it


@pytest.mark.parametrize(
    ("recipe", "status", "message"),
    [
        pytest.param("raise SystemExit('bad hyperparameters')", Status.crash, "exit code 1", id="crash"),
        pytest.param("import time\ntime.sleep(60)", Status.timeout, "wall clock", id="timeout"),
        pytest.param("print('done')", Status.crash, "wrote no model", id="no_model"),
    ],
)
def test_recipe_failures_are_labelled(tmp_path: Path, recipe: str, status: Status, message: str) -> None:
    oracle = _recipe_oracle()
    out = oracle.evaluate(ctx_for(_trial(tmp_path, "t1", recipe), seconds=EVAL_S + 3))  # the recipe gets 3 s
    assert out.status == status and message in out.feedback


def test_recipe_budget_must_leave_room_for_the_evaluation(tmp_path: Path) -> None:
    with pytest.raises(OracleError, match=r"trial_seconds \(50\) must exceed the oracle's eval_seconds \(100\)"):
        _recipe_oracle().evaluate(ctx_for(_trial(tmp_path, "t1", "print(1)"), seconds=50))


def test_recipe_oracle_refuses_to_evaluate_on_train() -> None:
    with pytest.raises(OracleError, match="'eval_split' must be dev or test"):
        _recipe_oracle(eval_split="train")


@pytest.mark.slow
def test_recipe_smoke_run_grpo_on_cpu(tmp_path: Path) -> None:
    """The bench's own recipe: two TRL GRPO steps on the CPU with the tiny random model."""
    pytest.importorskip("trl", reason="the recipe bench needs TRL (the gpu extra)")
    oracle = _recipe_oracle(train_limit=16, recipe_args=["--max-steps", "2", "--max-completion-length", "8"])
    oracle.prepare(tmp_path, tmp_path)
    seen: list[dict[str, Any]] = []
    out = oracle.evaluate(ctx_for(_trial(tmp_path, "t1", RECIPE.read_text()), seconds=EVAL_S + 280, memory_mb=6144,
                                  progress=seen.append))
    assert out.status == Status.ok, out.feedback + out.log[-3000:]
    steps = [s["step"] for s in seen if s.get("phase") == "train" and "loss" in s]
    assert steps == [1, 2]
    assert out.metrics["completions"] == 5 and 0.0 <= out.score <= 1.0


# ----------------------------------------------------------------------------- gsm8k-prompt


class _ChatServer:
    """A local server speaking the OpenAI /v1/chat/completions and Anthropic /v1/messages JSON.

    It answers correctly (in the '#### N' format) only when the system prompt asks for '####',
    so the score depends on the prompt under test.
    """

    def __init__(self, golds: dict[str, str], fail: bool = False, ranks: dict[str, int] | None = None,
                 continues: bool = False) -> None:
        self.golds = golds
        self.fail = fail
        self.ranks = ranks  # question -> rank: with a prompt "N=k", the k first questions are answered right
        self.continues = continues  # go on with a made-up question, unless the request's stop ends it
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization"),
                                        "x-api-key": self.headers.get("x-api-key")})
                if server.fail:
                    self._send(500, {"error": {"message": "model overloaded", "type": "server_error"}})
                    return
                if self.path == "/v1/chat/completions":
                    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
                    question = body["messages"][-1]["content"]
                else:
                    system, question = body.get("system", ""), body["messages"][-1]["content"]
                gold = server.golds[question]
                text = f"Let me think.\n#### {gold}" if "####" in system else "I am not sure, maybe 0.5."
                if server.ranks is not None:
                    right = server.ranks[question] < int(system.split("N=")[1].split()[0])
                    text = f"So the total is {gold if right else -1}.\n#### {gold if right else -1}"
                if server.continues:  # a base model going on; a real server cuts at the first stop string
                    text += "\nQuestion: What is 2 + 2?\nAnswer: 2 + 2 = 4\n#### 4"
                    for stop in body.get("stop") or body.get("stop_sequences") or []:
                        text = text.split(stop)[0]
                if self.path == "/v1/chat/completions":
                    self._send(200, {
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": body["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop", "logprobs": None}],
                        "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
                    })
                else:
                    self._send(200, {
                        "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                        "stop_sequence": None, "usage": {"input_tokens": 20, "output_tokens": 7},
                    })

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chat_server() -> Iterator[_ChatServer]:
    golds = {p.question: p.gold for p in load_split("dev", FIXTURE)}
    server = _ChatServer(golds)
    yield server
    server.close()


def _prompt_trial(root: Path, name: str, prompt: str) -> Path:
    trial = root / name
    trial.mkdir()
    (trial / "system_prompt.txt").write_text(prompt)
    return trial


def test_prompt_oracle_scores_prompts_through_an_openai_endpoint(tmp_path: Path, chat_server: _ChatServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    oracle = make_oracle("gsm8k-prompt", {"data": str(FIXTURE), "limit": 6, "model": "local-model",
                                          "base_url": chat_server.url + "/v1", "max_retries": 1},
                         metric="pass_at_1", direction="maximize")
    facts = oracle.prepare(tmp_path, tmp_path)
    assert facts["questions"] == 6 and facts["model"] == "local-model"
    good = oracle.evaluate(ctx_for(_prompt_trial(tmp_path, "good", "Finish with '#### <number>'.")))
    bad = oracle.evaluate(ctx_for(_prompt_trial(tmp_path, "bad", "Be brief.")))
    assert good.status == bad.status == Status.ok
    assert (good.metrics["endpoint_errors"], bad.metrics["endpoint_errors"]) == (0, 0)
    assert (good.score, bad.score) == (1.0, 0.0)
    assert bad.metrics["failures"]["wrong_value"] == 6  # "maybe 0.5" is a wrong value for every question
    assert good.metrics["tokens_in"] == 6 * 20 and good.metrics["strict_final_line"] == 1.0
    first = chat_server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer EMPTY"
    assert first["body"]["model"] == "local-model" and first["body"]["temperature"] == 0.0
    assert [m["role"] for m in first["body"]["messages"]] == ["system", "user"]
    oracle.close()


def test_prompt_oracle_through_an_anthropic_endpoint(tmp_path: Path, chat_server: _ChatServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    oracle = make_oracle("gsm8k-prompt", {"provider": "anthropic", "data": str(FIXTURE), "limit": 3,
                                          "model": "claude-test", "base_url": chat_server.url, "max_retries": 0})
    out = oracle.evaluate(ctx_for(_prompt_trial(tmp_path, "t", "End with '#### N'.")))
    assert out.status == Status.ok and out.score == 1.0
    req = chat_server.requests[0]
    assert req["path"] == "/v1/messages"
    # the key travels as x-api-key or as a bearer token, depending on the SDK version
    assert req["x-api-key"] == "test-key" or req["auth"] == "Bearer test-key"
    assert req["body"]["system"] == "End with '#### N'."


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_prompt_oracle_sends_stop_sequences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    """A model that goes on with a made-up question is stopped there (lm-eval's 'Question:' stop)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    golds = {p.question: p.gold for p in load_split("dev", FIXTURE)}
    server = _ChatServer(golds, continues=True)
    suffix = "/v1" if provider == "openai" else ""
    try:
        stopped = make_oracle("gsm8k-prompt", {"provider": provider, "data": str(FIXTURE), "limit": 3, "model": "m",
                                               "base_url": server.url + suffix, "max_retries": 0})
        out = stopped.evaluate(ctx_for(_prompt_trial(tmp_path, "t", "End with '#### N'.")))
        sent = server.requests[-1]["body"]
        with pytest.raises(OracleError, match="at most 4 non-blank strings"):
            make_oracle("gsm8k-prompt", {"provider": provider, "data": str(FIXTURE), "model": "m", "stop": [" "]})
    finally:
        server.close()
    assert (sent.get("stop") or sent.get("stop_sequences")) == ["\nQuestion:"]
    assert out.score == 1.0 and out.metrics["trailing_text"] == 0.0  # nothing of the made-up question is left


def test_a_gain_promotes_only_when_mcnemar_says_it_is_real(tmp_path: Path) -> None:
    """Issue 14: one baseline repeat gave sigma 0 and 'promotion needs 0': 0.52 -> 0.62 on 50 questions
    (5 questions gained, none lost: McNemar p = 0.0625) promoted. The paired test on the oracle's
    per-question scores now decides; a gain of 14 questions (p < 0.001) is promoted."""
    from rrma.contracts import Agent, Context
    from rrma.run.loop import start_run
    from rrma.task import AgentConfig, load_task
    from rrma.trial import FileEdit

    problems = subset(load_split("train", FIXTURE), 50)
    golds = {p.question: p.gold for p in problems}
    server = _ChatServer(golds, ranks={p.question: i for i, p in enumerate(sorted(problems, key=lambda p: p.idx))})
    task = load_task(REPO / "benches" / "gsm8k_prompt" / "task.yaml", {
        "oracle.params.base_url": server.url + "/v1", "oracle.params.data": str(FIXTURE), "oracle.params.split": "train",
        "oracle.params.limit": 50, "oracle.params.model": "local-model", "budget.max_trials": 2,
        "agents": [{"name": "scripted", "backend": "random-search"}],
    })
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "system_prompt.txt").write_text("N=26 questions right")
    task.workspace.source = str(tmp_path / "ws")

    class Prompts(Agent):
        def __init__(self) -> None:
            super().__init__(AgentConfig(name="scripted"), task)
            self.queue = ["N=31 questions right", "N=40 questions right"]

        def propose(self, ctx: Context) -> Proposal | None:
            text = self.queue.pop(0) if self.queue else None
            return None if text is None else Proposal(hypothesis=text, edits=[FileEdit(path="system_prompt.txt",
                                                                                         content=text)])

    try:
        result = start_run(task, tmp_path / "runs", agents=[Prompts()])
    finally:
        server.close()
    state = result.state
    base, small, large = state.trials["base-0"], state.trials["t0001"], state.trials["t0002"]
    assert (base.score, small.score, large.score) == (0.52, 0.62, 0.8)
    assert state.floor == 0.0  # one baseline repeat: the baseline alone would promote any gain
    assert not small.promoted and small.floor_source == "McNemar p=0.0625"
    assert large.promoted and large.floor_source is not None and large.floor_source.startswith("McNemar p=0.000")
    assert small.metrics["item_scores"] == "1" * 31 + "0" * 19 and small.metrics["score_se"] > 0


def test_prompt_oracle_without_endpoint_or_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    oracle = make_oracle("gsm8k-prompt", {"data": str(FIXTURE), "model": "m"})
    with pytest.raises(OracleError, match=r"no endpoint: set OPENAI_BASE_URL .* or set OPENAI_API_KEY"):
        oracle.prepare(Path("."), Path("."))
    anthropic = make_oracle("gsm8k-prompt", {"provider": "anthropic", "data": str(FIXTURE), "model": "m"})
    with pytest.raises(OracleError, match="set ANTHROPIC_API_KEY to an API key"):
        anthropic.prepare(Path("."), Path("."))
    with pytest.raises(OracleError, match="needs oracle param 'model'"):
        make_oracle("gsm8k-prompt", {"data": str(FIXTURE), "base_url": "http://x"}).prepare(Path("."), Path("."))


def test_prompt_oracle_endpoint_failures_crash_with_the_server_message(tmp_path: Path) -> None:
    server = _ChatServer({}, fail=True)
    try:
        oracle = make_oracle("gsm8k-prompt", {"data": str(FIXTURE), "limit": 2, "model": "m",
                                              "base_url": server.url + "/v1", "max_retries": 0})
        out = oracle.evaluate(ctx_for(_prompt_trial(tmp_path, "t", "x")))
    finally:
        server.close()
    assert out.status == Status.crash and "2/2 endpoint calls failed" in out.feedback
    assert "model overloaded" in out.feedback


def test_prompt_oracle_refuses_an_oversized_prompt(tmp_path: Path) -> None:
    oracle = make_oracle("gsm8k-prompt", {"data": str(FIXTURE), "model": "m", "base_url": "http://127.0.0.1:9",
                                          "max_prompt_chars": 10})
    out = oracle.evaluate(ctx_for(_prompt_trial(tmp_path, "t", "x" * 11)))
    assert out.status == Status.invalid and "limit is 10" in out.feedback


def test_prompt_bench_through_the_research_loop(tmp_path: Path, chat_server: _ChatServer) -> None:
    """benches/gsm8k_prompt/task.yaml through rrma.run.loop.start_run, with a scripted agent and the local server."""
    loop = pytest.importorskip("rrma.run.loop", reason="rrma/run/loop.py (the research loop) is not present")
    from rrma.contracts import Agent, Context
    from rrma.task import AgentConfig, load_task
    from rrma.trial import FileEdit

    task = load_task(REPO / "benches" / "gsm8k_prompt" / "task.yaml", {
        "oracle.params.base_url": chat_server.url + "/v1", "oracle.params.data": str(FIXTURE),
        "oracle.params.limit": 4, "oracle.params.model": "local-model", "budget.max_trials": 1,
        "agents": [{"name": "scripted", "backend": "random-search"}],
    })

    class DropTheFormat(Agent):
        def propose(self, ctx: Context) -> Proposal | None:
            return Proposal(hypothesis="a shorter prompt", edits=[FileEdit(path="system_prompt.txt", content="Be brief.")])

    agent = DropTheFormat(AgentConfig(name="scripted"), task)
    result = loop.start_run(task, tmp_path / "runs", agents=[agent])
    assert result.ok, result.reason
    rows = (result.run_dir / "results.tsv").read_text().splitlines()[1:]
    scores = {row.split("\t")[0]: row.split("\t")[4] for row in rows}
    # the bench's own prompt asks for '#### N' (the server then answers right); the edit drops it
    assert scores == {"base-0": "1", "t0001": "0"}


def test_eval_bench_scores_a_model(tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benches.gsm8k_eval import bench

    code = bench.main(["--model", str(tiny_model), "--backend-gen", "transformers", "--data", str(FIXTURE),
                       "--limit", "3", "--max-new-tokens", "4", "--json"])
    assert code == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["questions"] == 3 and metrics["completions"] == 3


class _FileServer:
    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_download_validates_and_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import oracle.gsm8k_data as data

    server = _FileServer((FIXTURE / "test.jsonl").read_bytes())
    monkeypatch.setattr(data, "PUBLIC_URL", server.url + "/{split}.jsonl")
    monkeypatch.setattr(data, "shared_dir", lambda: tmp_path / "no-shared")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        with pytest.raises(DataError, match="allow a download"):
            load_split("test")  # nothing local and no permission to download
        problems = load_split("test", download=True)
    finally:
        server.close()
    assert len(problems) == 25
    assert (tmp_path / "cache" / "rrma" / "gsm8k" / "test.jsonl").is_file()
    assert load_split("test") == problems  # now served from the cache, offline


def test_download_of_garbage_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import oracle.gsm8k_data as data

    server = _FileServer(b"<html>rate limited</html>\n")
    monkeypatch.setattr(data, "PUBLIC_URL", server.url + "/{split}.jsonl")
    monkeypatch.setattr(data, "HF_DATASET", ("/nonexistent/local/dataset", "main"))  # fallback fails fast, offline
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        with pytest.raises(DataError, match=r"could not download GSM8K test: .*test\.part:1: not valid JSON"):
            data.fetch("test", tmp_path / "cache")
    finally:
        server.close()
    assert not (tmp_path / "cache" / "test.jsonl").exists() and not (tmp_path / "cache" / "test.part").exists()


def test_recipe_oracle_with_one_train_file_carves_dev_from_it(tmp_path: Path) -> None:
    oracle = _recipe_oracle(data=str(FIXTURE / "train.jsonl"), base_model=str(tmp_path / "some-model"))
    facts = oracle.prepare(tmp_path, tmp_path)
    # 60 problems: 30 dev (held out, 5 scored) and 30 for the recipe; no test part in one file
    assert (facts["train_problems"], facts["eval_questions"]) == (30, 5)
    assert facts["base_model"] == str(tmp_path / "some-model")
