"""The log room: everything that writes, reads, checks or exports a run's ``events.jsonl``.

``events`` (the versioned event payloads and the hash chain), ``store`` (append, scan, tail, blobs,
the driver lock), ``state`` (the fold of a log into a :class:`~rrma.log.state.RunState` and the
derived views), ``reader`` (the incremental reader and its checkpoint, shared by the TUI and the
CLI), ``verify`` and ``signing`` (the chain, head record and SSH-signed reviews), ``review`` and
``control`` (what people write into a run: approvals, orders), ``export`` (SQLite). Nothing here
imports a plug-in or the UI.
"""
