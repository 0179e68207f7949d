"""A run's content-addressed directory artifacts (``artifacts/<sha256>/``): their address and their check.

A checkpoint, an adapter or a model a run's training saved is a directory whose name is the sha256 of its
manifest (every file's path and sha256, as canonical JSON), written beside the files as ``MANIFEST.json``;
a ``train.checkpoint`` event that names the digest names the bytes. This module is that rule and the check
of it: :func:`check_dir` re-hashes an artifact and says what changed, for ``rrma-tui verify`` and for
anyone who loads one. It sits in the log room, beside the blobs' store, because verifying a run reads it;
the writer that copies a trainer's directory in (rrma/train/artifacts.py ``store_dir``) sits above and
uses the same address.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
