"""The trial diff (rrma/diff.py) on its own: blobs in a bare run store, no log, no fold, no terminal."""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest

from rrma import diff
from rrma.diff import ADD, CTX, DEL, HUNK, NOTE, TrialFiles, compare_trials, diff_text, unified_lines
from rrma.log.state import TrialRecord
from rrma.log.store import RunStore


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "run", create=True)


def trial(store: RunStore, trial_id: str, workspace: dict[str, str], proof: tuple[str, str] | None = None) -> TrialFiles:
    """A trial whose manifest names ``workspace`` (path -> text), and whose proposal holds ``proof`` (theorem, proof)."""
    rec = TrialRecord(trial_id, None, "alice")
    rec.manifest_blob = store.put_json_blob({path: store.put_blob(text) for path, text in workspace.items()})
    proposal: dict[str, object] = {"hypothesis": f"{trial_id} hypothesis", "edits": []}
    if proof is not None:
        proposal["theorem"], proposal["proof"] = proof
    rec.proposal_blob = store.put_json_blob(proposal)
    return TrialFiles.of(rec)


def test_compare_trials_diffs_proofs_and_notes_binary_files(store: RunStore) -> None:
    p1 = trial(store, "p1", {"a.txt": "same\n", "bin": "x\x00y"}, ("add_comm", "by simp"))
    p2 = trial(store, "p2", {"a.txt": "same\n", "bin": "x\x00z"}, ("add_comm", "by omega\n  done"))
    result = compare_trials(store.dir, p1, p2)
    text = diff_text(result.lines)
    assert "a.txt" not in text  # the same blob: skipped unread
    assert "p1/bin vs p2/bin" in text and "binary file" in text
    assert "--- p1/proof of add_comm" in text and "-by simp" in text and "+by omega" in text
    assert result.files_changed == 2 and (result.added, result.removed) == (2, 1)


def test_compare_trials_cuts_a_long_diff_and_says_so(store: RunStore) -> None:
    big_a = trial(store, "big-a", {"f.py": "".join(f"a{i}\n" for i in range(10_000))})
    big_b = trial(store, "big-b", {"f.py": "".join(f"b{i}\n" for i in range(10_000))})
    result = compare_trials(store.dir, big_a, big_b, max_lines=500)
    assert result.truncated and len(result.lines) == 501
    assert result.lines[-1][0] == NOTE and "cut here at 500 lines" in result.lines[-1][1]
    assert result.summary().startswith("at least 1 file differs")


def test_compare_trials_never_passes_terminal_escapes_through(store: RunStore) -> None:
    result = compare_trials(store.dir, trial(store, "e1", {"x": "plain\n"}), trial(store, "e2", {"x": "\x1b[2Jboom\tend\n"}))
    added = [text for kind, text in result.lines if kind == ADD]
    assert added == ["+�[2Jboom   end"]  # ESC replaced, the tab expanded


def test_a_file_over_the_size_limit_is_named_not_diffed(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diff, "MAX_FILE_BYTES", 10)
    result = compare_trials(store.dir, trial(store, "s1", {"f": "short\n"}), trial(store, "s2", {"f": "x" * 11 + "\n"}))
    assert result.files_changed == 1 and (result.added, result.removed) == (0, 0)
    assert "s1/f vs s2/f" in diff_text(result.lines) and "too large to diff here" in diff_text(result.lines)


def test_a_trial_without_a_manifest_is_diffed_from_its_edits(store: RunStore) -> None:
    rec = TrialRecord("e1", None, "alice", edits=[{"path": "f", "blob": store.put_blob("old\n")}])
    result = compare_trials(store.dir, TrialFiles.of(rec), trial(store, "e2", {"f": "new\n"}))
    assert [line for line in result.lines if line[0] in (ADD, DEL)] == [(DEL, "-old"), (ADD, "+new")]


def test_an_unreadable_manifest_is_noted_not_raised(store: RunStore) -> None:
    broken = TrialFiles("b1", store.put_blob("not json"), (), None)
    result = compare_trials(store.dir, broken, trial(store, "b2", {"f": "x\n"}))
    assert result.lines[0][0] == NOTE and "b1: its workspace manifest cannot be read" in result.lines[0][1]
    assert "+++ b2/f" in diff_text(result.lines)  # the readable side is still shown, as added


def apply_diff(a: list[str], lines: list[tuple[str, str]]) -> list[str]:
    """Rebuild the right side from the left one and a unified diff (to check a diff is right)."""
    b: list[str] = []
    i = 0
    for kind, text in lines:
        if kind == HUNK:
            start, _, length = text.split()[1][1:].partition(",")
            first = int(start) - (0 if length == "0" else 1)  # "-0,0" and "-5,0" name the line before
            b.extend(a[i:first])
            i = first
        elif kind == CTX:
            b.append(text[1:])
            i += 1
        elif kind == DEL:
            i += 1
        elif kind == ADD:
            b.append(text[1:])
    return b + a[i:]


def mutated(rng: random.Random, lines: list[str]) -> list[str]:
    out = list(lines)
    for _ in range(rng.randrange(0, 30)):
        at, roll = rng.randrange(len(out) + 1), rng.random()
        if roll < 0.3 and out:
            del out[min(at, len(out) - 1)]
        elif roll < 0.6:
            out.insert(at, f"new {rng.random():.3f}")
        elif out:
            out[min(at, len(out) - 1)] = f"changed {rng.random():.3f}"
    return out


@pytest.mark.parametrize("seed", range(5))
def test_unified_lines_is_difflib_for_small_files_and_right_for_big_ones(seed: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        a = [f"line {rng.randrange(40)}" for _ in range(rng.randrange(0, 80))]
        b = mutated(rng, a)
        ours = list(unified_lines(a, b, "x", "y"))
        assert [text for _, text in ours] == list(difflib.unified_diff(a, b, "x", "y", lineterm=""))
        monkeypatch.setattr(diff, "PATIENCE_ABOVE", 0)  # the anchored diff, on the same input
        assert apply_diff(a, list(unified_lines(a, b, "x", "y"))) == b
        monkeypatch.setattr(diff, "PATIENCE_ABOVE", 2_000)


def test_a_10k_line_diff_with_thousands_of_changes_is_exact() -> None:
    """How fast it is, against difflib, is benches/perf/bench_diff.py's figure, not a timed test."""
    a = [f"row {i} = {i * 7 % 1000}" for i in range(10_000)]
    b = [f"row {i} = {i * 7 % 1000 + (i % 3 == 0)}" for i in range(10_000)]  # every third line changed
    lines = list(unified_lines(a, b, "x", "y"))
    assert sum(kind == ADD for kind, _ in lines) == 3334 and apply_diff(a, lines) == b


def test_texts_that_differ_only_in_the_last_newline_say_so(store: RunStore) -> None:
    result = compare_trials(store.dir, trial(store, "n1", {"f": "a\nb\n"}), trial(store, "n2", {"f": "a\nb"}))
    assert result.files_changed == 1 and "only line endings or the final newline differ" in diff_text(result.lines)


def test_trials_with_the_same_workspace_say_so(store: RunStore) -> None:
    result = compare_trials(store.dir, trial(store, "s1", {"f": "x\n"}), trial(store, "s2", {"f": "x\n"}))
    assert result.files_changed == 0 and result.summary() == "no difference"
    assert result.lines == [(NOTE, "the same workspace: every file has the same content")]
