"""Trees an agent makes, against the harness that removes and walks them (issue 31, items 1 and 2).

A trial's program or a coding agent chooses the shape of what it leaves: a chain of folders
thousands deep (``shutil.rmtree`` and a recursive walk raise RecursionError past about a thousand
levels: the run ended ``error`` and ``resume`` failed every time), folders chmod-ed unwritable,
links out of the tree, files the harness may not delete, sparse files and hard links. Each test
here runs the attack against :func:`rrma.contain.files.remove_tree` / :func:`~rrma.contain.files.walk_files`
and, as the control, against the recursive code they replaced (tests/legacy_trees.py), where the
attack works. The coding agents' side is tests/agents/test_coding_trees.py.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from legacy_trees import legacy, make_chain, recursive_walk, scrub

from rrma.contain import files
from rrma.contain.spawn import stale_processes
from rrma.exec.local import LEFTOVER_KEY, TrialJob, evaluate_job
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.task import load_task
from rrma.trial import Budget, Outcome, Proposal, Status

REPO = Path(__file__).resolve().parents[2]
DEPTH = 3000  # three times what a recursion of Python frames survives


def _bottom(fd: int) -> None:
    """A file ``bottom.txt`` holding ``x`` in the folder ``fd``."""
    out = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b"x")
    os.close(out)


# ----------------------------------------------------------------------------- the remover and the walker


@pytest.mark.parametrize("defended", [True, False], ids=["iterative", "control-recursive"])
def test_a_chain_3000_deep_is_walked_and_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 defended: bool) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    make_chain(tree, DEPTH, leaf=_bottom)
    try:
        if not defended:
            legacy(monkeypatch)
            with pytest.raises((RecursionError, OSError)):  # OSError: out of descriptors first, where the limit is low
                list(files.walk_files(tree))
            try:
                files.remove_tree(tree)
            except RecursionError:
                pass  # what ended the run: ignore_errors covers OSError only
            assert tree.exists()  # either way the trial's files stay
            return
        listed = list(files.walk_files(tree, read=lambda _path, _size: True))
        assert [(e.path, e.data) for e in listed] == [("d/" * DEPTH + "bottom.txt", b"x")]
        removal = files.remove_tree(tree)
        assert removal.complete, removal.note()
        assert not tree.exists() and tmp_path.exists()
    finally:
        scrub(tree)


def _tmpfs() -> Path | None:
    """/dev/shm when it is a writable tmpfs: a chain 100,000 deep is made there in seconds (on this
    machine's ext4 every operation on a deep folder costs time in proportion to its depth)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    if any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts) and os.access("/dev/shm", os.W_OK):
        return Path("/dev/shm")
    return None


@pytest.mark.slow
@pytest.mark.skipif(_tmpfs() is None, reason="no writable tmpfs at /dev/shm for a chain 100,000 deep")
def test_a_chain_100000_deep_is_removed_and_stops_a_walk_at_its_cap() -> None:
    base = Path(tempfile.mkdtemp(prefix="rrma-test-chain-", dir=_tmpfs()))
    tree = base / "tree"
    tree.mkdir()
    try:
        make_chain(tree, 100_000, leaf=_bottom)
        with pytest.raises(files.TreeTooLarge) as caught:
            list(files.walk_files(tree))
        assert (caught.value.what, caught.value.limit) == ("entries", files.DEFAULT_MAX_ENTRIES)
        removal = files.remove_tree(tree)
        assert removal.complete, removal.note()
        assert not tree.exists()
    finally:
        scrub(base)


def test_planted_links_go_and_their_targets_stay(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "keep.txt").write_text("keep")
    (outside / "inner" / "keep.txt").write_text("keep too")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "link-dir").symlink_to(outside)  # a folder of the host, as a folder of the tree
    (tree / "a" / "b" / "link-file").symlink_to(outside / "keep.txt")
    (tree / "closed").mkdir()
    (tree / "closed" / "link-inner").symlink_to(outside / "inner")
    (tree / "closed").chmod(0)  # the remover gives its owner the folder back, and still follows nothing
    make_chain(tree / "a", 1500, leaf=lambda fd: os.symlink(outside, "deep-link", dir_fd=fd))
    root_link = tmp_path / "work"
    root_link.symlink_to(outside)  # a working root replaced by a link
    # the links are live: a remover that followed them would reach the host's files
    assert (tree / "link-dir" / "keep.txt").read_text() == "keep"
    assert (tree / "a" / "b" / "link-file").read_text() == "keep"
    try:
        for path in (tree, root_link):
            removal = files.remove_tree(path)
            assert removal.complete, removal.note()
            assert not os.path.lexists(path)
        assert (outside / "keep.txt").read_text() == "keep"
        assert (outside / "inner" / "keep.txt").read_text() == "keep too"
    finally:
        scrub(tree)


# As the agent's own user: a tree whose folders it made unwritable and unreadable. Run by the test as
# nobody when the test is root (root's permission checks would prove nothing), else as the test's user.
AS_AGENT = r"""
import json, os, shutil, sys
sys.path.insert(0, sys.argv[1])
from rrma.contain import files
from rrma.contain.spawn import stale_processes
if os.geteuid() == 0:
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
command, tree = sys.argv[2], sys.argv[3]
if command == "build":
    os.makedirs(f"{tree}/ro/inner"); os.makedirs(f"{tree}/closed/deeper")
    for name in ("ro/inner/f", "ro/g", "closed/deeper/h", "top"):
        open(f"{tree}/{name}", "w").close()
    for name, mode in (("ro/inner", 0o500), ("ro", 0o500), ("closed/deeper", 0), ("closed", 0), (".", 0o500)):
        os.chmod(f"{tree}/{name}", mode)
    print(json.dumps({}))
elif command == "rmtree":
    shutil.rmtree(tree, ignore_errors=True)
    print(json.dumps({"exists": os.path.exists(tree)}))
else:
    removal = files.remove_tree(tree) if command == "remove" else files.clear(tree)
    print(json.dumps({"exists": os.path.exists(tree), "left": removal.left, "first": removal.first,
                      "moved_to": removal.moved_to, "note": removal.note()}))
"""


def _as_agent(command: str, tree: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", AS_AGENT, str(REPO), command, str(tree)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.parametrize("defended", [True, False], ids=["restores-permissions", "control-rmtree"])
def test_folders_the_agent_made_unwritable_are_emptied(defended: bool) -> None:
    base = Path(tempfile.mkdtemp(prefix="rrma-test-perms-"))
    base.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(base, 65534, 65534)
    tree = base / "tree"
    try:
        _as_agent("build", tree)
        if not defended:
            assert _as_agent("rmtree", tree) == {"exists": True}  # ignore_errors: silently left behind
            return
        got = _as_agent("remove", tree)
        assert (got["exists"], got["left"]) == (False, 0), got
    finally:
        scrub(base)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a second user: a folder of root's inside the agent's tree")
def test_what_cannot_be_deleted_is_reported_never_raised_and_moved_aside() -> None:
    base = Path(tempfile.mkdtemp(prefix="rrma-test-locked-"))
    base.chmod(0o755)
    os.chown(base, 65534, 65534)
    tree = base / "tree"
    try:
        _as_agent("build", tree)
        tree.chmod(0o755)
        (tree / "locked").mkdir()  # root's, 0755: the agent's user may not delete what is in it
        (tree / "locked" / "keep").write_text("root's")
        got = _as_agent("remove", tree)
        assert (got["exists"], got["left"]) == (True, 1), got
        assert str(got["first"]).startswith("locked/keep: Permission denied"), got
        assert sorted(os.listdir(tree)) == ["locked"]  # everything else went
        assert "\n" not in str(got["note"]) and "1 entry left" in str(got["note"])
        cleared = _as_agent("clear", tree)  # the path is free again: the leftover moved beside it
        assert cleared["exists"] is False and str(cleared["moved_to"]).startswith(f"{tree}.leftover-")
        assert (Path(str(cleared["moved_to"])) / "locked" / "keep").read_text() == "root's"
    finally:
        scrub(base)


# ----------------------------------------------------------------------------- caps on what a walk reads


def test_a_walk_stops_at_its_entry_cap(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i:02}").touch()
    assert len(list(files.walk_files(tmp_path, max_entries=30))) == 30
    with pytest.raises(files.TreeTooLarge) as caught:
        list(files.walk_files(tmp_path, max_entries=29))
    assert (caught.value.what, caught.value.limit) == ("entries", 29) and caught.value.seen > 29


@pytest.mark.parametrize("defended", [True, False], ids=["bounded", "control-reads-everything"])
def test_sparse_files_and_hard_links_do_not_multiply_what_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  defended: bool) -> None:
    """25 sparse files of 4 MiB (no blocks on disk) and 25 hard links to one real 4 MiB file. Asked for
    none of them, the walk reads nothing; asked for the links, it reads their one file once; past its byte
    cap (apparent sizes, each name counted) it stops. The old walk read all 200 MiB into memory."""
    size = 4 * 2**20
    for i in range(25):
        with open(tmp_path / f"a-sparse-{i:02}", "wb") as fh:
            fh.truncate(size)
    (tmp_path / "real").write_bytes(b"r" * size)
    for i in range(25):
        os.link(tmp_path / "real", tmp_path / f"link-{i:02}")
    if not defended:
        legacy(monkeypatch)
    reads: list[str] = []
    real_read = files._read_at

    def counted_read(fd: int, name: str, st: os.stat_result, rel: str) -> bytes:
        reads.append(rel)
        return real_read(fd, name, st, rel)

    monkeypatch.setattr(files, "_read_at", counted_read)
    tracemalloc.start()
    try:
        listed = list(files.walk_files(tmp_path, read=lambda _p, _s: False, max_file_bytes=size))
        unread_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(listed) == 51 and {e.size for e in listed} == {size}
    if not defended:  # the control reads every file, whatever the caller wanted
        assert unread_peak > 40 * size
        return
    assert unread_peak < size and reads == [] and all(e.data is None for e in listed)
    links = list(files.walk_files(tmp_path, read=lambda p, _s: p.startswith(("link", "real")), max_file_bytes=size,
                                  max_bytes=26 * size))
    assert reads == ["link-00"]  # the other 25 names of that inode are not read again
    assert [e.data for e in links if e.data is not None] == [b"r" * size] * 26
    with pytest.raises(files.TreeTooLarge) as caught:
        list(files.walk_files(tmp_path, read=lambda _p, _s: True, max_file_bytes=size, max_bytes=8 * size))
    assert caught.value.what == "bytes" and caught.value.seen == 9 * size  # nine sparse files, counted whole
    assert reads[1:] == [f"a-sparse-{i:02}" for i in range(8)]  # the ninth was not read: the cap came first


def test_the_legacy_walk_is_the_old_one(tmp_path: Path) -> None:
    """The control walk lists what the new one lists (it differs in recursion and in reading, nothing else)."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("f")
    (tmp_path / "a" / "l").symlink_to(tmp_path)
    (tmp_path / "z").write_text("z")
    new = [(e.path, e.kind, e.size) for e in files.walk_files(tmp_path)]
    old = [(e.path, e.kind, e.size) for e in recursive_walk(tmp_path)]
    assert new == old == [("a/b/f", stat.S_IFREG, 1), ("a/l", stat.S_IFLNK, 0), ("z", stat.S_IFREG, 1)]


# ----------------------------------------------------------------------------- a real run, a real resume

CHAIN = """
import os, sys
X = 1
if os.environ.get("RRMA_TEST_HANG") == "1" or {every!r}:
    for _ in range({depth}):
        os.mkdir("d")
        os.chdir("d")
    open("bottom.txt", "w").close()
    {after}
if os.environ.get("RRMA_TEST_HANG") == "1":
    import time
    print("{marker}", flush=True)
    time.sleep(600)
print("loss: 1.0")
"""


def chain_task(tmp_path: Path, *, every: bool, marker: str = "", after: str = "pass", trials: int = 1,
               **extra: object) -> Path:
    """A task whose program (editable: chain.py) leaves a chain of DEPTH folders in its workspace: on every
    run (``every``), or only while RRMA_TEST_HANG=1 is set, then printing ``marker`` and hanging."""
    ws = tmp_path / "task" / "ws"
    ws.mkdir(parents=True)
    (ws / "chain.py").write_text(CHAIN.format(every=every, depth=DEPTH, marker=marker, after=after))
    task = tmp_path / "task" / "task.yaml"
    task.write_text(json.dumps({
        "name": "chain", "oracle": {"kind": "command", "params": {"command": ["{python}", "chain.py"]}},
        "workspace": {"source": "ws", "editable": ["chain.py"]},
        "metric": {"name": "loss", "direction": "minimize", "source": "self-reported"},
        "budget": {"max_trials": trials, "trial_seconds": 120, "max_concurrent": 1}, "noise": {"baseline_repeats": 1},
        "agents": [{"name": "rs", "backend": "random-search"}],
        "search_space": {"chain.py:X": {"kind": "int", "low": 2, "high": 9}}, **extra}))
    return task


@pytest.fixture
def host_workspaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trials' workspaces on the host's file system (RRMA_DISK_CAP=off): with the kernel disk cap
    each workspace is a file system of its own (rrma/contain/disk.py) whose files go with its unmount, so
    the remover would never meet the chain these tests are about."""
    monkeypatch.setenv("RRMA_DISK_CAP", "off")


@pytest.mark.parametrize("defended", [True, False], ids=["iterative", "control-recursive"])
@pytest.mark.usefixtures("host_workspaces")
def test_a_trial_that_leaves_a_deep_chain_does_not_end_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               defended: bool) -> None:
    if not defended:
        legacy(monkeypatch)
    try:
        result = start_run(load_task(chain_task(tmp_path, every=True)), tmp_path / "runs")
        if not defended:  # the cleanup's RecursionError ended the run; the chain is still on disk
            assert result.reason == "error" and "RecursionError" in str(result.error)
            assert (result.run_dir / "trials" / "base-0" / "work" / "d").exists()
            return
        assert result.reason != "error", result.error
        finished = [e.data for e in RunStore(result.run_dir).events() if e.kind == "trial.finished"]
        assert [(d.trial_id, d.status) for d in finished] == [("base-0", "ok"), ("t0001", "ok")]
        assert not list((result.run_dir / "trials").glob("*/work"))  # every workspace, chain and all, is gone
        assert verify_run(result.run_dir).ok
    finally:
        scrub(tmp_path / "runs")


def _kill_harness_once_the_chain_is_made(tmp_path: Path, marker: str) -> Path:
    runs = tmp_path / "runs"
    harness = subprocess.Popen([sys.executable, "-m", "cli.main", "--headless", "run",
                                str(chain_task(tmp_path, every=False, marker=marker, trials=0)), "--runs", str(runs)],
                               cwd=REPO, env={**os.environ, "RRMA_TEST_HANG": "1"}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        live = None
        while time.monotonic() < deadline and harness.poll() is None:
            live = next(iter(runs.glob("*/trials/base-0/live.log")), None) if runs.exists() else None
            if live is not None and marker in live.read_text(errors="replace"):
                break
            time.sleep(0.1)
        assert live is not None and marker in live.read_text(errors="replace"), "the trial never made its chain"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    (run_dir,) = list(runs.iterdir())
    work = run_dir / "trials" / "base-0" / "work"
    deadline = time.monotonic() + 30
    while stale_processes(work) and time.monotonic() < deadline:  # the trial goes with its harness
        time.sleep(0.1)
    assert (work / "d").is_dir()
    return run_dir


@pytest.mark.usefixtures("host_workspaces")
def test_resume_of_a_killed_run_with_a_deep_leftover_works(tmp_path: Path) -> None:
    marker = f"rrma-chain-made-{os.getpid()}-{time.monotonic_ns()}"
    run_dir = _kill_harness_once_the_chain_is_made(tmp_path, marker)
    try:
        proc = subprocess.run([sys.executable, "-m", "cli.main", "--headless", "resume", str(run_dir), "--quiet"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        events = RunStore(run_dir).events()
        assert events[-1].kind == "run.finished" and events[-1].data.reason != "error"
        assert [e.data.status for e in events if e.kind == "trial.finished"] == ["ok"]
        assert not (run_dir / "trials" / "base-0" / "work").exists()
    finally:
        scrub(tmp_path / "runs")


def test_control_the_old_cleanup_fails_the_re_run_of_such_a_leftover(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What `rrma-tui resume` met before: the re-run's cleanup of the leftover raised, and the baseline
    ended crash (`baseline failed: oracle error: RecursionError`) on every resume."""
    trial_dir = tmp_path / "trials" / "base-0" / "work"
    trial_dir.mkdir(parents=True)
    make_chain(trial_dir, DEPTH)

    class Scores:
        def held_out(self) -> tuple[Path, ...]:
            return ()

        def evaluate(self, ctx: object) -> Outcome:
            return Outcome(status=Status.ok, score=1.0)

    job = TrialJob(trial_id="base-0", files={"chain.py": "X = 1\n"}, proposal=Proposal(hypothesis="baseline"),
                   budget=Budget(seconds=30), fs_guard="off")
    try:
        fixed = evaluate_job(Scores(), job, trial_dir, lambda _: None, threading.Event())  # type: ignore[arg-type]
        assert fixed.status == Status.ok and not trial_dir.exists()
        trial_dir.mkdir(parents=True)
        make_chain(trial_dir, DEPTH)
        legacy(monkeypatch)
        old = evaluate_job(Scores(), job, trial_dir, lambda _: None, threading.Event())  # type: ignore[arg-type]
        assert old.status == Status.crash and "oracle error: RecursionError" in old.feedback
    finally:
        scrub(tmp_path / "trials")


LOCK = textwrap.dedent("""
    import subprocess
    subprocess.run(["chattr", "+i", "bottom.txt"], check=True)
""").strip().replace("\n", "\n    ")


@pytest.mark.skipif(os.geteuid() != 0 or not any((Path(d) / "chattr").exists() for d in ("/usr/bin", "/bin")),
                    reason="needs root and chattr: a file no one may delete (the immutable flag)")
@pytest.mark.usefixtures("host_workspaces")
def test_a_leftover_the_harness_cannot_delete_is_a_note_and_the_run_goes_on(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial (unsandboxed, as root) marks the file at the bottom of its chain immutable: the workspace
    cannot be removed. The outcome is recorded as usual, one note per trial names the leftover, the run
    finishes."""
    from rrma.contain import sandbox

    monkeypatch.setenv(sandbox.ENV_MODE, "off")
    task = chain_task(tmp_path, every=True, after=LOCK)
    try:
        result = start_run(load_task(task), tmp_path / "runs")
        assert result.reason != "error", result.error
        events = RunStore(result.run_dir).events()
        assert [(e.data.trial_id, e.data.status) for e in events if e.kind == "trial.finished"] == [
            ("base-0", "ok"), ("t0001", "ok")]
        notes = [e.data.text for e in events if e.kind == "note" and "could not remove" in e.data.text]
        assert len(notes) == 2 and all("\n" not in n and "1 entry left" in n and "bottom.txt" in n for n in notes)
        assert notes[0].startswith("trial base-0: could not remove all of ")
        assert not any(LEFTOVER_KEY in json.dumps(e.data.model_dump()) for e in events)  # never a metric
    finally:
        for work in (tmp_path / "runs").glob("*/trials/*/work"):
            make_chain_unlock(work)
        scrub(tmp_path / "runs")


def make_chain_unlock(work: Path) -> None:
    """Clear the immutable flag of the file at the bottom of ``work``'s chain (reached by descriptor: its
    path is past PATH_MAX; chattr gets it through this process's /proc/PID/fd)."""
    fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while "d" in os.listdir(fd):
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        subprocess.run(["chattr", "-i", f"/proc/{os.getpid()}/fd/{fd}/bottom.txt"], capture_output=True, timeout=30)
    finally:
        os.close(fd)
