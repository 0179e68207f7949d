"""The cold Coq checker: one ``coqc`` process per check, under :func:`rrma.contain.spawn.spawn`
(wall clock and memory enforced from outside), on a file written in a fresh harness-owned scratch.

Invariant: accepted only with no error, a closed proof at ``Qed``, the guard passed, ``Print
Assumptions`` closed under the allowed axioms and the target's own module not loaded; every other
outcome (timeout, crash, a missing section of the output) is a rejection.
"""

from __future__ import annotations

import re
import secrets
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle.coq import modules
from oracle.coq.modules import loaded_libraries, module_refusal
from oracle.coq.reference import guard_command, reference_declaration
from oracle.coq.replies import (
    COQ_NAME,
    axiom_verdict,
    error_summary,
    located_constant,
    parse_assumptions,
    parse_goals,
)
from oracle.coq.sandboxing import CoqSandbox, find_coq_binary
from oracle.coq.screen import KERNEL_REFUSED, ProofRejected, ProofScript, rejected, screen_proof
from oracle.proof_common import Prover, TheoremTask, Verdict
from oracle.strip_coq import open_scopes, proof_using_suggestions, unsealed_context
from rrma.contain.spawn import ProcessResult, spawn
from rrma.trial import Budget, Status

SUGGEST_PROOF_USING = "Set Suggest Proof Using.\n"
_COQC_ERROR = re.compile(r'File "[^"]*", line (\d+), characters (-?\d+)-(-?\d+):\n(Error.*?)(?=\nFile "|\Z)', re.S)


def closing_scopes(task: TheoremTask) -> str:
    """``End X.`` for each Section and Module the context leaves open, innermost first: ``coqc`` accepts
    the file only with them closed (and a module closed early only without its signature constraint:
    the checker's text has :func:`oracle.strip_coq.unsealed_context`)."""
    return "".join(f"End {scope}.\n" for scope in reversed(open_scopes(task.context)))


@dataclass
class CoqChecker:
    """Cold checker: one ``coqc`` process per check, under :func:`rrma.contain.spawn.spawn`."""

    coqc: str = "coqc"
    allowed_axioms: tuple[str, ...] = ()
    memory_mb: int = 2048
    coq_args: tuple[str, ...] = ()  # load paths for the user's libraries, e.g. ("-Q", "/src", "Lib")
    sandbox: CoqSandbox = field(default_factory=CoqSandbox)  # what each coqc process sees
    prover: Prover = field(default="coq", init=False, repr=False)

    def __post_init__(self) -> None:
        self.coqc = find_coq_binary(self.coqc)

    def build_script(self, task: TheoremTask, script: ProofScript, token: str) -> tuple[str, int, int, int]:
        """(file text, first line of the proof body, line of Qed, first line of the guard).

        The reference constant (the statement restated under a random name) is declared right
        after the context, before the agent's text runs, so nothing the proof injects can change
        how it parses; after ``Qed`` the guard requires the checked constant's type to be
        syntactically the reference's type (``constr_eq``).
        """
        reference = f"rrma_ref_{token}"
        head = (unsealed_context(task.context) + reference_declaration(task, reference) + task.statement + "\n"
                + script.opener + "\n")
        body_line = head.count("\n") + 1
        text = head + script.body + "\n"
        qed_line = text.count("\n") + 3  # Locate, Show, then Qed
        text += f"Locate rrma_goals_{token}.\nShow.\nQed.\n"
        guard_line = text.count("\n") + 2
        text += f"Locate rrma_guard_{token}.\n" + guard_command(task.name, reference)
        text += f"Locate rrma_assumptions_{token}.\nPrint Assumptions {task.name}.\n"
        text += f"Locate rrma_libraries_{token}.\nPrint Libraries.\n"
        return text + closing_scopes(task), body_line, qed_line, guard_line

    def _compile(self, task: TheoremTask, text: str, *, timeout_s: float, max_output_bytes: int) -> ProcessResult:
        """``coqc`` on ``text`` as ``Check.v`` (or at its module's place, below) in a fresh harness-owned scratch
        (the file is written before any process can touch it), under the sandbox and the budget; the spawn's result."""
        with tempfile.TemporaryDirectory(prefix="rrma-coq-") as tmp:
            # coqc names the module by the file's place in a load path (it has no `-top`): the file of module
            # `Coq.Classes.CMorphisms` is `Classes/CMorphisms.v` under `-Q . Coq`, as the warm checker's
            # session runs as that module (oracle.coq.modules.session_args)
            parts = task.module.split(".") if modules.TOP_MODULE and task.module else []
            where = Path(*parts[1:-1], f"{parts[-1]}.v") if len(parts) > 1 else Path("Check.v")
            load = ["-Q", ".", parts[0]] if len(parts) > 1 else []
            Path(tmp, where.parent).mkdir(parents=True, exist_ok=True)
            Path(tmp, where).write_text(text, encoding="utf-8")
            return spawn([self.coqc, "-q", *(["-noinit"] if task.noinit else []), *self.coq_args, *load, str(where)],
                         cwd=tmp, budget=Budget(seconds=timeout_s, memory_mb=self.memory_mb,
                                                max_output_bytes=max_output_bytes),
                         guard=self.sandbox.policy(tmp))

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        started = time.monotonic()
        try:
            script = screen_proof(proof)
        except ProofRejected as exc:
            return rejected(exc, started)
        token = secrets.token_hex(8)
        if not reference_declaration(task, f"rrma_ref_{token}"):
            return Verdict(False, f"the oracle cannot restate the statement of {task.name}",
                           seconds=time.monotonic() - started)
        text, body_line, qed_line, guard_line = self.build_script(task, script, token)
        result = self._compile(task, text, timeout_s=timeout_s, max_output_bytes=4 * 2**20)
        seconds = time.monotonic() - started
        if result.status in (Status.timeout, Status.oom):
            return Verdict(False, f"{result.status.value}: {result.reason}", seconds=seconds)
        if result.returncode is None:  # never started (a required sandbox or cgroup unavailable)
            return Verdict(False, f"coqc did not run: {result.reason}", seconds=seconds)
        out = result.output.replace("\r\n", "\n")
        errors = [(int(m.group(1)), int(m.group(2)), m.group(4).strip()) for m in _COQC_ERROR.finditer(out)]
        context_lines = task.context.count("\n") + 1
        messages: list[dict[str, Any]] = []
        for line, col, msg in errors:
            rel = line - body_line + 1 + script.line_offset
            if body_line <= line < qed_line:
                where = "proof"
            elif line < context_lines:
                where = "context"
            elif line >= guard_line:
                where = "guard"
            elif line < body_line - 1:
                where = "statement"
            else:
                where = "check"
            messages.append({"severity": "error", "line": rel if where == "proof" else 0, "column": col,
                             "text": msg, "source": where})
        if result.status != Status.ok or errors:
            goals = []
            marker = out.find(f"basename rrma_goals_{token}")
            if marker >= 0:
                after = out[out.find("\n", marker) :]
                goals = parse_goals(after.split('File "', 1)[0])
            if not messages:
                return Verdict(False, f"coqc failed: {result.reason}: {out[-300:]}", seconds=seconds)
            first = messages[0]
            if first["source"] == "guard":
                return Verdict(False, f"{task.name} no longer proves its original statement: commands were "
                               "injected around the proof", messages=messages, seconds=seconds, cheat=True)
            if first["source"] == "context":
                reason = f"the context does not compile: {first['text'][:200]}"
            elif first["source"] == "statement":
                reason = f"the statement does not check: {first['text'][:200]}"
            elif "incomplete proof" in first["text"]:
                reason = f"incomplete proof: {len(goals)} goal(s) remain"
            elif first["source"] == "check" and script.skips_a_check:
                return Verdict(False, f"{KERNEL_REFUSED}: {error_summary(first['text'])[:160]}",
                               messages=messages, seconds=seconds, cheat=True)
            elif first["source"] == "proof":
                reason = f"error at proof line {first['line']}: {error_summary(first['text'])}"
            else:
                reason = f"error: {first['text'][:200]}"
            return Verdict(False, reason, messages=messages, goals=goals, seconds=seconds)
        marker = out.find(f"basename rrma_assumptions_{token}")
        if marker < 0:
            return Verdict(False, "checker output has no Print Assumptions section", seconds=seconds)
        libraries_at = out.find(f"basename rrma_libraries_{token}")
        if libraries_at < 0:
            return Verdict(False, "checker output has no Print Libraries section", seconds=seconds)
        tail = out[out.find("\n", marker) : out.rfind("\n", 0, libraries_at) + 1].split('\nFile "', 1)[0]
        refusal = module_refusal(task, loaded_libraries(out[libraries_at:]))
        if refusal:
            return Verdict(False, refusal, seconds=seconds, cheat=True)
        closed, axioms, problem = parse_assumptions(tail)
        ok, reason = axiom_verdict(closed, axioms, problem, self.allowed_axioms)
        return Verdict(ok, reason, seconds=seconds, cheat=not ok, axioms=axioms)

    def locate(self, task: TheoremTask, names: Sequence[str], *, timeout_s: float = 30.0) -> dict[str, str]:
        """``Locate`` each of ``names`` right after ``task``'s context (one ``coqc`` run, a marker before
        each answer): name -> the constant's full name; a name Coq does not place, or any failure, is
        left out (see the warm checker's ``locate``)."""
        names = [n for n in names if COQ_NAME.fullmatch(n)]
        if not names:
            return {}
        token = secrets.token_hex(8)
        text = unsealed_context(task.context) + "\n" + "".join(f"Locate rrma_at_{token}_{i}.\nLocate {n}.\n"
                                                            for i, n in enumerate(names))
        result = self._compile(task, text + closing_scopes(task), timeout_s=timeout_s, max_output_bytes=2**20)
        out = result.output.replace("\r\n", "\n")
        paths: dict[str, str] = {}
        for i, name in enumerate(names):
            at = out.find(f"basename rrma_at_{token}_{i}")
            if at < 0:
                continue
            after = out[out.find("\n", at) + 1:]
            path = located_constant(after.split(f"basename rrma_at_{token}_{i + 1}")[0])
            if path:
                paths[name] = path
        return paths

    def proof_using(self, task: TheoremTask, *, timeout_s: float = 300.0) -> list[tuple[str, str]]:
        """Coq's ``Proof using`` suggestion for each theorem proved in a Section up to and including
        ``task``, with the file's own proofs (one ``coqc`` run of the original under ``Set Suggest Proof
        Using``; :func:`oracle.strip_coq.proof_using_suggestions`). What a failed run printed before it
        stopped is kept; a run that printed none gives []."""
        text = SUGGEST_PROOF_USING + unsealed_context(task.context) + task.statement + "\n" + task.original_proof + "\n"
        result = self._compile(task, text + closing_scopes(task), timeout_s=timeout_s, max_output_bytes=8 * 2**20)
        return proof_using_suggestions(result.output.replace("\r\n", "\n"))

    def close(self) -> None:
        return None
