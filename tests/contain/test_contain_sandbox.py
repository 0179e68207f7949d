"""The file-system guard: trial programs cannot rewrite the harness, the run or held-out data.

Real processes in real bubblewrap sandboxes; the tests that need one skip with the probe's reason
where this machine cannot make them. tests/contain/test_containment.py tries the attacks open to root.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rrma.contain.spawn
from rrma.contain import sandbox
from rrma.contain.disk import IMAGE_PREFIX
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.task import load_task
from rrma.trial import Budget, Status

REPO = Path(__file__).resolve().parents[2]
REASON = sandbox.unavailable_reason()
needs_guard = pytest.mark.skipif(REASON is not None, reason=f"file-system guard unavailable here: {REASON}")


def layout(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    protected = tmp_path / "run"
    work = protected / "trials" / "t0001" / "work"
    work.mkdir(parents=True)
    (protected / "events.jsonl").write_text('{"seq": 0}\n')
    secret_dir = tmp_path / "heldout"
    secret_dir.mkdir()
    (secret_dir / "test.jsonl").write_text('{"question": "q", "answer": "#### 4"}\n')
    secret_file = tmp_path / "val.bin"
    secret_file.write_bytes(b"validation bytes")
    return protected, work, secret_dir, secret_file


@needs_guard
def test_read_only_writable_and_hidden_paths_are_enforced(tmp_path: Path) -> None:
    protected, work, secret_dir, secret_file = layout(tmp_path)
    guard = Policy.for_trial(work, protect=(protected,)).hiding(secret_dir, secret_file)
    script = f"""
import errno, os
def attempt(what, fn):
    try:
        fn()
        print(what, "ok")
    except OSError as exc:
        print(what, errno.errorcode[exc.errno])
attempt("append-log", lambda: open({str(protected / "events.jsonl")!r}, "a").write('{{"forged": 1}}\\n'))
attempt("new-file-in-run", lambda: open({str(protected / "forged.txt")!r}, "w").close())
attempt("other-trial", lambda: os.makedirs({str(protected / "trials" / "t0002")!r}))
attempt("harness", lambda: open({rrma.contain.spawn.__file__!r}, "r+b").close())
attempt("own-workspace", lambda: open("out.txt", "w").write("mine"))
attempt("relative-path", lambda: open("../../../events.jsonl", "a").write("forged"))
print("log-visible", os.path.exists({str(protected / "events.jsonl")!r}))
attempt("via-harness-proc", lambda: open("/proc/{os.getpid()}/root{protected}/events.jsonl", "a").write("forged"))
print("hidden-dir", sorted(os.listdir({str(secret_dir)!r})))
print("hidden-file", repr(open({str(secret_file)!r}, "rb").read()))
"""
    result = spawn([sys.executable, "-c", script], cwd=work, budget=Budget(seconds=30), guard=guard)
    assert result.status == Status.ok, result.output
    assert result.guarded
    lines = dict(line.split(" ", 1) for line in result.output.strip().splitlines())
    assert lines == {"append-log": "EROFS", "new-file-in-run": "EROFS", "other-trial": "EROFS",
                     "harness": "EROFS", "own-workspace": "ok", "relative-path": "EROFS",
                     "log-visible": "False", "via-harness-proc": "ENOENT", "hidden-dir": "[]", "hidden-file": "b''"}
    # a program started with its working directory inside a read-only tree (the scorer's case)
    inside = spawn(["/bin/sh", "-c", "echo forged >> events.jsonl"], cwd=protected, budget=Budget(seconds=30),
                         guard=guard)
    assert inside.status == Status.crash and "Read-only file system" in inside.output
    # nothing changed outside the namespace, and the namespace is gone with the process
    assert (protected / "events.jsonl").read_text() == '{"seq": 0}\n'
    assert not (protected / "forged.txt").exists()
    assert (work / "out.txt").read_text() == "mine"
    assert (secret_file.read_bytes(), os.listdir(secret_dir)) == (b"validation bytes", ["test.jsonl"])


def processes_with(needle: bytes) -> list[int]:
    """Live (non-zombie) pids whose environment contains ``needle``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0") and \
                    b") Z" not in Path(f"/proc/{entry}/stat").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


@needs_guard
def test_limits_and_labels_are_unchanged_under_the_guard(tmp_path: Path) -> None:
    _, work, _, _ = layout(tmp_path)
    guard = Policy.for_trial(work)
    token = f"RRMA_TEST_TOKEN={os.getpid()}-{time.monotonic_ns()}"
    forks = "import os, time\nos.fork()\nos.setsid()\nprint('forked', flush=True)\ntime.sleep(600)\n"
    # the budget must outlast the sandbox's and Python's start: on a loaded two-core machine (CI) one
    # second was too short and neither process had printed; a longer budget is tried when it was
    for seconds in (2, 20):
        hung = spawn([sys.executable, "-c", forks], cwd=work, budget=Budget(seconds=seconds), guard=guard,
                     env={**os.environ, token.split("=")[0]: token.split("=")[1]})
        # both processes (one even left the process group with setsid) are gone: pids inside the
        # namespace mean nothing here, so look for the token in every live process's environment
        assert not processes_with(token.encode())
        if hung.output.count("forked") == 2:
            break
    assert hung.status == Status.timeout and hung.guarded and hung.output.count("forked") == 2
    segv = spawn([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"], cwd=work,
                       budget=Budget(seconds=10), guard=guard)
    assert (segv.status, segv.signal_name) == (Status.crash, "SIGSEGV")
    crashed = spawn([sys.executable, "-c", "raise SystemExit(3)"], cwd=work, budget=Budget(seconds=10),
                          guard=guard)
    assert (crashed.status, crashed.returncode) == (Status.crash, 3)
    with pytest.raises(FileNotFoundError):
        spawn(["no-such-program-rrma"], cwd=work, budget=Budget(seconds=5), guard=guard)


def test_require_mode_turns_an_unguardable_trial_into_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.ENV_MODE, "require")
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "no mount namespaces in this test")
    result = spawn(["true"], cwd=tmp_path, budget=Budget(seconds=5), guard=Policy.for_trial(tmp_path))
    assert result.status == Status.crash and not result.guarded
    assert "RRMA_FS_GUARD=require" in result.reason and "no mount namespaces in this test" in result.reason
    # auto: the same trial runs unguarded, and says so
    monkeypatch.setenv(sandbox.ENV_MODE, "auto")
    result = spawn(["true"], cwd=tmp_path, budget=Budget(seconds=5), guard=Policy.for_trial(tmp_path))
    assert result.status == Status.ok and not result.guarded
    # a job from a run started with require carries it to wherever it runs (a Ray worker's env may differ)
    required = Policy.for_trial(tmp_path, required=True)
    assert required.hiding(tmp_path / "x").protecting(tmp_path / "y").required
    result = spawn(["true"], cwd=tmp_path, budget=Budget(seconds=5), guard=required)
    assert result.status == Status.crash and "no mount namespaces in this test" in result.reason


def test_off_mode_and_bad_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        monkeypatch.setenv(sandbox.ENV_MODE, "off")
        assert sandbox.unavailable_reason() == "turned off (RRMA_FS_GUARD=off)"
        assert sandbox.describe().startswith("off: turned off")
        monkeypatch.setenv(sandbox.ENV_MODE, "sometimes")
        with pytest.raises(ValueError, match="RRMA_FS_GUARD='sometimes': expected one of auto, off, require"):
            sandbox.mode()
    finally:
        monkeypatch.delenv(sandbox.ENV_MODE)
    assert sandbox.unavailable_reason() is REASON  # the probe's cached answer is back


def test_harness_paths_cover_the_code_and_the_interpreter() -> None:
    paths = sandbox.harness_paths()
    code = Path(rrma.contain.spawn.__file__).resolve()
    assert any(p in code.parents for p in paths)
    assert any(p in Path(sys.executable).resolve().parents for p in paths)
    assert Path("/") not in paths and Path.home().resolve() not in paths


ATTACK = r"""
import errno
from pathlib import Path
run = Path.cwd().parents[2]
won = 0
for name, path in [("log", run / "events.jsonl"), ("run_json", run / "run.json"),
                   ("harness", Path(HARNESS_FILE))]:
    try:
        open(path, "r+b").close()
        won += 1
        print(name, "writable")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
try:
    (run / "forged.jsonl").write_text("{}")
    won += 1
except OSError as exc:
    print("forge", errno.errorcode[exc.errno])
Path("mine.txt").write_text("own workspace is writable")
print("loss:", won)
"""


@needs_guard
def test_a_trial_that_attacks_the_run_changes_nothing(tmp_path: Path) -> None:
    """Through the whole loop: the command oracle's program tries to open the run log, run.json and
    the harness's code for writing and to forge a file in the run dir; every attempt fails."""
    task = load_task(REPO / "benches" / "demo" / "task.yaml", {
        "oracle.params": {"command": ["{python}", "-c", ATTACK.replace("HARNESS_FILE", repr(rrma.contain.spawn.__file__))]},
        "budget.max_trials": 2, "noise.baseline_repeats": 1, "budget.max_concurrent": 1,
        "oracle.scorer": {}, "metric.source": "self-reported",  # the score is the program's own `loss:` line
        "loop.keep_workspaces": True,  # the workspaces are looked at below
    })
    result = start_run(task, tmp_path)
    run_dir = result.run_dir
    assert verify_run(run_dir).ok
    assert result.reason == "max_trials", (result.reason, result.state.notes)
    trials = list(result.state.trials.values())
    assert len(trials) == 3 and {t.score for t in trials} == {0.0}
    assert not (run_dir / "forged.jsonl").exists()
    # the trials' directories: not an image the capped-disk pool is still making there (rrma/contain/disk.py
    # IMAGE_PREFIX; it unlinks each once attached, and one was seen mid-making beside a loaded machine's work)
    trial_dirs = [d for d in (run_dir / "trials").iterdir() if not d.name.startswith(IMAGE_PREFIX)]
    assert len(trial_dirs) == 3
    for trial_dir in trial_dirs:
        assert (trial_dir / "work" / "mine.txt").is_file()
    store = RunStore(run_dir)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    logs = "\n".join(store.blob_text(e["data"]["log_blob"]) for e in events if e["kind"] == "trial.finished")
    # the run dir is not there at all for the trial (an empty read-only directory), the harness read-only
    assert logs.count("log ENOENT") == 3 and logs.count("run_json ENOENT") == 3
    assert logs.count("harness EROFS") == 3 and logs.count("forge EROFS") == 3
    assert json.loads((run_dir / "run.json").read_text())["versions"]["fs_guard"].startswith("on")


def test_oracle_children_ignore_a_user_site_a_trial_could_create(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The home directory stays writable, so a trial could create a user site-packages with a .pth
    file that runs in every later Python; the oracle's own children start with -s then.

    Both settings are checked: an interpreter with the user site on (a system or pyenv Python), and
    one with it off (a venv, as the README installs into: include-system-site-packages = false)."""
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "absent"))
    argv = sandbox.harness_python()
    assert argv == [sys.executable, "-s"]
    env = {**os.environ, "PYTHONUSERBASE": str(tmp_path / "userbase")}
    probe = [sys.executable, "-c", "import site; print(site.ENABLE_USER_SITE); print(site.getusersitepackages())"]
    enabled, where = subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout.split("\n")[:2]
    user_site = Path(where.strip())
    assert user_site.is_relative_to(tmp_path / "userbase")
    user_site.mkdir(parents=True)
    (user_site / "planted.pth").write_text("import sys; sys.stdout.write('INJECTED\\n')\n")
    plain = subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, text=True, check=True)
    child = subprocess.run([*argv, "-c", "pass"], env=env, capture_output=True, text=True, check=True)
    assert "INJECTED" not in child.stdout  # what matters in either setting: the oracle's children are clean
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site))
    if enabled == "True":
        assert site.ENABLE_USER_SITE
        assert "INJECTED" in plain.stdout  # the threat is real for a plain interpreter
        assert sandbox.harness_python() == [sys.executable]  # an existing user site is kept (and read-only)
    else:
        # a venv turns the user site off for every interpreter it starts: the planted .pth cannot
        # run even without -s, and an existing user site directory is nothing the harness uses
        assert not site.ENABLE_USER_SITE
        assert "INJECTED" not in plain.stdout
        assert sandbox.harness_python() == [sys.executable, "-s"]


@needs_guard
def test_nested_marks_apply_from_the_outside_in(tmp_path: Path) -> None:
    """read-only / writable inside it / read-only inside that: each level keeps its own mode."""
    outer = tmp_path / "outer"
    inner = outer / "work"
    data = inner / "data"
    data.mkdir(parents=True)
    guard = Policy(read_only=(outer, data, outer / "work" / "data" / ".."), writable=(inner,))
    script = f"for d in {outer} {inner} {data}; do touch $d/x 2>/dev/null && echo $d ok || echo $d ro; done"
    result = spawn(["/bin/sh", "-c", script], cwd=inner, budget=Budget(seconds=30), guard=guard)
    assert result.output.split() == [str(outer), "ro", str(inner), "ok", str(data), "ro"], result.output
    # a path listed both read-only (here as data/..) and writable is writable; one mount per level
    mounts = guard.mounts()
    binds = [tuple(mounts[i:i + 3]) for i, arg in enumerate(mounts) if arg in ("--bind", "--ro-bind")]
    assert binds.count(("--ro-bind", str(outer), str(outer))) == 1 and binds.count(("--ro-bind", str(data), str(data))) == 1
    assert binds.count(("--bind", str(inner), str(inner))) == 1
