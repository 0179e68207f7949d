"""What the LLM backends share: the tool-use loop and its parts, one module per job.

An LLM agent runs a bounded tool-use conversation per proposal: the model reads files, makes
search/replace or whole-file edits into a *pending-edit buffer* (never the disk: the buffer
becomes the proposal's :class:`~rrma.trial.FileEdit` list), runs free pre-checks, reads and
posts to the blackboard, and ends by calling ``submit_trial``. The provider modules
(:mod:`agents.anthropic_agent`, :mod:`agents.openai_agent`) only translate that conversation to
their wire format; :class:`agents.llm.agent.LLMAgent` owns the loop so both behave the same.

* :mod:`agents.llm.agent`: the loop (:class:`~agents.llm.agent.LLMAgent`), its retries and trace;
* :mod:`agents.llm.tools`: the tools the model calls and the pending-edit buffer they act on;
* :mod:`agents.llm.prompts`: the instructions and the per-proposal context the model reads;
* :mod:`agents.llm.costs`: list prices, token usage and the per-agent caps;
* :mod:`agents.llm.retries`: which failures are retried, and how long to wait;
* :mod:`agents.llm.redaction`: the scrubbing of keys out of every string that leaves the agent.
* :mod:`agents.llm.settings`: the params each backend declares (checked when the task is loaded).

Invariants:

* Every model call, tool call and tool result is one ``agent.turn`` (through
  ``Context.record_turn``), with tokens, cache reads, latency and cost on model calls, so the
  run log is a complete trace of the conversation.
* Nothing that reaches a turn, a blackboard post or an exception message can contain an API
  key: every string goes through :class:`~agents.llm.redaction.Redactor` first, and provider
  errors are re-raised as :class:`~rrma.contracts.AgentError` built from scrubbed text (``from
  None``: no chained request).
* Per-agent caps (``max_run_tokens``, ``budget_usd``) are hard: once reached, no further model
  call is made in this run and ``propose`` returns ``None``.
"""
