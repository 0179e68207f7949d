"""The trained policy's prompt and reply format: one rendering for training rows and for the live agent.

A policy that writes edits as text (the ``policy`` backend, agents/policy.py; the rollouts of
``rrma-tui train grpo``) sees a conversation of two messages and answers with one:

* **system**: the task's description and the reply format;
* **user**: the metric of the state it builds on and the editable text of that state. On a task with a
  ``search_space`` the state is the declared constants, one ``NAME = value`` per line; otherwise it
  is each editable file in full, fenced (```` ```path ```` ... ```` ``` ````);
* **assistant**: the change. On a ``search_space`` task: the constants to change, one ``NAME = value``
  per line (``path:NAME = value`` when two files declare the same name); otherwise each changed file in
  full, fenced as above.

The dataset export renders the same two messages for a proposal of any agent (from the parent's files
in the run's blobs), and the proposal's edit as the assistant message in this format, unless the agent
itself recorded the exact text it generated (a policy agent does: its reply turn). So a policy trained
on the export is prompted at run time exactly as in its training rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rrma.task import TaskConfig
from rrma.trial import FileEdit
from rrma.workspace import EditRules, read_constant, write_constant

FORMAT_CONSTANTS = "Reply with the constants to change, one per line, as NAME = value."
FORMAT_FILES = "Reply with each file you change in full: a line ```path, the file's new text, then a line ```."
_LINE = re.compile(r"^\s*(?:(?P<path>[\w./-]+):)?(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>[^#\n]*?)\s*(?:#.*)?$")
_FENCE = re.compile(r"^```(?P<path>[^\s`]+)[ \t]*\n(?P<body>.*?)(?:\n)?^```[ \t]*$", re.MULTILINE | re.DOTALL)
NUMBER = re.compile(r"^[+-]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")  # a number a reply may give (agents/local.py's grammar too)
_STRING = re.compile(r"""^(?:'[^'\\\n]*'|"[^"\\\n]*")$""")


class ReplyError(ValueError):
    """A reply that is not in the format (the trial is recorded as invalid, with this message)."""


@dataclass(frozen=True)
class Constant:
    key: str  # "path:NAME", as in the task's search_space
    path: str
    name: str
    label: str  # how the prompt and the reply name it: NAME, or path:NAME when the name is in two files


def constants(task: TaskConfig) -> list[Constant]:
    """The search space's constants in the task's order, each with the label replies use."""
    keys = list(task.search_space)
    names = [k.split(":", 1)[1] for k in keys]
    out = []
    for key in keys:
        path, name = key.split(":", 1)
        out.append(Constant(key, path, name, name if names.count(name) == 1 else key))
    return out


def system_message(task: TaskConfig) -> str:
    fmt = FORMAT_CONSTANTS if task.search_space else FORMAT_FILES
    return f"{task.description.strip()}\n{fmt}".strip()


def user_message(task: TaskConfig, files: dict[str, str], score: float | None, editable: list[str]) -> str:
    """The state a proposal builds on: its score and its editable text (constants or whole files)."""
    metric = task.metric.name
    head = f"{metric} now: {'unknown' if score is None else f'{score:.4g}'} (lower is better)" \
        if task.metric.direction == "minimize" else \
        f"{metric} now: {'unknown' if score is None else f'{score:.4g}'} (higher is better)"
    if task.search_space:
        lines = [f"{c.label} = {read_constant(files.get(c.path, ''), c.name) or '?'}" for c in constants(task)]
        return head + "\n" + "\n".join(lines)
    blocks = [f"```{path}\n{files[path].rstrip(chr(10))}\n```" for path in sorted(files) if path in editable]
    return head + "\n" + "\n".join(blocks)


def messages(task: TaskConfig, files: dict[str, str], score: float | None, editable: list[str]) -> list[dict[str, str]]:
    """The prompt: the system and user messages (TRL's conversational format)."""
    return [{"role": "system", "content": system_message(task)},
            {"role": "user", "content": user_message(task, files, score, editable)}]


def reply_text(task: TaskConfig, before: dict[str, str], after: dict[str, str], editable: list[str]) -> str:
    """A proposal's change in the reply format (what a policy would have written to make it)."""
    if task.search_space:
        lines = []
        for c in constants(task):
            old, new = read_constant(before.get(c.path, ""), c.name), read_constant(after.get(c.path, ""), c.name)
            if new is not None and new != old:
                lines.append(f"{c.label} = {new}")
        if lines:
            return "\n".join(lines)
    changed = [p for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p) and p in after]
    return "\n".join(f"```{path}\n{after[path].rstrip(chr(10))}\n```" for path in changed)


def parse_reply(task: TaskConfig, text: str, files: dict[str, str], editable: list[str]) -> tuple[list[FileEdit], str]:
    """The edits a reply asks for, and a one-line hypothesis naming them. Raises :class:`ReplyError`."""
    if task.search_space:
        return _parse_constants(task, text, files)
    edits, names = [], []
    for match in _FENCE.finditer(text):
        path = match.group("path")
        if not EditRules(list(editable)).is_editable(path):
            raise ReplyError(f"the reply writes {path}, which is not editable ({', '.join(editable)})")
        edits.append(FileEdit(path=path, content=match.group("body") + "\n"))
        names.append(path)
    if not edits:
        raise ReplyError("the reply has no fenced file (```path ... ```)")
    return edits, "rewrite " + ", ".join(names)


def _parse_constants(task: TaskConfig, text: str, files: dict[str, str]) -> tuple[list[FileEdit], str]:
    known = {c.label: c for c in constants(task)}
    known.update({c.key: c for c in constants(task)})
    new_files: dict[str, str] = {}
    parts: list[str] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        if match is None:
            raise ReplyError(f"a line is not NAME = value: {raw.strip()[:60]!r}")
        label = f"{match.group('path')}:{match.group('name')}" if match.group("path") else match.group("name")
        const = known.get(label)
        if const is None:
            raise ReplyError(f"{label} is not one of the constants ({', '.join(c.label for c in constants(task))})")
        if const.key in seen:
            raise ReplyError(f"{const.label} is given twice")
        seen.add(const.key)
        value = match.group("value").strip()
        if not (NUMBER.match(value) or _STRING.match(value)):
            raise ReplyError(f"{const.label} = {value[:40]!r} is not a number or a quoted string")
        text_now = new_files.get(const.path, files.get(const.path))
        if text_now is None or read_constant(text_now, const.name) is None:
            raise ReplyError(f"{const.path} has no assignment of {const.name} to change")
        parts.append(f"{const.name} {read_constant(text_now, const.name)} -> {value}")
        new_files[const.path] = write_constant(text_now, const.name, value)
    if not new_files:
        raise ReplyError("the reply changes no constant")
    return [FileEdit(path=p, content=t) for p, t in new_files.items()], "; ".join(parts)
