"""A run's content-addressed artifacts (rrma/log/artifacts.py) on their own: the address and its check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rrma.log.artifacts import ARTIFACTS, MANIFEST, ArtifactError, check_dir, digest_of, manifest_of
from rrma.train.artifacts import store_dir


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, str]:
    """A run directory holding one artifact (a trainer's directory of two files), and its digest."""
    src = tmp_path / "checkpoint"
    (src / "sub").mkdir(parents=True)
    (src / "weights.bin").write_bytes(b"\x00\x01\x02weights")
    (src / "sub" / "config.json").write_text('{"rank": 8}')
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    digest, rel = store_dir(run_dir, src)
    assert rel == f"{ARTIFACTS}/{digest}"
    return run_dir, digest


def test_an_intact_artifact_is_its_digest(saved: tuple[Path, str]) -> None:
    run_dir, digest = saved
    target = check_dir(run_dir, digest)
    assert target == run_dir / ARTIFACTS / digest and (target / MANIFEST).is_file()
    assert digest_of(manifest_of(target)) == digest  # the manifest beside the files is not part of the address


@pytest.mark.parametrize("change", [
    "flip",  # one byte of the weights, rewritten in place
    "add",  # a file the manifest does not name
    "remove",  # a file the manifest names, gone
])
def test_a_changed_artifact_is_refused_and_named(saved: tuple[Path, str], change: str) -> None:
    run_dir, digest = saved
    target = run_dir / ARTIFACTS / digest
    if change == "flip":
        with (target / "weights.bin").open("r+b") as fh:
            fh.seek(-1, os.SEEK_END)
            fh.write(b"X")
        changed = "weights.bin"
    elif change == "add":
        (target / "extra.txt").write_text("slipped in")
        changed = "extra.txt"
    else:
        (target / "sub" / "config.json").unlink()
        changed = "sub/config.json"
    with pytest.raises(ArtifactError, match=rf"artifact {digest[:12]} does not match its digest \(changed: {changed}\)"):
        check_dir(run_dir, digest)


def test_a_missing_artifact_and_a_link_are_refused(saved: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, digest = saved
    with pytest.raises(ArtifactError, match=f"artifact {'0' * 12} is missing"):
        check_dir(run_dir, "0" * 64)
    (run_dir / ARTIFACTS / digest / "link").symlink_to(tmp_path / "checkpoint" / "weights.bin")
    with pytest.raises(ArtifactError, match="link is a symbolic link"):
        check_dir(run_dir, digest)
