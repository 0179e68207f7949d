"""TEMPORARY (issue 21): the context builder moved to :mod:`rrma.run.context`; this shim goes as soon
as rrma/run/loop.py (being split) imports from there."""

from rrma.run.context import FEEDBACK_CHARS, build_context, clip_middle, summarize

__all__ = ["FEEDBACK_CHARS", "build_context", "clip_middle", "summarize"]
