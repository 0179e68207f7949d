"""Text as the audit's rules read it: one spelling for what looks the same, and numbers in every written form.

Why it exists: an agent's claim ``loss 0.0003`` reads the same to a reviewer when the ``o`` is Cyrillic, a
zero-width space splits the word, the digits are fullwidth, the number is ``3·10⁻⁴`` or ``.0003``, or the
pair sits in a markdown table. The rules match words and numbers, so they read the text after
:func:`fold` (one code point per look-alike) and :func:`flatten` (tables, code fences, HTML and emphasis
turned into plain ``key: value`` lines), and find numbers with :func:`numbers`.

Invariant: every character of the folded text remembers the span of the original text it came from
(:class:`Folded`), so a finding quotes what the agent wrote, not what the auditor made of it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

# removed: zero-width characters, joiners, soft hyphen, bidi controls, variation selectors, tag characters
INVISIBLE = frozenset(
    [0x00AD, 0x034F, 0x061C, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0x2061, 0x2062, 0x2063,
     0x2064, 0xFEFF, *range(0x202A, 0x202F), *range(0x2066, 0x206A), *range(0xFE00, 0xFE10), *range(0xE0000, 0xE0080)])

# Latin look-alikes NFKD leaves alone (Cyrillic, Greek, Armenian, Latin letters of other alphabets; UTS #39 prototypes)
CONFUSABLES: dict[str, str] = {
    **dict(zip("асеһіјӏорԛѕԝхуԁүɡ", "aceh ijlopqswxydyg".replace(" ", ""), strict=True)),
    **dict(zip("АВСЕНІЈКМОРЅТХУҮԌ", "ABCEHIJKMOPSTXYYG", strict=True)),
    **dict(zip("αβοριυχϲϳκνγεΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹ", "aBopiuxcjkvyeABEZHIKMNOPTYXC", strict=True)),
    **dict(zip("օսզհ", "ouqh", strict=True)),
    **dict(zip("ıɑɩǀℓⅼ", "iailll", strict=True)),
    "\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2043": "-",
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"',
    "\u22c5": "·", "\u2219": "·", "\u2715": "×", "\u2716": "×",
}
SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+", strict=True))


@dataclass(frozen=True, slots=True)
class Folded:
    """Normalised text and, per character, the span of the original it stands for."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    source: str

    def original(self, start: int, end: int) -> str:
        """The original text behind ``text[start:end]``."""
        if start >= end or not self.starts:
            return ""
        return self.source[self.starts[start]:self.ends[end - 1]]


class _Builder:
    """A Folded under construction, in chunks (a slice of the source is copied whole, not character by character)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.chars: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, text: str, start: int, end: int) -> None:
        """``text``, standing for ``source[start:end]``."""
        if text:
            self.chars.append(text)
            self.starts.extend([start] * len(text))
            self.ends.extend([end] * len(text))

    def copy(self, folded: Folded | None, a: int, b: int) -> None:
        """Characters ``a:b`` of ``folded`` (of the source itself when None), with their spans."""
        if a >= b:
            return
        if folded is None:
            self.chars.append(self.source[a:b])
            self.starts.extend(range(a, b))
            self.ends.extend(range(a + 1, b + 1))
        else:
            self.chars.append(folded.text[a:b])
            self.starts.extend(folded.starts[a:b])
            self.ends.extend(folded.ends[a:b])

    def last(self) -> str:
        return next((c[-1] for c in reversed(self.chars) if c), "")

    def done(self) -> Folded:
        return Folded("".join(self.chars), tuple(self.starts), tuple(self.ends), self.source)


def fold_char(ch: str) -> str:
    """One character as the rules read it: look-alikes to their Latin letter, compatibility forms (fullwidth,
    mathematical alphanumerics, ligatures) to their plain form, any decimal digit to its ASCII digit, combining
    marks and invisible characters dropped."""
    if ord(ch) in INVISIBLE:
        return ""
    if ch in CONFUSABLES:
        return CONFUSABLES[ch]
    if ch.isascii():
        return ch
    digit = unicodedata.decimal(ch, None)
    if digit is not None:
        return str(digit)
    out = []
    for part in unicodedata.normalize("NFKD", ch):
        if unicodedata.category(part) == "Mn" or ord(part) in INVISIBLE:
            continue
        out.append(CONFUSABLES.get(part, part))
    text = "".join(out)
    return text if text.strip() or not ch.isspace() else " "


NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def fold(text: str) -> Folded:
    """The text with look-alikes folded, invisible characters dropped and superscript exponents written ``^-4``."""
    if text.isascii():
        return Folded(text, tuple(range(len(text))), tuple(range(1, len(text) + 1)), text)
    out = _Builder(text)
    at = 0
    for run in NON_ASCII.finditer(text):
        out.copy(None, at, run.start())  # ASCII: itself
        i, end = run.start(), run.end()
        while i < end:
            ch = text[i]
            if ch in SUPERSCRIPTS and (out.last().isdigit() or out.last() == "^"):
                j = i
                while j < end and text[j] in SUPERSCRIPTS:
                    j += 1
                if out.last() != "^":
                    out.add("^", i, j)
                out.add("".join(SUPERSCRIPTS[c] for c in text[i:j]), i, j)
                i = j
                continue
            out.add(fold_char(ch), i, i + 1)
            i += 1
        at = end
    out.copy(None, at, len(text))
    return out.done()


# ----------------------------------------------------------------------------- markdown and markup

FENCE = re.compile(r"^\s*(```|~~~)")
TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
TAG = re.compile(r"<[^<>\n]{1,80}>")
EMPHASIS = re.compile(r"(?<![\d\s])\*\*|\*\*(?!\s*[-+(]?\d)|__|~~|`|(?<![\w*])\*(?=[^\s*])|(?<=[^\s*])(?<!\d)\*(?![\w*])")


def _cells(line: str) -> list[tuple[int, int]]:
    """The (start, end) of each cell of a table row, stripped; the outer pipes are not cells."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in re.finditer(r"\|", line + "|"):
        a, b = start, m.start()
        while a < b and line[a].isspace():
            a += 1
        while b > a and line[b - 1].isspace():
            b -= 1
        spans.append((a, b))
        start = m.end()
    if line.strip().startswith("|") and spans and spans[0][0] == spans[0][1]:
        spans = spans[1:]
    if line.strip().endswith("|") and spans and spans[-1][0] == spans[-1][1]:
        spans = spans[:-1]
    return spans


def flatten(folded: Folded) -> Folded:
    """Markup as plain lines: fences dropped, HTML tags and emphasis marks blanked, and each table row as one line
    per value cell, ``<row label> <column header>: <value>``, so the rules read a table as they read prose."""
    text = folded.text
    out = _Builder(folded.source)

    def keep(a: int, b: int) -> None:
        out.copy(folded, a, b)

    def blank(piece: str, at: int) -> None:
        out.add(piece, folded.starts[at] if folded.starts else 0, folded.ends[at] if folded.ends else 0)

    lines: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        lines.append((pos, pos + len(line)))
        pos += len(line) + 1
    headers: list[tuple[int, int]] | None = None  # the header row's cells (their spans in the folded text)
    for n, (a, b) in enumerate(lines):
        line = text[a:b]
        is_row = line.count("|") >= 2 or (line.count("|") == 1 and not line.strip().startswith("|")
                                           and " | " in line)
        if FENCE.match(line) or (TABLE_SEPARATOR.match(line) and "-" in line):
            if a < b:
                blank("\n", a)
            continue
        if not is_row:
            headers = None
            _plain(text, a, b, keep, blank)
            if n < len(lines) - 1:
                blank("\n", b if b < len(text) else a)
            continue
        spans = [(a + x, a + y) for x, y in _cells(line)]
        nxt = text[lines[n + 1][0]:lines[n + 1][1]] if n + 1 < len(lines) else ""
        if TABLE_SEPARATOR.match(nxt) and "-" in nxt:
            headers = spans
        for j, (x, y) in enumerate(spans):  # label header: value, one line per value cell
            if j == 0 and len(spans) > 1:
                continue
            label = spans[0] if len(spans) > 1 else None
            if label is not None:
                _plain(text, label[0], label[1], keep, blank)
            header = headers[j] if headers is not None and j < len(headers) and headers[j] != (x, y) else None
            if header is not None and header[0] < header[1]:
                blank(" ", header[0])
                _plain(text, header[0], header[1], keep, blank)  # the header's own characters, for the quote
            blank(": ", x)
            _plain(text, x, y, keep, blank)
            blank("\n", y - 1 if y > x else x)
    return out.done()


def _plain(text: str, a: int, b: int, keep: Callable[[int, int], None], blank: Callable[[str, int], None]) -> None:
    """Copy text[a:b] with HTML tags and emphasis marks replaced by spaces."""
    piece = text[a:b]
    cuts = sorted([(m.start(), m.end()) for m in TAG.finditer(piece)] + [(m.start(), m.end())
                                                                       for m in EMPHASIS.finditer(piece)])
    at = 0
    for x, y in cuts:
        if x < at:
            continue
        keep(a + at, a + x)
        blank(" ", a + x)
        at = y
    keep(a + at, b)


MARKUP = re.compile(r"[|<`*_~]")


def normalize(text: str) -> Folded:
    """:func:`fold` then :func:`flatten`: what the claim reader reads."""
    folded = fold(text)
    return flatten(folded) if MARKUP.search(folded.text) else folded


# ----------------------------------------------------------------------------- numbers


@dataclass(frozen=True, slots=True)
class Number:
    start: int  # span in the normalised text
    end: int
    value: float
    shown: float  # half a unit of the last digit written: what rounding alone explains
    percent: bool = False
    written: str = ""


_MANTISSA = r"(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+(?:[.,]\d+)?(?![\d,]*,\d)|[.,]\d+|\d+)"
_POWER = r"(?:\s*(?:[x×*·]|times)\s*10\s*(?:\^|\*\*)\s*\(?\s*([-+]?\d+)(?:\s*\))?)"
NUMBER_FORM = re.compile(
    r"(?=[-+.,\d])(?:(?<![\w.])10\s*(?:\^|\*\*)\s*\(?\s*([-+]?\d+)(?:\s*\))?"
    rf"|(?<![\w.,\d])((?<![\w.)])[-+](?=[.\d]))?({_MANTISSA})(?:[eE]([-+]?\d+)(?![\w])|{_POWER})?)")
PERCENT = re.compile(r"\s*(%|percent\b|per cent\b|pct\b)", re.I)
WORD_DIGITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine".split())}
WORD_DIGITS["oh"] = 0
FRACTIONS = {"tenth": 1e-1, "hundredth": 1e-2, "thousandth": 1e-3, "ten-thousandth": 1e-4, "ten thousandth": 1e-4,
             "hundred-thousandth": 1e-5, "hundred thousandth": 1e-5, "millionth": 1e-6}
WORD_FRACTION = re.compile(
    r"\b(a|an|one|two|three|four|five|six|seven|eight|nine|\d+)[\s-]+"
    r"(ten[\s-]thousandths?|hundred[\s-]thousandths?|tenths?|hundredths?|thousandths?|millionths?)\b", re.I)
WORD_POINT = re.compile(r"\b(?:(zero|oh|one|two|three|four|five|six|seven|eight|nine)\s+)?point((?:\s+(?:zero|oh|one|"
                        r"two|three|four|five|six|seven|eight|nine))+)\b", re.I)


def _mantissa(raw: str) -> tuple[float, int] | None:
    """The mantissa's value and its number of decimals; a comma is a decimal comma when it cannot be a thousands
    separator (``0,0003``, ``4,6``), else thousands (``1,234``)."""
    if "," in raw:
        whole, _, frac = raw.partition(",")
        if raw.count(",") > 1 or (len(frac) == 3 and whole not in ("", "0")):
            return float(raw.replace(",", "")), 0
        raw = f"{whole or '0'}.{frac}"
    try:
        value = float(raw)
    except ValueError:
        return None
    return value, len(raw.partition(".")[2])


def numbers(text: str) -> list[Number]:
    """Every number written in ``text``: ``0.0003``, ``.0003``, ``0,0003``, ``3e-4``, ``3·10^-4``, ``3 × 10^(-4)``,
    ``3*10**-4``, ``10^-4``, a percentage (``0.03%``: ``percent`` set, ``value`` as written), ``three
    ten-thousandths``, ``zero point zero zero zero three``. Signs count only where they cannot be a dash of a range."""
    found: list[Number] = []
    for m in NUMBER_FORM.finditer(text):
        if m.group(1) is not None:
            exp = int(m.group(1))
            value, shown = 10.0 ** exp, 0.5 * 10.0 ** exp
        else:
            parsed = _mantissa(m.group(3))
            if parsed is None:
                continue
            value, decimals = parsed
            exp = int(m.group(4) or m.group(5) or 0)
            if m.group(2) == "-":
                value = -value
            try:
                value *= 10.0 ** exp
            except OverflowError:
                continue
            shown = 0.5 * 10.0 ** (exp - decimals)
        if not math.isfinite(value):
            continue
        end = m.end()
        pct = PERCENT.match(text, end)
        if pct is not None:
            end = pct.end()
        found.append(Number(m.start(), end, value, shown, pct is not None, text[m.start():m.end()]))
    words = "th" in text or "TH" in text or "Th" in text
    for m in WORD_FRACTION.finditer(text) if words else ():
        count = m.group(1).lower()
        n = 1 if count in ("a", "an") else WORD_DIGITS.get(count, None)
        n = int(count) if n is None and count.isdigit() else n
        unit = FRACTIONS.get(re.sub(r"s$", "", m.group(2).lower()).replace(" ", "-"))
        if n is not None and unit is not None:
            found = [f for f in found if not m.start() <= f.start < m.end()]
            found.append(Number(m.start(), m.end(), n * unit, 0.0, False, m.group(0)))
    for m in WORD_POINT.finditer(text) if "oint" in text or "OINT" in text else ():
        digits = "".join(str(WORD_DIGITS[w.lower()]) for w in m.group(2).split())
        whole = str(WORD_DIGITS[m.group(1).lower()]) if m.group(1) else "0"
        found.append(Number(m.start(), m.end(), float(f"{whole}.{digits}"), 0.5 * 10.0 ** -len(digits), False,
                            m.group(0)))
    return sorted(found, key=lambda f: f.start)


_SKELETON = str.maketrans("1i|05$", "llloss")


def skeleton(word: str) -> str:
    """A word as it looks (UTS #39's idea, for Latin): case folded, ``1``/``I``/``|`` as ``l``, ``0`` as ``o``,
    ``rn`` as ``m``, ``vv`` as ``w``; two words with one skeleton are the same word to a reader."""
    out = word.casefold()
    out = out.translate(_SKELETON)
    return out.replace("rn", "m").replace("vv", "w")
