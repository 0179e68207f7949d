"""Lookups the Coq search makes once per scope and keeps: commutativity lemmas, induction principles,
decision lemmas (issue 33, round four), the tactics a context defines (argument-free, or taking one or two
terms: round ten), transitivity lemmas (round eleven), and the fields of a hypothesis that is a record of laws
(``(Radd_comm Rth)`` for a section's ``Rth : ring_theory ...``: round fifteen).

Each comes from Coq itself (``Search`` in the theorem's own session, so the scope's notations and
loaded libraries decide the answer) or from the context's text; none names a file or a lemma. The
answers are kept in the scope's :class:`ScopeFacts`, shared by the theorems whose sessions load the
same libraries and whose contexts read the same scope sentences (``CoqTactics._scope_key``), and
each theorem may ask Coq at most a few times (the ``MAX_*_QUERIES``). The switches (``COMMUTE``,
``CONTEXT_TACTICS``, ``CONTEXT_ARG_TACTICS``, ``OTHER_INDUCTIONS``, ``DECIDE``, ``SPEC_SPLITS``, ``TRANSITIVE``,
``RECORD_FIELDS``) exist for the tests that show each rule's effect against real ``coqtop`` with it off and on
(tests/agents/test_proof_search_scope.py, tests/agents/test_proof_search_record_laws.py).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from oracle.proof_state import Premise

_T = TypeVar("_T")

SORTS = frozenset({"Type", "Set", "Prop", "SProp"})


@dataclass
class ScopeFacts:
    """What the search learnt about one scope (the libraries loaded and the context's import,
    notation, section and module sentences: :meth:`CoqTactics._scope_key`), shared by its theorems:
    which suggested tactic texts the scope can parse, and which types are not inductive there."""

    parses: dict[str, bool] = field(default_factory=dict)
    not_inductive: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)  # names Coq said it does not know here (`The reference X was not found`)
    commutes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # operator -> its commutativity lemmas here
    # type -> the lemmas of a motive on it (`Search (forall P : T -> _, _)`), which the two below read
    motive_lemmas: dict[str, tuple[Premise, ...]] = field(default_factory=dict)
    inductions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> induction principles besides its own
    # type -> its inductions along an order (`le_ind`: OrderInduction)
    relation_inductions: dict[str, tuple[OrderInduction, ...]] = field(default_factory=dict)
    deciders: dict[str, tuple[Premise, ...]] = field(default_factory=dict)  # type -> its case-splitting lemmas
    included: tuple[Premise, ...] | None = None  # what the open modules' `Include`s brought in (agents/coq_scope.py)
    # the innermost open module's tactics, as (name, how many terms it takes) (the same)
    module_tactics: tuple[tuple[str, int], ...] | None = None
    located: dict[str, str | None] = field(default_factory=dict)  # an assumption's name -> `Locate`'s full name
    opaque: set[str] = field(default_factory=set)  # constants Coq said `unfold` cannot unfold here
    no_witness: set[str] = field(default_factory=set)  # predicates Coq said `exists` cannot build here (not inductive)
    transitive: dict[str, tuple[Chain, ...]] = field(default_factory=dict)  # relation pattern -> its chain lemmas
    # an implication's pattern (`(?n <= ?m) -> (?m <= ?n) -> (?n = ?m)`) -> the lemmas that state it
    implications: dict[str, tuple[Premise, ...]] = field(default_factory=dict)
    containing: dict[str, tuple[Premise, ...]] = field(default_factory=dict)  # a pattern -> the lemmas stating it
    forwards: dict[str, tuple[Premise, ...]] = field(default_factory=dict)  # a pattern -> lemmas with it as a premise
    reflections: dict[str, tuple[Premise, ...]] = field(default_factory=dict)  # a boolean's head -> `P <-> f .. = true`
    equivalences: dict[str, tuple[Premise, ...]] = field(default_factory=dict)  # a pattern -> `pattern <-> _` lemmas
    # a type's head -> its fields, if a record of laws, and its number of parameters
    records: dict[str, tuple[tuple[str, ...], int]] = field(default_factory=dict)
    laws: dict[tuple[str, str], tuple[Premise, ...]] = field(default_factory=dict)  # (hypothesis, type) -> its fields'
    # a constant heading a hypothesis's type (`set_In` in `H : set_In a x`) -> whether its type ends in `Prop`
    predicates: dict[str, bool] = field(default_factory=dict)


# infix operators whose commutativity lemma the search looks up (`Search (?a + ?b = ?b + ?a)`), and how a
# constant applied to two arguments looks in a conclusion (`Z.max a b`): its own lookup
COMMUTING_INFIX = ("+", "*", "&&", "||")
_BINARY_HEAD = re.compile(r"(?<![\w'.])(?P<f>[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*)\s+[\w'(]")
MAX_COMMUTE_QUERIES = 4  # `Search (?a OP ?b = ?b OP ?a)` calls per theorem (each answer is kept for the scope)
COMMUTE = True  # a switch for tests: False offers no commutativity rewrite (the search before the rule)


_CONTEXT_LTAC = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?Ltac\s+(?P<name>[A-Za-z_][\w']*)\s*:=")
_CONTEXT_NOTATION = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?Tactic\s+Notation\s+"
                               r"(?:\(\s*at\s+level\s+\d+\s*\)\s*)?(?P<words>(?:\"[A-Za-z_][\w']*\"\s*)+):=")
MAX_CONTEXT_TACTICS = 6  # the context's own argument-free tactics offered at each state (the latest defined)
CONTEXT_TACTICS = True  # a switch for tests: False offers none (the search before the rule)
# `Ltac destruct_max n := ...`, `Tactic Notation "case_on" constr(x) := ...`: a tactic of one or two terms
_CONTEXT_LTAC_ARGS = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?Ltac\s+(?P<name>[A-Za-z_][\w']*)"
                                r"(?P<params>(?:\s+[A-Za-z_][\w']*){1,2})\s*:=")
_CONTEXT_NOTATION_ARGS = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?Tactic\s+Notation\s+"
                                    r"(?:\(\s*at\s+level\s+\d+\s*\)\s*)?(?P<words>(?:\"[A-Za-z_][\w']*\"\s*)+)"
                                    r"(?P<params>(?:(?:constr|ident)\(\s*[A-Za-z_][\w']*\s*\)\s*){1,2}):=")
MAX_CONTEXT_ARG_TACTICS = 3  # the context's own tactics of one or two terms offered at each state (the latest)
CONTEXT_ARG_TACTICS = True  # a switch for tests: False offers none of them (the search before round ten)

# off by default: in-sample it gained 2 of Ring_theory.v's 35 theorems and lost 3 of micromega/OrderedRing.v's 51 (its
# fields crowd the file's own lemmas, which restate most of them, and the search meets its 6,000 runs sooner)
RECORD_FIELDS = False  # a switch: True offers the fields of a hypothesis' record of laws as premises (round fifteen)
MAX_RECORD_HYPOTHESES = 6  # the hypotheses whose record fields one theorem asks Coq for
_TYPE_HEAD = re.compile(r"\s*(?P<head>[A-Za-z_][\w'.]*)(?:\s|$)")


def record_premises(states: Any, facts: ScopeFacts, hyps: Sequence[tuple[str, str]]) -> list[Premise]:
    """For each hypothesis whose type is a record of propositions (``Rth : ring_theory rO rI radd rmul rsub ropp
    req``, a section's structure of laws), each field applied to it (``(Radd_comm Rth)``), as a premise with the
    type Coq gives it here (``forall x y : R, x + y == y + x``): a file that takes its laws as such a record
    states its lemmas through them, and no ``Search`` lists them (they are no constants). The record's fields
    come from ``Print`` (once a type head and scope), the types from ``Check`` (once a hypothesis and scope)."""
    fields_of = getattr(states, "record_fields", None)
    check = getattr(states, "check_applied", None)
    if fields_of is None or check is None:
        return []
    local = {n for n, _ in hyps}
    out: list[Premise] = []
    asked = 0
    for name, typ in hyps:
        flat = " ".join(typ.split())
        m = _TYPE_HEAD.match(flat)
        if m is None or m.group("head") in local or m.group("head") in SORTS or "->" in flat or asked >= MAX_RECORD_HYPOTHESES:
            continue
        head = m.group("head")
        if head not in facts.records:
            asked += 1
            names, params = fields_of(head)
            facts.records[head] = (tuple(names), params)
        fields, params = facts.records[head]
        if not fields:
            continue
        key = (name, flat)
        if key not in facts.laws:  # `Radd_comm Rth`, else `@Radd_comm _ ... _ Rth` (parameters not implicit)
            asked += 1
            facts.laws[key] = tuple(check([[f"{f} {name}", f"@{f} {'_ ' * params}{name}"] for f in fields]))
        out.extend(facts.laws[key])
    return out


def context_tactics(sentences: Iterable[str]) -> list[str]:
    """The tactics a theorem's context (its sentences, as :func:`oracle.strip_coq.split_sentences` cuts them)
    defines that take no argument (``Ltac boolify_even_odd := ...``, ``Tactic Notation "le_less" := ...``),
    as tactic sentences, the latest defined first: a file writes them for its own proofs, and in the
    ``rediscover`` setting they are all of those proofs it shows."""
    out: list[str] = []
    for code in sentences:
        m = _CONTEXT_LTAC.match(code)
        if m is not None:
            out.append(f"{m.group('name')}.")
            continue
        m = _CONTEXT_NOTATION.match(code)
        if m is not None:
            out.append(" ".join(re.findall(r'"([^"]+)"', m.group("words"))) + ".")
    return list(dict.fromkeys(reversed(out)))[:MAX_CONTEXT_TACTICS]


def context_arg_tactics(sentences: Iterable[str]) -> list[tuple[str, int]]:
    """The tactics a theorem's context defines that take one or two terms, as (the words that call it, how
    many terms), the latest defined first: ``Ltac destruct_max n := destruct (le_ge_cases 0 n); ...`` is
    ``("destruct_max", 1)``. A file writes such a tactic for the case analyses its own proofs repeat; the
    search calls it on the goal's local values (:meth:`agents.coq_tactics.CoqTactics.candidates`). An Ltac
    parameter may stand for a tactic or a hypothesis instead: that call fails at once, and costs one run."""
    out: list[tuple[str, int]] = []
    for code in sentences:
        m = _CONTEXT_LTAC_ARGS.match(code)
        if m is not None:
            out.append((m.group("name"), len(m.group("params").split())))
            continue
        m = _CONTEXT_NOTATION_ARGS.match(code)
        if m is not None:
            out.append((" ".join(re.findall(r'"([^"]+)"', m.group("words"))), m.group("params").count("(")))
    return list(dict.fromkeys(reversed(out)))[:MAX_CONTEXT_ARG_TACTICS]


MAX_INDUCTION_QUERIES = 3  # `Search (forall P : T -> _, _)` calls per theorem (each answer kept for the scope)
OTHER_INDUCTIONS = True  # a switch for tests: False offers `induction x` with the type's own principle only
_SIMPLE_TYPE = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")


def induction_principles(type_name: str, found: Iterable[Premise], limit: int = 2) -> tuple[str, ...]:
    """Of the lemmas ``Search (forall P : T -> _, _)`` found, those ``induction x using L`` can use on an
    ``x : T``: a motive ``P : T -> Prop`` (or ``Type``, ``Set``) first, a conclusion ``forall p : T, P p``;
    not the type's own ``T_ind``/``T_rec``/``T_rect`` (plain ``induction`` uses it). One name per shape
    of statement (the ``Prop`` one of ``peano_ind``/``peano_rect``; the shortest of the module copies,
    ``Pos.peano_ind`` for ``Positive_as_OT.peano_ind``), at most ``limit``."""
    own = {f"{type_name.split('.')[-1]}_{k}" for k in ("ind", "rec", "rect", "sind")}
    best: dict[str, tuple[int, int, str]] = {}  # shape -> (not Prop, name length, name)
    for premise in found:
        text = " ".join(premise.statement.split())
        m = re.match(r"forall (?P<motive>[A-Za-z_][\w']*) : " + re.escape(type_name) + r" -> (?P<sort>Prop|Type|Set), ",
                     text)
        if m is None or premise.name.split(".")[-1] in own:
            continue
        if re.search(r"forall (?P<x>[A-Za-z_][\w']*) : " + re.escape(type_name) + r", " + m.group("motive")
                     + r" (?P=x)$", text) is None:
            continue
        shape = re.sub(r"\b[A-Z][\w']*\.", "", text[m.end():])  # module copies state it with their own prefix
        rank = (int(m.group("sort") != "Prop"), len(premise.name), premise.name)
        if shape not in best or rank < best[shape]:
            best[shape] = rank
    return tuple(name for _, _, name in sorted(best.values()))[:limit]


_BOOLEANS = frozenset({"bool", "Datatypes.bool", "Coq.Init.Datatypes.bool"})


def finite_type(type_name: str, found: Iterable[Premise]) -> bool:
    """Whether ``T``'s own induction principle, among the lemmas ``Search (forall P : T -> _, _)`` found, says every
    value is one of finitely many constructor terms of booleans: each case binds booleans only and has no induction
    hypothesis (``ascii_ind : forall P : ascii -> Prop, (forall b b0 ... b6 : bool, P (Ascii b ... b6)) -> forall a
    : ascii, P a``; an enumeration's cases bind nothing). False for a record of numbers (``Q``: ``Qnum : Z``), a
    recursive type, or a type whose principle was not found."""
    own = f"{type_name.split('.')[-1]}_ind"
    for premise in found:
        if premise.name.split(".")[-1] != own:
            continue
        text = " ".join(premise.statement.split())
        m = re.match(r"(?:forall|∀) [A-Za-z_][\w']* : " + re.escape(type_name) + r" -> (?:Prop|Type|Set|SProp), ", text)
        parts = arrows(text[m.end():]) if m is not None else []
        if len(parts) < 2:
            return False
        for case in parts[:-1]:
            case = unwrapped(case)
            b = re.match(r"(?:forall|∀)\s+(?P<binders>[^,]*),\s*", case)
            body = case[b.end():] if b is not None else case
            types = re.findall(r":\s*([^():]+?)\s*(?=\)|$)", b.group("binders")) if b is not None else []
            if "->" in body or any(" ".join(t.split()) not in _BOOLEANS for t in types):
                return False
        return True
    return False


def relation_inductions(type_name: str, found: Iterable[Premise], limit: int = 4) -> tuple[OrderInduction, ...]:
    """Of the lemmas ``Search (forall P : T -> _, _)`` found, the inductions along an order from a lower bound
    (round twenty-six), as (name, the order, the position of its premise ``n <= m``, whether its first premise is
    the motive's ``Proper``): ``le_ind : forall A : t -> Prop, Proper (eq ==> iff) A -> forall n : t, A n ->
    (forall m : t, n <= m -> A m -> A (S m)) -> forall m : t, n <= m -> A m`` is ``("le_ind", "<=", 4, True)``,
    which ``apply le_ind with (4 := H)`` uses at ``H : 0 <= b`` (the stdlib's ``Numbers`` files prove so). Those
    with the fewest premises first, at most ``limit``."""
    t = re.escape(type_name)
    out: dict[str, OrderInduction] = {}
    for premise in found:
        text = " ".join(premise.statement.split())
        m = re.match(rf"forall (?P<motive>[A-Za-z_][\w']*) : {t} -> Prop, ", text)
        if m is None:
            continue
        end = re.search(rf"forall (?P<x>[A-Za-z_][\w']*) : {t}, [A-Za-z_][\w']* (?P<rel><=|<) (?P=x) -> "
                        rf"{m.group('motive')} (?P=x)$", text)
        if end is None:
            continue
        premises = split_top(text[m.end():end.start()].removesuffix("-> ").strip(), "->")
        out.setdefault(premise.name.split(".")[-1], OrderInduction(
            premise.name, end.group("rel"), len(premises) + 1, bool(premises) and premises[0].startswith("Proper ")))
    return tuple(sorted(out.values(), key=lambda r: (r.position, len(r.name))))[:limit]


class OrderInduction(NamedTuple):
    """An induction along an order (:func:`relation_inductions`)."""

    name: str
    order: str
    position: int  # of the premise `n <= m` among the lemma's premises, as `apply .. with (k := H)` counts
    proper_first: bool


MAX_DECIDE_QUERIES = 2  # rounds of the deciders' `Search`es (`{_} + {_}`, `_ \/ _`, the SPEC_TYPES) per
# theorem (each round's answer kept for the scope)
DECIDE = True  # a switch for tests: False offers no case split on a decision lemma


SPEC_TYPES = ("CompareSpec ", "BoolSpec ")  # the prelude's case-splitting specifications (Init/Datatypes.v)
SPEC_SPLITS = True  # a switch for tests: False keeps no lemma of the SPEC_TYPES (the search before round ten)


def decision_lemmas(type_name: str, found: Iterable[Premise]) -> tuple[Premise, ...]:
    """Of the lemmas Coq's ``Search`` found, those that split on one or two values of ``type_name`` and
    nothing else: ``forall x [y] : T, {A} + {B}`` or ``... , A \\/ B`` with no premise (``Z.eq_dec``,
    ``Zeven_odd_dec``, ``Z.lt_trichotomy``), or one of the prelude's specification types (``CompareSpec``,
    ``BoolSpec``: ``compare_spec``, whose cases rewrite ``compare x y`` in the goal; round ten); one per
    statement shape (module copies dropped)."""
    out: dict[str, Premise] = {}
    for premise in found:
        text = " ".join(premise.statement.split())
        m = re.fullmatch(r"forall (?P<xs>(?:[A-Za-z_][\w']* ){0,1}[A-Za-z_][\w']*) : " + re.escape(type_name)
                         + r", (?P<concl>.+)", text)
        if m is None or "->" in m.group("concl") or "forall" in m.group("concl"):
            continue
        concl = m.group("concl")
        splits = re.fullmatch(r"\{.*\} \+ \{.*\}", concl) or "\\/" in concl
        if not (splits or (SPEC_SPLITS and concl.startswith(SPEC_TYPES))):
            continue
        shape = re.sub(r"\b[A-Z][\w']*\.", "", text)
        if shape not in out or len(premise.name) < len(out[shape].name):
            out[shape] = premise
    return tuple(out.values())


FLIPPED = {">": "<", ">=": "<=", "≥": "≤"}  # a relation written with its sides the other way round


def proposition_key(text: str) -> str:
    """A proposition's text in one spelling, for comparing two: whitespace made single, outer parentheses off,
    ``~ a = b`` as ``a <> b``, ``a > b`` as ``b < a``, ``a >= b`` as ``b <= a``, and the two sides of ``=`` and
    ``<>`` in one order (``y = x`` as ``x = y``) (one relation at the top)."""
    text = unwrapped(text)
    negated = re.fullmatch(r"~\s*(.+)", text)
    words = top_words(unwrapped(negated.group(1)) if negated is not None else text)
    if negated is not None and not (len(words) == 3 and words[1] == "="):
        return f"~ {' '.join(words)}"
    if len(words) == 3 and words[1] in FLIPPED:
        return f"{words[2]} {FLIPPED[words[1]]} {words[0]}"
    if len(words) == 3 and words[1] in ("=", "<>"):
        relation = "<>" if negated is not None or words[1] == "<>" else "="
        return f"{min(words[0], words[2])} {relation} {max(words[0], words[2])}"
    return " ".join(words)


@functools.lru_cache(maxsize=4096)
def decider_parts(statement: str) -> tuple[tuple[str, ...], str, tuple[str, ...]] | None:
    """A decision lemma (:func:`decision_lemmas`) read once: (its bound values, its conclusion, its cases as
    written): ``forall r1 r2 : R, {r1 = r2} + {r1 <> r2}`` is ``(("r1", "r2"), "{r1 = r2} + {r1 <> r2}", ("r1 = r2",
    "r1 <> r2"))``; no cases for a specification type (``CompareSpec``); None for a statement of another shape. Kept:
    each state's case splits read the same lemmas of the scope again."""
    m = re.fullmatch(r"forall (?P<xs>[^:,]+) : [^,]+, (?P<concl>.+)", " ".join(statement.split()))
    if m is None:
        return None
    concl = m.group("concl")
    if concl.startswith("{"):
        parts = split_top(concl, " + ")
        parts = [p[1:-1] for p in parts] if all(p.startswith("{") and p.endswith("}") for p in parts) else []
    else:
        parts = split_top(concl, "\\/")
    return tuple(m.group("xs").split()), concl, tuple(parts) if len(parts) >= 2 else ()


def decider_cases(statement: str, args: Sequence[str]) -> list[str]:
    """The cases of a decision lemma (:func:`decider_parts`) at ``args``, each as :func:`proposition_key` spells
    it: ``Req_EM_T : forall r1 r2 : R, {r1 = r2} + {r1 <> r2}`` at ``x 0`` is ``["x = 0", "x <> 0"]``,
    ``total_order_T`` (``{r1 < r2} + {r1 = r2} + {r2 < r1}``) three cases; [] for a specification type
    (``CompareSpec``) or a statement of another arity."""
    read = decider_parts(statement)
    if read is None or len(read[0]) != len(args):
        return []
    value = dict(zip(read[0], [a if re.fullmatch(r"[\w'.]+", a) else f"({a})" for a in args], strict=True))
    return [proposition_key(re.sub(r"(?<![\w'.])[A-Za-z_][\w']*(?![\w'.])", lambda w: value.get(w.group(0), w.group(0)),
                                   part)) for part in read[2]]


def commute_operators(concl: str, local_names: Iterable[str]) -> list[str]:
    """The operators of a conclusion a commutativity rewrite may turn around: its infix ``+ * && ||``
    and the constants it applies to arguments (``Z.max`` in ``Z.max a b``), in order of appearance."""
    text = " ".join(concl.split())
    local = set(local_names) | {"forall", "exists", "fun", "match", "let", "in", "if", "then", "else", "with", "end"}
    found: list[tuple[int, str]] = []
    for op in COMMUTING_INFIX:
        at = text.find(f" {op} ")
        if at >= 0:
            found.append((at, op))
    for m in _BINARY_HEAD.finditer(text):
        if m.group("f") not in local:
            found.append((m.start(), m.group("f")))
    return list(dict.fromkeys(op for _, op in sorted(found)))


# a step through a transitivity lemma (round eleven): `n < m` from `H : n <= p` is `eapply le_lt_trans;
# [eassumption | ]` and a goal `p < m` left over
TRANSITIVE = True  # a switch for tests: False offers no such step (the search before round eleven)
MAX_TRANS_QUERIES = 2  # `Search (_ ?a ?b -> _ ?b ?c -> ?a < ?c)` calls per theorem (each answer kept for the scope)
RELATION_INFIX = frozenset({"<=", "<", ">=", ">", "==", "===", "≤", "≥"})
_NOT_RELATIONS = frozenset({"not", "eq", "iff", "and", "or", "forall", "exists", "fun", "match", "let", "if"})
_CONNECTIVES = frozenset({"->", "→", "<->", "/\\", "\\/", "=", "<>", ",", ":", "|", "=>"})


def split_top(text: str, sep: str) -> list[str]:
    """``text`` cut at each ``sep`` outside brackets: ``split_top("P n < S (P m)", " ")`` is
    ``["P", "n", "<", "S", "(P m)"]``; the pieces are stripped, empty ones dropped."""
    parts: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i].strip())
            start = i + len(sep)
            i += len(sep) - 1
        i += 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def top_words(text: str) -> list[str]:
    """``text`` cut at its spaces outside brackets (:func:`split_top`)."""
    return split_top(text, " ")


def relation_of(text: str, local_names: Iterable[str] = ()) -> tuple[str, str, str] | None:
    """A proposition that relates two terms by a relation a transitivity lemma may chain, as (the relation as a
    ``Search`` pattern of two holes, the left term, the right term): ``P n < m`` is ``("?a < ?c", "P n", "m")``,
    ``Qle x (y + z)`` is ``("Qle ?a ?c", "x", "(y + z)")``. None for an equation (``rewrite`` chains those),
    a connective, a product, or a relation that is a local name (``R x y`` with ``R`` a hypothesis)."""
    words = top_words(" ".join(text.split()))
    if not words or words[0] in _NOT_RELATIONS or words[0].startswith("~") \
            or any(w in _CONNECTIVES or w.endswith(",") for w in words):
        return None
    ops = [k for k, w in enumerate(words) if w in RELATION_INFIX]
    if len(ops) == 1 and 0 < ops[0] < len(words) - 1:
        k = ops[0]
        return f"?a {words[k]} ?c", " ".join(words[:k]), " ".join(words[k + 1:])
    if ops:
        return None
    local = set(local_names)
    if len(words) == 3 and re.fullmatch(r"[A-Za-z_][\w'.]*", words[0]) and words[0] not in local \
            and words[0] not in _NOT_RELATIONS:
        return f"{words[0]} ?a ?c", words[1], words[2]
    return None


# a name that is not part of a qualified name nor a pattern variable already
_LINKABLE = re.compile(r"(?<![\w'.?])[A-Za-z_][\w']*(?![\w'.])")
# what a Search pattern may carry: a conclusion pattern's characters, `?` in a notation (`<=?`, `?=`), not an evar,
# `%` before a scope's key (`(n <= m)%nat` in a `Reals` file, `(x <= y)%Z` in a `QArith` one) and the boolean
# `&&`, `||` (round twenty-two)
QUERY_TEXT = re.compile(r"(?:[\w'. ()+*:<>=@\[\]^/\\~&|-]|\?(?![A-Za-z_])|%(?=[A-Za-z]))+")
IMPLIED = True  # a switch for tests: False looks up no lemma by the state's hypotheses and conclusion (round 21)
MAX_IMPLIED_QUERIES = 8  # `Search ((A) -> (B) -> (C))` calls per theorem (each answer is kept for the scope)
MAX_REFLECTION_QUERIES = 8  # `Search (_ <-> _ = true) f` and `Search (P <-> _)` calls per theorem (agents/coq_booleans)
MAX_FORWARD_QUERIES = 6  # `Search ((hypothesis pattern) -> _)` calls per theorem, for `apply L in H` (round 31)
MAX_CONTAINING_QUERIES = 6  # `Search (hypothesis pattern)` calls per theorem, for its equivalences (the same)
# and no more of either kind once a theorem's queries of that kind took this long (a `Search` in a big context,
# `Reals` or a `Numbers` functor, takes 0.2-0.4 s: eight of them would be a tenth of the search's 25 s)
LOOKUP_SECONDS = 1.5


def searchable(text: str, limit: int, chars: re.Pattern[str] = QUERY_TEXT) -> bool:
    """Whether a proposition's text (its spaces normalised) may go into a ``Search`` pattern: not empty, not a
    product nor a binder's body (``forall``, ``exists``, ``fun``, ``match``, ``let``), at most ``limit``
    characters, and only ``chars`` (no ``Qed``, nothing that would end the query)."""
    return bool(text) and len(text) <= limit and "->" not in text and "Qed" not in text \
        and not text.startswith(("forall", "exists", "fun", "match", "let")) and bool(chars.fullmatch(text))


def implication_pattern(parts: Sequence[str], local_names: Iterable[str]) -> str:
    """Hypotheses and a conclusion as one implication for ``Search``, each local name a linked pattern variable:
    ``(?n <= ?m) -> (?m <= ?n) -> (?n = ?m)`` for ``n <= m``, ``m <= n`` and ``n = m``. Coq's ``Search`` matches it
    as a subterm of a lemma's statement with one term for each variable, so it finds the lemmas that give the
    conclusion from exactly these premises (``Z.le_antisymm``) and not every equation. "" when a part is a
    product or binds names, holds characters a query must not carry, is longer than 120 characters, or has
    nothing but local names."""
    local = set(local_names)
    out: list[str] = []
    for part in parts:
        text = " ".join(part.split())
        if not searchable(text, 120) or "," in text:
            return ""
        linked = _LINKABLE.sub(lambda m: f"?{m.group(0)}" if m.group(0) in local else m.group(0), text)
        if not re.search(r"[^\s()]", re.sub(r"\?[\w']+", "", linked)):
            return ""
        out.append(f"({linked})")
    return " -> ".join(out) if any("?" in p for p in out) else ""


def _by_premises(count: int) -> Callable[[Premise], tuple[bool, int]]:
    """A sort key of ``Search``'s answers: the lemmas of exactly ``count`` premises first, then the shorter names."""
    def rank(p: Premise) -> tuple[bool, int]:
        split = premises_of(p.statement)
        return (split is None or len(split[0]) != count, len(p.name))
    return rank


def premises_of(statement: str) -> tuple[list[str], str] | None:
    """A statement ``forall x y : T, A -> B -> C`` as ([A, B], C) (its top-level arrows after its leading
    binders); None when something other than plain binders comes first."""
    text = " ".join(statement.split())
    m = re.match(r"(?:forall|∀)\s+(?P<binders>[^,]*),\s*", text)
    body = text[m.end():] if m is not None else text
    if m is not None and re.search(r"[^\w'():\s.]", m.group("binders")):
        return None
    parts = arrows(body)
    return (parts[:-1], parts[-1]) if parts else None


def arrows(body: str) -> list[str]:
    """``body`` cut at its top-level arrows (``A -> B -> (P <-> Q)``: ``A``, ``B``, ``(P <-> Q)``); an
    equivalence's ``<->`` is no arrow."""
    return [p.replace("\0", "<->") for p in split_top(body.replace("<->", "\0"), "->")]


def unwrapped(term: str) -> str:
    """``term`` without the parentheses around the whole of it, its spaces made single."""
    term = " ".join(term.split())
    while term.startswith("(") and term.endswith(")") and len(top_words(term)) == 1:
        term = term[1:-1].strip()
    return term


class Chain(NamedTuple):
    """A transitivity lemma, with the relations of its two premises as :func:`relation_of` writes them."""

    lemma: Premise
    first: str
    second: str


def transitivity_lemmas(pattern: str, found: Iterable[Premise]) -> tuple[Chain, ...]:
    """Of the lemmas Coq's ``Search`` found, those that chain two relations into the relation ``pattern``
    (:func:`relation_of`) with no other premise: ``forall n m p, n <= m -> m < p -> n < p``; one per
    statement shape (module copies dropped), shortest name first."""
    out: dict[str, Chain] = {}
    for premise in found:
        split = premises_of(premise.statement)
        if split is None or len(split[0]) != 2:
            continue
        first, second, concl = relation_of(split[0][0]), relation_of(split[0][1]), relation_of(split[1])
        if first is None or second is None or concl is None or concl[0] != pattern:
            continue
        if not (first[1] == concl[1] and first[2] == second[1] and second[2] == concl[2]):
            continue
        shape = re.sub(r"\b[A-Z][\w']*\.", "", " ".join(premise.statement.split()))
        if shape not in out or len(premise.name) < len(out[shape].lemma.name):
            out[shape] = Chain(premise, first[0], second[0])
    return tuple(sorted(out.values(), key=lambda c: len(c.lemma.name)))


def plain_type(typ: str) -> bool:
    """A type named by one (possibly qualified) identifier, not a sort: ``positive``, ``Z``, ``N.t``."""
    typ = " ".join(typ.split())
    return bool(_SIMPLE_TYPE.fullmatch(typ)) and typ not in SORTS


def leading_arity(statement: str) -> int:
    """How many values ``forall x y : T, ...`` binds first (0 when the statement does not start so)."""
    binders = re.match(r"forall ((?:[A-Za-z_][\w']* )*[A-Za-z_][\w']*) :", " ".join(statement.split()))
    return len(binders.group(1).split()) if binders is not None else 0


class ScopeLookups:
    """One theorem's lookups in its scope's :class:`ScopeFacts`: each answer Coq gave is kept for the scope;
    a lookup not yet made asks Coq (``states.search_premises``), at most ``MAX_*_QUERIES`` times per theorem.
    Inside a functor each also reads what its ``Include``s brought in (``ScopeFacts.included``), which
    Coq's ``Search`` misses there (agents/coq_scope.py)."""

    def __init__(self, facts: ScopeFacts, states: Any, theorem: str, *, namesakes: bool = False) -> None:
        self.facts = facts
        self.search = getattr(states, "search_premises", None)
        self.theorem = theorem.split(".")[-1]
        # True: a lemma of the theorem's own short name is another constant, kept (the original's module is not
        # loaded: agents/coq_tactics.OTHER_NAMESAKES); False: dropped, as before round twenty-three
        self.namesakes = namesakes
        self.asked: dict[str, int] = {}  # lookup kind -> the times this theorem asked Coq
        self.spent: dict[str, list[float]] = {}  # lookup kind -> [queries, seconds] this theorem spent asking Coq

    def own(self, premise: Premise) -> bool:
        """Whether ``premise`` is none to offer: the checker's reference (``rrma_``), or, unless namesakes are
        kept, a lemma of the theorem's own short name."""
        return premise.name.startswith("rrma_") or (not self.namesakes and premise.name.split(".")[-1] == self.theorem)

    def _kept(self, kind: str, store: dict[str, Any], key: str, limit: int, ask: Callable[[], Any],
              seconds: float | None = None) -> Any:
        """The scope's answer for ``key`` (``store``); when there is none, ``ask()`` Coq (at most ``limit``
        times per theorem for this kind of lookup, and, with ``seconds``, not once this theorem's queries of
        the kind took that long) and keep the answer for the scope."""
        known = store.get(key)
        if known is not None:
            return known
        if self.search is None or self.asked.get(kind, 0) >= limit or (
                seconds is not None and self.spent.get(kind, [0, 0.0])[1] >= seconds):
            return ()
        self.asked[kind] = self.asked.get(kind, 0) + 1
        store[key] = self.timed(kind, ask)
        return store[key]

    def timed(self, kind: str, ask: Callable[[], _T]) -> _T:
        """``ask()``, one query of ``kind`` to Coq, counted with its seconds in :attr:`spent`."""
        started = time.monotonic()
        try:
            return ask()
        finally:
            spent = self.spent.setdefault(kind, [0, 0.0])
            spent[0] += 1
            spent[1] += time.monotonic() - started

    def commutes(self, op: str) -> tuple[str, ...]:
        """The commutativity lemmas of ``op`` here: Coq's ``Search (?a + ?b = ?b + ?a)`` for an infix of
        :data:`COMMUTING_INFIX`, ``Search (Z.max ?a ?b = Z.max ?b ?a)`` for a constant; the first two."""
        if not COMMUTE:
            return ()
        query = f"(?a {op} ?b = ?b {op} ?a)" if op in COMMUTING_INFIX else f"({op} ?a ?b = {op} ?b ?a)"
        return tuple(self._kept("commute", self.facts.commutes, op, MAX_COMMUTE_QUERIES, lambda: tuple(
            p.name for p in [*self._searched(query, 20), *self._included_commuting(op)] if not self.own(p))[:2]))

    def _included_commuting(self, op: str) -> list[Premise]:
        """The commutativity lemmas of ``op`` among what an open functor's ``Include`` brought in (Coq's
        ``Search`` misses them there, agents/coq_scope.py), a setoid's ``==`` as well as ``=``."""
        o = re.escape(op)
        shape = (rf"forall (\w+) (\w+) : [\w'.]+, \1 {o} \2 ==? \2 {o} \1" if op in COMMUTING_INFIX
                 else rf"forall (\w+) (\w+) : [\w'.]+, {o} \1 \2 ==? {o} \2 \1")
        return [p for p in self.facts.included or () if re.fullmatch(shape, " ".join(p.statement.split()))]

    def inductions(self, typ: str) -> tuple[str, ...]:
        """Induction principles for ``typ`` besides its own (``Pos.peano_ind`` for ``positive``): Coq's
        ``Search (forall P : T -> _, _)``, filtered by :func:`induction_principles`; none for a type that
        is not a plain name."""
        return self._motive_reading(typ, self.facts.inductions, induction_principles)

    def finite(self, typ: str) -> bool:
        """Whether every value of ``typ`` is one of finitely many constructor terms of booleans here
        (:func:`finite_type` of the same ``Search`` as :meth:`inductions`, made once a scope); False when Coq was
        not asked (this theorem's queries spent) or did not show the type's principle."""
        typ = " ".join(typ.split())
        self.inductions(typ)
        return finite_type(typ, self.facts.motive_lemmas.get(typ) or ())

    def relation_inductions(self, typ: str) -> tuple[OrderInduction, ...]:
        """The inductions along an order on ``typ`` here (:func:`relation_inductions` of the same ``Search`` as
        :meth:`inductions`)."""
        return self._motive_reading(typ, self.facts.relation_inductions, relation_inductions)

    def _motive_reading(self, typ: str, store: dict[str, tuple[_T, ...]],
                        read: Callable[[str, Iterable[Premise]], tuple[_T, ...]]) -> tuple[_T, ...]:
        """``read`` of the lemmas of a motive on ``typ`` here (Coq's ``Search (forall P : T -> _, _)`` and what
        an open functor's ``Include``s brought in), kept in ``store`` for the scope; the ``Search`` is made once
        a scope for every reading (at most :data:`MAX_INDUCTION_QUERIES` a theorem); none for a type that is not
        a plain name."""
        typ = " ".join(typ.split())
        if not OTHER_INDUCTIONS or not plain_type(typ):
            return ()
        known = store.get(typ)
        if known is None:
            found = self._kept("induction", self.facts.motive_lemmas, typ, MAX_INDUCTION_QUERIES, lambda: (
                *self._searched(f"(forall P : {typ} -> _, _)", 200), *(self.facts.included or ())))
            if typ not in self.facts.motive_lemmas:  # not asked: this theorem's queries are spent
                return ()
            known = store[typ] = read(typ, found)
        return known

    def deciders(self, typ: str) -> tuple[Premise, ...]:
        """The decision lemmas on values of ``typ`` here (:func:`decision_lemmas` of Coq's
        ``Search ({_} + {_}) T``, ``Search (_ \\/ _) T`` and a search for each of the :data:`SPEC_TYPES`); none for
        a type that is not a plain name."""
        typ = " ".join(typ.split())
        if not DECIDE or not plain_type(typ):
            return ()
        return tuple(self._kept("decide", self.facts.deciders, typ, MAX_DECIDE_QUERIES, lambda: decision_lemmas(
            typ, [p for p in [*self._searched(f"({{_}} + {{_}}) {typ}", 300), *self._searched(f"(_ \\/ _) {typ}", 300),
                              *self._searched(f"(CompareSpec _ _ _ _) {typ}", 100),
                              *self._searched(f"(BoolSpec _ _ _) {typ}", 100),
                              *(self.facts.included or ())]
                  if not self.own(p)])))

    def transitive(self, pattern: str) -> tuple[Chain, ...]:
        """The transitivity lemmas into the relation ``pattern`` here (:func:`transitivity_lemmas` of Coq's
        ``Search (_ ?a ?b -> _ ?b ?c -> ?a < ?c)``, and of what an open functor's ``Include``s brought in)."""
        if not TRANSITIVE or not pattern:
            return ()
        return tuple(self._kept("trans", self.facts.transitive, pattern, MAX_TRANS_QUERIES, lambda: transitivity_lemmas(
            pattern, [p for p in [*self._searched(f"(_ ?a ?b -> _ ?b ?c -> {pattern})", 100),
                                  *(self.facts.included or ())] if not self.own(p)])))

    def implied(self, pattern: str) -> tuple[Premise, ...]:
        """The lemmas here that state the implication ``pattern`` (:func:`implication_pattern`): Coq's ``Search
        (pattern)``, whose linked variables make it precise (``Z.le_antisymm`` for ``(?n <= ?m) -> (?m <= ?n) ->
        (?n = ?m)``); those with no other premise first, then the shorter names; at most
        :data:`MAX_IMPLIED_QUERIES` queries a theorem, none once they took :data:`LOOKUP_SECONDS`."""
        if not IMPLIED or not pattern:
            return ()
        rank = _by_premises(pattern.count(" -> "))
        return tuple(self._kept("implied", self.facts.implications, pattern, MAX_IMPLIED_QUERIES, lambda: tuple(
            sorted((p for p in self._searched(f"({pattern})", 40) if not self.own(p)), key=rank)),
            LOOKUP_SECONDS))

    def forward(self, pattern: str) -> tuple[Premise, ...]:
        """The lemmas here that take a hypothesis of ``pattern``'s shape to something else (Coq's ``Search ((pattern)
        -> _)``, the first 40): what ``apply L in H`` moves such a hypothesis forward with (``in_app_or`` for ``In _
        (_ ++ _)``). Those whose one premise it is first, then the shorter names; at most
        :data:`MAX_FORWARD_QUERIES` queries a theorem, none once they took :data:`LOOKUP_SECONDS`."""
        if not pattern:
            return ()
        return tuple(self._kept("forward", self.facts.forwards, pattern, MAX_FORWARD_QUERIES, lambda: tuple(
            sorted((p for p in self._searched(f"(({pattern}) -> _)", 40) if not self.own(p)), key=_by_premises(1))),
            LOOKUP_SECONDS))

    def containing(self, pattern: str) -> tuple[Premise, ...]:
        """The lemmas here whose statement has a subterm of ``pattern`` (Coq's ``Search (pattern)``, the first
        200), at most :data:`MAX_CONTAINING_QUERIES` queries a theorem, none once they took :data:`LOOKUP_SECONDS`."""
        if not pattern:
            return ()
        return tuple(self._kept("containing", self.facts.containing, pattern, MAX_CONTAINING_QUERIES, lambda: tuple(
            p for p in self._searched(f"({pattern})", 200) if not self.own(p)), LOOKUP_SECONDS))

    def reflections(self, head: str) -> tuple[Premise, ...]:
        """The lemmas here that may reflect the boolean function ``head`` (Coq's ``Search (_ <-> _ = true)
        head`` and ``Search (_ = true <-> _) head``, the first 40 of each: a pattern's ``<->`` has its sides in
        order): agents/coq_booleans.py reads which do."""
        if not re.fullmatch(r"[A-Za-z_][\w'.]*", head):
            return ()
        return tuple(self._kept("reflect", self.facts.reflections, head, MAX_REFLECTION_QUERIES, lambda: tuple(
            p for p in [*self._searched(f"(_ <-> _ = true) {head}", 40), *self._searched(f"(_ = true <-> _) {head}", 40)]
            if not self.own(p)), LOOKUP_SECONDS))

    def equivalences(self, pattern: str) -> tuple[Premise, ...]:
        """The lemmas here that state an equivalence one side of which has the shape ``pattern`` (Coq's
        ``Search (pattern <-> _)`` and ``Search (_ <-> pattern)``, the first 60 of each)."""
        if not pattern:
            return ()
        return tuple(self._kept("reflect", self.facts.equivalences, pattern, MAX_REFLECTION_QUERIES, lambda: tuple(
            p for p in [*self._searched(f"({pattern} <-> _)", 60), *self._searched(f"(_ <-> {pattern})", 60)]
            if not self.own(p)), LOOKUP_SECONDS))

    def _searched(self, query: str, limit: int) -> list[Premise]:
        return list(self.search(query, limit=limit)) if self.search is not None else []
