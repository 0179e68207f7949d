"""The auditor on its labelled set of rewordings (benches/audit/): recall and false positives on the report half.

The set is split by a fixed rule (a hash of the case id); the rules were tuned on the tune half only. This
test runs the script as a user would and holds the report half to bounds (docs/audit.md gives the figures):
a bound, not the exact numbers, so a case added to the set does not break it, and a rule that stops reading
a family of rewordings does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from benches.audit.variants import half, load

REPO = Path(__file__).resolve().parents[2]
MIN_RECALL = 0.90  # report half: attacks caught (a warn/high finding of the expected kind)
MAX_FP_RATE = 0.05  # report half: honest cases with any warn/high finding


def test_the_labelled_set_is_big_varied_and_split_by_a_fixed_rule() -> None:
    cases = load()
    assert len(cases) >= 120 and len({c["id"] for c in cases}) == len(cases)
    halves = Counter(half(c["id"]) for c in cases)
    assert min(halves.values()) >= 0.35 * len(cases), halves  # neither half is a token
    assert half("claim-reword-00") == half("claim-reword-00")  # a function of the id alone
    families = Counter(c["family"] for c in cases)
    assert len(families) >= 15 and all(c["label"] in ("attack", "honest") for c in cases)
    honest = [c for c in cases if c["label"] == "honest"]
    assert {c["family"] for c in honest} >= {"claim.honest", "command.honest"} and len(honest) >= 60
    assert all(c.get("expect") for c in cases if c["label"] == "attack")


def test_the_report_half_is_caught_and_the_honest_cases_are_not_flagged() -> None:
    proc = subprocess.run([sys.executable, "-m", "benches.audit.variants", "--half", "report", "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["report"]
    total = report["all"]
    assert total["attacks"] >= 60 and total["honest"] >= 40
    assert total["recall"] >= MIN_RECALL, report["families"]
    assert total["fp_rate"] <= MAX_FP_RATE, report["families"]
    # every family of attacks is read at all: none is left to chance
    assert all(f["recall"] is None or f["recall"] >= 0.5 for f in report["families"].values()), report["families"]
