"""The Lean 4 proof oracle: checks an agent's proof body with real Lean and audits the result.

Why it exists: strip-and-rediscover for Lean. An agent sees a theorem's context and statement and
supplies only the proof body (the term after ``:=``, usually ``by ...``). The oracle rebuilds the
declaration itself (:func:`oracle.strip_lean.assemble`), so the statement is fixed text, and
accepts only if every rule below holds:

1. **Text rules** (no Lean needed, :func:`proof_violation`): comments and literals are blanked
   first (so ``theorem`` in a comment or ``my_theorem_helper`` is fine), then the proof may not
   contain a command or declaration keyword, ``set_option``, ``open``, ``attribute``, ``macro``,
   ``elab``, ``syntax``, a ``#`` command, ``@[...]``, ``sorry``/``admit``/``stop``, meta-programming
   (``run_tac``, ``by_elab``), ``implemented_by``/``extern``/``unsafe``/``partial``,
   ``debug.skipKernelTC`` or native evaluation (``native_decide``, ``decide +native``,
   ``ofReduceBool``, ``trustCompiler``, a ``_native`` name part), and
   no unterminated comment or string (it would swallow the oracle's audit commands).
2. **Lean elaborates it**: no error, no ``sorry`` (the ``sorries`` field or either wording of
   the "declaration uses sorry" warning).
3. **Audit in a separate command** on the resulting environment (so nothing in the proof can
   fake it): ``#check @name`` must print exactly what it prints for the original statement closed
   by ``sorry`` (the statement is unchanged), and ``#print axioms name`` must list only
   :data:`ALLOWED_AXIOMS` (an allow-list: ``sorryAx``, user axioms and every spelling of native
   evaluation fail). A missing audit answer fails closed.

The package, one module per job: :mod:`~oracle.lean.screen` (rule 1, no Lean needed),
:mod:`~oracle.lean.protocol` (Lean's answers read), :mod:`~oracle.lean.transport` (the REPL process:
:class:`PipeReplTransport` runs ``lake exe repl`` in its own process group with a wall-clock deadline
and a memory cap of the whole group; :class:`RecordedTransport` answers from transcripts, so the whole
code path runs in tests without Lean), :mod:`~oracle.lean.session` (warm sessions that elaborate a
context once, in the pool shared with Coq, :mod:`oracle.repl_pool`), :mod:`~oracle.lean.verdict`
(rules 2 and 3), :mod:`~oracle.lean.checker` (:class:`LeanChecker`: REPL, or ``lake env lean --json``
per check as the fallback, then the kernel replay), :mod:`~oracle.lean.oracle` (:class:`LeanOracle`)
and :mod:`~oracle.lean.project` (the Lake project, the install hint). Every name of theirs that other modules use is reachable here too
(``oracle.lean.NAME``, imported on first use).

Invariant: :meth:`LeanChecker.check` returns ``accepted=True`` only after rules 1-3 all passed on
answers from Lean itself; every failure path (timeout, crash, unparsable answer) is a rejection.
"""

from __future__ import annotations

from oracle.lazy_names import lazy_names

# name -> the module of this package that defines it. The package imports none of its modules itself: a
# module that imports a sibling (``from oracle.lean.X import ...`` runs this file first) then never runs
# back into a package that is importing it, so there is no import circle.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("CliRunner", "LeanChecker"), "checker"),
    **dict.fromkeys(("LeanOracle", "feedback_text"), "oracle"),
    **dict.fromkeys(("DEFAULT_PROJECT", "ELAN_URL", "LeanNotInstalled", "REPO_ROOT", "lean_missing",
        "toolchain_of"), "project"),
    **dict.fromkeys(("LeanMessage", "LeanSorry", "ReplProtocolError", "ReplResponse",
        "goals_from_messages", "is_sorry_warning", "parse_axioms", "parse_cli_output", "parse_message",
        "parse_repl_response", "read_transcript", "split_repl_requests", "split_repl_responses"), "protocol"),
    **dict.fromkeys(("ALLOWED_OPTIONS", "ALLOWED_OPTION_PREFIXES", "FORBIDDEN_NAME_PARTS",
        "FORBIDDEN_TOKENS", "NATIVE_NAME_PARTS", "RuleViolation", "proof_violation"), "screen"),
    **dict.fromkeys(("ContextError", "ReplPool", "ReplSession"), "session"),
    **dict.fromkeys(("PipeReplTransport", "RecordedTransport", "ReplError", "ReplMemoryExceeded",
        "ReplTimeout", "ReplTransport", "TranscriptMismatch"), "transport"),
    **dict.fromkeys(("ALLOWED_AXIOMS", "audit_commands", "verdict_from_messages"), "verdict"),
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
__all__ = sorted(_HOMES)
