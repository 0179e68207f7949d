"""The Coq proof oracle: checks an agent's proof body of a stripped theorem, cold or warm.

Why it exists: the strip-and-rediscover bench needs a judge that accepts exactly the genuine
proofs of the *original* statement. The agent supplies only the proof body; the checker builds
the script itself (``context + statement + Proof. + body + Qed.``), so the statement cannot be
changed, and then:

1. **Screens the body lexically** (:func:`screen_proof`, same lexer as :mod:`oracle.strip_coq`):
   every sentence must be a tactic (optionally after bullets, braces and goal selectors).
   Rejected with a precise reason, before Coq runs: ``Admitted``, ``admit``/``give_up``, an
   ``Axiom``/``Parameter``/``Conjecture``/``Hypothesis``/``Variable``, ``Qed``/``Defined``
   followed by more commands, ``Abort``, ``Set``/``Unset`` of kernel-skipping options
   (``Guard Checking``, ``Positivity Checking``, ``Universe Checking``) or any other option,
   ``Require``/``Import``/``Load``, ``Declare ML Module``, nested declarations (``Lemma``,
   ``Definition``, ``Ltac``...), any other vernacular command (a capitalised first word, except
   ``Unshelve``), unterminated comments/strings, control characters.
   *Decision on evaluation tactics*: ``vm_compute``/``vm_cast_no_check`` are allowed (the
   bytecode VM is part of Coq's standard trusted base and the kernel re-checks the cast);
   ``native_compute``/``native_cast_no_check`` are forbidden (they trust code compiled by an
   external OCaml toolchain outside the kernel).
2. **Runs Coq**, always sandboxed (:class:`CoqSandbox`: the Coq installation and its load paths
   read-only, only a harness-owned scratch folder writable, the stripped sources hidden, no
   network): cold with ``coqc`` on a temporary file under :func:`rrma.contain.spawn.spawn`
   (wall clock and memory enforced from outside), or warm in a pool of ``coqtop -emacs``
   sessions (:class:`WarmCoqPool`, each wrapped by the same policy) driven sentence by sentence.
   The sessions use plain pipes and a reader thread (:class:`CoqSession`; why not pexpect there);
   each chunk is followed by a sentinel command carrying a random token, whose echo marks the
   end of the chunk's output. Memory is capped with ``RLIMIT_AS`` per session, the wall clock
   per check.
3. **Requires** no error, a closed proof at ``Qed``, and ``Print Assumptions`` closed under
   the global context (axioms outside ``allowed_axioms`` are rejected; section variables of
   the statement are allowed). In warm mode, leaving proof mode before the last sentence is
   also rejected (a second line of defence behind the lexical screen), and every unit must
   advance coqtop's state id exactly as the oracle's split predicts (a unit Coq runs as several
   sentences is refused). The statement is restated as a *reference* constant before the proof
   body runs, and after ``Qed`` the proved constant's type must be syntactically the
   reference's (``constr_eq``), so nothing the body declares can change what was proved.

Warm-pool invariant: every check starts from the state right after the task's context (a
``BackTo`` to the saved state id, which also reverts options), so one check cannot influence
the next; a session is restarted after ``max_checks`` checks, after a timeout, and whenever its
state cannot be verified. Feedback: the checker's messages with the proof line and the
remaining goals (goals before the failing sentence, or the goals left at ``Qed``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import re
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from oracle.proof_common import (
    DEFAULT_SETTING,
    SETTINGS,
    Prover,
    TheoremTask,
    Verdict,
    select_theorems,
    theorem_keys,
    theorem_views,
)
from oracle.strip_coq import (
    CoqSyntaxError,
    Sentence,
    hidden_contexts,
    line_of,
    open_scopes,
    proof_term,
    split_sentences,
    strip_coq_file_with_notes,
)
from rrma.contain import files, sandbox
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import SandboxRequired, signal_own_group, spawn, start
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.trial import Budget, Outcome, Status

INSTALL_HINT = "install Coq (Debian/Ubuntu: `apt-get install coq`; the project tests against coqc 8.16)"


class CoqNotFound(OracleError):
    """``coqc``/``coqtop`` is not on PATH (install Debian's ``coq`` package)."""


class CoqSessionError(RuntimeError):
    """A warm ``coqtop`` session died or lost synchronisation; it is restarted."""


# ----------------------------------------------------------------------------- what Coq may read

# what coqc makes next to a .v file: the proofs (.vo; .vos/.vok are their quick-compile forms) and
# the names and positions of everything in it (.glob); coq_makefile adds a hidden .NAME.aux
COMPILED_SUFFIXES = (".vo", ".vos", ".vok", ".glob")
OBJECT_SUFFIXES = (".vo", ".vos", ".vok")  # what a `Require` loads


def compiled_forms(source: Path | str) -> list[Path]:
    """The files coqc and coq_makefile make from ``source`` (existing or not)."""
    path = Path(source)
    stem = path.with_suffix("")
    return [*(stem.with_suffix(s) for s in COMPILED_SUFFIXES), path.parent / f".{stem.name}.aux"]


def answer_paths(sources: Iterable[Path | str]) -> tuple[Path, ...]:
    """The answers of a Coq strip-and-rediscover task: each stripped ``.v`` (every original proof)
    and its compiled forms, those that exist. No agent's process may read them (``held_out``)."""
    found: list[Path] = []
    for source in sources:
        path = Path(source).resolve()
        for candidate in (path, *compiled_forms(path)):
            if candidate.exists() and candidate not in found:
                found.append(candidate)
    return tuple(found)


@functools.cache
def coq_installation(coqc: str = "coqc") -> tuple[Path, ...]:
    """Where Coq lives: the standard library (``coqc -where``), the core plugins (``COQCORELIB``)
    and the folders of the ``coqc``/``coqtop`` binaries. A checker's sandbox shows them read-only."""
    found: list[Path] = []
    exe = shutil.which(coqc)
    if exe is None:
        return ()
    for name in (coqc, "coqtop"):
        binary = shutil.which(name)
        if binary:
            found += [Path(binary).parent, Path(binary).resolve().parent]
    try:
        where = subprocess.run([exe, "-where"], capture_output=True, text=True, timeout=30).stdout.strip()
        config = subprocess.run([exe, "-config"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        where, config = "", ""
    if where:
        found.append(Path(where))
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key in ("COQLIB", "COQCORELIB") and value.strip():
            found.append(Path(value.strip()))
    return tuple(dict.fromkeys(p.resolve() for p in found if p.exists()))


def load_path_dirs(coq_args: Sequence[str]) -> tuple[Path, ...]:
    """The folders that ``-Q DIR LP``, ``-R DIR LP`` and ``-I DIR`` in ``coq_args`` give Coq."""
    dirs: list[Path] = []
    args = list(coq_args)
    for i, arg in enumerate(args):
        if arg in ("-Q", "-R", "-I") and i + 1 < len(args):
            dirs.append(Path(args[i + 1]).resolve())
    return tuple(dirs)


def checker_hidden(sources: Iterable[Path | str], coq_args: Sequence[str] = ()) -> tuple[Path, ...]:
    """What a Coq *checker* must not read: each stripped ``.v`` and its ``.glob``/``.aux`` always; its
    ``.vo``/``.vos``/``.vok`` too unless the file lies under a load path the checker gives Coq (the
    standard library, a ``-Q``/``-R``/``-I`` folder), where a context's ``Require`` may need them.

    The tension: a stripped standard-library file's ``.vo`` stays readable to the checker (other
    modules load it), and agents' sandboxes hide it (:func:`answer_paths`)."""
    loadable = (*coq_installation(), *load_path_dirs(coq_args))
    hidden: list[Path] = []
    for path in answer_paths(sources):
        if path.suffix in OBJECT_SUFFIXES and any(d == path.parent or d in path.parents for d in loadable):
            continue
        hidden.append(path)
    return tuple(hidden)


@dataclass(frozen=True)
class CoqSandbox:
    """The sandbox every ``coqc``/``coqtop`` process of a checker runs in.

    A process that runs an agent's proof text sees the Coq installation and its load paths
    read-only, its own scratch directory (harness-owned, never a trial's workspace) read-write,
    nothing of ``hidden`` (the stripped sources: every original proof) nor the user's keys, and no
    network. ``RRMA_FS_GUARD=off`` turns it off; ``require`` (or ``required``) makes a checker that
    cannot be sandboxed refuse to run rather than run bare. ``coqc`` runs under spawn with
    :meth:`policy`; a warm ``coqtop`` is started with it by :func:`rrma.contain.spawn.start`.
    """

    hidden: tuple[Path, ...] = ()
    coq_args: tuple[str, ...] = ()
    required: bool = False

    def policy(self, scratch: Path | str) -> Policy | None:
        """The policy of one process whose scratch is ``scratch``; None when the sandbox is off."""
        if sandbox.mode() == "off":
            return None
        scratch = Path(scratch)
        return Policy(read_only=(*coq_installation(), *load_path_dirs(self.coq_args), scratch),
                      writable=(scratch,), hidden=self.hidden,
                      required=self.required, network=False)


# ----------------------------------------------------------------------------- the target's own module

# Why: a stripped theorem's original lives on in its file's compiled module (``Coq.Init.Peano`` holds
# ``plus_n_Sm``). A session that has that module loaded can reach the original by any name (short,
# qualified, through a module alias or a notation), so the checker judges a theorem only in a session
# where the module is *not* loaded: Coq's prelude is left out for a file the prelude loads (its
# context's own ``Require``s load what it needs, as when the file was compiled), a preload that reaches
# the module is dropped for that file, and ``Print Libraries`` is read after the context and again
# after the proof. A module that is not loaded has no constant in the environment, whatever its name.

_LOADED = re.compile(r"Loaded library files:(?P<body>.*?)(?:\n\s*\n|<prompt>|\Z)", re.S)


def loaded_libraries(text: str) -> list[str]:
    """The module names a ``Print Libraries.`` reply lists (empty when it lists none)."""
    match = _LOADED.search(text)
    if match is None:
        return []
    return [line.strip() for line in match.group("body").splitlines() if re.fullmatch(r"\s*[\w'.]+\s*", line)]


def logical_module(source: Path | str, coq_args: Sequence[str] = ()) -> str:
    """The logical name a ``Require`` loads ``source`` by: ``Coq.X.Y`` under the standard library,
    ``A.B`` under ``user-contrib``, ``LP.X`` under a ``-Q``/``-R DIR LP`` folder; "" when none
    (a file outside every load path cannot be loaded, so its original cannot be reached)."""
    path = Path(source).resolve()
    roots: list[tuple[Path, str]] = []
    args = list(coq_args)
    for i, arg in enumerate(args):
        if arg in ("-Q", "-R") and i + 2 < len(args):
            roots.append((Path(args[i + 1]).resolve(), args[i + 2]))
    where = next((p for p in coq_installation() if (p / "theories").is_dir()), None)
    if where is not None:
        roots += [(where / "theories", "Coq"), (where / "user-contrib", "")]
    for root, prefix in roots:
        if root == path.parent or root in path.parents:
            parts = [*(prefix.split(".") if prefix else []), *path.relative_to(root).with_suffix("").parts]
            return ".".join(parts)
    return ""


@functools.cache
def libraries_loaded_by(preamble: str, noinit: bool = False, coq_args: tuple[str, ...] = ()) -> frozenset[str]:
    """The modules a fresh ``coqtop`` has loaded after ``preamble`` (the prelude: ``preamble=""``);
    empty when Coq cannot tell (then nothing is assumed unreachable)."""
    try:
        coqtop = find_coq_binary("coqtop")
        out = subprocess.run([coqtop, "-q", *(["-noinit"] if noinit else []), *coq_args],
                             input=preamble + "\nPrint Libraries.\n", capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired, CoqNotFound):
        return frozenset()
    return frozenset(loaded_libraries(out.stdout))


def attach_modules(tasks: Sequence[TheoremTask], coq_args: Sequence[str] = ()) -> list[TheoremTask]:
    """``tasks`` with ``module`` (the source file's logical name) and ``noinit`` (check without the
    prelude, which loads that module) filled in."""
    prelude = libraries_loaded_by("", False, tuple(coq_args))
    out = []
    modules: dict[str, str] = {}
    for task in tasks:
        if task.source_file not in modules:
            modules[task.source_file] = logical_module(task.source_file, coq_args) if task.source_file else ""
        module = modules[task.source_file]
        out.append(replace(task, module=module, noinit=bool(module) and module in prelude))
    return out


def module_refusal(task: TheoremTask, loaded: Iterable[str]) -> str:
    """Why the checker will not judge ``task`` in a session that has ``loaded`` ("" when it may)."""
    if task.module and task.module in set(loaded):
        return (f"the checker's session has {task.module} loaded, which holds the original of {task.name}: "
                "refused (the target's own module must not be loaded)")
    return ""


# ----------------------------------------------------------------------------- the lexical screen

KERNEL_OPTIONS = ("Guard Checking", "Positivity Checking", "Universe Checking")
AXIOM_COMMANDS = ("Axiom", "Axioms", "Parameter", "Parameters", "Conjecture", "Hypothesis",
                  "Hypotheses", "Variable", "Variables", "Context")
DECLARATIONS = ("Theorem", "Lemma", "Example", "Fact", "Remark", "Corollary", "Proposition", "Property",
                "Definition", "Fixpoint", "CoFixpoint", "Inductive", "CoInductive", "Record", "Structure",
                "Class", "Instance", "Program", "Let", "Goal", "Ltac", "Ltac2", "Notation", "Tactic",
                "Hint", "Existing", "Canonical", "Coercion", "Module", "Section", "End", "Scheme")
IMPORTS = ("Require", "Import", "Export", "From", "Load")
ALLOWED_COMMANDS = ("Unshelve",)  # harmless proof-mode vernacular a tactic script may use
# control prefixes Coq runs around one tactic; the tactic after them is screened as usual
CONTROL_PREFIX = re.compile(r"^(?:Time\s+|Timeout\s+\d+\s+|Instructions\s+)+")
# `Show` queries print; they change nothing (`Show.`, `Show 2.`, `Show Proof.`, `Show Existentials.`...)
_SHOW = re.compile(r"^Show(?:\s+(?:\d+|[A-Z][A-Za-z]*(?:\s+[A-Z][A-Za-z]*)?))?\s*\.$")
FORBIDDEN_TACTICS = {
    "admit": "uses admit (leaves the goal unproved)",
    "give_up": "uses give_up (leaves the goal unproved)",
    "native_compute": "uses native_compute (native evaluation trusts an external compiler; forbidden)",
    "native_cast_no_check": "uses native_cast_no_check (native evaluation is forbidden)",
}
_SELECTOR = re.compile(
    r"^(?:[-+*]+|\{|\}|(?:\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|all|par|!|\[\s*[A-Za-z_][\w']*\s*\])\s*:\s*\{?)\s*"
)
_WORD = re.compile(r"[A-Za-z_#][A-Za-z0-9_']*")
# tactics that skip a check the kernel makes again at Qed: a proof that uses one and then fails
# at Qed tried to pass off a term of the wrong type (a cheat, not a mistake)
_UNCHECKED = re.compile(r"\b(?:exact_no_check|vm_cast_no_check|native_cast_no_check|change_no_check|"
                        r"convert_concl_no_check)\b")
KERNEL_REFUSED = "the kernel refused the proof term at Qed after an unchecked step (*_no_check)"
_OPENER = re.compile(r"^Proof(?:\s+(?:using|with)\b.*)?\.$", re.S)
_OPENER_WITH = re.compile(r"\bwith\b(?P<tactic>.*?)(?:\busing\b.*)?\.$", re.S)
_CLOSER = re.compile(r"^(?:Qed|Defined)\.$")


@dataclass
class ProofScript:
    """An agent's proof body cut into sentences, ready to run (after :func:`screen_proof`)."""

    opener: str  # "Proof." or the agent's own "Proof using ..." line
    units: list[Sentence]  # tactic sentences, in order (raw text via body[start:end])
    body: str  # the normalized proof text (opener and closer removed)
    line_offset: int = 0  # lines of the agent's text before the body (for message positions)

    def unit_text(self, unit: Sentence) -> str:
        return self.body[unit.start : unit.end]

    def line(self, unit: Sentence) -> int:
        """1-based line of ``unit`` in the agent's own proof text."""
        return line_of(self.body, unit.start) + self.line_offset


class ProofRejected(ValueError):
    """The proof body breaks a rule before Coq even runs; ``cheat`` marks anti-cheat rules."""

    def __init__(self, reason: str, *, cheat: bool, line: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cheat = cheat
        self.line = line


def _strip_selectors(code: str) -> str:
    prev = None
    while prev != code:
        prev = code
        code = _SELECTOR.sub("", code, count=1)
    return code


def _words(code: str) -> list[str]:
    return _WORD.findall(re.sub(r'"(?:[^"]|"")*"', " ", code))


def screen_proof(proof: str) -> ProofScript:
    """Normalize and screen a proof body; raise :class:`ProofRejected` with a precise reason."""
    for ch in proof:
        if ch in "\n\t\r ":
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Zs", "Zl", "Zp"):
            raise ProofRejected(f"proof contains a control or unusual space character (U+{ord(ch):04X})", cheat=False)
    try:
        sentences = split_sentences(proof)
    except CoqSyntaxError as exc:
        raise ProofRejected(f"malformed proof: {exc}", cheat=False) from exc
    opener = "Proof."
    if len(sentences) == 1 and (term := proof_term(sentences[0].code)) is not None:
        # `Proof term.` alone is Coq's `exact term. Qed.` in one sentence (a theorem the stripper
        # read that way has it as its original proof): it runs as that tactic, screened as any other
        tactic = f"exact ({term})."
        unit = Sentence(0, len(tactic), tactic)
        line = line_of(proof, sentences[0].start)
        _screen_sentence(unit, line)
        return ProofScript(opener=opener, units=[unit], body=unit.code, line_offset=line - 1)
    if sentences and _OPENER.match(sentences[0].code):
        opener = proof[sentences[0].start : sentences[0].end]
        _screen_opener(sentences[0].code, line_of(proof, sentences[0].start))
        sentences = sentences[1:]
    if sentences and _CLOSER.match(sentences[-1].code):
        sentences = sentences[:-1]
    if not sentences:
        raise ProofRejected("empty proof: give the tactic script between Proof. and Qed.", cheat=False)
    last = sentences[-1]
    if not last.terminated:
        raise ProofRejected(
            f"the last sentence does not end with '.' (line {line_of(proof, last.start)})", cheat=False
        )
    for sent in sentences:
        _screen_sentence(sent, line_of(proof, sent.start))
    base = sentences[0].start
    body = proof[base : sentences[-1].end]
    units = [Sentence(s.start - base, s.end - base, s.code, s.terminated) for s in sentences]
    return ProofScript(opener=opener, units=units, body=body, line_offset=proof.count("\n", 0, base))


def _screen_opener(code: str, line: int) -> None:
    """``Proof using X with tac.`` / ``Proof with tac.``: the tactic after ``with`` runs in every
    ``...`` ellipsis of the proof, so it is screened like any tactic sentence."""
    match = _OPENER_WITH.search(code)
    if match is None:
        return
    tactic = match.group("tactic").strip()
    if not tactic:
        raise ProofRejected(f"malformed Proof with ... opener at line {line}", cheat=False)
    _screen_sentence(Sentence(0, len(tactic) + 1, tactic + "."), line)


def _screen_sentence(sent: Sentence, line: int) -> None:
    code = _strip_selectors(sent.code)
    if _SHOW.match(code):
        return  # a query: prints the goals or the proof term, changes nothing
    code = CONTROL_PREFIX.sub("", code)  # `Time tac.`, `Timeout 5 tac.`: the tactic is what counts
    words = _words(code)
    for word in _words(sent.code):
        if word in FORBIDDEN_TACTICS:
            raise ProofRejected(f"{FORBIDDEN_TACTICS[word]} at line {line}", cheat=True, line=line)
    if code.startswith("#["):
        raise ProofRejected(f"injects an attributed command at line {line}: {code[:60]!r}", cheat=True, line=line)
    if not words:
        return
    first = words[0]
    if first in ("Local", "Global", "Polymorphic", "Monomorphic", "Program") and len(words) > 1:
        first = words[1]
    rest = " ".join(words)
    if first == "Admitted":
        raise ProofRejected(f"uses Admitted at line {line}", cheat=True, line=line)
    if first in ("Qed", "Defined", "Save"):
        raise ProofRejected(
            f"ends the proof with {first} at line {line} and injects commands after it", cheat=True, line=line
        )
    if first == "Abort":
        raise ProofRejected(f"aborts the proof (Abort) at line {line}", cheat=True, line=line)
    if first in AXIOM_COMMANDS:
        raise ProofRejected(f"declares an axiom ({first}) inside the proof at line {line}", cheat=True, line=line)
    if first in ("Set", "Unset"):
        for opt in KERNEL_OPTIONS:
            if opt in " ".join(code.split()):
                raise ProofRejected(
                    f"kernel-skipping option ({first} {opt}) at line {line}", cheat=True, line=line
                )
        raise ProofRejected(f"changes an option inside the proof ({rest[:60]}) at line {line}", cheat=True, line=line)
    if first in IMPORTS:
        raise ProofRejected(f"imports a library inside the proof ({first}) at line {line}", cheat=True, line=line)
    if first == "Declare":
        what = "loads an ML plugin (Declare ML Module)" if "ML" in words[:3] else f"injects a command ({rest[:40]})"
        raise ProofRejected(f"{what} at line {line}", cheat=True, line=line)
    if first in DECLARATIONS:
        raise ProofRejected(
            f"injects a command: a new {first} declaration inside the proof at line {line}", cheat=True, line=line
        )
    if first == "Proof":
        raise ProofRejected(f"injects a second Proof command at line {line}", cheat=True, line=line)
    if first[0].isupper() and first not in ALLOWED_COMMANDS:
        raise ProofRejected(
            f"injects a vernacular command ({first}) at line {line}; only tactics are allowed", cheat=True, line=line
        )


def screen_tactic(tactic: str) -> str:
    """One tactic as a proof-state backend runs it (:mod:`oracle.proof_state_coq`): the proof-body
    rules, and exactly one sentence that is a tactic (no bullet, brace, ``Proof`` or ``Qed``).
    Returns the sentence without comments, ending in ``.``; raises :class:`ProofRejected`."""
    text = tactic.strip()
    if text and not text.endswith("."):
        text += "."
    script = screen_proof(text)
    if len(script.units) != 1 or script.opener != "Proof.":
        raise ProofRejected("one tactic sentence expected", cheat=False)
    code = script.units[0].code
    if code in ("{", "}") or re.fullmatch(r"[-+*]+", code):
        raise ProofRejected("a bullet or brace is not a tactic", cheat=False)
    return code


def rejected(exc: ProofRejected, started: float) -> Verdict:
    return Verdict(
        accepted=False,
        reason=exc.reason,
        messages=[{"severity": "error", "line": exc.line, "text": exc.reason, "source": "screen"}],
        seconds=time.monotonic() - started,
        cheat=exc.cheat,
    )


# ----------------------------------------------------------------------------- output parsing

_INFOMSG = re.compile(r"</?infomsg>")
_PROMPT = re.compile(r"<prompt>(.*?)</prompt>", re.S)
_PROMPT_FIELDS = re.compile(r"^\s*(\S+) < (\d+) \|")


def _clean(text: str) -> str:
    text = _INFOMSG.sub("", text).replace("\r\n", "\n")
    return "\n".join(line for line in text.split("\n") if not line.startswith("Fetching opaque proofs"))


def parse_goals(text: str) -> list[str]:
    """Goals from Coq's goal display (``Show.`` or a tactic's echo): the first with hypotheses."""
    text = _clean(_PROMPT.sub("", text))
    if "No more goals" in text and "====" not in text:
        return []
    goals: list[str] = []
    first = re.search(r"\d+ goals?(?: \(ID \d+\))?\n(.*?)\n\s*=+\n(.*?)(?:\n\n|\Z)", text, re.S)
    if first:
        hyps = [h.strip() for h in first.group(1).strip("\n").split("\n") if h.strip()]
        concl = " ".join(first.group(2).split())
        goals.append(("; ".join(hyps) + " |- " if hyps else "|- ") + concl)
    for match in re.finditer(r"goal \d+(?: \(ID \d+\))? is:\n(.*?)(?:\n\n|\Z)", text, re.S):
        goals.append("|- " + " ".join(match.group(1).split()))
    return goals


def parse_assumptions(text: str) -> tuple[bool, list[str], str]:
    """(closed, axiom names, problem) from ``Print Assumptions`` output.

    ``closed`` is True for "Closed under the global context" and for section variables only.
    Any other section header (axioms, guard/positivity assumptions) lists what it relies on.
    """
    text = _clean(_PROMPT.sub("", text)).strip()  # a warm reply ends with coqtop's prompt line
    if text.startswith("Closed under the global context"):
        return True, [], ""
    axioms: list[str] = []
    problem = ""
    section = ""
    for line in text.split("\n"):
        if not line.strip():
            continue
        if re.match(r"^[A-Z][A-Za-z ]+:$", line.strip()) and not line.startswith(" "):
            section = line.strip()[:-1]
            if section not in ("Section Variables", "Axioms"):
                problem = problem or f"Print Assumptions lists {section}"
            continue
        if section == "Axioms" and not line[0].isspace() and not line.startswith(":"):
            axioms.append(line.split(" ", 1)[0].strip())
        elif section not in ("Section Variables", "Axioms") and not problem:
            problem = f"Print Assumptions is not closed: {line.strip()[:120]}"
    if not section:
        return False, axioms, f"unexpected Print Assumptions output: {text[:200]}"
    return not axioms and not problem, axioms, problem


def _axiom_verdict(closed: bool, axioms: list[str], problem: str, allowed: tuple[str, ...]) -> tuple[bool, str]:
    if problem:
        return False, problem
    bad = [a for a in axioms if a not in allowed and a.split(".")[-1] not in allowed]
    if bad:
        return False, f"Print Assumptions not closed: relies on axiom(s) {', '.join(bad)}"
    return True, "accepted"


def find_coq_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise CoqNotFound(f"{name} not found on PATH: {INSTALL_HINT}")
    return path


def coq_version(coqc: str = "coqc") -> str:
    out = subprocess.run([find_coq_binary(coqc), "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"version (\S+)", out.stdout)
    return match.group(1) if match else out.stdout.strip()


# ----------------------------------------------------------------------------- cold checker

_COQC_ERROR = re.compile(r'File "[^"]*", line (\d+), characters (-?\d+)-(-?\d+):\n(Error.*?)(?=\nFile "|\Z)', re.S)


@dataclass
class CoqChecker:
    """Cold checker: one ``coqc`` process per check, under :func:`rrma.contain.spawn.spawn`."""

    coqc: str = "coqc"
    allowed_axioms: tuple[str, ...] = ()
    memory_mb: int = 2048
    coq_args: tuple[str, ...] = ()  # load paths for the user's libraries, e.g. ("-Q", "/src", "Lib")
    sandbox: CoqSandbox = field(default_factory=CoqSandbox)  # what each coqc process sees
    prover: Prover = field(default="coq", init=False, repr=False)

    def __post_init__(self) -> None:
        self.coqc = find_coq_binary(self.coqc)

    def build_script(self, task: TheoremTask, script: ProofScript, token: str) -> tuple[str, int, int, int]:
        """(file text, first line of the proof body, line of Qed, first line of the guard).

        The reference constant (the statement restated under a random name) is declared right
        after the context, before the agent's text runs, so nothing the proof injects can change
        how it parses; after ``Qed`` the guard requires the checked constant's type to be
        syntactically the reference's type (``constr_eq``).
        """
        reference = f"rrma_ref_{token}"
        head = task.context + reference_declaration(task, reference) + task.statement + "\n" + script.opener + "\n"
        body_line = head.count("\n") + 1
        text = head + script.body + "\n"
        qed_line = text.count("\n") + 3  # Locate, Show, then Qed
        text += f"Locate rrma_goals_{token}.\nShow.\nQed.\n"
        guard_line = text.count("\n") + 2
        text += f"Locate rrma_guard_{token}.\n" + guard_command(task.name, reference)
        text += f"Locate rrma_assumptions_{token}.\nPrint Assumptions {task.name}.\n"
        text += f"Locate rrma_libraries_{token}.\nPrint Libraries.\n"
        for scope in reversed(open_scopes(task.context)):
            text += f"End {scope}.\n"
        return text, body_line, qed_line, guard_line

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        started = time.monotonic()
        try:
            script = screen_proof(proof)
        except ProofRejected as exc:
            return rejected(exc, started)
        token = secrets.token_hex(8)
        if not reference_declaration(task, f"rrma_ref_{token}"):
            return Verdict(False, f"the oracle cannot restate the statement of {task.name}",
                           seconds=time.monotonic() - started)
        text, body_line, qed_line, guard_line = self.build_script(task, script, token)
        # a fresh harness-owned scratch per check: the file is written before any process can touch it
        with tempfile.TemporaryDirectory(prefix="rrma-coq-") as tmp:
            Path(tmp, "Check.v").write_text(text, encoding="utf-8")
            result = spawn(
                [self.coqc, "-q", *(["-noinit"] if task.noinit else []), *self.coq_args, "Check.v"],
                cwd=tmp,
                budget=Budget(seconds=timeout_s, memory_mb=self.memory_mb, max_output_bytes=4 * 2**20),
                guard=self.sandbox.policy(tmp),
            )
        seconds = time.monotonic() - started
        if result.status in (Status.timeout, Status.oom):
            return Verdict(False, f"{result.status.value}: {result.reason}", seconds=seconds)
        if result.returncode is None:  # never started (a required sandbox or cgroup unavailable)
            return Verdict(False, f"coqc did not run: {result.reason}", seconds=seconds)
        out = result.output.replace("\r\n", "\n")
        errors = [(int(m.group(1)), int(m.group(2)), m.group(4).strip()) for m in _COQC_ERROR.finditer(out)]
        context_lines = task.context.count("\n") + 1
        messages: list[dict[str, Any]] = []
        for line, col, msg in errors:
            rel = line - body_line + 1 + script.line_offset
            if body_line <= line < qed_line:
                where = "proof"
            elif line < context_lines:
                where = "context"
            elif line >= guard_line:
                where = "guard"
            elif line < body_line - 1:
                where = "statement"
            else:
                where = "check"
            messages.append({"severity": "error", "line": rel if where == "proof" else 0, "column": col,
                             "text": msg, "source": where})
        if result.status != Status.ok or errors:
            goals = []
            marker = out.find(f"basename rrma_goals_{token}")
            if marker >= 0:
                after = out[out.find("\n", marker) :]
                goals = parse_goals(after.split('File "', 1)[0])
            if not messages:
                return Verdict(False, f"coqc failed: {result.reason}: {out[-300:]}", seconds=seconds)
            first = messages[0]
            if first["source"] == "guard":
                return Verdict(False, f"{task.name} no longer proves its original statement: commands were "
                               "injected around the proof", messages=messages, seconds=seconds, cheat=True)
            if first["source"] == "context":
                reason = f"the context does not compile: {first['text'][:200]}"
            elif first["source"] == "statement":
                reason = f"the statement does not check: {first['text'][:200]}"
            elif "incomplete proof" in first["text"]:
                reason = f"incomplete proof: {len(goals)} goal(s) remain"
            elif first["source"] == "check" and _UNCHECKED.search(script.body):
                return Verdict(False, f"{KERNEL_REFUSED}: {_error_summary(first['text'])[:160]}",
                               messages=messages, seconds=seconds, cheat=True)
            elif first["source"] == "proof":
                reason = f"error at proof line {first['line']}: {_error_summary(first['text'])}"
            else:
                reason = f"error: {first['text'][:200]}"
            return Verdict(False, reason, messages=messages, goals=goals, seconds=seconds)
        marker = out.find(f"basename rrma_assumptions_{token}")
        if marker < 0:
            return Verdict(False, "checker output has no Print Assumptions section", seconds=seconds)
        libraries_at = out.find(f"basename rrma_libraries_{token}")
        if libraries_at < 0:
            return Verdict(False, "checker output has no Print Libraries section", seconds=seconds)
        tail = out[out.find("\n", marker) : out.rfind("\n", 0, libraries_at) + 1].split('\nFile "', 1)[0]
        refusal = module_refusal(task, loaded_libraries(out[libraries_at:]))
        if refusal:
            return Verdict(False, refusal, seconds=seconds, cheat=True)
        closed, axioms, problem = parse_assumptions(tail)
        ok, reason = _axiom_verdict(closed, axioms, problem, self.allowed_axioms)
        return Verdict(ok, reason, seconds=seconds, cheat=not ok, axioms=axioms)

    def close(self) -> None:
        return None


_GUARD_HEAD = re.compile(r"\b(?:Theorem|Lemma|Example|Fact|Remark|Corollary|Proposition|Property)\s+(?P<name>[A-Za-z_][\w']*)")


def reference_declaration(task: TheoremTask, name: str) -> str:
    """The statement restated as ``Lemma NAME ... Admitted.``: the reference constant.

    Declared right after the context, before the agent's proof runs, so no notation, definition
    or option the proof might smuggle in can change how it parses. It is never used by a genuine
    proof (its name is random per check), and a proof that used it would list it as an axiom.
    Empty when the statement's head cannot be found (the checker then refuses to judge).
    """
    match = _GUARD_HEAD.search(task.statement)
    if match is None or match.group("name") != task.name:
        return ""
    prefix = task.statement[: match.start()]
    rest = task.statement[match.end() :]
    return f"{prefix}Lemma {name}{rest}\nAdmitted.\n"


def guard_command(name: str, reference: str) -> str:
    """Sentences that fail unless ``name``'s type is syntactically the reference's (``constr_eq``:
    equal up to alpha-conversion and casts; kernel names are compared, so a shadowing definition or
    notation cannot make two different statements look alike)."""
    return (f"Goal True.\nlet a := type of @{reference} in let b := type of @{name} in constr_eq a b; exact I.\n"
            "Qed.\n")


# ----------------------------------------------------------------------------- warm sessions


def _limit_memory(memory_mb: int) -> Any:
    def apply() -> None:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


@dataclass
class Reply:
    """What ``coqtop`` printed for one chunk: cleaned text, errors, and the prompt after it."""

    text: str
    errors: list[str]
    proof_name: str  # "Coq" when not in proof mode
    state: int  # state id after the chunk (for BackTo)
    prompts: list[tuple[str, int]] = field(default_factory=list)  # (proof name, state id) per sentence run


class CoqSession:
    """One ``coqtop -emacs`` process on pipes; a reader thread drains its output continuously.

    Every chunk is followed by a sentinel (``Fail Check rrma_sync_<random>_<n>.``) whose echo
    marks the end of the chunk's output; the prompt before it gives the state id and whether a
    proof is open. Not thread-safe: the pool hands a session to one check at a time.

    Why not pexpect: its pty (``pexpect.spawn``) cuts input lines at 4,096 bytes and echoes
    input, which corrupts long contexts. Its pipe variant (``pexpect.popen_spawn.PopenSpawn``)
    starts its own ``Popen`` with no ``pass_fds``, so the seccomp filter's descriptor cannot reach
    bubblewrap (which then refuses to start); it writes before it waits, so a chunk larger than the
    pipe overruns the deadline while coqtop reads nothing (a 2 s deadline fired after 11-16 s); its
    ``expect`` polls every 0.1 ms, 2.5-3.3x this reader's CPU; and it was 1.05-1.23x slower per
    bench run (docs/proofs.md). Here the write runs in its own thread beside the wait, the buffer
    keeps at most ``MAX_BUFFER`` bytes of a flood, and the reader sleeps until coqtop writes.
    """

    MAX_BUFFER = 8 * 2**20

    def __init__(self, coqtop: str, *, memory_mb: int = 2048, start_timeout_s: float = 30.0,
                 args: tuple[str, ...] = (), cwd: Path | str | None = None,
                 sandbox: CoqSandbox | None = None) -> None:
        # long-lived, so not under spawn: started contained (`sandbox`'s policy, `cwd` its scratch)
        if sandbox is not None and cwd is None:
            raise ValueError("a sandboxed coqtop session needs its scratch directory (cwd)")
        try:
            self.proc = start(
                [coqtop, "-emacs", "-q", *args],
                cwd=cwd if cwd is not None else os.getcwd(),
                guard=sandbox.policy(cwd) if sandbox is not None and cwd is not None else None,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_limit_memory(memory_mb),
            )
        except SandboxRequired as exc:
            raise CoqSessionError(f"the Coq checker's {exc}") from exc
        self.args = tuple(args)
        self.libraries: list[str] | None = None  # Print Libraries after the context (cached per context)
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.eof = False
        self.token = secrets.token_hex(6)
        self.counter = 0
        self.checks = 0
        self.context: str | None = None
        self.context_state = 0
        threading.Thread(target=self._read, name=f"coqtop-{self.proc.pid}", daemon=True).start()
        self.initial_state = self._wait_initial(start_timeout_s)
        self.context_state = self.initial_state

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self.cond:
                if not chunk:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buf.extend(chunk)
                if len(self.buf) > self.MAX_BUFFER:  # output flood: keep the tail only
                    del self.buf[: len(self.buf) - self.MAX_BUFFER]
                self.cond.notify_all()

    def _wait_initial(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while b"</prompt>" not in self.buf:
                if self.eof or not self.cond.wait(timeout=max(0.0, deadline - time.monotonic())):
                    if time.monotonic() >= deadline or self.eof:
                        self.kill()
                        raise CoqSessionError(f"coqtop did not start: {bytes(self.buf[-500:]).decode(errors='replace')}")
            text = self.buf.decode("utf-8", errors="replace")
            self.buf.clear()
        prompts = _PROMPT.findall(text)
        match = _PROMPT_FIELDS.match(prompts[-1]) if prompts else None
        return int(match.group(2)) if match else 1

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.eof

    def kill(self) -> None:
        signal_own_group(self.proc, self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def send(self, chunk: str, deadline: float) -> Reply:
        """Send ``chunk`` (whole sentences) and return its reply; raises TimeoutError at the deadline."""
        if not self.alive:
            raise CoqSessionError("coqtop session is not running")
        self.counter += 1
        sentinel = f"rrma_sync_{self.token}_{self.counter}"
        data = (chunk.rstrip("\n") + "\n" + f"Fail Check {sentinel}.\n").encode("utf-8")
        stdin = self.proc.stdin
        assert stdin is not None

        def write() -> None:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(data)
                stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        pattern = re.compile(re.escape(sentinel).encode() + rb".*?<prompt>(.*?)</prompt>", re.S)
        with self.cond:
            while True:
                match = pattern.search(self.buf)
                if match is not None:
                    raw = bytes(self.buf[: match.start()])
                    del self.buf[: match.end()]
                    break
                if self.eof:
                    raise CoqSessionError(f"coqtop exited: {bytes(self.buf[-300:]).decode(errors='replace')}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self.cond.wait(timeout=min(remaining, 1.0))
        text = raw.decode("utf-8", errors="replace")
        # the sentinel's own "The command has indeed failed with message:" line ends the chunk
        text = text[: text.rfind("The command has indeed failed")] if "The command has indeed failed" in text else text
        prompts = [(f.group(1), int(f.group(2))) for p in _PROMPT.findall(text)
                   if (f := _PROMPT_FIELDS.match(p)) is not None]
        name, state = prompts[-1] if prompts else ("Coq", -1)
        body = _clean(text)
        errors = _errors_of(body)
        return Reply(text=body, errors=errors, proof_name=name, state=state, prompts=prompts)

    def load_context(self, context: str, deadline: float) -> int:
        """Bring the session to the state right after ``context`` and return its state id.

        A context that extends the one loaded is sent as its new part only; any other goes back to
        the initial state first. Raises OracleError when the context does not compile.
        """
        if self.context == context:
            return self.context_state
        if self.context is not None and context.startswith(self.context):
            delta, base = context[len(self.context) :], self.context_state
        else:
            delta, base = context, self.initial_state
        reply = self.send(f"BackTo {base}.", deadline)
        if reply.errors:
            raise CoqSessionError(f"BackTo failed: {reply.errors[0]}")
        state = base
        if delta.strip():
            reply = self.send(delta, deadline)
            if reply.errors:
                self.context = None
                raise OracleError(f"the context does not compile: {reply.errors[0][:300]}")
            if reply.state >= 0:  # a chunk of comments only executes nothing and prints no prompt
                state = reply.state
        self.context, self.context_state = context, state
        self.libraries = None
        return state


def _error_summary(text: str) -> str:
    """One line of at most 200 characters: the error message without its ``Error:`` prefix."""
    flat = " ".join(text.split())
    return (flat[len("Error:") :] if flat.startswith("Error:") else flat).strip()[:200]


def _errors_of(text: str) -> list[str]:
    """Error messages in a cleaned coqtop reply (each with its location lines dropped)."""
    out = []
    for part in re.split(r"<prompt>.*?</prompt>", text, flags=re.S):
        idx = part.find("Error:")
        if idx >= 0 and (idx == 0 or part[idx - 1] == "\n"):
            out.append(part[idx:].strip())
    return out


@dataclass
class WarmCoqPool:
    """Warm checker: a pool of ``coqtop`` sessions keeping the task's context loaded.

    Same rules and verdicts as :class:`CoqChecker`; much faster per check because the context
    (imports, earlier lemmas) is loaded once per session and each check returns to it with
    ``BackTo``. Thread-safe: ``check`` may be called from several threads (one session each).

    A check's ``timeout_s`` is the proof's: it starts once the session is ready (coqtop started, the
    context and its ``Require``s loaded), so the wait for a free session, a session's start-up and the
    loading of the libraries never count against it. Those are bounded apart, by ``setup_seconds``
    together, so that on a loaded machine a short proof budget still checks proofs (before, a start-up
    slower than the budget timed out every check, and each timeout's restart paid the start-up again).
    """

    size: int = 1
    coqtop: str = "coqtop"
    allowed_axioms: tuple[str, ...] = ()
    memory_mb: int = 2048
    max_checks: int = 200  # restart a session after this many checks (bounded memory growth)
    coq_args: tuple[str, ...] = ()  # load paths for the user's libraries (as for coqc)
    sandbox: CoqSandbox = field(default_factory=CoqSandbox)  # what each coqtop process sees
    # a session's start-up plus its context's loading, bounded apart from the proof's seconds; within
    # the local executor's 30 s grace over the trial budget (rrma.exec.local.ORACLE_GRACE_S)
    setup_seconds: float = 20.0
    prover: Prover = field(default="coq", init=False, repr=False)
    restarts: int = 0
    _idle: queue.LifoQueue[CoqSession | None] = field(default_factory=queue.LifoQueue, repr=False)

    def __post_init__(self) -> None:
        self.coqtop = find_coq_binary(self.coqtop)
        for _ in range(self.size):
            self._idle.put(None)  # sessions start lazily
        self._lock = threading.Lock()
        self._closed = False
        # the sessions' scratch: harness-owned, shared by this pool's sessions only (coqtop writes nothing)
        self.scratch = Path(tempfile.mkdtemp(prefix="rrma-coqtop-"))

    def _acquire(self) -> CoqSession | None:
        return self._idle.get()

    def _release(self, session: CoqSession | None) -> None:
        self._idle.put(session)

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                session = self._idle.get_nowait()
            except queue.Empty:
                break
            if session is not None:
                session.kill()
        files.remove_tree(self.scratch)  # any depth, never follows a link, never raises

    def _fresh(self, setup_deadline: float, args: tuple[str, ...] | None = None) -> CoqSession:
        with self._lock:
            self.restarts += 1
        if self.scratch.is_symlink() or not self.scratch.is_dir():  # removed by close(): a new one
            self.scratch = Path(tempfile.mkdtemp(prefix="rrma-coqtop-"))
        return CoqSession(self.coqtop, memory_mb=self.memory_mb, args=self.coq_args if args is None else args,
                          cwd=self.scratch, sandbox=self.sandbox,
                          start_timeout_s=max(0.0, setup_deadline - time.monotonic()))

    def session_args(self, task: TheoremTask) -> tuple[str, ...]:
        """The coqtop arguments ``task`` is checked with: without the prelude when the prelude loads
        the target's own module (:func:`attach_modules`)."""
        return (*(("-noinit",) if task.noinit else ()), *self.coq_args)

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        started = time.monotonic()
        try:
            script = screen_proof(proof)
        except ProofRejected as exc:
            return rejected(exc, started)
        session = self._acquire()
        setup_deadline = time.monotonic() + self.setup_seconds  # start-up and context: not the proof's seconds
        try:
            args = self.session_args(task)
            if session is None or not session.alive or session.checks >= self.max_checks or session.args != args:
                if session is not None:
                    session.kill()
                session = self._fresh(setup_deadline, args)
            verdict = self._run(session, task, script, started, timeout_s, setup_deadline)
            if verdict.reason.startswith(("timeout", "session")) or any(
                marker in verdict.reason for marker in ("Out of memory", "Stack overflow")
            ):
                session.kill()  # a session that hit a limit is never reused
                session = None
            return verdict
        except CoqSessionError as exc:
            if session is not None:
                session.kill()
            session = None
            return Verdict(False, f"session error: {exc}", seconds=time.monotonic() - started)
        finally:
            self._release(session)

    # ------------------------------------------------------------------ one check

    def _run(self, session: CoqSession, task: TheoremTask, script: ProofScript, started: float,
             timeout_s: float, setup_deadline: float) -> Verdict:
        session.checks += 1
        messages: list[dict[str, Any]] = []
        goals: list[str] = []

        def done(accepted: bool, reason: str, *, cheat: bool = False, axioms: list[str] | None = None) -> Verdict:
            return Verdict(accepted, reason, messages=messages, goals=goals, seconds=time.monotonic() - started,
                           cheat=cheat, axioms=axioms or [])

        clean = True
        loading = True
        try:
            session.load_context(task.context, setup_deadline)
            if task.module:
                if session.libraries is None:
                    session.libraries = loaded_libraries(session.send("Print Libraries.", setup_deadline).text)
                refusal = module_refusal(task, session.libraries)
                if refusal:
                    return done(False, refusal)
            loading = False
            deadline = time.monotonic() + timeout_s  # the proof's own seconds start here
            reference = f"rrma_ref_{secrets.token_hex(8)}"
            declaration = reference_declaration(task, reference)
            if not declaration:
                return done(False, f"the oracle cannot restate the statement of {task.name}")
            reply = session.send(declaration, deadline)
            if reply.errors or [n for n, _ in reply.prompts] != [reference, "Coq"]:
                return done(False, f"the statement does not check: {(reply.errors or ['no reference'])[0][:300]}")
            reply = session.send(task.statement + "\n" + script.opener, deadline)
            if reply.errors or reply.proof_name == "Coq":
                return done(False, f"the statement does not check: {(reply.errors or ['no proof opened'])[0][:300]}")
            proof_name, tip = reply.proof_name, reply.state
            goals = parse_goals(reply.text)
            for index, unit in enumerate(script.units):
                reply = session.send(script.unit_text(unit), deadline)
                line = script.line(unit)
                if reply.errors:
                    messages.append({"severity": "error", "line": line, "sentence": index,
                                     "text": reply.errors[0], "source": "proof"})
                    show = session.send("Show.", deadline)
                    goals = parse_goals(show.text)
                    return done(False, f"error at proof line {line}: {_error_summary(reply.errors[0])}")
                # one unit is one sentence for Coq too: exactly one prompt, one new state (the sync
                # sentinel before it takes the other), still inside this theorem's proof
                if reply.proof_name == "Coq" or reply.prompts[-1:] != [(proof_name, tip + 2)] or len(reply.prompts) != 1:
                    ran = len(reply.prompts)
                    what = (f"ran as {ran} sentences in Coq" if ran != 1 else "left the theorem's proof"
                            if reply.proof_name != proof_name else "did not advance the proof by one state")
                    return done(False, f"the sentence at proof line {line} {what}: commands injected", cheat=True)
                tip = reply.state
                goals = parse_goals(reply.text) if ("goal" in reply.text or "No more goals" in reply.text) else goals
            reply = session.send("Qed.", deadline)
            if reply.errors or reply.proof_name != "Coq":
                text = (reply.errors or ["the proof is still open after Qed"])[0]
                messages.append({"severity": "error", "line": 0, "text": text, "source": "qed"})
                if "incomplete proof" in text:
                    goals = parse_goals(session.send("Show.", deadline).text)
                    return done(False, f"incomplete proof: {len(goals)} goal(s) remain")
                if _UNCHECKED.search(script.body):
                    return done(False, f"{KERNEL_REFUSED}: {' '.join(text.splitlines())[:160]}", cheat=True)
                return done(False, f"error at Qed: {' '.join(text.splitlines())[:200]}")
            goals = []
            reply = session.send(guard_command(task.name, reference), deadline)
            if reply.errors:
                messages.append({"severity": "error", "line": 0, "text": reply.errors[0], "source": "guard"})
                return done(False, f"{task.name} no longer proves its original statement: commands were "
                            "injected around the proof", cheat=True)
            reply = session.send(f"Print Assumptions {task.name}.", deadline)
            closed, axioms, problem = parse_assumptions(reply.text)
            refusal = module_refusal(task, loaded_libraries(session.send("Print Libraries.", deadline).text))
            if refusal:
                return done(False, refusal, cheat=True)
            ok, reason = _axiom_verdict(closed, axioms, problem, self.allowed_axioms)
            return done(ok, reason, cheat=not ok, axioms=axioms)
        except TimeoutError:
            clean = False
            if loading:
                return done(False, f"timeout: the context did not load within {self.setup_seconds:g} s "
                            "(session restarted)")
            return done(False, f"timeout: no verdict after {timeout_s:g} s (session restarted)")
        except OracleError as exc:
            return done(False, str(exc))
        finally:
            if clean and session.alive:
                self._rewind(session)

    @staticmethod
    def _rewind(session: CoqSession) -> None:
        """Return to the state right after the context; kill the session if that cannot be verified."""
        try:
            session.send("Abort All.", time.monotonic() + 10)
            back = session.send(f"BackTo {session.context_state}.", time.monotonic() + 10)
        except (TimeoutError, CoqSessionError):
            session.kill()
            return
        if back.errors or back.proof_name != "Coq" or back.state != session.context_state:
            session.kill()


# ----------------------------------------------------------------------------- oracle


class CoqOracle(Oracle):
    """Proof oracle for Coq: scores a proposal's proof of ``proposal.theorem`` (1.0 when accepted).

    params: ``sources`` (a list) or ``source``: ``.v`` files, or folders of them (every ``.v`` inside,
    recursively), absolute or relative to the workspace; keep them outside the workspace (a
    workspace file is copied into every trial). ``theorems``: only these, in this order (default:
    every theorem the files hold that the stripper can read). ``preload``: Coq sentences put before
    every theorem's context (e.g. CoqHammer's ``From Hammer Require Import Tactics.``). ``warm``
    (default true: a pool of coqtop sessions; false: one coqc per check), ``pool_size`` (1),
    ``allowed_axioms`` ([]), ``coq_args`` ([]), ``timeout_s`` (default: the trial budget).

    :meth:`prepare` strips the files (on a Ray worker too: everything it needs is in the params) and
    starts the checker; :meth:`theorems` names them for the per-theorem policy (rrma/run/theorems.py).
    A name two files share is told apart as ``name (file.v:line)``.
    """

    kind: ClassVar[str] = "coq"
    needs_workspace = False  # its theorems come from the oracle (rrma/declare.py)
    version: ClassVar[str] = "1"

    def __init__(self, params: dict[str, Any], *, metric: str = "solved", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        self.tasks: dict[str, TheoremTask] = {}  # the name a proposal gives -> the theorem (in order)
        self.skipped: list[str] = []  # theorems of the files the stripper cannot read (a note each)
        self.checker: CoqChecker | WarmCoqPool | None = None
        self.answers: tuple[Path, ...] = ()
        self.setting = DEFAULT_SETTING
        self.preload_dropped: list[TheoremTask] = []
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
        found = attach_modules(found, coq_args)
        found, self.preload_dropped = with_preload(found, str(self.params.get("preload") or ""), coq_args)
        named = dict(zip(theorem_keys(found), found, strict=True))
        try:
            named = select_theorems(named, self.params.get("theorems"), "coq oracle")
        except ValueError as exc:
            raise OracleError(f"{exc} (or skipped)") from exc
        if not named:
            raise OracleError("coq oracle: the files hold no theorem the stripper can read"
                              + (f" ({len(self.skipped)} skipped; the first: {self.skipped[0]})" if self.skipped else ""))
        self.tasks = named
        try:
            self._public = public_contexts(list(named.values())) if self.setting == "rediscover" else {}
        except CoqSyntaxError as exc:
            raise OracleError(f"coq oracle: {exc}") from exc
        self.answers = answer_paths(files)
        self.checker = make_coq_checker(
            warm=bool(self.params.get("warm", True)),
            pool_size=int(self.params.get("pool_size", 1)),
            allowed_axioms=tuple(self.params.get("allowed_axioms", ())),
            coq_args=coq_args,
            sandbox=CoqSandbox(hidden=checker_hidden(files, coq_args), coq_args=coq_args,
                               required=sandbox.mode() == "require"),
        )
        return {"coq": coq_version(), "theorems": len(named), "skipped": len(self.skipped), "setting": self.setting,
                "preload_dropped": sorted({Path(t.source_file).name for t in self.preload_dropped})}

    def theorems(self) -> list[dict[str, Any]]:
        """The theorems to prove, in order: each one's public view (never its proof nor its file's
        path), its name as proposals give it, and its file's basename (for per-file counts)."""
        views = theorem_views(self.tasks, (lambda task: self._public[id(task)]) if self.setting == "rediscover"
                              else None)
        return [{**view, "setting": self.setting} for view in views]

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
        verdict = self.checker.check(task, proof, timeout_s=float(self.params.get("timeout_s", ctx.budget.seconds)))
        outcome = verdict_outcome(verdict, time.monotonic() - started)
        outcome.metrics["difficulty"] = task.difficulty
        return outcome

    def close(self) -> None:
        if self.checker is not None:
            self.checker.close()


def with_preload(tasks: Sequence[TheoremTask], preload: str,
                 coq_args: Sequence[str] = ()) -> tuple[list[TheoremTask], list[TheoremTask]]:
    """(``tasks`` with ``preload`` put before each context, the tasks left without it): a preload
    that loads a theorem's own module (CoqHammer's ``Tactics`` loads List, Arith, ZArith, Bool) would
    make the original reachable, so that theorem's context stays as its file has it."""
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
            out.append(replace(task, context=preload + task.context))
    return out, dropped


def public_contexts(tasks: Sequence[TheoremTask]) -> dict[int, str]:
    """What an agent sees of each task's context in the ``rediscover`` setting (keyed by ``id(task)``):
    the context with every earlier theorem's proof replaced by ``Admitted.``
    (:func:`oracle.strip_coq.hidden_contexts`, one pass per file)."""
    by_file: dict[str, list[TheoremTask]] = {}
    for task in tasks:
        by_file.setdefault(task.source_file, []).append(task)
    out: dict[int, str] = {}
    for group in by_file.values():
        last = max(group, key=lambda t: len(t.context))
        text = last.context + last.statement
        heads = [len(t.context) for t in group]
        for task, hidden in zip(group, hidden_contexts(text, heads), strict=True):
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
