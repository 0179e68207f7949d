"""Chart axes a reader can trust: every y tick is a round value drawn exactly on the row that stands for it.

plotext maps a value v to the canvas row ``floor(0.5 + (rows - 1) * (v - lo) / (hi - lo))`` (0 at the bottom):
row k stands for ``lo + k * (hi - lo) / (rows - 1)``. Left to itself it labels rows with values snapped to them
(a label 0.3 rows off its row, ``-0.33`` on a count, collisions dropped); the charts here choose the axis
instead. :func:`value_scale` picks a round tick step s (1, 2, 2.5 or 5 x 10^k), a whole number r of rows per
step and a bottom row ``lo = m * s / r`` (m whole), so every multiple of s between ``lo`` and ``hi`` is exactly a
row's value, the rows between ticks carry no label, and the data fit between the bottom and the top row. The
invariants (tests/tui/test_cockpit3_charts_axis.py, random ranges and heights): each label reads as its tick's
value, each tick's row stands for that value, no ``-0``, whole non-negative ticks for counts, labels of at most 7
cells (``4.2e9``, not ``4200000000.0``).

A log axis is the same thing in decades: its ticks are powers of ten, each on its row.

Also here, the x axes' ticks (:func:`integer_ticks`, :func:`linear_ticks`, :func:`log_ticks`, :func:`tick_label`):
plotext puts an x label on the column nearest its value, so a round value is within half a column of its place.

No rendering here: numbers in, numbers and strings out (score_chart, solved_chart, metric_chart, training and
run_compare draw with them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

NICE_UNITS = (10, 20, 25, 50)  # a tick step is units x 10^power: 1, 2, 2.5 or 5 x 10^(power + 1)
LABEL_CELLS = 6  # a fixed-point label longer than this (and than the same in e-notation) is written 4.2e9
PLOT_FRAME_ROWS = 3  # a plotext plot's rows that are not canvas: the top frame, the x axis and its labels


def canvas_rows(plot_height: int) -> int:
    """The canvas rows of a plotext plot ``plot_height`` cells tall (no title, x labels under the x axis)."""
    return max(0, plot_height - PLOT_FRAME_ROWS)


@dataclass(frozen=True)
class Scale:
    """A y axis of ``rows`` canvas rows from ``lo`` (the bottom row) to ``hi`` (the top row), in axis units (decades
    on a log axis): row k stands for ``lo + k * row_step``. ``ticks`` are the round values labelled (data units),
    ``tick_rows`` their rows, ``tick_step`` the step between them (axis units; 0 with fewer than two ticks)."""

    rows: int
    lo: float
    hi: float
    log: bool
    ticks: tuple[float, ...]
    labels: tuple[str, ...]  # right-aligned to one width
    tick_rows: tuple[int, ...]
    tick_step: float

    @property
    def row_step(self) -> float:
        """What one row stands for, in axis units (decades on a log axis)."""
        return (self.hi - self.lo) / (self.rows - 1) if self.rows > 1 else 0.0

    @property
    def limits(self) -> tuple[float, float]:
        """The bottom and top rows' values in axis units: what plotext's ``ylim`` takes (log10 on a log axis)."""
        return self.lo, self.hi

    def axis_value(self, value: float) -> float:
        return math.log10(value) if self.log else value

    def value_at(self, row: float) -> float:
        """The value row ``row`` stands for (a fraction: between rows), in data units."""
        v = self.lo + row * self.row_step
        return 10.0 ** v if self.log else v

    def row_of(self, value: float) -> int:
        """The row plotext draws ``value`` on (its own mapping; 0 at the bottom)."""
        return math.floor(round(0.5 + (self.rows - 1) * (self.axis_value(value) - self.lo) / (self.hi - self.lo), 8))


def tick_texts(values: list[Decimal]) -> list[str]:
    """Exact round values as short labels, one notation for the axis: fixed point (``0.25``, ``-12``,
    ``150000``) while that fits :data:`LABEL_CELLS` cells or is no longer than e-notation, else e-notation
    (``4.2e9``, ``2.5e-7``); 0 is ``0`` (never ``-0``)."""
    fixed = [_fixed(v) for v in values]
    sci = [_sci(v) for v in values]
    wide = max(map(len, fixed), default=0)
    return fixed if wide <= LABEL_CELLS or wide <= max(map(len, sci), default=0) else sci


def _fixed(value: Decimal) -> str:
    if value == 0:
        return "0"
    return format(value.normalize(), "f")


def _sci(value: Decimal) -> str:
    if value == 0:
        return "0"
    sign, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{exponent + len(digits) - 1}"


def tick_label(value: float, unit: str = "") -> str:
    """One round tick value in as few cells as it takes (``0.25``, ``2e-7``, ``1.5e5``), whole, never cut."""
    if value == 0:
        return "0" + unit
    text = f"{value:.6g}"
    mantissa, sep, exponent = text.partition("e")
    if sep:
        sign = "-" if exponent.startswith("-") else ""
        text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text + unit


def _widen(a: float, b: float, integral: bool) -> tuple[float, float]:
    """A range a plot can show: one value becomes a small range around it (counts: it and the next whole
    number), and a range too narrow for a float to tell its rows apart is widened to what it can."""
    if a > b:
        a, b = b, a
    least = max(abs(a), abs(b)) * 1e-7
    if b - a <= least:
        if integral:
            return a, a + 1.0
        half = max(abs(a) * 0.05, least, 0.5 if a == 0 else 0.0)
        return a - half, b + half
    return a, b


def value_scale(lo: float, hi: float, rows: int, *, whole: bool = False, log: bool = False) -> Scale:
    """The y axis for data in [lo, hi] on ``rows`` canvas rows: round ticks (whole ones when ``whole``, powers of
    ten when ``log``, which needs lo > 0), each exactly on its row, at least two when ``rows`` >= 2, the data
    between the bottom and the top row. Among the axes that do that, the one that spreads the data over the most
    rows, with ticks a few rows apart (2 to 5 on a tall plot, 1 on a plot under 5 rows) and labels of few digits."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"an axis needs finite limits, not {lo}, {hi}")
    if log:
        if min(lo, hi) <= 0:
            raise ValueError("a log axis needs values > 0")
        lo, hi = math.log10(lo), math.log10(hi)
    return _scale(lo, hi, max(2, rows), whole or log, log)


@lru_cache(maxsize=256)
def _scale(lo: float, hi: float, rows: int, integral: bool, log: bool) -> Scale:
    a, b = _widen(lo, hi, integral)
    # two ticks at least; a plot of 2 rows whose data straddle 0 has room for none (0 is on every grid of round
    # rows, and no row of 2 can be it): its rows are the data's ends, unlabelled
    best = _search(a, b, rows, integral, log, 2) or _search(a, b, rows, integral, log, 1)
    if log and (best is None or (b - a) < 0.5 * (rows - 1) * _row_step(*best)):
        pair = _log_pair(a, b, rows)  # under a decade: two round values on their rows, the data over the plot
        if pair is not None:
            return pair
    if best is None:
        return Scale(rows, a, b, log, (), (), (), 0.0)
    m, r, units, power = best
    step = Decimal(units).scaleb(power)
    d = float(step) / r
    js = range(-(-m // r), (m + rows - 1) // r + 1)
    exact = [j * step for j in js]
    if log:
        exact = [Decimal(1).scaleb(int(e)) for e in exact]  # the exponents are whole
    labels = tick_texts(exact)
    width = max(map(len, labels), default=0)
    return Scale(rows, m * d, (m + rows - 1) * d, log, tuple(float(v) for v in exact),
                 tuple(s.rjust(width) for s in labels), tuple(j * r - m for j in js), float(step))


def _row_step(m: int, r: int, units: int, power: int) -> float:
    return units * 10.0 ** power / r


def _log_pair(a: float, b: float, rows: int) -> Scale | None:
    """A log axis for data [10^a, 10^b] spanning less than the powers of ten need: two round values of a linear
    axis of the data (its outermost inside the data, or its ends) exactly on rows, whichever pair spreads the data
    over more of the plot; the rows between them stand for values that are not round, and carry no label."""
    linear = _scale(10.0 ** a, 10.0 ** b, rows, False, False)
    positive = [t for t in linear.ticks if t > 0]
    inside = [t for t in positive if 10.0 ** a * (1 - 1e-12) <= t <= 10.0 ** b * (1 + 1e-12)]
    min_gap = 1 if rows < 5 else 2
    best: tuple[float, float, float, int, int] | None = None  # (d, t1, t2, rows below t1, r)
    for pair in (inside, positive):
        if len(pair) < 2:
            continue
        t1, t2 = pair[0], pair[-1]
        g1, g2 = math.log10(t1), math.log10(t2)
        for r in range(rows - 1, min_gap - 1, -1):
            d = (g2 - g1) / r
            below = max(0, math.ceil((g1 - a) / d - 1e-9))  # rows under t1 that the data need
            if below + r <= rows - 1 and g1 + (rows - 1 - below) * d >= b - d * 1e-9:
                if best is None or d < best[0]:
                    best = (d, t1, t2, below, r)
                break
    if best is None:
        return None
    d, t1, t2, below, r = best
    labels = tick_texts([Decimal(repr(t1)), Decimal(repr(t2))])
    width = max(map(len, labels))
    lo = math.log10(t1) - below * d
    return Scale(rows, lo, lo + (rows - 1) * d, True, (t1, t2), tuple(s.rjust(width) for s in labels),
                 (below, below + r), 0.0)


def _search(a: float, b: float, rows: int, integral: bool, log: bool, ticks: int) -> tuple[int, int, int, int] | None:
    """(m, r, units, power) of the cheapest axis with at least ``ticks`` ticks that holds [a, b], or None.

    The cost: how much more than the least row step the axis takes (the height the data are spread over), times
    a penalty for ticks more than ``good_gap`` rows apart and one for labels of more than 3 digits."""
    least = (b - a) / (rows - 1)  # the smallest row step that holds the data
    min_gap = 1 if rows < 5 else 2
    good_gap = max(min_gap, min(5, (rows - 1) // 3))
    most_gap = rows - 1 if ticks > 1 else rows + 1
    best: tuple[float, int, int, int, int] | None = None  # (cost, m, r, units, power)
    low = math.floor(math.log10(least)) - 1
    if integral:
        low = max(low, -1)  # a whole step is 1 x 10^0 or more
    top = math.floor(math.log10(max(abs(a), abs(b))))  # the largest value's first digit
    for power in range(low, low + 3 + math.ceil(math.log10(rows))):
        for units in NICE_UNITS:
            if integral and (power < -1 or (power == -1 and units == 25)):
                continue  # not a whole step
            step = units * 10.0 ** power
            # the digits a label needs (4.25e9: 3); past 3, each one costs as much as 30% of the height
            digits = 0 if log else top - (power if units == 25 else power + 1) + 1
            wordy = 1 + 0.3 * max(0, digits - 3)
            for r in range(min_gap, min(most_gap, math.floor(step / least * (1 + 1e-9))) + 1):
                d = step / r
                m = math.floor(a / d + 1e-9)
                if (m + rows - 1) * d < b - d * 1e-9:
                    continue  # the top row is below the data
                if (m + rows - 1) // r - -(-m // r) + 1 < ticks:
                    continue  # too few ticks on the axis
                cost = d / least * (1 + 0.1 * max(0, r - good_gap)) * wordy
                if best is None or cost < best[0] - 1e-12:
                    best = (cost, m, r, units, power)
    return None if best is None else best[1:]


def _nice(raw: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at least ``raw`` (> 0)."""
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for mult in (1.0, 2.0, 5.0, 10.0):
        if mult * magnitude >= raw * (1 - 1e-9):
            return mult * magnitude
    return 10 * magnitude  # pragma: no cover - 10 x magnitude always is


def _nice_step(raw: float) -> int:
    """The smallest whole 1, 2 or 5 x 10^k that is at least ``raw``."""
    magnitude = 1
    while True:
        for mult in (1, 2, 5):
            if mult * magnitude >= raw:
                return mult * magnitude
        magnitude *= 10


def integer_ticks(lo: int, hi: int, max_ticks: int) -> list[int]:
    """At most ``max_ticks`` (about) evenly spaced whole numbers in [lo, hi]: multiples of 1, 2 or 5 x 10^k.

    ``lo`` itself is added in front when the first multiple is at least half a step away, so the
    axis says where it starts (trial 1); with fewer than two multiples in range, the ends.
    """
    if hi <= lo:
        return [lo]
    step = _nice_step((hi - lo) / max(1, max_ticks - 1))
    first = -(-lo // step) * step  # ceil(lo / step) * step
    ticks = list(range(first, hi + 1, step))
    if ticks and ticks[0] - lo >= step / 2 and len(ticks) < max_ticks:
        ticks.insert(0, lo)
    return ticks if len(ticks) >= 2 else [lo, hi]  # one multiple in range says little: the two ends


def linear_ticks(lo: float, hi: float, max_ticks: int, *, outer: bool = False) -> list[float]:
    """About ``max_ticks`` round values in [lo, hi], equally spaced (1, 2 or 5 x 10^k apart); the ends when fewer
    than two round values fall in the range. ``outer``: where the values reach more than half a step past the
    first or last round value, the next round value out too (the axis is then labelled near its ends)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    step = _nice((hi - lo) / max(1, max_ticks - 1))
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    if outer:
        first -= (first * step - lo) > step / 2
        last += (hi - last * step) > step / 2
    ticks = [0.0 if k == 0 else float(f"{k * step:.12g}") for k in range(first, last + 1)]
    return ticks if len(ticks) >= 2 else [lo, hi]


def log_ticks(lo: float, hi: float, max_ticks: int) -> list[float]:
    """Powers of ten in [lo, hi] (every other one, or fewer, past ``max_ticks``); round linear values when fewer
    than two powers fall in the range."""
    if lo <= 0 or hi <= lo:
        return [lo] if hi <= lo else [lo, hi]
    first, last = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    powers = list(range(first, last + 1))
    stride = max(1, math.ceil(len(powers) / max(1, max_ticks)))
    ticks = [float(f"{10.0 ** p:.12g}") for p in powers[::stride]]
    return ticks if len(ticks) >= 2 else linear_ticks(lo, hi, max_ticks)
