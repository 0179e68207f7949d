"""Each preset's command line and key: the model, the turn cap, the permission mode, the one key variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from coding_fixtures import DEMO, FAKES, REPO, clean

from agents.coding.presets import PRESETS, LaunchSpec, PresetError
from agents.coding.settings import CodingAgentConfig
from rrma.plugins import make_agent
from rrma.task import load_task


def spec(**kw: object) -> LaunchSpec:
    base: dict[str, object] = dict(executable="/bin/tool", prompt="PROMPT", prompt_file=Path("/s/prompt.md"),
                                   workdir=Path("/s/work"), home=Path("/s/home"), model="m1", max_turns=7,
                                   permissions="bypass", sandboxed=True, files=["a.py"], other_files=["b.py"])
    base.update(kw)
    return LaunchSpec(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("preset, kw, argv, env", [
    # Claude Code: print mode, stream-json (needs --verbose), the turn cap, the model; bypass as root needs IS_SANDBOX=1
    ("claude-code", {}, ["/bin/tool", "-p", "PROMPT", "--output-format", "stream-json", "--verbose", "--max-turns", "7",
                         "--model", "m1", "--dangerously-skip-permissions"], {"DISABLE_AUTOUPDATER": "1", "IS_SANDBOX": "1"}),
    # not in rrma's sandbox: IS_SANDBOX is not claimed (Claude Code then refuses bypass as root, rightly)
    ("claude-code", {"sandboxed": False, "model": None},
     ["/bin/tool", "-p", "PROMPT", "--output-format", "stream-json", "--verbose", "--max-turns", "7",
      "--dangerously-skip-permissions"], {"DISABLE_AUTOUPDATER": "1"}),
    ("claude-code", {"permissions": "edits", "extra_args": ["--fallback-model", "x"]},
     ["/bin/tool", "-p", "PROMPT", "--output-format", "stream-json", "--verbose", "--max-turns", "7", "--model", "m1",
      "--permission-mode", "acceptEdits", "--fallback-model", "x"], {"DISABLE_AUTOUPDATER": "1"}),
    # Codex: exec --json, no git check (the copy is no repository), the prompt last; no turn-cap flag exists
    ("codex", {}, ["/bin/tool", "exec", "--json", "--skip-git-repo-check", "--model", "m1",
                   "--dangerously-bypass-approvals-and-sandbox", "PROMPT"], {}),
    ("codex", {"permissions": "edits", "model": None},
     ["/bin/tool", "exec", "--json", "--skip-git-repo-check", "--full-auto", "PROMPT"], {}),
    # aider: the prompt from its file, no confirmations, no git, plain output; editable files in the chat, others read-only
    ("aider", {}, ["/bin/tool", "--message-file", "/s/prompt.md", "--yes-always", "--no-git", "--no-auto-commits",
                   "--no-pretty", "--no-stream", "--no-check-update", "--no-show-model-warnings", "--analytics-disable",
                   "--chat-history-file", "/s/home/.aider.chat.history.md", "--input-history-file",
                   "/s/home/.aider.input.history", "--model", "m1", "--read", "b.py", "a.py"], {}),
    # any command: placeholders filled inside arguments too
    ("command", {"template": ["prog", "--in={prompt_file}", "{workdir}", "-m", "{model}", "--turns", "{max_turns}"]},
     ["/bin/tool", "--in=/s/prompt.md", "/s/work", "-m", "m1", "--turns", "7"], {}),
])
def test_command_lines(preset: str, kw: dict[str, object], argv: list[str], env: dict[str, str]) -> None:
    launch = PRESETS[preset].launch(spec(**kw))
    assert (launch.argv, launch.env) == (argv, env)


def test_a_long_prompt_goes_by_file() -> None:
    """Linux caps one argument at 128 KiB: a longer prompt is passed as a pointer to its file."""
    long = spec(prompt="x" * 200_000)
    assert long.prompt_arg == "Your instructions are in the file /s/prompt.md. Read it first and follow it."
    assert PRESETS["claude-code"].launch(long).argv[2] == long.prompt_arg


@pytest.mark.parametrize("preset, model, key_env, sources, target", [
    ("claude-code", None, None, ("ANTHROPIC_API_KEY",), "ANTHROPIC_API_KEY"),
    ("claude-code", None, "CLAUDE_CODE_OAUTH_TOKEN", ("CLAUDE_CODE_OAUTH_TOKEN",), "CLAUDE_CODE_OAUTH_TOKEN"),
    # codex exec reads CODEX_API_KEY, whichever variable the key came from
    ("codex", None, None, ("CODEX_API_KEY", "OPENAI_API_KEY"), "CODEX_API_KEY"),
    ("codex", None, "MY_OPENAI_KEY", ("MY_OPENAI_KEY",), "CODEX_API_KEY"),
    # aider: the provider of the model decides
    ("aider", "anthropic/claude-sonnet-4-5", None, ("ANTHROPIC_API_KEY",), "ANTHROPIC_API_KEY"),
    ("aider", "gpt-4.1", None, ("OPENAI_API_KEY",), "OPENAI_API_KEY"),
    ("aider", "openrouter/deepseek/deepseek-chat", None, ("OPENROUTER_API_KEY",), "OPENROUTER_API_KEY"),  # the prefix wins
    ("aider", "deepseek-chat", None, ("DEEPSEEK_API_KEY",), "DEEPSEEK_API_KEY"),
    ("aider", None, None, ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"), "ANTHROPIC_API_KEY"),
    # any command: no key unless named
    ("command", None, None, (), None),
])
def test_keys(preset: str, model: str | None, key_env: str | None, sources: tuple[str, ...], target: str | None) -> None:
    p = PRESETS[preset]
    found = p.sources(CodingAgentConfig(key_env=key_env), model)
    assert found == sources
    assert (p.key_target(found[0]) if found else None) == target


def test_command_template_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RRMA_AGENT_COMMAND", "my-agent --file '{prompt_file}'")
    assert PRESETS["command"].executable(CodingAgentConfig()) == "my-agent"
    monkeypatch.setenv("RRMA_AGENT_COMMAND", "my-agent 'unclosed")
    with pytest.raises(PresetError, match=r"^\$RRMA_AGENT_COMMAND: No closing quotation$"):
        PRESETS["command"].executable(CodingAgentConfig())


def test_the_documented_yaml_of_each_preset_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/agents.md shows one YAML block with every preset: it must be a valid task's agents, and each agent must
    start (the fakes stand in for the tools; `my-agent` of the command example is the fake too)."""
    text = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")
    section = text.split("### The YAML of each preset", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    agents = yaml.safe_load(block.group(1))["agents"]
    assert [a["backend"] for a in agents] == ["claude-code", "codex", "aider", "command"]
    clean(monkeypatch)
    for name in ("ANTHROPIC_API_KEY", "CODEX_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(name, "sk-doc-test-0123456789abcdef")
    agents[3]["coding"]["command"][0] = str(FAKES / "fake-agent")
    task = load_task(DEMO, {"agents": agents})
    made = [make_agent(config, task) for config in task.agents]
    assert [type(a).__name__ for a in made] == ["ClaudeCodeAgent", "CodexAgent", "AiderAgent", "CommandAgent"]
    assert [getattr(a, "key_target", None) for a in made] == ["ANTHROPIC_API_KEY", "CODEX_API_KEY", "ANTHROPIC_API_KEY",
                                                               "OPENROUTER_API_KEY"]
