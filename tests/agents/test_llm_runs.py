"""Run-level behaviour of the LLM agents: specialists, control arms, hard caps and the CLI switch.

All runs use the real SDKs against the local wire server and the real research loop, so what
is asserted is what a person would see in the run log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llm_fixtures import ANTHROPIC_KEY, FAST, OPENAI_KEY, REPO, demo_task
from llm_wire import Reply, WireServer, a_message, a_text, a_tool, o_completion
from specialists import specialist_task
from trace_check import agent_turns

from rrma.log.store import RunStore
from rrma.run.loop import start_run

PATH = "/v1/messages"


def edit(name: str, old: str, new: str, path: str = "objective.py") -> dict[str, Any]:
    return a_tool("edit_file", {"path": path, "replacements": [{"search": f"{name} = {old}",
                                                                "replace": f"{name} = {new}"}]})


def submit(hypothesis: str) -> dict[str, Any]:
    return a_tool("submit_trial", {"hypothesis": hypothesis, "expected_effect": "lower loss"})


# ----------------------------------------------------------------------------- specialists


def two_specialists(opt_url: str, arch_url: str) -> list[dict[str, Any]]:
    return [
        {"name": "opt", "backend": "anthropic", "model": "claude-haiku-test", "role": "optimizer",
         "editable": ["opt.py"], "base_url": opt_url, "params": FAST},
        {"name": "arch", "backend": "anthropic", "model": "claude-haiku-test", "role": "architecture",
         "editable": ["arch.py"], "base_url": arch_url, "params": FAST},
    ]


def test_specialists_share_blackboard_and_keep_to_their_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with WireServer() as opt, WireServer() as arch:
        opt.script(PATH, [
            a_message(edit("DEPTH", "1", "4", "arch.py")),  # outside its role: refused by the tool
            a_message(edit("LR", "0.1", "0.01", "opt.py"),
                      a_tool("post_insight", {"text": "LR 0.01 is where the optimiser wants to be"})),
            a_message(submit("LR 0.01")),
        ])
        # arch answers a second late so that the two submissions do not coincide: rrma.run.loop.run_trial can
        # give two simultaneous proposals the same trial id (reported to the lead; remove the delay once fixed)
        arch.script(PATH, [Reply(message=a_message(edit("DEPTH", "1", "4", "arch.py"))),
                           a_message(submit("DEPTH 4"))])
        result = start_run(specialist_task(tmp_path, two_specialists(opt.url, arch.url), max_trials=2),
                           tmp_path / "runs", run_id="spec")
        assert opt.remaining(PATH) == 0 and arch.remaining(PATH) == 0
        opt_system = opt.exchanges[0].body["system"][0]["text"]
        arch_system = arch.exchanges[0].body["system"][0]["text"]
    assert "the optimizer specialist" in opt_system and "Editable files: opt.py\n" in opt_system
    assert "the architecture specialist" in arch_system and "Editable files: arch.py\n" in arch_system
    events = RunStore(result.run_dir).scan().events
    refused = next(t for t in agent_turns(events, "opt") if t.role == "tool_result")
    assert refused.text == "error" and "arch.py: not an editable file" in refused.result
    by_agent = {e.data.agent: [x.path for x in e.data.edits] for e in events
                if e.kind == "trial.proposed" and not e.data.baseline}
    assert by_agent == {"opt": ["opt.py"], "arch": ["arch.py"]}
    assert {result.state.trials[t].status for t in ("t0001", "t0002")} == {"ok"}
    assert [p["agent"] for p in result.state.blackboard] == ["opt"]


def test_tree_policy_rebase_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the tree policy the agent can read another trial and branch from it instead of the best."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with WireServer() as server:
        server.script(PATH, [
            a_message(edit("X", "0.0", "1.7")), a_message(submit("X 1.7")),
            a_message(a_tool("read_file", {"path": "objective.py", "trial_id": "t0001", "start_line": 11,
                                           "end_line": 11}),
                      a_tool("rebase_to", {"trial_id": "base-0"})),
            a_message(edit("Y", "0.0", "-0.8")), a_message(submit("Y -0.8 from the baseline")),
        ])
        task = demo_task([{"name": "a", "backend": "anthropic", "model": "claude-sonnet-test", "base_url": server.url,
                           "params": FAST}], **{"loop.policy": "tree"})
        result = start_run(task, tmp_path, run_id="tree")
        assert "rebase_to" in {t["name"] for t in server.exchanges[0].body["tools"]}
        results = [b["content"] for b in server.exchanges[3].body["messages"][-1]["content"]]
    assert results[0].endswith("X = 1.7  # first coordinate, any real number\n")
    assert results[1] == "now building on base-0 (2 files)"  # objective.py and the scorer, score.py
    t1, t2 = result.state.trials["t0001"], result.state.trials["t0002"]
    assert t1.promoted and t2.parent == "base-0"  # not the best (t0001): the agent chose its parent
    files = RunStore(result.run_dir).get_json_blob(t2.manifest_blob)  # type: ignore[arg-type]
    text = RunStore(result.run_dir).blob_text(files["objective.py"])
    assert "X = 0.0" in text and "Y = -0.8" in text


# ----------------------------------------------------------------------------- control arms


@pytest.mark.parametrize("history", [True, False], ids=["with-history", "single-shot"])
def test_control_arm_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool) -> None:
    """The same scripted agent, with and without history: only the context differs."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with WireServer() as server:
        server.script(PATH, [
            a_message(edit("X", "0.0", "1.7"), a_tool("post_insight", {"text": "try X near 1.7"})),
            a_message(submit("X 1.7")),
            a_message(a_tool("read_blackboard", {}), edit("Y", "0.0", "-0.8")),
            a_message(submit("Y -0.8")),
        ])
        task = demo_task([{"name": "a", "backend": "anthropic", "model": "claude-sonnet-test", "base_url": server.url,
                           "params": FAST}], **{"loop.history": history})
        result = start_run(task, tmp_path, run_id="arm")
        second = server.exchanges[2].body["messages"]
        blackboard_result = server.exchanges[3].body["messages"][-1]["content"][0]["content"]
    assert result.reason == "max_trials" and len(second) == 1  # every proposal starts a fresh conversation
    context = second[0]["content"][1]["text"]
    # issue 14: a control arm never hears of the best either ("Current best: t0001 ... by a: X 1.7")
    for marker in ("Best trials:", "Recent trials:", "Blackboard:", "Your earlier proposals", "Lineage of the parent",
                   "Current best:"):
        assert (marker in context) is history, marker
    assert "Your latest results:" in context  # a control arm still sees its own last outcome
    if history:
        assert "t0001: X 1.7 [objective.py] -> ok" in context
        assert "try X near 1.7" in blackboard_result
    else:
        assert blackboard_result == "(no blackboard in a no-history run)"


# ----------------------------------------------------------------------------- endpoint and failures


def test_endpoint_from_the_environment_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14: the endpoint taken from OPENAI_BASE_URL is in run.json and run.started (never the key)."""
    import json

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with WireServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        server.script("/v1/chat/completions", [o_completion("GIVE-UP")])
        task = demo_task([{"name": "o", "backend": "openai", "model": "qwen-test", "params": FAST}])
        result = start_run(task, tmp_path, run_id="endpoint")
    recorded = json.loads((result.run_dir / "run.json").read_text())["agents"]
    assert recorded == [{"name": "o", "backend": "openai", "model": "qwen-test", "endpoint": server.url + "/v1/",
                         "endpoint_from": "OPENAI_BASE_URL"}]
    assert result.state.agents_info == recorded
    assert OPENAI_KEY not in (result.run_dir / "run.json").read_text()


@pytest.mark.parametrize(("max_failures", "trials"), [(1, 0), (3, 1)])
def test_an_agent_is_retired_after_max_failures_in_a_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         max_failures: int, trials: int) -> None:
    """One failed proposal (a 400 the agent does not retry) no longer retires an agent for the run."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    from llm_wire import a_error

    with WireServer() as server:
        server.script(PATH, [a_error(400, "invalid_request_error", "bad request"),
                             a_message(edit("X", "0.0", "1.7")), a_message(submit("X 1.7")),
                             a_message(a_text("GIVE-UP"))])
        task = demo_task([{"name": "a", "backend": "anthropic", "model": "claude-sonnet-test", "base_url": server.url,
                           "params": FAST, "max_failures": max_failures}])
        result = start_run(task, tmp_path, run_id="failures")
    assert len(result.state.agent_trials()) == trials
    notes = " | ".join(result.state.notes)
    if max_failures == 1:
        assert "agent a stopped after 1 failed proposal(s) in a row (agents[].max_failures 1)" in notes
    else:
        assert "proposal failed (1 of 3 in a row before it is retired)" in notes
        assert result.state.agent_trials()[0].status == "ok"  # the next proposal went through


# ----------------------------------------------------------------------------- caps


@pytest.mark.parametrize(("cap", "calls", "reason"), [
    ({"max_run_tokens": 2500}, 2, "token cap reached: 2560 >= max_run_tokens 2500"),  # 1280 tokens per call
    ({"budget_usd": 1.0, "params": {**FAST, "price": {"input": 1000.0}}}, 1, "cost cap reached: $1.2000"),
])
def test_hard_caps_stop_model_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: dict[str, Any],
                                    calls: int, reason: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with WireServer() as server:
        server.script(PATH, [a_message(a_tool("read_file", {"path": "objective.py"}))] * 4)
        agent = {"name": "a", "backend": "anthropic", "model": "claude-sonnet-test", "base_url": server.url,
                 "params": FAST, **cap}
        result = start_run(demo_task([agent]), tmp_path, run_id="cap")
        made = len(server.exchanges)
    assert made == calls
    assert result.reason == "agents_exhausted"
    errors = [t.text for t in agent_turns(RunStore(result.run_dir).scan().events, "a") if t.role == "error"]
    assert len(errors) == 1 and reason in errors[0]


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_timeout_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """A server slower than params.timeout_s: the attempt is abandoned, recorded and retried."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    path, suffix = (PATH, "") if backend == "anthropic" else ("/v1/chat/completions", "/v1")
    if backend == "anthropic":
        slow, fine = a_message(a_text("late")), a_message(a_text("GIVE-UP"))
    else:
        slow, fine = o_completion("late"), o_completion("GIVE-UP")
    with WireServer() as server:
        server.script(path, [Reply(message=slow, delay_s=3.0), Reply(message=fine)])
        task = demo_task([{"name": "a", "backend": backend, "model": "m", "base_url": server.url + suffix,
                           "params": {**FAST, "timeout_s": 0.5}}])
        result = start_run(task, tmp_path, run_id="timeout")
        assert len(server.exchanges) == 2
    turns = agent_turns(RunStore(result.run_dir).scan().events, "a")
    errors = [t.text for t in turns if t.role == "error"]
    assert errors[0].startswith("request timed out; retry 1/5") and errors[-1] == \
        "the model gave up without submitting a trial"
    assert [t.text for t in turns if t.role == "assistant"] == ["GIVE-UP"]


def test_a_conversation_without_submission_starts_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two reminders without a tool call end that conversation; a fresh one follows; GIVE-UP ends it all."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with WireServer() as server:
        server.script(PATH, [a_message(a_text("Thinking about it.")), a_message(a_text("Still thinking.")),
                             a_message(a_text("Hmm.")), a_message(a_text("GIVE-UP"))])
        result = start_run(demo_task([{"name": "a", "backend": "anthropic", "model": "claude-sonnet-test",
                                       "base_url": server.url, "params": FAST}]), tmp_path, run_id="nudge")
        lengths = [len(ex.body["messages"]) for ex in server.exchanges]
        nudges = [ex.body["messages"][-1]["content"][0]["text"] for ex in server.exchanges[1:3]]
    assert result.reason == "agents_exhausted"
    assert lengths == [1, 3, 5, 1]  # the 4th call is a fresh conversation
    assert all(n.startswith("You did not call a tool.") for n in nudges)
    turns = agent_turns(RunStore(result.run_dir).scan().events, "a")
    assert [t.text for t in turns if t.role == "error"] == ["the model did not call a tool after 2 reminders",
                                                            "the model gave up without submitting a trial"]
    assert [t.text.splitlines()[0] for t in turns if t.role == "user" and t.text.startswith("[attempt")] == [
        "[attempt 2/2: starting over]"]


# ----------------------------------------------------------------------------- the CLI switch


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow  # a subprocess that imports both SDKs
def test_cli_switches_bench_agents_to_anthropic(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    with WireServer() as server:
        server.script(PATH, [a_message(a_text("Moving X."), edit("X", "0.0", "1.7")), a_message(submit("X 1.7"))])
        env.update(ANTHROPIC_API_KEY=ANTHROPIC_KEY, ANTHROPIC_BASE_URL=server.url)
        done = _cli(["--headless", "bench", "demo", "--backend", "anthropic", "--model", "claude-opus-test",
                     "--trials", "1", "--runs", str(tmp_path), "--quiet"], env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.exchanges and all(ex.body["model"] == "claude-opus-test" for ex in server.exchanges)
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    proposed = [e.data for e in RunStore(run_dir).scan().events if e.kind == "trial.proposed" and not e.data.baseline]
    assert [(p.agent, p.hypothesis) for p in proposed] == [("rs", "X 1.7")]
    assert ANTHROPIC_KEY not in done.stdout + done.stderr


@pytest.mark.slow
def test_cli_missing_key_is_a_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    done = _cli(["--headless", "bench", "demo", "--backend", "anthropic", "--model", "claude-sonnet-test",
                 "--trials", "1", "--runs", str(tmp_path), "--quiet"], env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no API key for backend anthropic: set ANTHROPIC_API_KEY in the environment" in done.stderr


def test_a_blind_control_arm_sees_no_other_trial_best_or_blackboard(tmp_path: Path) -> None:
    """Issue 14: with history and lineage off, nothing another trial, the best or the blackboard
    wrote reaches the prompt: only the task, the baseline, the parent's files and the agent's own result."""
    from agents.llm.prompts import context_text
    from rrma.run.context import build_context

    task = demo_task([{"name": "rs", "backend": "random-search"}], **{"budget.max_trials": 4})
    state = start_run(task, tmp_path, run_id="seen").state
    state.blackboard.append({"seq": 10_000, "ts": "", "agent": "rs", "text": "SECRET-INSIGHT: X near 1.7",
                             "trial_id": "t0001", "tags": []})
    others = [t for t in state.agent_trials() if t.score is not None]
    assert state.best is not None and len(others) == 4
    blind = task.model_copy(update={"loop": task.loop.model_copy(update={"history": False, "lineage": False,
                                                                          "policy": "independent"})})
    base = next(t.trial_id for t in state.trials.values() if t.baseline)
    ctx = build_context(state, blind, agent_name="control", role=None, parent_id=base, files={"objective.py": "X = 0.0"},
                        editable=["objective.py"], trials_left=3, record_turn=lambda **_: None,
                        post=lambda *_a, **_k: None, files_of=lambda _t: {})
    text = context_text(ctx, [])
    assert ctx.best is None and not ctx.top and not ctx.recent and not ctx.blackboard and not ctx.lineage and not ctx.own
    assert "SECRET-INSIGHT" not in text and "Current best" not in text and "Blackboard" not in text
    for t in others:  # no id, hypothesis or score of any trial the agent did not run
        assert t.trial_id not in text, t.trial_id
        assert t.hypothesis not in text, t.hypothesis
        assert f"{float(t.score):.6g}" not in text, t.score  # type: ignore[arg-type]
    assert f"{state.baseline_mean:.6g}" in text  # the baseline is part of the task, not of the history
