"""Coq candidates for the best-first proof search: which tactics to try on a goal, cheapest first.

Why it exists: :func:`agents.best_first.best_first_search` knows no prover; :class:`CoqTactics`
reads a Coq goal and proposes, for each state:

* closers that either close the first goal or are dropped (``reflexivity``, ``auto``, ``lia``,
  ``congruence``, ``auto using`` the best premises, CoqHammer's ``sauto``/``hauto`` when the
  oracle preloads ``Hammer.Tactics``...); the cheapest are bundled into one ``solve [...]``;
* structural steps read off the goal: ``intros``, ``split``/``left``/``right``, ``destruct`` and
  ``induction`` on each variable (and on each binder of a ``forall``, which generalizes the rest),
  ``inversion``/``destruct`` of hypotheses, ``unfold`` of the file's definitions that occur, ``destruct``
  of a ``match`` scrutinee, ``rewrite`` with hypotheses and induction hypotheses;
* premises (:mod:`agents.premises`): lemmas of the file and of the imported libraries (Coq's
  ``Search`` on the goal's constants), ranked by shared rare symbols: ``apply``, ``rewrite``
  (both ways) and ``apply ... in`` a hypothesis;
* the portfolio's closed scripts at the statement (so the search never does worse than it);
* the suggesters' tactics (:mod:`agents.learned_tactics`, :mod:`agents.library_tactics`,
  :mod:`agents.llm_tactics`), screened like every other tactic.

Invariants: a context is probed once for the tactics it cannot run (``lia`` without ``Lia``), and no
candidate naming a missing one is tried; the probe is shared by the theorems of one scope and redone
for another. A found proof that leans on an axiom not allowed is vetoed (:meth:`CoqTactics.validate`).
"""

from __future__ import annotations

import collections
import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import agents.coq_booleans as coq_booleans
import agents.coq_lookups as coq_lookups
from agents.best_first import Node, TacticSource, conclusion
from agents.coq_lookups import (
    FLIPPED,
    QUERY_TEXT,
    RELATION_INFIX,
    ScopeFacts,
    ScopeLookups,
    commute_operators,
    context_arg_tactics,
    context_tactics,
    decider_cases,
    decider_parts,
    implication_pattern,
    leading_arity,
    plain_type,
    premises_of,
    proposition_key,
    record_premises,
    relation_of,
    searchable,
    split_top,
    top_words,
    unwrapped,
)
from agents.coq_lookups import (
    SORTS as _SORTS,
)
from agents.coq_scope import included_premises, module_tactics, open_modules, parameter_field
from agents.llm_tactics import LLMTactics
from agents.premises import (
    SCHEME_SUFFIXES,
    PremiseIndex,
    conclusion_of,
    coq_file_premises,
    coq_file_proofs,
    declared_names,
    is_data_type,
    is_rewrite_rule,
    notation_names,
    similar,
    tokens,
)
from agents.tactic_portfolio import (
    COQ_TEMPLATES,
    induction_order,
    instantiate,
    lemmas_of,
    variables_of,
)
from agents.tactic_suggester import Candidate, TacticSuggester
from oracle.proof_common import TheoremTask
from oracle.proof_state import Premise, ProofState, TacticResult
from oracle.strip_coq import CoqSyntaxError, split_sentences

COQ_CLOSERS: list[tuple[str, float]] = [
    ("reflexivity.", 0.1), ("assumption.", 0.1), ("discriminate.", 0.1), ("contradiction.", 0.1),
    ("trivial.", 0.15), ("easy.", 0.15), ("auto.", 0.2), ("congruence.", 0.25), ("tauto.", 0.3),
    ("lia.", 0.3), ("auto with arith.", 0.3), ("auto with datatypes.", 0.3), ("intuition.", 0.4),
    ("eauto.", 0.4), ("now simpl.", 0.3), ("simpl; lia.", 0.4), ("firstorder.", 0.6),
    ("now (intros; subst; auto).", 0.5), ("intuition lia.", 0.6), ("simpl in *; auto.", 0.4),
    ("simpl in *; lia.", 0.5), ("simpl in *; congruence.", 0.5), ("simpl in *; intuition.", 0.6),
    ("ring.", 0.3), ("field.", 0.4), ("lra.", 0.3), ("nra.", 0.6),
    # the order tactic of Coq's ordered structures (Structures/OrdersTac.v: in every `Numbers` functor, and
    # NZOrder's `order'`, which also knows 0 < 1): where the scope has them
    ("order.", 0.3), ("order'.", 0.35),
]
# `eauto` over every hint database, the file's own among them (`Hint Resolve Qle_ceiling : qarith` in Qround.v;
# round twenty-two): `intuition.` is `intuition auto with *`, which chains no lemma through an existential
# (`Qle_trans`'s middle value); depth 3 because `eauto with *` grows with its depth (a failing run at one
# Qround.v state: 0.15 s at depth 3, 2 s at 4, past Coq's timeout at the default 5)
HINT_EAUTO: tuple[str, float] = ("eauto 3 with *.", 0.45)
HINTS_EAUTO = True  # a switch for tests: False offers no `eauto 3 with *.` (the search before round twenty-two)
# `auto` over every hint database to depth 9 (round twenty-seven): `Sets/Powerset_facts.v` proves its algebra of sets by
# `auto 6 with sets` to `auto 9 with sets` (`Union_associative`: the default depth 5 makes no progress, depth 9 closes
# it in 0.04 s); `auto`, unlike `eauto`, leaves no existential to search, and failed within 0.02 s at the first states
# of five theorems of three files read for it. Off by default: in-sample it gained `Union_associative` and lost eight
# other theorems of the file, because it closed its first theorems in one step, and the online learning then had no
# `intros. apply Extensionality_Ensembles. intuition.` (learnt from those theorems' longer proofs) to offer the later
# ones, which `auto 9` cannot close; at cost 1.5 the same (`intros. auto 9 with *.` still came first)
HINT_AUTO_DEEP: tuple[str, float] = ("auto 9 with *.", 0.45)
HINTS_AUTO_DEEP = False  # True offers `auto 9 with *.` among the closers
BUNDLE_MAX_COST = 0.35  # rule closers this cheap are tried together, in one `solve [...]`
# the context's own argument-free tactics (`Ltac auto' := try rewrite <- neq_0_lt_0; auto using le_0_l.` in NDiv.v)
# among the closers that discharge the goals a step opens, after the cheap ones (round thirty-two): a file writes such
# a tactic for the side goals of its own lemma applications (`apply add_mod_idemp_l; auto'.`); offered only as a step,
# the state of three side goals that `apply` leaves ranks behind every state of one goal and is never expanded
OWN_DISCHARGE = True
# a conclusion is a product only by its top-level connective (round thirty-three): `~ In x s <-> mem x s = false`,
# `~ A /\\ ~ B`, `(A -> B) <-> C` and `exists x, P x -> Q x` are none (`intros` fails on each), but the search took
# any `->` or a leading `~` for one and offered them nothing but `intros`, the closers and applied premises: no `split`,
# no rewrite, no witness; False: the search before
TOP_PRODUCTS = True
# `constructor.` on a conclusion that is an applied constant (round thirty-three): `Zis_gcd a b (Z.gcd a b)` and
# `prime 2` are inductive predicates of one constructor whose premises are the proof's steps (`constructor. apply
# Z.gcd_divide_l. ...`); `unfold` refuses an inductive and the constructor's name ranked below the premises offered
CONSTRUCTOR_STEPS = True
CONSTRUCTOR_REFUSALS = 2  # no more `constructor.` in a theorem after Coq said "Not an inductive" this many times
# the discharge of a step's goals ends with `eauto using` the premises ranked on those goals (round thirty-three):
# after `constructor.` the three goals of `Zis_gcd a b (Z.gcd a b)` are each a library lemma's (`Z.gcd_divide_l`,
# ...), which no cheap closer names, and the state of three goals ranked behind every state of one
PREMISE_DISCHARGE = True
HAMMER_CLOSERS: list[tuple[str, float]] = [("sauto.", 0.5), ("hauto.", 0.5), ("qauto.", 0.5)]
_PROP_HINT = re.compile(r"(?<![<>=:!])=(?![>=])|<>|->|<->|/\\|\\/|~|\bTrue\b|\bFalse\b|<=|<|>|\bIn\b|\bForall\b|"
                        r"\bExists\b|\ble\b|\blt\b|\bNoDup\b|\bEven\b|\bOdd\b|\bPermutation\b|\bincl\b|\bsig\b")
# a setoid's equality (`x == y` in every `Numbers` functor and `Structures` module, `x === y` in `Classes`), which
# `_PROP_HINT`'s `=` does not match: before round nineteen `H : 0 - n == 0` was read as a value, so the search
# offered `destruct H`, `induction H` on it and never `rewrite H` or `apply H`
_SETOID_EQ = re.compile(r"(?<![<>=:!])===?(?![>=])|≡")
# a switch for tests: False reads a setoid equation hypothesis as a value and a `==` conclusion as an applied constant
# (before round nineteen)
SETOID_HYPOTHESES = True
# a switch for tests: False reads a hypothesis whose type is an applied predicate with no sign of a proposition in its
# text (`H : set_In a (set_diff x y)`) as a value (before round twenty-four): never `apply L in H`, never `apply H`
PREDICATE_HYPOTHESES = True
# a switch for tests: False splits on the condition of a conclusion's `if` only, never a hypothesis's (before round
# twenty-four: `ListSet.v`'s `set_diff_elim1` has `H : set_In a (if set_mem a0 y then ...)` after `simpl`)
HYPOTHESIS_IFS = True
# a switch for tests: False offers the case splits of the two decision lemmas nearest the goal (before round
# twenty-seven); True reads each lemma's cases at the values: a split one of whose cases a hypothesis already states
# is dropped (`Req_EM_T x 0` at `H : x <> 0`: one case is `H`, the other contradicts it) and the next lemma offered,
# and a lemma whose cases name constants none of which the goal shows (`cos_sin_0_var`) comes after the others
DECIDER_HYPOTHESES = True
_TYPE_HEAD = re.compile(r"^\(?\s*(?P<head>[A-Za-z_][\w'.]*)(?=\s|\)|$)")
# a switch for tests: False offers an equivalence found for the goal's shape only as `apply L` (before round twenty),
# which Coq may take the wrong way round
IFF_DIRECTIONS = True
# the dual of a step (agents.best_first.SIBLING_REPLAY): the stdlib names a lemma's mirror image by its last letter
# (`max_l`/`max_r`, `add_le_mono_l`/`_r`), and `left`/`right` pick a disjunct
_DUAL_NAME = re.compile(r"(?<![\w'])([A-Za-z_][\w'.]*?_)(l|r)(?![\w'])")
_DUAL_SIDE = re.compile(r"(?<![\w'.])(left|right)(?![\w'])")
_GROUP = r"\((?:[^()]|\([^()]*\))*\)"  # a parenthesised term, one level of parentheses inside
_MATCH = re.compile(rf"\bmatch\s+(?P<scrut>[A-Za-z_][\w'.]*(?:\s+(?:[A-Za-z_][\w'.]*|{_GROUP}))*|{_GROUP})\s+with\b")
_IDENT = re.compile(r"[A-Za-z_][\w']*")
_HOLE_IDENT = re.compile(r"(?<![%\w'])[A-Za-z_][\w']*")  # a name, not a scope's key (`nat` of `%nat`)
_LOWER_BOUND = re.compile(r"(?P<low>[^<>=]+?) (?P<rel><=|<) (?P<v>[A-Za-z_][\w']*)")  # `0 <= b`, not `0 <= a < b`
_BINDERS = re.compile(r"^(?:forall|∀)\s+(?P<binders>.*?),", re.S)


def if_scrutinees(concl: str) -> list[str]:
    """The conditions of the ``if C then`` expressions of a conclusion, outermost first (a condition
    with its own ``if``, ``match`` or binder is left out: it cannot be destructed as it is printed)."""
    out: list[str] = []
    for m in re.finditer(r"(?<![\w'])if\s+", concl):
        depth, i = 0, m.end()
        while i < len(concl):
            ch = concl[i]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and concl.startswith(" then", i):
                cond = concl[m.end():i].strip()
                if cond and not re.search(r"(?<![\w'])(?:if|match|fun|forall|exists|let)(?![\w'])", cond) \
                        and cond not in out:
                    out.append(cond)
                break
            i += 1
    return out


def match_scrutinees(text: str) -> list[str]:
    """The values a ``match`` of ``text`` inspects, as ``destruct`` takes them: an application in parentheses
    (``(Rcase_abs x)`` for ``match Rcase_abs x with``: ``destruct Rcase_abs x`` is a syntax error)."""
    out: list[str] = []
    for m in _MATCH.finditer(text):
        scrut = m.group("scrut")
        if re.search(r"\s", scrut) and not scrut.startswith("("):
            scrut = f"({scrut})"
        if scrut not in out:
            out.append(scrut)
    return out


def _free_constants(text: str) -> list[str]:
    """The names ``text`` applies that it does not bind itself (:data:`_BOUND`) and that are no keyword or
    sort, in order, each once."""
    bound = {n for m in _BOUND.finditer(text)
             for n in _IDENT.findall((m.group("names") or m.group("pattern") or "").split(":")[0])}
    names = (m.group("name") for m in _CONSTANT.finditer(text))
    return list(dict.fromkeys(n for n in names if n not in bound and n not in _NOT_CONSTANTS))


def _alternatives(closers: Sequence[Candidate]) -> str:
    """One-sentence closers as the alternatives of a ``solve [...]`` (``reflexivity | Coq.micromega.Lia.lia``:
    no final dot, no ``idtac;`` guard, which only a whole sentence needs)."""
    return " | ".join(c.tactic[:-1].removeprefix("idtac; ") for c in closers)


def leading_binders(concl: str) -> list[str]:
    """The names bound by a goal's leading ``forall`` (``forall (n : nat) (l : list A) d,``)."""
    m = _BINDERS.match(concl.strip())
    if m is None:
        return []
    text = m.group("binders")
    names: list[str] = []
    for group in re.findall(r"\(([^()]*)\)|([^()]+)", text):
        part = group[0] or group[1]
        head = part.split(":")[0]
        names.extend(n for n in head.split() if _IDENT.fullmatch(n))
    return names


_SCOPE_BINDERS = frozenset({"forall", "exists", "exists2", "fun", "∀", "∃"})
_WORD_AT = re.compile(r"[A-Za-z_∀∃][\w']*")


def top_connectives(concl: str) -> list[str]:
    """The connectives ``->``, ``<->``, ``/\\``, ``\\/`` of ``concl`` outside brackets and ``match .. end``,
    before the first binder (whose body runs to the end): ``(A -> B) <-> C`` has ``["<->"]``, ``A -> exists x, P
    x -> Q`` has ``["->"]``."""
    ops: list[str] = []
    depth, i = 0, 0
    while i < len(concl):
        ch = concl[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif (word := _WORD_AT.match(concl, i)) is not None and (i == 0 or not re.match(r"[\w'.]", concl[i - 1])):
            name = word.group(0)
            if depth == 0 and name in _SCOPE_BINDERS:
                break
            depth += (name == "match") - (name == "end" and depth > 0)
            i = word.end()
            continue
        elif depth == 0:
            op = next((o for o in ("<->", "->", "/\\", "\\/") if concl.startswith(o, i)), None)
            if op is not None:
                ops.append(op)
                i += len(op)
                continue
        i += 1
    return ops


def is_product(concl: str) -> bool:
    """Whether ``intros`` introduces something from a goal of conclusion ``concl``: a leading ``forall``, a
    top-level ``->`` (:func:`top_connectives`), or a negation of the whole conclusion (``~ (A /\\ B)``, not ``~ A
    <-> B``, which is an equivalence)."""
    text = " ".join(concl.split())
    if text.startswith(("forall", "∀")):
        return True
    ops = top_connectives(text)
    return "->" in ops or (text.startswith("~") and not {"<->", "/\\", "\\/"} & set(ops))


def leading_binder_types(concl: str) -> list[tuple[str, str]]:
    """(name, type) of each binder of a goal's leading ``forall`` (type "" when it is not written)."""
    m = _BINDERS.match(concl.strip())
    if m is None:
        return []
    out: list[tuple[str, str]] = []
    for group in re.findall(r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)|([^()]+)", m.group("binders")):
        part = group[0] or group[1]
        head, _, typ = part.partition(":")
        out.extend((n, typ.strip()) for n in head.split() if _IDENT.fullmatch(n))
    return out


# symbols too common to look up (every lemma names them)
_UNSEARCHED = frozenset({"=", "->", "<->", "/\\", "\\/", "~", "<>", "S", "O", "0", "1", "true", "false", "nat",
                         "list", "bool", "A", "B", "Type"})


def _too_common(sym: str) -> bool:
    """Whether ``sym`` is no constant worth a ``Search``: a connective, a prelude name, a one-letter variable."""
    return sym in _UNSEARCHED or (len(sym) == 1 and sym.isalpha())


def _binds(tactic: str, name: str) -> bool:
    """Whether ``tactic`` binds ``name`` itself somewhere (``intros name``, ``as [name ...]``,
    ``eqn:name``, ``set (name := ...)``) rather than only refer to it."""
    for m in re.finditer(r"(?<![\w'.])" + re.escape(name) + r"(?![\w'])", tactic):
        if _BINDS.search(tactic[: m.start()]):
            return True
    return False


# a value of the statement split into its constructors, each boolean under them split too, and every case computed
# (`Ascii.v`: `destruct a as [[|][|][|][|][|][|][|][|]]; vm_compute; reflexivity.` for a fact of all 256 characters);
# offered at the statement for its first two values of a named type (round twenty-two)
EXHAUST_STEP = ("intros; destruct {name}; repeat match goal with b : bool |- _ => destruct b end; vm_compute; "
                "reflexivity.")
EXHAUST = True  # a switch for tests: False offers no such step (the search before round twenty-two)
# a switch for tests: True offers it only for a type whose own principle shows finitely many values of booleans
# (round twenty-nine: on `Q`, a record of two numbers, `reflexivity` on the computed goal outran its timeout by
# seconds and the session was lost with the search, in three theorems of `QArith/Qminmax.v`); False: any named type
FINITE_EXHAUST = True
# a switch for tests: False offers no functor parameter's lemma of the theorem's own name (round twenty-two)
NAMESAKES = True
# a switch for tests: True keeps a lemma of the theorem's own short name that Coq's `Search` or `Locate` finds (another
# constant: `N.lt_succ_r`, a functor parameter's, for `ZNatPairs.v`'s own `lt_succ_r`), offered at every state; False
# drops every such lemma and offers parameters' namesakes at the statement only (before round twenty-three). The
# original itself is never among them: the checker's session and the agent's alike leave the target's own module
# unloaded (oracle/coq/modules.py), and a session that has it loaded (a preload that reaches it) keeps the old rule
OTHER_NAMESAKES = True
# a switch for tests: True offers `unfold` of every definition of a module of the file at once where the goal names
# one of them (`unfold Z.pred, Z.succ, Z.eq, ...` in `ZNatPairs.v`, where `==` is `Z.eq` and no name shows it); False
# unfolds one definition a step (before round twenty-three)
MODULE_UNFOLDS = True
# a switch for tests: True reads the context's `Infix` and `Notation` sentences, so that a goal showing a file
# definition's symbol offers `unfold` of it (`Local Infix "+++" := def_add`: `0 +++ y == y` in `NDefOps.v`, whose
# proofs begin `unfold def_add`); False unfolds only what the goal names (before round twenty-five)
NOTATION_UNFOLDS = True
# a switch for tests: True leaves to the checker a proof resting on a library's axiom that prints unqualified (the
# primitives of `Uint63`, imported: `int`, `lsr`); False vetoes it as the agent's own (before round twenty-three,
# which vetoed every proof through `Uint63.to_Z_bounded`)
LIBRARY_AXIOMS = True
# a switch for tests: False offers a lemma that replaces a constant by its value only as `rewrite L.` (one occurrence
# at a time, before round twenty-two), True also as `rewrite !L.` where the goal names that constant twice or more
REWRITE_ALL = True


def _operands(term: str) -> tuple[str, str, str] | None:
    """A term that is an operation at its top, as (left operand, operation, right operand), split at the last
    of its loosest operations (``a + b + c``: ``a + b``, ``+``, ``c``; ``n * m + p``: ``n * m``, ``+``, ``p``):
    None for any other term."""
    words = top_words(unwrapped(term))
    level = next((ops for ops in _OPERATIONS if ops & set(words)), frozenset())
    at = [k for k, w in enumerate(words) if w in level]
    if not at or not 0 < at[-1] < len(words) - 1:
        return None
    k = at[-1]
    return " ".join(words[:k]), words[k], " ".join(words[k + 1:])


def replaced_constant(statement: str) -> str | None:
    """The constant an equation ``f x .. = rhs`` replaces when ``rhs`` no longer names it (``two_p_equiv``:
    ``two_p x = 2 ^ x``): ``rewrite !L`` then stops once none is left, where a rule whose right side names it again
    (``n + m = m + n``) would loop. None for any other lemma."""
    words = top_words(" ".join(conclusion_of(statement).split()))
    if words.count("=") != 1:
        return None
    at = words.index("=")
    left, right = words[:at], words[at + 1:]
    if len(left) < 2 or not right or not re.fullmatch(r"[A-Za-z_][\w'.]*", left[0]):
        return None
    head = left[0]
    return None if occurrences(head, " ".join(right)) else head


def occurrences(name: str, text: str) -> int:
    """How often ``text`` names the constant ``name`` (by its short name, qualified or not)."""
    return len(re.findall(rf"(?<![\w']){re.escape(name.split('.')[-1])}(?![\w'.])", text))


def _is_prop(typ: str) -> bool:
    """Whether a hypothesis of this type is a proof (``H : n <= m``, ``H : x == y``), not a value (``n : t``)."""
    return bool(_PROP_HINT.search(typ)) or typ.startswith(("forall", "exists", "~")) or (
        SETOID_HYPOTHESES and bool(_SETOID_EQ.search(typ)))


def returns_prop(typ: str) -> bool:
    """Whether a constant of this type is a predicate or a proposition: its type ends in ``Prop``
    (``A -> set -> Prop``, ``forall A : Type, list A -> Prop``, ``Prop``)."""
    typ = " ".join(typ.split())
    return typ == "Prop" or bool(re.search(r"(?:->|,)\s*Prop$", typ))


def _witness_values(hyps: Sequence[tuple[str, str]]) -> list[str]:
    """The latest two local values whose type is a named type or a function between named types (``f' : A -> B``;
    not ``fK : cancel f f'``, which reads as a proof), the latest first."""
    typed = [(name, " ".join(typ.split())) for name, typ in hyps]
    sorts = {name: typ for name, typ in typed if typ in _SORTS}
    return [name for name, typ in typed if typ not in _SORTS
            and all(plain_type(piece) and sorts.get(piece, "Type") != "Prop" for piece in typ.split(" -> "))][-2:][::-1]


def _applied_predicate(typ: str) -> bool:
    """A hypothesis type that is a predicate applied to arguments (``clos_trans_1n R x y``, ``Permutation l l'``), not
    a connective, an equation, an order's notation or a product: what an induction on the derivation takes apart."""
    norm = " ".join(typ.split())
    words = split_top(norm, " ")
    return len(words) >= 2 and bool(_IDENT.fullmatch(words[0])) and words[0] not in ("not", "True", "False") and \
        not any(w in RELATION_INFIX or w in ("->", "<->", "/\\", "\\/", "=", "<>", "==") for w in words)


def _predicate_head(typ: str) -> str:
    """The predicate's name in a hypothesis type :func:`_applied_predicate` admits (``le`` of ``(le a b)``)."""
    return typ.split()[0].lstrip("(")


def middle_binders(statement: str) -> list[str]:
    """The names a statement's leading ``forall`` binds that its conclusion does not show: what ``apply`` cannot
    infer from the goal (``y`` of ``forall x y z, R x y -> R y z -> R x z``), which ``apply L with v`` names."""
    shown = set(tokens(conclusion_of(statement)))
    return [n for n in leading_binders(statement) if n not in shown]


def _middle_values(concl: str, hyps: Sequence[tuple[str, str]], props: set[str]) -> list[str]:
    """The latest two local values that a hypothesis names and the conclusion does not (:data:`MIDDLE_VALUES`): at
    ``H : R* x y, H0 : R* y z |- R* x z``, ``y``, the step's middle."""
    shown = set(tokens(concl))
    named = {w for _, t in hyps if t in props for w in tokens(t)}
    return [name for name, typ in hyps if plain_type(typ) and not _is_prop(typ)
            and name in named and name not in shown][-2:][::-1]


def _latest_values(hyps: Sequence[tuple[str, str]]) -> list[str]:
    """The latest two local values (not proofs, not types) of a state, the latest first: what the context's
    tactics of one or two terms are called on and what an ``exists`` is offered as its witness."""
    return [name for name, typ in hyps if plain_type(typ) and not _is_prop(typ)][-2:][::-1]


# tactics a context may lack (lia needs Lia; the Init files run without the prelude; sauto needs
# CoqHammer): probed once per theorem, and no candidate that names a missing one is tried
GATED_TACTICS = ("lia", "nia", "congruence", "tauto", "intuition", "firstorder", "easy", "now", "sauto",
                 "hauto", "qauto", "eauto", "f_equal", "discriminate", "decide", "ring", "field", "lra", "nra",
                 "hammer", "order", "order'")
# a switch for tests: False reads a gated tactic's name that the context gives a term (`Relation_Definitions`' record
# `order`: "Tactic expected") as the tactic, as before round twenty-eight: every bundle of closers naming it then failed
# whole, at every state of a file where `Relation_Definitions` is imported and no `order` tactic is (`Classes.
# RelationClasses` exports it: 10 of 48 stdlib files sampled, in `Classes`, `MSets`, `FSets`, `Structures`, `QArith`...)
NAMED_TERMS = True
# Ltac tactics a context may load without importing them (CoqHammer's tactics load Lia; many Reals files
# load Lra): reachable by their qualified names, which the probe tries when the short one is missing
QUALIFIED_TACTICS = {"lia": "Coq.micromega.Lia.lia", "nia": "Coq.micromega.Lia.nia",
                     "lra": "Coq.micromega.Lra.lra", "nra": "Coq.micromega.Lra.nra"}
_GATED_NAME = re.compile(r"(?<![\w'.])(?P<name>" + "|".join(QUALIFIED_TACTICS) + r")(?![\w'])")
# context sentences that change which tactics (and names) are in scope
_SCOPE_SENTENCE = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Export)\s+)?(?:Require|From|Import|Export|Ltac|Tactic|"
                             r"Module|End|Section|Open|Close|Declare|Notation|Infix|Reserved|Set|Unset|Include)\b")
_QUALIFIED_HEAD = re.compile(r"^[A-Z][\w']*(?:\.[A-Za-z_][\w']*)+(?=[\s;|.]|$)")
_REWRITE = re.compile(r"^rewrite\s+(?P<back><-\s*)?(?P<lemma>[\w'.]+|\(@?[\w'. ]+\))\s*\.$")
MAX_PATTERN_QUERIES = 12  # `Search (conclusion pattern)` calls per theorem
# a switch for tests: True asks Coq's `Search` for the lemmas of a constant a state's goal names and the statement
# did not (`recursion` once `unfold strong_rec0` showed it, in `NStrongRec.v`, whose proof goes on `rewrite
# recursion_0`), at most MAX_FRESH_QUERIES times a theorem; False ranks only what the statement's symbols found
# (before round twenty-three)
FRESH_SYMBOLS = True
MAX_FRESH_QUERIES = 6
# round twelve's three rules are off by default: none gained a theorem on a set it was not read from (out-of-sample 20
# and 21), so the default prover stays round eleven's, the one measured blind on out-of-sample 18 to 21 (docs/proofs.md)
HYPOTHESIS_RANK = False  # on: the lemmas a conclusion's shape found are ranked by the premises the hypotheses give
RANKED_PER_PATTERN = 40  # the lemmas kept per shape, by their symbols, before the hypotheses rank them
GENERAL_PATTERNS = False  # on: the shape with constant leaves as holes too (lost `sqrt_Rsqr_abs` on out-of-sample 21)
# on: the lemmas stated of any value of the goal's relation and constant (`n <> 0` for `fact n <> 0`), whose premises
# say what of the applied side (`0 < fact n`) the file's lemmas may give (round twenty-nine)
ABSTRACTED_HEADS = True
MAX_ABSTRACTED = 3  # such lemmas offered for one shape
# on: a conclusion written with `>` or `>=` is also searched as the lemmas state it, `<` or `<=` with its sides
# turned (`{_ < _} + {_ = _}` for `{m > n} + {n = m}`: `Search` matches the notation as written, and `gt n m` is
# `lt m n` by its definition, so `apply` takes the `<` lemma); and a decision's conclusion `{A} + {B}` is a shape to
# search by (round thirty)
FLIPPED_RELATIONS = True
SUMBOOL_PATTERNS = True
MAX_FLIPPED = 4  # such lemmas offered for one shape
_LOW_CONNECTIVES = frozenset({"/\\", "\\/", "->", "<->"})
_TOP_RELATIONS = ("<>", "=", "<", "<=", ">", ">=")
# a switch for tests: False reads a conclusion with a `?` of a notation (`(n <=? m) = true`, `(n ?= m) = Gt`) as one
# with no shape to search by, as before round twenty-one
QUERY_NOTATIONS = True
_PLAIN_QUERY_TEXT = re.compile(r"[\w'. ()+*:<>=@\[\]^/\\~-]+")
# a name or numeral of a pattern (general_pattern decides which are leaves)
_WORD = re.compile(r"(?<![\w'.%])(?:\d+|[A-Za-z][\w']*(?:\.[A-Za-z_][\w']*)*)(?![\w'.])")
WITNESSES = True  # a switch for tests: False offers no `exists v` nor `red` on a bracketed notation (round eleven)
CONSTRUCTOR_WITNESSES = False  # on: `exists f.` on an applied predicate of one constructor, not only on `exists ..`
WITNESS_SOURCE = "witness"  # the source of those `exists` on an applied predicate (its own figures in by_source)
# a boolean restatement (`mem y (add x s) = eqb x y || mem y s`) proved in one step through the equivalences that
# reflect its booleans and restate what they reflect (agents/coq_booleans.py; round twenty-six)
BOOLEAN_REFLECTIONS = True
# an induction along an order from a hypothesis `H : 0 <= b` (`apply le_ind with (4 := H).`, the stdlib's `Numbers`
# files), and `solve_proper.` for the `Proper` goal it opens (round twenty-six): off, it gained nothing in-sample
# (NZPow.v 4 of 29 with it and without: the step was taken, and the base case and the inductive step, five sentences
# or more, were out of reach within the 6,000 tactic runs)
ORDER_INDUCTIONS = False
# `intro.` at an order or a disequality (`x <= y`, `x <> y`), which may unfold to a product: off, it gained nothing
# in-sample (ConstructiveRealsMorphisms.v 5 of 33 with it and without: the library's learned `intro abs.` was there)
RELATION_INTROS = False
# a switch for tests: True offers, at a goal relating two terms of one operation (`n + p < m + q`), a transitivity
# lemma with the middle term that crosses them (`apply lt_trans with (m + p).`: `n + p < m + p` and `m + p < m + q`,
# each a monotonicity step), as `NZAddOrder.v`'s `add_lt_mono` and `Reals`' compatibility lemmas are proved; False
# offers a transitivity step only through a hypothesis (before round twenty-five)
CROSSED_MIDDLES = True
# a switch for tests: False offers no induction on a hypothesis that is an applied predicate (before round
# twenty-eight: `inversion H` and, for a connective, `destruct H` only), so a relation's closure was never taken apart
# with its induction hypotheses unless a learnt step named the induction
RULE_INDUCTIONS = True
# on: that induction also with the hypotheses introduced after the derivation given back to the goal first (`revert l2
# l2' H0; induction H.`, what `induction 1` does before the later binders are introduced), so that its induction
# hypothesis holds for every value of them (SetoidList.v's `eqlistA_rev_app`, round thirty). Off by default: it
# proves `eqlistA_rev_app` only at 53 s of search, and on SetoidList.v (in-sample) it gave 33 of 66 against the blind
# 34 (`equivlistA_cons_nil`, proved at 24.9 s of 25 without it, lost at the seconds): not shown to pay
GENERALIZED_DERIVATIONS = False
# on: each of the latest two hypotheses is also taken forward by the lemmas that have its shape as a premise (`apply
# in_app_or in H.` at `H : In a (l ++ m)`: Coq's `Search ((In _ (_ ++ _)) -> _)`), at most MAX_FORWARD of them; off,
# `apply L in H` only with the lemmas ranked for the conclusion. Measured and left off (round thirty-one): SetoidList.v
# in-sample 34 of 66 with it, the same 34 as blind without it (two found by `apply .. in H` instead), its lookups 19 s
# over the file; out-of-sample 58 in-sample 14 of 22 against the blind 15 (`Zmin_spec`, found at 24.1 s of 25 blind,
# lost at the seconds): not shown to pay
FORWARD_LEMMAS = False
MAX_FORWARD = 3
# on: the induction on a value with the later values reverted first (`revert m; induction n.`) reverts the later
# hypotheses that name those values too (`revert m H; induction n.`), in their order; off, it reverts the values
# alone, which Coq refuses ("m is used in hypothesis H") whenever a later hypothesis is about one of them. Measured
# and left off (round thirty-one): SetoidList.v in-sample 32 of 66 with it against the blind 34; rerun alone, its
# `InA_split` took 22.0 s against 19.2 s without it and `equivlistA_cons_nil` (25.97 s without) was lost at the
# seconds: the reverts that now succeed cost time there and gained nothing
REVERT_DEPENDENTS = False
# a switch: on, a lemma (among the three best premises) or a hypothesis whose statement binds a value its conclusion
# does not show is offered as `apply L with v` for the latest two local values a hypothesis names and the goal does not
# (round twenty-eight: `Operators_Properties.v`'s `constructor 3 with y`, `apply HIS with y0`); off, only `eapply L`.
# Measured and left off: `Operators_Properties.v` 15 of 35 with it and without, the same theorems
MIDDLE_VALUES = False
MAX_CROSSED_STEPS = 4  # `apply L with (M).` steps offered at one state (two middles, the best-matched lemmas)
# the operations a crossed middle splits at, loosest first (a term's top operation is its loosest one)
_OPERATIONS = (frozenset({"||"}), frozenset({"&&"}), frozenset({"+", "-", "++"}), frozenset({"*", "/"}),
               frozenset({"^"}))
MAX_TRANS_STEPS = 4  # steps through a transitivity lemma offered at one state (agents.coq_lookups.TRANSITIVE)
MAX_IMPLIED = 3  # lemmas offered for each implication a state's hypotheses and conclusion make (coq_lookups.IMPLIED)
EQUIVALENCES = True  # a switch for tests: False rewrites no hypothesis with an equivalence of its shape (round 21)
# a case analysis on a variable whose type is not an inductive type: Coq's answer
_NOT_INDUCTIVE = re.compile(r"Not an inductive (?:product|definition|type)|is not an inductive type")
_CASE_ANALYSIS = re.compile(r"^(?:intros;\s*)?(?:revert [^;]*;\s*)?(?:induction|destruct|elim|case)\s+(?P<var>[A-Za-z_][\w']*)"
                            r"(?=[\s.;])")
_NOT_FOUND = re.compile(r"The reference (?P<name>[A-Za-z_][\w'.]*) was not found in the current environment")
# where a tactic binds a name of its own (`intros x`, `as [a b]`, `eqn:E`, `set (x := ...)`): such a name is not a reference
_BINDS = re.compile(r"(?:\bintros?\s+[^.;]*|\bas\s*[\[(]?[^.;]*|\beqn:\s*|\b(?:set|pose|remember|assert|cut)\s*\(\s*)$")
FORGET_MISSING = True  # a switch for tests: False offers again a tactic naming what Coq said it does not know
_SELECTOR = re.compile(r"^\s*(?:all|par|!|\[[A-Za-z_][\w']*\]|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*)"
                       r"\s*:(?!=)\s*")
# switches for tests (False: the search before each rule)
SCREEN_SUGGESTIONS = True  # a suggested tactic the context cannot parse is not offered
INDUCTIVE_ONLY = True  # no induction/destruct on a variable whose type is not inductive
# CoqHammer's tactics that may run out of time in one theorem before none is run any more (0: no limit). Each
# timeout costs a whole tactic timer (2 s), and in the Reals files they time out more often than they close
HAMMER_TIMEOUTS = 3
# the same for the steps this run learned from its own proofs (agents/learned_tactics.py; round eight): a step learnt
# early (`induction f; sauto.`) is offered in every later theorem with a like goal, and on out-of-sample 9 each such
# theorem spent 8-12 s of its 25 s on 4-6 of them running out of time (0: no limit)
LEARNED_TIMEOUTS = 2
FILE_AXIOMS = True  # the file's own `Axiom`s are premises (the checker allows those the original rests on)
LIBRARY_UNFOLD = True  # `unfold C` for a library constant the goal or statement names (round six; False: the file's own only)
MAX_LIBRARY_UNFOLDS = 3
_UNFOLD_ONE = re.compile(r"^unfold (?P<name>[A-Za-z_][\w'.]*)\.$")
_CANNOT_UNFOLD = re.compile(r"is opaque|Cannot coerce .* to an evaluable reference|not (?:a )?(?:defined|evaluable)")
# a (possibly qualified) name, ASCII only (`x²` is a notation, not a constant)
_CONSTANT = re.compile(r"(?<![\w'.])(?P<name>[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)*)(?![\w'.])")
# `Lemma name binders :` before a statement's type (its binders are the statement's own names)
_STATEMENT_HEAD = re.compile(r"^\s*(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global)\s+)?(?:Lemma|Theorem|Fact|Remark|Corollary|"
                             r"Proposition|Example|Definition|Instance)\s+[A-Za-z_][\w']*")
# names a conclusion binds itself (`fun x =>`, `exists y,`, a match branch's `| S k =>`)
_BOUND = re.compile(r"(?:\bfun|\bforall|\bexists|∀|∃)\s+(?P<names>[^,]*?)(?:,|=>)|\|\s*(?P<pattern>[^|]*?)=>")
# words of a printed goal that are not constants `unfold` could take
_NOT_CONSTANTS = frozenset({"forall", "exists", "fun", "match", "with", "end", "let", "in", "if", "then", "else",
                            "as", "return", "Type", "Set", "Prop", "SProp", "True", "False", "_"})


def conclusion_pattern(concl: str, local_names: Sequence[str]) -> str:
    """The goal's conclusion with its local variables as holes (``_``), for ``Search``: "" when it
    is a product, has no constant left, or holds characters a query must not carry."""
    text = " ".join(concl.split())
    chars = QUERY_TEXT if QUERY_NOTATIONS else _PLAIN_QUERY_TEXT
    if not searchable(text, 160, chars) and not (
            SUMBOOL_PATTERNS and _sumbool(text) and searchable(text.replace("{", "(").replace("}", ")"), 160, chars)):
        return ""
    out = hole_pattern(text, local_names)
    if not re.search(r"[^\s_()=]", out):  # holes only (`_ = _`): every equation would match
        return ""
    return out


def _sumbool(text: str) -> bool:
    """Whether ``text`` is a decision's type, ``{A} + {B}`` (or more cases), no case a subset type (``{x | P x}``,
    ``{x : A & P x}``) nor a record."""
    parts = split_top(text, " + ")
    return len(parts) >= 2 and all(
        p.startswith("{") and p.endswith("}") and len(split_top(p[1:-1], " + ")) == 1
        and not re.search(r"[|:&]", p[1:-1]) for p in parts)


def _enclosed(word: str) -> tuple[str, str, str] | None:
    """A word that is one bracketed group (``(a > b)%Z``, ``{m > n}``) as (its opening, its inside, the rest from
    its closing bracket on); None for another word."""
    if word[:1] not in "({":
        return None
    depth = 0
    for i, ch in enumerate(word):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            return (word[0], word[1:i], word[i:]) if re.fullmatch(r"[)}](?:%\w+)?", word[i:]) else None
    return None


def flipped_pattern(pattern: str) -> str:
    """``pattern`` with each ``a > b`` as ``b < a`` and each ``a >= b`` as ``b <= a``, inside its brackets too
    (``{_ < _} + {_ = _}`` for ``{_ > _} + {_ = _}``): the spelling the lemmas are stated in, which ``Search``
    needs (it matches the notation as written). "" when the pattern has no such relation."""
    def flip(text: str) -> str:
        words = []
        for word in top_words(text):
            group = _enclosed(word)
            words.append(group[0] + flip(group[1]) + group[2] if group is not None else word)
        out: list[str] = []
        start = 0
        for end in [*[k for k, w in enumerate(words) if w in _LOW_CONNECTIVES], len(words)]:
            part = words[start:end]
            lead = part[:1] if part[:1] == ["~"] else []
            body = part[len(lead):]
            at = [k for k, w in enumerate(body) if w in RELATION_INFIX or w in ("=", "<>")]
            if len(at) == 1 and body[at[0]] in FLIPPED and 0 < at[0] < len(body) - 1:
                k = at[0]
                body = [*body[k + 1:], FLIPPED[body[k]], *body[:k]]
            out.extend([*lead, *body, *words[end:end + 1]])
            start = end + 1
        return " ".join(out)

    flipped = flip(pattern)
    return flipped if flipped != pattern else ""


def abstracted_patterns(pattern: str) -> list[str]:
    """``pattern`` with one side of its relation a hole where that side is a constant applied to arguments and the
    other side shows a symbol (``_ <> 0`` for ``fact _ <> 0``, ``0 < _`` for ``0 < f _ _``): the shape of a lemma
    stated for any value, whose premises then speak of the applied side. Empty for another pattern (no relation at
    the top, both sides applied or bare holes)."""
    words = top_words(pattern)
    at = [i for i, w in enumerate(words) if w in _TOP_RELATIONS]
    if len(at) != 1:
        return []
    i = at[0]
    left, right = words[:i], words[i + 1:]

    def applied(side: list[str]) -> bool:
        return len(side) >= 2 and re.fullmatch(r"[A-Za-z][\w'.]*", side[0]) is not None

    def shows(side: list[str]) -> bool:
        return any(re.search(r"[^\s_()]", w) for w in side)

    out: list[str] = []
    if applied(left) and shows(right) and not applied(right):
        out.append(" ".join(["_", words[i], *right]))
    if applied(right) and shows(left) and not applied(left):
        out.append(" ".join([*left, words[i], "_"]))
    return out


def general_pattern(pattern: str) -> str:
    """``pattern`` with its constant leaves as holes too (``_ * _ <= _ * _`` for ``_ * _ <= 0 * _``): a lemma
    stated for any value (``m * p <= n * p``) has no ``0`` for ``Search`` to match, yet ``apply`` instantiates
    it (round twelve). A leaf is a numeral, or a name no argument follows; "" when no leaf changed, or when
    fewer than two symbols are left (``_ < _`` matches every lemma of the relation)."""
    def leaf(m: re.Match[str]) -> str:
        before, after = pattern[:m.start()].rstrip(), pattern[m.end():].lstrip()
        argument = before[-1:] in ("_", ")", "'") or before[-1:].isalnum()  # a term before it: `mul zero _`
        applied = after[:1] == "(" or after[:1] == "_" or after[:1].isalnum()  # a term after it: `S _`
        return "_" if argument or not applied else m.group(0)

    out = _WORD.sub(leaf, pattern)
    if out == pattern or len(re.findall(r"[^\s_()]+", out)) < 2:
        return ""
    return out


_PATTERN_TOKEN = re.compile(r"[A-Za-z][\w'.]*|\d+|_|[()]|[^\w\s()]+")
# symbols a hole of a pattern does not reach across (a relation or connective at its own level)
_RELATION_TOKENS = frozenset({"=", "<>", "<", "<=", ">", ">=", "==", "<->", "->", "/\\", "\\/", "~", "|", ",", ":"})


def pattern_instance(query: str, pattern: str) -> bool:
    """Whether ``Search (query)`` would match a conclusion of ``pattern`` (both as :func:`premise_pattern` writes
    them): each hole of ``query`` stands for a balanced span of ``pattern`` with no relation at its level
    (``_ * _ <= _`` matches ``_ * _ <= _ * _``; precedence is not checked). :meth:`CoqTactics._unmet` asks it
    whether a hypothesis gives a lemma's premise."""
    q, p = _PATTERN_TOKEN.findall(query), _PATTERN_TOKEN.findall(pattern)
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(q):
            ok = j == len(p)
        elif q[i] != "_":
            ok = j < len(p) and q[i] == p[j] and match(i + 1, j + 1)
        else:
            ok, depth, k = False, 0, j
            while k < len(p) and not ok:
                depth += (p[k] == "(") - (p[k] == ")")
                if depth < 0 or (depth == 0 and p[k] in _RELATION_TOKENS):
                    break
                k += 1
                ok = depth == 0 and match(i + 1, k)
        memo[(i, j)] = ok
        return ok

    return match(0, 0)


def hole_pattern(text: str, names: Sequence[str]) -> str:
    """``text`` with each of ``names`` as a hole, whatever is left (``_ <= 0`` for ``p <= 0``, ``_ = _``):
    what :func:`pattern_instance` compares a lemma's premise with a hypothesis by."""
    holes = set(names)
    return _HOLE_IDENT.sub(lambda m: "_" if m.group(0) in holes else m.group(0), " ".join(text.split()))


def premise_pattern(statement: str) -> str:
    """A lemma's conclusion as :func:`conclusion_pattern` writes a goal's, its bound variables as holes
    (``_ * _ <= _ * _`` for ``forall n m p : t, 0 <= p -> n <= m -> p * n <= p * m``): the lemmas whose
    pattern is a goal's are those ``apply`` may close it with. An equivalence's is its right side's
    (:func:`iff_patterns` gives both)."""
    return conclusion_patterns(statement)[-1]


@functools.lru_cache(maxsize=16384)
def conclusion_patterns(statement: str) -> tuple[str, ...]:
    """The patterns of a lemma's conclusion (:func:`premise_pattern`): one, or an equivalence's two sides, left
    first. Kept: each ``Search`` pattern of a theorem goes over the same lemmas of its scope again."""
    text = " ".join(statement.split())
    bound = [n for m in re.finditer(r"(?:forall|∀)\s", text) for n in leading_binders(text[m.start():])]
    concl = conclusion_of(text)
    sides = split_top(unwrapped(concl), "<->")
    if len(sides) == 2:
        return conclusion_pattern(unwrapped(sides[0]), bound), conclusion_pattern(unwrapped(sides[1]), bound)
    return (conclusion_pattern(concl, bound),)


def iff_patterns(statement: str) -> tuple[str, str] | None:
    """The two sides of a lemma whose conclusion is an equivalence ``A <-> B``, as :func:`premise_pattern` writes a
    conclusion (``("_ <= _", "S _ <= S _")`` for ``forall n m, n <= m <-> S n <= S m``); None for another lemma.
    ``apply L`` on a goal of B's shape may take the other way (in a functor, ``_ <= _`` unifies with ``S n <= S m``,
    and the goal becomes ``S (S n) <= S (S m)``): ``apply -> L`` proves B, ``apply <- L`` proves A."""
    patterns = conclusion_patterns(statement)
    return (patterns[0], patterns[1]) if len(patterns) == 2 else None


def _symbols(pattern: str) -> int:
    """How many symbols a pattern has besides its holes and parentheses (``(_ <=? _) = true``: 3)."""
    return sum(1 for token in _PATTERN_TOKEN.findall(pattern) if token not in ("_", "(", ")"))


def _unrelated(statement: str, text: str) -> bool:
    """Whether a decision lemma's cases name constants and ``text`` (the goal, its hypotheses with it) shows
    none of them: ``cos_sin_0_var : forall x : R, cos x <> 0 \\/ sin x <> 0`` at ``derivable_pt Rabs x``;
    ``Zeven_odd_dec`` (``{Zeven n} + {Zodd n}``) is related to ``Zeven n``. A relation or a numeral is no constant."""
    read = decider_parts(statement)
    if read is None:
        return False
    bound = set(read[0]) | _NOT_CONSTANTS
    names = [n for n in dict.fromkeys(re.findall(r"(?<![\w'.])[A-Za-z_][\w'.]*", read[1])) if n not in bound]
    return bool(names) and not any(re.search(rf"(?<![\w'.]){re.escape(n)}(?![\w'.])", text) for n in names)


def _given_relations(hyps: Sequence[tuple[str, str]]) -> collections.Counter[str]:
    """The relations the latest three hypotheses state (:func:`relation_of`'s patterns), counted: what a
    transitivity step's premises may be given by."""
    return collections.Counter(rel[0] for _, t in hyps[::-1][:3] if (rel := relation_of(t)) is not None)


class CoqTactics(TacticSource):
    """Coq candidates for one theorem (see the module docstring)."""

    def __init__(self, states: Any, task: TheoremTask, root: ProofState, *, library: bool = True,
                 hammer: bool = False, portfolio: bool = True, premises_per_node: int = 8,
                 llm: LLMTactics | None = None, setting: str = "library",
                 suggesters: Sequence[TacticSuggester] = (), hammer_seconds: float = 0.0,
                 probe_cache: dict[tuple[object, ...], tuple[frozenset[str], dict[str, str]]] | None = None,
                 scope_facts: dict[tuple[object, ...], ScopeFacts] | None = None,
                 hammer_cap_seconds: float | None = None) -> None:
        self.states = states
        # CoqHammer's tactics (sauto, hauto, qauto, `induction x; sauto`) may take this many seconds of a
        # theorem's search, no more (None: no cap): they fail slowly and rarely close a goal the rules do not
        self.hammer_cap_seconds = hammer_cap_seconds
        self.hammer_spent = 0.0
        # which tactics a scope can run, shared by the theorems of a run (the agent keeps it)
        self.probe_cache = probe_cache if probe_cache is not None else {}
        self.hammer_seconds = hammer_seconds if hammer else 0.0
        self.task = task
        self.setting = setting
        self.hammer_wanted = hammer
        # rediscover: the earlier theorems read `Admitted.` in the view (the checker has their proofs)
        file_premises, self.definitions = coq_file_premises(task.context, admitted=setting == "rediscover",
                                                            axioms=FILE_AXIOMS)
        self.file_index = PremiseIndex(file_premises)
        self.file_lemmas = {p.name.split(".")[-1] for p in file_premises}
        # library setting only: earlier human proofs of the file, most similar statements first (whole
        # scripts to retry at the statement, their sentences as candidates everywhere); the rediscover
        # view has none, and the search never reads them there
        proofs = coq_file_proofs(task.context) if setting == "library" else []
        self.similar_proofs = similar(task.statement, proofs, self.file_index, limit=8)
        sentences: list[str] = []
        for _, _, body in self.similar_proofs:
            for sentence in body.split("\n"):
                if not re.fullmatch(r"[-+*]+|[{}]", sentence) and sentence not in sentences and len(sentence) < 200:
                    sentences.append(sentence)
        self.retrieved = sentences[:16]
        self.root, self.library, self.wide = root, library, False
        self.library_index = PremiseIndex(self._library(root) if library else [])
        self.hammer = hammer
        self.portfolio = portfolio
        self.premises_per_node = premises_per_node
        self.llm = llm
        self.slow: dict[str, int] = {}  # tactic head -> timeouts in this theorem
        self.hammer_timeouts = 0  # CoqHammer's tactics (any of them) that ran out of time in this theorem
        self.learned_timeouts = 0  # the run's learned steps that ran out of time in this theorem
        self.constructor_refusals = 0  # `constructor.` steps Coq answered "Not an inductive" in this theorem
        self._statement_constants: list[str] | None = None  # the statement's names `unfold` may take
        self.aliases: dict[str, str] = {}  # a gated tactic the context loads but does not import -> full name
        try:  # the context's sentences, cut once: the scope key and the context's own tactics read them
            codes: tuple[str, ...] | None = tuple(u.code for u in split_sentences(task.context))
        except CoqSyntaxError:
            codes = None
        self.scope_key = self._scope_key(codes)
        self.notations = notation_names(codes) if codes is not None and NOTATION_UNFOLDS else []
        self.unknown: set[str] = self._unavailable(root)  # tactics this context cannot run (lia without Lia)
        self.allowed_axioms: tuple[str, ...] = ()
        # a second search after the checker refused (agents.proof_search): the refused proofs' tactics, vetoed,
        # and the axioms the refusals named, neither named by a candidate nor allowed under a proof
        self.refused_proofs: set[tuple[str, ...]] = set()
        self.banned_axioms: set[str] = set()
        self.suggesters = [*suggesters, *([llm] if llm is not None else [])]
        for suggester in self.suggesters:
            if hasattr(suggester, "screen"):  # a suggester asks before it fills a slot (ScreenedSuggester)
                suggester.screen = self.parses_here if SCREEN_SUGGESTIONS else None
        self.concl_premises: dict[str, list[Premise]] = {}  # conclusion pattern -> lemmas Search found
        self.pattern_queries = 0
        self.fresh_found: dict[str, list[Premise]] = {}  # a constant new to a state's goal -> its lemmas (FRESH_SYMBOLS)
        self.fresh_queries = 0
        self._premise_patterns: dict[str, list[str]] = {}  # lemma -> its premises as hole patterns
        self._instances: dict[tuple[str, str], bool] = {}  # (hypothesis, premise) patterns -> whether it gives it
        facts = scope_facts if scope_facts is not None else {}
        self.facts = facts.setdefault(self.scope_key, ScopeFacts()) if self.scope_key is not None else ScopeFacts()
        self._refused_before: int = getattr(states, "refused_queries", 0)  # the proof states' count at the start
        self.case_types: dict[str, str] = {}  # a case-analysis tactic offered -> its variable's type
        self.witness_of: dict[str, str] = {}  # an `exists` offered on an applied predicate -> that predicate
        # the last state's hypotheses and which of their types are propositions (:meth:`_props`): `candidates` and
        # the helpers it calls read them for one state
        self._props_of: tuple[tuple[tuple[str, str], ...], set[str]] = ((), set())
        # commutativity, induction, decision lemmas; a lemma of the theorem's own short name is kept where the
        # original's module is not loaded here (OTHER_NAMESAKES)
        self.lookups = ScopeLookups(self.facts, states, task.name,
                                    namesakes=OTHER_NAMESAKES and not self._original_loaded(states))
        # the modules open at the theorem (a functor's parameters, its `Include`s): agents/coq_scope.py
        self.modules = open_modules(codes or ())
        if self.facts.included is None:
            self.facts.included = included_premises(states, self.modules) if library else ()
        self.included = [p for p in self.facts.included if p.name != task.name.split(".")[-1]]
        if self.included:
            self.library_index = self.library_index.add(self.included)
        if coq_lookups.RECORD_FIELDS and root.detail:  # `(Radd_comm Rth)` for a section's `Rth : ring_theory ...`
            # a field the file restates as a lemma of its own (`Rplus_comm` for `(SORplus_comm sor)`) is left to that
            # lemma; the others go first in the index, so that a tie goes to the file's own (ranked latest first)
            stated = {" ".join(p.statement.split()) for p in self.file_index.premises}
            laws = [p for p in record_premises(states, self.facts, [(n, t) for names, t in root.detail[0].hyps
                                                                    for n in names])
                    if " ".join(p.statement.split()) not in stated]
            if laws:
                self.file_index = PremiseIndex([*laws, *self.file_index.premises])
        self.own_tactics = context_tactics(codes or ()) if coq_lookups.CONTEXT_TACTICS else []
        self.own_closers = list(self.own_tactics)  # the file's own, not the functor's (`nzsimpl` closes nothing)
        self.arg_tactics = context_arg_tactics(codes or ()) if coq_lookups.CONTEXT_ARG_TACTICS else []
        if self.facts.module_tactics is None:  # `order.` is a closer already: offered again it costs a run a state
            self.facts.module_tactics = module_tactics(states, self.modules, skip={t for t, _ in COQ_CLOSERS})
        self.own_tactics += [f"{n}." for n, k in self.facts.module_tactics
                             if k == 0 and f"{n}." not in self.own_tactics]
        self.arg_tactics += [(n, k) for n, k in self.facts.module_tactics if k > 0 and (n, k) not in self.arg_tactics]

    # -- the last resort: CoqHammer's `hammer` (its ATPs) on the statement, with the seconds kept back

    @property
    def reserve_seconds(self) -> float:
        return self.hammer_seconds if self.hammer_seconds > 0 and "hammer" not in self.unknown else 0.0

    def last_resort(self, nodes: Sequence[Node]) -> list[tuple[Node, Candidate]]:
        """``hammer.`` on the shallowest node whose goal is the statement's with its premises introduced
        (the root's ``intros`` child, else the root)."""
        intro = next((n for n in nodes if n.parent == 0 and n.tactic == "intros." and len(n.state.goals) == 1), None)
        node = intro or nodes[0]
        return [(node, Candidate("hammer.", 3.0, True, "hammer"))]

    def dual(self, tactic: str) -> str:
        """``tactic`` with each lemma named for a side (``_l``/``_r``) named for the other, and ``left`` for
        ``right``: what the other case of a split often needs (``rewrite max_r`` in one, ``rewrite max_l``
        in the other)."""
        swapped = _DUAL_NAME.sub(lambda m: m.group(1) + ("r" if m.group(2) == "l" else "l"), tactic)
        return _DUAL_SIDE.sub(lambda m: "right" if m.group(1) == "left" else "left", swapped)

    def replacement(self, candidate: Candidate, notes: str) -> str | None:
        """For ``hammer``: the reconstruction it printed (``Replace the hammer tactic with: T``), which
        replays without the ATPs; None when it printed none."""
        if candidate.tactic != "hammer.":
            return candidate.tactic
        m = re.search(r"Replace the hammer tactic with:\s*(?P<tac>.+?)(?:\n\s*\n|$)", notes, re.S)
        if m is None:
            return None
        tactic = " ".join(m.group("tac").split())
        return tactic if tactic.endswith(".") else tactic + "."

    def _unavailable(self, root: ProofState) -> set[str]:
        """The tactics of :data:`GATED_TACTICS` this context cannot run: ``try (fail; T)`` is
        interpreted (so an unknown name or notation is an error) but never runs ``T``."""
        run = getattr(self.states, "run_tactic", None)
        if run is None or not root.goals:
            return set()
        key = self.scope_key
        if key is not None and key in self.probe_cache:  # an earlier theorem of the same scope was probed
            missing_before, aliases = self.probe_cache[key]
            self.aliases.update(aliases)
            return set(missing_before)
        missing: set[str] = set()
        for name in GATED_TACTICS:
            if name in ("sauto", "hauto", "qauto", "hammer") and not self.hammer_wanted:
                missing.add(name)
                continue
            if not self._runs(root, name):
                qualified = QUALIFIED_TACTICS.get(name)
                if qualified is not None and self._runs(root, qualified):
                    self.aliases[name] = qualified  # loaded, not imported: called by its full name
                else:
                    missing.add(name)
        if key is not None:
            self.probe_cache[key] = (frozenset(missing), dict(self.aliases))
        return missing

    def _scope_key(self, codes: Sequence[str] | None) -> tuple[object, ...] | None:
        """What decides which tactics a context can run: the libraries its session loaded and its
        sentences (``codes``) that import, define tactics or notations, or open and close scopes (None
        when the backend cannot list its libraries or the context cannot be cut into sentences)."""
        loaded = getattr(self.states, "loaded_libraries", None)
        if loaded is None or codes is None:
            return None
        scope = tuple(code for code in codes if _SCOPE_SENTENCE.match(code))
        return (tuple(loaded()), scope, self.hammer_wanted, self.task.noinit)

    def _runs(self, root: ProofState, tactic: str) -> bool:
        """Whether the context knows ``tactic`` (``try (fail; T)`` is interpreted, never runs ``T``). A name the
        context gives a term answers "Tactic expected" (:data:`NAMED_TERMS`): `Relation_Definitions`' `order`."""
        result = self.states.run_tactic(root, f"try (fail; {tactic}).", 2.0)
        return not (result.outcome in ("error", "rejected") and re.search(
            r"not found|Unknown|Syntax error|Illegal|unknown|No such" + (r"|Tactic expected" if NAMED_TERMS else ""),
            result.message or ""))
    def parses_here(self, tactic: str, state: ProofState) -> bool:
        """Whether this scope can read ``tactic`` (every sentence of it): ``try (fail; T)`` at
        ``state`` parses ``T`` and resolves its tactic names but runs nothing (an ssreflect script
        where ssreflect's notations are not imported, a tactic another file defined, are refused).
        One probe per text and scope (:class:`ScopeFacts`); run at the node being expanded, so the
        prover's document moves by one sentence at most."""
        known = self.facts.parses.get(tactic)
        if known is not None:
            return known
        run = getattr(self.states, "run_tactic", None)
        ok = True
        if run is not None:
            try:
                units = [u.code for u in split_sentences(tactic)]
            except CoqSyntaxError:
                units = []
            # a goal selector (`all:`, `2:`) prefixes a sentence, it cannot stand inside `try (...)`
            body = [_SELECTOR.sub("", u[:-1]) for u in units if u.endswith(".")
                    and not re.fullmatch(r"[-+*]+|[{}]", u)]
            ok = bool(body) and all(self._runs(state, u) for u in body)
        self.facts.parses[tactic] = ok
        return ok

    def _inductive_may_be(self, typ: str, local_types: set[str]) -> bool:
        """Whether a variable of type ``typ`` may be taken apart (induction, destruct): not a sort, not
        a type variable of the goal, not a type this scope answered "Not an inductive" for."""
        if not INDUCTIVE_ONLY:
            return True
        norm = " ".join(typ.split())
        if norm in _SORTS or norm.startswith(("Type@{", "Sort")) or norm in self.facts.not_inductive:
            return False
        head = _predicate_head(norm)
        if " " in norm and head in self.facts.not_inductive and _applied_predicate(norm):
            return False  # a predicate Coq answered "Not an inductive" for, applied to other arguments
        return not (head in local_types and " " not in norm.strip("()"))

    # -- premises from the imported libraries

    def widen(self) -> bool:
        """The second pass of an exhausted search: twice the premises per state, library lemmas
        found with more symbol pairs of the statement, ``eapply L; eauto`` closers, ``auto using``
        with more lemmas. False when it is already wide."""
        if self.wide:
            return False
        self.wide = True
        self.premises_per_node = 2 * self.premises_per_node
        if self.library:
            self.library_index = PremiseIndex([*self.library_index.premises, *self._library(self.root, wide=True)])
        return True

    def _library(self, root: ProofState, *, wide: bool = False) -> list[Premise]:
        goal = root.goals[0] if root.goals else ""
        syms = [t for t in dict.fromkeys(tokens(conclusion(goal))) if self._searchable(t, root)]
        queries: list[str] = []
        for a, b in itertools.combinations(syms[:8] if wide else syms[:5], 2):
            queries.append(f"{self._term(a)} {self._term(b)}")
        queries.extend(self._term(s) for s in (syms[:6] if wide else syms[:3]))
        if wide:
            queries = [q for q in queries if q not in self._library_queries(root)]
        found: list[Premise] = []
        search = getattr(self.states, "search_premises", None)
        if search is None:
            return []
        for query in queries[:12]:
            found.extend(p for p in search(query, limit=80) if not p.name.startswith("rrma_")
                         and not is_data_type(p.statement))
        return found

    def _fresh_premises(self, goal_text: str, concl: str, hyps: list[tuple[str, str]]) -> list[Premise]:
        """The lemmas of the constants this goal names and the statement did not (:data:`FRESH_SYMBOLS`): an
        ``unfold`` shows what a definition is made of, and the lemmas about that were never looked up. The first
        two such constants, each asked once a theorem (``Search recursion``), the best three by the goal."""
        search = getattr(self.states, "search_premises", None)
        if not FRESH_SYMBOLS or not self.library or search is None:
            return []
        known = self._root_symbols | self._definition_names | {n for n, _ in hyps}
        fresh = [t for t in dict.fromkeys(tokens(concl)) if t not in known and not _too_common(t)
                 and _IDENT.fullmatch(t.split(".")[-1])]
        found: list[Premise] = []
        for sym in fresh[:2]:
            if sym not in self.fresh_found:
                if self.fresh_queries >= MAX_FRESH_QUERIES:
                    continue
                self.fresh_queries += 1
                self.fresh_found[sym] = [p for p in self.lookups.timed("fresh", functools.partial(search, sym, limit=40))
                                         if not self.lookups.own(p) and not is_data_type(p.statement)]
            found.extend(self.fresh_found[sym])
        return PremiseIndex(found).rank(goal_text, 3) if found else []

    def _library_queries(self, root: ProofState) -> list[str]:
        """The queries the first pass ran (the wider pass runs the others)."""
        goal = root.goals[0] if root.goals else ""
        syms = [t for t in dict.fromkeys(tokens(conclusion(goal))) if self._searchable(t, root)]
        out = [f"{self._term(a)} {self._term(b)}" for a, b in itertools.combinations(syms[:5], 2)]
        return (out + [self._term(x) for x in syms[:3]])[:12]

    @staticmethod
    def _term(sym: str) -> str:
        return sym if _IDENT.fullmatch(sym.split(".")[-1] or "") else f'"{sym}"'

    @staticmethod
    def _searchable(sym: str, root: ProofState) -> bool:
        if _too_common(sym):
            return False
        names = set(root.detail[0].hyp_names()) if root.detail else set()
        return sym not in names and sym not in leading_binders(conclusion(root.goals[0] if root.goals else ""))

    # -- candidates

    def candidates(self, node: Node) -> Iterable[Candidate]:
        state = node.state
        detail = state.detail[0] if state.detail else None
        concl = detail.concl if detail is not None else conclusion(state.goals[0])
        hyps: list[tuple[str, str]] = ([(n, t) for names, t in detail.hyps for n in names] if detail is not None
                                       else [])
        goal_text = state.goals[0]
        props = self._props(hyps)
        out: list[Candidate] = []
        if node.depth == 0:
            out.extend(Candidate(body, 0.4 + 0.02 * k, True, "retrieved")
                       for k, (_, _, body) in enumerate(self.similar_proofs[:6]))
            if self.portfolio:
                out.extend(self._portfolio())
        if node.depth == 0 or self.lookups.namesakes:
            out.extend(Candidate(f"apply {name}.", 0.3, source="premise") for name in self._namesakes())
        closers = COQ_CLOSERS + ([HINT_EAUTO] if HINTS_EAUTO else []) + ([HINT_AUTO_DEEP] if HINTS_AUTO_DEEP else []) \
            + (HAMMER_CLOSERS if self.hammer else [])
        if concl.strip() == "True":
            out.append(Candidate("exact I.", 0.1, True))
        if re.match(r"^\{.*\}\s*\+\s*\{.*\}$", concl):
            out.append(Candidate("decide equality.", 0.3, True))
        file_top = self.file_index.rank(goal_text, self.premises_per_node, exclude=[self.task.name])
        # a library lemma may share the theorem's short name (`Peano.max_r` for `Nat.max_r`): it is
        # another constant, so it is not excluded
        lib_top = self.library_index.rank(goal_text, self.premises_per_node // 2 + 1,
                                          exclude=[p.name for p in file_top])
        using = ", ".join(p.name for p in ((file_top[:8] + lib_top[:4]) if self.wide else (file_top[:4] + lib_top[:2])))
        for tactic, cost in closers:
            out.append(Candidate(tactic, cost, True, "hammer" if (tactic, cost) in HAMMER_CLOSERS else "rule"))
        if using:
            out.append(Candidate(f"auto using {using}.", 0.3, True, "premise"))
            out.append(Candidate(f"eauto using {using}.", 0.5, True, "premise"))
        premises = file_top + lib_top
        if self.wide:
            out.extend(Candidate(f"eapply {p.name}; eauto.", 0.5 + 0.05 * k, True, "premise")
                       for k, p in enumerate(premises[:8]))
        out.extend(Candidate(sentence, 0.7 + 0.02 * k, source="retrieved") for k, sentence in enumerate(self.retrieved))
        if self.hammer and premises:
            names = ", ".join(p.name for p in premises[:5])
            out.append(Candidate(f"sauto use: {names}.", 0.5, True, "hammer"))
        binder_types = leading_binder_types(concl)
        local_types = {n for n, t in hyps if " ".join(t.split()) in _SORTS} | \
            {n for n, t in binder_types if " ".join(t.split()) in _SORTS}
        if is_product(concl) if TOP_PRODUCTS else (
                concl.startswith(("forall", "~")) or re.search(r"(?<![<-])->", concl)):
            # a product: introduce it, or induct on one of its binders (which generalizes the rest)
            out.append(Candidate("intros.", 0.1))
            if concl.startswith("~"):
                out.append(Candidate("intro.", 0.1))  # `intros` does not unfold `not`
            binder_type = dict(binder_types)
            for name in leading_binders(concl)[:4]:
                if self.hammer:
                    out.append(Candidate(f"induction {name}; sauto.", 0.5, True, "hammer"))
                out.append(Candidate(f"induction {name}.", 0.8))
                out.extend(Candidate(f"induction {name} using {lemma}.", 0.85 + 0.05 * k)
                           for k, lemma in enumerate(self.lookups.inductions(binder_type.get(name, ""))))
                out.append(Candidate(f"induction {name}; simpl; auto.", 0.6))
                out.append(Candidate(f"destruct {name}.", 1.0))
            for k, premise in enumerate(premises[:4]):
                out.append(Candidate(f"apply {premise.name}.", 0.7 + 0.1 * k, source="premise"))
            if EXHAUST:  # a value of a finite type (`ascii`: eight booleans), every case computed
                out.extend(Candidate(EXHAUST_STEP.format(name=name), 0.7 + 0.05 * k, True)
                           for k, (name, typ) in enumerate(binder_types[:2])
                           if plain_type(" ".join(typ.split())) and " ".join(typ.split()) not in _SORTS
                           and (not FINITE_EXHAUST or self.lookups.finite(typ)))
            out.extend(self._implied_statement(concl, hyps))
            out.extend(self._equivalence_candidates(concl, hyps, statement=True))
            out.extend(Candidate(t, 0.6 + 0.03 * k) for k, t in enumerate(self.own_tactics))
            for suggester in self.suggesters:
                out.extend(suggester.candidates(self.task, state))
            out = self._cases_on_inductives(out, {**dict(hyps), **dict(binder_types)}, local_types)
            out = self._known_names(out, {n for n, _ in hyps} | {n for n, _ in binder_types})
            return self._bundled([c for c in self._filter(out) if not self.loops(node, c.tactic)])
        for scrut in match_scrutinees(concl):
            out.append(Candidate(f"destruct {scrut}.", 0.4))
            out.append(Candidate(f"destruct {scrut} eqn:?.", 0.6))
        for scrut in [s for _, t in hyps for s in match_scrutinees(t)][:2]:
            out.append(Candidate(f"destruct {scrut}.", 0.5))
        for scrut in if_scrutinees(concl)[:2]:
            out.append(Candidate(f"destruct ({scrut}).", 0.4))
            out.append(Candidate(f"destruct ({scrut}) eqn:?.", 0.6))
        if HYPOTHESIS_IFS:  # a hypothesis's `if` (`H : set_In a (if set_mem a0 y then ... else ...)`): its condition
            in_concl = if_scrutinees(concl)
            for scrut in [c for _, t in hyps for c in if_scrutinees(" ".join(t.split())) if c not in in_concl][:2]:
                out.append(Candidate(f"destruct ({scrut}).", 0.5))
        out.append(Candidate("simpl.", 0.5))
        out.append(Candidate("simpl in *.", 0.7))
        if any(re.fullmatch(r"[A-Za-z_][\w']* = .*|.* = [A-Za-z_][\w']*", t) for _, t in hyps):
            out.append(Candidate("subst.", 0.5))
        if "/\\" in concl or "<->" in concl:
            out.append(Candidate("split.", 0.3))
        if "\\/" in concl or re.match(r"^\{.*\}\s*\+", concl):
            out.append(Candidate("left.", 0.7))
            out.append(Candidate("right.", 0.7))
        if concl.startswith(("exists", "{")):
            out.append(Candidate("eexists.", 0.8))
            if WITNESSES:  # a witness named: the latest two local values, then `0` and `1` (round eleven)
                out.extend(Candidate(f"exists {v}.", 0.85 + 0.03 * k)
                           for k, v in enumerate([*_latest_values(hyps), "0", "1"]))
        if re.match(r"^[^=]*\S \S[^=]* = [^=]*\S \S", concl):
            out.append(Candidate("f_equal.", 0.9))
        head = re.match(r"^(?:~\s*)?\(?\s*(?P<head>[A-Za-z_][\w'.]*)", concl)
        if head is not None and head.group("head") not in {n for n, _ in hyps} | {"exists", "fun", "match", "let"} \
                and not re.search(rf" (?:{'={1,3}' if SETOID_HYPOTHESES else '='}|<>|<=|<|>=|>|<->|->|/\\|\\/) ", concl):
            # the conclusion is an applied constant (`Un_growing u`, `continuity f`): unfold it (not a relation
            # between two terms: `P (0 - n) == 0` is no `P` to unfold)
            out.append(Candidate("red.", 0.6))
            out.append(Candidate(f"unfold {head.group('head')}.", 0.7))
            predicate = head.group("head")
            if CONSTRUCTOR_STEPS and not concl.startswith("~"):
                out.append(Candidate("constructor.", 0.65))
            if CONSTRUCTOR_WITNESSES and not concl.startswith("~") and predicate not in self.facts.no_witness:
                # an inductive of one constructor that takes a witness (`bijective g`: `Bijective g' _ _`), which
                # `exists` builds as it builds an `ex` (round twelve): the latest two local values whose type is
                # named, functions included. Coq's "Not an inductive product" rules the predicate out for the scope
                for k, tactic in enumerate(["eexists.", *(f"exists {v}." for v in _witness_values(hyps))]):
                    out.append(Candidate(tactic, 0.9 + 0.03 * k, source=WITNESS_SOURCE))
                    self.witness_of[tactic] = predicate
        elif WITNESSES and len(top_words(concl)) == 1 and concl.startswith("("):
            # the whole conclusion is one bracketed notation (`(n | m)`, divisibility): `red` shows its definition
            out.append(Candidate("red.", 0.6))
        if RELATION_INTROS and not concl.startswith("~") and \
                sum(w in RELATION_INFIX or w == "<>" for w in top_words(concl)) == 1:
            # an order defined as a negation (`CRle x y` is `CRlt y x -> False`; `Z.le`, `(x ?= y) <> Gt`) or a
            # disequality: `intro` takes what it negates (round twenty-six)
            out.append(Candidate("intro.", 0.55))
        used = set(tokens(goal_text))
        used |= {name for symbols, name in self.notations if symbols <= used}  # `+++` names `def_add`
        for name in self.definitions:
            if name in used or name.split(".")[-1] in used:
                out.append(Candidate(f"unfold {name}.", 0.8))
                out.append(Candidate(f"unfold {name} in *.", 1.0))
        for together in self._module_unfolds(used):
            out.append(Candidate(f"unfold {', '.join(together)}.", 0.75))
            out.append(Candidate(f"unfold {', '.join(together)} in *.", 0.95))
        out.extend(Candidate(f"unfold {name}.", 0.85 + 0.05 * k)
                   for k, name in enumerate(self._library_unfolds(
                       concl, {n for n, _ in hyps} | {" ".join(t.split()) for _, t in hyps} | {n for n, _ in binder_types})))
        for name, typ in reversed(hyps):
            if typ in props:
                out.append(Candidate(f"apply {name}.", 0.6))
                if re.search(r"(?<![<>=])={1,3}(?![>=])|<->", typ):
                    out.append(Candidate(f"rewrite {name}.", 0.7))
                    out.append(Candidate(f"rewrite <- {name}.", 0.9))
                if re.search(r"/\\|\\/|^exists|<->", typ):
                    out.append(Candidate(f"destruct {name}.", 0.5))
                if not name.startswith("IH"):
                    out.append(Candidate(f"inversion {name}; subst.", 1.0))
                if RULE_INDUCTIONS and not name.startswith("IH") and _applied_predicate(typ):
                    # induction on the derivation (`induction 1` of `Operators_Properties.v`): its cases carry the
                    # induction hypotheses that `inversion` and `destruct` do not
                    out.append(Candidate(f"induction {name}; auto.", 0.75))
                    out.append(Candidate(f"induction {name}.", 0.9))
                    later = [n for n, _ in hyps[hyps.index((name, typ)) + 1:]]
                    if GENERALIZED_DERIVATIONS and later:
                        out.append(Candidate(f"revert {' '.join(later)}; induction {name}.", 0.7))
            elif typ not in ("Type", "Set", "Prop") and not typ.startswith("Type"):
                rest = hyps[hyps.index((name, typ)) + 1:]
                later = [n for n, t in rest if t not in props and t not in ("Type", "Set", "Prop")]
                if later and REVERT_DEPENDENTS:  # with the hypotheses about them, which `revert` cannot leave
                    moved = set(later)
                    later = [n for n, t in rest if n in moved or (t in props and not moved.isdisjoint(tokens(t)))]
                if later:  # induction with the later variables generalized (a stronger hypothesis)
                    out.append(Candidate(f"revert {' '.join(later)}; induction {name}.", 0.8))
                if self.hammer:
                    out.append(Candidate(f"induction {name}; sauto.", 0.6, True, "hammer"))
                    out.append(Candidate(f"destruct {name}; sauto.", 0.6, True, "hammer"))
                out.append(Candidate(f"destruct {name}.", 0.9))
                out.append(Candidate(f"induction {name}.", 1.0))
                out.extend(Candidate(f"induction {name} using {lemma}.", 1.0 + 0.05 * k)
                           for k, lemma in enumerate(self.lookups.inductions(typ)))
                # one step per case with the routine closers (a datatype of many constructors makes the
                # plain split too wide to search case by case)
                out.append(Candidate(f"destruct {name}; simpl; auto.", 0.7))
                out.append(Candidate(f"induction {name}; simpl; auto.", 0.75))
        prop_hyps = [n for n, t in hyps if t in props and not n.startswith("IH")][-2:]
        middles = _middle_values(concl, hyps, props) if MIDDLE_VALUES else []
        for name, typ in hyps:  # a hypothesis that states a step through a value its conclusion does not name
            if middles and typ in props and middle_binders(typ):
                out.extend(Candidate(f"apply {name} with {v}.", 0.75 + 0.05 * j) for j, v in enumerate(middles))
        shown = {p.name for p in premises}
        fresh = [p for p in self._fresh_premises(goal_text, concl, hyps) if p.name not in shown]
        # a fresh constant's lemmas rank as the best of the others: they are what this state newly needs
        for k, premise in [*enumerate(premises), *enumerate(fresh)]:
            weight = 0.6 + 0.08 * k
            out.append(Candidate(f"apply {premise.name}.", weight, source="premise"))
            if is_rewrite_rule(premise.statement):
                out.append(Candidate(f"rewrite {premise.name}.", weight, source="premise"))
                out.append(Candidate(f"rewrite <- {premise.name}.", weight + 0.2, source="premise"))
                replaced = replaced_constant(premise.statement) if REWRITE_ALL else None
                if replaced is not None and occurrences(replaced, concl) >= 2:
                    out.append(Candidate(f"rewrite !{premise.name}.", weight - 0.05, source="premise"))
            if k < 3:
                out.append(Candidate(f"eapply {premise.name}.", weight + 0.3, source="premise"))
                if middles and middle_binders(premise.statement):
                    out.extend(Candidate(f"apply {premise.name} with {v}.", weight + 0.15 + 0.05 * j, source="premise")
                               for j, v in enumerate(middles))
                for h in prop_hyps:
                    out.append(Candidate(f"apply {premise.name} in {h}.", weight + 0.3, source="premise"))
        out.extend(self._concl_candidates(state, concl, hyps))
        out.extend(self._commute_candidates(concl, hyps))
        out.extend(self._decide_candidates(goal_text, hyps))
        out.extend(self._trans_candidates(concl, hyps))
        out.extend(self._crossed_candidates(concl, hyps))
        out.extend(self._boolean_candidates(concl, hyps))
        out.extend(self._order_induction_candidates(concl, hyps))
        out.extend(self._implied_candidates(concl, hyps))
        out.extend(self._equivalence_candidates(concl, hyps, statement=False))
        out.extend(self._forward_candidates(hyps))
        out.extend(Candidate(t, 0.6 + 0.03 * k) for k, t in enumerate(self.own_tactics))
        out.extend(self._arg_tactic_candidates(hyps))
        for suggester in self.suggesters:
            out.extend(suggester.candidates(self.task, state))
        out = self._cases_on_inductives(out, {**dict(hyps), **dict(binder_types)}, local_types)
        out = self._known_names(out, {n for n, _ in hyps} | {n for n, _ in binder_types})
        return self._bundled([c for c in self._filter(out) if not self.loops(node, c.tactic)])

    def _arg_tactic_candidates(self, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """The context's own tactics of one or two terms (:func:`agents.coq_lookups.context_arg_tactics`), then the
        open functor's (:func:`agents.coq_scope.module_tactics`: ``cases n``), on the latest two local values
        (``destruct_max n.``; a pair each way for two terms), two calls per tactic."""
        if not self.arg_tactics:
            return []
        values = _latest_values(hyps)
        out: list[Candidate] = []
        for k, (words, arity) in enumerate(self.arg_tactics):
            args = [(v,) for v in values] if arity == 1 else [(a, b) for a in values for b in values if a != b]
            out.extend(Candidate(f"{words} {' '.join(a)}.", 0.65 + 0.05 * k + 0.02 * j)
                       for j, a in enumerate(args[:2]))
        return out

    def _library_unfolds(self, concl: str, local: set[str]) -> list[str]:
        """The constants the conclusion applies by name, then those the theorem's statement names, that are
        neither local nor the file's own definitions (those have their own ``unfold``), nor found opaque here:
        ``Rsqr`` in ``Rsqr (x * y) = Rsqr x * Rsqr y``, where the stdlib's proofs ``unfold Rsqr`` and call
        ``ring`` (Coq prints it ``(x * y)²``: a notation hides the name, the statement's text does not). At
        most :data:`MAX_LIBRARY_UNFOLDS`; a constant ``unfold`` cannot unfold is remembered for the scope
        (:meth:`observe`)."""
        if not LIBRARY_UNFOLD:
            return []
        if self._statement_constants is None:  # the statement is the theorem's: read once
            self._statement_constants = _free_constants(_STATEMENT_HEAD.sub("", self.task.statement, count=1))
        own = {d.split(".")[-1] for d in self.definitions}
        out: list[str] = []
        for name in (*_free_constants(concl), *self._statement_constants):
            if name not in local and name not in own and name not in self.facts.opaque and name not in out:
                out.append(name)
        return out[:MAX_LIBRARY_UNFOLDS]

    def _known_names(self, candidates: list[Candidate], local: set[str]) -> list[Candidate]:
        """``candidates`` less those naming a reference Coq said this scope does not have (from any
        source: a library step's short name its module imported, a lemma of another file), unless
        the goal binds that name or the tactic binds it itself."""
        gone = self.facts.missing - local
        if not gone or not FORGET_MISSING:
            return candidates
        out = []
        for cand in candidates:
            names = set(re.findall(r"(?<![\w'.])[A-Za-z_][\w'.]*[\w']|(?<![\w'.])[A-Za-z_](?![\w'])", cand.tactic))
            if any(n in gone and not _binds(cand.tactic, n) for n in names):
                continue
            out.append(cand)
        return out

    def _cases_on_inductives(self, candidates: list[Candidate], var_types: dict[str, str],
                             local_types: set[str]) -> list[Candidate]:
        """``candidates`` less the case analyses (``induction x``, ``destruct x; ...``, ``revert ..;
        induction x``, from any source) on a variable whose type cannot be inductive here
        (:meth:`_inductive_may_be`); each one kept is remembered with its variable's type, so that
        Coq's "Not an inductive product" for it rules that type out for the scope."""
        out: list[Candidate] = []
        for cand in candidates:
            m = _CASE_ANALYSIS.match(cand.tactic)
            # `induction x using L` names its principle: the type need not be inductive (an abstract `t`)
            typ = var_types.get(m.group("var"), "") if m is not None and " using " not in cand.tactic else ""
            if typ:
                if not self._inductive_may_be(typ, local_types):
                    continue
                self.case_types[cand.tactic] = typ
            out.append(cand)
        return out

    @staticmethod
    def _bundled(candidates: list[Candidate]) -> list[Candidate]:
        """The cheap one-sentence closers of the rules as one ``solve [...]`` candidate (one prover
        round trip instead of a dozen: most fail, and a failing run costs its round trip)."""
        cheap = [c for c in candidates if c.closer and c.source == "rule" and c.cost <= BUNDLE_MAX_COST
                 and c.tactic.endswith(".") and ". " not in c.tactic and "\n" not in c.tactic and "[" not in c.tactic]
        if len(cheap) < 2:
            return candidates
        bundle = Candidate(f"solve [{_alternatives(cheap)}].", min(c.cost for c in cheap), True, "rule",
                           members=tuple(c.tactic for c in cheap))
        members = set(bundle.members)
        return [bundle, *(c for c in candidates if c.tactic not in members)]

    def _concl_candidates(self, state: ProofState, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """``apply``/``rewrite`` with the lemmas whose conclusion has the goal's shape: Coq's
        ``Search`` on the conclusion with its variables as holes (``1 < _ ^ _`` for ``1 < a ^ b``),
        over everything in scope (the file's earlier statements included), best ranked first; then, with
        :data:`GENERAL_PATTERNS` (off), those whose conclusion has its general shape (:func:`general_pattern`); with
        :data:`ABSTRACTED_HEADS`, those stated of any value where the goal applies a constant
        (:func:`abstracted_patterns`)."""
        local = [n for n, _ in hyps]
        pattern = conclusion_pattern(concl, local)
        if not pattern:
            return []
        props = self._props(hyps)
        given = [hole_pattern(t, local) for _, t in hyps if t in props] if HYPOTHESIS_RANK else []
        goal = state.goals[0]
        found = self._pattern_premises(pattern, goal, 6, given)
        general = general_pattern(pattern) if GENERAL_PATTERNS else ""
        if general:  # the lemmas stated for any value where the goal has a constant, after the exact ones
            found = self._and_more(found, general, goal, given, 4, 4 + len(found))
        for abstract in abstracted_patterns(pattern) if ABSTRACTED_HEADS else []:
            # only lemmas whose conclusion is the shape itself: of any value
            found = self._and_more(found, abstract, goal, given, MAX_ABSTRACTED, RANKED_PER_PATTERN, whole=True)
        flipped = flipped_pattern(pattern) if FLIPPED_RELATIONS else ""
        if flipped:  # `n > m` is `m < n`: the lemmas stated with `<`, after those stated as the goal is
            found = self._and_more(found, flipped, goal, given, MAX_FLIPPED, MAX_FLIPPED + len(found))
        out: list[Candidate] = []
        for k, premise in enumerate(found):
            weight = 0.35 + 0.05 * k
            out.append(Candidate(f"apply {premise.name}.", weight, source="premise"))
            out.append(Candidate(f"apply {premise.name}; auto.", weight + 0.05, True, "premise"))
            sides = iff_patterns(premise.statement) if IFF_DIRECTIONS else None
            if sides is not None:  # the way whose side has the goal's shape (both when neither side is exactly it)
                for arrow, side in (("->", sides[1]), ("<-", sides[0])):
                    if side == pattern or pattern not in sides:
                        out.append(Candidate(f"apply {arrow} {premise.name}.", weight + 0.02, source="premise"))
                        out.append(Candidate(f"apply {arrow} {premise.name}; auto.", weight + 0.07, True, "premise"))
            if is_rewrite_rule(premise.statement):
                out.append(Candidate(f"rewrite {premise.name}.", weight + 0.1, source="premise"))
        return out

    def _and_more(self, found: list[Premise], pattern: str, goal: str, given: Sequence[str], most: int, fetch: int,
                  whole: bool = False) -> list[Premise]:
        """``found``, then at most ``most`` of the ``fetch`` best lemmas of another ``pattern`` (:meth:`_pattern_premises`)
        that it does not hold; ``whole``: only those whose conclusion is that pattern itself."""
        names = {p.name for p in found}
        return found + [p for p in self._pattern_premises(pattern, goal, fetch, given) if p.name not in names
                        and (not whole or pattern in conclusion_patterns(p.statement))][:most]

    def _pattern_premises(self, pattern: str, goal: str, limit: int, given: Sequence[str] = ()) -> list[Premise]:
        """The lemmas in scope whose conclusion ``Search`` matches with ``pattern`` (one query per pattern and
        theorem, at most :data:`MAX_PATTERN_QUERIES`), the ``limit`` best: first those with the fewest premises
        no hypothesis of the state gives (``given``, as :func:`hole_pattern` writes them;
        :data:`HYPOTHESIS_RANK`), then nearest ``goal`` by their symbols."""
        found = self.concl_premises.get(pattern)
        if found is None:
            search = getattr(self.states, "search_premises", None)
            if search is None or self.pattern_queries >= MAX_PATTERN_QUERIES:
                return []
            self.pattern_queries += 1
            found = [p for p in self.lookups.timed("pattern", lambda: search(f"({pattern})", limit=200))
                     if not self.lookups.own(p)]
            found += [p for p in self.included if pattern in conclusion_patterns(p.statement)]  # Search misses them
            found = PremiseIndex(found).rank(goal, RANKED_PER_PATTERN) if found else []
            self.concl_premises[pattern] = found
        if HYPOTHESIS_RANK and given:
            found = sorted(found, key=lambda p: self._unmet(p, given))  # stable: the symbol rank breaks ties
        return found[:limit]

    def _unmet(self, lemma: Premise, given: Sequence[str]) -> int:
        """How many of ``lemma``'s premises no hypothesis gives: a premise ``p <= 0`` (``_ <= 0``) is given by
        ``H : m <= 0`` (``_ <= 0``), not by ``H : n <= m``."""
        needs = self._premise_patterns.get(lemma.name)
        if needs is None:
            split = premises_of(lemma.statement)
            bound = leading_binders(" ".join(lemma.statement.split()))
            needs = self._premise_patterns[lemma.name] = [hole_pattern(t, bound) for t in (split[0] if split else [])]
        return sum(not any(self._gives(h, need) for h in given) for need in needs)

    def _gives(self, hypothesis: str, need: str) -> bool:
        key = (hypothesis, need)
        if key not in self._instances:
            self._instances[key] = pattern_instance(need, hypothesis)
        return self._instances[key]

    def _decide_candidates(self, goal_text: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """A case split on a decision lemma about the goal's values (``destruct (Z.eq_dec x y).``,
        ``destruct (Zeven_odd_dec n).``, :meth:`ScopeLookups.deciders`): the two nearest the goal for each
        of the first two types of the local values, on its latest values (and ``0`` where the goal has it)."""
        by_type: dict[str, list[str]] = {}
        props = self._props(hyps)
        for name, raw in hyps:
            typ = " ".join(raw.split())
            if raw not in props and plain_type(typ):
                by_type.setdefault(typ, []).append(name)
        out: list[Candidate] = []
        for typ, names in list(by_type.items())[:2]:
            lemmas = self.lookups.deciders(typ)
            if not lemmas:
                continue
            # `goal_text` is the whole goal, its hypotheses with it: a `0` they show is a value too
            values = names[-2:][::-1] + (["0"] if re.search(r"(?<![\w'.])0(?![\w'.])", goal_text) else [])
            known = {proposition_key(t) for t in props} if DECIDER_HYPOTHESES else set()
            ranked = PremiseIndex(lemmas).rank(goal_text, len(lemmas) if DECIDER_HYPOTHESES else 2)
            if DECIDER_HYPOTHESES:
                ranked.sort(key=lambda lemma: _unrelated(lemma.statement, goal_text))
            kept = 0
            for lemma in ranked:
                args: list[tuple[str, ...]] = (
                    [(v,) for v in values if v != "0"] if leading_arity(lemma.statement) == 1
                    else [(a, b) for a in values for b in values if a != b and a != "0"])
                if DECIDER_HYPOTHESES:  # the splits a hypothesis decides dropped; a lemma left with none gives way
                    args = [a for a in args if not known.intersection(decider_cases(lemma.statement, a))]
                    if not args:
                        continue
                out.extend(Candidate(f"destruct ({lemma.name} {' '.join(a)}).", 1.1 + 0.1 * kept)
                           for a in args[:2])
                kept += 1
                if kept == 2:
                    break
        return out

    def _trans_candidates(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """A step through a transitivity lemma whose one premise a hypothesis gives (round eleven): for the
        goal ``P n < m`` and ``H : n < m``, ``eapply le_lt_trans; [ | eassumption].`` leaves ``P n <= n``
        (:meth:`ScopeLookups.transitive`). A lemma is offered on the side whose relation is a hypothesis's,
        for the latest three hypotheses; at most :data:`MAX_TRANS_STEPS` steps."""
        goal = relation_of(concl, [n for n, _ in hyps])
        if goal is None:
            return []
        given = _given_relations(hyps)
        if not given:
            return []
        out: list[Candidate] = []
        for chain in self.lookups.transitive(goal[0]):
            if chain.first in given:
                out.append(Candidate(f"eapply {chain.lemma.name}; [eassumption | ].", 0.9 + 0.05 * len(out),
                                     source="rule"))
            if chain.second in given:
                out.append(Candidate(f"eapply {chain.lemma.name}; [ | eassumption].", 0.9 + 0.05 * len(out),
                                     source="rule"))
        return out[:MAX_TRANS_STEPS]

    def _crossed_candidates(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """A transitivity step through the middle term that crosses the two sides of one operation (round
        twenty-five): at ``n + p < m + q``, ``apply lt_trans with (m + p).`` and ``apply lt_trans with (n + q).``
        leave two goals that each change one operand (``n + p < m + p``, ``m + p < m + q``). The lemmas whose
        two relations the latest hypotheses show come first (``p <= q`` with ``n < m``: ``lt_le_trans``); at most
        :data:`MAX_CROSSED_STEPS`."""
        if not CROSSED_MIDDLES:
            return []
        goal = relation_of(concl, [n for n, _ in hyps])
        if goal is None:
            return []
        left, right = _operands(goal[1]), _operands(goal[2])
        if left is None or right is None or left[1] != right[1]:
            return []
        (x1, op, y1), (x2, _, y2) = left, right
        middles = [m for m in (f"{x2} {op} {y1}", f"{x1} {op} {y2}") if m not in (goal[1], goal[2])]
        if not middles:
            return []
        given = _given_relations(hyps)
        chains = sorted(self.lookups.transitive(goal[0]),  # `<` and `<=` given: lt_le_trans before lt_trans
                        key=lambda c: -sum((collections.Counter([c.first, c.second]) & given).values()))
        out = [Candidate(f"apply {chain.lemma.name} with ({middle}).", 0.85 + 0.05 * k, source="rule")
               for k, (chain, middle) in enumerate((c, m) for c in chains for m in middles)]
        return out[:MAX_CROSSED_STEPS]

    def _order_induction_candidates(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """An induction along an order (:func:`agents.coq_lookups.relation_inductions`) from each of the latest two
        hypotheses ``H : e <= v`` (or ``<``) on a local ``v``: ``apply le_ind with (4 := H); [solve_proper | idtac
        ..].``, whose motive Coq reads off the conclusion and whose ``Proper`` premise ``solve_proper`` proves;
        ``solve_proper.`` at a ``Proper`` goal."""
        if not ORDER_INDUCTIONS:
            return []
        if concl.startswith("Proper "):
            return [Candidate("solve_proper.", 0.1, True)]
        types = dict(hyps)
        out: list[Candidate] = []
        bounds = [(n, m) for n, t in hyps if (m := _LOWER_BOUND.fullmatch(" ".join(t.split()))) and m.group("v") in types]
        for name, m in bounds[-2:][::-1]:
            # cheap, and the `Proper` goal closed in the same step: the proof it starts is long (the base case, the
            # inductive step), and a state of three goals would rank far behind
            out.extend(Candidate(f"apply {lemma.name} with ({lemma.position} := {name})"
                                 f"{'; [solve_proper | idtac ..]' if lemma.proper_first else ''}.", 0.3 + 0.05 * k)
                       for k, lemma in enumerate(self.lookups.relation_inductions(types[m.group("v")]))
                       if lemma.order == m.group("rel"))
        return out

    def _boolean_candidates(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """A boolean restatement's whole proof as one closing step (:func:`agents.coq_booleans.reflection_step`)."""
        if not BOOLEAN_REFLECTIONS or " = " not in concl:
            return []
        local = {n for n, _ in hyps}
        step = coq_booleans.reflection_step(
            concl, hyps, local=local, definitions={d.split(".")[-1] for d in self.definitions},
            reflections=self.lookups.reflections, equivalences=self.lookups.equivalences,
            holes=lambda prop: hole_pattern(prop, sorted(local)))
        # above BUNDLE_MAX_COST: a script of many sentences is run alone, not among the `solve [...]` alternatives
        return [Candidate(step, 0.4, True, "rule")] if step is not None else []

    def _implied_candidates(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """A lemma that gives the conclusion from the latest hypotheses (round twenty-one): ``eapply
        Z.le_antisymm; eauto.`` at ``H : n <= m, H0 : m <= n |- n = m``, found by Coq's ``Search`` on the
        hypotheses and conclusion as one implication (:func:`agents.coq_lookups.implication_pattern`): the latest
        three propositions together, then each of the latest two alone. A conclusion with no constant of its
        own (``n = m``) has no shape to search by (:meth:`_concl_candidates`); with the hypotheses it has."""
        local = [n for n, _ in hyps]
        known = self._props(hyps)
        props = [t for _, t in hyps if t in known and implication_pattern([t], local)][-3:]
        groups = [props, *([[t] for t in props[-2:]] if len(props) > 1 else [])] if props else []
        return self._implied(groups, concl, local, "")

    def _implied_statement(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """The same at a product (the statement, before ``intros``): the lemmas that state it, its binders as
        the pattern's variables; ``apply L.`` proves it when L is the statement itself."""
        split = premises_of(concl)
        if split is None or not split[0]:
            return []
        return self._implied([split[0]], split[1], [*(n for n, _ in hyps), *leading_binders(concl)], "intros; ")

    def _implied(self, groups: Sequence[Sequence[str]], concl: str, local: Sequence[str],
                 prefix: str) -> list[Candidate]:
        out: list[Candidate] = []
        seen: set[str] = set()
        for parts in groups:
            for lemma in self.lookups.implied(implication_pattern([*parts, concl], local))[:MAX_IMPLIED]:
                if lemma.name in seen:
                    continue
                seen.add(lemma.name)
                weight = 0.25 + 0.05 * len(seen)
                if prefix:  # the statement itself
                    out.append(Candidate(f"apply {lemma.name}.", weight, True, "premise"))
                # `eapply`: a premise may name a value the conclusion does not (`y` of `x < y -> y <= z -> x < z`)
                out.append(Candidate(f"{prefix}eapply {lemma.name}; eauto.", weight + 0.05, True, "premise"))
                out.append(Candidate(f"{prefix}apply {lemma.name}.", weight + 0.1, source="premise"))
        return out

    def _forward_candidates(self, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """``apply L in H`` for each of the latest two hypotheses (no induction hypothesis, no product) with the
        lemmas that have its shape as a premise (:meth:`agents.coq_lookups.ScopeLookups.forward`): the step a human
        proof takes from a hypothesis (``apply Nat.eq_mul_0_r in H``) when no lemma about the conclusion reaches
        it."""
        if not FORWARD_LEMMAS:
            return []
        local = [n for n, _ in hyps]
        known = self._props(hyps)
        out: list[Candidate] = []
        for name, typ in [(n, t) for n, t in hyps if t in known and not n.startswith("IH")][-2:]:
            pattern = conclusion_pattern(typ, local)
            out.extend(Candidate(f"apply {lemma.name} in {name}.", 0.7 + 0.05 * k, source="premise")
                       for k, lemma in enumerate(self.lookups.forward(pattern)[:MAX_FORWARD]))
        return out

    def _equivalence_candidates(self, concl: str, hyps: list[tuple[str, str]], statement: bool) -> list[Candidate]:
        """Rewrite with an equivalence one side of which has a hypothesis's shape (round twenty-one): the stdlib's
        ``rewrite !Z.leb_le.`` turns ``(n <=? m) = true -> (m <=? n) = true -> n = m`` into ``n <= m -> m <= n -> n
        = m``, which a lemma states (:meth:`_implied_statement`). At a product (``statement``) its premises and
        conclusion are looked at and the step is ``rewrite !L.``; else the latest three hypotheses (``rewrite L in
        *.``) and the sides of a conclusion that is an equivalence, a conjunction or a disjunction (``rewrite
        L.``). The equivalences are found by Coq's ``Search`` on each shape (:meth:`ScopeLookups.containing`):
        those with no premise whose side of that shape has more symbols than the other (a rewrite to a simpler
        statement: ``Z.leb_le`` for ``(n <=? m - 1) = true``, not ``Z.gtb_lt`` backwards for ``n < m``), the shorter
        names first, two a shape."""
        if not EQUIVALENCES:
            return []
        local = [n for n, _ in hyps]
        targets: list[tuple[str, str]] = []  # (a proposition, how the rewrite reaches it)
        if statement:
            split = premises_of(concl)
            if split is None or not split[0]:
                return []
            local += leading_binders(concl)
            targets = [(t, "!") for t in [*split[0][:3], split[1]]]
        else:
            known = self._props(hyps)
            targets = [(t, " in *") for _, t in hyps if t in known and "->" not in t][-3:]
            whole = unwrapped(concl)
            parts = next((p for op in ("<->", "/\\", "\\/") if len(p := split_top(whole, op)) > 1), [])
            targets += [(part, "") for part in parts if "->" not in part][:3]
        out: list[Candidate] = []
        seen: set[tuple[str, str]] = set()
        for target, where in targets:
            pattern = conclusion_pattern(unwrapped(target), local)
            ways: list[tuple[int, str, str]] = []
            for lemma in self.lookups.containing(pattern):
                sides = iff_patterns(lemma.statement)
                split = premises_of(lemma.statement)
                if sides is None or split is None or split[0]:
                    continue
                for k, arrow in ((0, ""), (1, "<- ")):  # from the side the target has to the simpler one
                    side, other = sides[k], sides[1 - k]
                    if _symbols(side) > max(1, _symbols(other)) and pattern_instance(side, pattern):
                        ways.append((len(lemma.name), lemma.name, arrow))
            for _, name, arrow in sorted(ways)[:2]:
                if (name, arrow + where) in seen:
                    continue
                seen.add((name, arrow + where))
                tactic = f"rewrite {arrow}!{name}." if where == "!" else f"rewrite {arrow}{name}{where}."
                out.append(Candidate(tactic, 0.45 + 0.05 * len(out), source="premise"))
        return out

    def _commute_candidates(self, concl: str, hyps: list[tuple[str, str]]) -> list[Candidate]:
        """Turn an operator of the conclusion around (``rewrite Z.add_comm.``, :meth:`ScopeLookups.commutes`),
        so that a lemma stated the other way round applies next (``Zodd (a + b)`` from
        ``Zeven_plus_Zodd``'s ``Zodd (b + a)``), and ``symmetry.`` on an equation."""
        out: list[Candidate] = []
        text = " ".join(concl.split())
        if re.search(r"(?<![<>=:])(?:==?|<>)(?![=>])", text) and not text.startswith(("forall", "exists")):
            out.append(Candidate("symmetry.", 1.0))
        for op in commute_operators(text, [n for n, _ in hyps])[:3]:
            out.extend(Candidate(f"rewrite {name}.", 0.75 + 0.05 * k, source="rule")
                       for k, name in enumerate(self.lookups.commutes(op)))
        return out

    def _portfolio(self) -> list[Candidate]:
        statement = self.task.statement
        vars_ = induction_order(variables_of(statement))
        lemmas = lemmas_of(self.task.context, statement)
        out: list[Candidate] = []
        for index, template in enumerate(COQ_TEMPLATES):
            for proof in instantiate(template, vars_=vars_, lemmas=lemmas, ihs=[])[:2]:
                out.append(Candidate(proof, 0.5 + 0.01 * index, True, "portfolio"))
        return out

    def _filter(self, candidates: list[Candidate]) -> list[Candidate]:
        out: list[Candidate] = []
        seen: set[str] = set()
        banned = self._banned_short  # read once: every candidate of every state passes here
        for cand in candidates:
            if self.aliases and _GATED_NAME.search(cand.tactic):
                cand = replace(cand, tactic=_GATED_NAME.sub(lambda m: self.aliases.get(m.group("name"),
                                                                                      m.group("name")), cand.tactic))
            if _QUALIFIED_HEAD.match(cand.tactic):
                # `Nat.order.`: the oracle's screen reads a sentence that starts with a capitalised word as a
                # command (Coq lexes `Check.x` as the command `Check`), so the call goes after an `idtac;`
                cand = replace(cand, tactic=f"idtac; {cand.tactic}")
            if cand.tactic in seen:
                continue
            seen.add(cand.tactic)
            head = cand.tactic.split()[0].rstrip(".;")
            if head in self.unknown or self.slow.get(head, 0) >= 3 or self.slow.get(cand.tactic, 0) >= 1:
                continue
            if self.unknown and set(_IDENT.findall(cand.tactic)) & self.unknown:
                continue  # names a tactic this context cannot run
            if banned and set(_IDENT.findall(cand.tactic)) & banned:
                continue  # names an axiom the checker refused a proof of this theorem for
            out.append(cand)
        return out

    @staticmethod
    def loops(node: Node, tactic: str) -> bool:
        """Whether ``tactic`` would undo the step before it or repeat a rewrite for the third time:
        ``rewrite <- L`` right after ``rewrite L`` (or the reverse), the same lemma rewritten in
        the same direction more than twice on one path."""
        m = _REWRITE.match(tactic)
        if m is None:
            return False
        lemma, back = m.group("lemma"), bool(m.group("back"))
        if node.tactics:
            last = _REWRITE.match(node.tactics[-1])
            if last is not None and last.group("lemma") == lemma and bool(last.group("back")) != back:
                return True
        same = sum(1 for t in node.tactics if (r := _REWRITE.match(t)) is not None and r.group("lemma") == lemma
                   and bool(r.group("back")) == back)
        return same >= 2

    def discharge(self, tactic: str, after: ProofState | None = None) -> str | None:
        """``tactic`` followed by the cheap closers this scope can run on every goal it leaves (``rewrite max_r;
        try solve [reflexivity | assumption | ... | lia].``), then the context's own tactics (:data:`OWN_DISCHARGE`:
        ``.. | lia | auto']``), then ``eauto using`` the premises ranked on the goals ``after`` shows
        (:data:`PREMISE_DISCHARGE`), for :func:`agents.best_first.best_first_search` to close the side goals a step
        opens; None for a tactic that is not one plain sentence."""
        body = tactic.strip()
        if not body.endswith(".") or "\n" in body or ". " in body or body.endswith("..") or _SELECTOR.match(body) \
                or self.discharge_variants(body):  # already one (a closed goal's step, replayed on the next)
            return None
        cheap = [c for c in self._filter([Candidate(t, cost, True, "rule") for t, cost in COQ_CLOSERS
                                          if cost <= BUNDLE_MAX_COST])]
        if OWN_DISCHARGE:
            cheap += [Candidate(t, 0.6, True, "rule") for t in self.own_closers]
        if PREMISE_DISCHARGE and after is not None and after.goals:
            names: list[str] = []  # each goal's best two of the file's and of the library's, in the goals' order
            for goal in after.goals[:4]:
                shown = conclusion(goal)
                for index, exclude in ((self.file_index, [self.task.name]), (self.library_index, names)):
                    names += [p.name for p in index.rank(shown, 4, exclude=exclude)
                              if not p.name.endswith(SCHEME_SUFFIXES)][:2]
            if names:  # `eauto`: `auto` refuses the whole list for one lemma it cannot use (`Z.lt_trans`)
                cheap.append(Candidate(f"eauto using {', '.join(dict.fromkeys(names))}.", 0.6, True, "premise"))
        if not cheap:
            return None
        return f"{body[:-1]}; try solve [{_alternatives(cheap)}]."

    def discharge_variants(self, both: str) -> list[str]:
        """``T; try solve [c].`` for each closer ``c`` of a :meth:`discharge` form ``T; try solve [c1 | c2 | ...].``,
        in its order: the shorter texts a found proof may keep."""
        m = re.fullmatch(r"(?P<tactic>.*); try solve \[(?P<closers>[^\[\]]*)\]\.", both, re.S)
        if m is None:
            return []
        return [f"{m.group('tactic')}; try solve [{c.strip()}]." for c in m.group("closers").split(" | ")]

    def keep(self, candidate: Candidate) -> bool:
        """A queued case analysis on a type found not inductive since, or a tactic found unknown, is
        dropped without a run."""
        typ = self.case_types.get(candidate.tactic)
        if typ is not None and INDUCTIVE_ONLY and " ".join(typ.split()) in self.facts.not_inductive:
            return False
        if candidate.source == WITNESS_SOURCE and self.witness_of.get(candidate.tactic) in self.facts.no_witness:
            return False  # queued before Coq said the predicate is not inductive
        if candidate.source == "hammer" and self.hammer_cap_seconds is not None \
                and self.hammer_spent >= self.hammer_cap_seconds:
            return False  # CoqHammer's share of this theorem's seconds is spent
        if candidate.source == "hammer" and HAMMER_TIMEOUTS and self.hammer_timeouts >= HAMMER_TIMEOUTS:
            return False  # CoqHammer's tactics keep running out of time on this theorem's goals
        if candidate.source == "learned" and LEARNED_TIMEOUTS and self.learned_timeouts >= LEARNED_TIMEOUTS:
            return False  # so do the steps learnt from this run's earlier proofs
        if candidate.tactic == "constructor." and self.constructor_refusals >= CONSTRUCTOR_REFUSALS:
            return False  # this theorem's predicates are not inductive (an abstract `le`)
        return candidate.tactic.split()[0].rstrip(".;") not in self.unknown

    def observe(self, candidate: Candidate, result: TacticResult) -> None:
        head = candidate.tactic.split()[0].rstrip(".;")
        if candidate.source == "hammer":
            self.hammer_spent += result.seconds
        typ = self.case_types.get(candidate.tactic)
        if typ is not None and result.outcome == "error" and _NOT_INDUCTIVE.search(result.message or ""):
            self.facts.not_inductive.add(" ".join(typ.split()))  # no more case analyses on this type here
            if _applied_predicate(typ):  # nor on any other hypothesis of this predicate (`le a b`, then `le b c`)
                self.facts.not_inductive.add(_predicate_head(typ))
        if candidate.tactic == "constructor." and result.outcome == "error" \
                and _NOT_INDUCTIVE.search(result.message or ""):
            self.constructor_refusals += 1
        predicate = self.witness_of.get(candidate.tactic) if candidate.source == WITNESS_SOURCE else None
        if predicate is not None and result.outcome == "error" and _NOT_INDUCTIVE.search(result.message or ""):
            self.facts.no_witness.add(predicate)  # no more witnesses for this predicate here
        missing = _NOT_FOUND.search(result.message or "") if result.outcome == "error" else None
        unfold = _UNFOLD_ONE.match(candidate.tactic)
        if unfold is not None and result.outcome == "error" and _CANNOT_UNFOLD.search(result.message or ""):
            self.facts.opaque.add(unfold.group("name"))  # never offered again in this scope
        if missing is not None and not _binds(candidate.tactic, missing.group("name")) \
                and missing.group("name") != self.task.name.split(".")[-1]:
            # not the theorem's own name: it is the next theorems' earlier statement, in this same scope
            self.facts.missing.add(missing.group("name"))  # a lemma this scope does not have (another file's)
        if result.outcome == "timeout":
            self.hammer_timeouts += int(candidate.source == "hammer")
            self.learned_timeouts += int(candidate.source == "learned")
            self.slow[head] = self.slow.get(head, 0) + 1
            self.slow[candidate.tactic] = self.slow.get(candidate.tactic, 0) + 1
        elif result.outcome == "error" and re.search(r"(?:was not found|Unknown (?:tactic|command))", result.message) \
                and head in result.message:
            self.unknown.add(head)

    def _props(self, hyps: Sequence[tuple[str, str]]) -> set[str]:
        """The hypotheses' types that are propositions: by their text (:func:`_is_prop`), or an applied predicate
        (:data:`PREDICATE_HYPOTHESES`): ``H : set_In a x``, whose head's type ends in ``Prop`` (a local head by its
        type here, ``P : nat -> Prop``; a constant by ``Check``, asked once per scope for each head). Read once per
        state: the last state's answer is kept."""
        key = tuple(hyps)
        if key == self._props_of[0] and key:
            return self._props_of[1]
        local = {name: " ".join(typ.split()) for name, typ in hyps}
        out: set[str] = set()
        heads: dict[str, str] = {}  # a type whose text says nothing -> its head constant
        for _, typ in hyps:
            if _is_prop(typ):
                out.add(typ)
            elif PREDICATE_HYPOTHESES and (m := _TYPE_HEAD.match(" ".join(typ.split()))) is not None \
                    and m.group("head") not in _SORTS:
                heads[typ] = m.group("head")
        ask = [h for h in dict.fromkeys(heads.values()) if h not in local and h not in self.facts.predicates]
        types_of = getattr(self.states, "types_of", None)
        if ask and types_of is not None:
            found = types_of(ask)
            for head in ask:
                self.facts.predicates[head] = returns_prop(found.get(head, ""))
        for typ, head in heads.items():
            if returns_prop(local[head]) if head in local else self.facts.predicates.get(head, False):
                out.add(typ)
        self._props_of = (key, out)
        return out

    def _namesakes(self) -> list[str]:
        """The lemmas of the theorem's own name that an open functor's parameters carry (``M.mem_spec`` for
        ``mem_spec`` in ``MSetInterface.v``'s ``Module WRaw2SetsOn (E:DecidableType)(M:WRawSets E)``, whose proofs
        are ``exact (@M.mem_spec _ _ _)``): a functor that wraps its parameter restates the parameter's lemmas.
        Each is another constant than the stripped original, and a parameter's field is a hypothesis the checker
        allows; ``Locate`` says which exist (asked once per scope, :meth:`_located`), innermost module first.
        Where the original's module is not loaded (:data:`OTHER_NAMESAKES`), the short name itself too, when it
        names a constant here (``lt_eq_cases`` in ``ZNatPairs.v`` is the imported parameter ``N``'s: the theorem
        being proved is not yet one, so ``Locate`` finds another)."""
        if not NAMESAKES or getattr(self.states, "locate", None) is None:
            return []
        short = self.task.name.split(".")[-1]
        names = dict.fromkeys(f"{p}.{short}" for module in reversed(self.modules) for p in module.parameters)
        if self.lookups.namesakes and short not in self.definitions:
            names[short] = None
        return [name for name in names if self._located(name) is not None]

    def _original_loaded(self, states: Any) -> bool:
        """Whether this session has the target's own module loaded (the original reachable by its name): a
        preload that reaches it; never the checker's case (oracle/coq/modules.py)."""
        loaded = getattr(states, "loaded_libraries", None)
        return bool(self.task.module) and loaded is not None and self.task.module in loaded()

    def _module_unfolds(self, used: set[str]) -> list[list[str]]:
        """For each module of the file with two or more definitions, one of which the goal names (qualified or
        not), all of them (:data:`MODULE_UNFOLDS`): a notation hides the rest (``==`` for ``Z.eq``)."""
        if not MODULE_UNFOLDS:
            return []
        return [names for names in self._definition_modules
                if any(n in used or n.split(".")[-1] in used for n in names)]

    @functools.cached_property
    def _definition_modules(self) -> list[list[str]]:
        """The file's definitions by their module, those of two or more (read once: the view does not change)."""
        modules: dict[str, list[str]] = {}
        for name in self.definitions:
            if "." in name:
                modules.setdefault(name.rsplit(".", 1)[0], []).append(name)
        return [names for names in modules.values() if len(names) >= 2]

    @functools.cached_property
    def _definition_names(self) -> set[str]:
        """The file's definitions by their full and short names."""
        return set(self.definitions) | {d.split(".")[-1] for d in self.definitions}

    @functools.cached_property
    def _root_symbols(self) -> set[str]:
        """The names the statement's goal shows (a later goal's other names are new: :meth:`_fresh_premises`)."""
        return set(tokens(self.root.goals[0] if self.root.goals else ""))

    def _located(self, name: str) -> str | None:
        """``Locate``'s full name of ``name`` here, asked once per scope (:attr:`ScopeFacts.located`); None when it
        is no constant, or the proof states cannot say."""
        locate = getattr(self.states, "locate", None)
        if locate is None:
            return None
        if name not in self.facts.located:
            self.facts.located[name] = locate(name)
        return self.facts.located[name]

    def _parameter_field(self, name: str) -> bool:
        """Whether the assumption ``name`` is a field of an open functor's parameter (agents/coq_scope.py): a
        hypothesis of every theorem of the functor, which the checker allows (``Locate`` asked once per scope)."""
        if not any(m.parameters for m in self.modules):
            return False
        return parameter_field(self._located(name), self.modules)

    @property
    def lookup_stats(self) -> dict[str, list[float]]:
        """This theorem's queries to Coq by kind (``Search`` on the goal's shape, its implications, its
        equivalences...): [queries, seconds] (best_first reports them in ``by_source`` as ``lookup:KIND``); and
        ``refused``, the queries the proof states' screen refused during this theorem, where there were any."""
        refused = getattr(self.states, "refused_queries", 0) - self._refused_before
        return {**self.lookups.spent, **({"refused": [refused, 0.0]} if refused else {})}

    @property
    def _banned_short(self) -> set[str]:
        return {name.split(".")[-1] for name in self.banned_axioms}

    def validate(self, tactics: Sequence[str]) -> str | None:
        if tuple(tactics) in self.refused_proofs:
            return "the checker refused this proof"
        check = getattr(self.states, "assumptions_of_proof", None)
        if check is None:
            return None
        axioms = check(list(tactics))
        if axioms is None:
            return "the proof does not close at Qed"
        short = self._banned_short
        banned = [a for a in axioms if a.split(".")[-1] in short]
        if banned:
            return f"relies on {', '.join(banned)}, which the checker refused a proof of this theorem for"
        # rediscover: the view's earlier theorems are `Admitted` here (the checker has their proofs). A
        # library's own axioms (`ClassicalDedekindReals.sig_forall_dec` under every classical real, `classic`)
        # print qualified by their module, or by their short name where it is imported (`Uint63`'s primitives
        # `int`, `lsr`, `land` under every `to_Z` bound): the checker allows those the original proof rests on
        # (oracle.coq.reference.OriginalAxioms), which the agent cannot see, so it leaves them to the checker
        allowed = (*self.allowed_axioms, *(self.file_lemmas if self.setting == "rediscover" else ()))
        declared = declared_names(self.task.context)  # the file's own axioms (`Axiom`, `Parameter`) too
        bad = [a for a in axioms if a not in allowed and a.split(".")[-1] not in allowed and "." not in a
               and a not in declared and not self._parameter_field(a) and not self._library_axiom(a)]
        return f"relies on {', '.join(bad)}" if bad else None

    def _library_axiom(self, name: str) -> bool:
        """Whether the unqualified assumption ``name`` is a library's (:data:`LIBRARY_AXIOMS`): no name the view
        defines, and ``Locate`` places it in a library the session has loaded (``PrimInt63.lsr``), or cannot read
        it (``land``, a notation's keyword where ``Uint63`` is imported; a file's or a parameter's name it reads)."""
        if not LIBRARY_AXIOMS or name.startswith("rrma_"):
            return False
        if name in self.file_lemmas or name in self._definition_names:
            return False
        located = self._located(name)
        if located is None:
            return True
        loaded = getattr(self.states, "loaded_libraries", None)
        libraries = loaded() if loaded is not None else []
        return any(located.startswith(f"{library}.") for library in libraries)
