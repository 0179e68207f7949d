"""The reference constant and the guard: what makes a Coq proof prove the *original* statement.

The statement is restated under a random name right after the context, before the agent's text runs,
so nothing the proof injects can change how it parses; after ``Qed`` the guard requires the checked
constant's type to be syntactically the reference's (``constr_eq``). Used by the cold and warm
checkers alike. :class:`OriginalAxioms`: the axioms the original proof rests on, the only ones a proof
may rest on.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from oracle.coq.replies import AXIOMS_REASON
from oracle.proof_common import TheoremTask
from oracle.strip_coq import CoqSyntaxError, open_modules, parameter_field, split_sentences

_GUARD_HEAD = re.compile(r"\b(?:Theorem|Lemma|Example|Fact|Remark|Corollary|Proposition|Property)\s+(?P<name>[A-Za-z_][\w']*)")


def reference_declaration(task: TheoremTask, name: str) -> str:
    """The statement restated as ``Lemma NAME ... Admitted.``: the reference constant.

    Declared right after the context, before the agent's proof runs, so no notation, definition
    or option the proof might smuggle in can change how it parses. It is never used by a genuine
    proof (its name is random per check), and a proof that used it would list it as an axiom.
    Empty when the statement's head cannot be found (the checker then refuses to judge).
    """
    match = _GUARD_HEAD.search(task.statement)
    if match is None or match.group("name") != task.name:
        return ""
    prefix = task.statement[: match.start()]
    rest = task.statement[match.end() :]
    return f"{prefix}Lemma {name}{rest}\nAdmitted.\n"


def guard_command(name: str, reference: str) -> str:
    """Sentences that fail unless ``name``'s type is syntactically the reference's (``constr_eq``:
    equal up to alpha-conversion and casts; kernel names are compared, so a shadowing definition or
    notation cannot make two different statements look alike). Both types are read before either Ltac
    name is bound (``let ... with ...``): with ``let a := ... in let b := type of @a``, a theorem named
    ``a`` or ``b`` would be read as the Ltac variable and every proof of it refused."""
    return (f"Goal True.\nlet a := type of @{reference} with b := type of @{name} in constr_eq a b; exact I.\n"
            "Qed.\n")


class OriginalAxioms:
    """A proof may rely on the axioms its theorem's original proof relies on, and on no other.

    Why: a library's own foundations are axioms. Every lemma of Coq's classical reals rests on
    ``ClassicalDedekindReals.sig_forall_dec`` and ``FunctionalExtensionality.functional_extensionality_dep``
    (even ``Rplus_comm``), and ``Sets`` on ``classic`` and ``Extensionality_Ensembles``; refusing every
    axiom refused the human proof of each such theorem too, so no Reals theorem could be solved. A proof
    that needs an axiom the original does not (``classic`` for a constructive original) is still refused,
    and an agent cannot declare one (the screen refuses ``Axiom``, ``Admitted``, ``Require``...).

    The original's axioms are found lazily, by checking the original proof with the same checker the
    first time a proof of that theorem is refused for axioms (one check per such theorem, cached).
    Inside a functor, the fields of its parameter are hypotheses, not axioms: a proof may rest on any of
    them (:func:`parameter_fields`)."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str, str], frozenset[str]] = {}

    def judge(self, checker: Any, task: Any, verdict: Any, *, timeout_s: float) -> Any:
        """``verdict`` (a :class:`oracle.proof_common.Verdict`), accepted when it was refused only for axioms
        the original proof relies on too; otherwise as it was, with the original's axioms named."""
        if verdict.accepted or not verdict.reason.startswith(AXIOMS_REASON) or not str(task.original_proof).strip():
            return verdict
        key = (task.source_file, task.name, task.statement)
        allowed = self.found.get(key)
        if allowed is None:
            original = checker.check(task, task.original_proof, timeout_s=timeout_s)
            allowed = frozenset(original.axioms) if (original.accepted or original.reason.startswith(AXIOMS_REASON)) \
                else frozenset()
            self.found[key] = allowed
        given = set(getattr(checker, "allowed_axioms", ()))
        extra = [a for a in verdict.axioms if a not in allowed and a not in given and a.split(".")[-1] not in given]
        fields = parameter_fields(checker, task, extra, timeout_s=timeout_s) if extra and PARAMETER_FIELDS else []
        extra = [a for a in extra if a not in fields]
        if extra:
            said = ", ".join(sorted(allowed)) or "no axiom"
            return dataclasses.replace(verdict, reason=f"{AXIOMS_REASON}{', '.join(extra)}, which the original "
                                                       f"proof does not (it relies on {said})")
        also = f" (and on {', '.join(fields)}, of the open functor's parameter)" if fields else ""
        return dataclasses.replace(verdict, accepted=True, cheat=False,
                                   reason=f"accepted: relies on axiom(s) {', '.join(verdict.axioms)}, as the "
                                          f"original proof does{also}")


PARAMETER_FIELDS = True  # a switch for tests: False refuses a field of a functor's parameter the original does not use


def parameter_fields(checker: Any, task: Any, names: list[str], *, timeout_s: float) -> list[str]:
    """Of ``names`` (assumptions a proof rests on), the fields of a parameter of a module the context leaves
    open (``zero`` of ``N`` under ``Module NMulOrderProp (Import N : NAxiomsMiniSig').``): ``Locate`` names
    them ``N.zero``. Such a field is a hypothesis of every theorem of the functor, not an axiom: the
    statement is proved for any ``N`` that has it, whichever fields the proof uses. An agent cannot add
    one (the screen refuses ``Module``, ``Axiom``, ``Parameter``), and an axiom the file or a library
    declares is named by its own path (``Top.M.foo``, ``Coq.Logic.Classical_Prop.classic``)."""
    locate = getattr(checker, "locate", None)
    try:
        sentences = [u.code for u in split_sentences(str(task.context))]
    except CoqSyntaxError:
        return []
    modules = open_modules(sentences)
    if locate is None or not any(m.parameters for m in modules):
        return []
    paths: dict[str, str] = locate(task, names, timeout_s=timeout_s)
    return [n for n in names if parameter_field(paths.get(n), modules)]
