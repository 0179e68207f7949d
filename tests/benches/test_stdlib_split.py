"""``python -m benches.coq.stdlib_split``: a file a round tuned on by hand stays in the set a later draw put it in
(no later set moves) and is marked in-sample there."""

from __future__ import annotations

import pytest

from benches.coq import stdlib_split


def test_a_file_tuned_on_by_hand_is_marked_in_sample_where_a_draw_puts_it() -> None:
    line = stdlib_split.describe("out-of-sample 21", [("Numbers/HexadecimalNat.v", 27), ("Reals/R_sqrt.v", 39)])
    assert line == ("out-of-sample 21: 66 theorems: Numbers/HexadecimalNat.v (27), "
                    "Reals/R_sqrt.v (39, tuned on in round six: in-sample)")
    assert stdlib_split.describe("x", [("Reals/R_sqr.v", 39)]) == "x: 39 theorems: Reals/R_sqr.v (39)"


def test_drawing_a_new_set_moves_no_earlier_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new set is appended to SIZES, never inserted: the earlier sets keep their files, and so every figure
    reported for them stays the figure of those files."""
    names = [name for name, _ in stdlib_split.SIZES]
    assert len(names) == len(set(names))
    kept = [(f"F{i:03}.v", 5 + i % 30) for i in range(300)]
    before = stdlib_split.split(kept)
    monkeypatch.setattr(stdlib_split, "SIZES", (*stdlib_split.SIZES, ("out-of-sample next", 60)))
    after = stdlib_split.split(kept)
    assert after[:len(before)] == before
    assert after[-1][0] == "out-of-sample next" and sum(n for _, n in after[-1][1]) >= 60
    assert not {f for _, files in before for f, _ in files} & {f for f, _ in after[-1][1]}


def test_the_small_files_are_drawn_only_once_the_others_are_spent() -> None:
    """The files of 1 to 4 theorems (``LATER``) follow the shuffled files of 5 to 40: every set drawn while those
    last is the set it was before the small files joined the rule."""
    kept = [(f"F{i:03}.v", 5 + i % 30) for i in range(40)]
    small = [(f"S{i:03}.v", 1 + i % 4) for i in range(200)]
    alone, joined = stdlib_split.split(kept), stdlib_split.split(kept, small)
    spent = next(k for k, (_, files) in enumerate(alone) if not files)  # the first set the kept files cannot fill
    assert joined[:spent - 1] == alone[:spent - 1]
    assert all(f.startswith("S") for _, files in joined[spent:] for f, _ in files)
    assert {f for _, files in joined for f, _ in files} >= {f for f, _ in kept}


def test_the_large_files_start_a_set_of_their_own_once_the_smaller_are_spent() -> None:
    """The files of more than 40 theorems (``LARGE``) follow the smaller files, but no set is cut from both: the set
    that spends the small files ends there, short, every earlier set is as it was, and the next set is large files
    only."""
    kept = [(f"F{i:03}.v", 5 + i % 30) for i in range(40)]
    small = [(f"S{i:03}.v", 1 + i % 4) for i in range(30)]
    large = [(f"L{i:03}.v", 41 + i) for i in range(200)]
    before, after = stdlib_split.split(kept, small), stdlib_split.split(kept, small, large)
    spent = next(k for k, (_, files) in enumerate(before) if not files)  # the first set left empty without them
    assert after[:spent] == before[:spent]
    assert sum(n for _, n in after[spent - 1][1]) < 60  # the last of the small files: short
    assert all(f.startswith("L") for _, files in after[spent:] for f, _ in files)
    assert all(files for _, files in after[spent:])
