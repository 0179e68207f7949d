"""Data and the fixed metric of the autoresearch bench. READ-ONLY: agents never edit this file.

It owns three things, so that every trial is scored the same way:

* **The data.** ``build_corpus`` turns a source into bytes and splits it deterministically
  into train and validation. Sources: ``stdlib`` (the default: the ``.py`` files of the
  running Python's standard library, sorted by path, tests and site-packages left out; present
  on every machine, nothing downloaded), a path to any text file, or an ``http(s)://`` URL of
  a FineWeb-style parquet shard (a ``text`` column), downloaded once into the cache.
  ``prepare_data`` writes ``train.bin`` / ``val.bin`` (uint8) under a cache directory named
  by the corpus sha256, which is what a run records.
* **The tokenizer.** Bytes: vocabulary 256, one token per UTF-8 byte, so bits per byte are
  exact and nothing is downloaded.
* **The metric.** ``evaluate_bpb``: val_bpb = (summed cross-entropy in nats over the target
  tokens) / (ln 2 x the UTF-8 bytes of those targets), over the first ``EVAL_TOKENS`` target
  tokens of the validation split in non-overlapping windows of ``SEQ_LEN``: the same stream
  every run. The harness computes the score itself, in its own process, from the model that
  ``train.py`` saves with ``save_model`` (a ``torch.export`` graph: tensors in, logits out),
  and checks that the model is causal (changing later tokens never changes earlier logits).

Run it by hand: ``python prepare.py`` builds the default data; ``python prepare.py evaluate
model.pt2`` prints ``val_bpb: ...`` for a saved model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import sysconfig
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import torch

VOCAB_SIZE = 256  # byte tokenizer: token id == byte value
SEQ_LEN = int(os.environ.get("RRMA_SEQ_LEN", "128"))  # context the model is evaluated at (tokens)
EVAL_TOKENS = int(os.environ.get("RRMA_EVAL_TOKENS", "65536"))  # target tokens scored per evaluation
EVAL_BATCH = 16  # windows per forward pass during evaluation (the saved graph's batch size)
VAL_EVERY = 20  # every 20th source file (in sorted order) goes to the validation split
CACHE_ROOT = Path(os.environ.get("RRMA_CACHE", Path.home() / ".cache" / "rrma")) / "autoresearch"
MODEL_FILE = os.environ.get("RRMA_MODEL_OUT", "model.pt2")  # where save_model writes the graph

_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


# ----------------------------------------------------------------------------- data


def stdlib_sources() -> list[tuple[str, bytes]]:
    """(relative path, bytes) of the standard library's .py files, sorted by path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if _STDLIB_SKIP.intersection(rel.parts) or not path.is_file():
            continue
        out.append((rel.as_posix(), path.read_bytes()))
    if not out:
        raise RuntimeError(f"no .py files found under the standard library at {root}")
    return out


def _parquet_documents(url: str, cache_root: Path) -> list[tuple[str, bytes]]:
    """Documents of a FineWeb-style parquet shard (column ``text``), downloaded once."""
    name = hashlib.sha256(url.encode()).hexdigest()[:16] + ".parquet"
    local = cache_root / "downloads" / name
    if not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_suffix(".part")
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as fh:
                while chunk := resp.read(1 << 20):
                    fh.write(chunk)
        except OSError as exc:
            raise RuntimeError(f"cannot download {url}: {exc} (offline? use the default stdlib corpus)") from exc
        tmp.replace(local)
    import pyarrow.parquet as pq  # only needed for this source

    table = pq.read_table(local, columns=["text"])
    return [(f"{url}#{i}", str(t).encode("utf-8")) for i, t in enumerate(table.column("text").to_pylist())]


def documents(source: str, cache_root: Path = CACHE_ROOT) -> list[tuple[str, bytes]]:
    """The documents of a data source, in a fixed order."""
    if source == "stdlib":
        return stdlib_sources()
    if source.startswith(("http://", "https://")):
        return _parquet_documents(source, cache_root)
    path = Path(source)
    if not path.is_file():
        raise RuntimeError(f"data source {source!r}: not 'stdlib', an http(s) parquet URL, or an existing file")
    data = path.read_bytes()
    # one text file: cut into 64 KiB chunks so the every-20th split still holds out a spread
    return [(f"{path.name}@{i}", data[i : i + 65536]) for i in range(0, len(data), 65536)]


def build_corpus(source: str, cache_root: Path = CACHE_ROOT) -> tuple[bytes, bytes]:
    """(train bytes, validation bytes): every VAL_EVERY-th document is validation."""
    docs = documents(source, cache_root)
    if len(docs) < 2:
        raise RuntimeError(f"data source {source!r} is too small: {len(docs)} document(s)")
    sep = b"\n\n"
    train = sep.join(d for i, (_, d) in enumerate(docs) if i % VAL_EVERY != VAL_EVERY - 1)
    val = sep.join(d for i, (_, d) in enumerate(docs) if i % VAL_EVERY == VAL_EVERY - 1)
    if len(val) < EVAL_TOKENS + 1:
        # small corpora: the last 10% of the bytes are validation
        joined = train + sep + val
        cut = int(len(joined) * 0.9)
        train, val = joined[:cut], joined[cut:]
    return train, val


def prepare_data(source: str = "stdlib", cache_root: Path = CACHE_ROOT) -> tuple[Path, dict[str, object]]:
    """Build (or find) the tokenized splits; returns (data dir, facts for the run record)."""
    train, val = build_corpus(source, cache_root)
    digest = hashlib.sha256()
    digest.update(len(train).to_bytes(8, "little"))
    digest.update(train)
    digest.update(val)
    sha = digest.hexdigest()
    out = cache_root / sha[:16]
    meta = {
        "source": source,
        "sha256": sha,
        "train_bytes": len(train),
        "val_bytes": len(val),
        "tokenizer": "bytes",
        "vocab_size": VOCAB_SIZE,
        "python": sys.version.split()[0],
    }
    if not (out / "meta.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
        (tmp / "train.bin").write_bytes(train)
        (tmp / "val.bin").write_bytes(val)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        try:
            tmp.rename(out)  # atomic: a concurrent builder either wins or finds ours
        except OSError:
            for f in tmp.iterdir():
                f.unlink()
            tmp.rmdir()
    return out, meta


def data_dir() -> Path:
    """The data directory the harness prepared (RRMA_DATA_DIR), else the default corpus."""
    env = os.environ.get("RRMA_DATA_DIR")
    if env:
        return Path(env)
    return prepare_data("stdlib")[0]


def load_split(split: str, directory: Path | None = None) -> torch.Tensor:
    """The tokens of ``split`` ("train" or "val") as a 1-D uint8 tensor."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', not {split!r}")
    path = (directory or data_dir()) / f"{split}.bin"
    if split == "val" and path.exists() and path.stat().st_size == 0:  # (bind-mounted /dev/null)
        # the harness hides val.bin while train.py runs (it scores the saved model itself, on the
        # real split); train.py's own val_bpb is then measured on the last bytes of train
        if not _VAL_NOTE:
            _VAL_NOTE.append(True)
            print("note: val.bin is hidden while training; train.py's val_bpb uses a dev slice of train",
                  file=sys.stderr)
        train = load_split("train", directory)
        return train[-(EVAL_TOKENS + 1):]
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8))


_VAL_NOTE: list[bool] = []


def token_bytes() -> torch.Tensor:
    """UTF-8 bytes of each token id (all ones for the byte tokenizer); shape (VOCAB_SIZE,)."""
    return torch.ones(VOCAB_SIZE, dtype=torch.float64)


# ----------------------------------------------------------------------------- model contract


def save_model(model: torch.nn.Module, path: str | Path = MODEL_FILE) -> Path:
    """Save ``model`` for the harness's evaluation as a ``torch.export`` graph.

    The model maps int64 token ids of shape (EVAL_BATCH, SEQ_LEN) to logits of shape
    (EVAL_BATCH, SEQ_LEN, VOCAB_SIZE); it is exported in float32, in eval mode, on the device
    its parameters live on (the harness evaluates it on that device).
    """
    was_training = model.training
    model.eval()
    model.float()
    device = next(model.parameters()).device
    example = torch.zeros(EVAL_BATCH, SEQ_LEN, dtype=torch.long, device=device)
    with torch.no_grad():
        program = torch.export.export(model, (example,))
    path = Path(path)
    torch.export.save(program, str(path))
    model.train(was_training)
    return path


def load_model(path: str | Path) -> torch.nn.Module:
    """Load a graph saved by :func:`save_model` (tensor operations only; no trial code runs)."""
    return torch.export.load(str(path)).module()


# ----------------------------------------------------------------------------- metric


@torch.no_grad()
def evaluate_bpb(model: torch.nn.Module, val: torch.Tensor | None = None, device: str = "cpu") -> float:
    """Bits per byte of ``model`` on the fixed validation stream (lower is better).

    Windows i = 0..EVAL_TOKENS/SEQ_LEN-1: inputs val[i*S : i*S+S], targets val[i*S+1 : i*S+S+1].
    """
    val = load_split("val") if val is None else val
    n_windows = EVAL_TOKENS // SEQ_LEN
    need = n_windows * SEQ_LEN + 1
    if val.numel() < need:
        raise RuntimeError(f"validation split has {val.numel()} tokens; the metric needs {need}")
    stream = val[:need].to(torch.long)
    inputs = stream[:-1].view(n_windows, SEQ_LEN)
    targets = stream[1:].view(n_windows, SEQ_LEN)
    nbytes = token_bytes()
    total_nats = 0.0
    total_bytes = 0.0
    for start in range(0, n_windows, EVAL_BATCH):
        x = inputs[start : start + EVAL_BATCH]
        y = targets[start : start + EVAL_BATCH]
        rows = x.shape[0]
        if rows < EVAL_BATCH:  # the saved graph has a fixed batch: pad, then drop the padding
            x = torch.cat([x, x.new_zeros(EVAL_BATCH - rows, SEQ_LEN)])
        logits = model(x.to(device))[:rows].float()
        if logits.shape != (rows, SEQ_LEN, VOCAB_SIZE):
            raise RuntimeError(f"model returned logits of shape {tuple(logits.shape)}; expected (B, {SEQ_LEN}, {VOCAB_SIZE})")
        nll = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB_SIZE), y.reshape(-1).to(device), reduction="none"
        )
        total_nats += nll.double().sum().item()
        total_bytes += nbytes[y.reshape(-1)].sum().item()
    bpb = total_nats / (math.log(2) * total_bytes)
    if not math.isfinite(bpb):
        raise RuntimeError(f"val_bpb is not finite ({bpb})")
    return bpb


@torch.no_grad()
def check_causal(model: torch.nn.Module, device: str = "cpu", seed: int = 0) -> float:
    """Largest change of logits at positions < p when the tokens from p on are replaced.

    A causal language model gives 0 (up to float rounding); anything that looks ahead would
    score itself on the very tokens it is asked to predict.
    """
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB_SIZE, (EVAL_BATCH, SEQ_LEN), generator=gen)
    cut = SEQ_LEN // 2
    x2 = x.clone()
    x2[:, cut:] = torch.randint(0, VOCAB_SIZE, (EVAL_BATCH, SEQ_LEN - cut), generator=gen)
    a = model(x.to(device))[:, :cut].float()
    b = model(x2.to(device))[:, :cut].float()
    return (a - b).abs().max().item()


def _evaluate_cli(model_path: str, device: str) -> int:
    model = load_model(model_path)
    leak = check_causal(model, device)
    print(f"causal_max_diff: {leak:.3g}")
    if leak > 1e-3:
        print(f"NOT CAUSAL: logits before position {SEQ_LEN // 2} change by {leak:.3g} when later tokens change")
        return 3
    bpb = evaluate_bpb(model, device=device)
    print(f"val_bpb: {bpb:.6f}")
    print(f"eval_tokens: {EVAL_TOKENS}", flush=True)
    os._exit(0)  # the score is out; skip interpreter teardown (seconds of torch clean-up on a busy machine)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="data", choices=["data", "evaluate"])
    parser.add_argument("model", nargs="?", help="evaluate: the saved model (model.pt2)")
    parser.add_argument("--data", default="stdlib", help="stdlib (default), a text file, or a parquet URL")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("RRMA_THREADS", "1")))
    if args.command == "evaluate":
        if not args.model:
            parser.error("evaluate needs the path of a saved model")
        return _evaluate_cli(args.model, args.device)
    out, meta = prepare_data(args.data)
    print(f"data_dir: {out}")
    for key, value in meta.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
