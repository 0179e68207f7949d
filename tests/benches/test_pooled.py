"""``python -m benches.coq.pooled``: the pooled figure of several bench runs, per setting, and where the theorems
fall (folder, CoqHammer's preload, the original's length, when the proofs were found), from the runs' records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benches.coq import pooled

W = "/usr/lib/ocaml/coq/theories"


def _run(root: Path, name: str, setting: str, files: dict[str, tuple[str, int, int]],
         theorems: dict[str, tuple[bool, float, str]], dropped: tuple[str, ...] = (),
         file_of: dict[str, str] | None = None) -> Path:
    """A finished run as `bench coq` writes it: ``files``: basename -> (path, solved, total); ``theorems``: name ->
    (solved, seconds, original proof); ``file_of``: each theorem's file (reports since round thirteen say it)."""
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "task": {"oracle": {"params": {"sources": [path for path, _, _ in files.values()]}}},
        "oracle": {"preload_dropped": list(dropped)}}), encoding="utf-8")
    (run / "bench_report.json").write_text(json.dumps({
        "setting": setting,
        "solved": sum(s for _, s, _ in files.values()), "total": sum(t for _, _, t in files.values()),
        "by_file": {base: {"solved": s, "total": t} for base, (_, s, t) in files.items()},
        "theorems": {n: {"solved": ok, "seconds": sec, **({"file": file_of[n]} if file_of else {})}
                     for n, (ok, sec, _) in theorems.items()},
        "originals": {n: orig for n, (_, _, orig) in theorems.items()},
        "proofs": {n: "auto." for n, (ok, _, _) in theorems.items() if ok}}), encoding="utf-8")
    return run


def test_runs_pool_per_setting_and_by_folder_preload_length_and_time(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    short, long_ = "Proof. auto. Qed.", "Proof.\n  intros. destruct n. simpl. auto.\n  lia. Qed."
    _run(tmp_path / "runs", "a", "rediscover",
         {"R_sqrt.v": (f"{W}/Reals/R_sqrt.v", 1, 2), "NZMul.v": (f"{W}/Numbers/NatInt/NZMul.v", 2, 2)},
         {"s1": (True, 0.5, short), "s2": (True, 3.0, short), "s3": (True, 12.0, long_), "s4": (False, 25.0, long_)},
         dropped=("NZMul.v",))
    _run(tmp_path / "runs", "b", "rediscover", {"Mine.v": ("/home/me/proj/Mine.v", 0, 3)},
         {"m1": (False, 25.0, short), "m2": (False, 25.0, long_), "m3": (False, 25.0, long_)})
    lib = _run(tmp_path, "lib", "library", {"R_sqrt.v": (f"{W}/Reals/R_sqrt.v", 2, 2)},
               {"s1": (True, 0.4, short), "s4": (True, 20.0, long_)})

    got = pooled.pool(pooled.run_dirs([tmp_path / "runs", lib]))
    assert [(name, setting, str(figure)) for name, setting, figure, _ in got.runs] == [
        ("a", "rediscover", "3/4 (75.0%)"), ("b", "rediscover", "0/3 (0.0%)"), ("lib", "library", "2/2 (100.0%)")]
    assert {k: str(v) for k, v in got.by_setting.items()} == {"rediscover": "3/7 (42.9%)", "library": "2/2 (100.0%)"}
    assert {k: (v.solved, v.total) for k, v in got.by_folder.items()} == {"Reals": (3, 4), "Numbers": (2, 2),
                                                                            "proj": (0, 3)}
    assert {k: (v.solved, v.total) for k, v in got.by_preload.items()} == {"dropped": (2, 2), "kept": (3, 7)}
    assert {k: (v.solved, v.total) for k, v in got.by_length.items()} == {"1": (3, 4), "5-8": (2, 5)}
    assert sorted(got.found_seconds) == [0.4, 0.5, 3.0, 12.0, 20.0]

    assert pooled.main([str(tmp_path / "runs"), str(lib)]) == 0
    out = capsys.readouterr().out
    assert "pooled, rediscover: 3/7 (42.9%) over 2 run(s)" in out
    assert "pooled, library: 2/2 (100.0%) over 1 run(s)" in out
    assert "settings are pooled apart" in out
    assert "proofs found within (of 5): 1 s 40%, 2 s 40%, 5 s 60%, 10 s 60%, 15 s 80%, 20 s 100%" in out


def test_sentences_counts_the_original_without_its_wrapper() -> None:
    assert pooled.sentences("Proof. reflexivity. Qed.") == 1
    assert pooled.sentences("Proof using A dec.\n  induction l. - auto.\n  - simpl; lia.\nDefined.") == 3
    assert pooled.length_band(3) == "3-4" and pooled.length_band(17) == "17+"
    assert pooled.folder_of(f"{W}/Numbers/Integer/Abstract/ZMulOrder.v") == "Numbers"
    assert pooled.folder_of("/x/theories/Top.v") == "theories"  # a file right under theories: its folder


def test_a_path_without_runs_or_with_a_torn_report_is_named(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert pooled.main([str(tmp_path / "empty")]) == 2
    assert "no bench_report.json" in capsys.readouterr().err
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "bench_report.json").write_text('{"solved": 3, "tot', encoding="utf-8")
    assert pooled.main([str(torn)]) == 2
    err = capsys.readouterr().err
    assert "bench_report.json: cannot be read" in err and "torn" in err


def test_an_excluded_file_leaves_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file a round tuned on (round six's `Reals/R_sqrt.v`, drawn again into out-of-sample 21) is in-sample: with
    ``--exclude`` it leaves the pooled figure, the folders and, where the report names each theorem's file, the
    length and time breakdowns; a report that does not is counted and said."""
    short = "Proof. auto. Qed."
    files = {"R_sqrt.v": (f"{W}/Reals/R_sqrt.v", 2, 2), "QExtra.v": (f"{W}/Reals/Cauchy/QExtra.v", 0, 1)}
    theorems = {"r1": (True, 1.0, short), "r2": (True, 1.0, short), "q1": (False, 25.0, short)}
    _run(tmp_path, "new", "rediscover", files, theorems,
         file_of={"r1": "R_sqrt.v", "r2": "R_sqrt.v", "q1": "QExtra.v"})
    _run(tmp_path, "old", "rediscover", files, theorems)

    whole = pooled.pool(pooled.run_dirs([tmp_path / "new"]))
    assert str(whole.by_setting["rediscover"]) == "2/3 (66.7%)" and whole.by_length["1"].total == 3
    got = pooled.pool(pooled.run_dirs([tmp_path / "new"]), exclude=["Reals/R_sqrt.v"])
    assert str(got.by_setting["rediscover"]) == "0/1 (0.0%)"
    assert (got.excluded.solved, got.excluded.total) == (2, 2)
    assert {k: (v.solved, v.total) for k, v in got.by_folder.items()} == {"Reals": (0, 1)}
    assert (got.by_length["1"].solved, got.by_length["1"].total) == (0, 1) and got.found_seconds == []
    assert got.unattributed == 0
    assert pooled.pool(pooled.run_dirs([tmp_path / "new"]), exclude=["Cauchy/R_sqrt.v"]).excluded.total == 0

    assert pooled.main([str(tmp_path / "old"), "--exclude", "R_sqrt.v"]) == 0
    out = capsys.readouterr().out
    assert "pooled, rediscover: 0/1 (0.0%)" in out
    assert "left out (--exclude): 2/2 (100.0%); 1 run(s) do not say each theorem's file" in out
