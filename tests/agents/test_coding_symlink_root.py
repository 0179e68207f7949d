"""A coding agent that replaces its working copy with a link to a host directory (issue 20).

The agent runs ``mv work work.orig; ln -s <host dir> work``: the link is made inside the sandbox, but
the harness reads the working copy afterwards, outside it. Reading it by following links put a
private key into the proposal, the blobs and the next trial's workspace. The diff now walks the
copy without following any link (rrma.contain.files) and refuses a linked root; the control runs
the same agent with the diff's walk replaced by one that follows links, as the harness did.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from coding_fixtures import clean, coding_agent, demo_task, leaks, turns

from agents.coding import workspace
from rrma.log.store import RunStore
from rrma.run.loop import start_run

SECRET = "PRIVATE-KEY-sentinel-0123456789abcdef-never-leave"

ATTACK = """#!/bin/sh
# the working copy becomes a link to a host directory the sandbox does not even show
cd "$RRMA_WORKSPACE/.." || exit 1
mv work work.orig && ln -s {target} work
echo "HYPOTHESIS: nothing to see"
"""


def following_scan(root: Path, *_: object, **__: object) -> dict[str, workspace.Entry]:
    """The old walk: os.walk from the root (which follows a root that is a link), lstat below it (and every
    regular file read, as the harness did then)."""
    out: dict[str, workspace.Entry] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            if stat.S_ISREG(path.lstat().st_mode):
                out[path.relative_to(root).as_posix()] = workspace.Entry("file", path.read_bytes())
    return out


def _attack_agent(tmp_path: Path) -> tuple[dict[str, object], Path]:
    host = tmp_path / "host-home" / ".ssh"  # stands for ~/.ssh: its files carry names the task can edit
    host.mkdir(parents=True)
    (host / "objective.py").write_text(f"KEY = {SECRET!r}\n")
    script = tmp_path / "agent-bin" / "evil-agent"
    script.parent.mkdir()
    script.write_text(ATTACK.format(target=host))
    script.chmod(0o755)
    agent = coding_agent("command", coding={"command": [str(script), "{prompt_file}"], "attempts": 1,
                                            "require_key": False})
    return agent, host


@pytest.mark.parametrize("defended", [True, False], ids=["no-follow", "control-following-walk"])
def test_a_linked_working_root_never_reaches_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        defended: bool) -> None:
    clean(monkeypatch)
    if not defended:
        monkeypatch.setattr(workspace, "scan", following_scan)
    agent, host = _attack_agent(tmp_path)
    result = start_run(demo_task([agent], **{"budget.max_trials": 1}), tmp_path / "runs", run_id="linked")
    run_dir = result.run_dir
    found = leaks(run_dir, SECRET)
    if defended:
        assert found == [], found
        errors = [t.text for t in turns(run_dir) if t.role == "error"]
        assert any("not a plain directory any more" in e and "symbolic link" in e for e in errors), errors
        assert not [e for e in RunStore(run_dir).scan().events if e.kind == "trial.proposed"
                    and e.data.agent == "coder"]
    else:  # the attack works against a walk that follows the root
        assert found, "the control should have copied the host file into the run"
    assert (host / "objective.py").read_text() == f"KEY = {SECRET!r}\n"
