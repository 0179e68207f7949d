"""Oracle kind ``lean``: the plug-in the research loop calls, over :class:`~oracle.lean.checker.LeanChecker`.

It strips the project's theorems (:mod:`oracle.strip_lean`), names them for the per-theorem policy,
declares the stripped sources held out, and turns a verdict into an outcome with feedback an agent can
act on. Invariant: it never shows a theorem's original proof nor the file that holds it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from oracle.lean.checker import LeanChecker
from oracle.lean.project import DEFAULT_PROJECT, REPO_ROOT, toolchain_of
from oracle.lean_audit import answer_paths, hidden_source_paths
from oracle.proof_common import TheoremTask, Verdict, select_theorems, theorem_views
from oracle.strip_lean import LeanSyntaxError, strip_lean_file, strip_project
from rrma.contracts import EvalContext, Oracle, OracleError, PluginSettings
from rrma.trial import Outcome, Status


def feedback_text(verdict: Verdict, limit: int = 4000) -> str:
    """What an agent sees: the reason, Lean's messages with proof positions, the remaining goals."""
    lines = ["proof accepted" if verdict.accepted else f"proof rejected: {verdict.reason}"]
    for m in verdict.messages:
        if m.get("severity") not in ("error", "warning"):
            continue
        where = (f"proof line {m['proof_line']}, column {m['proof_column']}" if "proof_line" in m
                 else f"line {m.get('line')}, column {m.get('column')}")
        lines.append(f"{m['severity']} at {where}: {m.get('text', '')}")
    if verdict.goals:
        lines.append("remaining goals:")
        lines.extend(verdict.goals)
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 20] + "\n[... truncated ...]"


class LeanParams(PluginSettings):
    """``oracle.params`` of the lean oracle (checked when a task is loaded: rrma/declare.py)."""

    project: str = "lean_project"
    """The Lake project's directory (relative: to the repository)."""
    source: str | None = None
    """One .lean file to strip (or sources)."""
    sources: list[str] | None = None
    """The .lean files to strip (default: every Theorems/*.lean of the project)."""
    theorems: list[str] | None = None
    """Only these theorems, in this order (default: all the files hold)."""
    mode: Literal["auto", "repl", "cli"] = "auto"
    """How proofs are checked: the Lean REPL, one lean process per check, or the REPL falling back to the CLI."""
    pool_size: int = Field(1, ge=1, le=1024)
    """REPL sessions kept warm."""
    max_commands: int = Field(200, ge=1, le=1_000_000)
    """Commands one REPL session runs before it is replaced."""
    memory_mb: int = Field(4096, ge=1, le=16_777_216)
    """Memory limit of a REPL (or lean) process group (MB)."""
    timeout_s: float | None = None
    """Seconds of one check (default: the trial's budget)."""


class LeanOracle(Oracle):
    """Oracle kind ``lean``: scores a proposal's proof (1.0 accepted) of ``proposal.theorem``.

    params: ``project`` (Lake project dir, default ``lean_project``), ``source`` or ``sources``
    (``.lean`` files; default every ``Theorems/*.lean`` of the project), ``theorems`` (only these
    names, in this order; default all), ``mode`` (auto|repl|cli), ``pool_size``, ``max_commands``,
    ``memory_mb``, ``timeout_s`` (default: the trial budget). :meth:`theorems` names them for the
    per-theorem policy (rrma/run/theorems.py).
    """

    needs_workspace = False  # its theorems come from the oracle (rrma/declare.py)
    params_model = LeanParams
    kind = "lean"
    version = "1"

    def __init__(self, params: dict[str, Any], *, metric: str = "proved", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        project = Path(params.get("project", DEFAULT_PROJECT))
        self.project_dir = project if project.is_absolute() else (REPO_ROOT / project)
        sources = params.get("sources") or ([params["source"]] if params.get("source") else [])
        self.sources = [Path(s) for s in sources]
        self.checker = LeanChecker(self.project_dir, mode=str(params.get("mode", "auto")),
                                   pool_size=int(params.get("pool_size", 1)),
                                   max_commands=int(params.get("max_commands", 200)),
                                   memory_mb=int(params.get("memory_mb", 4096)))
        self._tasks: dict[str, TheoremTask] | None = None
        self._tasks_lock = threading.Lock()
        self.answers: tuple[Path, ...] = ()

    @property
    def tasks(self) -> dict[str, TheoremTask]:
        with self._tasks_lock:
            if self._tasks is None:
                found = ([t for s in self.sources for t in strip_lean_file(s)] if self.sources
                         else strip_project(self.project_dir))
                try:
                    self._tasks = select_theorems({t.name: t for t in found}, self.params.get("theorems"),
                                                  "lean oracle")
                except ValueError as exc:
                    raise OracleError(str(exc)) from exc
            return self._tasks

    def theorems(self) -> list[dict[str, Any]]:
        """The theorems to prove, in order: each one's public view (never its proof nor its file's
        path) and its file's basename (for per-file counts)."""
        return theorem_views(self.tasks)

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        self.checker.ensure_available()
        try:
            tasks = self.tasks
        except (OSError, LeanSyntaxError) as exc:
            raise OracleError(f"lean oracle: cannot strip theorems: {exc}") from exc
        # Lean must not read the stripped files (their original proofs) while it checks; agents'
        # processes see neither them nor their compiled forms (held_out)
        sources = {t.source_file for t in tasks.values()}
        self.checker.hidden = tuple(hidden_source_paths(self.project_dir, sources, [t.context for t in tasks.values()]))
        self.answers = answer_paths(self.project_dir, sources)
        return {"lean_toolchain": toolchain_of(self.project_dir), "theorems": len(tasks),
                "lean_project": str(self.project_dir)}

    def setup_allowance_s(self) -> float:
        """A REPL session loads the file's header (its imports) once, under its own bound, before a check's
        seconds start; the CLI elaborates the whole file within the check's seconds, and has none."""
        return 0.0 if self.checker.mode == "cli" else self.checker.header_timeout_s

    def held_out(self) -> tuple[Path, ...]:
        """The stripped sources (every original proof) and all their compiled forms."""
        return self.answers

    def evaluate(self, ctx: EvalContext) -> Outcome:
        proposal = ctx.proposal
        if not proposal.theorem or proposal.proof is None or not proposal.proof.strip():
            return Outcome(status=Status.invalid, feedback="a Lean proposal needs `theorem` (a name) and `proof` "
                           "(the proof body after `:=`, e.g. `by simp`)")
        task = self.tasks.get(proposal.theorem)
        if task is None:
            known = ", ".join(sorted(self.tasks)[:10])
            return Outcome(status=Status.invalid, feedback=f"unknown theorem {proposal.theorem!r}; known: {known}, ...")
        given = self.params.get("timeout_s")  # absent or null: the trial's budget
        timeout_s = float(given if given is not None else ctx.budget.seconds)
        verdict = self.checker.check(task, proposal.proof, timeout_s=timeout_s)
        return Outcome(
            status=Status(verdict.status),
            score=1.0 if verdict.accepted else None,
            metrics={"accepted": verdict.accepted, "cheat": verdict.cheat, "reason": verdict.reason,
                     "axioms": verdict.axioms, "theorem": task.name, "difficulty": task.difficulty},
            feedback=feedback_text(verdict),
            log=json.dumps(verdict.to_json(), ensure_ascii=False)[:200_000],
            seconds=verdict.seconds,
        )

    def close(self) -> None:
        self.checker.close()
