"""Text a run's agents, trials or task file wrote never drives the terminal from the headless CLI.

The attack (issue 20, reproduced on main): a trial program prints an OSC window title, a clear-screen,
a cursor move and a green "APPROVED by alice"; a hypothesis, an agent name or a task name carries the
same, or a right-to-left override (U+202E) that makes a name read backwards. ``run --headless`` printed
a failed baseline's output tail raw, ``show`` a hypothesis raw. Now every such text goes through
:mod:`rrma.text` (cli/output.py: ``plain``, ``plain_lines`` and the consoles' ``SafeConsole``): the escape
introducers (ESC, the 8-bit CSI, BEL) and the bidi controls are dropped, the printable rest stays visible.

Each test shows the control too: the log really holds the raw bytes, and with the rule turned off
(``printable``/``without_controls`` replaced by the identity in ``cli.output`` and ``cli.runs``) the same command prints them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import cli.output as cli_output
import cli.runs as cli_runs
import rrma.text
from cli.main import main
from rrma.log.store import RunStore

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo"
# no RRMA_* settings from the caller, and nothing that would make Rich colour a pipe: any ESC in the
# output of these subprocesses then comes from the run's text
ENV = {k: v for k, v in os.environ.items()
       if not k.startswith("RRMA_") and k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
ENV["PYTHONPATH"] = str(REPO)

HOSTILE = "\x1b]2;PWNED-TITLE\x07\x1b[2J\x1b[H\x1b[32mAPPROVED by alice\x1b[0m \x9b1mC1 \u202eevil"
SHOWN = ("]2;PWNED-TITLE", "APPROVED by alice")  # the printable rest: visible, inert
RAW = ("\x1b", "\x9b", "\x07", "\u202e")  # what must never reach the terminal
NAME = "demo\u202eevil"  # a task name that reads "demolive" backwards on a terminal that obeys U+202E


def assert_inert(*outputs: str) -> None:
    for output in outputs:
        for char in RAW:
            assert char not in output, f"{char!r} reached the terminal: {output!r}"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=ENV, cwd=REPO, capture_output=True,
                          text=True, timeout=180)


@pytest.fixture
def rule_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defence off: the CLI's calls of rrma.text's functions return the text as it is."""
    monkeypatch.setattr(cli_output, "printable", lambda text: text)
    monkeypatch.setattr(cli_output, "without_controls", lambda text: text)
    monkeypatch.setattr(cli_runs, "printable", lambda text: text)  # the progress lines' feedback
    monkeypatch.setattr(rrma.text, "printable", lambda text: text)  # the consoles' backstop (SafeConsole)


def hostile_run(runs: Path, run_id: str = "hostile") -> Path:
    """A finished run whose task name, agent name, hypothesis, feedback, summary error and review note
    carry escape sequences and a bidi override (written through RunStore, as a run's agents could)."""
    store = RunStore(runs / run_id, create=True)
    store.append("run.started", "harness", {"run_id": run_id, "task_name": NAME + "\x1b[31m", "task": {"name": NAME},
                                            "seed": 0, "head_record": True})
    for tid, parent, agent, hypothesis, status, score in (
            ("base-0", None, "baseline", "baseline", "ok", 1.0),
            ("t0001", "base-0", "mallory\x1b[5m", HOSTILE + "\n  12.0s new best t0009: 0.0001", "crash", None)):
        store.append("trial.proposed", "harness" if parent is None else "agent:mallory", {
            "trial_id": tid, "parent": parent, "agent": agent, "hypothesis": hypothesis, "baseline": parent is None,
            "proposal_blob": store.put_json_blob({"hypothesis": hypothesis, "edits": []})})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": status, "score": score,
                                                  "feedback": HOSTILE, "seconds": 0.1})
    store.append("review", "human:bob", {"trial_id": "t0001", "decision": "flag", "reviewer": "bob", "note": HOSTILE})
    store.append("run.finished", "harness", {"reason": "max_trials", "summary": {"error": HOSTILE, "metric": "loss"}})
    store.close()
    return store.dir


def logged(run_dir: Path, kind: str) -> list[object]:
    return [e.data for e in RunStore(run_dir).scan().events if e.kind == kind]


# ----------------------------------------------------------------------------- run --headless


def hostile_demo(tmp_path: Path) -> Path:
    """The demo bench with an objective.py that prints the attack, then exits 1: the baseline fails."""
    task_dir = tmp_path / "task"
    shutil.copytree(DEMO, task_dir)
    objective = task_dir / "workspace" / "objective.py"
    objective.write_text(objective.read_text() + f"\nimport sys\nsys.stdout.write({HOSTILE + chr(10)!r})\nsys.exit(1)\n")
    return task_dir / "task.yaml"


def test_a_failed_baselines_output_and_the_task_name_print_inert(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = cli("run", "--headless", str(hostile_demo(tmp_path)), "--runs", str(runs), "--set", f"name={NAME}",
               "--set", "noise.baseline_repeats=1")
    assert proc.returncode == 1, proc.stderr
    assert_inert(proc.stdout, proc.stderr)
    assert "the baseline failed" in proc.stderr and all(text in proc.stderr for text in SHOWN), proc.stderr
    assert "run " in proc.stdout and "(demoevil)" in proc.stdout  # the progress line, the name made plain
    assert "demoevil · " in proc.stdout  # the summary's title
    # the control: the log holds the raw text the CLI was given
    (run_dir,) = runs.iterdir()
    assert any("\x1b]2;PWNED-TITLE" in d.feedback for d in logged(run_dir, "trial.finished"))  # type: ignore[attr-defined]
    assert logged(run_dir, "run.started")[0].task_name == NAME  # type: ignore[attr-defined]


def test_with_the_rule_off_the_same_run_drives_the_terminal(tmp_path: Path, rule_off: None,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The control for the test above: without rrma.text the sequences reach the output as they are."""
    assert main(["run", "--headless", str(hostile_demo(tmp_path)), "--runs", str(tmp_path / "runs"),
                 "--set", f"name={NAME}", "--set", "noise.baseline_repeats=1"]) == 1
    out, err = capsys.readouterr()
    assert "\x1b]2;PWNED-TITLE" in err and "\x1b[32mAPPROVED by alice" in err  # (Rich drops the BEL itself)
    assert f"({NAME})" in out


# ----------------------------------------------------------------------------- show, ls, verify


def test_show_and_ls_print_a_runs_text_inert(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = hostile_run(runs)
    show = cli("show", str(run_dir))
    assert show.returncode == 0, show.stderr
    assert_inert(show.stdout, show.stderr)
    assert "PWNED-TITLE" in show.stdout and "APPROVED" in show.stdout and "demoevil" in show.stdout
    assert "mallory[5m" in show.stdout  # the agent name, inert
    # the hypothesis is one line in its cell: its forged progress line is not a line of its own
    assert not any(line.lstrip().startswith("12.0s new best") for line in show.stdout.splitlines())
    ls = cli("ls", "--runs", str(runs))
    assert ls.returncode == 0, ls.stderr
    assert_inert(ls.stdout, ls.stderr)
    assert "demoevil[31m" in ls.stdout
    # the control: the log holds the raw text
    assert logged(run_dir, "trial.proposed")[1].hypothesis.startswith("\x1b]2;PWNED-TITLE")  # type: ignore[attr-defined]


def test_with_the_rule_off_show_and_ls_print_the_sequences(tmp_path: Path, rule_off: None,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    run_dir = hostile_run(runs)
    assert main(["show", str(run_dir)]) == 0
    assert "\x1b]2;PWNED-TITLE" in capsys.readouterr().out
    assert main(["ls", "--runs", str(runs)]) == 0
    assert "\u202e" in capsys.readouterr().out


def test_verify_messages_that_quote_the_log_print_inert(tmp_path: Path) -> None:
    """A line with the attack as its seq: verify quotes the value in its error (on main, raw)."""
    run_dir = hostile_run(tmp_path / "runs")
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write(json.dumps({"seq": HOSTILE}) + "\n")  # ensure_ascii: the file holds \u001b, the value ESC
    proc = cli("verify", str(run_dir))
    assert proc.returncode == 1
    assert_inert(proc.stdout, proc.stderr)
    assert "where 7 was expected" in proc.stdout and "PWNED-TITLE" in proc.stdout, proc.stdout


# ----------------------------------------------------------------------------- the headless driver's lines


def progress_lines(events: list[SimpleNamespace]) -> str:
    with cli_output.console.capture() as captured:
        progress = cli_runs.Progress(quiet=False)
        for event in events:
            progress(event)
    return captured.get()


DRIVER_EVENTS = [
    SimpleNamespace(kind="trial.finished", data=SimpleNamespace(
        trial_id="t0001", status="crash", score=None, delta_sigma=None, cached=False, feedback=HOSTILE + "\nmore")),
    SimpleNamespace(kind="run.control", data=SimpleNamespace(
        action="stop", by="human:bob\x1b[8m", reason="done\n    12.0s new best t0009: 0.0001 " + HOSTILE)),
    SimpleNamespace(kind="agent.steer", data=SimpleNamespace(
        by="human:bob", to=["rs\u202e"], text=HOSTILE + "\nsecond line")),
]


def test_the_headless_drivers_progress_lines_are_one_line_each_and_inert() -> None:
    out = progress_lines(DRIVER_EVENTS)
    assert_inert(out)
    lines = out.splitlines()
    assert len(lines) == 3, out  # a reason's newline does not forge a "new best" line of its own
    assert all(text in lines[0] for text in SHOWN) and "crash" in lines[0]
    assert "stop by human:bob[8m (done " in lines[1] and "12.0s new best t0009" in lines[1]
    assert "steer note from human:bob to rs: ]2;PWNED-TITLE" in lines[2]


def test_with_the_rule_off_the_progress_lines_drive_the_terminal(rule_off: None) -> None:
    out = progress_lines(DRIVER_EVENTS)
    assert "\x1b]2;PWNED-TITLE" in out and "\u202e" in out


# ----------------------------------------------------------------------------- echoes, and the TUI's filter


def test_review_post_and_steer_echo_names_inert(tmp_path: Path) -> None:
    run_dir = hostile_run(tmp_path / "runs")
    name = "bob\x1b]2;T\x07\x1b[32m\u202eOK"
    for argv in (["review", str(run_dir), "t0001", "approve", "--reviewer", name, "--note", HOSTILE],
                 ["post", str(run_dir), HOSTILE, "--by", name],
                 ["steer", str(run_dir), HOSTILE, "--by", name]):
        proc = cli(*argv)
        assert proc.returncode == 0, proc.stderr
        assert_inert(proc.stdout, proc.stderr)
        assert argv[0] == "steer" or "bob]2;T[32mOK" in proc.stdout, proc.stdout  # (steer's echo names no one)
    assert logged(run_dir, "review")[-1].reviewer == name  # type: ignore[attr-defined]  # the control


def test_the_tui_filter_applies_the_same_rule() -> None:
    """tui/terminal.py filters with rrma.text too: a bidi override is dropped from a rendered segment."""
    from rich.segment import Segment
    from textual.color import Color

    from tui.terminal import ControlCharFilter

    (segment,) = ControlCharFilter().apply([Segment(NAME + HOSTILE)], Color(0, 0, 0))
    assert_inert(segment.text)
    assert segment.text.startswith("demoevil]2;PWNED-TITLE")


def test_the_consoles_clean_what_a_call_site_missed() -> None:
    """The backstop: text handed to the CLI's console raw (a table cell, a message) still prints inert,
    where a plain Rich console prints the sequences (the control)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def printed(console: Console) -> str:
        table = Table("cell")
        table.add_row(Text(HOSTILE))
        with console.capture() as captured:
            console.print(table)
            console.print(Text("message " + HOSTILE))
        return captured.get()

    assert "\x1b]2;PWNED-TITLE" in printed(Console(width=160)) and "\u202e" in printed(Console(width=160))
    out = printed(rrma.text.SafeConsole(width=160))
    assert_inert(out)
    assert "APPROVED by alice" in out and "message ]2;PWNED-TITLE" in out


@pytest.mark.skipif(shutil.which("coqc") is None, reason="coqc is not installed (apt-get install coq)")
def test_check_prints_the_checkers_messages_inert(tmp_path: Path) -> None:
    """`rrma-tui check` prints a JSON verdict that quotes Coq's messages, and Coq quotes the checked file
    (here a context line whose string holds the sequences): as ASCII JSON they are escapes (\\u009b,
    \\u202e), never the bytes. The control: the file holds them raw, and the verdict's text quotes them."""
    source = tmp_path / "t.v"
    source.write_text('Require Import String.\nOpen Scope string_scope.\n'
                      f'Definition bad : nat := "{HOSTILE}".\nTheorem t : True.\nProof.\n  exact I.\nQed.\n')
    proof = tmp_path / "proof.txt"
    proof.write_text("exact I.")
    assert all(raw in source.read_text() for raw in RAW)
    proc = cli("check", "coq", str(source), "--theorem", "t", "--proof-file", str(proof))
    assert proc.returncode == 1, proc.stderr
    assert_inert(proc.stdout, proc.stderr)
    verdict = json.loads(proc.stdout)
    assert all(raw in verdict["reason"] for raw in RAW), verdict["reason"]


def test_the_benches_print_through_the_same_console() -> None:
    """The benches print agent and oracle text too (autoresearch's progress lines quote trial feedback, the
    proof benches print proofs and checker messages): each console is a SafeConsole, and the autoresearch
    printer's line for a hostile trial is inert (the control: a plain Console prints the sequences)."""
    from rich.console import Console

    import benches.autoresearch.bench as autoresearch
    import benches.coq.bench as coq
    import benches.lean.bench as lean
    import benches.proofs as proofs
    from rrma.text import SafeConsole

    for module in (autoresearch, coq, lean, proofs):
        assert isinstance(module.console, SafeConsole), module.__name__
    event = SimpleNamespace(kind="trial.finished", data=SimpleNamespace(
        trial_id="t0001", status="crash", score=None, delta_sigma=None, feedback=HOSTILE + "\nmore"))
    outputs = {}
    for name, console in (("plain", Console(width=200)), ("safe", SafeConsole(width=200))):
        autoresearch.console = console
        try:
            with console.capture() as captured:
                autoresearch._Printer(quiet=False)(event)
        finally:
            autoresearch.console = SafeConsole(emoji=False)
        outputs[name] = captured.get()
    assert "\x1b]2;PWNED-TITLE" in outputs["plain"]
    assert_inert(outputs["safe"])
    assert "APPROVED by alice" in outputs["safe"]
