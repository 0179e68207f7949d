"""Strip a Coq ``.v`` file into theorem tasks: the parser half of strip-and-rediscover for Coq.

Why it exists: the Coq bench (and ``bench coq --source FILE``) turns any user file into one
:class:`~oracle.proof_common.TheoremTask` per ``Theorem``/``Lemma``/``Example``/``Fact``/
``Remark``/``Corollary``/``Proposition``/``Property``: the file text before the declaration
(the context, with earlier proofs intact so earlier lemmas stay usable and axiom-free), the exact
declaration sentence (the statement), and the hidden original proof (``Proof. ... Qed.``).

The lexer follows Coq's own rules where they matter for safety: comments nest, strings inside
comments are strings (a ``*)`` inside them does not close the comment), ``""`` escapes a quote,
a sentence ends at a ``.`` (or the ellipsis ``...``) followed by a blank (space, tab, newline,
carriage return, form feed) or the end of input, never at ``..`` (a token of its own, as in
``[tac ..]``), four dots or more are refused as Coq refuses them, and a brace or bullet at the
start of a sentence is a sentence. The same lexer cuts an agent's proof body into sentences for the
anti-cheat rules in :mod:`oracle.coq`, so the oracle and Coq agree on where sentences end.

Invariant: ``context + statement + original_proof`` of every task is a prefix of the source
file (byte for byte), so the original proof checks wherever the source file does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from oracle.proof_common import TheoremTask

BLANKS = " \t\n\r\f"
DECL_KEYWORDS = ("Theorem", "Lemma", "Example", "Fact", "Remark", "Corollary", "Proposition", "Property")
PROOF_ENDS = ("Qed", "Defined", "Admitted", "Abort", "Save")
DIFFICULTIES = ("easy", "medium", "hard")

_IDENT = r"[A-Za-z_][A-Za-z0-9_']*"
_DECL_RE = re.compile(
    r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Polymorphic|Monomorphic|Program)\s+)*"
    rf"(?P<kw>{'|'.join(DECL_KEYWORDS)})\s+(?P<name>{_IDENT})"
)
_END_RE = re.compile(rf"^(?P<kw>Qed|Defined|Admitted|Abort(?:\s+All)?|Save\s+{_IDENT})\s*\.$")
_DIFFICULTY_RE = re.compile(r"\(\*\s*difficulty\s*:\s*(?P<level>[A-Za-z]+)\s*\*\)\s*$")
_SECTION_RE = re.compile(rf"^Section\s+(?P<name>{_IDENT})\s*\.$")
_MODULE_RE = re.compile(rf"^Module\s+(?:Type\s+)?(?:(?:Import|Export)\s+)?(?P<name>{_IDENT})\b(?P<rest>.*)\.$", re.S)
_WITH_CLAUSE_RE = re.compile(rf"\bwith\s+(?:Module|Definition)\s+{_IDENT}(?:\.{_IDENT})*\s*:=")
_END_SCOPE_RE = re.compile(rf"^End\s+(?P<name>{_IDENT})\s*\.$")
_PROOF_WORD_RE = re.compile(r"^Proof(?![\w'])")
_PROOF_OPENER_RE = re.compile(r"^Proof(?:\s+(?:using|with)(?![\w']).*)?\s*\.$", re.S)
_PROOF_TERM_RE = re.compile(r"^Proof(?![\w'])(?!\s*(?:using|with)(?![\w']))\s*(?P<term>[^\s.].*?)\s*\.$", re.S)
# commands Coq refuses while a proof is open (they open a scope or a nested proof): one of them
# before a theorem's Qed means the theorem's proof was not where the stripper looked
_OUTSIDE_PROOF_RE = re.compile(
    r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global)\s+)?(?:Section|Module|End|Goal|Next\s+Obligation|Obligation|Declare\s+Module)(?![\w'])"
)
_STRING_RE = re.compile(r'"(?:[^"]|"")*"')


class CoqSyntaxError(ValueError):
    """The text cannot be cut into Coq sentences (unterminated comment or string)."""


@dataclass(frozen=True)
class Sentence:
    """One Coq sentence: ``text[start:end]`` (raw, comments included), ``code`` without comments."""

    start: int  # offset of the first non-blank, non-comment character
    end: int  # offset just past the terminating '.' (or the end of a trailing fragment)
    code: str  # the sentence with comments replaced by one space, stripped
    terminated: bool = True  # False for a trailing fragment with no final '.'


def _skip_string(text: str, i: int) -> int:
    """``text[i]`` is a double quote; return the offset just past the closing quote."""
    n = len(text)
    j = i + 1
    while j < n:
        if text[j] == '"':
            if j + 1 < n and text[j + 1] == '"':  # "" is an escaped quote
                j += 2
                continue
            return j + 1
        j += 1
    raise CoqSyntaxError(f"unterminated string starting at offset {i} (line {text.count(chr(10), 0, i) + 1})")


def _skip_comment(text: str, i: int) -> int:
    """``text[i:i+2]`` is ``(*``; return the offset just past the matching ``*)`` (comments nest)."""
    n = len(text)
    depth = 0
    j = i
    while j < n:
        if text.startswith("(*", j):
            depth += 1
            j += 2
        elif text.startswith("*)", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        elif text[j] == '"':
            j = _skip_string(text, j)
        else:
            j += 1
    raise CoqSyntaxError(f"unterminated comment starting at offset {i} (line {text.count(chr(10), 0, i) + 1})")


def split_sentences(text: str) -> list[Sentence]:
    """Cut ``text`` into sentences; a trailing fragment without '.' comes last, ``terminated=False``.

    Raises CoqSyntaxError for an unterminated comment or string.
    """
    sentences: list[Sentence] = []
    n = len(text)
    i = 0
    start: int | None = None
    code: list[str] = []
    while i < n:
        ch = text[i]
        if text.startswith("(*", i):
            i = _skip_comment(text, i)
            code.append(" ")
            continue
        if ch == '"':
            j = _skip_string(text, i)
            if start is None:
                start = i
            code.append(text[i:j])
            i = j
            continue
        if ch in BLANKS:
            code.append(ch)
            i += 1
            continue
        if start is None:
            # as in Coq, a brace or a bullet (a run of one of - + *) at the start of a sentence
            # is a sentence of its own
            if ch in "{}":
                sentences.append(Sentence(i, i + 1, ch))
                i += 1
                continue
            if ch in "-+*":
                j = i
                while j < n and text[j] == ch:
                    j += 1
                sentences.append(Sentence(i, j, text[i:j]))
                i = j
                continue
            start = i
        if ch == ".":
            # a run of dots is one token for Coq: `.` and `...` (the ellipsis of `Proof with`) end
            # a sentence when a blank or the end follows; `..` (as in `[tac ..]`) never does
            j = i
            while j < n and text[j] == ".":
                j += 1
            if j - i > 3:
                raise CoqSyntaxError(f"a run of {j - i} dots at offset {i} (line {line_of(text, i)}) is not a Coq token")
            code.append(text[i:j])
            ends = j - i != 2 and (j == n or text[j] in BLANKS)
            i = j
            if ends:
                sentences.append(Sentence(start, i, _squash("".join(code))))
                start, code = None, []
            continue
        code.append(ch)
        i += 1
    if start is not None:
        sentences.append(Sentence(start, n, _squash("".join(code)), terminated=False))
    return sentences


def _squash(code: str) -> str:
    return code.strip()


def line_of(text: str, offset: int) -> int:
    """1-based line number of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


def _difficulty(before: str) -> str:
    match = _DIFFICULTY_RE.search(before.rstrip())
    if match is None:
        return "unknown"
    level = match.group("level").lower()
    return level if level in DIFFICULTIES else "unknown"


@dataclass(frozen=True)
class Skipped:
    """A declaration the stripper could not read exactly: it yields no task; the others still do.

    The oracle rebuilds a file from ``context + statement + proof``, so a theorem whose statement
    or proof boundaries are in doubt is left out (with this note) rather than guessed.
    """

    name: str
    keyword: str  # Theorem, Lemma, Example...
    source_file: str
    line: int  # 1-based line of the declaration
    reason: str  # e.g. "has no Qed/Defined/Admitted/Abort before the next declaration (line 80)"

    def __str__(self) -> str:
        return f"{self.source_file or '<text>'}:{self.line}: {self.keyword} {self.name} skipped: {self.reason}"


def proof_term(code: str) -> str | None:
    """The term of a ``Proof term.`` sentence (``code`` without comments), else None.

    ``Proof term.`` is Coq's ``exact term. Qed.`` in one sentence: it gives the whole proof and
    closes it. ``Proof.``, ``Proof using ...`` and ``Proof with ...`` open a tactic proof instead
    (``using`` and ``with`` are keywords, so no term starts with them). An ellipsis ending is not
    read (Coq refuses ``Proof t...``).
    """
    match = _PROOF_TERM_RE.match(code)
    if match is None or code.endswith(".."):
        return None
    return match.group("term")


def strip_coq_text_with_notes(text: str, source_file: str = "") -> tuple[list[TheoremTask], list[Skipped]]:
    """One task per readable theorem-like declaration of ``text`` (a whole ``.v`` file), in file
    order, and one :class:`Skipped` note per declaration that could not be read exactly.

    A proof runs from the declaration to ``Qed``/``Defined``/``Admitted``/``Abort``/``Save``, or is
    the single sentence ``Proof term.`` right after the declaration. A declaration whose proof ends
    in ``Abort`` adds nothing to the environment and yields no task; one ending in ``Admitted``
    yields a task (an open problem) whose original proof is the admitted script. A declaration is
    skipped, with a note, when no proof end comes before the next declaration or the end of the
    file, when a command that cannot run inside a proof (``Section``, ``Module``, ``End``,
    ``Goal``, ``Next Obligation``...) or a ``Proof term.`` sentence comes before its end, or when
    it is an ``Example`` with a body (``Example e : T := t.``, a definition, not a proof).
    Raises CoqSyntaxError (naming ``source_file``) only when the file cannot be cut into sentences.
    """
    try:
        sentences = split_sentences(text)
    except CoqSyntaxError as exc:
        raise CoqSyntaxError(f"{source_file}: {exc}" if source_file else str(exc)) from exc
    tasks: list[TheoremTask] = []
    skipped: list[Skipped] = []
    i = 0
    while i < len(sentences):
        sent = sentences[i]
        match = _DECL_RE.match(sent.code)
        if match is None:
            i += 1
            continue
        kw, name = match.group("kw"), match.group("name")
        decl_line = line_of(text, sent.start)
        end, resume, reason = _proof_end(text, sentences, i)
        if end is None:
            skipped.append(Skipped(name, kw, source_file, decl_line, reason))
            i = resume
            continue
        ender = _END_RE.match(end.code)
        if ender is None or not ender.group("kw").startswith("Abort"):
            tasks.append(
                TheoremTask(
                    name=name,
                    statement=text[sent.start : sent.end],
                    context=text[: sent.start],
                    original_proof=text[sent.end : end.end].strip(),
                    difficulty=_difficulty(text[: sent.start]),
                    prover="coq",
                    source_file=source_file,
                    line=decl_line,
                )
            )
        i = resume
    return tasks, skipped


def _proof_end(text: str, sentences: list[Sentence], i: int) -> tuple[Sentence | None, int, str]:
    """(the sentence that ends the proof of the declaration ``sentences[i]``, the index to scan on
    from, "") or (None, the index to scan on from, why the proof cannot be read)."""
    decl = sentences[i]
    following = sentences[i + 1] if i + 1 < len(sentences) else None
    opens_proof = following is not None and following.code.startswith("Proof") and (
        _PROOF_OPENER_RE.match(following.code) is not None or proof_term(following.code) is not None)
    if following is not None and _PROOF_WORD_RE.match(following.code) and not opens_proof:
        return None, i + 2, f"has a Proof sentence that cannot be read (line {line_of(text, following.start)})"
    if following is not None and proof_term(following.code) is not None:
        return following, i + 2, ""
    match = _DECL_RE.match(decl.code)
    assert match is not None
    if match.group("kw") == "Example" and ":=" in _STRING_RE.sub('""', decl.code) and not opens_proof:
        # `Example e : T := t.` is a definition; a `:=` inside the statement (a `let`) is read only
        # when a Proof sentence shows that the declaration opened a proof
        return None, i + 1, "has a body (:=), not a proof"
    j = i + 1
    while j < len(sentences):
        sent = sentences[j]
        if _END_RE.match(sent.code):
            return sent, j + 1, ""
        if _DECL_RE.match(sent.code):
            return None, j, f"has no Qed/Defined/Admitted/Abort before the next declaration (line {line_of(text, sent.start)})"
        if (outside := _OUTSIDE_PROOF_RE.match(sent.code)) is not None:
            command = " ".join(outside.group(0).split())
            return None, j, f"meets a {command} command before its Qed (line {line_of(text, sent.start)})"
        if proof_term(sent.code) is not None:
            return None, j + 1, f"meets a Proof term sentence after its first one (line {line_of(text, sent.start)})"
        j += 1
    return None, j, "has no Qed/Defined/Admitted/Abort before the end of the file"


def strip_coq_text(text: str, source_file: str = "") -> list[TheoremTask]:
    """Every theorem of ``text`` (see :func:`strip_coq_text_with_notes`), strictly: raises
    CoqSyntaxError naming the first declaration that cannot be read, or when the file cannot be
    parsed."""
    tasks, skipped = strip_coq_text_with_notes(text, source_file)
    if skipped:
        first = skipped[0]
        raise CoqSyntaxError(f"{first.source_file or '<text>'}:{first.line}: {first.keyword} {first.name} {first.reason}")
    return tasks


def _read_v(path: Path | str) -> tuple[Path, str]:
    p = Path(path)
    try:
        return p, p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CoqSyntaxError(f"{p}: no such file") from exc
    except IsADirectoryError as exc:
        raise CoqSyntaxError(f"{p}: a directory, not a .v file") from exc
    except UnicodeDecodeError as exc:
        raise CoqSyntaxError(f"{p}: not UTF-8 text ({exc})") from exc


def strip_coq_file(path: Path | str) -> list[TheoremTask]:
    """Read and strip one ``.v`` file strictly (see :func:`strip_coq_text`)."""
    p, text = _read_v(path)
    return strip_coq_text(text, source_file=str(p))


def strip_coq_file_with_notes(path: Path | str) -> tuple[list[TheoremTask], list[Skipped]]:
    """Read and strip one ``.v`` file, skipping with a note each theorem that cannot be read
    (see :func:`strip_coq_text_with_notes`). Raises CoqSyntaxError when the file cannot be read
    or cut into sentences."""
    p, text = _read_v(path)
    return strip_coq_text_with_notes(text, source_file=str(p))


def stripped_source(text: str) -> str:
    """The file with every theorem's proof replaced by ``Admitted.`` (what a person would hand out)."""
    tasks = strip_coq_text(text)
    out: list[str] = []
    pos = 0
    for task in tasks:
        decl_end = len(task.context) + len(task.statement)
        proof_start = text.index(task.original_proof, decl_end)
        out.append(text[pos:decl_end])
        out.append("\nAdmitted.")
        pos = proof_start + len(task.original_proof)
    out.append(text[pos:])
    return "".join(out)


HIDDEN_PROOF = "Admitted."

# A proof can run vernacular commands whose effect outlives it: QArith/Qreduction.v opens and closes
# Z_scope inside the proof of Qred_correct, so a later statement (Qred_opp) parses `-` in Q_scope only
# once that proof has run (4 of its 10 theorems could not start on out-of-sample 10's blind run). The
# hidden view keeps these commands after `Admitted.`, in their order; tactics go with the proof. Only
# commands that change how later sentences are read (scopes, notations, arguments, options, opacity,
# instances): a `Hint`, `Ltac` or `Tactic Notation` written inside a proof is proof code, and stays
# hidden with it (none in the stdlib). False restores the view without them (for tests).
KEEP_PROOF_COMMANDS = True
_PROOF_COMMAND_RE = re.compile(
    r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?"
    r"(?:(?:Open|Close|Delimit|Bind|Declare)\s+Scope|Arguments|Set|Unset|Notation|Infix|Reserved\s+(?:Notation|Infix)"
    r"|Create\s+HintDb|Existing\s+Instances?|Opaque|Transparent|Typeclasses\s+(?:Opaque|Transparent))(?![\w'])"
)


def proof_commands(proof: str) -> list[str]:
    """The sentences of ``proof`` (a proof script) that are commands with an effect beyond the proof
    (scopes, notations, arguments, options, opacity, instances), in order, without their comments;
    proof steps are left out."""
    return [s.code for s in split_sentences(proof) if s.terminated and _PROOF_COMMAND_RE.match(s.code)]


# A theorem proved inside a Section keeps, once the Section closes, only the section variables its proof
# used (Coq reads them off the proof term at `Qed`). An `Admitted.` proof has no term, so Coq keeps them
# all: in Sorting/Permutation.v a lemma of `Section Permutation_map` (`Variable A B : Type.`) took an
# extra `Type` argument, and a later proof outside the section no longer typechecked; in FSets/FMapList.v
# the module's signature check failed at `End Make.` (about a dozen stdlib files: round nine's sweep).
# The hidden view declares what the proof used before `Admitted.`: the proof's own `Proof using`
# sentence when it has one, else the one Coq suggests for the original (``Set Suggest Proof Using``,
# given to :func:`hidden_contexts` by the checker's side), else DEFINED_USING (below). It names section
# variables only, which the closed theorem's type shows anyway. False restores the bare `Admitted.`
# (for tests).
DECLARE_PROOF_USING = True
_PROOF_USING_RE = re.compile(r"^Proof\s+using(?![\w'])")
_SUGGESTION_RE = re.compile(r"The proof of (?P<name>[\w'.]+)\s+should start with one of the following commands:"
                            r"\s*\n\s*Proof using(?P<using>[^\n]*?)\s*\.[ \t]*(?:\n|\Z)")


# Coq suggests nothing for a proof that ends with `Defined` (Init/Logic.v's `eq_sym`, in a Section with
# `Variables x y z : A.`): such a hidden proof declares the variables its statement uses, the usual case
DEFINED_USING = "Proof using Type."
_DEFINED_RE = re.compile(r"(?:^|[\s.])Defined\s*\.\s*$")


def _in_section(context: str) -> bool:
    return any(not frame[1] for frame in _open_frames(s.code for s in split_sentences(context)))


def proof_using_suggestions(output: str) -> list[tuple[str, str]]:
    """(theorem, ``Proof using ...`` sentence) for each suggestion in a Coq run's ``output`` under ``Set
    Suggest Proof Using`` (the first, exact one of Coq's choices), in the order Coq printed them."""
    return [(m.group("name").rsplit(".", 1)[-1], f"Proof using {m.group('using').strip()}.".replace(" .", "."))
            for m in _SUGGESTION_RE.finditer(output)]


def _own_proof_using(original_proof: str) -> str:
    """The proof's first sentence when it is a ``Proof using ...`` declaration, else ""."""
    for sentence in split_sentences(original_proof):
        return sentence.code if sentence.terminated and _PROOF_USING_RE.match(sentence.code) else ""
    return ""


def _hidden_proof(original_proof: str, using: str = "") -> str:
    """What stands for a hidden proof: the section variables it used (its own ``Proof using``, else
    ``using``), ``Admitted.`` and, after it, the proof's lasting commands."""
    head = (_own_proof_using(original_proof) or using) if DECLARE_PROOF_USING else ""
    kept = proof_commands(original_proof) if KEEP_PROOF_COMMANDS else []
    return "".join("\n" + sentence for sentence in [*([head] if head else []), HIDDEN_PROOF, *kept])


def hide_proofs(text: str) -> str:
    """``text`` (a file, or a theorem's context) with the proof of every theorem the stripper reads
    replaced by ``Admitted.`` and the proof's lasting commands (KEEP_PROOF_COMMANDS): what an agent
    sees of the earlier theorems in the ``rediscover`` setting (their statements, usable as lemmas; no
    human proof). A declaration the stripper skips (its proof cannot be read exactly) keeps its text; a
    text that cannot be cut into sentences raises CoqSyntaxError (nothing is shown rather than a proof)."""
    return hidden_contexts(text, [len(text)])[0]


def hidden_contexts(text: str, ends: list[int], suggestions: Sequence[tuple[str, str]] = ()) -> list[str]:
    """``hide_proofs(text[:end])`` for each offset of ``ends`` that falls between declarations (each
    theorem's context length), computed with one pass over ``text``. ``suggestions``: Coq's ``Proof
    using`` suggestions for ``text`` with its proofs (:func:`proof_using_suggestions`), matched to the
    theorems by name in file order."""
    tasks, _ = strip_coq_text_with_notes(text)
    using: dict[int, str] = {}
    at = 0
    for name, sentence in suggestions:
        match = next((i for i in range(at, len(tasks)) if tasks[i].name == name), None)
        if match is not None:
            using[match], at = sentence, match + 1
    pieces: list[tuple[int, int, str]] = []  # (start, end) of each replaced proof in text, replacement
    for i, task in enumerate(tasks):
        decl_end = len(task.context) + len(task.statement)
        proof_start = text.index(task.original_proof, decl_end)
        if i not in using and suggestions and _DEFINED_RE.search(task.original_proof) and _in_section(task.context):
            using[i] = DEFINED_USING
        pieces.append((decl_end, proof_start + len(task.original_proof),
                       _hidden_proof(task.original_proof, using.get(i, ""))))
    out: list[str] = []
    for end in ends:
        parts: list[str] = []
        pos = 0
        for start, stop, repl in pieces:
            if stop > end:
                break
            parts.append(text[pos:start])
            parts.append(repl)
            pos = stop
        parts.append(text[pos:end])
        out.append("".join(parts))
    return out


@dataclass(frozen=True)
class OpenModule:
    """A module (or module type) still open at the end of a context: its functor parameters' names and
    the heads of its ``Include`` sentences (``NAddOrderProp`` for ``Include NAddOrderProp N.``)."""

    name: str
    parameters: tuple[str, ...]
    includes: tuple[str, ...]


_INCLUDE_RE = re.compile(r"^Include\s+(?:Type\s+)?(?P<expr>.+)\.$", re.S)
_PARAMETER_RE = re.compile(rf"\(\s*(?:(?:Import|Export)\s+)?(?P<names>{_IDENT}(?:\s+{_IDENT})*)\s*:")
_INCLUDED_HEAD_RE = re.compile(rf"^!?\(*\s*(?P<head>{_IDENT}(?:\.{_IDENT})*)")


def _open_frames(sentences: Iterable[str]) -> list[tuple[str, bool, list[str], list[str], int]]:
    """The Sections and Modules open at the end of ``sentences``, outermost first: (name, is a module,
    its parameters, the heads of its ``Include`` sentences, the index of its opening sentence). A
    ``Module M := F N.`` is complete at once and opens nothing."""
    stack: list[tuple[str, bool, list[str], list[str], int]] = []
    for at, code in enumerate(sentences):
        if (m := _SECTION_RE.match(code)) is not None:
            stack.append((m.group("name"), False, [], [], at))
        elif (m := _MODULE_RE.match(code)) is not None:
            rest = _WITH_CLAUSE_RE.sub(" ", m.group("rest"))  # `<: S with Module E := X.` still opens a module
            if ":=" not in rest:
                binders = rest.split("<:")[0]
                params = [n for p in _PARAMETER_RE.finditer(binders) for n in p.group("names").split()]
                stack.append((m.group("name"), True, params, [], at))
        elif (m := _END_SCOPE_RE.match(code)) is not None:
            if stack and stack[-1][0] == m.group("name"):
                stack.pop()
        elif (m := _INCLUDE_RE.match(code)) is not None and stack:
            for part in m.group("expr").split("<+"):
                head = _INCLUDED_HEAD_RE.match(part.strip())
                if head is not None and head.group("head") not in stack[-1][3]:
                    stack[-1][3].append(head.group("head"))
    return stack


def _constraint_at(rest: str) -> int | None:
    """Where the signature constraint (``<: S`` or ``: S``) of a module header's ``rest`` (after its
    name) starts, outside the parameters' parentheses; None when it has none."""
    depth = 0
    for i, ch in enumerate(rest):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and (ch == ":" or rest.startswith("<:", i)):
            return i
    return None


def unsealed_context(context: str) -> str:
    """``context`` with the signature constraint cut from the header of each module still open at its
    end (``Module M (X : T) <: S with Module E := X.`` reads ``Module M (X : T).``), the line count
    kept. ``coqc`` checks a module against its signature where the cold checker closes it (``End M.``,
    :func:`open_scopes`), and a module closed before its last field fails that check ("The field E is
    missing"), so no theorem of it could be checked (12 stdlib files). Inside the module the constraint
    changes nothing."""
    sentences = split_sentences(context)
    out = context
    for frame in reversed(_open_frames(s.code for s in sentences)):  # the last header first: offsets hold
        header = sentences[frame[4]]
        m = _MODULE_RE.match(header.code)
        cut = _constraint_at(m.group("rest")) if frame[1] and m is not None else None
        if m is None or cut is None:
            continue
        opened = header.code[:m.start("rest") + cut].rstrip() + "."
        out = out[:header.start] + opened + "\n" * context.count("\n", header.start, header.end) + out[header.end:]
    return out


def open_modules(sentences: Iterable[str]) -> list[OpenModule]:
    """The modules open at the end of ``sentences`` (a context's sentences, :func:`split_sentences`),
    outermost first, with their parameters (``N`` of ``Module M (Import N : NAxiomsMiniSig').``) and
    includes; a Section is no module."""
    return [OpenModule(name, tuple(params), tuple(incs)) for name, is_module, params, incs, _ in _open_frames(sentences)
            if is_module]


def parameter_field(path: str | None, modules: Sequence[OpenModule]) -> bool:
    """Whether ``path`` (``Locate``'s full name of a constant) is a field of a parameter of one of
    ``modules`` (``N.zero`` under ``Module M (Import N : NAxiomsMiniSig').``): the first part of the path
    is the parameter's name. The checker and the search both tell a functor's hypotheses by it."""
    if path is None or "." not in path:
        return False
    return path.split(".")[0] in {p for m in modules for p in m.parameters}


def open_scopes(context: str) -> list[str]:
    """Names of the Sections and Modules left open at the end of ``context``, outermost first.

    The checker closes them (``End X.``) after the proof so that ``coqc`` accepts the file.
    """
    return [frame[0] for frame in _open_frames(u.code for u in split_sentences(context))]
