"""The pooled figure of several ``bench coq`` runs: what docs/proofs.md reports for one fixed prover over the
out-of-sample sets it never saw (one set of 60-90 theorems lands anywhere from about 30% to 77%, so no single set
is the measure).

``python -m benches.coq.pooled RUN [RUN ...]`` (a run directory, or a directory of runs) prints each run's
figure, the pooled one per setting, and where the theorems fall: by the standard library folder of their file,
by whether the bench dropped CoqHammer's preload for that file (it would have loaded the original:
``oracle.coq.oracle.with_preload``), by the length of the original proof, and when the proofs were found.
``--exclude FILE`` (repeatable; a file's name or its path's end, ``Reals/R_sqrt.v``) leaves a file out of every
figure: one a round tuned on is in-sample wherever a later draw puts it. A report older than round thirteen does
not say which file each theorem came from, so its theorems stay in the length and time breakdowns (the output
says how many). It reads only what a run records (``run.json``, ``bench_report.json``) and never runs Coq.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

# the original proof's length in sentences (benches.proofs.proof_script), cut into these bands (upper bounds, inclusive)
LENGTH_BANDS = ((1, "1"), (2, "2"), (4, "3-4"), (8, "5-8"), (16, "9-16"), (10**9, "17+"))
FOUND_WITHIN = (1, 2, 5, 10, 15, 20)  # seconds: the share of the proofs found by then


class PooledError(ValueError):
    """A path that holds no finished ``bench coq`` run, or a run whose records cannot be read."""


@dataclass
class Tally:
    solved: int = 0
    total: int = 0

    def add(self, solved: int, total: int) -> None:
        self.solved += solved
        self.total += total

    def __str__(self) -> str:
        rate = f"{100 * self.solved / self.total:.1f}%" if self.total else "-"
        return f"{self.solved}/{self.total} ({rate})"


@dataclass
class Pooled:
    runs: list[tuple[str, str, Tally, tuple[str, ...]]] = field(default_factory=list)  # (run, setting, figure, files)
    by_setting: dict[str, Tally] = field(default_factory=dict)
    by_folder: dict[str, Tally] = field(default_factory=dict)
    by_preload: dict[str, Tally] = field(default_factory=dict)  # "dropped" / "kept"
    by_length: dict[str, Tally] = field(default_factory=dict)
    found_seconds: list[float] = field(default_factory=list)
    excluded: Tally = field(default_factory=Tally)  # what --exclude left out of the figures
    unattributed: int = 0  # runs with an excluded file whose report does not say each theorem's file (older ones)


def folder_of(source: str) -> str:
    """The standard library folder of a source file (``Reals`` for ``.../theories/Reals/R_sqrt.v``), else the name
    of the folder that holds it."""
    parts = PurePosixPath(source.replace("\\", "/")).parts
    if "theories" in parts:
        rest = parts[len(parts) - parts[::-1].index("theories"):]  # what follows the last `theories`
        if len(rest) > 1:
            return rest[0]
    return parts[-2] if len(parts) > 1 else "-"


def sentences(original: str) -> int:
    """How many sentences an original proof holds, counted as the report's comparison counts them
    (:func:`benches.proofs.proof_script`: Coq's sentences, ``Proof.``, ``Qed.`` and bullets left out)."""
    from benches.proofs import proof_script

    return len(proof_script(original))


def length_band(n: int) -> str:
    return next(label for top, label in LENGTH_BANDS if n <= top)


def run_dirs(paths: Iterable[Path]) -> list[Path]:
    """The finished runs under ``paths``: each path is a run (it holds ``bench_report.json``) or a folder of runs."""
    out: list[Path] = []
    for path in paths:
        if (path / "bench_report.json").is_file():
            out.append(path)
            continue
        found = sorted(p.parent for p in path.glob("*/bench_report.json"))
        if not found:
            raise PooledError(f"{path}: no bench_report.json in it or in a run directory under it "
                              "(a bench run writes one when it finishes)")
        out.extend(found)
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PooledError(f"{path}: cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise PooledError(f"{path}: not a JSON object")
    return data


def _matches(path: str, excluded: Sequence[str]) -> bool:
    """Whether ``path`` (a source's path, or only its name) is one of ``excluded`` (names or path ends)."""
    posix = "/" + path.replace("\\", "/").lstrip("/")
    name = PurePosixPath(posix).name
    return any(e == name or posix.endswith("/" + e.strip("/")) for e in excluded)


def pool(runs: Sequence[Path], exclude: Sequence[str] = ()) -> Pooled:
    out = Pooled()
    for run in runs:
        report = _read(run / "bench_report.json")
        meta = _read(run / "run.json") if (run / "run.json").is_file() else {}
        setting = str(report.get("setting") or "-")
        sources = ((meta.get("task") or {}).get("oracle") or {}).get("params", {}).get("sources") or []
        path_of = {PurePosixPath(str(s)).name: str(s) for s in sources}
        dropped = set((meta.get("oracle") or {}).get("preload_dropped") or [])
        figure = Tally()
        left_out: set[str] = set()
        for name, row in (report.get("by_file") or {}).items():
            solved, total = int(row.get("solved", 0)), int(row.get("total", 0))
            source = path_of.get(name, name)
            if _matches(source, exclude):
                out.excluded.add(solved, total)
                left_out.add(name)
                continue
            figure.add(solved, total)
            out.by_folder.setdefault(folder_of(source), Tally()).add(solved, total)
            out.by_preload.setdefault("dropped" if name in dropped else "kept", Tally()).add(solved, total)
        out.runs.append((run.name, setting, figure, tuple(n for n in report.get("by_file") or () if n not in left_out)))
        out.by_setting.setdefault(setting, Tally()).add(figure.solved, figure.total)
        proofs = report.get("proofs") or {}
        rows = report.get("theorems") or {}
        if left_out and any(isinstance(r, dict) and "file" not in r for r in rows.values()):
            out.unattributed += 1
        for name, original in (report.get("originals") or {}).items():
            found = rows.get(name)
            if isinstance(found, dict) and str(found.get("file")) in left_out:
                continue
            out.by_length.setdefault(length_band(sentences(str(original))), Tally()).add(int(name in proofs), 1)
        for row in rows.values():
            if isinstance(row, dict) and row.get("solved") and str(row.get("file")) not in left_out:
                out.found_seconds.append(float(row.get("seconds") or 0.0))
    return out


def render(p: Pooled) -> str:
    lines = [f"{name}  {setting}  {figure}  {', '.join(files)}" for name, setting, figure, files in p.runs]
    lines += [f"pooled, {setting}: {figure} over {sum(1 for run in p.runs if run[1] == setting)} run(s)"
              for setting, figure in p.by_setting.items()]
    if len(p.by_setting) > 1:
        lines.append("(the settings are pooled apart: a figure mixing them would measure neither)")
    lines.append("by folder: " + ", ".join(f"{k} {v}" for k, v in
                                           sorted(p.by_folder.items(), key=lambda kv: -kv[1].total)))
    lines.append("by CoqHammer's preload: " + ", ".join(f"{k} {v}" for k, v in sorted(p.by_preload.items())))
    order = [label for _, label in LENGTH_BANDS]
    lines.append("by the original proof's sentences: " + ", ".join(
        f"{k} {p.by_length[k]}" for k in order if k in p.by_length))
    if p.excluded.total:
        lines.append(f"left out (--exclude): {p.excluded}" + (
            f"; {p.unattributed} run(s) do not say each theorem's file, so their theorems all stay in the length "
            "and time breakdowns" if p.unattributed else ""))
    if p.found_seconds:
        n = len(p.found_seconds)
        lines.append(f"proofs found within (of {n}): " + ", ".join(
            f"{s} s {100 * sum(t <= s for t in p.found_seconds) / n:.0f}%" for s in FOUND_WITHIN))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.coq.pooled", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="a bench coq run directory, or a directory of runs")
    parser.add_argument("--exclude", action="append", default=[], metavar="FILE",
                        help="leave this file out (its name or its path's end, e.g. Reals/R_sqrt.v); repeatable")
    args = parser.parse_args(argv)
    try:
        print(render(pool(run_dirs(args.runs), args.exclude)))
    except PooledError as exc:
        print(f"pooled: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
