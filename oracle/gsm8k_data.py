"""GSM8K data: locating and loading the splits, deterministic subsets, and the split guard.

Why it exists: every GSM8K oracle must agree on which questions are scored and must be able to
prove that a training recipe never saw them. Problems keep their 0-based line index in their
source file, so a subset is a list of indices that anyone can recompute.

Splits (names used everywhere in RRMA):

* ``test``: the 1319 GSM8K test problems. Held out: only ever *scored*, never written into a
  trial workspace.
* ``dev``: a fixed subset of ``train.jsonl`` (``DEV_SIZE`` problems picked by a seeded
  permutation of indices). The score agents optimise in the loop, so the test split is not
  worn out by the search.
* ``train-pool``: ``train.jsonl`` minus ``dev``: the only data a recipe is given.

Invariant (the split guard): :func:`assert_disjoint` refuses a training set that shares a
question (compared after whitespace/case normalisation) with a held-out set; the recipe oracle
calls it on every trial before training starts.

Where data comes from, in order: an explicit ``data`` path (a jsonl file, or a directory with
``train.jsonl``/``test.jsonl``); ``$RRMA_SHARED/gsm8k`` or ``<repo>/../shared/gsm8k``; the user
cache ``~/.cache/rrma/gsm8k``; then, only when ``download=True``, the public files of OpenAI's
grade-school-math repository (or the HF ``openai/gsm8k`` dataset when that URL fails).

Every one of those places, and the caches a download leaves (:func:`download_caches`), is named by
:func:`held_out_paths`: the GSM8K oracles declare them as their ``held_out()`` answers, so no
agent's process (a recipe, a coding agent) can read the test split or rebuild dev from the full
train split.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
FILE_SPLITS = ("train", "test")
SPLITS = ("train", "test", "dev", "train-pool")
DEV_SIZE = 500
DEV_SEED = 20240101
PUBLIC_URL = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/{split}.jsonl"
HF_DATASET = ("openai/gsm8k", "main")
# sha256 of the upstream files (recorded in run facts; a mismatch is reported, not refused)
KNOWN_SHA256 = {
    "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
}


class DataError(ValueError):
    """GSM8K data is missing or malformed; the message names the file, line and field."""


class SplitLeak(DataError):
    """A training set contains a held-out question."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One GSM8K problem. ``idx`` is its 0-based line in the source file of ``split``."""

    idx: int
    question: str
    answer: str  # the full solution, ending in "#### <number>"
    split: str  # the file it came from: train or test (dev/train-pool problems say train)

    @property
    def gold(self) -> str:
        """The gold number as written after ``####``."""
        return self.answer.rsplit("####", 1)[-1].strip()

    def to_json(self) -> dict[str, object]:
        return {"idx": self.idx, "question": self.question, "answer": self.answer}


def shared_dir() -> Path:
    """``$RRMA_SHARED/gsm8k`` if set, else ``<repo>/../shared/gsm8k`` (may not exist)."""
    base = os.environ.get("RRMA_SHARED")
    root = Path(base) if base else REPO_ROOT.parent / "shared"
    return (root / "gsm8k").resolve()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rrma" / "gsm8k"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def iter_json_objects(path: Path, error: type[Exception], what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a jsonl file; ``error`` names the line."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what} file")
    with path.open(encoding="utf-8") as fh:
        yield from iter_json_lines(fh, str(path), error)


def iter_json_lines(lines: Iterable[str], source: str, error: type[Exception]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of jsonl text; ``error`` names ``source`` and the line."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise error(f"{source}:{lineno}: expected a JSON object, got {type(row).__name__}")
        yield lineno, row


def load_jsonl(path: Path, split: str = "test") -> list[Problem]:
    """Read a GSM8K-style jsonl file: one ``{"question": ..., "answer": ...}`` object a line."""
    problems: list[Problem] = []
    for lineno, row in iter_json_objects(path, DataError, "GSM8K"):
        for key in ("question", "answer"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise DataError(f"{path}:{lineno}: field {key!r} is missing or not a non-empty string")
        if "####" not in row["answer"]:
            raise DataError(f"{path}:{lineno}: answer has no '#### <number>' final line")
        problems.append(Problem(len(problems), row["question"], row["answer"], split))
    if not problems:
        raise DataError(f"{path}: contains no problems")
    return problems


def _candidates(split: str, data: Path | None) -> list[Path]:
    if data is not None:
        data = Path(data)
        if data.is_file() or data.suffix == ".jsonl":
            return [data]
        return [data / f"{split}.jsonl"]
    return [shared_dir() / f"{split}.jsonl", cache_dir() / f"{split}.jsonl"]


def data_locations(data: Path | str | None = None) -> list[Path]:
    """Every place GSM8K files may be read from, as absolute paths (what a recipe must never see).

    ``data`` itself; for a ``data`` file, the jsonl files beside it (``train.jsonl`` next to a
    ``test.jsonl`` is the full train split, dev included); the shared copy and the user cache both
    where the environment puts them now and at their defaults (a child process with another
    environment would look at the defaults).
    """
    places: list[Path] = []
    if data is not None:
        given = Path(data).absolute()
        places.append(given)
        if given.suffix == ".jsonl":  # a split file: the other splits usually lie beside it
            places += [given.parent / f"{split}.jsonl" for split in FILE_SPLITS]
            with contextlib.suppress(OSError):
                places += sorted(given.parent.glob("*.jsonl"))
    home = Path.home()
    places += [shared_dir(), (REPO_ROOT.parent / "shared" / "gsm8k").absolute(), cache_dir().absolute(),
               home / ".cache" / "rrma" / "gsm8k"]
    return _unique(places)


def download_caches() -> list[Path]:
    """Where a download of GSM8K through the HF ``datasets`` fallback leaves copies of every split.

    The datasets cache (``$HF_DATASETS_CACHE``, ``$HF_HOME/datasets``, ``~/.cache/huggingface/datasets``)
    and the hub cache (``$HF_HUB_CACHE``, ``$HUGGINGFACE_HUB_CACHE``, ``$HF_HOME/hub``,
    ``~/.cache/huggingface/hub``), each only the folder of ``openai/gsm8k``.
    """
    owner, name = HF_DATASET[0].split("/", 1)
    default_home = Path.home() / ".cache" / "huggingface"
    hf_home = Path(os.environ["HF_HOME"]) if os.environ.get("HF_HOME") else default_home
    dataset_roots = [hf_home / "datasets", default_home / "datasets"]
    hub_roots = [hf_home / "hub", default_home / "hub"]
    if os.environ.get("HF_DATASETS_CACHE"):
        dataset_roots.insert(0, Path(os.environ["HF_DATASETS_CACHE"]))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            hub_roots.insert(0, Path(os.environ[var]))
    places = [root / f"{owner}___{name}" for root in dataset_roots]
    places += [root / f"datasets--{owner}--{name}" for root in hub_roots]
    return _unique(p.absolute() for p in places)


def held_out_paths(data: Path | str | None = None) -> tuple[Path, ...]:
    """Every GSM8K split file and cache the project reads or writes: the data locations and the
    download caches (what a GSM8K oracle's ``held_out()`` declares)."""
    return tuple(_unique([*data_locations(data), *download_caches()]))


def _unique(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out


def locate(split: str, data: Path | str | None = None, *, download: bool = False) -> Path:
    """Path of ``train.jsonl`` or ``test.jsonl`` (see the module docstring for the order)."""
    if split not in FILE_SPLITS:
        raise DataError(f"unknown GSM8K file split {split!r}; expected one of {', '.join(FILE_SPLITS)}")
    tried = _candidates(split, Path(data) if data is not None else None)
    for path in tried:
        if path.is_file():
            return path
    if data is not None:
        raise DataError(f"GSM8K {split} data not found at {tried[0]}")
    if download:
        return fetch(split, cache_dir())
    raise DataError(
        f"GSM8K {split}.jsonl not found (looked in {', '.join(str(p) for p in tried)}); "
        "pass --data PATH (a jsonl file or a directory with train.jsonl/test.jsonl), "
        "set RRMA_SHARED, or allow a download (--download / params.download: true)"
    )


def fetch(split: str, dest: Path, *, timeout_s: float = 60.0) -> Path:
    """Download one split into ``dest`` (public URL first, then HF datasets); returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / f"{split}.jsonl"
    tmp = target.with_suffix(".part")
    errors: list[str] = []
    try:
        with urllib.request.urlopen(PUBLIC_URL.format(split=split), timeout=timeout_s) as resp, tmp.open("wb") as out:
            shutil.copyfileobj(resp, out)
        load_jsonl(tmp, split)  # validate before it becomes visible
        tmp.replace(target)
        return target
    except (OSError, DataError) as exc:
        errors.append(f"{PUBLIC_URL.format(split=split)}: {exc}")
    try:
        import datasets  # optional: only for the fallback

        rows = datasets.load_dataset(*HF_DATASET, split=split)
        with tmp.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps({"question": row["question"], "answer": row["answer"]}) + "\n")
        tmp.replace(target)
        return target
    except Exception as exc:  # any failure of the optional fallback is reported with the first
        errors.append(f"HF datasets {HF_DATASET[0]}: {type(exc).__name__}: {exc}")
    tmp.unlink(missing_ok=True)
    raise DataError(f"could not download GSM8K {split}: " + "; ".join(errors))


def dev_indices(n_train: int, dev_size: int = DEV_SIZE, seed: int = DEV_SEED) -> list[int]:
    """Indices of ``train.jsonl`` that form the dev split (sorted; at most half of train)."""
    size = min(dev_size, n_train // 2)
    order = list(range(n_train))
    random.Random(seed).shuffle(order)
    return sorted(order[:size])


def load_split(
    name: str,
    data: Path | str | None = None,
    *,
    download: bool = False,
    dev_size: int = DEV_SIZE,
) -> list[Problem]:
    """Problems of ``train``, ``test``, ``dev`` or ``train-pool`` (see the module docstring)."""
    if name not in SPLITS:
        raise DataError(f"unknown GSM8K split {name!r}; expected one of {', '.join(SPLITS)}")
    data_path = Path(data) if data is not None else None
    if data_path is not None and data_path.is_file():
        problems = load_jsonl(data_path, "train" if name != "test" else "test")
        if name in ("train", "test"):
            return problems
    else:
        file_split = "test" if name == "test" else "train"
        problems = load_jsonl(locate(file_split, data_path, download=download), file_split)
        if name in ("train", "test"):
            return problems
    dev = set(dev_indices(len(problems), dev_size))
    if name == "dev":
        return [p for p in problems if p.idx in dev]
    return [p for p in problems if p.idx not in dev]


def subset(problems: Sequence[Problem], limit: int | None, seed: int | None = None) -> list[Problem]:
    """A deterministic subset: the first ``limit`` problems, or with ``seed`` a seeded sample.

    Either way the result is in index order and depends only on (problems, limit, seed).
    """
    if limit is None or limit >= len(problems):
        return list(problems)
    if limit < 1:
        raise DataError(f"subset limit must be at least 1 (got {limit})")
    if seed is None:
        return list(problems[:limit])
    picked = sorted(random.Random(seed).sample(range(len(problems)), limit))
    return [problems[i] for i in picked]


_WS = re.compile(r"\s+")


def question_key(question: str) -> str:
    """A normalised hash of a question (case and whitespace do not matter)."""
    return hashlib.sha256(_WS.sub(" ", question).strip().lower().encode()).hexdigest()[:20]


def assert_disjoint(train: Iterable[Problem], heldout: Iterable[Problem]) -> None:
    """Raise :class:`SplitLeak` if a training problem's question is also a held-out one."""
    held = {question_key(p.question): p for p in heldout}
    leaks = [(p, held[question_key(p.question)]) for p in train if question_key(p.question) in held]
    if leaks:
        first, other = leaks[0]
        raise SplitLeak(
            f"{len(leaks)} training problem(s) are held-out questions, e.g. {first.split}[{first.idx}] == "
            f"{other.split}[{other.idx}]: {first.question[:80]!r}"
        )


def remove_overlap(train: Sequence[Problem], heldout: Iterable[Problem]) -> list[Problem]:
    """``train`` without any question that is also held out (GSM8K has a few cross-split repeats)."""
    held = {question_key(p.question) for p in heldout}
    return [p for p in train if question_key(p.question) not in held]


def jsonl_bytes(problems: Iterable[Problem]) -> bytes:
    """The jsonl text of ``problems`` (one ``{"idx", "question", "answer"}`` object a line)."""
    return "".join(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in problems).encode("utf-8")


def write_jsonl(problems: Iterable[Problem], path: Path) -> Path:
    """Write ``problems`` to ``path`` as a new file, never through a link planted at its name."""
    from rrma.contain.files import write_bytes

    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path.parent, path.name, jsonl_bytes(problems))
    return path


__all__ = [
    "DEV_SIZE",
    "SPLITS",
    "DataError",
    "Problem",
    "SplitLeak",
    "assert_disjoint",
    "data_locations",
    "dev_indices",
    "download_caches",
    "fetch",
    "file_sha256",
    "held_out_paths",
    "jsonl_bytes",
    "load_jsonl",
    "load_split",
    "locate",
    "question_key",
    "remove_overlap",
    "shared_dir",
    "subset",
    "write_jsonl",
]
