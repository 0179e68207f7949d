"""An example RRMA plug-in: :class:`~rrma_example_plugin.oracle.IdeaCountOracle` (entry point
``example-count`` in ``rrma.oracles``) and :class:`~rrma_example_plugin.agent.IdeaAppendAgent`
(``example-append`` in ``rrma.agents``). It imports only :mod:`rrma.contracts` and the core's
helpers, as any plug-in package does."""

NOTES = "notes.txt"  # the workspace file the agent edits and the oracle reads
SCORED_BY = "rrma_example_plugin"  # the oracle stamps this into every outcome's metrics
