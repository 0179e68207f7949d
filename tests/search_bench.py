"""Running `bench coq --agent search` on one small Coq file a test writes, and finding the run it made."""

from __future__ import annotations

from pathlib import Path


def search_bench(tmp_path: Path, name: str, source: str, *args: str) -> Path:
    """Write ``source`` to ``tmp_path/name``, run ``bench coq --source`` on it with the search agent (``--quiet``,
    runs under ``tmp_path/runs``, then ``args``), assert it exited 0, and return its one run directory."""
    from benches.coq.bench import main

    src = tmp_path / name
    src.write_text(source)
    runs = tmp_path / "runs"
    assert main(["--source", str(src), "--agent", "search", "--runs", str(runs), "--quiet", *args]) == 0
    [run] = list(runs.iterdir())
    return run
