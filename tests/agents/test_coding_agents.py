"""Coding agents end to end: the fake CLIs run as the real tools would, through the real loop.

Every run here is a real research loop on a real run directory: the backend starts the fake
``claude``/``codex``/``aider``/``fake-agent`` (tests/agents/fakes/, first on PATH) under
``spawn`` in the bubblewrap sandbox, in a copy of the parent's workspace, with the key in
its environment; the fake prints a recorded stream while really reading, running and editing
files; the oracle judges the proposal. What is asserted is what a person would see in the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from coding_fixtures import (
    ANTHROPIC_SENTINEL,
    BACKEND_KEYS,
    CODEX_SENTINEL,
    FAKE_COMMAND,
    FIXTURES,
    OTHER_SENTINEL,
    REPO,
    clean,
    coding_agent,
    demo_task,
    events,
    leaks,
    proposal,
    scratch_dirs,
    turns,
)
from specialists import specialist_task

from oracle.command import CommandOracle
from oracle.command_settings import CommandParams
from rrma.contain import sandbox
from rrma.contracts import AgentError, Context
from rrma.log.export import export_runs
from rrma.log.verify import verify_run
from rrma.plugins import make_agent
from rrma.run.loop import start_run
from rrma.task import TaskError, task_from_dict

SANDBOX = sandbox.unavailable_reason()
needs_sandbox = pytest.mark.skipif(SANDBOX is not None, reason=f"the bubblewrap sandbox is unavailable here: {SANDBOX}")


@pytest.fixture(autouse=True)
def _fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    clean(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_SENTINEL)
    monkeypatch.setenv("CODEX_API_KEY", CODEX_SENTINEL)


def scenarios(monkeypatch: pytest.MonkeyPatch, value: str, agent: str | None = None) -> None:
    name = "RRMA_FAKE_SCENARIOS" + (f"_{agent.upper()}" if agent else "")
    monkeypatch.setenv(name, value)


def ts(event: Any) -> float:
    return datetime.fromisoformat(event.ts).timestamp()


# ----------------------------------------------------------------------------- each preset


@pytest.mark.parametrize("backend", ["claude-code", "codex", "aider", "command"])
def test_each_backend_proposes_and_leaves_a_full_trace(tmp_path: Path, backend: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # a temp directory of this test's own: the working copies a test running beside it (pytest-xdist) makes
    # must not count as this run's leftovers
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    task = demo_task([coding_agent(backend)], **{"budget.max_trials": 2})
    result = start_run(task, tmp_path / "runs", run_id=backend)
    trials = result.state.agent_trials()
    assert [t.status for t in trials] == ["ok", "ok"] and all(t.promoted for t in trials)
    assert trials[0].parent == "base-0" and trials[1].parent == trials[0].trial_id  # keep-revert
    trace = turns(result.run_dir, "coder")
    roles = [t.role for t in trace]
    said = trace[0].args["sandbox"]  # what the reviewer is told about the sandbox: must be what it was here
    assert roles[0] == "system" and f"sandbox {said};" in trace[0].text
    assert said.startswith("bubblewrap: ") if SANDBOX is None else said == f"off: {SANDBOX}"
    prompts = [t for t in trace if t.role == "user"]
    assert len(prompts) == 2 and "changes to the editable files (objective.py)" in " ".join(prompts[0].text.split())
    assert prompts[0].args["argv"][0] == str(REPO / "tests" / "agents" / "fakes" / ("fake-agent" if backend == "command"
                                                                                  else backend.split("-")[0]))
    results = [t for t in trace if t.role == "tool_result"]
    assert results and all(t.result for t in results)  # tool results are in the trace
    assert any(t.role == "tool_call" for t in trace) and any(t.role == "assistant" for t in trace)
    assert all(t.trial_id in ("t0001", "t0002") for t in trace[1:])  # every turn names the trial it led to
    assert sum(t.cost_usd for t in trace) > 0  # reported (claude, aider, command) or estimated (codex)
    assert verify_run(result.run_dir).ok
    first = proposal(result.run_dir, "t0001")
    line = "  # first coordinate, any real number\n"  # whole lines: search/replace that re-applies to a moved parent
    assert first["edits"] == [{"path": "objective.py", "content": None, "replacements": [["X = 0.0" + line, "X = 1.7" + line]],
                               "delete": False}]
    assert first["meta"]["coding_agent"] == backend
    assert scratch_dirs("coder") == []  # each run's working copy is removed


def test_claude_code_hypothesis_posts_and_summary(tmp_path: Path) -> None:
    result = start_run(demo_task([coding_agent("claude-code")], **{"budget.max_trials": 1}), tmp_path, run_id="c")
    trial = result.state.trials["t0001"]
    assert trial.hypothesis == "X = 1.7 puts that axis at the bowl's minimum"  # from $RRMA_HYPOTHESIS_FILE
    posts = events(result.run_dir, "blackboard.post")
    assert [(p.actor, p.data.text) for p in posts] == [("agent:coder", "X = 1.7 is where the loss bowl bottoms out")]
    init = next(t for t in turns(result.run_dir, "coder") if t.role == "system" and "session" in t.text)
    if SANDBOX is None:
        assert init.args["permissionMode"] == "bypassPermissions"  # the fake refuses bypass as root without IS_SANDBOX=1
    assert init.args["cwd"].endswith("/work") and "rrma-agent-coder-" in init.args["cwd"]


@needs_sandbox
def test_the_tui_reader_indexes_the_trace(tmp_path: Path) -> None:
    from rrma.log.reader import RunReader

    result = start_run(demo_task([coding_agent("codex")], **{"budget.max_trials": 1}), tmp_path, run_id="tui")
    model = RunReader(result.run_dir, use_checkpoint=False, write_checkpoint=False).load()
    model.attach_index(model.index_turns())
    assert not model.torn
    kinds = [(ref.role, ref.tool) for ref in model.turns]
    assert ("tool_call", "shell") in kinds and ("tool_result", "shell") in kinds and ("tool_result", "apply_patch") in kinds


# ----------------------------------------------------------------------------- failures and budgets


def test_a_hung_agent_is_killed_within_its_budget_and_the_run_goes_on(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 1 hangs (the fake sleeps an hour) and is killed at its 2 s budget; run 2 then proposes.

    Run 2 gets a generous budget once run 1's kill is in the log (the hook runs in the agent's thread before
    it starts its next run): with 2 s for both, a loaded machine killed the productive run too (KeyError
    't0001'). The checks on time say "killed at the budget, not after the hour", with room for a busy machine.
    """
    scenarios(monkeypatch, "hang,edit")
    task = demo_task([coding_agent("claude-code", coding={"seconds": 2, "attempts": 2})], **{"budget.max_trials": 1})
    agent: Any = make_agent(task.agents[0], task)

    def after_the_kill(event: Any) -> None:
        if event.kind == "agent.turn" and event.data.role == "error" and agent.settings.seconds == 2:
            agent.settings = agent.settings.model_copy(update={"seconds": 300.0})

    started = time.monotonic()
    result = start_run(task, tmp_path, run_id="hang", agents=[agent], on_event=after_the_kill)
    assert time.monotonic() - started < 600  # far below the hang's hour: nobody waited for it
    log = [e for e in events(result.run_dir, "agent.turn") if e.data.agent == "coder"]
    first_prompt = next(e for e in log if e.data.role == "user")
    killed = next(e for e in log if e.data.role == "error")
    assert killed.data.text == "claude-code run 1: killed after 2 s (coding.seconds); no proposal from this run"
    assert killed.data.args["status"] == "timeout" and killed.data.args["seconds"] >= 2.0
    assert 2.0 <= ts(killed) - ts(first_prompt) < 120  # the wall clock plus the kill's grace on a busy machine
    assert [e.data.text for e in log if e.data.role == "error"] == [killed.data.text]  # run 2 was not killed
    prompts = [e for e in log if e.data.role == "user"]
    assert [p.data.args["run"] for p in prompts] == [1, 2]
    assert result.state.trials["t0001"].status == "ok"  # the second run of the agent proposed


def test_ctrl_c_ends_a_running_agent_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Ctrl-C stops proposing; an agent in the middle of a 60 s run is ended, not waited for."""
    scenarios(monkeypatch, "hang")
    stop = threading.Event()
    task = demo_task([coding_agent("claude-code", coding={"seconds": 60, "attempts": 3})])
    done: list[Any] = []
    runner = threading.Thread(target=lambda: done.append(start_run(task, tmp_path, run_id="stop", stop=stop)))
    runner.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (tmp_path / "stop" / "events.jsonl").exists():
        time.sleep(0.05)
    while time.monotonic() < deadline and not any(t.role == "user" for t in turns(tmp_path / "stop", "coder")):
        time.sleep(0.05)
    time.sleep(0.3)  # the fake is sleeping now
    pressed = time.monotonic()
    stop.set()
    runner.join(timeout=30)
    assert not runner.is_alive() and time.monotonic() - pressed < 5
    assert done[0].reason == "interrupted"
    errors = [t.text for t in turns(tmp_path / "stop", "coder") if t.role == "error"]
    assert errors == ["claude-code run 1: killed: cancelled: the run is stopping"]  # and no second run


@pytest.mark.parametrize("backend", ["codex", "command"])
def test_hung_agents_of_other_presets_are_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    scenarios(monkeypatch, "hang")
    result = start_run(demo_task([coding_agent(backend, coding={"seconds": 1})]), tmp_path, run_id=backend)
    assert result.reason == "agents_exhausted" and result.state.agent_trials() == []
    errors = [t.text for t in turns(result.run_dir, "coder") if t.role == "error"]
    assert errors[0] == f"{backend} run 1: killed after 1 s (coding.seconds); no proposal from this run"
    assert errors[-1] == f"no usable proposal after 1 run(s) of {backend}; this agent stops for the run"


def test_crash_then_garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenarios(monkeypatch, "crash,garbage")
    task = demo_task([coding_agent("claude-code", coding={"attempts": 2})], **{"budget.max_trials": 1})
    result = start_run(task, tmp_path, run_id="crash")
    assert result.state.trials["t0001"].status == "ok"
    trace = turns(result.run_dir, "coder")
    crash = next(t for t in trace if t.role == "error")
    assert crash.text.startswith("claude-code run 1: exit code 1; last output:\n") and "Error: Connection error." in crash.text
    second = [i for i, t in enumerate(trace) if t.role == "user"][1]
    raw = [t for t in trace[second:] if t.args and t.args.get("unparsed") == "claude-code"]
    assert [t.args["why"] for t in raw] == ["not a JSON object", "not a JSON object", "unknown type 'telemetry_flush'",
                                            "not a JSON object", "not a JSON object", "unknown user block"]
    assert "\ufffd" in raw[4].text  # invalid UTF-8 in the stream: kept (as replacement characters)
    assert result.state.trials["t0001"].hypothesis == "Y = -0.8 is closer to the optimum"  # a HYPOTHESIS: line


def test_cost_cap_kills_the_agent_and_it_proposes_no_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenarios(monkeypatch, "costly")
    agent = coding_agent("claude-code", model="claude-sonnet-4-5", budget_usd=0.2, coding={"attempts": 3})
    started = time.monotonic()
    result = start_run(demo_task([agent]), tmp_path, run_id="cost")
    assert time.monotonic() - started < 20
    assert result.reason == "agents_exhausted" and result.state.agent_trials() == []
    trace = turns(result.run_dir, "coder")
    errors = [t.text for t in trace if t.role == "error"]
    assert errors[0].startswith("claude-code run 1: killed: cost cap reached: $0.2") and "budget_usd $0.2000" in errors[0]
    assert errors[1].startswith("stopping: cost cap reached")
    assert len([t for t in trace if t.role == "user"]) == 1  # no second run after the cap
    spent = sum(t.cost_usd for t in trace)
    assert 0.2 <= spent < 0.2 + 0.1  # killed on the message that crossed the cap ($0.09 a message)


@pytest.mark.parametrize("backend, scenario, why", [
    # Claude Code enforces --max-turns itself and ends with result error_max_turns
    ("claude-code", "chatty", "claude-code run 1: claude-code ended with error_max_turns (exit code 1)"),
    # codex has no turn cap: the harness counts its tool calls and kills it
    ("codex", "runaway", "codex run 1: killed: turn cap reached: 4 turns > coding.max_turns 3"),
])
def test_turn_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, scenario: str, why: str) -> None:
    scenarios(monkeypatch, scenario)
    result = start_run(demo_task([coding_agent(backend, coding={"max_turns": 3})]), tmp_path, run_id=scenario)
    assert result.state.agent_trials() == []
    assert next(t.text for t in turns(result.run_dir, "coder") if t.text.startswith(f"{backend} run 1")) == why


def test_an_agent_that_changes_nothing_gives_no_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenarios(monkeypatch, "noop")
    result = start_run(demo_task([coding_agent("claude-code")]), tmp_path, run_id="noop")
    errors = [t.text for t in turns(result.run_dir, "coder") if t.role == "error"]
    assert errors[0] == "claude-code run 1: the agent changed no editable file"
    assert result.state.agent_trials() == []


# ----------------------------------------------------------------------------- containment and keys


class HeldOutParams(CommandParams):
    """The command oracle's params and the held-out file's path (a subclass declares what it adds)."""

    held_out: str
    """The file no agent process may read."""


class HeldOutOracle(CommandOracle):
    """The command oracle with a held-out file (named in params) that no agent process may read."""

    params_model = HeldOutParams

    def held_out(self) -> tuple[Path, ...]:
        return (Path(self.params["held_out"]),)


@needs_sandbox
def test_the_agent_cannot_reach_the_log_held_out_data_or_other_secrets(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "task"
    (source / "workspace").mkdir(parents=True)
    (source / "workspace" / "objective.py").write_text((REPO / "benches/demo/workspace/objective.py").read_text())
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("HELD-OUT-ANSWER-42\n")
    task = task_from_dict({
        "name": "attack", "description": "Minimise the loss.",
        "oracle": {"kind": "test_coding_agents:HeldOutOracle",
                   "params": {"command": ["{python}", "objective.py"], "held_out": str(held_out)}},
        "workspace": {"editable": ["objective.py"]}, "metric": {"name": "loss"},
        "budget": {"max_trials": 1, "trial_seconds": 20}, "noise": {"baseline_repeats": 1},
        "agents": [coding_agent("claude-code")]}, base_dir=source)
    run_dir = tmp_path / "runs" / "attack"
    scenarios(monkeypatch, "attack")
    monkeypatch.setenv("FAKE_ATTACK_RUN_DIR", str(run_dir))
    monkeypatch.setenv("FAKE_ATTACK_HELD_OUT", str(held_out))
    monkeypatch.setenv("FAKE_ATTACK_SOURCE", str(source / "workspace"))
    monkeypatch.setenv("FAKE_OTHER_API_KEY", OTHER_SENTINEL)
    result = start_run(task, tmp_path / "runs", run_id="attack")
    report_turn = next(t for t in turns(run_dir, "coder") if t.text.startswith("attack report: "))
    report = json.loads(report_turn.text.removeprefix("attack report: "))
    assert report.pop("read_held_out") == "succeeded: ''"  # hidden: an empty file stands in its place
    assert report.pop("other_secret") == "failed: KeyError"  # another credential of the harness: not passed
    assert report.pop("read_log") == "failed: FileNotFoundError"  # the run dir is an empty directory here
    assert all(v.startswith("failed: ") for v in report.values()), report  # writing the log, a blob, the source
    # the ground truth, whatever the fake says: the log is intact, nothing was read or written
    assert verify_run(run_dir).ok and b"forged" not in (run_dir / "events.jsonl").read_bytes()
    assert not (run_dir / "blobs" / "forged").exists()
    assert leaks(run_dir, "HELD-OUT-ANSWER-42") == [] and leaks(run_dir, OTHER_SENTINEL) == []
    assert "forged" not in (source / "workspace" / "objective.py").read_text()
    assert result.state.trials["t0001"].status == "ok"


@pytest.mark.parametrize("backend", ["claude-code", "codex", "aider", "command"])
def test_the_key_reaches_the_agent_and_nowhere_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """The leak scenario echoes its key everywhere it can: text, tool calls and results, stderr, a blackboard post,
    the hypothesis and the edited file. Nothing of it reaches the run directory or the export."""
    variable, key = BACKEND_KEYS[backend]
    monkeypatch.setenv("FAKE_OTHER_API_KEY", OTHER_SENTINEL)  # another credential of the harness: never passed on
    scenarios(monkeypatch, "leak")
    result = start_run(demo_task([coding_agent(backend)], **{"budget.max_trials": 1}), tmp_path / "runs", run_id="leak")
    trace = turns(result.run_dir, "coder")
    said = next(t.text for t in trace if t.text.startswith("My key is")).splitlines()[0]  # aider: one turn per reply
    assert said == f"My key is [redacted] (sha256 {hashlib.sha256(key.encode()).hexdigest()})"  # it had the real key
    assert f"key {variable} " in trace[0].text and "never recorded" in trace[0].text
    assert any(t.text.startswith("objective.py: the edit contained an API key") for t in trace if t.role == "error")
    assert [p.data.text for p in events(result.run_dir, "blackboard.post")] == ["the key is [redacted]"]
    assert result.state.trials["t0001"].status == "ok"  # the scrubbed edit still ran
    assert "[redacted]" in result.state.trials["t0001"].hypothesis
    export_runs([result.run_dir], tmp_path / "export.db")
    assert leaks(tmp_path, key) == [] and leaks(tmp_path, OTHER_SENTINEL) == []


# ----------------------------------------------------------------------------- policies, specialists, control arms


def test_tree_policy_rebase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenarios(monkeypatch, "edit,edit,rebase:objective.py:DEPTH=5")
    task = demo_task([coding_agent("claude-code")], **{"budget.max_trials": 3, "loop.policy": "tree"})
    result = start_run(task, tmp_path, run_id="tree")
    t3 = result.state.trials["t0003"]
    assert result.state.trials["t0002"].parent == "t0001"
    assert t3.parent == "t0001" and t3.status == "ok"  # rebased away from the best (t0002) onto t0001
    prompt = [t for t in turns(result.run_dir, "coder") if t.role == "user"][2].text
    assert "rrma-rebase TRIAL_ID" in prompt and "t0001 (t0001 [ok]" in prompt
    files = proposal(result.run_dir, "t0003")
    assert files["parent"] == "t0001" and files["edits"][0]["replacements"] == [
        ["DEPTH = 2  # an integer knob, best at 5\n", "DEPTH = 5  # an integer knob, best at 5\n"]]


def test_independent_policy_always_starts_from_the_baseline(tmp_path: Path) -> None:
    task = demo_task([coding_agent("codex")], **{"budget.max_trials": 2, "loop.policy": "independent"})
    result = start_run(task, tmp_path, run_id="independent")
    trials = result.state.agent_trials()
    assert [(t.parent, t.status) for t in trials] == [("base-0", "ok"), ("base-0", "ok")]
    assert proposal(result.run_dir, "t0002")["parent"] is None  # the loop's choice, not the agent's


@pytest.mark.parametrize("history", [True, False])
def test_specialists_and_control_arm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool) -> None:
    scenarios(monkeypatch, "edit:opt.py:LR=0.01,edit:opt.py:LR=0.02", agent="opt")
    scenarios(monkeypatch, "edit:opt.py:LR=0.5,edit:arch.py:DEPTH=4", agent="arch")  # first: outside its subset
    result = start_run(specialist_task(
        tmp_path, [coding_agent("claude-code", name="opt", role="optimizer", editable=["opt.py"]),
                   coding_agent("claude-code", name="arch", role="architecture", editable=["arch.py"])],
        max_trials=6, loop={"history": history}), tmp_path / "runs", run_id="spec")
    arch = [t for t in result.state.agent_trials() if t.agent == "arch"]
    assert arch[0].status == "invalid"  # the loop refused the edit outside its subset, as for any agent
    assert arch[0].feedback == "invalid edit: opt.py: not an editable file of this task (editable: arch.py)"
    assert any(t.status == "ok" for t in arch[1:])
    opt_prompts = [" ".join(t.text.split()) for t in turns(result.run_dir, "opt") if t.role == "user"]
    assert "the optimizer specialist" in opt_prompts[0] and "editable files (opt.py)" in opt_prompts[0]
    if history:  # the second prompt carries the blackboard and the agent's own earlier proposals
        assert "Blackboard:" in opt_prompts[1] and "Your earlier proposals" in opt_prompts[1]
    else:  # a control arm: no blackboard, no summary of earlier proposals, only its own last result
        assert "Blackboard:" not in opt_prompts[1] and "Your earlier proposals" not in opt_prompts[1]
        assert "Your latest results:" in opt_prompts[1]


def test_proof_task_takes_the_proof_from_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenarios(monkeypatch, "proof")
    task = task_from_dict({"name": "proofs", "oracle": {"kind": "coq"}, "metric": {"name": "solved"},
                           "agents": [coding_agent("claude-code")]}, base_dir=tmp_path)
    agent = make_agent(task.agents[0], task)
    recorded: list[dict[str, Any]] = []
    ctx = Context(task=task, agent_name="coder", parent_id="base-0", files={}, editable=[],
                  theorem={"name": "add_0_r", "statement": "Theorem add_0_r : forall n, n + 0 = n.", "context": ""},
                  record_turn=lambda **kw: recorded.append(kw))
    made = agent.propose(ctx)
    assert made is not None and made.proof == "induction n as [| n IH]; simpl; auto." and made.theorem == "add_0_r"
    assert made.edits == [] and made.hypothesis == "induction on n closes the goal"
    prompt = next(t["text"] for t in recorded if t["role"] == "user")
    assert "write the proof body only" in prompt and "Theorem add_0_r" in prompt


# ----------------------------------------------------------------------------- bad input: one clear line


@pytest.mark.parametrize("agent, env, message", [
    # the program is not installed
    (coding_agent("claude-code", coding={"executable": "no-such-claude"}), {},
     "agent coder: backend claude-code runs `no-such-claude`, which is not on PATH; install it (npm install -g "
     "@anthropic-ai/claude-code) or set agents[].coding.executable to its path"),
    # no key in the environment
    (coding_agent("claude-code"), {"ANTHROPIC_API_KEY": None},
     "agent coder: no API key for backend claude-code: set ANTHROPIC_API_KEY in the environment (keys are never read "
     "from the task file; coding.key_env names another variable, coding.require_key: false runs without one)"),
    # codex takes CODEX_API_KEY or OPENAI_API_KEY
    (coding_agent("codex"), {"CODEX_API_KEY": None},
     "agent coder: no API key for backend codex: set CODEX_API_KEY or OPENAI_API_KEY in the environment (keys are "
     "never read from the task file; coding.key_env names another variable, coding.require_key: false runs without one)"),
    # the generic backend without a command
    (coding_agent("command", coding={"command": None}), {},
     "agent coder: backend command needs agents[].coding.command (a list: the program and its arguments, with "
     "{prompt}, {prompt_file}, {workdir}, {model}, {max_turns}) or $RRMA_AGENT_COMMAND"),
    # a key pasted into the task file
    (coding_agent("claude-code", coding={"args": ["--api-key", "sk-ant-api03-abcdefghijklmnop"]}), {},
     "agent coder: coding settings hold something that looks like an API key ('[redacted]'); keys come from the "
     "environment only"),
])
def test_setup_errors(monkeypatch: pytest.MonkeyPatch, agent: dict[str, Any], env: dict[str, str | None],
                      message: str) -> None:
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    task = demo_task([agent])
    with pytest.raises(AgentError) as err:
        make_agent(task.agents[0], task)
    assert str(err.value) == message


@pytest.mark.parametrize("backend", ["claude-code", "codex", "aider", "command"])
@pytest.mark.parametrize("params, message", [
    # an LLM-backend option on a coding backend: a typo or a misunderstanding, said so when the task loads
    ({"max_steps": 4}, "agents.0.params: max_steps is not an option of a coding backend: its settings are under "
                       "agents[].coding (docs/agents.md, Coding agents)"),
    ({"api_key": "sk-ant-api03-abcdefghijklmnop"},
     "agents.0.params: do not put API keys in the task file (it is copied into the run log); set the key in the "
     "environment, or name its variable with coding.key_env"),
    ({"price": {"input": -1}}, "agents.0.params.price.input: Input should be greater than or equal to 0"),
    ({"price": {"inptu": 3}}, "agents.0.params.price.inptu: unknown field"),
])
def test_params_are_checked_when_the_task_loads(backend: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskError) as err:
        demo_task([coding_agent(backend, params=params)])
    assert message in str(err.value) and str(err.value).count("\n") == 0
    assert "sk-ant" not in str(err.value)


def test_a_price_in_params_loads_and_prices_the_program() -> None:
    task = demo_task([coding_agent("command", params={"price": {"input": 3, "output": 15}})])
    agent = make_agent(task.agents[0], task)
    assert (agent.price.input, agent.price.output, agent.price.cache_read) == (3.0, 15.0, 0.0)


def test_rrma_post_outside_a_sandbox() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RRMA_POST_FILE"}
    proc = subprocess.run([sys.executable, "-m", "agents.coding.tools"], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=30)
    assert proc.returncode == 2 and "run as one of: rrma-post, rrma-rebase" in proc.stderr
    code = "import sys; from agents.coding.tools import post; sys.exit(post(['hello']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=30)
    assert proc.returncode == 2 and proc.stderr.startswith("rrma-post: RRMA_POST_FILE is not set")


# ----------------------------------------------------------------------------- the CLI, as a person runs it


@pytest.mark.parametrize("backend", ["claude-code", "codex", "aider", "command"])
def test_cli_bench_demo_with_each_backend(tmp_path: Path, backend: str) -> None:
    """`rrma-tui --headless bench demo --backend X` against the fakes; then the export; no key anywhere."""
    env = {k: v for k, v in os.environ.items()}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])  # this checkout's CLI
    env["RRMA_AGENT_COMMAND"] = FAKE_COMMAND
    env["RRMA_CODING_READ_ONLY"] = str(FIXTURES)  # the recorded streams the fakes play
    cli = [sys.executable, "-m", "cli.main"]
    run = subprocess.run([*cli, "--headless", "bench", "demo", "--backend", backend, "--trials", "2", "--runs",
                          str(tmp_path / "runs"), "--quiet"], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    run_dir = next((tmp_path / "runs").iterdir())
    assert "trials       │ 2: ok 2" in run.stdout
    exported = subprocess.run([*cli, "export", str(run_dir), "--sqlite", str(tmp_path / "out.db")], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=60)
    assert exported.returncode == 0, exported.stderr
    assert any(t.role == "tool_result" for t in turns(run_dir))
    for key in (ANTHROPIC_SENTINEL, CODEX_SENTINEL):
        assert leaks(tmp_path, key) == []


def test_cli_missing_key_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    run = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "bench", "demo", "--backend", "claude-code",
                          "--runs", str(tmp_path / "runs")], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "rrma-tui: agent rs: no API key for backend claude-code: set ANTHROPIC_API_KEY in the environment (keys are never "
        "read from the task file; coding.key_env names another variable, coding.require_key: false runs without one)"]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
