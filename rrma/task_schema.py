"""The task's settings table in words: every field with its type, default and meaning, the plug-ins' own included.

Why it exists: ``rrma-tui task-schema`` and docs/task-schema.md print one table from the fields themselves (their
types, bounds and docstrings), so the documentation cannot drift from what :func:`rrma.task.load_task` checks.
The core's fields come from :class:`rrma.task.TaskConfig`; each plug-in's params and sections from the models it
declares (rrma/declare.py), found through the registry, which imports every plug-in that resolves here.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from rrma.declare import OracleDeclares, capabilities
from rrma.registry import AGENTS, ORACLES, declared
from rrma.task import TaskConfig, allowed_range


def schema_table() -> list[tuple[str, str, str, str]]:
    """(field path, type, default, doc) for every task field of the core: drives docs and `task-schema`."""
    return _rows(TaskConfig, "")


def _rows(model: type[BaseModel], prefix: str) -> list[tuple[str, str, str, str]]:
    """(field path, type, default, doc) for every field of ``model``, sub-models walked, paths under ``prefix``."""
    rows: list[tuple[str, str, str, str]] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            if info.exclude:
                continue
            ann = info.annotation
            path = f"{prefix}{name}"
            sub = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
            if sub is not None:
                walk(sub, path + ".")
                continue
            inner = getattr(ann, "__args__", None)
            if ann is not None and getattr(ann, "__origin__", None) is list and inner and isinstance(inner[0], type) and issubclass(inner[0], BaseModel):
                walk(inner[0], path + "[].")
                continue
            default = "required" if info.is_required() else repr(info.get_default(call_default_factory=True))
            allowed = allowed_range(info)
            rows.append((path, _type_name(ann) + (f", {allowed}" if allowed else ""), default, info.description or ""))

    walk(model, prefix)
    return rows


def plugin_schema_table() -> list[tuple[str, str, str, str, str]]:
    """(plug-ins, field path, type, default, doc) for every setting a plug-in declares (its params model and its
    sections: rrma/declare.py), through the registry; plug-ins sharing one model share its rows. Imports every
    plug-in that resolves here."""
    found: dict[tuple[str, str, type[BaseModel]], list[str]] = {}
    for family, where in ((ORACLES, "oracle"), (AGENTS, "agents[]")):
        noun = family.noun.split()[0]  # oracle, agent
        for name, cls in declared(family):
            models = ([("params", cls.params_model)] if cls.params_model is not None else []) + list(cls.sections.items())
            for key, model in models:
                found.setdefault((noun, f"{where}.{key}.", model), []).append(name)
    return [(f"{noun} {', '.join(names)}", *row) for (noun, prefix, model), names in found.items()
            for row in _rows(model, prefix)]


def oracle_capabilities() -> list[tuple[str, dict[str, bool]]]:
    """(oracle kind, its capabilities) for every oracle that resolves here (rrma/declare.py)."""
    return [(name, capabilities(cls)) for name, cls in declared(ORACLES) if issubclass(cls, OracleDeclares)]


def _type_name(ann: Any) -> str:
    text = str(ann).replace("typing.", "").replace("rrma.task.", "").replace("__main__.", "")
    return re.sub(r"<class '([^']+)'>", r"\1", text)


def schema_markdown() -> str:
    """docs/task-schema.md, generated from the settings table and the plug-ins' declarations (a test keeps it in sync)."""
    lines = [
        "# Task YAML fields",
        "",
        "Generated from `rrma/task.py` and the plug-ins' declarations by `python -m rrma.task_schema > docs/task-schema.md`; do not edit by hand.",
        "",
        "| field | type | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for path, type_name, default, doc in schema_table():
        cells = [path, type_name, default, doc]
        lines.append("| " + " | ".join(f"`{c}`" if i < 3 else c for i, c in enumerate(c.replace("|", "\\|") for c in cells)) + " |")
    lines += ["", "## Plug-in settings", "",
              "What each oracle and agent backend declares (rrma/declare.py, docs/plugins.md): its `params` model and",
              "the sections it owns; a task is checked against the plug-in it names when it is loaded.", "",
              "| plug-in | field | type | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for owner, path, type_name, default, doc in plugin_schema_table():
        cells = [path, type_name, default, doc]
        lines.append(f"| {owner} | " + " | ".join(f"`{c}`" if i < 3 else c
                                                  for i, c in enumerate(c.replace("|", "\\|") for c in cells)) + " |")
    lines += ["", "## Oracle capabilities", "", "| oracle kind | needs_workspace | holds_answers |", "| --- | --- | --- |"]
    for kind, caps in oracle_capabilities():
        lines.append(f"| {kind} | {caps['needs_workspace']} | {caps['holds_answers']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(schema_markdown(), end="")
