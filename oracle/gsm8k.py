"""GSM8K answer grading: a documented, versioned policy (``POLICY_VERSION``), pure Python.

Why this module exists: every GSM8K number RRMA reports (the eval bench, the recipe oracle's
held-out score, the prompt oracle, the GRPO reward of the baseline recipe) goes through
:func:`grade`, so "correct" means one thing everywhere and changes only with a version bump.

Invariant: :func:`grade` is a pure function of ``(completion, gold, mode, answer_format)``; it
never raises on a completion (any string is gradable) and raises :class:`GoldError` only for a
gold answer that is not a number. It is fast (regular expressions, no sympy): ~10^4-10^5
completions per second on one core.

Policy ``gsm8k-grade/1`` (docs/gsm8k.md has the same table with examples)
------------------------------------------------------------------------
**Gold.** The text after the last ``####`` of a GSM8K answer, or the whole string when there is
none; thousands commas and ``$`` are dropped; it must parse as a number.

**Answer spans.** A completion is searched for these answer markers:

==============  ==============================================  =============================
kind            matches                                         which occurrence counts
==============  ==============================================  =============================
``hash``        ``#### <span>`` (to the end of the line)        the first (GSM8K convention:
                                                                ``####`` ends the solution;
                                                                what follows is trailing text)
``boxed``       ``\\boxed{<span>}`` / ``\\fbox{}`` (braces      the last (MATH convention)
                matched)
``answer_tag``  ``<answer><span></answer>``                     the last
``answer_is``   "the answer is", "final answer:", "answer =",   the last (a later statement
                "Answer:" (any case, optional ``**``)           corrects an earlier one)
==============  ==============================================  =============================

The span of ``answer_is`` ends at the end of its sentence (". ", ";", " because ", " since ",
" as ", " so ", " which ") or line. Inside a span: LaTeX wrappers (``\\text{}``, ``\\$``, ``\\,``, ``{,}``, ``\\frac``,
``\\%``) are unwrapped, parenthesised asides are dropped, and when the span holds an ``=`` the
number after the last ``=`` is the answer (``3 + 4 = 7``).

**Numbers.** ``1,234.5`` (thousands commas), ``$18``, ``-5`` / ``−5`` / ``-$5`` / ``$-5``,
``5.0`` (== 5), ``18.`` at a sentence end (== 18), ``3/4`` and ``\\frac{3}{4}`` (exact
fractions), ``25%`` (compared as 25: GSM8K asks "what percent" and its golds are the number
before the sign), and any unit or word after the number (``18 eggs``, ``$1,200 per month``).
Values are compared exactly as rationals (``0.5`` == ``1/2``; ``0.33`` != ``1/3``).

**Lenient mode** (default): the answer format the prompt asked for (``answer_format``) is tried
first, then ``hash``, ``boxed``, ``answer_tag``, ``answer_is``; a marker whose span holds no
number is skipped; with no usable marker, the last number in the completion is the answer.

**Strict mode**: only the asked format counts (no other marker, no last-number fallback), and
its span must be a clean number: sign, ``$``, digits, commas, decimals, a fraction or ``%``,
an optional final period, nothing else (no units, no words).

**Multiple answers.** When the chosen span holds two or more different values and no ``=``
settles it (``18 or 20``, ``\\boxed{3, 4}``, ``between 5 and 6``), the completion is graded
wrong with failure ``multiple_answers`` even when the gold is among them: hedging is not an
answer. Repeated equal values (``18 (18 eggs)``) are one answer.

**Grade fields.** ``correct`` (numeric match in this mode); ``extracted`` (the answer text that
was compared, or None); ``strict_final_line`` (the last non-empty line is exactly a clean answer
line of the asked format, e.g. ``#### 18``; independent of ``mode``); ``trailing_text``
(non-whitespace text other than closing punctuation follows the chosen answer span);
``failure``: None when correct, else ``multiple_answers``, ``format_only`` (strict mode only:
the lenient reading of the same completion is correct, so only the format failed),
``no_answer`` (nothing to compare), or ``wrong_value``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

POLICY_VERSION = "gsm8k-grade/1"

Mode = Literal["lenient", "strict"]
AnswerFormat = Literal["hash", "boxed", "answer_tag", "answer_is"]
Failure = Literal["no_answer", "format_only", "wrong_value", "multiple_answers"]

MODES: tuple[str, ...] = ("lenient", "strict")
ANSWER_FORMATS: tuple[str, ...] = ("hash", "boxed", "answer_tag", "answer_is")
FAILURES: tuple[str, ...] = ("no_answer", "format_only", "wrong_value", "multiple_answers")

# the instruction a prompt adds for each answer format (used by the eval and prompt oracles)
FORMAT_INSTRUCTIONS: dict[str, str] = {
    "hash": "Solve the problem step by step. End with a final line of the form '#### <number>'.",
    "boxed": "Solve the problem step by step. Put the final number in \\boxed{}.",
    "answer_tag": "Solve the problem step by step. Give the final number as <answer>number</answer>.",
    "answer_is": "Solve the problem step by step. End with 'The answer is <number>.'",
}


class GoldError(ValueError):
    """The gold answer is not a number this policy can read (bad data, not a bad completion)."""


@dataclass(frozen=True, slots=True)
class Grade:
    """The verdict on one completion. ``failure`` is None exactly when ``correct``."""

    correct: bool
    extracted: str | None  # the answer text compared with the gold (None: nothing found)
    strict_final_line: bool  # last non-empty line is a clean answer line of the asked format
    trailing_text: bool  # text follows the answer span
    failure: Failure | None
    source: str | None = None  # which rule produced `extracted`: hash, boxed, ..., last_number
    value: Fraction | None = None  # the parsed value of `extracted` (None: none or several)


# ----------------------------------------------------------------------------- numbers

_MINUS = "-−–"  # ASCII hyphen-minus, U+2212 minus, U+2013 en dash (models emit all three)
_NUM_RE = re.compile(
    r"(?<![\w./^])"  # not inside a word, a decimal, a fraction or an exponent (m^2)
    r"(?P<cur1>\$\s?)?"
    r"(?P<sign>[-−–]\s?)?"
    r"(?P<cur2>\$\s?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s?/\s?(?P<den>\d+)(?![\d.]))?"
    r"(?P<pct>\s?%)?"
)
# a span that is nothing but one number (strict mode, strict final line)
_CLEAN_NUM_RE = re.compile(
    r"^\s*\$?\s?[-−–]?\s?\$?\s?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:\s?/\s?\d+)?\s?%?\.?\s*$"
)
_HASH_RE = re.compile(r"####[ \t]*([^\n]*)")
_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_IS_RE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)[*_]*\s*(?:is|was|would\s+be|will\s+be|=|:)(?:\s*:)?[*_]*[ \t]*",
    re.IGNORECASE,
)
_SENTENCE_END_RE = re.compile(r"\.(?:\s|$)|;|\n|\s(?:because|since|as|so|which)\s", re.IGNORECASE)
_PAREN_RE = re.compile(r"\([^()]*\)")
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_LATEX_WRAP_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_CLOSERS = " \t\r\n.!*_$)]}>\"'`"


def _clean_latex(span: str) -> str:
    """Unwrap the LaTeX that models put around numbers; leave everything else alone."""
    if "\\" not in span and "{" not in span:
        return span
    out = span.replace("{,}", ",").replace("\\,", "").replace("\\!", "").replace("\\ ", " ")
    out = out.replace("\\$", "$").replace("\\%", "%").replace("\\left", "").replace("\\right", "")
    out = out.replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/")
    out = out.replace("\\(", " ").replace("\\)", " ").replace("\\[", " ").replace("\\]", " ")
    for _ in range(3):  # nested wrappers: \text{\textbf{18}}
        new = _LATEX_WRAP_RE.sub(r"\1", out)
        if new == out:
            break
        out = new
    out = _FRAC_RE.sub(r"\1/\2", out)
    out = re.sub(r"\\boxed\s*\{([^{}]*)\}", r"\1", out)
    return out


_MATH_WRAP_RE = re.compile(r"^\s*(?:\$\$?|\\\(|\\\[)\s*(.*?)\s*(?:\$\$?|\\\)|\\\])\s*(\.?)\s*$", re.DOTALL)


def _unwrap_math(span: str) -> str:
    """``$18$`` / ``\\(18\\)`` -> ``18`` (a span wholly inside math delimiters)."""
    m = _MATH_WRAP_RE.match(span)
    if m and "$" not in m.group(1):
        return m.group(1) + m.group(2)
    return span


def _is_clean(span: str) -> bool:
    """Strict mode: the span is one number and nothing else (see the policy)."""
    return bool(_CLEAN_NUM_RE.match(_clean_latex(_unwrap_math(span))))


def _to_value(m: re.Match[str]) -> Fraction:
    digits = m.group("int").replace(",", "")
    whole, _, frac = digits.partition(".")
    # exact decimal -> rational without Fraction's (slow) string parser
    value = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    den = m.group("den")
    if den is not None:
        d = int(den)
        value = value / d if d != 0 else value  # "5/0" is read as 5 (division by zero never gold)
    if m.group("sign"):
        value = -value
    return value


def parse_number(text: str) -> Fraction | None:
    """The value of the first number in ``text`` (policy rules), or None."""
    m = _NUM_RE.search(_clean_latex(text))
    return _to_value(m) if m else None


def parse_gold(gold: str | int | float) -> Fraction:
    """Read a gold answer: a number, or a GSM8K solution ending in ``#### <number>``."""
    if isinstance(gold, str):
        return _parse_gold_text(gold)
    if isinstance(gold, bool):
        raise GoldError(f"gold answer {gold!r} is a boolean, not a number")
    if isinstance(gold, int):
        return Fraction(gold)
    if isinstance(gold, float):
        return Fraction(str(gold))
    raise GoldError(f"gold answer must be a string or a number, got {type(gold).__name__}")


@functools.lru_cache(maxsize=65536)
def _parse_gold_text(gold: str) -> Fraction:
    text = gold.rsplit("####", 1)[-1] if "####" in gold else gold
    text = text.strip()
    values = [_to_value(m) for m in _NUM_RE.finditer(_clean_latex(text))]
    if not values:
        raise GoldError(f"gold answer {text[:80]!r} holds no number")
    if len(set(values)) > 1:
        raise GoldError(f"gold answer {text[:80]!r} holds several different numbers")
    return values[0]


def format_value(value: Fraction) -> str:
    """Canonical text of a value: ``18``, ``-2.5``, ``1/3``."""
    if value.denominator == 1:
        return str(value.numerator)
    as_float = float(value)
    if Fraction(repr(as_float)) == value:
        return repr(as_float)
    return f"{value.numerator}/{value.denominator}"


# ----------------------------------------------------------------------------- spans


@dataclass(frozen=True, slots=True)
class _Span:
    source: str  # hash, boxed, answer_tag, answer_is, last_number
    text: str  # the raw answer text
    end: int  # offset in the completion just after the span (and its closing marker)


def _hash_spans(completion: str) -> list[_Span]:
    return [_Span("hash", m.group(1), m.end()) for m in _HASH_RE.finditer(completion)]


def _boxed_spans(completion: str) -> list[_Span]:
    spans = []
    for m in _BOXED_RE.finditer(completion):
        depth, i = 1, m.end()
        while i < len(completion) and depth:
            ch = completion[i]
            depth += (ch == "{") - (ch == "}")
            i += 1
        if depth == 0:
            spans.append(_Span("boxed", completion[m.end() : i - 1], i))
    return spans


def _tag_spans(completion: str) -> list[_Span]:
    return [_Span("answer_tag", m.group(1), m.end()) for m in _TAG_RE.finditer(completion)]


def _answer_is_spans(completion: str) -> list[_Span]:
    spans = []
    for m in _ANSWER_IS_RE.finditer(completion):
        rest = completion[m.end() :]
        # skip an empty remainder of the line ("Final answer:\n18" reads the next line)
        lead = len(rest) - len(rest.lstrip(" \t"))
        if rest[lead : lead + 1] == "\n":
            nxt = rest[lead + 1 :]
            lead += 1 + len(nxt) - len(nxt.lstrip(" \t\n"))
        body = rest[lead:]
        # a decimal point is not a sentence end: only cut at ". " / ".\n" / end
        cut = _SENTENCE_END_RE.search(body)
        stop = cut.start() if cut else len(body)
        spans.append(_Span("answer_is", body[:stop], m.end() + lead + stop))
    return spans


_FINDERS = {
    "hash": (_hash_spans, 0),  # index of the occurrence that counts: first
    "boxed": (_boxed_spans, -1),  # last
    "answer_tag": (_tag_spans, -1),
    "answer_is": (_answer_is_spans, -1),
}


def _span_values(span: str) -> list[Fraction]:
    """Numbers of an answer span after the policy's clean-up (see module docstring)."""
    text = _clean_latex(_unwrap_math(span))
    if "=" in text:
        text = text.rsplit("=", 1)[1]
    without_asides = _PAREN_RE.sub(" ", text)
    if _NUM_RE.search(without_asides):
        text = without_asides
    return [_to_value(m) for m in _NUM_RE.finditer(text)]


def _pick(completion: str, kind: str) -> tuple[_Span, list[Fraction]] | None:
    finder, which = _FINDERS[kind]
    spans = finder(completion)
    if not spans:
        return None
    if which == 0:
        ordered = spans
    else:
        ordered = list(reversed(spans))
    for span in ordered:
        values = _span_values(span.text)
        if values:
            return span, values
    return ordered[0], []


def _last_number(completion: str) -> tuple[_Span, list[Fraction]] | None:
    last = None
    for last in _NUM_RE.finditer(_clean_latex(completion)):  # noqa: B007 - we want the last match
        pass
    if last is None:
        return None
    # offsets refer to the cleaned text; trailing text is judged on the cleaned text too
    return _Span("last_number", last.group(0), -1), [_to_value(last)]


def _trailing(completion: str, span: _Span) -> bool:
    if span.source == "last_number":
        return False
    rest = completion[span.end :]
    rest = re.sub(r"</answer>|\\\]|\\\)|\$\$", " ", rest)
    return bool(rest.strip(_CLOSERS))


_FINAL_LINE_RES: dict[str, re.Pattern[str]] = {
    "hash": re.compile(r"^\s*####\s*(?P<n>.+?)\s*$"),
    "boxed": re.compile(
        r"^\s*(?:\*\*)?(?:final answer\s*:?\s*)?(?:\*\*)?\s*(?:\$\$?|\\\[|\\\()?\s*\\boxed\{(?P<n>[^{}]*)\}\s*(?:\$\$?|\\\]|\\\))?\s*\.?\s*$",
        re.IGNORECASE,
    ),
    "answer_tag": re.compile(r"^\s*<answer>\s*(?P<n>[^<]*?)\s*</answer>\s*$", re.IGNORECASE),
    "answer_is": re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*(?P<n>.+?)\s*$", re.IGNORECASE),
}


def _strict_final_line(completion: str, answer_format: str) -> bool:
    lines = [line for line in completion.splitlines() if line.strip()]
    if not lines:
        return False
    m = _FINAL_LINE_RES[answer_format].match(lines[-1])
    if m is None:
        return False
    return _is_clean(m.group("n"))


# ----------------------------------------------------------------------------- grade


def _extract(completion: str, mode: str, answer_format: str) -> tuple[_Span, list[Fraction]] | None:
    if mode == "strict":
        return _pick(completion, answer_format)
    order = [answer_format, *(k for k in ANSWER_FORMATS if k != answer_format)]
    empty: tuple[_Span, list[Fraction]] | None = None
    for kind in order:
        found = _pick(completion, kind)
        if found is None:
            continue
        if found[1]:
            return found
        empty = empty or found
    return _last_number(completion) or empty


def _judge(completion: str, gold_value: Fraction, mode: str, answer_format: str) -> tuple[bool, Failure | None, _Span | None, Fraction | None]:
    found = _extract(completion, mode, answer_format)
    if found is None:
        return False, "no_answer", None, None
    span, values = found
    distinct = set(values)
    if not distinct:
        return False, "no_answer", span, None
    if len(distinct) > 1:
        return False, "multiple_answers", span, None
    value = values[0]
    if mode == "strict" and not _is_clean(span.text):
        return False, "wrong_value", span, value  # refined to format_only by the caller
    if value == gold_value:
        return True, None, span, value
    return False, "wrong_value", span, value


def grade(
    completion: str,
    gold: str | int | float,
    mode: Mode | str = "lenient",
    *,
    answer_format: AnswerFormat | str = "hash",
) -> Grade:
    """Grade one completion against a gold answer under policy :data:`POLICY_VERSION`.

    ``gold`` is a number or a GSM8K solution ending in ``#### N``; ``answer_format`` is the
    format the prompt asked for (it decides ``strict_final_line`` and what strict mode reads).
    Raises :class:`GoldError` for an unreadable gold and ValueError for an unknown mode/format.
    """
    if mode not in MODES:
        raise ValueError(f"unknown grading mode {mode!r}; expected one of {', '.join(MODES)}")
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"unknown answer format {answer_format!r}; expected one of {', '.join(ANSWER_FORMATS)}")
    if not isinstance(completion, str):
        raise TypeError(f"completion must be a string, got {type(completion).__name__}")
    gold_value = parse_gold(gold)
    correct, failure, span, value = _judge(completion, gold_value, mode, answer_format)
    if mode == "strict" and not correct:
        lenient_ok, _, _, _ = _judge(completion, gold_value, "lenient", answer_format)
        if lenient_ok:
            failure = "format_only"
    extracted = None if span is None else span.text.strip()
    return Grade(
        correct=correct,
        extracted=extracted if extracted else None,
        strict_final_line=_strict_final_line(completion, answer_format),
        trailing_text=False if span is None else _trailing(completion, span),
        failure=None if correct else failure,
        source=None if span is None else span.source,
        value=value,
    )


def is_correct(completion: str, gold: str | int | float, mode: Mode | str = "lenient") -> bool:
    """Shorthand for ``grade(...).correct`` (the GRPO reward of the baseline recipe)."""
    return grade(completion, gold, mode).correct


__all__ = [
    "ANSWER_FORMATS",
    "FAILURES",
    "FORMAT_INSTRUCTIONS",
    "MODES",
    "POLICY_VERSION",
    "GoldError",
    "Grade",
    "format_value",
    "grade",
    "is_correct",
    "parse_gold",
    "parse_number",
]
