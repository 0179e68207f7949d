"""Reading Coq's output (oracle/coq/replies.py): ``Print Assumptions`` and goal displays."""

from __future__ import annotations

import pytest

from oracle.coq.replies import parse_assumptions, parse_goals


@pytest.mark.parametrize(
    ("output", "closed", "axioms"),
    [
        ("Closed under the global context\n", True, []),
        # section variables are hypotheses of the statement, not axioms
        ("Section Variables:\nA\n: Type\n", True, []),
        ("Axioms:\nmagic : forall P : Prop, P\n", False, ["magic"]),
        ("Axioms:\nClassical_Prop.classic\n  : forall P : Prop, P \\/ ~ P\nfoo : False\n", False,
         ["Classical_Prop.classic", "foo"]),
    ],
)
def test_parse_assumptions(output: str, closed: bool, axioms: list[str]) -> None:
    got_closed, got_axioms, _ = parse_assumptions(output)
    assert (got_closed, got_axioms) == (closed, axioms)


def test_parse_goals_from_coq_display() -> None:
    text = ("2 goals (ID 8)\n  \n  n : nat\n  H : n > 0\n  ============================\n  n + 0 = n\n\n"
            "goal 2 (ID 9) is:\n S n = S n\n")
    assert parse_goals(text) == ["n : nat; H : n > 0 |- n + 0 = n", "|- S n = S n"]
    assert parse_goals("No more goals.\n") == []


def test_hole7_prompt_line_is_not_an_axiom() -> None:
    reply = ("Axioms:\nClassical_Prop.classic : forall P : Prop, P \\/ ~ P\n\n"
             "<prompt>Coq < 31 || 0 < </prompt>")
    assert parse_assumptions(reply) == (False, ["Classical_Prop.classic"], "")
    assert parse_assumptions("Closed under the global context\n<prompt>Coq < 9 || 0 < </prompt>")[0]
