"""Rule 1 of the Coq oracle: the lexical screen a proof body passes before Coq runs.

Same lexer as :mod:`oracle.strip_coq`, so the oracle and Coq agree on where sentences end. Every
sentence must be a tactic (optionally after bullets, braces and goal selectors); admits, axioms,
``Qed`` followed by more commands, ``Abort``, options, imports, ML modules, nested declarations and any
other vernacular command are rejected with a precise reason. ``vm_compute`` is allowed (the bytecode
VM is part of Coq's trusted base and the kernel re-checks the cast); ``native_compute`` is not.
Invariant: :func:`screen_proof` returns a :class:`ProofScript` only for a body of tactic sentences.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass

from oracle.proof_common import Verdict
from oracle.strip_coq import CoqSyntaxError, Sentence, line_of, proof_term, split_sentences

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
UNCHECKED_TACTICS = re.compile(r"\b(?:exact_no_check|vm_cast_no_check|native_cast_no_check|change_no_check|"
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

    @property
    def skips_a_check(self) -> bool:
        """Whether the body uses a tactic that skips a check the kernel makes again at ``Qed``."""
        return UNCHECKED_TACTICS.search(self.body) is not None


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
