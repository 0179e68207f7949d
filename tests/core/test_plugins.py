"""Plug-ins: a package outside RRMA adds an oracle and an agent, and a task uses them by name.

tests/plugins/rrma_example_plugin is a real distribution with its own pyproject.toml that declares
an ``rrma.oracles`` and an ``rrma.agents`` entry point. The first tests install it for real (pip,
no network, no build isolation) into a temporary directory and run ``rrma-tui --headless run`` on a
task that names both by their entry-point names only; without the package the same task fails with
one clear line naming the known kinds. The rest check the resolver's rules (rrma/plugins.py) on
distributions written straight onto ``sys.path`` (a ``.dist-info`` directory is all
importlib.metadata reads): a plug-in that fails to import, a clash with a built-in, two plug-ins
with one name, the ``module:Class`` form.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rrma import plugins
from rrma.contracts import AgentError, Oracle, OracleError
from rrma.task import AgentConfig, TaskConfig

REPO = Path(__file__).resolve().parents[2]
PLUGIN_SOURCE = REPO / "tests" / "plugins" / "rrma_example_plugin"
NOTES = "notes.txt"

TASK = """\
name: plugin-example
oracle:
  kind: example-count
workspace:
  source: workspace
  editable: ["notes.txt"]
metric:
  name: ideas
  direction: maximize
budget:
  trial_seconds: 10
  max_trials: 3
noise:
  baseline_repeats: 2
agents:
  - name: adder
    backend: example-append
    params: {proposals: 3}
"""


def cli_command() -> list[str]:
    """The console script ``rrma-tui`` as pyproject.toml declares it, run by this interpreter."""
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["rrma-tui"]
    module, _, function = target.partition(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function}; sys.exit({function}())"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plug-in pip-installed into a fresh directory (built from a copy: pip builds in-tree)."""
    base = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(PLUGIN_SOURCE, base / "source")
    site = base / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--disable-pip-version-check", "--target", str(site), str(source)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (site / "rrma_example_plugin").is_dir()
    assert list(site.glob("rrma_example_plugin-*.dist-info/entry_points.txt"))
    return site


def write_task(folder: Path) -> Path:
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / NOTES).write_text("notes\nidea 1 from the start\n")
    (folder / "task.yaml").write_text(TASK)
    return folder / "task.yaml"


def run_cli(task: Path, runs: Path, pythonpath: str | None) -> subprocess.CompletedProcess[str]:
    # the tree under test first (not whatever checkout is installed), and the plug-in's site only where asked
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), pythonpath) if p)}
    return subprocess.run([*cli_command(), "--headless", "run", str(task), "--runs", str(runs)], env=env,
                          cwd=task.parent, capture_output=True, text=True, timeout=120)


def ideas(text: str) -> int:
    """The example oracle's rule, restated: lines of notes.txt that start with ``idea``."""
    return sum(1 for line in text.splitlines() if line.startswith("idea"))


def test_a_plugin_oracle_and_agent_installed_by_pip_run_a_task_by_name(installed: Path, tmp_path: Path) -> None:
    task = write_task(tmp_path / "task")
    proc = run_cli(task, tmp_path / "runs", str(installed))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "run.finished" and events[-1]["data"]["reason"] == "max_trials"
    proposed = {e["data"]["trial_id"]: e["data"] for e in events if e["kind"] == "trial.proposed"}
    finished = {e["data"]["trial_id"]: e["data"] for e in events if e["kind"] == "trial.finished"}
    # the agent's proposals are in the log, under its name, each adding one idea to its parent's notes
    mine = [p for p in proposed.values() if p["agent"] == "adder"]
    assert [p["hypothesis"] for p in mine] == [f"example-append: add idea {n}" for n in (2, 3, 4)]
    for data in mine:
        (edit,) = data["edits"]
        assert edit["path"] == NOTES
        text = (run_dir / "blobs" / edit["blob"]).read_text()
        # the score is the plug-in oracle's, computed from the file the trial proposed
        outcome = finished[data["trial_id"]]
        assert outcome["status"] == "ok" and outcome["score"] == ideas(text)
        assert outcome["metrics"] == {"ideas": ideas(text), "scored_by": "rrma_example_plugin"}
    baselines = [finished[t] for t, p in proposed.items() if p["baseline"]]
    assert [b["score"] for b in baselines] == [1.0, 1.0]
    assert all(b["metrics"]["scored_by"] == "rrma_example_plugin" for b in baselines)
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["task"]["oracle"]["kind"] == "example-count"


def test_a_plugin_declares_its_params_and_the_task_is_checked_against_them(installed: Path, tmp_path: Path) -> None:
    """The installed agent declares ``params.proposals`` (1 to 1,000): a task asking for 0 is refused before a run
    directory exists, in one line naming the field; ``task-schema`` lists the field under the plug-in's name."""
    task = write_task(tmp_path / "task")
    task.write_text(TASK.replace("proposals: 3", "proposals: 0"))
    proc = run_cli(task, tmp_path / "runs", str(installed))
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"rrma-tui: {task}: agents.0.params.proposals: Input should be greater than or equal to 1")
    assert line.endswith("(got 0); allowed: from 1 to 1,000")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO), str(installed))), "COLUMNS": "400"}
    schema = subprocess.run([*cli_command(), "task-schema"], env=env, capture_output=True, text=True, timeout=120)
    assert schema.returncode == 0, schema.stderr
    (row,) = [r for r in schema.stdout.splitlines() if "agents[].params.proposals" in r]
    assert "example-append" in row and "from 1 to 1,000" in row


def test_without_the_plugin_the_same_task_fails_naming_the_known_kinds(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task")
    proc = run_cli(task, tmp_path / "runs", None)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one line, no traceback
    assert lines[0].startswith("rrma-tui: unknown oracle kind 'example-count'; known: ")
    for builtin in ("command", "coq", "lean", "autoresearch"):
        assert builtin in lines[0]
    assert "rrma.oracles" in lines[0]  # how a package adds one
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # nothing created


# ----------------------------------------------------------------------------- the resolver's rules


def add_distribution(site: Path, name: str, oracles: dict[str, str] | None = None,
                     agents: dict[str, str] | None = None, modules: dict[str, str] | None = None) -> None:
    """Write an installed distribution as importlib.metadata reads it: a .dist-info and its modules."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    sections = []
    for group, table in (("rrma.oracles", oracles), ("rrma.agents", agents)):
        if table:
            sections.append(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in table.items()))
    (info / "entry_points.txt").write_text("\n".join(sections))
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)


ORACLE_MODULE = """
from rrma.contracts import Oracle, Outcome, Status

class Seven(Oracle):
    kind = "seven"
    def evaluate(self, ctx):
        return Outcome(status=Status.ok, score=7.0)
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_an_entry_point_is_found_by_name_and_imported_only_when_resolved(site: Path) -> None:
    add_distribution(site, "seven-plugin", oracles={"seven": "seven_oracle:Seven"},
                     modules={"seven_oracle": ORACLE_MODULE})
    found = plugins.find_oracle("seven")
    assert (found.target, found.source) == ("seven_oracle:Seven", "distribution seven-plugin 1.0")
    assert "seven_oracle" not in sys.modules  # finding is not importing
    assert "seven" in plugins.known_oracles() and "coq" in plugins.known_oracles()
    oracle = plugins.make_oracle("seven", {}, metric="m", direction="maximize")
    assert isinstance(oracle, Oracle) and (oracle.metric, oracle.direction) == ("m", "maximize")
    sys.modules.pop("seven_oracle", None)


def test_a_plugin_that_fails_to_import_names_its_distribution_and_the_error(site: Path) -> None:
    add_distribution(site, "broken-plugin", oracles={"broken": "broken_oracle:Broken"},
                     modules={"broken_oracle": "raise RuntimeError('needs a GPU driver')\n"})
    with pytest.raises(OracleError) as caught:
        plugins.resolve_oracle("broken")
    message = str(caught.value)
    assert "'broken'" in message and "distribution broken-plugin 1.0" in message
    assert "RuntimeError: needs a GPU driver" in message


def test_a_plugin_cannot_take_a_builtin_name_and_the_other_names_still_resolve(site: Path) -> None:
    add_distribution(site, "squatter", oracles={"coq": "seven_oracle:Seven", "seven": "seven_oracle:Seven"},
                     agents={"replay": "seven_oracle:Seven"}, modules={"seven_oracle": ORACLE_MODULE})
    with pytest.raises(OracleError, match=r"'coq' is built in \(oracle.coq:CoqOracle\) and also declared by "
                                          r"distribution squatter 1.0"):
        plugins.find_oracle("coq")
    with pytest.raises(AgentError, match="'replay' is built in"):
        plugins.find_agent("replay")
    assert plugins.find_oracle("command").target == "oracle.command:CommandOracle"
    assert plugins.find_oracle("seven").target == "seven_oracle:Seven"


def test_two_plugins_with_one_name_are_an_error_naming_both(site: Path) -> None:
    add_distribution(site, "first-plugin", oracles={"twin": "first_mod:A"})
    add_distribution(site, "second-plugin", oracles={"twin": "second_mod:B"})
    with pytest.raises(OracleError) as caught:
        plugins.find_oracle("twin")
    assert "first-plugin 1.0 (first_mod:A)" in str(caught.value)
    assert "second-plugin 1.0 (second_mod:B)" in str(caught.value)


def test_the_module_class_form_needs_no_metadata_and_must_honour_the_contract(site: Path) -> None:
    (site / "loose_mod.py").write_text(ORACLE_MODULE + "\nclass NotAnOracle:\n    def __init__(self, *a, **k): pass\n")
    assert plugins.make_oracle("loose_mod:Seven", {}).kind == "seven"
    with pytest.raises(OracleError, match=r"made a NotAnOracle, not an rrma\.contracts\.Oracle"):
        plugins.make_oracle("loose_mod:NotAnOracle", {})
    with pytest.raises(OracleError, match="module loose_mod has no Missing"):
        plugins.resolve_oracle("loose_mod:Missing")
    sys.modules.pop("loose_mod", None)


def test_an_unknown_agent_backend_names_the_known_ones() -> None:
    task = TaskConfig.model_validate({"name": "t"})
    with pytest.raises(AgentError, match=r"unknown agent backend 'nope'; known: .*random-search.*replay"):
        plugins.make_agent(AgentConfig(name="a", backend="nope"), task)
