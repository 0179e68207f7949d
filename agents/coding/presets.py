"""How each coding agent is started: its command line, its key, its stream format.

Why it exists: Claude Code, Codex CLI and aider each take the prompt, the model, a turn cap and
their permission mode differently, read their key from a different variable and print a
different stream. A :class:`Preset` knows one tool; :class:`~agents.coding.agent.CodingAgent`
does everything else the same way for all of them (workspace copy, sandbox, budgets, trace,
proposal). ``command`` runs any program from a template.

Sources of the flags (also cited in tests/fixtures/coding_agents/README.md): Claude Code's CLI
reference and headless docs (``-p``, ``--output-format stream-json`` which needs ``--verbose``,
``--max-turns``, ``--model``, ``--permission-mode``, ``--dangerously-skip-permissions``, which as
root needs ``IS_SANDBOX=1``); Codex's ``docs/exec.md`` (``codex exec --json``,
``--skip-git-repo-check``, ``--full-auto``, ``--dangerously-bypass-approvals-and-sandbox``, the
``CODEX_API_KEY`` variable that only ``exec`` reads); aider's scripting docs and ``--help``
(``--message-file``, ``--yes-always``, ``--no-git``, ``--no-pretty``, ``--no-stream``,
``--chat-history-file``).

Invariant: a key is never on a command line; it reaches the program only as the one environment
variable :meth:`Preset.key_target` names.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from agents.coding.settings import CodingAgentConfig


class PresetError(ValueError):
    """A coding agent's settings cannot make a command line (no command template, a bad placeholder)."""


@dataclass(frozen=True)
class LaunchSpec:
    """What one run of a coding agent needs on its command line."""

    executable: str  # absolute path of the program
    prompt: str  # the whole prompt
    prompt_file: Path  # the same text in a file (outside the working copy)
    workdir: Path  # the working copy: the program's cwd
    home: Path  # the program's private HOME (its config and history)
    model: str | None
    max_turns: int
    permissions: str  # bypass | edits
    sandboxed: bool  # runs in rrma's bubblewrap sandbox
    files: list[str] = field(default_factory=list)  # editable files present in the working copy
    other_files: list[str] = field(default_factory=list)  # the rest of the working copy (read-only context)
    extra_args: list[str] = field(default_factory=list)  # coding.args
    template: list[str] | None = None  # backend command: the argv template

    @property
    def prompt_arg(self) -> str:
        """The prompt on the command line, or a pointer to the prompt file when it is too long for one
        argument (Linux caps one argument at 128 KiB)."""
        if len(self.prompt.encode("utf-8")) <= 100_000:
            return self.prompt
        return f"Your instructions are in the file {self.prompt_file}. Read it first and follow it."


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]  # set for the program (never a key: that goes through spawn's secret_env)


class Preset:
    """One tool. Subclasses set the class attributes and build the command line."""

    name = "base"
    program: str | None = None  # looked up on PATH unless coding.executable says otherwise
    stream = "text"
    key_sources: tuple[str, ...] = ()  # variables the key is read from, first set wins (coding.key_env replaces)
    target: str | None = None  # the variable the program reads it from (None: the source's own name)
    ignore: tuple[str, ...] = ()  # the tool's own state files in the working copy: never part of a proposal
    install: str = ""  # how to get the program (for the error when it is missing)

    def sources(self, config: CodingAgentConfig, model: str | None) -> tuple[str, ...]:
        return (config.key_env,) if config.key_env else self.key_sources

    def key_target(self, source: str) -> str:
        return self.target or source

    def executable(self, config: CodingAgentConfig) -> str | None:
        return config.executable or self.program

    def launch(self, spec: LaunchSpec) -> Launch:
        raise NotImplementedError


class ClaudeCode(Preset):
    name = "claude-code"
    program = "claude"
    stream = "claude-code"
    key_sources = ("ANTHROPIC_API_KEY",)
    ignore = (".claude/*",)
    install = "npm install -g @anthropic-ai/claude-code"

    def launch(self, spec: LaunchSpec) -> Launch:
        argv = [spec.executable, "-p", spec.prompt_arg, "--output-format", "stream-json", "--verbose",
                "--max-turns", str(spec.max_turns)]
        if spec.model:
            argv += ["--model", spec.model]
        env = {"DISABLE_AUTOUPDATER": "1"}
        if spec.permissions == "bypass":
            argv.append("--dangerously-skip-permissions")
            if spec.sandboxed:  # root inside rrma's sandbox: Claude Code refuses bypass as root without this
                env["IS_SANDBOX"] = "1"
        else:
            argv += ["--permission-mode", "acceptEdits"]
        return Launch([*argv, *spec.extra_args], env)


class Codex(Preset):
    name = "codex"
    program = "codex"
    stream = "codex"
    key_sources = ("CODEX_API_KEY", "OPENAI_API_KEY")
    target = "CODEX_API_KEY"  # the variable `codex exec` reads an API key from
    install = "npm install -g @openai/codex"

    def launch(self, spec: LaunchSpec) -> Launch:
        argv = [spec.executable, "exec", "--json", "--skip-git-repo-check"]
        if spec.model:
            argv += ["--model", spec.model]
        argv += ["--dangerously-bypass-approvals-and-sandbox"] if spec.permissions == "bypass" else ["--full-auto"]
        return Launch([*argv, *spec.extra_args, spec.prompt_arg], {})


class Aider(Preset):
    name = "aider"
    program = "aider"
    stream = "aider"
    ignore = (".aider*",)
    install = "python -m pip install aider-install && aider-install"
    READ_LIMIT = 30  # other workspace files given as read-only context

    def sources(self, config: CodingAgentConfig, model: str | None) -> tuple[str, ...]:
        if config.key_env:
            return (config.key_env,)
        name = (model or "").lower()
        provider = name.split("/")[0] if "/" in name else ""  # litellm's provider prefix decides first
        by_provider = {"openrouter": "OPENROUTER_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
                       "deepseek": "DEEPSEEK_API_KEY", "openai": "OPENAI_API_KEY"}
        if provider in by_provider:
            return (by_provider[provider],)
        for marker, var in (("claude", "ANTHROPIC_API_KEY"), ("gemini", "GEMINI_API_KEY"), ("deepseek", "DEEPSEEK_API_KEY")):
            if marker in name:
                return (var,)
        return ("OPENAI_API_KEY",) if name else ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")

    def launch(self, spec: LaunchSpec) -> Launch:
        argv = [spec.executable, "--message-file", str(spec.prompt_file), "--yes-always", "--no-git",
                "--no-auto-commits", "--no-pretty", "--no-stream", "--no-check-update", "--no-show-model-warnings",
                "--analytics-disable", "--chat-history-file", str(spec.home / ".aider.chat.history.md"),
                "--input-history-file", str(spec.home / ".aider.input.history")]
        if spec.model:
            argv += ["--model", spec.model]
        for path in spec.other_files[: self.READ_LIMIT]:
            argv += ["--read", path]
        return Launch([*argv, *spec.extra_args, *spec.files], {})


PLACEHOLDERS = ("{prompt}", "{prompt_file}", "{workdir}", "{model}", "{max_turns}")
COMMAND_ENV = "RRMA_AGENT_COMMAND"  # the template when the task gives no coding.command


class Command(Preset):
    name = "command"
    stream = "text"
    install = "set agents[].coding.command (or $RRMA_AGENT_COMMAND) to the program and its arguments"

    @staticmethod
    def template(config: CodingAgentConfig) -> list[str]:
        if config.command:
            return list(config.command)
        raw = os.environ.get(COMMAND_ENV, "").strip()
        if not raw:
            raise PresetError(f"backend command needs agents[].coding.command (a list: the program and its arguments, "
                              f"with {', '.join(PLACEHOLDERS)}) or ${COMMAND_ENV}")
        try:
            return shlex.split(raw)
        except ValueError as exc:
            raise PresetError(f"${COMMAND_ENV}: {exc}") from None

    def executable(self, config: CodingAgentConfig) -> str | None:
        return config.executable or self.template(config)[0]

    def launch(self, spec: LaunchSpec) -> Launch:
        assert spec.template is not None
        values = {"{prompt}": spec.prompt, "{prompt_file}": str(spec.prompt_file), "{workdir}": str(spec.workdir),
                  "{model}": spec.model or "", "{max_turns}": str(spec.max_turns)}
        argv = [spec.executable]
        for arg in spec.template[1:]:
            for name, value in values.items():
                arg = arg.replace(name, value)
            argv.append(arg)
        return Launch([*argv, *spec.extra_args], {})


PRESETS: dict[str, Preset] = {p.name: p for p in (ClaudeCode(), Codex(), Aider(), Command())}
