"""Attacks on the containment of a single process, each shown working without the defence and refused with it.

Every test runs a real program: through :func:`rrma.contain.spawn.spawn` (the defence on) and
through a plain ``subprocess`` or a policy with the defence taken out (the control), so a test
fails both when the defence stops working and when the attack stops being an attack here.
"""

from __future__ import annotations

import ast
import ctypes
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rrma.contain import env as env_rule
from rrma.contain import keyring, sandbox, seccomp
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn
from rrma.trial import Budget, Status

GUARD = sandbox.unavailable_reason()
needs_guard = pytest.mark.skipif(GUARD is not None, reason=f"trial sandbox unavailable here: {GUARD}")
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
SYS_ADD_KEY = {"x86_64": 248, "aarch64": 217}.get(platform.machine())
KEYCTL_UPDATE, KEYCTL_READ = 2, 11
KEY_SPEC_SESSION_KEYRING = -3

# A program that reads the key whose id it is given, overwrites it and adds one of its own; it
# prints what each step returned (a number >= 0, or the errno name).
KEY_THIEF = f"""
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
key = int(sys.argv[1])
def res(r):
    return str(r) if r >= 0 else errno.errorcode[ctypes.get_errno()]
buf = ctypes.create_string_buffer(64)
r = libc.syscall({SYS_KEYCTL}, {KEYCTL_READ}, key, buf, 64)
print("read", res(r), buf.value.decode(errors="replace") if r > 0 else "")
print("update", res(libc.syscall({SYS_KEYCTL}, {KEYCTL_UPDATE}, key, b"stolen", 6)))
print("add", res(libc.syscall({SYS_ADD_KEY}, b"user", b"planted", b"x", 1, {KEY_SPEC_SESSION_KEYRING})))
"""


def _keyctl_lib() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _with_session_key(body) -> None:  # type: ignore[no-untyped-def]
    """Run ``body(key_id)`` in a thread whose session keyring is a fresh one holding a secret key
    (so the test never touches the keyring of whoever runs it)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            assert keyring.join_fresh() >= 0
            libc = _keyctl_lib()
            key = libc.syscall(SYS_ADD_KEY, b"user", b"rrma-test-secret", b"hunter2", 7, KEY_SPEC_SESSION_KEYRING)
            assert key >= 0, os.strerror(ctypes.get_errno())
            body(int(key))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def _key_calls_work_here() -> str | None:
    if SYS_KEYCTL is None:
        return f"no keyctl number known for {platform.machine()}"
    return None if keyring.join_fresh_in_thread() >= 0 else "the kernel refuses key calls here (a container's seccomp)"


KEYS = _key_calls_work_here()
needs_keys = pytest.mark.skipif(KEYS is not None, reason=f"kernel keyring unusable: {KEYS}")


@needs_keys
def test_a_child_of_the_harness_reads_overwrites_and_adds_keys_without_the_defence() -> None:
    """The control: a plain child inherits the session keyring and possesses its keys."""
    def body(key: int) -> None:
        out = subprocess.run([sys.executable, "-c", KEY_THIEF, str(key)], capture_output=True, text=True,
                             timeout=30).stdout
        lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
        assert lines["read"] == "7 hunter2" and lines["update"] == "0" and lines["add"].strip().isdigit(), out

    _with_session_key(body)


@needs_keys
@needs_guard
def test_a_sandboxed_trial_can_neither_read_change_nor_add_a_key(tmp_path: Path) -> None:
    """The attack of issue 20 (a trial read the harness's key, overwrote it, added its own): every
    key call is refused by the seccomp filter, and the keyring it could have reached is not the harness's."""
    def body(key: int) -> None:
        result = spawn([sys.executable, "-c", KEY_THIEF, str(key)], cwd=tmp_path, budget=Budget(seconds=30),
                       guard=Policy.for_trial(tmp_path))
        assert result.status == Status.ok and result.guarded, result.output
        lines = dict(line.strip().split(" ", 1) if " " in line.strip() else (line.strip(), "")
                     for line in result.output.strip().splitlines())
        assert lines == {"read": "EPERM", "update": "EPERM", "add": "EPERM"}, result.output
        libc = _keyctl_lib()
        buf = ctypes.create_string_buffer(64)
        assert libc.syscall(SYS_KEYCTL, KEYCTL_READ, key, buf, 64) == 7 and buf.value == b"hunter2"

    _with_session_key(body)


@needs_keys
def test_an_unsandboxed_spawn_starts_in_a_fresh_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the sandbox off (no seccomp), the fresh session keyring alone keeps the key unreadable and
    unchangeable (the child no longer possesses it; the key's owner permissions are view only)."""
    monkeypatch.setenv(sandbox.ENV_MODE, "off")

    def body(key: int) -> None:
        result = spawn([sys.executable, "-c", KEY_THIEF, str(key)], cwd=tmp_path, budget=Budget(seconds=30))
        assert result.status == Status.ok and not result.guarded, result.output
        lines = dict(line.strip().split(" ", 1) for line in result.output.strip().splitlines())
        assert lines["read"].startswith("EACCES") and lines["update"].startswith("EACCES"), result.output
        libc = _keyctl_lib()
        buf = ctypes.create_string_buffer(64)
        assert libc.syscall(SYS_KEYCTL, KEYCTL_READ, key, buf, 64) == 7 and buf.value == b"hunter2"

    _with_session_key(body)


@needs_guard
def test_the_seccomp_filter_is_what_refuses_key_calls(tmp_path: Path) -> None:
    """The same sandbox without the filter lets keyctl through (ENOKEY/EACCES from the kernel, not EPERM):
    the refusal above comes from the filter, not from the namespaces."""
    assert seccomp.unavailable_reason() is None
    probe = [sys.executable, "-c", "import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True); "
             f"r = libc.syscall({SYS_KEYCTL}, 0, -3, 0); print(r, errno.errorcode.get(ctypes.get_errno(), 0))"]
    bare = subprocess.run(Policy.for_trial(tmp_path).wrap(probe, tmp_path), capture_output=True, text=True, timeout=30)
    assert bare.returncode == 0 and "EPERM" not in bare.stdout, bare.stdout + bare.stderr
    filtered = spawn(probe, cwd=tmp_path, budget=Budget(seconds=30), guard=Policy.for_trial(tmp_path))
    assert filtered.output.strip() == "-1 EPERM", filtered.output


CREDENTIALS = {
    "HF_TOKEN": "hf_leak1", "GITHUB_TOKEN": "ghp_leak2", "AWS_SESSION_TOKEN": "aws_leak3",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth_leak4", "PGPASSWORD": "pg_leak5", "OPENAI_KEY": "sk_leak6",
    "DATABASE_URL": "postgres://u:db_leak7@h/db", "ANTHROPIC_API_KEY": "sk-ant-leak8",
}


def test_no_credential_of_issue_20_reaches_a_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables that slipped past the old suffix rule, in the harness's environment and in a given env;
    the control passes them by name (what a task that asks for one gets) and they arrive."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RRMA_HARMLESS", "kept")
    show = [sys.executable, "-c", "import os; print(sorted(os.environ.items()))"]
    for given in (None, dict(os.environ)):
        result = spawn(show, cwd=tmp_path, budget=Budget(seconds=30), env=given)
        assert result.status == Status.ok, result.output
        leaked = [name for name, value in CREDENTIALS.items() if value in result.output or name in result.output]
        assert leaked == [] and "kept" in result.output, result.output
    passed = spawn(show, cwd=tmp_path, budget=Budget(seconds=30), pass_env=list(CREDENTIALS))
    assert all(value in passed.output for value in CREDENTIALS.values()), passed.output
    assert set(CREDENTIALS) <= set(env_rule.removed())


@pytest.mark.parametrize(("name", "value", "credential"), [
    ("HF_TOKEN", "", True),  # a word is TOKEN
    ("PGPASSWORD", "", True),  # a word ends in PASSWORD
    ("SSH_AUTH_SOCK", "/run/agent", True),  # the ssh agent's socket signs as the user
    ("DATABASE_URL", "postgres://u:pw@h/db", True),  # the value holds a password
    ("REDIS_URL", "redis://h:6379/0", False),  # a URL without a password
    ("PATH", "/usr/bin", False),
    ("SSL_CERT_FILE", "/etc/ssl/certs/ca.pem", False),  # a CA bundle path: needed for HTTPS
    ("GIT_AUTHOR_NAME", "a", False),  # AUTHOR is not AUTH
    ("RRMA_TRIAL_TOKEN", "abc", False),  # the harness's own process marker
    ("RRMA_EVAL_TOKENS", "65536", False),  # a count of tokens, not a token
])
def test_the_credential_rule(name: str, value: str, credential: bool) -> None:
    assert env_rule.is_credential(name, value) is credential


@needs_guard
def test_a_trial_sees_only_the_allow_list(tmp_path: Path) -> None:
    """The host beyond the system, the interpreter, the harness's packages and the workspace is not
    there: no home (only the way to an interpreter that lives in it), no checkout around the packages
    (its .git, tests, runs), no /srv, /opt, /var, no /etc/shadow."""
    repo = Path(__file__).resolve().parents[2]
    home = Path.home().resolve()
    probes = [str(p) for p in (home, repo / ".git", repo / "tests", Path("/srv"), Path("/opt"), Path("/var"),
                                Path("/etc/shadow"))]
    program = ("import os, sys\n"
               "for p in sys.argv[1:]:\n"
               "    print(p, 'absent' if not os.path.exists(p) else sorted(os.listdir(p)) if os.path.isdir(p)\n"
               "          else len(open(p, 'rb').read()))\n")

    def listing(output: str) -> dict[str, str]:
        return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in output.splitlines()}

    outside = listing(subprocess.run([sys.executable, "-c", program, *probes], capture_output=True, text=True,
                                     timeout=30).stdout)
    result = spawn([sys.executable, "-c", program, *probes], cwd=tmp_path, budget=Budget(seconds=30),
                   guard=Policy.for_trial(tmp_path))
    assert result.status == Status.ok and result.guarded, result.output
    inside = listing(result.output)
    # in home, at most the first step towards a harness path that lives there (pyenv's ~/.pyenv) and the
    # empty stand-ins of the key folders
    allowed = {p.relative_to(home).parts[0] for p in (*sandbox.harness_paths(), *sandbox.secret_paths())
               if home in p.parents}
    assert set(ast.literal_eval(inside[str(home)])) <= allowed, (inside[str(home)], outside[str(home)])
    for path in probes[1:]:
        assert inside[path] in ("absent", "0", "[]"), (path, outside[path], inside[path])
    assert outside[str(repo / ".git")] != "absent"  # the control: the checkout has one, the trial does not see it
    assert outside[str(home)] != inside[str(home)]


@pytest.mark.parametrize("guarded", [True, False], ids=["sandbox", "no-sandbox"])
def test_a_trial_that_fills_the_disk_is_killed_with_status_disk(tmp_path: Path, guarded: bool) -> None:
    """A trial writing without end into its workspace (the disk the run log lives on) is stopped at its
    disk budget; the control, the same program under a larger budget, writes all it wants."""
    if guarded and GUARD is not None:
        pytest.skip(f"trial sandbox unavailable here: {GUARD}")
    work = tmp_path / "work"
    work.mkdir()
    program = ("import os, time\n"
               "with open('fill.bin', 'wb') as fh:\n"
               "    for _ in range(64):\n"
               "        fh.write(os.urandom(1 << 20)); fh.flush(); os.fsync(fh.fileno()); time.sleep(0.02)\n"
               "print('wrote 64 MiB')\n")
    guard = Policy.for_trial(work) if guarded else None
    small = spawn([sys.executable, "-c", program], cwd=work, budget=Budget(seconds=60, disk_mb=8), guard=guard)
    assert small.status == Status.disk and "disk budget" in small.reason, (small.status, small.reason)
    assert "wrote 64 MiB" not in small.output
    large = spawn([sys.executable, "-c", program], cwd=work, budget=Budget(seconds=60, disk_mb=256), guard=guard)
    assert large.status == Status.ok and "wrote 64 MiB" in large.output, large.output


def test_a_task_passes_a_credential_to_its_trials_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """oracle.pass_env names the one credential a task's programs need; the others are still removed.
    Through the real loop (with and without the sandbox), the program prints what it received."""
    import json

    from rrma.log.store import RunStore
    from rrma.run.loop import start_run
    from rrma.task import load_task

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "show.py").write_text(
        f"import os\nprint('seen', sorted(k for k in os.environ if k in {sorted(CREDENTIALS)!r}))\nprint('loss: 1')\n")
    task_file = tmp_path / "task.yaml"
    task_file.write_text(json.dumps({
        "name": "pass-env", "workspace": {"source": "ws", "editable": ["show.py"]},
        "oracle": {"kind": "command", "params": {"command": ["{python}", "show.py"]}, "pass_env": ["HF_TOKEN"]},
        "metric": {"name": "loss", "direction": "minimize", "source": "self-reported"},
        "budget": {"max_trials": 0}, "noise": {"baseline_repeats": 1},
        "agents": [{"name": "rs", "backend": "random-search"}]}))
    for mode in ("auto", "off"):
        monkeypatch.setenv(sandbox.ENV_MODE, mode)
        result = start_run(load_task(task_file), tmp_path / f"runs-{mode}")
        (finished,) = [e for e in RunStore(result.run_dir).events() if e.kind == "trial.finished"]
        log = RunStore(result.run_dir).blob_text(finished.data.log_blob)
        assert "seen ['HF_TOKEN']" in log, (mode, log)


@needs_guard
def test_a_long_lived_process_outlives_the_thread_that_started_it(tmp_path: Path) -> None:
    """A warm prover started by a short-lived worker thread: bubblewrap's --die-with-parent follows the
    starting *thread*, so the control (a plain Popen of the wrapped command from that thread) is killed
    when the thread ends; rrma.contain.spawn.start keeps a parent thread for as long as the process runs."""
    from rrma.contain.spawn import start

    argv = ["/bin/sh", "-c", "read line; echo got $line"]
    box: dict[str, subprocess.Popen[bytes]] = {}

    def begin(contained: bool) -> None:
        if contained:
            box["proc"] = start(argv, cwd=tmp_path, guard=Policy.for_trial(tmp_path), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        else:
            box["proc"] = subprocess.Popen(Policy.for_trial(tmp_path).wrap(argv, tmp_path), cwd=tmp_path,
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # bwrap sets its parent-death signal before it starts the sandbox's first process: once bwrap has a
        # child, the starting thread's end is what counts (a loaded machine can take seconds to get there)
        children = Path(f"/proc/{box['proc'].pid}/task/{box['proc'].pid}/children")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and box["proc"].poll() is None and not children.read_text().strip():
            time.sleep(0.02)
        time.sleep(0.2)

    for contained in (False, True):
        thread = threading.Thread(target=begin, args=(contained,))
        thread.start()
        thread.join()
        # join returns when the Python thread is done; the kernel thread (the one the parent-death signal
        # follows) can live a moment longer: wait until it is gone before talking to the process
        deadline = time.monotonic() + 30
        while thread.native_id is not None and Path(f"/proc/self/task/{thread.native_id}").exists():
            assert time.monotonic() < deadline, "the starting thread never left"
            time.sleep(0.01)
        proc = box["proc"]
        try:
            out, _ = proc.communicate(b"hello\n", timeout=20)
        except BrokenPipeError:
            out = b""
        if contained:
            assert (out, proc.returncode) == (b"got hello\n", 0)
        else:  # bwrap got its parent-death SIGKILL when the thread ended (what its child managed meanwhile varies)
            assert proc.returncode == -9, (out, proc.returncode)


@pytest.mark.parametrize(("rel", "refused"), [
    ("a/b/file", False), ("a/b", False), ("a/not-yet/made", False),  # a missing part is no link
    ("link/b/file", True), ("a/b/file-link", True), ("a/../a/b", True), ("/etc", True),
])
def test_link_free_paths(tmp_path: Path, rel: str, refused: bool) -> None:
    from rrma.contain import files

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    (tmp_path / "a" / "b" / "file-link").symlink_to(tmp_path / "a" / "b" / "file")
    if refused:
        with pytest.raises(files.LinkRefused):
            files.link_free(tmp_path, rel)
    else:
        assert files.link_free(tmp_path, rel) == tmp_path / rel


@pytest.mark.parametrize("keep", [False, True], ids=["pruned", "kept"])
def test_finished_trials_workspaces_are_pruned_unless_kept(tmp_path: Path, keep: bool) -> None:
    """What a trial's program writes into its workspace (checkpoints, data) is gone once the outcome is
    back, unless loop.keep_workspaces; the trial's files stay in the blobs either way, and the oracle's
    own directory (its reports) stays."""
    import json

    from rrma.run.loop import start_run
    from rrma.task import load_task

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "fill.py").write_text("X = 1\nopen('big.bin', 'wb').write(b'0' * 1_000_000)\nprint('loss: 1')\n")
    task_file = tmp_path / "task.yaml"
    task_file.write_text(json.dumps({
        "name": "prune", "workspace": {"source": "ws", "editable": ["fill.py"]},
        "oracle": {"kind": "command", "params": {"command": ["{python}", "fill.py"]}},
        "metric": {"name": "loss", "direction": "minimize", "source": "self-reported"},
        "budget": {"max_trials": 0}, "noise": {"baseline_repeats": 2}, "loop": {"keep_workspaces": keep},
        "agents": [{"name": "rs", "backend": "random-search"}]}))
    result = start_run(load_task(task_file), tmp_path / "runs")
    assert {t.status for t in result.state.trials.values()} == {"ok"}
    for trial in ("base-0", "base-1"):
        assert (result.run_dir / "trials" / trial / "work" / "big.bin").exists() is keep
        assert (result.run_dir / "trials" / trial / "oracle").is_dir()
