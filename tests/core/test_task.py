"""Task YAML: validation errors name the file, the field path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from rrma.task import TaskError, load_task
from rrma.task_schema import plugin_schema_table, schema_table

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("name: t\nbudget:\n  trial_seconds: -5\n", r"budget\.trial_seconds: Input should be greater than 0 \(got -5\)"),  # bad number
        ("name: t\nbudget:\n  trial_secs: 5\n", r"budget\.trial_secs: unknown field"),  # typo
        ("name: t\nloop:\n  policy: greedy\n", r"loop\.policy: Input should be 'keep-revert', 'tree', 'independent' or 'per-theorem'"),  # bad enum
        ("name: t\nmetric:\n  direction: up\n", r"metric\.direction"),  # bad enum
        ("budget: {}\n", r": name: Field required"),  # missing required field
        ("name: t\nsearch_space:\n  LR: {kind: uniform, low: 0, high: 1}\n", r"file\.py:CONSTANT_NAME"),  # bad key
        ("name: t\nsearch_space:\n  'a.py:LR': {kind: log_uniform, low: 0, high: 1}\n", r"log_uniform needs low > 0"),
        ("name: t\nsearch_space:\n  'a.py:N': {kind: int, low: 5, high: 1}\n", r"low \(5\.0\) is greater than high"),
        ("name: t\nsearch_space:\n  'a.py:C': {kind: choice}\n", r"choice needs a non-empty"),
        ("name: t\nagents:\n  - {name: a}\n  - {name: a}\n", r"agent names must be unique; repeated: a"),
        ("name: t\n  bad: [\n", r"line 2, column 6: malformed YAML"),  # YAML syntax error
        ("- just\n- a list\n", r"expected a mapping of task fields"),  # wrong top-level type
        ("", r"the file is empty"),  # empty file
        ("name: t\nworkspace: {source: nowhere}\n", r"workspace\.source: directory .* does not exist"),
    ],
)
def test_bad_task_files(tmp_path: Path, yaml_text: str, message: str) -> None:
    path = tmp_path / "task.yaml"
    (tmp_path / "workspace").mkdir()
    path.write_text(yaml_text)
    with pytest.raises(TaskError, match=message) as info:
        load_task(path)
    assert str(path) in str(info.value)  # the file is named


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no such task file"):
        load_task(tmp_path / "absent.yaml")
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(TaskError, match="not UTF-8"):
        load_task(path)


def test_demo_task_loads_with_defaults_and_overrides() -> None:
    task = load_task(REPO / "benches/demo/task.yaml", {"budget.max_trials": 5})
    assert task.budget.max_trials == 5
    assert task.noise.min_sigmas == 2.0
    assert task.workspace_dir() == (REPO / "benches/demo/workspace").resolve()
    assert task.better(1.0, 2.0) > 0  # minimize: lower is better


def test_every_field_is_documented() -> None:
    rows = schema_table()
    assert len(rows) > 40
    undocumented = [path for path, _, _, doc in rows if not doc]
    assert undocumented == []


def test_schema_doc_is_in_sync() -> None:
    from rrma.task_schema import schema_markdown

    assert (REPO / "docs" / "task-schema.md").read_text() == schema_markdown(), "run: python -m rrma.task_schema > docs/task-schema.md"


def test_overrides_that_cannot_apply_name_the_key() -> None:
    """`--set name.first=1`: a sub-key of a scalar field is a TaskError naming the key (was a TypeError)."""
    demo = REPO / "benches/demo/task.yaml"
    with pytest.raises(TaskError, match=r"override 'name\.first': name is a str, not a section"):
        load_task(demo, {"name.first": 1})
    with pytest.raises(TaskError, match=r"override 'budget\.max_trials\.x': budget\.max_trials is a int"):
        load_task(demo, {"budget.max_trials.x": 1})
    with pytest.raises(TaskError, match=r"override 'budget\.\.x': empty field name"):
        load_task(demo, {"budget..x": 1})
    assert load_task(demo, {"bench.new.deep": 3}).bench == {"new": {"deep": 3}}  # new sections are made


def test_an_empty_section_takes_overrides(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    path = tmp_path / "task.yaml"
    path.write_text("name: t\nbudget:\n")  # `budget:` alone is null
    assert load_task(path, {"budget.max_trials": 3}).budget.max_trials == 3


def test_a_task_path_that_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="is a directory, not a task YAML file"):
        load_task(tmp_path)
    with pytest.raises(TaskError, match="not a regular file"):
        load_task("/dev/null")
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"name: x\x00\n")  # valid UTF-8, not YAML: one line, no ':: '
    with pytest.raises(TaskError) as info:
        load_task(nul)
    assert str(info.value).startswith(f"{nul}: malformed YAML: unacceptable character")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", ["binary", "symlink-out", "symlink-loop"])
def test_a_workspace_the_run_could_not_read_fails_at_load(tmp_path: Path, bad: str) -> None:
    """A binary file or a symlink out of the workspace is found when the task loads, not mid-run."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "prog.py").write_text("print('score: 1')\n")
    if bad == "binary":
        (ws / "data.bin").write_bytes(b"\x00\xff\xfe")
        message = r"workspace\.source: data\.bin: not valid UTF-8 text"
    elif bad == "symlink-out":
        (tmp_path / "outside.py").write_text("x = 1\n")
        (ws / "link.py").symlink_to(tmp_path / "outside.py")
        message = r"workspace\.source: link\.py: symlink escapes the workspace"
    else:
        (ws / "a").symlink_to(ws / "b")
        (ws / "b").symlink_to(ws / "a")
        message = r"workspace\.source: cannot read .*: Symlink loop"
    path = tmp_path / "task.yaml"
    path.write_text("name: t\n")
    with pytest.raises(TaskError, match=message) as info:
        load_task(path)
    assert str(path) in str(info.value)


def test_loop_audit_takes_yaml_on_and_off_as_words() -> None:
    from rrma.task import task_from_dict

    base = {"name": "t", "oracle": {"kind": "noop"}, "workspace": {"source": "no-workspace"}}
    assert task_from_dict({**base, "loop": {"audit": False}}).loop.audit == "off"  # YAML's bare `off`
    assert task_from_dict({**base, "loop": {"audit": True}}).loop.audit == "hold"
    assert task_from_dict(base).loop.audit == "hold"
    with pytest.raises(Exception, match="'hold', 'flag' or 'off'"):
        task_from_dict({**base, "loop": {"audit": "sometimes"}})


@pytest.mark.parametrize(("overrides", "field", "allowed"), [
    ({"noise.baseline_repeats": 100_000_000}, "noise.baseline_repeats", "from 1 to 1,000"),  # the typo of issue 31
    ({"budget.max_trials": 10**9}, "budget.max_trials", "from 0 to 100,000"),
    ({"budget.max_concurrent": 10**6}, "budget.max_concurrent", "from 1 to 1,024"),
    ({"budget.trial_memory_mb": 2**50}, "budget.trial_memory_mb", "above 0, up to 16,777,216"),  # MiB: x 2**20 overflows
    ({"budget.trial_max_processes": 10**8}, "budget.trial_max_processes", "from 8 to 4,194,304"),
    ({"budget.max_output_bytes": 2**60}, "budget.max_output_bytes", "above 0, up to 68,719,476,736"),
    ({"budget.trial_disk_mb": 2**40}, "budget.trial_disk_mb", "above 0, up to 16,777,216"),
    ({"budget.num_cpus": 1e6}, "budget.num_cpus", "above 0, up to 4,096"),
    ({"loop.top_k": 10**7}, "loop.top_k", "from 0 to 1,000"),  # history sizes
    ({"loop.recent_k": 10**7}, "loop.recent_k", "from 0 to 1,000"),
    ({"loop.agents_parallel": 101}, "loop.agents_parallel", "from 1 to 100"),  # agent seeds stay distinct
    ({"loop.confirm": 21}, "loop.confirm", "from 0 to 20"),
    ({"loop.early_abort.min_items": 10**7}, "loop.early_abort.min_items", "from 1 to 1,000,000"),
    ({"loop.early_abort.looks": [i / 1000 for i in range(1, 200)]}, "loop.early_abort.looks", "at most 100 entries"),
    ({"loop.policy": "per-theorem", "loop.attempts_per_theorem": 10**6}, "loop.attempts_per_theorem",
     "from 1 to 10,000"),
    ({"agents": [{"name": "a", "max_tokens": 10**9}]}, "agents.0.max_tokens", "above 0, up to 1,000,000"),
    ({"agents": [{"name": "a", "max_failures": 10**6}]}, "agents.0.max_failures", "from 1 to 1,000"),
    ({"agents": [{"name": "a", "max_run_tokens": -5}]}, "agents.0.max_run_tokens", "from 0 to 1,000,000,000,000"),
    # a coding agent's own section (agents/coding/settings.py), checked against the model it declares
    ({"agents": [{"name": "a", "backend": "command", "coding": {"max_turns": 10**6}}]}, "agents.0.coding.max_turns",
     "from 1 to 10,000"),
    ({"agents": [{"name": "a", "backend": "aider", "coding": {"attempts": 1000}}]}, "agents.0.coding.attempts",
     "from 1 to 100"),
    # the command oracle's scorer section and the noop oracle's params (oracle/command_settings.py)
    ({"oracle.scorer.seconds": 10**6}, "oracle.scorer.seconds", "above 0, up to 86,400"),
    ({"oracle.kind": "noop", "oracle.params": {"sleep": 10**6}}, "oracle.params.sleep", "from 0 to 86,400"),
    ({"seed": 2**64}, "seed", "from 0 to 4,294,967,295"),  # seeds derived from it stay within what torch takes
])
def test_every_count_and_size_has_an_upper_bound_named_in_its_error(tmp_path: Path, overrides: dict, field: str,
                                                                   allowed: str) -> None:
    path = tmp_path / "task.yaml"
    (tmp_path / "workspace").mkdir()
    path.write_text("name: t\n")
    with pytest.raises(TaskError) as info:
        load_task(path, overrides)
    [line] = str(info.value).splitlines()
    assert line.startswith(f"{path}: {field}: ") and line.endswith(f"; allowed: {allowed}"), line


def test_agent_instances_are_bounded_across_agents_and_copies(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    (tmp_path / "workspace").mkdir()
    path.write_text("name: t\n")
    agents = [{"name": f"a{i}"} for i in range(11)]
    assert len(load_task(path, {"agents": agents, "loop.agents_parallel": 90}).agents) == 11  # 990 instances
    with pytest.raises(TaskError, match=r"agents x loop.agents_parallel: 11 x 100 = 1100 agent instances; "
                                        r"allowed: at most 1024"):
        load_task(path, {"agents": agents, "loop.agents_parallel": 100})


def test_no_count_or_size_field_is_unbounded() -> None:
    """Every integer field of the table (counts, sizes, limits, the seed) and every list of values has an upper
    bound, shown in the schema's type column: a field added without one fails here."""
    rows = schema_table() + [row[1:] for row in plugin_schema_table()]  # the plug-ins' declared settings too
    ints = [(path, type_name) for path, type_name, _, _ in rows if type_name.startswith(("int", "list[float]"))]
    assert len(ints) >= 20
    unbounded = [path for path, type_name in ints if " to " not in type_name and "at most" not in type_name]
    assert unbounded == []
