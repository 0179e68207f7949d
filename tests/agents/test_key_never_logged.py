"""The API key never reaches the run directory or the SQLite export, even when a server echoes it.

Each run has one agent that works normally and one whose server answers 401 with the key in
the error text (as a misconfigured proxy might). The key was really sent (the servers saw it in
the Authorization header), and no file under the run dir, nor the exported database, contains
it or a recognisable fragment of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_fixtures import ANTHROPIC_KEY, FAST, OPENAI_KEY, demo_task
from llm_wire import Reply, WireServer, a_message, a_tool, o_call, o_completion

from rrma.log.export import export_runs
from rrma.run.loop import start_run


def leaks(root: Path, secret: str) -> list[str]:
    fragments = [secret.encode(), secret[-16:].encode(), secret[:16].encode()]
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path} contains {frag.decode()!r}" for frag in fragments if frag in data]
    return found


def echo_key_reply(status: int, key: str, anthropic: bool) -> Reply:
    text = f"invalid x-api-key: {key} (Authorization: Bearer {key})"
    body = ({"type": "error", "error": {"type": "authentication_error", "message": text}} if anthropic
            else {"error": {"message": text, "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})
    return Reply(status=status, body=body)


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_key_is_absent_from_run_dir_and_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    anthropic = backend == "anthropic"
    key = ANTHROPIC_KEY if anthropic else OPENAI_KEY
    monkeypatch.setenv("ANTHROPIC_API_KEY" if anthropic else "OPENAI_API_KEY", key)
    path = "/v1/messages" if anthropic else "/v1/chat/completions"
    good: list[Any] = []
    for name in ("X", "Y"):  # two proposals: the good agent also gets the trial the bad one gave back
        edit = {"path": "objective.py", "replacements": [{"search": f"{name} = 0.0", "replace": f"{name} = 1.0"}]}
        submit = {"hypothesis": f"{name} = 1.0", "expected_effect": "lower loss"}
        if anthropic:
            good += [a_message(a_tool("edit_file", edit)), a_message(a_tool("submit_trial", submit))]
        else:
            good += [o_completion(None, [o_call("edit_file", edit)]),
                     o_completion(None, [o_call("submit_trial", submit)])]
    with WireServer() as ok_server, WireServer() as bad_server:
        ok_server.script(path, good)
        bad_server.script(path, [echo_key_reply(401, key, anthropic)])
        suffix = "" if anthropic else "/v1"
        model = "claude-sonnet-test" if anthropic else "qwen-test"
        task = demo_task([
            {"name": "good", "backend": backend, "model": model, "base_url": ok_server.url + suffix, "params": FAST},
            {"name": "bad", "backend": backend, "model": model, "base_url": bad_server.url + suffix, "params": FAST},
        ], **{"budget.max_trials": 2})
        result = start_run(task, tmp_path / "runs", run_id=f"leak-{backend}")
        seen = [ex.headers.get("authorization") for ex in ok_server.exchanges + bad_server.exchanges]
    assert seen and all(h == f"Bearer {key}" for h in seen)  # the key was really used
    assert [t.agent for t in result.state.agent_trials()] == ["good", "good"]
    errors = [e for e in result.state.notes if "bad" in e]
    assert errors and "[redacted]" in errors[0] and "401" in errors[0]  # the echo was scrubbed, not dropped
    db = tmp_path / "export.db"
    export_runs([result.run_dir], db)
    assert db.stat().st_size > 0
    assert leaks(tmp_path / "runs", key) == []
    assert leaks(tmp_path, key) == []  # the .db bytes (and its -wal/-journal, if any) too


def test_trial_processes_do_not_inherit_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    snoop = {"path": "objective.py", "replacements": [
        {"search": "import random\n", "replace": "import random\nprint('env:', os.environ.get('ANTHROPIC_API_KEY'))\n"}]}
    with WireServer() as server:
        server.script("/v1/messages", [a_message(a_tool("edit_file", snoop)),
                                       a_message(a_tool("submit_trial", {"hypothesis": "h", "expected_effect": "e"}))])
        task = demo_task([{"name": "c", "backend": "anthropic", "model": "m", "base_url": server.url, "params": FAST}],
                         **{"budget.max_trials": 1})
        result = start_run(task, tmp_path, run_id="snoop")
    assert result.state.trials["t0001"].status == "ok"
    assert leaks(tmp_path, ANTHROPIC_KEY) == []
