"""A task is checked against what its plug-ins declare (rrma/declare.py), never against a plug-in's name.

The plug-ins here are ``module:Class`` oracles and agents of this file (the form that needs no install metadata),
so each test shows the core deciding by a declaration a built-in does not have: a workspace-less oracle not
named lean or coq, an oracle holding answers not named gsm8k, a params model of an oracle the core has never
heard of. The built-ins' declarations are checked too (the command oracle's scorer section, the coding agents'
``coding`` section), and each refusal is shown to matter: with the check switched off the bad task loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

import rrma.task as task_module
from rrma.audit.scope import AuditScope
from rrma.contracts import (
    Agent,
    Context,
    EvalContext,
    Oracle,
    Outcome,
    PluginSettings,
    Proposal,
    SettingError,
    Status,
)
from rrma.log.state import RunState
from rrma.registry import AGENTS, ORACLES, oracle_class, section_owners
from rrma.task import TaskError, load_task, task_from_dict
from rrma.task_schema import plugin_schema_table

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
HERE = "test_task_plugins"


class WindowParams(PluginSettings):
    """A plug-in's own params: the core has no field of that name."""

    window: int = Field(4, ge=1, le=64)
    """Items per look."""


class Scoped(PluginSettings):
    """A section this file's oracle owns (beside its params)."""

    depth: int = Field(1, ge=1, le=9)
    """How deep to look."""


class NoWorkspaceOracle(Oracle):
    """Declares that its tasks need no workspace folder, and its params and one section."""

    kind = "no-workspace"
    needs_workspace = False
    params_model = WindowParams
    sections = {"scope": Scoped}

    def evaluate(self, ctx: EvalContext) -> Outcome:
        return Outcome(status=Status.ok, score=0.0)


class AnswersOracle(Oracle):
    """Declares that its held-out data is the answers (its name says nothing of the kind)."""

    kind = "answers"
    holds_answers = True

    @classmethod
    def check_task(cls, task: Any) -> None:
        if task.metric.direction != "maximize":
            raise SettingError("metric.direction", "the answers oracle counts right answers: maximize")

    def evaluate(self, ctx: EvalContext) -> Outcome:
        return Outcome(status=Status.ok, score=0.0)


class GraderOracle(Oracle):
    """Declares what the audit reads from a recorded task: its program is readable, its grader's files score."""

    kind = "grader"
    readable_params = ("program",)

    @classmethod
    def scoring_files(cls, recorded: Any) -> list[str]:
        return list(recorded.get("grader", {}).get("files", []))

    def evaluate(self, ctx: EvalContext) -> Outcome:
        return Outcome(status=Status.ok, score=0.0)


class QuietAgent(Agent):
    """An agent declaring its params: checked only when the task gives any."""

    params_model = WindowParams

    def propose(self, ctx: Context) -> Proposal | None:
        return None


def write(tmp_path: Path, text: str, workspace: bool = True) -> Path:
    if workspace:
        (tmp_path / "workspace").mkdir()
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return path


def one_line(info: pytest.ExceptionInfo[TaskError]) -> str:
    (line,) = str(info.value).splitlines()
    return line


def test_an_oracle_that_declares_no_workspace_needs_none_and_one_that_does_not_is_refused(tmp_path: Path) -> None:
    """The decision is the declaration's: a module:Class oracle (no name the core knows) loads without a
    workspace folder; the same task with the command oracle (needs_workspace, the default) is refused."""
    path = write(tmp_path, f"name: t\noracle: {{kind: '{HERE}:NoWorkspaceOracle'}}\n", workspace=False)
    assert load_task(path).oracle.kind.endswith("NoWorkspaceOracle")
    path.write_text("name: t\noracle: {kind: noop}\n")
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info).endswith(f"workspace.source: directory {tmp_path / 'workspace'} does not exist")
    # the built-in proof oracles declare it the same way (their tasks' theorems come from the oracle)
    for kind in ("lean", "coq", "gsm8k-prompt"):
        found = oracle_class(kind)
        assert found is not None and found.needs_workspace is False
    assert all(oracle_class(k).needs_workspace for k in ("command", "noop", "autoresearch", "gsm8k-eval"))  # type: ignore[union-attr]


def test_a_plugin_params_model_checks_oracle_params_naming_the_field_and_keeps_them_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, f"name: t\noracle: {{kind: '{HERE}:NoWorkspaceOracle', params: {{window: 100}}}}\n")
    with pytest.raises(TaskError) as info:
        load_task(path)
    line = one_line(info)
    assert line.startswith(f"{path}: oracle.params.window: Input should be less than or equal to 64 (got 100)")
    assert line.endswith("; allowed: from 1 to 64")
    path.write_text(f"name: t\noracle: {{kind: '{HERE}:NoWorkspaceOracle', params: {{windw: 3}}}}\n")
    with pytest.raises(TaskError, match=r"oracle\.params\.windw: unknown field"):
        load_task(path)
    # valid params stay as the task wrote them (they are part of the cache key): no defaults filled in
    path.write_text(f"name: t\noracle: {{kind: '{HERE}:NoWorkspaceOracle', params: {{}}}}\n")
    assert load_task(path).oracle.params == {}
    # the built-in noop oracle declares its params the same way
    path.write_text("name: t\noracle: {kind: noop, params: {sleep: -1}}\n")
    with pytest.raises(TaskError, match=r"oracle\.params\.sleep: Input should be greater than or equal to 0"):
        load_task(path)


def test_an_agent_params_model_is_checked_only_where_the_task_gives_params(tmp_path: Path) -> None:
    agent = f"agents: [{{name: a, backend: '{HERE}:QuietAgent', params: {{window: 0}}}}]\n"
    path = write(tmp_path, "name: t\noracle: {kind: noop}\n" + agent)
    with pytest.raises(TaskError, match=r"agents\.0\.params\.window: Input should be greater than or equal to 1"):
        load_task(path)
    path.write_text("name: t\noracle: {kind: noop}\n" + agent.replace("window: 0", "window: 8"))
    assert load_task(path).agents[0].params == {"window": 8}
    # the built-in backends that declare theirs: random search's explore is a chance, replay takes two keys
    path.write_text("name: t\noracle: {kind: noop}\nagents: [{name: a, params: {explore: 2}}]\n")
    with pytest.raises(TaskError, match=r"agents\.0\.params\.explore: .*allowed: from 0 to 1$"):
        load_task(path)
    path.write_text("name: t\noracle: {kind: noop}\nagents: [{name: a, backend: replay, params: {sorce: r1}}]\n")
    with pytest.raises(TaskError, match=r"agents\.0\.params\.sorce: unknown field"):
        load_task(path)


def test_a_section_is_checked_by_the_plugin_that_declares_it_and_held_as_its_model(tmp_path: Path) -> None:
    path = write(tmp_path, f"name: t\noracle: {{kind: '{HERE}:NoWorkspaceOracle', scope: {{depth: 3}}}}\n")
    task = load_task(path)
    assert task.oracle.section("scope") == Scoped(depth=3)
    assert task.snapshot()["oracle"]["scope"] == {"depth": 3}  # recorded as plain JSON in run.json
    path.write_text(f"name: t\noracle: {{kind: '{HERE}:NoWorkspaceOracle', scope: {{depth: 10}}}}\n")
    with pytest.raises(TaskError, match=r"oracle\.scope\.depth: .*allowed: from 1 to 9"):
        load_task(path)


@pytest.mark.parametrize("check_on", [True, False])
def test_a_section_the_named_plugin_does_not_declare_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 check_on: bool) -> None:
    """A coding agent's settings on a random-search agent, or a scorer on the noop oracle, would be ignored
    by the run: the task says something the run would not do, and is refused naming who takes it. With the
    check off (every undeclared section read as a recorded default) the same tasks load, settings dropped."""
    if not check_on:
        monkeypatch.setattr(task_module, "_recorded_default", lambda family, key, value: True)
    cases = [
        ("agents: [{name: a, backend: random-search, coding: {max_turns: 5}}]\n",
         "agents.0.coding: only the aider, claude-code, codex, command agent takes it (the random-search agent does not)"),
        ("oracle: {kind: noop, scorer: {command: [x]}}\n",
         "oracle.scorer: only the command oracle runs a scorer (the noop oracle computes its metric itself)"),
        ("oracle: {kind: noop, scorr: {}}\n", "oracle.scorr: unknown field (check the spelling"),
    ]
    for index, (text, message) in enumerate(cases):
        folder = tmp_path / str(index)
        folder.mkdir()
        path = write(folder, "name: t\n" + text)
        if check_on:
            with pytest.raises(TaskError) as info:
                load_task(path)
            assert one_line(info).startswith(f"{path}: {message}")
        else:
            task = load_task(path)
            assert task.oracle.sections() == {} and task.agents[0].sections() == {}


def test_a_recorded_task_from_before_plugins_owned_their_sections_still_loads() -> None:
    """run.json recorded every section on every entry, with its defaults (a lean oracle's scorer, a random-search
    agent's coding): such a snapshot loads (a resume, a training run over an old log), the inert sections dropped."""
    coding = {"executable": None, "command": None, "args": [], "stream": None, "seconds": 900.0, "max_turns": 40,
              "memory_mb": 4096, "permissions": "bypass", "key_env": None, "require_key": True, "attempts": 2,
              "proof_file": "proof.txt", "ignore": [], "scan_entries": 10000, "scan_bytes": 33554432, "read_only": []}
    old = {"name": "old", "workspace": {"source": "."},
           "oracle": {"kind": "lean", "params": {}, "pass_env": [],
                      "scorer": {"files": [], "command": [], "reads": "proposal", "seconds": 60.0}},
           "agents": [{"name": "a", "backend": "random-search", "params": {}, "coding": coding}]}
    task = task_from_dict(old, source="run.json")
    assert task.oracle.sections() == {} and task.agents[0].sections() == {}
    assert "scorer" not in task.snapshot()["oracle"] and "coding" not in task.snapshot()["agents"][0]
    # one changed value is no longer a recorded default: refused as a setting the run would ignore
    old["agents"][0]["coding"] = {**coding, "max_turns": 5}  # type: ignore[index]
    with pytest.raises(TaskError, match=r"agents\.0\.coding: only the aider, claude-code, codex, command agent"):
        task_from_dict(old, source="run.json")


def test_the_command_oracle_scorer_round_trips_through_its_snapshot() -> None:
    """The scorer folds into params (the cache key) with its defaults, exactly as before the move."""
    task = load_task(DEMO)
    snap = task.snapshot()
    assert snap["oracle"]["scorer"] == {"files": ["score.py"], "command": ["{python}", "score.py", "{trial_dir}"],
                                        "reads": "proposal", "seconds": 60.0}
    assert snap["oracle"]["params"]["scorer"] == snap["oracle"]["scorer"]
    again = task_from_dict({k: v for k, v in snap.items() if k != "base_dir"}, source="run.json",
                           base_dir=task.base_dir)
    assert again.snapshot() == snap


def test_a_plugin_hook_checks_rules_across_the_task(tmp_path: Path) -> None:
    path = write(tmp_path, f"name: t\noracle: {{kind: '{HERE}:AnswersOracle'}}\n")
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert one_line(info) == f"{path}: metric.direction: the answers oracle counts right answers: maximize"
    path.write_text(f"name: t\noracle: {{kind: '{HERE}:AnswersOracle'}}\nmetric: {{direction: maximize}}\n")
    assert load_task(path).metric.direction == "maximize"


def test_the_audit_reads_held_out_answers_from_the_declaration_not_the_name(tmp_path: Path) -> None:
    def scope(kind: str) -> AuditScope:
        state = RunState()
        state.task = {"oracle": {"kind": kind, "params": {}}}
        return AuditScope.of(state, tmp_path)

    assert scope(f"{HERE}:AnswersOracle").answers_are_held_out  # not named gsm8k: declared
    assert scope("gsm8k-eval").answers_are_held_out and scope("gsm8k-prompt").answers_are_held_out
    assert not scope("command").answers_are_held_out
    assert not scope("gsm8k-not-installed").answers_are_held_out  # a name alone decides nothing


def test_the_audit_reads_scorer_files_and_readable_params_from_the_declaration(tmp_path: Path) -> None:
    """A run recorded before runs listed their held-out paths: the path-like params are held out, except those the
    oracle declares readable; the scorer files are what the oracle says they are, under whatever key it keeps them."""
    state = RunState()
    state.task = {"oracle": {"kind": f"{HERE}:GraderOracle", "grader": {"files": ["grade.py"]},
                             "params": {"program": "/srv/run.py", "answers": "/srv/answers.jsonl"}}}
    scope = AuditScope.of(state, tmp_path)
    assert scope.held_out == ["/srv/answers.jsonl"] and scope.scorer_files == ["grade.py"]
    # the command oracle declares its program and scorer readable, and its scorer's files
    state.task = {"oracle": {"kind": "command", "scorer": {"files": ["score.py"]},
                             "params": {"command": "python ./train.py", "data": "/srv/valid.parquet"}}}
    scope = AuditScope.of(state, tmp_path)
    assert scope.held_out == ["/srv/valid.parquet"] and scope.scorer_files == ["score.py"]


def test_task_schema_lists_each_plugins_settings_and_a_shared_model_once() -> None:
    rows = plugin_schema_table()
    owners = {path: owner for owner, path, *_ in rows}
    assert owners["oracle.scorer.seconds"] == "oracle command"
    assert owners["oracle.params.sleep"] == "oracle noop"
    assert owners["agents[].coding.max_turns"] == "agent aider, claude-code, codex, command"
    assert sum(1 for _o, path, *_ in rows if path == "agents[].coding.max_turns") == 1
    assert [name for name, _m in section_owners(ORACLES, "scorer")] == ["command"]
    assert [name for name, _m in section_owners(AGENTS, "coding")] == ["aider", "claude-code", "codex", "command"]
