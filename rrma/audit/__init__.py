"""Layer 1: the auditor reads each trial's reasoning chain and tells the reviewer where to look (docs/audit.md).

finding.py (the finding's shape), scope.py (what the rules look for), index.py (turns and posts by
trial), rules.py (one rule per kind), auditor.py (the live :class:`~rrma.audit.auditor.Auditor` and
``rrma-tui audit``'s :func:`~rrma.audit.auditor.audit_run`), judge.py (the optional judge model).
"""
