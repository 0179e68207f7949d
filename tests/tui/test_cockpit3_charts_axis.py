"""The y axis every chart draws with (tui/widgets/chart_axis.py), checked over random ranges and heights.

Issue 35, items 2, 3 and 11: plotext's own axis labelled rows with values snapped to them (the baseline 7.4196
on the row labelled 10.2, ``-0.33`` and ``3.5`` on a count of theorems, ``-0.0``, ``4290000000.0``). The invariants
here hold for every axis :func:`value_scale` gives: each label reads as its tick's value, each tick is a round
value (1, 2, 2.5 or 5 x 10^k apart) on the row that stands for it (by plotext's own mapping, row_of), the data lie
between the bottom and the top row, ticks of a count are whole and non-negative, labels are short.
"""

from __future__ import annotations

import math
import random
import re
from decimal import Decimal

import pytest

from tui.widgets.chart_axis import Scale, canvas_rows, tick_texts, value_scale

NEGATIVE_ZERO = re.compile(r"^-0(\.0*)?(e.*)?$")


def plotext_row(value: float, lo: float, hi: float, rows: int) -> int:
    """plotext 5's mapping of a value to a canvas row (plotext/_utility.py get_matrix_data), written out here so
    the test does not trust the module's own copy."""
    return math.floor(round(0.5 + (rows - 1) * (value - lo) / (hi - lo), 8))


def is_round_step(step: float) -> bool:
    """1, 2, 2.5 or 5 x 10^k."""
    mantissa = Decimal(repr(step)).normalize()
    digits = "".join(map(str, mantissa.as_tuple().digits))
    return digits in ("1", "2", "25", "5")


def check_axis(scale: Scale, lo: float, hi: float, rows: int, *, whole: bool = False) -> None:
    where = (lo, hi, rows, whole, scale)
    assert scale.rows == rows
    low, high = scale.limits
    tol = (high - low) * 1e-9
    if scale.log:
        lo, hi = math.log10(lo), math.log10(hi)
    # the data fit between the bottom row and the top row, and plotext draws them there
    assert low <= lo + tol and hi - tol <= high, where
    assert 0 <= plotext_row(lo, low, high, rows) and plotext_row(hi, low, high, rows) <= rows - 1, where
    if rows >= 3:
        assert len(scale.ticks) >= 2, where
    assert len(scale.ticks) == len(scale.labels) == len(scale.tick_rows)
    assert list(scale.tick_rows) == sorted(set(scale.tick_rows)), where  # one label per row, bottom to top
    if rows >= 5 and len(scale.ticks) > 1:
        assert min(b - a for a, b in zip(scale.tick_rows, scale.tick_rows[1:], strict=False)) >= 2, where
    if scale.tick_step:
        assert is_round_step(scale.tick_step), where
    row_span = (high - low) / (rows - 1)
    for tick, label, row in zip(scale.ticks, scale.labels, scale.tick_rows, strict=True):
        axis_tick = math.log10(tick) if scale.log else tick
        # the tick is a round value: a whole number of steps from 0 (a power of ten on a log axis)
        if scale.tick_step:
            steps = axis_tick / scale.tick_step
            assert abs(steps - round(steps)) < 1e-6, (tick, where)
        # it is drawn exactly on the row that stands for it
        assert plotext_row(axis_tick, low, high, rows) == row == scale.row_of(tick), (tick, where)
        assert abs(low + row * row_span - axis_tick) <= row_span * 1e-6, (tick, where)
        assert 0 <= row < rows
        # its label reads as its value, never -0
        text = label.strip()
        assert not NEGATIVE_ZERO.match(text), where
        assert float(text) == pytest.approx(tick, rel=1e-12, abs=0.0), (label, tick, where)
        if whole:
            assert tick == int(tick) and tick >= 0, where


def random_range(rng: random.Random) -> tuple[float, float]:
    magnitude = 10.0 ** rng.uniform(-9, 12)
    centre = rng.uniform(-1, 1) * magnitude * rng.choice([0, 1, 3, 100])
    span = magnitude * rng.choice([rng.uniform(0.001, 1), rng.uniform(0.5, 1), 0.0])
    return centre, centre + span


@pytest.mark.parametrize("seed", range(4))
def test_random_linear_axes_keep_every_invariant(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(1500):
        lo, hi = random_range(rng)
        rows = rng.randint(2, 60)
        check_axis(value_scale(lo, hi, rows), lo, hi, rows)


@pytest.mark.parametrize("seed", range(2))
def test_random_counts_get_whole_non_negative_ticks(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(1500):
        rows = rng.randint(2, 60)
        top = rng.choice([0, 1, 2, 3, rng.randint(1, 12), rng.randint(1, 500), rng.randint(1, 10**6)])
        low = rng.choice([0, 0, rng.randint(0, top)])
        check_axis(value_scale(low, top, rows, whole=True), low, top, rows, whole=True)


@pytest.mark.parametrize("seed", range(2))
def test_random_log_axes_label_round_values_on_their_rows(seed: int) -> None:
    """Powers of ten, each on its row; data spanning less than that takes, the two outermost round values of a
    linear axis of the same data, on their rows, the data spread over as much of the plot as on a linear axis."""
    rng = random.Random(200 + seed)
    for _ in range(1000):
        lo = 10.0 ** rng.uniform(-12, 12)
        hi = lo * 10.0 ** rng.choice([0.0, rng.uniform(0, 0.5), rng.uniform(0, 8)])
        rows = rng.randint(3, 60)
        scale = value_scale(lo, hi, rows, log=True)
        check_axis(scale, lo, hi, rows)
        if scale.tick_step:
            assert all(Decimal(repr(t)).normalize().as_tuple().digits == (1,) for t in scale.ticks), scale
        else:
            assert set(scale.ticks) <= set(value_scale(lo, hi, rows).ticks), scale
            need = 0.25 if rows < 5 else 0.4 if rows < 6 else 0.5
            assert math.log10(hi / lo) >= need * (scale.hi - scale.lo) or hi == lo, scale


def test_the_data_fill_a_good_part_of_the_plot() -> None:
    """A round axis costs some height (a round row step, a bottom row on the grid); not more than this."""
    rng = random.Random(7)
    for _ in range(3000):
        lo, hi = random_range(rng)
        if hi - lo <= max(abs(lo), abs(hi)) * 1e-3:
            continue
        rows = rng.randint(3, 60)
        low, high = value_scale(lo, hi, rows).limits
        need = 0.25 if rows < 5 else 0.4 if rows < 6 else 0.5
        assert (hi - lo) / (high - low) >= need, (lo, hi, rows, low, high)


def test_labels_are_short_where_the_range_allows() -> None:
    """A 4e9 score got a 12-cell label (``4290000000.0``); a label is now at most 8 cells and a sign while the
    range is at least 1% of its values."""
    rng = random.Random(11)
    for _ in range(3000):
        lo, hi = random_range(rng)
        if hi - lo <= max(abs(lo), abs(hi)) * 1e-2:
            continue
        scale = value_scale(lo, hi, rng.randint(3, 60))
        assert max(len(label.strip().lstrip("-")) for label in scale.labels) <= 8, scale.labels


CASES = [
    # the issue's ranges: a 5-row chart of losses around the baseline 7.4196 and a best of 4.4803
    ((3.96, 7.42, 5, False), ("5", "7.5")),
    ((4.4803, 7.4196, 8, False), ("4", "5", "6", "7")),
    # a 4e9 score: short labels
    ((4.2e9, 4.29e9, 5, False), ("4.2e9", "4.25e9", "4.3e9")),
    # counts: whole ticks from 0, never 0.67 or -0.33
    ((0, 1, 5, True), ("0", "1")),
    ((0, 3, 5, True), ("0", "2", "4")),
    ((0, 8, 7, True), ("0", "5", "10")),
    # around 0: a 0 tick, never -0
    ((-1e-7, 3e-7, 10, False), ("-1e-7", "0", "1e-7", "2e-7", "3e-7")),
]


@pytest.mark.parametrize(("args", "labels"), CASES)
def test_axes_of_the_issue(args: tuple[float, float, int, bool], labels: tuple[str, ...]) -> None:
    lo, hi, rows, whole = args
    scale = value_scale(lo, hi, rows, whole=whole)
    assert tuple(label.strip() for label in scale.labels) == labels
    check_axis(scale, lo, hi, rows, whole=whole)


def test_one_notation_per_axis_and_no_negative_zero() -> None:
    assert tick_texts([Decimal(0), Decimal("0.25"), Decimal("-12")]) == ["0", "0.25", "-12"]
    assert tick_texts([Decimal("4.2E9"), Decimal("4.25E9")]) == ["4.2e9", "4.25e9"]
    assert tick_texts([Decimal("-0.0"), Decimal("2.5E-7")]) == ["0", "2.5e-7"]
    assert tick_texts([Decimal(100000), Decimal(150000)]) == ["100000", "150000"]


def test_a_plot_canvas_is_its_height_less_the_frame_and_the_x_labels() -> None:
    assert canvas_rows(8) == 5 and canvas_rows(2) == 0


def test_bad_input_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="finite"):
        value_scale(0.0, math.inf, 10)
    with pytest.raises(ValueError, match="> 0"):
        value_scale(0.0, 1.0, 10, log=True)
