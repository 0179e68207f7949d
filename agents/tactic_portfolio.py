"""Offline prover agent: a tactic-portfolio search for Coq and Lean 4 proofs.

Why it exists: the strip-and-rediscover benches need a baseline prover that runs without any
model or network, so the benches (and CI) can show that the oracles accept real proofs and that
agents sharing a blackboard learn from each other. It proposes one proof body per turn for
``ctx.theorem`` (``{"name", "statement", "context", "difficulty", "prover"}``):

* **Portfolio**: prover-specific templates, cheap ones first (Coq: ``auto``, ``lia``,
  ``intuition``, ``congruence``, ``induction v; simpl; auto``...; Lean: ``rfl``, ``decide``,
  ``simp``, ``omega``, ``induction v <;> simp_all``...). ``{v}``/``{w}`` are filled with the
  statement's variables (the induction variable is the first list, then nat, then other
  variable); ``{L}`` with lemmas proved earlier in the file (the context).
* **Feedback**: when a proof ran without error but left goals (the checker's remaining goals in
  the feedback), it is extended with closers (``; rewrite IHn; lia``, ``<;> omega``...) using the
  hypothesis names seen in those goals. Composites go to the front of the queue.
* **Blackboard**: after a success it posts ``tactic `T` closed theorem NAME (goal shape: S)``;
  on every theorem it reads such lines (from any agent) and tries first the templates that
  closed theorems of a similar shape (Jaccard similarity of shape features).

Invariant: never proposes the same proof text twice for a theorem (its own memory plus
``ctx.tried``), and returns ``None`` only when its queue for the theorem is exhausted (or when
there is no theorem, after flushing its pending posts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import Field

from rrma.contracts import Agent, Context, PluginSettings, TrialSummary
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Proposal

COQ_TEMPLATES: list[str] = [
    "reflexivity.",
    "auto.",
    "intros; lia.",
    "intuition.",
    "congruence.",
    "intros; simpl; auto.",
    "induction {v}; simpl; auto.",
    "intros; subst; auto.",
    "intros; discriminate.",
    "firstorder.",
    "tauto.",
    "intros; congruence.",
    "intros; simpl; lia.",
    "induction {v}; simpl; lia.",
    "induction {v}; simpl; congruence.",
    "induction {v}; simpl; try rewrite IH{v}; auto.",
    "induction {v}; simpl; try rewrite IH{v}; lia.",
    "intros; induction {v}; simpl; auto.",
    "intros; induction {v}; simpl; try rewrite IH{v}; auto.",
    "intros; destruct {v}; simpl; auto.",
    "destruct {v}; reflexivity.",
    "destruct {v}, {w}; reflexivity.",
    "intros; destruct {v}; simpl in *; auto; discriminate.",
    "intros; injection H; auto.",
    "intros; inversion H; auto.",
    "intros; split; intros; intuition.",
    "intros; ring.",
    "intros; nia.",
    "auto with arith.",
    "eauto.",
    "intros; induction H; auto.",
    "intros; induction H; lia.",
    "induction {v}; simpl; nia.",
    "induction {v}; simpl; intros; auto with arith.",
    "intros; rewrite {L}; auto.",
    "induction {v}; simpl; try rewrite {L}; simpl; try rewrite IH{v}; auto.",
    "induction {v}; simpl; try rewrite {L}; simpl; try rewrite IH{v}; lia.",
    "intros; rewrite !{L} in *; lia.",
    "intros; apply {L}; auto.",
]

COQ_CLOSERS: list[str] = [
    "lia",
    "intros; rewrite {IH}; auto",
    "intros; rewrite {IH}; lia",
    "intros; rewrite {L}; simpl; rewrite {IH}; auto",
    "intros; rewrite {L}; simpl; rewrite {IH}; lia",
    "congruence",
    "intros; rewrite {IH}; reflexivity",
    "intros; rewrite <- {IH}; auto",
    "f_equal; auto",
    "intros; rewrite {L}; auto",
    "ring",
    "intuition",
]

LEAN_TEMPLATES: list[str] = [
    "by rfl",
    "by decide",
    "by simp",
    "by omega",
    "by simp_all",
    "by intros; omega",
    "by intro h; simp_all",
    "by intros; simp_all",
    "by constructor",
    "by constructor <;> simp_all",
    "by induction {v} <;> simp_all",
    "by induction {v} <;> simp [*]",
    "by cases {v} <;> simp_all",
    "by intros; induction {v} <;> simp_all <;> omega",
    "by simp_arith",
    "by intro h; exact h",
    "by constructor <;> intro h <;> simp_all",
    "by induction {v} <;> simp_all <;> omega",
    "by cases {v} <;> cases {w} <;> rfl",
    "by intros; constructor <;> simp_all",
    "by simp [{L}]",
    "by induction {v} <;> simp_all [{L}]",
]

LEAN_CLOSERS: list[str] = ["omega", "simp_all", "simp [*]", "rfl", "simp_arith", "simp_all [{L}]"]

SECOND_CHOICE_PENALTY = 8.0  # queue distance of a template's second instantiation
COMPOSITE_OFFSET = 3.0  # queue distance between a proof that made progress and its extensions
STRUCTURAL = re.compile(r"\b(?:intros?|induction|destruct|cases|split|simpl|inversion|injection|constructor|rcases|obtain)\b")

POST_RE = re.compile(r"tactic `(?P<template>[^`]+)` closed theorem (?P<name>\S+) \(goal shape: (?P<shape>[^)]*)\)")
_BINDER_GROUP = re.compile(r"[({]\s*([A-Za-z_][\w' ]*?)\s*:\s*([^(){}]+?)\s*[)}]")
_FORALL = re.compile(r"(?:forall|∀)\s+([^,]+),")
_IDENT = re.compile(r"[A-Za-z_][\w']*")
_LEMMA = re.compile(r"^\s*(?:Theorem|Lemma|Fact|Remark|Corollary|Proposition|theorem|lemma)\s+([A-Za-z_][\w'.]*)", re.M)
_HYP_NAME = re.compile(r"(?:^|; )\s*((?:IH|ih)[\w']*)\s*:")

SHAPE_FEATURES: list[tuple[str, tuple[str, ...]]] = [
    ("forall", ("forall", "∀")),
    ("imp", ("->", "→")),
    ("iff", ("<->", "↔")),
    ("and", ("/\\", "∧")),
    ("or", ("\\/", "∨")),
    ("not", ("~", "¬", "<>", "≠")),
    ("exists", ("exists", "∃")),
    ("order", ("<=", "≤", " < ", " > ", ">=", "≥")),
    ("list", ("list", "List", "++", "::", "rev", "map", "length", "[]")),
    ("nat", ("nat", "Nat", " + ", " * ", "S ", ".succ")),
    ("bool", ("bool", "Bool", "true", "false", "negb", "andb", "orb")),
    ("tree", ("tree", "Tree")),
]


def shape_of(statement: str) -> set[str]:
    """Coarse features of a statement (connectives, orders, data types) for similarity."""
    body = statement.split(":", 1)[1] if ":" in statement else statement
    feats = {name for name, marks in SHAPE_FEATURES if any(m in body for m in marks)}
    if re.search(r"(?<![<>:!~])=(?![>=])", body):
        feats.add("eq")
    return feats


def similarity(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def variables_of(statement: str) -> list[tuple[str, str]]:
    """(name, type) of the statement's universally bound variables, in order."""
    out: list[tuple[str, str]] = []
    for match in _BINDER_GROUP.finditer(statement):
        for name in match.group(1).split():
            out.append((name, match.group(2).strip()))
    for match in _FORALL.finditer(statement):
        inner = match.group(1)
        if "(" in inner:
            continue  # parenthesized binders were taken above
        names, _, typ = inner.partition(":")
        for name in names.split():
            if _IDENT.fullmatch(name):
                out.append((name, typ.strip()))
    seen: set[str] = set()
    result = []
    for name, typ in out:
        if name in seen or typ in ("Type", "Prop", "Set") or typ.startswith(("Type", "Sort")) or "->" in typ or "→" in typ:
            continue
        seen.add(name)
        result.append((name, typ))
    return result


def induction_order(variables: list[tuple[str, str]]) -> list[str]:
    """Variables in the order worth inducting on: lists first, then naturals, then the rest."""
    def rank(item: tuple[int, tuple[str, str]]) -> tuple[int, int]:
        index, (_, typ) = item
        low = typ.lower()
        kind = 0 if "list" in low else 1 if low in ("nat", "ℕ") else 2 if typ else 3
        return (kind, index)
    return [name for _, (name, _) in sorted(enumerate(variables), key=rank)]


_COMMON = frozenset({"forall", "exists", "fun", "nat", "Nat", "list", "List", "Type", "Prop", "Set", "bool",
                     "Bool", "True", "False", "true", "false", "in", "let", "match", "with", "end", "theorem",
                     "lemma", "Theorem", "Lemma", "Fact", "Remark", "Corollary", "Proposition", "Example"})


def _symbols(statement: str) -> set[str]:
    """Constants a statement talks about (identifiers minus its own variables and keywords)."""
    names = {name for name, _ in variables_of(statement)}
    return {tok for tok in _IDENT.findall(statement) if tok not in _COMMON and tok not in names and len(tok) > 1}


def lemmas_of(context: str, statement: str = "", limit: int = 6) -> list[str]:
    """Lemmas proved earlier in the context, most relevant first (premise selection).

    Relevance: the constants a lemma's statement shares with ``statement`` (``rev_length``
    needs ``length_app`` because both mention ``length``); ties go to the nearest lemma.
    """
    found = [(m.group(1), m.end()) for m in _LEMMA.finditer(context)]
    goal = _symbols(statement) if statement else set()
    ranked = []
    for distance, (name, end) in enumerate(reversed(found)):
        lemma_statement = context[end : context.find(".", end) if "." in context[end:] else len(context)]
        shared = len(goal & _symbols(lemma_statement)) if goal else 0
        ranked.append((-shared, distance, name))
    ranked.sort()
    return [name for _, _, name in ranked[:limit]]


def goals_in(feedback: str) -> list[str]:
    """Remaining goals quoted in a checker's feedback (``remaining goals (k):`` block)."""
    lines = feedback.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("remaining goals"):
            return [g.strip() for g in lines[i + 1 :] if g.startswith("  ")]
    return []


def generalize(proof: str, var: str | None) -> str:
    """A solved proof as a reusable template: its induction variable becomes ``{v}``."""
    if not var or "`" in proof:
        return proof.replace("`", "'")
    out = re.sub(rf"(?<![\w']){re.escape(var)}(?![\w'])", "{v}", proof)
    return re.sub(rf"\b(IH|ih){re.escape(var)}(?![\w'])", r"\1{v}", out)


def instantiate(template: str, *, vars_: list[str], lemmas: list[str], ihs: list[str]) -> list[str]:
    """Concrete proofs of ``template`` (``{v}``, ``{w}``, ``{L}``, ``{IH}``); [] when it cannot apply."""
    outs = [template]
    for key, values in (("{v}", vars_[:2]), ("{w}", vars_[1:2]), ("{L}", lemmas[:4]), ("{IH}", ihs[:2])):
        if key in template:
            if not values:
                return []
            outs = [o.replace(key, val) for o in outs for val in values]
    return outs


@dataclass
class _Search:
    """The queue of one theorem: proof text -> (priority, template); lower priority first."""

    shape: set[str]
    var: str | None  # the preferred induction variable (generalized to {v} in posts)
    queue: dict[str, tuple[float, str, int]] = field(default_factory=dict)  # proof -> (priority, template, depth)
    tried: set[str] = field(default_factory=set)
    seen_trials: set[str] = field(default_factory=set)
    expanded: set[tuple[str, ...]] = field(default_factory=set)  # goal states already extended
    applied_posts: int = 0

    def push(self, proof: str, priority: float, template: str, depth: int = 0) -> None:
        if proof in self.tried:
            return
        old = self.queue.get(proof)
        if old is None or priority < old[0]:
            self.queue[proof] = (priority, template, depth)


class TacticPortfolioParams(PluginSettings):
    """``agents[].params`` of the tactic-portfolio backend (checked when the task is loaded: rrma/declare.py)."""

    max_depth: int = Field(2, ge=0, le=100)
    """Closers stacked on one proof from the checker's remaining goals (composition depth)."""
    hammer: bool = False
    """Not used: accepted so that runs recorded before the coq bench gave --hammer's settings only to the search agent (their run.json gives them to every agent) still load and resume."""
    hammer_seconds: float = Field(0.0, ge=0)
    """Not used: accepted so that runs recorded before the coq bench gave --hammer-seconds only to the search agent still load and resume."""


class TacticPortfolioAgent(Agent):
    """Offline tactic-portfolio prover; params: ``max_depth`` (composition depth, default 2)."""

    backend = "tactic-portfolio"
    params_model = TacticPortfolioParams

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.max_depth = int(config.params.get("max_depth", 2))
        self._searches: dict[str, _Search] = {}
        self._pending_posts: list[tuple[str, str | None]] = []
        self._proposed: dict[str, tuple[str, str, str]] = {}  # trial id -> (theorem, template, shape)

    # ------------------------------------------------------------------ protocol

    def propose(self, ctx: Context) -> Proposal | None:
        self.finish(ctx)
        th = ctx.theorem
        if not th:
            return None
        name = str(th["name"])
        prover = str(th.get("prover", "coq"))
        statement = str(th.get("statement", ""))
        search = self._searches.get(name)
        if search is None:
            search = self._searches[name] = self._seed(prover, statement, str(th.get("context", "")))
        self._learn_from_blackboard(search, ctx, prover, statement, str(th.get("context", "")))
        self._learn_from_feedback(search, ctx, name, prover, str(th.get("context", "")), statement)
        skip = ctx.tried
        while search.queue:
            proof = min(search.queue, key=lambda p: search.queue[p][0])
            priority, template, depth = search.queue.pop(proof)
            if proof in search.tried or proof in skip:
                search.tried.add(proof)
                continue
            search.tried.add(proof)
            ctx.record_turn(role="tool_call", tool="portfolio", text=f"{name}: try {proof!r}",
                            args={"template": template, "priority": round(priority, 3)})
            return Proposal(
                hypothesis=f"portfolio: {template}",
                proof=proof,
                theorem=name,
                meta={"template": template, "shape": ",".join(sorted(search.shape)), "proof": proof,
                      "depth": depth, "var": search.var, "priority": priority},
            )
        return None

    def finish(self, ctx: Context) -> None:
        """Post the tactics that closed theorems since the last proposal (the run's last call)."""
        for text, trial_id in self._pending_posts:
            ctx.post(text, trial_id=trial_id, tags=["tactic"])
        self._pending_posts.clear()

    def observe(self, trial: TrialSummary) -> None:
        if trial.status != "ok" or not trial.theorem:
            return
        proof = str(trial.params.get("proof", ""))
        var = trial.params.get("var")
        template = generalize(proof, str(var) if var else None) if proof else str(trial.params.get("template", ""))
        shape = str(trial.params.get("shape", ""))
        self._pending_posts.append(
            (f"tactic `{template}` closed theorem {trial.theorem} (goal shape: {shape})", trial.trial_id)
        )

    # ------------------------------------------------------------------ search

    def _seed(self, prover: str, statement: str, context: str) -> _Search:
        vars_ = induction_order(variables_of(statement))
        search = _Search(shape=shape_of(statement), var=vars_[0] if vars_ else None)
        templates = LEAN_TEMPLATES if prover == "lean" else COQ_TEMPLATES
        lemmas = lemmas_of(context, statement)
        for index, template in enumerate(templates):
            for k, proof in enumerate(instantiate(template, vars_=vars_, lemmas=lemmas, ihs=[])):
                # other variables / lemmas than the preferred one come later
                search.push(proof, 10.0 + index + SECOND_CHOICE_PENALTY * min(k, 1) + 0.1 * k, template)
        return search

    def _learn_from_blackboard(self, search: _Search, ctx: Context, prover: str, statement: str,
                               context: str) -> None:
        posts = ctx.blackboard[search.applied_posts :] if search.applied_posts <= len(ctx.blackboard) else ctx.blackboard
        search.applied_posts = len(ctx.blackboard)
        vars_ = induction_order(variables_of(statement))
        lemmas = lemmas_of(context, statement)
        scores: dict[str, float] = {}
        for line in posts:
            match = POST_RE.search(line)
            if match is None:
                continue
            other = {s for s in match.group("shape").split(",") if s}
            sim = similarity(search.shape, other)
            if sim >= 0.5:
                scores[match.group("template")] = scores.get(match.group("template"), 0.0) + sim
        for template, score in scores.items():
            if prover == "lean" and not template.startswith("by"):
                continue
            if prover == "coq" and template.startswith("by "):
                continue
            for proof in instantiate(template, vars_=vars_, lemmas=lemmas, ihs=[]):
                search.push(proof, 5.0 - min(score, 4.0), template)

    def _learn_from_feedback(self, search: _Search, ctx: Context, name: str, prover: str, context: str,
                             statement: str) -> None:
        lemmas = lemmas_of(context, statement)
        closers = LEAN_CLOSERS if prover == "lean" else COQ_CLOSERS
        for summary in [*ctx.own, *ctx.recent]:
            if summary.theorem != name or summary.trial_id in search.seen_trials or summary.status == "ok":
                continue
            search.seen_trials.add(summary.trial_id)
            feedback = summary.feedback
            incomplete = "incomplete proof" in feedback or "unsolved goals" in feedback
            goals = goals_in(feedback)
            if not incomplete or not goals:
                continue
            base = str(summary.params.get("proof") or "")
            parent_template = str(summary.params.get("template", ""))
            depth = int(summary.params.get("depth", 0))
            parent_priority = float(summary.params.get("priority", 10.0))
            if not base or depth >= self.max_depth or not STRUCTURAL.search(base):
                continue  # a bare closer (auto, lia...) that failed leaves the original goal: no progress
            if tuple(goals) in search.expanded:
                continue  # another proof already reached these goals; its extensions are queued
            search.expanded.add(tuple(goals))
            ihs = sorted({m.group(1) for g in goals for m in _HYP_NAME.finditer(g)})
            for index, closer in enumerate(closers):
                for filled in instantiate(closer, vars_=[], lemmas=lemmas, ihs=ihs):
                    if prover == "lean":
                        proof = f"{base} <;> {filled}"
                    else:
                        proof = f"{base.rstrip().removesuffix('.')}; {filled}."
                    priority = parent_priority + COMPOSITE_OFFSET * (depth + 1) + 0.25 * index
                    search.push(proof, priority, f"{parent_template} + {closer}", depth + 1)
