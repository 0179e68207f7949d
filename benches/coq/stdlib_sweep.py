"""Does every theorem of the Coq standard library start, for the agent and for the checker?

Why it exists: a theorem that cannot start is lost to every prover, and no bench figure says so: it reads
as one more open theorem. Two such defects went unseen for seven rounds (round eight), and round nine's
first sweep found five more classes in 39 files (docs/proofs.md, "Round nine"). This runs the bench's own
path on every file, so that the next defect of the kind shows up as a line here instead.

For each ``.v`` file (default: every file under ``$(coqc -where)/theories``), the last theorem the stripper
reads, whose context holds everything before it:

- **agent**: the coq oracle prepares the file as ``bench coq`` does (the ``rediscover`` setting; CoqHammer's
  ``Tactics`` preloaded when installed), and the agent's Coq session (``CoqProofStates``, as the proof
  search runs it: the view, as the file's own module) opens the theorem's proof;
- **checker**: the oracle's checker judges an incomplete proof (``idtac.``); it must be refused for the
  proof, never because "the context does not compile".

``python -m benches.coq.stdlib_sweep [--jobs N] [--no-hammer] [--cold] [--root DIR] [SUBSTRING ...]`` prints a
line for each file that fails, one progress line every 25 files, and a summary; it exits 1 when a file
fails. The whole library takes about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benches.coq.bench import HAMMER_PRELOAD
from benches.coq.stdlib_split import theories
from oracle.coq.oracle import CoqOracle
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofStateError
from oracle.proof_state_coq import CoqProofStates
from oracle.strip_coq import CoqSyntaxError, strip_coq_file_with_notes
from rrma.contracts import EvalContext, OracleError
from rrma.trial import Budget, Proposal

CONTEXT_FAILS = "the context does not compile"


@dataclass(frozen=True)
class Swept:
    """One file's result: theorems read, the last one's name, and why the agent's session or the checker
    could not start on it ("" when it could)."""

    file: str
    theorems: int
    last: str = ""
    agent: str = ""
    checker: str = ""

    @property
    def ok(self) -> bool:
        return not self.agent and not self.checker


def sweep_file(path: Path, *, hammer: bool = True, warm: bool = True, timeout_s: float = 300.0) -> Swept:
    """Whether the last theorem of ``path`` starts for the agent and for the checker (see the module)."""
    try:
        count = len(strip_coq_file_with_notes(path)[0])
    except (CoqSyntaxError, OSError, UnicodeDecodeError) as exc:
        return Swept(str(path), 0, agent=f"the stripper cannot read it: {exc}")
    if not count:
        return Swept(str(path), 0)
    params = {"sources": [str(path)], "warm": warm, **({"preload": HAMMER_PRELOAD} if hammer else {})}
    oracle = CoqOracle(params)
    with tempfile.TemporaryDirectory(prefix="rrma-sweep-") as tmp:
        try:
            oracle.prepare(Path(tmp) / "run", Path(tmp))
        except OracleError as exc:
            return Swept(str(path), count, agent=f"prepare: {exc}", checker=f"prepare: {exc}")
        try:
            view = oracle.theorems()[-1]
            key = view["name"]
            task = TheoremTask.from_view(view)  # as the proof search builds it
            states = CoqProofStates(hidden=oracle.held_out_for(key))
            try:
                states.start(task, timeout_s=timeout_s)
                agent = ""
            except ProofStateError as exc:
                agent = " ".join(str(exc).split())[:300]
            finally:
                states.close()
            outcome = oracle.evaluate(EvalContext(
                trial_id="sweep", trial_dir=Path(tmp), budget=Budget(seconds=timeout_s),
                proposal=Proposal(hypothesis="sweep", theorem=key, proof="idtac.")))
            reason = " ".join(str(outcome.metrics.get("reason") or outcome.feedback or "").split())
            checker = (reason[:300] if CONTEXT_FAILS in reason else
                       "accepted an incomplete proof" if outcome.metrics.get("accepted") else "")
        finally:
            oracle.close()
    return Swept(str(path), count, key, agent, checker)


def _sweep(job: tuple[Path, bool, bool]) -> Swept:
    return sweep_file(job[0], hammer=job[1], warm=job[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.coq.stdlib_sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("filters", nargs="*", help="only the files whose path contains one of these")
    parser.add_argument("--root", type=Path, default=None, help="the .v files under this folder (default: the stdlib)")
    parser.add_argument("--jobs", type=int, default=2, help="files swept at once (default 2)")
    parser.add_argument("--no-hammer", dest="hammer", action="store_false",
                        help="without CoqHammer's Tactics preloaded (default: with them, as bench coq)")
    parser.add_argument("--cold", action="store_true", help="the cold checker (one coqc per check)")
    args = parser.parse_args(argv)
    root = args.root or theories()
    files = [p for p in sorted(root.rglob("*.v")) if not args.filters or any(f in str(p) for f in args.filters)]
    if not files:
        print(f"stdlib_sweep: no .v file under {root} matches", file=sys.stderr)
        return 2
    started = time.monotonic()
    results: list[Swept] = []
    jobs = [(p, args.hammer, not args.cold) for p in files]
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        for done, swept in enumerate(pool.imap(_sweep, jobs), 1):
            results.append(swept)
            name = Path(swept.file).relative_to(root) if Path(swept.file).is_relative_to(root) else swept.file
            if swept.agent:
                print(f"{name}: agent cannot start {swept.last} ({swept.theorems} theorems): {swept.agent}", flush=True)
            if swept.checker:
                print(f"{name}: checker cannot start {swept.last}: {swept.checker}", flush=True)
            if done % 25 == 0:
                print(f"... {done}/{len(files)} files, {time.monotonic() - started:.0f} s", flush=True)
    failing = [r for r in results if not r.ok]
    read = [r for r in results if r.theorems]
    print(f"stdlib_sweep: {len(files)} files, {len(read)} with theorems ({sum(r.theorems for r in read)} theorems); "
          f"{len(failing)} cannot start ({sum(r.theorems for r in failing)} theorems in them): "
          f"agent {sum(1 for r in failing if r.agent)}, checker {sum(1 for r in failing if r.checker)}; "
          f"{time.monotonic() - started:.0f} s")
    return 1 if failing else 0


if __name__ == "__main__":
    raise SystemExit(main())
