"""Attacks on the autoresearch oracle's score (issue 20), each shown working with its defence off
and refused, or made harmless, with it on. Each test's docstring says what "off" means there.

The hostile programs are in tests/fixtures/autoresearch/: ``hostile_train.py`` (a train.py that
rewrites the model archive it saved) and ``lookup_train.py`` (a train.py that memorizes the
validation text if it can read it). The defences live in the bench's read-only
``prepare.py`` (the scorer: ``load_model``, ``score``) and in ``oracle/autoresearch.py`` (what
trials cannot see, the sandboxed scorer, the abort gap).
"""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from oracle.autoresearch import AutoresearchOracle
from rrma.contain import sandbox
from rrma.contain.sandbox import Policy
from rrma.contracts import EvalContext
from rrma.trial import Budget, Outcome, Proposal, Status

REPO = Path(__file__).resolve().parents[2]
WORKSPACE = REPO / "benches" / "autoresearch" / "workspace"
FIXTURES = REPO / "tests" / "fixtures" / "autoresearch"
SEQ_LEN, EVAL_TOKENS = 64, 4096  # the oracle's evaluation in these tests (small and fast)
PARAMS = {"time_budget": 2, "seq_len": SEQ_LEN, "eval_tokens": EVAL_TOKENS, "progress_every_s": 0.5, "eval_seconds": 90}
GUARD_REASON = sandbox.unavailable_reason()
needs_guard = pytest.mark.skipif(GUARD_REASON is not None, reason=f"sandbox unavailable here: {GUARD_REASON}")


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare = _module("autoresearch_prepare", WORKSPACE / "prepare.py")  # SEQ_LEN 128 unless RRMA_SEQ_LEN says
hostile = _module("autoresearch_hostile", FIXTURES / "hostile_train.py")
lookup = _module("autoresearch_lookup", FIXTURES / "lookup_train.py")


class Tiny(torch.nn.Module):
    """Causal: the logits of a position come from its own token only."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(256, 256)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.emb(idx)


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("honest") / "model.pt2"
    torch.manual_seed(0)
    prepare.save_model(Tiny(), path)
    return path


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AutoresearchOracle]:
    orc = AutoresearchOracle(PARAMS, metric="val_bpb")
    orc.prepare(tmp_path_factory.mktemp("run"), WORKSPACE)
    yield orc
    orc.close()


PLAIN_LOAD = """
import json, sys, torch
honest = torch.export.load(sys.argv[1]).module()
x = torch.zeros(16, int(sys.argv[2]), dtype=torch.long)
for attack, path in json.loads(sys.argv[3]).items():
    try:
        diff = torch.export.load(path).module()(x) - honest(x)
        print("RESULT", attack, "ran; logits changed by", [round(v, 3) for v in diff[0, 0, :4].tolist()], flush=True)
    except Exception as exc:
        print("RESULT", attack, "error", type(exc).__name__, str(exc).splitlines()[0][:200], flush=True)
"""

# (attack, what torch.export.load + a forward pass do with it, the words of the scorer's refusal)
ARCHIVE_ATTACKS = [
    ("pickled-weight", "runs the payload", "weight 'emb.weight' is pickled (use_pickle)"),
    ("pickled-constant", "runs the payload", "constant 'evil' is pickled (use_pickle)"),
    ("sample-inputs", "runs the payload", None),  # dropped, never read: the model is accepted
    ("guards-code", "runs the payload", "guards_code"),
    ("hop-print", "prints", "calls 'torch.ops.higher_order.print', which is not a torch.ops.aten/prims"),
    ("from-file", "reads the file", "calls torch.ops.aten.from_file.default: aten.from_file.default takes filename"),
    # torch 2.13's own verifier refuses a plain Python function as a target after deserializing; the
    # scorer refuses it before torch sees the graph
    ("torch-save", "verifier refuses", "calls 'torch.save', which is not a torch.ops.aten/prims tensor operator"),
    # a TorchScript custom object: our plain-pickle payload is not one, torch fails to read it
    ("custom-object", "fails", "entry 'data/constants/custom_obj_0' is a pickled Python object"),
]


@pytest.fixture(scope="module")
def plain_loader(honest: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Every tampered archive through the loader without the defence: torch.export.load and a forward
    pass, as ``prepare.py evaluate`` did before, in one fresh process. The payloads here do not exit
    (``exit=False``), so one process sees them all; what each did is in its RESULT line and marker."""
    import json

    root = tmp_path_factory.mktemp("plain")
    torch.arange(256, dtype=torch.float32).numpy().tofile(root / "from-file.marker")  # "the answers"
    archives = {}
    for attack, _, _ in ARCHIVE_ATTACKS:
        archives[attack] = str(root / f"{attack}.pt2")
        hostile.tamper(str(honest), archives[attack], attack, str(root / f"{attack}.marker"), exit=False)
    res = subprocess.run([sys.executable, "-c", PLAIN_LOAD, str(honest), str(prepare.SEQ_LEN), json.dumps(archives)],
                         capture_output=True, text=True, timeout=300)
    results = {line.split()[1]: line for line in res.stdout.splitlines() if line.startswith("RESULT ")}
    assert len(results) == len(ARCHIVE_ATTACKS), res.stdout[-2000:] + res.stderr[-2000:]
    results["stdout"] = res.stdout
    return root, results


@pytest.mark.parametrize(("attack", "off", "refusal"), ARCHIVE_ATTACKS, ids=[a[0] for a in ARCHIVE_ATTACKS])
def test_archive_attack_works_on_the_plain_loader_and_is_refused_by_the_scorer(
        attack: str, off: str, refusal: str | None, plain_loader: tuple[Path, dict[str, str]], honest: Path,
        tmp_path: Path) -> None:
    """Off (the ``plain_loader`` fixture): the payload writes its marker and prints ``val_bpb:
    0.000123`` (the old oracle read that line as the score: the lead reproduced 0.000123 through
    it), the graph prints, or it reads a file of its choosing into the logits. On: the scorer's
    ``prepare.load_model`` refuses the archive with one line naming the reason, and nothing runs."""
    root, results = plain_loader
    result, marker = results[attack], root / f"{attack}.marker"
    if off == "runs the payload":
        assert marker.read_text() in ("payload ran", "guards ran"), result
        marker.unlink()
    elif off == "prints":
        assert "ran;" in result and f"{hostile.VAL_LINE} tensor(" in results["stdout"]
    elif off == "reads the file":
        assert "ran; logits changed by [0.0, 1.0, 2.0, 3.0]" in result  # the file's values in the logits
    elif off == "verifier refuses":
        assert "is not an allowed operator type" in result and not marker.exists()
    else:
        assert "error" in result and not marker.exists()

    evil = root / f"{attack}.pt2"  # (the payload does not exit: were it run here, the marker would tell)
    if refusal is None:
        program = prepare.load_model(evil, tmp_path)
        x = torch.randint(0, 256, (16, prepare.SEQ_LEN))
        assert torch.equal(program(x), prepare.load_model(honest, tmp_path)(x))
    else:
        with pytest.raises(prepare.ModelRefused, match=re.escape(refusal)) as refused:
            prepare.load_model(evil, tmp_path)
        assert str(refused.value).startswith("model.pt2: ") and "\n" not in str(refused.value)
    assert not marker.exists() or attack == "from-file"
    assert list(tmp_path.glob("model-*")) == []  # the checked copy is gone too


def test_the_checked_copy_of_an_honest_model_scores_like_the_original(honest: Path, tmp_path: Path) -> None:
    """The defence must not change an honest model: same logits as torch.export.load's, same metric."""
    checked = prepare.load_model(honest, tmp_path)
    plain = torch.export.load(str(honest)).module()
    x = torch.randint(0, 256, (16, prepare.SEQ_LEN))
    assert torch.equal(checked(x), plain(x))
    val = _text_tensor(prepare.EVAL_TOKENS + 1)
    bpb, diff = prepare.score(checked, val)
    assert diff == 0.0
    assert bpb == pytest.approx(prepare.evaluate_bpb(plain, val), abs=1e-9)


def _text_tensor(n: int) -> torch.Tensor:
    """``n`` bytes of readable Python source (any text will do for the causality tests)."""
    text = b"".join(p.read_bytes() for p in sorted((REPO / "rrma").glob("*.py")))
    assert len(text) >= n
    return torch.frombuffer(bytearray(text[:n]), dtype=torch.uint8)


class Cheat(torch.nn.Module):
    """A model without training: one parameter so that prepare.save_model finds its device."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(256))


class PeekSecondHalf(Cheat):
    """Honest (uniform) in the first half of a window, reads the next token in the second."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        peek = torch.nn.functional.one_hot(torch.roll(idx, -1, dims=1), 256).float() * 40.0 - 20.0
        late = (torch.arange(t) >= t // 2)[None, :, None]
        return torch.where(late, peek, torch.zeros_like(peek)) + self.bias


class PeekNextWindow(Cheat):
    """Causal within its window; its last position reads the next window's first token (its target)."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(idx.shape[0], idx.shape[1], 256)
        nxt = torch.nn.functional.one_hot(torch.roll(idx[:, 0], -1, dims=0), 256).float() * 40.0 - 20.0
        last = (torch.arange(idx.shape[1]) == idx.shape[1] - 1)[None, :, None]
        return torch.where(last, nxt[:, None, :], logits) + self.bias


class OverwriteTargets(Cheat):
    """Writes zeros into its input (the stream the targets come from) and predicts zeros."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        idx.zero_()
        logits = torch.full((idx.shape[0], idx.shape[1], 256), -20.0) + self.bias
        return torch.where(torch.arange(256) == 0, 20.0, logits)


@torch.no_grad()
def old_check_causal(model: torch.nn.Module) -> float:
    """The check before this change (reproduced here as the "off" side): random tokens, one fixed cut
    at SEQ_LEN // 2, logits compared before it."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (16, prepare.SEQ_LEN), generator=gen)
    cut = prepare.SEQ_LEN // 2
    x2 = x.clone()
    x2[:, cut:] = torch.randint(0, 256, (16, prepare.SEQ_LEN - cut), generator=gen)
    return float((model(x)[:, :cut] - model(x2)[:, :cut]).abs().max())


@torch.no_grad()
def old_evaluate_bpb(model: torch.nn.Module, val: torch.Tensor) -> float:
    """The metric loop before this change ("off"): the model got views of the stream its targets are
    read from."""
    n = prepare.EVAL_TOKENS // prepare.SEQ_LEN
    stream = val[: n * prepare.SEQ_LEN + 1].to(torch.long)
    inputs, targets = stream[:-1].view(n, prepare.SEQ_LEN), stream[1:].view(n, prepare.SEQ_LEN)
    nats = 0.0
    for start in range(0, n, 16):
        logits = model(inputs[start : start + 16])
        nats += torch.nn.functional.cross_entropy(logits.reshape(-1, 256), targets[start : start + 16].reshape(-1),
                                                  reduction="sum").item()
    return nats / (math.log(2) * n * prepare.SEQ_LEN)


@pytest.mark.parametrize("cls", [PeekSecondHalf, PeekNextWindow])
def test_a_model_that_reads_ahead_where_the_old_check_did_not_look_is_rejected(
        cls: type[torch.nn.Module], tmp_path: Path) -> None:
    """Off: the old check (one cut at the middle, random tokens, logits before the cut) gives 0 and
    the model scores below an honest one. On: ``prepare.score`` (reordered windows cut at secret
    random positions, continued with other text) sees the log-probabilities change."""
    path = tmp_path / "model.pt2"
    prepare.save_model(cls(), path)
    val = _text_tensor(prepare.EVAL_TOKENS + 1)
    plain = torch.export.load(str(path)).module()
    assert old_check_causal(plain) == 0.0
    assert old_evaluate_bpb(plain, val) < 8.0  # uniform guessing is 8 bits; reading ahead beats it
    _, diff = prepare.score(prepare.load_model(path, tmp_path), val)
    assert diff > prepare.CAUSAL_TOLERANCE


def test_a_model_that_overwrites_its_targets_gains_nothing(tmp_path: Path) -> None:
    """Off: the old metric loop passed the model views of the stream the targets are read from; a
    model that zeroes its input and predicts zeros scored near 0 bpb (and passed the old check).
    On: the scorer gives every call fresh copies, so the targets stay the text's."""
    path = tmp_path / "model.pt2"
    prepare.save_model(OverwriteTargets(), path)
    val = _text_tensor(prepare.EVAL_TOKENS + 1)
    assert old_evaluate_bpb(torch.export.load(str(path)).module(), val.clone()) < 0.5
    bpb, diff = prepare.score(prepare.load_model(path, tmp_path), val)
    assert bpb > 8.0 and diff <= prepare.CAUSAL_TOLERANCE


# ----------------------------------------------------------------------------- through the oracle


def hostile_trial(tmp_path: Path, program: str) -> Path:
    d = tmp_path / "trial"
    shutil.copytree(WORKSPACE, d, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "train.py").write_text(program)
    return d


def evaluate(orc: AutoresearchOracle, d: Path, *, guarded: bool, baseline: bool = False) -> tuple[Outcome, Path]:
    """The oracle on trial ``d`` as the executor runs it: ``ctx.oracle_dir`` a fresh sibling of the
    trial, and (``guarded``) the trial's sandbox with the run and the oracle's directory hidden."""
    assert orc.prepare_py is not None
    own = d.parent / "oracle"
    own.mkdir()
    guard = Policy.for_trial(d, protect=(orc.prepare_py.parent.parent, own, *orc.held_out())) if guarded else None
    ctx = EvalContext(trial_id="t0001", trial_dir=d, proposal=Proposal(hypothesis="attack"),
                      budget=Budget(seconds=240, memory_mb=2048), seed=1, is_baseline=baseline, guard=guard,
                      oracle_dir=own)
    return orc.evaluate(ctx), own


def test_the_oracle_rejects_a_pickled_model_and_never_runs_it(oracle: AutoresearchOracle, tmp_path: Path) -> None:
    """On, through the oracle (sandboxed where bubblewrap works): train.py saves an archive with a
    pickled weight whose payload would write a marker into the scorer's own, writable, directory,
    print ``val_bpb: 0.000123`` and exit 0. The outcome is ``rejected`` with a line naming the
    weight, the marker never appears and the scorer never prints the fake score. (Off: the
    plain-loader test above; the lead reproduced 0.000123 through the old oracle.)"""
    marker = tmp_path / "oracle" / "PWNED"
    program = (FIXTURES / "hostile_train.py").read_text() + f"\nsys.exit(main('pickled-weight', {str(marker)!r}))\n"
    out, _ = evaluate(oracle, hostile_trial(tmp_path, "import sys\n" + program), guarded=GUARD_REASON is None)
    assert out.status == Status.rejected, out.feedback
    assert out.score is None and out.metrics["failure"] == "refused"
    assert out.feedback.startswith("Rejected: model.pt2: weight 'emb.weight' is pickled (use_pickle)")
    assert out.metrics["reported_val_bpb"] == 0.000123  # what train.py printed, kept as self-reported
    assert "0.000123" not in out.log.partition("=== oracle evaluation ===")[2]
    assert not marker.exists()


@needs_guard
def test_a_memorizing_lookup_model_cannot_see_the_validation_text(oracle: AutoresearchOracle, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """lookup_train.py memorizes the validation text when it can read it (prepare.build_corpus, or
    the held-out packages of any Python installation) and otherwise learns from train.bin.

    Off 1 (the old split, in-process): the validation text was every 20th stdlib file, which every
    trial can read; the lookup table built from it scores far below an honest model on it.
    Off 2 (through the oracle, sandbox off): the held-out packages are readable, the program finds
    the exact validation stream and scores about as well. On (sandboxed): they are hidden, the
    program falls back to train.bin, and its score is that of an n-gram model of Python: measured
    5.5 bpb in this configuration (4.1 at the bench's seq_len 128 / 65536 tokens) against 0.78
    memorized (1.40 there). The bound, 2.0, is far above memorization and below anything an honest
    2-second trial reaches (the bench's best honest 20-second GPT: 3.4)."""
    import numpy as np

    # off 1: the old split
    root = Path(prepare.sysconfig.get_paths()["stdlib"])
    docs = [p.read_bytes() for p in sorted(root.rglob("*.py"))
            if not prepare._STDLIB_SKIP.intersection(p.relative_to(root).parts) and p.is_file()]
    old_val = b"\n\n".join(d for i, d in enumerate(docs) if i % 20 == 19)
    memorized = lookup.LookupModel(lookup.build_table(old_val[: EVAL_TOKENS + 1], smoothing=1e-4))
    old_stream = torch.from_numpy(np.frombuffer(old_val, dtype=np.uint8).copy())
    monkeypatch.setattr(prepare, "SEQ_LEN", SEQ_LEN)
    monkeypatch.setattr(prepare, "EVAL_TOKENS", EVAL_TOKENS)
    old_split_bpb = prepare.evaluate_bpb(memorized, old_stream)
    assert old_split_bpb < 1.2

    scores: dict[bool, float] = {}
    for guarded in (False, True):
        d = hostile_trial(tmp_path / str(guarded), (FIXTURES / "lookup_train.py").read_text())
        out, _ = evaluate(oracle, d, guarded=guarded)
        assert out.status == Status.ok and out.score is not None, out.feedback
        scores[guarded] = out.score
        assert ("memorizing" in out.log) is not guarded, out.log[-2000:]
    print(f"lookup model: old split {old_split_bpb:.3f}, sandbox off {scores[False]:.3f}, on {scores[True]:.3f}")
    assert scores[False] < 1.2
    assert scores[True] > 2.0


def test_a_trial_cannot_move_the_abort_gap(oracle: AutoresearchOracle, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The early-abort gap maps a trial's printed training loss to val_bpb; it used to be the median
    over every scored trial. A hostile train.py prints a training loss of 0.0001 beside an untrained
    model (val_bpb ~ 8): counted, it moves the gap, and with it the abort threshold and the
    ``score_est`` of every later trial.

    On: the oracle learns the gap from baseline repeats only; the hostile trial leaves it where the
    baseline put it. Off: the old rule (every scored trial counts) applied to the same two outcomes
    with a fresh GapTracker: the gap moves by bits.

    The module's prepared oracle (preparing one takes seconds), with the fresh GapTracker a new
    oracle starts with: what earlier tests ran through it leaves no gap behind."""
    from oracle.autoresearch import GapTracker

    orc = oracle
    monkeypatch.setattr(orc, "gaps", GapTracker())
    text = (WORKSPACE / "train.py").read_text().replace("LEARNING_RATE = 0.0003", "LEARNING_RATE = 0.003")
    base, _ = evaluate(orc, hostile_trial(tmp_path / "base", text), guarded=False, baseline=True)
    assert base.status == Status.ok, base.feedback
    gap = orc.gaps.gap()
    assert gap == pytest.approx(base.metrics["val_bpb"] - base.metrics["final_train_loss"] / math.log(2), abs=1e-4)
    threshold = orc.gaps.loss_threshold(3.0)

    program = "import sys\n" + (FIXTURES / "hostile_train.py").read_text() + "\nsys.exit(main('none', ''))\n"
    evil, _ = evaluate(orc, hostile_trial(tmp_path / "evil", program), guarded=False)
    assert evil.status == Status.ok and evil.metrics["final_train_loss"] == pytest.approx(0.0001)
    assert orc.gaps.gap() == gap and orc.gaps.loss_threshold(3.0) == threshold
    old = GapTracker()
    for outcome in (base, evil):
        old.add(outcome.metrics["val_bpb"], outcome.metrics["final_train_loss"])
    assert abs(old.gap() - gap) > 1.0
