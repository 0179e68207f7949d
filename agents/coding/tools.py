"""The two commands a coding agent can run inside its sandbox: ``rrma-post`` and ``rrma-rebase``.

Why it exists: a coding agent talks to the harness only through files in its scratch area,
which the harness reads when the agent's program has exited. These commands write those files
for it, so that a blackboard post or a choice of parent is one shell command the agent already
knows how to run:

* ``rrma-post "TEXT"`` appends ``{"text": ...}`` to ``$RRMA_POST_FILE``; the harness records each
  as a ``blackboard.post`` by the agent (``actor agent:<name>``), scrubbed of its key.
* ``rrma-rebase TRIAL_ID`` (tree policy) replaces the working copy with that trial's files from
  ``$RRMA_TRIALS_DIR/TRIAL_ID`` and names it in ``$RRMA_REBASE_FILE``; the proposal is then the
  diff against that trial, which becomes the parent.

Invariant: this module imports nothing outside the standard library. The harness copies its
source into the sandbox's ``bin/`` (run by the harness's own Python), so it works whatever the
agent's ``PATH`` or working directory; the ``rrma-post`` console script is the same code, which
outside a coding agent's sandbox says so and exits 2.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

POST_LIMIT = 2000  # characters of one post (the harness keeps the same)


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def post(argv: list[str]) -> int:
    text = " ".join(argv).strip()
    if not text or text in ("-h", "--help"):
        print('usage: rrma-post "TEXT"   (a short insight for the other agents; up to 2000 characters)',
              file=sys.stderr if not text else sys.stdout)
        return 2 if not text else 0
    target = os.environ.get("RRMA_POST_FILE")
    if not target:
        return _fail("rrma-post: RRMA_POST_FILE is not set: this command works inside a coding agent's sandbox "
                     "(a person posts with `rrma-tui post RUN TEXT`)")
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"text": text[:POST_LIMIT]}) + "\n")
    print(f"posted ({min(len(text), POST_LIMIT)} characters); the other agents see it from their next proposal")
    return 0


def rebase(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        return _fail("usage: rrma-rebase TRIAL_ID   (replace the working copy with that trial's files)")
    trials = os.environ.get("RRMA_TRIALS_DIR")
    workdir = os.environ.get("RRMA_WORKSPACE")
    marker = os.environ.get("RRMA_REBASE_FILE")
    if not (trials and workdir and marker):
        return _fail("rrma-rebase: only available to coding agents under the tree policy")
    trial = argv[0]
    offered = sorted(p.name for p in Path(trials).iterdir() if p.is_dir())
    if trial not in offered:
        return _fail(f"rrma-rebase: {trial!r} is not a trial you can build on; choose one of: "
                     f"{', '.join(offered) or '(none)'}")
    work = Path(workdir)
    for child in work.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    shutil.copytree(Path(trials) / trial, work, dirs_exist_ok=True)
    Path(marker).write_text(trial + "\n", encoding="utf-8")
    print(f"the working copy is now trial {trial}'s files; your proposal will be built on {trial}")
    return 0


COMMANDS = {"rrma-post": post, "rrma-rebase": rebase}


def main(argv: list[str] | None = None) -> int:
    """Dispatch on the name the command was run as (``rrma-post``, ``rrma-rebase``)."""
    args = sys.argv if argv is None else argv
    name = Path(args[0]).name if args else ""
    command = COMMANDS.get(name)
    if command is None:
        return _fail(f"run as one of: {', '.join(COMMANDS)}")
    return command(list(args[1:]))


def post_main() -> None:
    """The ``rrma-post`` console script."""
    sys.exit(post(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
