"""The Coq proof oracle: checks an agent's proof body of a stripped theorem, cold or warm.

Why it exists: the strip-and-rediscover bench needs a judge that accepts exactly the genuine
proofs of the *original* statement. The agent supplies only the proof body; the checker builds
the script itself (``context + statement + Proof. + body + Qed.``), so the statement cannot be
changed, and then:

1. **Screens the body lexically** (:func:`screen_proof`, same lexer as :mod:`oracle.strip_coq`):
   every sentence must be a tactic (optionally after bullets, braces and goal selectors).
   Rejected with a precise reason, before Coq runs: ``Admitted``, ``admit``/``give_up``, an
   ``Axiom``/``Parameter``/``Conjecture``/``Hypothesis``/``Variable``, ``Qed``/``Defined``
   followed by more commands, ``Abort``, ``Set``/``Unset`` of kernel-skipping options
   (``Guard Checking``, ``Positivity Checking``, ``Universe Checking``) or any other option,
   ``Require``/``Import``/``Load``, ``Declare ML Module``, nested declarations (``Lemma``,
   ``Definition``, ``Ltac``...), any other vernacular command (a capitalised first word, except
   ``Unshelve``), unterminated comments/strings, control characters.
   *Decision on evaluation tactics*: ``vm_compute``/``vm_cast_no_check`` are allowed (the
   bytecode VM is part of Coq's standard trusted base and the kernel re-checks the cast);
   ``native_compute``/``native_cast_no_check`` are forbidden (they trust code compiled by an
   external OCaml toolchain outside the kernel).
2. **Runs Coq**, always sandboxed (:class:`CoqSandbox`: the Coq installation and its load paths
   read-only, only a harness-owned scratch folder writable, the stripped sources hidden, no
   network): cold with ``coqc`` on a temporary file under :func:`rrma.contain.spawn.spawn`
   (wall clock and memory enforced from outside), or warm in a pool of ``coqtop -emacs``
   sessions (:class:`WarmCoqPool`, each wrapped by the same policy) driven sentence by sentence.
   The sessions use plain pipes and a reader thread (:class:`CoqSession`; why not pexpect there);
   each chunk is followed by a sentinel command carrying a random token, whose echo marks the
   end of the chunk's output. Memory is capped with ``RLIMIT_AS`` per session, the wall clock
   per check.
3. **Requires** no error, a closed proof at ``Qed``, and ``Print Assumptions`` closed under
   the global context (axioms outside ``allowed_axioms`` are rejected; section variables of
   the statement are allowed). In warm mode, leaving proof mode before the last sentence is
   also rejected (a second line of defence behind the lexical screen), and every unit must
   advance coqtop's state id exactly as the oracle's split predicts (a unit Coq runs as several
   sentences is refused). The statement is restated as a *reference* constant before the proof
   body runs, and after ``Qed`` the proved constant's type must be syntactically the
   reference's (``constr_eq``), so nothing the body declares can change what was proved.

Warm-pool invariant: every check starts from the state right after the task's context (a
``BackTo`` to the saved state id, which also reverts options), so one check cannot influence
the next; a session is restarted after ``max_checks`` checks, after a timeout, and whenever its
state cannot be verified. Feedback: the checker's messages with the proof line and the
remaining goals (goals before the failing sentence, or the goals left at ``Qed``).

The package, one module per job: :mod:`~oracle.coq.screen` (rule 1), :mod:`~oracle.coq.sandboxing`
(where Coq is, what a checker may read, :class:`CoqSandbox`), :mod:`~oracle.coq.modules` (the target's
own module), :mod:`~oracle.coq.replies` (Coq's output read), :mod:`~oracle.coq.reference` (the
reference constant and the guard), :mod:`~oracle.coq.cold` (:class:`CoqChecker`),
:mod:`~oracle.coq.session` (:class:`CoqSession`), :mod:`~oracle.coq.warm` (:class:`WarmCoqPool`, over
the session pool shared with Lean, :mod:`oracle.repl_pool`) and :mod:`~oracle.coq.oracle`
(:class:`CoqOracle`). Every name of theirs that other modules use is reachable here too
(``oracle.coq.NAME``, imported on first use).
"""

from __future__ import annotations

from oracle.lazy_names import lazy_names

# name -> the module of this package that defines it. The package imports none of its modules itself: a
# module that imports a sibling (``from oracle.coq.X import ...`` runs this file first) then never runs
# back into a package that is importing it, so there is no import circle.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("CoqChecker",), "cold"),
    **dict.fromkeys(("attach_modules", "libraries_loaded_by", "loaded_libraries", "logical_module",
        "module_refusal"), "modules"),
    **dict.fromkeys(("CoqOracle", "make_coq_checker", "public_contexts", "verdict_outcome", "with_preload"), "oracle"),
    **dict.fromkeys(("guard_command", "reference_declaration"), "reference"),
    **dict.fromkeys(("parse_assumptions", "parse_goals"), "replies"),
    **dict.fromkeys(("COMPILED_SUFFIXES", "CoqNotFound", "CoqSandbox", "INSTALL_HINT", "OBJECT_SUFFIXES",
        "answer_paths", "checker_hidden", "compiled_forms", "coq_installation", "coq_version",
        "find_coq_binary", "load_path_dirs"), "sandboxing"),
    **dict.fromkeys(("ALLOWED_COMMANDS", "AXIOM_COMMANDS", "CONTROL_PREFIX", "DECLARATIONS",
        "FORBIDDEN_TACTICS", "IMPORTS", "KERNEL_OPTIONS", "KERNEL_REFUSED", "ProofRejected", "ProofScript",
        "rejected", "screen_proof", "screen_tactic"), "screen"),
    **dict.fromkeys(("CoqSession", "CoqSessionError", "Reply"), "session"),
    **dict.fromkeys(("WarmCoqPool",), "warm"),
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
__all__ = sorted(_HOMES)
