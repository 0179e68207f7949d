"""Reading a run's event log while the run writes it: whole lines only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def run_events(run_dir: Path) -> list[dict[str, Any]]:
    """The events ``run_dir/events.jsonl`` holds so far: every whole line. A live run may be mid-write on its last
    line (beside a busy CPU the reader caught one cut at its 440th character and the test failed on it); that line
    is not yet an event, and the next read has it whole."""
    text = (run_dir / "events.jsonl").read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]
