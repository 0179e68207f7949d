"""Coq proof states through a warm ``coqtop`` session: one tactic at a time, goals back, go back.

Why it exists: the best-first proof search (:mod:`agents.proof_search`) needs to see the goals a
tactic leaves. :class:`CoqProofStates` drives the oracle's own :class:`~oracle.coq.CoqSession`
(``coqtop -emacs`` on pipes, the same sync sentinel, the same incremental context loading), so
what the search sees is what the oracle will check.

coqtop's document is linear: ``BackTo N`` discards every state after N. A search tree is not, so
a state's handle is its *path* (the tactics from the statement), and reaching a state the
document has dropped replays the path from the deepest state the document still holds. Each
tactic is screened with the oracle's rules (:func:`oracle.coq.screen_tactic`: one sentence, a
tactic, nothing the oracle would refuse) and runs under ``Timeout N`` so one slow tactic costs at
most its budget; a run that prints more than one prompt (Coq read more than one sentence) puts
the session back and is refused.

Also here: :func:`parse_coq_goals` (the goal display as hypotheses and conclusions),
:func:`parse_search` (``Search`` output as premises), and :meth:`CoqProofStates.search_premises`
(library lemmas about the constants of a goal, for premise selection).
"""

from __future__ import annotations

import contextlib
import math
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oracle.coq.modules import session_args
from oracle.coq.replies import COQ_NAME, located_constant
from oracle.coq.sandboxing import CoqSandbox, find_coq_binary
from oracle.coq.screen import ProofRejected, screen_proof, screen_tactic
from oracle.coq.session import CoqSession, CoqSessionError, Reply
from oracle.proof_common import Prover, TheoremTask
from oracle.proof_state import Premise, ProofState, ProofStateError, TacticResult
from oracle.strip_coq import split_sentences
from rrma.contain import files, sandbox
from rrma.contracts import OracleError

# seconds past a tactic's own `Timeout N` that the session waits before it gives coqtop up for lost
# (a tactic that ignores the timer, such as a long-running ML loop): then the session is restarted
TIMEOUT_GRACE_S = 5.0
# a switch for tests: False keys a state by its display alone (before round twenty-eight), where coqtop shows the goals
# after the first by their conclusions only: `induction H` and `destruct H` then read as one state when their first
# cases agree, and whichever ran second was dropped as a state seen, with the induction hypotheses the later cases needed
BACKGROUND_CONTEXTS = True
_EXISTENTIAL_HEAD = re.compile(r"Existential \d+ =\s*\?[\w']+\s*:")
_PROMPT = re.compile(r"<prompt>.*?</prompt>", re.S)
_GOALS_HEAD = re.compile(r"^(\d+) goals?(?: \(ID \d+\))?\s*$")
_OTHER_GOAL = re.compile(r"^goal (\d+)(?: \(ID \d+\))? is:\s*$")
_HYP = re.compile(r"^  (?P<names>[A-Za-z_][\w']*(?:, [A-Za-z_][\w']*)*) :(?P<def>=)? ?(?P<rest>.*)$")
# what a `Search` query may hold: names, holes, parentheses, quoted notations, the symbols of the usual notations
# and a scope's key (`(_ <= _)%nat`). Before round twenty-two it had no `^`, `~` nor `%`, so every query on a power
# (`_ ^ (_ + _) = ...`), a negation (`~ _ < _`) or a term in another scope was refused here, silently, as
# answering nothing
SEARCH_QUERY = re.compile(r"[\w'. ()\"+*:<>=@\[\]?&|,{}\\/^~%-]+")
_SEARCH_HEAD = re.compile(r"^(?P<name>[A-Za-z_][\w'.]*):\s*(?P<rest>.*)$")


@dataclass(frozen=True)
class CoqGoal:
    """One goal: hypotheses ``(names, type)`` in order (``x := v : T`` keeps ``v : T``) and the
    conclusion, each on one line."""

    hyps: tuple[tuple[tuple[str, ...], str], ...]
    concl: str

    def display(self) -> str:
        hyps = "; ".join(f"{', '.join(names)} : {typ}" for names, typ in self.hyps)
        return f"{hyps} |- {self.concl}" if hyps else f"|- {self.concl}"

    def hyp_names(self) -> list[str]:
        return [n for names, _ in self.hyps for n in names]


def _flat(lines: Sequence[str]) -> str:
    return " ".join(" ".join(lines).split())


def parse_coq_goals(text: str) -> list[CoqGoal]:
    """The goals of a coqtop goal display: the first with its hypotheses, the others conclusions.

    ``No more goals.`` gives ``[]``. Hypotheses wrapped over several lines are joined; each ``goal K is:`` starts
    a goal, with or without a blank line before it.
    """
    text = _PROMPT.sub("", text).replace("\r\n", "\n")
    lines = text.split("\n")
    goals: list[CoqGoal] = []
    i = 0
    while i < len(lines):
        if _GOALS_HEAD.match(lines[i].strip()) and not goals:
            i += 1
            hyps: list[tuple[tuple[str, ...], str]] = []
            current: list[str] | None = None
            names: tuple[str, ...] = ()
            while i < len(lines) and not re.match(r"^\s*=+\s*$", lines[i]):
                line = lines[i]
                m = _HYP.match(line)
                if m is not None:
                    if current is not None:
                        hyps.append((names, _flat(current)))
                    names = tuple(m.group("names").split(", "))
                    current = [m.group("rest")]
                elif line.strip() and current is not None:
                    current.append(line.strip())
                i += 1
            if current is not None:
                hyps.append((names, _flat(current)))
            i += 1
            concl: list[str] = []
            while i < len(lines) and lines[i].strip():
                concl.append(lines[i].strip())
                i += 1
            goals.append(CoqGoal(tuple(hyps), _flat(concl)))
            continue
        if _OTHER_GOAL.match(lines[i].strip()):
            i += 1
            concl = []
            # coqtop prints no blank line between two of these (`goal 2 (ID 21) is:`, its conclusion, `goal 3 (ID
            # 19) is:`): before round twenty goals 2 to N were read as one, so a state of three goals or more counted
            # two, and the search never saw a step open a side goal there, nor close a goal
            while i < len(lines) and lines[i].strip() and not _OTHER_GOAL.match(lines[i].strip()):
                concl.append(lines[i].strip())
                i += 1
            goals.append(CoqGoal((), _flat(concl)))
            continue
        i += 1
    return goals


def _named_blocks(text: str, head: re.Pattern[str]) -> list[tuple[str, list[str]]]:
    """(name, lines) for each block Coq printed as a line that ``head`` matches (its ``name`` group, and
    its ``rest`` group, if any, as the first line) followed by indented lines; a flush-left line ``head``
    does not match ends the block before it and starts none."""
    out: list[tuple[str, list[str]]] = []
    for line in _PROMPT.sub("", text).replace("\r\n", "\n").split("\n"):
        if line and not line[0].isspace():
            m = head.match(line)
            if m is not None:
                rest = m.groupdict().get("rest")
                out.append((m.group("name"), [] if rest is None else [rest]))
            else:
                out.append(("", []))  # a line of something else: no block
        elif out and out[-1][0] and line.strip():
            out[-1][1].append(line.strip())
    return [(name, body) for name, body in out if name]


def parse_search(text: str) -> list[Premise]:
    """Lemmas printed by ``Search``: ``name:`` then its type on the following indented lines."""
    return [Premise(name, _flat(body), origin="library") for name, body in _named_blocks(text, _SEARCH_HEAD)]


_MODULE_ENTRY = re.compile(r"^(?P<indent>\s+)(?:Parameter|Definition|Axiom)\s+(?P<name>[A-Za-z_][\w']*)\s*:")
_CHECK_HEAD = re.compile(r"^(?P<name>[A-Za-z_][\w'.]*)\s*$")


def parse_module_names(text: str) -> list[str]:
    """The names a module (or functor, or module type) declares at its top level, from ``Print Module``:
    its ``Parameter``/``Definition`` entries at the indentation of the first one (a nested module's
    entries, deeper, are left out); in order, each once."""
    out: list[str] = []
    indent: int | None = None
    for line in _PROMPT.sub("", text).replace("\r\n", "\n").split("\n"):
        m = _MODULE_ENTRY.match(line)
        if m is None:
            continue
        if indent is None:
            indent = len(m.group("indent"))
        if len(m.group("indent")) == indent and m.group("name") not in out:
            out.append(m.group("name"))
    return out


def parse_checks(text: str, names: Sequence[str]) -> list[Premise]:
    """The types ``Check N.`` printed for each of ``names`` (``N`` on its own line, then ``: type`` on
    the indented lines after it); a name Coq did not print is left out."""
    wanted = set(names)
    return [Premise(name, _flat(body).removeprefix(":").strip(), origin="library")
            for name, body in _named_blocks(text, _CHECK_HEAD) if name in wanted and body]


# `Record ring_theory (R : Type) ... : Prop := mk_rt { Radd_0_l : ...; ... }.` (a record of propositions, as `Print`
# shows it); a record of data (`: Type :=`, `: Set :=`) is not one
_PROP_RECORD = re.compile(r"(?<![\w'])(?:Record|Structure)\s+[A-Za-z_][\w']*(?P<params>[^{]*?):\s*Prop\s*:=\s*"
                          r"[A-Za-z_][\w']*\s*\{")
_FIELD = re.compile(r"\s*(?P<name>[A-Za-z_][\w']*)\s*:>?")


def _top_groups(text: str) -> list[str]:
    """The contents of the top-level parenthesised groups of ``text`` (``(rO rI : R) (radd : R -> R)``)."""
    out: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ")" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start:i])
    return out


def parse_record_fields(text: str) -> tuple[list[str], int]:
    """The field names of a record of propositions as ``Print`` shows it (``Radd_0_l``, ``Radd_comm``, ... of
    ``ring_theory``), in order, and how many parameters the record takes (8 for ``ring_theory``: ``R``, ``rO``,
    ``rI``, ...); no fields for anything else (an inductive, a record of data, a module)."""
    text = _PROMPT.sub("", text)
    m = _PROP_RECORD.search(text)
    if m is None:
        return [], 0
    params = sum(len(g.split(":", 1)[0].split()) for g in _top_groups(m.group("params")) if ":" in g)
    fields: list[str] = []
    depth, start = 0, m.end()
    for i in range(m.end(), len(text)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth > 0:
            depth -= 1
        elif depth == 0 and ch in ";}":
            f = _FIELD.match(text, start)
            if f is not None:
                fields.append(f.group("name"))
            if ch == "}":
                break
            start = i + 1
    return fields, params


def parse_check_replies(text: str, terms: Sequence[str]) -> list[Premise | None]:
    """For each of ``terms``, the type one ``Check (T).`` of a batch printed (the answers are cut at the prompts, in
    the order asked), as a premise named ``(T)``; None where Coq refused the term."""
    out: list[Premise | None] = []
    for term, reply in zip(terms, _PROMPT.split(text), strict=False):
        m = re.search(r"\n\s+:\s(?P<type>.*)", reply, re.S)
        refused = re.search(r"(?:^|\n)Error", reply) is not None
        out.append(None if refused or m is None else Premise(f"({term})", " ".join(m.group("type").split())))
    return out


def _unfinished(text: str) -> str | None:
    """Why a "No more goals" display still is not a finished proof (shelved or given-up goals)."""
    for marker in ("on the shelf", "gave up", "unfocused goals", "focused goals remain"):
        if marker in text:
            return f"goals remain: {marker}"
    return None


@dataclass
class _Doc:
    """The proof as coqtop's document holds it now: state ids after the statement and each tactic."""

    name: str  # the proof's name in coqtop's prompt
    root: int  # state id right after `Proof.`
    tactics: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)  # ids[k] = state after tactics[:k+1]

    def state_at(self, depth: int) -> int:
        return self.root if depth == 0 else self.ids[depth - 1]


# Coq's answer to a sentence run under `Timeout N` that ran out of time ("Timeout!"; "Tactic timeout!"): a word, so
# that a message naming CoqHammer's `htimeout` helper ("sh: 1: htimeout: not found") is not read as one
_TIMED_OUT = re.compile(r"(?<![\w-])timeout(?![\w-])", re.I)


def _ran_despite_errors(reply: Reply) -> bool:
    """Whether a one-sentence chunk whose reply holds a line starting "Error:" ran all the same: coqtop reports a
    sentence that fails with its location ("Toplevel input, characters 0-15:") and prints no goals after it, while
    a tactic that printed such a line and went on leaves no located error and shows the goals it left ("No more
    goals." or a goal's bar). The state number tells nothing: coqtop moves it on a failure too."""
    return "Toplevel input, characters" not in reply.text and (
        "No more goals" in reply.text or "============================" in reply.text)


class CoqProofStates:
    """Proof states of one theorem at a time in a ``coqtop`` session (see the module docstring).

    ``preload``: sentences run before every context (e.g. the side hammer's ``Declare ML Module``, which
    Coq refuses inside a section; the oracle's own preload comes after the context, in it); the
    oracle that re-checks the proofs must load the same. ``memory_mb`` caps the session
    (``RLIMIT_AS``); a session that dies or times out is replaced on the next :meth:`start`.
    ``hidden``: what the agent's own process must never see (``Context.hidden``: the run, the
    stripped files and their compiled forms); coqtop runs in the checker's sandbox with those hidden.
    """

    prover: Prover = "coq"

    def __init__(self, *, coqtop: str = "coqtop", coq_args: Sequence[str] = (), memory_mb: int = 2048,
                 preload: str = "", hidden: Sequence[Path] = (), nice: int = 0) -> None:
        self.coqtop = find_coq_binary(coqtop)
        self.coq_args = tuple(coq_args)
        self.sandbox = CoqSandbox(hidden=tuple(Path(h) for h in hidden), coq_args=self.coq_args,
                                  required=sandbox.mode() == "require")
        self.scratch: Path | None = None  # the session's working folder (harness-owned, made on first use)
        self.memory_mb = memory_mb
        self.preload = preload
        self.nice = nice  # the session's priority below this process's (a session beside another on 2 cores)
        self.session: CoqSession | None = None
        # `Search` queries the screen refused (answered `[]` as an empty answer is): a search reports how many
        # (`lookup:refused`), so that a screen narrower than the agent's patterns shows (round twenty-two)
        self.refused_queries = 0
        self.task: TheoremTask | None = None
        self.doc: _Doc | None = None
        self.tactic_runs = 0  # tactics sent to coqtop (replays included)
        self.replays = 0
        self.restarts = 0

    # ------------------------------------------------------------------ session

    def _session(self, task: TheoremTask) -> CoqSession:
        args = session_args(task, self.coq_args)  # as the checker runs the theorem (its module's name included)
        if self.session is None or not self.session.alive or self.session.args != args:
            if self.session is not None:
                self.session.kill()
            if self.scratch is None or not self.scratch.is_dir() or self.scratch.is_symlink():
                self.scratch = Path(tempfile.mkdtemp(prefix="rrma-proof-states-"))
            self.session = CoqSession(self.coqtop, memory_mb=self.memory_mb, args=args, cwd=self.scratch,
                                      sandbox=self.sandbox, nice=self.nice)
            self.restarts += 1
        return self.session

    def _drop_session(self) -> None:
        if self.session is not None:
            self.session.kill()
        self.session = None
        self.doc = None

    def interrupt(self) -> bool:
        """Stop the tactic running now (from another thread), keeping the session (CoqSession.interrupt);
        the next command may answer ``User interrupt.`` if it had already ended: see :meth:`settle`."""
        session = self.session
        return session is not None and session.interrupt()

    def settle(self) -> None:
        """Run a no-op, so that an interrupt that came after the command it was meant for is spent."""
        session = self.session
        if session is not None and session.alive:
            with contextlib.suppress(CoqSessionError, TimeoutError):
                session.send("Check True.", time.monotonic() + 10)

    def close(self) -> None:
        self._drop_session()
        if self.scratch is not None:
            files.remove_tree(self.scratch)  # any depth, never follows a link, never raises
            self.scratch = None

    # ------------------------------------------------------------------ protocol

    def start(self, task: TheoremTask, timeout_s: float = 60.0) -> ProofState:
        deadline = time.monotonic() + timeout_s
        self.task, self.doc = task, None
        try:
            session = self._session(task)
            base = session.load_context(self.preload + task.context, deadline)
            back = session.send(f"BackTo {base}.", deadline)  # the same context is kept, not re-run:
            if back.errors:  # leave whatever the last search left open
                raise CoqSessionError(f"BackTo failed: {back.errors[0][:200]}")
            reply = session.send(task.statement + "\nProof.", deadline)
        except TimeoutError as exc:
            self._drop_session()
            raise ProofStateError(f"the context of {task.name} did not load within {timeout_s:g} s") from exc
        except (CoqSessionError, OracleError) as exc:
            self._drop_session()
            raise ProofStateError(str(exc)) from exc
        if reply.errors or reply.proof_name == "Coq":
            first = (reply.errors or ["no proof opened"])[0]
            raise ProofStateError(f"the statement of {task.name} does not check: {' '.join(first.split())[:200]}")
        self.doc = _Doc(reply.proof_name, reply.state)
        goals = parse_coq_goals(reply.text)
        return ProofState((), tuple(g.display() for g in goals), goals)

    def goals(self, state: ProofState) -> list[CoqGoal]:
        """The structured goals of ``state`` (moves the session there)."""
        reply = self._goto(tuple(state.handle), time.monotonic() + 30)
        show = self._send("Show.", time.monotonic() + 30) if reply is None else reply
        return parse_coq_goals(show.text)

    def run_tactic(self, state: ProofState, tactic: str, timeout_s: float = 2.0) -> TacticResult:
        """Apply one tactic sentence, or a whole script (several sentences, bullets allowed: e.g. an
        earlier lemma's proof tried at the statement) as one step."""
        started = time.monotonic()
        try:
            sentence = screen_step(tactic)
        except ProofRejected as exc:
            return TacticResult("rejected", message=exc.reason)
        path: tuple[str, ...] = tuple(state.handle)
        try:
            self._goto(path, started + timeout_s + 30)
            reply = self._run_one(sentence, timeout_s)
        except ProofStateError as exc:
            return TacticResult("error", message=str(exc), seconds=time.monotonic() - started)
        seconds = time.monotonic() - started
        if isinstance(reply, TacticResult):
            return TacticResult(reply.outcome, reply.state, reply.message, seconds)
        output = _last_output(reply.text)
        new_path = (*path, sentence)
        assert self.doc is not None
        self.doc.tactics.append(sentence)
        self.doc.ids.append(reply.state)
        if len(reply.prompts) > 1 and "No more goals" not in output and parse_coq_goals(output) == []:
            try:  # a script whose last sentence printed nothing (a bullet, or no change): ask
                output = _last_output(self._send("Show.", time.monotonic() + 10).text)
            except ProofStateError as exc:
                return TacticResult("error", message=str(exc), seconds=seconds)
        goals = parse_coq_goals(output)
        if not goals and "No more goals" not in output:
            # coqtop prints the goals only when they changed
            return TacticResult("error", message="no progress: the goals did not change", seconds=seconds)
        if not goals:
            why = _unfinished(output)
            if why is not None:
                return TacticResult("error", message=why, seconds=seconds)
            return TacticResult("proved", ProofState(new_path, ()), seconds=seconds, notes=_notes(reply.text))
        try:
            background = self._background(goals)
        except ProofStateError as exc:  # the session is gone with it: the state could not be reached again
            return TacticResult("error", message=str(exc), seconds=time.monotonic() - started)
        return TacticResult("progress", ProofState(new_path, tuple(g.display() for g in goals), goals, background),
                            seconds=seconds, notes=_notes(reply.text))

    def _background(self, goals: list[CoqGoal]) -> str:
        """The contexts of every goal, as ``Show Existentials`` prints them (the evars' own names left out), when the
        state has goals after the first (:data:`BACKGROUND_CONTEXTS`); "" otherwise. Raises
        :class:`ProofStateError` when Coq does not answer (``_send`` has then dropped the session)."""
        if not BACKGROUND_CONTEXTS or len(goals) < 2:
            return ""
        shown = _last_output(self._send("Show Existentials.", time.monotonic() + 10).text)
        return " ".join(_EXISTENTIAL_HEAD.sub(" ", shown).split())

    def proof_text(self, tactics: Sequence[str]) -> str:
        return "\n".join(tactics)

    # ------------------------------------------------------------------ premises

    def search_premises(self, query: str, timeout_s: float = 5.0, limit: int = 400) -> list[Premise]:
        """Lemmas ``Search QUERY.`` finds in the loaded environment (the context and its imports).

        ``query`` is a list of Coq terms or quoted notations (``"app length"``); it is screened to the
        characters of :data:`SEARCH_QUERY`, and no `Qed` in it. Runs in the current proof.
        """
        if not SEARCH_QUERY.fullmatch(query) or "Qed" in query:
            self.refused_queries += 1
            return []
        try:
            reply = self._send(f"Search {query}.", time.monotonic() + timeout_s)
        except ProofStateError:
            return []
        if reply.errors:
            return []
        return parse_search(reply.text)[:limit]

    def module_lemmas(self, module: str, timeout_s: float = 10.0, limit: int = 1500) -> list[Premise]:
        """The statements of what ``module`` (a module, functor or module type the context names, e.g. in
        ``Include``) declares, as this scope states them: ``Print Module`` (or ``Print Module Type``) for the
        names, then ``Check`` of each here (a functor's included copies, with this scope's notations).
        Inside a module still being defined, Coq's ``Search`` does not show what ``Include`` brought in
        (Coq 8.16), so this is how the search sees those lemmas. Empty when Coq does not say."""
        if not COQ_NAME.fullmatch(module):
            return []
        deadline = time.monotonic() + timeout_s
        try:
            names: list[str] = []
            for command in ("Print Module", "Print Module Type"):
                reply = self._send(f"{command} {module}.", deadline)
                if not reply.errors:
                    names = parse_module_names(reply.text)
                    break
            names = names[:limit]
            if not names:
                return []
            reply = self._send("\n".join(f"Check {n}." for n in names), deadline)
        except ProofStateError:
            return []
        return parse_checks(reply.text, names)

    def module_tactic_signatures(self, module: str, timeout_s: float = 10.0, limit: int = 400,
                                 parameters: Sequence[str] = ()) -> list[tuple[str, int]]:
        """The Ltac tactics of the open module ``module`` (its own and those its ``Include``s brought in:
        ``nzsimpl``, ``order'``, ``cases n``, ``double_induct n m`` in a ``Numbers`` functor), and those its
        functor ``parameters`` carry (``C.nzsimpl`` under ``Module NZGcdProp ... (Import C : NZMulOrderProp A)``),
        that take at most two arguments, as (name, how many): ``Print Ltac Signatures`` for the names and their
        parameters, ``Locate Ltac`` of each for the ones defined in ``module`` or a parameter. Empty when Coq does
        not say."""
        if not COQ_NAME.fullmatch(module):
            return []
        owners = [module, *(p for p in parameters if COQ_NAME.fullmatch(p))]
        deadline = time.monotonic() + timeout_s
        try:
            printed = self._send("Print Ltac Signatures.", deadline)
            signatures: dict[str, int] = {}
            for line in _PROMPT.sub("", printed.text).split("\n"):
                m = re.fullmatch(r"\s*(?P<name>[A-Za-z_][\w']*)(?P<params>(?:\s+[A-Za-z_][\w']*){0,2})\s*", line)
                if m is not None and len(signatures) < limit:
                    signatures.setdefault(m.group("name"), len(m.group("params").split()))
            if printed.errors or not signatures:
                return []
            located = self._send("\n".join(f"Locate Ltac {n}." for n in signatures), deadline)
        except ProofStateError:
            return []
        paths = re.findall(r"^Ltac\s+(\S+)", _PROMPT.sub("", located.text), re.M)
        inside = re.compile(rf"(?:^|\.)(?:{'|'.join(map(re.escape, owners))})\.(?P<name>[A-Za-z_][\w']*)$")
        names = dict.fromkeys(m.group("name") for p in paths
                              if (m := inside.search(p)) and m.group("name") in signatures)
        return [(name, signatures[name]) for name in names]

    def record_fields(self, record: str, timeout_s: float = 5.0) -> tuple[list[str], int]:
        """The fields of ``record`` when it is a record of propositions here (``Print ring_theory``: the laws
        ``Radd_0_l``, ``Radd_comm``, ...) and its number of parameters; no fields for anything else, or when Coq
        does not say."""
        if not COQ_NAME.fullmatch(record):
            return [], 0
        try:
            reply = self._send(f"Print {record}.", time.monotonic() + timeout_s)
        except ProofStateError:
            return [], 0
        return ([], 0) if reply.errors else parse_record_fields(reply.text)

    def check_applied(self, terms: Sequence[Sequence[str]], timeout_s: float = 10.0) -> list[Premise]:
        """For each entry of ``terms`` (ways to write one field applied to a hypothesis: ``Radd_comm Rth``, then
        ``@Radd_comm _ _ _ _ _ _ _ _ Rth`` for a record whose parameters are not implicit), the first Coq accepts,
        as a premise named by it with the type Coq gives it here (``forall x y : R, x + y == y + x``)."""
        shape = re.compile(r"@?[A-Za-z_][\w'.]*(?:\s+(?:_|[A-Za-z_][\w'.]*))+")
        ways = [[t for t in entry if shape.fullmatch(t)] for entry in terms]
        found: list[Premise | None] = [None] * len(ways)
        deadline = time.monotonic() + timeout_s
        for rank in range(max((len(w) for w in ways), default=0)):
            asked = [(i, w[rank]) for i, w in enumerate(ways) if found[i] is None and len(w) > rank]
            if not asked:
                break
            try:
                reply = self._send("\n".join(f"Check ({t})." for _, t in asked), deadline)
            except ProofStateError:
                break
            for (i, _), premise in zip(asked, parse_check_replies(reply.text, [t for _, t in asked]), strict=False):
                found[i] = premise
        return [p for p in found if p is not None]

    def types_of(self, names: Sequence[str], timeout_s: float = 5.0) -> dict[str, str]:
        """The type ``Check`` gives each constant of ``names`` here (``set_In`` : ``A -> set -> Prop``), asked in one
        batch; a name Coq refuses, or one that is no plain name, is left out."""
        asked = [n for n in dict.fromkeys(names) if COQ_NAME.fullmatch(n)]
        if not asked:
            return {}
        try:
            reply = self._send("\n".join(f"Check {n}." for n in asked), time.monotonic() + timeout_s)
        except ProofStateError:
            return {}
        return {n: p.statement for n, p in zip(asked, parse_check_replies(reply.text, asked), strict=False)
                if p is not None}

    def locate(self, name: str, timeout_s: float = 5.0) -> str | None:
        """The full name ``Locate`` gives the constant ``name`` denotes here (``N.zero`` for a functor
        parameter's field); None when it is not a constant or Coq does not say."""
        if not COQ_NAME.fullmatch(name):
            return None
        try:
            reply = self._send(f"Locate {name}.", time.monotonic() + timeout_s)
        except ProofStateError:
            return None
        return None if reply.errors else located_constant(reply.text, name)

    def loaded_libraries(self, timeout_s: float = 20.0) -> list[str]:
        """The modules loaded in the session now (``Print Libraries``: the context's imports and
        the preload), cached per context; empty when Coq does not say."""
        from oracle.coq.modules import loaded_libraries

        session = self.session
        if session is None or not session.alive:
            return []
        if session.libraries is None:
            try:
                session.libraries = loaded_libraries(self._send("Print Libraries.", time.monotonic() + timeout_s).text)
            except ProofStateError:
                return []
        return list(session.libraries)

    def assumptions_of_proof(self, tactics: Sequence[str], timeout_s: float = 30.0) -> list[str] | None:
        """Run ``tactics`` from the statement, ``Qed`` and ``Print Assumptions``: the axioms the proof
        relies on (None when it does not close). The session is put back before the proof."""
        from oracle.coq.replies import parse_assumptions

        deadline = time.monotonic() + timeout_s
        assert self.task is not None and self.doc is not None
        try:
            self._goto(tuple(tactics), deadline)
            qed = self._send("Qed.", deadline)
            if qed.errors or qed.proof_name != "Coq":
                self._reopen(deadline)
                return None
            printed = self._send(f"Print Assumptions {self.task.name}.", deadline)
            self._reopen(deadline)
        except ProofStateError:
            return None
        closed, axioms, problem = parse_assumptions(printed.text)
        return [] if closed else (axioms or [problem or "unknown"])

    # ------------------------------------------------------------------ the document

    def _send(self, chunk: str, deadline: float) -> Reply:
        session = self.session
        if session is None or not session.alive:
            self.doc = None
            raise ProofStateError("the coqtop session is not running")
        try:
            return session.send(chunk, deadline)
        except TimeoutError as exc:
            self._drop_session()
            raise ProofStateError("coqtop did not answer in time (session restarted)") from exc
        except CoqSessionError as exc:
            self._drop_session()
            raise ProofStateError(str(exc)) from exc

    def _reopen(self, deadline: float) -> None:
        """After a Qed: back to the state right after ``Proof.``."""
        assert self.doc is not None
        back = self._send(f"BackTo {self.doc.root}.", deadline)
        if back.errors or back.state != self.doc.root:
            self._drop_session()
            raise ProofStateError("could not return to the statement")
        self.doc.tactics.clear()
        self.doc.ids.clear()

    def _goto(self, path: tuple[str, ...], deadline: float) -> Reply | None:
        """Make the document hold exactly ``path`` after the statement; the last reply, if any ran."""
        doc = self.doc
        if doc is None:
            raise ProofStateError("no proof started (or the session was restarted)")
        common = 0
        while common < min(len(path), len(doc.tactics)) and path[common] == doc.tactics[common]:
            common += 1
        if common == len(path) == len(doc.tactics):
            return None
        target = doc.state_at(common)
        back = self._send(f"BackTo {target}.", deadline)
        if back.errors or back.state != target:
            self._drop_session()
            raise ProofStateError(f"BackTo {target} failed")
        del doc.tactics[common:]
        del doc.ids[common:]
        last: Reply | None = back
        for tactic in path[common:]:
            self.replays += 1
            reply = self._run_one(tactic, max(1.0, deadline - time.monotonic()))
            if isinstance(reply, TacticResult):
                raise ProofStateError(f"replaying `{tactic}` failed: {reply.message}")
            doc.tactics.append(tactic)
            doc.ids.append(reply.state)
            last = reply
        return last

    def _run_one(self, step: str, timeout_s: float) -> Reply | TacticResult:
        """Run one screened step (a tactic, or a script of several sentences) at the document's tip;
        the reply on success. On failure the document is back at the tip.

        A sentence that ran moved the document on even when its output holds a line starting "Error:": a tactic may
        print one and succeed (CoqHammer's `hammer` prints "Error: Error running cvc4." for an ATP that cannot start,
        then proves the goal with another). Read as a failure, the document stood one state ahead of where the
        search believed it, and every later step there answered "No such goal" (round thirteen)."""
        doc = self.doc
        assert doc is not None
        self.tactic_runs += 1
        seconds = max(1, math.ceil(timeout_s))
        tip = doc.state_at(len(doc.tactics))
        units = [u.code for u in split_sentences(step)]
        chunk = "\n".join(u if u in ("{", "}") or re.fullmatch(r"[-+*]+", u) else f"Timeout {seconds} {u}"
                          for u in units)
        reply = self._send(chunk, time.monotonic() + seconds * len(units) + TIMEOUT_GRACE_S)
        if reply.errors and not (len(units) == 1 and _ran_despite_errors(reply)):
            if len(units) > 1:  # coqtop goes on after an error inside a chunk: undo what ran
                self._back_to(tip)
            # the last "Error:" line is Coq's verdict on the sentence; lines before it were printed while it ran
            text = " ".join(re.split(r"(?m)^(?=Error:)", reply.errors[0])[-1].split())
            if _TIMED_OUT.search(text):
                return TacticResult("timeout", message=f"no answer within {seconds} s")
            return TacticResult("error", message=text.removeprefix("Error:").strip()[:300])
        if (len(reply.prompts) != len(units) or any(name != doc.name for name, _ in reply.prompts)
                or reply.state <= tip):
            # Coq read something else than these sentences: put the document back where it was
            self._back_to(tip)
            return TacticResult("rejected", message="the step did not run as the sentences it was screened as")
        return reply

    def _back_to(self, state: int) -> None:
        back = self._send(f"BackTo {state}.", time.monotonic() + 10)
        if back.errors or back.state != state:
            self._drop_session()


def _notes(text: str, limit: int = 2000) -> str:
    """What a reply printed before its goal display or ``No more goals`` (messages, not goals)."""
    out = _PROMPT.sub("", text)
    goals = re.search(r"^\d+ goals?", out, re.M)
    ends = [i for i in (out.find("No more goals"), goals.start() if goals else -1) if i >= 0]
    return out[: min(ends, default=len(out))].strip()[:limit]


def _last_output(text: str) -> str:
    """What the last sentence of a reply printed (the text before the reply's last prompt)."""
    parts = re.split(r"<prompt>.*?</prompt>", text, flags=re.S)
    return parts[-2] if len(parts) >= 2 else parts[0]


def screen_step(text: str) -> str:
    """A step for :meth:`CoqProofStates.run_tactic`: one tactic sentence (:func:`screen_tactic`), or
    a script of several sentences screened as a proof body (bullets and braces allowed; no
    ``Proof with``). Returns the normalized text (sentences without comments, one per line)."""
    script = screen_proof(text)
    if len(script.units) == 1:
        return screen_tactic(text)
    if script.opener != "Proof." and not script.opener.startswith("Proof using"):
        raise ProofRejected("a script with its own Proof opener", cheat=False)
    return "\n".join(u.code for u in script.units)


__all__ = ["CoqGoal", "CoqProofStates", "parse_coq_goals", "parse_search", "screen_step"]
