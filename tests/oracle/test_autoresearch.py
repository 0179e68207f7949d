"""The autoresearch oracle on real torch training runs: ok, crash, diverged, timeout, oom, abort.

Each test materializes the bench's workspace (prepare.py + train.py) into a trial directory,
edits train.py the way an agent would, and calls the oracle directly with a tiny time budget.
"""

from __future__ import annotations

import re
import shutil
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from oracle.autoresearch import AutoresearchOracle, parse_progress, parse_summary_block, traceback_tail
from rrma.contain import sandbox
from rrma.contain.sandbox import Policy
from rrma.contracts import EvalContext, OracleError
from rrma.plugins import make_oracle
from rrma.task import load_task
from rrma.trial import Budget, Proposal, Status

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benches" / "autoresearch"
WORKSPACE = BENCH / "workspace"

# small and fast: 3 s of training, a short evaluation stream
PARAMS = {"time_budget": 3, "seq_len": 64, "eval_tokens": 4096, "progress_every_s": 0.5, "eval_seconds": 60}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AutoresearchOracle]:
    run_dir = tmp_path_factory.mktemp("run")
    orc = make_oracle("autoresearch", PARAMS, metric="val_bpb")
    assert isinstance(orc, AutoresearchOracle)
    facts = orc.prepare(run_dir, WORKSPACE)
    assert len(str(facts["data_sha256"])) == 64
    assert facts["train_bytes"] > facts["val_bytes"] > 4096
    yield orc
    orc.close()


def trial(tmp_path: Path, **constants: object) -> Path:
    """A trial dir holding the workspace with ``NAME = literal`` lines rewritten."""
    d = tmp_path / "trial"
    shutil.copytree(WORKSPACE, d, ignore=shutil.ignore_patterns("__pycache__"))
    text = (d / "train.py").read_text()
    for name, value in constants.items():
        text, n = re.subn(rf"^{name} = [^#\n]*", f"{name} = {value!r}  ", text, count=1, flags=re.M)
        assert n == 1, name
    (d / "train.py").write_text(text)
    return d


def ctx_for(d: Path, *, seconds: float = 180, memory_mb: int = 2048, **kw: object) -> tuple[EvalContext, list[dict[str, object]]]:
    samples: list[dict[str, object]] = []
    ctx = EvalContext(
        trial_id="t0001",
        trial_dir=d,
        proposal=Proposal(hypothesis="test"),
        budget=Budget(seconds=seconds, memory_mb=memory_mb),
        progress=samples.append,
        **kw,  # type: ignore[arg-type]
    )
    return ctx, samples


def test_ok_trial_is_scored_by_the_oracle(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path, LEARNING_RATE=0.003)
    # a cheating prepare.py in the trial dir is replaced by the pristine copy before training
    (d / "prepare.py").write_text((d / "prepare.py").read_text().replace("bpb = total_nats /", "bpb = 0.0 * total_nats /"))
    ctx, samples = ctx_for(d, seed=1)
    out = oracle.evaluate(ctx)
    assert out.status == Status.ok, out.feedback
    assert out.score is not None and 1.0 < out.score < 8.0
    assert out.metrics["reported_val_bpb"] == pytest.approx(out.score, abs=1e-4)
    assert out.metrics["num_steps"] > 5
    assert out.metrics["num_params"] > 1000
    assert "val_bpb" in out.feedback
    # sparse progress: step/loss/elapsed samples, far fewer than the progress lines printed
    assert samples and {"step", "loss", "elapsed"} <= set(samples[0])
    printed = sum(1 for line in out.log.splitlines() if parse_progress(line))
    assert len(samples) < printed
    assert (d / "prepare.py").read_bytes() == (WORKSPACE / "prepare.py").read_bytes()


def test_syntax_error_is_a_crash_with_the_traceback(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path)
    (d / "train.py").write_text((d / "train.py").read_text().replace("def lr_at(progress: float) -> float:", "def lr_at(progress: float) -> float"))
    out = oracle.evaluate(ctx_for(d)[0])
    assert out.status == Status.crash
    assert out.metrics["failure"] == "crash"
    assert "SyntaxError" in out.feedback and "train.py" in out.feedback


def test_nan_loss_is_a_diverged_crash(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path, LEARNING_RATE=1e6, GRAD_CLIP=0.0, INIT_STD=10.0)
    out = oracle.evaluate(ctx_for(d)[0])
    assert out.status == Status.crash, out.feedback
    assert out.metrics["failure"] == "diverged"
    assert "diverged" in out.feedback and "FAIL" in out.feedback
    assert "learning rate" in out.feedback


def test_timeout_is_labelled_with_progress(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path)
    hang = "next_log = training_seconds + LOG_INTERVAL_S\n"
    text = (d / "train.py").read_text().replace(hang, hang + "            while True:  # hangs after the first progress line\n                pass\n", 1)
    (d / "train.py").write_text(text)
    out = oracle.evaluate(ctx_for(d, seconds=40)[0])  # the training process gets 40 / 2 s
    assert out.status == Status.timeout, out.feedback
    assert out.metrics["failure"] == "timeout"
    assert "TIME_BUDGET" in out.feedback and "last progress: step" in out.feedback


def test_memory_budget_is_oom(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path)
    out = oracle.evaluate(ctx_for(d, memory_mb=120)[0])
    assert out.status == Status.oom, out.feedback
    assert "120 MiB" in out.feedback and "smaller" in out.feedback


def test_memory_error_in_the_trial_is_oom(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path)
    text = (d / "train.py").read_text().replace("    torch.manual_seed(SEED)\n", "    raise MemoryError('cannot allocate activations')\n", 1)
    (d / "train.py").write_text(text)
    out = oracle.evaluate(ctx_for(d)[0])
    assert out.status == Status.oom, out.feedback
    assert "MemoryError" in out.feedback


def test_exit_zero_without_metrics_is_no_metric(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path)
    (d / "train.py").write_text("print('trained, honestly')\n")
    out = oracle.evaluate(ctx_for(d)[0])
    assert out.status == Status.crash
    assert out.metrics["failure"] == "no-metric"
    assert "val_bpb" in out.feedback and "save_model" in out.feedback


def test_early_abort_stops_a_hopeless_trial(tmp_path: Path) -> None:
    orc = AutoresearchOracle({**PARAMS, "time_budget": 6, "early_abort": True}, metric="val_bpb")
    try:
        orc.prepare(tmp_path / "run", WORKSPACE)
        d = trial(tmp_path, LEARNING_RATE=0.0001)
        ctx, samples = ctx_for(d, best_score=1.0)  # a best no 6-second run can approach
        out = orc.evaluate(ctx)
    finally:
        orc.close()
    assert out.status == Status.aborted, out.feedback
    assert out.metrics["failure"] == "early-abort"
    lo, hi = out.metrics["predicted_interval"]
    assert lo <= out.metrics["predicted_final_loss"] <= hi
    assert lo > out.metrics["threshold_loss"]
    assert out.metrics["aborted_at_fraction"] < 1.0
    assert "cannot beat" in out.feedback and "1.0000" in out.feedback
    assert samples


@pytest.mark.slow
def test_a_model_that_looks_ahead_is_rejected(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    d = trial(tmp_path, LEARNING_RATE=0.003)
    text = (d / "train.py").read_text()
    assert "is_causal=True" in text
    (d / "train.py").write_text(text.replace("is_causal=True", "is_causal=False"))
    out = oracle.evaluate(ctx_for(d)[0])
    assert out.status == Status.rejected, out.feedback
    assert out.metrics["failure"] == "not-causal"
    assert out.score is None and "causal" in out.feedback


def test_the_validation_text_comes_from_held_out_files(oracle: AutoresearchOracle) -> None:
    """held_out() names every file the validation text is built from (the held-out stdlib packages of
    this interpreter among them), the corpus cache and val.bin; the training split has none of it."""
    assert oracle.data_dir is not None
    held = set(oracle.held_out())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for pkg in ("idlelib", "tkinter", "turtledemo"):
        assert stdlib / pkg in held
    assert oracle.data_dir.parent in held and oracle.data_dir / "val.bin" in held
    train = (oracle.data_dir / "train.bin").read_bytes()
    editor = (stdlib / "idlelib" / "editor.py").read_bytes()
    val = (oracle.data_dir / "val.bin").read_bytes()
    assert editor in val and editor[:2000] not in train
    assert (stdlib / "json" / "decoder.py").read_bytes() in train


def test_too_little_validation_text_is_a_clear_error(tmp_path: Path) -> None:
    orc = AutoresearchOracle({**PARAMS, "eval_tokens": 50_000_000}, metric="val_bpb")
    try:
        with pytest.raises(OracleError, match=r"the validation text of 'stdlib' \(held out: .*idlelib.*needs 50000001"):
            orc.prepare(tmp_path / "run", WORKSPACE)
    finally:
        orc.close()


def test_a_text_file_is_a_data_source(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(40000)))
    orc = AutoresearchOracle({**PARAMS, "data": str(corpus), "cache_dir": str(tmp_path / "cache")}, metric="val_bpb")
    try:
        facts = orc.prepare(tmp_path / "run", WORKSPACE)
    finally:
        orc.close()
    assert facts["data_source"] == str(corpus)
    assert facts["train_bytes"] + facts["val_bytes"] >= corpus.stat().st_size
    assert str(tmp_path / "cache") in str(facts["data_dir"])
    assert (Path(str(facts["data_dir"])) / "val.bin").stat().st_size == facts["val_bytes"]


def test_gpu_configuration_rewrites_only_the_declared_constants(tmp_path: Path) -> None:
    import argparse

    from benches.autoresearch.bench import build_task

    args = argparse.Namespace(gpu=True, runs=tmp_path, data=None, time_budget=None, early_abort=False,
                              trials=3, agents=None, seed=None, backend=None, model=None)
    task = build_task(args)
    assert task.oracle.params["device"] == "cuda" and task.oracle.params["early_abort"] is False
    assert task.budget.max_trials == 3
    base = (WORKSPACE / "train.py").read_text().splitlines()
    gpu = (task.workspace_dir() / "train.py").read_text().splitlines()
    changed = {a.split(" = ")[0] for a, b in zip(base, gpu, strict=True) if a != b}
    overrides = task.bench["train_overrides"]
    assert changed and changed <= set(overrides)
    for name, value in overrides.items():
        assert any(line.startswith(f"{name} = {value!r}  #") for line in gpu), name


def test_bad_params_are_rejected() -> None:
    with pytest.raises(OracleError, match="time_budget"):
        AutoresearchOracle({"time_budget": -1})
    with pytest.raises(OracleError, match="unknown_knob"):
        AutoresearchOracle({"unknown_knob": 1})
    with pytest.raises(OracleError, match="looks"):
        AutoresearchOracle({"abort_looks": [0.9, 0.2]})


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("step 12 | loss 3.250000 | lr 1.0e-03 | elapsed 4.25s", (12, 3.25, 4.25)),  # train.py's format
        ("step 7 | loss nan | elapsed 1.00s", (7, float("nan"), 1.0)),  # NaN parses (flagged later)
        ("val_bpb: 3.2", None),  # not a progress line
    ],
)
def test_parse_progress(line: str, expected: tuple[int, float, float] | None) -> None:
    got = parse_progress(line)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert got[0] == expected[0] and got[2] == expected[2]
    assert (got[1] == expected[1]) or (got[1] != got[1] and expected[1] != expected[1])


def test_parse_metrics_reads_the_last_block() -> None:
    out = "val_bpb: 9\n---\nval_bpb: 3.5\nnum_steps: 10\nnote: text\n"
    assert parse_summary_block(out) == {"val_bpb": 3.5, "num_steps": 10.0}
    assert parse_summary_block("no block") == {}


def test_traceback_tail_keeps_the_last_traceback() -> None:
    out = "noise\nTraceback (most recent call last):\n  old\nValueError: a\nmore\nTraceback (most recent call last):\n  File x\nKeyError: b\n"
    assert traceback_tail(out) == "Traceback (most recent call last):\n  File x\nKeyError: b"


@pytest.mark.parametrize("name", ["task.yaml", "task_gpu.yaml"])
def test_task_files_load(name: str) -> None:
    task = load_task(BENCH / name)
    assert task.oracle.kind == "autoresearch"
    assert task.metric.name == "val_bpb" and task.metric.direction == "minimize"
    AutoresearchOracle(task.oracle.params, metric=task.metric.name)  # params validate
    train = (BENCH / "workspace" / "train.py").read_text()
    for key in task.search_space:
        file, _, const = key.partition(":")
        assert file == "train.py"
        assert re.search(rf"^{const} = [^\n#]+#", train, re.M), f"{const} is not a 'NAME = literal  # comment' line"


@pytest.mark.slow
def test_small_bench_runs_end_to_end(tmp_path: Path) -> None:
    # the whole loop on a miniature configuration: 2 baseline repeats, 2 random-search trials
    import argparse
    import json

    from benches.autoresearch.bench import build_task
    from rrma.run.loop import start_run

    args = argparse.Namespace(gpu=False, runs=tmp_path, data=None, time_budget=3.0, early_abort=True,
                              trials=2, agents=None, seed=1, backend=None, model=None)
    task = build_task(args)
    data = task.model_dump(mode="json")
    data["noise"]["baseline_repeats"] = 2
    data["oracle"]["params"].update(seq_len=64, eval_tokens=4096, progress_every_s=0.5)
    from rrma.task import task_from_dict

    task = task_from_dict(data, base_dir=task.base_dir)
    result = start_run(task, tmp_path)
    assert result.ok, result.reason
    state = result.state
    assert state.baseline_mean is not None and state.sigma is not None
    assert len(state.agent_trials()) == 2
    assert all(t.progress for t in state.trials.values() if t.status == "ok")
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert len(run_json["oracle"]["data_sha256"]) == 64
    assert run_json["oracle"]["prepare_py_sha256"]


GUARD_REASON = sandbox.unavailable_reason()


@pytest.mark.skipif(GUARD_REASON is not None, reason=f"file-system guard unavailable here: {GUARD_REASON}")
def test_guarded_train_py_cannot_rewrite_the_metric_or_the_data_nor_see_val(
        oracle: AutoresearchOracle, tmp_path: Path) -> None:
    """train.py tries what a score-hacking agent would: overwrite the oracle's frozen prepare.py and
    the data, and read the validation split to train on it. Under the guard all three fail."""
    assert oracle.prepare_py is not None and oracle.data_dir is not None
    d = trial(tmp_path, LEARNING_RATE=0.003)
    targets = {"metric": oracle.prepare_py, "train_data": oracle.data_dir / "train.bin"}
    attack = (
        "import errno, os\n"
        f"for name, path in {[(k, str(v)) for k, v in targets.items()]!r}:\n"
        "    try:\n"
        "        open(path, 'r+b').close()\n"
        "        print('ATTACK', name, 'writable', flush=True)\n"
        "    except OSError as exc:\n"
        "        print('ATTACK', name, errno.errorcode[exc.errno], flush=True)\n"
        f"print('ATTACK val_bytes', os.path.getsize({str(oracle.data_dir / 'val.bin')!r}), flush=True)\n"
    )
    (d / "train.py").write_text(attack + (d / "train.py").read_text())
    metric_before = oracle.prepare_py.read_bytes()
    run_dir = oracle.prepare_py.parent.parent
    ctx, _ = ctx_for(d, seed=1, guard=Policy.for_trial(d, protect=(run_dir,)))
    out = oracle.evaluate(ctx)
    assert out.status == Status.ok, out.feedback
    seen = [line.split()[1:] for line in out.log.splitlines() if line.startswith("ATTACK")]
    assert seen == [["metric", "EROFS"], ["train_data", "EROFS"], ["val_bytes", "0"]]
    assert oracle.prepare_py.read_bytes() == metric_before
    assert (oracle.data_dir / "val.bin").stat().st_size > 4096  # hidden only inside the trial
    # train.py's own number came from a dev slice of train; the oracle scored the real split
    assert "val.bin is hidden while training" in out.log
    assert out.score is not None and 1.0 < out.score < 8.0
    assert out.metrics["reported_val_bpb"] != pytest.approx(out.score, abs=1e-6)
