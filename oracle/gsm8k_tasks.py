"""The GSM8K oracles: ``gsm8k-eval``, ``gsm8k-recipe`` and ``gsm8k-prompt``, and what keeps their score honest.

Why it exists: three ways of improving GSM8K accuracy (score a model or a completions file,
improve a training recipe, improve a system prompt) share one scorer, :func:`oracle.gsm8k_scoring.grade_pairs`,
built on the versioned policy of :mod:`oracle.gsm8k` and the statistics of :mod:`rrma.stats`.

Each is its own module: :mod:`oracle.gsm8k_eval`, :mod:`oracle.gsm8k_recipe`,
:mod:`oracle.gsm8k_prompt`; the scorer is :mod:`oracle.gsm8k_scoring`, the steps they share outside
the agent's reach (params, the generation child, reading what a trial wrote) :mod:`oracle.gsm8k_harness`.
This module names the three oracle classes where the plug-in registry (rrma/plugins.py) finds them
(``oracle.gsm8k_tasks:Gsm8kEvalOracle`` ...), and keeps the family's invariants in one place.

Invariants (what keeps the score honest):

* The oracle owns the questions, the gold answers, the prompt around the agent's part, the
  decoding settings and the verifier. An agent edits only its surface (``recipe.py`` or
  ``system_prompt.txt``); nothing it edits is imported or read by the scoring code.
* ``gsm8k-recipe`` gives the recipe only the ``train-pool`` split (train minus dev, minus any
  held-out question: :func:`oracle.gsm8k_data.assert_disjoint` is checked), read-only. The recipe
  runs in its own process group under the trial budget; the oracle then evaluates the model
  directory it wrote in a *separate* child process with the oracle's own generation code, on
  held-out questions written to the oracle's own directory (``ctx.oracle_dir``).
* Held out means unreadable: every oracle's ``held_out()`` names every place GSM8K split files
  and download caches live (:func:`oracle.gsm8k_data.held_out_paths`); the executor hides them
  from trial programs and the loop from coding agents.
* What an agent's program wrote is data, read without following links. The harness never writes
  into a trial's directory (a planted ``oracle_eval.json -> ../../../events.jsonl`` would turn
  the write into one on the run log): what the oracle writes goes to ``ctx.oracle_dir`` (or, for
  a caller without one, a private temporary directory) through :mod:`rrma.contain.files`; what it
  reads there (completions, system prompt, the model directory) is refused when it is or goes
  through a symbolic link. The trained model is loaded by the scorer child under
  ``Policy.for_scorer`` (model read-only, only its own scratch writable, no network) and only as
  safetensors with built-in code (:func:`oracle.gsm8k_gen.check_model_dir`).
* Scores are pass@1 on a fixed, index-determined subset; metrics carry the standard error,
  the strict-final-line and trailing-text rates and the failure taxonomy, plus what the loop's
  promotion rule reads (rrma/run/promotion.py): ``score_se`` and the per-question ``item_scores``
  with their ``items_key``, so that a gain is promoted only when a paired test (McNemar on the
  questions) says it is real, even with one baseline repeat.
"""

from __future__ import annotations

from oracle.gsm8k_eval import Gsm8kEvalOracle
from oracle.gsm8k_prompt import Gsm8kPromptOracle
from oracle.gsm8k_recipe import Gsm8kRecipeOracle

__all__ = ["Gsm8kEvalOracle", "Gsm8kPromptOracle", "Gsm8kRecipeOracle"]
