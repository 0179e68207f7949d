"""What a theorem's open modules put in scope that the search cannot see otherwise (issue 33, round five).

Why it exists: much of Coq's standard library (``Numbers``, ``Structures``, ``MSets``, ``FSets``) is
written inside functors: ``Module NMulOrderProp (Import N : NAxiomsMiniSig'). Include NAddOrderProp N.``
and then the file's theorems. Two things there differ from a plain file:

* the functor's parameter is an assumption: ``Print Assumptions`` lists its fields (``zero``, ``t``,
  ``mul_wd``...) as axioms, the human proof's too. The search used to veto every proof it found there
  (:meth:`agents.coq_tactics.CoqTactics.validate`); a field of an open module's parameter
  (:func:`parameter_field`: ``Locate`` names it ``N.zero``) is now left to the checker, which allows
  any of them (:func:`oracle.coq.reference.parameter_fields`);
* what ``Include`` brought into the module being defined is missing from Coq's ``Search`` there (Coq
  8.16: ``Search (_ * _ <= _ * _)`` inside ``NMulOrderProp`` finds no lemma of ``NAddOrderProp``, although
  ``Check mul_le_mono_nonneg_l`` works), so premise selection saw none of the library the file builds
  on. :func:`included_premises` lists them through ``Print Module`` and ``Check``
  (:meth:`oracle.proof_state_coq.CoqProofStates.module_lemmas`), once per scope; the lookups of
  :mod:`agents.coq_lookups` read them too, and :func:`module_tactics` the module's own tactics.

:func:`oracle.strip_coq.open_modules` reads, from the context's sentences, the modules still open at
the theorem, their parameters and their ``Include`` sentences (the checker reads the parameters the
same way). The switches ``PARAMETER_FIELDS`` and ``INCLUDED`` exist for the tests that show each
rule's effect against real ``coqtop`` with it off and on (tests/agents/test_proof_search_functors.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from oracle.proof_state import Premise
from oracle.strip_coq import OpenModule, open_modules
from oracle.strip_coq import parameter_field as is_parameter_field

__all__ = ["OpenModule", "included_premises", "module_tactics", "open_modules", "parameter_field"]

PARAMETER_FIELDS = True  # a switch for tests: False vetoes a proof resting on a functor parameter's fields
INCLUDED = True  # a switch for tests: False leaves what `Include` brought in out of premise selection
MAX_MODULE_TACTICS = 4  # the open module's argument-free tactics offered at each state
MAX_MODULE_ARG_TACTICS = 4  # the open module's tactics of one or two terms offered at each state (round eleven)
MODULE_ARG_TACTICS = True  # a switch for tests: False offers none of those (the search before round eleven)
PARAMETER_TACTICS = True  # a switch for tests: False offers only the module's own and included tactics (round fourteen)
MAX_INCLUDED = 1500  # premises read from one scope's included modules

# a statement that is only a type (`t -> t -> t`, `bool`): a function or a carrier, nothing to apply
_ONLY_TYPES = re.compile(r"[\w'.]+(?:\s*->\s*[\w'.]+)*")


def parameter_field(path: str | None, modules: Sequence[OpenModule]) -> bool:
    """Whether ``path`` (``Locate``'s full name of an assumption) is a field of a parameter of an open module
    (``N.zero`` under ``Module M (Import N : NAxiomsMiniSig')``): :func:`oracle.strip_coq.parameter_field`,
    the checker's own rule, behind this module's switch."""
    return PARAMETER_FIELDS and is_parameter_field(path, modules)


def included_premises(states: Any, modules: Sequence[OpenModule]) -> tuple[Premise, ...]:
    """The lemmas the open modules' ``Include`` sentences brought in, stated in this scope
    (``states.module_lemmas``), bare types left out; at most :data:`MAX_INCLUDED`. Kept for the scope:
    each theorem leaves out its own name (:class:`agents.coq_tactics.CoqTactics`)."""
    lemmas = getattr(states, "module_lemmas", None)
    if not INCLUDED or lemmas is None:
        return ()
    out: dict[str, Premise] = {}
    for module in modules:
        for name in module.includes:
            for premise in lemmas(name):
                if premise.name not in out and not _ONLY_TYPES.fullmatch(" ".join(premise.statement.split())):
                    out[premise.name] = premise
                if len(out) >= MAX_INCLUDED:
                    return tuple(out.values())
    return tuple(out.values())


def module_tactics(states: Any, modules: Sequence[OpenModule],
                   skip: Collection[str] = ()) -> tuple[tuple[str, int], ...]:
    """The tactics the innermost open module has (its own and its ``Include``s': ``nzsimpl``, ``order'``,
    ``cases n`` in a ``Numbers`` functor, ``states.module_tactic_signatures``), and, with
    :data:`PARAMETER_TACTICS`, those its functor parameters carry (round fourteen: ``NZGcd.v``'s functor includes
    nothing; its ``nzsimpl`` is the parameter's, ``C.nzsimpl``), as (name, how many terms it takes): a library's
    functors write them for their proofs, as a file writes its own. At most :data:`MAX_MODULE_TACTICS`
    argument-free ones and :data:`MAX_MODULE_ARG_TACTICS` taking one or two terms (round eleven: ``NBase.v``'s
    ``cases n`` and ``induct n`` begin NOrder.v's proofs), none named ``Private_...``; an argument-free one whose
    sentence is in ``skip`` (the search's closers: ``order.``) takes no slot."""
    found = getattr(states, "module_tactic_signatures", None)
    if not INCLUDED or found is None or not modules:
        return ()
    inner = modules[-1]
    parameters = inner.parameters if PARAMETER_TACTICS else ()
    if not inner.includes and not parameters:
        return ()
    named = [(n, k) for n, k in found(inner.name, parameters=parameters) if "Private" not in n]
    plain = [(n, 0) for n, k in named if k == 0 and f"{n}." not in skip][:MAX_MODULE_TACTICS]
    taking = [(n, k) for n, k in named if k > 0][:MAX_MODULE_ARG_TACTICS] if MODULE_ARG_TACTICS else []
    return (*plain, *taking)
