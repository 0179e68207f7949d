"""A recorded transcript (real response format) replays into the same run log, deterministically.

The transcript's responses are served by the local wire server to the real SDK. Two replays
must give the same event sequence (timestamps, hashes and wall-clock measurements aside: those
are the only fields a replay cannot fix), the agent must send the same follow-up messages it
sent when the transcript was recorded, and the trace must match the exchanged messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_fixtures import ANTHROPIC_KEY, OPENAI_KEY, demo_task
from llm_wire import WireServer
from record_transcript import FIXTURES, PATHS, SUFFIX, load, replies_of
from trace_check import agent_turns, check_anthropic, check_openai

from rrma.log.store import RunStore
from rrma.run.loop import start_run

VOLATILE = {"ts", "hash", "prev", "latency_s", "seconds", "wall_seconds", "peak_rss_mb", "versions", "run_json_sha256"}
RERECORD = "re-record with `python tests/agents/record_transcript.py {provider}` if the bench or tools changed"


def normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def replay(provider: str, server: WireServer, runs: Path) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    header, entries = load(FIXTURES / f"{provider}_demo.jsonl")
    start = len(server.exchanges)
    server.script(PATHS[provider], replies_of(entries))  # type: ignore[arg-type]
    task = demo_task([{**header["agent"], "base_url": server.url + SUFFIX[provider]}], **header["overrides"])
    result = start_run(task, runs, run_id="replay")
    assert result.reason == "max_trials"
    assert server.remaining(PATHS[provider]) == 0
    events = RunStore(result.run_dir).scan().events
    projection = [normalized({"seq": e.seq, "kind": e.kind, "actor": e.actor, "data": e.data.model_dump(mode="json")})
                  for e in events]
    return projection, server.exchanges[start:], entries


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_transcript_replays_deterministically(provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with WireServer() as server:
        first, exchanges, entries = replay(provider, server, tmp_path / "a")
        second, _, _ = replay(provider, server, tmp_path / "b")
    assert first == second
    assert len(exchanges) == len(entries)
    for ex, entry in zip(exchanges, entries, strict=True):
        recorded = entry["request"]
        assert len(ex.body["messages"]) == recorded["n_messages"], RERECORD.format(provider=provider)
        if recorded["n_messages"] > 1:  # follow-ups: tool results and nudges, as when recorded
            assert ex.body["messages"][-1] == recorded["last_message"], RERECORD.format(provider=provider)
    events = RunStore(tmp_path / "a" / "replay").scan().events
    turns = agent_turns(events, "rec")
    checked = (check_anthropic if provider == "anthropic" else check_openai)(exchanges, turns)
    assert checked >= 4
    kinds = [p["kind"] for p in first]
    assert kinds.count("trial.proposed") == 3 and kinds[-1] == "run.finished"  # baseline + 2 agent trials
