"""Containment, tried as an attacker would: a trial program running as root that unmounts,
remounts, detaches with setsid, sheds its environment, allocates past its budget, forks without
end, or outlives a killed harness.

Everything here is real: bubblewrap processes, cgroup v1/v2 limits, the harness as a real
``rrma-tui`` process killed with SIGKILL. Tests that need the sandbox or cgroups skip with the
probe's precise reason where this machine cannot provide them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from processes import processes_with

from rrma.contain import cgroups, sandbox
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn, stale_processes
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.task import load_task
from rrma.trial import Budget, Status

REPO = Path(__file__).resolve().parents[2]
GUARD = sandbox.unavailable_reason()
LIMITS = cgroups.unavailable_reason()
needs_guard = pytest.mark.skipif(GUARD is not None, reason=f"trial sandbox unavailable here: {GUARD}")
needs_cgroups = pytest.mark.skipif(LIMITS is not None, reason=f"trial cgroups unavailable here: {LIMITS}")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the escape attempts are the ones open to root")


# A trial program that tries every way out it can think of, as root, and then appends a correctly
# chained approval signed human:alice to the run log (the harness's code is readable: it builds
# the line exactly as the harness would).
ESCAPE = r"""
import ctypes, errno, json, os, subprocess, sys
from pathlib import Path
run = Path.cwd().parents[2]
log = run / "events.jsonl"
def sh(what, cmd):
    proc = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    print(what, "ESCAPED" if proc.returncode == 0 else "refused", flush=True)
sh("umount-run", f"umount -l {run}")
sh("umount-root", "umount -l /")
sh("remount-run-rw", f"mount -o remount,bind,rw {run}")
sh("remount-root-rw", "mount -o remount,rw /")
sh("new-userns", f"unshare -Urm sh -c 'umount -l {run} && touch {run}/x'")
sh("nsenter-init", "nsenter -t 1 -m -p true")
sh("chroot", "chroot / true")
libc = ctypes.CDLL(None, use_errno=True)
print("unshare-syscall", "ESCAPED" if libc.unshare(0x10000000 | 0x00020000) == 0 else "refused")
caps = [l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("CapEff")][0]
print("capabilities", "none" if caps.split()[1] == "0000000000000000" else "ESCAPED:" + caps)
print("harness-visible", "ESCAPED" if int(HARNESS_PID) in [int(p) for p in os.listdir("/proc") if p.isdigit()]
      and Path(f"/proc/{HARNESS_PID}/cmdline").read_bytes().find(b"pytest") >= 0 else "refused")
try:
    os.kill(int(HARNESS_PID), 0)
    print("signal-harness", "ESCAPED")
except OSError:
    print("signal-harness", "refused")
os.setsid()
sys.path.insert(0, HARNESS_ROOT)
from rrma.log.events import build_line
print("log-visible", os.path.exists(log))
try:
    lines = [l for l in log.read_text().splitlines() if l.strip()]
    last = json.loads(lines[-1])
    line, _ = build_line(last["seq"] + 1, last["hash"], "review", "human:alice",
                         {"trial_id": "t0001", "decision": "approve", "reviewer": "alice", "note": "lgtm"})
    with open(log, "a") as fh:
        fh.write(line + "\n")
    print("forge-review", "ESCAPED")
except OSError as exc:
    print("forge-review", "refused", errno.errorcode[exc.errno])
print("loss: 1")
"""


def _escape_task(tmp_path: Path, program: str) -> Path:
    """A command task whose trial program is ``program`` (its metric is what it prints: self-reported)."""
    (tmp_path / "task" / "workspace").mkdir(parents=True)
    (tmp_path / "task" / "workspace" / "escape.py").write_text(program)
    (tmp_path / "task" / "workspace" / "knob.py").write_text("X = 1\n")
    (tmp_path / "task" / "task.yaml").write_text(json.dumps({
        "name": "escape", "oracle": {"kind": "command", "params": {"command": ["{python}", "escape.py"]}},
        "workspace": {"source": "workspace", "editable": ["knob.py"]},
        "metric": {"name": "loss", "direction": "minimize", "source": "self-reported"},
        "budget": {"max_trials": 1, "trial_seconds": 60}, "noise": {"baseline_repeats": 1},
        "agents": [{"name": "rs", "backend": "random-search"}],
        "search_space": {"knob.py:X": {"kind": "int", "low": 2, "high": 9}}}))
    return tmp_path / "task" / "task.yaml"


def _escape_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, hide_run: bool) -> tuple[Path, list[dict[str, str]]]:
    """The escape program as a demo trial, with the run directory inside a tree the sandbox shows
    read-only (as ``--runs`` inside a shown folder would be): only the policy's hiding keeps the log
    out of the trial's view. ``hide_run=False`` is the control: the run dir is not hidden."""
    shown = tmp_path / "shown"
    shown.mkdir()
    paths = sandbox.harness_paths()
    monkeypatch.setattr(sandbox, "harness_paths", lambda: (*paths, shown))
    if not hide_run:
        original = Policy.for_trial.__func__  # type: ignore[attr-defined]
        monkeypatch.setattr(Policy, "for_trial", classmethod(
            lambda cls, trial_dir, protect=(), **kw: original(cls, trial_dir, (), **kw)))
    program = ESCAPE.replace("HARNESS_PID", repr(str(os.getpid()))).replace("HARNESS_ROOT", repr(str(REPO)))
    task = load_task(_escape_task(tmp_path, program))
    result = start_run(task, shown / "runs")
    store = RunStore(result.run_dir)
    events = store.events()
    assert not [e for e in events if e.kind == "review"], "a trial forged a review"
    report = verify_run(result.run_dir)
    assert report.ok, report.errors
    finished = [e for e in events if e.kind == "trial.finished"]
    assert len(finished) == 2 and {e.data.status for e in finished} == {"ok"}, [e.data.feedback for e in finished]
    attempts = []
    for event in finished:
        log = store.blob_text(event.data.log_blob)
        attempts.append(dict(line.split(" ", 1) for line in log.splitlines() if " " in line and not line.startswith("loss")))
        assert "ESCAPED" not in log, log
    assert not (result.run_dir / "x").exists()
    return result.run_dir, attempts


@needs_guard
@needs_root
def test_a_root_trial_that_unmounts_and_remounts_cannot_touch_the_record(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _, attempts = _escape_run(tmp_path, monkeypatch, hide_run=True)
    for found in attempts:
        assert set(found) >= {"umount-run", "umount-root", "remount-run-rw", "remount-root-rw", "new-userns",
                              "nsenter-init", "chroot", "unshare-syscall", "capabilities", "harness-visible",
                              "signal-harness", "log-visible", "forge-review"}, found
        assert found["capabilities"] == "none"
        # the log is not there at all (not merely read-only): the hiding did it, the run dir lies in a shown tree
        assert (found["log-visible"], found["forge-review"]) == ("False", "refused ENOENT"), found


@needs_guard
@needs_root
def test_the_escape_test_reaches_the_log_when_the_run_is_not_hidden(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The control of the test above: without the hiding the trial sees the real log (and only the
    read-only mount and the dropped capabilities stop the forged review)."""
    _, attempts = _escape_run(tmp_path, monkeypatch, hide_run=False)
    for found in attempts:
        assert (found["log-visible"], found["forge-review"]) == ("True", "refused EROFS"), found


def hog(marker: str) -> str:
    """Parent sleeps; a child leaves the process group (setsid), sheds its environment and takes 4 GB."""
    return textwrap.dedent(f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            os.execve(sys.executable, [sys.executable, "-c",
                      "b = bytearray(4 << 30); import time; time.sleep(600)", "{marker}"], {{}})
        time.sleep(600)
    """)


@needs_cgroups
@pytest.mark.parametrize("guarded", [True, False], ids=["sandbox", "no-sandbox"])
def test_four_gigabytes_in_a_setsid_child_ends_oom_within_budget(tmp_path: Path, guarded: bool) -> None:
    if guarded and GUARD is not None:
        pytest.skip(f"trial sandbox unavailable here: {GUARD}")
    marker = f"rrma-hog-{os.getpid()}-{time.monotonic_ns()}"
    budget = Budget(seconds=20, memory_mb=512)
    guard = Policy.for_trial(tmp_path) if guarded else None
    result = spawn([sys.executable, "-c", hog(marker)], cwd=tmp_path, budget=budget, guard=guard)
    assert result.status == Status.oom, (result.reason, result.output)
    assert result.seconds < budget.seconds + 5
    assert "512 MiB budget" in result.reason and result.limits.startswith("cgroup")
    assert result.peak_rss_mb <= 512 + 1
    assert not processes_with(marker)


@needs_cgroups
def test_a_fork_bomb_stops_at_the_process_limit(tmp_path: Path) -> None:
    program = textwrap.dedent("""
        import os, time
        made = 0
        try:
            for _ in range(400):
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
                made += 1
        except OSError as exc:
            print("fork refused after", made, exc.strerror, flush=True)
        print("made", made, flush=True)
    """)
    result = spawn([sys.executable, "-c", program], cwd=tmp_path,
                         budget=Budget(seconds=30, max_processes=64), guard=None)
    assert result.status == Status.ok, result.output
    assert "fork refused after" in result.output
    made = int(result.output.split("made")[-1].split()[0])
    assert made < 64
    assert result.leftover_killed >= made  # the sleeping children were killed with the trial


@needs_cgroups
def test_a_child_that_drops_its_environment_and_the_group_is_still_killed(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the sandbox (RRMA_FS_GUARD=off) the token kill cannot see such a child; the cgroup can."""
    monkeypatch.setenv(sandbox.ENV_MODE, "off")
    marker = f"rrma-escapee-{os.getpid()}-{time.monotonic_ns()}"
    program = textwrap.dedent(f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"], {{}})
        print("parent done", flush=True)
    """)
    result = spawn([sys.executable, "-c", program], cwd=tmp_path, budget=Budget(seconds=20),
                         guard=Policy.for_trial(tmp_path))
    assert result.status == Status.ok and not result.guarded
    assert result.leftover_killed == 1
    assert not processes_with(marker)


HANG_FIRST = """
# parent: {parent!r}
import os, sys, time
if os.environ.get("RRMA_TEST_HANG") == "1":
    if os.fork() == 0:
        os.setsid()
        child = {half!r} + {rest!r}  # the full child marker appears only in the child's command line
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", child], {{}})
    time.sleep(600)
print("loss: 1.0")
"""


def hanging_task(tmp_path: Path, marker: str) -> Path:
    """A task whose baseline hangs (with a setsid child) while RRMA_TEST_HANG=1 is in the environment."""
    task = tmp_path / "task.yaml"
    task.write_text(json.dumps({
        "name": "hang",
        "oracle": {"kind": "command", "params": {"command": ["{python}", "-c", HANG_FIRST.format(
            parent=f"parent-{marker}", half=marker[:8], rest=marker[8:])]}},
        "workspace": {"source": str(REPO / "benches" / "demo" / "workspace"), "editable": ["objective.py"]},
        "metric": {"name": "loss", "direction": "minimize", "source": "self-reported"},
        "budget": {"trial_seconds": 120, "max_trials": 0, "max_concurrent": 1},
        "noise": {"baseline_repeats": 1}, "agents": [{"name": "rs", "backend": "random-search"}],
    }))
    return task


def start_and_kill_harness(tmp_path: Path, marker: str, env: dict[str, str]) -> tuple[Path, list[int]]:
    """Start a real headless run whose baseline hangs, kill -9 the harness once the trial's
    processes are up; returns the run dir and the trial's host pids seen before the kill."""
    runs = tmp_path / "runs"
    harness = subprocess.Popen([sys.executable, "-m", "cli.main", "--headless", "run", str(hanging_task(tmp_path, marker)),
                                "--runs", str(runs)], cwd=REPO, env={**env, "RRMA_TEST_HANG": "1"}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    # wait for both: the trial program (its source names parent-MARKER) and its setsid child (MARKER
    # alone; the "parent-" prefix keeps the program's own command line from matching MARKER first)
    while time.monotonic() < deadline and not (processes_with(f"parent-{marker}") and child_pids(marker)):
        time.sleep(0.1)
    trial_pids = processes_with(f"parent-{marker}") + child_pids(marker)
    assert child_pids(marker) and len(trial_pids) >= 2, "the trial and its child never both started"
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    (run_dir,) = list(runs.iterdir())
    return run_dir, trial_pids


def child_pids(marker: str) -> list[int]:
    """The setsid child of HANG_FIRST: MARKER in its command line, not as part of parent-MARKER."""
    return [p for p in processes_with(marker) if p not in processes_with(f"parent-{marker}")]


def alive(pid: int) -> bool:
    try:
        return b") Z" not in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False


@needs_guard
def test_kill_9_of_the_harness_takes_its_sandboxed_trials_with_it(tmp_path: Path) -> None:
    marker = f"rrma-orphan-{os.getpid()}-{time.monotonic_ns()}"
    run_dir, pids = start_and_kill_harness(tmp_path, marker, dict(os.environ))
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "trial processes outlived the harness"
    # the killed harness could not remove its trial's cgroups: empty directories stay behind
    leftovers = [d for d in cgroups._scope_dirs(cgroups.scope_tag(run_dir / "trials" / "base-0" / "work"))]
    assert leftovers or cgroups.unavailable_reason() is not None
    # nothing of the trial runs any more, so resume may start it again (it finishes this time)
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "resume", str(run_dir), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert RunStore(run_dir).events()[-1].kind == "run.finished"
    assert not [d for d in leftovers if d.exists()], "resume left the killed harness's empty cgroups behind"


@needs_cgroups
def test_empty_trial_cgroups_a_minute_old_are_swept_and_no_other(tmp_path: Path) -> None:
    """A run's start removes the empty trial cgroups a killed harness left (a minute old or more), never a
    young one (a live harness's, about to be joined) nor one with a process in it."""
    layout, _ = cgroups.detect()
    assert layout is not None
    old = cgroups.TrialCgroup.create(layout, memory_bytes=64 * 2**20, max_pids=16, label="sweep-old")
    young = cgroups.TrialCgroup.create(layout, memory_bytes=64 * 2**20, max_pids=16, label="sweep-young")
    busy = cgroups.TrialCgroup.create(layout, memory_bytes=64 * 2**20, max_pids=16, label="sweep-busy")
    sleeper = subprocess.Popen(["/bin/sh", "-c", f'echo $$ > {busy.procs_files()[0]}; '
                                f'for f in {" ".join(busy.procs_files()[1:])}; do echo $$ > "$f"; done; exec sleep 60'])
    try:
        deadline = time.monotonic() + 5
        while not busy.members() and time.monotonic() < deadline:
            time.sleep(0.02)
        past = time.time() - 2 * cgroups.SWEEP_MIN_AGE_S
        for d in (*old.dirs, *busy.dirs):
            os.utime(d, (past, past))
        cgroups.sweep_empty()
        assert not any(d.exists() for d in old.dirs)
        assert all(d.exists() for d in (*young.dirs, *busy.dirs))
    finally:
        sleeper.kill()
        sleeper.wait()
        for group in (old, young, busy):
            group.remove()


@needs_cgroups
def test_resume_refuses_while_a_trial_of_the_killed_harness_still_runs(tmp_path: Path) -> None:
    """Unsandboxed (RRMA_FS_GUARD=off), a setsid child can outlive a killed harness: resume names it
    and exits 2 instead of running the trial again in the same directory; once it is gone, resume works."""
    marker = f"rrma-stale-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, sandbox.ENV_MODE: "off"}
    run_dir, _ = start_and_kill_harness(tmp_path, marker, env)
    time.sleep(0.5)
    survivors = child_pids(marker)
    # the trial program itself dies with the harness (PR_SET_PDEATHSIG); its setsid child does not
    assert not processes_with(f"parent-{marker}")
    assert survivors, "expected the setsid child to survive an unsandboxed harness"
    try:
        proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "resume", str(run_dir)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert str(survivors[0]) in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while child_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "resume", str(run_dir), "--quiet"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@needs_guard
def test_the_users_home_and_keys_are_hidden_from_a_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reviewer's SSH key signs approvals: a trial that could read it could sign one. A trial's home
    is empty and private; where a policy shows part of home (a coding agent's tool), keys stay hidden."""
    home = Path(tempfile.mkdtemp(prefix="rrma-home-", dir="/var/tmp"))  # outside /tmp, which is private anyway
    try:
        (home / ".ssh").mkdir()
        (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
        (home / "notes.txt").write_text("private notes\n")
        key = home / "review-key"
        key.write_text("SIGNING KEY\n")
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv(sandbox.ENV_SIGNING_KEY, str(key))
        program = ("import os, sys\n"
                   "for p in sys.argv[1:]:\n"
                   "    print(p, 'absent' if not os.path.exists(p) else\n"
                   "          os.listdir(p) if os.path.isdir(p) else repr(open(p).read()))\n")
        argv = [sys.executable, "-c", program, str(home / ".ssh"), str(key), str(home / "notes.txt")]
        result = spawn(argv, cwd=tmp_path, budget=Budget(seconds=20), guard=Policy.for_trial(tmp_path))
        assert result.status == Status.ok and result.guarded, result.output
        assert result.output.splitlines() == [f"{home / '.ssh'} []", f"{key} ''", f"{home / 'notes.txt'} absent"]
        # a policy that shows the whole home read-only still hides the keys in it
        shown = spawn(argv, cwd=tmp_path, budget=Budget(seconds=20), guard=Policy.for_trial(tmp_path).protecting(home))
        assert shown.status == Status.ok and shown.guarded, shown.output
        assert shown.output.splitlines() == [f"{home / '.ssh'} []", f"{key} ''", f"{home / 'notes.txt'} 'private notes\\n'"]
        # the control: the same program unsandboxed reads them all
        bare = spawn(argv, cwd=tmp_path, budget=Budget(seconds=20))
        assert "['id_ed25519']" in bare.output and "SIGNING KEY" in bare.output and "private notes" in bare.output
        assert (home / ".ssh" / "id_ed25519").read_text() == "PRIVATE KEY\n"
    finally:
        shutil.rmtree(home)


def test_cgroup_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """off: limits are polled and the result says so; require where no cgroup can be made: a crash
    naming the reason; a bad value: a clear error."""
    monkeypatch.setenv(cgroups.ENV_MODE, "off")
    assert cgroups.describe().startswith("polling") and "RRMA_CGROUPS=off" in cgroups.describe()
    result = spawn(["true"], cwd=tmp_path, budget=Budget(seconds=5))
    assert result.status == Status.ok and result.limits == "polling"
    monkeypatch.setenv(cgroups.ENV_MODE, "require")
    monkeypatch.setattr(cgroups, "unavailable_reason", lambda: "no cgroup hierarchy in this test")
    result = spawn(["true"], cwd=tmp_path, budget=Budget(seconds=5))
    assert result.status == Status.crash
    assert "RRMA_CGROUPS=require" in result.reason and "no cgroup hierarchy in this test" in result.reason
    monkeypatch.setenv(cgroups.ENV_MODE, "sometimes")
    with pytest.raises(ValueError, match="RRMA_CGROUPS='sometimes': expected one of auto, off, require"):
        cgroups.mode()


@needs_cgroups
def test_a_trial_cgroup_is_removed_when_the_trial_ends(tmp_path: Path) -> None:
    result = spawn([sys.executable, "-c", "import os; os.fork(); import time; time.sleep(0.2)"], cwd=tmp_path,
                         budget=Budget(seconds=10))
    assert result.status == Status.ok and result.limits.startswith("cgroup")
    assert not list(cgroups._scope_dirs(cgroups.scope_tag(tmp_path)))  # nothing left behind


def test_stale_processes_finds_a_process_working_in_the_trial_dir_but_not_our_own_shell(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "trials" / "t0001" / "work"
    (work / "sub").mkdir(parents=True)
    monkeypatch.chdir(work)  # like a person whose shell sits in the trial dir while they run resume
    assert stale_processes(work) == []
    proc = subprocess.Popen(["sleep", "60"], cwd=work / "sub")
    try:
        assert stale_processes(work) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert stale_processes(work) == []
