"""GSM8K answer grading: a documented, versioned policy (``POLICY_VERSION``), pure Python.

Why this module exists: every GSM8K number RRMA reports (the eval bench, the recipe oracle's
held-out score, the prompt oracle, the GRPO reward of the baseline recipe) goes through
:func:`grade`, so "correct" means one thing everywhere and changes only with a version bump.

Invariant: :func:`grade` is a pure function of ``(completion, gold, mode, answer_format)``; it
never raises on a completion (any string is gradable) and raises :class:`GoldError` only for a
gold answer that is not a number. It is fast (regular expressions, no sympy): ~5 x 10^4
completions per second on one core (``benches/perf/bench_gsm8k.py``).

Policy ``gsm8k-grade/2`` (docs/gsm8k.md has the same rules with examples)
------------------------------------------------------------------------
**What is read.** Reasoning blocks (``<think>...</think>``; an unclosed ``<think>`` hides the
rest, a lone ``</think>`` hides what comes before it) are not graded. The text ends at the first
end-of-text token a model leaked (``</s>``, ``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``,
``<|end|>``) and at the first line starting ``Question:`` or ``Q:`` that follows an answer (a
base model going on with the next few-shot question: lm-eval's stop sequences); what was cut
is trailing text.

**Gold.** The text after the last ``####`` of a GSM8K answer, or the whole string when there is
none; thousands commas and ``$`` are dropped; it must parse as a number.

**Answer spans.** The completion is searched for these answer markers:

==============  ==============================================  =============================
kind            matches                                         which occurrence counts
==============  ==============================================  =============================
``hash``        ``#### <span>`` (to the end of the line) whose  the last (all of them must
                span starts with a number; ``#### Step 1: ...``  agree: see conflicts)
                and ``#### 1. Eggs`` are markdown headings
``boxed``       ``\\boxed{<span>}`` / ``\\fbox{}`` (braces      the last (MATH convention)
                matched)
``answer_tag``  ``<answer><span></answer>``                     the last
``answer_is``   "the answer is", "final answer:", "answer =",   the last (a later statement
                "Answer:" (whole words, any case, ``**``; not   corrects an earlier one)
                "the answer is not"/"isn't")
==============  ==============================================  =============================

A heading that holds an answer phrase (``#### Final answer: 18``) is read from the phrase on. The
span of ``answer_is`` ends at the end of its sentence (". ", ";", " because ", " since ", " as ",
" so ", " which ") or line. Inside a span: LaTeX wrappers (``\\text{}``, ``\\$``, ``\\,``,
``\\!``, ``{,}``, ``\\frac``, ``\\%``) are unwrapped, digit groups separated by spaces
(``1 000``) are one number, parenthesised asides are dropped, and when the span holds an ``=``
the number after the last ``=`` is the answer (``3 + 4 = 7``).

**Numbers.** ``1,234.5`` (thousands commas), ``$18``, ``-5`` / ``−5`` / ``-$5`` / ``$-5``,
``5.0`` (== 5), ``18.`` at a sentence end (== 18), ``3/4`` and ``\\frac{3}{4}`` (exact
fractions), ``25%`` (compared as 25: GSM8K asks "what percent" and its golds are the number
before the sign), and any unit or word after the number (``18 eggs``, ``$1,200 per month``).
Ordinals (``2nd``, ``4th``) are not numbers. Values are compared exactly as rationals (``0.5``
== ``1/2``; ``0.33`` != ``1/3``).

**Lenient mode** (default): the answer format the prompt asked for (``answer_format``) is tried
first, then ``hash``, ``boxed``, ``answer_tag``, ``answer_is``; a marker whose span holds no
number is skipped; with no usable marker, the last number in the completion is the answer.

**Strict mode**: only the asked format counts (no other marker, no last-number fallback), and
its span must be a clean number: sign, ``$``, digits, commas, decimals, a fraction or ``%``,
an optional final period, nothing else (no units, no words).

**Multiple answers.** When the chosen span holds two or more different values and no ``=``
settles it (``18 or 20``, ``\\boxed{3, 4}``, ``between 5 and 6``), the completion is graded
wrong with failure ``multiple_answers`` even when the gold is among them: hedging is not an
answer. Repeated equal values (``18 (18 eggs)``) are one answer, and so is one quantity restated
in another unit (``90 minutes, or 1.5 hours``: each number followed by a different unit word,
joined by ``,``/``or``/``i.e.``/``=``): it is correct when the gold is one of its values.

**Conflicting answers.** Final-answer lines are ``#### N`` answers and lines that are nothing
but an answer statement (``\\boxed{N}``, ``<answer>N</answer>``, ``The answer is N.``,
``Final answer: N``, with an optional "So"/"Thus"/"Therefore"). When they hold two or more
different values the completion is wrong with failure ``conflicting_answers`` (a hedge across
lines), in both modes.

**Grade fields.** ``correct`` (numeric match in this mode); ``extracted`` (the answer text that
was compared, or None); ``strict_final_line`` (the last non-empty line of the graded text is
exactly a clean answer line of the asked format, e.g. ``#### 18``; independent of ``mode``);
``trailing_text`` (non-whitespace text other than closing punctuation follows the chosen answer
span, or a continuation was cut); ``failure``: None when correct, else ``conflicting_answers``,
``multiple_answers``, ``format_only`` (strict mode only: the lenient reading of the same
completion is correct, so only the format failed), ``no_answer`` (nothing to compare), or
``wrong_value``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

POLICY_VERSION = "gsm8k-grade/2"

Mode = Literal["lenient", "strict"]
AnswerFormat = Literal["hash", "boxed", "answer_tag", "answer_is"]
Failure = Literal["no_answer", "format_only", "wrong_value", "multiple_answers", "conflicting_answers"]

MODES: tuple[str, ...] = ("lenient", "strict")
ANSWER_FORMATS: tuple[str, ...] = ("hash", "boxed", "answer_tag", "answer_is")
FAILURES: tuple[str, ...] = ("no_answer", "format_only", "wrong_value", "multiple_answers", "conflicting_answers")

# the instruction a prompt adds for each answer format (used by the eval and prompt oracles)
FORMAT_INSTRUCTIONS: dict[str, str] = {
    "hash": "Solve the problem step by step. End with a final line of the form '#### <number>'.",
    "boxed": "Solve the problem step by step. Put the final number in \\boxed{}.",
    "answer_tag": "Solve the problem step by step. Give the final number as <answer>number</answer>.",
    "answer_is": "Solve the problem step by step. End with 'The answer is <number>.'",
}

# Where generation stops (lm-eval's GSM8K tasks stop at "Question:", "</s>" and "<|im_end|>"). The
# leading newline keeps a chat model that restates the question on its first line from being cut
# to nothing; the special tokens are the end-of-turn markers of common chat templates.
STOP_SEQUENCES: tuple[str, ...] = ("\nQuestion:", "</s>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>")


class GoldError(ValueError):
    """The gold answer is not a number this policy can read (bad data, not a bad completion)."""


@dataclass(frozen=True, slots=True)
class Grade:
    """The verdict on one completion. ``failure`` is None exactly when ``correct``."""

    correct: bool
    extracted: str | None  # the answer text compared with the gold (None: nothing found)
    strict_final_line: bool  # last non-empty line is a clean answer line of the asked format
    trailing_text: bool  # text follows the answer span (or a continuation was cut)
    failure: Failure | None
    source: str | None = None  # which rule produced `extracted`: hash, boxed, ..., last_number
    value: Fraction | None = None  # the parsed value of `extracted` (None: none or several)


def truncate_at_stop(text: str, stop: tuple[str, ...] | list[str] = STOP_SEQUENCES) -> str:
    """``text`` up to the first stop sequence (how the generation backends end a completion)."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s, 0, cut)
            if i != -1:
                cut = i
    return text[:cut]


# ----------------------------------------------------------------------------- numbers

_NUM_RE = re.compile(
    r"(?<![\w./^])"  # not inside a word, a decimal, a fraction or an exponent (m^2)
    r"(?P<cur1>\$\s?)?"
    r"(?P<sign>[-−–]\s?)?"
    r"(?P<cur2>\$\s?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?!\d|(?:st|nd|rd|th)\b)"  # whole numbers only, and not an ordinal (2nd, 4th)
    r"(?:\s?/\s?(?P<den>\d+)(?![\d.]))?"
    r"(?P<pct>\s?%)?"
)
# a span that is nothing but one number (strict mode, strict final line)
_CLEAN_NUM_RE = re.compile(
    r"^\s*\$?\s?[-−–]?\s?\$?\s?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:\s?/\s?\d+)?\s?%?\.?\s*$"
)
# digit groups separated by spaces (SI style, "1 000 000"): one number inside an answer span
_SPACE_GROUPS_RE = re.compile(r"(?<![\d.,])(\d{1,3})((?:[ \u00a0\u2009\u202f]\d{3})+)(?![\d.,\-])")
_HASH_RE = re.compile(r"####[ \t]*([^\n]*)")
# a markdown heading that starts with a number: "1. Eggs left", "2) Money", "3: Total"
_ENUM_HEADING_RE = re.compile(r"\d+[.):]\s+[^\W\d_]")
_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_IS_RE = re.compile(
    r"\b(?:final\s+answer|the\s+answer|answer)[*_]*\s*(?:is|was|would\s+be|will\s+be|=|:)(?![\w'’])"
    r"(?:\s*:)?[*_]*[ \t]*",
    re.IGNORECASE,
)
_NEGATION_RE = re.compile(r"(?:not|never|no\s+longer)\b", re.IGNORECASE)
# "18, not 20": what the answer is not is no second value
_NOT_CLAUSE_RE = re.compile(r"(?:,\s*|\s)(?:not|rather\s+than|instead\s+of)\s+[^,;]*", re.IGNORECASE)
_SENTENCE_END_RE = re.compile(r"\.(?:\s|$)|;|\n|\s(?:because|since|as|so|which)\s", re.IGNORECASE)
_PAREN_RE = re.compile(r"\([^()]*\)")
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_LATEX_WRAP_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_LATEX_GROUP_COMMA_RE = re.compile(r",\s*\\[!,;:]\s*")  # 32,\! 349 and 32,\, 349: a thousands comma
_CLOSERS = " \t\r\n.!*_$)]}>\"'`"
_TAIL_CHARS = 240  # the last-number fallback reads the lines of the last this-many characters first
_END_TOKEN_RE = re.compile(r"</s>|<\|(?:im_end|endoftext|eot_id|end)\|>")
_CONTINUATION_RE = re.compile(r"^[ \t]*(?:Question|Q)[ \t]*:", re.MULTILINE)
_THINK_OPEN_RE = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE_RE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)


def _clean_latex(span: str) -> str:
    """Unwrap the LaTeX that models put around numbers; leave everything else alone."""
    if "\\" not in span and "{" not in span:
        return span
    out = _LATEX_GROUP_COMMA_RE.sub(",", span) if ",\\" in span or ", \\" in span else span
    out = out.replace("{,}", ",").replace("\\,", "").replace("\\!", "").replace("\\ ", " ")
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
    if "$" not in span and "\\" not in span:
        return span
    m = _MATH_WRAP_RE.match(span)
    if m and "$" not in m.group(1):
        return m.group(1) + m.group(2)
    return span


def _is_clean(span: str) -> bool:
    """Strict mode: the span is one number and nothing else (see the policy)."""
    return bool(_CLEAN_NUM_RE.match(_clean_latex(_unwrap_math(span))))


def _to_value(m: re.Match[str]) -> Fraction:
    digits = m.group("int").replace(",", "")
    if "." in digits:
        whole, _, frac = digits.partition(".")
        # exact decimal -> rational without Fraction's (slow) string parser
        value = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac), 10 ** len(frac))
    else:
        value = Fraction(int(digits))  # an integer: no gcd to take (most answers)
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


# ----------------------------------------------------------------------------- what is graded


def _visible(completion: str) -> tuple[str, bool]:
    """The text that is graded, and whether a continuation (non-empty) was cut off its end."""
    text = completion
    if ("hink" in text or "HINK" in text) and (_THINK_CLOSE_RE.search(text) or _THINK_OPEN_RE.search(text)):
        closes = list(_THINK_CLOSE_RE.finditer(text))
        if closes:  # what follows the last close; an opening tag before it (or none: the template had it)
            text = text[closes[-1].end() :]
        opened = _THINK_OPEN_RE.search(text)
        if opened:  # an unclosed block: the model was still thinking when it stopped
            text = text[: opened.start()]
    cut = False
    if "</s>" in text or "<|" in text:
        end = _END_TOKEN_RE.search(text)
        if end:
            cut = bool(text[end.end() :].strip())
            text = text[: end.start()]
    if "Q" in text and ("Question" in text or "Q:" in text):
        for m in _CONTINUATION_RE.finditer(text):
            if m.start() == 0:
                continue
            head = text[: m.start()]
            if _has_marked_answer(head):  # a base model going on with the next few-shot question
                cut = cut or bool(text[m.start() :].strip())
                text = head
                break
    return text, cut


def _has_marked_answer(text: str) -> bool:
    """Whether ``text`` holds an answer marker (``####`` answer, box, tag or answer phrase) with a number."""
    for kind in ANSWER_FORMATS:
        found = _pick(text, kind)
        if found is not None and found[1]:
            return True
    return False


# ----------------------------------------------------------------------------- spans


@dataclass(frozen=True, slots=True)
class _Span:
    source: str  # hash, boxed, answer_tag, answer_is, last_number
    text: str  # the raw answer text
    end: int  # offset in the graded text just after the span (and its closing marker)


def _hash_spans(text: str) -> list[_Span]:
    """``####`` answer spans; markdown headings (``#### Step 1: ...``, ``#### 1. Eggs``) are skipped."""
    spans = []
    for m in _HASH_RE.finditer(text):
        body = m.group(1)
        lead = body.lstrip(" \t*_")
        if not lead:
            spans.append(_Span("hash", body, m.end()))
            continue
        first = lead[0]
        if first.isdigit() or first in "$-−–.\\{(+":
            if first.isdigit() and _ENUM_HEADING_RE.match(lead):
                continue  # a numbered heading
            spans.append(_Span("hash", body, m.end()))
            continue
        phrase = _ANSWER_IS_RE.search(body)  # "#### Final answer: 18" is read from the phrase on
        if phrase is not None and not _NEGATION_RE.match(body, phrase.end()):
            spans.append(_Span("hash", body[phrase.end() :], m.end()))
    return spans


def _boxed_spans(text: str) -> list[_Span]:
    spans = []
    for m in _BOXED_RE.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            ch = text[i]
            depth += (ch == "{") - (ch == "}")
            i += 1
        if depth == 0:
            spans.append(_Span("boxed", text[m.end() : i - 1], i))
    return spans


def _tag_spans(text: str) -> list[_Span]:
    return [_Span("answer_tag", m.group(1), m.end()) for m in _TAG_RE.finditer(text)]


def _answer_is_spans(text: str) -> list[_Span]:
    spans = []
    for m in _ANSWER_IS_RE.finditer(text):
        rest = text[m.end() :]
        # skip an empty remainder of the line ("Final answer:\n18" reads the next line)
        lead = len(rest) - len(rest.lstrip(" \t"))
        if rest[lead : lead + 1] == "\n":
            nxt = rest[lead + 1 :]
            lead += 1 + len(nxt) - len(nxt.lstrip(" \t\n"))
        body = rest[lead:]
        if _NEGATION_RE.match(body):
            continue  # "the answer is not 20" names what the answer is not
        # a decimal point is not a sentence end: only cut at ". " / ".\n" / end
        cut = _SENTENCE_END_RE.search(body)
        stop = cut.start() if cut else len(body)
        spans.append(_Span("answer_is", body[:stop], m.end() + lead + stop))
    return spans


_FINDERS = {"hash": _hash_spans, "boxed": _boxed_spans, "answer_tag": _tag_spans, "answer_is": _answer_is_spans}
# substrings a kind's marker cannot match without (checked with `in`, C-fast, before any regex)
_HINTS: dict[str, tuple[str, ...]] = {"hash": ("####",), "boxed": ("\\",), "answer_tag": ("<answer>", "<ANSWER>", "<Answer>"),
                                      "answer_is": ("nswer", "NSWER")}


def _span_text(span: str) -> str:
    """An answer span after the policy's clean-up: LaTeX, spaced digit groups, ``=`` and asides."""
    text = _clean_latex(_unwrap_math(span))
    if " " in text or "\u00a0" in text or "\u2009" in text or "\u202f" in text:
        text = _SPACE_GROUPS_RE.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), text)
    if "=" in text:
        text = text.rsplit("=", 1)[1]
    if "not" in text or "than" in text or "instead" in text:
        text = _NOT_CLAUSE_RE.sub(" ", text)
    if "(" in text:
        without_asides = _PAREN_RE.sub(" ", text)
        if _NUM_RE.search(without_asides):
            text = without_asides
    return text


def _span_values(span: str) -> list[Fraction]:
    """Numbers of an answer span after the policy's clean-up (see module docstring)."""
    if len(span) <= 120:  # short spans (" 18", "$1,200 per month") repeat across completions: cached
        return list(_short_span_values(span))
    return [_to_value(m) for m in _NUM_RE.finditer(_span_text(span))]


@functools.lru_cache(maxsize=16384)
def _short_span_values(span: str) -> tuple[Fraction, ...]:
    return tuple(_to_value(m) for m in _NUM_RE.finditer(_span_text(span)))


_UNIT_WORD_RE = re.compile(r"[ \t]?([^\W\d_]+)")
_RESTATE_JOIN_RE = re.compile(r"^\s*(?:,\s*)?(?:or\b|i\.e\.,?|that\s+is\b|which\s+is\b|=)?\s*$", re.IGNORECASE)


def _restatement(span: str) -> bool:
    """One quantity in several units: ``90 minutes, or 1.5 hours`` (each number has its own unit word)."""
    text = _span_text(span)
    matches = list(_NUM_RE.finditer(text))
    units = []
    for i, m in enumerate(matches):
        unit = _UNIT_WORD_RE.match(text, m.end())
        if unit is None:
            return False
        units.append(unit.group(1).lower())
        if i + 1 < len(matches) and not _RESTATE_JOIN_RE.match(text[unit.end() : matches[i + 1].start()]):
            return False
    return len(set(units)) == len(units)


def _pick(text: str, kind: str) -> tuple[_Span, list[Fraction]] | None:
    for hint in _HINTS[kind]:
        if hint in text:
            break
    else:
        return None
    spans = _FINDERS[kind](text)
    if not spans:
        return None
    for span in reversed(spans):
        values = _span_values(span.text)
        if values:
            return span, values
    return spans[-1], []


def _last_number(text: str) -> tuple[_Span, list[Fraction]] | None:
    last = None
    # numbers never span lines: scan from the start of one of the last lines (a long completion's
    # working is not scanned number by number), else the whole text
    cut = text.find("\n", max(0, len(text) - _TAIL_CHARS)) if len(text) > _TAIL_CHARS else -1
    if cut != -1:
        for last in _NUM_RE.finditer(_clean_latex(text[cut + 1 :])):  # noqa: B007 - we want the last match
            pass
    if last is None:
        for last in _NUM_RE.finditer(_clean_latex(text)):  # noqa: B007 - we want the last match
            pass
    if last is None:
        return None
    # offsets refer to the cleaned text; trailing text is judged on the cleaned text too
    return _Span("last_number", last.group(0), -1), [_to_value(last)]


def _trailing(text: str, span: _Span) -> bool:
    if span.source == "last_number":
        return False
    rest = text[span.end :]
    if not rest:
        return False
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


def _strict_final_line(text: str, answer_format: str) -> bool:
    end = len(text.rstrip())
    if end == 0:
        return False
    start = text.rfind("\n", 0, end) + 1
    m = _FINAL_LINE_RES[answer_format].match(text[start:end])
    return m is not None and _is_clean(m.group("n"))  # a heading ("#### Step 2: ...") is never a clean number


# ----------------------------------------------------------------------------- conflicting answers

_LEAD_IN = r"\s*[*_]*\s*(?:(?:so|thus|therefore|hence)\s*,?\s+)?(?:the\s+)?(?:final\s+)?"
# a line that is nothing but an answer statement, other than #### (each names one value)
_BARE_ANSWER_LINE_RES: tuple[re.Pattern[str], ...] = (
    re.compile(_LEAD_IN + r"(?:answer\s*(?:is|:)\s*[*_]*\s*:?\s*)?(?:\$\$?|\\\[|\\\()?\s*\\(?:boxed|fbox)\s*\{(?P<n>.*)\}"
               r"\s*(?:\$\$?|\\\]|\\\))?\s*[.!]?\s*[*_]*\s*$", re.IGNORECASE),
    re.compile(r"\s*<answer>(?P<n>.*?)</answer>\s*[.!]?\s*$", re.IGNORECASE),
    re.compile(_LEAD_IN + r"answer[*_]*\s*(?:is|:|=)(?![\w'’])\s*[*_]*\s*:?\s*(?P<n>(?!(?:not|never)\b).+?)\s*[.!]?\s*[*_]*\s*$",
               re.IGNORECASE),
)
_FINAL_TOKENS = ("####", "\\boxed", "\\fbox", "<answer>", "nswer", "NSWER")  # "answer", "Answer", "ANSWER"


def _one_value(span: str) -> Fraction | None:
    values = _span_values(span)
    if not values:
        return None
    if len(set(values)) > 1 and not _restatement(span):
        return None  # a hedge inside one line is multiple_answers, judged on the chosen span
    return values[0]


def _final_values(text: str) -> set[Fraction]:
    """The values of the final-answer lines (see the policy); more than one means a hedge."""
    # the lines holding a marker, found with str.find (C-fast; most completions name one answer)
    starts: set[int] = set()
    for token in _FINAL_TOKENS:
        i = text.find(token)
        while i != -1:
            starts.add(text.rfind("\n", 0, i) + 1)
            i = text.find(token, i + len(token))
    if len(starts) < 2:
        return set()
    values: set[Fraction] = set()
    for start in sorted(starts):
        end = text.find("\n", start)
        line = text[start : end if end != -1 else len(text)]
        spans = _hash_spans(line) if "####" in line else []
        for span in spans:
            value = _one_value(span.text)
            if value is not None:
                values.add(value)
        if spans or "####" in line:
            continue
        for pattern in _BARE_ANSWER_LINE_RES:
            m = pattern.match(line)
            if m is not None:
                value = _one_value(m.group("n"))
                if value is not None:
                    values.add(value)
                break
    return values


# ----------------------------------------------------------------------------- grade


def _extract(text: str, mode: str, answer_format: str) -> tuple[_Span, list[Fraction]] | None:
    if mode == "strict":
        return _pick(text, answer_format)
    order = [answer_format, *(k for k in ANSWER_FORMATS if k != answer_format)]
    empty: tuple[_Span, list[Fraction]] | None = None
    for kind in order:
        found = _pick(text, kind)
        if found is None:
            continue
        if found[1]:
            return found
        empty = empty or found
    return _last_number(text) or empty


def _judge(text: str, gold_value: Fraction, mode: str, answer_format: str,
           conflicting: bool) -> tuple[bool, Failure | None, _Span | None, Fraction | None]:
    found = _extract(text, mode, answer_format)
    if found is None:
        return False, ("conflicting_answers" if conflicting else "no_answer"), None, None
    span, values = found
    if conflicting:
        return False, "conflicting_answers", span, None
    distinct = set(values)
    if not distinct:
        return False, "no_answer", span, None
    value = values[0]
    if len(distinct) > 1:
        if span.source == "last_number" or not _restatement(span.text):
            return False, "multiple_answers", span, None
        if gold_value in distinct:  # one quantity in several units: any of its values is it
            value = gold_value
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
    text, cut = _visible(completion)
    conflicting = len(_final_values(text)) > 1
    correct, failure, span, value = _judge(text, gold_value, mode, answer_format, conflicting)
    if mode == "strict" and failure in ("no_answer", "wrong_value"):  # the other failures read the same span
        lenient_ok, _, _, _ = _judge(text, gold_value, "lenient", answer_format, conflicting)
        if lenient_ok:
            failure = "format_only"
    extracted = None if span is None else span.text.strip()
    return Grade(
        correct=correct,
        extracted=extracted if extracted else None,
        strict_final_line=_strict_final_line(text, answer_format),
        trailing_text=cut or (False if span is None else _trailing(text, span)),
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
    "STOP_SEQUENCES",
    "GoldError",
    "Grade",
    "format_value",
    "grade",
    "is_correct",
    "parse_gold",
    "parse_number",
    "truncate_at_stop",
]
