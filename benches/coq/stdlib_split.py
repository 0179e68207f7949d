"""The seeded split of the Coq standard library into the proof bench's tuning and out-of-sample sets.

Why it exists: a prover tuned on the files it is measured on says nothing about files it has not
seen. The sets of docs/proofs.md are fixed by one rule, written here so that anyone can redo it
and so that a new set is drawn by the same rule *before* tuning starts, never picked by hand:

the ``.v`` files under ``$(coqc -where)/theories`` outside ``Init/`` and other than the three
files the search was first built on (``Lists/List.v``, ``Arith/PeanoNat.v``, ``Bool/Bool.v``),
sorted, kept when the stripper reads 5 to 40 theorems in them, shuffled with
``random.Random(33)``; then cut in order: files are added to a set until it holds at least its
size in theorems (40 for the tuning set, 60 for each out-of-sample set and for the second tuning
set, drawn after the third out-of-sample set; out-of-sample 4 and 5 were each drawn before the
round of tuning they measure; out-of-sample 6 after out-of-sample 5's first run, to measure the
checker's axiom rule that run led to on files no one had seen; out-of-sample 7 before round five's
tuning; out-of-sample 8 before round six's;
out-of-sample 9 before round seven's; out-of-sample 10 before round eight's; out-of-sample 11 after
round eight's harness fixes, which out-of-sample 10's blind run led to, to measure them on files no one had seen;
out-of-sample 12 before round nine's work; out-of-sample 13 before round ten's; out-of-sample 14 after out-of-sample 13's blind run, before
the tuning it led to; out-of-sample 15 before round eleven's work;
out-of-sample 16 after out-of-sample 15's blind run, before any tuning, to measure the same prover again;
out-of-sample 17 after round eleven's two rules, tuned on out-of-sample 15 only, to measure them and round ten's prover;
out-of-sample 18 after round eleven's third rule, tuned on out-of-sample 17's NZGcd.v;
out-of-sample 19 before round twelve's work, to measure round eleven's final prover blind;
out-of-sample 20 after round twelve's two ranking rules, tuned on out-of-sample 19's ZMulOrder.v;
out-of-sample 21 after round twelve's witness rule, tuned on out-of-sample 20's ssrfun.v;
out-of-sample 22 after round twelve's rules were turned off, to measure round eleven's prover, the default, once more;
out-of-sample 23 before round thirteen's work, to measure the default prover blind once more;
out-of-sample 24 before round fourteen's work, likewise;
out-of-sample 25 after round fourteen's rule (a functor parameter's tactics), tuned on out-of-sample 14's, 17's and
19's Numbers files);
out-of-sample 26 before round fifteen's work, to measure round fourteen's prover blind;
out-of-sample 27 after round fifteen's rule (a hypothesis' record of laws), tuned on out-of-sample 26's Ring_theory.v and
on micromega/OrderedRing.v, which the split's rule does not keep (51 theorems); the rule lost in-sample and is off, so
out-of-sample 27 measures round fourteen's prover blind once more);
out-of-sample 28 before round sixteen's work, to measure the default prover blind once more;
out-of-sample 29 after round sixteen's change (the library k-NN's vote), which lost in-sample on out-of-sample 28 and
is off, so out-of-sample 29 measures the default prover blind once more;
out-of-sample 30 before round seventeen's work, to measure the default prover blind once more;
out-of-sample 31 after round seventeen's change (a second search beside the search), which gained nothing in-sample on
out-of-sample 30 and is off, so out-of-sample 31 measures the default prover blind once more;
out-of-sample 32 before round eighteen's work, run once, after it, with the prover round eighteen leaves as the default;
out-of-sample 33 after round eighteen's change (the time term by a tactic's kind), before any other, to measure the
default prover blind once more;
out-of-sample 34 before round nineteen's work, run once, after it, with the prover round nineteen leaves as the default;
out-of-sample 35 before round twenty's work, run once before any change and once after it, with the prover round
twenty leaves as the default;
out-of-sample 36 before round twenty-one's work, run once before any change and once after it, with the prover round
twenty-one leaves as the default;
out-of-sample 37 after round twenty-one's changes, which out-of-sample 36's blind run led to, to measure the prover
round twenty-one leaves as the default on files no one had seen;
out-of-sample 38 before round twenty-two's work, run once before any change and once after it, with the prover round
twenty-two leaves as the default;
out-of-sample 39 after round twenty-two's changes, which out-of-sample 38's blind run led to, to measure the prover
round twenty-two leaves as the default on files no one had seen;
out-of-sample 40 before round twenty-three's work, run once before any change and once after it, with the prover
round twenty-three leaves as the default;
out-of-sample 41 after round twenty-three's changes, which out-of-sample 40's blind run led to, to measure the prover
round twenty-three leaves as the default on files no one had seen;
out-of-sample 42 before round twenty-four's work, run once before any change and once after it, with the prover
round twenty-four leaves as the default;
out-of-sample 43 after round twenty-four's changes, which out-of-sample 42's blind run led to, to measure the prover
round twenty-four leaves as the default on files no one had seen;
out-of-sample 44 before round twenty-five's work, to measure the prover round twenty-four leaves as the default blind;
out-of-sample 45 after round twenty-five's changes, which out-of-sample 44's blind run led to, to measure the prover
round twenty-five leaves as the default on files no one had seen;
out-of-sample 46 after out-of-sample 45's blind run, before any change, to measure the same prover again;
out-of-sample 47 before round twenty-six's work, to measure the prover round twenty-five leaves as the default blind once more;
out-of-sample 48 after round twenty-six's changes (a boolean restatement's step on; two rules measured in-sample and
left off), to measure the prover round twenty-six leaves as the default on files no one had seen;
out-of-sample 49 after out-of-sample 48's blind run, before any change, to measure the same prover again;
out-of-sample 50 before round twenty-seven's work, to measure the prover round twenty-six leaves as the default blind once
more;
out-of-sample 51 after round twenty-seven's changes (a case split's decision lemmas read with the hypotheses; `auto 9
with *` measured in-sample and left off), to measure the prover round twenty-seven leaves as the default on files no
one had seen;
out-of-sample 52 after out-of-sample 51's blind run, before any change, to measure the same prover again;
out-of-sample 53 after out-of-sample 52's blind run, before any change, to measure it once more;
out-of-sample 54 at the start of round twenty-eight, before any change, to measure round twenty-seven's prover blind
again;
out-of-sample 55 after round twenty-eight's changes (a state keyed by every goal's hypotheses; a tactic's name the
context gives a term read as missing), to measure the prover round twenty-eight leaves as the default on files no one
had seen). Out-of-sample 54 took the last of the files of 5 to 40 theorems; from out-of-sample 55 on, the sets are cut
by the same rule from the files of 1 to 4 theorems (:data:`LATER`), sorted and shuffled with ``random.Random(33)``
apart, chosen before out-of-sample 55 was drawn: a population of smaller files, reported apart from the first;
out-of-sample 56 at the start of round twenty-nine, before any change to the prover, to measure round twenty-eight's
prover blind again (drawn after a mend that changes the search only when Coq does not answer in time); out-of-sample
57 after round twenty-nine's change (the lemmas of any value the goal's abstracted shape finds), to measure that
prover blind; out-of-sample 58 in round thirty, after its change (a `>` conclusion searched as `<`, a decision's
type searched by its cases), to measure that prover blind: it took the last 22 theorems of the files of 1 to 4
theorems. From out-of-sample 59 on, the sets are cut by the same rule from the files of more than 40 theorems
(:data:`LARGE`, a third population, in no set before; shuffled with ``random.Random(33)`` apart), a set never
crossing from the smaller files into them; out-of-sample 59 in round thirty, drawn with 58; out-of-sample 60 in round
thirty-one, after its change (a singular declaration's every name read as assumed; two rules measured and left off),
to measure that prover blind, and out-of-sample 61 after it, the same prover on one more set; out-of-sample 62 at the
start of round thirty-two, before any change to the prover, the same prover on one more set again; out-of-sample 63
after round thirty-two's change (the context's own tactics close the side goals a step opens), to measure that prover
blind, and out-of-sample 64 after it, the same prover on one more set; out-of-sample 65 after round thirty-three's
three rules (a product read by its top-level connective, `constructor.` on an applied predicate, the premises ranked
on a step's goals in its discharge), to measure that prover blind.

``python -m benches.coq.stdlib_split`` prints every set with its files and theorem counts. A file a round tuned
on by hand, outside the rule (:data:`TUNED_BY_HAND`), is marked wherever a later draw puts it: it stays in its set,
so that no later set moves, but its figures are in-sample (``python -m benches.coq.pooled --exclude FILE``).
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from oracle.strip_coq import CoqSyntaxError, strip_coq_file_with_notes

SEED = 33
# round six's third tuning set, picked by hand from files then in no set (docs/proofs.md, round six); out-of-sample
# 21 drew `Reals/R_sqrt.v` in round twelve, which reported it as blind (round thirteen found it)
TUNED_BY_HAND = {"Reals/R_sqrt.v": "round six", "Reals/R_Ifp.v": "round six",
                 "Reals/Abstract/ConstructiveAbs.v": "round six"}
EXCLUDED = ("Lists/List.v", "Arith/PeanoNat.v", "Bool/Bool.v")
# the files of 1 to 4 theorems, shuffled alike, drawn from once the files of 5 to 40 are spent (out-of-sample 54 took
# the last of those)
LATER = (1, 4)
# the files of more than 40 theorems, shuffled alike, drawn from once the smaller files are spent (out-of-sample 58
# took the last of those): a set is cut from one population, never from two
LARGE = (41, 100_000)
SIZES = (("tuning", 40), ("out-of-sample 1", 60), ("out-of-sample 2", 60), ("out-of-sample 3", 60),
         ("tuning 2", 60), ("out-of-sample 4", 60), ("out-of-sample 5", 60),
         ("out-of-sample 6", 60), ("out-of-sample 7", 60), ("out-of-sample 8", 60),
         ("out-of-sample 9", 60), ("out-of-sample 10", 60),
         ("out-of-sample 11", 60), ("out-of-sample 12", 60), ("out-of-sample 13", 60),
         ("out-of-sample 14", 60), ("out-of-sample 15", 60),
         ("out-of-sample 16", 60), ("out-of-sample 17", 60),
         ("out-of-sample 18", 60), ("out-of-sample 19", 60),
         ("out-of-sample 20", 60), ("out-of-sample 21", 60),
         ("out-of-sample 22", 60), ("out-of-sample 23", 60),
         ("out-of-sample 24", 60), ("out-of-sample 25", 60),
         ("out-of-sample 26", 60), ("out-of-sample 27", 60),
         ("out-of-sample 28", 60), ("out-of-sample 29", 60),
         ("out-of-sample 30", 60), ("out-of-sample 31", 60),
         ("out-of-sample 32", 60), ("out-of-sample 33", 60),
         ("out-of-sample 34", 60), ("out-of-sample 35", 60),
         ("out-of-sample 36", 60), ("out-of-sample 37", 60),
         ("out-of-sample 38", 60), ("out-of-sample 39", 60),
         ("out-of-sample 40", 60), ("out-of-sample 41", 60),
         ("out-of-sample 42", 60), ("out-of-sample 43", 60),
         ("out-of-sample 44", 60), ("out-of-sample 45", 60),
         ("out-of-sample 46", 60), ("out-of-sample 47", 60),
         ("out-of-sample 48", 60), ("out-of-sample 49", 60),
         ("out-of-sample 50", 60), ("out-of-sample 51", 60),
         ("out-of-sample 52", 60), ("out-of-sample 53", 60),
         ("out-of-sample 54", 60), ("out-of-sample 55", 60),
         ("out-of-sample 56", 60), ("out-of-sample 57", 60),
         ("out-of-sample 58", 60), ("out-of-sample 59", 60),
         ("out-of-sample 60", 60), ("out-of-sample 61", 60),
         ("out-of-sample 62", 60), ("out-of-sample 63", 60),
         ("out-of-sample 64", 60), ("out-of-sample 65", 60))


def theories() -> Path:
    out = subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True, timeout=60).stdout
    return Path(out.strip()) / "theories"


def candidates(root: Path, low: int = 5, high: int = 40) -> list[tuple[str, int]]:
    """(path relative to ``root``, readable theorems) of every file the rule keeps (``low`` to ``high`` theorems;
    1 to 4 for :data:`LATER`), sorted."""
    kept: list[tuple[str, int]] = []
    for path in sorted(root.rglob("*.v")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("Init/") or rel in EXCLUDED:
            continue
        try:
            count = len(strip_coq_file_with_notes(path)[0])
        except (CoqSyntaxError, OSError, UnicodeDecodeError):
            continue
        if low <= count <= high:
            kept.append((rel, count))
    return kept


def _shuffled(files: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """``files`` in the order ``random.Random(SEED)`` shuffles them (each population apart, by the same seed)."""
    out = list(files)
    random.Random(SEED).shuffle(out)
    return out


def split(kept: Sequence[tuple[str, int]], later: Sequence[tuple[str, int]] = (),
          large: Sequence[tuple[str, int]] = ()) -> list[tuple[str, list[tuple[str, int]]]]:
    """The sets of :data:`SIZES`, in order, from the shuffled ``kept``, then from the shuffled ``later`` (the files of
    1 to 4 theorems, :data:`LATER`) once ``kept`` is spent, then from the shuffled ``large`` (the files of more than
    40, :data:`LARGE`): the set that spends ``later`` ends there, short, and the next one starts on ``large``."""
    files = _shuffled(kept) + _shuffled(later)
    last = _shuffled(large)
    out: list[tuple[str, list[tuple[str, int]]]] = []
    at = 0
    for name, size in SIZES:
        if at == len(files) and last:  # the smaller files are spent: from here on, the large ones
            files, at, last = last, 0, []
        chosen: list[tuple[str, int]] = []
        while sum(n for _, n in chosen) < size and at < len(files):
            chosen.append(files[at])
            at += 1
        out.append((name, chosen))
    return out


def describe(name: str, chosen: list[tuple[str, int]]) -> str:
    """One set's line: its files with their theorem counts, a file tuned on by hand marked in-sample."""
    def one(f: str, n: int) -> str:
        tuned = TUNED_BY_HAND.get(f)
        return f"{f} ({n}, tuned on in {tuned}: in-sample)" if tuned else f"{f} ({n})"
    return f"{name}: {sum(n for _, n in chosen)} theorems: " + ", ".join(one(f, n) for f, n in chosen)


def drawn_sets(root: Path) -> list[tuple[str, list[tuple[str, int]]]]:
    """Every set of :data:`SIZES` as drawn from the files under ``root`` (the three populations, :func:`split`)."""
    return split(candidates(root), candidates(root, *LATER), candidates(root, *LARGE))


def main() -> int:
    for name, chosen in drawn_sets(theories()):
        print(describe(name, chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
