"""Types shared by the proof oracles (Lean 4, Coq) and the strip-and-rediscover benches.

A :class:`TheoremTask` is one stripped theorem: the file context before it, its exact statement,
and the hidden original proof (kept for the report, never shown to agents). A checker turns a
proof body into a :class:`Verdict`. The oracle always rebuilds the file itself from
``context + statement + proof``: the agent supplies only the proof body, so it cannot change
the statement, and anything it tries to inject is caught by the checker's rules.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

Prover = Literal["lean", "coq"]
# fields of a TheoremTask an agent never sees: the answer, and the file that holds every answer
PRIVATE_FIELDS = ("original_proof", "source_file")
# the two declared settings of a strip-and-rediscover run (docs/proofs.md): in ``rediscover`` an agent
# sees the earlier theorems' statements only (their proofs read ``Admitted.``); in ``library``
# (Tactician's setting) it sees the file before the theorem as written, earlier human proofs included
SETTINGS = ("rediscover", "library")
DEFAULT_SETTING = "rediscover"


@dataclass
class TheoremTask:
    name: str
    statement: str  # exact text of the declaration up to (not including) the proof
    context: str  # everything in the source file before the declaration
    original_proof: str  # hidden: never shown to agents
    difficulty: str = "unknown"  # easy | medium | hard (from a tag comment) or unknown
    prover: Prover = "lean"
    source_file: str = ""  # the stripped file (it holds every original proof): never shown to agents
    line: int = 0  # 1-based line of the declaration in the source file
    # the logical name of the source file's compiled module (``Coq.Init.Peano``; "" when it has none):
    # the checker refuses to judge in a session where that module is loaded (it holds the original)
    module: str = ""
    noinit: bool = False  # check without Coq's prelude (the prelude loads the target's own module)

    def public(self) -> dict[str, Any]:
        """What an agent may see: the theorem, never its original proof nor where that proof lives.

        The source file is left out on purpose: it holds every original proof, and a name in a
        prompt is an invitation to read it (agents' processes cannot: the benches declare it held
        out). The line number stays (it says nothing an agent could open). So does the module's logical
        name (``Coq.Classes.CMorphisms``): an agent's Coq session runs the context as that module, as the
        checker does (``coqtop -top``, :func:`oracle.coq.modules.session_args`), where some files only
        compile; such a session cannot load the module's compiled form, and the file stays held out.
        """
        data = asdict(self)
        for private in PRIVATE_FIELDS:
            data.pop(private)
        return data

    @classmethod
    def from_view(cls, view: dict[str, Any]) -> TheoremTask:
        """The task an agent works on, from the view it is told (:meth:`public`, :func:`theorem_views`): its
        name as proposals give it, no original proof and no source file."""
        prover = str(view.get("prover", "coq"))
        return cls(name=str(view["name"]), statement=str(view.get("statement", "")),
                   context=str(view.get("context", "")), original_proof="",
                   difficulty=str(view.get("difficulty", "unknown")),
                   prover="lean" if prover == "lean" else "coq",  # the view names no source file
                   noinit=bool(view.get("noinit", False)), module=str(view.get("module", "")))


@dataclass
class Verdict:
    accepted: bool
    reason: str  # "accepted" or a short precise reason ("uses sorry", "axiom X not allowed", ...)
    messages: list[dict[str, Any]] = field(default_factory=list)  # checker messages with positions
    goals: list[str] = field(default_factory=list)  # remaining goals (feedback for agents)
    seconds: float = 0.0
    cheat: bool = False  # rejected by an anti-cheating rule (not merely a failed proof)
    axioms: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The trial status this verdict means (an rrma.trial.Status value)."""
        if self.accepted:
            return "ok"
        if self.reason.startswith("timeout"):
            return "timeout"
        if self.reason.startswith("memory limit"):
            return "oom"
        return "rejected"

    def feedback(self, limit: int = 4000) -> str:
        """What an agent is told: the reason, the checker's messages with lines, remaining goals."""
        lines = [f"{'ACCEPTED' if self.accepted else 'REJECTED'}: {self.reason}"]
        for msg in self.messages[:5]:
            where = f"line {msg.get('line')}: " if msg.get("line") else ""
            lines.append(f"{where}{msg.get('text', '')}")
        if self.goals:
            lines.append(f"remaining goals ({len(self.goals)}):")
            lines.extend(f"  {goal}" for goal in self.goals[:8])
        return "\n".join(lines)[:limit]

    def to_json(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "reason": self.reason, "messages": self.messages,
                "goals": self.goals, "seconds": round(self.seconds, 4), "cheat": self.cheat,
                "axioms": self.axioms}


class ProofChecker(Protocol):
    prover: Prover

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict: ...

    def close(self) -> None: ...


def select_theorems(tasks: dict[str, TheoremTask], wanted: Any, what: str) -> dict[str, TheoremTask]:
    """``tasks`` (name -> theorem) cut to the names ``wanted`` lists, in that order (None: all);
    ValueError naming up to ten names the files do not hold (``what`` says whose files)."""
    if wanted is None:
        return tasks
    unknown = [str(n) for n in wanted if str(n) not in tasks]
    if unknown:
        raise ValueError(f"{what}: params.theorems: not in the files: {', '.join(unknown[:10])}")
    return {str(n): tasks[str(n)] for n in wanted}


def theorem_keys(tasks: list[TheoremTask]) -> list[str]:
    """The name each theorem is known by in a run, in order: its own name, or ``name (file.v:line)``
    when another theorem of the selection (in another file, or in another Module of the same file)
    has the same name. The checker still uses the theorem's own name inside Coq."""
    from pathlib import Path

    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.name] = counts.get(task.name, 0) + 1
    return [task.name if counts[task.name] == 1 else f"{task.name} ({Path(task.source_file).name}:{task.line})"
            for task in tasks]


def theorem_views(tasks: dict[str, TheoremTask], public_context: Any = None) -> list[dict[str, Any]]:
    """What a proof oracle tells the per-theorem policy (rrma/run/theorems.py) about its theorems, in
    order: each one's public view under the name proposals give it, and its file's basename.
    ``public_context`` (task -> text), when given, replaces the context an agent sees (the
    ``rediscover`` setting: earlier proofs hidden)."""
    from pathlib import Path

    views = []
    for name, task in tasks.items():
        view = {**task.public(), "name": name, "file": Path(task.source_file).name}
        if public_context is not None:
            view["context"] = public_context(task)
        views.append(view)
    return views
