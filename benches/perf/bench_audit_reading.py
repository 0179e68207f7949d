"""What reading claims by meaning and resolving commands costs the audit of one trial (issue 31).

    python benches/perf/bench_audit_reading.py [--repeat N] [--against REV]

The live loop audits each agent trial as its outcome comes back (docs/audit.md), so the rules' time is
paid once per trial. Two workloads, each one trial's case built in memory and run through the whole
registry (``run_rules``):

- ``typical``: a coding agent's trial of 40 assistant turns (about 1.5 KB of prose each, full of numbers:
  the labelled set's honest claims and one reworded false claim), 40 Bash calls (the set's honest and
  indirect commands) and their 8 KB outputs;
- ``worst``: 300 turns at the index's cap (20,000 characters a field: rrma/audit/index.py TEXT_CHARS),
  assistant texts that name the metric beside a number every few words and Python heredocs of 300 lines.

Printed: the median seconds per trial over ``--repeat`` runs, and with ``--against REV`` the same
workload through rrma/audit/rules.py as it was at that revision (default: the commit before issue 31's
first change), for scale. The rules are pure Python; the figures are this machine's.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benches.audit.variants import build, load  # noqa: E402
from benches.perf import module_at  # noqa: E402
from rrma.audit.index import TurnView  # noqa: E402
from rrma.audit.rules import TrialCase, run_rules  # noqa: E402

BEFORE = "16c70ee"  # the last commit before issue 31's auditor changes


def workload(kind: str) -> TrialCase:
    rng = random.Random(0)
    cases = load()
    case = build({"id": "bench", "context": "demo", "text": "loss 4.62"})
    turns: list[TurnView] = []
    if kind == "typical":
        prose = [c["text"] for c in cases if c["family"].startswith("claim.honest") and c["context"] == "demo"]
        commands = [c["command"] for c in cases if c["family"].startswith("command.honest") and c["context"] == "demo"]
        commands[::10] = [c["command"] for c in cases if c["family"] == "command.encode"][:len(commands[::10])]
        output = "\n".join(f"step {i}: loss {rng.uniform(4, 8):.6f} lr 0.0003" for i in range(250))[:8000]
        for i in range(40):
            text = "\n\n".join(rng.choice(prose) for _ in range(30))[:1500]
            if i == 39:
                text += " Final: the loss got down to 3e-4."
            turns += [TurnView(100 + 3 * i, "coder", "assistant", text, None, "", "", "t0002"),
                      TurnView(101 + 3 * i, "coder", "tool_call", "", "Bash",
                               json.dumps({"command": commands[i % len(commands)]}), "", "t0002"),
                      TurnView(102 + 3 * i, "coder", "tool_result", "", "Bash", "", output, "t0002")]
    else:
        words = "the loss went from 7.4 to 4.62 after lr 0.0003 and 500 steps ; we tried X = 1.7 | loss 4.6 |".split()
        text = " ".join(rng.choice(words) for _ in range(4000))[:20000]
        dump = " ".join(f"loss {rng.random():.4f}" for _ in range(2000))[:20000]
        code = "python3 - <<'EOF'\n" + "x = 'abc' + 'def'\n" * 300 + "EOF"
        for i in range(100):
            turns += [TurnView(100 + 3 * i, "coder", "assistant", text if i % 2 else dump, None, "", "", "t0002"),
                      TurnView(101 + 3 * i, "coder", "tool_call", "", "Bash", json.dumps({"command": code}), "", "t0002"),
                      TurnView(102 + 3 * i, "coder", "tool_result", "", "Bash", "", dump, "t0002")]
    case.turns = turns
    return case


def timed(run: Any, case: Any, repeat: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        found = len(run(case))
        times.append(time.perf_counter() - start)
    return statistics.median(times), found


def old_case(old: Any, case: TrialCase) -> Any:
    """The same case as the old rules' TrialCase (the fields it had)."""
    return old.TrialCase(rec=case.rec, outcome=old.OutcomeView(case.outcome.status, case.outcome.score), state=case.state,
                         scope=case.scope, turns=case.turns, posts=case.posts, proposed_seq=case.proposed_seq)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default=BEFORE, help="a git revision to time the old rules at ('' to skip)")
    args = parser.parse_args(argv)
    old = None
    if args.against:
        with tempfile.TemporaryDirectory() as tmp:
            old = module_at(args.against, "rrma/audit/rules.py", Path(tmp))
    for kind in ("typical", "worst"):
        case = workload(kind)
        size = sum(len(t.text) + len(t.args) + len(t.result) for t in case.turns)
        seconds, found = timed(run_rules, case, args.repeat)
        line = f"{kind:8} {len(case.turns):4} turns, {size / 1e6:5.2f} MB: {seconds:7.3f} s per trial, {found} finding(s)"
        if old is not None:
            before, old_found = timed(old.run_rules, old_case(old, case), args.repeat)
            line += f"; at {args.against}: {before:7.3f} s, {old_found} finding(s)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
