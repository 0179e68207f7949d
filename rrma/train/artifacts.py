"""Content-addressed directory artifacts of a run: checkpoints, adapters and models (``artifacts/<sha256>/``).

A trainer saves a checkpoint or an adapter as a directory; :func:`store_dir` moves a copy into the run as
``artifacts/<digest>/``, where the digest is the sha256 of the directory's manifest (every file's path
and sha256, canonical JSON), and writes the manifest beside the files (``MANIFEST.json``). The same
content always lands at the same path, so a ``train.checkpoint`` event that names the digest names the
bytes; :func:`check_dir` re-hashes an artifact and says what changed. Files are copied, never linked
(a trainer that rewrites a file in place would otherwise change the artifact).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from rrma.contain import files

ARTIFACTS = "artifacts"
MANIFEST = "MANIFEST.json"


class ArtifactError(Exception):
    """An artifact is missing or its files no longer match its manifest."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_of(src: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every regular file under ``src`` (links are refused)."""
    out: dict[str, str] = {}
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_symlink():
            raise ArtifactError(f"{src}: {rel} is a symbolic link; an artifact holds regular files only")
        if path.is_file() and rel != MANIFEST:
            out[rel] = _sha256(path)
    return out


def digest_of(manifest: dict[str, str]) -> str:
    blob = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def store_dir(run_dir: Path, src: Path) -> tuple[str, str]:
    """Copy directory ``src`` into the run's artifacts; returns (digest, path relative to the run dir)."""
    src = Path(src)
    if not src.is_dir():
        raise ArtifactError(f"{src}: not a directory")
    manifest = manifest_of(src)
    digest = digest_of(manifest)
    rel = f"{ARTIFACTS}/{digest}"
    target = Path(run_dir) / rel
    if target.is_dir():
        return digest, rel
    staging = Path(run_dir) / ARTIFACTS / f".{digest}.partial"
    files.remove_tree(staging)
    for name in manifest:
        dest = staging / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, dest)  # a copy, not a link: a trainer rewriting its file must not change this one
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(staging, target)  # whole or absent: a reader never sees half an artifact
    return digest, rel


def check_dir(run_dir: Path, digest: str) -> Path:
    """The artifact's directory, after checking its files against its digest (ArtifactError otherwise)."""
    target = Path(run_dir) / ARTIFACTS / digest
    if not target.is_dir():
        raise ArtifactError(f"{run_dir}: artifact {digest[:12]} is missing ({target})")
    found = manifest_of(target)
    if digest_of(found) != digest:
        try:
            recorded = json.loads((target / MANIFEST).read_text())
        except (OSError, ValueError):
            recorded = {}
        changed = sorted(k for k in set(found) | set(recorded) if found.get(k) != recorded.get(k))
        raise ArtifactError(f"{run_dir}: artifact {digest[:12]} does not match its digest"
                            + (f" (changed: {', '.join(changed[:5])})" if changed else ""))
    return target
