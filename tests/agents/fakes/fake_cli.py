"""Fake coding-agent CLIs: real executables that replay recorded stream formats while really working.

``claude``, ``codex``, ``aider`` and ``fake-agent`` in this folder are tiny wrappers around
:func:`main`. Put this folder first on ``PATH`` and the coding-agent backends run them exactly as
they would run the real tools: in the sandbox, in a copy of the parent's workspace, with the key
in the environment. Each checks its command line the way the real tool does (``--verbose`` with
stream-json, the root guard of ``--dangerously-skip-permissions``, ``--skip-git-repo-check``,
the key variable), then plays a *scenario*: a fixture under tests/fixtures/coding_agents/<tool>/
whose lines are printed as recorded, with ``{{var}}`` filled in, and whose directive lines
(``{"_fake": ...}``, or ``#fake {...}`` in text fixtures) make the fake act: read, edit and run
files, post with ``rrma-post``, write the hypothesis or a proof, sleep (hang), exit (crash),
loop, try to escape the sandbox, or echo its key.

The scenario is chosen per run: ``RRMA_FAKE_SCENARIOS_<AGENT>`` (the agent's name upper-cased,
other characters as ``_``) or ``RRMA_FAKE_SCENARIOS``, a comma-separated list indexed by
``RRMA_AGENT_RUN`` (the last one repeats); default ``edit``. ``edit:FILE:NAME=VALUE`` edits that
constant; plain ``edit`` improves the demo objective one constant per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, NoReturn

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "coding_agents"
# the demo objective's constants and their optima (benches/demo/workspace/objective.py)
DEMO_OPTIMUM = [("X", "1.7"), ("Y", "-0.8"), ("DEPTH", "5"), ("LEARNING_RATE", "0.003")]


class Fake:
    def __init__(self, tool: str, argv: list[str]) -> None:
        self.tool = tool
        self.argv = argv
        self.vars: dict[str, str] = {"cwd": os.getcwd(), "session": str(uuid.uuid4()),
                                     "agent": os.environ.get("RRMA_AGENT", "?"), "run": os.environ.get("RRMA_AGENT_RUN", "1")}
        self.text = tool == "aider" or tool == "fake-agent"  # plain-text fixtures: no JSON escaping
        self.scenario = self._scenario()

    # ------------------------------------------------------------------ scenario

    def _scenario(self) -> list[str]:
        agent = re.sub(r"[^A-Za-z0-9]", "_", os.environ.get("RRMA_AGENT", "")).upper()
        raw = os.environ.get(f"RRMA_FAKE_SCENARIOS_{agent}") or os.environ.get("RRMA_FAKE_SCENARIOS") or "edit"
        entries = [e.strip() for e in raw.split(",") if e.strip()]
        run = max(1, int(os.environ.get("RRMA_AGENT_RUN", "1")))
        return entries[min(run, len(entries)) - 1].split(":")

    def lines(self) -> list[str]:
        ext = "txt" if self.text else "jsonl"
        path = FIXTURES / self.tool / f"{self.scenario[0]}.{ext}"
        if not path.is_file():
            fail(f"fake {self.tool}: no fixture {path}")
        return path.read_text(encoding="utf-8").splitlines()

    # ------------------------------------------------------------------ output

    def sub(self, line: str) -> str:
        if "path" not in self.vars and re.search(r"\{\{(path|old|new|name|value)\}\}", line):
            self.do_choose({})  # a tool call that names the edit before the fixture's `choose` line
        def value(match: re.Match[str]) -> str:
            text = self.vars.get(match.group(1), "")
            return text if self.text else json.dumps(text)[1:-1]
        return re.sub(r"\{\{(\w+)\}\}", value, line)

    def play(self) -> int:
        lines = self.lines()
        i = 0
        loop_at: int | None = None  # a `loop` directive: the lines after it repeat until the process is killed
        while True:
            if i == len(lines):
                if loop_at is None:
                    return 0
                i = loop_at
                time.sleep(0.05)
            line = lines[i]
            i += 1
            directive = self._directive(line)
            if directive is None:
                print(self.sub(line), flush=True)
                continue
            kind = directive["_fake"]
            if kind == "loop":
                loop_at = i
            elif kind == "exit":
                if directive.get("stderr"):
                    print(self.arg(directive, "stderr"), file=sys.stderr, flush=True)
                return int(directive.get("code", 0))
            else:
                getattr(self, f"do_{kind}")(directive)

    def _directive(self, line: str) -> dict[str, Any] | None:
        if self.text:
            if not line.startswith("#fake "):
                return None
            return dict(json.loads(line[len("#fake "):]))
        if not line.startswith('{"_fake"'):
            return None
        return dict(json.loads(line))

    def arg(self, d: dict[str, Any], name: str) -> str:
        """A directive's argument with {{var}} filled in (no JSON escaping: it is a value, not output)."""
        return re.sub(r"\{\{(\w+)\}\}", lambda m: self.vars.get(m.group(1), ""), str(d[name]))

    # ------------------------------------------------------------------ acts

    def do_read(self, d: dict[str, Any]) -> None:
        text = Path(self.arg(d, "path")).read_text(encoding="utf-8")
        numbered = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.splitlines(), 1))  # Claude's Read
        self.vars["read_output"] = text if d.get("raw") else numbered

    def do_count(self, d: dict[str, Any]) -> None:
        self.vars["n"] = str(int(self.vars.get("n", "0")) + 1)

    def do_turn(self, d: dict[str, Any]) -> None:
        """One more agentic turn; past --max-turns, end the way Claude Code does (result error_max_turns)."""
        self.do_count(d)
        if int(self.vars["n"]) > int(self.vars.get("max_turns", "1000000")):
            print(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True, "duration_ms": 1000,
                              "num_turns": int(self.vars["n"]), "session_id": self.vars["session"],
                              "total_cost_usd": 0.01, "usage": {"input_tokens": 10, "output_tokens": 10},
                              "permission_denials": [], "errors": []}), flush=True)
            sys.exit(1)

    def do_run(self, d: dict[str, Any]) -> None:
        program = next((p for p in ("objective.py", "main.py") if Path(p).is_file()), "objective.py")
        self.vars["program"] = program
        argv = [sys.executable if a == "python3" else (program if a == "{{program}}" else a) for a in d["argv"]]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        self.vars["run_output"] = (proc.stdout + proc.stderr).rstrip("\n")
        self.vars["run_exit"] = str(proc.returncode)
        for name, value in re.findall(r"^(\w+):\s*(\S+)\s*$", proc.stdout, re.M):  # `loss: 4.5` -> {{out_loss}}
            self.vars[f"out_{name}"] = value

    def do_choose(self, d: dict[str, Any]) -> None:
        """Pick the edit (the file, the constant, its new value) without making it yet."""
        self.vars["program"] = next((p for p in ("objective.py", "main.py") if Path(p).is_file()), "objective.py")
        if len(self.scenario) >= 3:
            path, assignment = self.scenario[1], self.scenario[2]
            name, value = assignment.split("=", 1)
        else:
            path, name, value = "objective.py", *self._next_demo_edit()
        text = Path(path).read_text(encoding="utf-8")
        match = re.search(rf"^{re.escape(name)}\s*=\s*[^#\n]*?(?=\s*(#|$))", text, re.M)
        if match is None:
            fail(f"fake {self.tool}: no constant {name} in {path}")
        self.vars.update(path=path, old=match.group(0), new=f"{name} = {value}", name=name, value=value)

    def do_edit(self, d: dict[str, Any]) -> None:
        if "new" not in self.vars:
            self.do_choose(d)
        target = Path(self.vars["path"])
        target.write_text(target.read_text(encoding="utf-8").replace(self.vars["old"], self.vars["new"], 1),
                          encoding="utf-8")

    def do_replace(self, d: dict[str, Any]) -> None:
        """Edit any text of a file, not only a constant: ``old`` becomes ``new`` in ``path`` (the Edit tool's
        old_string/new_string); ``name`` (optional) says what was changed in the post and hypothesis templates."""
        path, old, new = self.arg(d, "path"), self.arg(d, "old"), self.arg(d, "new")
        text = Path(path).read_text(encoding="utf-8")
        if old not in text:
            fail(f"fake {self.tool}: {old!r} is not in {path}")
        Path(path).write_text(text.replace(old, new, 1), encoding="utf-8")
        self.vars.update(path=path, old=old, new=new, name=str(d.get("name", path)), value=new)

    def do_shell(self, d: dict[str, Any]) -> None:
        """Run ``command`` with ``sh -c`` where the agent is (the Bash tool's call, for real: the sandbox decides
        what it reaches); its output in {{shell_output}}, killed with its children after ``timeout`` seconds."""
        proc = subprocess.Popen(["sh", "-c", self.arg(d, "command")], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=float(d.get("timeout", 10)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
            out += "\n[timed out]"
        self.vars["shell_output"] = out.rstrip("\n")[:4000]
        self.vars["shell_exit"] = str(proc.returncode)

    def do_theorem(self, d: dict[str, Any]) -> None:
        """The theorem of a proof task as the prompt gives it (``# Theorem`` then its JSON): {{theorem}}, {{statement}}."""
        prompt = Path(os.environ["RRMA_PROMPT_FILE"]).read_text(encoding="utf-8")
        view, _ = json.JSONDecoder().raw_decode(prompt.split("# Theorem\n", 1)[1])
        self.vars.update(theorem=str(view["name"]), statement=str(view.get("statement", "")))

    def _next_demo_edit(self) -> tuple[str, str]:
        text = Path("objective.py").read_text(encoding="utf-8")
        run = int(self.vars["run"])
        for k in range(len(DEMO_OPTIMUM)):
            name, best = DEMO_OPTIMUM[(run - 1 + k) % len(DEMO_OPTIMUM)]
            current = re.search(rf"^{name}\s*=\s*([^#\n]+?)\s*(#|$)", text, re.M)
            if current is not None and current.group(1).strip() != best:
                return name, best
        return "X", f"{1.7 + 0.001 * run:.3f}"  # at the optimum already: a nudge, so no proposal repeats

    def do_post(self, d: dict[str, Any]) -> None:
        proc = subprocess.run(["rrma-post", self.arg(d, "text")], capture_output=True, text=True, timeout=30)
        self.vars["post_output"] = (proc.stdout + proc.stderr).strip()

    def do_rebase(self, d: dict[str, Any]) -> None:
        offered = sorted(os.listdir(os.environ["RRMA_TRIALS_DIR"]))
        proc = subprocess.run(["rrma-rebase", offered[0]], capture_output=True, text=True, timeout=30)
        self.vars.update(rebase_output=(proc.stdout + proc.stderr).strip(), rebase_to=offered[0])

    def do_hypothesis(self, d: dict[str, Any]) -> None:
        Path(os.environ["RRMA_HYPOTHESIS_FILE"]).write_text(self.arg(d, "text") + "\n", encoding="utf-8")

    def do_proof(self, d: dict[str, Any]) -> None:
        Path(os.environ["RRMA_PROOF_FILE"]).write_text(d["text"] + "\n", encoding="utf-8")

    def do_write(self, d: dict[str, Any]) -> None:
        with open(self.arg(d, "path"), "a", encoding="utf-8") as fh:
            fh.write(self.arg(d, "text") + "\n")

    def do_sleep(self, d: dict[str, Any]) -> None:
        time.sleep(float(d["seconds"]))

    def do_stderr(self, d: dict[str, Any]) -> None:
        print(self.arg(d, "text"), file=sys.stderr, flush=True)

    def do_bytes(self, d: dict[str, Any]) -> None:
        sys.stdout.flush()
        os.write(1, bytes.fromhex(d["hex"]))

    def do_env(self, d: dict[str, Any]) -> None:
        """Put an environment variable into a template variable (the leak scenario echoes its key)."""
        self.vars[d["var"]] = os.environ.get(d["name"], "")
        self.vars[d["var"] + "_sha256"] = hashlib.sha256(self.vars[d["var"]].encode()).hexdigest()

    def do_attack(self, d: dict[str, Any]) -> None:
        """Try what a hostile agent would try; report each attempt (the test checks the ground truth)."""
        report: dict[str, str] = {}
        run_dir = os.environ.get("FAKE_ATTACK_RUN_DIR", "")
        attempts = {
            "read_log": lambda: Path(run_dir, "events.jsonl").read_text()[:80],
            "append_log": lambda: Path(run_dir, "events.jsonl").open("a").write('{"forged": true}\n'),
            "write_blob": lambda: Path(run_dir, "blobs", "forged").write_text("forged"),
            "read_held_out": lambda: Path(os.environ.get("FAKE_ATTACK_HELD_OUT", "/nonexistent")).read_text(),
            "write_source": lambda: Path(os.environ.get("FAKE_ATTACK_SOURCE", "/nonexistent"), "objective.py")
            .open("a").write("# forged\n"),
            "other_secret": lambda: os.environ["FAKE_OTHER_API_KEY"],
        }
        for name, attempt in attempts.items():
            try:
                got = attempt()
                report[name] = f"succeeded: {got!r}"[:200]
            except (OSError, KeyError) as exc:
                report[name] = f"failed: {type(exc).__name__}"
        self.vars["attack_report"] = json.dumps(report, sort_keys=True)


def fail(message: str, code: int = 2) -> NoReturn:
    print(message, file=sys.stderr, flush=True)
    sys.exit(code)


def _value(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def claude(argv: list[str]) -> int:
    if "-p" not in argv and "--print" not in argv:
        fail("fake claude: only print mode (-p) is faked")
    if _value(argv, "--output-format") != "stream-json":
        fail("fake claude: only --output-format stream-json is faked")
    if "--verbose" not in argv:
        fail("Error: When using --print, --output-format=stream-json requires --verbose", 1)
    turns = _value(argv, "--max-turns")
    if turns is None or not turns.isdigit():
        fail("fake claude: --max-turns N expected (the preset always passes the turn cap)")
    bypass = "--dangerously-skip-permissions" in argv
    if bypass and os.getuid() == 0 and os.environ.get("IS_SANDBOX") != "1":
        fail("--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", 1)
    fake = Fake("claude-code", argv)
    fake.vars.update(model=_value(argv, "--model") or "claude-sonnet-4-5-20250929", max_turns=str(turns),
                     permission_mode="bypassPermissions" if bypass else (_value(argv, "--permission-mode") or "default"))
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")):
        fake.scenario = ["no_key"]
    return fake.play()


def codex(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "exec":
        fail("fake codex: only `codex exec` is faked")
    if "--json" not in argv:
        fail("fake codex: only --json output is faked")
    if "--skip-git-repo-check" not in argv and not Path(".git").exists():
        fail("Not inside a trusted directory and --skip-git-repo-check was not specified.", 1)
    fake = Fake("codex", argv)
    fake.vars.update(model=_value(argv, "--model", "-m") or "gpt-5-codex")
    if not os.environ.get("CODEX_API_KEY"):
        fake.scenario = ["no_key"]
    return fake.play()


def aider(argv: list[str]) -> int:
    message_file = _value(argv, "--message-file", "-f")
    if message_file is None and _value(argv, "--message", "-m") is None:
        fail("fake aider: only --message / --message-file is faked")
    if "--yes-always" not in argv:
        fail("fake aider: without --yes-always aider would wait for confirmations on stdin")
    model = _value(argv, "--model") or "anthropic/claude-sonnet-4-5"
    key = "ANTHROPIC_API_KEY" if ("claude" in model or "anthropic" in model) else "OPENAI_API_KEY"
    fake = Fake("aider", argv)
    fake.vars.update(model=model, key_var=key)
    if not os.environ.get(key):
        fake.scenario = ["no_key"]
    return fake.play()


def fake_agent(argv: list[str]) -> int:
    if len(argv) < 2 or not Path(argv[1]).is_file():
        fail("usage: fake-agent PROMPT_FILE")
    fake = Fake("fake-agent", argv)
    fake.vars.update(prompt_bytes=str(Path(argv[1]).stat().st_size))
    return fake.play()


def main(tool: str) -> None:
    handler = {"claude": claude, "codex": codex, "aider": aider, "fake-agent": fake_agent}[tool]
    sys.exit(handler(sys.argv))
