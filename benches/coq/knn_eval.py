"""How often the library k-NN (agents/library_tactics.py) proposes the tactic a human wrote, offline.

Why it exists: a change to how the k-NN ranks its suggestions is cheap to measure before any bench run. For each
indexed module, up to ``--per-module`` of its recorded steps (goal before the step, the human's tactic) are asked
of the index with that whole module left out (its own steps may not answer), and the proposals are made as the
search makes them (local names mapped onto the step's own goal, duplicates dropped; no scope screen). For the
first-met ranking (the default) and for the vote (``library_tactics.proposal_order``: the first tactics met, then a
vote) it prints the share of steps whose human tactic is the first proposal and among the first ``--top`` (the
search takes 8), that share apart for the human tactics among the index's 60 most common (``subst.``, ``trivial.``:
the search's rules offer those anyway) and for the others, the common tactics per list of proposals, and the ratio
of the vote's top share to the first-met one. Round sixteen's vote raised the top share through the common tactics
alone and lost in the search (docs/proofs.md, "Round sixteen"): read the split, not only the total. It reads the
index (``--index``, default the search's own: ``library_tactics.cache_dir()``) and never runs Coq.

The other modules stand in for the target's library: a module's real library is only what it loads, so the
figure is an upper bound on what the k-NN sees, the same for both rankings.

``python -m benches.coq.knn_eval [--index DIR] [--per-module 15] [--seed 16] [--top 8]``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents import library_tactics as lt

COMMON = 60  # the index's most common tactics (by their text), counted apart


@dataclass(frozen=True)
class Hits:
    """Of the steps asked: the human tactic first, among the first ``top``; split by whether the human tactic is
    one of the index's most common (``common``: ``subst.``, ``trivial.``, which the search's rules offer anyway)
    or not (``specific``); and the common tactics among all the proposals made."""

    steps: int
    first: int
    top: int
    common_steps: int = 0
    common_top: int = 0
    common_proposed: int = 0

    def line(self, label: str, width: int) -> str:
        n = max(1, self.steps)
        specific = self.steps - self.common_steps
        return (f"{label:<{width}} first {self.first / n:6.1%}   top {self.top / n:6.1%}"
                f"   specific {(self.top - self.common_top) / max(1, specific):6.1%}"
                f"   common {self.common_top / max(1, self.common_steps):6.1%}"
                f"   common proposed {self.common_proposed / n:4.2f}   ({self.steps} steps)")


def _norm(tactic: str) -> str:
    return " ".join(tactic.split())


def load_entries(root: Path) -> list[dict[str, Any]]:
    """The index's entries of the current version that hold steps, sorted by file name."""
    entries: list[dict[str, Any]] = []
    for path in sorted(root.glob("*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("version") == lt.INDEX_VERSION and entry.get("steps"):
            lt.with_features(entry)
            entries.append(entry)
    return entries


@dataclass(frozen=True)
class Probe:
    """What both rankings are asked against: the index's steps (module, step), their k-NN, each step's module,
    the steps asked (leave one module out), and the index's most common tactics."""

    steps: list[tuple[int, dict[str, Any]]]
    index: lt.KnnIndex
    module: np.ndarray
    queries: list[int]
    usual: frozenset[str]


def probe(entries: Sequence[dict[str, Any]], *, per_module: int = 15, seed: int = 16, common: int = COMMON) -> Probe:
    """Up to ``per_module`` steps of every module, sampled by ``seed``, and the index they are asked of."""
    steps = [(m, st) for m, entry in enumerate(entries) for st in entry["steps"]]
    usual = frozenset(t for t, _ in Counter(_norm(st["tactic"]) for _, st in steps).most_common(common))
    rng = random.Random(seed)
    by_module: dict[int, list[int]] = {}
    for i, (m, _) in enumerate(steps):
        by_module.setdefault(m, []).append(i)
    queries = [i for m in sorted(by_module) for i in rng.sample(by_module[m], min(per_module, len(by_module[m])))]
    return Probe(steps, lt.KnnIndex([st["features"] for _, st in steps]),
                 np.array([m for m, _ in steps], dtype=np.int64), queries, usual)


def evaluate(asked: Probe, *, top: int = 8, voting: bool = True) -> Hits:
    """Leave one module out: the human tactic's place among the proposals for each step asked."""
    steps = asked.steps
    first = in_top = common_steps = common_top = common_proposed = 0
    for q in asked.queries:
        m, st = steps[q]
        near = asked.index.nearest(st["features"], lt.VOTE_K if voting else lt.NEAREST, asked.module != m)
        order = (lt.proposal_order(near, lambda item: str(steps[item][1]["tactic"])) if voting
                 else [i for _, i in near])
        target = lt.display_goal(st["goal"])
        proposed: list[str] = []
        for i in order:
            other = steps[i][1]
            tactic = lt.adapt(other["tactic"], other.get("locals", ()), other["goal"], target)
            if tactic is not None and _norm(tactic) not in proposed:
                proposed.append(_norm(tactic))
            if len(proposed) >= top:
                break
        want = _norm(st["tactic"])
        first += bool(proposed) and proposed[0] == want
        in_top += want in proposed
        common_steps += want in asked.usual
        common_top += want in asked.usual and want in proposed
        common_proposed += sum(t in asked.usual for t in proposed)
    return Hits(len(asked.queries), first, in_top, common_steps, common_top, common_proposed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.coq.knn_eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=None, help="the k-NN index folder (default: the search's)")
    parser.add_argument("--per-module", type=int, default=15, help="steps asked per module (default 15)")
    parser.add_argument("--seed", type=int, default=16, help="which steps are sampled (default 16)")
    parser.add_argument("--top", type=int, default=8, help="proposals counted (default 8, as the search)")
    args = parser.parse_args(argv)
    root = args.index if args.index is not None else lt.cache_dir()
    entries = load_entries(root)
    if len(entries) < 2:
        print(f"knn_eval: {root} holds {len(entries)} index entries with steps; at least 2 are needed "
              "(python -m agents.library_tactics build)", file=sys.stderr)
        return 2
    print(f"index {root}: {len(entries)} modules, {sum(len(e['steps']) for e in entries)} steps")
    asked = probe(entries, per_module=args.per_module, seed=args.seed)
    base = evaluate(asked, top=args.top, voting=False)
    voted = evaluate(asked, top=args.top, voting=True)
    labels = (f"first met, {lt.NEAREST} neighbours", f"first {lt.VOTE_KEEP} met, then a vote of {lt.VOTE_K}")
    width = max(map(len, labels))
    print(base.line(labels[0], width))
    print(voted.line(labels[1], width))
    ratio = (voted.top / base.top) if base.top else float("inf")
    print(f"with the vote / first met, top {args.top}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
