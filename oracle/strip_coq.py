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
_END_SCOPE_RE = re.compile(rf"^End\s+(?P<name>{_IDENT})\s*\.$")


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


def strip_coq_text(text: str, source_file: str = "") -> list[TheoremTask]:
    """One task per theorem-like declaration of ``text`` (a whole ``.v`` file), in file order.

    A declaration whose proof ends in ``Abort`` adds nothing to the environment and yields no
    task; one ending in ``Admitted`` yields a task (an open problem) whose original proof is the
    admitted script. Raises CoqSyntaxError naming the problem when the file cannot be parsed.
    """
    sentences = split_sentences(text)
    tasks: list[TheoremTask] = []
    i = 0
    while i < len(sentences):
        sent = sentences[i]
        match = _DECL_RE.match(sent.code)
        if match is None:
            i += 1
            continue
        j = i + 1
        end: Sentence | None = None
        while j < len(sentences):
            if _DECL_RE.match(sentences[j].code):
                break
            if _END_RE.match(sentences[j].code):
                end = sentences[j]
                break
            j += 1
        if end is None:
            raise CoqSyntaxError(
                f"{source_file or '<text>'}:{line_of(text, sent.start)}: {match.group('kw')} "
                f"{match.group('name')} has no Qed/Defined/Admitted/Abort"
            )
        ender = _END_RE.match(end.code)
        assert ender is not None
        if not ender.group("kw").startswith("Abort"):
            tasks.append(
                TheoremTask(
                    name=match.group("name"),
                    statement=text[sent.start : sent.end],
                    context=text[: sent.start],
                    original_proof=text[sent.end : end.end].strip(),
                    difficulty=_difficulty(text[: sent.start]),
                    prover="coq",
                    source_file=source_file,
                    line=line_of(text, sent.start),
                )
            )
        i = j + 1
    return tasks


def strip_coq_file(path: Path | str) -> list[TheoremTask]:
    """Read and strip one ``.v`` file (see :func:`strip_coq_text`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CoqSyntaxError(f"{p}: no such file") from exc
    except UnicodeDecodeError as exc:
        raise CoqSyntaxError(f"{p}: not UTF-8 text ({exc})") from exc
    return strip_coq_text(text, source_file=str(p))


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


def open_scopes(context: str) -> list[str]:
    """Names of the Sections and Modules left open at the end of ``context``, outermost first.

    The checker closes them (``End X.``) after the proof so that ``coqc`` accepts the file.
    """
    stack: list[str] = []
    for sent in split_sentences(context):
        code = sent.code
        if (m := _SECTION_RE.match(code)) is not None:
            stack.append(m.group("name"))
        elif (m := _MODULE_RE.match(code)) is not None:
            if ":=" not in m.group("rest"):  # `Module M := N.` is closed at once
                stack.append(m.group("name"))
        elif (m := _END_SCOPE_RE.match(code)) is not None and stack and stack[-1] == m.group("name"):
            stack.pop()
    return stack
