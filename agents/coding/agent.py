"""Coding agents as research agents: Claude Code, Codex CLI, aider or any command proposes trials.

Why it exists: many people already trust a coding agent; dropped into the loop it gets what the
harness adds (the oracle that cannot be fooled, budgets, lineage, the blackboard, the live
trace, human approval). One proposal is one run of the agent's program:

1. **A working copy.** The parent trial's files are written to a fresh scratch directory
   (``work/``, outside the run directory), next to a private ``home/`` (the tool's config and
   history), the prompt file and ``bin/`` with ``rrma-post`` and ``rrma-rebase``
   (:mod:`agents.coding.tools`).
2. **The program runs sandboxed** under :func:`rrma.contain.spawn.spawn`, like a trial: its own
   process group and cgroup (memory and process limits), bubblewrap with no capabilities, where
   only the scratch directory is writable, and the run directory (log, blobs, other trials), the
   oracle's held-out data (``ctx.hidden``) and the user's key files are not there at all. The
   network is kept (the tool must reach its API). The environment is the harness's without any
   credential, plus exactly one key variable (the preset's, e.g. ``ANTHROPIC_API_KEY``, read from
   the harness's environment, never from the task file), passed as ``secret_env``.
3. **Its stream becomes the trace**: each output line is parsed as it arrives
   (:mod:`agents.coding.streams`) into ``agent.turn`` events (assistant text, tool calls with
   arguments, tool results, errors, tokens and cost), scrubbed of the key. Unknown lines are
   kept raw.
4. **Budgets**: ``coding.seconds`` of wall clock per run (a hung agent is killed through its
   process group and cgroup, and the run goes on), the tool's own turn cap (``coding.max_turns``;
   counted by the harness for tools without one), and ``budget_usd`` / ``max_run_tokens`` checked
   against the reported usage on every line: the agent is killed when a cap is reached, and
   proposes no more in the run.
5. **The proposal** is the diff of the working copy against the parent (:mod:`agents.coding.workspace`)
   when the program exited 0 and did not report a failure; for a proof task, the proof is the
   file ``coding.proof_file``. The hypothesis is the agent's ``$RRMA_HYPOTHESIS_FILE``, else a
   ``HYPOTHESIS:`` line or the first line of its last message. Posts (``rrma-post``) become
   ``blackboard.post`` events by the agent. A run that ends without a usable change is retried
   in a fresh copy (``coding.attempts``); then the agent gives up for the run, as an LLM agent
   does when all its attempts fail.

Invariant: the key is in memory here and in the program's environment, nowhere else; every string
that reaches a turn, a post, a hypothesis, a proof or a proposed file is scrubbed of it (and of
anything shaped like a key) before it is recorded. The scratch directory is removed after each run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.coding import tools as tools_module
from agents.coding.presets import PRESETS, Command, LaunchSpec, Preset, PresetError
from agents.coding.settings import CodingAgentConfig, CodingAgentParams, coding_settings
from agents.coding.streams import StreamParser, clip, clip_value, make_parser
from agents.coding.workspace import diff_tree
from agents.llm.costs import FREE, UsageMeter, price_for
from agents.llm.prompts import ROLE_HINTS, TASK_PROMPT, context_text, metric_note
from agents.llm.redaction import Redactor
from agents.memory import memory_note, remember_outcome
from rrma.contain import files, sandbox
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import ProcessResult, spawn
from rrma.contracts import Agent, AgentError, Context, TrialSummary
from rrma.task import AgentConfig, TaskConfig
from rrma.trial import Budget, FileEdit, Proposal, Status
from rrma.workspace import EditRules, materialize

READ_ONLY_ENV = "RRMA_CODING_READ_ONLY"  # more paths shown read-only to every coding agent (os.pathsep-separated)
OUTPUT_LIMIT = 256 * 2**20  # bytes of output before the program counts as flooding
LINE_LIMIT = 4 * 2**20  # one stream line (a tool result can hold a whole file)
MAX_PROCESSES = 2048  # the tool, its shell commands and their threads
MAX_OFFERED = 5  # tree policy: trials an agent may rebase onto

INSTRUCTIONS = """You are {agent}, a research agent in a loop of trials judged by a fixed oracle.
Your working directory is a fresh copy of the workspace of trial {parent}. When you exit, your
changes to the editable files ({editable}) become one trial: the oracle runs it and reports
`{metric}` ({direction}). Only an improvement larger than the noise floor counts. {metric_note}

How to work:
- Change only the editable files. New files elsewhere are ignored (use them as scratch space);
  changing or deleting any other existing file makes the trial invalid.
- Check your change before you finish when you can (run the program): a failed trial is wasted.
- Make one focused change, then stop: one run of yours is one trial. Do not ask questions; nobody answers.
- Before you exit, write a one-line hypothesis, and on a second line the effect you expect, to
  {hypothesis_file} (or end your last message with `HYPOTHESIS: ...` and `EXPECTED: ...` lines).
- To share an insight with the other agents: rrma-post "short text".
"""

TREE_NOTE = """- You build on trial {parent} (the current best). To build on another successful trial
  instead, run `rrma-rebase TRIAL_ID` first: it replaces your working copy with that trial's files.
  You may choose: {offered}.
"""

PROOF_NOTE = """- This is a proof task: write the proof body only (the tactics, never the statement) to the
  file {proof_file} in your working directory. The proof checker is the only judge.
"""


class _StopWhen(threading.Event):
    """An event that is also set while ``predicate()`` holds (spawn polls ``is_set``)."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        super().__init__()
        self.predicate = predicate

    def is_set(self) -> bool:
        return super().is_set() or self.predicate()


def program_paths(executable: str) -> list[Path]:
    """Where the program lives, to show it read-only in the sandbox (whose /tmp is private, so an install
    under /tmp would be missing): its folder, its link target's folder, the ``node_modules`` tree around
    either, and the prefix of the interpreter its ``#!`` line names (a virtualenv: the whole env)."""
    given = Path(executable)
    real = given.resolve()
    found = [given.parent, real.parent]
    for folder in (given.parent, real.parent):
        modules = next((a for a in (folder, *folder.parents) if a.name == "node_modules"), None)
        if modules is not None:
            found.append(modules)
    try:
        with open(real, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        first = b""
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", "replace").split()
        interpreter = words[0] if words else ""
        if interpreter.endswith("/env") and len(words) > 1:  # #!/usr/bin/env python3: the one on PATH
            interpreter = shutil.which(words[1]) or ""
        if interpreter:
            binary = Path(interpreter)
            prefix = binary.parent.parent
            found.append(prefix if (prefix / "pyvenv.cfg").is_file() else binary.parent)
            found.append(binary.resolve().parent)
    roots = {Path("/"), Path.home().resolve()}
    return [p for p in dict.fromkeys(found) if p not in roots]


def _shebang() -> str:
    exe = sys.executable
    return f"#!{exe} -s" if len(exe) < 120 and not any(c.isspace() for c in exe) else "#!/usr/bin/env python3"


class CodingAgent(Agent):
    """An external coding agent's program as a research agent; subclasses pick the preset."""

    backend = "command"
    preset_name = "command"
    params_model = CodingAgentParams  # params: the price only (checked at load; again below for a built task)
    sections = {"coding": CodingAgentConfig}  # agents[].coding: how its program runs (agents/coding/settings.py)

    def __init__(self, config: AgentConfig, task: TaskConfig, seed: int = 0) -> None:
        super().__init__(config, task, seed)
        self.preset: Preset = PRESETS[self.preset_name]
        self.settings = coding_settings(config)
        params = dict(config.params)
        if "api_key" in params:
            raise AgentError(f"agent {config.name}: do not put API keys in the task file (it is copied into the run "
                             "log); set the key in the environment, or name its variable with coding.key_env")
        unknown = sorted(set(params) - {"price"})
        if unknown:
            raise AgentError(f"agent {config.name}: params.{unknown[0]} is not an option of backend {self.backend}: its "
                             "settings are under agents[].coding (docs/agents.md, Coding agents)")
        self.model = config.model
        try:
            self.template = Command.template(self.settings) if isinstance(self.preset, Command) else None
            program = self.preset.executable(self.settings)
        except PresetError as exc:
            raise AgentError(f"agent {config.name}: {exc}") from None
        found = shutil.which(program) if program else None
        if found is None:
            raise AgentError(f"agent {config.name}: backend {self.backend} runs `{program}`, which is not on PATH; "
                             f"install it ({self.preset.install}) or set agents[].coding.executable to its path")
        self.executable = os.path.abspath(found)
        sources = self.preset.sources(self.settings, self.model)
        self.key_source: str | None = next((v for v in sources if os.environ.get(v)), None)
        self.key = os.environ.get(self.key_source) if self.key_source else None
        if self.key is None and sources and self.settings.require_key:
            raise AgentError(f"agent {config.name}: no API key for backend {self.backend}: set {' or '.join(sources)} "
                             "in the environment (keys are never read from the task file; coding.key_env names "
                             "another variable, coding.require_key: false runs without one)")
        self.key_target = self.preset.key_target(self.key_source) if self.key_source else None
        self.redactor = Redactor([self.key])
        for value in [*self.settings.args, *(self.template or []), self.settings.executable or ""]:
            if self.redactor.text(value) != value:
                raise AgentError(f"agent {config.name}: coding settings hold something that looks like an API key "
                                 f"({self.redactor.text(value)!r}); keys come from the environment only")
        self.stream_format = self.settings.stream or self.preset.stream
        self.price = price_for(self.model or "", params)
        self.meter = UsageMeter(config.max_run_tokens, config.budget_usd)
        self.memory: list[str] = []
        self.pending_memory: dict[str, str] = {}
        self.step = 0
        self.runs = 0  # runs of the program so far (RRMA_AGENT_RUN)
        self.system_recorded = False
        self.stopped: str | None = None

    # ------------------------------------------------------------------ trace

    def turn(self, ctx: Context, role: str, **fields: Any) -> None:
        self.step += 1
        clean = {k: self.redactor.value(v) for k, v in fields.items() if v is not None}
        clean.setdefault("model", self.model)
        ctx.record_turn(step=self.step, role=role, **clean)

    def _record_system(self, ctx: Context) -> None:
        reason = sandbox.unavailable_reason()
        shown = ("bubblewrap: only its scratch directory writable; run dir, held-out data and key files hidden; "
                   "network shared") if reason is None else f"off: {reason}"
        key = (f"{self.key_target} (from {self.key_source}; the value is never recorded)" if self.key_target
               else "none")
        s = self.settings
        blind = ""
        if (self.config.budget_usd is not None and self.price == FREE and self.stream_format in ("codex", "text")):
            blind = (f"; budget_usd cannot bite: {self.stream_format} streams report no cost and model "
                     f"{self.model or '(default)'} has no price here (set params.price)")
        self.turn(ctx, "system", text=f"{self.backend} as a research agent: {self.executable} ({self.stream_format} "
                                      f"stream); turn cap {s.max_turns}, {s.seconds:g} s and {s.memory_mb} MiB per run, "
                                      f"{s.attempts} runs per proposal; sandbox {shown}; key {key}{blind}",
                  args={"backend": self.backend, "executable": self.executable, "stream": self.stream_format,
                        "max_turns": s.max_turns, "seconds": s.seconds, "memory_mb": s.memory_mb,
                        "attempts": s.attempts, "permissions": s.permissions, "key_env": self.key_target,
                        "sandbox": shown})
        self.system_recorded = True

    # ------------------------------------------------------------------ proposals

    def propose(self, ctx: Context) -> Proposal | None:
        """Up to ``coding.attempts`` runs of the program; None once a cap is reached or every run failed."""
        if self.stopped:
            return None
        if not ctx.history:
            self.memory = []  # a control arm: nothing carried between proposals
        if not self.system_recorded:
            self._record_system(ctx)
        attempts = self.settings.attempts
        for attempt in range(attempts):
            reason = self.meter.exhausted()
            if reason:
                self.stopped = reason
                self.turn(ctx, "error", text=f"stopping: {reason}")
                return None
            proposal = self._run(ctx, attempt)
            if proposal is not None:
                self._remember(proposal)
                return proposal
            if self.stopped or ctx.stopping():
                return None
        self.turn(ctx, "error", text=f"no usable proposal after {attempts} run(s) of {self.backend}; this agent "
                                     "stops for the run")
        return None

    def _run(self, ctx: Context, attempt: int) -> Proposal | None:
        self.runs += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", self.name)[:40]
        root = Path(tempfile.mkdtemp(prefix=f"rrma-agent-{safe}-"))
        try:
            return self._run_in(ctx, attempt, root)
        finally:
            # whatever the agent made of it (a chain of folders thousands deep, folders chmod-ed 000): gone, no raise
            removal = files.remove_tree(root)
            if not removal.complete:
                self.turn(ctx, "error", text=f"scratch directory: {removal.note()}")

    def _run_in(self, ctx: Context, attempt: int, root: Path) -> Proposal | None:
        work, home, bin_dir, tmp = root / "work", root / "home", root / "bin", root / "tmp"
        for folder in (work, home, bin_dir, tmp):
            folder.mkdir()
        materialize(ctx.files, work)
        offered = self._offer(ctx, root)
        prompt = self._prompt(ctx, root, offered)
        prompt_file = root / "prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        self._install_tools(bin_dir)
        rules = EditRules(list(ctx.editable), list(self.task.workspace.readonly))
        present = sorted(ctx.files)
        guard = self._guard(ctx, root)
        spec = LaunchSpec(
            executable=self.executable, prompt=prompt, prompt_file=prompt_file, workdir=work, home=home,
            model=self.model, max_turns=self.settings.max_turns, permissions=self.settings.permissions,
            sandboxed=guard is not None and sandbox.unavailable_reason() is None,
            files=[p for p in present if rules.is_editable(p)], other_files=[p for p in present if not rules.is_editable(p)],
            extra_args=list(self.settings.args), template=self.template)
        launch = self.preset.launch(spec)
        env = self._env(ctx, root, launch.env)
        shown = ["<prompt>" if a == spec.prompt_arg or a == prompt else a for a in launch.argv]
        self.turn(ctx, "user", text=prompt, args={"run": self.runs, "attempt": f"{attempt + 1}/{self.settings.attempts}",
                                                  "parent": ctx.parent_id, "argv": shown})
        parser = make_parser(self.stream_format, self.price, self.model)

        broken: list[BaseException] = []

        def on_line(line: str) -> str | None:
            try:
                for turn in parser.feed(line):
                    self._emit(ctx, turn)
            except Exception as exc:  # the harness failed (the log, a bug): stop the program, report after
                broken.append(exc)
                return f"the harness could not record the stream: {type(exc).__name__}: {exc}"
            return self._over_cap(parser)

        budget = Budget(seconds=self.settings.seconds, memory_mb=self.settings.memory_mb, max_processes=MAX_PROCESSES,
                        max_output_bytes=OUTPUT_LIMIT)
        secret = {self.key_target: self.key} if self.key_target and self.key else None
        try:
            result = spawn(launch.argv, cwd=work, budget=budget, env=env, on_line=on_line, guard=guard,
                                 secret_env=secret, max_line_chars=LINE_LIMIT, cancel=_StopWhen(ctx.stopping))
        except FileNotFoundError as exc:
            self.stopped = f"{self.executable} cannot be started: {exc}"
            self.turn(ctx, "error", text=f"stopping: {self.stopped}")
            return None
        if broken:
            raise broken[0]
        for turn in parser.finish():
            self._emit(ctx, turn)
        self.meter.add(parser.usage, parser.cost_so_far)
        self._read_posts(ctx, root)
        failure = self._failure(result, parser)
        if failure is not None:
            self.turn(ctx, "error", text=failure, latency_s=round(result.seconds, 3),
                      args={"status": result.status.value, "returncode": result.returncode,
                            "seconds": round(result.seconds, 3), "turns": parser.turns,
                            "cost_usd": round(parser.cost_so_far, 6), "guarded": result.guarded})
            cap = self.meter.exhausted()
            if cap:
                self.stopped = cap
                self.turn(ctx, "error", text=f"stopping: {cap}")
            return None
        return self._proposal(ctx, root, work, offered, parser, rules)

    def _emit(self, ctx: Context, turn: dict[str, Any]) -> None:
        fields = dict(turn)
        role = fields.pop("role")
        if fields.get("args") is not None:
            fields["args"] = clip_value(fields["args"])
        self.turn(ctx, role, **fields)

    def _over_cap(self, parser: StreamParser) -> str | None:
        """Why the running program must be killed now (a cap reached), or None."""
        usd = self.meter.usd + parser.cost_so_far
        if self.meter.max_usd is not None and usd >= self.meter.max_usd:
            return f"cost cap reached: ${usd:.4f} >= budget_usd ${self.meter.max_usd:.4f}"
        tokens = self.meter.tokens + parser.usage.total
        if self.meter.max_tokens is not None and tokens >= self.meter.max_tokens:
            return f"token cap reached: {tokens} >= max_run_tokens {self.meter.max_tokens}"
        cap = self.settings.max_turns * (2 if parser.native_turn_cap else 1)
        if parser.turns > cap:
            return f"turn cap reached: {parser.turns} turns > coding.max_turns {self.settings.max_turns}"
        return None

    def _failure(self, result: ProcessResult, parser: StreamParser) -> str | None:
        """Why this run gives no proposal, or None when it ended well."""
        what = f"{self.backend} run {self.runs}"
        if result.status == Status.timeout:
            return f"{what}: killed after {self.settings.seconds:g} s (coding.seconds); no proposal from this run"
        if result.status == Status.aborted:
            return f"{what}: killed: {result.reason}"
        if parser.failure:  # what the tool said is worth more than its exit code
            return f"{what}: {parser.failure}" + ("" if result.status == Status.ok else f" ({result.reason})")
        if result.status != Status.ok:
            tail = "\n".join(result.output.splitlines()[-15:])
            return clip(f"{what}: {result.reason}" + (f"; last output:\n{tail}" if tail.strip() else ""))
        return None

    def _proposal(self, ctx: Context, root: Path, work: Path, offered: dict[str, dict[str, str]],
                  parser: StreamParser, rules: EditRules) -> Proposal | None:
        base, parent = ctx.files, ctx.parent_id
        rebased = self._read_text(root / "rebase").strip()
        if rebased:
            if rebased in offered:
                base, parent = offered[rebased], rebased
            else:
                self.turn(ctx, "error", text=f"rrma-rebase named {rebased!r}, which was not offered; ignored")
                rebased = ""
        ignore = [*self.preset.ignore, *self.settings.ignore]
        if ctx.theorem:
            ignore.append(self.settings.proof_file)
        diff = diff_tree(base, work, rules, ignore, max_entries=self.settings.scan_entries,
                         max_bytes=self.settings.scan_bytes)
        if diff.new_ignored:
            shown = ", ".join(diff.new_ignored[:20]) + (f" and {len(diff.new_ignored) - 20} more"
                                                        if len(diff.new_ignored) > 20 else "")
            self.turn(ctx, "system", text=f"new files outside workspace.editable, not part of the proposal: {shown}")
        if diff.problems:
            self.turn(ctx, "error", text="the working copy cannot be proposed: " + "; ".join(diff.problems))
            return None
        proof = None
        if ctx.theorem:
            text = self._read_text(work / self.settings.proof_file).strip()
            proof = self.redactor.text(text) if text else None
        if not diff.edits and proof is None:
            missing = f" and wrote no proof to {self.settings.proof_file}" if ctx.theorem else ""
            self.turn(ctx, "error", text=f"{self.backend} run {self.runs}: the agent changed no editable file{missing}")
            return None
        edits = [self._scrub(ctx, e) for e in diff.edits]
        hypothesis, expected = self._hypothesis(root, parser, edits)
        theorem = (ctx.theorem or {}).get("name")
        return Proposal(
            hypothesis=hypothesis, expected_effect=expected, edits=edits, proof=proof,
            theorem=str(theorem) if theorem else None,
            parent=parent if (rebased or self.task.loop.policy == "tree") else None,
            meta={"coding_agent": self.backend, "run": self.runs, "turns": parser.turns,
                  "cost_usd": round(parser.cost_so_far, 6)})

    def _scrub(self, ctx: Context, edit: FileEdit) -> FileEdit:
        """The edit with the key (or anything key-shaped) replaced: a proposed file lands in the run's blobs."""
        clean = edit.model_copy(update={
            "content": self.redactor.text(edit.content) if edit.content is not None else None,
            "replacements": [(self.redactor.text(s), self.redactor.text(r)) for s, r in edit.replacements]})
        if clean != edit:
            self.turn(ctx, "error", text=f"{edit.path}: the edit contained an API key or something shaped like one; "
                                         "it was replaced by [redacted] before the proposal was recorded")
        return clean

    def _hypothesis(self, root: Path, parser: StreamParser, edits: list[FileEdit]) -> tuple[str, str]:
        lines = [x.strip() for x in self._read_text(root / "hypothesis.txt").splitlines() if x.strip()]
        if lines:
            hypothesis, expected = lines[0], " ".join(lines[1:])
        else:
            final = parser.final_text
            said = re.search(r"^\W*HYPOTHESIS:\s*(.+)$", final, re.I | re.M)
            effect = re.search(r"^\W*EXPECTED(?: EFFECT)?:\s*(.+)$", final, re.I | re.M)
            first = next((x.strip() for x in final.splitlines() if x.strip()), "")
            hypothesis = said.group(1).strip() if said else first
            expected = effect.group(1).strip() if effect else ""
        if not hypothesis:
            hypothesis = f"{self.backend} edit of {', '.join(e.path for e in edits) or 'the proof'}"
        return self.redactor.text(hypothesis[:300]), self.redactor.text(expected[:300])

    def _read_posts(self, ctx: Context, root: Path) -> None:
        for line in self._read_text(root / "posts.jsonl").splitlines():
            try:
                post = json.loads(line)
                text = str(post["text"]).strip()
            except (ValueError, KeyError, TypeError):
                self.turn(ctx, "system", text=clip(line, 2000), args={"unparsed": "rrma-post"})
                continue
            if text:
                ctx.post(self.redactor.text(text[: tools_module.POST_LIMIT]), trial_id=None,
                         tags=["insight", self.backend])

    @staticmethod
    def _read_text(path: Path, limit: int = 1_000_000) -> str:
        """A file the agent may have written: read only if it is a regular file, never through a link
        anywhere on its path (the working copy itself may have been replaced by one), never a FIFO."""
        try:
            data = files.read_bytes(path.parent, path.name, limit=limit, truncate=True)
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ the run's surroundings

    def _offer(self, ctx: Context, root: Path) -> dict[str, dict[str, str]]:
        """Tree policy (with history): successful trials the agent may rebase onto, written read-only-in-spirit
        under ``trials/``."""
        if self.task.loop.policy != "tree" or not ctx.history:
            return {}
        offered: dict[str, dict[str, str]] = {}
        for trial in ctx.top:
            if trial.status != "ok" or trial.trial_id == ctx.parent_id or len(offered) >= MAX_OFFERED:
                continue
            try:
                files = ctx.files_of(trial.trial_id)
            except KeyError:
                continue
            materialize(files, root / "trials" / trial.trial_id)
            offered[trial.trial_id] = files
        return offered

    def _prompt(self, ctx: Context, root: Path, offered: dict[str, dict[str, str]]) -> str:
        task = self.task
        parts = [TASK_PROMPT.format(name=task.name, description=task.description.strip()).strip()]
        parts.append(INSTRUCTIONS.format(agent=self.name, parent=ctx.parent_id, metric_note=metric_note(self.task),
                                         editable=", ".join(ctx.editable) or "(none)",
                                         metric=task.metric.name, direction=task.metric.direction,
                                         hypothesis_file=root / "hypothesis.txt").rstrip())
        notes = []
        if offered:
            lines = [f"{t.trial_id} ({t.line()})" for t in ctx.top if t.trial_id in offered]
            notes.append(TREE_NOTE.format(parent=ctx.parent_id, offered="; ".join(lines)).rstrip())
        if ctx.theorem:
            notes.append(PROOF_NOTE.format(proof_file=self.settings.proof_file).rstrip())
        if ctx.role:
            hint = ROLE_HINTS.get(ctx.role.lower(), "")
            notes.append(f"- Your role: the {ctx.role} specialist" + (f" ({hint})" if hint else "")
                         + "; other agents cover the rest and share the blackboard.")
        if notes:
            parts.append("\n".join(notes))
        if ctx.theorem:
            parts.append("# Theorem\n" + json.dumps(ctx.theorem, indent=1, sort_keys=True))
        parts.append(context_text(ctx, self.memory[-8:]))
        return "\n\n".join(parts) + "\n"

    @staticmethod
    def _install_tools(bin_dir: Path) -> None:
        source = Path(tools_module.__file__).read_text(encoding="utf-8")
        for name in tools_module.COMMANDS:
            path = bin_dir / name
            path.write_text(_shebang() + "\n" + source, encoding="utf-8")
            path.chmod(0o755)

    def _env(self, ctx: Context, root: Path, extra: dict[str, str]) -> dict[str, str]:
        home = root / "home"
        env = dict(os.environ)  # spawn removes the credentials (rrma.contain.env) and adds back the one key
        env.update({
            "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state"),
            "TMPDIR": str(root / "tmp"),
            "PATH": os.pathsep.join([str(root / "bin"), os.path.dirname(self.executable), env.get("PATH", os.defpath)]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "RRMA_AGENT": self.name, "RRMA_AGENT_RUN": str(self.runs), "RRMA_WORKSPACE": str(root / "work"),
            "RRMA_PROMPT_FILE": str(root / "prompt.md"), "RRMA_HYPOTHESIS_FILE": str(root / "hypothesis.txt"),
            "RRMA_POST_FILE": str(root / "posts.jsonl"),
        })
        if (root / "trials").is_dir():
            env.update(RRMA_TRIALS_DIR=str(root / "trials"), RRMA_REBASE_FILE=str(root / "rebase"))
        if ctx.theorem:
            env["RRMA_PROOF_FILE"] = str(root / "work" / self.settings.proof_file)
        env.update(extra)
        return env

    def _guard(self, ctx: Context, root: Path) -> Policy | None:
        mode = sandbox.mode()
        if mode == "off":
            return None
        hidden = (*ctx.hidden, *sandbox.secret_paths())
        extra = [x for x in os.environ.get(READ_ONLY_ENV, "").split(os.pathsep) if x.strip()]
        shown = [p.resolve() for p in (*program_paths(self.executable),
                                       *(Path(x).expanduser() for x in (*self.settings.read_only, *extra)))]
        # never re-expose part of a hidden tree (a program installed inside the run directory stays hidden)
        shown = [p for p in shown if not any(p == h.resolve() or h.resolve() in p.parents for h in hidden)]
        return Policy(read_only=tuple(shown), writable=(root,), hidden=hidden,
                       required=mode == "require", network=True)

    # ------------------------------------------------------------------ memory (history runs)

    def _remember(self, proposal: Proposal) -> None:
        self.pending_memory[proposal.hypothesis] = memory_note(proposal)

    def observe(self, trial: TrialSummary) -> None:
        remember_outcome(self.memory, self.pending_memory, trial)


class ClaudeCodeAgent(CodingAgent):
    """Claude Code (``claude -p --output-format stream-json``)."""

    backend = "claude-code"
    preset_name = "claude-code"


class CodexAgent(CodingAgent):
    """Codex CLI (``codex exec --json``)."""

    backend = "codex"
    preset_name = "codex"


class AiderAgent(CodingAgent):
    """aider (``aider --message-file ... --yes-always``)."""

    backend = "aider"
    preset_name = "aider"


class CommandAgent(CodingAgent):
    """Any program, from the ``coding.command`` template."""

    backend = "command"
    preset_name = "command"
    sections = {"coding": CodingAgentConfig}  # agents[].coding: how its program runs (agents/coding/settings.py)
