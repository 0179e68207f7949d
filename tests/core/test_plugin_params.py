"""The built-in plug-ins' own params models: a misspelt key of ``oracle.params`` (``agents[].params``) is refused
when the task is loaded, in one line naming the field, instead of being read by nobody (the run going on with
the default). Each case also loads the task with every key its plug-in reads, and shows the check is the
declaration's: with the plug-in's ``params_model`` switched off, the misspelt task loads.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from rrma.registry import resolve_agent, resolve_oracle
from rrma.task import TaskConfig, TaskError, load_task, task_from_dict
from rrma.task_schema import plugin_schema_table

REPO = Path(__file__).resolve().parents[2]

# kind -> (every key the oracle reads, with a value of the type it takes; a misspelt key; metric)
ORACLE_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "lean": ({"project": "lean_project", "source": "a.lean", "sources": ["a.lean"], "theorems": ["t"],
              "mode": "repl", "pool_size": 2, "max_commands": 50, "memory_mb": 2048, "timeout_s": 30},
             "timeout", "proved"),
    "coq": ({"sources": ["a.v"], "source": "a.v", "theorems": ["t"], "setting": "library",
             "preload": "From Hammer Require Import Tactics.", "warm": False, "pool_size": 2,
             "allowed_axioms": ["classic"], "coq_args": ["-Q", "d", "D"], "timeout_s": 30},
            "pool-size", "solved"),
    "gsm8k-eval": ({"completions": "c.jsonl", "model": "m", "data": "d", "download": True, "split": "dev",
                    "limit": 5, "subset_seed": 1, "mode": "strict", "answer_format": "boxed", "backend": "transformers",
                    "gen": {"max_new_tokens": 64, "temperature": 0.5}, "system_prompt": "Answer."},
                   "limt", "pass_at_1"),
    "gsm8k-recipe": ({"base_model": "tiny-random", "data": "d", "download": False, "train_limit": 10,
                      "eval_split": "test", "eval_limit": 20, "eval_subset_seed": 3, "mode": "lenient",
                      "answer_format": "hash", "backend": "auto", "gen": {"batch_size": 4}, "eval_seconds": 60,
                      "eval_memory_mb": 4096, "recipe": "recipe.py", "recipe_args": ["--epochs", 1],
                      "output_dir": "out"},
                     "eval_limt", "pass_at_1"),
    "gsm8k-prompt": ({"provider": "local", "model": "smollm2", "base_url": "http://localhost:1", "api_key_env": "K",
                      "prompt_file": "p.txt", "data": "d", "download": False, "split": "dev", "limit": 10,
                      "subset_seed": 2, "mode": "strict", "answer_format": "hash", "max_tokens": 64,
                      "temperature": 0.2, "concurrency": 2, "timeout_s": 5, "max_retries": 0,
                      "max_prompt_chars": 100, "stop": ["\nQ:"]},
                     "max_token", "pass_at_1"),
    "autoresearch": ({"time_budget": 5, "data": "stdlib", "cache_dir": "cache", "seq_len": 64, "eval_tokens": 1024, "threads": 1,
                      "device": "cpu", "eval_seconds": 30, "progress_every_s": 1, "early_abort": True,
                      "abort_alpha": 0.1, "abort_misfit": 0.5, "abort_looks": [0.5]},
                     "time_budjet", "val_bpb"),
}


def task_file(tmp_path: Path, kind: str, params: dict[str, Any], metric: str) -> Path:
    (tmp_path / "workspace").mkdir(exist_ok=True)
    direction = "minimize" if kind == "autoresearch" else "maximize"
    task = {"name": "t", "workspace": {"source": "workspace"}, "oracle": {"kind": kind, "params": params},
            "metric": {"name": metric, "direction": direction}}
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    return path


def one_line(info: pytest.ExceptionInfo[TaskError]) -> str:
    (line,) = str(info.value).splitlines()
    return line


def oracle_cls(kind: str) -> Any:
    return resolve_oracle(kind)


@pytest.mark.parametrize("kind", sorted(ORACLE_CASES))
def test_a_misspelt_oracle_param_is_refused_at_load_naming_the_field(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    every, misspelt, metric = ORACLE_CASES[kind]
    assert set(every) == set(oracle_cls(kind).params_model.model_fields)  # the case covers every key
    task = load_task(task_file(tmp_path, kind, every, metric))
    assert task.oracle.params == every  # kept as written (part of the cache key)
    path = task_file(tmp_path, kind, {**every, misspelt: 1}, metric)
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info).startswith(f"{path}: oracle.params.{misspelt}: ")
    # the defence off (no params model declared): the misspelt key loads, read by nobody
    monkeypatch.setattr(oracle_cls(kind), "params_model", None)
    assert misspelt in load_task(path).oracle.params


@pytest.mark.parametrize(("kind", "key", "value"), [
    ("lean", "mode", "fast"),
    ("coq", "setting", "open"),
    ("gsm8k-eval", "limit", "5"),  # the oracle's own check wants an int, not a string
    ("gsm8k-eval", "gen", {"max_tokens": 5}),  # a GenConfig field misspelt inside gen
    ("gsm8k-recipe", "eval_split", "train"),  # the model is never graded on what it trained on
    ("gsm8k-prompt", "stop", ["a", "b", "c", "d", "e"]),
    ("gsm8k-prompt", "stop", [" "]),
    ("gsm8k-prompt", "provider", "gemini"),
    ("autoresearch", "threads", 0),
])
def test_a_wrong_value_is_refused_at_load_naming_the_field(kind: str, key: str, value: Any, tmp_path: Path) -> None:
    every, _misspelt, metric = ORACLE_CASES[kind]
    path = task_file(tmp_path, kind, {**every, key: value}, metric)
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info).startswith(f"{path}: oracle.params.{key}")


@pytest.mark.parametrize("kind", sorted(ORACLE_CASES))
def test_no_params_loads_and_the_oracle_still_builds(kind: str, tmp_path: Path) -> None:
    """The defaults are what the oracle uses when a key is absent: a task without params loads."""
    _every, _misspelt, metric = ORACLE_CASES[kind]
    assert load_task(task_file(tmp_path, kind, {}, metric)).oracle.params == {}


def test_every_task_file_of_the_benches_loads() -> None:
    found = [p for p in sorted((REPO / "benches").rglob("*.yaml")) if "oracle" in (yaml.safe_load(p.read_text()) or {})]
    assert len(found) >= 8
    for path in found:
        load_task(path)


def test_task_schema_lists_the_builtins_params() -> None:
    owners = [row[0] for row in plugin_schema_table() if ".params." in row[1]]
    listed = {(owner.split(" ", 1)[0], name) for owner in owners for name in owner.split(" ", 1)[1].split(", ")}
    assert {("oracle", kind) for kind in ORACLE_CASES} <= listed
    assert {("agent", backend) for backend in AGENT_CASES} <= listed


# the keys the loop every LLM backend runs reads (agents/llm/), each with a value of the type it takes
LLM_LOOP: dict[str, Any] = {"max_steps": 6, "attempts": 1, "stream": True, "retry_attempts": 2, "retry_base_s": 0.01,
                            "retry_max_s": 0.05, "timeout_s": 30, "max_file_chars": 1000, "memory": 4,
                            "price": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}, "api_key_env": "MY_KEY",
                            "api_key": None, "role_prompt": "tune the optimiser", "edit_lines": ["^LEARNING_RATE\\s*="]}
# backend -> (every key the agent reads, with a value of the type it takes; a misspelt key)
AGENT_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "proof-search": ({"seconds": 5, "max_checks": 100, "tactic_seconds": 1, "library": False, "hammer": True,
                      "hammer_seconds": 2, "hammer_share": 0.5, "hammer_beside": False, "search_beside": True,
                      "portfolio": False,
                      "tree_limit": 50,
                      "coq_args": ["-Q", "d", "D"],
                      "preload": "Require Import Arith.", "allowed_axioms": ["classic"], "lean_project": "lp",
                      "lean_backend": "dojo", "llm": "anthropic", "llm_model": "m", "llm_calls": 2, "learn": False,
                      "library_tactics": False, "library_index": "idx", "again": False},
                     "max_check"),
    "policy": ({"device": "cuda:1", "dtype": "bfloat16", "temperature": 0.5, "top_p": 0.9, "top_k": 5,
                "max_new_tokens": 32, "max_prompt_tokens": 512, "base_model": "b"},
               "temprature"),
    "local": ({"device": "cpu", "dtype": "float32", "temperature": 0, "top_p": 1, "top_k": 0, "max_new_tokens": 16,
               "max_prompt_tokens": 256, "base_model": "b", "stop": ["\n\n"], "grammar": False, "example": False},
              "gramar"),
    # hammer, hammer_seconds: unused, taken so that runs recorded with them (the coq bench's --hammer) resume
    "tactic-portfolio": ({"max_depth": 3, "hammer": True, "hammer_seconds": 2}, "max_dept"),
    "anthropic": ({**LLM_LOOP, "cache": False, "send_temperature": True, "anthropic_version": "2023-06-01"},
                  "max_step"),
    "openai": ({**LLM_LOOP, "max_tokens_field": "max_completion_tokens", "stream_usage": False, "require_key": True,
                "seed": 7}, "max_token_field"),
}


def agent_task_file(tmp_path: Path, backend: str, params: dict[str, Any]) -> Path:
    (tmp_path / "workspace").mkdir(exist_ok=True)
    task = {"name": "t", "workspace": {"source": "workspace"}, "oracle": {"kind": "noop"},
            "metric": {"name": "score"}, "agents": [{"name": "a", "backend": backend, "model": "m", "params": params}]}
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task))
    return path


@pytest.mark.parametrize("backend", sorted(AGENT_CASES))
def test_a_misspelt_agent_param_is_refused_at_load_naming_the_field(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    every, misspelt = AGENT_CASES[backend]
    cls = resolve_agent(backend)
    assert set(every) == set(cls.params_model.model_fields)  # the case covers every key
    assert load_task(agent_task_file(tmp_path, backend, every)).agents[0].params == every
    path = agent_task_file(tmp_path, backend, {**every, misspelt: 1})
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info).startswith(f"{path}: agents.0.params.{misspelt}: ")
    monkeypatch.setattr(cls, "params_model", None)  # the defence off: the misspelt key loads
    assert misspelt in load_task(path).agents[0].params


def test_the_policy_backends_models_take_the_keys_their_own_check_knows() -> None:
    """The policy and local agents refuse unknown keys when built (params_known): the load-time model agrees."""
    for backend in ("policy", "local"):
        cls = resolve_agent(backend)
        assert set(cls.params_model.model_fields) == set(cls.params_known), backend


@pytest.mark.parametrize(("backend", "key", "value"), [
    ("policy", "top_p", 0),  # the agent's own bound: > 0 and <= 1
    ("policy", "device", "tpu"),
    ("policy", "dtype", "int8"),
    ("local", "stop", [""]),
    ("local", "grammar", "yes"),  # the agent wants true or false
    ("proof-search", "lean_backend", "dojoo"),
])
def test_a_wrong_agent_value_is_refused_at_load(backend: str, key: str, value: Any, tmp_path: Path) -> None:
    every, _misspelt = AGENT_CASES[backend]
    path = agent_task_file(tmp_path, backend, {**every, key: value})
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info).startswith(f"{path}: agents.0.params.{key}")


# ----------------------------------------------------------------------------- tactic-portfolio and the coq bench's --hammer

def _coq_bench_tasks(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> list[TaskConfig]:
    """The tasks ``bench coq ARGV`` builds (one per --agent), its runs replaced by the task building alone."""
    import argparse

    import benches.proofs
    from benches.coq import bench

    built: list[TaskConfig] = []

    def build_only(args: argparse.Namespace, selected: Any, bench_name: str, oracle_kind: str,
                   oracle_params: dict[str, Any], checker: Any, base_dir: Path | None) -> tuple[int, None]:
        built.append(benches.proofs.bench_task(args, selected, bench_name, oracle_kind=oracle_kind,
                                               oracle_params=oracle_params, base_dir=base_dir))
        return 0, None

    monkeypatch.setattr(benches.proofs, "_run_once", build_only)
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    parser.add_argument("--backend")  # the CLI's option (cli/parser.py), as `python -m benches.coq.bench` has it
    assert bench.run(parser.parse_args(["--limit", "1", *argv])) == 0
    return built


@pytest.mark.skipif(shutil.which("coqc") is None, reason="Coq is not installed (Debian: apt-get install coq)")
def test_the_coq_bench_gives_hammer_settings_only_to_the_search_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    portfolio, search = _coq_bench_tasks(monkeypatch, ["--agent", "portfolio", "--agent", "search", "--hammer",
                                                      "--hammer-seconds", "3"])
    assert [a.backend for a in portfolio.agents] == ["tactic-portfolio"] * 2
    assert all(a.params == {} for a in portfolio.agents)
    assert [a.params for a in search.agents] == [{"hammer": True, "hammer_seconds": 3.0}]
    assert "Hammer" in search.oracle.params["preload"]
    (portfolio,) = _coq_bench_tasks(monkeypatch, ["--agent", "portfolio", "--hammer"])
    assert portfolio.agents[0].backend == "tactic-portfolio" and portfolio.agents[0].params == {}


@pytest.mark.skipif(shutil.which("coqc") is None, reason="Coq is not installed (Debian: apt-get install coq)")
def test_the_coq_bench_default_is_the_search_with_hammer_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --agent or --backend, `bench coq` runs the prover (one proof-search agent), with CoqHammer's tactics
    when they are installed; --no-hammer turns them off; --backend keeps the agents it names."""
    from benches.coq import bench

    (default,) = _coq_bench_tasks(monkeypatch, [])
    assert [a.backend for a in default.agents] == ["proof-search"]
    installed = bench.hammer_installed()
    assert default.agents[0].params == ({"hammer": True} if installed else {})
    assert ("Hammer" in str(default.oracle.params.get("preload", ""))) == installed
    (off,) = _coq_bench_tasks(monkeypatch, ["--no-hammer"])
    assert off.agents[0].backend == "proof-search" and off.agents[0].params == {} and "preload" not in off.oracle.params
    (named,) = _coq_bench_tasks(monkeypatch, ["--backend", "tactic-portfolio"])
    assert [a.backend for a in named.agents] == ["tactic-portfolio"] * 2 and "preload" not in named.oracle.params
    monkeypatch.setattr(bench, "coq_where", lambda: None)
    assert bench.hammer_installed() is False  # Coq cannot say where it lives: no CoqHammer, no exception


def test_a_portfolio_run_recorded_with_hammer_settings_still_loads() -> None:
    """Before the bench gave --hammer's settings only to proof-search, run.json held them for every agent: a resume
    rebuilds the task from that record (task_from_dict), and the portfolio's model takes them (unused)."""
    recorded = {"name": "bench-coq", "workspace": {"source": "no-workspace"}, "metric": {"name": "solved"},
                "oracle": {"kind": "coq", "params": {"sources": ["a.v"], "preload": "From Hammer Require Import Tactics."}},
                "agents": [{"name": f"tactic-portfolio-{i}", "backend": "tactic-portfolio",
                            "params": {"hammer": True, "hammer_seconds": 2.5}} for i in (1, 2)]}
    task = task_from_dict(recorded, source="run.json")
    assert [a.params for a in task.agents] == [{"hammer": True, "hammer_seconds": 2.5}] * 2
    with pytest.raises(TaskError, match=r"^run.json: agents.0.params.hamer: "):
        task_from_dict({**recorded, "agents": [{"backend": "tactic-portfolio", "params": {"hamer": True}}]},
                       source="run.json")


# ----------------------------------------------------------------------------- the LLM backends



def _keys_read(*files: str) -> set[str]:
    """The params keys these modules read: ``params.get("k")``, ``params["k"]``, ``"k" in params``."""
    found: set[str] = set()
    for name in files:
        text = (REPO / name).read_text()
        found |= set(re.findall(r"params(?: or \{\}\))?\.get\(\"(\w+)\"", text))
        found |= set(re.findall(r"params\[\"(\w+)\"\]", text))
        found |= set(re.findall(r"\"(\w+)\" in (?:self\.)?params\b", text))
    return found


def test_the_llm_models_take_every_key_their_agents_read() -> None:
    loop = _keys_read("agents/llm/agent.py", "agents/llm/costs.py", "agents/llm/tools.py")
    assert {"max_steps", "price", "api_key", "api_key_env", "retry_max_s"} <= loop  # the scan finds them
    for backend, module in (("anthropic", "agents/anthropic_agent.py"), ("openai", "agents/openai_agent.py")):
        read = loop | _keys_read(module)
        assert read == set(resolve_agent(backend).params_model.model_fields), backend


@pytest.mark.parametrize(("backend", "key", "value"), [
    ("anthropic", "edit_lines", ["^(LR"]),  # the agent's own check: each a regular expression
    ("anthropic", "stream", "false"),  # would read as true
    ("anthropic", "price", {"input": 3, "ouput": 15}),
    ("anthropic", "price", {"input": -1}),
    ("anthropic", "cache", "no"),
    ("openai", "max_tokens_field", "max_new_tokens"),
    ("openai", "seed", None),
    ("openai", "timeout_s", 0),
    ("tactic-portfolio", "max_depth", -1),
])
def test_a_wrong_llm_or_portfolio_value_is_refused_at_load(backend: str, key: str, value: Any, tmp_path: Path) -> None:
    every, _misspelt = AGENT_CASES[backend]
    path = agent_task_file(tmp_path, backend, {**every, key: value})
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info).startswith(f"{path}: agents.0.params.{key}")


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_an_api_key_in_the_task_is_still_refused_with_its_own_message(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model declares ``api_key`` so that the agent, built before a run directory exists, refuses it with the
    message that says why (the key would be copied into the log), not as an unknown field."""
    from rrma.plugins import make_agent
    from rrma.registry import AgentError

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    task = load_task(agent_task_file(tmp_path, backend, {"api_key": "sk-in-the-file"}))
    with pytest.raises(AgentError, match="do not put API keys in the task file"):
        make_agent(task.agents[0], task)
