"""What a person writes into a run's log from the command line: a review (``review``: approve,
reject, flag, withdraw; signed with an SSH key where one is given), an order for the live driver
(``stop``, ``pause``, ``continue``), a blackboard post (``post``) and a steer note (``steer``).

Each calls one library function: a review :func:`rrma.run.promotion.review_trial` (the review, through
:mod:`rrma.log.review`, and a finished run's promotion by the loop's rule), the others :mod:`rrma.log.control`;
the TUI writes through the same functions.
"""

from __future__ import annotations

import argparse

from cli.options import resolve_run
from cli.output import EXIT_OK, CliError, console, plain


def cmd_review(args: argparse.Namespace) -> int:
    from rrma.log.signing import SigningError, default_signing_key
    from rrma.log.store import RunStore
    from rrma.run.promotion import review_trial

    key = args.sign_key or default_signing_key()
    try:
        event = review_trial(RunStore(resolve_run(args.run, args.runs)), args.trial, args.decision, args.reviewer,
                             args.note, sign_key=key)
    except SigningError as exc:
        raise CliError(f"review not recorded: {exc}") from exc
    signed = f", signed with {event.data.key_fingerprint}" if event.data.signature else ""
    replaced = f", superseding seq {event.data.supersedes}" if event.data.supersedes is not None else ""
    console.print(plain(f"review recorded: seq {event.seq}, {args.decision} {args.trial} by {event.data.reviewer}"
                        f"{signed}{replaced}"))
    return EXIT_OK


def _person(args: argparse.Namespace) -> str | None:
    return getattr(args, "by", None) or getattr(args, "reviewer", None)


def cmd_control(args: argparse.Namespace) -> int:
    """``stop``, ``pause``, ``continue``: one run.control order for the live driver (rrma.log.control)."""
    from rrma.log.control import send_control

    sent = send_control(resolve_run(args.run, args.runs), args.command, _person(args), args.reason)
    console.print(plain(sent.message), soft_wrap=True)
    return EXIT_OK


def cmd_post(args: argparse.Namespace) -> int:
    from rrma.log.control import post_to_blackboard

    sent = post_to_blackboard(resolve_run(args.run, args.runs), args.text, _person(args), args.trial)
    console.print(plain(sent.message), soft_wrap=True)
    return EXIT_OK


def cmd_steer(args: argparse.Namespace) -> int:
    from rrma.log.control import send_steer

    sent = send_steer(resolve_run(args.run, args.runs), args.text, _person(args), args.agent)
    console.print(plain(sent.message), soft_wrap=True)
    return EXIT_OK
