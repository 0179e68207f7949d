"""TUI benchmark: how fast a run opens, and how fast the dashboard follows a live run.

    python benches/perf/bench_tui.py [--events 100000] [--seconds 10] [--rate 50] [--workdir DIR] [--pydantic]
    python benches/perf/bench_tui.py --against REV [--rounds 2] [...]   # commit REV and this tree, alternating

1. Writes two runs with the test fixture generator (tests/tui/make_run.py): ~1,000 and
   ~``--events`` events (reused from ``--workdir`` when already there). The generator writes as
   the loop's driver does: appends, and the checkpoint kept current through the driver's
   ``rrma.log.checkpointer.Checkpointer`` (observed after each append, flushed at ``run.finished``);
   the big run's checkpoint as the driver left it is kept beside it (``NAME.driver-checkpoint``),
   since later steps replace it.
2. Open time: the headless app (120x40) from start until the dashboard shows the folded run.
   The big run is opened cold (the first open of a run the driver wrote: no checkpoint but the
   driver's), with no checkpoint at all (every line folded), and warm (from the checkpoint the
   TUI's reader writes after a fold; see rrma/log/checkpoint.py); the 1k-event run (too small to
   checkpoint) is the baseline measured in the same process. Also the reader alone: the load
   from the driver's checkpoint, the cold fold, the turn index, the checkpoint's write and size,
   the warm load; for scale, ``json.loads`` of every line and (up to 200k events, or with
   ``--pydantic``) the pydantic ``RunStore.scan`` + ``RunState.fold`` path.
3. Live: a separate process appends ``--rate`` events/s (turns, trials, posts) to the big run for
   ``--seconds`` while the dashboard is open (opened warm, once its turn index is in place);
   update latency is the time from an event's ``ts`` (written by the appender) to the dashboard
   having folded and redrawn it. Responsiveness is the round trip of a key press (cursor down in
   the trials table) sampled during the appends. The appended events stay in the big run, so a
   later run of the bench opens it with a checkpoint plus a short tail.

4. Trace stepping: the trace of the big run (opened warm, turn index in place), ``down`` pressed
   200 times; the time from the key to the step's detail pane having been drawn again.

``--against REV`` checks REV out into a temporary git worktree and runs this script twice, each in its
own process and work directory: once with ``--code WORKTREE`` (the app and reader of REV; the run
generator and this script are this tree's) and once on this tree; then prints both figures and
this/REV ratios side by side. ``--rounds N`` (default 2) repeats that, the order of the two trees
alternating round by round (REV first, then this tree first, ...), and prints each figure's median
over the rounds with every round's ratio: on a noisy machine a change of load then falls on both
trees. Read ratios near 1.0 as "no change".

Prints ``key: value`` lines and ratios; asserts nothing (figures, not timed tests).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# --code DIR: the app and the reader come from another tree (a worktree of an earlier commit)
CODE = Path(sys.argv[sys.argv.index("--code") + 1]).resolve() if "--code" in sys.argv[:-1] else REPO
sys.path.insert(0, str(CODE))


def moved(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that has it: with ``--code`` the reader is an earlier tree's, where
    some names lived elsewhere (before rrma/log was split by job: the checkpoint format in rrma.log.reader, the
    driver's Checkpointer in rrma.log.checkpoint, parse_ts in rrma.log.reader)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"{name} is in none of {modules}")


def _make_run_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_run", REPO / "tests" / "tui" / "make_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def driver_copy(run_dir: Path) -> Path:
    """Where the bench keeps the checkpoint the driver left (outside the run: later steps replace the run's)."""
    return run_dir.parent / f"{run_dir.name}.driver-checkpoint"


def ensure_run(workdir: Path, name: str, events: int) -> Path:
    """The run, written as the driver writes one (appends + the driver's Checkpointer), unless there."""
    checkpointer = moved("Checkpointer", "rrma.log.checkpointer", "rrma.log.checkpoint")
    checkpoint_name = moved("CHECKPOINT_NAME", "rrma.log.checkpoint", "rrma.log.reader")
    checkpoint_offset = moved("checkpoint_offset", "rrma.log.checkpoint", "rrma.log.reader")

    run_dir = workdir / name
    if not (run_dir / "events.jsonl").exists():
        make_run = _make_run_module().make_run
        tool_turns = 7 if events > 5000 else 1
        per_trial = 6.5 + 2 * tool_turns  # turns, proposal, start, progress, finish, some promotions and posts
        started = time.perf_counter()
        make_run(workdir, name, trials=max(4, int(events / per_trial)), tool_turns=tool_turns, batch=50)
        lines = sum(1 for _ in open(run_dir / "events.jsonl", "rb"))
        print(f"generated_{name}: {lines} events in {time.perf_counter() - started:.1f}s (checkpoint kept by the "
              "driver's Checkpointer as it wrote)")
        if (run_dir / checkpoint_name).exists():
            shutil.copy2(run_dir / checkpoint_name, driver_copy(run_dir))
    elif events > 5000:
        why = "the run predates the driver's checkpoints"
        if driver_copy(run_dir).exists():
            restore_driver_checkpoint(run_dir)
            why = "" if checkpoint_offset(run_dir) else "the one kept was written by other code"
        if why:  # what the driver writes at run.finished, over the whole log at once
            drop_checkpoints(run_dir)
            driver_copy(run_dir).unlink(missing_ok=True)
            started = time.perf_counter()
            written = checkpointer(run_dir).flush()
            print(f"driver_checkpoint_{name}: made by Checkpointer.flush over the whole log in "
                  f"{time.perf_counter() - started:.1f}s ({why})")
            if written is not None:
                shutil.copy2(written, driver_copy(run_dir))
    if driver_copy(run_dir).exists():
        size = (run_dir / "events.jsonl").stat().st_size
        restore_driver_checkpoint(run_dir)
        print(f"driver_checkpoint_{name}: covers {checkpoint_offset(run_dir)} of {size} log bytes")
    return run_dir


def count_events(run_dir: Path) -> int:
    return sum(1 for _ in open(run_dir / "events.jsonl", "rb"))


async def _time_to_paint(app, ready) -> float:  # type: ignore[no-untyped-def]
    """Seconds from starting ``app`` (headless, 120x40) until ``ready(app)`` returned a widget that
    has then been repainted. No Pilot: its idle waits (CPU-time based) would inflate the figure."""
    out: dict[str, float] = {}

    async def watch() -> None:
        widget = None
        while widget is None:
            await asyncio.sleep(0.002)
            widget = await ready(app)
        await widget.wait_for_refresh()
        out["t"] = time.perf_counter() - started
        app.exit()

    started = time.perf_counter()
    task = asyncio.create_task(watch())
    await app.run_async(headless=True, size=(120, 40))
    await task
    return out["t"]


async def open_app(runs: Path, run_dir: Path, seen: dict[str, object] | None = None) -> float:
    """Start the app on a run; stop once the dashboard shows the whole run folded.

    ``seen["loaded"]``: the checkpoint the dashboard's model started from (None: none)."""
    from tui.app import RRMAApp
    from tui.screens.dashboard import DashboardScreen

    async def ready(app):  # type: ignore[no-untyped-def]
        try:
            screen = app.screen
        except Exception:  # no screen yet
            return None
        if not isinstance(screen, DashboardScreen):
            return None
        await screen.session.loaded_event.wait()  # set just before the dashboard redraws with it
        if seen is not None and screen.session.model is not None:
            seen["loaded"] = screen.session.model.checkpoint.loaded
        return screen.query_one("#trials")

    return await _time_to_paint(RRMAApp(runs, run_dir, reviewer="bench"), ready)


async def open_runs_list(runs: Path) -> float:
    """The floor: start the app on an empty runs list and paint it."""
    from tui.app import RRMAApp
    from tui.screens.runs import RunsScreen

    async def ready(app):  # type: ignore[no-untyped-def]
        try:
            screen = app.screen
        except Exception:
            return None
        return screen.query_one("#runs") if isinstance(screen, RunsScreen) and screen.is_mounted else None

    return await _time_to_paint(RRMAApp(runs, None, reviewer="bench"), ready)


def drop_checkpoints(run_dir: Path) -> None:
    for path in moved("checkpoint_paths", "rrma.log.checkpoint", "rrma.log.reader")(run_dir):
        path.unlink(missing_ok=True)


def restore_driver_checkpoint(run_dir: Path) -> None:
    """The run's checkpoints as the driver left them: its own, and none written by a TUI since."""
    drop_checkpoints(run_dir)
    os.link(driver_copy(run_dir), run_dir / moved("CHECKPOINT_NAME", "rrma.log.checkpoint", "rrma.log.reader"))  # no copy: nothing to write back while timing


def driver_load(run_dir: Path) -> float:
    """The reader alone, from the driver's checkpoint (best of three)."""
    from rrma.log.reader import RunReader

    times = []
    for _ in range(3):
        restore_driver_checkpoint(run_dir)
        started = time.perf_counter()
        model = RunReader(run_dir).load()
        times.append(time.perf_counter() - started)
        assert model.checkpoint.loaded is not None, model.checkpoint.ignored
    return min(times)


def reader_times(run_dir: Path) -> dict[str, float]:
    """The reader on its own: a cold fold, the turn index, the checkpoint write; then warm loads."""
    from rrma.log.reader import RunReader

    drop_checkpoints(run_dir)
    started = time.perf_counter()
    model = RunReader(run_dir, use_checkpoint=False).load()
    folded = time.perf_counter()
    model.attach_index(model.index_turns())
    indexed = time.perf_counter()
    path = model.checkpoint.wait(600)
    written = time.perf_counter()
    out = {"fold": folded - started, "index": indexed - folded, "write": written - indexed,
           "bytes": float(path.stat().st_size) if path is not None else float("nan")}
    del model
    loads, restores = [], []
    for _ in range(3):
        started = time.perf_counter()
        model = RunReader(run_dir).load()
        loads.append(time.perf_counter() - started)
        started = time.perf_counter()
        model.attach_index(model.index_turns())
        restores.append(time.perf_counter() - started)
        assert model.checkpoint.loaded is not None, model.checkpoint.ignored
    out["warm_load"], out["warm_index"] = min(loads), min(restores)
    return out


def pydantic_fold(run_dir: Path) -> float:
    from rrma.log.state import RunState
    from rrma.log.store import RunStore

    started = time.perf_counter()
    RunState.fold(RunStore(run_dir).scan().events)
    return time.perf_counter() - started


async def live(runs: Path, run_dir: Path, rate: float, seconds: float) -> dict[str, list[float]]:
    from textual import events
    from textual.widgets import Static

    from tui.app import RRMAApp
    from tui.screens.dashboard import DashboardScreen
    from tui.widgets.line_table import LineTable

    parse_ts = moved("parse_ts", "rrma.log.events", "rrma.log.reader")
    app = RRMAApp(runs, run_dir, reviewer="bench")
    latencies: list[float] = []
    keys: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        await asyncio.wait_for(dash.session.loaded_event.wait(), 300)
        assert dash.session.model is not None and dash.session.model.checkpoint.loaded is not None, "opened cold"
        model = dash.session.model
        assert model is not None
        deadline = time.monotonic() + 300
        while not model.turns_indexed and time.monotonic() < deadline:  # the trace's index is built (or restored)
            await asyncio.sleep(0.05)
        await pilot.pause(0.5)

        def applied(events: list) -> None:  # type: ignore[type-arg]
            now = datetime.now(UTC)
            dash.query_one("#run-header", Static)  # already redrawn by the time this hook runs
            for event in events:
                when = parse_ts(event.ts)
                if when is not None:
                    latencies.append((now - when).total_seconds())

        dash.session.on_applied = applied
        table = dash.query_one("#trials", LineTable)
        table.focus()
        lags: list[float] = []
        appender = subprocess.Popen([sys.executable, __file__, "--append", str(run_dir), "--rate", str(rate),
                                     "--seconds", str(seconds)])
        try:
            end = time.monotonic() + seconds + 1.0
            while time.monotonic() < end:
                # event-loop lag: how late a 50 ms timer fires while the run is being followed
                asked = time.perf_counter()
                await asyncio.sleep(0.05)
                lags.append(time.perf_counter() - asked - 0.05)
                # a key: from posting "down" to the table's cursor having moved
                before = table.cursor
                target = before + 1 if before + 1 < len(table.rows) else 0
                if target == 0:
                    table.cursor = 0
                    await pilot.pause(0.05)
                    before, target = 0, 1
                started = time.perf_counter()
                app.post_message(events.Key("down", None))
                while table.cursor == before and time.perf_counter() - started < 10:
                    await asyncio.sleep(0.002)
                keys.append(time.perf_counter() - started)
                await asyncio.sleep(0.15)
        finally:
            appender.wait(timeout=seconds + 30)
        await pilot.pause(0.5)
    return {"latency": latencies, "keys": keys, "lags": lags}


async def trace_steps(runs: Path, run_dir: Path, steps: int = 200) -> list[float]:
    """Seconds from a ``down`` key in the trace to its detail pane drawn again, per step (the run opened warm)."""
    from textual import events
    from textual.widgets import Static

    from tui.app import RRMAApp
    from tui.screens.dashboard import DashboardScreen
    from tui.widgets.line_table import LineTable

    app = RRMAApp(runs, run_dir, reviewer="bench")
    times: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        dash = app.screen
        assert isinstance(dash, DashboardScreen)
        await asyncio.wait_for(dash.session.loaded_event.wait(), 300)
        model = dash.session.model
        assert model is not None
        deadline = time.monotonic() + 300
        while not model.turns_indexed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await pilot.press("t")
        await pilot.pause(0.3)
        table = app.screen.query_one("#turns", LineTable)
        detail = app.screen.query_one("#turn-text", Static)
        table.focus()
        table.action_edge(0)
        await pilot.pause(0.2)
        for _ in range(steps):
            before = table.cursor
            started = time.perf_counter()
            app.post_message(events.Key("down", None))
            while table.cursor == before and time.perf_counter() - started < 10:
                await asyncio.sleep(0)
            await detail.wait_for_refresh()
            times.append(time.perf_counter() - started)
    return times


def append_loop(run_dir: Path, rate: float, seconds: float) -> None:
    """The other process: append realistic events at ``rate`` per second."""
    from rrma.log.store import RunStore

    store = RunStore(run_dir)
    blob = store.put_json_blob({"hypothesis": "live", "edits": []})
    interval = 1.0 / rate
    n = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        i = n // 6
        tid = f"live{i:05d}"
        step = n % 6
        if step == 0:
            store.append("agent.turn", "agent:alice", {"agent": "alice", "role": "assistant", "text": f"thinking about {tid}"})
        elif step == 1:
            store.append("agent.turn", "agent:alice", {"agent": "alice", "role": "tool_call", "tool": "read_file", "args": {"path": "train.py"}})
        elif step == 2:
            store.append("agent.turn", "agent:alice", {"agent": "alice", "role": "tool_result", "tool": "read_file", "result": "LEARNING_RATE = 0.01"})
        elif step == 3:
            store.append("trial.proposed", "agent:alice", {"trial_id": tid, "parent": "base-0", "agent": "alice",
                                                            "hypothesis": "live trial", "proposal_blob": blob})
        elif step == 4:
            store.append("trial.finished", "oracle", {"trial_id": tid, "status": "ok", "score": 2.5 + (i % 7) * 0.01, "seconds": 1.0})
        else:
            store.append("blackboard.post", "agent:alice", {"agent": "alice", "text": f"{tid} done", "trial_id": tid})
        n += 1
        next_at = start + n * interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    store.close()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--workdir", type=Path, default=None, help="where the generated runs live (kept)")
    parser.add_argument("--pydantic", action="store_true", help="also time the pydantic fold over 200k events")
    parser.add_argument("--append", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--against", metavar="REV", default=None,
                        help="also run the bench on commit REV (a temporary worktree) and print both side by side")
    parser.add_argument("--rounds", type=int, default=2,
                        help="with --against: rounds, each running both trees, their order alternating (default 2)")
    parser.add_argument("--code", type=Path, default=None, help=argparse.SUPPRESS)  # read at import (CODE)
    args = parser.parse_args()
    if args.append is not None:
        append_loop(args.append, args.rate, args.seconds)
        return 0
    if args.against is not None:
        return against(args)
    from rrma.log.reader import RunReader

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rrma-bench-tui-"))
    workdir.mkdir(parents=True, exist_ok=True)
    small = ensure_run(workdir, "bench-1k", 1000)
    big = ensure_run(workdir, f"bench-{args.events // 1000}k", args.events)
    n_small, n_big = count_events(small), count_events(big)

    asyncio.run(open_app(workdir, small))  # warm imports and caches once
    open_none = min(asyncio.run(open_runs_list(workdir / "no-runs-here")) for _ in range(3))
    smalls = [asyncio.run(open_app(workdir, small)) for _ in range(3)]
    open_small = min(smalls)
    seen: dict[str, object] = {}
    if driver_copy(big).exists():
        colds = []
        for _ in range(3):  # each the first open of the run the driver wrote (its checkpoint put back each time)
            restore_driver_checkpoint(big)
            seen.clear()
            colds.append(asyncio.run(open_app(workdir, big, seen)))
            assert seen.get("loaded") is not None, "the driver's checkpoint was not used"
        open_big_cold = min(colds)
        load_driver = driver_load(big)
    else:  # too small for a checkpoint: the first open folds every line
        colds = [float("nan")]
        open_big_cold = load_driver = float("nan")
    drop_checkpoints(big)
    open_big_unkept = asyncio.run(open_app(workdir, big))  # once: seconds at a million events
    reader = reader_times(big)  # leaves the big run's checkpoint in place
    warms = [asyncio.run(open_app(workdir, big)) for _ in range(3)]
    open_big = min(warms)
    colds_late = []
    if driver_copy(big).exists():  # the driver's checkpoint again, in the process as the warm opens found it
        for _ in range(3):
            restore_driver_checkpoint(big)
            seen.clear()
            colds_late.append(asyncio.run(open_app(workdir, big, seen)))
            assert seen.get("loaded") is not None, "the driver's checkpoint was not used"
    small_reader = RunReader(small)
    started = time.perf_counter()
    small_reader.load()
    fold_small = time.perf_counter() - started
    pyd_big = pydantic_fold(big) if args.pydantic or n_big <= 200_000 else float("nan")
    started = time.perf_counter()
    import json

    with open(big / "events.jsonl", "rb") as fh:
        for line in fh:
            json.loads(line)
    json_big = time.perf_counter() - started
    print(f"events_small: {n_small}")
    print(f"events_big: {n_big}")
    print(f"app_start_no_run_s: {open_none:.3f}  (the floor: the app with an empty runs list)")
    print(f"open_small_s: {open_small:.3f}  (no checkpoint: too small to need one; median {median(smalls):.3f})")
    print(f"open_big_s: {open_big:.3f}  (with the checkpoint the TUI wrote; median {median(warms):.3f})")
    print(f"open_big_cold_s: {open_big_cold:.3f}  (the first open of the run the driver wrote: its checkpoint "
          f"+ the tail; median {median(colds):.3f}; the first big opens of this process)")
    if colds_late:
        print(f"open_big_cold_after_warm_s: {min(colds_late):.3f}  (the same, after the warm opens; median "
              f"{median(colds_late):.3f})")
    print(f"open_big_no_checkpoint_s: {open_big_unkept:.3f}  (no checkpoint at all: every line folded)")
    print(f"open_ratio_big_over_small: {open_big / open_small:.1f}")
    print(f"open_ratio_cold_over_warm: {open_big_cold / open_big:.1f}")
    print(f"open_ratio_no_checkpoint_over_cold: {open_big_unkept / open_big_cold:.1f}")
    print(f"open_big_minus_app_start_s: {open_big - open_none:.3f}  (small: {open_small - open_none:.3f})")
    print(f"reader_fold_small_s: {fold_small:.4f}")
    print(f"reader_load_big_driver_s: {load_driver:.3f}  (the driver's checkpoint + tail)")
    print(f"reader_fold_big_s: {reader['fold']:.3f}  (cold: every line)")
    print(f"reader_index_big_s: {reader['index']:.3f}  (cold: the trace's turn index, a worker after the first paint)")
    print(f"checkpoint_write_s: {reader['write']:.3f}  (a thread, after the index)")
    print(f"checkpoint_mib: {reader['bytes'] / 2**20:.1f}")
    print(f"reader_load_big_warm_s: {reader['warm_load']:.3f}  (checkpoint + tail)")
    print(f"reader_index_big_warm_s: {reader['warm_index']:.3f}  (turn index from the checkpoint)")
    print(f"json_loads_every_line_big_s: {json_big:.3f}  (machine-speed reference: cold fold/json = "
          f"{reader['fold'] / json_big:.2f})")
    print(f"pydantic_scan_fold_big_s: {pyd_big:.3f}  ({pyd_big / reader['fold']:.1f}x the reader's cold fold)"
          if pyd_big == pyd_big else "pydantic_scan_fold_big_s: skipped (over 200k events; --pydantic runs it)")
    print(f"open_big_over_json_reference: {open_big / json_big:.2f}")

    result = asyncio.run(live(workdir, big, args.rate, args.seconds))
    lat, keys, lags = result["latency"], result["keys"], result["lags"]
    print(f"live_events_seen: {len(lat)} (appended at {args.rate:g}/s for {args.seconds:g}s)")
    print(f"update_latency_p50_ms: {1000 * pct(lat, 0.5):.0f}")
    print(f"update_latency_p95_ms: {1000 * pct(lat, 0.95):.0f}")
    print(f"update_latency_max_ms: {1000 * max(lat or [float('nan')]):.0f}")
    print(f"key_to_cursor_p50_ms: {1000 * pct(keys, 0.5):.0f}  ({len(keys)} presses during the appends)")
    print(f"key_to_cursor_p95_ms: {1000 * pct(keys, 0.95):.0f}")
    print(f"event_loop_lag_p50_ms: {1000 * pct(lags, 0.5):.0f}")
    print(f"event_loop_lag_p95_ms: {1000 * pct(lags, 0.95):.0f}")
    print(f"update_p95_over_open_small: {pct(lat, 0.95) / open_small:.2f}")
    steps = asyncio.run(trace_steps(workdir, big))
    print(f"trace_step_p50_ms: {1000 * pct(steps, 0.5):.1f}  ({len(steps)} steps down the big run's trace)")
    print(f"trace_step_p95_ms: {1000 * pct(steps, 0.95):.1f}")
    print(f"workdir: {workdir}")
    return 0


def against(args: argparse.Namespace) -> int:
    """This script on commit ``args.against`` (a worktree) and on this tree, each in its own process; both printed."""
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.against], capture_output=True,
                         text=True)
    if rev.returncode != 0:
        print(f"bench_tui: --against {args.against}: not a commit of {REPO}: {rev.stderr.strip()}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="rrma-bench-tui-base-"))
    tree = base / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), rev.stdout.strip()],
                   check=True)
    common = ["--events", str(args.events), "--seconds", str(args.seconds), "--rate", str(args.rate)]
    base_label = rev.stdout.strip()
    trees = {base_label: ["--code", str(tree)], "this tree": []}
    rounds: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    try:
        for round_no in range(args.rounds):  # ABBA: the trees alternate, so a change of load falls on both
            order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
            for label in order:
                extra = trees[label]
                work = base / ("work-base" if extra else "work-this")  # generated once, reused by later rounds
                print(f"== {label} (round {round_no + 1} of {args.rounds})", flush=True)
                out = subprocess.run([sys.executable, __file__, *common, "--workdir", str(work), *extra],
                                     capture_output=True, text=True)
                print(out.stdout, end="")
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    return out.returncode
                rounds[label].append({k: float(v.split()[0]) for k, _, v in (line.partition(": ") for line in
                                      out.stdout.splitlines()) if v and v.split()[0].replace(".", "", 1).isdigit()})
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(base, ignore_errors=True)
    old_rounds, new_rounds = rounds[base_label], rounds["this tree"]
    print(f"== side by side ({base_label} -> this tree; medians over {args.rounds} round(s); ratio this/{base_label}"
          "; then each round's ratio)")
    for key in old_rounds[0]:
        if not key.endswith(("_s", "_ms")) or not all(key in r for r in (*old_rounds, *new_rounds)):
            continue
        old, new = median(r[key] for r in old_rounds), median(r[key] for r in new_rounds)
        if old > 0:
            each = " ".join(f"{n[key] / o[key]:.2f}" if o[key] > 0 else "-" for o, n in zip(old_rounds, new_rounds,
                                                                                          strict=True))
            print(f"{key}: {old:g} -> {new:g}  ratio {new / old:.2f}  (rounds: {each})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
