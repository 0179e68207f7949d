"""The demo's scorer: oracle code that reads objective.py's constants as data and computes the loss.

Read-only to agents (task.yaml: workspace.readonly, oracle.scorer). The command oracle runs its own
copy of this file (taken from the bench at prepare time, never from a trial) in a process of its
own, with the trial's workspace read-only: ``python score.py TRIAL_DIR``, ``RRMA_SEED`` set. It
never imports or executes objective.py: it parses it (``ast``) and takes the one module-level
assignment of each constant whose value is a literal (``ast.literal_eval``). Whatever objective.py
computes or prints is not read here, so an edit can change the constants, never how the loss of
those constants is computed.

Prints ``loss: <number>`` (the noisy quadratic bowl below, seeded by ``RRMA_SEED``: the same number
the unmodified objective.py prints). An objective.py it cannot read as data (a constant that is an
expression or a call, assigned twice, missing, of the wrong type or out of range; a file that does
not parse) ends with exit code 2 and one ``invalid: <reason>`` line. The reasons name the constant
and the line, never quote the file: nothing the agent wrote reaches this program's output.
"""

from __future__ import annotations

import ast
import math
import os
import random
import stat
import sys
from pathlib import Path

OBJECTIVE = "objective.py"
LIMIT = 1e6  # |value| bound: keeps every term finite
INVALID_EXIT = 2
MAX_BYTES = 1 << 20
# name -> what it must be (said in the invalid reasons)
CONSTANTS = {"X": "a number", "Y": "a number", "LEARNING_RATE": "a positive number", "DEPTH": "an integer"}
KINDS = {ast.Call: "a function call", ast.BinOp: "an arithmetic expression", ast.Name: "a name",
         ast.Attribute: "an attribute", ast.Subscript: "a subscript", ast.IfExp: "a conditional expression",
         ast.Lambda: "a lambda", ast.BoolOp: "a boolean expression", ast.Compare: "a comparison"}


class Invalid(Exception):
    """objective.py cannot be read as data."""


def loss(x: float, y: float, learning_rate: float, depth: int, seed: int) -> float:
    """The demo's objective (documented in objective.py): a quadratic bowl plus seeded noise."""
    value = (x - 1.7) ** 2 + 2.0 * (y + 0.8) ** 2 + math.log10(learning_rate / 0.003) ** 2 + 0.1 * (depth - 5) ** 2
    return value + random.Random(seed).gauss(0.0, 0.02)


def read_source(trial_dir: Path) -> str:
    """objective.py's text, opened without following a link."""
    try:
        fd = os.open(trial_dir / OBJECTIVE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise Invalid(f"cannot be opened ({os.strerror(exc.errno or 0)})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise Invalid("is not a regular file")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise Invalid(f"is larger than {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("is not UTF-8 text") from None


def constants(source: str) -> dict[str, object]:
    """The literal value of each constant's one module-level assignment (Invalid otherwise)."""
    try:
        tree = ast.parse(source, OBJECTIVE)
    except SyntaxError as exc:
        raise Invalid(f"does not parse (line {exc.lineno}: {exc.msg})") from None
    except (ValueError, RecursionError, MemoryError):
        raise Invalid("cannot be parsed") from None
    stores: dict[str, list[int]] = {name: [] for name in CONSTANTS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del) and node.id in stores:
            stores[node.id].append(node.lineno)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                if name in stores:
                    raise Invalid(f"{name} is declared global in a function (line {node.lineno}); the scorer reads "
                                  "each constant from one module-level assignment")
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if name not in CONSTANTS:
            continue
        try:
            values[name] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            kind = KINDS.get(type(value), "not a literal")
            raise Invalid(f"{name} (line {node.lineno}) is {kind}, not a literal: the scorer reads the constants "
                          f"as data, so {name} must be {CONSTANTS[name]} written out (e.g. {name} = 3)") from None
    for name, lines in stores.items():
        if name not in values:
            raise Invalid(f"{name} has no module-level assignment of a literal")
        if len(lines) > 1:
            raise Invalid(f"{name} is assigned more than once (lines {', '.join(map(str, sorted(lines)))}); the "
                          "scorer reads each constant from its one module-level assignment")
    return values


def number(name: str, value: object, *, integer: bool = False, positive: bool = False) -> float:
    """``value`` as a float, if it is the kind of number the constant must be, finite and in range."""
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise Invalid(f"{name} is a {type(value).__name__}, not {CONSTANTS[name]}")
    if isinstance(value, int) and abs(value) > LIMIT:  # before float(): a huge int overflows it
        raise Invalid(f"{name} is out of range (|{name}| <= {LIMIT:g})")
    as_float = float(value)
    if not math.isfinite(as_float) or abs(as_float) > LIMIT:
        raise Invalid(f"{name} is out of range (|{name}| <= {LIMIT:g})")
    if positive and as_float <= 0:
        raise Invalid(f"{name} must be positive")
    return as_float


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: score.py TRIAL_DIR", file=sys.stderr)
        return 1
    seed = int(os.environ.get("RRMA_SEED", "0"))
    try:
        found = constants(read_source(Path(argv[1])))
        x, y = number("X", found["X"]), number("Y", found["Y"])
        learning_rate = number("LEARNING_RATE", found["LEARNING_RATE"], positive=True)
        depth = int(number("DEPTH", found["DEPTH"], integer=True))
    except Invalid as exc:
        print(f"invalid: {OBJECTIVE}: {exc}")
        return INVALID_EXIT
    print(f"loss: {loss(x, y, learning_rate, depth, seed):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
