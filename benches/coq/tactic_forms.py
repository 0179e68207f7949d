"""What the original proofs of the files already measured are made of: for each tactic form (``apply L in H``,
``rewrite .. in H``, ``destruct (term)``, ``assert``...), how many theorems' original proofs take it and how often.

A tuning aid for the proof search (issue 33): a form many original proofs take and the search never offers is a
capability to build next; a count is no promise that the search needs the form (an ``assert`` names what a later
step proves; the search may take another path). It reads only the files of the sets measured before
(``benches/coq/stdlib_split.py``: the tuning sets and out-of-sample 1 to ``--through``; by default every set but the
last one drawn, which is kept for its blind run), so a set not yet run stays unseen. It never runs Coq beyond
``coqc -where``.

``python -m benches.coq.tactic_forms [--through N] [--top K]``
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from benches.coq.stdlib_split import drawn_sets, theories
from benches.proofs import proof_script
from oracle.strip_coq import CoqSyntaxError, strip_coq_file_with_notes

# the heads whose argument in brackets is a term to take apart (`destruct (Rle_dec x y)`, `elim (H eps H1)`)
_TAKE_APART = ("destruct", "edestruct", "elim", "case", "case_eq", "induction", "inversion")
# the heads whose `in H` acts on a hypothesis
_AT_HYPOTHESIS = ("apply", "eapply", "rewrite", "erewrite", "setoid_rewrite", "unfold", "simpl", "cbn", "red",
                  "change", "autorewrite", "cbv", "compute", "fold", "replace")
# wrappers whose inner tactic is the form
_WRAPPERS = re.compile(r"^(?:try|repeat|progress|now|do\s+\d+|once|exactly_once)\s+")
_SELECTOR = re.compile(r"^(?:[-+*]+|\d+\s*:|all\s*:)\s*")


def _first_tactic(sentence: str) -> str:
    """The sentence's first tactic: up to its first `;` outside brackets, without the final `.`."""
    depth = 0
    for i, ch in enumerate(sentence):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == ";" and depth == 0:
            return sentence[:i].strip()
    return sentence.strip().removesuffix(".").strip()


def tactic_form(sentence: str) -> str | None:
    """A proof sentence's form: its first tactic's head, with what the search may or may not offer of it told apart
    (``apply _ in H``, ``rewrite _ in H``, ``destruct (term)``, ``apply _ with``, ``apply (term)``, ``assert .. by``);
    None for an empty one."""
    text = _SELECTOR.sub("", " ".join(sentence.split()))
    while (m := _WRAPPERS.match(text)) is not None:
        text = text[m.end():].lstrip("(")
    tactic = _first_tactic(text)
    words = tactic.split()
    if not words:
        return None
    head = words[0]
    if head in _AT_HYPOTHESIS and re.search(r"\sin\s+(?:[A-Za-z_][\w']*|\*)(?:[\s)]|$)", tactic):
        return f"{head} _ in H"
    if head in _TAKE_APART and len(words) > 1 and words[1].startswith("("):
        return f"{head} (term)"
    if head in ("apply", "eapply", "exact", "refine"):
        if re.search(r"\swith\s", tactic):
            return f"{head} _ with"
        if "(" in tactic:
            return f"{head} (term)"
    if head in ("assert", "enough") and re.search(r"\sby\s", text):
        return f"{head} .. by"
    if head == "pose" and len(words) > 1 and words[1] == "proof":
        return "pose proof"
    return head


def tally(proofs: Iterable[str]) -> tuple[Counter[str], Counter[str], int]:
    """(theorems whose proof takes each form, sentences of each form, proofs read) over original proof texts."""
    theorems: Counter[str] = Counter()
    uses: Counter[str] = Counter()
    count = 0
    for proof in proofs:
        count += 1
        forms = [f for f in map(tactic_form, proof_script(proof)) if f]
        uses.update(forms)
        theorems.update(set(forms))
    return theorems, uses, count


def measured_files(root: Path, through: int | None) -> tuple[list[str], list[str]]:
    """(the files under ``root`` of the tuning sets and of out-of-sample 1 to ``through``, those sets' names);
    ``through`` None: every set but the last drawn."""
    sets = drawn_sets(root)
    if through is None:
        sets = sets[:-1]
    else:
        sets = [(name, chosen) for name, chosen in sets
                if name.startswith("tuning") or int(name.rsplit(" ", 1)[1]) <= through]
    return [f for _, chosen in sets for f, _ in chosen], [name for name, _ in sets]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.coq.tactic_forms", description=__doc__.split("\n\n")[0])
    parser.add_argument("--through", type=int, default=None, metavar="N",
                        help="read the tuning sets and out-of-sample 1 to N (default: every set but the last drawn)")
    parser.add_argument("--top", type=int, default=40, metavar="K", help="print the K forms most theorems take")
    args = parser.parse_args(argv)
    root = theories()
    files, names = measured_files(root, args.through)
    proofs: list[str] = []
    unread: list[str] = []
    for rel in files:
        try:
            proofs += [task.original_proof for task in strip_coq_file_with_notes(root / rel)[0] if task.original_proof]
        except (CoqSyntaxError, OSError, UnicodeDecodeError, ValueError) as exc:
            unread.append(f"{rel} ({exc})")
    theorems, uses, count = tally(proofs)
    print(f"{len(files)} files of {len(names)} sets ({names[0]} .. {names[-1]}), {count} original proofs")
    for rel in unread:
        print(f"not read: {rel}")
    print(f"{'theorems':>8} {'share':>6} {'uses':>6}  form")
    for form, n in theorems.most_common(args.top):
        print(f"{n:8} {100 * n / max(count, 1):5.1f}% {uses[form]:6}  {form}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
