"""SQLite export: one row per trial matching results.tsv, idempotent re-export, FTS, keys."""

from __future__ import annotations

import csv
import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from rrma.log.export import EXPORT_SCHEMA_VERSION, ExportError, export_runs
from rrma.log.store import RunStore

FIXTURE = Path(__file__).parent.parent / "fixtures" / "logs" / "v1_demo"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "runs" / "demo-run"
    shutil.copytree(FIXTURE, dest)
    return dest


def _dump(db_path: Path) -> str:
    conn = sqlite3.connect(db_path)
    text = "\n".join(conn.iterdump())
    conn.close()
    return hashlib.sha256(text.encode()).hexdigest()


def test_trials_match_results_tsv(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    [res] = export_runs([run_dir], out)
    assert not res.skipped
    db = sqlite_utils.Database(out)
    rows = {r["trial_id"]: r for r in db["trials"].rows}
    with open(run_dir / "results.tsv") as fh:
        tsv = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == len(tsv)
    for line in tsv:
        row = rows[line["trial"]]
        assert row["status"] == line["status"]
        assert row["agent"] == line["agent"]
        assert f"{row['score']:.6g}" == line["score"]
    events = RunStore(run_dir).scan().events
    assert db["events"].count == len(events)
    assert db["runs"].get("demo-run")["events"] == len(events)
    assert {r["key"]: r["value"] for r in db["meta"].rows}["schema_version"] == str(EXPORT_SCHEMA_VERSION)
    fks = {fk.other_table for fk in db["trials"].foreign_keys}
    assert fks == {"runs"}
    assert any(idx.columns == ["status"] for idx in db["trials"].indexes)
    hits = list(db["turns"].search("Random search"))
    assert hits and all("Random search" in h["text"] for h in hits)


def test_reexport_is_a_no_op_and_runs_share_a_file(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    export_runs([run_dir], out)
    digest = _dump(out)
    [again] = export_runs([run_dir], out)
    assert again.skipped and _dump(out) == digest
    other = run_dir.parent / "second-run"
    shutil.copytree(run_dir, other)
    results = export_runs([run_dir, other], out)
    assert [r.skipped for r in results] == [True, False]
    db = sqlite_utils.Database(out)
    assert db["runs"].count == 2
    assert db.execute("select count(distinct run_id) from trials").fetchone()[0] == 2


def test_a_grown_run_is_replaced(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    export_runs([run_dir], out)
    RunStore(run_dir).append("review", "human:bob", {"trial_id": "t0001", "decision": "flag", "reviewer": "bob",
                                                      "note": "look again"})
    [res] = export_runs([run_dir], out)
    assert not res.skipped
    db = sqlite_utils.Database(out)
    assert [r["decision"] for r in db["reviews"].rows] == ["flag"]
    assert db["trials"].get(("demo-run", "t0001"))["review_status"] == "flagged"
    assert db.execute("select count(*) from events where run_id='demo-run'").fetchone()[0] == db["runs"].get("demo-run")["events"]


def test_other_schema_version_is_refused(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.db"
    export_runs([run_dir], out)
    db = sqlite_utils.Database(out)
    db["meta"].upsert({"key": "schema_version", "value": "999"}, pk="key")
    db.close()
    with pytest.raises(ExportError, match="schema version 999"):
        export_runs([run_dir], out)


def test_export_opens_in_datasette(run_dir: Path, tmp_path: Path, in_ci: bool) -> None:
    import importlib.util
    import json
    import subprocess
    import sys

    if importlib.util.find_spec("datasette") is None:  # python -m: found wherever the dev extra is, PATH or not
        why = f"datasette is not installed for {sys.executable} (pip install -e '.[dev]')"
        if in_ci:  # CI installs the dev extra
            pytest.fail(why)
        pytest.skip(why)
    datasette = [sys.executable, "-m", "datasette"]
    out = tmp_path / "runs.db"
    export_runs([run_dir], out)
    rows = subprocess.run([*datasette, str(out), "--get", "/runs/trials.json?_shape=array&status=ok"],
                          capture_output=True, text=True, timeout=120, check=True)
    trials = json.loads(rows.stdout)
    assert trials and all(t["status"] == "ok" and t["run_id"] == "demo-run" for t in trials)
    found = subprocess.run([*datasette, str(out), "--get", "/runs/turns.json?_search=random&_shape=array"],
                           capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(found.stdout)  # full-text search through datasette's own FTS support
