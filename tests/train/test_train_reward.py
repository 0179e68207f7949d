"""The training reward (rrma/train/reward.py) and the policy's reply format (rrma/train/prompt.py).

The reward is checked on recorded outcomes (the trials of a finished demo run, tests/fixtures/logs/v1_demo,
as the log holds them) against the formula of docs/training.md, and on hand-built inputs for each of its
branches; the reply format on its errors and on a round trip (the change -> its reply text -> the edits
parsed back -> the same files).
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path

import pytest

from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.task import RewardConfig, TaskConfig, load_task, task_from_dict
from rrma.train.prompt import ReplyError, constants, messages, parse_reply, reply_text
from rrma.train.reward import NOVELTY_WINDOW, Reward, RewardInputs, diff_text, novelty, reward
from rrma.trial import FileEdit

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "benches" / "demo" / "task.yaml"
RECORDED = REPO / "tests" / "fixtures" / "logs" / "v1_demo"  # a finished demo run (read only)
WORKSPACE = {p.name: p.read_text() for p in (REPO / "benches" / "demo" / "workspace").iterdir() if p.suffix == ".py"}


def config(**fields: object) -> RewardConfig:
    return RewardConfig.model_validate(fields)


def ok(score: float | None = 9.0, *, parent: float | None = 10.0, baseline: float | None = 12.0,
       sigma: float | None = 1.0, **more: object) -> RewardInputs:
    return RewardInputs(status=str(more.pop("status", "ok")), score=score, parent_score=parent, baseline=baseline,
                        sigma=sigma, **more)  # type: ignore[arg-type]


def value(inputs: RewardInputs, direction: str = "minimize", **settings: object) -> float:
    return reward(inputs, config(**settings), direction=direction).value


# ----------------------------------------------------------------------------- recorded outcomes


@pytest.fixture(scope="module")
def recorded() -> RunState:
    return RunState.fold(RunStore(RECORDED).scan().events)


def test_the_rewards_of_a_recorded_run_follow_the_formula(recorded: RunState) -> None:
    state = recorded
    task = task_from_dict(state.task)
    assert task.reward == RewardConfig()  # a log from before the reward section: the defaults
    trials = state.agent_trials()
    assert [t.status for t in trials] == ["ok", "ok", "ok"] and state.sigma and state.baseline_mean
    better = worse = 0
    for rec in trials:
        parent = state.trials[rec.parent or ""]
        assert parent.score is not None and rec.score is not None
        inputs = RewardInputs(status=rec.status, score=rec.score, parent_score=parent.score,
                              baseline=state.baseline_mean, sigma=state.sigma, floor=state.floor, cached=rec.cached,
                              seconds=rec.seconds, peak_rss_mb=rec.metrics["peak_rss_mb"])
        # the defaults: the improvement over the parent in sigmas, clipped to +-5
        given = reward(inputs, task.reward, direction="minimize")
        want = max(-5.0, min(5.0, (parent.score - rec.score) / state.sigma))
        assert given.value == pytest.approx(want, abs=1e-12) and given.novelty is None
        assert ("clipped" in given.why) == (abs((parent.score - rec.score) / state.sigma) > 5)
        better += given.value > 0
        worse += given.value < 0
        assert reward(inputs, task.reward, direction="minimize") == given  # the same outcome, the same reward
        # the baseline as reference, a relative scale, and the time and memory costs
        settings = config(reference="baseline", scale="relative", clip=1.0, efficiency=0.1, memory=0.2)
        given = reward(inputs, settings, direction="minimize", trial_seconds=task.budget.trial_seconds,
                       trial_memory_mb=task.budget.trial_memory_mb)
        relative = (state.baseline_mean - rec.score) / abs(state.baseline_mean)
        want = (max(-1.0, min(1.0, relative)) - 0.1 * rec.seconds / task.budget.trial_seconds
                - 0.2 * rec.metrics["peak_rss_mb"] / task.budget.trial_memory_mb)
        assert given.value == pytest.approx(want, abs=1e-12)
        assert "over the baseline / |reference|" in given.why and "time" in given.why and "memory" in given.why
        # the same numbers in a task that maximizes: the sign turns over
        flipped = reward(inputs, task.reward, direction="maximize").value
        assert flipped == pytest.approx(-max(-5.0, min(5.0, (parent.score - rec.score) / state.sigma)), abs=1e-12)
    assert better == 2 and worse == 1  # t0001 and t0002 improved on their parent, t0003 did not


# ----------------------------------------------------------------------------- each branch


@pytest.mark.parametrize("status", ["crash", "timeout", "oom", "disk", "aborted", "proposed", "running"])
def test_a_trial_that_did_not_finish_well_gets_the_crash_value(status: str) -> None:
    given = reward(ok(status=status), config(crash=-1.0, invalid=-0.5, novelty=1.0), direction="minimize")
    assert given == Reward(-1.0, f"{status}: reward.crash")  # no novelty bonus either


@pytest.mark.parametrize("status", ["invalid", "rejected"])
def test_a_refused_edit_or_proof_gets_the_invalid_value(status: str) -> None:
    assert reward(ok(status=status, cached=True), config(crash=-1.0, invalid=-0.5, duplicate=-0.2),
                  direction="minimize") == Reward(-0.5, f"{status}: reward.invalid")


@pytest.mark.parametrize("score", [None, math.nan, math.inf])
def test_ok_without_a_finite_score_is_a_crash(score: float | None) -> None:
    assert reward(ok(score), config(crash=-0.7), direction="minimize") == Reward(-0.7, "no finite score: reward.crash")


def test_a_duplicate_gets_its_value_or_is_scored_like_any_other() -> None:
    fresh = value(ok(8.0))
    assert fresh == 2.0
    assert reward(ok(8.0, cached=True), config(duplicate=-0.2), direction="minimize") == Reward(
        -0.2, "a repeat of an earlier trial: reward.duplicate")
    assert value(ok(8.0, cached=True)) == 0.0  # the default: a repeat earns nothing
    assert value(ok(8.0, cached=True), duplicate=None) == fresh  # off: scored like any other


def test_the_reference_is_the_parent_or_the_baseline() -> None:
    assert value(ok(9.0, parent=10.0, baseline=12.0)) == 1.0
    assert value(ok(9.0, parent=10.0, baseline=12.0), reference="baseline") == 3.0
    assert value(ok(9.0, parent=None, baseline=12.0)) == 3.0  # a parent that never scored: the baseline
    assert value(ok(11.0, parent=10.0, baseline=12.0)) == -1.0  # worse than the parent
    assert value(ok(11.0, parent=10.0, baseline=12.0), direction="maximize") == 1.0
    assert reward(ok(9.0, parent=None, baseline=None), config(), direction="minimize") == Reward(
        0.0, "no reference score (no baseline): 0")


def test_the_unit_is_sigma_the_floor_or_the_reference() -> None:
    assert value(ok(9.0, sigma=0.5)) == 2.0
    assert value(ok(9.0, sigma=0.5), scale="relative") == pytest.approx(0.1)
    given = reward(ok(9.0, sigma=0.0, floor=0.25), config(), direction="minimize")
    assert given.value == 4.0 and "/ floor" in given.why  # sigma 0 (a deterministic oracle): the floor
    given = reward(ok(9.5, sigma=None, floor=None), config(), direction="minimize")
    assert given.value == 0.5 and "no noise estimate" in given.why
    assert value(ok(-1.0, parent=0.0), scale="relative") == 1.0  # |reference| 0: unit 1


def test_the_scaled_improvement_is_clipped_both_ways() -> None:
    given = reward(ok(0.0, parent=100.0), config(clip=3.0), direction="minimize")
    assert given.value == 3.0 and "clipped to +3" in given.why
    assert value(ok(200.0, parent=100.0), clip=3.0) == -3.0
    assert value(ok(99.0, parent=100.0), clip=3.0) == 1.0  # inside the clip: as it is
    with pytest.raises(ValueError):
        config(clip=0)


def test_the_efficiency_and_memory_costs() -> None:
    base = value(ok(9.0))
    inputs = ok(9.0, seconds=10.0, peak_rss_mb=256.0)
    given = reward(inputs, config(efficiency=0.5, memory=0.1), direction="minimize", trial_seconds=20.0,
                   trial_memory_mb=512.0)
    assert given.value == pytest.approx(base - 0.25 - 0.05) and "-0.25 time" in given.why and "-0.05 memory" in given.why
    assert reward(inputs, config(efficiency=0.5, memory=0.1), direction="minimize").value == base  # no budgets given
    no_rss = ok(9.0, seconds=10.0, peak_rss_mb=None)
    assert reward(no_rss, config(memory=0.1), direction="minimize", trial_memory_mb=512.0).value == base
    with pytest.raises(ValueError):
        config(efficiency=-1.0)


def test_the_novelty_bonus_is_the_distance_to_the_nearest_earlier_diff() -> None:
    diff = diff_text(WORKSPACE, {**WORKSPACE, "objective.py": WORKSPACE["objective.py"].replace("X = 0.0", "X = 1.5")},
                     ["objective.py"])
    near = diff.replace("1.5", "1.6")
    far = "-Y = 0.0\n+Y = -0.8"
    base = value(ok(9.0))
    settings = config(novelty=0.4)
    first = reward(ok(9.0, diff=diff), settings, direction="minimize", earlier_diffs=[])
    assert first.novelty == 1.0 and first.value == pytest.approx(base + 0.4) and "+0.4 novelty" in first.why
    again = reward(ok(9.0, diff=diff), settings, direction="minimize", earlier_diffs=[far, diff])
    assert again.novelty == 0.0 and again.value == base
    close = reward(ok(9.0, diff=diff), settings, direction="minimize", earlier_diffs=[far, near])
    ratio = max(difflib.SequenceMatcher(None, diff, other, autojunk=False).ratio() for other in (far, near))
    assert close.novelty is not None and close.novelty == pytest.approx(1.0 - ratio) and 0.0 < close.novelty < 0.2
    assert close.value == pytest.approx(base + 0.4 * (1.0 - ratio))
    # only the most recent NOVELTY_WINDOW diffs are compared
    assert novelty(diff, [diff] + [far] * NOVELTY_WINDOW) == pytest.approx(novelty(diff, [far]))
    assert novelty(diff, [diff] + [far] * (NOVELTY_WINDOW - 1)) == 0.0
    assert reward(ok(9.0, diff=diff), config(), direction="minimize", earlier_diffs=[diff]).novelty is None  # off


def test_diff_text_covers_the_given_paths_only() -> None:
    before = {"a.py": "A = 1\n", "b.py": "B = 1\n", "c.py": "C = 1\n"}
    after = {"a.py": "A = 2\n", "b.py": "B = 1\n", "c.py": "C = 3\n", "d.py": "D = 4\n"}
    text = diff_text(before, after, ["d.py", "a.py", "b.py"])
    assert text.splitlines() == ["--- a.py", "+++ a.py", "@@ -1 +1 @@", "-A = 1", "+A = 2",
                                 "--- d.py", "+++ d.py", "@@ -0,0 +1 @@", "+D = 4"]
    assert diff_text(before, before, before) == ""


# ----------------------------------------------------------------------------- the reply format


@pytest.fixture(scope="module")
def demo() -> TaskConfig:
    return load_task(DEMO)


@pytest.fixture(scope="module")
def whole_files(demo: TaskConfig) -> TaskConfig:
    """The demo task without its search space: replies are whole files."""
    return load_task(DEMO, {"search_space": {}})


@pytest.mark.parametrize("text, problem", [
    ("X: 1.5", "a line is not NAME = value: 'X: 1.5'"),
    ("Z = 1", "Z is not one of the constants (X, Y, LEARNING_RATE, DEPTH)"),
    ("X = 1\nY = 2\nX = 3", "X is given twice"),
    ("X = 1\nobjective.py:X = 2", "X is given twice"),
    ("X = abc", "X = 'abc' is not a number or a quoted string"),
    ("X = 1 + 2", "is not a number or a quoted string"),
    ("X = ", "is not a number or a quoted string"),
    ("", "the reply changes no constant"),
    ("\n  \n", "the reply changes no constant"),
])
def test_constant_replies_that_are_not_in_the_format(demo: TaskConfig, text: str, problem: str) -> None:
    with pytest.raises(ReplyError) as caught:
        parse_reply(demo, text, WORKSPACE, ["objective.py"])
    assert problem in str(caught.value)


def test_a_constant_the_files_do_not_assign(demo: TaskConfig) -> None:
    with pytest.raises(ReplyError, match=r"objective\.py has no assignment of DEPTH to change"):
        parse_reply(demo, "DEPTH = 3", {"objective.py": "X = 0.0\n"}, ["objective.py"])


@pytest.mark.parametrize("text, problem", [
    ("```score.py\nloss = 0\n```", "the reply writes score.py, which is not editable (objective.py)"),
    ("X = 1.5", "the reply has no fenced file"),
    ("```objective.py\nX = 1\n", "the reply has no fenced file"),  # never closed
])
def test_file_replies_that_are_not_in_the_format(whole_files: TaskConfig, text: str, problem: str) -> None:
    with pytest.raises(ReplyError) as caught:
        parse_reply(whole_files, text, WORKSPACE, ["objective.py"])
    assert problem in str(caught.value)


def apply(files: dict[str, str], edits: list[FileEdit]) -> dict[str, str]:
    out = dict(files)
    for edit in edits:
        assert edit.content is not None and not edit.replacements and not edit.delete
        out[edit.path] = edit.content
    return out


def test_constants_round_trip(demo: TaskConfig) -> None:
    after = dict(WORKSPACE)
    after["objective.py"] = (after["objective.py"].replace("X = 0.0", "X = 1.7").replace("DEPTH = 2", "DEPTH = 5")
                             .replace("LEARNING_RATE = 0.1", "LEARNING_RATE = 3e-3"))
    text = reply_text(demo, WORKSPACE, after, ["objective.py"])
    assert text == "X = 1.7\nLEARNING_RATE = 3e-3\nDEPTH = 5"  # the task's order, only what changed
    edits, hypothesis = parse_reply(demo, text, WORKSPACE, ["objective.py"])
    assert apply(WORKSPACE, edits) == after
    assert hypothesis == "X 0.0 -> 1.7; LEARNING_RATE 0.1 -> 3e-3; DEPTH 2 -> 5"
    assert "# first coordinate" in apply(WORKSPACE, edits)["objective.py"]  # the comment after the value stays
    # comments and blank lines in a reply are allowed; a path-qualified label names the same constant
    edits, _ = parse_reply(demo, "\nobjective.py:X = 1.7   # nearer the bowl's centre\n", WORKSPACE, ["objective.py"])
    assert apply(WORKSPACE, edits)["objective.py"] == WORKSPACE["objective.py"].replace("X = 0.0", "X = 1.7")


def test_the_same_name_in_two_files_is_labelled_with_its_path() -> None:
    task = load_task(DEMO, {"search_space": {"objective.py:X": {"kind": "uniform", "low": -3, "high": 3},
                                             "score.py:X": {"kind": "uniform", "low": -3, "high": 3}}})
    assert [c.label for c in constants(task)] == ["objective.py:X", "score.py:X"]
    files = {"objective.py": "X = 0.0\n", "score.py": "X = 1  # weight\n"}
    after = {"objective.py": "X = 0.5\n", "score.py": "X = 2  # weight\n"}
    text = reply_text(task, files, after, ["objective.py", "score.py"])
    assert text == "objective.py:X = 0.5\nscore.py:X = 2"
    edits, _ = parse_reply(task, text, files, ["objective.py", "score.py"])
    assert apply(files, edits) == after
    with pytest.raises(ReplyError, match="X is not one of the constants"):
        parse_reply(task, "X = 1", files, ["objective.py", "score.py"])
    assert "objective.py:X = 0.0\nscore.py:X = 1" in messages(task, files, 2.0, ["objective.py"])[1]["content"]


def test_whole_files_round_trip(whole_files: TaskConfig) -> None:
    new = WORKSPACE["objective.py"].replace("X = 0.0", "X = 1.7") + "\n# a comment line with ``` inside\n"
    after = {**WORKSPACE, "objective.py": new}
    text = reply_text(whole_files, WORKSPACE, after, ["objective.py"])
    assert text.startswith("```objective.py\n") and text.endswith("\n```") and "score.py" not in text
    edits, hypothesis = parse_reply(whole_files, text, WORKSPACE, ["objective.py"])
    assert apply(WORKSPACE, edits) == after and hypothesis == "rewrite objective.py"
    prompt = messages(whole_files, WORKSPACE, 7.5, ["objective.py"])
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert prompt[1]["content"].startswith("loss now: 7.5 (lower is better)\n```objective.py\n")
    assert "score.py" not in prompt[1]["content"]  # only the editable files
