"""Task YAML: validation errors name the file, the field path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from rrma.task import TaskError, load_task, schema_table

REPO = Path(__file__).resolve().parent.parent


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
    from rrma.task import schema_markdown

    assert (REPO / "docs" / "task-schema.md").read_text() == schema_markdown(), "run: python -m rrma.task > docs/task-schema.md"


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
