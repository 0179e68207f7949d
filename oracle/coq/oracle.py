"""Oracle kind ``coq``: the plug-in the research loop calls, over the cold or warm checker.

It strips the ``.v`` files (:mod:`oracle.strip_coq`), attaches each theorem's module and the preload,
names the theorems for the per-theorem policy in the declared setting, declares the answers held out
and turns a verdict into an outcome. Invariant: an agent never sees a theorem's original proof nor the
file that holds it; in the ``rediscover`` setting it sees earlier proofs as ``Admitted.``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from oracle.coq.cold import CoqChecker
from oracle.coq.modules import attach_modules, libraries_loaded_by
from oracle.coq.reference import OriginalAxioms
from oracle.coq.sandboxing import (
    OBJECT_SUFFIXES,
    CoqSandbox,
    answer_paths,
    checker_hidden,
    compiled_forms,
    coq_version,
    find_coq_binary,
)
from oracle.coq.warm import WarmCoqPool
from oracle.proof_common import (
    DEFAULT_SETTING,
    SETTINGS,
    TheoremTask,
    Verdict,
    select_theorems,
    theorem_keys,
    theorem_views,
)
from oracle.strip_coq import CoqSyntaxError, hidden_contexts, strip_coq_file_with_notes
from rrma.contain import sandbox
from rrma.contracts import EvalContext, Oracle, OracleError, PluginSettings
from rrma.trial import Outcome, Status


class CoqParams(PluginSettings):
    """``oracle.params`` of the coq oracle (checked when a task is loaded: rrma/declare.py)."""

    sources: str | list[str] | None = None
    """The .v files, or folders of them (every .v inside), absolute or relative to the workspace (required to run, or source)."""
    source: str | None = None
    """One .v file or folder (or sources)."""
    theorems: list[str] | None = None
    """Only these theorems, in this order (default: every theorem the stripper can read)."""
    setting: Literal["rediscover", "library"] | None = None
    """What an agent sees (default rediscover): earlier theorems' statements only, or the file before the theorem as written."""
    preload: str | None = None
    """Coq sentences run after every theorem's context, before its statement (e.g. CoqHammer's `From Hammer Require Import Tactics.`)."""
    warm: bool = True
    """A pool of coqtop sessions (false: one coqc per check)."""
    pool_size: int = Field(1, ge=1, le=1024)
    """Warm coqtop sessions."""
    allowed_axioms: list[str] = Field(default_factory=list)
    """Axioms a proof may depend on."""
    coq_args: list[str] = Field(default_factory=list)
    """Extra arguments of Coq (e.g. -Q dir Name)."""
    timeout_s: float | None = None
    """Seconds of one check (default: the trial's budget)."""


class CoqOracle(Oracle):
    """Proof oracle for Coq: scores a proposal's proof of ``proposal.theorem`` (1.0 when accepted).

    params: ``sources`` (a list) or ``source``: ``.v`` files, or folders of them (every ``.v`` inside,
    recursively), absolute or relative to the workspace; keep them outside the workspace (a
    workspace file is copied into every trial). ``theorems``: only these, in this order (default:
    every theorem the files hold that the stripper can read). ``preload``: Coq sentences run after
    every theorem's context, before its statement (e.g. CoqHammer's ``From Hammer Require Import
    Tactics.``; :func:`with_preload`). ``warm``
    (default true: a pool of coqtop sessions; false: one coqc per check), ``pool_size`` (1),
    ``allowed_axioms`` ([]), ``coq_args`` ([]), ``timeout_s`` (default: the trial budget).

    :meth:`prepare` strips the files (on a Ray worker too: everything it needs is in the params) and
    starts the checker; :meth:`theorems` names them for the per-theorem policy (rrma/run/theorems.py).
    A name two files share is told apart as ``name (file.v:line)``.
    """

    needs_workspace = False  # its theorems come from the oracle (rrma/declare.py)
    params_model = CoqParams
    kind: ClassVar[str] = "coq"
    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], *, metric: str = "solved", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.tasks: dict[str, TheoremTask] = {}  # the name a proposal gives -> the theorem (in order)
        self.skipped: list[str] = []  # theorems of the files the stripper cannot read (a note each)
        self.checker: CoqChecker | WarmCoqPool | None = None
        self.answers: tuple[Path, ...] = ()
        self.setting = DEFAULT_SETTING
        self.preload_dropped: list[TheoremTask] = []
        self.original_axioms = OriginalAxioms()  # a proof may rest on the axioms its original rests on
        self._public: dict[int, str] = {}

    def source_files(self, workspace: Path) -> list[Path]:
        """The ``.v`` files of ``params.sources`` / ``params.source``, folders expanded, in the order given."""
        given = self.params.get("sources") or ([self.params["source"]] if self.params.get("source") else [])
        if isinstance(given, str | Path):
            given = [given]
        if not given:
            raise OracleError("coq oracle: params.sources (.v files or folders of them) is required")
        files: list[Path] = []
        for item in given:
            path = Path(str(item)).expanduser()
            path = path if path.is_absolute() else workspace / path
            if path.is_dir():
                files += sorted(path.rglob("*.v"))
            elif path.is_file():
                files.append(path)
            else:
                raise OracleError(f"coq oracle: params.sources: {path} does not exist")
        return list(dict.fromkeys(files))

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        files = self.source_files(workspace)
        found: list[TheoremTask] = []
        self.skipped = []
        try:
            for path in files:
                tasks, notes = strip_coq_file_with_notes(path)
                found += tasks
                self.skipped += [str(n) for n in notes]
        except CoqSyntaxError as exc:
            raise OracleError(f"coq oracle: {exc}") from exc
        coq_args = tuple(str(a) for a in self.params.get("coq_args", ()))
        self.setting = str(self.params.get("setting") or DEFAULT_SETTING)
        if self.setting not in SETTINGS:
            raise OracleError(f"coq oracle: params.setting must be one of {', '.join(SETTINGS)}, not {self.setting!r}")
        bare = attach_modules(found, coq_args)
        found, self.preload_dropped = with_preload(bare, str(self.params.get("preload") or ""), coq_args)
        bare_of = {id(task): plain for task, plain in zip(found, bare, strict=True)}
        named = dict(zip(theorem_keys(found), found, strict=True))
        try:
            named = select_theorems(named, self.params.get("theorems"), "coq oracle")
        except ValueError as exc:
            raise OracleError(f"{exc} (or skipped)") from exc
        if not named:
            raise OracleError("coq oracle: the files hold no theorem the stripper can read"
                              + (f" ({len(self.skipped)} skipped; the first: {self.skipped[0]})" if self.skipped else ""))
        self.tasks = named
        checker_sandbox = CoqSandbox(hidden=checker_hidden(files, coq_args), coq_args=coq_args,
                                     required=sandbox.mode() == "require")
        try:  # the views are cut from the files' own text; each ends with its theorem's preload, as the context
            plain = [bare_of[id(task)] for task in named.values()]
            views = public_contexts(plain, lambda task: CoqChecker(
                coq_args=coq_args, sandbox=checker_sandbox).proof_using(task)) if self.setting == "rediscover" else {}
            self._public = {id(task): views[id(bare_of[id(task)])] + task.context[len(bare_of[id(task)].context):]
                            for task in named.values()} if views else {}
        except CoqSyntaxError as exc:
            raise OracleError(f"coq oracle: {exc}") from exc
        self.answers = answer_paths(files)
        self.checker = make_coq_checker(
            warm=bool(self.params.get("warm", True)),
            pool_size=int(self.params.get("pool_size", 1)),
            allowed_axioms=tuple(self.params.get("allowed_axioms", ())),
            coq_args=coq_args,
            sandbox=checker_sandbox,
        )
        return {"coq": coq_version(), "theorems": len(named), "skipped": len(self.skipped), "setting": self.setting,
                "preload_dropped": sorted({Path(t.source_file).name for t in self.preload_dropped})}

    def theorems(self) -> list[dict[str, Any]]:
        """The theorems to prove, in order: each one's public view (never its proof nor its file's
        path), its name as proposals give it, and its file's basename (for per-file counts)."""
        views = theorem_views(self.tasks, (lambda task: self._public[id(task)]) if self.setting == "rediscover"
                              else None)
        return [{**view, "setting": self.setting} for view in views]

    def setup_allowance_s(self) -> float:
        """The warm checker's set-up bound (a session's start-up and the file's context, earlier proofs
        included: 25-38 s for `setoid_ring/Ncring_polynom.v`), which its proof's seconds do not count; the
        cold checker has none (coqc's one bound is the check's)."""
        if self.checker is not None:  # prepared: the checker it made
            return float(getattr(self.checker, "setup_seconds", 0.0))
        return WarmCoqPool.setup_seconds if bool(self.params.get("warm", True)) else 0.0

    def held_out(self) -> tuple[Path, ...]:
        """The stripped files (every original proof) and their compiled forms."""
        return self.answers

    def held_out_for(self, theorem: str) -> tuple[Path, ...]:
        """What an agent's processes must not read while proving ``theorem``: its own file and every
        compiled form of it, and the sources (``.v``, ``.glob``, ``.aux``) of the run's other files; the
        other files' compiled modules stay loadable (the theorem's context may ``Require`` one: they
        are its library, and none of them can hold this theorem's original, which only its own
        module does)."""
        task = self.tasks.get(theorem)
        if task is None or not task.source_file:
            return self.answers
        own = Path(task.source_file).resolve()
        own_forms = {own, *(p.resolve() for p in compiled_forms(own))}
        return tuple(p for p in self.answers if p.resolve() in own_forms or p.suffix not in OBJECT_SUFFIXES)

    def evaluate(self, ctx: EvalContext) -> Outcome:
        started = time.monotonic()
        if self.checker is None:
            raise OracleError("coq oracle: prepare() was not called")
        name, proof = ctx.proposal.theorem, ctx.proposal.proof
        if not name or name not in self.tasks:
            return Outcome(status=Status.invalid, feedback=f"unknown theorem {name!r}; known: {', '.join(self.tasks)[:500]}")
        if proof is None or not proof.strip():
            return Outcome(status=Status.invalid, feedback="the proposal has no proof",
                           metrics={"accepted": False, "reason": "the proposal has no proof", "cheat": False})
        task = self.tasks[name]
        given = self.params.get("timeout_s")  # absent or null: the trial's budget
        timeout_s = float(given if given is not None else ctx.budget.seconds)
        verdict = self.original_axioms.judge(self.checker, task, self.checker.check(task, proof, timeout_s=timeout_s),
                                             timeout_s=timeout_s)
        outcome = verdict_outcome(verdict, time.monotonic() - started)
        outcome.metrics["difficulty"] = task.difficulty
        return outcome

    def close(self) -> None:
        if self.checker is not None:
            self.checker.close()


def with_preload(tasks: Sequence[TheoremTask], preload: str,
                 coq_args: Sequence[str] = ()) -> tuple[list[TheoremTask], list[TheoremTask]]:
    """(``tasks`` with ``preload`` run after each context, right before the statement; the tasks left
    without it). After, not before: the file's own proofs run as the file has them. Loaded first,
    CoqHammer's ``Tactics`` (which loads ssreflect, Program.Equality and Lia) made human proofs fail in
    9 stdlib files ("No such goal" in ``Lists/ListSet.v``; ``MSets/MSetFacts.v``, ...), so their
    contexts stopped compiling part way and no later theorem could be checked (round nine's sweep).
    A preload that loads a theorem's own module (``Tactics`` loads List, Arith, ZArith, Bool) would
    make the original reachable, so that theorem's context stays as its file has it; so does one
    whose loads Coq cannot tell."""
    if not preload:
        return list(tasks), []
    preload = preload if preload.endswith("\n") else preload + "\n"
    out: list[TheoremTask] = []
    dropped: list[TheoremTask] = []
    for task in tasks:
        reached = libraries_loaded_by(preload, task.noinit, tuple(coq_args)) if task.module else frozenset()
        if task.module and (task.module in reached or not reached):
            dropped.append(task)
            out.append(task)
        else:
            gap = "" if not task.context or task.context.endswith("\n") else "\n"
            out.append(replace(task, context=task.context + gap + preload))
    return out, dropped


# a sentence that declares a section variable (a theorem's closed type keeps those its proof used)
_SECTION_VARIABLE_RE = re.compile(r"(?m)^[ \t]*(?:#\[[^\]]*\]\s*)?(?:Variables?|Hypothes[ie]s|Context|Let)(?![\w'])")


def public_contexts(tasks: Sequence[TheoremTask],
                    suggest: Callable[[TheoremTask], Sequence[tuple[str, str]]] | None = None) -> dict[int, str]:
    """What an agent sees of each task's context in the ``rediscover`` setting (keyed by ``id(task)``):
    the context with every earlier theorem's proof replaced by ``Admitted.``
    (:func:`oracle.strip_coq.hidden_contexts`, one pass per file). ``suggest`` (the cold checker's
    ``proof_using``) gives the section variables each proof used, for files that declare some."""
    by_file: dict[str, list[TheoremTask]] = {}
    for task in tasks:
        by_file.setdefault(task.source_file, []).append(task)
    out: dict[int, str] = {}
    for group in by_file.values():
        last = max(group, key=lambda t: len(t.context))
        text = last.context + last.statement
        heads = [len(t.context) for t in group]
        suggestions = suggest(last) if suggest and "Section" in text and _SECTION_VARIABLE_RE.search(text) else ()
        for task, hidden in zip(group, hidden_contexts(text, heads, suggestions), strict=True):
            out[id(task)] = hidden
    return out


def verdict_outcome(verdict: Verdict, seconds: float) -> Outcome:
    return Outcome(
        status=Status(verdict.status),
        score=1.0 if verdict.accepted else None,
        metrics={"accepted": verdict.accepted, "reason": verdict.reason, "cheat": verdict.cheat,
                 "goals": len(verdict.goals)},
        feedback=verdict.feedback(),
        log="\n".join(str(m.get("text", "")) for m in verdict.messages)[:8000],
        seconds=seconds,
    )


def make_coq_checker(*, warm: bool = True, pool_size: int = 1, allowed_axioms: tuple[str, ...] = (),
                     memory_mb: int = 2048, coq_args: tuple[str, ...] = (),
                     sandbox: CoqSandbox | None = None) -> CoqChecker | WarmCoqPool:
    """The checker a bench or oracle should use; raises CoqNotFound when Coq is missing.

    ``sandbox``: what its Coq processes see (default: the installation, their scratch, no network)."""
    find_coq_binary("coqc")
    box = sandbox if sandbox is not None else CoqSandbox(coq_args=coq_args)
    if warm:
        return WarmCoqPool(size=pool_size, allowed_axioms=allowed_axioms, memory_mb=memory_mb, coq_args=coq_args,
                           sandbox=box)
    return CoqChecker(allowed_axioms=allowed_axioms, memory_mb=memory_mb, coq_args=coq_args, sandbox=box)
