"""Storing a trainer's directory as a content-addressed artifact of the run (``artifacts/<sha256>/``).

A trainer saves a checkpoint or an adapter as a directory; :func:`store_dir` moves a copy into the run as
``artifacts/<digest>/``, where the digest is the sha256 of the directory's manifest (rrma/log/artifacts.py:
the address and its check, :func:`check_dir`, which verify reads too), and writes the manifest beside the
files (``MANIFEST.json``). The same content always lands at the same path. Files are copied, never linked
(a trainer that rewrites a file in place would otherwise change the artifact), and an artifact appears
whole or not at all.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rrma.contain import files
from rrma.log.artifacts import ARTIFACTS, MANIFEST, ArtifactError, digest_of, manifest_of

# the check is rrma/log/artifacts.py's (check_dir); this module only writes
__all__ = ["store_dir"]


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
