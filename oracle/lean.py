"""The Lean 4 proof oracle: checks an agent's proof body with real Lean and audits the result.

Why it exists: strip-and-rediscover for Lean. An agent sees a theorem's context and statement and
supplies only the proof body (the term after ``:=``, usually ``by ...``). The oracle rebuilds the
declaration itself (:func:`oracle.strip_lean.assemble`), so the statement is fixed text, and
accepts only if every rule below holds:

1. **Text rules** (no Lean needed, :func:`proof_violation`): comments and literals are blanked
   first (so ``theorem`` in a comment or ``my_theorem_helper`` is fine), then the proof may not
   contain a command or declaration keyword, ``set_option``, ``open``, ``attribute``, ``macro``,
   ``elab``, ``syntax``, a ``#`` command, ``@[...]``, ``sorry``/``admit``/``stop``, meta-programming
   (``run_tac``, ``by_elab``), ``implemented_by``/``extern``/``unsafe``/``partial``,
   ``debug.skipKernelTC`` or native evaluation (``native_decide``, ``decide +native``,
   ``ofReduceBool``, ``trustCompiler``, a ``_native`` name part), and
   no unterminated comment or string (it would swallow the oracle's audit commands).
2. **Lean elaborates it**: no error, no ``sorry`` (the ``sorries`` field or either wording of
   the "declaration uses sorry" warning).
3. **Audit in a separate command** on the resulting environment (so nothing in the proof can
   fake it): ``#check @name`` must print exactly what it prints for the original statement closed
   by ``sorry`` (the statement is unchanged), and ``#print axioms name`` must list only
   :data:`ALLOWED_AXIOMS` (an allow-list: ``sorryAx``, user axioms and every spelling of native
   evaluation fail). A missing audit answer fails closed.

Transport: :class:`ReplTransport` is the seam. :class:`PipeReplTransport` runs ``lake exe repl``
in the Lake project, in its own process group, speaking the REPL's protocol (one JSON request,
then a blank line; the answer is pretty-printed JSON ended by a blank line), with a wall-clock
deadline and a resident-memory cap of the whole group checked from outside. :class:`ReplPool`
keeps warm sessions: each elaborates a theorem's context once (``{"cmd": context}`` -> env id;
a longer context from the same file reuses the longest cached prefix) and answers checks with
``{"cmd": declaration, "env": id}``; a session is replaced after ``max_commands`` commands (REPLs
grow) and killed (process group) after a timeout, a memory overrun or a protocol error.
:class:`RecordedTransport` answers from transcripts, so the whole code path runs in tests
without Lean. Without the REPL, ``lake env lean --json FILE`` is the fallback (one process per
check, under :func:`rrma.contain.spawn.spawn`).

Invariant: :meth:`LeanChecker.check` returns ``accepted=True`` only after rules 1-3 all passed on
answers from Lean itself; every failure path (timeout, crash, unparsable answer) is a rejection.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from oracle.lean_audit import (
    REPLAY_EXE,
    REPLAY_MODES,
    ReplayError,
    answer_paths,
    audit_file_text,
    hidden_source_paths,
    judge_replay,
    lean_guard,
    parse_replay_output,
    replay_binary,
)
from oracle.proof_common import Prover, TheoremTask, Verdict, select_theorems, theorem_views
from oracle.strip_lean import (
    IDENT_RE,
    LeanSyntaxError,
    assemble,
    mask_lean,
    reference_declaration,
    strip_lean_file,
    strip_project,
)
from rrma.contain import files
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import SandboxRequired, group_rss_bytes, signal_own_group, spawn, start
from rrma.contracts import EvalContext, Oracle, OracleError
from rrma.trial import Budget, Outcome, Status

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROJECT = REPO_ROOT / "lean_project"
ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
ELAN_URL = "https://github.com/leanprover/elan"

# ----------------------------------------------------------------------------- text rules

# Whole tokens (not after a '.') that may not appear in a proof body.
FORBIDDEN_TOKENS: dict[str, str] = {
    **{kw: "declaration keyword" for kw in (
        "theorem", "lemma", "def", "abbrev", "instance", "example", "structure", "class", "inductive",
        "coinductive", "axiom", "opaque", "mutual", "deriving", "initialize",
        "builtin_initialize", "simproc", "dsimproc")},
    **{kw: "command keyword" for kw in (
        "namespace", "section", "end", "variable", "universe", "import", "export", "omit", "include",
        "declare_syntax_cat", "add_decl_doc", "register_simp_attr", "private", "protected",
        "noncomputable", "nonrec", "scoped", "local")},
    "set_option": "set_option", "open": "open ... in", "attribute": "attribute",
    "macro": "macro", "macro_rules": "macro", "elab": "elab", "elab_rules": "elab",
    "syntax": "syntax", "notation": "notation", "infix": "notation", "infixl": "notation",
    "infixr": "notation", "prefix": "notation", "postfix": "notation",
    "run_cmd": "meta-programming", "run_tac": "meta-programming", "run_elab": "meta-programming",
    "run_meta": "meta-programming", "by_elab": "meta-programming",
    "sorry": "sorry", "admit": "sorry", "stop": "sorry", "sorryAx": "sorry",
    "implemented_by": "implemented_by", "extern": "extern", "unsafe": "unsafe", "partial": "partial",
    "native_decide": "native evaluation",
    # elaborators that read files: the stripped source (with its original proofs) is a file too
    "include_str": "reads a file", "include_bytes": "reads a file",
    **{kw: "command keyword" for kw in (
        "unif_hint", "binder_predicate", "seal", "unseal", "grind_pattern", "recommended_spelling", "init_quot",
        "declare_simp_like_tactic", "declare_config_elab", "register_option", "register_builtin_option",
        "register_label_attr", "register_tactic_tag", "tactic_extension", "builtin_simproc", "builtin_dsimproc",
        "simproc_decl", "dsimproc_decl", "builtin_simproc_decl", "builtin_dsimproc_decl",
        "gen_injective_theorems", "irreducible_def", "library_note", "module", "prelude", "opaque_def")},
}
# `set_option NAME VALUE in` is allowed for these options only (resource limits, printing, linters)
ALLOWED_OPTIONS = ("maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "synthInstance.maxSize",
                   "maxSteps")
ALLOWED_OPTION_PREFIXES = ("pp.", "linter.")
_OPEN_IN = re.compile(r"\bopen(?P<body>(?:[ \t]+(?:scoped|hiding|renaming|→|[(]|[)]|(?!in\b)[^\W\d][\w.'!?]*))+?)"
                      r"[ \t]+in\b")
_SET_OPTION_IN = re.compile(r"\bset_option[ \t]+(?P<name>[^\W\d][\w.]*)[ \t]+(?P<value>true|false|\d+)[ \t]+in\b")
# Parts of dotted names that are forbidden wherever they appear (``Lean.ofReduceBool``).
FORBIDDEN_NAME_PARTS: dict[str, str] = {
    "ofReduceBool": "native evaluation", "ofReduceNat": "native evaluation",
    "reduceBool": "native evaluation", "reduceNat": "native evaluation",
    "trustCompiler": "native evaluation", "skipKernelTC": "kernel-skipping option",
    "implemented_by": "implemented_by", "sorryAx": "sorry",
}

NATIVE_NAME_PARTS = frozenset({"native", "native_decide", "nativeDecide", "_native"})


@dataclass(frozen=True)
class RuleViolation:
    rule: str  # short rule name ("sorry", "declaration keyword", "native evaluation", ...)
    token: str  # the offending text
    line: int  # 1-based line in the proof body

    @property
    def reason(self) -> str:
        return f"forbidden in proof ({self.rule}): `{self.token}` at proof line {self.line}"


def proof_violation(proof: str) -> RuleViolation | None:
    """The first text rule a proof body breaks, or None. Strict, but blind to comments/strings."""
    if not proof.strip():
        return RuleViolation("empty proof", "", 1)
    bad = next((ch for ch in proof if ch == "\x00" or (ord(ch) < 32 and ch not in "\n\t\r")), None)
    if bad is not None:
        return RuleViolation("control character", repr(bad), proof[: proof.index(bad)].count("\n") + 1)
    try:
        masked = mask_lean(proof)
    except LeanSyntaxError as exc:  # it would swallow the audit commands appended after the proof
        return RuleViolation("unterminated comment or string", str(exc).split(" starting")[0], exc.line or 1)
    # where an interpolated string may hide code in its holes, comments and literals are read too
    code = _unquote_names(proof) if masked.braces_in_strings else masked.code

    def line_at(i: int) -> int:
        return code.count("\n", 0, i) + 1

    # `open Foo in tac` and `set_option maxHeartbeats N in tac` scope a name space or a limit to one
    # tactic or term: allowed (a bare `open` or any other option stays forbidden)
    for m in _OPEN_IN.finditer(code):
        code = code[: m.start()] + " " * (m.end() - m.start()) + code[m.end():]
    for m in _SET_OPTION_IN.finditer(code):
        option = m.group("name")
        if option in ALLOWED_OPTIONS or option.startswith(ALLOWED_OPTION_PREFIXES):
            code = code[: m.start()] + " " * (m.end() - m.start()) + code[m.end():]

    for m in re.finditer(r"@\[|#(?=[^\W\d])", code):
        tok = "@[" if m.group(0) == "@[" else "#" + (IDENT_RE.match(code, m.end()) or m).group(0).lstrip("#")
        return RuleViolation("attribute" if tok == "@[" else "# command", tok, line_at(m.start()))
    for m in IDENT_RE.finditer(code):
        word = m.group(0)
        after_dot = m.start() > 0 and code[m.start() - 1] == "."  # a field access, not a keyword
        if not after_dot and word in FORBIDDEN_TOKENS:
            return RuleViolation(FORBIDDEN_TOKENS[word], word, line_at(m.start()))
        # «quoted» name parts are names like any other: `«sorryAx»` is `sorryAx`
        parts = _name_parts(proof[m.start():m.end()]) if "«" in proof[m.start():m.end()] else word.split(".")
        shown = proof[m.start():m.end()]
        for part in parts:
            if part in FORBIDDEN_NAME_PARTS:
                return RuleViolation(FORBIDDEN_NAME_PARTS[part], shown, line_at(m.start()))
            # native_decide, decide +native, foo._native.native_decide.ax_1_1 (a user lemma that is
            # merely *named* native_fact passes here; the axiom audit judges what it depends on)
            if part in NATIVE_NAME_PARTS or part.startswith("_native"):
                return RuleViolation("native evaluation", shown, line_at(m.start()))
    return None


def _name_parts(name: str) -> list[str]:
    """The components of a dotted name, «quotes» removed (``Lean.«ofReduceBool»`` -> Lean, ofReduceBool)."""
    return [p.strip("«»") for p in re.findall(r"«[^»]*»|[^.«»]+", name)]


def _unquote_names(text: str) -> str:
    """``text`` with each «quoted name» written plainly (same length: the guillemets become ``_``)."""
    return re.sub(r"«([^»\n]*)»", lambda m: "_" + m.group(1) + "_", text)


# ----------------------------------------------------------------------------- REPL answers


@dataclass(frozen=True)
class LeanMessage:
    severity: str  # "error" | "warning" | "info" (lean --json's "information" is normalized)
    line: int  # 1-based, as Lean reports (0 for tactic-mode messages without a position)
    column: int  # 0-based, in code points
    end_line: int | None
    end_column: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "line": self.line, "column": self.column,
                "end_line": self.end_line, "end_column": self.end_column, "text": self.text}


@dataclass(frozen=True)
class LeanSorry:
    goal: str
    proof_state: int | None
    line: int | None
    column: int | None


@dataclass
class ReplResponse:
    """One parsed REPL answer (command, tactic or pickling modes)."""

    env: int | None = None
    messages: list[LeanMessage] = field(default_factory=list)
    sorries: list[LeanSorry] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)  # tactic mode: goals after the tactic
    proof_state: int | None = None
    proof_status: str | None = None
    error: str | None = None  # the REPL's own error ({"message": ...}): unknown env, bad tactic...
    traces: list[str] = field(default_factory=list)
    tactics: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]


class ReplProtocolError(ValueError):
    """An answer that is not what the Lean REPL sends (not an object, wrong field types)."""


def _severity(value: Any) -> str:
    s = str(value).lower()
    return "info" if s in ("information", "info") else s


def _pos(obj: Any) -> tuple[int | None, int | None]:
    if isinstance(obj, dict):
        return obj.get("line"), obj.get("column")
    return None, None


def parse_message(obj: dict[str, Any]) -> LeanMessage:
    """A message object from the REPL or from ``lean --json`` (same pos/endPos/severity/data)."""
    if not isinstance(obj, dict) or "data" not in obj or "severity" not in obj:
        raise ReplProtocolError(f"not a Lean message: {obj!r:.200}")
    line, column = _pos(obj.get("pos"))
    end_line, end_column = _pos(obj.get("endPos"))
    return LeanMessage(_severity(obj["severity"]), int(line or 0), int(column or 0), end_line, end_column,
                       str(obj["data"]))


def parse_repl_response(obj: Any) -> ReplResponse:
    if not isinstance(obj, dict):
        raise ReplProtocolError(f"REPL answer is not a JSON object: {obj!r:.200}")
    resp = ReplResponse(raw=obj)
    if "message" in obj and isinstance(obj["message"], str):
        resp.error = obj["message"]
    env = obj.get("env")
    resp.env = env if isinstance(env, int) else None
    resp.messages = [parse_message(m) for m in obj.get("messages") or []]
    for s in obj.get("sorries") or []:
        line, column = _pos(s.get("pos"))
        resp.sorries.append(LeanSorry(str(s.get("goal", "")), s.get("proofState"), line, column))
    goals = obj.get("goals")
    if isinstance(goals, list):
        resp.goals = [str(g) for g in goals]
    resp.proof_state = obj.get("proofState") if isinstance(obj.get("proofState"), int) else None
    resp.proof_status = obj.get("proofStatus")
    resp.traces = [str(t) for t in obj.get("traces") or []]
    resp.tactics = list(obj.get("tactics") or [])
    return resp


def split_repl_requests(text: str) -> list[dict[str, Any]]:
    """Requests as the REPL reads them: blocks separated by blank lines, a block's lines joined
    *without* newlines (so a raw line break inside a JSON string disappears, as in Lean's REPL)."""
    requests = []
    for block in re.split(r"\n[ \t]*\n", text):
        joined = "".join(block.splitlines())
        if joined.strip():
            requests.append(json.loads(joined))
    return requests


def split_repl_responses(text: str) -> list[dict[str, Any]]:
    """Consecutive pretty-printed JSON answers (separated by blank lines)."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = decoder.raw_decode(text, i)
        out.append(obj)


def read_transcript(in_path: Path, out_path: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pair the requests of ``NAME.in`` with the answers of ``NAME.expected.out``."""
    requests = split_repl_requests(in_path.read_text(encoding="utf-8"))
    responses = split_repl_responses(out_path.read_text(encoding="utf-8"))
    if len(requests) != len(responses):
        raise ReplProtocolError(f"{in_path.name}: {len(requests)} requests but {len(responses)} answers")
    return list(zip(requests, responses, strict=True))


def parse_cli_output(stdout: str) -> tuple[list[LeanMessage], list[str]]:
    """``lean --json`` output: one JSON message per line; other lines are returned separately."""
    messages, other = [], []
    for line in stdout.splitlines():
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError:
            other.append(line)
            continue
        if isinstance(obj, dict) and "severity" in obj and "data" in obj:
            messages.append(parse_message(obj))
        else:
            other.append(line)
    return messages, other


_AXIOMS_RE = re.compile(r"^'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]\s*$", re.S)
_NO_AXIOMS_RE = re.compile(r"^'(?P<name>.+)' does not depend on any axioms\s*$", re.S)
_SORRY_WARNING_RE = re.compile(r"declaration uses (?:`sorry`|'sorry')")


def parse_axioms(text: str) -> list[str] | None:
    """The axiom list of a ``#print axioms`` answer, or None if ``text`` is not one."""
    if _NO_AXIOMS_RE.match(text.strip()):
        return []
    m = _AXIOMS_RE.match(text.strip())
    if m is None:
        return None
    return [a.strip() for a in re.split(r"[,\s]+", m.group("axioms")) if a.strip()]


def is_sorry_warning(msg: LeanMessage) -> bool:
    return msg.severity == "warning" and bool(_SORRY_WARNING_RE.search(msg.text))


def goals_from_messages(messages: Iterable[LeanMessage]) -> list[str]:
    """Remaining goals quoted by "unsolved goals" errors (one goal per blank-line-separated block)."""
    goals: list[str] = []
    for m in messages:
        if m.severity == "error" and m.text.startswith("unsolved goals"):
            body = m.text.split("\n", 1)[1] if "\n" in m.text else ""
            goals.extend(g.strip("\n") for g in re.split(r"\n\n+", body) if g.strip())
    return goals


# ----------------------------------------------------------------------------- transports


class ReplError(RuntimeError):
    """The REPL process failed: exited, answered garbage, or the transcript ran out."""


class ReplTimeout(ReplError):
    """No answer within the deadline (the process group has been killed)."""


class ReplMemoryExceeded(ReplError):
    """The REPL's process group went over its resident-memory cap (it has been killed)."""


class TranscriptMismatch(ReplError):
    """A recorded transport was asked something its transcript does not hold."""


class ReplTransport(Protocol):
    """One REPL process (or a recording of one): send a request, get its answer."""

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...

    def close(self) -> None:
        """End the REPL; may raise ReplError or OSError (a REPL already gone), nothing else."""
        ...


def _canonical(request: dict[str, Any]) -> str:
    return json.dumps(request, sort_keys=True, ensure_ascii=False)


class RecordedTransport:
    """Answers from a transcript: each recorded request, matched exactly, yields its answer.

    A request that was recorded several times yields its answers in order. Anything else raises
    :class:`TranscriptMismatch` naming the request, so a test fails when the oracle sends
    something its fixture does not document.
    """

    def __init__(self, pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        self._answers: dict[str, deque[dict[str, Any]]] = {}
        for request, response in pairs:
            self._answers.setdefault(_canonical(request), deque()).append(response)
        self.sent: list[dict[str, Any]] = []
        self.closed = False

    @classmethod
    def from_files(cls, *stems: Path) -> RecordedTransport:
        pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for stem in stems:
            pairs.extend(read_transcript(stem.with_suffix(".in"), stem.with_suffix(".expected.out")))
        return cls(pairs)

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.closed:
            raise ReplError("recorded transport is closed")
        self.sent.append(request)
        queue = self._answers.get(_canonical(request))
        if not queue:
            raise TranscriptMismatch(f"no recorded answer for request {_canonical(request)[:400]}")
        return queue.popleft()

    def close(self) -> None:
        self.closed = True


class PipeReplTransport:
    """A real REPL process (``lake exe repl`` by default) driven over pipes.

    The process runs in its own session (process group); a timeout or memory overrun kills the
    whole group (SIGTERM, then SIGKILL) and raises. stderr goes to a temporary file so a chatty
    REPL can never block on a full pipe; its tail is quoted when the process dies.
    """

    def __init__(self, argv: Sequence[str] = ("lake", "exe", "repl"), *, cwd: Path | str = DEFAULT_PROJECT,
                 env: dict[str, str] | None = None, memory_mb: int | None = 4096,
                 poll_s: float = 0.05, guard: Policy | None = None) -> None:
        # in the sandbox (``guard``) the REPL cannot read the stripped sources (their original proofs),
        # write outside its project's .lake, nor reach the network. Long-lived, so not under spawn:
        # rrma.contain.spawn.start contains it the same way (mode auto runs it bare where bubblewrap cannot run,
        # require refuses); its environment holds no credential
        self.argv = list(argv)
        self.memory_mb = memory_mb
        self.poll_s = poll_s
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = start(
                self.argv, cwd=cwd, guard=guard, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, start_new_session=True, bufsize=0,
            )
        except SandboxRequired as exc:
            self._stderr.close()
            raise ReplError(f"the Lean REPL's {exc}") from exc
        except OSError as exc:
            self._stderr.close()
            raise ReplError(f"cannot start {' '.join(self.argv)} in {cwd}: {exc}") from exc
        self.pgid = self.proc.pid
        self._buffer = b""
        self.noise: list[str] = []  # non-JSON stdout lines (build logs), for diagnostics
        self.closed = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode("utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def send(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if self.closed:
            raise ReplError("REPL transport is closed")
        payload = (json.dumps(request, ensure_ascii=False) + "\n\n").encode("utf-8")
        deadline = time.monotonic() + timeout_s
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            code = self.proc.poll()
            self.close()
            raise ReplError(f"REPL is not running (exit code {code}): {self._stderr_tail() or exc}") from exc
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        next_mem_check = 0.0
        while True:
            answer = self._take_answer()
            if answer is not None:
                return answer
            now = time.monotonic()
            if now >= deadline:
                self.close()
                raise ReplTimeout(f"no answer from the REPL within {timeout_s:.3g} s")
            if self.memory_mb is not None and now >= next_mem_check:
                next_mem_check = now + 0.25
                rss = group_rss_bytes(self.pgid) / 2**20
                if rss > self.memory_mb:
                    self.close()
                    raise ReplMemoryExceeded(f"REPL used {rss:.0f} MiB, over its {self.memory_mb} MiB limit")
            ready, _, _ = select.select([fd], [], [], min(self.poll_s, max(0.0, deadline - now)))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.proc.wait(timeout=5)
                    self.close()
                    raise ReplError(f"REPL exited with code {code}: {self._stderr_tail()}")
                self._buffer += chunk

    def _take_answer(self) -> dict[str, Any] | None:
        """Pop one complete answer (JSON followed by a blank line) from the buffer, if there is one.

        Lines before the answer's opening ``{`` (e.g. lake's build log when ``lake exe repl``
        first builds the REPL) are kept in :attr:`noise`, not parsed.
        """
        start = 0
        while True:
            idx = self._buffer.find(b"\n\n", start)
            if idx < 0:
                return None
            lines = self._buffer[:idx].decode("utf-8", errors="replace").split("\n")
            first = next((k for k, line in enumerate(lines) if line.startswith("{")), None)
            if first is None:  # only noise so far
                self.noise.extend(line for line in lines if line.strip())
                self._buffer = self._buffer[idx + 2:]
                start = 0
                continue
            try:
                obj = json.loads("\n".join(lines[first:]))
            except json.JSONDecodeError:
                start = idx + 2  # a blank line cannot occur inside the JSON; wait for more
                continue
            self.noise.extend(line for line in lines[:first] if line.strip())
            self._buffer = self._buffer[idx + 2:]
            if not isinstance(obj, dict):
                raise ReplProtocolError(f"REPL answered a non-object: {lines[first][:200]}")
            return obj

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        for sig, wait_s in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
            signal_own_group(self.proc, self.pgid, sig)
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        signal_own_group(self.proc, self.pgid, signal.SIGKILL)  # leftovers, if the leader exited first
        with contextlib.suppress(OSError):
            self._stderr.close()


# ----------------------------------------------------------------------------- sessions and pool


class ContextError(Exception):
    """The theorem's context (or its statement closed by sorry) does not elaborate."""


@dataclass
class _Header:
    env: int
    source: str


class ReplSession:
    """One warm REPL: cached context environments and reference signatures, a command count."""

    def __init__(self, transport: ReplTransport) -> None:
        self.transport = transport
        self.commands = 0
        self.headers: dict[str, _Header] = {}  # context text -> env id
        self.signatures: dict[tuple[int, str, str], str] = {}  # (header env, statement, name) -> #check

    def command(self, cmd: str, env: int | None, timeout_s: float) -> ReplResponse:
        request: dict[str, Any] = {"cmd": cmd}
        if env is not None:
            request["env"] = env
        self.commands += 1
        return parse_repl_response(self.transport.send(request, timeout_s))

    def header_env(self, context: str, source: str, timeout_s: float) -> int:
        """The env id after ``context``: cached, or built on the longest cached prefix of it."""
        cached = self.headers.get(context)
        if cached is not None:
            return cached.env
        base: tuple[str, _Header] | None = None
        for text, header in self.headers.items():
            if (header.source == source and text and context.startswith(text) and text.endswith("\n")
                    and (base is None or len(text) > len(base[0]))):
                base = (text, header)
        if base is not None:
            resp = self.command(context[len(base[0]):], base[1].env, timeout_s)
        else:
            resp = self.command(context, None, timeout_s)
        if resp.error is not None:
            raise ContextError(f"the REPL refused the context: {resp.error}")
        if resp.errors or resp.env is None:
            first = resp.errors[0] if resp.errors else None
            where = f" (context line {first.line})" if first and base is None else ""
            raise ContextError(f"the context does not elaborate{where}: {first.text if first else 'no env id'}")
        self.headers[context] = _Header(resp.env, source)
        return resp.env


class ReplPool:
    """Up to ``size`` warm sessions, each replaced after ``max_commands`` commands or on failure."""

    def __init__(self, factory: Callable[[], ReplTransport], *, size: int = 1, max_commands: int = 200) -> None:
        if size < 1:
            raise ValueError("REPL pool size must be at least 1")
        self.factory = factory
        self.size = size
        self.max_commands = max_commands
        self._idle: list[ReplSession] = []
        self._live = 0
        self._cond = threading.Condition()
        self.started = 0  # REPL processes started (restarts included)
        self.discarded = 0  # sessions killed for a timeout, overrun, crash or the command cap
        self._closed = False

    def acquire(self, timeout_s: float | None = None) -> ReplSession:
        with self._cond:
            end = None if timeout_s is None else time.monotonic() + timeout_s
            while not self._idle and self._live >= self.size:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise ReplTimeout("no REPL session became free in time")
                self._cond.wait(left)
            if self._closed:
                raise ReplError("REPL pool is closed")
            if self._idle:
                return self._idle.pop()
            self._live += 1
        try:
            transport = self.factory()
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self.started += 1
        return ReplSession(transport)

    def release(self, session: ReplSession, *, broken: bool = False) -> None:
        retire = broken or session.commands >= self.max_commands or self._closed
        try:
            if retire:
                # a retired REPL is dropped whether or not it closes cleanly: one that is already gone
                # (OSError) or refuses (ReplError) is no reason to fail the caller; any other error is a
                # bug in the transport and propagates, after the slot is given back
                with contextlib.suppress(ReplError, OSError):
                    session.transport.close()
        finally:
            with self._cond:
                if retire:
                    self._live -= 1
                    self.discarded += 1
                else:
                    self._idle.append(session)
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for s in idle:
            with contextlib.suppress(ReplError, OSError):  # as in release: the pool is closing either way
                s.transport.close()


# ----------------------------------------------------------------------------- the verdict


def toolchain_of(project_dir: Path | str) -> str:
    path = Path(project_dir) / "lean-toolchain"
    try:
        return path.read_text(encoding="utf-8").strip() or "(empty lean-toolchain)"
    except OSError:
        return f"(no lean-toolchain file in {project_dir})"


class LeanNotInstalled(OracleError):
    """Lean 4 (``lake``/``lean``) is not on PATH; the message says how to install it."""

    def __init__(self, project_dir: Path | str = DEFAULT_PROJECT, missing: Sequence[str] = ("lake", "lean")) -> None:
        self.project_dir = Path(project_dir)
        self.toolchain = toolchain_of(project_dir)
        super().__init__(
            f"Lean 4 is not installed here: {', '.join(f'`{m}`' for m in missing)} not found on PATH. "
            f"Install elan, the Lean toolchain manager ({ELAN_URL}: "
            "`curl https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh -sSf | sh`), "
            f"then run `lake build` in {self.project_dir}: elan installs the toolchain pinned in "
            f"{self.project_dir / 'lean-toolchain'} ({self.toolchain}) and lake builds the REPL."
        )


def lean_missing() -> list[str]:
    """The Lean executables not on PATH (empty when Lean looks usable)."""
    return [exe for exe in ("lake", "lean") if shutil.which(exe) is None]


@dataclass
class _Audit:
    signature: str | None
    axioms: list[str] | None
    errors: list[LeanMessage]


def _proof_origin(statement: str, declaration: str) -> tuple[int, int]:
    """(line, column) in ``declaration`` where the proof starts (1-based line, 0-based column)."""
    prefix_len = len(statement.rstrip()) + 1
    head = declaration[:prefix_len]
    line = head.count("\n") + 1
    column = prefix_len - (head.rfind("\n") + 1)
    return line, column


def _located(messages: Iterable[LeanMessage], origin: tuple[int, int], line_offset: int = 0) -> list[dict[str, Any]]:
    """Messages as JSON, each with its position inside the proof body when it lies there."""
    out = []
    for m in messages:
        d = m.to_json()
        line = m.line - line_offset
        d["line"] = line
        if m.end_line is not None:
            d["end_line"] = m.end_line - line_offset
        if line > origin[0] or (line == origin[0] and m.column >= origin[1]):
            d["proof_line"] = line - origin[0] + 1
            d["proof_column"] = m.column - origin[1] if line == origin[0] else m.column
        out.append(d)
    return out


def verdict_from_messages(task: TheoremTask, *, messages: list[LeanMessage], sorries: Sequence[LeanSorry] = (),
          audit: _Audit | None, expected_signature: str | None, origin: tuple[int, int],
          allowed_axioms: frozenset[str] = ALLOWED_AXIOMS, line_offset: int = 0,
          started: float | None = None) -> Verdict:
    """Turn Lean's answers about one declaration (and its audit) into a verdict (rules 2 and 3)."""
    seconds = 0.0 if started is None else time.monotonic() - started
    located = _located(messages, origin, line_offset)
    errors = [m for m in messages if m.severity == "error"]
    goals = goals_from_messages(errors) + [s.goal for s in sorries]
    if errors:
        first = errors[0]
        text = first.text.splitlines()[0] if first.text else "error"
        return Verdict(False, f"does not check: {text}", located, goals, seconds)
    if sorries or any(is_sorry_warning(m) for m in messages):
        return Verdict(False, "uses sorry", located, goals, seconds, cheat=True)
    if audit is None:
        return Verdict(False, "not audited: no answer to #check / #print axioms", located, goals, seconds)
    if audit.errors:
        return Verdict(False, f"audit failed: {audit.errors[0].text.splitlines()[0]}", located, goals, seconds)
    if audit.signature is None or expected_signature is None:
        return Verdict(False, "not audited: #check printed nothing", located, goals, seconds)
    if audit.signature != expected_signature:
        return Verdict(False, f"statement changed: Lean sees `{audit.signature}`, expected `{expected_signature}`",
                       located, goals, seconds, cheat=True)
    if audit.axioms is None:
        return Verdict(False, "not audited: no #print axioms answer", located, goals, seconds)
    if "sorryAx" in audit.axioms:
        return Verdict(False, "uses sorry (sorryAx among its axioms)", located, goals, seconds, cheat=True,
                       axioms=audit.axioms)
    bad = [a for a in audit.axioms if a not in allowed_axioms]
    if bad:
        native = [a for a in bad if "_native" in a or a.endswith(("ofReduceBool", "ofReduceNat", "trustCompiler"))]
        kind = "native evaluation" if native else "axiom"
        return Verdict(False, f"{kind} not allowed: {', '.join(bad)}", located, goals, seconds, cheat=True,
                       axioms=audit.axioms)
    return Verdict(True, "accepted", located, [], seconds, axioms=audit.axioms)


def _audit_from(messages: list[LeanMessage], check_line: int, axioms_line: int) -> _Audit:
    signature = next((m.text for m in messages if m.severity == "info" and m.line == check_line), None)
    axiom_msg = next((m.text for m in messages if m.severity == "info" and m.line == axioms_line), None)
    return _Audit(signature, None if axiom_msg is None else parse_axioms(axiom_msg),
                  [m for m in messages if m.severity == "error"])


def audit_commands(name: str) -> str:
    """The audit, run as its own command on the environment the proof produced (lines 1 and 2)."""
    return f"#check @{name}\n#print axioms {name}"


# ----------------------------------------------------------------------------- the checker

CliRunner = Callable[[list[str], Path, float, int], tuple[str, int | None, str]]
"""(argv, cwd, timeout_s, memory_mb) -> (status, returncode, stdout): how a CLI check runs."""


def _run_cli(argv: list[str], cwd: Path, timeout_s: float, memory_mb: int,
             guard: Policy | None = None) -> tuple[str, int | None, str]:
    try:
        result = spawn(argv, cwd=cwd, budget=Budget(seconds=timeout_s, memory_mb=memory_mb), guard=guard)
    except FileNotFoundError as exc:
        raise LeanNotInstalled(cwd, [argv[0]]) from exc
    return str(result.status), result.returncode, result.output


class LeanChecker:
    """Check proof bodies of stripped theorems with Lean 4 (REPL pool, or ``lean --json``).

    ``mode``: ``"repl"``, ``"cli"`` or ``"auto"`` (REPL, falling back to the CLI when the REPL
    cannot start). ``transport_factory`` replaces the real REPL (tests); ``cli_runner`` replaces
    :func:`rrma.contain.spawn.spawn` for the CLI path. Limits: in REPL mode ``timeout_s`` of
    :meth:`check` covers the proof (declaration and audit); a theorem's context is elaborated
    once per session under ``header_timeout_s``. In CLI mode every check elaborates the whole
    file, so ``timeout_s`` covers it all. ``memory_mb`` caps the REPL's (or lean's) process group.
    """

    prover: Prover = "lean"

    def __init__(self, project_dir: Path | str = DEFAULT_PROJECT, *, mode: str = "auto", pool_size: int = 1,
                 max_commands: int = 200, memory_mb: int = 4096, header_timeout_s: float = 600.0,
                 transport_factory: Callable[[], ReplTransport] | None = None,
                 cli_runner: CliRunner | None = None,
                 allowed_axioms: Iterable[str] = ALLOWED_AXIOMS, replay: str = "auto",
                 replay_exe: Path | str | None = None, hidden: Sequence[Path] = ()) -> None:
        if mode not in ("auto", "repl", "cli"):
            raise ValueError(f"Lean checker mode must be auto, repl or cli, not {mode!r}")
        if replay not in REPLAY_MODES:
            raise ValueError(f"Lean checker replay must be one of {', '.join(REPLAY_MODES)}, not {replay!r}")
        self.replay = replay
        self.replay_exe = Path(replay_exe) if replay_exe else replay_binary(project_dir)
        self.hidden = tuple(Path(h) for h in hidden)
        self._replay_refs: dict[tuple[str, str, str], Path] = {}
        self._replay_dir: tempfile.TemporaryDirectory[str] | None = None
        self._replay_count = 0
        self.project_dir = Path(project_dir)
        self.mode = mode
        self.memory_mb = memory_mb
        self.header_timeout_s = header_timeout_s
        self.allowed_axioms = frozenset(allowed_axioms)
        self._injected = transport_factory is not None or cli_runner is not None
        factory = transport_factory or (lambda: PipeReplTransport(cwd=self.project_dir, memory_mb=memory_mb,
                                                                  guard=lean_guard(self.project_dir, self.hidden)))
        self.pool = ReplPool(factory, size=pool_size, max_commands=max_commands)
        self._custom_runner = cli_runner
        self._cli_signatures: dict[tuple[str, str, str], str] = {}
        self._repl_broken: str | None = None
        self._lock = threading.Lock()

    # -- setup

    def ensure_available(self) -> None:
        """Raise :class:`LeanNotInstalled` (elan + toolchain hint) when Lean is not on PATH."""
        if self._injected:
            return
        missing = lean_missing()
        if missing:
            raise LeanNotInstalled(self.project_dir, missing)

    def build(self, timeout_s: float = 1800.0) -> None:
        """``lake build`` the project (theorems and the REPL); raises OracleError with the tail."""
        self.ensure_available()
        # `lake exe repl` with stdin at EOF builds the REPL (a dependency) and exits at once
        for argv in (["lake", "build"], ["lake", "exe", "repl"]):
            status, code, out = _run_cli(argv, self.project_dir, timeout_s, max(self.memory_mb, 8192))
            if status != "ok" or code != 0:
                raise OracleError(f"`{' '.join(argv)}` failed in {self.project_dir} ({status}, exit {code}):\n"
                                  + "\n".join(out.splitlines()[-30:]))

    # -- checking

    def check(self, task: TheoremTask, proof: str, *, timeout_s: float = 30.0) -> Verdict:
        started = time.monotonic()
        violation = proof_violation(proof)
        if violation is not None:
            return Verdict(False, violation.reason, seconds=time.monotonic() - started, cheat=True)
        self.ensure_available()
        verdict: Verdict | None = None
        if self.mode == "repl" or (self.mode == "auto" and self._repl_broken is None):
            try:
                verdict = self._check_repl(task, proof, timeout_s, started)
            except _ReplUnavailable as exc:
                if self.mode == "repl":
                    return Verdict(False, f"lean repl unavailable: {exc}", seconds=time.monotonic() - started)
                with self._lock:
                    self._repl_broken = str(exc)  # auto mode: the CLI from now on
        if verdict is None:
            verdict = self._check_cli(task, proof, timeout_s, started)
        if verdict.accepted and self._replay_enabled():
            return self._replayed(task, proof, verdict, timeout_s, started)
        return verdict

    # -- the kernel replay (oracle/lean_audit.py)

    def cli_runner(self, argv: list[str], cwd: Path, timeout_s: float, memory_mb: int,
                   writable: Sequence[Path] = (), readable: Sequence[Path] = ()) -> tuple[str, int | None, str]:
        """Run one Lean command: the injected runner (tests), or under spawn in the sandbox that
        hides the stripped sources (``writable``: where it writes, e.g. its scratch directory;
        ``readable``: what else it reads, e.g. the compiled modules it replays)."""
        if self._custom_runner is not None:
            return self._custom_runner(argv, cwd, timeout_s, memory_mb)
        guard = lean_guard(self.project_dir, self.hidden, writable)
        if guard is not None and readable:
            guard = guard.protecting(*readable)
        return _run_cli(argv, cwd, timeout_s, memory_mb, guard=guard)

    def _replay_enabled(self) -> bool:
        return self.replay == "require" or (self.replay == "auto" and self.replay_exe.exists())

    def _compile(self, text: str, workdir: Path, stem: str, timeout_s: float) -> tuple[Path | None, str]:
        """Compile ``text`` to ``workdir/STEM.olean``. ``workdir`` is a fresh harness-owned folder that
        only this one Lean process may write: the harness writes the source first, never through a link."""
        files.write_bytes(workdir, f"{stem}.lean", text.encode("utf-8"))
        source = workdir / f"{stem}.lean"
        olean = workdir / f"{stem}.olean"
        status, code, out = self.cli_runner(["lake", "env", "lean", "-o", str(olean), str(source)],
                                            self.project_dir, timeout_s, self.memory_mb, (workdir,))
        if status != "ok" or code != 0 or not olean.exists():
            tail = " ".join(out.split())[-200:]
            return None, f"{status}, exit {code}: {tail}"
        return olean, ""

    def _replayed(self, task: TheoremTask, proof: str, verdict: Verdict, timeout_s: float,
                  started: float) -> Verdict:
        """Compile the checked file and the reference apart, replay both through the kernel in a
        third process (``rrma_replay``), and keep ``verdict`` only if the replay agrees."""
        def done(ok: bool, reason: str, cheat: bool = False) -> Verdict:
            return Verdict(ok, reason, verdict.messages, verdict.goals, time.monotonic() - started, cheat,
                           verdict.axioms if ok else [])

        if not self.replay_exe.exists():
            return done(False, f"not audited: the kernel replay tool is not built ({self.replay_exe}); run "
                               f"`lake build` in {self.project_dir}")
        with self._lock:
            if self._replay_dir is None:
                self._replay_dir = tempfile.TemporaryDirectory(prefix="rrma-lean-replay-")
        # the replay's scratch (harness-owned): refs/<digest>/ per reference and checks/<digest>-<n>/
        # per checked proof, each a fresh folder only its own compilation may write, so no Lean process
        # can plant a link where the harness writes next, nor touch a cached reference
        root = Path(self._replay_dir.name)
        limit = max(60.0, timeout_s * 4)  # whole-file compilations, outside the proof's own budget
        context = task.context if not task.context or task.context.endswith("\n") else task.context + "\n"
        key = (context, task.statement, task.name)
        reference = self._replay_refs.get(key)
        if reference is None:
            digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
            refdir = files.fresh_dir(root / "refs" / digest)
            reference, why = self._compile(context + reference_declaration(task.statement) + "\n", refdir,
                                           f"RrmaRef_{digest}", limit)
            if reference is None:
                return done(False, f"not audited: the reference did not compile for the kernel replay ({why})")
            self._replay_refs[key] = reference
        digest = hashlib.sha256(f"{key}\0{proof}".encode()).hexdigest()[:16]
        with self._lock:
            self._replay_count += 1
            checkdir = files.fresh_dir(root / "checks" / f"{digest}-{self._replay_count}")
        try:
            checked, why = self._compile(context + assemble(task.statement, proof) + "\n", checkdir,
                                         f"RrmaCheck_{digest}", limit)
            if checked is None:
                return done(False, f"not audited: the proof did not compile apart for the kernel replay ({why})")
            # the replay tool writes nothing: it reads both modules
            status, _code, out = self.cli_runner(["lake", "exe", REPLAY_EXE, str(checked), str(reference), task.name],
                                                 self.project_dir, limit, self.memory_mb, (),
                                                 (checkdir, reference.parent))
        finally:
            files.remove_tree(checkdir)  # any depth, never follows a link, never raises
        if status not in ("ok", "crash"):
            return done(False, f"not audited: the kernel replay ran over its limit ({status})")
        try:
            report = parse_replay_output(out)
        except ReplayError as exc:
            return done(False, f"not audited: {exc}")
        ok, reason, cheat = judge_replay(report, task.name, self.allowed_axioms)
        return done(ok, reason, cheat)

    def _check_repl(self, task: TheoremTask, proof: str, timeout_s: float, started: float) -> Verdict:
        try:
            session = self.pool.acquire()
        except ReplError as exc:
            raise _ReplUnavailable(str(exc)) from exc
        broken = False
        try:
            return self._check_in_session(session, task, proof, timeout_s, started)
        except ReplTimeout as exc:
            broken = True
            return Verdict(False, f"timeout: {exc} (REPL killed)", seconds=time.monotonic() - started)
        except ReplMemoryExceeded as exc:
            broken = True
            return Verdict(False, f"memory limit exceeded: {exc}", seconds=time.monotonic() - started)
        except ContextError as exc:
            return Verdict(False, f"context error: {exc}", seconds=time.monotonic() - started)
        except (ReplError, ReplProtocolError) as exc:
            broken = True
            if session.commands <= 1 and not isinstance(exc, TranscriptMismatch):
                raise _ReplUnavailable(str(exc)) from exc
            return Verdict(False, f"lean repl failed: {exc}", seconds=time.monotonic() - started)
        finally:
            self.pool.release(session, broken=broken)

    def _check_in_session(self, session: ReplSession, task: TheoremTask, proof: str, timeout_s: float,
                          started: float) -> Verdict:
        # The context and the reference statement are elaborated once per session under their own
        # (longer) limit: a heavy import must not eat the proof's budget or kill REPLs in a loop.
        header = session.header_env(task.context, task.source_file, self.header_timeout_s)
        key = (header, task.statement, task.name)
        expected = session.signatures.get(key)
        if expected is None:
            ref = reference_declaration(task.statement)
            resp = session.command(f"{ref}\n\n#check @{task.name}", header, self.header_timeout_s)
            check_line = ref.count("\n") + 3
            if resp.error is not None or resp.errors:
                why = resp.error or resp.errors[0].text
                raise ContextError(f"the statement of {task.name} does not elaborate: {why}")
            expected = next((m.text for m in resp.messages if m.severity == "info" and m.line == check_line), None)
            if expected is None:
                raise ContextError(f"#check @{task.name} printed nothing after the statement")
            session.signatures[key] = expected
        proof_started = time.monotonic()

        def left() -> float:  # the proof's own budget: its declaration plus the audit
            return max(0.5, timeout_s - (time.monotonic() - proof_started))

        declaration = assemble(task.statement, proof)
        origin = _proof_origin(task.statement, declaration)
        resp = session.command(declaration, header, left())
        if resp.error is not None:
            return Verdict(False, f"lean repl error: {resp.error}", seconds=time.monotonic() - started)
        audit: _Audit | None = None
        if not resp.errors and not resp.sorries and resp.env is not None:
            audit_resp = session.command(audit_commands(task.name), resp.env, left())
            if audit_resp.error is not None:
                audit = _Audit(None, None, [LeanMessage("error", 0, 0, None, None, audit_resp.error)])
            else:
                audit = _audit_from(audit_resp.messages, 1, 2)
        return verdict_from_messages(task, messages=resp.messages, sorries=resp.sorries, audit=audit,
                     expected_signature=expected, origin=origin, allowed_axioms=self.allowed_axioms,
                     started=started)

    def _cli_file(self, text: str, workdir: Path) -> Path:
        """Write ``text`` into the check's folder; Lean processes of this check write there too, so
        never through a link one of them planted (:func:`rrma.contain.files.write_bytes`)."""
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        files.write_bytes(workdir, f"RrmaCheck_{digest}.lean", text.encode("utf-8"))
        return workdir / f"RrmaCheck_{digest}.lean"

    def _check_cli(self, task: TheoremTask, proof: str, timeout_s: float, started: float) -> Verdict:
        """``lake env lean --json`` per check: the reference file (ours only) gives the expected
        ``#check``; the checked file (context + declaration, nothing after it) is compiled to an
        ``.olean``; the audit runs in a third file that imports that module, so nothing the proof
        prints can pose as the audit's answer."""
        def left() -> float:
            return max(0.5, timeout_s - (time.monotonic() - started))

        context = task.context if not task.context or task.context.endswith("\n") else task.context + "\n"
        ctx_lines = context.count("\n")
        with tempfile.TemporaryDirectory(prefix="rrma-lean-") as tmp:
            workdir = Path(tmp)
            key = (context, task.statement, task.name)
            expected = self._cli_signatures.get(key)
            if expected is None:
                ref = reference_declaration(task.statement)
                ref_text = f"{context}{ref}\n\n#check @{task.name}\n"
                status, _code, out = self.cli_runner(
                    ["lake", "env", "lean", "--json", str(self._cli_file(ref_text, workdir))],
                    self.project_dir, left(), self.memory_mb, (workdir,))
                if status != "ok" and status != "crash":
                    return self._limit_verdict(status, timeout_s, started)
                msgs, other = parse_cli_output(out)
                check_line = ctx_lines + ref.count("\n") + 3
                errs = [m for m in msgs if m.severity == "error"]
                if errs:
                    return Verdict(False, f"context error: line {errs[0].line}: {errs[0].text.splitlines()[0]}",
                                   [m.to_json() for m in errs], seconds=time.monotonic() - started)
                expected = next((m.text for m in msgs if m.severity == "info" and m.line == check_line), None)
                if expected is None:
                    tail = "\n".join(other[-5:])
                    return Verdict(False, f"context error: #check @{task.name} printed nothing. {tail}".strip(),
                                   seconds=time.monotonic() - started)
                self._cli_signatures[key] = expected
            declaration = assemble(task.statement, proof)
            origin = _proof_origin(task.statement, declaration)
            checked = self._cli_file(f"{context}{declaration}\n", workdir)
            olean = checked.with_suffix(".olean")
            status, _code, out = self.cli_runner(
                ["lake", "env", "lean", "--json", "-o", str(olean), str(checked)],
                self.project_dir, left(), self.memory_mb, (workdir,))
            if status not in ("ok", "crash"):
                return self._limit_verdict(status, timeout_s, started)
            msgs, _other = parse_cli_output(out)
            ctx_errors = [m for m in msgs if m.line <= ctx_lines and m.severity == "error"]
            if ctx_errors:
                first = ctx_errors[0]
                return Verdict(False, f"context error: line {first.line}: {first.text.splitlines()[0]}",
                               [m.to_json() for m in ctx_errors], seconds=time.monotonic() - started)
            decl_msgs = [m for m in msgs if m.line > ctx_lines]
            audit: _Audit | None = None
            clean = not any(m.severity == "error" for m in decl_msgs) and not any(is_sorry_warning(m) for m in decl_msgs)
            if clean and olean.exists():
                audit_file = workdir / f"Audit_{checked.stem}.lean"
                # written after the proof's own compilation ran in this folder: never through its links
                files.write_bytes(workdir, audit_file.name, audit_file_text(checked.stem, task.name).encode("utf-8"))
                status, _code, audit_out = self.cli_runner(
                    ["env", f"LEAN_PATH={workdir}{os.pathsep}{os.environ.get('LEAN_PATH', '')}".rstrip(os.pathsep),
                     "lake", "env", "lean", "--json", str(audit_file)],
                    self.project_dir, left(), self.memory_mb, (workdir,))
                if status not in ("ok", "crash"):
                    return self._limit_verdict(status, timeout_s, started)
                audit = _audit_from(parse_cli_output(audit_out)[0], 2, 3)
        return verdict_from_messages(task, messages=decl_msgs, audit=audit, expected_signature=expected, origin=origin,
                     allowed_axioms=self.allowed_axioms, line_offset=ctx_lines, started=started)

    def _limit_verdict(self, status: str, timeout_s: float, started: float) -> Verdict:
        seconds = time.monotonic() - started
        if status == Status.timeout:
            return Verdict(False, f"timeout: lean ran over {timeout_s:g} s", seconds=seconds)
        if status == Status.oom:
            return Verdict(False, f"memory limit exceeded: lean went over {self.memory_mb} MiB", seconds=seconds)
        return Verdict(False, f"lean did not run: {status}", seconds=seconds)

    def close(self) -> None:
        self.pool.close()
        if self._replay_dir is not None:
            self._replay_dir.cleanup()
            self._replay_dir = None

    def __enter__(self) -> LeanChecker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _ReplUnavailable(Exception):
    """The REPL could not start or died on its first command (fall back to the CLI in auto mode)."""


# ----------------------------------------------------------------------------- the oracle


def feedback_text(verdict: Verdict, limit: int = 4000) -> str:
    """What an agent sees: the reason, Lean's messages with proof positions, the remaining goals."""
    lines = ["proof accepted" if verdict.accepted else f"proof rejected: {verdict.reason}"]
    for m in verdict.messages:
        if m.get("severity") not in ("error", "warning"):
            continue
        where = (f"proof line {m['proof_line']}, column {m['proof_column']}" if "proof_line" in m
                 else f"line {m.get('line')}, column {m.get('column')}")
        lines.append(f"{m['severity']} at {where}: {m.get('text', '')}")
    if verdict.goals:
        lines.append("remaining goals:")
        lines.extend(verdict.goals)
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 20] + "\n[... truncated ...]"


class LeanOracle(Oracle):
    """Oracle kind ``lean``: scores a proposal's proof (1.0 accepted) of ``proposal.theorem``.

    params: ``project`` (Lake project dir, default ``lean_project``), ``source`` or ``sources``
    (``.lean`` files; default every ``Theorems/*.lean`` of the project), ``theorems`` (only these
    names, in this order; default all), ``mode`` (auto|repl|cli), ``pool_size``, ``max_commands``,
    ``memory_mb``, ``timeout_s`` (default: the trial budget). :meth:`theorems` names them for the
    per-theorem policy (rrma/run/theorems.py).
    """

    kind = "lean"
    needs_workspace = False  # its theorems come from the oracle (rrma/declare.py)
    version = "1"

    def __init__(self, params: dict[str, Any], *, metric: str = "proved", direction: str = "maximize") -> None:
        super().__init__(params, metric=metric, direction=direction)
        project = Path(params.get("project", DEFAULT_PROJECT))
        self.project_dir = project if project.is_absolute() else (REPO_ROOT / project)
        sources = params.get("sources") or ([params["source"]] if params.get("source") else [])
        self.sources = [Path(s) for s in sources]
        self.checker = LeanChecker(self.project_dir, mode=str(params.get("mode", "auto")),
                                   pool_size=int(params.get("pool_size", 1)),
                                   max_commands=int(params.get("max_commands", 200)),
                                   memory_mb=int(params.get("memory_mb", 4096)))
        self._tasks: dict[str, TheoremTask] | None = None
        self._tasks_lock = threading.Lock()
        self.answers: tuple[Path, ...] = ()

    @property
    def tasks(self) -> dict[str, TheoremTask]:
        with self._tasks_lock:
            if self._tasks is None:
                found = ([t for s in self.sources for t in strip_lean_file(s)] if self.sources
                         else strip_project(self.project_dir))
                try:
                    self._tasks = select_theorems({t.name: t for t in found}, self.params.get("theorems"),
                                                  "lean oracle")
                except ValueError as exc:
                    raise OracleError(str(exc)) from exc
            return self._tasks

    def theorems(self) -> list[dict[str, Any]]:
        """The theorems to prove, in order: each one's public view (never its proof nor its file's
        path) and its file's basename (for per-file counts)."""
        return theorem_views(self.tasks)

    def prepare(self, run_dir: Path, workspace: Path) -> dict[str, Any]:
        self.checker.ensure_available()
        try:
            tasks = self.tasks
        except (OSError, LeanSyntaxError) as exc:
            raise OracleError(f"lean oracle: cannot strip theorems: {exc}") from exc
        # Lean must not read the stripped files (their original proofs) while it checks; agents'
        # processes see neither them nor their compiled forms (held_out)
        sources = {t.source_file for t in tasks.values()}
        self.checker.hidden = tuple(hidden_source_paths(self.project_dir, sources, [t.context for t in tasks.values()]))
        self.answers = answer_paths(self.project_dir, sources)
        return {"lean_toolchain": toolchain_of(self.project_dir), "theorems": len(tasks),
                "lean_project": str(self.project_dir)}

    def held_out(self) -> tuple[Path, ...]:
        """The stripped sources (every original proof) and all their compiled forms."""
        return self.answers

    def evaluate(self, ctx: EvalContext) -> Outcome:
        proposal = ctx.proposal
        if not proposal.theorem or proposal.proof is None or not proposal.proof.strip():
            return Outcome(status=Status.invalid, feedback="a Lean proposal needs `theorem` (a name) and `proof` "
                           "(the proof body after `:=`, e.g. `by simp`)")
        task = self.tasks.get(proposal.theorem)
        if task is None:
            known = ", ".join(sorted(self.tasks)[:10])
            return Outcome(status=Status.invalid, feedback=f"unknown theorem {proposal.theorem!r}; known: {known}, ...")
        timeout_s = float(self.params.get("timeout_s", ctx.budget.seconds))
        verdict = self.checker.check(task, proposal.proof, timeout_s=timeout_s)
        return Outcome(
            status=Status(verdict.status),
            score=1.0 if verdict.accepted else None,
            metrics={"accepted": verdict.accepted, "cheat": verdict.cheat, "reason": verdict.reason,
                     "axioms": verdict.axioms, "theorem": task.name, "difficulty": task.difficulty},
            feedback=feedback_text(verdict),
            log=json.dumps(verdict.to_json(), ensure_ascii=False)[:200_000],
            seconds=verdict.seconds,
        )

    def close(self) -> None:
        self.checker.close()


__all__ = [
    "ALLOWED_AXIOMS",
    "DEFAULT_PROJECT",
    "LeanChecker",
    "LeanMessage",
    "LeanNotInstalled",
    "LeanOracle",
    "PipeReplTransport",
    "RecordedTransport",
    "ReplError",
    "ReplMemoryExceeded",
    "ReplPool",
    "ReplResponse",
    "ReplSession",
    "ReplTimeout",
    "ReplTransport",
    "RuleViolation",
    "TranscriptMismatch",
    "feedback_text",
    "goals_from_messages",
    "lean_missing",
    "parse_axioms",
    "parse_cli_output",
    "parse_repl_response",
    "proof_violation",
    "read_transcript",
    "split_repl_requests",
    "split_repl_responses",
    "verdict_from_messages",
]
