"""Executors: where ``oracle.evaluate`` runs for a trial, behind one protocol.

``local`` (a thread pool in the harness; the protocol, :class:`~rrma.exec.local.TrialJob` and
:func:`~rrma.exec.local.wait_outcome`) and ``ray`` (the same protocol on a Ray cluster).
"""
