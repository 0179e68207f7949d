"""The tools an LLM agent's model calls, and the pending-edit buffer they act on.

Why it exists: the model never touches the disk. :class:`ToolSession` runs one proposal's tool calls
against the context (the parent's files, the blackboard, other trials' snapshots under the tree
policy) and a buffer of pending edits that ``submit_trial`` turns into the proposal's
:class:`~rrma.trial.FileEdit` list. :func:`tools_for` says which tools a task offers and the
:class:`ToolSpec` of each is the JSON schema the providers send.

Invariants: every edit goes through the task's edit rules (:class:`~rrma.workspace.EditRules`); a
specialist's change outside its lines (``params.edit_lines``) is refused; a tool that cannot be
carried out answers the model with an error (:class:`ToolFailure`), never an exception out of the
loop; what the model posts to the blackboard is redacted first.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.llm.redaction import Redactor
from rrma.contracts import AgentError, Context
from rrma.task import TaskConfig
from rrma.trial import FileEdit, Proposal
from rrma.workspace import EditRules, InvalidEdit, apply_edits, normalize_path


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


READ_FILE = ToolSpec(
    "read_file",
    "Read a workspace file of the parent trial, with your pending edits applied. Optional 1-based "
    "start_line/end_line select a range. trial_id reads that trial's snapshot instead (tree policy).",
    _schema({"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"},
             "trial_id": {"type": "string"}}, ["path"]),
)
EDIT_FILE = ToolSpec(
    "edit_file",
    "Edit one editable file in your pending proposal (nothing runs yet). Give either `content` (the "
    "whole new file) or `replacements`: a list of {search, replace} pairs applied in order, each "
    "`search` occurring exactly once in the current text.",
    _schema({"path": {"type": "string"}, "content": {"type": "string"},
             "replacements": {"type": "array", "items": _schema(
                 {"search": {"type": "string"}, "replace": {"type": "string"}}, ["search", "replace"])}},
            ["path"]),
)
RUN_CHECKS = ToolSpec(
    "run_checks",
    "Free pre-checks of the pending proposal (no oracle budget): edit rules, Python syntax of edited "
    ".py files, and for proof tasks the proof's basic syntax. Optional `proof` checks that text.",
    _schema({"proof": {"type": "string"}}, []),
)
SUBMIT_TRIAL = ToolSpec(
    "submit_trial",
    "Submit the pending edits (or, for proof tasks, `proof`) as one trial for the oracle to judge. "
    "This ends your turn. State the hypothesis and the effect you expect on the metric.",
    _schema({"hypothesis": {"type": "string"}, "expected_effect": {"type": "string"},
             "proof": {"type": "string"}, "theorem": {"type": "string"}}, ["hypothesis", "expected_effect"]),
)
READ_BLACKBOARD = ToolSpec(
    "read_blackboard",
    "Read the shared blackboard: insights other agents posted in this run (empty in a no-history run).",
    _schema({}, []),
)
POST_INSIGHT = ToolSpec(
    "post_insight",
    "Post a short insight to the shared blackboard for the other agents (what worked, what did not, why).",
    _schema({"text": {"type": "string"}, "trial_id": {"type": "string"}}, ["text"]),
)
REBASE_TO = ToolSpec(
    "rebase_to",
    "Tree policy: build your next proposal on another (successful) trial instead of the default parent. "
    "Discards your pending edits.",
    _schema({"trial_id": {"type": "string"}}, ["trial_id"]),
)


def tools_for(task: TaskConfig) -> list[ToolSpec]:
    tools = [READ_FILE, EDIT_FILE, RUN_CHECKS, SUBMIT_TRIAL, READ_BLACKBOARD, POST_INSIGHT]
    if task.loop.policy == "tree":
        tools.append(REBASE_TO)
    return tools


@dataclass
class ToolCall:
    """One tool call as the model made it. ``error`` is set when its arguments were unusable."""

    id: str
    name: str
    args: dict[str, Any]
    raw: str = ""  # the arguments as sent (JSON text), for the trace
    error: str | None = None


@dataclass
class ToolResult:
    call: ToolCall
    text: str
    is_error: bool = False


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """JSON arguments text -> (dict, error). Empty text means no arguments."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at column {exc.colno}): {raw[:200]}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


PROOF_FORBIDDEN = re.compile(r"\b(sorry|admit|Admitted|axiom|Axiom)\b")


def proof_syntax_problems(proof: str) -> list[str]:
    """Cheap structural checks of a proof body (the oracle does the real checking)."""
    problems = []
    if not proof.strip():
        problems.append("the proof is empty")
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in proof:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack[-1] != pairs[ch]:
                problems.append(f"unbalanced {ch!r}")
                break
            stack.pop()
    if stack and not problems:
        problems.append(f"unclosed {stack[-1]!r}")
    found = PROOF_FORBIDDEN.search(proof)
    if found:
        problems.append(f"uses {found.group(0)!r}, which the oracle rejects")
    return problems


class ToolSession:
    """Executes tool calls of one proposal against the context and a pending-edit buffer.

    The buffer maps path -> new text; ``edits`` remembers, per path, the search/replace pairs when
    the file was only ever edited that way (so the proposal re-applies cleanly to a moved parent),
    or ``None`` once a whole-file content was given.
    """

    def __init__(self, ctx: Context, task: TaskConfig, redactor: Redactor, max_read_chars: int = 60_000,
                 edit_lines: list[re.Pattern[str]] | None = None) -> None:
        self.ctx = ctx
        self.task = task
        self.redactor = redactor
        self.max_read_chars = max_read_chars
        self.base_files = dict(ctx.files)
        self.parent: str | None = ctx.parent_id
        self.rebased = False
        self.pending: dict[str, str] = {}
        self.replacements: dict[str, list[tuple[str, str]] | None] = {}
        self.proposal: Proposal | None = None
        self.rules = EditRules(list(ctx.editable), list(task.workspace.readonly))
        self.edit_lines = edit_lines or []  # a specialist's part of a file: changed lines must match one

    # -------------------------------------------------------------- helpers

    def files(self) -> dict[str, str]:
        return {**self.base_files, **self.pending}

    def execute(self, call: ToolCall) -> ToolResult:
        if call.error is not None:
            return ToolResult(call, f"error: {call.error}. Call {call.name} again with a JSON object of arguments.",
                              True)
        handler: Callable[[dict[str, Any]], str] | None = getattr(self, f"tool_{call.name}", None)
        known = [t.name for t in tools_for(self.task)]
        if handler is None or call.name not in known:
            return ToolResult(call, f"error: unknown tool {call.name!r}; the tools are: {', '.join(known)}", True)
        try:
            return ToolResult(call, handler(call.args))
        except ToolFailure as exc:
            return ToolResult(call, f"error: {exc}", True)

    # -------------------------------------------------------------- tools

    def tool_read_file(self, args: dict[str, Any]) -> str:
        path = _str_arg(args, "path")
        trial_id = args.get("trial_id")
        if trial_id:
            if not self.ctx.history:
                raise ToolFailure("other trials' files are not available in this (no-history) run")
            try:
                files = self.ctx.files_of(str(trial_id))
            except KeyError as exc:
                raise ToolFailure(str(exc).strip("'\"")) from None
        else:
            files = self.files()
        if path not in files:
            raise ToolFailure(f"no file {path!r}; files: {', '.join(sorted(files)) or '(none)'}")
        lines = files[path].splitlines(keepends=True)
        start = _int_arg(args, "start_line", 1)
        end = _int_arg(args, "end_line", len(lines))
        if start < 1 or end < start - 1:
            raise ToolFailure(f"bad line range {start}..{end} (the file has {len(lines)} lines)")
        text = "".join(lines[start - 1:end])
        if len(text) > self.max_read_chars:
            text = text[: self.max_read_chars] + f"\n[... truncated at {self.max_read_chars} characters; read a line range]"
        return f"{path} lines {start}-{min(end, len(lines))} of {len(lines)}:\n{text}"

    def tool_edit_file(self, args: dict[str, Any]) -> str:
        path = _str_arg(args, "path")
        content = args.get("content")
        raw_reps = args.get("replacements")
        if content is not None and raw_reps:
            raise ToolFailure("give either `content` or `replacements`, not both")
        if content is None and not raw_reps:
            raise ToolFailure("give `content` (the whole file) or a non-empty `replacements` list")
        if content is not None and not isinstance(content, str):
            raise ToolFailure("`content` must be a string")
        pairs: list[tuple[str, str]] = []
        if raw_reps:
            if not isinstance(raw_reps, list):
                raise ToolFailure("`replacements` must be a list of {search, replace} objects")
            for i, rep in enumerate(raw_reps):
                if not isinstance(rep, dict) or not isinstance(rep.get("search"), str) \
                        or not isinstance(rep.get("replace"), str):
                    raise ToolFailure(f"replacements[{i}] must be an object with string `search` and `replace`")
                pairs.append((rep["search"], rep["replace"]))
        edit = FileEdit(path=path, content=content, replacements=pairs)
        try:
            new_files = apply_edits(self.files(), [edit], self.rules)
        except InvalidEdit as exc:
            raise ToolFailure(str(exc)) from None
        norm = normalize_path(path)
        self._check_lines(norm, new_files[norm])
        self.pending[norm] = new_files[norm]
        previous = self.replacements.get(norm, [])
        self.replacements[norm] = None if content is not None or previous is None else [*previous, *pairs]
        if self.pending[norm] == self.base_files.get(norm):
            del self.pending[norm]
            self.replacements.pop(norm, None)
            return f"{norm}: the file is back to the parent's version (no pending change)"
        return f"{norm}: edit applied to the pending proposal ({len(self.pending[norm].splitlines())} lines now)"

    def _check_lines(self, path: str, new_text: str) -> None:
        """Refuse a change to any line outside the role's part (``params.edit_lines``)."""
        if not self.edit_lines:
            return
        old = self.base_files.get(path, "").splitlines()
        for line in difflib.ndiff(old, new_text.splitlines()):
            if line[:2] not in ("- ", "+ "):
                continue
            if not any(p.search(line[2:]) for p in self.edit_lines):
                allowed = ", ".join(p.pattern for p in self.edit_lines)
                verb = "remove" if line[0] == "-" else "write"
                raise ToolFailure(f"{path}: you may not {verb} the line {line[2:].strip()[:120]!r}: it is outside your "
                                  f"role's part of the task (changed lines must match one of: {allowed})")

    def tool_run_checks(self, args: dict[str, Any]) -> str:
        lines = []
        proof = args.get("proof")
        if proof is not None:
            problems = proof_syntax_problems(str(proof))
            lines.append("proof: " + ("looks well-formed" if not problems else "; ".join(problems)))
        if not self.pending and proof is None:
            return "no pending edits yet" + (" (for a proof task, pass `proof`)" if self.ctx.theorem else "")
        try:
            if self.pending:
                apply_edits(self.base_files, self.edits(), self.rules)
                lines.append(f"edit rules: ok ({', '.join(sorted(self.pending))})")
        except InvalidEdit as exc:
            lines.append(f"edit rules: {exc}")
        for path, text in sorted(self.pending.items()):
            if path.endswith(".py"):
                try:
                    ast.parse(text, filename=path)
                    lines.append(f"{path}: python syntax ok")
                except SyntaxError as exc:
                    lines.append(f"{path}: SyntaxError line {exc.lineno}: {exc.msg}")
        return "\n".join(lines)

    def tool_submit_trial(self, args: dict[str, Any]) -> str:
        hypothesis = _str_arg(args, "hypothesis")
        expected = str(args.get("expected_effect") or "")
        proof = args.get("proof")
        theorem = args.get("theorem") or (self.ctx.theorem or {}).get("name")
        if proof is None and not self.pending:
            raise ToolFailure("nothing to submit: make edits with edit_file first" +
                              (" (or pass `proof` for this proof task)" if self.ctx.theorem else ""))
        if proof is not None and not isinstance(proof, str):
            raise ToolFailure("`proof` must be a string")
        edits = self.edits()
        if edits:
            try:
                apply_edits(self.base_files, edits, self.rules)
            except InvalidEdit as exc:
                raise ToolFailure(f"the pending edits are not valid: {exc}") from None
        parent = self.parent if (self.rebased or self.task.loop.policy == "tree") else None
        self.proposal = Proposal(hypothesis=hypothesis, expected_effect=expected, edits=edits, proof=proof,
                                 theorem=str(theorem) if theorem else None, parent=parent)
        return "submitted; the oracle will judge it"

    def tool_read_blackboard(self, args: dict[str, Any]) -> str:
        if not self.ctx.blackboard:
            return "(the blackboard is empty)" if self.ctx.history else "(no blackboard in a no-history run)"
        return "\n".join(f"- {line}" for line in self.ctx.blackboard)

    def tool_post_insight(self, args: dict[str, Any]) -> str:
        text = _str_arg(args, "text").strip()
        if not text:
            raise ToolFailure("`text` is empty")
        trial_id = args.get("trial_id")
        self.ctx.post(self.redactor.text(text[:2000]), trial_id=str(trial_id) if trial_id else None, tags=["insight"])
        return "posted"

    def tool_rebase_to(self, args: dict[str, Any]) -> str:
        if self.task.loop.policy != "tree":
            raise ToolFailure("rebase_to is only available with the tree policy")
        trial_id = _str_arg(args, "trial_id")
        try:
            files = self.ctx.files_of(trial_id)
        except KeyError as exc:
            raise ToolFailure(str(exc).strip("'\"")) from None
        dropped = sorted(self.pending)
        self.base_files = dict(files)
        self.pending.clear()
        self.replacements.clear()
        self.parent = trial_id
        self.rebased = True
        note = f"; dropped pending edits of {', '.join(dropped)}" if dropped else ""
        return f"now building on {trial_id} ({len(files)} files){note}"

    # -------------------------------------------------------------- the proposal

    def edits(self) -> list[FileEdit]:
        out = []
        for path in sorted(self.pending):
            reps = self.replacements.get(path)
            if reps:
                out.append(FileEdit(path=path, replacements=reps))
            else:
                out.append(FileEdit(path=path, content=self.pending[path]))
        return out


class ToolFailure(Exception):
    """A tool call the model made cannot be carried out (the message goes back to the model)."""


def _str_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolFailure(f"argument `{name}` is required and must be a string")
    return value


def _int_arg(args: dict[str, Any], name: str, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolFailure(f"argument `{name}` must be an integer")
    return int(value)


def compile_edit_lines(agent: str, raw: Any) -> list[re.Pattern[str]]:
    """``params.edit_lines``: regexes; a specialist may change only lines matching one of them."""
    if raw is None:
        return []
    if isinstance(raw, str) or not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise AgentError(f"agent {agent}: params.edit_lines must be a list of regular expressions")
    patterns = []
    for text in raw:
        try:
            patterns.append(re.compile(text))
        except re.error as exc:
            raise AgentError(f"agent {agent}: params.edit_lines: {text!r} is not a valid regular expression "
                             f"({exc})") from None
    return patterns
