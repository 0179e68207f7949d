"""The network, tried as an attacker would: a trial program that looks for this host's services and
uses one that runs code for whoever asks (a Ray cluster's job API) to act outside the sandbox.

With the host's network shared, a sandboxed program (no capabilities, its own PID and mount
namespaces, a private /tmp) submitted a shell command through the job API of a `ray start --head`
cluster on the same machine, with the token it read from ~/.ray/auth_token, and that command ran
as the harness's user, outside every sandbox: it could have appended to any run's log. Trials now
get a network namespace of their own (loopback only) unless RRMA_TRIAL_NETWORK=on, and ~/.ray is
hidden like the other key files (a cluster made with a token demands it; one made without, Ray's
default, runs anything for anyone who reaches it, so there only the network namespace helps). Each test also runs the attack where it must succeed (outside
the sandbox, or with the defence under test turned off), so a refusal here means something.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rrma.contain import sandbox
from rrma.contain.sandbox import Policy
from rrma.contain.spawn import spawn
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.task import load_task
from rrma.trial import Budget, Status

REPO = Path(__file__).resolve().parents[2]

GUARD = sandbox.unavailable_reason()
needs_guard = pytest.mark.skipif(GUARD is not None, reason=f"trial sandbox unavailable here: {GUARD}")

# what a hostile trial does: list the host's listening ports, then connect to the targets it is given
PROBE = r"""
import json, socket, sys
listening = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                listening.add(int(fields[1].rsplit(":", 1)[1], 16))
    except OSError:
        pass
print("LISTENING", json.dumps(sorted(listening)))
for host, port in json.loads(sys.argv[1]):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        s.sendall(b"forged\n")
        print("REACHED", host, port)
    except OSError as exc:
        print("REFUSED", host, port, type(exc).__name__)
    finally:
        s.close()
"""

# the Ray attack: read the cluster's token, submit a shell command through the job API
JOB_ATTACK = r"""
import json, os, sys, urllib.request
api, target = sys.argv[1], sys.argv[2]
try:
    token = open(os.path.expanduser("~/.ray/auth_token")).read().strip()
except OSError as exc:
    token = ""
print("TOKEN", "read" if token else "none")
body = json.dumps({"entrypoint": f"sh -c 'echo ran outside the sandbox > {target}'"}).encode()
headers = {"Content-Type": "application/json"}
if token:
    headers["Authorization"] = f"Bearer {token}"
try:
    reply = urllib.request.urlopen(urllib.request.Request(api + "/api/jobs/", data=body, headers=headers,
                                                          method="POST"), timeout=90).read()
    print("SUBMITTED", reply.decode()[:200])
except Exception as exc:
    print("REFUSED", type(exc).__name__, str(exc)[:200])
"""


def host_address() -> str | None:
    """This machine's address on its main interface (a UDP 'connect' sends nothing)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))
        address = s.getsockname()[0]
        return None if address.startswith("127.") else address
    return None


class Listener:
    """A server that records what reaches it: TCP on every address of this host, or ``sock``."""

    def __init__(self, sock: socket.socket | None = None) -> None:
        if sock is None:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", 0))
            self.port = sock.getsockname()[1]
        self.sock = sock
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.received: list[bytes] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    self.received.append(conn.recv(64))

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=2)
        self.sock.close()


def probe(tmp_path: Path, targets: list[tuple[str, int]], guard: Policy) -> tuple[list[int], dict[str, str]]:
    result = spawn([sys.executable, "-c", PROBE, json.dumps(targets)], cwd=tmp_path,
                         budget=Budget(seconds=30), guard=guard)
    assert result.status == Status.ok and result.guarded, result.output
    lines = result.output.splitlines()
    listening = json.loads(next(line for line in lines if line.startswith("LISTENING "))[len("LISTENING "):])
    verdicts = {f"{w[1]}:{w[2]}": w[0] for w in (line.split() for line in lines) if w[0] in ("REACHED", "REFUSED")}
    return listening, verdicts


@needs_guard
def test_a_trial_has_no_network_by_default_and_cannot_reach_the_hosts_services(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.ENV_NETWORK, raising=False)
    assert "no network" in sandbox.describe()
    server = Listener()
    try:
        targets = [("127.0.0.1", server.port)] + ([(addr, server.port)] if (addr := host_address()) else [])
        listening, verdicts = probe(tmp_path, targets, Policy.for_trial(tmp_path))
        assert server.port not in listening  # the host's listeners are not even visible
        assert set(verdicts.values()) == {"REFUSED"} and len(verdicts) == len(targets), verdicts
        assert server.received == []
        # the same program with the host's network (the run's choice, or RRMA_TRIAL_NETWORK=on) reaches it:
        # the refusal above is the namespace's doing, not a broken probe
        listening, verdicts = probe(tmp_path, targets[:1], Policy.for_trial(tmp_path, network=True))
        assert server.port in listening and verdicts == {f"127.0.0.1:{server.port}": "REACHED"}, verdicts
        monkeypatch.setenv(sandbox.ENV_NETWORK, "on")
        _, verdicts = probe(tmp_path, targets[:1], Policy.for_trial(tmp_path))
        assert verdicts == {f"127.0.0.1:{server.port}": "REACHED"}, verdicts
        deadline = time.monotonic() + 5
        while len(server.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.received == [b"forged\n", b"forged\n"]
    finally:
        server.close()
    monkeypatch.setenv(sandbox.ENV_NETWORK, "sometimes")
    with pytest.raises(ValueError, match="RRMA_TRIAL_NETWORK='sometimes': expected on or off"):
        sandbox.network()


@needs_guard
def test_the_runs_network_choice_reaches_its_trials_through_the_loop(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop ships the run's choice with each job (as for a Ray worker, whose own setting must not
    widen it): the trials of a default run are refused, those of a run started with RRMA_TRIAL_NETWORK=on
    reach the host, and run.json says which."""
    server = Listener()
    try:
        program = PROBE + "\nprint('loss:', 1.0)\n"
        task = load_task(REPO / "benches" / "demo" / "task.yaml", {
            "oracle.params": {"command": ["{python}", "-c", program, json.dumps([["127.0.0.1", server.port]])]},
            "budget.max_trials": 1, "noise.baseline_repeats": 1, "budget.max_concurrent": 1,
        })
        seen = {}
        for setting in ("off", "on"):
            if setting == "on":
                monkeypatch.setenv(sandbox.ENV_NETWORK, "on")
            else:
                monkeypatch.delenv(sandbox.ENV_NETWORK, raising=False)  # the default
            result = start_run(task, tmp_path / setting)
            assert verify_run(result.run_dir).ok
            store = RunStore(result.run_dir)
            events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
            logs = [store.blob_text(e["data"]["log_blob"]) for e in events if e["kind"] == "trial.finished"]
            seen[setting] = logs
            described = json.loads((result.run_dir / "run.json").read_text())["versions"]["fs_guard"]
            assert ("shared network" if setting == "on" else "no network") in described, described
        assert len(seen["off"]) == 2 and all(f"REFUSED 127.0.0.1 {server.port}" in log for log in seen["off"])
        assert len(seen["on"]) == 2 and all(f"REACHED 127.0.0.1 {server.port}" in log for log in seen["on"])
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_clusters_running() -> int:
    """How many Ray clusters run on this machine (their GCS servers)."""
    servers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                if cmdline.split(b"\0", 1)[0].endswith(b"gcs_server"):
                    servers.append(cmdline)
    return len(servers)


@contextlib.contextmanager
def ray_head(home: Path) -> Iterator[str]:
    """A real `ray start --head` with its dashboard (the job API), its token in HOME/.ray; yields the API's URL.

    Stopped with `ray stop`, which stops every Ray on the machine: so where another cluster already
    runs (a developer's own), the test skips rather than stop it."""
    ray_cli = Path(sys.executable).parent / "ray"
    if not ray_cli.exists():
        ray_cli = Path(shutil.which("ray") or "ray")
    env = {**os.environ, "HOME": str(home)}
    # a careful user's cluster: a token in ~/.ray, which Ray then demands (with no token, Ray's own
    # default, the job API runs anything for anyone who reaches it: only the network namespace helps)
    token = subprocess.run([str(ray_cli), "get-auth-token", "--generate"], env=env, capture_output=True, text=True,
                           timeout=60)
    if token.returncode != 0:
        pytest.skip(f"this Ray cannot make a cluster token (`ray get-auth-token --generate`): "
                    f"{token.stderr.strip().splitlines()[-1:]}")
    if ray_clusters_running():
        pytest.skip("a Ray cluster already runs on this machine: this test's `ray stop` would stop it too")
    gcs_port, dashboard = free_port(), free_port()
    try:
        start = subprocess.run([str(ray_cli), "start", "--head", f"--port={gcs_port}",
                                f"--dashboard-port={dashboard}", "--dashboard-host=127.0.0.1", "--num-cpus=1",
                                "--disable-usage-stats", "--include-dashboard=true"],
                               env=env, capture_output=True, text=True, timeout=120)
        if start.returncode != 0:
            pytest.skip(f"`ray start --head` failed here: {start.stderr.strip().splitlines()[-1:]}")
        api = f"http://127.0.0.1:{dashboard}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(api + "/api/version", timeout=2).read()
                break
            except urllib.error.HTTPError:
                break  # it answers (401 without the token): it is up
            except OSError:
                if time.monotonic() > deadline:
                    pytest.skip("Ray's dashboard (the job API) did not come up within 60 s")
                time.sleep(0.5)
        yield api
    finally:
        subprocess.run([str(ray_cli), "stop", "--force"], env=env, capture_output=True, timeout=120, check=False)


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.25)
    return path.exists()


@pytest.mark.ray
@needs_guard
@pytest.mark.skipif(shutil.which("ray") is None and not (Path(sys.executable).parent / "ray").exists(),
                    reason="the ray CLI is not installed (pip install 'rrma[ray]')")
def test_a_trial_cannot_run_code_through_a_ray_clusters_job_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(tempfile.mkdtemp(prefix="rrma-home-", dir="/var/tmp"))  # outside /tmp, which is private anyway
    out = Path(tempfile.mkdtemp(prefix="rrma-escape-", dir="/var/tmp"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the harness hides the keys of *this* home from its trials
    monkeypatch.delenv(sandbox.ENV_NETWORK, raising=False)
    monkeypatch.delenv(sandbox.ENV_RAY_TOKEN_PATH, raising=False)
    try:
        with ray_head(home) as api:
            assert (home / ".ray" / "auth_token").is_file()
            # the attack works for a program outside the sandbox: the cluster runs what it is sent
            control = subprocess.run([sys.executable, "-c", JOB_ATTACK, api, str(out / "control")],
                                     env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=120)
            assert "TOKEN read" in control.stdout and "SUBMITTED" in control.stdout, control.stdout + control.stderr
            assert wait_for(out / "control", 60), "the unsandboxed job never ran: the attack is not demonstrated"

            def attack(target: str, guard: Policy) -> str:
                result = spawn([sys.executable, "-c", JOB_ATTACK, api, str(out / target)], cwd=work,
                                     budget=Budget(seconds=120), guard=guard)
                assert result.status == Status.ok and result.guarded, result.output
                return result.output

            # a trial as the harness runs it: no network
            output = attack("trial", Policy.for_trial(work))
            assert "REFUSED" in output and "SUBMITTED" not in output, output
            # a trial given the host's network still cannot read the token: the API turns it away
            output = attack("trial-with-network", Policy.for_trial(work, network=True))
            assert "TOKEN none" in output and "REFUSED" in output and "SUBMITTED" not in output, output
            assert not wait_for(out / "trial", 3) and not (out / "trial-with-network").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


# a Unix socket needs no network: connect() to one works through a read-only bind (the kernel checks
# only the socket file's permissions, which uid 0 mapped to the harness's user passes)
UNIX_CLIENT = r"""
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(b"forged\n")
        print("REACHED", path)
    except OSError as exc:
        print("REFUSED", path, type(exc).__name__)
    finally:
        s.close()
"""


class UnixListener(Listener):
    def __init__(self, path: Path) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        super().__init__(sock)

    def close(self) -> None:
        super().close()
        self.path.unlink(missing_ok=True)


@needs_guard
def test_a_trial_cannot_reach_the_service_sockets_under_run(tmp_path: Path) -> None:
    """Docker's API (/run/docker.sock), D-Bus, PostgreSQL, the per-user runtime directories with
    ssh-agent and gpg-agent: the sockets of a host's services live under /run (= /var/run), which a
    trial sees as an empty directory of its own. Outside the sandbox the same client gets through."""
    run_dir = Path(tempfile.mkdtemp(prefix="rrma-test-", dir="/run"))
    server = UnixListener(run_dir / "service.sock")
    try:
        argv = [sys.executable, "-c", UNIX_CLIENT, str(server.path), f"/var/run/{run_dir.name}/service.sock"]
        guarded = spawn(argv, cwd=tmp_path, budget=Budget(seconds=30), guard=Policy.for_trial(tmp_path))
        assert guarded.status == Status.ok and guarded.guarded, guarded.output
        assert guarded.output.split().count("REFUSED") == 2 and "REACHED" not in guarded.output, guarded.output
        assert server.received == []
        unguarded = spawn(argv[:4], cwd=tmp_path, budget=Budget(seconds=30))
        assert f"REACHED {server.path}" in unguarded.output, unguarded.output
        deadline = time.monotonic() + 5
        while not server.received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.received == [b"forged\n"]
    finally:
        server.close()
        shutil.rmtree(run_dir, ignore_errors=True)


@needs_guard
def test_with_the_network_on_name_lookups_still_work_when_resolv_conf_lives_under_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd-resolved's /etc/resolv.conf links into /run: that one file is shown (read-only)."""
    run_dir = Path(tempfile.mkdtemp(prefix="rrma-test-", dir="/run"))
    try:
        (run_dir / "resolv.conf").write_text("nameserver 127.0.0.53\n")
        (run_dir / "other.txt").write_text("not shown\n")
        link = tmp_path / "resolv.conf"
        link.symlink_to(run_dir / "resolv.conf")
        monkeypatch.setattr(sandbox, "RESOLV_CONF", link)
        program = ["cat", str(run_dir / "resolv.conf"), str(run_dir / "other.txt")]
        shared = spawn(program, cwd=tmp_path, budget=Budget(seconds=20),
                             guard=Policy.for_trial(tmp_path, network=True))
        assert shared.guarded and "nameserver 127.0.0.53" in shared.output and "not shown" not in shared.output
        private = spawn(program, cwd=tmp_path, budget=Budget(seconds=20), guard=Policy.for_trial(tmp_path))
        assert private.guarded and "nameserver" not in private.output, private.output
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
