"""``python -m benches.coq.stdlib_sweep``: every file's last theorem must start for the agent's session and for
the checker; a file where either cannot start is named, with Coq's error, and the sweep exits 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from needs import needs_coq

from benches.coq import stdlib_sweep

GOOD = "Lemma one : 1 = 1.\nProof. reflexivity. Qed.\nLemma two : 2 = 2.\nProof. reflexivity. Qed.\n"
# the file's own proof of `first` fails, so nothing after it compiles, for the checker as for the agent
# (a defect of the harness would show the same way: a context that does not compile)
BROKEN = ("Lemma first : 1 = 1.\nProof. reflexivity. Qed.\nDefinition oops : nat := true.\n"
          "Lemma last : 2 = 2.\nProof. reflexivity. Qed.\n")
# the checker sees the human proofs, the agent does not: a kept definition that computes with an earlier
# lemma's proof (`Defined`) starts for the checker only
OPAQUE = ("Lemma small : {n : nat | n = 0}.\nProof. exists 0. reflexivity. Defined.\n"
          "Definition zero : proj1_sig small = 0 := eq_refl.\nLemma last : 2 = 2.\nProof. reflexivity. Qed.\n")


@needs_coq
def test_the_sweep_names_the_files_that_cannot_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, text in (("Good.v", GOOD), ("Broken.v", BROKEN), ("Opaque.v", OPAQUE)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    code = stdlib_sweep.main(["--root", str(tmp_path), "--jobs", "1", "--no-hammer"])
    out = capsys.readouterr().out
    assert code == 1
    assert "Good.v" not in out
    assert "Broken.v: agent cannot start last (2 theorems): the context does not compile" in out
    assert "Broken.v: checker cannot start last: the context does not compile" in out
    assert "Opaque.v: agent cannot start last" in out and "Opaque.v: checker" not in out
    assert "3 files, 3 with theorems (6 theorems); 2 cannot start (4 theorems in them): agent 2, checker 1" in out


@needs_coq
def test_a_sweep_where_everything_starts_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Good.v").write_text(GOOD, encoding="utf-8")
    assert stdlib_sweep.main(["--root", str(tmp_path), "--jobs", "1", "--no-hammer", "--cold"]) == 0
    assert "0 cannot start" in capsys.readouterr().out
    assert stdlib_sweep.main(["--root", str(tmp_path), "Nothing"]) == 2
