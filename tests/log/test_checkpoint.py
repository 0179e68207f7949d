"""The checkpoint: a reopen restores exactly what a full fold gives, or ignores the checkpoint.

Most tests write a checkpoint the way the dashboard does (load, index the turns, which writes it
in a thread; ``checkpoint.wait`` joins that), the last ones the way the driver does
(rrma.log.checkpointer.Checkpointer: observed as the log grows, flushed at ``run.finished``; the real
loop for two of them), then reopen and compare the model with a fold of the whole log: the state,
the unreadable lines, the turn index, the offset to tail from.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from make_run import make_run

import rrma.log.checkpoint as checkpoint
import rrma.log.checkpointer
import rrma.log.reader as reader
from rrma.contain import sandbox
from rrma.log.checkpoint import CHECKPOINT_NAME, checkpoint_offset, checkpoint_paths
from rrma.log.checkpointer import Checkpointer
from rrma.log.reader import LiveFold, RunReader, read_state, read_summary
from rrma.log.store import RunStore
from rrma.log.verify import verify_run
from rrma.run.loop import start_run
from rrma.task import load_task

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Checkpoints that do not fit in a run directory go to a cache of this test's own."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


def open_run(run_dir: Path, **kwargs: Any) -> LiveFold:
    """Open as the dashboard does (any log size may be checkpointed here), index the turns, wait for the write."""
    model = RunReader(run_dir, checkpoint_min_bytes=0, **kwargs).load()
    model.attach_index(model.index_turns())
    model.checkpoint.wait(30)
    return model


def full_fold(run_dir: Path, *, indexed: bool = True) -> LiveFold:
    model = RunReader(run_dir, use_checkpoint=False, write_checkpoint=False).load()
    if indexed:
        model.attach_index(model.index_turns())
    return model


def picture(model: LiveFold, *, indexed: bool = True) -> dict[str, Any]:
    """Everything a screen reads from a model (before the index: what differs is only what waits for it)."""
    state = model.state
    out: dict[str, Any] = {name: value for name, value in vars(state).items() if name not in ("trials", "agents")}
    out["trials"] = {tid: vars(rec) for tid, rec in state.trials.items()}
    out["agents"] = {name: vars(rec) for name, rec in state.agents.items()}
    out["torn"] = [(t.offset, t.error) for t in model.torn]
    out["turns"] = [dataclasses.astuple(t) for t in model.turns]
    out["offset"] = model.offset
    if indexed:
        out["unindexed"], out["turns_indexed"] = list(model.unindexed), model.turns_indexed
    return out


def write_checkpoint(run_dir: Path) -> Path:
    model = open_run(run_dir)
    assert model.checkpoint.loaded is None and model.checkpoint.error == ""
    path = model.checkpoint.written
    assert path == run_dir / CHECKPOINT_NAME and path.is_file()
    return path


def bad_turn_line(run_dir: Path) -> bytes:
    """A turn line the load stubs but the index refuses (its ``seq`` is a string; the store skips it too)."""
    for line in (run_dir / "events.jsonl").read_bytes().splitlines():
        raw = json.loads(line)
        if raw["kind"] == "agent.turn" and raw["actor"].startswith("agent:"):
            raw["seq"] = str(raw["seq"])
            return json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()
    raise AssertionError("no turn in the run")


def damaged_run(tmp_path: Path) -> Path:
    """A running run with every kind of line the fold treats specially: torn, refused turn, a turn it parses itself."""
    run_dir = make_run(tmp_path, "r", trials=8, tool_turns=2, finished=False, hitl=True, pending_claims=1)
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(b'{"v": 99, "seq": 5, "ts": "", "kind": "note", "actor": "h", "data": {}}\n')  # a future schema
        fh.write(bad_turn_line(run_dir) + b"\n")
        fh.write(b'{"actor":"agent:alice","data":{"agent"')  # torn mid-write, sealed by the next append
    store = RunStore(run_dir)
    store.append("agent.turn", "human:ann", {"agent": "ann", "role": "user", "text": "look at the warmup"})
    store.append("note", "harness", {"text": "after the damage"})
    store.close()
    return run_dir


def append_more(run_dir: Path, n: int = 3) -> None:
    store = RunStore(run_dir)
    blob = store.put_json_blob({"hypothesis": "late idea", "edits": []})
    for i in range(n):
        tid = f"late{i}"
        store.append("agent.turn", "agent:bob", {"agent": "bob", "role": "assistant", "text": f"trying {tid}",
                                                 "tokens_in": 10, "tokens_out": 5})
        store.append("trial.proposed", "agent:bob", {"trial_id": tid, "parent": "base-0", "agent": "bob",
                                                     "hypothesis": "late idea", "proposal_blob": blob})
        store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": 2.3 - i / 100})
        store.append("blackboard.post", "agent:bob", {"agent": "bob", "text": f"{tid} done", "trial_id": tid})
    store.close()


def rebuild(path: Path, edit_header: Any = None, edit_turns: Any = None) -> None:
    """Rewrite a checkpoint file with its header and/or turns doc changed (and CRCs made right again)."""
    data = path.read_bytes()
    n = len(checkpoint._MAGIC)
    length = int.from_bytes(data[n: n + 8], "little")
    header = json.loads(data[n + 8: n + 8 + length])
    body, pos, sections = data[n + 8 + length:], 0, []
    for name, size, _ in header["sections"]:
        part = body[pos: pos + size]
        pos += size
        if name == "turns" and edit_turns is not None:
            doc = json.loads(part)
            edit_turns(doc)
            part = json.dumps(doc).encode()
        sections.append((name, part))
    header["sections"] = [[name, len(part), zlib.crc32(part)] for name, part in sections]
    if edit_header is not None:
        edit_header(header)
    head = json.dumps(header).encode()
    path.write_bytes(checkpoint._MAGIC + len(head).to_bytes(8, "little") + head + b"".join(p for _, p in sections))


# ----------------------------------------------------------------------------- a checkpoint is the fold


@pytest.mark.parametrize("damaged", [False, True])
def test_reopen_from_checkpoint_is_the_full_fold(tmp_path: Path, damaged: bool) -> None:
    run_dir = damaged_run(tmp_path) if damaged else make_run(tmp_path, "r", trials=12, hitl=True, pending_claims=1)
    write_checkpoint(run_dir)
    model = RunReader(run_dir).load()
    assert model.checkpoint.loaded == run_dir / CHECKPOINT_NAME and not model.checkpoint.ignored
    assert not model.checkpoint.due  # nothing appended since: no new checkpoint
    ref = full_fold(run_dir, indexed=False)
    assert picture(model, indexed=False) == picture(ref, indexed=False)  # what the first paint shows
    if damaged:
        assert len(model.torn) == 2  # the future-schema line and the torn fragment; the bad turn waits for the index
        assert model.state.notes == ["after the damage"] and [t.agent for t in model.turns] == ["ann"]
    model.attach_index(model.index_turns())
    ref.attach_index(ref.index_turns())
    assert picture(model) == picture(ref)
    assert model.turns_indexed and len(model.turns) == len(ref.turns) > 0
    if damaged:
        assert len(model.torn) == 3 and any("seq: not an integer" in t.error for t in model.torn)


def test_lines_appended_after_the_checkpoint_are_the_only_ones_read(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = damaged_run(tmp_path)
    write_checkpoint(run_dir)
    covered = (run_dir / "events.jsonl").stat().st_size
    append_more(run_dir)
    with open(run_dir / "events.jsonl", "ab") as fh:
        fh.write(b'{"actor":"agent:bob","data"')  # a writer caught mid-line: not read yet
    bases: list[int] = []
    parse = reader.parse_lines

    def spy(data: bytes, base: int, *, stub_turns: bool) -> reader.ParsedChunk:
        bases.append(base)
        return parse(data, base, stub_turns=stub_turns)

    monkeypatch.setattr(reader, "parse_lines", spy)
    model = RunReader(run_dir).load()
    assert model.checkpoint.offset == covered and bases and min(bases) == covered
    monkeypatch.setattr(reader, "parse_lines", parse)
    ref = full_fold(run_dir, indexed=False)
    assert picture(model, indexed=False) == picture(ref, indexed=False)
    model.attach_index(model.index_turns())
    ref.attach_index(ref.index_turns())
    assert picture(model) == picture(ref)
    assert [t.trial_id for t in model.state.trials.values()][-3:] == ["late0", "late1", "late2"]
    assert model.offset < (run_dir / "events.jsonl").stat().st_size  # the partial line is left for the tail


def test_a_grown_log_gets_a_new_checkpoint_covering_the_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = damaged_run(tmp_path)
    first = write_checkpoint(run_dir).stat().st_mtime_ns
    append_more(run_dir)
    monkeypatch.setattr(reader, "CHECKPOINT_REFRESH_BYTES", 1)
    model = open_run(run_dir)
    assert model.checkpoint.loaded is not None and model.checkpoint.written == run_dir / CHECKPOINT_NAME
    assert (run_dir / CHECKPOINT_NAME).stat().st_mtime_ns != first
    again = RunReader(run_dir).load()
    assert again.checkpoint.offset == (run_dir / "events.jsonl").stat().st_size
    again.attach_index(again.index_turns())
    assert picture(again) == picture(full_fold(run_dir))


def test_lines_folded_while_the_snapshot_is_taken_are_not_in_it(tmp_path: Path) -> None:
    """The UI thread folds new lines under the model's lock, so the snapshot is the state at its offset."""
    run_dir = make_run(tmp_path, "r", trials=6, finished=False)
    run_reader = RunReader(run_dir, checkpoint_min_bytes=0)
    model = run_reader.load()  # the snapshot thread holds the lock now
    append_more(run_dir)
    chunk = run_reader.poll()
    assert chunk is not None
    model.apply(chunk)  # waits for the snapshot
    model.attach_index(model.index_turns())
    assert model.checkpoint.wait(30) is not None
    reopened = RunReader(run_dir).load()
    assert reopened.checkpoint.loaded is not None and reopened.checkpoint.offset < reopened.offset
    reopened.attach_index(reopened.index_turns())
    assert picture(reopened) == picture(full_fold(run_dir))


def test_runs_list_summary_comes_from_the_checkpoint_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = make_run(tmp_path, "r", trials=12)
    folded = read_summary(run_dir)
    write_checkpoint(run_dir)
    monkeypatch.setattr(RunReader, "load", lambda self: pytest.fail("summarized by folding the log"))
    assert read_summary(run_dir) == folded
    monkeypatch.undo()
    append_more(run_dir, 1)  # the checkpoint no longer covers the whole log: summarized from a load
    assert read_summary(run_dir).trials == folded.trials + 1


# ----------------------------------------------------------------------------- a checkpoint that does not fit


def truncate_log(run_dir: Path, path: Path) -> None:
    lines = (run_dir / "events.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "events.jsonl").write_bytes(b"".join(lines[:-5]))
    (run_dir / "head.json").unlink()  # else the store refuses to append to a cut log (as it should)


def truncate_then_regrow(run_dir: Path, path: Path) -> None:
    """Cut back, then appended past the old end again: as long as before, different bytes at the end."""
    truncate_log(run_dir, path)
    append_more(run_dir, 2)


def change_last_line(run_dir: Path, path: Path) -> None:
    log = run_dir / "events.jsonl"
    data = bytearray(log.read_bytes())
    at = data.rindex(b'"ts":"') + 8  # a digit of the year in the last line's timestamp: same length
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    log.write_bytes(bytes(data))


def change_first_line(run_dir: Path, path: Path) -> None:
    log = run_dir / "events.jsonl"
    data = bytearray(log.read_bytes())
    at = data.index(b'"ts":"') + 8
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    log.write_bytes(bytes(data))


def cut_mid_line(run_dir: Path, path: Path) -> None:
    """The log cut inside a line the checkpoint covers (a torn write at the end of a shorter log)."""
    log = run_dir / "events.jsonl"
    log.write_bytes(log.read_bytes()[:-40])
    (run_dir / "head.json").unlink()


def replace_run(run_dir: Path, path: Path) -> None:
    """Another run written at the same place (the checkpoint file left over from the first)."""
    (run_dir / "events.jsonl").unlink()
    (run_dir / "head.json").unlink(missing_ok=True)
    saved = path.read_bytes()
    make_run(run_dir.parent, run_dir.name, trials=14, seed=3)
    path.write_bytes(saved)
    path.chmod(0o600)


def garbage(run_dir: Path, path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def empty(run_dir: Path, path: Path) -> None:
    path.write_bytes(b"")


def cut_short(run_dir: Path, path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def flipped_byte_in_state(run_dir: Path, path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b'"trials":{') + 20
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def other_version(run_dir: Path, path: Path) -> None:
    rebuild(path, edit_header=lambda h: h.update(version=h["version"] + 1))


def other_code(run_dir: Path, path: Path) -> None:
    rebuild(path, edit_header=lambda h: h.update(fingerprint="0" * 64))


def writable_by_others(run_dir: Path, path: Path) -> None:
    path.chmod(0o666)


def a_symlink(run_dir: Path, path: Path) -> None:
    real = run_dir.parent / "elsewhere"
    path.rename(real)
    path.symlink_to(real)


@pytest.mark.parametrize("spoil, why", [
    (truncate_log, "the log has"),  # the log is shorter than the checkpoint
    (cut_mid_line, "the log has"),  # ... cut inside its last line
    (truncate_then_regrow, "does not hold"),  # as long again, but the bytes before the checkpoint's offset differ
    (change_last_line, "not those the checkpoint was taken from"),  # the line just before the offset, rewritten
    (change_first_line, "not those the checkpoint was taken from"),  # ... or the first line
    (replace_run, "does not hold"),  # a different run at the same path
    (garbage, "not a checkpoint file"), (empty, "not a checkpoint file"),  # damaged files
    (cut_short, "sections"), (flipped_byte_in_state, "state section is damaged"),
    (other_version, "another version"), (other_code, "another version"),  # another layout, another fold
    (writable_by_others, "writable only by them"), (a_symlink, "symbolic link"),  # planted by someone else?
])
def test_a_checkpoint_that_does_not_fit_is_ignored(tmp_path: Path, spoil: Any, why: str) -> None:
    run_dir = damaged_run(tmp_path)
    path = write_checkpoint(run_dir)
    spoil(run_dir, path)
    model = RunReader(run_dir).load()
    assert model.checkpoint.loaded is None
    assert len(model.checkpoint.ignored) == 1 and model.checkpoint.ignored[0].startswith(str(path))
    assert why in model.checkpoint.ignored[0]
    assert picture(model, indexed=False) == picture(full_fold(run_dir, indexed=False), indexed=False)


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_checkpoint_owned_by_another_user_is_ignored(tmp_path: Path) -> None:
    run_dir = damaged_run(tmp_path)
    path = write_checkpoint(run_dir)
    os.chown(path, 4242, -1)
    model = RunReader(run_dir).load()
    assert model.checkpoint.loaded is None and "owned by this user" in model.checkpoint.ignored[0]


def test_a_turn_index_that_does_not_hold_together_is_read_from_the_log(tmp_path: Path) -> None:
    run_dir = damaged_run(tmp_path)
    path = write_checkpoint(run_dir)
    rebuild(path, edit_turns=lambda doc: doc["ts"].pop())  # one ts short of the columns; CRCs made right
    model = RunReader(run_dir).load()
    assert model.checkpoint.loaded == path
    model.attach_index(model.index_turns())
    assert "turn index" in model.checkpoint.ignored[0]
    assert picture(model) == picture(full_fold(run_dir))


# ----------------------------------------------------------------------------- where it is written


def test_read_only_run_dir_uses_the_cache(tmp_path: Path, private_cache: Path) -> None:
    run_dir = damaged_run(tmp_path)
    (run_dir / CHECKPOINT_NAME).mkdir()  # the run directory refuses the file (as a read-only one would, even to root)
    (run_dir / CHECKPOINT_NAME / "x").write_text("x")
    model = open_run(run_dir)
    cached = checkpoint_paths(run_dir)[1]
    assert model.checkpoint.written == cached and cached.is_relative_to(private_cache)
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600
    again = RunReader(run_dir).load()
    assert again.checkpoint.loaded == cached
    again.attach_index(again.index_turns())
    assert picture(again) == picture(full_fold(run_dir))


@pytest.mark.parametrize("writer", ["view", "driver"])
def test_nowhere_to_write_still_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    """Neither the run directory nor the cache takes a checkpoint: a view's open and a driver both go on."""
    run_dir = damaged_run(tmp_path)
    (run_dir / CHECKPOINT_NAME).mkdir()
    (run_dir / CHECKPOINT_NAME / "x").write_text("x")
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-dir"))
    if writer == "view":
        model = open_run(run_dir)
        assert model.checkpoint.written is None and "checkpoint not written" in model.checkpoint.error
        assert picture(model) == picture(full_fold(run_dir))
    else:
        keeper = Checkpointer(run_dir, min_bytes=0)
        assert keeper.flush() is None and "checkpoint not written" in keeper.error  # nothing reaches the driver
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


OPEN_ON_A_READ_ONLY_MOUNT = """
import json, sys
from pathlib import Path
from rrma.log.reader import RunReader
run_dir = Path(sys.argv[1])
try:
    (run_dir / "probe").write_text("")
    refused = ""
except OSError as exc:
    refused = str(exc)
model = RunReader(run_dir, checkpoint_min_bytes=0).load()
model.attach_index(model.index_turns())
model.checkpoint.wait(30)
written = model.checkpoint.written
print(json.dumps({"refused": refused, "written": written and str(written), "error": model.checkpoint.error}))
"""


def test_read_only_run_dir_uses_the_cache_even_for_root(tmp_path: Path) -> None:
    """A run directory that refuses every write: by its mode for a user; for root, whom modes do not stop,
    by a read-only bind mount (bubblewrap, in a user namespace that keeps root's uid)."""
    run_dir = damaged_run(tmp_path)
    cached = checkpoint_paths(run_dir)[1]
    before = sorted(os.listdir(run_dir))
    if os.getuid() != 0:
        run_dir.chmod(0o555)
        try:
            written = open_run(run_dir).checkpoint.written
        finally:
            run_dir.chmod(0o755)
    else:
        reason = sandbox.unavailable_reason()
        if reason is not None:
            pytest.skip(f"a read-only mount needs the bubblewrap sandbox, unavailable here: {reason}")
        proc = subprocess.run([sandbox.BWRAP, "--unshare-user", "--dev-bind", "/", "/", "--ro-bind", str(run_dir),
                               str(run_dir), "--", sys.executable, "-c", OPEN_ON_A_READ_ONLY_MOUNT, str(run_dir)],
                              cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        seen = json.loads(proc.stdout.splitlines()[-1])
        assert "Read-only file system" in seen["refused"], seen  # root itself cannot write there
        written = seen["written"] and Path(seen["written"])
    assert written == cached and cached.is_file()
    assert sorted(os.listdir(run_dir)) == before  # no checkpoint, no temporary file in the run directory
    again = RunReader(run_dir).load()
    assert again.checkpoint.loaded == cached
    again.attach_index(again.index_turns())
    assert picture(again) == picture(full_fold(run_dir))


def test_small_logs_are_not_checkpointed(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, "r", trials=4)
    model = RunReader(run_dir).load()  # the default threshold: a few MiB
    model.attach_index(model.index_turns())
    assert not model.checkpoint.due and model.checkpoint.wait() is None
    assert not (run_dir / CHECKPOINT_NAME).exists()


def test_the_checkpoint_file_is_no_part_of_the_run(tmp_path: Path) -> None:
    """verify and the runs list see the same run with or without it."""
    run_dir = make_run(tmp_path, "r", trials=6)
    before = verify_run(run_dir)
    write_checkpoint(run_dir)
    after = verify_run(run_dir)
    assert (after.errors, after.warnings) == (before.errors, before.warnings)
    assert reader.find_runs(tmp_path) == [run_dir]


# ----------------------------------------------------------------------------- the driver's checkpoints


def test_the_drivers_checkpointer_writes_as_the_log_grows(tmp_path: Path) -> None:
    """observe: nothing until the log grew a step past the last checkpoint, then a write in the background
    (from the last checkpoint plus the lines since); flush: up to the end. Each opens as the full fold."""
    run_dir = damaged_run(tmp_path)
    log = run_dir / "events.jsonl"
    keeper = Checkpointer(run_dir, min_bytes=0, step_bytes=log.stat().st_size + 1, growth=0.0)
    keeper.observe()
    keeper.wait()
    assert keeper.writes == 0 and not (run_dir / CHECKPOINT_NAME).exists()  # not a step yet
    append_more(run_dir)
    keeper.observe()  # a step: written in the background
    keeper.wait()
    assert keeper.writes == 1 and keeper.covered == log.stat().st_size and keeper.error == ""
    model = RunReader(run_dir).load()
    assert model.checkpoint.loaded == run_dir / CHECKPOINT_NAME and model.checkpoint.offset == keeper.covered
    model.attach_index(model.index_turns())
    assert picture(model) == picture(full_fold(run_dir))
    append_more(run_dir)  # the run goes on: less than a step
    keeper.observe()
    keeper.wait()
    assert keeper.writes == 1
    assert keeper.flush() == run_dir / CHECKPOINT_NAME and keeper.writes == 2  # run.finished: up to the end
    again = RunReader(run_dir).load()
    assert again.checkpoint.offset == again.offset == log.stat().st_size and not again.checkpoint.due
    again.attach_index(again.index_turns())
    assert picture(again) == picture(full_fold(run_dir))
    assert keeper.flush() is not None and keeper.writes == 2  # nothing new: nothing written


# ----------------------------------------------------------------------------- a run the loop wrote
# The real loop on the demo bench (a real oracle in real subprocesses), with the checkpoint's size threshold
# lowered: a run this short is far below the few MiB where a checkpoint starts to pay.


@pytest.fixture
def any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rrma.log.checkpointer, "CHECKPOINT_MIN_BYTES", 0)


@pytest.mark.usefixtures("any_size")
def test_a_run_the_loop_wrote_opens_from_the_drivers_checkpoint(tmp_path: Path) -> None:
    result = start_run(load_task(DEMO, {"budget.max_trials": 6}), tmp_path)
    run_dir, log = result.run_dir, result.run_dir / "events.jsonl"
    assert result.reason == "max_trials"
    assert (run_dir / CHECKPOINT_NAME).is_file()  # written at run.finished, by the driver (no view opened it)
    model = RunReader(run_dir, write_checkpoint=False).load()
    assert model.checkpoint.loaded == run_dir / CHECKPOINT_NAME and not model.checkpoint.ignored
    assert model.checkpoint.offset == model.offset == log.stat().st_size  # nothing left to fold after it
    model.attach_index(model.index_turns())
    assert picture(model) == picture(full_fold(run_dir))
    # and it is the state the loop itself folded (pydantic events, the driver's own tail)
    for name in ("run_id", "best_id", "best_history", "baseline_mean", "sigma", "order", "blackboard", "notes",
                 "finish_reason", "summary", "events", "last_seq"):
        assert getattr(model.state, name) == getattr(result.state, name), name
    assert {t: vars(r) for t, r in model.state.trials.items()} == {t: vars(r) for t, r in result.state.trials.items()}
    # `rrma-tui show`/`ls` and reviews read through the same API (read_state): the same state
    for turns in (True, False):
        state = read_state(run_dir, turns=turns)
        assert {t: vars(r) for t, r in state.trials.items()} == {t: vars(r) for t, r in result.state.trials.items()}
        assert (state.summary, state.reviews, state.best_history) == (
            result.state.summary, result.state.reviews, result.state.best_history)
    assert vars(read_state(run_dir)) == vars(model.state)


@pytest.mark.usefixtures("any_size")
def test_the_driver_writes_checkpoints_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a small step the driver's checkpointer writes as the log grows (in the background), before
    ``run.finished``; a copy taken mid-run, put back after the run went on, opens as checkpoint + tail."""
    monkeypatch.setattr(rrma.log.checkpointer, "STEP_BYTES", 2048)
    monkeypatch.setattr(rrma.log.checkpointer, "GROWTH", 0.0)
    seen: dict[str, Any] = {}

    def hook(event: Any) -> None:
        if event.kind == "run.started":
            seen["dir"] = tmp_path / event.data.run_id
        elif event.kind == "baseline.measured" or event.kind == "run.finished":
            seen[event.kind] = checkpoint_offset(seen["dir"])  # what the background writes covered by now
            if event.kind == "baseline.measured" and seen[event.kind]:
                shutil.copy2(seen["dir"] / CHECKPOINT_NAME, tmp_path / "mid-run")

    result = start_run(load_task(DEMO, {"budget.max_trials": 4}), tmp_path, on_event=hook)
    run_dir, size = result.run_dir, (result.run_dir / "events.jsonl").stat().st_size
    assert 0 < seen["baseline.measured"] < seen["run.finished"] <= size  # written as the run went, then ...
    assert checkpoint_offset(run_dir) == size  # ... brought up to the end at run.finished
    shutil.copy2(tmp_path / "mid-run", run_dir / CHECKPOINT_NAME)
    model = RunReader(run_dir, write_checkpoint=False).load()
    assert model.checkpoint.loaded == run_dir / CHECKPOINT_NAME and not model.checkpoint.ignored
    # the copy covers part of the log (the background writer may have moved on between the offset read above
    # and the copy, never to the end: trials followed), and the tail comes from the log
    assert 0 < model.checkpoint.offset < size and model.offset == size
    model.attach_index(model.index_turns())
    assert picture(model) == picture(full_fold(run_dir))
    assert model.state.finish_reason == "max_trials" and len(model.state.agent_trials()) == 4
