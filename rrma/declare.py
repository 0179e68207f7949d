"""What a plug-in declares about its own settings: the core checks a task against it, never by a plug-in's name.

Why it exists: the task file (rrma/task.py) is the core's settings table, but ``oracle.params``, the command
oracle's ``oracle.scorer`` and a coding agent's ``agents[].coding`` mean something only to one plug-in. Each
plug-in says what it takes, as class attributes of its :class:`~rrma.contracts.Oracle` or
:class:`~rrma.contracts.Agent` (both inherit the defaults from here), and :func:`rrma.task.task_from_dict`
checks the task against the plug-in the task names (found through :mod:`rrma.registry`):

* ``params_model``: a pydantic model of ``oracle.params`` (or ``agents[].params``). The task's params are
  checked against it and kept as written (they are part of the cache key); None: not checked.
* ``sections``: further keys the plug-in owns beside ``params`` (``oracle.scorer``, ``agents[].coding``),
  each a pydantic model; the validated model is what the task holds under that key (``config.section(name)``).
  A key no plug-in of the task declares is an unknown field.
* the oracle's capabilities: ``needs_workspace`` (False: the task needs no ``workspace.source`` folder, e.g.
  a proof bench whose theorems come from the oracle), ``holds_answers`` (its held-out data is the answers,
  so the audit reads a look at it as looking up the answer), and what the audit reads from a recorded task:
  ``scoring_files`` (the workspace files it scores with) and ``readable_params`` (params agents may read).
* hooks, run after the settings validate: :meth:`Declares.settle` (derived values: the command oracle folds
  its scorer into ``params``), :meth:`Declares.check_task` (rules across the task, e.g. a scorer never
  editable), :meth:`Declares.check_files` (what the files of the task's folder must hold), and
  :meth:`OracleDeclares.self_reported` (the metric is what a program agents edit prints).

A hook reports a problem by raising :class:`SettingError` naming the field; the core adds the task file's
name. This module imports nothing of the project: the task table, the registry and the contracts all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class SettingError(ValueError):
    """A plug-in's setting is wrong: ``field`` (dotted, from the task's top) and what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class PluginSettings(BaseModel):
    """Base of a plug-in's params or section model: unknown keys refused, every field documented, finite floats.

    Its fields' docstrings are its rows of ``rrma-tui task-schema`` (as the core's own fields are)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class Declares:
    """What every plug-in (oracle or agent) may declare; the defaults declare nothing and check nothing."""

    params_model: ClassVar[type[BaseModel] | None] = None
    """The model ``params`` is checked against (None: not checked)."""
    sections: ClassVar[Mapping[str, type[BaseModel]]] = {}
    """Keys beside ``params`` this plug-in owns, each with its model."""

    @classmethod
    def settle(cls, config: Any) -> None:
        """Called with the task's oracle (or agent) entry once its params and sections validate: set derived
        values there (raise :class:`SettingError` on a conflict)."""
        return None

    @classmethod
    def check_task(cls, task: Any) -> None:
        """Rules across the whole task (``task`` is a :class:`rrma.task.TaskConfig`); :class:`SettingError` if broken."""
        return None

    @classmethod
    def check_files(cls, task: Any, workspace: Path) -> None:
        """Rules on the files of the task's workspace folder (only a task file's load reads them)."""
        return None


class OracleDeclares(Declares):
    """What an oracle declares besides its settings: its capabilities."""

    needs_workspace: ClassVar[bool] = True
    """False: a task of this oracle needs no workspace.source folder (its work comes from the oracle)."""
    holds_answers: ClassVar[bool] = False
    """True: its held-out data is the answers (reading it is looking the answer up, not reading scorer data)."""
    readable_params: ClassVar[tuple[str, ...]] = ()
    """Keys of its params whose paths agents may read by design (its program, its scorer): never held out (what
    the audit of a run recorded before runs listed their held-out paths leaves out of the path-like params)."""

    @classmethod
    def scoring_files(cls, recorded: Mapping[str, Any]) -> list[str]:
        """The workspace files it scores with, read from the task's recorded oracle entry (``run.started``'s
        ``task.oracle``): agents may read them, never edit them, and they are never held out (the audit)."""
        return []

    @classmethod
    def self_reported(cls, config: Any, metric: str = "score") -> str | None:
        """Why, with the task's oracle entry ``config``, metric ``metric`` is what a program agents edit prints
        (a sentence for the task's error: what the oracle reads, and what the task should say); None: the
        oracle computes it."""
        return None


def capabilities(cls: type[OracleDeclares]) -> dict[str, bool]:
    """An oracle class's capabilities by name (what ``rrma-tui task-schema`` shows)."""
    return {"needs_workspace": cls.needs_workspace, "holds_answers": cls.holds_answers}


__all__ = ["Declares", "OracleDeclares", "PluginSettings", "SettingError", "capabilities"]
