"""Benchmarks (docs/perf.md). Shared here: loading a module as it was at an earlier git revision,
so a bench can time the old path against the new one in the same run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def module_at(rev: str, relpath: str, dest: Path) -> ModuleType | None:
    """The file ``relpath`` (e.g. ``rrma/log/export.py``) as it was at git revision ``rev``, written
    into the folder ``dest`` and loaded as a module of its own; None (and a line saying why) where
    git cannot show it."""
    proc = subprocess.run(["git", "show", f"{rev}:{relpath}"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        print(f"against {rev}: git show {rev}:{relpath} failed: {proc.stderr.strip()[:200]}")
        return None
    name = "rrma_old_" + relpath.removesuffix(".py").replace("/", "_")
    path = dest / f"{name}.py"
    path.write_text(proc.stdout)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
