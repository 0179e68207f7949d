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
        ("name: t\nloop:\n  policy: greedy\n", r"loop\.policy: Input should be 'keep-revert', 'tree' or 'independent'"),  # bad enum
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
