"""Every seed a run derives from its own, in one table.

A run has one seed (``run.json``'s ``seed``: the task's, or ``--seed``). Everything random in the
run draws from a seed derived here, so a run is reproducible from its log and no two draws of one
run share a seed by accident. The derivations are part of the log's meaning (each ``trial.proposed``
records the seed its trial ran with, and tests compare whole runs), so they never change:

=====================  ====================================  =========================================
what                   seed                                  why this form
=====================  ====================================  =========================================
baseline repeat ``i``  ``seed*7919 + i``                     ``i`` < ``noise.baseline_repeats`` (small)
agent trial            ``seed*7919 + 1000 + position``       ``position``: trials already in the log
                                                             (baseline and repeats included) when
                                                             this one is proposed
confirmation repeat    ``seed*7919 + 3_000_000``             fresh: never a seed the original had;
                       ``+ 1009*index + i``                  ``index``: the original's position in
                                                             the log, ``i``: the repeat (0-based)
agent construction     ``seed*1000 + 100*index + copy``      ``index``: the agent in ``agents:``,
                                                             ``copy``: of ``loop.agents_parallel``
resume                 ``seed + 104729*(resumes + 1)``       the seed the agents of a resumed run are
                                                             built from (fresh agent randomness);
                                                             trials keep the run's own seed
=====================  ====================================  =========================================

Within one run the families never meet while there are fewer than 1000 baseline repeats and fewer than
2,999,000 trials in the log (7919, 1009 and 104729 are primes: the 1000th, 169th and 10000th).
"""

from __future__ import annotations

TRIAL_STRIDE = 7919  # the run seed's stride for every trial seed (baseline, agent trials, confirmations)
AGENT_TRIAL_OFFSET = 1000  # agent trials start here above seed*7919 (baseline repeats stay below)
CONFIRMATION_OFFSET = 3_000_000  # confirmation repeats start here above seed*7919
CONFIRMATION_STRIDE = 1009  # per position of the confirmed trial in the log
RESUME_STRIDE = 104729  # per resume of the run, for the agents' seed


def baseline_seed(run_seed: int, repeat: int) -> int:
    """The seed of baseline repeat ``repeat`` (``base-<repeat>``)."""
    return run_seed * TRIAL_STRIDE + repeat


def trial_seed(run_seed: int, position: int) -> int:
    """The seed of an agent's trial proposed when ``position`` trials are already in the log."""
    return run_seed * TRIAL_STRIDE + AGENT_TRIAL_OFFSET + position


def confirmation_seed(run_seed: int, index: int, repeat: int) -> int:
    """The seed of confirmation repeat ``repeat`` (0-based) of the trial at ``index`` in the log."""
    return run_seed * TRIAL_STRIDE + CONFIRMATION_OFFSET + CONFIRMATION_STRIDE * index + repeat


def agent_seed(seed: int, index: int, copy: int) -> int:
    """The seed agent ``index`` of the task (its ``copy`` of ``loop.agents_parallel``) is built with."""
    return seed * 1000 + index * 100 + copy


def resume_seed(run_seed: int, resumes: int) -> int:
    """The seed the agents of a run resumed ``resumes`` times before are built from."""
    return run_seed + RESUME_STRIDE * (resumes + 1)
