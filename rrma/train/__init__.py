"""Training data and rewards from the run log (docs/training.md): pure code, no model library."""
