"""The offline tactic-portfolio prover: statement parsing, queue order, blackboard learning,
feedback composition, and (with Coq installed) real proofs found against the warm checker."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agents.tactic_portfolio import (
    TacticPortfolioAgent,
    generalize,
    goals_in,
    induction_order,
    instantiate,
    lemmas_of,
    shape_of,
    variables_of,
)
from oracle.strip_coq import strip_coq_file
from rrma.contracts import Context, TrialSummary
from rrma.task import AgentConfig, TaskConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        # Coq forall with a shared type
        ("Theorem t : forall n m : nat, n + m = m + n.", [("n", "nat"), ("m", "nat")]),
        # parenthesized binders; type and function binders are not induction candidates
        ("Theorem t : forall (B : Type) (f : A -> B) (l : list A), length (map f l) = length l.",
         [("l", "list A")]),
        # Lean binders before the colon, and a hypothesis binder
        ("theorem foo (n m : Nat) (h : n < m) : n ≤ m :=", [("n", "Nat"), ("m", "Nat"), ("h", "n < m")]),
        # untyped forall
        ("Lemma l : forall x y, x = y -> y = x.", [("x", ""), ("y", "")]),
        # no variables
        ("Theorem two : 1 + 1 = 2.", []),
    ],
)
def test_variables_of(statement: str, expected: list[tuple[str, str]]) -> None:
    assert variables_of(statement) == expected


def test_induction_order_prefers_lists_then_naturals() -> None:
    assert induction_order([("b", "bool"), ("n", "nat"), ("l", "list A")]) == ["l", "n", "b"]


@pytest.mark.parametrize(
    ("statement", "features"),
    [
        ("Theorem t : forall l : list A, rev (rev l) = l.", {"forall", "list", "eq"}),
        ("Theorem t : forall P Q : Prop, P /\\ Q -> Q /\\ P.", {"forall", "and", "imp"}),
        ("Theorem t : forall n : nat, n <= S n.", {"forall", "nat", "order"}),
        ("theorem t (p q : Prop) : p ∨ q → q ∨ p :=", {"or", "imp"}),
    ],
)
def test_shape_of(statement: str, features: set[str]) -> None:
    assert shape_of(statement) == features


def test_generalize_and_instantiate_round_trip() -> None:
    template = generalize("induction n; simpl; try rewrite IHn; auto.", "n")
    assert template == "induction {v}; simpl; try rewrite IH{v}; auto."
    assert instantiate(template, vars_=["l"], lemmas=[], ihs=[]) == ["induction l; simpl; try rewrite IHl; auto."]
    assert instantiate("rewrite {L}; auto.", vars_=[], lemmas=[], ihs=[]) == []  # cannot apply
    assert instantiate("rewrite {IH}; lia", vars_=[], lemmas=[], ihs=["IHn", "IHm"]) == [
        "rewrite IHn; lia", "rewrite IHm; lia"]


def test_lemmas_of_and_goals_in() -> None:
    ctx = "Lemma a : True. Proof. exact I. Qed.\nTheorem b : True. Proof. exact I. Qed.\n"
    assert lemmas_of(ctx) == ["b", "a"]  # nearest first
    feedback = "REJECTED: incomplete proof: 1 goal(s) remain\nremaining goals (1):\n  n : nat |- n = n\n"
    assert goals_in(feedback) == ["n : nat |- n = n"]


def _task() -> TaskConfig:
    return TaskConfig(name="t")


def _agent(name: str = "p1") -> TacticPortfolioAgent:
    return TacticPortfolioAgent(AgentConfig.model_validate({"name": name, "backend": "tactic-portfolio"}), _task())


def _ctx(theorem: dict[str, Any] | None, *, blackboard: list[str] | None = None, own: list[TrialSummary] | None = None,
         tried: set[str] | None = None, posts: list[str] | None = None) -> Context:
    sink = posts if posts is not None else []
    return Context(task=_task(), agent_name="p1", parent_id=None, files={}, editable=[], theorem=theorem,
                   blackboard=blackboard or [], own=own or [], tried=tried or set(),
                   post=lambda text, **_: sink.append(text))


NAT_THM = {"name": "add_zero", "statement": "Theorem add_zero : forall n : nat, n + 0 = n.",
           "context": "Require Import Arith.\n", "difficulty": "easy", "prover": "coq"}
LIST_THM = {"name": "app_nil", "statement": "Theorem app_nil : forall l : list nat, l ++ [] = l.",
            "context": "", "difficulty": "easy", "prover": "coq"}


def test_proposals_are_distinct_and_the_queue_ends() -> None:
    agent = _agent()
    seen: list[str] = []
    while (proposal := agent.propose(_ctx(NAT_THM))) is not None:
        assert proposal.theorem == "add_zero" and proposal.proof
        seen.append(proposal.proof)
    assert len(seen) == len(set(seen)) > 20
    assert seen[0] == "reflexivity."  # cheapest first
    assert "induction n; simpl; auto." in seen


def test_tried_proofs_are_skipped() -> None:
    proposal = _agent().propose(_ctx(NAT_THM, tried={"reflexivity.", "auto."}))
    assert proposal is not None and proposal.proof == "intros; lia."


def test_blackboard_posts_reorder_the_queue_by_shape() -> None:
    post = "p2: tactic `induction {v}; simpl; try rewrite IH{v}; auto.` closed theorem foo (goal shape: eq,forall,list)"
    proposal = _agent().propose(_ctx(LIST_THM, blackboard=[post]))
    assert proposal is not None and proposal.proof == "induction l; simpl; try rewrite IHl; auto."
    # a post about a dissimilar shape does not jump the queue
    other = "p2: tactic `intuition.` closed theorem bar (goal shape: and,imp,or)"
    proposal = _agent().propose(_ctx(LIST_THM, blackboard=[other]))
    assert proposal is not None and proposal.proof == "reflexivity."


def _failed(proof: str, feedback: str, trial_id: str = "t1") -> TrialSummary:
    return TrialSummary(trial_id=trial_id, parent=None, agent="p1", status="rejected", score=None,
                        delta_sigma=None, hypothesis="", feedback=feedback, theorem="add_zero",
                        params={"proof": proof, "template": "x", "depth": 0, "priority": 11.0})


def test_remaining_goals_are_extended_with_closers() -> None:
    agent = _agent()
    agent.propose(_ctx(NAT_THM))  # seeds the queue
    feedback = ("REJECTED: incomplete proof: 1 goal(s) remain\nremaining goals (1):\n"
                "  n : nat; IHn : n + 0 = n |- S (n + 0) = S n")
    own = [_failed("induction n; simpl.", feedback)]
    proofs = [p.proof for _ in range(8) if (p := agent.propose(_ctx(NAT_THM, own=own))) is not None]
    assert "induction n; simpl; intros; rewrite IHn; auto." in proofs
    assert all(p.count("induction n; simpl; induction") == 0 for p in proofs if p)


def test_a_bare_closer_that_failed_is_not_extended() -> None:
    agent = _agent()
    agent.propose(_ctx(NAT_THM))
    feedback = "REJECTED: incomplete proof: 1 goal(s) remain\nremaining goals (1):\n  |- n + 0 = n"
    own = [_failed("auto.", feedback)]
    proofs = [p.proof for _ in range(30) if (p := agent.propose(_ctx(NAT_THM, own=own))) is not None]
    assert not any(p and p.startswith("auto; ") for p in proofs)


def test_success_is_posted_with_a_generalized_template() -> None:
    agent = _agent()
    proposal = agent.propose(_ctx(NAT_THM))
    assert proposal is not None
    agent.observe(TrialSummary(trial_id="t9", parent=None, agent="p1", status="ok", score=1.0, delta_sigma=None,
                               hypothesis=proposal.hypothesis, feedback="ACCEPTED", theorem="add_zero",
                               params={**proposal.meta, "proof": "induction n; simpl; auto."}))
    posts: list[str] = []
    assert agent.propose(_ctx(None, posts=posts)) is None  # no theorem: only flushes the posts
    assert posts == ["tactic `induction {v}; simpl; auto.` closed theorem add_zero (goal shape: eq,forall,nat)"]


def test_lean_theorems_get_lean_tactics() -> None:
    thm = {"name": "t", "statement": "theorem t (n : Nat) : n + 0 = n :=", "context": "", "prover": "lean"}
    agent = _agent()
    proofs = [p.proof for _ in range(15) if (p := agent.propose(_ctx(thm))) is not None]
    assert proofs[0] == "by rfl"
    assert all(p and p.startswith("by ") for p in proofs)
    assert "by induction n <;> simp_all" in proofs


@pytest.mark.skipif(shutil.which("coqtop") is None, reason="coqtop not on PATH (Debian: apt-get install coq)")
def test_finds_real_proofs_with_the_warm_checker() -> None:
    from benches.proofs import feedback_of
    from oracle.coq import WarmCoqPool

    wanted = {"add_zero_right", "app_nil_right'", "and_comm'", "negb_involutive'"}
    tasks = [t for f in ("arith.v", "lists.v", "logic.v", "induction.v")
             for t in strip_coq_file(REPO / "benches" / "coq" / f) if t.name in wanted]
    pool = WarmCoqPool()
    try:
        for task in tasks:
            agent = _agent()
            own: list[TrialSummary] = []
            solved = False
            for attempt in range(40):
                view = {k: v for k, v in task.public().items() if k in ("name", "statement", "context", "difficulty", "prover")}
                proposal = agent.propose(_ctx(view, own=own[-5:]))
                assert proposal is not None and proposal.proof
                verdict = pool.check(task, proposal.proof, timeout_s=30)
                own.append(TrialSummary(trial_id=f"t{attempt}", parent=None, agent="p1",
                                        status="ok" if verdict.accepted else "rejected", score=None, delta_sigma=None,
                                        hypothesis=proposal.hypothesis, feedback=feedback_of(verdict),
                                        theorem=task.name, params=dict(proposal.meta)))
                if verdict.accepted:
                    solved = True
                    break
            assert solved, task.name
    finally:
        pool.close()
