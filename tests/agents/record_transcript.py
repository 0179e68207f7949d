"""Record a transcript: run a scripted agent session on the demo bench and save what was exchanged.

Usage: ``python tests/agents/record_transcript.py anthropic|openai [OUT.jsonl]`` (default
``tests/fixtures/transcripts/<provider>_demo.jsonl``). The session is the scripted one of
``test_anthropic_wire.py`` / ``test_openai_wire.py`` (non-streaming), served by the local wire
server through the real SDK. Line 1 is a header (format, provider, the agent config and task
overrides used); each further line is one HTTP exchange: the response exactly as served (status,
headers, JSON body in the provider's format) and a summary of the request (message count, the
last message, a sha256 of the canonical request body).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from llm_wire import Reply, WireServer

FORMAT = "rrma-llm-transcript"
VERSION = 1
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions"}
SUFFIX = {"anthropic": "", "openai": "/v1"}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def header_for(provider: str) -> dict[str, Any]:
    model = "claude-sonnet-test" if provider == "anthropic" else "qwen-test"
    return {
        "format": FORMAT, "version": VERSION, "provider": provider, "bench": "demo",
        "agent": {"name": "rec", "backend": provider, "model": model, "max_tokens": 1024,
                  "params": {"retry_base_s": 0.01, "retry_max_s": 0.05, "stream": False}},
        "overrides": {"budget.max_trials": 2, "noise.baseline_repeats": 1, "budget.max_concurrent": 1},
    }


def request_summary(body: dict[str, Any]) -> dict[str, Any]:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    messages = body.get("messages") or []
    return {"n_messages": len(messages), "last_message": messages[-1] if messages else None,
            "sha256": hashlib.sha256(canonical.encode()).hexdigest()}


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines or lines[0].get("format") != FORMAT:
        raise ValueError(f"{path}: not an {FORMAT} file (first line must be its header)")
    if lines[0].get("version") != VERSION:
        raise ValueError(f"{path}: transcript version {lines[0].get('version')}, this reader knows {VERSION}")
    return lines[0], lines[1:]


def record(provider: str, out: Path) -> None:
    from llm_fixtures import demo_task

    from rrma.run.loop import start_run

    if provider == "anthropic":
        from test_anthropic_wire import script
        replies = script(False)
        os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-recording-placeholder")
    else:
        from test_openai_wire import script  # type: ignore[no-redef]
        replies = script()  # type: ignore[call-arg]
        os.environ.setdefault("OPENAI_API_KEY", "sk-recording-placeholder")
    header = header_for(provider)
    with WireServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.script(PATHS[provider], replies)
        task = demo_task([{**header["agent"], "base_url": server.url + SUFFIX[provider]}], **header["overrides"])
        result = start_run(task, Path(tmp), run_id="recording")
        if result.reason != "max_trials":
            raise SystemExit(f"the scripted session ended {result.reason}; not recording")
        lines = [header] + [{"path": ex.path, "streamed": ex.streamed, "request": request_summary(ex.body),
                             "response": ex.reply.to_json()} for ex in server.exchanges]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines), encoding="utf-8")
    print(f"wrote {out}: {len(lines) - 1} exchanges")


def replies_of(entries: list[dict[str, Any]]) -> list[Reply]:
    return [Reply.from_json(e["response"]) for e in entries]


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in PATHS:
        raise SystemExit("usage: record_transcript.py anthropic|openai [OUT.jsonl]")
    name = sys.argv[1]
    record(name, Path(sys.argv[2]) if len(sys.argv) > 2 else FIXTURES / f"{name}_demo.jsonl")
