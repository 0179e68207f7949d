"""A boolean restatement proved through the equivalences that reflect its booleans (round twenty-six).

``mem y (add x s) = eqb x y || mem y s`` (FSets/FSetFacts.v's ``add_b``) states with booleans what an earlier
lemma states with propositions (``add_iff : In y (add x s) <-> E.eq x y \\/ In y s``). The proof the stdlib
writes for a whole family of such lemmas is one shape: put the reflection of each boolean (``mem_iff : In x s
<-> mem x s = true``, instantiated at each ``mem`` the goal applies) and the propositional lemma of each
reflected proposition into the goal with ``generalize``, case on each boolean, and let ``intuition`` close the
propositional cases. No step of it makes progress alone that a search would rank, so the search is offered the
whole script as one closing step, built here from the goal's terms and the lemmas Coq's ``Search`` finds for
them:

- the *atoms* are the conclusion's booleans under ``&&``, ``||`` and ``negb`` (``mem y (add x s)``, ``eqb x y``,
  ``mem y s``), each an application;
- a *reflection* of an atom's head ``f`` is a lemma ``forall .., P <-> f .. = true`` (either side first); its
  ``f ..`` is matched with the atom, which fixes every bound variable (a lemma whose variables the atom does not
  all fix is not used), and gives the proposition ``P`` the atom reflects (``In y (add x s)``);
- a *restatement* of such a ``P`` is a lemma ``forall .., A -> .. -> (P' <-> Q)`` (either side) with ``P'``
  matching ``P``: kept when it is specific (``P'`` applies something to an application, ``In _ (add _ _)``) or
  each of its premises ``A`` is a hypothesis here, which then fixes the variables ``P'`` leaves (``In_eq_iff``
  at ``H : E.eq x y``);
- an atom whose head is a definition of the file with no reflection (``eqb``) is unfolded, and each ``if`` that
  shows is split;
- every lemma is applied with ``@`` to all its variables in the order it binds them, so that its implicit
  arguments do not move them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from agents.coq_lookups import arrows, split_top, top_words, unwrapped
from oracle.proof_state import Premise

BOOLEAN_OPS = ("||", "&&")
# every `if` the unfolded definitions show is split (`eqb x y := if eq_dec x y then true else false`)
SPLIT_IFS = "repeat match goal with |- context [if ?c then _ else _] => destruct c end"
MAX_LEMMAS = 8  # lemmas generalized in one step
MAX_RESTATEMENTS = 2  # restatements of one reflected proposition
_NAME = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")
_GROUP = re.compile(r"[(\[{](?P<inner>[^()\[\]{}]*(?:\([^()]*\)[^()\[\]{}]*)*)[)\]}]")


def application(term: str) -> list[str] | None:
    """``term`` as a head and its arguments (``mem y (add x s)``: ``["mem", "y", "(add x s)"]``) when it is a
    name applied to at least one argument, each a name or a bracketed term; None for anything else (an infix,
    a ``fun``, a name alone)."""
    words = top_words(unwrapped(term))
    if len(words) < 2 or not _NAME.fullmatch(words[0]):
        return None
    if not all(_NAME.fullmatch(w) or (w.startswith("(") and w.endswith(")")) for w in words[1:]):
        return None
    return words


def match(pattern: str, term: str, holes: Iterable[str], bound: dict[str, str] | None = None) -> dict[str, str] | None:
    """The values of ``holes`` (a lemma's bound variables) that make ``pattern`` read as ``term``, extending
    ``bound``; None when none do. Terms are compared word by word (an application's head and arguments, an
    infix's operands and operator), a bracketed word as a term, and a single name as text."""
    holes = set(holes)
    out = dict(bound or {})
    p, t = unwrapped(pattern), unwrapped(term)
    if p in holes:
        if p in out:
            return out if unwrapped(out[p]) == t else None
        out[p] = t
        return out
    pa, ta = top_words(p), top_words(t)
    if len(pa) > 1 and len(ta) > 1:
        if len(pa) != len(ta):
            return None
        for a, b in zip(pa, ta, strict=True):
            got = match(a, b, holes, out)
            if got is None:
                return None
            out = got
        return out
    return out if p == t else None


def instantiate(text: str, bound: dict[str, str]) -> str:
    """``text`` with each bound variable replaced by its value, bracketed unless it is a name."""
    def value(m: re.Match[str]) -> str:
        v = bound.get(m.group(0))
        if v is None:
            return m.group(0)
        return v if _NAME.fullmatch(v) else f"({v})"
    return re.sub(r"(?<![\w'.])[A-Za-z_][\w']*(?![\w'.])", value, " ".join(text.split()))


class Equivalence:
    """A lemma ``forall binders, premises -> (left <-> right)`` read from its statement."""

    def __init__(self, name: str, binders: list[str], premises: list[str], sides: tuple[str, str]) -> None:
        self.name, self.binders, self.premises, self.sides = name, binders, premises, sides

    @classmethod
    def read(cls, premise: Premise) -> Equivalence | None:
        text = " ".join(premise.statement.split())
        binders: list[str] = []
        if text.startswith("forall "):
            head = split_top(text[len("forall "):], ",")
            if len(head) < 2:
                return None
            groups = [m.group("inner") for m in _GROUP.finditer(head[0])] or [head[0]]
            for group in groups:
                names = group.partition(":")[0].split()
                if not all(re.fullmatch(r"[A-Za-z_][\w']*", n) for n in names):
                    return None
                binders.extend(names)
            text = ",".join(head[1:]).strip()
        parts = arrows(text)
        if not parts or "forall " in parts[-1]:
            return None
        sides = split_top(unwrapped(parts[-1]), "<->")
        if len(sides) != 2:
            return None
        return cls(premise.name, binders, parts[:-1], (sides[0], sides[1]))

    def applied(self, bound: dict[str, str]) -> str | None:
        """``(@name v1 v2 ..)``, with a hypothesis named for each premise (``bound`` maps ``premise k`` to it);
        None when a variable is left unfixed."""
        if any(b not in bound for b in self.binders):
            return None
        args = [bound[b] if _NAME.fullmatch(bound[b]) else f"({bound[b]})" for b in self.binders]
        args += [bound[f"premise {k}"] for k in range(len(self.premises))]
        return f"(@{self.name}{''.join(' ' + a for a in args)})"


def atoms(side: str) -> list[str]:
    """The booleans ``side`` combines with ``&&``, ``||`` and ``negb``, each an application
    (:func:`application`); ``true`` and ``false`` are none."""
    t = unwrapped(side)
    for op in BOOLEAN_OPS:
        parts = split_top(t, f" {op} ")
        if len(parts) > 1:
            return [a for p in parts for a in atoms(p)]
    words = top_words(t)
    if len(words) == 2 and words[0] == "negb":
        return atoms(words[1])
    return [t] if application(t) is not None else []


def _reflected(side: str) -> str | None:
    """The boolean ``f ..`` of a side ``f .. = true``; None for any other side."""
    eq = split_top(side, " = ")
    return eq[0] if len(eq) == 2 and eq[1] == "true" and application(eq[0]) is not None else None


def reflection(lemma: Equivalence, head: str) -> tuple[str, str] | None:
    """(the boolean ``f ..``, the proposition it reflects) when ``lemma`` reflects applications of ``head``."""
    for this, other in (lemma.sides, lemma.sides[::-1]):
        boolean = _reflected(this)
        if boolean is not None and not lemma.premises and \
                (_head(boolean) or "").split(".")[-1] == head.split(".")[-1]:
            return boolean, other
    return None


def _head(term: str) -> str | None:
    """The name ``term`` applies (:func:`application`), or None."""
    words = application(term)
    return words[0] if words is not None else None


def _specific(pattern: str, holes: set[str]) -> bool:
    """Whether a lemma's side applies something to an application of a constant (``In y (add x s)``), not
    only to its variables (``In x s``)."""
    words = application(pattern)
    return words is not None and any(_head(w) not in (None, *holes) for w in words[1:])


def restatements(prop: str, found: Sequence[Premise], hyps: Sequence[tuple[str, str]],
                 skip: set[str]) -> list[str]:
    """The restatements of ``prop`` among ``found`` (:class:`Equivalence`), applied: the specific ones and those
    whose premises the hypotheses give, those with premises first."""
    ranked: list[tuple[int, str]] = []
    for premise in found:
        lemma = Equivalence.read(premise)
        if lemma is None or lemma.name in skip:
            continue
        holes = set(lemma.binders)
        for this, other in (lemma.sides, lemma.sides[::-1]):
            if _reflected(other) is not None:
                break  # a reflection, not a restatement
            bound = match(this, prop, holes)
            if bound is None:
                continue
            for k, need in enumerate(lemma.premises):
                given = next(((n, b) for n, t in hyps if (b := match(need, t, holes, bound)) is not None), None)
                if given is None:
                    bound = None
                    break
                bound = {**given[1], f"premise {k}": given[0]}
            if bound is None or not (lemma.premises or _specific(this, holes)):
                continue
            term = lemma.applied(bound)
            if term is not None:
                ranked.append((-len(lemma.premises), term))
                break
    return [t for _, t in sorted(ranked, key=lambda r: r[0])][:MAX_RESTATEMENTS]


def _reflected_by(atom: str, head: str, found: Sequence[Premise]) -> tuple[str, str, str] | None:
    """The first of ``found`` that reflects ``atom``, as (its application, its name, the proposition it gives)."""
    for premise in found:
        lemma = Equivalence.read(premise)
        shown = reflection(lemma, head) if lemma is not None else None
        if lemma is None or shown is None:
            continue
        bound = match(shown[0], atom, lemma.binders)
        term = lemma.applied(bound) if bound is not None else None
        if term is not None and bound is not None:
            return term, premise.name, instantiate(shown[1], bound)
    return None


def reflection_step(concl: str, hyps: Sequence[tuple[str, str]], *, local: set[str], definitions: set[str],
                    reflections: Callable[[str], Sequence[Premise]],
                    equivalences: Callable[[str], Sequence[Premise]],
                    holes: Callable[[str], str]) -> str | None:
    """The whole proof step of a boolean restatement (module doc), or None when ``concl`` is no equation of
    booleans with a reflected atom. ``reflections(head)``: the lemmas that may reflect ``head`` (Coq's
    ``Search (_ <-> _ = true) head``); ``equivalences(pattern)``: the lemmas an equivalence of which has a side
    of ``pattern``; ``holes(prop)``: ``prop`` with its local names as holes (the pattern searched)."""
    sides = split_top(" ".join(concl.split()), " = ")
    if len(sides) != 2:
        return None
    found = list(dict.fromkeys([*atoms(sides[0]), *atoms(sides[1])]))
    terms: list[str] = []
    used: set[str] = set()
    props: list[str] = []
    unfolds: list[str] = []
    split: list[str] = []
    for atom in found:
        head = _head(atom)
        if head is not None and head not in local:  # a local function's boolean (`f x`) is only split
            reflected = _reflected_by(atom, head, reflections(head))
            if reflected is not None:
                terms.append(reflected[0])
                used.add(reflected[1])
                props.append(reflected[2])
            elif head.split(".")[-1] in definitions:
                unfolds.append(head)
                continue
        split.append(atom)
    if not terms:
        return None
    for prop in dict.fromkeys(props):
        terms.extend(t for t in restatements(prop, equivalences(holes(prop)), hyps, used) if t not in terms)
    steps = [f"generalize {' '.join(terms[:MAX_LEMMAS])}"]
    if unfolds:
        steps += [f"unfold {', '.join(dict.fromkeys(unfolds))}", SPLIT_IFS]
    steps += [f"destruct {a if _NAME.fullmatch(a) else f'({a})'}" for a in sorted(split, key=len, reverse=True)]
    return "; ".join([*steps, "intuition"]) + "."
