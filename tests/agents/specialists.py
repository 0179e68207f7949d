"""The specialists task shared by the LLM and coding-agent tests: two editable files, one per role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rrma.task import TaskConfig, task_from_dict


def specialist_task(tmp_path: Path, agents: list[dict[str, Any]], *, max_trials: int,
                    loop: dict[str, Any] | None = None) -> TaskConfig:
    """Loss = (LR - 0.01)^2 * 1e4 + (DEPTH - 4)^2, with LR in opt.py and DEPTH in arch.py (main.py read-only)."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "opt.py").write_text("LR = 0.1\n")
    (ws / "arch.py").write_text("DEPTH = 1\n")
    (ws / "main.py").write_text("from arch import DEPTH\nfrom opt import LR\n"
                                "print(f'loss: {(LR - 0.01) ** 2 * 1e4 + (DEPTH - 4) ** 2}')\n")
    return task_from_dict({
        "name": "specialists", "description": "Minimise loss.",
        "oracle": {"kind": "command", "params": {"command": ["{python}", "main.py"]}},
        "workspace": {"source": "ws", "editable": ["opt.py", "arch.py"], "readonly": ["main.py"]},
        "metric": {"name": "loss", "direction": "minimize"},
        "budget": {"max_trials": max_trials, "trial_seconds": 20, "max_concurrent": 1},
        "noise": {"baseline_repeats": 1},
        **({"loop": loop} if loop is not None else {}),
        "agents": agents,
    }, base_dir=tmp_path)
