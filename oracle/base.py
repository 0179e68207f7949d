"""TEMPORARY (issue 21): the oracle contract moved to :mod:`rrma.contracts`; this shim goes as soon as
rrma/run/loop.py (being split) imports from there. Import from rrma.contracts."""

from rrma.contracts import EvalContext, Oracle, OracleError, ProgressFn

__all__ = ["EvalContext", "Oracle", "OracleError", "ProgressFn"]
