"""``rrma-tui bench --list`` piped to a file (issue 35, item 12).

Before: stdout not a terminal, the list was wider than the 160 columns a pipe gets, so it was printed one line per
row with the second column's header before each value: ``autoresearch: what it is autoresearch: edit train.py…``.
Now a two-column list reads ``name: description``, one line per bench, its header nowhere in a row. Both runs are
real processes whose stdout is a pipe, and one whose stdout is a file (a shell's ``> out.txt``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def benches_on_disk() -> dict[str, str]:
    """name -> the first line of its DESCRIPTION, for every bench folder (read here, not through the CLI)."""
    out = {}
    for folder in sorted((REPO / "benches").iterdir()):
        if folder.is_dir() and ((folder / "bench.py").exists() or (folder / "task.yaml").exists()):
            desc = (folder / "DESCRIPTION").read_text().strip() if (folder / "DESCRIPTION").exists() else ""
            out[folder.name.replace("_", "-")] = desc
    return out


def check_listing(text: str) -> None:
    benches = benches_on_disk()
    lines = [line for line in text.splitlines() if line.strip()]
    assert "what it is" not in text, text  # the header, repeated into every row before
    assert len(lines) == len(benches), lines
    for line, (name, desc) in zip(lines, benches.items(), strict=True):
        assert line == f"{name}: {desc}" if desc else line.startswith(f"{name}:"), (line, name, desc)


def test_bench_list_into_a_pipe_names_each_bench_once() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "bench", "--list"], env=ENV, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # stdout: a pipe
    assert proc.returncode == 0, proc.stderr
    check_listing(proc.stdout)


def test_bench_list_redirected_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "benches.txt"
    with open(out, "w") as fh:
        proc = subprocess.run([sys.executable, "-m", "cli.main", "bench", "--list"], env=ENV, cwd=REPO,
                              stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    check_listing(out.read_text())
