"""Trajectories as datasets: one row per agent proposal, in TRL's conversational format (docs/training.md).

``rrma-tui export RUN... --dataset OUT`` writes the rows of :func:`dataset_rows` with :func:`write_dataset`:
JSON lines when OUT ends in ``.jsonl`` (``datasets.load_dataset("json", data_files=OUT)`` reads it), else
a Hugging Face dataset directory (``datasets.load_from_disk(OUT)``). TRL's ``SFTTrainer`` takes either as
it is (the ``messages`` column); the GRPO/SDPO trainers read ``reward``, ``group`` and
``privileged_context``.

What a row is made from (each run read as every view reads it, :class:`rrma.log.reader.RunReader`, and
its blob store):

* ``messages``: the prompt and the reply. When the proposal came from the trained policy, its recorded
  reply turn (``agent.turn`` role ``assistant`` with ``args.format == "rrma-policy/1"``): the system and
  user messages exactly as prompted and the text exactly as generated. Otherwise the prompt is rendered
  with :func:`rrma.train.prompt.messages` from the parent's files and score, and the proposal's change
  with :func:`rrma.train.prompt.reply_text`; the agent's tool calls (``tool_call`` / ``tool_result``
  turns of that trial) come before that final message, as assistant messages with ``tool_calls`` and
  ``tool`` messages.
* ``reward`` / ``reward_why``: :func:`rrma.train.reward.reward` with the run's ``task.reward``; the
  novelty bonus compares the trial's diff with the diffs of the run's earlier agent trials.
* the review and the audit: ``approved`` (the latest review decision in force), ``audit`` (open findings).

Every row has the same columns, and every value of a column the same type or null (Arrow needs one
schema): see :data:`COLUMNS`. Nested values that differ from tool to tool are JSON text: ``tools`` (the
tool schemas, which TRL decodes itself) and each tool call's ``arguments`` (as OpenAI's API sends them).

Excluded unless asked for: trials a person rejected (the latest review in force is a reject;
``include_rejected``) and trials with an open (not dismissed) ``high`` audit finding
(``include_flagged``). Trials with no outcome yet (a live run) are always left out. Baseline trials and
confirmation repeats are not proposals and never rows.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrma.contain import files
from rrma.log.layout import EVENTS
from rrma.log.reader import LiveFold, RunReader
from rrma.log.state import RunState, TrialRecord
from rrma.log.store import RunStore, check_readable
from rrma.task import TaskConfig, TaskError, task_from_dict
from rrma.train import prompt as policy_prompt
from rrma.train.reward import diff_text, trial_reward

POLICY_FORMAT = "rrma-policy/1"  # the policy backend's recorded reply turn (docs/training.md)
COLUMNS = ("messages", "tools", "reward", "reward_why", "group", "status", "score", "parent_score",
           "privileged_context", "trial", "run", "agent", "approved", "audit", "head", "completion_ids", "logprobs")
EXCLUDED_REJECTED = "rejected by a person"
EXCLUDED_FLAGGED = "high audit finding"
EXCLUDED_UNFINISHED = "no outcome yet"
_TURN_ROLES = frozenset({"assistant", "tool_call", "tool_result"})


class DatasetError(Exception):
    """A run that cannot be exported as a dataset, or an OUT that cannot be written (one line)."""


@dataclass
class DatasetExport:
    """The rows of a dataset export and what was left out (reason -> count)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)


def dataset_rows(run_dirs: Iterable[Path | str], *, include_rejected: bool = False,
                 include_flagged: bool = False) -> list[dict[str, Any]]:
    """One row per agent proposal of each run, in run then proposal order (the module docstring)."""
    return collect(run_dirs, include_rejected=include_rejected, include_flagged=include_flagged).rows


def collect(run_dirs: Iterable[Path | str], *, include_rejected: bool = False,
            include_flagged: bool = False) -> DatasetExport:
    """:func:`dataset_rows` and the count of trials left out, by reason (for the CLI's line)."""
    out = DatasetExport()
    for run_dir in run_dirs:
        _Run(Path(run_dir)).rows(out, include_rejected=include_rejected, include_flagged=include_flagged)
    return out


# ----------------------------------------------------------------------------- one run


class _Run:
    """One run read for export: its folded state, its turns by trial, its files from the blob store."""

    def __init__(self, run_dir: Path) -> None:
        if not (run_dir / EVENTS).is_file():
            raise DatasetError(f"{run_dir}: not a run directory (no {EVENTS})")
        check_readable(run_dir)  # RunUnreadable: not a regular file, bytes that are not UTF-8
        self.dir = run_dir
        self.model: LiveFold = RunReader(run_dir, write_checkpoint=False, shared=False).load()
        self.model.attach_index(self.model.index_turns())
        self.state: RunState = self.model.state
        if not self.state.task:
            raise DatasetError(f"{run_dir}: the log has no run.started (no task to render prompts with)")
        try:
            self.task: TaskConfig = task_from_dict(self.state.task, source=f"{run_dir} (run.started task)")
        except TaskError as exc:
            raise DatasetError(str(exc).splitlines()[0]) from None
        self.run_id = self.state.run_id or run_dir.name
        self.store = RunStore(run_dir)
        self.head = _head_hash(run_dir, self.model.offset, self.state.last_seq) or self.store.head()[1]
        self.editable = list(self.task.workspace.editable)
        self._files: dict[str, dict[str, str]] = {}
        self.turns: dict[str, list[dict[str, Any]]] = {}  # trial id -> its assistant/tool turns, in log order
        self.schemas: dict[str, list[tuple[int, list[Any]]]] = {}  # agent -> (seq, tool schemas) of its system turns
        wanted = {rec.trial_id for rec in self.state.agent_trials()}
        for ref in self.model.turns:
            if ref.role == "system" or (ref.role in _TURN_ROLES and ref.trial_id in wanted):
                data = self.model.turn_data(ref)
                if ref.role == "system":
                    tools = (data.get("args") or {}).get("tool_schemas")
                    if isinstance(tools, list) and tools:
                        self.schemas.setdefault(ref.agent, []).append((ref.seq, tools))
                elif ref.trial_id is not None:
                    self.turns.setdefault(ref.trial_id, []).append(data)

    def files(self, trial_id: str | None) -> dict[str, str]:
        """A trial's workspace files ({} for none or a trial without a snapshot)."""
        if trial_id is None:
            return {}
        if trial_id not in self._files:
            rec = self.state.trials.get(trial_id)
            files: dict[str, str] = {}
            if rec is not None and rec.manifest_blob:
                try:
                    files = self.store.manifest_files(rec.manifest_blob)
                except (OSError, ValueError) as exc:
                    raise DatasetError(f"{self.dir}: the files of {trial_id} cannot be read from the blob "
                                       f"store ({exc})") from None
            self._files[trial_id] = files
        return self._files[trial_id]

    def parent_score(self, rec: TrialRecord) -> float | None:
        """The score the proposal built on: its parent's (the baseline mean for a parent that never scored)."""
        parent = self.state.trials.get(rec.parent) if rec.parent else None
        if parent is not None and parent.score is not None:
            return parent.score
        return self.state.baseline_mean

    def rows(self, out: DatasetExport, *, include_rejected: bool, include_flagged: bool) -> None:
        state, task = self.state, self.task
        earlier: list[str] = []
        for rec in state.agent_trials():
            before = self.files(rec.parent)
            after = self.files(rec.trial_id) if rec.manifest_blob else before
            change = diff_text(before, after, self.editable)  # "" for a refused edit (as the trainer scores it)
            if not rec.finished:
                out.excluded[EXCLUDED_UNFINISHED] = out.excluded.get(EXCLUDED_UNFINISHED, 0) + 1
                continue
            parent_score = self.parent_score(rec)
            given = trial_reward(rec, state, task, parent_score=parent_score, diff=change, earlier_diffs=earlier)
            earlier.append(change)
            why = None
            if rec.review_status == "rejected" and not include_rejected:
                why = EXCLUDED_REJECTED
            elif rec.audit_level == "high" and not include_flagged:
                why = EXCLUDED_FLAGGED
            if why is not None:
                out.excluded[why] = out.excluded.get(why, 0) + 1
                continue
            out.rows.append(self.row(rec, before, parent_score, given.value, given.why))

    def row(self, rec: TrialRecord, before: dict[str, str], parent_score: float | None, value: float,
            why: str) -> dict[str, Any]:
        turns = self.turns.get(rec.trial_id, [])
        policy = next((t for t in reversed(turns) if t.get("role") == "assistant"
                       and (t.get("args") or {}).get("format") == POLICY_FORMAT), None)
        completion_ids: list[int] | None = None
        logprobs: list[float | None] | None = None
        tools: str | None = None
        if policy is not None:
            args = policy.get("args") or {}
            messages = [_message(m.get("role", "user"), m.get("content")) for m in args.get("messages") or []
                        if isinstance(m, dict)]
            messages.append(_message("assistant", policy.get("text", "")))
            ids = args.get("completion_ids")
            if isinstance(ids, list) and ids and all(type(i) is int for i in ids):
                completion_ids = list(ids)
            probs = args.get("logprobs")
            if isinstance(probs, list) and probs and all(_number(p) for p in probs):
                logprobs = [_finite(p) for p in probs]
        else:
            messages = [_message(m["role"], m["content"])
                        for m in policy_prompt.messages(self.task, before, parent_score, self.editable)]
            calls = _tool_messages(turns)
            if calls:
                messages.extend(calls)
                tools = self.tool_schemas(rec)
            messages.append(_message("assistant", self.reply(rec, before)))
        open_findings = rec.open_findings
        audit = None if not open_findings else {
            "kinds": sorted({str(f["kind"]) for f in open_findings}),
            "severity": str(open_findings[0]["severity"])}  # most severe first (TrialRecord.open_findings)
        review = rec.review_status
        return {
            "messages": messages,
            "tools": tools,
            "reward": _finite(value),
            "reward_why": why,
            "group": f"{self.run_id}:{rec.parent or '-'}",
            "status": rec.status,
            "score": _finite(rec.score),
            "parent_score": _finite(parent_score),
            "privileged_context": rec.feedback or None,
            "trial": rec.trial_id,
            "run": self.run_id,
            "agent": rec.agent,
            "approved": True if review == "approved" else False if review == "rejected" else None,
            "audit": audit,
            "head": self.head,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
        }

    def reply(self, rec: TrialRecord, before: dict[str, str]) -> str:
        """The proposal as the policy's reply: its change (the attempted one for a refused edit), or its proof."""
        proposal = self.proposal(rec)
        if rec.manifest_blob:
            after = self.files(rec.trial_id)
        else:  # a refused edit has no snapshot: what it asked for, applied as far as it goes
            after = _attempted(before, proposal.get("edits") or [])
        text = policy_prompt.reply_text(self.task, before, after, self.editable)
        if not text and isinstance(proposal.get("proof"), str):
            text = proposal["proof"]
        return text

    def proposal(self, rec: TrialRecord) -> dict[str, Any]:
        if not rec.proposal_blob:
            return {}
        try:
            found = self.store.get_json_blob(rec.proposal_blob)
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def tool_schemas(self, rec: TrialRecord) -> str | None:
        """The JSON text of the tool schemas the agent was given (its latest system turn before the trial)."""
        recorded = self.schemas.get(rec.agent) or []
        before = [tools for seq, tools in recorded if seq < rec.proposed_seq] or [tools for _, tools in recorded]
        return json.dumps(before[-1], ensure_ascii=False, sort_keys=True) if before else None


def _message(role: Any, content: Any, tool_calls: list[dict[str, Any]] | None = None,
             name: str | None = None) -> dict[str, Any]:
    """A message with every key a message of the dataset has (Arrow's one schema): role, content, tool_calls, name."""
    return {"role": str(role), "content": "" if content is None else str(content), "tool_calls": tool_calls,
            "name": name}


def _tool_messages(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's tool use as TRL's messages: per model reply, an assistant message with its ``tool_calls``
    then one ``tool`` message per result. A reply that called no tool is left out. An agent that records
    no reply turns (codex's stream) gets one assistant message per run of calls before their results."""
    rounds: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
    replied = False  # the current round began at a recorded reply (its calls all belong to it)
    for turn in turns:
        role = turn.get("role")
        if role == "assistant":
            rounds.append((str(turn.get("text") or ""), [], []))
            replied = True
        elif role == "tool_call":
            if not rounds or (rounds[-1][2] and not replied):  # a call after results, no reply between
                rounds.append(("", [], []))
                replied = False
            args = turn.get("args")
            rounds[-1][1].append({"type": "function", "function": {
                "name": str(turn.get("tool") or ""),
                "arguments": json.dumps(args if isinstance(args, dict) else {}, ensure_ascii=False)}})
        elif role == "tool_result":
            if not rounds:
                rounds.append(("", [], []))
                replied = False
            result = turn.get("result")
            rounds[-1][2].append(_message("tool", result if result is not None else turn.get("text", ""),
                                          name=str(turn.get("tool") or "")))
    messages: list[dict[str, Any]] = []
    for text, calls, results in rounds:
        if calls:
            messages.append(_message("assistant", text, tool_calls=calls))
            messages.extend(results)
    return messages


def _attempted(before: dict[str, str], edits: Sequence[Any]) -> dict[str, str]:
    """The files a refused proposal asked for: whole-file contents, deletions and the replacements whose
    search text occurs (an edit the harness refused is shown as what the agent wrote)."""
    after = dict(before)
    for edit in edits:
        if not isinstance(edit, dict) or not isinstance(edit.get("path"), str):
            continue
        path = edit["path"]
        if edit.get("delete"):
            after.pop(path, None)
        elif isinstance(edit.get("content"), str):
            after[path] = edit["content"]
        else:
            text = after.get(path, "")
            for pair in edit.get("replacements") or []:
                if isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
                    if pair[0] and pair[0] in text:
                        text = text.replace(pair[0], pair[1], 1)
            if path in after or text:
                after[path] = text
    return after


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _finite(value: Any) -> float | None:
    """A float for a column of floats (an int becomes one; NaN and infinities are null: JSON has neither)."""
    if value is None or not _number(value):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _head_hash(run_dir: Path, offset: int, last_seq: int, max_lines: int = 1000) -> str | None:
    """The chain hash of event ``last_seq``: the last valid line before byte ``offset`` (what the fold read)."""
    if last_seq < 0 or offset <= 0:
        return None
    try:
        fd = os.open(run_dir / EVENTS, os.O_RDONLY)
    except OSError:
        return None
    try:
        end, carry = offset, b""
        lines = 0
        while end > 0 and lines < max_lines:
            start = max(0, end - 65536)
            buf = os.pread(fd, end - start, start) + carry
            parts = buf.split(b"\n")
            carry = parts[0] if start > 0 else b""
            for line in reversed(parts[1:] if start > 0 else parts):
                lines += 1
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except ValueError:
                    continue
                if isinstance(raw, dict) and raw.get("seq") == last_seq and isinstance(raw.get("hash"), str):
                    return str(raw["hash"])
                if isinstance(raw, dict) and isinstance(raw.get("seq"), int) and raw["seq"] < last_seq:
                    return None
            end = start
    finally:
        os.close(fd)
    return None


# ----------------------------------------------------------------------------- writing


def _features() -> Any:
    """The dataset's Arrow schema (so an empty export, or one without tool calls, has the same columns)."""
    from datasets import Features, Value

    call = {"type": Value("string"), "function": {"name": Value("string"), "arguments": Value("string")}}
    message = {"role": Value("string"), "content": Value("string"), "tool_calls": [call], "name": Value("string")}
    return Features({
        "messages": [message], "tools": Value("string"), "reward": Value("float64"), "reward_why": Value("string"),
        "group": Value("string"), "status": Value("string"), "score": Value("float64"),
        "parent_score": Value("float64"), "privileged_context": Value("string"), "trial": Value("string"),
        "run": Value("string"), "agent": Value("string"), "approved": Value("bool"),
        "audit": {"kinds": [Value("string")], "severity": Value("string")}, "head": Value("string"),
        "completion_ids": [Value("int64")], "logprobs": [Value("float64")],
    })


def write_dataset(rows: Sequence[dict[str, Any]], out: Path | str) -> str:
    """Write ``rows`` to ``out``; what was written, in words ("JSON lines" or "a Hugging Face dataset").

    ``out`` ending in ``.jsonl``: one JSON object per line (replaced as a whole). Otherwise a directory
    written by ``datasets.Dataset.from_list(rows).save_to_disk`` (the ``datasets`` package is needed; an
    existing directory is replaced only when it is empty or an earlier dataset). DatasetError: ``out``'s
    parent is not a directory, ``out`` is in the way, ``datasets`` is not installed.
    """
    out = Path(out)
    if not out.parent.is_dir():
        raise DatasetError(f"{out}: its directory {out.parent} does not exist")
    for row in rows:
        if set(row) != set(COLUMNS):
            raise DatasetError(f"a row's columns differ from the dataset's: {sorted(set(row) ^ set(COLUMNS))}")
    if out.suffix == ".jsonl":
        if out.is_dir():
            raise DatasetError(f"{out}: a directory, not a file to write JSON lines to")
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return "JSON lines"
    try:
        from datasets import Dataset
        from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:
        raise DatasetError(f"{out}: writing a dataset directory needs the `datasets` package (pip install "
                           "'rrma[train]'); or give an OUT ending in .jsonl") from None
    if out.exists() and not out.is_dir():
        raise DatasetError(f"{out}: a file is in the way (a dataset directory is written there; "
                           "end OUT with .jsonl for JSON lines)")
    if out.is_dir() and any(out.iterdir()) and not (out / "dataset_info.json").exists():
        raise DatasetError(f"{out}: a directory that is neither empty nor a dataset; not replaced")
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    quiet = are_progress_bars_disabled()
    disable_progress_bars()  # the CLI prints one line, not a progress bar
    try:
        features = _features()
        data = (Dataset.from_list([dict(row) for row in rows], features=features) if rows else
                Dataset.from_dict({name: [] for name in COLUMNS}, features=features))  # no rows: still the columns
        data.save_to_disk(str(staging / "data"), num_shards=1 if not rows else None)  # an empty one loads too
        old = None
        if out.exists():
            old = staging / "old"
            os.replace(out, old)
        os.replace(staging / "data", out)
    finally:
        files.remove_tree(staging)
        if not quiet:
            enable_progress_bars()
    return "a Hugging Face dataset (datasets.load_from_disk)"
