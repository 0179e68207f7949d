"""The local backend's reply grammar (agents/local.py) against the reply parser it serves (rrma.train.prompt).

Pure logic, no model: every text the grammar calls a whole reply parses; what it refuses as a prefix
cannot become one; the processor keeps exactly the tokens that extend the reply within the grammar. The
real model under it is tests/agents/test_local_model.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.local import GrammarProcessor, ReplyGrammar, instruct_messages, number_prefix, token_texts
from rrma.task import load_task
from rrma.train.prompt import ReplyError, parse_reply

REPO = Path(__file__).resolve().parents[2]
DEMO = load_task(REPO / "benches" / "demo" / "task.yaml")
FILES = {p.name: p.read_text() for p in sorted(DEMO.workspace_dir().iterdir()) if p.is_file()}
GRAMMAR = ReplyGrammar.of(DEMO)


@pytest.mark.parametrize(("text", "whole", "open_", "parses"), [
    ("X = 1.5", True, True, True),
    ("X = 1.5\n", True, True, True),  # a line end may follow the last line
    ("X = 1.5\nDEPTH = 5", True, True, True),
    ("LEARNING_RATE = 3e-3", True, True, True),
    ("LEARNING_RATE = 3e-", False, True, False),  # the exponent's digits may still come
    ("X = -.5", True, True, True),
    ("LEARN", False, True, False),  # a label being written
    ("X =", False, True, False),
    ("", False, True, False),  # nothing yet
    ("X = 1\nX = 2", False, False, False),  # a constant given twice: the parser refuses it
    ("A = 0.4", False, False, False),  # not one of the task's constants (the worked example's)
    ("X = 0.25, Y = 0.2", False, False, False),  # two values on a line
    ("The loss", False, False, False),  # prose
    # stricter than the parser, never looser: a blank line and a comment parse, the grammar writes neither
    ("X = 1.5\n\n", False, False, True),
    ("X = 1.5 # lower", False, False, True),
    ("X = 1\nY = 2\nLEARNING_RATE = 0.01\nDEPTH = 5\n", True, False, True),  # every constant given: only the end
])
def test_grammar_against_the_parser(text: str, whole: bool, open_: bool, parses: bool) -> None:
    assert GRAMMAR.complete(text) is whole
    assert GRAMMAR.prefix(text) is open_
    assert not whole or parses  # whatever the grammar lets the model finish, the parser reads
    if parses:
        edits, _ = parse_reply(DEMO, text, FILES, ["objective.py"])
        assert edits
    else:
        with pytest.raises(ReplyError):
            parse_reply(DEMO, text, FILES, ["objective.py"])


@pytest.mark.parametrize(("text", "ok"), [("", True), ("-", True), ("1.", True), ("1e", True), ("1e+", True),
                                          (".", True), ("1.2.3", False), ("e5", False), ("1-", False), ("0x1", False),
                                          ("0.1234567890", True), ("0.18888888888", False)])  # at most 12 characters
def test_number_prefix(text: str, ok: bool) -> None:
    assert number_prefix(text) is ok


def test_choice_constants_take_their_choices_only() -> None:
    grammar = ReplyGrammar(("MODE", "X"), (("MODE", ('"fast"', "3")),))
    assert grammar.complete('MODE = "fast"') and grammar.complete("MODE = 3") and grammar.prefix('MODE = "fa')
    assert not grammar.prefix("MODE = 4") and not grammar.complete('MODE = "slow"') and grammar.complete("X = 4")


class Tokens:
    """A stand-in tokenizer: a few token texts, each id decoding to its own."""

    vocab = ["X", " =", " ", "1", ".5", "\n", "DEPTH", "A", "hello", "Y = 2", "<eos>"]

    def __len__(self) -> int:
        return len(self.vocab)

    def batch_decode(self, ids: list[list[int]], skip_special_tokens: bool = False) -> list[str]:
        return [self.vocab[i[0]] for i in ids]


def test_the_processor_keeps_only_tokens_inside_the_grammar() -> None:
    torch = pytest.importorskip("torch")
    tokens = Tokens()
    eos = [tokens.vocab.index("<eos>")]

    def allowed_after(reply: list[str], candidates: int = 256) -> set[str]:
        processor = GrammarProcessor(GRAMMAR, token_texts(tokens), eos, candidates=candidates)
        prompt = torch.tensor([[7, 7]])  # two prompt tokens: the first call marks where the reply starts
        processor(prompt, torch.zeros(1, len(tokens)))
        ids = torch.tensor([[7, 7, *(tokens.vocab.index(t) for t in reply)]])
        out = processor(ids, torch.zeros(1, len(tokens)))
        return {tokens.vocab[i] for i in range(len(tokens)) if out[0, i] > float("-inf")}

    assert allowed_after([]) == {"X", "DEPTH", "Y = 2"}  # a label's start (the example's A and prose refused)
    assert allowed_after(["X"]) == {" =", " "}  # "X " is on the way to "X = " too
    assert allowed_after(["X", " =", " "]) == {"1", ".5"}
    assert allowed_after(["X", " =", " ", "1"]) == {"1", ".5", "\n", "<eos>"}  # more digits, a new line, or the end
    assert allowed_after(["X", " =", " ", "1", "\n"]) == {"DEPTH", "Y = 2", "<eos>"}  # X is used up
    # none of the likeliest fits (only "hello" and "A" are candidates): every token is tried
    assert allowed_after([], candidates=1) == {"X", "DEPTH", "Y = 2"}


def test_the_prompt_lists_the_constants_and_can_leave_the_example_out() -> None:
    with_example = instruct_messages(DEMO, FILES, 7.39, ["objective.py"])
    assert [m["role"] for m in with_example] == ["system", "user", "assistant", "user"]
    system = with_example[0]["content"]
    for line in ("X: a number from -3 to 3", "LEARNING_RATE: a positive number from 0.0001 to 1", "DEPTH: an integer from 1 to 8"):
        assert line in system
    assert with_example[-1]["content"].startswith("loss now: 7.39 (lower is better)\nX = 0.0")
    assert [m["role"] for m in instruct_messages(DEMO, FILES, 7.39, ["objective.py"], example=False)] == ["system", "user"]
