"""Attacks on the GSM8K oracles (issue 20), each shown working where its defence is off.

1. A recipe plants ``oracle_eval.json -> ../../../events.jsonl`` (or a link to any other file) in
   its workspace; the oracle used to write its report there, through the link. Now it writes only
   to ``ctx.oracle_dir``: through the real loop, the log verifies and the other file is intact,
   while the old write, replayed on the same planted links, breaks both.
2. Held out means unreadable: a recipe that searches what it can see for dev/test questions and
   for the files named in ``data_locations()``, and tries to rebuild dev with the harness's own
   ``load_split``/``dev_indices``, finds nothing with the oracle's ``held_out()`` declared, and finds
   every copy with the declaration off.
3. A trained model is data: a ``pytorch_model.bin`` whose unpickling writes a marker is refused
   (the marker never appears; unpickling it directly does write it), so are ``auto_map`` custom
   code, a model without safetensors and a model directory that is or contains a link.
4. A relative ``--runs`` directory: the recipe oracle handed the recipe paths relative to the
   harness's cwd while the recipe runs in its workspace, so every path was joined twice.

Data: tests/fixtures/gsm8k (template-generated problems written for RRMA). The tiny random model
is built locally; the tests that evaluate a model are marked slow (a child importing torch).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from oracle.gsm8k_data import data_locations, dev_indices, download_caches, load_split
from rrma.contain import sandbox
from rrma.contain.sandbox import Policy
from rrma.contracts import Agent, Context, EvalContext
from rrma.log.verify import verify_run
from rrma.plugins import make_oracle
from rrma.run.loop import start_run
from rrma.task import AgentConfig, load_task
from rrma.trial import Budget, FileEdit, Proposal, Status

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "gsm8k"
needs_guard = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                 reason=f"file-system guard unavailable here: {sandbox.unavailable_reason()}")


def _ctx(trial_dir: Path, *, seconds: float = 60, **kw: Any) -> EvalContext:
    trial_dir.mkdir(parents=True, exist_ok=True)
    return EvalContext(trial_id=trial_dir.name, trial_dir=trial_dir, proposal=Proposal(),
                       budget=Budget(seconds=seconds, memory_mb=4096), **kw)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from oracle.gsm8k_gen import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


# ----------------------------------------------------------------------------- 1. planted links

LINK_RECIPE = """
import argparse, os, shutil
p = argparse.ArgumentParser()
for flag in ("--base-model", "--train-data", "--output-dir", "--seed"):
    p.add_argument(flag)
a = p.parse_args()
shutil.copytree(a.base_model, a.output_dir)  # an honest (untrained) model, so the oracle scores it
os.symlink(TARGET, "oracle_eval.json")  # where the oracle used to write its report
print("planted oracle_eval.json ->", TARGET)
"""


@pytest.mark.slow  # the loop with two recipe trials, each evaluated by a child importing torch (~25 s)
@needs_guard
def test_a_planted_report_link_writes_nothing_through_the_loop(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the harness user's file\n")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "recipe.py").write_text(LINK_RECIPE.replace("TARGET", repr("../../../events.jsonl")))
    task = load_task(REPO / "benches" / "gsm8k_recipe" / "task.yaml", {
        "oracle.params.data": str(FIXTURE), "oracle.params.download": False, "oracle.params.eval_limit": 2,
        "oracle.params.train_limit": 8, "oracle.params.recipe_args": [], "oracle.params.eval_seconds": 100,
        "oracle.params.gen": {"max_new_tokens": 4, "batch_size": 2}, "budget.trial_seconds": 160,
        "budget.max_trials": 1, "agents": [{"name": "attacker", "backend": "random-search"}],
        "loop.keep_workspaces": True,  # the planted links are looked at below
    })
    task.workspace.source = str(tmp_path / "ws")

    class PlantElsewhere(Agent):
        def propose(self, ctx: Context) -> Proposal | None:
            return Proposal(hypothesis="point the report at another file", edits=[
                FileEdit(path="recipe.py", content=LINK_RECIPE.replace("TARGET", repr(str(victim))))])

    result = start_run(task, tmp_path / "runs", agents=[PlantElsewhere(AgentConfig(name="attacker"), task)])
    run_dir = result.run_dir
    trials = result.state.trials
    assert {t: (r.status, r.score) for t, r in trials.items()} == {"base-0": ("ok", 0.0), "t0001": ("ok", 0.0)}, \
        {t: r.feedback for t, r in trials.items()}
    report = verify_run(run_dir)
    assert report.ok, report.errors
    assert victim.read_text() == "the harness user's file\n"
    base_link, trial_link = (run_dir / "trials" / t / "work" / "oracle_eval.json" for t in ("base-0", "t0001"))
    assert os.readlink(base_link) == "../../../events.jsonl" and os.readlink(trial_link) == str(victim)  # planted
    record = json.loads((run_dir / "trials" / "base-0" / "oracle" / "oracle_eval.json").read_text())
    assert record["metrics"]["pass_at_1"] == 0.0 and len(record["correct"]) == 2  # the report is in the oracle's dir

    # control: the old code's write, `(ctx.trial_dir / "oracle_eval.json").write_text(...)`, on the same links
    copy = tmp_path / "copy" / run_dir.name
    shutil.copytree(run_dir, copy, symlinks=True)
    (copy / "trials" / "base-0" / "work" / "oracle_eval.json").write_text(json.dumps(record))
    assert (copy / "events.jsonl").read_text() == json.dumps(record)  # the run's log, overwritten
    assert not verify_run(copy).ok
    trial_link.write_text(json.dumps(record))
    assert victim.read_text() == json.dumps(record)


# ----------------------------------------------------------------------------- 2. held out means unreadable

SEARCH_RECIPE = """
import argparse, os
p = argparse.ArgumentParser()
for flag in ("--base-model", "--train-data", "--output-dir", "--seed"):
    p.add_argument(flag)
a = p.parse_args()
TAG = "".join(reversed(REVERSED_TAG))  # never spelled out in this file (the workspace is searched too)
hits = set()

def scan_file(path):
    try:
        if os.path.getsize(path) < 4_000_000:
            with open(path, "rb") as fh:
                if TAG.encode() in fh.read():
                    hits.add(path)
    except OSError:
        pass

for root in ROOTS:
    if os.path.isfile(root):
        scan_file(root)
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            scan_file(os.path.join(dirpath, name))
for path in sorted(hits):
    print("FOUND", path)
from oracle.gsm8k_data import DataError, load_split  # the harness's own loader and dev_indices
for split in ("dev", "test", "train"):
    for data in (None, DATA):
        try:
            problems = load_split(split, data)
        except (DataError, OSError):
            print("REFUSED", split, data is not None)
        else:
            print("LOADED", split, data is not None, sum(TAG in p.question for p in problems))
print("GIVEN", TAG in open(a.train_data).read())
"""


def _plant_data(host: Path, tag: str) -> dict[str, Path]:
    """Copies of the fixture whose dev and test questions carry ``tag``, where GSM8K files live."""
    train, test = load_split("train", FIXTURE), load_split("test", FIXTURE)
    dev = set(dev_indices(len(train)))
    train_text = "".join(json.dumps({"question": p.question + (f" [{tag}]" if p.idx in dev else ""),
                                     "answer": p.answer}) + "\n" for p in train)
    test_text = "".join(json.dumps({"question": f"{p.question} [{tag}]", "answer": p.answer}) + "\n" for p in test)
    places = {"data": host / "data", "shared": host / "shared" / "gsm8k", "cache": host / "cache" / "rrma" / "gsm8k"}
    for folder in places.values():
        folder.mkdir(parents=True)
        (folder / "train.jsonl").write_text(train_text)
        (folder / "test.jsonl").write_text(test_text)
    hf = host / "hf" / "datasets" / "openai___gsm8k" / "main" / "0.0.0"  # what the HF datasets fallback leaves
    hf.mkdir(parents=True)
    (hf / "gsm8k-test.jsonl").write_text(test_text)
    places["hf"] = hf
    return places


@needs_guard
def test_held_out_splits_are_unreadable_to_a_searching_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe searches every place GSM8K may live and tries the harness's own loader (dev rebuilt
    with ``dev_indices`` from the full train split). The view it gets shows the folder holding all the
    copies (as a host-wide view would): the oracle's ``held_out()`` must hide each one. Control: the
    same search with the declaration off finds every copy and rebuilds dev."""
    tag = f"held-out-{uuid.uuid4().hex}"
    host = tmp_path / "host"
    places = _plant_data(host, tag)
    monkeypatch.setenv("RRMA_SHARED", str(host / "shared"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(host / "cache"))
    monkeypatch.setenv("HF_HOME", str(host / "hf"))
    data = places["data"]
    oracle = make_oracle("gsm8k-recipe", {"data": str(data), "base_model": str(tmp_path / "no-model"), "eval_limit": 3,
                                          "eval_seconds": 10}, metric="pass_at_1", direction="maximize")
    run_dir = tmp_path / "run"
    oracle.prepare(run_dir, tmp_path)
    declared = oracle.held_out()
    assert set(data_locations(data)) | set(download_caches()) <= set(declared)
    roots = [str(host), *(str(p) for p in declared)]
    recipe = (SEARCH_RECIPE.replace("REVERSED_TAG", repr(tag[::-1])).replace("ROOTS", repr(roots))
              .replace("DATA", repr(str(data))))

    def attack(name: str, hidden: tuple[Path, ...]) -> tuple[list[str], str]:
        trial = run_dir / "trials" / name / "work"
        trial.mkdir(parents=True)
        (trial / "recipe.py").write_text(recipe)
        oracle_dir = trial.parent / "oracle"
        oracle_dir.mkdir()
        # what evaluate_job gives a trial (run dir, oracle dir and held_out() hidden), on a view that shows `host`
        guard = Policy.for_trial(trial, (run_dir, oracle_dir, *hidden)).protecting(host)
        out = oracle.evaluate(_ctx(trial, seconds=40, guard=guard, oracle_dir=oracle_dir))
        assert out.status == Status.crash and "wrote no model" in out.feedback, out.feedback  # it only searched
        return [line for line in out.log.splitlines() if line.split(" ")[0] in ("FOUND", "LOADED", "REFUSED",
                                                                                  "GIVEN")], out.feedback

    seen, feedback = attack("on", declared)
    assert [line for line in seen if line.startswith(("FOUND", "LOADED"))] == []
    assert sorted(seen) == sorted([f"REFUSED {s} {d}" for s in ("dev", "test", "train") for d in (False, True)]
                                  + ["GIVEN False"])
    assert not any(str(p) in feedback for p in declared)  # no feedback names a held-out path

    monkeypatch.setattr(oracle, "held_out", lambda: ())  # control: nothing declared
    seen, _ = attack("off", ())
    found = {line.split(" ", 1)[1] for line in seen if line.startswith("FOUND")}
    for where, folder in places.items():
        assert any(Path(f).parent == folder for f in found), (where, found)
    n_dev = len(dev_indices(len(load_split("train", FIXTURE))))
    assert f"LOADED dev True {n_dev}" in seen and "LOADED test True 25" in seen  # dev rebuilt, test read
    assert "GIVEN False" in seen  # the file it is given never holds a held-out question (the split guard)


@pytest.mark.parametrize("kind", ["gsm8k-eval", "gsm8k-recipe", "gsm8k-prompt"])
def test_every_gsm8k_oracle_declares_every_data_location(kind: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))
    data = tmp_path / "gsm8k" / "train.jsonl"
    declared = set(make_oracle(kind, {"data": str(data), "model": "m"}).held_out())
    # the file, the test split beside it, the shared copy and the cache (as set and at their defaults)
    assert {data, data.parent / "test.jsonl", REPO.parent / "shared" / "gsm8k",
            Path.home() / ".cache" / "rrma" / "gsm8k"} <= declared
    # the caches of the HF datasets fallback
    assert {tmp_path / "datasets-cache" / "openai___gsm8k",
            Path.home() / ".cache" / "huggingface" / "hub" / "datasets--openai--gsm8k"} <= declared


# ----------------------------------------------------------------------------- 3. models are data


class _Payload:
    """A pickle that, once loaded, writes ``marker``: what a pytorch_model.bin can hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('unpickled')",))


def _booby_trapped(model: Path, marker: Path) -> Path:
    (model / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    return model


def test_a_pickle_payload_is_live_and_the_oracle_never_loads_it(tmp_path: Path, tiny_model: Path) -> None:
    marker = tmp_path / "marker"
    trial = tmp_path / "trial"
    model = _booby_trapped(Path(shutil.copytree(tiny_model, trial / "model")), marker)
    with (model / "pytorch_model.bin").open("rb") as fh:
        pickle.load(fh)  # control: loading the file runs its code
    assert marker.read_text() == "unpickled"
    marker.unlink()

    oracle = make_oracle("gsm8k-eval", {"data": str(FIXTURE), "model": "model", "limit": 2, "backend": "transformers"})
    out = oracle.evaluate(_ctx(trial))  # no sandbox: the refusal alone stands between the pickle and the harness
    assert out.status == Status.rejected
    assert "model rejected: model file pytorch_model.bin is a pickle" in out.feedback
    # a person's own model (an absolute path) is refused the same way
    own = make_oracle("gsm8k-eval", {"data": str(FIXTURE), "model": str(model), "limit": 2, "backend": "transformers"})
    out = own.evaluate(_ctx(tmp_path / "trial2"))
    assert out.status == Status.rejected and "pytorch_model.bin is a pickle" in out.feedback
    from oracle.gsm8k_gen import GenConfig, UnsafeModel, make_generator

    with pytest.raises(UnsafeModel, match=r"pytorch_model\.bin is a pickle"):  # the bench's in-process path
        make_generator("transformers", model, GenConfig())
    assert not marker.exists()


def _edit_json(path: Path, **changes: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _case(name: str, trial: Path, tiny_model: Path) -> str:
    """Build the trial's model directory for one case; return the model param."""
    model = trial / "model"
    if name == "link_root":  # the whole directory is a link to a real model elsewhere
        os.symlink(shutil.copytree(tiny_model, trial.parent / "elsewhere"), model)
        return "model"
    if name == "link_parent":
        os.symlink(shutil.copytree(tiny_model, trial.parent / "elsewhere" / "model").parent, trial / "out")
        return "out/model"
    shutil.copytree(tiny_model, model)
    if name == "link_inside":
        (model / "config.json").rename(trial.parent / "config.json")
        os.symlink(trial.parent / "config.json", model / "config.json")
    elif name == "torch_save":
        (model / "extra_state.pt").write_bytes(b"\x80\x04K\x01.")
    elif name == "auto_map":
        _edit_json(model / "config.json", auto_map={"AutoModelForCausalLM": "modeling_evil.EvilModel"})
    elif name == "tokenizer_auto_map":
        _edit_json(model / "tokenizer_config.json", auto_map={"AutoTokenizer": ["tok_evil.Tok", None]})
    elif name == "no_safetensors":
        (model / "model.safetensors").unlink()
    return "model"


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        pytest.param("link_root", Status.rejected, "model is a symbolic link", id="link_root"),
        pytest.param("link_parent", Status.rejected, "out/model: out is a symbolic link", id="link_parent"),
        pytest.param("link_inside", Status.rejected, "model file config.json is a symbolic link", id="link_inside"),
        pytest.param("torch_save", Status.rejected, "model file extra_state.pt is a pickle", id="torch_save"),
        pytest.param("auto_map", Status.rejected, "config.json has 'auto_map' (custom model or tokenizer code)",
                     id="auto_map"),  # would run modeling_evil.py with trust_remote_code
        pytest.param("tokenizer_auto_map", Status.rejected, "tokenizer_config.json has 'auto_map'",
                     id="tokenizer_auto_map"),
        pytest.param("no_safetensors", Status.rejected, "no *.safetensors weights", id="no_safetensors"),
    ],
)
def test_an_unsafe_model_directory_is_refused_with_one_clear_line(name: str, status: Status, message: str,
                                                                  tmp_path: Path, tiny_model: Path) -> None:
    trial = tmp_path / "t" / "work"
    trial.mkdir(parents=True)
    param = _case(name, trial, tiny_model)
    oracle = make_oracle("gsm8k-eval", {"data": str(FIXTURE), "model": param, "limit": 2, "backend": "transformers"})
    out = oracle.evaluate(_ctx(trial))
    assert out.status == status and message in out.feedback, out.feedback
    assert len(out.feedback.splitlines()) == 1


def test_a_recipe_that_leaves_a_pickle_is_rejected(tmp_path: Path, tiny_model: Path) -> None:
    """Through the recipe oracle: the recipe writes a model with a pytorch_model.bin payload."""
    marker = tmp_path / "marker"
    recipe = f"""
import pickle, shutil, sys
out = sys.argv[sys.argv.index("--output-dir") + 1]
shutil.copytree({str(tiny_model)!r}, out)
open(out + "/pytorch_model.bin", "wb").write({pickle.dumps(_Payload(marker))!r})
"""
    oracle = make_oracle("gsm8k-recipe", {"data": str(FIXTURE), "base_model": str(tiny_model), "eval_limit": 2,
                                          "eval_seconds": 10})
    trial = tmp_path / "t" / "work"
    trial.mkdir(parents=True)
    (trial / "recipe.py").write_text(recipe)
    out = oracle.evaluate(_ctx(trial, seconds=40))
    oracle.close()
    assert out.status == Status.rejected and "pytorch_model.bin is a pickle" in out.feedback, out.feedback
    assert not marker.exists()


# ----------------------------------------------------------------------------- links read by the oracle


def test_a_completions_link_to_the_answers_is_refused(tmp_path: Path) -> None:
    """A completions file that is a link to a file of gold solutions: the old read followed it."""
    from oracle.gsm8k_scoring import read_completions

    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"idx": p.idx, "completion": p.answer}) + "\n"
                            for p in load_split("test", FIXTURE)))
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "completions.jsonl").symlink_to(gold)
    oracle = make_oracle("gsm8k-eval", {"data": str(FIXTURE)})
    assert oracle.report_for(trial / "completions.jsonl").pass_at_1().mean == 1.0  # control: the old read
    assert len(read_completions(trial / "completions.jsonl")) == 25
    out = oracle.evaluate(_ctx(trial))
    assert out.status == Status.rejected and "completions.jsonl is a symbolic link" in out.feedback


def test_a_system_prompt_link_is_not_sent_to_the_endpoint(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("sk-the-harness-users-key")
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "system_prompt.txt").symlink_to(secret)
    assert (trial / "system_prompt.txt").read_text() == "sk-the-harness-users-key"  # control: the old read
    oracle = make_oracle("gsm8k-prompt", {"data": str(FIXTURE), "model": "m", "base_url": "http://127.0.0.1:9"})
    out = oracle.evaluate(_ctx(trial))  # refused before any call (the URL has no server)
    assert out.status == Status.rejected and "system_prompt.txt is a symbolic link" in out.feedback


# ----------------------------------------------------------------------------- 4. a relative --runs directory

RUN_RECIPE = """
import argparse, os
p = argparse.ArgumentParser()
for flag in ("--base-model", "--train-data", "--output-dir", "--seed"):
    p.add_argument(flag)
a = p.parse_args()
print("RAN rows=%d base=%s out_parent=%s" % (len(open(a.train_data).read().splitlines()),
      os.path.isdir(a.base_model), os.path.isdir(os.path.dirname(a.output_dir))), flush=True)
"""


def test_a_relative_runs_dir_gives_the_recipe_working_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rrma-tui --headless bench gsm8k-recipe --runs rel/dir` failed: 'can't open file
    .../trials/base-0/work/rel/dir/.../recipe.py' (a path relative to the harness's cwd, given to a
    recipe running in its workspace). The loop with a relative runs dir, as the CLI calls it."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "recipe.py").write_text(RUN_RECIPE)
    (tmp_path / "base").mkdir()
    task = load_task(REPO / "benches" / "gsm8k_recipe" / "task.yaml", {
        "oracle.params.data": str(FIXTURE), "oracle.params.download": False, "oracle.params.base_model": "base",
        "oracle.params.eval_seconds": 10, "oracle.params.recipe_args": [], "budget.trial_seconds": 40,
        "budget.max_trials": 0,
    })
    task.workspace.source = str(tmp_path / "ws")
    monkeypatch.chdir(tmp_path)
    result = start_run(task, Path("rel") / "runs", agents=[])
    base = result.state.trials["base-0"]
    # the recipe ran, read its train file, saw its base model; it wrote no model (all it was asked here)
    assert "RAN rows=30 base=True out_parent=True" in base.feedback, base.feedback
    assert "wrote no model" in base.feedback
