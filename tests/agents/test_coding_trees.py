"""What a coding agent leaves in its working copy, against the harness that reads and removes it (issue 31).

* A chain of folders 3,000 deep: the working-copy scan and the scratch cleanup recursed, so the agent's
  proposal failed with RecursionError (the agent was retired) and its scratch trees stayed in the host's
  temp directory. Now the copy is walked and removed iteratively: the proposal stands, nothing stays.
* 400 sparse files of 4 MiB (no blocks on disk) and 50 hard links to one real 4 MiB file, all new and
  outside ``workspace.editable``: the scan read every regular file into the unsandboxed harness (peak
  RSS 1.7 GB). Now such files are listed by name and size, never read; the harness's peak RSS, measured
  in a subprocess (its VmHWM), stays under :data:`RSS_BOUND_MB`, which the old scan
  (tests/legacy_trees.py, the control) clearly exceeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from coding_fixtures import REPO, clean, coding_agent, demo_task, events, scratch_dirs, turns
from legacy_trees import legacy, scrub

from rrma.run.loop import start_run

RSS_BOUND_MB = 400  # the harness's peak RSS under the attack (about 60 MB measured); the old scan reached 1.9 GB

EDIT = """import os, re
text = open("objective.py").read()
open("objective.py", "w").write(re.sub(r"(?m)^X = .*$", "X = 1.7", text, count=1))
"""

CHAIN = EDIT + """
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
open("bottom.txt", "w").write("scratch")
print("HYPOTHESIS: X = 1.7 is the bowl's minimum")
"""

SPARSE = EDIT + """
size = 4 * 2**20
for i in range(400):
    with open(f"sparse-{i:03}.bin", "wb") as fh:
        fh.truncate(size)  # 4 MiB each, no blocks on disk
with open("real.bin", "wb") as fh:
    fh.write(b"r" * size)
for i in range(50):
    os.link("real.bin", f"link-{i:02}.bin")
print("HYPOTHESIS: X = 1.7 is the bowl's minimum")
"""


def agent_program(folder: Path, source: str) -> Path:
    script = folder / "agent-bin" / "tree-agent"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{sys.executable}\n{source}")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("defended", [True, False], ids=["iterative", "control-recursive"])
def test_a_deep_chain_in_the_working_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, defended: bool) -> None:
    clean(monkeypatch)
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(host_tmp))  # where the agent's scratch trees go
    if not defended:
        legacy(monkeypatch)
    agent = coding_agent("command", max_failures=1, coding={
        "command": [str(agent_program(tmp_path, CHAIN)), "{prompt_file}"], "attempts": 1, "require_key": False})
    try:
        result = start_run(demo_task([agent], **{"budget.max_trials": 1}), tmp_path / "runs", run_id="chain")
        proposed = [e.data for e in events(result.run_dir, "trial.proposed") if e.data.agent == "coder"]
        errors = [t.text for t in turns(result.run_dir, "coder") if t.role == "error"]
        if not defended:  # the scan raised, the agent was retired, its scratch tree stayed in the host's temp dir
            assert not proposed and any("RecursionError" in e for e in errors), errors
            assert scratch_dirs("coder")
            return
        assert [p.trial_id for p in proposed] == ["t0001"] and errors == []
        finished = [e.data for e in events(result.run_dir, "trial.finished") if e.data.trial_id == "t0001"]
        assert [f.status for f in finished] == ["ok"]
        assert not any("stopped after" in e.data.text for e in events(result.run_dir, "note"))
        assert scratch_dirs("coder") == [] and list(host_tmp.iterdir()) == []
    finally:
        scrub(host_tmp)
        scrub(tmp_path / "runs")


# Runs the attack in a process of its own and reports that process's peak RSS: the harness's memory is the
# measure (an agent's own memory is its sandbox's, limited there).
MEASURE = """
import json, sys
repo, tests, out, program, mode = sys.argv[1:6]
sys.path[:0] = [repo, tests, tests + "/agents"]
from coding_fixtures import coding_agent, demo_task
from rrma.contain import files
from rrma.log.store import RunStore
from rrma.run.loop import start_run
if mode == "control":
    from legacy_trees import recursive_walk
    files.walk_files = recursive_walk
agent = coding_agent("command", coding={"command": [program, "{prompt_file}"], "attempts": 1, "require_key": False})
result = start_run(demo_task([agent], **{"budget.max_trials": 1}), __import__("pathlib").Path(out), run_id="sparse")
events = RunStore(result.run_dir).events()
def peak_rss_mb():
    # VmHWM: the peak of this process's own memory since its exec. Not getrusage's ru_maxrss, which Linux
    # carries over an exec from the memory the process had before it (a child vforked from a pytest
    # worker that had loaded a model reported that worker's 600 MB)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
print(json.dumps({
    "peak_rss_mb": peak_rss_mb(),
    "proposed": [e.data.trial_id for e in events if e.kind == "trial.proposed" and e.data.agent == "coder"],
    "turns": [e.data.text for e in events if e.kind == "agent.turn" and e.data.role in ("system", "error")],
}))
"""


@pytest.mark.parametrize("defended", [True, False], ids=["listed-not-read", "control-reads-every-file"])
def test_sparse_files_and_hard_links_do_not_reach_the_harness_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      defended: bool) -> None:
    clean(monkeypatch)
    program = agent_program(tmp_path, SPARSE)
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(REPO), str(REPO / "tests"), str(tmp_path / "runs"),
                           str(program), "defended" if defended else "control"],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if not defended:
        assert report["peak_rss_mb"] > RSS_BOUND_MB, report["peak_rss_mb"]
        return
    assert report["peak_rss_mb"] < RSS_BOUND_MB, report["peak_rss_mb"]
    assert report["proposed"] == ["t0001"]  # the honest edit is proposed; the 451 files are the agent's scratch
    listed = [t for t in report["turns"] if t.startswith("new files outside workspace.editable")]
    assert listed and "and 431 more" in listed[0], report["turns"]
