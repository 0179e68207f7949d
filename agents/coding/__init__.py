"""Coding agents (Claude Code, Codex CLI, aider, any command) as research agents.

:mod:`agents.coding.agent` runs one program per proposal in a sandboxed copy of the parent's
workspace; :mod:`agents.coding.presets` knows each tool's command line and key;
:mod:`agents.coding.streams` turns each tool's output into the trace; :mod:`agents.coding.workspace`
turns the working copy into the proposal; :mod:`agents.coding.tools` is ``rrma-post`` and
``rrma-rebase``, run inside the sandbox. docs/agents.md (Coding agents) has the YAML of each preset.
"""
