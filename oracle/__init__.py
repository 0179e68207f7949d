"""Oracles: one module per oracle, each behind the :class:`rrma.contracts.Oracle` contract.

The core finds them by name through :mod:`rrma.plugins` (its built-in table names the classes
here as ``module:Class`` strings, imported only when a task uses them), so that a bench never
pays for another bench's dependencies. An oracle that lives in another package is added with an
``rrma.oracles`` entry point (docs/plugins.md).
"""
