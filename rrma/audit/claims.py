"""The claim reader: which numbers in an agent's text it states as the value of the task's metric.

Why it exists: ``claim_mismatch`` compares what an agent says its trial scored with what the oracle gave,
so it must find the claim however it is worded: ``the loss got down to 0.0003``, ``0.0003 was the loss``,
``we're at 3e-4 loss``, a table row ``| loss | 0.0003 |``, a look-alike letter in ``lоss``. And it must
leave alone the other numbers an honest trace is full of: the learning rate, the step count, the
baseline's and the parent's scores, a change (``down 2.8``, ``by 0.2``), a range, a target, a question.

How it reads (:func:`read_claims`): the text is normalised (rrma/audit/normalize.py), cut into clauses
(sentences, lines, ``;``), and cut into tokens: numbers in any written form, words, punctuation. A number
belongs to the nearest *label* on its left: the metric's name or a synonym (:class:`MetricWords`), or any
other noun (``lr 3e-4``, ``X = 1.7``, ``baseline 7.4``); words that carry no label (verbs like ``hit``,
``landed``, ``got down to``; articles, prepositions, adverbs; words for the trial itself: ``trial``,
``run``, ``oracle``) are read through. A number with no label on its left takes the one on its right
(``0.0003 was the loss``, ``93% accuracy``, ``500 steps``); one right after another number and a comma,
``and`` or ``to`` shares its label (``from 7.4 to 0.0003``). A number the metric labels is a claim unless
its clause says it is not this trial's result: a change (``down 2.8``), a question, a hypothetical
(``if``, ``would``, ``expect``, ``target``, ``theoretical minimum``), a negation, or a metric mention
qualified as another's (``baseline``, ``parent's``, ``before``, ``the paper``).

Invariant: a claim quotes the agent's own text (the original characters behind the clause's span), and a
percentage keeps both readings (``93%``: 0.93 and 93), so the rule flags it only when every reading
contradicts the oracle. What it cannot read: a claim whose metric is only implied across sentences
(``The loss? It ended at 0.0003.``) or by a pronoun; those are the judge's (docs/audit.md).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from rrma.audit.normalize import Folded, Number, normalize, numbers, skeleton

# words that carry no label: a number is read through them to the label on their other side
LINK_WORDS = frozenset("""
a an the this that these those its it's my our your their his her some any each every such one
is was were are be been being am has have had having does do did get gets got
of at to from into onto on in for with as than about around near under below beneath above over within across
after by down up out off all way toward towards until till just only even still now then finally already also so
and or but while where when which who whom whose what there here very really quite
less lower more higher smaller mere tiny whopping new final current latest resulting overall
value values reading readings number numbers figure figures result results level levels metric
i we you it they he she me us them i'm we're we've it's that's there's
approx approximately roughly about circa ca nearly almost essentially exactly precisely basically practically
effectively virtually around some
trial trials run runs program edit experiment attempt version setup configuration config oracle scorer
measurement measurements evaluation prompt model code script patch tweak
nats bits
""".split())
VERB_WORDS = frozenset("""
hit hits got get gets reach reaches came come comes went go goes fell fall falls sank sink sinks drop drops sit sits
stand stands stood land lands show shows gave give gives read reads report reports make makes made put puts bring
brings brought push pushes drive drives drove measure measures achieve achieves obtain obtains record records hold
holds held stay stays remain remains become becomes became turn turns end ends settle settles converge converges
evaluate evaluates equal equals hover hovers rest rests clock clocks top tops bottom bottoms scores print prints
output outputs yield yields produce produces see saw seen find found observe manage manages lead leads led take
takes took cut cuts shave shaves lowers reduce reduces improve improves beat beats set solve solves sits lands
sitting now driven gotten fallen shrunk sunk shown grown taken given beaten gone done proven risen been brought
""".split())
CHANGE_WORDS = frozenset("""
by down up dropped fell decreased increased reduced improved cut lowered raised gained lost shaved minus plus
drops falls decreases increases reduces improves cuts lowers raises gains loses shaves
""".split()) | {"Δ", "δ", "±", "+/-"}
CHANGE_NOUNS = frozenset("delta change changes improvement improvements reduction drop decrease increase gain gains "
                          "difference diff".split())
HEDGE_WORDS = frozenset("""
if would could should might may will won't expect expects expecting hope hopes hoping hopefully aim aims aiming
target targets goal goals want wants wanted try trying tries predict predicts predicted estimate estimated ideally
ideal theoretical theoretically optimum optimal minimum possible eventually maybe perhaps unless need needs needed
whether assume assuming suppose supposing imagine plan planned planning next projected wish aspire potentially
""".split())
MODAL_WORDS = frozenset("would could should might may will can".split())
NEGATION_WORDS = frozenset("not never no cannot can't won't didn't isn't wasn't aren't weren't doesn't don't nor "
                           "neither hardly without".split())
QUALIFIER_WORDS = frozenset("""
baseline baselines parent parents previous prior earlier old original initial starting start before reference
published paper papers sota literature target other another others their best-known previously originally initially
""".split())
GENERIC_ALIASES = ("score", "objective")
# a metric's name parts that say which split or statistic it is, not what is measured
NAME_QUALIFIERS = frozenset("val valid validation test eval dev train training mean avg average final total top "
                            "best min max".split())
TRAIN_WORDS = frozenset("train training trn".split())
HELDOUT_WORDS = frozenset("val valid validation test eval dev".split())
SOLVED = ("solved", "correct", "solve rate", "pass rate", "success rate", "percent correct")
EXPANSIONS = {"bpb": ("bits per byte", "bits/byte", "bits-per-byte"), "acc": ("accuracy", *SOLVED),
              "accuracy": ("acc", *SOLVED),
              "ppl": ("perplexity",), "perplexity": ("ppl",), "err": ("error",), "error": ("err",)}
DESCRIPTION_GOAL = re.compile(
    r"\b(?:minimi[sz]e|maximi[sz]e|lower|raise|reduce|increase|improve|optimi[sz]e)\s+(?:the\s+)?[`'\"]?"
    r"([A-Za-z][\w\-]*(?:\s+[A-Za-z][\w\-]*){0,2}?)[`'\"]?\s*(?:\(([^()]{2,60})\)|[,:;.]|\s+(?:by|of|on|in|while|for|"
    r"with|so|and|from|to)\b|$)", re.I)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_'\-./]*[A-Za-z0-9_]|[A-Za-z_]")
BREAKS = re.compile(r"[\n;!?|—]|\.(?=\s|$)")
KEEP_PUNCT = re.compile(r"->|=>|\+/-|[:=~≈→⇒<>≤≥(),\[\]Δδ±]")
TOKEN = re.compile(rf"(?P<brk>{BREAKS.pattern})|(?P<word>(?<![A-Za-z0-9]){WORD.pattern})|(?P<punct>{KEEP_PUNCT.pattern})")


@functools.lru_cache(maxsize=4096)
def _key(word: str) -> str:
    return re.sub(r"[_\-\s/]", "", skeleton(word.removesuffix("'s")))


@dataclass
class MetricWords:
    """What names the metric in prose: its name, the parts of the name that say what is measured (``bpb`` of
    ``val_bpb``), their usual expansions (``bits per byte``), the goal the task's description names (``Lower
    val_bpb (validation bits per byte)``), and the generic ``score`` and ``objective``."""

    metric: str
    aliases: set[str] = field(default_factory=set)  # keys (_key) of one to four words
    other_split: frozenset[str] = frozenset()  # a word before a part-alias that makes it another metric (train loss)
    prefixes: set[str] = field(default_factory=set)  # every prefix of an alias: where a mention can start

    starts: set[str] = field(default_factory=set)  # the first three letters of each alias: a quick test for a mention

    def __post_init__(self) -> None:
        self.prefixes = {a[:k] for a in self.aliases for k in range(1, len(a) + 1)}
        self.starts = {a[:3] for a in self.aliases}

    @classmethod
    def of(cls, metric: str, description: str = "") -> MetricWords:
        keys = {_key(metric), *(_key(a) for a in GENERIC_ALIASES)}
        parts = [p for p in re.split(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])", metric) if p]
        for part in parts:
            low = part.lower()
            if len(low) >= 3 and low not in NAME_QUALIFIERS:
                keys.add(_key(low))
            for exp in EXPANSIONS.get(low, ()):
                keys.add(_key(exp))
        for exp in EXPANSIONS.get(metric.lower(), ()):
            keys.add(_key(exp))
        for m in DESCRIPTION_GOAL.finditer(description or ""):
            named = m.group(1).strip()
            if _key(named) in keys or any(_key(w) in keys for w in named.split()):
                if m.group(2) and len(m.group(2).split()) <= 5:
                    keys.add(_key(m.group(2)))
        lows = {p.lower() for p in parts}
        other = TRAIN_WORDS if lows & HELDOUT_WORDS else HELDOUT_WORDS if lows & TRAIN_WORDS else frozenset()
        return cls(metric, {k for k in keys if k}, frozenset(other))


@dataclass(frozen=True, slots=True)
class Claim:
    """A number the text states as this trial's value of the metric."""

    number: Number
    readings: tuple[float, ...]  # what it may mean: a percentage both as a fraction and as written
    written: str  # the number as written (normalised)
    quote: str  # the agent's own words: from the metric's mention to the number
    mention: str


@dataclass
class _Tok:
    kind: str  # num | word | metric | punct
    text: str
    start: int
    end: int
    number: Number | None = None
    span: int = 1  # a metric mention's length in words
    low: str = field(init=False)  # lower case, without a possessive 's

    def __post_init__(self) -> None:
        self.low = self.text.lower().removesuffix("'s")


def _tokens(text: str, nums: list[Number], words: MetricWords) -> list[list[_Tok]]:
    """Clauses of tokens."""
    clauses: list[list[_Tok]] = [[]]
    pending = iter(nums)
    number = next(pending, None)
    pos = 0  # the end of the last number: a token inside one is part of it
    for m in TOKEN.finditer(text):
        while number is not None and number.start <= m.start():
            if number.start >= pos:
                clauses[-1].append(_Tok("num", text[number.start:number.end], number.start, number.end, number))
                pos = number.end
            number = next(pending, None)
        if m.start() < pos:
            continue
        if m.lastgroup == "brk":
            clauses[-1].append(_Tok("punct", "?" if m.group(0) == "?" else ".", m.start(), m.end()))
            clauses.append([])
        elif m.lastgroup == "word":
            word = m.group(0).rstrip(".'")
            clauses[-1].append(_Tok("word", word, m.start(), m.start() + len(word)))
        else:
            clauses[-1].append(_Tok("punct", m.group(0), m.start(), m.end()))
    while number is not None:
        if number.start >= pos:
            clauses[-1].append(_Tok("num", text[number.start:number.end], number.start, number.end, number))
            pos = number.end
        number = next(pending, None)
    out: list[list[_Tok]] = []
    for clause in clauses:
        marked = _mark_metric(clause, words)
        if out and len(out[-1]) >= 2 and out[-1][-1].text == "?" and out[-1][-2].kind == "metric" and marked and \
                marked[0].kind == "num":
            out[-1] = out[-1][:-1] + marked  # "Our loss? 0.0003.": the question names what the answer is
            continue
        out.append(marked)
    return [c for c in out if c]


def _mark_metric(clause: list[_Tok], words: MetricWords) -> list[_Tok]:
    """The clause with each mention of the metric (one to four words) as one ``metric`` token."""
    out: list[_Tok] = []
    i = 0
    keys = [_key(t.text) if t.kind == "word" else None for t in clause]
    while i < len(clause):
        tok = clause[i]
        matched = 0
        if tok.kind == "word" and keys[i] in words.prefixes:
            for n in (4, 3, 2, 1):
                keyed = [k for k in keys[i:i + n] if k is not None]
                if len(keyed) < n or "".join(keyed) not in words.aliases:
                    continue
                if out and out[-1].kind == "word" and out[-1].low in words.other_split:
                    break  # "train loss" when the metric is val_loss
                matched = n
                break
        if matched:
            named = clause[i:i + matched]
            out.append(_Tok("metric", " ".join(t.text for t in named), named[0].start, named[-1].end, span=matched))
            i += matched
        else:
            out.append(tok)
            i += 1
    # a metric name followed by a noun is a modifier of that noun (the loss landscape, the loss function)
    for j, tok in enumerate(out):
        nxt = out[j + 1] if j + 1 < len(out) else None
        if tok.kind == "metric" and nxt is not None and nxt.kind == "word" and _is_label(nxt):
            tok.kind = "word"
    return out


def _verbish(word: str) -> bool:
    w = word.lower()
    return (w in VERB_WORDS or (len(w) >= 5 and w.endswith("ed") and not w.endswith("eed"))
            or (len(w) >= 6 and w.endswith("ing")) or (len(w) >= 5 and w.endswith("ly")))


def _is_label(tok: _Tok) -> bool:
    """A word that labels a number next to it (a noun): not a link word, a verb or an adverb."""
    return tok.kind == "word" and tok.low not in LINK_WORDS and not _verbish(tok.text) and \
        tok.low not in HEDGE_WORDS and tok.low not in NEGATION_WORDS


CONNECT = frozenset([",", "and", "or", "to", "-", "through", "then", "vs", "versus", "/"])


def _labels_next(clause: list[_Tok], j: int) -> bool:
    """Whether the label at ``j`` is followed by its own value (``X = 1.7``, ``loss: 4.6``, ``loss is 4.6``)."""
    k = j + 1
    while k < len(clause) and ((clause[k].kind == "punct" and clause[k].text in ":=~≈") or
                               (clause[k].kind == "word" and clause[k].low in ("is", "was", "of", "at"))):
        k += 1
    return k < len(clause) and clause[k].kind == "num"


def _matching(clause: list[_Tok], at: int, this: str, that: str, step: int) -> int:
    """The index of the bracket that closes the one at ``at`` (``step`` -1: look left), or the clause's end."""
    depth = 0
    k = at
    while 0 <= k < len(clause):
        if clause[k].kind == "punct" and clause[k].text == this:
            depth += 1
        elif clause[k].kind == "punct" and clause[k].text == that:
            depth -= 1
            if depth == 0:
                return k
        k += step
    return max(0, min(k, len(clause) - 1))


def _owner(clause: list[_Tok], i: int, memo: dict[int, tuple[str, int]]) -> tuple[str, int]:
    """(``metric`` | ``other`` | ``none``, index of the label) for the number at ``i``."""
    if i in memo:
        return memo[i]
    memo[i] = ("none", -1)
    nxt = clause[i + 1] if i + 1 < len(clause) else None
    if nxt is not None and _is_label(nxt) and not _labels_next(clause, i + 1):
        memo[i] = ("other", i + 1)  # 500 steps, 0.3 s, 0.0003 learning rate
        return memo[i]
    bridge: list[_Tok] = []
    j = i - 1
    found: tuple[str, int] | None = None
    while j >= 0:
        tok = clause[j]
        if tok.kind == "punct" and tok.text == ")":  # a parenthesis: its metric labels, else it is read through
            opening = _matching(clause, j, ")", "(", -1)
            inside = clause[opening + 1:j]
            mention = next((k for k in range(j - 1, opening, -1) if clause[k].kind == "metric"), None)
            if mention is not None and not any(t.kind == "num" for t in inside):
                found = ("metric", mention)
                break
            j = opening - 1
            continue
        if tok.kind == "num":
            if all(b.text in CONNECT or b.low in CONNECT for b in bridge) and bridge:
                found = _owner(clause, j, memo)  # a list or range shares its label
            break
        if tok.kind == "metric":
            found = ("metric", j)
            break
        if _is_label(tok) and tok.text not in ("(", ")"):
            found = ("other", j)
            break
        bridge.append(tok)
        j -= 1
    if found is None:  # nothing labels it on the left: the label on its right
        k = i + 1
        while k < len(clause):
            tok = clause[k]
            if tok.kind == "punct" and tok.text == "(":
                k = _matching(clause, k, "(", ")", 1) + 1
                continue
            if tok.kind == "metric":
                found = ("none", -1) if _labels_next(clause, k) else ("metric", k)
                break
            if tok.kind == "num" or _is_label(tok):
                found = ("other", k) if tok.kind != "num" else ("none", -1)
                break
            if tok.kind == "word" and tok.low not in LINK_WORDS:
                break  # a verb, a hedge: "1e-3 next I will try to get the loss" is no value of the loss
            k += 1
    memo[i] = found or ("none", -1)
    return memo[i]


def _first_hedge(clause: list[_Tok]) -> int:
    """The index of the clause's first hypothetical or negating word (its length when none)."""
    return next((k for k, t in enumerate(clause) if t.kind == "word" and
                 (t.low in HEDGE_WORDS or t.low in NEGATION_WORDS or "n't" in t.low)), len(clause))


def _not_a_result(clause: list[_Tok], i: int, label: int, this_trial: str | None, hedge: int) -> bool:
    """Whether the clause says the metric's number at ``i`` is not this trial's result (``hedge``: _first_hedge)."""
    lo, hi = min(i, label), max(i, label)
    if clause and clause[-1].kind == "punct" and clause[-1].text == "?":
        return True  # a question
    if hedge < i:
        return True  # if / would / expect / target / not ... before the number
    after = [t for t in clause[i + 1:i + 3] if t.kind == "word"]
    if after and after[0].low in MODAL_WORDS:
        return True  # "a loss of 0.0003 would need ..."
    k = i - 1
    while k >= 0 and clause[k].kind == "word" and clause[k].low in ("a", "an", "the"):
        k -= 1
    if k >= 0 and (clause[k].low in CHANGE_WORDS or clause[k].text in CHANGE_WORDS):
        return True  # down 2.8, dropped 3.1
    k = label - 1
    while k >= 0 and clause[k].kind == "word" and clause[k].low in ("in", "of", "the", "a", "an"):
        k -= 1
    if label < i and k >= 0 and (clause[k].low in CHANGE_NOUNS or clause[k].text in CHANGE_WORDS):
        return True  # Δloss = -2.78, the change in loss: 0.3
    near = clause[max(0, lo - 3):hi + 1]
    if any(t.kind == "word" and (t.low in QUALIFIER_WORDS or (re.fullmatch(r"t\d{3,}", t.low) and t.low != this_trial))
           for t in near):
        return True  # the baseline's loss, the parent's, t0001's, before
    return False


def mentions(text: str, words: MetricWords) -> bool:
    """A quick test: whether ``text`` (plain or normalised) may name the metric at all."""
    compact = re.sub(r"[\s_\-/]+", "", skeleton(text))  # as the aliases' keys are written
    return any(start in compact for start in words.starts)


def read_claims(text: str, words: MetricWords, this_trial: str | None = None) -> list[Claim]:
    """The numbers ``text`` states as this trial's value of the metric (see the module's docstring)."""
    folded = normalize(text)
    if not mentions(folded.text, words):
        return []  # the metric is not named at all: nothing to read
    nums = numbers(folded.text)
    claims: list[Claim] = []
    for clause in _tokens(folded.text, nums, words):
        if not any(t.kind == "metric" for t in clause):
            continue  # no mention of the metric: no claim of it
        memo: dict[int, tuple[str, int]] = {}
        hedge = _first_hedge(clause)
        for i, tok in enumerate(clause):
            if tok.kind != "num" or tok.number is None:
                continue
            owner, label = _owner(clause, i, memo)
            if owner != "metric" or _not_a_result(clause, i, label, this_trial, hedge):
                continue
            n = tok.number
            readings = (n.value / 100, n.value) if n.percent else (n.value,)
            mention = clause[label]
            a, b = min(mention.start, tok.start), max(mention.end, tok.end)
            claims.append(Claim(n, readings, n.written, _quote(folded, a, b), mention.text))
    return claims


def _quote(folded: Folded, a: int, b: int) -> str:
    return " ".join(folded.original(a, b).split()) or folded.text[a:b]
