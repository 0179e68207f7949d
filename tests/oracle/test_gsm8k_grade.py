"""The GSM8K grading policy (oracle/gsm8k.py): an edge-case table, the gold solutions of the
real test split, and a cross-check against math-verify with every disagreement documented."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import pytest

from oracle.gsm8k import (
    POLICY_VERSION,
    STOP_SEQUENCES,
    GoldError,
    grade,
    parse_gold,
    parse_number,
    truncate_at_stop,
)

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("RRMA_SHARED", REPO.parent / "shared")) / "gsm8k"
FIXTURE = REPO / "tests" / "fixtures" / "gsm8k"

# id, completion, gold, mode, answer_format -> correct, failure, strict_final_line, trailing_text
CASES = [
    # "#### N" on the last line: the GSM8K format itself
    ("hash_plain", "Janet sells 16 - 3 - 4 = 9 eggs.\nShe makes 9 * 2 = $18.\n#### 18", "18", "lenient", "hash", True, None, True, False),
    # a base model that keeps going after its answer: the first #### counts, the rest is trailing text
    # (the last line is still a clean '#### 20' line, so strict_final_line is True)
    ("hash_first_wins", "#### 18\n\nQuestion: What is 10 + 10?\n#### 20", "18", "lenient", "hash", True, None, True, True),
    # \boxed{} is read in lenient mode even when the prompt asked for ####
    ("boxed", "So the total is \\boxed{18}.", "18", "lenient", "hash", True, None, False, False),
    # ... but strict mode reads only the asked format: right value, wrong format
    ("boxed_strict_hash", "So the total is \\boxed{18}.", "18", "strict", "hash", False, "format_only", False, False),
    # several \boxed{}: the last one is the answer (MATH convention)
    ("boxed_last_wins", "First \\boxed{12}, but I forgot the muffins: \\boxed{18}", "18", "lenient", "hash", True, None, False, False),
    # LaTeX fraction inside \boxed{} is evaluated exactly (36/2 == 18)
    ("boxed_frac", "\\boxed{\\frac{36}{2}}", "18", "lenient", "hash", True, None, False, False),
    # <answer>...</answer> tags (R1-style prompts)
    ("answer_tag", "9 * 2 = 18\n<answer>18</answer>", "18", "lenient", "hash", True, None, False, False),
    # strict mode with the tag format asked for: clean final line
    ("answer_tag_strict", "9 * 2 = 18\n<answer>18</answer>", "18", "strict", "answer_tag", True, None, True, False),
    # "The answer is N." with a sentence-final period
    ("answer_is", "She makes 9 * 2 = 18 dollars. The answer is 18.", "18", "lenient", "hash", True, None, False, False),
    # a later "the answer is" corrects an earlier one
    ("answer_is_last", "The answer is 12. Wait, I forgot the muffins. The answer is 18.", "18", "lenient", "hash", True, None, False, False),
    # "Final answer: N"
    ("final_answer_colon", "9 * 2 = 18\nFinal answer: 18", "18", "lenient", "hash", True, None, False, False),
    # markdown bold around the phrase, a dollar sign before the number
    ("bold_markdown", "9 * 2 = 18\n**Final Answer:** $18", "18", "lenient", "hash", True, None, False, False),
    # Minerva style: inline math $18$, then a closing sentence (trailing text)
    ("minerva", "Final Answer: The final answer is $18$. I hope it is correct.", "18", "lenient", "hash", True, None, False, True),
    # no marker at all: the last number of the completion (lenient only)
    ("last_number", "She makes 9 * 2 = 18 dollars", "18", "lenient", "hash", True, None, False, False),
    # strict mode has no last-number fallback: the value is right, only the format failed
    ("last_number_strict", "She makes 9 * 2 = 18 dollars", "18", "strict", "hash", False, "format_only", False, False),
    # nothing numeric anywhere
    ("no_answer", "I cannot solve this problem.", "18", "lenient", "hash", False, "no_answer", False, False),
    # an empty completion (e.g. a failed API call) is gradable: no answer
    ("empty", "", "18", "lenient", "hash", False, "no_answer", False, False),
    # strict mode asked for ####, got "The answer is": format_only
    ("answer_is_strict", "The answer is 18.", "18", "strict", "hash", False, "format_only", False, False),
    # strict mode when the prompt asked for "The answer is N."
    ("answer_is_format", "9 * 2 = 18\nThe answer is 18.", "18", "strict", "answer_is", True, None, True, False),
    # thousands commas in the completion
    ("commas_completion", "#### 1,000", "1000", "lenient", "hash", True, None, True, False),
    # thousands commas in the gold (a full GSM8K solution as gold)
    ("commas_gold", "#### 70000", "Profit is 70,000\n#### 70,000", "strict", "hash", True, None, True, False),
    # a dollar sign is part of a clean number, even in strict mode
    ("dollar", "#### $18", "18", "strict", "hash", True, None, True, False),
    # a unit word after the number is fine in lenient mode
    ("units", "#### 18 eggs", "18", "lenient", "hash", True, None, False, False),
    # ... and a format failure in strict mode
    ("units_strict", "#### 18 eggs", "18", "strict", "hash", False, "format_only", False, False),
    # dollars, commas and trailing words together
    ("units_per", "#### $1,200 per month", "1200", "lenient", "hash", True, None, False, False),
    # 5.0 == 5 (exact rational comparison)
    ("decimal_zero", "#### 5.0", "5", "strict", "hash", True, None, True, False),
    # $18.00 == 18, and the period that ends the sentence is not a decimal point
    ("decimal_cents", "The answer is $18.00.", "18", "lenient", "hash", True, None, False, False),
    # "18." at the end of a sentence is 18
    ("sentence_period", "So she has 18.", "18", "lenient", "hash", True, None, False, False),
    # "#### 18." is still a clean answer line
    ("hash_period", "#### 18.", "18", "strict", "hash", True, None, True, False),
    # negative answers
    ("negative", "#### -5", "-5", "strict", "hash", True, None, True, False),
    # U+2212 minus sign (models emit it) is a minus
    ("unicode_minus", "The answer is −5.", "-5", "lenient", "hash", True, None, False, False),
    # a sign before the dollar sign
    ("negative_dollar", "#### -$5", "-5", "lenient", "hash", True, None, True, False),
    # a hyphen between numbers is subtraction, not a sign: the last number is 9, not -4
    ("subtraction_not_sign", "16-3-4=9", "9", "lenient", "hash", True, None, False, False),
    # simple fraction a/b compared exactly with a decimal gold
    ("fraction", "#### 3/4", "0.75", "lenient", "hash", True, None, True, False),
    # LaTeX fraction compared exactly with a decimal gold
    ("latex_frac", "\\boxed{\\frac{3}{4}}", "0.75", "lenient", "hash", True, None, False, False),
    # no rounding tolerance: 0.33 is not 1/3
    ("decimal_vs_third", "#### 0.33", "1/3", "lenient", "hash", False, "wrong_value", True, False),
    # percent: the number before the sign is compared (GSM8K golds for "what percent" questions)
    ("percent", "#### 25%", "25", "strict", "hash", True, None, True, False),
    # LaTeX percent
    ("percent_latex", "\\boxed{25\\%}", "25", "lenient", "hash", True, None, False, False),
    # a clean but wrong answer
    ("wrong_value", "#### 17", "18", "lenient", "hash", False, "wrong_value", True, False),
    # hedging is not an answer, even when the gold is among the options
    ("hedge_or", "#### 18 or 20", "18", "lenient", "hash", False, "multiple_answers", False, False),
    # a list inside \boxed{} is a hedge too
    ("hedge_boxed_list", "\\boxed{18, 20}", "18", "lenient", "hash", False, "multiple_answers", False, False),
    # an equation in the answer span: the number after the last '=' is the answer
    ("equation_span", "The answer is 9 * 2 = 18.", "18", "lenient", "hash", True, None, False, False),
    # a parenthesised aside in the answer span is dropped
    ("paren_aside", "#### 18 (2 dozen minus 6)", "18", "lenient", "hash", True, None, False, False),
    # an exponent in a unit (m^2) is not a number
    ("exponent_unit", "The garden is 3 m by 6 m, so the area is 18 m^2", "18", "lenient", "hash", True, None, False, False),
    # a marker holding no number is skipped; the lenient fallback finds the number
    ("marker_without_number", "#### eighteen\nShe earns 9 * 2 = 18 dollars", "18", "lenient", "hash", True, None, False, False),
    # chat pleasantries after the answer are trailing text
    ("trailing_chat", "\\boxed{18}. Hope this helps!", "18", "lenient", "hash", True, None, False, True),
    # strict mode with the boxed format asked for; $\boxed{18}$ is a clean final line
    ("boxed_format_strict", "9 * 2 = 18\n$\\boxed{18}$", "18", "strict", "boxed", True, None, True, False),
    # LaTeX thousands separator {,}
    ("latex_thousands", "\\boxed{1{,}000}", "1000", "lenient", "hash", True, None, False, False),
    # two final-answer lines with different values are a hedge across lines, whatever format was asked
    ("format_priority", "#### 17\n\\boxed{18}", "18", "lenient", "boxed", False, "conflicting_answers", True, False),
    # ... and with #### asked (the span read is #### 17; the boxed line after it is trailing text)
    ("format_priority_hash", "#### 17\n\\boxed{18}", "18", "lenient", "hash", False, "conflicting_answers", False, True),
    # --- gsm8k-grade/2 ---
    # instruct models write markdown headings: '#### Step 1: ...' is a heading, not the answer
    ("markdown_headings", "#### Step 1: Eggs left\n16 - 3 - 4 = 9 eggs.\n#### Step 2: Money\n9 * 2 = 18\n\n#### 18",
     "18", "lenient", "hash", True, None, True, False),
    # ... strict mode reads the answer line past the headings too
    ("markdown_headings_strict", "#### Step 1: Eggs left\n16 - 3 - 4 = 9 eggs.\n#### Step 2: Money\n9 * 2 = 18\n\n#### 18",
     "18", "strict", "hash", True, None, True, False),
    # numbered headings ('#### 1. Eggs left') are headings as well, not the answer 1
    ("numbered_headings", "#### 1. Eggs left\n16 - 3 - 4 = 9\n#### 2. Money\n9 * 2 = 18\n#### 18", "18", "strict", "hash",
     True, None, True, False),
    # a heading that carries an answer phrase is read from the phrase on
    ("heading_answer_phrase", "9 * 2 = 18\n#### Final answer: 18", "18", "lenient", "hash", True, None, False, False),
    # a lone heading ends with the last-number fallback, not with the heading's number
    ("heading_only", "#### Step 3: Total\nShe makes 9 * 2 = 18 dollars", "18", "lenient", "hash", True, None, False, False),
    # reasoning inside <think> is not graded: only the answer after it
    ("think_block", "<think>Maybe the answer is 20.</think>\nShe makes 9 * 2 = 18.\n#### 18", "18", "strict", "hash",
     True, None, True, False),
    # a chat template that opened <think> in the prompt leaves only the closing tag
    ("think_close_only", "The answer is 20, no wait</think>\n#### 18", "18", "lenient", "hash", True, None, True, False),
    # an unclosed <think>: the model was still reasoning when it stopped; nothing was answered
    ("think_unclosed", "<think>9 * 2 = 18 so the answer is 18", "18", "lenient", "hash", False, "no_answer", False, False),
    # "isn't" is not "is": the negated phrase names no answer (the last number, 18, is read)
    ("answer_isnt", "She earns 9 * 2 = 20 - 2 dollars, so the answer isn't 20; she earns 18", "18", "lenient", "hash",
     True, None, False, False),
    # "the answer is not 20" is skipped the same way; the later statement counts
    ("answer_is_not", "The answer is not 20. The answer is 18.", "18", "lenient", "hash", True, None, False, False),
    # "18, not 20" names one answer
    ("not_clause", "The answer is 18, not 20.", "18", "lenient", "hash", True, None, False, False),
    # 'answer' must be a whole word ('reanswer is 20' is not an answer phrase)
    ("answer_word_boundary", "The reanswer is 20 but she makes 9 * 2 = 18", "18", "lenient", "hash", True, None, False,
     False),
    # one quantity restated in another unit is one answer (correct for either value) ...
    ("unit_restatement", "It takes 60 + 30 = 90 minutes.\n#### 90 minutes, or 1.5 hours", "90", "lenient", "hash",
     True, None, False, False),
    ("unit_restatement_other", "#### 90 minutes, or 1.5 hours", "1.5", "lenient", "hash", True, None, False, False),
    # ... but the same unit twice is a hedge
    ("same_unit_hedge", "#### 18 eggs or 20 eggs", "18", "lenient", "hash", False, "multiple_answers", False, False),
    # an ordinal is not a number: '2nd day' adds no second value
    ("ordinal", "The answer is 18 dollars on the 2nd day.", "18", "lenient", "hash", True, None, False, False),
    # LaTeX thousands separators: 32,\! 349 is 32349
    ("latex_thin_comma", "\\boxed{32,\\! 349}", "32349", "lenient", "hash", True, None, False, False),
    # digit groups separated by a space (SI style) are one number in an answer span ...
    ("space_groups", "#### 1 000", "1000", "lenient", "hash", True, None, False, False),
    # ... but not a clean number in strict mode
    ("space_groups_strict", "#### 1 000", "1000", "strict", "hash", False, "format_only", False, False),
    # a base model goes on with a made-up question: everything from 'Question:' on is cut (trailing text)
    ("continued_generation", "9 * 2 = 18. The answer is 18.\nQuestion: What is 10 + 10?\nAnswer: The answer is 20.",
     "18", "lenient", "answer_is", True, None, False, True),
    # the few-shot 'Q:' format is cut the same way
    ("continued_generation_q", "So she makes 18 dollars. The answer is 18.\n\nQ: What is 1 + 1?\nA: The answer is 2.",
     "18", "strict", "answer_is", True, None, False, True),
    # a question restated on the first line is not a continuation
    ("question_restated", "Question: how much does she make?\n9 * 2 = 18\n#### 18", "18", "strict", "hash", True, None,
     True, False),
    # an end-of-turn token a model leaked ends the completion
    ("end_token", "The answer is 18.<|im_end|>\n<|im_start|>user\nAnd now? The answer is 20.", "18", "lenient", "hash",
     True, None, False, True),
    # several different final-answer lines are a hedge across lines: their own failure label
    ("conflicting_lines", "9 * 2 = 18\n#### 18\n#### 20", "18", "lenient", "hash", False, "conflicting_answers", True,
     False),
    # ... also across formats
    ("conflicting_formats", "9 * 2 = 18\nThe answer is 18.\nFinal answer: 20", "18", "lenient", "hash", False,
     "conflicting_answers", False, False),
    # final-answer lines that agree are one answer
    ("agreeing_lines", "9 * 2 = 18\nThe answer is 18.\n#### 18", "18", "strict", "hash", True, None, True, False),
]

# Where math-verify (0.9, parse + verify, default configs) and our lenient mode disagree, and
# why. The cross-check below asserts that these are exactly the disagreements on the table.
MATH_VERIFY_DISAGREES = {
    # math-verify takes the last number (20); GSM8K's #### ends the solution, so we take the
    # first #### and report what follows as trailing text.
    "hash_first_wins": "first #### vs last number",
    # math-verify collects every \boxed{} into a set {12, 18}; we take the last box.
    "boxed_last_wins": "all boxes vs the last box",
    # math-verify does not read U+2212 as a minus sign (nothing extracted); we do.
    "unicode_minus": "U+2212 minus",
    # math-verify extracts nothing from "-$5"; we read a sign before the currency symbol.
    "negative_dollar": "sign before $",
    # math-verify takes the last number (6, inside the aside); we drop parenthesised asides.
    "paren_aside": "asides in the answer span",
    # math-verify prefers \boxed{18}; two different final-answer lines are a hedge to us.
    "format_priority_hash": "conflicting final lines",
    "format_priority": "conflicting final lines",
    # math-verify grades the reasoning inside <think> (it finds 20); we grade what follows it.
    "think_block": "reasoning blocks",
    "think_close_only": "reasoning blocks",
    # math-verify finds the 18 inside an unfinished reasoning block; we read nothing there.
    "think_unclosed": "reasoning blocks",
    # math-verify anchors on the negated phrase ("the answer isn't 20"); we skip it.
    "answer_isnt": "negated answer phrase",
    # math-verify takes the last number (1.5); one quantity restated in hours is the 90 minutes to us.
    "unit_restatement": "unit restatement",
    # math-verify reads the made-up question's answer (20, 2); we cut at the continuation, as
    # lm-eval's stop sequences do at generation time.
    "continued_generation": "continued generation",
    "continued_generation_q": "continued generation",
    # math-verify reads past a leaked end-of-turn token; the completion ends there for us.
    "end_token": "end-of-turn token",
}


@pytest.mark.parametrize(
    ("completion", "gold", "mode", "fmt", "correct", "failure", "final_line", "trailing"),
    [pytest.param(*row[1:], id=row[0]) for row in CASES],
)
def test_edge_cases(
    completion: str, gold: str, mode: str, fmt: str, correct: bool, failure: str | None, final_line: bool, trailing: bool
) -> None:
    g = grade(completion, gold, mode, answer_format=fmt)
    assert (g.correct, g.failure, g.strict_final_line, g.trailing_text) == (correct, failure, final_line, trailing)
    assert (g.failure is None) == g.correct


def test_extracted_and_value_name_what_was_compared() -> None:
    g = grade("The answer is 9 * 2 = 18 eggs.", "18")
    assert g.source == "answer_is"
    assert g.extracted == "9 * 2 = 18 eggs"
    assert g.value == Fraction(18)
    assert grade("#### 18 or 20", "18").value is None  # several values: none chosen


def test_numbers_and_gold_parsing() -> None:
    assert parse_number("$1,234.50 in total") == Fraction(246900, 200)
    assert parse_number("−7 degrees") == Fraction(-7)
    assert parse_number("no digits") is None
    assert parse_gold("He made $70,000\n#### 70,000") == 70000
    assert parse_gold(5) == 5 and parse_gold(2.5) == Fraction(5, 2)


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        pytest.param("#### eighteen", "holds no number", id="word"),  # golds must be numbers
        pytest.param("#### 3 or 4", "several different numbers", id="two_numbers"),  # and exactly one
        pytest.param(True, "boolean", id="bool"),  # True is not 1 here
    ],
)
def test_bad_gold_is_a_clear_error(gold: object, message: str) -> None:
    with pytest.raises(GoldError, match=message):
        grade("#### 1", gold)  # type: ignore[arg-type]


def test_bad_mode_and_format_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown grading mode 'exact'"):
        grade("#### 1", "1", "exact")
    with pytest.raises(ValueError, match="unknown answer format 'json'"):
        grade("#### 1", "1", answer_format="json")


def test_policy_is_versioned() -> None:
    assert POLICY_VERSION.startswith("gsm8k-grade/")


def _test_split() -> tuple[Path, bool]:
    real = SHARED / "test.jsonl"
    return (real, True) if real.is_file() else (FIXTURE / "test.jsonl", False)


def test_every_gold_solution_grades_correct_against_itself() -> None:
    path, real = _test_split()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if real:
        assert len(rows) == 1319
    grades = [grade(r["answer"], r["answer"]) for r in rows]
    strict = [grade(r["answer"], r["answer"], "strict") for r in rows]
    assert sum(g.correct for g in grades) == len(rows)
    assert sum(g.correct for g in strict) == len(rows)
    assert all(g.strict_final_line and not g.trailing_text and g.source == "hash" for g in grades)


def test_gold_solutions_under_markdown_headings_still_grade_correct() -> None:
    """Issue 14: with '#### Step 1: Understand' before every gold solution, policy 1 took the
    heading for the answer (lenient 15/1319, strict 0/1319). Headings are skipped now."""
    path, _real = _test_split()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    headed = [("#### Step 1: Understand\n" + r["answer"], r["answer"]) for r in rows]
    lenient = sum(grade(c, g).correct for c, g in headed)
    strict = sum(grade(c, g, "strict").correct for c, g in headed)
    assert (lenient, strict) == (len(rows), len(rows))
    # and a final line that is itself a heading never counts as a clean answer line
    assert not grade("#### 18\n#### Step 2: Check", "18").strict_final_line


def test_truncate_at_stop_ends_at_the_first_stop_sequence() -> None:
    text = "9 * 2 = 18\n#### 18\nQuestion: What is 2 + 2?\nAnswer: 4</s>"
    assert truncate_at_stop(text) == "9 * 2 = 18\n#### 18"
    assert truncate_at_stop("Question: restated first\n#### 18") == "Question: restated first\n#### 18"
    assert truncate_at_stop("a<|im_end|>b</s>", ["</s>"]) == "a<|im_end|>b"
    assert STOP_SEQUENCES[0] == "\nQuestion:"


@pytest.mark.skipif(not (SHARED / "test.jsonl").is_file(), reason=f"needs the shared GSM8K copy at {SHARED}")
def test_real_split_has_the_documented_shape() -> None:
    rows = [json.loads(line) for line in (SHARED / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    golds = [r["answer"].rsplit("####", 1)[-1].strip() for r in rows]
    assert sum("," in g for g in golds) == 14  # README: 14 golds carry thousands commas
    assert sum(parse_gold(g) < 0 for g in golds) == 2  # and 2 are negative


def test_math_verify_cross_check_matches_documented_disagreements() -> None:
    math_verify = pytest.importorskip("math_verify", reason="math-verify (dev extra) is not installed")
    found = {}
    for cid, completion, gold, _mode, fmt, *_ in CASES:
        gold_text = gold.rsplit("####", 1)[-1].strip().replace(",", "")
        theirs = bool(math_verify.verify(math_verify.parse(f"${gold_text}$"), math_verify.parse(completion)))
        ours = grade(completion, gold, "lenient", answer_format=fmt).correct
        if theirs != ours:
            found[cid] = (ours, theirs)
    assert set(found) == set(MATH_VERIFY_DISAGREES), found


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "test.jsonl").is_file(), reason=f"needs the shared GSM8K copy at {SHARED}")
def test_math_verify_on_gold_solutions() -> None:
    """math-verify misses 4 of the 1319 gold solutions: it anchors on 'the answer' phrases in the
    working (e.g. 'express the answer as a percentage: 33.333...%') before the #### line."""
    math_verify = pytest.importorskip("math_verify", reason="math-verify (dev extra) is not installed")
    rows = [json.loads(line) for line in (SHARED / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    missed = [
        i for i, r in enumerate(rows)
        if not math_verify.verify(math_verify.parse("$" + r["answer"].rsplit("####", 1)[-1].strip().replace(",", "") + "$"),
                                  math_verify.parse(r["answer"]))
    ]
    assert set(missed) <= {226, 258, 876, 1303}  # math-verify 0.9 misses exactly these
    assert all(grade(rows[i]["answer"], rows[i]["answer"]).correct for i in missed)


# An adversarial set (issue 14): what instruct and base models write, graded in lenient mode
# against gold 18 unless given; (id, completion, gold, correct, failure).
ADVERSARIAL = [
    ("money_decimals", "#### $18.00", "18", True, None),
    ("bold_final_answer", "**Final Answer:** 18", "18", True, None),
    ("bold_value", "The answer is: **18**.", "18", True, None),
    ("repeated_hash", "#### 18\n#### 18", "18", True, None),
    ("or_hedge_phrase", "The answer is 18 or 20.", "18", False, "multiple_answers"),
    ("since_clause", "Answer: 18 dollars, since 9 * 2 = 18", "18", True, None),
    ("boxed_in_phrase", "So the answer is $\\boxed{18}$.", "18", True, None),
    ("negated_then_stated", "I think the answer isn't 18. The answer is 20.", "20", True, None),
    ("think_then_answer", "<think>\nthe answer is 20\n</think>\n\nThe answer is 18.", "18", True, None),
    ("final_then_continuation", "The final answer is 18.\n\nQuestion: Janet's ducks lay 16 eggs.\n#### 20", "18", True,
     None),
    ("steps_without_marker", "Step 1: 16 - 3 - 4 = 9\nStep 2: 9 * 2 = 18", "18", True, None),
    ("headings_only", "#### Step 1\n9*2=18\n#### Answer\n18", "18", True, None),
    ("numbered_heading", "#### 3. Total\nSo 18 in total.", "18", True, None),
    ("markdown_steps_bold_answer", "## Step 3: Compute\n9 x 2 = 18\n\n**Answer: 18**", "18", True, None),
    ("not_clause_units", "The answer is 18 eggs, not 20 eggs.", "18", True, None),
    ("which_clause", "The answer is $18 per day, which is 126 per week.", "18", True, None),
    ("self_correction", "Final answer: 18\nActually, final answer: 20", "20", True, None),
    ("latex_parens", "The answer is \\(18\\).", "18", True, None),
    ("split_digits", "The answer is 1 8.", "18", False, "multiple_answers"),
    ("hedge_across_formats", "#### 18\n\\boxed{20}", "20", False, "conflicting_answers"),
]


@pytest.mark.parametrize(("completion", "gold", "correct", "failure"),
                         [pytest.param(*row[1:], id=row[0]) for row in ADVERSARIAL])
def test_adversarial_set(completion: str, gold: str, correct: bool, failure: str | None) -> None:
    g = grade(completion, gold)
    assert (g.correct, g.failure) == (correct, failure), g
