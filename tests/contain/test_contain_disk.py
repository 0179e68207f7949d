"""The disk budget is the kernel's: each attack runs with the cap (``RRMA_DISK_CAP=auto``) and, as its
control, without it (``off``: the watch that walks directory entries, which is what the harness had).

Issue 31: with ``trial_disk_mb: 16`` a trial opened a workspace file, unlinked it and fallocated
2 GiB; the host lost 2 GiB and the trial ended ``ok``. Here that trial, a flood of empty files
(inodes), a flood of ``/tmp``, and the workspace's own life (kept, left mounted by a killed harness,
four at once) each go through the executor's own path (:func:`rrma.exec.local.evaluate_job`). A
capped trial here takes its file system from the pool made ahead (the pool is warmed first), as the
executor's trials after the first do; the pool's own rules (each file system handed out once, never
reused, nothing left after an exit or a kill) are tested at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oracle.command import CommandOracle
from rrma.contain import disk, sandbox
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn
from rrma.exec.local import LocalExecutor, TrialJob, evaluate_job
from rrma.trial import Budget, Outcome, Proposal, Status

REPO = Path(__file__).resolve().parents[2]
CAP = disk.unavailable_reason()
needs_cap = pytest.mark.skipif(CAP is not None, reason=f"capped workspaces unavailable here: {CAP}")
GUARD = sandbox.unavailable_reason()
MODES = [pytest.param("auto", marks=needs_cap, id="cap"), pytest.param("off", id="watch-only")]

# the attack of the issue: an unlinked file holds 2 GiB; its program reports what the host lost
UNLINKED_FALLOCATE = """
import os, shutil
before = shutil.disk_usage('.').free
fd = os.open('hidden', os.O_CREAT | os.O_RDWR); os.unlink('hidden')
os.posix_fallocate(fd, 0, 2 << 30)
print('dropped_mib:', (before - shutil.disk_usage('.').free) >> 20)
print('score: 1')
"""
# the same, holding what it got until the harness has looked (the test cancels it)
HOLD = """
import json, os, time
fd = os.open('hidden', os.O_CREAT | os.O_RDWR); os.unlink('hidden')
for step in range(32):  # 2 GiB in 64 MiB steps: the cap stops it early
    try:
        os.posix_fallocate(fd, step << 26, 1 << 26)
    except OSError:
        break
print('progress: ' + json.dumps({'held_mib': os.fstat(fd).st_blocks // 2048}), flush=True)
time.sleep(600)
"""
# 20000 empty files: no block to count, one inode each (a 16 MiB ext4 has 4096)
INODES = """
n = 0
try:
    while n < 20000:
        open(f'f{n}', 'w').close()
        n += 1
except OSError as exc:
    print('stopped:', exc)
print('files:', n)
print('score: 1')
"""


@pytest.fixture(autouse=True)
def _no_mount_left(tmp_path: Path) -> Iterator[None]:
    """Every test here leaves nothing mounted under its directory (its pools' file systems let go)."""
    yield
    disk.close_pools()
    left = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(str(tmp_path))]
    assert not left, left


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def warm_pool(trials: Path, disk_mb: int, ready: int = 1) -> Any:
    """The pool of the trials directory ``trials`` with ``ready`` file systems made ahead."""
    trials.mkdir(parents=True, exist_ok=True)
    pool = disk._pool_for(trials.absolute(), disk_mb << 20)
    with pool.cond:
        pool.want, pool.asked = max(pool.want, ready), True
        pool.cond.notify_all()
    wait_for(lambda: len(pool.ready) >= ready or pool.closed, 120, f"{ready} pooled file system(s) in {trials}")
    assert not pool.closed, "the pool stopped (its warning says why)"
    return pool


def loops_backed_in(directory: Path) -> list[str]:
    """The loop devices whose image was made in ``directory``."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if Path(backing.read_text().strip().removesuffix(" (deleted)")).parent == directory:
                found.append(backing.parent.parent.name)
    return found


def trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str, mode: str, *, disk_mb: int = 16,
          keep: bool = False, trial_id: str = "t1", on_progress: Any = None,
          cancel: threading.Event | None = None) -> Outcome:
    """One trial of ``program`` (prog.py) through the executor's path, under RRMA_DISK_CAP=``mode``."""
    monkeypatch.setenv(disk.ENV_MODE, mode)  # what spawn reads (the sandbox's /tmp); the job carries the run's
    oracle = CommandOracle({"command": ["{python}", "prog.py"]}, metric="score", direction="maximize")
    job = TrialJob(trial_id=trial_id, files={"prog.py": program}, proposal=Proposal(hypothesis="h"),
                   budget=Budget(seconds=120, disk_mb=disk_mb), disk_cap=mode, keep_workspace=keep)
    work = tmp_path / "run" / "trials" / trial_id / "work"
    pooled = mode == "auto" and disk._probe() is None
    handed: list[Any] = []
    if pooled:  # the file system comes from the pool, made ahead, as for the executor's trials after the first
        warm_pool(work.parent.parent, disk_mb)
        take = disk._Pool.take

        def recorded_take(pool: Any) -> Any:
            handed.append(take(pool))
            return handed[-1]

        monkeypatch.setattr(disk._Pool, "take", recorded_take)
    outcome = evaluate_job(oracle, job, work, on_progress or (lambda _: None), cancel or threading.Event(),
                           protect=(tmp_path / "run",))
    if pooled:
        monkeypatch.setattr(disk._Pool, "take", take)
        if not outcome.feedback.startswith("not run"):  # (a foreign mount on the workspace: it never got one)
            assert handed and handed[0] is not None, "the trial's file system was not the pooled one"
    return outcome


@pytest.mark.parametrize("mode", MODES)
def test_an_unlinked_fallocated_file_is_refused_past_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                mode: str) -> None:
    """The issue's attack: watched only, the host loses 2 GiB to a 16 MiB trial that ends ok; capped, the
    file system refuses the blocks and the trial ends `disk`."""
    outcome = trial(tmp_path, monkeypatch, UNLINKED_FALLOCATE, mode)
    if mode == "off":
        assert outcome.status == Status.ok and outcome.score == 1, outcome.feedback
        assert outcome.metrics["dropped_mib"] >= 1536, outcome.metrics  # 2 GiB, less what others freed meanwhile
    else:
        assert outcome.status == Status.disk, outcome.feedback
        assert "16 MiB disk budget" in outcome.feedback and outcome.score is None
        assert "dropped_mib" not in outcome.metrics


@pytest.mark.parametrize("mode", MODES)
def test_the_host_gives_a_trial_no_more_than_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     mode: str) -> None:
    """While the program holds what it got, the harness measures the host's free space. The watch is
    kept from stopping it (FULL_BYTES below zero) so that only the kernel's bound is tested."""
    monkeypatch.setattr(disk, "FULL_BYTES", -1)
    cancel = threading.Event()
    seen: dict[str, Any] = {}
    before = shutil.disk_usage(tmp_path).free

    def on_progress(sample: dict[str, Any]) -> None:
        seen.update(sample, dropped_mib=(before - shutil.disk_usage(tmp_path).free) >> 20)
        cancel.set()  # measured: the program is stopped (status aborted)

    outcome = trial(tmp_path, monkeypatch, HOLD, mode, on_progress=on_progress, cancel=cancel)
    assert outcome.status == Status.aborted and "held_mib" in seen, (outcome.status, outcome.feedback)
    if mode == "off":
        assert seen["held_mib"] == 2048 and seen["dropped_mib"] >= 1536, seen
    else:
        assert seen["held_mib"] <= 16 and seen["dropped_mib"] < 1024, seen  # the cap, plus what others wrote


@pytest.mark.parametrize("mode", MODES)
def test_a_flood_of_empty_files_runs_out_of_inodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   mode: str) -> None:
    """Empty files hold no block the watch could count; a capped workspace has a bounded inode table."""
    outcome = trial(tmp_path, monkeypatch, INODES, mode)
    if mode == "off":
        assert outcome.status == Status.ok and outcome.metrics["files"] == 20000, outcome.feedback
    else:
        assert outcome.status == Status.disk and "no inode left" in outcome.feedback, outcome.feedback
        assert outcome.metrics.get("files", 0) < 20000  # killed before it printed, or it stopped short


@pytest.mark.skipif(GUARD is not None, reason=f"trial sandbox unavailable here: {GUARD}")
@pytest.mark.parametrize("mode", MODES)
def test_the_sandboxs_tmp_is_capped_at_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """/tmp in the sandbox is a tmpfs of its own: capped at the disk budget where bubblewrap sizes it."""
    if mode == "auto" and not sandbox.sized_scratch():
        pytest.skip("this bubblewrap cannot size a tmpfs (--size)")
    monkeypatch.setenv(disk.ENV_MODE, mode)
    work = tmp_path / "work"
    work.mkdir()
    program = ("with open('/tmp/fill', 'wb') as fh:\n"
               "    for _ in range(64):\n"
               "        fh.write(b'x' * (1 << 20))\n"
               "print('wrote 64 MiB')\n")
    result = spawn([sys.executable, "-c", program], cwd=work, budget=Budget(seconds=60, disk_mb=16),
                   guard=Policy.for_trial(work))
    if mode == "off":
        assert result.status == Status.ok and "wrote 64 MiB" in result.output, result.output
    else:
        assert result.status == Status.disk and "16 MiB disk budget" in result.reason, (result.reason, result.output)


@needs_cap
def test_files_that_do_not_fit_the_budget_are_disk_before_anything_runs(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(disk.ENV_MODE, "auto")
    oracle = CommandOracle({"command": ["{python}", "prog.py"]}, metric="score")
    job = TrialJob(trial_id="t1", files={"prog.py": "print('score: 1')\n", "data.txt": "x" * (3 << 20)},
                   proposal=Proposal(hypothesis="h"), budget=Budget(seconds=60, disk_mb=2), disk_cap="auto")
    outcome = evaluate_job(oracle, job, tmp_path / "trials" / "t1" / "work", lambda _: None, threading.Event())
    assert outcome.status == Status.disk and "do not fit its 2 MiB disk budget" in outcome.feedback, outcome.feedback


@needs_cap
def test_a_kept_workspace_is_copied_out_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """loop.keep_workspaces: the files stay (a plain directory where the mount was), set-user-ID bits
    dropped, a sparse file still sparse, links still links."""
    program = ("import os\n"
               "open('out.txt', 'w').write('kept')\n"
               "open('tool', 'w').write('#!/bin/sh\\n'); os.chmod('tool', 0o4755)\n"
               "with open('sparse', 'wb') as fh: fh.truncate(1 << 30)\n"
               "os.symlink('/etc/passwd', 'link')\n"
               "print('score: 1')\n")
    outcome = trial(tmp_path, monkeypatch, program, "auto", keep=True)
    assert outcome.status == Status.ok, outcome.feedback
    work = tmp_path / "run" / "trials" / "t1" / "work"
    assert not os.path.ismount(work) and (work / "out.txt").read_text() == "kept"
    assert not work.joinpath("tool").stat().st_mode & stat.S_ISUID
    assert work.joinpath("sparse").stat().st_size == 1 << 30 and work.joinpath("sparse").stat().st_blocks < 64
    assert os.readlink(work / "link") == "/etc/passwd"
    assert sorted(p.name for p in work.parent.iterdir()) == ["oracle", "work"]  # no staging, no image left


@needs_cap
@pytest.mark.parametrize("defence", [True, False], ids=["unmounted", "control"])
def test_a_workspace_a_killed_harness_left_mounted_is_unmounted_before_reuse(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            defence: bool) -> None:
    """A harness killed (SIGKILL) with a trial's workspace mounted; the resumed trial runs in the same
    directory. Without the leftover's unmount (the control) the dead harness's file system stays mounted
    there after the trial (emptied by the remover, which cannot remove a mount point): one leaked mount
    and loop device per kill."""
    work = tmp_path / "run" / "trials" / "t1" / "work"
    dead = (f"import os\nfrom pathlib import Path\nfrom rrma.contain import disk\n"
            f"disk.mount(Path({str(work)!r}), 16 << 20)\n"
            f"Path({str(work)!r}, 'left.txt').write_text('from the dead harness')\n"
            "os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", dead], env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == -9 and os.path.ismount(work) and (work / "left.txt").exists()
    if not defence:
        monkeypatch.setattr(disk, "unmount_leftover", lambda workdir: 0)
    try:
        outcome = trial(tmp_path, monkeypatch, "import os\nprint('score:', len(os.listdir('.')))\n", "auto")
        if defence:
            assert outcome.status == Status.ok and outcome.score == 1, outcome.feedback  # prog.py alone
            assert not work.exists()
        else:  # the new file system went over the old one and was released; the old one is still there
            assert os.path.ismount(work)
    finally:
        monkeypatch.undo()
        disk.unmount_leftover(work)


@needs_cap
def test_a_file_system_rrma_did_not_mount_is_never_unmounted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "run" / "trials" / "t1" / "work"
    work.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "someone-elses", str(work)], check=True)
    try:
        outcome = trial(tmp_path, monkeypatch, "print('score: 1')\n", "auto")
        assert outcome.status == Status.crash and "rrma did not make (someone-elses)" in outcome.feedback, outcome.feedback
        assert os.path.ismount(work)
    finally:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.umount2(str(work).encode(), 0) == 0


@needs_cap
def test_concurrent_trials_get_a_file_system_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(disk.ENV_MODE, "auto")
    program = ("import os\n"
               "open('own', 'wb').write(os.urandom(4 << 20))\n"
               "st = os.statvfs('.')\n"
               "print('fs_mib:', st.f_blocks * st.f_frsize >> 20)\n"
               "print('files:', len(os.listdir('.')))\n"
               "print('score: 1')\n")
    oracle = CommandOracle({"command": ["{python}", "prog.py"]}, metric="score")
    executor = LocalExecutor(oracle, tmp_path / "trials", max_workers=4)
    try:
        futures = [executor.submit(TrialJob(trial_id=f"t{i}", files={"prog.py": program}, proposal=Proposal(hypothesis="h"),
                                            budget=Budget(seconds=120, disk_mb=16), disk_cap="auto"), lambda _: None)
                   for i in range(4)]
        outcomes = [f.result(timeout=300) for f in futures]
    finally:
        executor.shutdown()
    for outcome in outcomes:
        assert outcome.status == Status.ok and outcome.metrics["files"] == 2, outcome.feedback  # its own files
        assert 8 <= outcome.metrics["fs_mib"] <= 16, outcome.metrics
    assert not any((tmp_path / "trials" / f"t{i}" / "work").exists() for i in range(4))


def test_a_required_cap_that_cannot_be_had_is_a_crash_with_the_reason(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk, "_probe", lambda: "no loop devices (test)")
    outcome = trial(tmp_path, monkeypatch, "print('score: 1')\n", "require")
    assert outcome.status == Status.crash, outcome.feedback
    assert "not run: a capped workspace is required (RRMA_DISK_CAP=require) but unavailable: no loop devices" \
        in outcome.feedback
    outcome = trial(tmp_path, monkeypatch, "print('score: 1')\n", "auto", trial_id="t2")  # auto: the watch
    assert outcome.status == Status.ok
    assert disk.describe().startswith("watched (not kernel-enforced: no loop devices (test))")


# ----------------------------------------------------------------------------- the pool made ahead


@needs_cap
def test_a_pool_hands_each_file_system_out_once_and_never_one_a_trial_used(tmp_path: Path) -> None:
    """Six workspaces opened at once from a pool holding four: six file systems, each empty; and the
    workspaces after a trial wrote into its own never show what it wrote."""
    trials = (tmp_path / "trials").absolute()
    pool = warm_pool(trials, 16, ready=4)
    with pool.cond:
        pooled = {made.device for made in pool.ready}
    works = [trials / f"t{i}" / "work" for i in range(6)]
    opened: dict[Path, disk.Workspace | None] = {}
    start = threading.Barrier(len(works))

    def open_one(work: Path) -> None:
        start.wait()
        opened[work] = disk.open_workspace(work, 16, "auto")

    threads = [threading.Thread(target=open_one, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        spaces = [opened.get(work) for work in works]
        assert all(ws is not None for ws in spaces)
        assert len({ws.device for ws in spaces if ws}) == 6 and len({ws.st_dev for ws in spaces if ws}) == 6
        # the pooled ones were taken (not ``len(pool.ready) < 4``: the two takes that found none ask the
        # pool for more, and on a slow machine it may have refilled by now)
        assert pooled <= {ws.device for ws in spaces if ws} and pool.taken >= 6
        for work in works:
            assert os.path.ismount(work) and os.listdir(work) == []
            (work / "planted").write_text(str(work))
        for work in works:  # each sees its own file only
            assert os.listdir(work) == ["planted"] and (work / "planted").read_text() == str(work)
    finally:
        for work in works:
            disk.release(work)
    for i in range(6):  # the next trials, from the same pool, in the same directories and new ones
        work = trials / (f"t{i}" if i % 2 else f"u{i}") / "work"
        if work.exists():
            work.rmdir()
        assert disk.open_workspace(work, 16, "auto") is not None
        try:
            assert os.path.ismount(work) and os.listdir(work) == []
        finally:
            disk.release(work)


@needs_cap
@pytest.mark.parametrize("end", ["exit", "kill"])
def test_a_pools_file_systems_go_with_its_process(tmp_path: Path, end: str) -> None:
    """A harness process with three file systems ready exits (or is killed with SIGKILL): nothing of
    them stays, no mount, no loop device, no image (they were held by descriptors only)."""
    trials = (tmp_path / "run" / "trials").absolute()
    child = (f"import os, sys, time\nfrom pathlib import Path\nfrom rrma.contain import disk\n"
             f"trials = Path({str(trials)!r})\n"
             f"disk.open_workspace(trials / 't1' / 'work', 16, 'auto'); disk.release(trials / 't1' / 'work')\n"
             "pool = disk._pool_for(trials, 16 << 20)\n"
             "with pool.cond:\n    pool.want, pool.asked = 3, True\n    pool.cond.notify_all()\n"
             "deadline = time.monotonic() + 120\n"
             "while len(pool.ready) < 3 and time.monotonic() < deadline:\n    time.sleep(0.05)\n"
             "loops = [p for p in Path('/sys/block').glob('loop*/loop/backing_file')\n"
             "         if Path(p.read_text().strip().removesuffix(' (deleted)')).parent == trials]\n"
             "print(len(pool.ready), len(loops), flush=True)\n"
             + ("os.kill(os.getpid(), 9)\n" if end == "kill" else "sys.exit(0)\n"))
    proc = subprocess.run([sys.executable, "-c", child], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == (-9 if end == "kill" else 0), proc.stderr
    ready, loops = map(int, proc.stdout.split())
    assert ready == 3 and loops >= 3, proc.stdout  # while it lived: three made ahead, each on a loop device
    wait_for(lambda: not loops_backed_in(trials), 60, f"the loop devices of {trials} to go")
    assert not [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(tmp_path) in line]
    assert sorted(p.name for p in trials.iterdir()) == ["t1"]  # no image file left


@needs_cap
@pytest.mark.parametrize("defence", [True, False], ids=["swept", "control"])
def test_an_image_a_kill_left_is_removed_when_a_pool_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            defence: bool) -> None:
    """A harness killed between making an image and unlinking it (its loop device not yet holding it)
    leaves the file; the next pool for that directory removes it. Without the sweep (the control) it stays."""
    trials = tmp_path / "run" / "trials"
    trials.mkdir(parents=True)
    left = trials / f"{disk.IMAGE_PREFIX}0123456789ab{disk.IMAGE_SUFFIX}"
    with open(left, "wb") as fh:
        fh.truncate(16 << 20)
    if not defence:
        monkeypatch.setattr(disk._Pool, "_sweep", lambda pool: None)
    outcome = trial(tmp_path, monkeypatch, "print('score: 1')\n", "auto")
    assert outcome.status == Status.ok, outcome.feedback
    assert left.exists() != defence


@needs_cap
@pytest.mark.parametrize("defence", [True, False], ids=["left-alone", "control"])
def test_a_file_system_mounted_over_a_workspace_is_not_unmounted_by_its_release(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch,
                                                                                defence: bool) -> None:
    """The release detaches what is at the workspace's path only if it is the workspace's own file
    system; without that check (the control) it detaches whatever was mounted over it."""
    work = tmp_path / "trials" / "t1" / "work"
    assert disk.open_workspace(work, 16, "auto") is not None
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "someone-elses", str(work)], check=True)
    if not defence:
        monkeypatch.setattr(disk, "_still_ours", lambda workspace: True)
    try:
        disk.release(work)
        assert ("someone-elses" in disk._mounts_at(work.resolve())) == defence
    finally:
        libc = ctypes.CDLL(None, use_errno=True)
        if "someone-elses" in disk._mounts_at(work.resolve()):
            assert libc.umount2(str(work).encode(), 0) == 0
        assert disk.unmount_leftover(work) == 1  # the capped one, left under it (or, control, alone)


@needs_cap
def test_a_forked_child_gets_no_pooled_file_system(tmp_path: Path) -> None:
    """A child forked while a pool holds file systems starts with none (it closes its copies), so that
    parent and child never hand out the same one; the parent's stay usable."""
    trials = (tmp_path / "trials").absolute()
    script = (f"import os\nfrom pathlib import Path\nfrom rrma.contain import disk\n"
              f"trials = Path({str(trials)!r})\n"
              "disk.open_workspace(trials / 't1' / 'work', 16, 'auto'); disk.release(trials / 't1' / 'work')\n"
              "pool = disk._pool_for(trials, 16 << 20)\n"
              "import time\n"
              "while not pool.ready:\n    time.sleep(0.05)\n"
              "made = pool.ready[0]\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    os._exit(10 + len(disk._POOLS) + (0 if fd_closed(made.mount_fd) else 5))\n"
              "_, status = os.waitpid(pid, 0)\n"
              "print(os.waitstatus_to_exitcode(status), fd_closed(made.mount_fd))\n")
    script = script.replace("pid = os.fork()", "def fd_closed(fd):\n    try:\n        os.fstat(fd)\n"
                            "    except OSError:\n        return True\n    return False\n\npid = os.fork()")
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["10", "False"], proc.stdout  # the child: no pool, its copy closed; the parent's open
