"""``rrma-tui check {lean,coq} FILE --theorem NAME --proof-file P``: one proof, one JSON verdict.

Why it exists: a person (or a script) can ask the same oracle the benches use whether one proof
of one theorem of any file is accepted, without a run. The file is stripped exactly as the
benches strip it; the proof file holds only the proof body (for Coq, the tactic script, with or
without ``Proof.``/``Qed.``; for Lean, the term after ``:=``, usually ``by ...``).

Prints ``{"accepted": bool, "reason": str, "messages": [...], ...}`` on stdout. Exit codes: 0
accepted, 1 rejected, 2 bad input (missing file, unknown theorem, unparsable file, prover not
installed), with a one-line explanation on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from oracle.proof_common import TheoremTask
from rrma.contracts import OracleError
from rrma.text import without_controls

EXIT_ACCEPTED, EXIT_REJECTED, EXIT_BAD_INPUT = 0, 1, 2


class CheckInputError(ValueError):
    """The command's input is unusable (missing file, unknown theorem, unparsable source)."""


def _strip(prover: str, path: Path) -> list[TheoremTask]:
    if prover == "coq":
        from oracle.strip_coq import CoqSyntaxError, strip_coq_file

        try:
            return strip_coq_file(path)
        except CoqSyntaxError as exc:
            raise CheckInputError(str(exc)) from exc
    if prover == "lean":
        try:
            from oracle.strip_lean import strip_lean_file
        except ImportError as exc:
            raise CheckInputError(f"the Lean stripper is not available: {exc}") from exc
        try:
            return list(strip_lean_file(path))
        except ValueError as exc:
            raise CheckInputError(str(exc)) from exc
    raise CheckInputError(f"unknown prover {prover!r}; expected lean or coq")


def _checker(prover: str, file: Path, contexts: list[str]) -> Any:
    """The prover's checker, its processes sandboxed with ``file`` (every original proof) hidden."""
    if prover == "coq":
        from oracle.coq.cold import CoqChecker
        from oracle.coq.sandboxing import CoqSandbox, checker_hidden

        return CoqChecker(sandbox=CoqSandbox(hidden=checker_hidden([file])))
    try:
        from oracle.lean.checker import LeanChecker
        from oracle.lean.project import DEFAULT_PROJECT
        from oracle.lean_audit import hidden_source_paths
    except ImportError as exc:
        raise CheckInputError(f"the Lean checker is not available: {exc}") from exc
    return LeanChecker(hidden=hidden_source_paths(DEFAULT_PROJECT, [file], contexts))


def check_one(prover: str, file: Path, theorem: str, proof_file: Path, *, timeout_s: float = 60.0) -> dict[str, Any]:
    """The verdict as a JSON-able dict; raises CheckInputError or OracleError for bad input."""
    file, proof_file = Path(file), Path(proof_file)
    if not file.is_file():
        raise CheckInputError(f"{file}: no such file")
    if not proof_file.is_file():
        raise CheckInputError(f"{proof_file}: no such proof file")
    try:
        proof = proof_file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CheckInputError(f"{proof_file}: not UTF-8 text") from exc
    tasks = {t.name: t for t in _strip(prover, file)}
    if theorem not in tasks:
        # a short name is enough when it names one theorem (Lean names carry their namespace)
        matches = [name for name in tasks if name.endswith("." + theorem)]
        if len(matches) == 1:
            theorem = matches[0]
        else:
            known = ", ".join(sorted(tasks)) or "none"
            what = f"is ambiguous ({', '.join(matches)})" if matches else "names no theorem"
            raise CheckInputError(f"{file}: {theorem!r} {what} (theorems: {known})")
    checker = _checker(prover, file, [t.context for t in tasks.values()])
    try:
        verdict = checker.check(tasks[theorem], proof, timeout_s=timeout_s)
        if prover == "coq":  # the axioms the original proof rests on are allowed (oracle.coq.reference.OriginalAxioms)
            from oracle.coq.reference import OriginalAxioms

            verdict = OriginalAxioms().judge(checker, tasks[theorem], verdict, timeout_s=timeout_s)
    finally:
        checker.close()
    return verdict.to_json()


def run_check(prover: str, file: Path, theorem: str, proof_file: Path) -> int:
    """Print the JSON verdict; return 0 accepted, 1 rejected, 2 bad input."""
    try:
        verdict = check_one(prover, file, theorem, proof_file)
    except (CheckInputError, OracleError) as exc:
        print(f"rrma-tui check: {without_controls(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # ASCII JSON: the checker's messages quote the proof, and a terminal must not obey what it holds
    # (ESC, 8-bit CSI, bidi overrides come out as \u escapes)
    print(json.dumps(verdict, indent=2, ensure_ascii=True))
    return EXIT_ACCEPTED if verdict["accepted"] else EXIT_REJECTED
