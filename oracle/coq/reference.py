"""The reference constant and the guard: what makes a Coq proof prove the *original* statement.

The statement is restated under a random name right after the context, before the agent's text runs,
so nothing the proof injects can change how it parses; after ``Qed`` the guard requires the checked
constant's type to be syntactically the reference's (``constr_eq``). Used by the cold and warm
checkers alike.
"""

from __future__ import annotations

import re

from oracle.proof_common import TheoremTask

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
