"""``rrma-tui --headless bench gsm8k-eval``: score a completions file or a model on GSM8K.

Why it exists: the one command that turns completions (or a model) into the numbers the
project reports: pass@1 ± SE, pass@k when there are several samples, the strict-final-line and
trailing-text rates and the failure taxonomy, all under the versioned policy of
:mod:`oracle.gsm8k`. With ``--compare OTHER`` it also compares two runs on the same questions
(paired bootstrap CI of the delta and McNemar's exact p-value).

Completions files are jsonl with ``completion`` plus ``idx`` (0-based line of the split file)
or ``question`` (matched on normalised text). Exit codes: 0 scored, 2 bad input or a missing
requirement (no data, no model, malformed file).

Also runnable on its own: ``python benches/gsm8k_eval/bench.py --completions FILE``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from oracle.gsm8k import ANSWER_FORMATS, MODES
from oracle.gsm8k_data import SPLITS, DataError, Problem, load_split, subset
from oracle.gsm8k_gen import GenerationError
from oracle.gsm8k_scoring import (
    CompletionsError,
    EvalReport,
    grade_pairs,
    match_completions,
    read_completions,
)
from rrma.models import model_path
from rrma.text import SafeConsole


def _add(parser: argparse.ArgumentParser, flag: str, **kwargs: Any) -> None:
    """Add an option unless the CLI already defines it (``--model`` is a common CLI option)."""
    if flag not in parser._option_string_actions:
        parser.add_argument(flag, **kwargs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add(parser, "--completions", type=Path, default=None, help="jsonl: completion + idx or question")
    _add(parser, "--model", default=None, help="model to generate completions with: a directory, or a model of the "
         "store by name (smollm2; rrma-tui models pull)")
    _add(parser, "--data", type=Path, default=None, help="GSM8K jsonl file or directory (default: shared copy)")
    _add(parser, "--split", default="test", choices=SPLITS, help="split to score against (default: test)")
    _add(parser, "--limit", type=int, default=None, help="score only this many questions (deterministic subset)")
    _add(parser, "--subset-seed", type=int, default=None, help="pick the --limit subset by a seeded sample")
    _add(parser, "--mode", default="lenient", choices=MODES, help="grading mode (default: lenient)")
    _add(parser, "--answer-format", default="hash", choices=ANSWER_FORMATS, help="format the prompt asked for")
    _add(parser, "--backend-gen", default="auto", choices=("auto", "transformers", "vllm"),
         help="generation backend for --model")
    _add(parser, "--max-new-tokens", type=int, default=512)
    _add(parser, "--batch-size", type=int, default=16)
    _add(parser, "--download", action="store_true", help="fetch GSM8K if no local copy is found")
    _add(parser, "--compare", type=Path, default=None, help="second completions file: paired comparison")
    _add(parser, "--json", action="store_true", help="print the metrics as JSON instead of tables")


def _problems(args: argparse.Namespace) -> list[Problem]:
    problems = load_split(args.split, args.data, download=bool(getattr(args, "download", False)))
    return subset(problems, args.limit, getattr(args, "subset_seed", None))


def _report_from_file(path: Path, problems: list[Problem], args: argparse.Namespace) -> EvalReport:
    pairs = match_completions(read_completions(path), problems, source=str(path))
    return grade_pairs(pairs, mode=args.mode, answer_format=args.answer_format)


def _report_from_model(model: str, problems: list[Problem], args: argparse.Namespace) -> EvalReport:
    from oracle.gsm8k_gen import GenConfig, make_generator

    config = GenConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                       answer_format=args.answer_format, seed=args.seed or 0)
    gen = make_generator(args.backend_gen, model_path(model), config)  # smollm2: the store's verified copy
    completions = gen.generate([p.question for p in problems])
    gen.close()
    return grade_pairs([(p, c) for p, samples in zip(problems, completions, strict=True) for c in samples],
                       mode=args.mode, answer_format=args.answer_format)


def _print_tables(report: EvalReport, title: str, seconds: float, comparison: dict[str, Any] | None) -> None:
    from rich.table import Table

    console = SafeConsole()  # completions and questions print inert
    p1 = report.pass_at_1()
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("pass@1 ± SE", f"{p1.mean:.4f} ± {p1.se:.4f}")
    for k, est in report.pass_at_k().items():
        table.add_row(f"pass@{k} ± SE", f"{est.mean:.4f} ± {est.se:.4f}")
    table.add_row("questions", str(len(report.questions)))
    table.add_row("completions", str(report.n_completions))
    table.add_row(f"strict final line ({report.answer_format})", f"{report.rate('strict_final_line'):.4f}")
    table.add_row("trailing text", f"{report.rate('trailing_text'):.4f}")
    table.add_row("mode / policy", f"{report.mode} / {report.policy}")
    table.add_row("seconds (total / grading)", f"{seconds:.3f} / {report.seconds:.3f}")
    table.add_row("completions/s (grading)", f"{report.n_completions / max(report.seconds, 1e-9):,.0f}")
    console.print(table)
    failures = Table(title="failure taxonomy")
    failures.add_column("outcome")
    failures.add_column("count", justify="right")
    failures.add_column("share", justify="right")
    total = max(report.n_completions, 1)
    for name, count in report.failures().items():
        failures.add_row(name, str(count), f"{count / total:.3f}")
    console.print(failures)
    if comparison is not None:
        cmp_table = Table(title="paired comparison (compare − completions)")
        cmp_table.add_column("statistic")
        cmp_table.add_column("value", justify="right")
        for key, value in comparison.items():
            cmp_table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
        console.print(cmp_table)


def _compare(a: EvalReport, b: EvalReport) -> dict[str, Any]:
    from rrma.stats import mcnemar, paired_bootstrap

    ia = {q.idx for q in a.questions}
    ib = {q.idx for q in b.questions}
    if ia != ib:
        raise CompletionsError(f"--compare needs both files to cover the same questions ({len(ia)} vs {len(ib)}, "
                               f"{len(ia ^ ib)} differ)")
    fa, fb = a.correct_flags(), b.correct_flags()
    boot = paired_bootstrap(fa, fb, seed=0)
    test = mcnemar(fa, fb)
    return {"delta": boot.delta, "ci95_low": boot.ci_low, "ci95_high": boot.ci_high,
            "bootstrap_p": boot.p_value, "mcnemar_p": test.p_value, "only_first_right": test.only_a,
            "only_second_right": test.only_b}


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    completions = getattr(args, "completions", None)
    model = getattr(args, "model", None)
    if completions is None and model is None:
        print("gsm8k-eval: give --completions FILE (jsonl with idx or question, and completion) or --model DIR",
              file=sys.stderr)
        return 2
    try:
        problems = _problems(args)
        if completions is not None:
            report = _report_from_file(Path(completions), problems, args)
            title = f"gsm8k-eval: {completions}"
        else:
            report = _report_from_model(str(model), problems, args)
            title = f"gsm8k-eval: {model} ({args.backend_gen})"
        comparison = None
        if getattr(args, "compare", None) is not None:
            comparison = _compare(report, _report_from_file(args.compare, problems, args))
    except (DataError, CompletionsError, GenerationError, ValueError) as exc:
        print(f"gsm8k-eval: {exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    if getattr(args, "json", False):
        out = report.metrics()
        out["seconds"] = round(seconds, 4)
        if comparison is not None:
            out["comparison"] = comparison
        print(json.dumps(out, indent=2))
    elif not getattr(args, "quiet", False):
        _print_tables(report, title, seconds, comparison)
    else:
        print("\n".join(report.lines()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
