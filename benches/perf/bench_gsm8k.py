"""Throughput of GSM8K grading (completions/s), against baselines measured in the same run.

Why it exists: the eval bench promises to grade the 1319-question test split in well under a
second, and the GRPO reward calls the verifier for every sampled completion. This prints:

* ``oracle.gsm8k.grade`` in lenient and strict mode (completions/s, best of ``--repeats``);
* baseline A, a bare last-number regex (the cheapest possible extractor), as a ratio;
* baseline B, math-verify ``parse`` + ``verify`` when installed (on a sample), as a ratio;
* the wall time of the whole CLI path (``bench.py --completions FILE``, a fresh process).

The completions are a deterministic mix built from the gold solutions (correct, reformatted
as ``\\boxed{}`` / "The answer is", wrong value, trailing text, no marker, hedged, no answer).
``--write-completions PATH`` writes that file for use with ``rrma-tui --headless bench
gsm8k-eval --completions PATH``. No figure here is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benches.perf import module_at  # noqa: E402
from oracle import gsm8k as _gsm8k  # noqa: E402
from oracle.gsm8k import grade  # noqa: E402
from oracle.gsm8k_data import DataError, Problem, load_jsonl, load_split  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "gsm8k" / "test.jsonl"


def synthetic_completions(problems: list[Problem]) -> list[dict[str, object]]:
    """A deterministic mix of completion styles, one per problem (see the module docstring)."""
    rows = []
    for p in problems:
        body = p.answer.rsplit("####", 1)[0].rstrip()
        gold = p.gold
        value = int(gold.replace(",", ""))
        style = p.idx % 8
        text = {
            0: p.answer,
            1: f"{body}\nThe answer is {gold}.",
            2: f"{body}\nSo the final answer is $\\boxed{{{gold}}}$.",
            3: f"{body}\n#### {value + 1}",
            4: f"{p.answer}\n\nQuestion: What is 2 + 2?\nAnswer: 4",
            5: body,
            6: f"{body}\n#### {value} or {value + 2}",
            7: "I am not sure how to solve this problem.",
        }[style]
        rows.append({"idx": p.idx, "completion": text})
    return rows


def best_rate(fn: Callable[[], int], repeats: int) -> float:
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        n = fn()
        best = max(best, n / (time.perf_counter() - t))
    return best


def cold() -> None:
    """Empty the grader's span cache (where it has one), so a repeated pass is not served from it."""
    cache = getattr(_gsm8k, "_short_span_values", None)
    if cache is not None:
        cache.cache_clear()


def grader_at(rev: str) -> Callable[..., Any] | None:
    """``oracle.gsm8k.grade`` as it was at git revision ``rev`` (None where git cannot show it)."""
    import tempfile

    module = module_at(rev, "oracle/gsm8k.py", Path(tempfile.mkdtemp(prefix="rrma-grade-")))
    return None if module is None else module.grade  # type: ignore[no-any-return]


_LAST = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def last_number_correct(completion: str, gold: str) -> bool:
    found = _LAST.findall(completion)
    return bool(found) and found[-1].replace(",", "").rstrip(".") == gold.replace(",", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=None, help="GSM8K test jsonl (default: shared, else fixture)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--math-verify-sample", type=int, default=200)
    parser.add_argument("--write-completions", type=Path, default=None)
    parser.add_argument("--against", default="", help="also time oracle/gsm8k.py at this git revision, interleaved")
    args = parser.parse_args(argv)

    try:
        problems = load_jsonl(args.data) if args.data else load_split("test")
        source = str(args.data) if args.data else "shared test split"
    except DataError:
        problems, source = load_jsonl(FIXTURE), f"fixture {FIXTURE.relative_to(ROOT)}"
    rows = synthetic_completions(problems)
    pairs = [(str(r["completion"]), problems[int(str(r["idx"]))].gold) for r in rows]
    if args.write_completions:
        with args.write_completions.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        print(f"wrote: {args.write_completions} ({len(rows)} completions from {source})")

    def ours(mode: str) -> Callable[[], int]:
        def run() -> int:
            cold()  # each pass starts with an empty span cache: only reuse within the 1319 completions counts
            for completion, gold in pairs:
                grade(completion, gold, mode)
            return len(pairs)
        return run

    def naive() -> int:
        for completion, gold in pairs:
            last_number_correct(completion, gold)
        return len(pairs)

    print(f"data: {source}, {len(pairs)} completions, best of {args.repeats}")
    lenient = best_rate(ours("lenient"), args.repeats)
    strict = best_rate(ours("strict"), args.repeats)
    base = best_rate(naive, args.repeats)
    print(f"grade_lenient_completions_per_s: {lenient:,.0f}")
    print(f"grade_strict_completions_per_s: {strict:,.0f}")
    print(f"baseline_last_number_regex_completions_per_s: {base:,.0f}")
    print(f"ratio_lenient_vs_last_number_regex: {lenient / base:.3f}")
    print(f"seconds_for_1319_lenient: {1319 / lenient:.4f}")
    if args.against:  # the grader at an earlier revision, interleaved with this one (load hits both alike)
        other = grader_at(args.against)
        if other is not None:
            for mode in ("lenient", "strict"):
                def theirs(mode: str = mode) -> int:
                    for completion, gold in pairs:
                        other(completion, gold, mode)
                    return len(pairs)
                mine = old = 0.0
                for _ in range(args.repeats):
                    mine = max(mine, best_rate(ours(mode), 1))
                    old = max(old, best_rate(theirs, 1))
                print(f"interleaved_{mode}: this {mine:,.0f}/s, {args.against} {old:,.0f}/s, ratio {mine / old:.2f}")

    try:
        from math_verify import parse, verify
    except ImportError:
        print("math_verify: not installed (baseline B skipped)")
    else:
        sample = pairs[: args.math_verify_sample]

        def mv() -> int:
            for completion, gold in sample:
                verify(parse(gold), parse(completion))
            return len(sample)

        mv_rate = best_rate(mv, 1)
        print(f"baseline_math_verify_completions_per_s: {mv_rate:,.1f} (sample of {len(sample)})")
        print(f"ratio_lenient_vs_math_verify: {lenient / mv_rate:.1f}")

    if args.write_completions:
        cmd = [sys.executable, str(ROOT / "benches" / "gsm8k_eval" / "bench.py"), "--completions",
               str(args.write_completions), "--quiet"]
        if args.data:
            cmd += ["--data", str(args.data)]
        elif "fixture" in source:
            cmd += ["--data", str(FIXTURE)]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t
        print(f"cli_wall_seconds (fresh process, import + load + grade + print): {wall:.3f} (exit {proc.returncode})")
        print(proc.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
