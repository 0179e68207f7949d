"""The coding agents' settings (``agents[].coding``), as the coding-agent backends declare them (rrma/declare.py).

Why it exists: how a coding agent's program is run (its executable, turn cap, wall clock, memory, what the
harness reads back) means something only to the coding-agent backends (claude-code, codex, aider, command),
so the model lives here, beside them, and :class:`~agents.coding.agent.CodingAgent` declares it as its
``coding`` section; the task is checked against it when it is loaded, with errors naming the field
(``agents.0.coding.max_turns: ...; allowed: from 1 to 10,000``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agents.llm.settings import PriceParams
from rrma.declare import PluginSettings
from rrma.task import MAX_MEBIBYTES, MAX_SECONDS
from rrma.workspace import MAX_FILE_BYTES, MAX_SCAN_BYTES, MAX_SCAN_ENTRIES


class CodingAgentConfig(PluginSettings):
    """How a coding-agent backend (claude-code, codex, aider, command) runs its program (agents/coding)."""

    executable: str | None = None
    """Program a preset runs (default: claude, codex or aider looked up on PATH); a path points it at another binary."""
    command: list[str] | None = None
    """backend command: the argv to run; {prompt}, {prompt_file}, {workdir}, {model}, {max_turns} are filled in (default: $RRMA_AGENT_COMMAND)."""
    args: list[str] = Field(default_factory=list)
    """Extra arguments appended to the preset's command line."""
    stream: Literal["claude-code", "codex", "aider", "text"] | None = None
    """How the program's output becomes the trace (default: the preset's own format; text for command)."""
    seconds: float = Field(900.0, gt=0, le=MAX_SECONDS)
    """Wall-clock limit of one run of the agent's program (seconds); a hung agent is killed and the run goes on."""
    max_turns: int = Field(40, ge=1, le=10_000)
    """Turn cap of one run: passed to the tool where it has one (claude --max-turns), counted by the harness otherwise."""
    memory_mb: int = Field(4096, gt=0, le=MAX_MEBIBYTES)
    """Memory limit of the agent program's whole process tree (MiB)."""
    permissions: Literal["bypass", "edits"] = "bypass"
    """bypass: the tool asks for nothing (rrma's sandbox contains it); edits: the tool's own edit-only approval mode."""
    key_env: str | None = None
    """Environment variable the one API key is read from (default: the preset's, e.g. ANTHROPIC_API_KEY); never the key."""
    require_key: bool = True
    """Refuse to start without that key (false: e.g. a local model server that needs none)."""
    attempts: int = Field(2, ge=1, le=100)
    """Runs per proposal when one ends without a usable change (crash, hang, no edit, turn cap)."""
    proof_file: str = "proof.txt"
    """Proof tasks: the file in the agent's working copy that holds the proof body when it exits."""
    ignore: list[str] = Field(default_factory=list)
    """Globs of working-copy files that are never part of a proposal (beyond the preset's own tool state)."""
    scan_entries: int = Field(MAX_SCAN_ENTRIES, ge=1, le=1_000_000)
    """Entries (files, folders, links) of the working copy the harness looks at after a run; past it the run gives no proposal."""
    scan_bytes: int = Field(MAX_SCAN_BYTES, ge=MAX_FILE_BYTES, le=2**31)  # read into the harness: at most 2 GiB
    """Bytes of the working copy the harness reads after a run (editable files and the parent's own; others are never read); past it the run gives no proposal."""
    read_only: list[str] = Field(default_factory=list)
    """More paths the program needs, shown read-only in its sandbox (its own install is found automatically)."""


def coding_settings(config: Any) -> CodingAgentConfig:
    """The ``coding`` section of an agent entry (an :class:`rrma.task.AgentConfig`): the validated model a loaded
    task holds, checked here when the entry was built by hand, defaults where it has none."""
    found = config.section("coding")
    return found if isinstance(found, CodingAgentConfig) else CodingAgentConfig.model_validate(found or {})


__all__ = ["CodingAgentConfig", "coding_settings"]


class CodingAgentParams(PluginSettings):
    """``agents[].params`` of a coding-agent backend: only the price; how its program runs is ``agents[].coding``."""

    price: PriceParams | None = None
    """USD per million tokens, {input, output, cache_read, cache_write}, for the cost of a program whose stream reports tokens but no cost (None: the model's list price)."""

    @model_validator(mode="before")
    @classmethod
    def _say_where_settings_go(cls, data: Any) -> Any:
        """A key pasted into the task file, or a loop option of the LLM backends, said as what it is."""
        if isinstance(data, dict):
            if "api_key" in data:
                raise ValueError("do not put API keys in the task file (it is copied into the run log); set the key "
                                 "in the environment, or name its variable with coding.key_env")
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise ValueError(f"{unknown[0]} is not an option of a coding backend: its settings are under "
                                 "agents[].coding (docs/agents.md, Coding agents)")
        return data
