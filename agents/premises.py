"""Premise selection for the proof search: which earlier lemmas might close or rewrite a goal.

Why it exists: the lemmas of a real library are mostly proved from the lemmas just before them
(``app_inv_tail`` from ``app_inj_tail_iff``, ``nth_error_nth`` from ``nth_error_split``), and
from the libraries the file imports. A search that tries ``rewrite L``/``apply L`` for every lemma
in scope drowns; one that tries none cannot follow the library. This module ranks premises by a
cheap relevance score against the goal, so the search tries the few that share its vocabulary.

* :func:`coq_file_premises` / :func:`lean_file_premises`: the lemmas of a theorem's context (the
  file before it), with the names they are reachable by at that point (a lemma of a closed Coq
  module is ``M.lemma``); lemmas whose proof ends in ``Admitted`` are left out, so the search never
  leans on something the oracle would refuse, and so are axioms unless asked for (the oracle allows
  those the original proof rests on).
* :func:`tokens`: the symbols of a statement as the prover prints it (identifiers and notation
  runs such as ``++``, ``::``, ``<=``), which is what the goals show.
* :class:`PremiseIndex`: inverse-document-frequency weights over the premise pool and
  :meth:`PremiseIndex.rank` (shared rare symbols count, symbols the goal lacks cost a little,
  nearer lemmas of the file break ties).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from oracle.proof_state import Premise
from oracle.strip_coq import CoqSyntaxError, split_sentences

_TOKEN = re.compile(r"[A-Za-z_][\w'.]*[\w']|[A-Za-z_]|[^\w\s(),{}\[\]]+|\[\]")
# binders and punctuation that say nothing about what a lemma is about
_NOISE = frozenset({"forall", "fun", "exists", "let", "in", "match", "with", "end", "as", "return", "if", "then",
                    "else", "Type", "Prop", "Set", "SProp", ":", ",", "=>", ":=", "|", "∀", "∃", "λ", "by",
                    "Sort", "@", "|-", "⊢", ";", "%"})

_COQ_DECL = re.compile(
    r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Polymorphic|Monomorphic|Program)\s+)*"
    r"(?P<kw>Theorem|Lemma|Example|Fact|Remark|Corollary|Proposition|Property|Definition|Fixpoint|"
    r"CoFixpoint|Let|Axiom|Axioms|Parameter|Parameters|Conjecture|Hypothesis|Hypotheses|Variable|Variables|"
    r"Instance)\s+(?P<name>[A-Za-z_][\w']*)(?P<rest>.*)$", re.S)
_COQ_THEOREM = frozenset({"Theorem", "Lemma", "Example", "Fact", "Remark", "Corollary", "Proposition", "Property"})
_COQ_END = re.compile(r"^(?P<kw>Qed|Defined|Admitted|Abort(?:\s+All)?|Save\s+\S+)\s*\.$")
_COQ_MODULE = re.compile(r"^(?P<type>Module\s+Type|Module)\s+(?:(?:Import|Export)\s+)?(?P<name>[A-Za-z_][\w']*)"
                         r"(?P<rest>.*)\.$", re.S)
_COQ_SECTION = re.compile(r"^Section\s+(?P<name>[A-Za-z_][\w']*)\s*\.$")
_COQ_END_SCOPE = re.compile(r"^End\s+(?P<name>[A-Za-z_][\w']*)\s*\.$")


def tokens(text: str) -> list[str]:
    """Symbols of a statement: identifiers (dotted names whole) and notation runs, noise dropped."""
    return [t for t in _TOKEN.findall(text) if t not in _NOISE]


# a switch for tests: False keeps a constant whose type is a data type among the premises (`set_add : A -> set ->
# set`, which `Search set` lists, and `set_In : A -> set -> Prop`, a predicate the file defines), as before round
# twenty-four: `apply set_add.` and `auto using set_In, set_add` took the slots of the lemmas
LEMMAS_ONLY = True
_SORT_END = re.compile(r"(?<![\w'.])(?:Prop|Type|Set|SProp)$")
_DATA_PIECE = re.compile(r"[A-Za-z_][\w'.]*|\([A-Za-z_][\w'.]*(?: [A-Za-z_][\w'.]*)*\)")


def is_data_type(statement: str) -> bool:
    """Whether a constant of this type is a value or a predicate, not a proof (:data:`LEMMAS_ONLY`): its type is
    a chain of names one of which is lowercase (``A -> set -> set``, ``set``, ``A -> set -> bool``) or ends in a
    sort (``A -> set -> Prop``). A named proposition (``True``, ``P -> Q``) is a proof's type; a lemma shows a
    binder, a relation or a connective."""
    text = " ".join(statement.split()).lstrip(": ").strip()
    if not LEMMAS_ONLY or not text:
        return False
    if _SORT_END.search(text) and not text.startswith(("forall", "exists")):
        return True
    pieces = [p.strip() for p in text.split("->")]
    # and one lowercase name at least (`set`, `bool`): `P -> Q` may be section variables' propositions
    return all(_DATA_PIECE.fullmatch(p) for p in pieces) and not any(p in ("True", "False") for p in pieces) \
        and any(p.lstrip("(")[:1].islower() for p in pieces)


def _statement_of(rest: str) -> str:
    """The type part of ``NAME binders : type.`` (binders kept: they name the symbols too)."""
    return " ".join(rest.strip().rstrip(".").split())


def coq_file_premises(context: str, *, admitted: bool = False,
                      axioms: bool = False) -> tuple[list[Premise], list[str]]:
    """(lemmas proved in ``context``, definitions to unfold), each reachable by the names returned.

    Lemmas closed by ``Admitted`` or ``Abort`` and every axiom-like declaration are left out;
    ``admitted=True`` keeps the ``Admitted`` ones (the ``rediscover`` setting shows every earlier
    theorem that way: the checker has their proofs); ``axioms=True`` keeps the file's ``Axiom``s (the
    checker allows a proof to rest on those its theorem's original rests on, and a file that declares
    an axiom builds its theorems on it: ``Logic/ClassicalEpsilon.v``'s ``constructive_indefinite_description``).
    Names defined inside a module that is closed by the end of the context are qualified
    (``Nat.add_comm``); a closed functor's or module type's contents are not reachable and are
    skipped, while those of one still open at the end of the context (the theorem's own functor) are
    reachable by their short names.
    """
    try:
        sentences = split_sentences(context)
    except CoqSyntaxError:
        return [], []
    # (name, is a Module (not a Section), reachable after End, frame id)
    stack: list[tuple[str, bool, bool, int]] = []
    frames = itertools.count()
    dead: set[int] = set()  # closed functors and module types: what they declared is not reachable
    # (module path, name, statement, frames not reachable once closed)
    found: list[tuple[tuple[str, ...], str, str, frozenset[int]]] = []
    definitions: list[tuple[tuple[str, ...], str, frozenset[int]]] = []
    pending: tuple[tuple[str, ...], str, str, frozenset[int]] | None = None
    for sent in sentences:
        code = sent.code
        if pending is not None:
            end = _COQ_END.match(code)
            if end is not None:
                if end.group("kw") in ("Qed", "Defined") or end.group("kw").startswith("Save") or (
                        admitted and end.group("kw") == "Admitted"):
                    found.append(pending)
                pending = None
            continue
        if (m := _COQ_SECTION.match(code)) is not None:
            stack.append((m.group("name"), False, True, next(frames)))
            continue
        if (m := _COQ_MODULE.match(code)) is not None:
            rest = m.group("rest")
            if (":=" in rest and "<:" not in rest.split(":=")[0]) or rest.strip().startswith(":="):
                continue  # `Module M := N.` is complete at once
            functor = "(" in rest.split(":")[0] if rest.strip() else False
            stack.append((m.group("name"), True, not functor and "Type" not in m.group("type"), next(frames)))
            continue
        if (m := _COQ_END_SCOPE.match(code)) is not None:
            if stack and stack[-1][0] == m.group("name"):
                closed = stack.pop()
                if not closed[2]:
                    dead.add(closed[3])
            continue
        m = _COQ_DECL.match(code)
        if m is None:
            continue
        kw, name, rest = m.group("kw"), m.group("name"), m.group("rest")
        path = tuple(s[0] for s in stack if s[1])
        hidden = frozenset(s[3] for s in stack if not s[2])  # unreachable if any of these is closed later
        if kw in _COQ_THEOREM:
            if ":=" in rest.split(":", 1)[-1] and rest.rstrip().endswith("."):
                # `Lemma l : T := term.` carries its proof: complete at once
                found.append((path, name, _statement_of(rest.split(":=")[0]), hidden))
                continue
            pending = (path, name, _statement_of(rest), hidden)
            continue
        if kw == "Axiom" and axioms and ":" in rest:
            found.append((path, name, _statement_of(rest.split(":", 1)[1]), hidden))
            continue
        if kw in ("Definition", "Let"):
            definitions.append((path, name, hidden))
            head = rest.split(":=")[0]
            if ":" in head and rest.count(":=") >= 1 and ("=" in head or "->" in head or "<->" in head) \
                    and not is_data_type(head.split(":", 1)[1]):
                # a lemma stated as a Definition (``Definition foo n : P n := ...``)
                found.append((path, name, _statement_of(head), hidden))
    open_path = [s[0] for s in stack if s[1]]

    def reach(path: tuple[str, ...], name: str) -> str:
        if list(path[: len(open_path)]) == open_path:
            return ".".join([*path[len(open_path):], name])
        return ".".join([*path, name])

    premises = [Premise(reach(path, name), stmt, "file", frozenset(tokens(stmt)))
                for path, name, stmt, hidden in found if name and not hidden & dead]
    return premises, [reach(path, name) for path, name, hidden in definitions if not hidden & dead]


# every sentence that puts a name into the environment (lemmas, definitions, section variables,
# inductive types, records, classes, notations aside): its first name
_COQ_NAMING = re.compile(
    r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Polymorphic|Monomorphic|Program|Private|Cumulative|NonCumulative)\s+)*"
    r"(?P<kw>Theorem|Lemma|Example|Fact|Remark|Corollary|Proposition|Property|Definition|Fixpoint|CoFixpoint|"
    r"Let|Axiom|Axioms|Parameter|Parameters|Conjecture|Hypothesis|Hypotheses|Variable|Variables|Context|Instance|"
    r"Inductive|CoInductive|Variant|Record|Structure|Class|Existing\s+Instance|Scheme|Combined\s+Scheme|"
    r"Function|Equations|Module(?:\s+Type)?|Declare\s+Module|Add\s+(?:Parametric\s+)?(?:Morphism|Relation|Ring|"
    r"Field|Setoid))\b(?P<rest>.*)$", re.S)
_NAMES_OF_ITEM = re.compile(r"(?:^|\||:=|with|\(|;)\s*\(?\s*(?P<name>[A-Za-z_][\w']*)")


# the sentences that assume names rather than define them: each may name several (`Variable A B : Type.`)
_SINGULAR = frozenset({"Variable", "Hypothesis", "Axiom", "Parameter", "Conjecture"})
_ASSUMING = _SINGULAR | {"Variables", "Hypotheses", "Axioms", "Parameters", "Context"}


# the suffixes of the induction schemes Coq makes for an inductive type (`le_ind`, `le_sind`): no hint for `auto`
# nor `eauto`
SCHEME_SUFFIXES = ("_ind", "_rec", "_rect", "_sind")


def declared_names(context: str) -> frozenset[str]:
    """The short names ``context``'s own sentences declare: lemmas, definitions, section variables and
    hypotheses, inductive types with their constructors, records with their fields, schemes (what a
    tactic learnt in one file may name and another file does not have). Over-inclusive by design: a
    binder name of a declaration's statement may be counted too (a name that is counted but another
    file lacks only makes a learnt step from the first file stay there)."""
    try:
        sentences = split_sentences(context)
    except CoqSyntaxError:
        return frozenset()
    out: set[str] = set()
    for sent in sentences:
        m = _COQ_NAMING.match(sent.code)
        if m is None:
            continue
        kw, rest = m.group("kw"), m.group("rest")
        head = rest.split(":", 1)[0] if kw in _ASSUMING else rest
        first = re.match(r"\s*(?P<name>[A-Za-z_][\w']*)", head)
        if first is not None:
            out.add(first.group("name"))
        if kw in _ASSUMING:
            # `Parameter P Q R : t -> Prop.` declares three, as `Parameters` does; a singular keyword's brackets
            # after its names are its statement's binders (`Axiom ax (n : nat) : P n.`), not more names
            named = re.split(r"[({]", head, maxsplit=1)[0].split() if kw in _SINGULAR else []
            groups = [" ".join(named)] if named else re.findall(r"[({]([^(){}]*?):", rest) or [head]
            for group in groups:
                out.update(n for n in group.split() if re.fullmatch(r"[A-Za-z_][\w']*", n))
        elif kw in ("Inductive", "CoInductive", "Variant", "Record", "Structure", "Class"):
            body = rest.split(":=", 1)[1] if ":=" in rest else ""
            out.update(m2.group("name") for m2 in _NAMES_OF_ITEM.finditer(body))
            types = {first.group("name")} if first is not None else set()
            types.update(re.findall(r"\bwith\s+([A-Za-z_][\w']*)", rest))  # mutual types
            out.update(types)
            out.update(f"{t}{suffix}" for t in types for suffix in SCHEME_SUFFIXES)
            out.update(re.findall(r"([A-Za-z_][\w']*)\s*:(?!=)", body))  # record fields, constructors
        elif kw.startswith(("Scheme", "Combined")):
            out.update(re.findall(r"(?:^|:=|with)\s*([A-Za-z_][\w']*)\s*:=", rest))
    return frozenset(out - {"Type", "Prop", "Set"})


_COQ_NOTATION = re.compile(
    r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global)\s+)?(?P<kw>Infix|Notation)\s+\"(?P<pattern>[^\"]+)\"\s*:=\s*"
    r"\(?\s*@?(?P<name>[A-Za-z_][\w'.]*)")
_NOTATION_SYMBOL = re.compile(r"[^\w\s(),{}\[\]']+|'[^'\s]+'")


def notation_names(codes: Sequence[str]) -> list[tuple[frozenset[str], str]]:
    """The constants the context's ``Infix`` and ``Notation`` sentences print as symbols, with those symbols: a
    goal that shows them names the constant though its name never appears (``Local Infix "+++" := def_add``:
    ``0 +++ y == y`` is about ``def_add``). A notation's pattern gives its symbols (``"x <<= y"``: ``<<=``; a
    quoted keyword, ``"'S' n"``, without its quotes); a pattern of variables only gives nothing."""
    out: list[tuple[frozenset[str], str]] = []
    for code in codes:
        m = _COQ_NOTATION.match(code)
        if m is None:
            continue
        pattern = m.group("pattern").strip()
        found = [pattern] if m.group("kw") == "Infix" else [s.strip("'") for s in _NOTATION_SYMBOL.findall(pattern)]
        symbols = frozenset(s for s in found if s and s not in _NOISE)
        if symbols:
            out.append((symbols, m.group("name")))
    return out


def coq_file_proofs(context: str) -> list[tuple[str, str, str]]:
    """(name, statement, proof body) of every lemma ``context`` proves with ``Qed``/``Defined``:
    scripts a search may retry on a similar statement (the body without ``Proof.``/``Qed.``)."""
    from oracle.coq.screen import ProofRejected, screen_proof
    from oracle.strip_coq import strip_coq_text

    try:
        tasks = strip_coq_text(context)
    except CoqSyntaxError:
        return []
    out: list[tuple[str, str, str]] = []
    for task in tasks:
        if not re.search(r"(?:Qed|Defined)\s*\.\s*$", task.original_proof):
            continue
        try:
            script = screen_proof(task.original_proof)
        except ProofRejected:
            continue
        if "with" in script.opener:
            continue  # its `...` needs the opener's tactic
        out.append((task.name, task.statement, "\n".join(u.code for u in script.units)))
    return out


def similar(statement: str, others: Sequence[tuple[str, str, str]], index: PremiseIndex,
            limit: int = 8) -> list[tuple[str, str, str]]:
    """The entries of ``others`` whose statements share the most rare symbols with ``statement``."""
    goal = set(tokens(statement))
    scored = []
    for k, entry in enumerate(others):
        syms = set(tokens(entry[1]))
        union = goal | syms
        if not union:
            continue
        score = sum(index.weight(t) for t in goal & syms) / (1.0 + sum(index.weight(t) for t in union))
        scored.append((score, k, entry))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [entry for _, _, entry in scored[:limit]]


_LEAN_DECL = re.compile(r"^[ \t]*(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*"
                        r"(?P<kw>theorem|lemma|def|abbrev)\s+(?P<name>[^\s(:{\[]+)(?P<rest>[^\n]*(?:\n[ \t]+[^\n]*)*)",
                        re.M)


def lean_file_premises(context: str) -> tuple[list[Premise], list[str]]:
    """(theorems of ``context`` with their statements, definitions): Lean names as written."""
    premises: list[Premise] = []
    definitions: list[str] = []
    for m in _LEAN_DECL.finditer(context):
        name, rest = m.group("name"), m.group("rest")
        if m.group("kw") in ("def", "abbrev"):
            definitions.append(name)
            continue
        statement = rest.split(":=")[0]
        if "sorry" in rest.split(":=", 1)[-1].split("\n\n")[0]:
            continue
        stmt = " ".join(statement.split())
        premises.append(Premise(name, stmt, "file", frozenset(tokens(stmt))))
    return premises, definitions


class PremiseIndex:
    """Premises with IDF weights; :meth:`rank` orders them by relevance to a goal."""

    def __init__(self, premises: Iterable[Premise]) -> None:
        self.premises: list[Premise] = []
        seen: set[str] = set()
        for p in premises:
            if p.name in seen:
                continue
            seen.add(p.name)
            self.premises.append(p if p.symbols else replace(p, symbols=frozenset(tokens(p.statement))))
        df: Counter[str] = Counter()
        for p in self.premises:
            df.update(p.symbols)
        n = max(1, len(self.premises))
        self.idf = {sym: math.log((n + 1) / (count + 0.5)) for sym, count in df.items()}
        self._default_idf = math.log(n + 1)

    def add(self, premises: Sequence[Premise]) -> PremiseIndex:
        return PremiseIndex([*self.premises, *premises])

    def weight(self, sym: str) -> float:
        return self.idf.get(sym, self._default_idf)

    def rank(self, goal: str, limit: int = 8, exclude: Iterable[str] = ()) -> list[Premise]:
        """The ``limit`` premises most relevant to ``goal`` (ties: later in the file first)."""
        goal_syms = set(tokens(goal))
        skip = set(exclude)
        scored: list[tuple[float, int, Premise]] = []
        for index, p in enumerate(self.premises):
            if p.name in skip or p.name.split(".")[-1] in skip:
                continue
            shared = p.symbols & goal_syms
            if not shared:
                continue
            gain = sum(self.weight(s) for s in shared)
            cost = 0.25 * sum(self.weight(s) for s in p.symbols - goal_syms)
            recency = index if p.origin == "file" else -1
            scored.append((gain - cost, recency, p))
        scored.sort(key=lambda item: (-item[0], -item[1]))
        return [p for _, _, p in scored[:limit]]


def conclusion_of(statement: str) -> str:
    """The part of a statement after its last top-level ``->``/``,`` (what ``apply`` must match); the ``->`` of an
    equivalence's ``<->`` is none (before round twenty ``n <= m <-> S n <= S m`` ended at ``S n <= S m``, so an
    equivalence was never a rewrite rule)."""
    depth = 0
    cut = 0
    i = 0
    while i < len(statement):
        ch = statement[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and ((statement.startswith("->", i) and statement[i - 1:i] != "<")
                             or statement.startswith("→", i)):
            cut = i + (2 if statement.startswith("->", i) else 1)
        elif depth == 0 and ch == "," and re.search(r"(?:forall|∀|exists|∃)[^,]*$", statement[:i]):
            cut = i + 1
        i += 1
    return statement[cut:].strip()


def is_rewrite_rule(statement: str) -> bool:
    """Whether the lemma's conclusion is an equation (``=``, or a setoid's ``==``, which ``rewrite`` reads
    through the scope's ``Proper`` instances) or an equivalence (``rewrite`` can use it)."""
    concl = conclusion_of(statement)
    return bool(re.search(r"(?<![<>=!:])==?(?![=>])|<->|↔", concl))


__all__ = ["SCHEME_SUFFIXES", "PremiseIndex", "conclusion_of", "coq_file_premises", "coq_file_proofs", "is_rewrite_rule", "lean_file_premises", "similar", "tokens"]
